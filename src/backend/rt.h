/*
 * rt.h -- the one vendor-neutral runtime interface.
 *
 * Everything above src/backend/ talks to the device through these calls;
 * rt_gpu.c implements them with the CUDA or HIP runtime API (chosen at build
 * time), rt_host.c with host memory.  This layer is pure C: every function
 * returns a status code (0 is success; otherwise the vendor's own error
 * number) and never touches Python error state.  Names and messages for a
 * status come from pygpu_rt_error_name/_string.
 */
#ifndef PYGPU_BACKEND_RT_H
#define PYGPU_BACKEND_RT_H

#include <stddef.h>
#include <stdint.h>

typedef int pygpu_status;           /* 0: success, else the vendor's code */
typedef void *pygpu_stream_t;       /* cudaStream_t / hipStream_t / host stream */
typedef void *pygpu_event_t;

/* The two special stream handles every runtime understands. */
#define PYGPU_STREAM_NULL       ((pygpu_stream_t)0)  /* legacy default stream */
#define PYGPU_STREAM_PER_THREAD ((pygpu_stream_t)2)  /* per-thread default stream */

enum pygpu_stream_flags { PYGPU_STREAM_NON_BLOCKING = 1 };

enum pygpu_event_flags {
    PYGPU_EVENT_BLOCKING_SYNC = 1,
    PYGPU_EVENT_DISABLE_TIMING = 2,
    PYGPU_EVENT_INTERPROCESS = 4,
};

enum pygpu_copy_kind {          /* direction of a copy, as the runtimes name it */
    PYGPU_COPY_H2D,
    PYGPU_COPY_D2H,
    PYGPU_COPY_D2D,
    PYGPU_COPY_DEFAULT,         /* inferred from the pointers (unified addressing) */
};

typedef struct {
    char name[256];
    int cc_major, cc_minor;
    size_t total_memory;
    int multiprocessor_count;
    char pci_bus_id[32];        /* "dddd:bb:dd.f" */
    unsigned char uuid[16];
} pygpu_device_props;

/* What this build is: "cuda", "hip" or "host". */
const char *pygpu_rt_vendor(void);
/* Runtime and driver versions as the vendor encodes them (0 for host). */
pygpu_status pygpu_rt_runtime_version(int *v);
pygpu_status pygpu_rt_driver_version(int *v);
/* The runtime version the backend was compiled against (0 on host): known
 * without loading the driver, so the import can judge the driver first. */
int pygpu_rt_built_version(void);

/* Status codes: names, messages, and the few the upper layers must know. */
const char *pygpu_rt_error_name(pygpu_status s);
const char *pygpu_rt_error_string(pygpu_status s);
int pygpu_rt_is_out_of_memory(pygpu_status s);
int pygpu_rt_is_not_ready(pygpu_status s);
/* 1 for the errors that leave the device context unusable (an illegal
 * address or a failed launch in a kernel): every later call fails too. */
int pygpu_rt_is_sticky(pygpu_status s);
extern const pygpu_status PYGPU_RT_INVALID_VALUE;   /* the vendor's "invalid value" */
extern const pygpu_status PYGPU_RT_OUT_OF_MEMORY;   /* and its "out of memory" */
/* What a status that means "no usable device" says about this machine:
 * no driver at all, a driver too old for this runtime (both versions
 * named), or a driver that sees no device.  Writes one sentence into buf
 * (size n) and returns buf, or returns NULL for any other status. */
const char *pygpu_rt_diagnose(pygpu_status s, char *buf, size_t n);
/* Return and clear the runtime's last (non-sticky) error. */
pygpu_status pygpu_rt_get_last_error(void);
pygpu_status pygpu_rt_peek_last_error(void);

/* Devices.  The current device is per host thread, as in the runtimes. */
pygpu_status pygpu_rt_device_count(int *n);
pygpu_status pygpu_rt_get_device(int *dev);
pygpu_status pygpu_rt_set_device(int dev);
pygpu_status pygpu_rt_device_synchronize(void);
pygpu_status pygpu_rt_device_reset(void);
pygpu_status pygpu_rt_device_props(int dev, pygpu_device_props *p);
/* *node: the host's NUMA node that device `dev` hangs off, or -1 where the
 * host tells none (one node, or no sysfs); the host backend's devices are
 * on the nodes PYGPU_HOST_NUMA lists, else on none. */
pygpu_status pygpu_rt_device_numa_node(int dev, int *node);
pygpu_status pygpu_rt_mem_get_info(size_t *free_bytes, size_t *total_bytes);

/* Device memory.  malloc_async takes from the stream-ordered pool when the
 * device has one and sets *pooled; otherwise it allocates synchronously
 * and clears *pooled.  Free with free_async(p, s) if pooled, else free(p). */
pygpu_status pygpu_rt_malloc(void **p, size_t n);
pygpu_status pygpu_rt_malloc_async(void **p, size_t n, pygpu_stream_t s, int *pooled);
pygpu_status pygpu_rt_free(void *p);
pygpu_status pygpu_rt_free_async(void *p, pygpu_stream_t s);
/* From the pool of device `dev`, which need not be current, ordered on `s`
 * (a stream of the current device): free it with free_async on a stream
 * of `dev`.  Where that pool is not known yet (no allocation on `dev` has
 * found it) or `n` is 0, nothing: *p NULL, *pooled 0 and success. */
pygpu_status pygpu_rt_malloc_on_async(void **p, size_t n, int dev, pygpu_stream_t s, int *pooled);
pygpu_status pygpu_rt_mempool_trim(int dev, size_t keep_bytes);
/* 1 if allocating costs next to nothing (the host backend), so that the
 * upper layers keep no cache of freed blocks in front of it. */
int pygpu_rt_alloc_is_cheap(void);

/* Memory other processes can map (the runtimes' IPC handles).  ipc_alloc
 * allocates `n` bytes on the current device outside the pool (pool memory
 * has no such handle); free it with ipc_free.  ipc_handle writes the
 * handle of such an allocation (its base address `p`) into `h`; another
 * process opens it with ipc_open, which maps the memory there and sets *p
 * (on the device current when it is called, with peer access enabled as
 * needed), and unmaps it with ipc_close.  A process cannot open its own
 * handles (the runtimes' rule: it has the memory already). */
#define PYGPU_IPC_HANDLE_BYTES 64
pygpu_status pygpu_rt_ipc_alloc(void **p, size_t n);
pygpu_status pygpu_rt_ipc_free(void *p);
pygpu_status pygpu_rt_ipc_handle(void *p, unsigned char h[PYGPU_IPC_HANDLE_BYTES]);
pygpu_status pygpu_rt_ipc_open(const unsigned char h[PYGPU_IPC_HANDLE_BYTES], void **p);
pygpu_status pygpu_rt_ipc_close(void *p);

/* Events other processes can wait for: ipc_event_handle writes the handle
 * of an event made with PYGPU_EVENT_INTERPROCESS and
 * PYGPU_EVENT_DISABLE_TIMING into `h`; another process opens it with
 * ipc_event_open, an event of its own (timing off, freed with
 * event_destroy) that it may wait for, query or record.  HIP refuses a
 * process its own, and so does the host backend. */
#define PYGPU_IPC_EVENT_HANDLE_BYTES 64
pygpu_status pygpu_rt_ipc_event_handle(pygpu_event_t e, unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES]);
pygpu_status pygpu_rt_ipc_event_open(const unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES], pygpu_event_t *e);

/* Page-locked host memory. */
pygpu_status pygpu_rt_host_alloc(void **p, size_t n);
pygpu_status pygpu_rt_host_free(void *p);
/* Page-locked host memory of n bytes made in two steps, so that the
 * runtime is held only for the second: anonymous pages faulted in by the
 * caller (pages.c: shared, a fork's child reading them as it reads
 * host_alloc's; the host backend's private, its child going on with them),
 * preferring NUMA node `node` (-1: the system's choice), then registered
 * (portable, mapped); *placement says how the pages were placed
 * (pages.h: PYGPU_PAGES_PLACED, PYGPU_PAGES_UNPLACED where no node was
 * asked, or the errno of the kernel's refusal).  The runtime's own
 * allocation holds every other thread's runtime calls for all of its
 * time; this takes the caller 1.2-1.4 times as long, and the others wait
 * only while the pages are registered, a twentieth of it
 * (tools/research/lock-ways.c, docs/performance.md#pinned-pool).  Freed by
 * host_unpin with the same n; the host backend's are the same pages,
 * unregistered. */
pygpu_status pygpu_rt_host_pin(void **p, size_t n, int node, int *placement);
pygpu_status pygpu_rt_host_unpin(void *p, size_t n);
pygpu_status pygpu_rt_host_register(void *p, size_t n);
pygpu_status pygpu_rt_host_unregister(void *p);
/* *pinned = 1 if the `n` bytes at `p` are page-locked (allocated or registered
 * with the runtime), asked at both ends: a copy that begins in page-locked
 * memory and runs past it is one the runtime refuses. */
pygpu_status pygpu_rt_host_is_pinned(const void *p, size_t n, int *pinned);
/* *dev: the address at which the device's kernels reach the `n` bytes of
 * page-locked host memory at `p` (over the bus); an invalid value where
 * they are not all page-locked or not mapped for the device. */
pygpu_status pygpu_rt_host_mapped(const void *p, size_t n, void **dev);

/* Copies and fills, ordered on a stream; the plain forms block the host. */
pygpu_status pygpu_rt_memcpy(void *dst, const void *src, size_t n, enum pygpu_copy_kind k);
pygpu_status pygpu_rt_memcpy_async(void *dst, const void *src, size_t n,
                                   enum pygpu_copy_kind k, pygpu_stream_t s);
/* `height` rows of `width` bytes, rows `dpitch`/`spitch` bytes apart
 * (pitches >= width). */
pygpu_status pygpu_rt_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum pygpu_copy_kind k,
                                     pygpu_stream_t s);
pygpu_status pygpu_rt_memset_async(void *dst, int value, size_t n, pygpu_stream_t s);

/* Streams. */
pygpu_status pygpu_rt_stream_create(pygpu_stream_t *s, unsigned flags, int priority);
pygpu_status pygpu_rt_stream_destroy(pygpu_stream_t s);
pygpu_status pygpu_rt_stream_synchronize(pygpu_stream_t s);
pygpu_status pygpu_rt_stream_query(pygpu_stream_t s);   /* 0 done, not-ready pending */
/* Whether work queued on stream s (of the current device) would be
 * captured into a graph rather than run: *capturing = PYGPU_CAPTURE_NONE,
 * _ACTIVE (a capture records it), _INVALIDATED (a capture that failed and
 * has not ended), or _IMPLICIT (s is the legacy stream while a stream that
 * waits for it is being captured: using it would break that capture).
 * The host backend's streams (all but the default ones) say _ACTIVE while
 * PYGPU_HOST_CAPTURE=1. */
enum pygpu_capture { PYGPU_CAPTURE_NONE, PYGPU_CAPTURE_ACTIVE, PYGPU_CAPTURE_INVALIDATED, PYGPU_CAPTURE_IMPLICIT };
pygpu_status pygpu_rt_stream_capturing(pygpu_stream_t s, int *capturing);
/* Begin a capture of stream s in `mode`, and end it (its graph
 * discarded): for the tests of what PyGPU's calls do under a capture
 * (PyGPU begins none of its own).  The host backend keeps the streams
 * being captured in a table that stream_capturing reads, and its
 * stream-ordered allocations note whether a capture made them: freeing
 * one that it did not on a stream being captured is refused with invalid
 * value, as CUDA refuses it (a free node must free the graph's own). */
enum pygpu_capture_mode { PYGPU_CAPTURE_MODE_GLOBAL, PYGPU_CAPTURE_MODE_THREAD_LOCAL, PYGPU_CAPTURE_MODE_RELAXED };
pygpu_status pygpu_rt_stream_begin_capture(pygpu_stream_t s, int mode);
pygpu_status pygpu_rt_stream_end_capture(pygpu_stream_t s);
/* Put the calling thread (one of PyGPU's own) in relaxed capture mode for
 * good: the calls that a capture elsewhere in global mode would refuse
 * (allocations, frees, page-locking, waits and queries) then go through
 * from it, as rt_gpu.c makes them from any thread, at no cost there.  The
 * host backend refuses nothing: a no-op. */
void pygpu_rt_thread_relax(void);
/* Queue host function fn(arg) on stream s: it runs once the work queued
 * before it is done, and the work queued after it waits for it to return.
 * fn must make no runtime call (the host runtime runs it at once). */
pygpu_status pygpu_rt_launch_host_func(pygpu_stream_t s, void (*fn)(void *), void *arg);
pygpu_status pygpu_rt_stream_wait_event(pygpu_stream_t s, pygpu_event_t e);
/* Queue on stream s a wait until the 32-bit counter at `addr` (in
 * page-locked memory, raised by the host) is at least `value`: the work
 * queued after it starts only then.  Cheaper for the device than a host
 * function, which it must run and wait for.  Nonzero where the device or
 * the runtime has no such wait: nothing was queued then. */
pygpu_status pygpu_rt_stream_wait_value(pygpu_stream_t s, const uint32_t *addr, uint32_t value);
/* Queue on stream s a write of `value` to the 32-bit counter at `addr`
 * (in page-locked memory, read by the host): done once the work queued
 * before it is, and after its writes.  Nonzero where the device or the
 * runtime has no such write (where it has no wait): nothing was queued. */
pygpu_status pygpu_rt_stream_write_value(pygpu_stream_t s, uint32_t *addr, uint32_t value);
pygpu_status pygpu_rt_stream_priority(pygpu_stream_t s, int *priority);
pygpu_status pygpu_rt_stream_priority_range(int *least, int *greatest);

/* Events. */
pygpu_status pygpu_rt_event_create(pygpu_event_t *e, unsigned flags);
pygpu_status pygpu_rt_event_destroy(pygpu_event_t e);
pygpu_status pygpu_rt_event_record(pygpu_event_t e, pygpu_stream_t s);
pygpu_status pygpu_rt_event_synchronize(pygpu_event_t e);
pygpu_status pygpu_rt_event_query(pygpu_event_t e);     /* 0 done, not-ready pending */
pygpu_status pygpu_rt_event_elapsed_ms(float *ms, pygpu_event_t start, pygpu_event_t end);

/* The device whose kernels can address `p` (device, managed or registered
 * host memory), or *dev = -1 when none can (plain host memory, or an
 * address the runtime does not know). */
pygpu_status pygpu_rt_pointer_device(const void *p, int *dev);

/* Peer access between devices.  *can = 1 if `dev` can address `peer`'s
 * memory directly.  enable_peer_access lets the current device address
 * `peer`'s memory (already enabled is success). */
pygpu_status pygpu_rt_can_access_peer(int dev, int peer, int *can);
pygpu_status pygpu_rt_enable_peer_access(int peer);
pygpu_status pygpu_rt_disable_peer_access(int peer);
/* *rank = the runtime's relative performance of the link from device `src`
 * to `dst` (its P2P performance rank: lower is faster, 0 the best link of
 * the machine).  The runtime's "invalid device" for a device and itself or
 * an ordinal out of range. */
pygpu_status pygpu_rt_p2p_rank(int src, int dst, int *rank);
/* Let device `peer` read and write the memory of device `owner`'s
 * stream-ordered pool (on = 1), or take that back (on = 0).  Peer access
 * does not reach pool memory: without this grant the runtime stages every
 * copy between the two pools through host memory.  Success where `owner`
 * has no pool (nothing to grant). */
pygpu_status pygpu_rt_mempool_grant(int owner, int peer, int on);
/* *on = 1 if device `peer` may read and write `owner`'s pool (0 also
 * where `owner` has no pool). */
pygpu_status pygpu_rt_mempool_access(int owner, int peer, int *on);
/* `n` bytes from `src` on device `sdev` to `dst` on device `ddev`, ordered
 * on `s` (direct when peer access is enabled, else the runtime stages it). */
pygpu_status pygpu_rt_memcpy_peer_async(void *dst, int ddev, const void *src, int sdev, size_t n,
                                        pygpu_stream_t s);
extern const pygpu_status PYGPU_RT_PEER_UNSUPPORTED; /* the vendor's "peer access unsupported" */

/* PyGPU's own kernels (src/kernels/): layout copies, casts and fills of
 * device memory.  Users get no launch API; the copy planner alone calls
 * these.  kernels_ready makes them ready on the current device (loading
 * them the first time) and says whether they can run there: 0, or the
 * status of the failure, the same at every later call on that device (the
 * planner then takes the host path).  kernels_origin says in words where
 * they come from in this build ("sm_80 sm_90 machine code, PTX for
 * compute_75", or why there are none). */
enum pygpu_kernel {
    PYGPU_KERNEL_COPY,          /* `variant`: the element size, 1 2 4 8 or 16 */
    PYGPU_KERNEL_TRANSPOSE,     /* the same */
    PYGPU_KERNEL_FILL,          /* the same */
    PYGPU_KERNEL_CAST,          /* `variant`: the source type (enum pygpu_ktype) */
};
struct pygpu_kargs_s;
pygpu_status pygpu_rt_kernels_ready(void);
const char *pygpu_rt_kernels_origin(void);
/* Queue kernel `k` on stream `s` of the current device, over the argument
 * block `a` (src/kernels/kernels.h: a pygpu_kargs, n < 2^31 elements, or
 * tiles for the transpose).  After kernels_ready returned 0. */
pygpu_status pygpu_rt_launch(enum pygpu_kernel k, int variant, const struct pygpu_kargs_s *a, pygpu_stream_t s);

#endif /* PYGPU_BACKEND_RT_H */
