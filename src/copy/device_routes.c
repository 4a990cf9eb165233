/*
 * device_routes.c -- the copy planner's copies on one device: the route
 * ladder (one runtime copy where the pair is dense, else PyGPU's kernels;
 * without them, a few runtime copies, or for layouts that would need many
 * runtime calls, the host), each route with its reason, printed by
 * PYGPU_STAGING_TRACE=1; and the copies that stay on the device, the
 * device passes of the routes above included.  The route through the host
 * is two plans, taken by the plan (plan.c).
 */
#include "device_routes.h"
#include "devcopy.h"
#include "toolbox.h"
#include "../shape.h"
#include "../transfer/trace.h"
#include "../tuning.h"

/* ---- copies on one device: the rule ----------------------------------------- */

static const char *const device_route_names[] = {"runtime copies", "PyGPU's kernels", "through the host"};

/* How a simplified pair of geometry `g` moves between two layouts on one
 * device: the one place that decides.  One runtime copy where both sides
 * are dense; else the kernels, even where one 2-D runtime copy would do
 * (docs/performance.md#direct-copies); without them, the runtime's copies
 * where a few do it (PYGPU_DIRECT_CALLS_MAX), else the host. */
enum device_route cp_device_route(ctx *c, const geometry *g, const char **why)
{
    if (g->calls == 1 && g->hax < 0)
        return *why = "dense on both sides: one copy", DEVICE_ROUTE_RUNTIME;
    if (cp_kernels_usable(c))
        return *why = "they run here", DEVICE_ROUTE_KERNEL;
    if (g->calls <= PYGPU_DIRECT_CALLS_MAX)
        return *why = "no kernels here; a few runtime copies do it", DEVICE_ROUTE_RUNTIME;
    return *why = "no kernels here; too many runtime copies", DEVICE_ROUTE_HOST;
}

void cp_device_trace(enum device_route way, const char *why, size_t nbytes)
{
    cp_trace_route("device", nbytes, device_route_names[way], why);
}

/* Copy simplified pair `p` on the current device, from src (layout 1) to
 * dst (layout 0), by the runtime's copies or the kernels: never through
 * the host (the callers that can take that way ask cp_device_route first). */
pygpu_status cp_on_device(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize)
{
    const char *why;
    geometry g = cp_geometry_of(p, itemsize);
    if (cp_device_route(c, &g, &why) == DEVICE_ROUTE_KERNEL)
        return blame(c, pygpu_dev_copy(p, dst, src, itemsize, c->s), "LaunchKernel");
    return cp_runtime_copies(c, p, &g, dst, src, PYGPU_COPY_D2D);
}

/* ---- device passes ---------------------------------------------------------- */

/* Copy between device layout `which` of `p` (at `view`) and a dense device
 * buffer (at `dense`), in the direction `to_dense`. */
pygpu_status cp_device_pass(ctx *c, const pygpu_pair *p, int which, char *view, char *dense,
                                ptrdiff_t itemsize, int to_dense)
{
    ptrdiff_t ds[PYGPU_MAXDIMS];
    pygpu_pair q;
    dense_strides(p, itemsize, ds);
    if (to_dense)
        pygpu_pair_init(&q, p->nd, p->shape, ds, p->strides[which]);
    else
        pygpu_pair_init(&q, p->nd, p->shape, p->strides[which], ds);
    pygpu_pair_simplify(&q, 0);
    if (q.nd < 0)
        return 0;
    return cp_on_device(c, &q, (to_dense ? dense : view) + q.offset[0], (to_dense ? view : dense) + q.offset[1],
                        itemsize);
}
