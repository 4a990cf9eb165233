/*
 * events.c -- events kept for reuse, per device; see events.h.
 */
#include "events.h"
#include "../fork.h"

#include <pthread.h>

#define EVENT_DEVICES 64        /* devices served (more: made and destroyed each time) */
#define EVENTS_KEPT 16          /* per device: more than the threads that copy at once, as a rule */

static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;
static pygpu_event_t kept[EVENT_DEVICES][EVENTS_KEPT];
static int n_kept[EVENT_DEVICES];

pygpu_status pygpu_event_take(int dev, pygpu_event_t *e)
{
    *e = NULL;
    if (dev >= 0 && dev < EVENT_DEVICES) {
        pthread_mutex_lock(&events_mu);
        if (n_kept[dev] > 0)
            *e = kept[dev][--n_kept[dev]];
        pthread_mutex_unlock(&events_mu);
    }
    return *e ? 0 : pygpu_rt_event_create(e, PYGPU_EVENT_DISABLE_TIMING);
}

void pygpu_event_give(int dev, pygpu_event_t e)
{
    int keep = 0;
    if (!e)
        return;
    if (dev >= 0 && dev < EVENT_DEVICES) {
        pthread_mutex_lock(&events_mu);
        if ((keep = n_kept[dev] < EVENTS_KEPT) != 0)
            kept[dev][n_kept[dev]++] = e;
        pthread_mutex_unlock(&events_mu);
    }
    if (!keep)
        (void)pygpu_rt_event_destroy(e);
}

int pygpu_events_kept(int dev)
{
    if (dev < 0 || dev >= EVENT_DEVICES)
        return 0;
    pthread_mutex_lock(&events_mu);
    int n = n_kept[dev];
    pthread_mutex_unlock(&events_mu);
    return n;
}

void pygpu_events_release(void)
{
    pthread_mutex_lock(&events_mu);
    for (int d = 0; d < EVENT_DEVICES; d++)
        while (n_kept[d] > 0)
            (void)pygpu_rt_event_destroy(kept[d][--n_kept[d]]);
    pthread_mutex_unlock(&events_mu);
}

/* The child of a fork keeps none: the parent's events are not its own. */
static void events_fork(enum pygpu_fork_phase phase)
{
    if (phase == PYGPU_FORK_CHILD)
        for (int d = 0; d < EVENT_DEVICES; d++)
            n_kept[d] = 0;
    pygpu_fork_hold(phase, &events_mu);
}

void pygpu_events_init(void)
{
    pygpu_fork_register(events_fork);
}
