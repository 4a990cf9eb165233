/*
 * registered.h -- ordinary host memory page-locked in place while its
 * owner lives (registered.c): the buffers of NumPy arrays that transfers
 * meet again, registered with the runtime so that later copies DMA from
 * (into) them directly, without the staging pass through host memory.
 * Called with the GIL held.
 */
#ifndef PYGPU_REGISTERED_H
#define PYGPU_REGISTERED_H

#include "pygpu.h"

/* A handle (> 0) if the `n` bytes at `p`, in the memory of NumPy array `arr` (any
 * object: only arrays whose base owns its data take part), are page-locked
 * in place now: their owner's buffer registered earlier, or just now
 * because transfers of at least PYGPU_REGISTER_MIN bytes met it again and
 * moved PYGPU_REGISTER_MOVED bytes through it in all (within
 * transfer_config's register_limit, the least recently used let go to
 * make room).  0 if not, for whatever reason (registration off,
 * too small, a buffer that moved, a registration the runtime refused):
 * never an error; the copy then goes its usual way. */
int pygpu_registered_prepare(PyObject *arr, const void *p, size_t n);
/* A handle (> 0) on the registration that the `n` bytes at `p` touch (any
 * copy's, whatever its size or owner), held until pygpu_registered_done;
 * 0 if they touch none. */
int pygpu_registered_hold(const void *p, size_t n);
/* The pages that handle (> 0) keeps page-locked: the whole pages inside its
 * owner's buffer (the partial ones at either end stay pageable). */
void pygpu_registered_range(int handle, const char **start, size_t *len);
/* An asynchronous copy of registration `handle`'s pages was queued on
 * stream `s` of `device` (the current device; a stream not being
 * captured): an event recorded after it there, and before the pages are
 * let go that event is waited for (the stream waited for now if no event
 * can be had).  Called before pygpu_registered_done. */
void pygpu_registered_queued(int handle, int device, pygpu_stream_t s);
/* Wait for every asynchronous copy of registered pages queued so far and
 * give their events back (before a device reset, which destroys them). */
void pygpu_registered_wait_all(void);
/* Every registration no copy is using unregistered, its slot let go at
 * its next meeting (before a fork, whose child must have whole pages, and
 * a device reset, which drops the runtime's registrations); after
 * pygpu_registered_wait_all where copies may be queued.  Touches no
 * Python object. */
void pygpu_registered_unpin_all(void);
/* What pygpu_registered_prepare returned, once the copy is over: a
 * registration that a copy uses is let go only after it. */
void pygpu_registered_done(int handle);

/* Registers the fork handler that unregisters everything before a fork
 * (module init calls it). */
void pygpu_registered_init(void);

/* Let registrations go, least recently used first, down to `keep` bytes
 * (transfer_config(register_limit=) lowered; 0: all that no copy uses). */
void pygpu_registered_trim(size_t keep);

/* registered_stats(): {'buffers', 'bytes', 'limit', 'registered',
 * 'released', 'refused'}; new reference. */
PyObject *pygpu_registered_stats(void);

#endif /* PYGPU_REGISTERED_H */
