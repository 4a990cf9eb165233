/*
 * env.h -- the PYGPU_* environment variables the C code reads (env.c):
 * read once, all together, into one struct.  Pure C, no Python.
 *
 * docs/environment.md is the table of every variable PyGPU reads, with
 * its default and who it is for.  The vendors' own variables
 * (CUDA_VISIBLE_DEVICES and the like) are the runtime's, not ours: the
 * GPU backend reads them where it explains a missing device.
 */
#ifndef PYGPU_ENV_H
#define PYGPU_ENV_H

#include <stddef.h>

#define PYGPU_HOST_DEVICES_MAX 64       /* (the GPU backend's kernels keep as many devices) */

typedef struct {
    int kernels_off;            /* PYGPU_KERNELS=0: PyGPU's own copy kernels switched off */
    int numa_off;               /* PYGPU_NUMA=0: staging buffers placed on no device's NUMA node */
    int block_cache;            /* PYGPU_BLOCK_CACHE: 0 or 1 (its integer, non-zero), -1 when unset or empty */
    int staging_trace;          /* PYGPU_STAGING_TRACE set and not "0": print each transfer's timeline */
    int pinned_limit_set;       /* PYGPU_PINNED_LIMIT set and not empty ... */
    size_t pinned_limit;        /* ... and its bytes */
    int register_limit_set;     /* PYGPU_REGISTER_LIMIT set and not empty ... */
    size_t register_limit;      /* ... and its bytes (0: no host buffer page-locked in place) */
    size_t cache_bytes;         /* PYGPU_CACHE_BYTES: the host's last-level cache, 0 when unset */
    int host_fork_rule_gpu;     /* PYGPU_HOST_FORK_RULE=gpu: the host backend takes the GPUs' fork rule */
    int host_reset_rule_gpu;    /* PYGPU_HOST_RESET_RULE=gpu: its reset destroys what was made before (fork.h) */
    /* the host backend's devices */
    int host_devices;           /* PYGPU_HOST_DEVICES: how many, 1 to 64 (default 1) */
    size_t host_memory;         /* PYGPU_HOST_MEMORY: bytes of "device memory" (0: unset, the physical memory) */
    int host_peer;              /* PYGPU_HOST_PEER: 0 when the devices refuse peer access, 2 when
                                 * they grant it but lose peer copies into granted pools (default 1) */
    int host_capture;           /* PYGPU_HOST_CAPTURE: 1 when every stream made reports a capture (default 0) */
    int host_wait_value;        /* PYGPU_HOST_WAIT_VALUE: 0 when streams have no wait on a counter (default 1) */
    size_t host_fail_copy_bytes;        /* PYGPU_HOST_FAIL_COPY=B:K: the K-th stream-ordered copy of B bytes */
    long host_fail_copy_nth;            /* fails (K = 0 or none: every one; B = 0: unset) */
    size_t host_pool;           /* PYGPU_HOST_POOL: bytes the pool of freed blocks may hold (default 1 GiB) */
    size_t host_locked;         /* PYGPU_HOST_LOCKED: bytes that may be registered in place at once (0: unset, no limit) */
    int host_numa[PYGPU_HOST_DEVICES_MAX];      /* PYGPU_HOST_NUMA=N,N,...: device i's NUMA node (-1: none;
                                                 * devices past the list, and all when it is unset: -1) */
} pygpu_env;

/* The environment as it was at the first call in the process (every later
 * call returns the same struct; thread-safe). */
const pygpu_env *pygpu_env_get(void);

/* A byte count as the environment (or sysfs) gives one: digits, then K, M,
 * G or T (powers of 1024) or nothing; 0 for NULL, an empty or unreadable
 * one, or one past the range of an unsigned long long. */
size_t pygpu_parse_bytes(const char *s);

#endif /* PYGPU_ENV_H */
