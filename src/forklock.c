/*
 * forklock.c -- leaf locks that a forked child finds usable; see
 * forklock.h.
 *
 * The table is fixed: PyGPU has a handful of such locks (four, in the host
 * backend), each a static of one file.  A lock past the table's end still
 * locks, but is not held over a fork (its `known` is -1).
 */
#include "forklock.h"

#define FORKLOCKS_MAX 16
static pygpu_forklock *table[FORKLOCKS_MAX];
static int n_locks;
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Before a fork: the table's lock, then every lock in the order entered. */
static void prepare(void)
{
    pthread_mutex_lock(&table_mu);
    for (int i = 0; i < n_locks; i++)
        pthread_mutex_lock(&table[i]->mu);
}

/* After it, in both processes: let go in the reverse order (in the child
 * by its one thread, the one that took them). */
static void after(void)
{
    for (int i = n_locks - 1; i >= 0; i--)
        pthread_mutex_unlock(&table[i]->mu);
    pthread_mutex_unlock(&table_mu);
}

static void install(void) { pthread_atfork(prepare, after, after); }

void pygpu_forklock_install(void) { pthread_once(&once, install); }

/* Enter `l` in the table (once). */
static void enter(pygpu_forklock *l)
{
    pygpu_forklock_install();
    pthread_mutex_lock(&table_mu);
    if (!atomic_load(&l->known)) {
        int room = n_locks < FORKLOCKS_MAX;
        if (room)
            table[n_locks++] = l;
        atomic_store(&l->known, room ? 1 : -1);
    }
    pthread_mutex_unlock(&table_mu);
}

void pygpu_forklock_lock(pygpu_forklock *l)
{
    if (!atomic_load_explicit(&l->known, memory_order_acquire))
        enter(l);
    pthread_mutex_lock(&l->mu);
}

void pygpu_forklock_unlock(pygpu_forklock *l) { pthread_mutex_unlock(&l->mu); }
