/*
 * rt_gpu.c -- the runtime interface on the CUDA or HIP runtime API.
 *
 * The same source serves both vendors: RT(Name) expands to cudaName or
 * hipName, chosen by PYGPU_BACKEND_CUDA / PYGPU_BACKEND_HIP at build time.
 * With kernels_gpu.c (PyGPU's kernels) and diagnose_gpu.c (why no device
 * is usable), the only files that name vendor functions.  Only the
 * runtime API and the devices' primary contexts are used.
 */
#include "rt.h"
#include "../numa.h"
#include "../pages.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(PYGPU_BACKEND_CUDA)
#  include <cuda_runtime_api.h>
#  define RT(name) cuda##name
#  define RT_VENDOR "cuda"
typedef cudaError_t rt_error;
typedef cudaStream_t rt_stream;
typedef cudaEvent_t rt_event;
typedef cudaMemPool_t rt_mempool;
typedef struct cudaDeviceProp rt_props;
#elif defined(PYGPU_BACKEND_HIP)
#  ifndef __HIP_PLATFORM_AMD__
#    define __HIP_PLATFORM_AMD__ 1
#  endif
#  include <hip/hip_runtime_api.h>
#  define RT(name) hip##name
#  define RT_VENDOR "hip"
typedef hipError_t rt_error;
typedef hipStream_t rt_stream;
typedef hipEvent_t rt_event;
typedef hipMemPool_t rt_mempool;
typedef hipDeviceProp_t rt_props;
#else
#  error "rt_gpu.c needs PYGPU_BACKEND_CUDA or PYGPU_BACKEND_HIP"
#endif

#define S(stream) ((rt_stream)(stream))
#define E(event) ((rt_event)(event))

/* The calls that a graph capture in global mode anywhere in the process
 * (or one of this thread's own in thread-local mode) makes the runtime
 * refuse, breaking that capture, though they touch nothing captured:
 * allocating and freeing device and page-locked memory, page-locking in
 * place, trimming a pool, waiting for or querying a stream or an event
 * (tools/research/capture-unsafe.c: copies, fills, records, waits queued
 * on a stream and host functions are not refused).  PyGPU's work on
 * streams of its own beside another library's capture makes them, so it
 * makes them with this thread in relaxed capture mode and its own mode
 * restored after.  Relaxed mode still refuses what truly conflicts (waiting
 * for work recorded inside a capture: PyGPU asks whether its stream is
 * captured before it waits), and a device-wide synchronize.  Usage:
 * RELAXED(RT(Call)(...)) returns what the call returns, made so; or
 * `capture_mode m = relax(); ... return unrelax(m, RT(Call)(...));`.
 * PyGPU's own threads are relaxed for good (pygpu_rt_thread_relax): there
 * relax() costs nothing; elsewhere the exchange there and back costs about
 * 0.12 us. */
typedef enum RT(StreamCaptureMode) capture_mode;

static _Thread_local int relaxed_for_good;

void pygpu_rt_thread_relax(void)
{
    capture_mode m = RT(StreamCaptureModeRelaxed);
    if (RT(ThreadExchangeStreamCaptureMode)(&m) == RT(Success))
        relaxed_for_good = 1;
    else
        (void)RT(GetLastError)();
}

static capture_mode relax(void)
{
    capture_mode m = RT(StreamCaptureModeRelaxed);
    if (relaxed_for_good)
        return m;
    if (RT(ThreadExchangeStreamCaptureMode)(&m) != RT(Success)) {
        (void)RT(GetLastError)();
        m = RT(StreamCaptureModeRelaxed);   /* (unrelax then leaves the mode alone) */
    }
    return m;
}

static rt_error unrelax(capture_mode m, rt_error r)
{
    if (m != RT(StreamCaptureModeRelaxed))
        (void)RT(ThreadExchangeStreamCaptureMode)(&m);
    return r;
}

#define RELAXED(call) do { capture_mode m_ = relax(); return unrelax(m_, (call)); } while (0)

const pygpu_status PYGPU_RT_INVALID_VALUE = (pygpu_status)RT(ErrorInvalidValue);
const pygpu_status PYGPU_RT_OUT_OF_MEMORY = (pygpu_status)RT(ErrorMemoryAllocation);

const char *pygpu_rt_vendor(void) { return RT_VENDOR; }

pygpu_status pygpu_rt_runtime_version(int *v) { return RT(RuntimeGetVersion)(v); }
pygpu_status pygpu_rt_driver_version(int *v) { return RT(DriverGetVersion)(v); }
#if defined(PYGPU_BACKEND_CUDA)
int pygpu_rt_built_version(void) { return CUDART_VERSION; }
#elif defined(HIP_VERSION)
int pygpu_rt_built_version(void) { return HIP_VERSION; }
#else
int pygpu_rt_built_version(void) { return 0; }
#endif

const char *pygpu_rt_error_name(pygpu_status s) { return RT(GetErrorName)((rt_error)s); }
const char *pygpu_rt_error_string(pygpu_status s) { return RT(GetErrorString)((rt_error)s); }

int pygpu_rt_is_out_of_memory(pygpu_status s) { return s == (pygpu_status)RT(ErrorMemoryAllocation); }
int pygpu_rt_is_not_ready(pygpu_status s) { return s == (pygpu_status)RT(ErrorNotReady); }

int pygpu_rt_is_sticky(pygpu_status s)
{
    switch (s) {
    case RT(ErrorIllegalAddress):
    case RT(ErrorAssert):
    case RT(ErrorLaunchFailure):
#if defined(PYGPU_BACKEND_CUDA)
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
#endif
        return 1;
    default:
        return 0;
    }
}

pygpu_status pygpu_rt_get_last_error(void) { return RT(GetLastError)(); }
pygpu_status pygpu_rt_peek_last_error(void) { return RT(PeekAtLastError)(); }

/* ---- devices ---------------------------------------------------------- */

pygpu_status pygpu_rt_device_count(int *n)
{
    rt_error e = RT(GetDeviceCount)(n);
    if (e != RT(Success))
        *n = 0;
    return e;
}

pygpu_status pygpu_rt_get_device(int *dev) { return RT(GetDevice)(dev); }
pygpu_status pygpu_rt_set_device(int dev) { return RT(SetDevice)(dev); }
pygpu_status pygpu_rt_device_synchronize(void) { return RT(DeviceSynchronize)(); }

pygpu_status pygpu_rt_device_props(int dev, pygpu_device_props *p)
{
    rt_props q;
    rt_error e = RT(GetDeviceProperties)(&q, dev);
    if (e != RT(Success))
        return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", q.name);
    p->cc_major = q.major;
    p->cc_minor = q.minor;
    p->total_memory = q.totalGlobalMem;
    p->multiprocessor_count = q.multiProcessorCount;
    e = RT(DeviceGetPCIBusId)(p->pci_bus_id, (int)sizeof p->pci_bus_id, dev);
    if (e != RT(Success))
        return e;
#if defined(PYGPU_BACKEND_CUDA)
    memcpy(p->uuid, q.uuid.bytes, sizeof p->uuid);
#else
    hipUUID u;
    e = hipDeviceGetUuid(&u, dev);
    if (e == RT(Success))
        memcpy(p->uuid, u.bytes, sizeof p->uuid);
    else if (e == RT(ErrorNotSupported))
        e = RT(Success);            /* leave the uuid zero where unknown */
#endif
    return e;
}

/* (The runtime's own attribute for this, where it has one, reads the same
 * sysfs file; the bus address works for both vendors.) */
pygpu_status pygpu_rt_device_numa_node(int dev, int *node)
{
    char busid[32];
    rt_error e = RT(DeviceGetPCIBusId)(busid, (int)sizeof busid, dev);
    *node = e == RT(Success) ? pygpu_numa_node_of_pci(NULL, busid) : -1;
    return e;
}

pygpu_status pygpu_rt_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    return RT(MemGetInfo)(free_bytes, total_bytes);
}

/* ---- device memory ---------------------------------------------------- */

pygpu_status pygpu_rt_malloc(void **p, size_t n) { RELAXED(RT(Malloc)(p, n)); }
pygpu_status pygpu_rt_free(void *p) { RELAXED(RT(Free)(p)); }
pygpu_status pygpu_rt_free_async(void *p, pygpu_stream_t s) { RELAXED(RT(FreeAsync)(p, S(s))); }

/* Devices whose default pool we asked to keep freed memory cached.  The
 * runtime's default threshold (0) hands memory back at every synchronize,
 * which makes the pool no faster than plain malloc. */
#define MAX_POOL_DEVICES 256
static _Atomic unsigned char pool_state[MAX_POOL_DEVICES];   /* 0 unknown, 1 pool, 2 none */
static rt_mempool pools[MAX_POOL_DEVICES];                    /* each device's default pool, once state 1 */

static int pool_usable(void)
{
    int dev, on = 0;
    if (RT(GetDevice)(&dev) != RT(Success) || dev < 0 || dev >= MAX_POOL_DEVICES)
        return 0;
    if (pool_state[dev])
        return pool_state[dev] == 1;
#if defined(PYGPU_BACKEND_CUDA)
    if (RT(DeviceGetAttribute)(&on, cudaDevAttrMemoryPoolsSupported, dev) != RT(Success))
        on = 0;
#else
    if (RT(DeviceGetAttribute)(&on, hipDeviceAttributeMemoryPoolsSupported, dev) != RT(Success))
        on = 0;
#endif
    if (on) {
        rt_mempool pool;
        uint64_t keep = UINT64_MAX;
        if (RT(DeviceGetDefaultMemPool)(&pool, dev) != RT(Success) ||
            RT(MemPoolSetAttribute)(pool, RT(MemPoolAttrReleaseThreshold), &keep) != RT(Success))
            on = 0;
        pools[dev] = pool;          /* (written before the state that says so) */
    }
    RT(GetLastError)();
    pool_state[dev] = on ? 1 : 2;
    return on;
}

pygpu_status pygpu_rt_malloc_async(void **p, size_t n, pygpu_stream_t s, int *pooled)
{
    *pooled = 0;
    capture_mode m = relax();
    if (n > 0 && pool_usable()) {
        rt_error e = RT(MallocAsync)(p, n, S(s));
        if (e != RT(ErrorNotSupported)) {
            *pooled = (e == RT(Success));
            return unrelax(m, e);
        }
        RT(GetLastError)();
    }
    return unrelax(m, RT(Malloc)(p, n));
}

pygpu_status pygpu_rt_malloc_on_async(void **p, size_t n, int dev, pygpu_stream_t s, int *pooled)
{
    *p = NULL;
    *pooled = 0;
    if (n == 0 || dev < 0 || dev >= MAX_POOL_DEVICES || pool_state[dev] != 1)
        return RT(Success);
    capture_mode m = relax();
    rt_error e = unrelax(m, RT(MallocFromPoolAsync)(p, n, pools[dev], S(s)));
    if (e != RT(Success))
        *p = NULL;
    *pooled = e == RT(Success);
    return e;
}

int pygpu_rt_alloc_is_cheap(void) { return 0; }

/* A reset destroys the device's default pool: the next allocation there
 * finds the new one (and asks it to keep freed memory) again. */
pygpu_status pygpu_rt_device_reset(void)
{
    int dev = -1;
    rt_error e = RT(GetDevice)(&dev);
    if (e == RT(Success))
        e = RT(DeviceReset)();
    if (e == RT(Success) && dev >= 0 && dev < MAX_POOL_DEVICES)
        pool_state[dev] = 0;
    return e;
}

static rt_error mempool_trim(int dev, size_t keep_bytes)
{
    rt_mempool pool;
    rt_error e = RT(DeviceGetDefaultMemPool)(&pool, dev);
    if (e == RT(ErrorNotSupported)) {
        RT(GetLastError)();
        return RT(Success);         /* no pool, nothing cached */
    }
    return e != RT(Success) ? e : RT(MemPoolTrimTo)(pool, keep_bytes);
}

pygpu_status pygpu_rt_mempool_trim(int dev, size_t keep_bytes) { RELAXED(mempool_trim(dev, keep_bytes)); }

/* ---- memory other processes can map ----------------------------------- */

#if defined(PYGPU_BACKEND_CUDA)
typedef cudaIpcMemHandle_t rt_ipc_handle;
#else
typedef hipIpcMemHandle_t rt_ipc_handle;
#endif
_Static_assert(sizeof(rt_ipc_handle) == PYGPU_IPC_HANDLE_BYTES, "the runtime's IPC handle is 64 bytes");

pygpu_status pygpu_rt_ipc_alloc(void **p, size_t n) { return pygpu_rt_malloc(p, n); }
pygpu_status pygpu_rt_ipc_free(void *p) { return pygpu_rt_free(p); }

pygpu_status pygpu_rt_ipc_handle(void *p, unsigned char h[PYGPU_IPC_HANDLE_BYTES])
{
    rt_ipc_handle handle;
    rt_error e = RT(IpcGetMemHandle)(&handle, p);
    if (e == RT(Success))
        memcpy(h, &handle, sizeof handle);
    return e;
}

pygpu_status pygpu_rt_ipc_open(const unsigned char h[PYGPU_IPC_HANDLE_BYTES], void **p)
{
    rt_ipc_handle handle;
    memcpy(&handle, h, sizeof handle);
    return RT(IpcOpenMemHandle)(p, handle, RT(IpcMemLazyEnablePeerAccess));
}

pygpu_status pygpu_rt_ipc_close(void *p) { return RT(IpcCloseMemHandle)(p); }

#if defined(PYGPU_BACKEND_CUDA)
typedef cudaIpcEventHandle_t rt_ipc_event_handle;
#else
typedef hipIpcEventHandle_t rt_ipc_event_handle;
#endif
_Static_assert(sizeof(rt_ipc_event_handle) == PYGPU_IPC_EVENT_HANDLE_BYTES, "the runtime's IPC event handle is 64 bytes");

pygpu_status pygpu_rt_ipc_event_handle(pygpu_event_t e, unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES])
{
    rt_ipc_event_handle handle;
    rt_error r = RT(IpcGetEventHandle)(&handle, E(e));
    if (r == RT(Success))
        memcpy(h, &handle, sizeof handle);
    return r;
}

pygpu_status pygpu_rt_ipc_event_open(const unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES], pygpu_event_t *e)
{
    rt_ipc_event_handle handle;
    rt_event ev = NULL;
    memcpy(&handle, h, sizeof handle);
    rt_error r = RT(IpcOpenEventHandle)(&ev, handle);
    *e = r == RT(Success) ? (pygpu_event_t)ev : NULL;
    return r;
}

/* ---- page-locked host memory ------------------------------------------ */

pygpu_status pygpu_rt_host_alloc(void **p, size_t n)
{
    capture_mode m = relax();
#if defined(PYGPU_BACKEND_CUDA)
    return unrelax(m, cudaHostAlloc(p, n, cudaHostAllocPortable));
#else
    return unrelax(m, hipHostMalloc(p, n, hipHostMallocPortable));
#endif
}

pygpu_status pygpu_rt_host_free(void *p)
{
    capture_mode m = relax();
#if defined(PYGPU_BACKEND_CUDA)
    return unrelax(m, cudaFreeHost(p));
#else
    return unrelax(m, hipHostFree(p));
#endif
}

pygpu_status pygpu_rt_host_pin(void **p, size_t n, int node, int *placement)
{
    void *at;
    *p = NULL;
    if (pygpu_pages_map(&at, n, PYGPU_PAGES_SHARED, node, placement) != 0)
        return RT(ErrorMemoryAllocation);
    capture_mode m = relax();
    rt_error r = RT(HostRegister)(at, pygpu_pages_bytes(n), RT(HostRegisterPortable) | RT(HostRegisterMapped));
    if (r != RT(Success))
        pygpu_pages_unmap(at, n);
    else
        *p = at;
    return unrelax(m, r);
}

pygpu_status pygpu_rt_host_unpin(void *p, size_t n)
{
    if (!p)
        return RT(Success);
    capture_mode m = relax();
    rt_error r = RT(HostUnregister)(p);
    pygpu_pages_unmap(p, n);
    return unrelax(m, r);
}

pygpu_status pygpu_rt_host_register(void *p, size_t n) { RELAXED(RT(HostRegister)(p, n, RT(HostRegisterPortable))); }
pygpu_status pygpu_rt_host_unregister(void *p) { RELAXED(RT(HostUnregister)(p)); }

/* 1 if the byte at p is page-locked; *mapped (if given): its address for
 * the device's kernels, or NULL where it has none. */
static int host_byte_pinned(const void *p, void **mapped)
{
#if defined(PYGPU_BACKEND_CUDA)
    struct cudaPointerAttributes a;
    rt_error e = cudaPointerGetAttributes(&a, p);
    int pinned = e == cudaSuccess && a.type == cudaMemoryTypeHost;
#else
    hipPointerAttribute_t a;
    rt_error e = hipPointerGetAttributes(&a, p);
    int pinned = e == hipSuccess && a.memoryType == hipMemoryTypeHost;
#endif
    if (e != RT(Success))
        RT(GetLastError)();     /* plain host memory is an error on some runtimes */
    if (mapped)
        *mapped = pinned ? a.devicePointer : NULL;
    return pinned;
}

pygpu_status pygpu_rt_host_is_pinned(const void *p, size_t n, int *pinned)
{
    *pinned = host_byte_pinned(p, NULL) && (n <= 1 || host_byte_pinned((const char *)p + n - 1, NULL));
    return RT(Success);
}

pygpu_status pygpu_rt_host_mapped(const void *p, size_t n, void **dev)
{
    if (host_byte_pinned(p, dev) && *dev && (n <= 1 || host_byte_pinned((const char *)p + n - 1, NULL)))
        return RT(Success);
    *dev = NULL;
    return RT(ErrorInvalidValue);
}

/* ---- copies ----------------------------------------------------------- */

static enum RT(MemcpyKind) kind_of(enum pygpu_copy_kind k)
{
    switch (k) {
    case PYGPU_COPY_H2D: return RT(MemcpyHostToDevice);
    case PYGPU_COPY_D2H: return RT(MemcpyDeviceToHost);
    case PYGPU_COPY_D2D: return RT(MemcpyDeviceToDevice);
    default:             return RT(MemcpyDefault);
    }
}

pygpu_status pygpu_rt_memcpy(void *dst, const void *src, size_t n, enum pygpu_copy_kind k)
{
    return RT(Memcpy)(dst, src, n, kind_of(k));
}

pygpu_status pygpu_rt_memcpy_async(void *dst, const void *src, size_t n,
                                   enum pygpu_copy_kind k, pygpu_stream_t s)
{
    return RT(MemcpyAsync)(dst, src, n, kind_of(k), S(s));
}

pygpu_status pygpu_rt_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum pygpu_copy_kind k,
                                     pygpu_stream_t s)
{
    return RT(Memcpy2DAsync)(dst, dpitch, src, spitch, width, height, kind_of(k), S(s));
}

pygpu_status pygpu_rt_memset_async(void *dst, int value, size_t n, pygpu_stream_t s)
{
    return RT(MemsetAsync)(dst, value, n, S(s));
}

/* ---- streams ---------------------------------------------------------- */

pygpu_status pygpu_rt_stream_create(pygpu_stream_t *s, unsigned flags, int priority)
{
    rt_stream h = NULL;
    unsigned f = (flags & PYGPU_STREAM_NON_BLOCKING) ? RT(StreamNonBlocking) : RT(StreamDefault);
    rt_error e = RT(StreamCreateWithPriority)(&h, f, priority);
    *s = (pygpu_stream_t)h;
    return e;
}

pygpu_status pygpu_rt_stream_destroy(pygpu_stream_t s) { return RT(StreamDestroy)(S(s)); }
pygpu_status pygpu_rt_stream_synchronize(pygpu_stream_t s) { RELAXED(RT(StreamSynchronize)(S(s))); }
pygpu_status pygpu_rt_stream_query(pygpu_stream_t s) { RELAXED(RT(StreamQuery)(S(s))); }

pygpu_status pygpu_rt_stream_capturing(pygpu_stream_t s, int *capturing)
{
    enum RT(StreamCaptureStatus) how = RT(StreamCaptureStatusNone);
    rt_error e = RT(StreamIsCapturing)(S(s), &how);
    *capturing = PYGPU_CAPTURE_NONE;
    if (e == RT(ErrorStreamCaptureImplicit)) {      /* (the answer, not a failure: nothing is left behind) */
        (void)RT(GetLastError)();
        *capturing = PYGPU_CAPTURE_IMPLICIT;
        return 0;
    }
    if (e == 0)
        *capturing = how == RT(StreamCaptureStatusActive) ? PYGPU_CAPTURE_ACTIVE
                   : how == RT(StreamCaptureStatusInvalidated) ? PYGPU_CAPTURE_INVALIDATED : PYGPU_CAPTURE_NONE;
    return e;
}

pygpu_status pygpu_rt_stream_begin_capture(pygpu_stream_t s, int mode)
{
    enum RT(StreamCaptureMode) m = mode == PYGPU_CAPTURE_MODE_RELAXED ? RT(StreamCaptureModeRelaxed)
                                 : mode == PYGPU_CAPTURE_MODE_THREAD_LOCAL ? RT(StreamCaptureModeThreadLocal)
                                 : RT(StreamCaptureModeGlobal);
    return RT(StreamBeginCapture)(S(s), m);
}

pygpu_status pygpu_rt_stream_end_capture(pygpu_stream_t s)
{
    RT(Graph_t) g = NULL;
    rt_error e = RT(StreamEndCapture)(S(s), &g);
    if (g)
        (void)RT(GraphDestroy)(g);
    return e;
}

pygpu_status pygpu_rt_stream_wait_event(pygpu_stream_t s, pygpu_event_t e)
{
    return RT(StreamWaitEvent)(S(s), E(e), 0);
}

#if defined(PYGPU_BACKEND_CUDA)
pygpu_status pygpu_rt_launch_host_func(pygpu_stream_t s, void (*fn)(void *), void *arg)
{
    return cudaLaunchHostFunc(S(s), fn, arg);
}
#else
/* HIP: hipLaunchHostFunc is missing from older libamdhip64 (5.x exports
 * hipStreamAddCallback only), whose callbacks take the stream and a status. */
typedef struct {
    void (*fn)(void *);
    void *arg;
} host_call;

static void run_host_call(hipStream_t s, hipError_t status, void *p)
{
    host_call c = *(host_call *)p;
    (void)s;
    (void)status;
    free(p);
    c.fn(c.arg);
}

pygpu_status pygpu_rt_launch_host_func(pygpu_stream_t s, void (*fn)(void *), void *arg)
{
    host_call *c = malloc(sizeof *c);
    if (!c)
        return hipErrorOutOfMemory;
    *c = (host_call){fn, arg};
    hipError_t r = hipStreamAddCallback(S(s), run_host_call, c, 0);
    if (r != hipSuccess)
        free(c);
    return r;
}
#endif

#if defined(PYGPU_BACKEND_CUDA)
/* The driver's cuStreamWaitValue32 and cuStreamWriteValue32 (their second
 * versions, which need no module parameter), found once through the
 * runtime's entry-point lookup: the runtime API has neither. */
typedef int (*value_op_fn)(rt_stream s, unsigned long long addr, uint32_t value, unsigned flags);
static value_op_fn wait_value, write_value;
static pthread_once_t value_ops_once = PTHREAD_ONCE_INIT;

static value_op_fn find_driver_fn(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#  if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#  else
    cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#  endif
    value_op_fn op = NULL;
    if (e == cudaSuccess && found == cudaDriverEntryPointSuccess && fn)
        *(void **)&op = fn;
    else
        (void)cudaGetLastError();
    return op;
}

static void find_value_ops(void)
{
    wait_value = find_driver_fn("cuStreamWaitValue32");
    write_value = find_driver_fn("cuStreamWriteValue32");
}

/* Flags 0: CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WRITE_VALUE_DEFAULT (the
 * writes before it visible first).  Page-locked memory has the same
 * address on every device (unified addressing).  A driver status is not
 * the runtime's: any failure reads "not supported". */
static pygpu_status value_op(value_op_fn *op, pygpu_stream_t s, const uint32_t *addr, uint32_t value)
{
    pthread_once(&value_ops_once, find_value_ops);
    if (!*op || (*op)(S(s), (unsigned long long)(uintptr_t)addr, value, 0) != 0)
        return cudaErrorNotSupported;
    return cudaSuccess;
}

pygpu_status pygpu_rt_stream_wait_value(pygpu_stream_t s, const uint32_t *addr, uint32_t value)
{
    return value_op(&wait_value, s, addr, value);
}

pygpu_status pygpu_rt_stream_write_value(pygpu_stream_t s, uint32_t *addr, uint32_t value)
{
    return value_op(&write_value, s, addr, value);
}
#else
/* HIP has hipStreamWaitValue32, still marked beta and not yet run on an
 * AMD GPU here: host functions gate the uploads there. */
pygpu_status pygpu_rt_stream_wait_value(pygpu_stream_t s, const uint32_t *addr, uint32_t value)
{
    (void)s;
    (void)addr;
    (void)value;
    return hipErrorNotSupported;
}

pygpu_status pygpu_rt_stream_write_value(pygpu_stream_t s, uint32_t *addr, uint32_t value)
{
    (void)s;
    (void)addr;
    (void)value;
    return hipErrorNotSupported;
}
#endif

pygpu_status pygpu_rt_stream_priority(pygpu_stream_t s, int *priority)
{
    return RT(StreamGetPriority)(S(s), priority);
}

pygpu_status pygpu_rt_stream_priority_range(int *least, int *greatest)
{
    return RT(DeviceGetStreamPriorityRange)(least, greatest);
}

/* ---- events ----------------------------------------------------------- */

pygpu_status pygpu_rt_event_create(pygpu_event_t *e, unsigned flags)
{
    rt_event h = NULL;
    unsigned f = RT(EventDefault);
    if (flags & PYGPU_EVENT_BLOCKING_SYNC)
        f |= RT(EventBlockingSync);
    if (flags & PYGPU_EVENT_DISABLE_TIMING)
        f |= RT(EventDisableTiming);
    if (flags & PYGPU_EVENT_INTERPROCESS)
        f |= RT(EventInterprocess);
    rt_error r = RT(EventCreateWithFlags)(&h, f);
    *e = (pygpu_event_t)h;
    return r;
}

pygpu_status pygpu_rt_event_destroy(pygpu_event_t e) { return RT(EventDestroy)(E(e)); }
pygpu_status pygpu_rt_event_record(pygpu_event_t e, pygpu_stream_t s) { return RT(EventRecord)(E(e), S(s)); }
pygpu_status pygpu_rt_event_synchronize(pygpu_event_t e) { RELAXED(RT(EventSynchronize)(E(e))); }
pygpu_status pygpu_rt_event_query(pygpu_event_t e) { RELAXED(RT(EventQuery)(E(e))); }

pygpu_status pygpu_rt_event_elapsed_ms(float *ms, pygpu_event_t start, pygpu_event_t end)
{
    return RT(EventElapsedTime)(ms, E(start), E(end));
}

/* ---- pointers ----------------------------------------------------------- */

pygpu_status pygpu_rt_pointer_device(const void *p, int *dev)
{
#if defined(PYGPU_BACKEND_CUDA)
    struct cudaPointerAttributes a;
#else
    hipPointerAttribute_t a;
#endif
    memset(&a, 0, sizeof a);
    *dev = -1;
    if (RT(PointerGetAttributes)(&a, p) != RT(Success)) {
        (void)RT(GetLastError)();   /* not memory the runtime knows */
        return 0;
    }
    if (a.devicePointer)
        *dev = a.device;
    return 0;
}

/* ---- peers -------------------------------------------------------------- */

const pygpu_status PYGPU_RT_PEER_UNSUPPORTED = (pygpu_status)RT(ErrorPeerAccessUnsupported);

pygpu_status pygpu_rt_can_access_peer(int dev, int peer, int *can)
{
    *can = 0;
    return RT(DeviceCanAccessPeer)(can, dev, peer);
}

/* Enabling and disabling peer access and a pool's grants (and asking for
 * them) are refused under a capture in global mode too, and break it
 * (tools/research/capture-peer.c): a pair's first use, beside another
 * library's capture, makes them relaxed. */
pygpu_status pygpu_rt_enable_peer_access(int peer)
{
    capture_mode m = relax();
    rt_error e = unrelax(m, RT(DeviceEnablePeerAccess)(peer, 0));
    if (e == RT(ErrorPeerAccessAlreadyEnabled)) {
        (void)RT(GetLastError)();
        return 0;
    }
    return e;
}

pygpu_status pygpu_rt_disable_peer_access(int peer)
{
    capture_mode m = relax();
    rt_error e = unrelax(m, RT(DeviceDisablePeerAccess)(peer));
    if (e == RT(ErrorPeerAccessNotEnabled)) {
        (void)RT(GetLastError)();
        return 0;
    }
    return e;
}

pygpu_status pygpu_rt_p2p_rank(int src, int dst, int *rank)
{
    *rank = 0;
    return RT(DeviceGetP2PAttribute)(rank, RT(DevP2PAttrPerformanceRank), src, dst);
}

static rt_error mempool_grant(int owner, int peer, int on)
{
    rt_mempool pool;
    rt_error e = RT(DeviceGetDefaultMemPool)(&pool, owner);
    if (e == RT(ErrorNotSupported)) {
        RT(GetLastError)();
        return RT(Success);         /* no pool: its memory is ordinary device memory */
    }
    if (e != RT(Success))
        return e;
#if defined(PYGPU_BACKEND_CUDA)
    struct cudaMemAccessDesc d = {0};
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = peer;
    d.flags = on ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
#else
    hipMemAccessDesc d = {0};
    d.location.type = hipMemLocationTypeDevice;
    d.location.id = peer;
    d.flags = on ? hipMemAccessFlagsProtReadWrite : hipMemAccessFlagsProtNone;
#endif
    return RT(MemPoolSetAccess)(pool, &d, 1);
}

pygpu_status pygpu_rt_mempool_grant(int owner, int peer, int on) { RELAXED(mempool_grant(owner, peer, on)); }

static rt_error mempool_access(int owner, int peer, int *on)
{
    rt_mempool pool;
    *on = 0;
    rt_error e = RT(DeviceGetDefaultMemPool)(&pool, owner);
    if (e == RT(ErrorNotSupported)) {
        RT(GetLastError)();
        return RT(Success);
    }
    if (e != RT(Success))
        return e;
#if defined(PYGPU_BACKEND_CUDA)
    struct cudaMemLocation where = {0};
    enum cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    where.type = cudaMemLocationTypeDevice;
#else
    hipMemLocation where = {0};
    hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
    where.type = hipMemLocationTypeDevice;
#endif
    where.id = peer;
    e = RT(MemPoolGetAccess)(&flags, pool, &where);
    *on = e == RT(Success) && flags == RT(MemAccessFlagsProtReadWrite);
    return e;
}

pygpu_status pygpu_rt_mempool_access(int owner, int peer, int *on) { RELAXED(mempool_access(owner, peer, on)); }

pygpu_status pygpu_rt_memcpy_peer_async(void *dst, int ddev, const void *src, int sdev, size_t n,
                                        pygpu_stream_t s)
{
    return RT(MemcpyPeerAsync)(dst, ddev, src, sdev, n, S(s));
}
