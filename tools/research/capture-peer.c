/* Which of the runtime's calls between two devices does a graph capture in
 * global mode refuse?  capture-unsafe.c asks it of one device's calls; this
 * asks it of those a pair's first use makes (peer.c: enable_locked,
 * copy_lands), and of a few more one device's calls (its pool, IPC handles,
 * its attributes).  A non-blocking stream of device 0 is captured in global
 * mode by this thread; each call is made once on work of its own, with the
 * thread in global mode and then in relaxed mode
 * (cudaThreadExchangeStreamCaptureMode around the call), and the call's
 * result and the capture's fate printed.
 *
 *   capture-peer fresh global|relaxed: the first use of device 1 (its
 *       primary context made) under the capture, in a process of its own;
 *   capture-peer calls: the other calls, device 1's context made before.
 *
 *   gcc -O2 capture-peer.c -I$CUDA/include -L$CUDA/lib64 -lcudart -o /tmp/capture-peer
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define N 4096

static cudaStream_t own, cap;
static void *dev0, *dev1;

static cudaError_t set_back(cudaError_t e) { cudaError_t b = cudaSetDevice(0); return e ? e : b; }

static cudaError_t c_fresh(void)
{
    cudaStream_t s;
    cudaError_t e = cudaSetDevice(1);
    if (!e && !(e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        e = cudaStreamDestroy(s);
    return set_back(e);
}
static cudaError_t c_can(void) { int can = 0; return cudaDeviceCanAccessPeer(&can, 0, 1); }
static cudaError_t c_p2p_attr(void) { int r = 0; return cudaDeviceGetP2PAttribute(&r, cudaDevP2PAttrPerformanceRank, 0, 1); }
static cudaError_t c_enable(void)
{
    cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    return e ? e : cudaDeviceDisablePeerAccess(1);
}
static cudaError_t grant(int on)
{
    cudaMemPool_t pool;
    struct cudaMemAccessDesc d = {0};
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = 0;
    d.flags = on ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
    cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, 1);
    return e ? e : cudaMemPoolSetAccess(pool, &d, 1);
}
static cudaError_t c_grant(void) { cudaError_t e = grant(1); return e ? e : grant(0); }
static cudaError_t c_pool_get(void)
{
    cudaMemPool_t pool;
    struct cudaMemLocation where = {0};
    enum cudaMemAccessFlags f;
    where.type = cudaMemLocationTypeDevice;
    where.id = 0;
    cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, 1);
    return e ? e : cudaMemPoolGetAccess(&f, pool, &where);
}
static cudaError_t c_peer_copy(void) { return cudaMemcpyPeerAsync(dev0, 0, dev1, 1, N, own); }
static cudaError_t c_switch(void) { return set_back(cudaSetDevice(1)); }
static cudaError_t c_stream_on_1(void) { return c_fresh(); }
static cudaError_t c_default_pool(void) { cudaMemPool_t pool; return cudaDeviceGetDefaultMemPool(&pool, 1); }
static cudaError_t c_pool_attr(void)
{
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, 1);
    return e ? e : cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
}
static cudaError_t c_ipc_mem(void) { cudaIpcMemHandle_t h; return cudaIpcGetMemHandle(&h, dev0); }
static cudaError_t c_ipc_event(void)
{
    cudaEvent_t ev;
    cudaIpcEventHandle_t h;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess);
    if (!e) {
        e = cudaIpcGetEventHandle(&h, ev);
        cudaError_t d = cudaEventDestroy(ev);
        e = e ? e : d;
    }
    return e;
}
static cudaError_t c_attr(void) { int v = 0; return cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 1); }
static cudaError_t c_props(void) { struct cudaDeviceProp p; return cudaGetDeviceProperties(&p, 1); }

static const struct { const char *name; cudaError_t (*fn)(void); } calls[] = {
    {"cudaDeviceCanAccessPeer", c_can}, {"cudaDeviceGetP2PAttribute", c_p2p_attr},
    {"cudaDeviceEnablePeerAccess + Disable", c_enable}, {"cudaMemPoolSetAccess grant + revoke", c_grant},
    {"cudaMemPoolGetAccess", c_pool_get}, {"cudaMemcpyPeerAsync", c_peer_copy},
    {"cudaSetDevice(1) and back", c_switch}, {"cudaStreamCreate on device 1", c_stream_on_1},
    {"cudaDeviceGetDefaultMemPool", c_default_pool}, {"cudaMemPoolSetAttribute", c_pool_attr},
    {"cudaIpcGetMemHandle", c_ipc_mem}, {"cudaIpcGetEventHandle", c_ipc_event},
    {"cudaDeviceGetAttribute", c_attr}, {"cudaGetDeviceProperties", c_props},
};

static void one(const char *name, cudaError_t (*fn)(void), int relaxed)
{
    cudaGraph_t g = NULL;
    CK(cudaSetDevice(0));
    CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
    CK(cudaMemsetAsync(dev0, 1, 16, cap));
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    if (relaxed)
        CK(cudaThreadExchangeStreamCaptureMode(&m));
    cudaError_t e = fn();
    if (relaxed)
        CK(cudaThreadExchangeStreamCaptureMode(&m));
    cudaError_t end = cudaStreamEndCapture(cap, &g);
    if (g)
        cudaGraphDestroy(g);
    cudaGetLastError();
    printf("  %-38s %-8s call %-36s capture %s\n", name, relaxed ? "relaxed" : "global",
           e ? cudaGetErrorName(e) : "ok", end ? "BROKEN" : "valid");
    fflush(stdout);
    CK(cudaSetDevice(0));
    CK(cudaStreamSynchronize(own));
}

int main(int argc, char **argv)
{
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2 || argc < 2) {
        fprintf(stderr, "needs 2 devices and 'fresh global|relaxed' or 'calls'\n");
        return 2;
    }
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    CK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    CK(cudaMalloc(&dev0, N));
    if (strcmp(argv[1], "fresh") == 0) {
        one("first use of device 1", c_fresh, argc > 2 && strcmp(argv[2], "relaxed") == 0);
        return 0;
    }
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dev1, N));
    CK(cudaSetDevice(0));
    for (int relaxed = 0; relaxed < 2; relaxed++)
        for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
            one(calls[i].name, calls[i].fn, relaxed);
    return 0;
}
