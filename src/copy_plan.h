/*
 * copy_plan.h -- the copy planner's own parts, shared by its two files and
 * by nothing else: copy.c (the doors, copies on one device and between
 * devices, casts, fills) and copy_host.c (copies between host and device:
 * their routes).  Pure C with runtime statuses; the GIL is released.
 */
#ifndef PYGPU_COPY_PLAN_H
#define PYGPU_COPY_PLAN_H

#include "pygpu.h"
#include "transfer/pipeline.h"

#define MAX_DIRECT_CALLS 64     /* runtime calls worth issuing for one copy */

/* One copy's context. */
typedef struct {
    pygpu_stream_t s;
    const char *call;           /* the runtime call that failed */
    PyThreadState *ts;          /* the caller's, saved while the GIL is released */
    int stopped;                /* a signal (KeyboardInterrupt) stopped the copy */
    int async;                  /* device to page-locked host memory may be left queued */
    pygpu_queued_fn queued;     /* passed on to staged uploads (see scatter_up) */
    void *queued_arg;
    pygpu_status kernels;       /* why PyGPU's kernels could not run where wanted (0: they could) */
    PyObject *owner;            /* an async transfer's host memory owner (a reference), or NULL */
    int owner_taken;            /* a background transfer took that reference */
} ctx;

/* The failing call is named once, by the first failure. */
static inline pygpu_status note(ctx *c, pygpu_status r, const char *call)
{
    if (r != 0 && !c->call)
        c->call = call;
    return r;
}

/* How runtime copies would move a simplified pair (cp_geometry_of). */
typedef struct {
    ptrdiff_t width;            /* bytes per row */
    int hax;                    /* axis copied as the rows of a 2-D copy, or -1 */
    int nloop;                  /* axes [0, nloop) are looped over */
    ptrdiff_t calls;            /* runtime calls needed */
} geometry;

static inline ptrdiff_t pair_size(const pygpu_pair *p)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < p->nd; i++)
        n *= p->shape[i];
    return n;
}

/* Dense (C order) strides for the axes of `p`. */
static inline void dense_strides(const pygpu_pair *p, ptrdiff_t itemsize, ptrdiff_t *strides)
{
    ptrdiff_t s = itemsize;
    for (int i = p->nd - 1; i >= 0; i--) {
        strides[i] = s;
        s *= p->shape[i];
    }
}

typedef struct {                /* temporary buffers of one plan */
    void *host;
    int host_pinned;            /* from the pinned pool */
    void *dev;
    int dev_pooled;
} temps;

/* How cp_runtime_copies would copy simplified pair `p`. */
geometry cp_geometry_of(const pygpu_pair *p, ptrdiff_t itemsize);
/* Issue the copies of `p` from src (layout 1) to dst (layout 0). */
pygpu_status cp_runtime_copies(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                               enum pygpu_copy_kind kind);
/* 1 if PyGPU's kernels can run on the current device (else the reason is
 * kept in c->kernels). */
int cp_kernels_usable(ctx *c);
/* Between device layout `which` of `p` (at `view`) and a dense device
 * buffer (at `dense`), in the direction `to_dense`: on the device. */
pygpu_status cp_device_pass(ctx *c, const pygpu_pair *p, int which, char *view, char *dense, ptrdiff_t itemsize,
                            int to_dense);
/* Temporary buffers: a host one (page-locked from the pool when big enough
 * to matter), a device one (from the stream's pool), and their release
 * (after the stream is past them), which returns `r` or its own failure. */
pygpu_status cp_host_temp(ctx *c, temps *t, size_t n);
pygpu_status cp_dev_temp(ctx *c, temps *t, size_t n);
pygpu_status cp_temps_free(ctx *c, temps *t, pygpu_status r);

/* Copies between host and device (copy_host.c): layout 1 of simplified
 * pair `p` at src to layout 0 at dst; `g` is cp_geometry_of(p). */
pygpu_status cp_h2d(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src, ptrdiff_t itemsize);
pygpu_status cp_d2h(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src, ptrdiff_t itemsize);

#endif
