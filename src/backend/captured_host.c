/*
 * captured_host.c -- the host backend's table of the streams being
 * captured; see captured_host.h.
 */
#include "captured_host.h"
#include "forklock.h"

#include <stdatomic.h>

#define CAPTURED_MAX 16
static pygpu_stream_t captured[CAPTURED_MAX];
static int broken[CAPTURED_MAX];        /* its capture broken (a call refused under it) */
static int blocking_on[CAPTURED_MAX];   /* a blocking stream's device, else -1 */
static pygpu_forklock captured_lock = PYGPU_FORKLOCK_INIT;
/* Entries in `captured`: with none, as nearly always, a question about the
 * table (every plain copy asks one) is answered without the lock. */
static atomic_int n_captured;

/* Its index in `captured`, or -1 (the lock held). */
static int captured_at(pygpu_stream_t s)
{
    for (int i = 0; i < CAPTURED_MAX; i++)
        if (captured[i] == s && s)
            return i;
    return -1;
}

int pygpu_captured_add(pygpu_stream_t s, int blocking_dev)
{
    int i = -1;
    pygpu_forklock_lock(&captured_lock);
    if (s && captured_at(s) < 0)            /* (not twice; a free place in the table) */
        for (int k = 0; k < CAPTURED_MAX && i < 0; k++)
            if (!captured[k])
                i = k;
    if (i >= 0) {
        captured[i] = s, broken[i] = 0, blocking_on[i] = blocking_dev;
        atomic_fetch_add(&n_captured, 1);
    }
    pygpu_forklock_unlock(&captured_lock);
    return i < 0 ? -1 : 0;
}

int pygpu_captured_remove(pygpu_stream_t s)
{
    pygpu_forklock_lock(&captured_lock);
    int i = captured_at(s), was_broken = i >= 0 && broken[i];
    if (i >= 0) {
        captured[i] = NULL;
        atomic_fetch_sub(&n_captured, 1);
    }
    pygpu_forklock_unlock(&captured_lock);
    return i < 0 ? -1 : was_broken ? -2 : 0;
}

int pygpu_captured_break_all(void)
{
    int n = 0;
    if (!atomic_load(&n_captured))
        return 0;
    pygpu_forklock_lock(&captured_lock);
    for (int i = 0; i < CAPTURED_MAX; i++)
        if (captured[i])
            broken[i] = 1, n++;
    pygpu_forklock_unlock(&captured_lock);
    return n;
}

int pygpu_captured_has(pygpu_stream_t s)
{
    if (!atomic_load(&n_captured))
        return 0;
    pygpu_forklock_lock(&captured_lock);
    int i = captured_at(s);
    pygpu_forklock_unlock(&captured_lock);
    return i >= 0;
}

int pygpu_captured_blocking(int dev, int invalidate)
{
    int n = 0;
    if (!atomic_load(&n_captured))
        return 0;
    pygpu_forklock_lock(&captured_lock);
    for (int i = 0; i < CAPTURED_MAX; i++)
        if (captured[i] && blocking_on[i] == dev && dev >= 0) {
            n++;
            if (invalidate)
                broken[i] = 1;
        }
    pygpu_forklock_unlock(&captured_lock);
    return n;
}
