/*
 * locked_host.c -- the host backend's table of page-locked ranges; see
 * locked_host.h.
 */
#include "locked_host.h"
#include "forklock.h"

#include <pthread.h>
#include <stdatomic.h>

#define LOCKED_MAX 256
static struct { const char *p; size_t n; } locked[LOCKED_MAX];
static pygpu_forklock locked_lock = PYGPU_FORKLOCK_INIT;
static atomic_int locked_n;     /* entries in locked[] (0: nothing to look up) */

int pygpu_locked_add(const void *p, size_t n)
{
    int r = -1;
    pygpu_forklock_lock(&locked_lock);
    for (int i = 0; i < LOCKED_MAX && r < 0; i++)
        if (!locked[i].p) {
            locked[i].p = p;
            locked[i].n = n;
            atomic_fetch_add(&locked_n, 1);
            r = 0;
        }
    pygpu_forklock_unlock(&locked_lock);
    return r;
}

int pygpu_locked_remove(const void *p)
{
    int r = -1;
    pygpu_forklock_lock(&locked_lock);
    for (int i = 0; i < LOCKED_MAX; i++)
        if (locked[i].p && locked[i].p == p) {
            locked[i].p = NULL;
            atomic_fetch_sub(&locked_n, 1);
            r = 0;
        }
    pygpu_forklock_unlock(&locked_lock);
    return r;
}

size_t pygpu_locked_left(const void *p)
{
    size_t left = 0;
    if (!atomic_load(&locked_n))
        return 0;
    pygpu_forklock_lock(&locked_lock);
    for (int i = 0; i < LOCKED_MAX && !left; i++)
        if (locked[i].p && (const char *)p >= locked[i].p && (const char *)p < locked[i].p + locked[i].n)
            left = (size_t)(locked[i].p + locked[i].n - (const char *)p);
    pygpu_forklock_unlock(&locked_lock);
    return left;
}

size_t pygpu_locked_bytes(void)
{
    size_t n = 0;
    pygpu_forklock_lock(&locked_lock);
    for (int i = 0; i < LOCKED_MAX; i++)
        if (locked[i].p)
            n += locked[i].n;
    pygpu_forklock_unlock(&locked_lock);
    return n;
}
