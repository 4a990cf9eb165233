/*
 * kernels_host.c -- PyGPU's own kernels on the host backend: the same
 * argument blocks (src/kernels/kernels.h), run at once on the calling
 * thread, as every host-backend operation is (its streams run in order).
 *
 * Copies move whole rows; casts walk the elements with the device kernels'
 * own index arithmetic (pk_offsets, division by multiply-high) and their
 * own conversions (pk_convert), so that the test suite checks both against
 * NumPy on machines without a GPU.
 */
#include "rt.h"
#include "kernels/kernels.h"
#include "env.h"
#include "shape.h"

#define H_INVALID_VALUE 1       /* (rt_host.c's numbering: the CUDA runtime's) */
#define H_NOT_SUPPORTED 801

/* PYGPU_KERNELS=0 switches them off (the planner's other ways then run:
 * the tests of those use it). */
static int switched_off(void) { return pygpu_env_get()->kernels_off; }

pygpu_status pygpu_rt_kernels_ready(void) { return switched_off() ? H_NOT_SUPPORTED : 0; }

const char *pygpu_rt_kernels_origin(void)
{
    return switched_off() ? "switched off by PYGPU_KERNELS=0" : "run on the host (the host backend)";
}

typedef void row_fn(char *dst, const char *src, const pygpu_kargs *a, int variant);

/* Walk the rows of launch `a` (its last axis), calling row() for each. */
static void each_row(const pygpu_kargs *a, row_fn *row, int variant)
{
    pk_i64 len = a->shape[a->nd - 1], rows = a->n / (len ? len : 1);
    for (pk_i64 r = 0; r < rows; r++) {
        pk_i64 od, os;
        pk_offsets(a, (pk_u32)(r * len), &od, &os);
        row((char *)(uintptr_t)a->dst + od, (const char *)(uintptr_t)a->src + os, a, variant);
    }
}

static void cast_row(char *d, const char *s, const pygpu_kargs *a, int stype)
{
    pk_i64 ds = a->dstride[a->nd - 1], ss = a->sstride[a->nd - 1];
    for (pk_i64 i = 0; i < a->shape[a->nd - 1]; i++, d += ds, s += ss)
        pk_convert(a->dtype, d, stype, s);
}

static void fill_row(char *d, const char *s, const pygpu_kargs *a, int esize)
{
    pk_i64 ds = a->dstride[a->nd - 1];
    (void)s;
    for (pk_i64 i = 0; i < a->shape[a->nd - 1]; i++, d += ds)
        memcpy(d, a->value, (size_t)esize);
}

pygpu_status pygpu_rt_launch(enum pygpu_kernel k, int variant, const pygpu_kargs *a, pygpu_stream_t s)
{
    ptrdiff_t shape[PK_MAXDIMS], ds[PK_MAXDIMS], ss[PK_MAXDIMS];
    (void)s;
    if (a->nd < 1 || a->nd > PK_MAXDIMS || a->n < 0 || (k == PYGPU_KERNEL_CAST && (variant < 0 || variant >= PK_NTYPES ||
                                                                                  a->dtype < 0 || a->dtype >= PK_NTYPES)))
        return H_INVALID_VALUE;
    for (int i = 0; i < a->nd; i++) {
        shape[i] = (ptrdiff_t)a->shape[i];
        ds[i] = (ptrdiff_t)a->dstride[i];
        ss[i] = (ptrdiff_t)a->sstride[i];
    }
    switch (k) {
    case PYGPU_KERNEL_COPY:
    case PYGPU_KERNEL_TRANSPOSE:
        pygpu_host_strided_copy((char *)(uintptr_t)a->dst, ds, (const char *)(uintptr_t)a->src, ss, a->nd, shape,
                                variant);
        return 0;
    case PYGPU_KERNEL_FILL:
        each_row(a, fill_row, variant);
        return 0;
    case PYGPU_KERNEL_CAST:
        each_row(a, cast_row, variant);
        return 0;
    }
    return H_INVALID_VALUE;
}
