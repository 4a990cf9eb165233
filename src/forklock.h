/*
 * forklock.h -- leaf locks that a forked child finds usable (forklock.c).
 * Pure C.
 *
 * fork() copies one thread, the caller; a lock another thread held at that
 * moment stays held in the child for ever, and the child's first use of it
 * hangs.  A forklock is held by the forking thread over the fork, so that
 * the data it guards is whole in the child, and let go in both processes
 * after it.
 *
 * Only for leaf locks: while one is held, no other lock is taken (no other
 * forklock, no lock of fork.c's handlers), so that taking them all before
 * a fork cannot wait in a ring.  They are taken after the handlers that
 * pygpu_fork_register registers have taken theirs (pygpu_fork_init installs
 * this file's handler first, and pthread_atfork runs the first-installed
 * preparation last), and are let go before those handlers run after it.
 * A lock that calls out while held (into the runtime, say) belongs to a
 * fork.c handler instead.
 */
#ifndef PYGPU_FORKLOCK_H
#define PYGPU_FORKLOCK_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    pthread_mutex_t mu;
    atomic_int known;           /* 1 once in the table of locks held over a fork, -1 if it had no room */
} pygpu_forklock;

#define PYGPU_FORKLOCK_INIT {PTHREAD_MUTEX_INITIALIZER, 0}

/* Install the fork handler of every forklock, once per process (before
 * fork.c's own, which pygpu_fork_init makes sure of; a lock's first use
 * installs it too). */
void pygpu_forklock_install(void);
/* Take and let go of lock `l`.  Its first taking enters it in the table. */
void pygpu_forklock_lock(pygpu_forklock *l);
void pygpu_forklock_unlock(pygpu_forklock *l);

#endif /* PYGPU_FORKLOCK_H */
