/*
 * device_routes.h -- the copy planner's ladder for copies on one device
 * (device_routes.c): the routes, the one rule that chooses among them with
 * its reason, and the copies that never leave the device (a plan's, and
 * the device passes that gather or scatter a view for the routes above).
 * Pure C with runtime statuses; the GIL is released.
 */
#ifndef PYGPU_COPY_DEVICE_ROUTES_H
#define PYGPU_COPY_DEVICE_ROUTES_H

#include "toolbox.h"

/* The ways a copy between two layouts on one device can go. */
enum device_route {
    DEVICE_ROUTE_RUNTIME,       /* the runtime's copies (cp_runtime_copies) */
    DEVICE_ROUTE_KERNEL,        /* PyGPU's kernels (devcopy.c) */
    DEVICE_ROUTE_HOST,          /* through the host: too many runtime calls, no kernels */
};

/* The way for a simplified pair of geometry `g` on one device: the one
 * place that decides; *why says why. */
enum device_route cp_device_route(ctx *c, const geometry *g, const char **why);
/* With PYGPU_STAGING_TRACE=1, the route a copy on one device of `nbytes`
 * takes, and why. */
void cp_device_trace(enum device_route way, const char *why, size_t nbytes);
/* Copy simplified pair `p` on the current device, from src (layout 1) to
 * dst (layout 0), by the runtime's copies or the kernels: never through
 * the host (the callers that can take that way ask cp_device_route
 * first). */
pygpu_status cp_on_device(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize);
/* Between device layout `which` of `p` (at `view`) and a dense device
 * buffer (at `dense`), in the direction `to_dense`: on the device. */
pygpu_status cp_device_pass(ctx *c, const pygpu_pair *p, int which, char *view, char *dense, ptrdiff_t itemsize,
                            int to_dense);

#endif
