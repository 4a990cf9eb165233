/*
 * plan.c -- the copy planner's plan: every copy of elements between two
 * layouts of one shape on one device or between host and device comes
 * here (copies between two devices go to cross_routes.c).
 *
 * The plan: simplify the pair of layouts (drop length-1 axes, order by the
 * device side's strides, reverse axes the device side runs backwards, merge
 * axes contiguous in both), then by direction:
 *   - host->host: the host's strided copy;
 *   - host<->device: the host route ladder (host_routes.c): one contiguous
 *     copy, or one 2-D copy, when the pair allows it; a few 2-D copies of
 *     wide rows straight between the two layouts; otherwise the device
 *     side moves as one block: for host->device the host gathers into a
 *     dense buffer, which goes up in one copy and is scattered on the
 *     device by 2-D copies; for device->host with narrow rows into
 *     page-locked memory, a gather on the device in pieces, each piece
 *     going down as soon as it is gathered (into pageable memory, and rows
 *     of 1-3 bytes: the bytes the view covers come down and the host
 *     gathers);
 *   - device->device: the device route ladder (device_routes.c): one
 *     runtime copy where the pair is dense (or one 2-D copy of wide rows),
 *     else PyGPU's own kernels (devcopy.c); without them, a few 2-D
 *     copies, or for layouts that would need many runtime calls, the host:
 *     two plans, through a dense host buffer (taken here).
 * Everything here runs with the GIL released and returns runtime statuses.
 */
#include "plan.h"
#include "device_routes.h"
#include "host_routes.h"
#include "toolbox.h"
#include "../shape.h"

pygpu_status cp_via_host(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                         ptrdiff_t itemsize)
{
    temps t = {0};
    ptrdiff_t strides[PYGPU_MAXDIMS], size;
    pygpu_status r;
    pygpu_shape_size(nd, shape, &size);
    pygpu_shape_strides(nd, shape, itemsize, 0, strides);
    if ((r = cp_host_temp(c, &t, (size_t)(size * itemsize))) != 0)
        return r;
    pygpu_side mid = {t.host, strides, 0, -1, NULL, NULL};
    if ((r = cp_plan(c, mid, src, nd, shape, itemsize)) == 0 &&
        (r = blame(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        r = cp_plan(c, dst, mid, nd, shape, itemsize);
    return cp_temps_free(c, &t, r);
}

pygpu_status cp_plan(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize)
{
    pygpu_pair p;
    c->waited = 0;              /* (what this plan queues is waited for by the caller, unless it says otherwise) */
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, !dst.on_device && src.on_device ? 1 : 0);
    if (p.nd < 0)
        return 0;
    char *d = dst.ptr + p.offset[0], *s = src.ptr + p.offset[1];
    geometry g = cp_geometry_of(&p, itemsize);
    if (!dst.on_device && !src.on_device) {
        pygpu_host_strided_copy(d, p.strides[0], s, p.strides[1], p.nd, p.shape, itemsize);
        return 0;
    }
    if (dst.on_device && src.on_device) {
        const char *why;
        enum device_route way = cp_device_route(c, &g, &why);
        cp_device_trace(way, why, (size_t)(pair_size(&p) * itemsize));
        if (way == DEVICE_ROUTE_HOST)
            return cp_via_host(c, dst, src, nd, shape, itemsize);
        return cp_on_device(c, &p, d, s, itemsize);
    }
    return dst.on_device ? cp_h2d(c, &p, &g, d, s, itemsize) : cp_d2h(c, &p, &g, d, s, itemsize);
}
