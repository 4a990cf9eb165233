/*
 * locked_host.h -- the host backend's table of page-locked ranges
 * (locked_host.c): what rt_host.c reads as page-locked memory, so that
 * the runtime's rules about it (a capture's, a copy's that runs past a
 * registration) hold on host memory as on a GPU.  Thread-safe.
 */
#ifndef PYGPU_BACKEND_LOCKED_HOST_H
#define PYGPU_BACKEND_LOCKED_HOST_H

#include <stddef.h>

/* Add the `n` bytes at `p`; 0, or -1 if the table is full. */
int pygpu_locked_add(const void *p, size_t n);
/* Remove the range that begins at `p`; 0, or -1 if there is none. */
int pygpu_locked_remove(const void *p);
/* The bytes from `p` to the end of the range it lies in (0: none). */
size_t pygpu_locked_left(const void *p);
/* The bytes of every range in the table. */
size_t pygpu_locked_bytes(void);

#endif /* PYGPU_BACKEND_LOCKED_HOST_H */
