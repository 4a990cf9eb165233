/*
 * peer_host.c -- peer access between the host backend's devices, and the
 * grants of their stream-ordered pools (the peer part of rt.h on host
 * memory).  It reaches the rest of the host runtime through rt.h alone
 * (the device count and the current device) and host_shared.h (its
 * statuses).
 *
 * Environment (read by env.c; docs/environment.md): PYGPU_HOST_PEER (0:
 * the devices refuse peer access to each other, so that the staged path
 * between devices runs; 2: they grant it, but a peer copy into pool memory
 * granted to the source device writes nothing, as a 2026 driver did, so
 * that the check of a new pair is tested).
 */
#include "rt.h"
#include "host_shared.h"
#include "env.h"

#include <stdatomic.h>

const pygpu_status PYGPU_RT_PEER_UNSUPPORTED = H_PEER_UNSUPPORTED;

#define POOL_DEVICES 64         /* (the host backend presents at most 64) */

/* Which device pools grant which devices access: [owner][peer]. */
static atomic_uchar pool_granted[POOL_DEVICES][POOL_DEVICES];

/* 1 if `dev` and `peer` are both devices of the host backend. */
static int both_devices(int dev, int peer)
{
    int n = 0;
    (void)pygpu_rt_device_count(&n);
    return dev >= 0 && dev < n && peer >= 0 && peer < n;
}

pygpu_status pygpu_rt_can_access_peer(int dev, int peer, int *can)
{
    *can = 0;
    if (!both_devices(dev, peer))
        return pygpu_host_fail(H_INVALID_DEVICE);
    *can = pygpu_env_get()->host_peer && dev != peer;
    return H_SUCCESS;
}

/* H_SUCCESS where `dev` may reach `peer`, else why not (noted as the
 * thread's last error). */
static pygpu_status reach(int dev, int peer)
{
    int can;
    pygpu_status s = pygpu_rt_can_access_peer(dev, peer, &can);
    if (s != H_SUCCESS)
        return s;
    return can ? H_SUCCESS : pygpu_host_fail(dev == peer ? H_INVALID_DEVICE : H_PEER_UNSUPPORTED);
}

pygpu_status pygpu_rt_enable_peer_access(int peer)
{
    int dev = 0;
    (void)pygpu_rt_get_device(&dev);
    return reach(dev, peer);
}

pygpu_status pygpu_rt_disable_peer_access(int peer) { return pygpu_rt_enable_peer_access(peer); }

/* Every link is as fast as another (rank 0) where the devices peer; where
 * they refuse peer access, the rank is refused as enabling it is. */
pygpu_status pygpu_rt_p2p_rank(int src, int dst, int *rank)
{
    *rank = 0;
    return reach(src, dst);
}

pygpu_status pygpu_rt_mempool_grant(int owner, int peer, int on)
{
    if (!both_devices(owner, peer))
        return pygpu_host_fail(H_INVALID_DEVICE);
    if (owner == peer)
        return pygpu_host_fail(H_INVALID_VALUE);   /* as the runtimes: a pool's own device always has access */
    atomic_store(&pool_granted[owner][peer], (unsigned char)(on != 0));
    return H_SUCCESS;
}

pygpu_status pygpu_rt_mempool_access(int owner, int peer, int *on)
{
    *on = 0;
    if (!both_devices(owner, peer))
        return pygpu_host_fail(H_INVALID_DEVICE);
    *on = owner == peer || atomic_load(&pool_granted[owner][peer]);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_memcpy_peer_async(void *dst, int ddev, const void *src, int sdev, size_t n,
                                        pygpu_stream_t s)
{
    if (!both_devices(ddev, sdev))
        return pygpu_host_fail(H_INVALID_DEVICE);
    if (pygpu_env_get()->host_peer == 2 && ddev != sdev && atomic_load(&pool_granted[ddev][sdev]))
        return H_SUCCESS;               /* the lossy driver: nothing lands */
    return pygpu_rt_memcpy_async(dst, src, n, PYGPU_COPY_D2D, s);
}
