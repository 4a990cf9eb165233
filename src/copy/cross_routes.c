/*
 * cross_routes.c -- the copy planner's copies between two devices: a
 * strided view into a dense destination on a device in reach in one pass
 * (the source device's copy writing over the link); otherwise each side
 * made dense on its own device (a gather or scatter there), and the dense
 * bytes across by the route ladder: peer to peer where the two reach each
 * other, else the pipeline through page-locked buffers (transfer/cross.c),
 * else, with no buffer to be had, the runtime's own staging; each route
 * with its reason, printed by PYGPU_STAGING_TRACE=1.
 */
#include "cross_routes.h"
#include "device_routes.h"
#include "toolbox.h"
#include "../peer.h"
#include "../shape.h"
#include "../transfer/cross.h"
#include "../transfer/events.h"
#include "../transfer/trace.h"
#include "../tuning.h"

/* ---- the route: how the dense bytes cross -------------------------------- */

/* The ways dense bytes can go from one device to another, in the order
 * they are tried; route_across chooses.  The staging pipeline declines
 * when the pinned pool has no buffer for it, and the next route goes. */
enum cross_route {
    CROSS_NONE,
    CROSS_PEER,             /* the devices reach each other: one peer copy */
    CROSS_STAGED,           /* through page-locked buffers, the two legs overlapping */
    CROSS_RUNTIME,          /* the runtime's peer copy, which stages it itself */
};

static const char *const cross_route_names[] = {"none", "peer to peer", "staged", "staged by the runtime"};

/* The way across from `sdev` to `ddev`, after `after` (CROSS_NONE: the
 * first choice); *why says why. */
static enum cross_route route_across(int ddev, int sdev, enum cross_route after, const char **why)
{
    if (after < CROSS_PEER && pygpu_peer_usable(ddev, sdev))
        return *why = "the devices reach each other", CROSS_PEER;
    if (after < CROSS_STAGED)
        return *why = "no peer access", CROSS_STAGED;
    return *why = "no page-locked buffer to be had (the pinned pool's limit)", CROSS_RUNTIME;
}

/* `n` dense bytes from `from` on `sdev` to `to` on `ddev` (current, and
 * current on return), on c->s. */
static pygpu_status across(ctx *c, char *to, int ddev, const char *from, int sdev, size_t n)
{
    const char *why;
    for (enum cross_route way = route_across(ddev, sdev, CROSS_NONE, &why);;
         way = route_across(ddev, sdev, way, &why)) {
        cp_trace_route("across", n, cross_route_names[way], why);
        switch (way) {
        case CROSS_PEER:
        case CROSS_RUNTIME:
            return blame(c, pygpu_rt_memcpy_peer_async(to, ddev, from, sdev, n, c->s), "MemcpyPeerAsync");
        case CROSS_STAGED: {
            pygpu_staging_ctx sc = {.stream = c->s};
            int staged = 0;
            pygpu_status r = pygpu_staged_cross(&sc, to, ddev, from, sdev, n, &staged);
            if (sc.call && !c->call)
                c->call = sc.call;
            if (r != 0 || staged)
                return r;
            break;                  /* (no buffer) */
        }
        default:
            return blame(c, PYGPU_RT_INVALID_VALUE, "route");
        }
    }
}

/* Make `dev` current, where *here (the current device) is not it: the two
 * sides take turns. */
static pygpu_status use(ctx *c, int dev, int *here)
{
    pygpu_status r = dev == *here ? 0 : blame(c, pygpu_rt_set_device(dev), "SetDevice");
    if (r == 0)
        *here = dev;
    return r;
}

/* ---- between devices -------------------------------------------------------- */

/* The copy's pair of layouts, simplified, with its first elements and its
 * bytes; 0 if it has no element. */
static int cross_pair(pygpu_pair *p, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                      ptrdiff_t itemsize, char **to, char **from, size_t *n)
{
    pygpu_pair_init(p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(p, 0);
    if (p->nd < 0)
        return 0;
    *n = (size_t)(pair_size(p) * itemsize);
    *to = dst.ptr + p->offset[0];
    *from = src.ptr + p->offset[1];
    return 1;
}

/* Copy `p` (dst layout 0 on `ddev`, current, stream c->s; src layout 1 on
 * `sdev`).  Done when it returns, with `ddev` current. */
pygpu_status cp_cross_device(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize)
{
    pygpu_pair p;
    char *to, *from;
    size_t n;
    if (!cross_pair(&p, dst, src, nd, shape, itemsize, &to, &from, &n))
        return 0;
    int ddev = dst.device, sdev = src.device, here = ddev;
    ctx sc = {.s = PYGPU_STREAM_NULL};     /* the source side's work: its legacy stream */
    temps stmp = {0}, dtmp = {0};
    pygpu_event_t ready = NULL;             /* (an event of the source device, kept for reuse) */
    pygpu_status r = 0;
    int dense_to = pygpu_pair_is_dense(&p, 0, itemsize), dense_from = pygpu_pair_is_dense(&p, 1, itemsize);
    const char *why;
    /* A strided view into a dense destination on a device in reach: PyGPU's
     * copy on the source device reads the view there and writes the
     * destination over the link, in one pass, with no temporary. */
    int direct = dense_to && !dense_from && route_across(ddev, sdev, CROSS_NONE, &why) == CROSS_PEER;
    if (direct) {
        pygpu_event_t first = NULL;         /* (the destination's stream's work first: its allocation, say) */
        cp_trace_route("across", n, "peer to peer, direct", "a strided view gathered on the source device "
                       "straight into the destination, over the link");
        r = blame(c, pygpu_event_take(ddev, &first), "EventCreateWithFlags");
        if (r == 0)
            r = blame(c, pygpu_rt_event_record(first, c->s), "EventRecord");
        if (r == 0 && (r = use(c, sdev, &here)) == 0 &&
            (r = blame(&sc, pygpu_rt_stream_wait_event(PYGPU_STREAM_NULL, first), "StreamWaitEvent")) == 0)
            r = cp_device_pass(&sc, &p, 1, from, to, itemsize, 1);
        pygpu_event_give(ddev, first);      /* (the wait queued on it keeps the record it waits for) */
        if (r != 0)
            goto done;
    }
    /* On the source device, after the work queued there: a dense copy of the
     * source if it is not dense (not done above), and an event the copy
     * (or the destination's stream, after the direct copy) waits for. */
    if (!direct && (r = use(c, sdev, &here)) == 0 && !dense_from &&
        (r = cp_dev_temp(&sc, &stmp, n)) == 0 && (r = cp_device_pass(&sc, &p, 1, from, stmp.dev, itemsize, 1)) == 0)
        from = stmp.dev;
    if (r == 0 && (r = blame(&sc, pygpu_event_take(sdev, &ready), "EventCreateWithFlags")) == 0)
        r = blame(&sc, pygpu_rt_event_record(ready, PYGPU_STREAM_NULL), "EventRecord");
    if (sc.call)
        c->call = sc.call;
    if (r == 0 && (r = use(c, ddev, &here)) == 0)
        r = blame(c, pygpu_rt_stream_wait_event(c->s, ready), "StreamWaitEvent");
    if (r == 0 && !dense_to && (r = cp_dev_temp(c, &dtmp, n)) == 0)
        to = dtmp.dev;
    if (r == 0 && !direct)
        r = across(c, to, ddev, from, sdev, n);
    if (r == 0 && !dense_to)
        r = cp_device_pass(c, &p, 0, dst.ptr + p.offset[0], dtmp.dev, itemsize, 0);
done:;
    /* Done (or failed part way, perhaps with another device current):
     * nothing queued may still read the temporaries. */
    pygpu_status w = here == ddev && r == 0 ? 0 : pygpu_rt_set_device(ddev);
    if (w == 0)
        w = pygpu_rt_stream_synchronize(c->s);
    if (r == 0)
        r = blame(c, w, "StreamSynchronize");
    if (r != 0 && direct) {     /* (after a failure part way, the copy may still be writing) */
        (void)pygpu_rt_set_device(sdev);
        (void)pygpu_rt_stream_synchronize(PYGPU_STREAM_NULL);
        (void)pygpu_rt_set_device(ddev);
    }
    pygpu_event_give(sdev, ready);
    r = cp_temps_free(c, &dtmp, r);
    if (stmp.dev) {
        (void)pygpu_rt_set_device(sdev);
        sc.s = PYGPU_STREAM_NULL;       /* (the temporary was taken on the legacy stream) */
        r = cp_temps_free(&sc, &stmp, r);
        if (sc.call && !c->call)
            c->call = sc.call;
        (void)pygpu_rt_set_device(ddev);
    }
    return r;
}

pygpu_status cp_cross_fresh(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                            ptrdiff_t itemsize)
{
    pygpu_pair p;
    char *to, *from;
    size_t n;
    if (!cross_pair(&p, dst, src, nd, shape, itemsize, &to, &from, &n))
        return 0;
    if (!pygpu_pair_is_dense(&p, 0, itemsize))
        return blame(c, PYGPU_RT_INVALID_VALUE, "route");      /* (fresh memory is dense) */
    pygpu_status r;
    if (pygpu_pair_is_dense(&p, 1, itemsize)) {
        cp_trace_route("across", n, cross_route_names[CROSS_PEER], "the devices reach each other; a new "
                       "destination, allocated and written on the source device's stream");
        r = blame(c, pygpu_rt_memcpy_peer_async(to, dst.device, from, src.device, n, c->s), "MemcpyPeerAsync");
    } else {
        cp_trace_route("across", n, "peer to peer, direct", "a strided view gathered on the source device "
                       "straight into a new destination, over the link");
        r = cp_device_pass(c, &p, 1, from, to, itemsize, 1);
    }
    pygpu_status w = pygpu_rt_stream_synchronize(c->s);     /* (after a failure too: nothing may still write) */
    return r != 0 ? r : blame(c, w, "StreamSynchronize");
}
