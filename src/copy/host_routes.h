/*
 * host_routes.h -- the copy planner's copies between host and device, each
 * by the route its ladder chooses (host_routes.c).  Pure C with runtime
 * statuses; the GIL is released (and taken back for a moment between
 * chunks of a staged copy, to run signal handlers).
 */
#ifndef PYGPU_COPY_HOST_ROUTES_H
#define PYGPU_COPY_HOST_ROUTES_H

#include "toolbox.h"

/* Layout 1 of simplified pair `p` at src to layout 0 at dst; `g` is
 * cp_geometry_of(p): host to device, and device to host. */
pygpu_status cp_h2d(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src, ptrdiff_t itemsize);
pygpu_status cp_d2h(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src, ptrdiff_t itemsize);

#endif
