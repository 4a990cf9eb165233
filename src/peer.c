/*
 * peer.c -- peer access between devices: which pairs have it enabled or
 * were refused it (remembered per process, so that a copy between devices
 * knows at once whether to go peer to peer), and turning it on and off.
 * Pure C; the copy planner asks pygpu_peer_usable (copy/cross_routes.c),
 * Device.enable_peer_access and disable_peer_access (device.c) turn it on
 * and off.
 */
#include "pygpu.h"
#include "transfer/settings.h"

#include <pthread.h>

#define PEER_DEVICES 64
static pthread_mutex_t peer_mu = PTHREAD_MUTEX_INITIALIZER;
static signed char peer_state[PEER_DEVICES][PEER_DEVICES];    /* 1 enabled, -1 refused, 0 not asked */

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

pygpu_status pygpu_peer_enable(int dev, int peer)
{
    int can = 0;
    pygpu_status s;
    pthread_mutex_lock(&peer_mu);
    if (peer_in_range(dev, peer) && peer_state[dev][peer] == 1) {
        pthread_mutex_unlock(&peer_mu);
        return 0;
    }
    s = pygpu_rt_can_access_peer(dev, peer, &can);
    if (s == 0)
        s = can ? on_dev(dev, pygpu_rt_enable_peer_access, peer) : PYGPU_RT_PEER_UNSUPPORTED;
    if (peer_in_range(dev, peer) && (s == 0 || !can))
        peer_state[dev][peer] = s == 0 ? 1 : -1;
    pthread_mutex_unlock(&peer_mu);
    return s;
}

pygpu_status pygpu_peer_disable(int dev, int peer)
{
    pthread_mutex_lock(&peer_mu);
    pygpu_status s = on_dev(dev, pygpu_rt_disable_peer_access, peer);
    if (s == 0 && peer_in_range(dev, peer))
        peer_state[dev][peer] = 0;
    pthread_mutex_unlock(&peer_mu);
    return s;
}

int pygpu_peer_usable(int dst, int src)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    if (!cfg.peer)
        return 0;
    int there = 0, back = 0;        /* 1 enabled, -1 refused, 0 not asked */
    pthread_mutex_lock(&peer_mu);
    if (peer_in_range(dst, src)) {
        there = peer_state[dst][src];
        back = peer_state[src][dst];
    }
    pthread_mutex_unlock(&peer_mu);
    if (there == 1 && back == 1)
        return 1;
    if (there == -1 || back == -1)  /* refused once: not asked again on every copy */
        return 0;
    if (pygpu_peer_enable(dst, src) == 0 && pygpu_peer_enable(src, dst) == 0)
        return 1;
    (void)pygpu_rt_get_last_error();
    return 0;
}
