/*
 * peer.c -- peer access between devices: which pairs have it enabled or
 * were refused it (remembered per process, so that a copy between devices
 * knows at once whether to go peer to peer), and turning it on and off.
 *
 * "On" means two grants, given and taken back together: the runtime's peer
 * access (for memory from cudaMalloc) and the access of the peer's
 * stream-ordered pool (where PyGPU's arrays live; peer access does not
 * reach it, and without it the runtime stages every copy through host
 * memory).  The first time a pair is used for a copy, a small copy between
 * the two pools checks that peer copies land; where one writes nothing
 * (seen with a 2026 driver) the pair's pool grants are taken back and its
 * copies are staged through pinned host buffers, and the copy door warns
 * once (pygpu_peer_lossy_pair).  Pure C; the copy planner asks
 * pygpu_peer_usable (copy/cross_routes.c), Device.enable_peer_access and
 * disable_peer_access (device.c) turn it on and off.
 */
#include "peer.h"
#include "fork.h"
#include "transfer/settings.h"

#include <pthread.h>
#include <string.h>

#define PEER_DEVICES 64
static pthread_mutex_t peer_mu = PTHREAD_MUTEX_INITIALIZER;
/* [dev][peer]: 1 dev reaches peer's memory and pool, -1 refused, 0 not asked. */
static signed char peer_state[PEER_DEVICES][PEER_DEVICES];
/* [dst][src]: 1 a peer copy src -> dst was seen to land, -1 it wrote nothing, 0 not checked. */
static signed char pair_lands[PEER_DEVICES][PEER_DEVICES];
static int lossy_dst = -1, lossy_src = -1;      /* a lossy pair not yet warned of */

static int peer_in_range(int dev, int peer)
{
    return dev >= 0 && dev < PEER_DEVICES && peer >= 0 && peer < PEER_DEVICES;
}

/* Run `fn(peer)` with `dev` current, then restore the current device. */
static pygpu_status on_dev(int dev, pygpu_status (*fn)(int), int peer)
{
    int prev = -1;
    pygpu_status s = pygpu_rt_get_device(&prev);
    if (s == 0 && prev != dev)
        s = pygpu_rt_set_device(dev);
    if (s == 0) {
        s = fn(peer);
        if (prev != dev && pygpu_rt_set_device(prev) != 0 && s == 0)
            s = pygpu_rt_get_last_error();
    }
    return s;
}

static pygpu_status synchronize_current(int unused)
{
    (void)unused;
    return pygpu_rt_device_synchronize();
}

/* pygpu_peer_enable with peer_mu held. */
static pygpu_status enable_locked(int dev, int peer)
{
    int can = 0;
    if (peer_in_range(dev, peer) && peer_state[dev][peer] == 1)
        return 0;
    pygpu_status s = pygpu_rt_can_access_peer(dev, peer, &can);
    if (s == 0)
        s = can ? on_dev(dev, pygpu_rt_enable_peer_access, peer) : PYGPU_RT_PEER_UNSUPPORTED;
    if (s == 0 && (s = pygpu_rt_mempool_grant(peer, dev, 1)) != 0)
        (void)on_dev(dev, pygpu_rt_disable_peer_access, peer);      /* never half granted */
    if (peer_in_range(dev, peer) && (s == 0 || !can))
        peer_state[dev][peer] = s == 0 ? 1 : -1;
    return s;
}

pygpu_status pygpu_peer_enable(int dev, int peer)
{
    pthread_mutex_lock(&peer_mu);
    pygpu_status s = enable_locked(dev, peer);
    pthread_mutex_unlock(&peer_mu);
    return s;
}

pygpu_status pygpu_peer_disable(int dev, int peer)
{
    pthread_mutex_lock(&peer_mu);
    int was_on = peer_in_range(dev, peer) && peer_state[dev][peer] == 1, revoked = 0;
    /* What is queued on `dev` may be reading `peer`'s pool: done first. */
    pygpu_status s = on_dev(dev, synchronize_current, 0);
    if (s == 0)
        revoked = (s = pygpu_rt_mempool_grant(peer, dev, 0)) == 0;
    if (s == 0)
        s = on_dev(dev, pygpu_rt_disable_peer_access, peer);
    if (s != 0 && revoked && was_on)
        (void)pygpu_rt_mempool_grant(peer, dev, 1);     /* never half taken back */
    if (s == 0 && peer_in_range(dev, peer))
        peer_state[dev][peer] = 0;
    pthread_mutex_unlock(&peer_mu);
    return s;
}

/* On `dev`: free `p` (from malloc_async on `s` if `pooled`) and let
 * stream `s` go (the runtime frees it once its work is done). */
static pygpu_status let_go_on(int dev, void *p, int pooled, pygpu_stream_t s)
{
    pygpu_status r = pygpu_rt_set_device(dev);
    if (r == 0 && p)
        r = pooled ? pygpu_rt_free_async(p, s) : pygpu_rt_free(p);
    if (s) {
        pygpu_status d = pygpu_rt_stream_destroy(s);
        r = r ? r : d;
    }
    return r;
}

/* *lands = 1 if a small copy from a block of `src`'s pool to one of
 * `dst`'s, by the runtime's peer copy, arrives whole.  Each device's part
 * goes on a non-blocking stream of the check's own and waits for that
 * stream alone.  It used the legacy stream, which waits for a blocking
 * stream being captured (so the runtime refuses it), and a device-wide
 * wait, which the runtime refuses under any capture in every mode, breaking
 * the capture (another library's, say, recording when the pair is first
 * used).  The current device is kept. */
static pygpu_status copy_lands(int dst, int src, int *lands)
{
    enum { N = 256 };
    unsigned char sent[N], back[N];
    void *a = NULL, *b = NULL;
    pygpu_stream_t sa = NULL, sb = NULL;
    int prev = -1, pa = 0, pb = 0;
    for (int i = 0; i < N; i++)
        sent[i] = (unsigned char)(i * 7 + 1);
    memset(back, 0, N);
    *lands = 0;
    pygpu_status s = pygpu_rt_get_device(&prev);
    if (s == 0 && (s = pygpu_rt_set_device(src)) == 0 &&
        (s = pygpu_rt_stream_create(&sa, PYGPU_STREAM_NON_BLOCKING, 0)) == 0 &&
        (s = pygpu_rt_malloc_async(&a, N, sa, &pa)) == 0 &&
        (s = pygpu_rt_memcpy_async(a, sent, N, PYGPU_COPY_H2D, sa)) == 0)
        s = pygpu_rt_stream_synchronize(sa);
    if (s == 0 && (s = pygpu_rt_set_device(dst)) == 0 &&
        (s = pygpu_rt_stream_create(&sb, PYGPU_STREAM_NON_BLOCKING, 0)) == 0 &&
        (s = pygpu_rt_malloc_async(&b, N, sb, &pb)) == 0 &&
        (s = pygpu_rt_memset_async(b, 0, N, sb)) == 0 &&
        (s = pygpu_rt_memcpy_peer_async(b, dst, a, src, N, sb)) == 0 &&
        (s = pygpu_rt_memcpy_async(back, b, N, PYGPU_COPY_D2H, sb)) == 0 &&
        (s = pygpu_rt_stream_synchronize(sb)) == 0)
        *lands = memcmp(back, sent, N) == 0;
    /* (on a failure part way, sb's work may still read `a`: sa waits for
     * nothing of sb's, so sb is waited for before `a` is freed) */
    if (s != 0 && sb && pygpu_rt_set_device(dst) == 0 && pygpu_rt_stream_synchronize(sb) != 0)
        (void)pygpu_rt_get_last_error();
    pygpu_status f = let_go_on(dst, b, pb, sb);
    pygpu_status g = let_go_on(src, a, pa, sa);
    if (s == 0)
        s = f ? f : g;
    if (prev >= 0 && pygpu_rt_set_device(prev) != 0 && s == 0)
        s = pygpu_rt_get_last_error();
    return s;
}

/* With peer_mu held and both ways enabled: 1 if copies src -> dst land
 * (checked the first time), else 0, with the pools' grants taken back. */
static int lands_locked(int dst, int src)
{
    int lands = 0;
    if (pair_lands[dst][src])
        return pair_lands[dst][src] == 1;
    if (copy_lands(dst, src, &lands) != 0) {
        (void)pygpu_rt_get_last_error();
        return 0;                   /* not known: staged this time, checked again next */
    }
    pair_lands[dst][src] = lands ? 1 : -1;
    if (!lands) {
        /* The runtime's own peer copies of pool memory then stage through
         * the host (slow but whole), for raw-pointer callers too. */
        (void)pygpu_rt_mempool_grant(src, dst, 0);
        (void)pygpu_rt_mempool_grant(dst, src, 0);
        (void)pygpu_rt_get_last_error();
        peer_state[dst][src] = peer_state[src][dst] = 0;
        pair_lands[src][dst] = -1;      /* (both grants are gone: both ways are staged) */
        lossy_dst = dst;
        lossy_src = src;
    }
    return lands;
}

static const char lost_why[] = "a check copy between the two devices' pools wrote nothing (a driver fault)";
static const char refused_why[] = "the runtime refuses peer access between the two devices";

int pygpu_peer_route(int dst, int src, const char **why)
{
    pygpu_transfer_config cfg;
    const char *unused;
    why = why ? why : &unused;
    pygpu_transfer_config_get(&cfg);
    if (!cfg.peer) {
        *why = "peer copies are turned off (transfer_config(peer=False))";
        return 0;
    }
    if (dst == src || !peer_in_range(dst, src)) {
        *why = dst == src ? "one device" : "a device past the 64 that peer access is kept for";
        return 0;
    }
    int usable = 0;
    pthread_mutex_lock(&peer_mu);
    int there = peer_state[dst][src], back = peer_state[src][dst];   /* 1 on, -1 refused, 0 not asked */
    if (pair_lands[dst][src] == -1) {
        *why = lost_why;
    } else if (there == -1 || back == -1) {
        *why = refused_why;
    } else if ((there == 1 || enable_locked(dst, src) == 0) && (back == 1 || enable_locked(src, dst) == 0)) {
        usable = lands_locked(dst, src);
        *why = usable ? "peer access and both pools' access granted, a check copy landed"
                      : pair_lands[dst][src] == -1 ? lost_why : "the check copy between the two devices failed";
    } else {
        (void)pygpu_rt_get_last_error();
        *why = peer_state[dst][src] == -1 || peer_state[src][dst] == -1 ? refused_why
                                                                         : "peer access could not be enabled";
    }
    pthread_mutex_unlock(&peer_mu);
    return usable;
}

/* Held over a fork, so that the child of a host-backend process finds the
 * table whole and the lock free (the runtime is called under it). */
static void peer_fork(enum pygpu_fork_phase phase) { pygpu_fork_hold_calling(phase, &peer_mu); }

void pygpu_peer_init(void) { pygpu_fork_register(peer_fork); }

int pygpu_peer_usable(int dst, int src)
{
    return pygpu_peer_route(dst, src, NULL);
}

void pygpu_peer_forget(int dev)
{
    if (dev < 0 || dev >= PEER_DEVICES)
        return;
    pthread_mutex_lock(&peer_mu);
    for (int other = 0; other < PEER_DEVICES; other++) {
        peer_state[dev][other] = peer_state[other][dev] = 0;
        pair_lands[dev][other] = pair_lands[other][dev] = 0;
    }
    pthread_mutex_unlock(&peer_mu);
}

int pygpu_peer_lossy_pair(int *dst, int *src)
{
    int found = 0;
    pthread_mutex_lock(&peer_mu);
    if (lossy_dst >= 0) {
        *dst = lossy_dst;
        *src = lossy_src;
        lossy_dst = lossy_src = -1;
        found = 1;
    }
    pthread_mutex_unlock(&peer_mu);
    return found;
}
