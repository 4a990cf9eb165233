/*
 * fork.c -- the device runtime across fork(); see fork.h.
 *
 * The flag is set by a pthread_atfork child handler and read with one
 * relaxed atomic load at the doors to the runtime (pygpu_fork_check in
 * errors.c), so the check costs nothing in a process that never forks.
 * The handlers registered here keep the locks of the pinned pool and of the
 * transfer machinery consistent over the fork, so that a child of the host
 * backend (which survives fork) finds them usable; the leaf locks below
 * them (forklock.h) are held over it after these.
 */
#define _POSIX_C_SOURCE 200809L
#include "fork.h"
#include "backend/rt.h"
#include "env.h"
#include "forklock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static atomic_int used;             /* this process has called the runtime */
static atomic_int broken;           /* forked after the parent used a runtime that does not survive it */
static int survives_fork;           /* the backend works in a forked child */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define MAX_HANDLERS 16
static pygpu_fork_fn handlers[MAX_HANDLERS];
static int nhandlers;

void pygpu_fork_register(pygpu_fork_fn fn)
{
    for (int i = 0; i < nhandlers; i++)
        if (handlers[i] == fn)
            return;
    if (nhandlers < MAX_HANDLERS)
        handlers[nhandlers++] = fn;
}

void pygpu_fork_hold(enum pygpu_fork_phase phase, pthread_mutex_t *mu)
{
    if (phase == PYGPU_FORK_PREPARE)
        pthread_mutex_lock(mu);
    else
        pthread_mutex_unlock(mu);
}

void pygpu_fork_hold_calling(enum pygpu_fork_phase phase, pthread_mutex_t *mu)
{
    if (survives_fork)
        pygpu_fork_hold(phase, mu);
    else if (phase == PYGPU_FORK_CHILD)
        pthread_mutex_init(mu, NULL);
}

static void prepare(void)
{
    for (int i = 0; i < nhandlers; i++)
        handlers[i](PYGPU_FORK_PREPARE);
}

static void parent(void)
{
    for (int i = nhandlers - 1; i >= 0; i--)
        handlers[i](PYGPU_FORK_PARENT);
}

static void child(void)
{
    for (int i = nhandlers - 1; i >= 0; i--)
        handlers[i](PYGPU_FORK_CHILD);
    if (atomic_load(&used) && !survives_fork)
        atomic_store(&broken, 1);
}

static void install(void)
{
    survives_fork = !strcmp(pygpu_rt_vendor(), "host") && !pygpu_env_get()->host_fork_rule_gpu;
    pygpu_forklock_install();       /* (first: its locks are taken after the handlers', let go before) */
    pthread_atfork(prepare, parent, child);
}

void pygpu_fork_init(void) { pthread_once(&once, install); }

void pygpu_fork_note_use(void)
{
    if (!atomic_load_explicit(&used, memory_order_relaxed))
        atomic_store_explicit(&used, 1, memory_order_relaxed);
}

int pygpu_fork_broken(void) { return atomic_load_explicit(&broken, memory_order_relaxed); }

#define RESET_DEVICES 64            /* devices counted (more: their objects are never refused) */
static atomic_uint resets[RESET_DEVICES], resets_all;

unsigned pygpu_reset_count(int dev)
{
    return dev >= 0 && dev < RESET_DEVICES ? atomic_load_explicit(&resets[dev], memory_order_relaxed) : 0;
}

int pygpu_reset_since(int dev, unsigned made) { return pygpu_reset_count(dev) != made; }

unsigned pygpu_reset_total(void) { return atomic_load_explicit(&resets_all, memory_order_relaxed); }

void pygpu_reset_note(int dev)
{
    if (dev >= 0 && dev < RESET_DEVICES && (strcmp(pygpu_rt_vendor(), "host") || pygpu_env_get()->host_reset_rule_gpu)) {
        atomic_fetch_add(&resets[dev], 1);
        atomic_fetch_add(&resets_all, 1);
    }
}
