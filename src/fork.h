/*
 * fork.h -- the device runtime across fork() and device resets (fork.c).
 * Pure C.
 *
 * CUDA and HIP do not survive fork(): the child of a process that has used
 * the device cannot use it.  The child is told so by a GPUError at the
 * first call that would reach the device, rather than left to hang or
 * crash in the runtime, and what it inherited from the parent (memory,
 * streams, events: the parent's) is left alone when it dies.
 */
#ifndef PYGPU_FORK_H
#define PYGPU_FORK_H

#include <pthread.h>

/* Install the fork handlers, once per process (module init calls it). */
void pygpu_fork_init(void);
/* Note that this process has used the device runtime. */
void pygpu_fork_note_use(void);
/* 1 in a child forked after its parent had used the runtime of a backend
 * that does not survive fork (CUDA and HIP; the host backend too when
 * PYGPU_HOST_FORK_RULE=gpu, so that the rule can be tested without a GPU):
 * the runtime must not be called, nor anything inherited freed through it. */
int pygpu_fork_broken(void);

/* What the other process-wide state does around fork (the pinned pool,
 * the transfer settings, workers and staging pipelines): each part registers
 * a handler, which holds its locks over the fork and starts the child with
 * nothing in flight.  Handlers run in the order registered before the
 * fork, in the reverse order after it (as pthread_atfork's do). */
enum pygpu_fork_phase { PYGPU_FORK_PREPARE, PYGPU_FORK_PARENT, PYGPU_FORK_CHILD };
typedef void (*pygpu_fork_fn)(enum pygpu_fork_phase phase);
/* Register `fn` (once; at most 16 in all; module init registers them). */
void pygpu_fork_register(pygpu_fork_fn fn);
/* A handler's part for a lock held over the fork: taken before it, let go
 * after it in both processes (in the child by its one thread, the one that
 * took it). */
void pygpu_fork_hold(enum pygpu_fork_phase phase, pthread_mutex_t *mu);
/* The same for a lock under which the device runtime is called (which may
 * wait for the device, and so for PyGPU's host functions queued on its
 * streams): held over the fork where the backend survives it, as the host
 * backend's does; elsewhere made new in the child, which cannot call the
 * runtime anyway, so that the parent's fork never waits for the device. */
void pygpu_fork_hold_calling(enum pygpu_fork_phase phase, pthread_mutex_t *mu);

/* A device reset (cudaDeviceReset) destroys what was made on the device
 * before it: memory, streams, events.  Resets are counted per device where
 * the backend's reset destroys (the GPU backends; the host backend's under
 * PYGPU_HOST_RESET_RULE=gpu, so that the rule can be tested without a GPU,
 * where what it leaves alone is lost).  An object notes its device's count
 * when made; one made under an earlier count is left alone when it dies
 * (its handle is the runtime's no more: freeing it could crash) and
 * refused where it would be used. */
unsigned pygpu_reset_count(int dev);
/* 1 if device `dev` was reset since an object noted `made` of it. */
int pygpu_reset_since(int dev, unsigned made);
/* The resets of every device counted so far (host memory page-locked
 * before one is registered no more). */
unsigned pygpu_reset_total(void);
/* Count a reset of device `dev`. */
void pygpu_reset_note(int dev);

#endif /* PYGPU_FORK_H */
