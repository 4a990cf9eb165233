/*
 * errors.h -- the functions errors.c offers the files above it (errors.c:
 * runtime statuses to Python: the one helper that turns a status into a
 * GPUError, and cudaError_t, the original PyGPU's error object).
 */
#ifndef PYGPU_ERRORS_H
#define PYGPU_ERRORS_H

#include "pygpu.h"

/* Return 0 if `status` is success; else clear the runtime's last error, set
 * GPUError (GPUMemoryError when out of memory) naming `call` (the runtime
 * function without its vendor prefix: "MallocAsync"), and return -1. */
int pygpu_check(pygpu_state *st, pygpu_status status, const char *call);

/* What an allocation is for, named when it fails: an array's shape and
 * data type (borrowed). */
typedef struct {
    int nd;
    const ptrdiff_t *shape;
    PyArray_Descr *descr;
} pygpu_alloc_purpose;

/* pygpu_check for an allocation of `nbytes` on device `device` (the
 * current one), or of page-locked host memory (device -1), for `purpose`
 * (NULL: raw memory).  Out of memory raises GPUMemoryError saying what was
 * asked for as NumPy does, then where, with the device's free and total
 * memory where the runtime tells them, then the runtime's words:
 * "Unable to allocate 1.00 PiB for an array with shape (1125899906842624,)
 * and data type uint8 on device 0 (11.5 GiB free of 15.6 GiB): cudaMallocAsync:
 * cudaErrorMemoryAllocation (2): out of memory". */
int pygpu_check_alloc(pygpu_state *st, pygpu_status status, const char *call, size_t nbytes, int device,
                      const pygpu_alloc_purpose *purpose);

/* A query's answer (StreamQuery, EventQuery): True if done, False if not
 * ready yet, else NULL with GPUError naming `call`. */
PyObject *pygpu_query_result(pygpu_state *st, pygpu_status status, const char *call);

/* The door to the runtime for a forked child (fork.h): 0 if this process
 * may call the runtime (noting that it does), else -1 with GPUError saying
 * that the process forked after using the device. */
int pygpu_fork_check(pygpu_state *st);
/* 0 if an object (`what`: "stream", "event") made on device `dev` when its
 * resets were `made` is still the runtime's; else -1 with a GPUError: it
 * died with a reset of its device since (fork.h). */
int pygpu_reset_check(pygpu_state *st, int dev, unsigned made, const char *what);

/* A new cudaError_t object for `code`; new reference. */
PyObject *pygpu_error_object(pygpu_state *st, int code);
int pygpu_errors_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_ERRORS_H */
