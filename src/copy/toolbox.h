/*
 * toolbox.h -- the copy planner's tools (toolbox.c), the wing's lowest
 * floor but devcopy.c: a copy's context and the first call that failed,
 * the geometry and issue of runtime copies straight between two layouts,
 * temporary buffers, whether PyGPU's kernels run here, and the trace line
 * every route ladder prints.  Pure C with runtime statuses; the GIL is
 * released.
 */
#ifndef PYGPU_COPY_TOOLBOX_H
#define PYGPU_COPY_TOOLBOX_H

#include "../pygpu.h"
#include "../transfer/bus.h"
#include "../transfer/pipeline.h"
#include "../transfer/trace.h"

#include <stdio.h>

/* One copy's context. */
typedef struct {
    pygpu_stream_t s;
    int dev;                    /* the device the copy is with (its host side's staging blocks are for it), or -1 */
    const char *call;           /* the runtime call that failed */
    PyThreadState *ts;          /* the caller's, saved while the GIL is released */
    int stopped;                /* a signal (KeyboardInterrupt) stopped the copy */
    int async;                  /* device to page-locked host memory may be left queued */
    pygpu_queued_fn queued;     /* passed on to staged uploads (see scatter_up) */
    void *queued_arg;
    pygpu_status kernels;       /* why PyGPU's kernels could not run where wanted (0: they could) */
    PyObject *owner;            /* an async transfer's host memory owner (a reference), or NULL */
    int owner_taken;            /* a background transfer took that reference */
    int host_apart;             /* the host side runs past pages page-locked in place: no runtime call on it */
    int then_wait;              /* the caller waits for s once the plan returns (a synchronous copy) */
    int waited;                 /* the plan's last step waited for s itself: the caller need not */
    int may_launch;             /* a synchronous upload into memory of a known device, entered: a few bytes
                                   may go in a kernel's arguments (host_routes.c, launch_up) */
    int launched;               /* they did: nothing of the host's to wait for */
} ctx;

/* `r`, the status of runtime call `call`: a failure names its call once,
 * the first (c->call, for the exception). */
static inline pygpu_status blame(ctx *c, pygpu_status r, const char *call)
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

/* One dense copy of `n` bytes between host memory and the device (`kind`)
 * on c->s, by the copy engine, or by PyGPU's kernel beside another
 * thread's bulk copy (pygpu_bus_copy). */
static inline pygpu_status cp_bus(ctx *c, void *dst, const void *src, size_t n, enum pygpu_copy_kind kind)
{
    const char *call = NULL;
    pygpu_status r = pygpu_bus_copy(dst, src, n, kind, c->s, &call);
    return blame(c, r, call);
}

/* One dense copy of `n` bytes between host memory and the device (`kind`)
 * on c->s; waited for by the caller (not c->async), of page-locked host
 * memory and from PYGPU_DMA_PIECES_FROM bytes, it goes in pieces of PYGPU_DMA_PIECE bytes,
 * at most PYGPU_DMA_QUEUED of them queued at a time, on a non-blocking
 * stream of its own after what c->s holds, so that another transfer waits
 * for no piece, on the legacy stream or its own (where a smaller one goes
 * by kernel: transfer/bus.c), and returns once they are done; else returns
 * once the copy is queued. */
pygpu_status cp_dma(ctx *c, void *dst, const void *src, size_t n, enum pygpu_copy_kind kind);
/* How cp_runtime_copies would copy simplified pair `p`. */
geometry cp_geometry_of(const pygpu_pair *p, ptrdiff_t itemsize);
/* Issue the copies of `p` from src (layout 1) to dst (layout 0). */
pygpu_status cp_runtime_copies(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                               enum pygpu_copy_kind kind);
/* 1 if PyGPU's kernels can run on the current device (else the reason is
 * kept in c->kernels). */
int cp_kernels_usable(ctx *c);
/* Temporary buffers: a host one (page-locked from the pool when big enough
 * to matter), a device one (from the stream's pool), and their release
 * (after the stream is past them), which returns `r` or its own failure. */
pygpu_status cp_host_temp(ctx *c, temps *t, size_t n);
pygpu_status cp_dev_temp(ctx *c, temps *t, size_t n);
pygpu_status cp_temps_free(ctx *c, temps *t, pygpu_status r);

/* With PYGPU_STAGING_TRACE=1, the route a copy takes and why, one line on
 * stderr: `way` says which ladder chose ("up", "down", "device",
 * "across"), `route` is the route's name in that ladder's table. */
static inline void cp_trace_route(const char *way, size_t nbytes, const char *route, const char *why)
{
    if (pygpu_trace_is_on())
        fprintf(stderr, "pygpu route: %s %zu B: %s (%s)\n", way, nbytes, route, why);
}

#endif
