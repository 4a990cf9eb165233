/* Which runtime calls does a graph capture in global mode refuse, when
 * they are made on work of their own (a non-blocking stream that is not
 * captured, memory that no captured work uses)?  Each call is made once
 * while another non-blocking stream is captured in global mode, by this
 * thread and then by another thread, and the capture's fate printed:
 * "ok" (the call worked and the capture ended valid) or what the call
 * returned and whether the capture broke.  Then the same in relaxed mode
 * (cudaThreadExchangeStreamCaptureMode around the call).  rt_gpu.c makes
 * the calls refused here in relaxed mode; docs/performance.md, "Captures
 * in global mode beside PyGPU's work".
 *
 *   gcc -O2 -pthread capture-unsafe.c -I$CUDA/include -L$CUDA/lib64 -lcudart -lcuda -o /tmp/capture-unsafe
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define N (1 << 20)

static cudaStream_t own, cap;
static cudaEvent_t done_ev;
static void *dev, *pinned, *pageable, *reg;

static void nothing(void *p) { (void)p; }

static cudaError_t c_malloc(void) { void *p; cudaError_t e = cudaMalloc(&p, N); if (!e) e = cudaFree(p); return e; }
static cudaError_t c_malloc_async(void) { void *p; cudaError_t e = cudaMallocAsync(&p, N, own); if (!e) e = cudaFreeAsync(p, own); return e; }
static cudaError_t c_host_alloc(void) { void *p; cudaError_t e = cudaHostAlloc(&p, N, cudaHostAllocPortable); if (!e) e = cudaFreeHost(p); return e; }
static cudaError_t c_host_register(void) { cudaError_t e = cudaHostRegister(reg, N, cudaHostRegisterPortable); if (!e) e = cudaHostUnregister(reg); return e; }
static cudaError_t c_memcpy_pinned(void) { return cudaMemcpy(dev, pinned, N, cudaMemcpyHostToDevice); }
static cudaError_t c_memcpy_pageable(void) { return cudaMemcpy(dev, pageable, N, cudaMemcpyHostToDevice); }
static cudaError_t c_memcpy_async_pinned(void) { return cudaMemcpyAsync(dev, pinned, N, cudaMemcpyHostToDevice, own); }
static cudaError_t c_memcpy_async_pageable(void) { return cudaMemcpyAsync(dev, pageable, N, cudaMemcpyHostToDevice, own); }
static cudaError_t c_memcpy_async_down_pageable(void) { return cudaMemcpyAsync(pageable, dev, N, cudaMemcpyDeviceToHost, own); }
static cudaError_t c_memcpy2d_async_pinned(void) { return cudaMemcpy2DAsync(dev, 1024, pinned, 2048, 1024, 256, cudaMemcpyHostToDevice, own); }
static cudaError_t c_memset_async(void) { return cudaMemsetAsync(dev, 0, N, own); }
static cudaError_t c_stream_sync(void) { return cudaStreamSynchronize(own); }
static cudaError_t c_stream_query(void) { return cudaStreamQuery(own); }
static cudaError_t c_event_record(void) { return cudaEventRecord(done_ev, own); }
static cudaError_t c_event_sync(void) { return cudaEventSynchronize(done_ev); }
static cudaError_t c_event_query(void) { return cudaEventQuery(done_ev); }
static cudaError_t c_event_create(void) { cudaEvent_t e2; cudaError_t e = cudaEventCreateWithFlags(&e2, cudaEventDisableTiming); if (!e) e = cudaEventDestroy(e2); return e; }
static cudaError_t c_stream_create(void) { cudaStream_t s; cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); if (!e) e = cudaStreamDestroy(s); return e; }
static cudaError_t c_stream_wait_event(void) { return cudaStreamWaitEvent(own, done_ev, 0); }
static cudaError_t c_host_func(void) { return cudaLaunchHostFunc(own, nothing, NULL); }
static cudaError_t c_wait_value(void) { return (cudaError_t)cuStreamWaitValue32(own, (CUdeviceptr)pinned, 0, CU_STREAM_WAIT_VALUE_GEQ); }
static cudaError_t c_write_value(void) { return (cudaError_t)cuStreamWriteValue32(own, (CUdeviceptr)pinned, 0, 0); }
static cudaError_t c_pointer_attrs(void) { struct cudaPointerAttributes a; return cudaPointerGetAttributes(&a, pinned); }
static cudaError_t c_mem_get_info(void) { size_t f, t; return cudaMemGetInfo(&f, &t); }
static cudaError_t c_pool_trim(void) { cudaMemPool_t p; cudaError_t e = cudaDeviceGetDefaultMemPool(&p, 0); if (!e) e = cudaMemPoolTrimTo(p, 0); return e; }
static cudaError_t c_device_sync(void) { return cudaDeviceSynchronize(); }

static const struct { const char *name; cudaError_t (*fn)(void); } calls[] = {
    {"cudaMalloc + cudaFree", c_malloc}, {"cudaMallocAsync + cudaFreeAsync", c_malloc_async},
    {"cudaHostAlloc + cudaFreeHost", c_host_alloc}, {"cudaHostRegister + Unregister", c_host_register},
    {"cudaMemcpy pinned", c_memcpy_pinned}, {"cudaMemcpy pageable", c_memcpy_pageable},
    {"cudaMemcpyAsync pinned", c_memcpy_async_pinned}, {"cudaMemcpyAsync pageable", c_memcpy_async_pageable},
    {"cudaMemcpyAsync down, pageable", c_memcpy_async_down_pageable}, {"cudaMemcpy2DAsync pinned", c_memcpy2d_async_pinned},
    {"cudaMemsetAsync", c_memset_async}, {"cudaStreamSynchronize", c_stream_sync}, {"cudaStreamQuery", c_stream_query},
    {"cudaEventRecord", c_event_record}, {"cudaEventSynchronize", c_event_sync}, {"cudaEventQuery", c_event_query},
    {"cudaEventCreate + Destroy", c_event_create}, {"cudaStreamCreate + Destroy", c_stream_create},
    {"cudaStreamWaitEvent", c_stream_wait_event}, {"cudaLaunchHostFunc", c_host_func},
    {"cuStreamWaitValue32", c_wait_value}, {"cuStreamWriteValue32", c_write_value},
    {"cudaPointerGetAttributes", c_pointer_attrs}, {"cudaMemGetInfo", c_mem_get_info},
    {"cudaMemPoolTrimTo", c_pool_trim}, {"cudaDeviceSynchronize", c_device_sync},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;               /* 0 idle, 1 capture begun, 2 call made, 3 capture ended */
static cudaError_t end_err;

static void step_to(int p) { pthread_mutex_lock(&mu); phase = p; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu); }
static void wait_for(int p) { pthread_mutex_lock(&mu); while (phase < p) pthread_cond_wait(&cv, &mu); pthread_mutex_unlock(&mu); }

static cudaError_t end_capture(void)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(cap, &g);
    if (g)
        cudaGraphDestroy(g);
    return e;
}

static void *capturer(void *arg)
{
    (void)arg;
    CK(cudaSetDevice(0));
    CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
    CK(cudaMemsetAsync(dev, 1, 16, cap));
    step_to(1);
    wait_for(2);
    end_err = end_capture();
    step_to(3);
    return NULL;
}

static void one(int i, int other, int relaxed)
{
    cudaError_t e;
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(done_ev, own));
    CK(cudaStreamSynchronize(own));
    phase = 0;
    pthread_t th;
    if (other) {
        pthread_create(&th, NULL, capturer, NULL);
        wait_for(1);
    } else {
        CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
        CK(cudaMemsetAsync(dev, 1, 16, cap));
    }
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    if (relaxed)
        CK(cudaThreadExchangeStreamCaptureMode(&m));
    e = calls[i].fn();
    if (relaxed)
        CK(cudaThreadExchangeStreamCaptureMode(&m));
    if (other) {
        step_to(2);
        pthread_join(th, NULL);
    } else {
        end_err = end_capture();
    }
    cudaGetLastError();
    printf("  %-34s %-6s %-8s call %-36s capture %s\n", calls[i].name, other ? "other" : "this",
           relaxed ? "relaxed" : "global", e ? cudaGetErrorName(e) : "ok", end_err ? "BROKEN" : "valid");
    fflush(stdout);
}

int main(void)
{
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    CK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&done_ev, cudaEventDisableTiming));
    CK(cudaMalloc(&dev, N));
    CK(cudaHostAlloc(&pinned, N, cudaHostAllocPortable));
    memset(pinned, 0, N);
    pageable = malloc(N);
    reg = aligned_alloc(4096, N);
    memset(pageable, 1, N);
    memset(reg, 1, N);
    for (int relaxed = 0; relaxed < 2; relaxed++)
        for (int other = 0; other < 2; other++)
            for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
                one((int)i, other, relaxed);
    return 0;
}
