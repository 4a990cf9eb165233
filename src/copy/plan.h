/*
 * plan.h -- the copy planner's plan (plan.c): a pair of layouts simplified
 * and sent by direction to its route ladder.  Pure C with runtime
 * statuses; the GIL is released.
 */
#ifndef PYGPU_COPY_PLAN_H
#define PYGPU_COPY_PLAN_H

#include "toolbox.h"

/* Copy the elements of `src` to `dst` (layouts of one shape, any strides;
 * src's may be 0 where it is broadcast), host or device, on one device:
 * queued on c->s (copies down wait where they must). */
pygpu_status cp_plan(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize);

/* The same copy in two plans through a dense host buffer taken for it (the
 * stream waited for between them): for device layouts that would take too
 * many runtime calls, and for host layouts the runtime may not be handed
 * whole (copy.c: views that run past page-locked memory).  Synchronous. */
pygpu_status cp_via_host(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                         ptrdiff_t itemsize);

#endif
