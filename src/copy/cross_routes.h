/*
 * cross_routes.h -- the copy planner's copies between two devices
 * (cross_routes.c).  Pure C with runtime statuses; the GIL is released.
 */
#ifndef PYGPU_COPY_CROSS_ROUTES_H
#define PYGPU_COPY_CROSS_ROUTES_H

#include "toolbox.h"

/* Copy the elements of `src` (on device src.device) to `dst` (on
 * dst.device, current, stream c->s): layouts of one shape, any strides.
 * Done when it returns, with dst.device current. */
pygpu_status cp_cross_device(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize);
/* The same into `dst`, dense fresh memory of dst.device allocated on c->s,
 * a stream of src.device (current), which reaches dst.device peer to
 * peer: on c->s, no event between the devices.  Done when it returns. */
pygpu_status cp_cross_fresh(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                            ptrdiff_t itemsize);

#endif
