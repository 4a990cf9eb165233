/*
 * dlpack_check.h -- the checks a DLPack tensor from another library
 * passes before PyGPU views it (dlpack_check.c: pure C, no Python).
 */
#ifndef PYGPU_DLPACK_CHECK_H
#define PYGPU_DLPACK_CHECK_H

#include <stddef.h>

#include "pygpu/pygpu_dlpack.h"
#include "shape.h"

/* What a checked tensor is, in GPUArray's terms. */
typedef struct {
    int nd;
    ptrdiff_t shape[PYGPU_MAXDIMS];
    ptrdiff_t strides[PYGPU_MAXDIMS];   /* bytes */
    char kind;                          /* 'b', 'i', 'u', 'f' or 'c' */
    int itemsize;
    char *data;                         /* data + byte_offset: element [0, ..., 0] */
} pygpu_dl_layout;

/* Check the dimensions, dtype, shape, strides and data pointer of `t` (not
 * its device: that is the backend's business) and fill *out.  Pure C, no
 * Python: 0, or -1 with a sentence saying what is wrong in why[0..n). */
int pygpu_dl_check(const DLTensor *t, pygpu_dl_layout *out, char *why, size_t n);

#endif /* PYGPU_DLPACK_CHECK_H */
