/*
 * cross_routes.c -- the copy planner's copies between two devices: each
 * side made dense on its own device (a gather or scatter there), and the
 * dense bytes across by the route ladder: peer to peer where the two
 * reach each other, else the pipeline through page-locked buffers
 * (transfer/cross.c), else, with no buffer to be had, the runtime's own
 * staging; each route with its reason, printed by PYGPU_STAGING_TRACE=1.
 */
#include "cross_routes.h"
#include "device_routes.h"
#include "toolbox.h"
#include "../peer.h"
#include "../shape.h"
#include "../transfer/cross.h"
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

/* Make `dev` current (the two sides take turns). */
static pygpu_status use(ctx *c, int dev)
{
    return blame(c, pygpu_rt_set_device(dev), "SetDevice");
}

/* ---- a strided view gathered in pieces, each crossing as the next is gathered ---- */

/* The number of pieces for a view of `n` bytes gathered into a dense
 * buffer and crossing peer to peer: as many of PYGPU_CROSS_PIECE_MIN bytes
 * or more as fit, at most PYGPU_CROSS_PIECES and no more than the
 * outermost axis has rows; 1 (gathered whole) below two. */
static int pieces_of(const pygpu_pair *p, size_t n)
{
    size_t k = n / PYGPU_CROSS_PIECE_MIN;
    if (k > PYGPU_CROSS_PIECES)
        k = PYGPU_CROSS_PIECES;
    if (p->nd < 1 || k < 2)
        return 1;
    return p->shape[0] < (ptrdiff_t)k ? (int)p->shape[0] : (int)k;
}

/* The rows of piece j when `rows` are cut in pieces of `per` (the last shorter). */
static ptrdiff_t piece_rows(ptrdiff_t rows, ptrdiff_t per, int j)
{
    return rows - j * per < per ? rows - j * per : per;
}

/* The view (layout 1 of `p`, at `from` on `sdev`) gathered into the dense
 * buffer `tmp` on `sdev` in `k` pieces cut along p's outermost axis, on a
 * stream of its own there (after the work queued on the source's legacy
 * stream: a peer copy would wait for all that the legacy stream holds, the
 * later pieces' gathers too), each piece crossing to the dense destination
 * `to` on `ddev` by a peer copy on c->s once it is gathered: the link
 * busy while the next piece is gathered.  *g gets the stream (the caller
 * destroys it once c->s is done).  `ddev` is current on return. */
static pygpu_status gather_across(ctx *c, ctx *sc, const pygpu_pair *p, char *to, int ddev, const char *from,
                                  char *tmp, int sdev, ptrdiff_t itemsize, int k, pygpu_stream_t *g)
{
    pygpu_event_t done[PYGPU_CROSS_PIECES + 1] = {0};   /* [k]: the legacy stream's work before */
    ptrdiff_t ds[PYGPU_MAXDIMS], rows = p->shape[0], per = (rows + k - 1) / k;
    pygpu_status r = blame(sc, pygpu_rt_stream_create(g, PYGPU_STREAM_NON_BLOCKING, 0), "StreamCreateWithFlags");
    if (r == 0 && (r = blame(sc, pygpu_rt_event_create(&done[k], PYGPU_EVENT_DISABLE_TIMING),
                             "EventCreateWithFlags")) == 0 &&
        (r = blame(sc, pygpu_rt_event_record(done[k], PYGPU_STREAM_NULL), "EventRecord")) == 0)
        r = blame(sc, pygpu_rt_stream_wait_event(*g, done[k]), "StreamWaitEvent");
    sc->s = *g;
    dense_strides(p, itemsize, ds);
    for (int j = 0; r == 0 && j < k && j * per < rows; j++) {
        pygpu_pair q = *p;
        ptrdiff_t r0 = j * per;
        q.shape[0] = piece_rows(rows, per, j);
        if ((r = blame(sc, pygpu_rt_event_create(&done[j], PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags")) == 0 &&
            (r = cp_device_pass(sc, &q, 1, (char *)from + r0 * p->strides[1][0], tmp + r0 * ds[0], itemsize, 1)) == 0)
            r = blame(sc, pygpu_rt_event_record(done[j], *g), "EventRecord");
    }
    if (sc->call)
        c->call = sc->call;
    pygpu_status u = use(c, ddev);
    if (r == 0)
        r = u;
    for (int j = 0; r == 0 && j < k && j * per < rows; j++) {
        ptrdiff_t r0 = j * per, len = piece_rows(rows, per, j) * ds[0];
        if ((r = blame(c, pygpu_rt_stream_wait_event(c->s, done[j]), "StreamWaitEvent")) == 0)
            r = blame(c, pygpu_rt_memcpy_peer_async(to + r0 * ds[0], ddev, tmp + r0 * ds[0], sdev, (size_t)len, c->s),
                      "MemcpyPeerAsync");
    }
    for (int j = 0; j <= k; j++)    /* (released once the waits queued on them have passed) */
        if (done[j])
            (void)pygpu_rt_event_destroy(done[j]);
    return r;
}

/* ---- between devices -------------------------------------------------------- */

/* Copy `p` (dst layout 0 on `ddev`, current, stream c->s; src layout 1 on
 * `sdev`).  Done when it returns, with `ddev` current. */
pygpu_status cp_cross_device(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize)
{
    pygpu_pair p;
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    int ddev = dst.device, sdev = src.device;
    size_t n = (size_t)(pair_size(&p) * itemsize);
    char *to = dst.ptr + p.offset[0], *from = src.ptr + p.offset[1];
    ctx sc = {.s = PYGPU_STREAM_NULL};     /* the source side's work: its legacy stream */
    temps stmp = {0}, dtmp = {0};
    pygpu_event_t ready = NULL;
    pygpu_stream_t gs = NULL;          /* the pieces' gathers' stream, if any */
    pygpu_status r;
    int dense_to = pygpu_pair_is_dense(&p, 0, itemsize), dense_from = pygpu_pair_is_dense(&p, 1, itemsize);
    const char *why;
    int k = dense_to && !dense_from ? pieces_of(&p, n) : 1;
    if (k > 1 && route_across(ddev, sdev, CROSS_NONE, &why) == CROSS_PEER) {
        /* A strided view into a dense destination: gathered in pieces on
         * the source device, each crossing as the next is gathered. */
        cp_trace_route("across", n, "peer to peer, in pieces", "a strided view, each piece gathered on the source "
                       "device crossing while the next is gathered");
        if ((r = use(c, sdev)) == 0 && (r = cp_dev_temp(&sc, &stmp, n)) == 0)
            r = gather_across(c, &sc, &p, to, ddev, from, stmp.dev, sdev, itemsize, k, &gs);
        goto done;
    }
    /* On the source device, after the work queued there: a dense copy of the
     * source if it is not dense, and an event the copy waits for. */
    if ((r = use(c, sdev)) == 0 && !dense_from &&
        (r = cp_dev_temp(&sc, &stmp, n)) == 0 && (r = cp_device_pass(&sc, &p, 1, from, stmp.dev, itemsize, 1)) == 0)
        from = stmp.dev;
    if (r == 0 && (r = blame(&sc, pygpu_rt_event_create(&ready, PYGPU_EVENT_DISABLE_TIMING),
                            "EventCreateWithFlags")) == 0)
        r = blame(&sc, pygpu_rt_event_record(ready, PYGPU_STREAM_NULL), "EventRecord");
    if (sc.call)
        c->call = sc.call;
    if (r == 0 && (r = use(c, ddev)) == 0)
        r = blame(c, pygpu_rt_stream_wait_event(c->s, ready), "StreamWaitEvent");
    if (r == 0 && !dense_to && (r = cp_dev_temp(c, &dtmp, n)) == 0)
        to = dtmp.dev;
    if (r == 0)
        r = across(c, to, ddev, from, sdev, n);
    if (r == 0 && !dense_to)
        r = cp_device_pass(c, &p, 0, dst.ptr + p.offset[0], dtmp.dev, itemsize, 0);
done:;
    /* Done (or failed part way): nothing queued may still read the temporaries. */
    pygpu_status w = pygpu_rt_set_device(ddev);
    if (w == 0)
        w = pygpu_rt_stream_synchronize(c->s);
    if (r == 0)
        r = blame(c, w, "StreamSynchronize");
    if (ready)
        (void)pygpu_rt_event_destroy(ready);
    r = cp_temps_free(c, &dtmp, r);
    if (stmp.dev || gs) {
        (void)pygpu_rt_set_device(sdev);
        if (gs) {                       /* (after a failure part way, gathers may still be writing) */
            pygpu_status g = pygpu_rt_stream_synchronize(gs);
            if (r == 0)
                r = blame(c, g, "StreamSynchronize");
            (void)pygpu_rt_stream_destroy(gs);
        }
        sc.s = PYGPU_STREAM_NULL;       /* (the temporary was taken on the legacy stream) */
        r = cp_temps_free(&sc, &stmp, r);
        if (sc.call && !c->call)
            c->call = sc.call;
        (void)pygpu_rt_set_device(ddev);
    }
    return r;
}
