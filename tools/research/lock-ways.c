/* Two ways to make page-locked host memory, and what each costs the other
 * threads of the process.  The pinned pool made its blocks with
 * cudaHostAlloc (about 0.46 s per GiB), and while it runs another thread's
 * cudaMemcpyAsync waits (the staging trace, 2026-11-29: a staged upload's
 * first DMA call held 5-20 ms while the warmer page-locked a block).  The
 * other way: shared anonymous memory (huge pages advised, as the pool
 * makes it since 2026-11-29), its pages faulted in by the caller with no runtime call, then
 * cudaHostRegister (touched memory registered at about 40 GB/s,
 * docs/performance.md, "Fresh destinations: the floor").
 *
 * For each size, each way, best of ROUNDS: the time to make the block
 * (fault and register apart for the second), to free it, the DMA rate up
 * from it, and the longest cudaMemcpyAsync call (4 KiB, page-locked, up)
 * that a second thread made meanwhile, against that call idle.
 *   gcc -O2 -pthread -I/usr/local/cuda/include tools/research/lock-ways.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/lock-ways
 *   /tmp/lock-ways [ROUNDS]
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define HUGE ((size_t)2 << 20)

static atomic_int busy, quit;
static double worst;          /* the longest call while busy */
static char *small_host, *small_dev;

/* The second thread: 4 KiB copies up on a stream of its own, back to back. */
static void *caller(void *unused)
{
    (void)unused;
    cudaStream_t s;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    while (!atomic_load(&quit)) {
        int b = atomic_load(&busy);
        double t = now();
        CK(cudaMemcpyAsync(small_dev, small_host, 4096, cudaMemcpyHostToDevice, s));
        t = now() - t;
        if (b && atomic_load(&busy) && t > worst)
            worst = t;
        if (!b) {
            CK(cudaStreamSynchronize(s));
            struct timespec nap = {0, 20000};
            nanosleep(&nap, NULL);
        }
    }
    CK(cudaStreamSynchronize(s));
    return NULL;
}

typedef struct { double make, fault, free, gbps, stall; } result;

static char *mapped(size_t n, char **base, size_t *len)
{
    *len = n + HUGE;
    *base = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (*base == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)*base + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    madvise(p, n, MADV_HUGEPAGE);
    return p;
}

static result one(size_t n, int way, char *dev)
{
    result r = {0};
    char *p = NULL, *base = NULL;
    size_t len = 0;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    worst = 0;
    atomic_store(&busy, 1);
    double t = now();
    if (way == 0) {
        CK(cudaHostAlloc((void **)&p, n, cudaHostAllocPortable));
    } else {
        p = mapped(n, &base, &len);
        if (madvise(p, n, MADV_POPULATE_WRITE) != 0)
            for (size_t i = 0; i < n; i += 4096)
                p[i] = 0;
        r.fault = now() - t;
        CK(cudaHostRegister(p, n, cudaHostRegisterPortable | cudaHostRegisterMapped));
    }
    r.make = now() - t;
    atomic_store(&busy, 0);
    r.stall = worst;
    memset(p, 1, n);
    t = now();
    CK(cudaMemcpyAsync(dev, p, n, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    r.gbps = n / (now() - t) / 1e9;
    worst = 0;
    atomic_store(&busy, 1);
    t = now();
    if (way == 0) {
        CK(cudaFreeHost(p));
    } else {
        CK(cudaHostUnregister(p));
        munmap(base, len);
    }
    r.free = now() - t;
    atomic_store(&busy, 0);
    r.stall = r.stall > worst ? r.stall : worst;
    CK(cudaStreamDestroy(s));
    return r;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    size_t sizes[] = {(size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20};
    char *dev;
    CK(cudaSetDevice(0));
    CK(cudaMalloc((void **)&dev, (size_t)256 << 20));
    CK(cudaMalloc((void **)&small_dev, 4096));
    CK(cudaHostAlloc((void **)&small_host, 4096, cudaHostAllocPortable));
    pthread_t th;
    pthread_create(&th, NULL, caller, NULL);
    /* the idle call, for comparison */
    double idle = 1;
    for (int i = 0; i < 200; i++) {
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        double t = now();
        CK(cudaMemcpyAsync(small_dev, small_host, 4096, cudaMemcpyHostToDevice, s));
        t = now() - t;
        idle = t < idle ? t : idle;
        CK(cudaStreamSynchronize(s));
        CK(cudaStreamDestroy(s));
    }
    printf("a 4 KiB cudaMemcpyAsync, idle: %.1f us\n", idle * 1e6);
    printf("%-9s %-34s %10s %10s %10s %10s %14s\n", "size", "way", "make ms", "fault ms", "free ms", "DMA GB/s",
           "worst call ms");
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int way = 0; way < 2; way++) {
            result best = {1e9, 1e9, 1e9, 0, 1e9};
            for (int r = 0; r < rounds; r++) {
                result x = one(sizes[k], way, dev);
                best.make = x.make < best.make ? x.make : best.make;
                best.fault = x.fault < best.fault ? x.fault : best.fault;
                best.free = x.free < best.free ? x.free : best.free;
                best.gbps = x.gbps > best.gbps ? x.gbps : best.gbps;
                best.stall = x.stall < best.stall ? x.stall : best.stall;
            }
            printf("%4zu MiB  %-34s %10.2f %10.2f %10.2f %10.1f %14.2f\n", sizes[k] >> 20,
                   way ? "mmap, huge, populate, register" : "cudaHostAlloc", best.make * 1e3,
                   way ? best.fault * 1e3 : 0.0, best.free * 1e3, best.gbps, best.stall * 1e3);
        }
    atomic_store(&quit, 1);
    pthread_join(th, NULL);
    return 0;
}
