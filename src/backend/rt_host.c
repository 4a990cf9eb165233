/*
 * rt_host.c -- the runtime interface on host memory.
 *
 * Device memory is host memory and every operation really happens, at once,
 * so streams run in order and events carry the time they were recorded.
 * Statuses use the CUDA runtime's numbers and names, so code that checks
 * them (and the original PyGPU's cudaError_t objects) behaves the same on
 * machines without a GPU.
 *
 * Environment (read by env.c; docs/environment.md): PYGPU_HOST_DEVICES
 * (how many devices to present), PYGPU_HOST_MEMORY (bytes of "device
 * memory"; allocations past it fail as out of memory), PYGPU_HOST_POOL (bytes the pool of freed
 * large blocks may hold; see "memory" below), PYGPU_HOST_WAIT_VALUE (0:
 * streams have no wait on a counter, nor write of one, so that background
 * uploads are gated by host functions and no transfer goes through a
 * ring), PYGPU_HOST_CAPTURE (1: every stream but the default ones reports that a graph
 * capture records its work, so that the refusals are tested),
 * PYGPU_HOST_FAIL_COPY (a copy that fails, for tests) and PYGPU_HOST_NUMA
 * (the NUMA node each device reports, so that placement is tested).  Peer
 * access between the devices, and their pools' grants, are peer_host.c's;
 * events are events_host.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt.h"
#include "host_shared.h"
#include "captured_host.h"
#include "locked_host.h"
#include "env.h"
#include "forklock.h"
#include "pages.h"
#include "tuning.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static const struct { int code; const char *name, *text; } host_errors[] = {
    {H_SUCCESS, "cudaSuccess", "no error"},
    {H_INVALID_VALUE, "cudaErrorInvalidValue", "invalid argument"},
    {H_MEMORY_ALLOCATION, "cudaErrorMemoryAllocation", "out of memory"},
    {H_INVALID_DEVICE, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {H_PEER_UNSUPPORTED, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {H_INVALID_HANDLE, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {H_NOT_READY, "cudaErrorNotReady", "device not ready"},
    {H_HOST_NOT_REGISTERED, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {H_NOT_SUPPORTED, "cudaErrorNotSupported", "operation not supported"},
    {H_CAPTURE_UNSUPPORTED, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {H_CAPTURE_INVALIDATED, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {H_CAPTURE_IMPLICIT, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {H_UNKNOWN, "cudaErrorUnknown", "unknown error"},
};

const pygpu_status PYGPU_RT_INVALID_VALUE = H_INVALID_VALUE;
const pygpu_status PYGPU_RT_OUT_OF_MEMORY = H_MEMORY_ALLOCATION;

const char *pygpu_rt_vendor(void) { return "host"; }
pygpu_status pygpu_rt_runtime_version(int *v) { *v = 0; return H_SUCCESS; }
pygpu_status pygpu_rt_driver_version(int *v) { *v = 0; return H_SUCCESS; }
int pygpu_rt_built_version(void) { return 0; }

const char *pygpu_rt_error_name(pygpu_status s)
{
    for (size_t i = 0; i < sizeof host_errors / sizeof host_errors[0]; i++)
        if (host_errors[i].code == s)
            return host_errors[i].name;
    return "cudaErrorUnknown";
}

const char *pygpu_rt_error_string(pygpu_status s)
{
    for (size_t i = 0; i < sizeof host_errors / sizeof host_errors[0]; i++)
        if (host_errors[i].code == s)
            return host_errors[i].text;
    return "unrecognized error code";
}

int pygpu_rt_is_out_of_memory(pygpu_status s) { return s == H_MEMORY_ALLOCATION; }
int pygpu_rt_is_not_ready(pygpu_status s) { return s == H_NOT_READY; }
int pygpu_rt_is_sticky(pygpu_status s) { (void)s; return 0; }   /* no kernels here */

const char *pygpu_rt_diagnose(pygpu_status s, char *buf, size_t n)
{
    (void)s, (void)buf, (void)n;
    return NULL;                    /* the host backend always has its devices */
}

/* The last error, per thread, as the runtimes keep it. */
static _Thread_local pygpu_status last_error;

pygpu_status pygpu_host_fail(pygpu_status s)
{
    last_error = s;
    return s;
}

static pygpu_status fail(pygpu_status s) { return pygpu_host_fail(s); }

pygpu_status pygpu_rt_get_last_error(void)
{
    pygpu_status s = last_error;
    last_error = H_SUCCESS;
    return s;
}

pygpu_status pygpu_rt_peek_last_error(void) { return last_error; }

/* ---- configuration, read once ----------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int n_devices = 1;
static int wait_value_ok = 1;
static int capture_all;                 /* PYGPU_HOST_CAPTURE=1: every stream but the default ones reports a capture */
/* PYGPU_HOST_FAIL_COPY=B:K: the K-th stream-ordered copy of exactly B
 * bytes fails (K = 0 or none: every one), so that tests can fail a
 * transfer part way. */
static size_t fail_copy_bytes;
static long fail_copy_nth;
static atomic_long fail_copy_seen;
static size_t memory_limit;             /* 0: the physical memory */
static atomic_size_t memory_in_use;
static size_t pool_limit;               /* bytes the pool of freed blocks may hold */
static size_t locked_limit;             /* bytes host_register may hold at once (0: no limit) */

static void read_pool_config(void);

static void read_config(void)
{
    const pygpu_env *env = pygpu_env_get();
    n_devices = env->host_devices;
    memory_limit = env->host_memory;
    wait_value_ok = env->host_wait_value;
    capture_all = env->host_capture ? PYGPU_CAPTURE_ACTIVE : PYGPU_CAPTURE_NONE;
    fail_copy_bytes = env->host_fail_copy_bytes;
    fail_copy_nth = env->host_fail_copy_nth;
    locked_limit = env->host_locked;
    read_pool_config();
}


static size_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}

static void config(void) { pthread_once(&config_once, read_config); }

static size_t total_memory(void)
{
    config();
    return memory_limit ? memory_limit : physical_memory();
}

/* ---- devices ---------------------------------------------------------- */

static _Thread_local int current_device;

pygpu_status pygpu_rt_device_count(int *n)
{
    config();
    *n = n_devices;
    return H_SUCCESS;
}

pygpu_status pygpu_rt_get_device(int *dev)
{
    *dev = current_device;
    return H_SUCCESS;
}

pygpu_status pygpu_rt_set_device(int dev)
{
    config();
    if (dev < 0 || dev >= n_devices)
        return fail(H_INVALID_DEVICE);
    current_device = dev;
    return H_SUCCESS;
}

/* As the runtime: refused while any stream is being captured, and every
 * such capture broken (its end then fails). */
pygpu_status pygpu_rt_device_synchronize(void)
{
    return pygpu_captured_break_all() > 0 ? fail(H_CAPTURE_UNSUPPORTED) : H_SUCCESS;
}
pygpu_status pygpu_rt_device_reset(void) { return H_SUCCESS; }

pygpu_status pygpu_rt_device_props(int dev, pygpu_device_props *p)
{
    config();
    if (dev < 0 || dev >= n_devices)
        return fail(H_INVALID_DEVICE);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "PyGPU host device %d (CPU memory)", dev);
    p->total_memory = total_memory();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->multiprocessor_count = cpus > 0 ? (int)cpus : 1;
    snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "0000:00:%02x.0", dev);
    memcpy(p->uuid, "pygpu-host-dev", 14);
    p->uuid[15] = (unsigned char)dev;
    return H_SUCCESS;
}

pygpu_status pygpu_rt_device_numa_node(int dev, int *node)
{
    config();
    *node = -1;
    if (dev < 0 || dev >= n_devices)
        return fail(H_INVALID_DEVICE);
    *node = pygpu_env_get()->host_numa[dev];
    return H_SUCCESS;
}

pygpu_status pygpu_rt_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    size_t total = total_memory(), used = atomic_load(&memory_in_use);
    *total_bytes = total;
    *free_bytes = used < total ? total - used : 0;
    if (!memory_limit) {
        long avail = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        if (avail > 0 && size > 0 && (size_t)avail * (size_t)size < *free_bytes)
            *free_bytes = (size_t)avail * (size_t)size;
    }
    return H_SUCCESS;
}

/* ---- memory ----------------------------------------------------------- */

/* Each block carries a header: the bytes asked for (what memory_in_use
 * counts), whether they are counted, and the bytes the block holds; the
 * header keeps the 256-byte alignment that the GPU runtimes give. */
#define HEADER 256

/* The pool: freed device blocks of PYGPU_HOST_POOL_MIN bytes or more, kept
 * for the next allocation of about their size, as the GPU runtimes'
 * stream-ordered pools keep theirs.  glibc reuses smaller blocks from its
 * heaps by itself; larger ones (past its mmap threshold, 128 KiB rising to
 * 32 MiB) it maps at every malloc and unmaps at every free, so that each
 * to_gpu() of a big array took fresh pages and paid their faults
 * (docs/performance.md#host-pool).  Raising M_MMAP_THRESHOLD with mallopt
 * would do it too, but for the whole process (NumPy's and Python's
 * allocations as well), and freed heap memory goes back to the system only
 * from the heap's top; a short list of our own blocks is bounded, ours
 * alone, and trimmed on demand.  Bounds: PYGPU_HOST_POOL_SLOTS blocks and
 * pool_limit bytes (PYGPU_HOST_POOL, default PYGPU_HOST_POOL_DEFAULT but at
 * most a quarter of the "device memory"; 0 turns the pool off), and live
 * plus pooled memory stays within PYGPU_HOST_MEMORY.  Pooled bytes count as
 * free in mem_get_info(), since the next allocation takes them;
 * trim_memory_pool() frees them. */

static pygpu_forklock pool_lock = PYGPU_FORKLOCK_INIT;
static struct { void *base; size_t cap; } pool[PYGPU_HOST_POOL_SLOTS];    /* oldest first */
static int pool_n;
static size_t pool_bytes;

/* Configured once: the pool's byte bound. */
static void read_pool_config(void)
{
    size_t quarter = (memory_limit ? memory_limit : physical_memory()) / 4;
    pool_limit = pygpu_env_get()->host_pool;
    if (pool_limit > quarter)
        pool_limit = quarter;
}

/* The pooled block that best fits n bytes (at most n/PYGPU_HOST_POOL_FIT
 * more), taken out of the pool; NULL if none fits.  *cap gets its size. */
static void *pool_take(size_t n, size_t *cap)
{
    void *base = NULL;
    int best = -1;
    pygpu_forklock_lock(&pool_lock);
    for (int i = 0; i < pool_n; i++)
        if (pool[i].cap >= n && pool[i].cap - n <= n / PYGPU_HOST_POOL_FIT &&
            (best < 0 || pool[i].cap < pool[best].cap))
            best = i;
    if (best >= 0) {
        base = pool[best].base;
        *cap = pool[best].cap;
        pool_bytes -= *cap;
        memmove(&pool[best], &pool[best + 1], (size_t)(pool_n - best - 1) * sizeof pool[0]);
        pool_n--;
    }
    pygpu_forklock_unlock(&pool_lock);
    return base;
}

/* Take the oldest blocks out until the pool holds at most `keep` bytes and
 * has a free slot if `slot`; they go to out[] (PYGPU_HOST_POOL_SLOTS long), to be freed
 * outside the lock.  Returns how many.  Call with the lock held. */
static int pool_evict_locked(size_t keep, int slot, void **out)
{
    int k = 0;
    while (pool_n > 0 && (pool_bytes > keep || (slot && pool_n == PYGPU_HOST_POOL_SLOTS))) {
        out[k++] = pool[0].base;
        pool_bytes -= pool[0].cap;
        memmove(&pool[0], &pool[1], (size_t)(pool_n - 1) * sizeof pool[0]);
        pool_n--;
    }
    return k;
}

static void free_all(void **bases, int k)
{
    for (int i = 0; i < k; i++)
        free(bases[i]);
}

/* Shrink the pool to at most keep_bytes, freeing the oldest blocks. */
static void pool_trim(size_t keep_bytes)
{
    void *out[PYGPU_HOST_POOL_SLOTS];
    pygpu_forklock_lock(&pool_lock);
    int k = pool_evict_locked(keep_bytes, 0, out);
    pygpu_forklock_unlock(&pool_lock);
    free_all(out, k);
}

/* Keep a freed block of `cap` bytes for reuse: 1 if kept, 0 if the caller
 * must free it (past the pool's bounds). */
static int pool_give(void *base, size_t cap)
{
    void *out[PYGPU_HOST_POOL_SLOTS];
    int kept = 0, k = 0;
    size_t total = total_memory(), live = atomic_load(&memory_in_use);
    size_t room = pool_limit;
    if (total - live < room)        /* live <= total: allocations are checked against it */
        room = total - live;
    pygpu_forklock_lock(&pool_lock);
    if (cap <= room) {
        k = pool_evict_locked(room - cap, 1, out);
        pool[pool_n].base = base;
        pool[pool_n].cap = cap;
        pool_n++;
        pool_bytes += cap;
        kept = 1;
    }
    pygpu_forklock_unlock(&pool_lock);
    free_all(out, k);
    return kept;
}

int pygpu_host_reserve(size_t n, size_t *left)
{
    size_t limit = total_memory();
    size_t used = atomic_fetch_add(&memory_in_use, n);
    if (used + n > limit || used + n < used) {
        atomic_fetch_sub(&memory_in_use, n);
        return 0;
    }
    if (left)
        *left = limit - (used + n);
    return 1;
}

void pygpu_host_release(size_t n) { atomic_fetch_sub(&memory_in_use, n); }

static pygpu_status block_alloc(void **p, size_t n, int counted)
{
    void *base = NULL;
    size_t cap = n;
    *p = NULL;
    if (n == 0)
        return H_SUCCESS;
    if (n > SIZE_MAX - HEADER - PYGPU_HOST_POOL_GRAIN)
        return fail(H_MEMORY_ALLOCATION);
    if (counted) {
        size_t left;
        if (!pygpu_host_reserve(n, &left))
            return fail(H_MEMORY_ALLOCATION);
        if (n >= PYGPU_HOST_POOL_MIN && pool_limit) {
            cap = (n + PYGPU_HOST_POOL_GRAIN - 1) / PYGPU_HOST_POOL_GRAIN * PYGPU_HOST_POOL_GRAIN;
            base = pool_take(n, &cap);
            if (!base)
                pool_trim(left);        /* live and pooled within the limit */
        }
    }
    if (!base && posix_memalign(&base, HEADER, HEADER + cap) != 0) {
        pool_trim(0);               /* the system is short: give the pool back, try once more */
        if (posix_memalign(&base, HEADER, HEADER + cap) != 0) {
            if (counted)
                pygpu_host_release(n);
            return fail(H_MEMORY_ALLOCATION);
        }
    }
    ((size_t *)base)[0] = n;
    ((size_t *)base)[1] = (size_t)counted;
    ((size_t *)base)[2] = cap;
    ((size_t *)base)[3] = 0;            /* (not a capture's: malloc_async) */
    *p = (char *)base + HEADER;
    return H_SUCCESS;
}

static pygpu_status block_free(void *p)
{
    if (!p)
        return H_SUCCESS;
    size_t *base = (size_t *)((char *)p - HEADER);
    int counted = base[1] != 0;
    if (counted)
        pygpu_host_release(base[0]);
    if (!(counted && base[0] >= PYGPU_HOST_POOL_MIN && pool_give(base, base[2])))
        free(base);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_malloc(void **p, size_t n) { config(); return block_alloc(p, n, 1); }
pygpu_status pygpu_rt_free(void *p) { return block_free(p); }

/* Whether stream s is being captured (the host's graph allocations:
 * below). */
static int capturing_now(pygpu_stream_t s)
{
    int how = PYGPU_CAPTURE_NONE;
    (void)pygpu_rt_stream_capturing(s, &how);
    return how != PYGPU_CAPTURE_NONE;
}

/* A block's header notes whether a capture allocated it (word 3), as a
 * graph's allocation is the only memory a free on a stream being captured
 * may take. */
pygpu_status pygpu_rt_malloc_async(void **p, size_t n, pygpu_stream_t s, int *pooled)
{
    *pooled = 1;
    *p = NULL;
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    config();
    pygpu_status r = block_alloc(p, n, 1);
    if (r == H_SUCCESS && *p)
        ((size_t *)((char *)*p - HEADER))[3] = (size_t)capturing_now(s);
    return r;
}

pygpu_status pygpu_rt_malloc_on_async(void **p, size_t n, int dev, pygpu_stream_t s, int *pooled)
{
    config();
    *p = NULL;
    *pooled = 0;
    if (dev < 0 || dev >= n_devices)
        return fail(H_INVALID_DEVICE);
    return n ? pygpu_rt_malloc_async(p, n, s, pooled) : H_SUCCESS;      /* (one pool for all) */
}

pygpu_status pygpu_rt_free_async(void *p, pygpu_stream_t s)
{
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    if (p && capturing_now(s) && !((size_t *)((char *)p - HEADER))[3])
        return fail(H_INVALID_VALUE);
    return block_free(p);
}

int pygpu_rt_alloc_is_cheap(void) { return 1; }

pygpu_status pygpu_rt_mempool_trim(int dev, size_t keep_bytes)
{
    config();
    if (dev < 0 || dev >= n_devices)
        return fail(H_INVALID_DEVICE);
    pool_trim(keep_bytes);          /* one pool for all the host devices */
    return H_SUCCESS;
}

/* Under PYGPU_HOST_CAPTURE=1 the page-locked blocks (host_alloc) are known
 * by their ranges, so that the rules of a capture tell page-locked memory
 * from pageable as on a GPU; otherwise allocations are "pageable" here
 * (so that staging can be tried).  Memory registered in place
 * (host_register) is always known, as on a GPU: it reads as page-locked,
 * and a copy that begins in it and runs past its end is refused with
 * invalid value, as the CUDA runtime refuses it (locked_host.c keeps the
 * ranges).  This is that check of a copy's host side: begun in locked
 * memory, it must end there. */
static int crosses_locked(const void *dst, const void *src, size_t n, enum pygpu_copy_kind k)
{
    const void *host = k == PYGPU_COPY_H2D ? src : k == PYGPU_COPY_D2H ? dst : NULL;
    size_t left = host && n ? pygpu_locked_left(host) : 0;
    return left && n > left;
}

pygpu_status pygpu_rt_host_alloc(void **p, size_t n)
{
    config();
    pygpu_status s = block_alloc(p, n, 0);
    if (s == H_SUCCESS && *p && capture_all)
        (void)pygpu_locked_add(*p, n);        /* (full: that block reads as pageable) */
    return s;
}

pygpu_status pygpu_rt_host_free(void *p)
{
    if (p && capture_all)
        (void)pygpu_locked_remove(p);
    return block_free(p);
}

/* The GPU backends' pages (pages.c), but private (a forked child goes on
 * here with copies of the pool's blocks), with nothing to register:
 * pageable, as above, but under PYGPU_HOST_CAPTURE. */
pygpu_status pygpu_rt_host_pin(void **p, size_t n, int node, int *placement)
{
    config();
    if (pygpu_pages_map(p, n, PYGPU_PAGES_PRIVATE, node, placement) != 0)
        return fail(H_MEMORY_ALLOCATION);
    if (capture_all)
        (void)pygpu_locked_add(*p, n);        /* (full: that block reads as pageable) */
    return H_SUCCESS;
}

pygpu_status pygpu_rt_host_unpin(void *p, size_t n)
{
    if (p && capture_all)
        (void)pygpu_locked_remove(p);
    pygpu_pages_unmap(p, n);
    return H_SUCCESS;
}

/* Within PYGPU_HOST_LOCKED (an operating system's locked-memory limit):
 * more is refused with out of memory, as CUDA refuses it. */
pygpu_status pygpu_rt_host_register(void *p, size_t n)
{
    config();
    if (p == NULL || n == 0 || pygpu_locked_left(p) || pygpu_locked_left((char *)p + n - 1))
        return fail(H_INVALID_VALUE);           /* (a page registered already) */
    if (locked_limit && pygpu_locked_bytes() + n > locked_limit)
        return fail(H_MEMORY_ALLOCATION);
    return pygpu_locked_add(p, n) < 0 ? fail(H_MEMORY_ALLOCATION) : H_SUCCESS;
}

pygpu_status pygpu_rt_host_unregister(void *p)
{
    return !p ? fail(H_INVALID_VALUE) : pygpu_locked_remove(p) == 0 ? H_SUCCESS : fail(H_HOST_NOT_REGISTERED);
}

pygpu_status pygpu_rt_host_is_pinned(const void *p, size_t n, int *pinned)
{
    config();
    *pinned = pygpu_locked_left(p) >= (n ? n : 1);   /* (allocations only under PYGPU_HOST_CAPTURE: see host_alloc) */
    return H_SUCCESS;
}

pygpu_status pygpu_rt_host_mapped(const void *p, size_t n, void **dev)
{
    int pinned = 0;
    (void)pygpu_rt_host_is_pinned(p, n, &pinned);
    *dev = pinned ? (void *)p : NULL;           /* (the host's kernels read it where it is) */
    return pinned ? H_SUCCESS : fail(H_INVALID_VALUE);
}

/* ---- copies ----------------------------------------------------------- */

static pygpu_status copy_bytes(void *dst, const void *src, size_t n, enum pygpu_copy_kind k)
{
    if (n && (!dst || !src || crosses_locked(dst, src, n, k)))
        return fail(H_INVALID_VALUE);
    if (n)
        memmove(dst, src, n);
    return H_SUCCESS;
}

/* (the runtime's plain copy is ordered on the legacy stream) */
pygpu_status pygpu_rt_memcpy(void *dst, const void *src, size_t n, enum pygpu_copy_kind k)
{
    if (pygpu_host_legacy_refused(PYGPU_STREAM_NULL))
        return H_CAPTURE_IMPLICIT;
    return copy_bytes(dst, src, n, k);
}

pygpu_status pygpu_rt_memcpy_async(void *dst, const void *src, size_t n,
                                   enum pygpu_copy_kind k, pygpu_stream_t s)
{
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    config();
    if (fail_copy_bytes && n == fail_copy_bytes) {
        long seen = atomic_fetch_add(&fail_copy_seen, 1) + 1;
        if (fail_copy_nth <= 0 || seen == fail_copy_nth)
            return fail(H_INVALID_VALUE);
    }
    return copy_bytes(dst, src, n, k);
}

pygpu_status pygpu_rt_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum pygpu_copy_kind k,
                                     pygpu_stream_t s)
{
    (void)k;
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    if (width > dpitch || width > spitch)
        return fail(H_INVALID_VALUE);
    if (width && height && (!dst || !src))
        return fail(H_INVALID_VALUE);
    for (size_t r = 0; r < height; r++)
        memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_memset_async(void *dst, int value, size_t n, pygpu_stream_t s)
{
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    if (n && !dst)
        return fail(H_INVALID_VALUE);
    if (n)
        memset(dst, value, n);
    return H_SUCCESS;
}

/* ---- streams ---------------------------------------------------------- */

#define PRIORITY_LEAST 0
#define PRIORITY_GREATEST (-5)

typedef struct { int device, priority; unsigned flags; } host_stream;

pygpu_status pygpu_rt_stream_create(pygpu_stream_t *s, unsigned flags, int priority)
{
    host_stream *h = malloc(sizeof *h);
    *s = NULL;
    if (!h)
        return fail(H_MEMORY_ALLOCATION);
    h->device = current_device;
    h->flags = flags;
    h->priority = priority > PRIORITY_LEAST ? PRIORITY_LEAST
                : priority < PRIORITY_GREATEST ? PRIORITY_GREATEST : priority;
    *s = h;
    return H_SUCCESS;
}

static int special_stream(pygpu_stream_t s)
{
    return s == PYGPU_STREAM_NULL || s == PYGPU_STREAM_PER_THREAD || s == (pygpu_stream_t)1;
}

pygpu_status pygpu_rt_stream_destroy(pygpu_stream_t s)
{
    if (special_stream(s))
        return fail(H_INVALID_HANDLE);
    free(s);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_stream_synchronize(pygpu_stream_t s) { return pygpu_host_legacy_refused(s); }
pygpu_status pygpu_rt_stream_query(pygpu_stream_t s) { return pygpu_host_legacy_refused(s); }

static int legacy_stream(pygpu_stream_t s) { return s == PYGPU_STREAM_NULL || s == (pygpu_stream_t)1; }

/* As the runtime: the legacy stream waits for every blocking stream of its
 * device, so work on it (or a call that uses it: a plain copy) while one
 * of them is being captured is refused, and that capture broken. */
pygpu_status pygpu_host_legacy_refused(pygpu_stream_t s)
{
    return legacy_stream(s) && pygpu_captured_blocking(current_device, 1) > 0 ? fail(H_CAPTURE_IMPLICIT)
                                                                             : H_SUCCESS;
}

pygpu_status pygpu_rt_stream_capturing(pygpu_stream_t s, int *capturing)
{
    config();
    *capturing = legacy_stream(s) && pygpu_captured_blocking(current_device, 0) > 0 ? PYGPU_CAPTURE_IMPLICIT
               : special_stream(s) ? PYGPU_CAPTURE_NONE
               : pygpu_captured_has(s) ? PYGPU_CAPTURE_ACTIVE : capture_all;
    return H_SUCCESS;
}

pygpu_status pygpu_rt_stream_begin_capture(pygpu_stream_t s, int mode)
{
    (void)mode;     /* (the default streams cannot be captured; nor one twice) */
    if (special_stream(s))
        return fail(H_INVALID_VALUE);
    const host_stream *h = s;
    return pygpu_captured_add(s, (h->flags & PYGPU_STREAM_NON_BLOCKING) ? -1 : h->device) < 0 ? fail(H_INVALID_VALUE)
                                                                                           : H_SUCCESS;
}

pygpu_status pygpu_rt_stream_end_capture(pygpu_stream_t s)
{
    int r = pygpu_captured_remove(s);
    return r == -1 ? fail(H_INVALID_VALUE) : r < 0 ? fail(H_CAPTURE_INVALIDATED) : H_SUCCESS;
}

void pygpu_rt_thread_relax(void) {}

pygpu_status pygpu_rt_launch_host_func(pygpu_stream_t s, void (*fn)(void *), void *arg)
{
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    fn(arg);                    /* (the host's streams are done when a call returns) */
    return H_SUCCESS;
}

pygpu_status pygpu_rt_stream_wait_event(pygpu_stream_t s, pygpu_event_t e)
{
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    return e ? H_SUCCESS : fail(H_INVALID_HANDLE);
}

pygpu_status pygpu_rt_stream_wait_value(pygpu_stream_t s, const uint32_t *addr, uint32_t value)
{
    if (pygpu_host_legacy_refused(s))     /* (the host's streams are done when a call returns: the wait is here) */
        return H_CAPTURE_IMPLICIT;
    config();
    if (!wait_value_ok)
        return H_NOT_SUPPORTED;     /* (as a GPU without the wait: no error left behind) */
    if (!addr)
        return fail(H_INVALID_VALUE);
    while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) < value)
        nanosleep(&(struct timespec){0, 20000}, NULL);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_stream_write_value(pygpu_stream_t s, uint32_t *addr, uint32_t value)
{
    if (pygpu_host_legacy_refused(s))     /* (the work before it is done: the write is now) */
        return H_CAPTURE_IMPLICIT;
    config();
    if (!wait_value_ok)
        return H_NOT_SUPPORTED;
    if (!addr)
        return fail(H_INVALID_VALUE);
    __atomic_store_n(addr, value, __ATOMIC_RELEASE);
    return H_SUCCESS;
}

int pygpu_host_stream_device(pygpu_stream_t s)
{
    return special_stream(s) ? current_device : ((const host_stream *)s)->device;
}

pygpu_status pygpu_rt_stream_priority(pygpu_stream_t s, int *priority)
{
    *priority = special_stream(s) ? 0 : ((host_stream *)s)->priority;
    return H_SUCCESS;
}

pygpu_status pygpu_rt_stream_priority_range(int *least, int *greatest)
{
    *least = PRIORITY_LEAST;
    *greatest = PRIORITY_GREATEST;
    return H_SUCCESS;
}

/* ---- pointers ----------------------------------------------------------- */

pygpu_status pygpu_rt_pointer_device(const void *p, int *dev)
{
    (void)p;
    *dev = current_device;      /* device memory is host memory */
    return H_SUCCESS;
}
