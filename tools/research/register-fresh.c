/* A download into fresh (never touched) memory without the copy-out: the
 * destination's pages faulted in and page-locked (cudaHostRegister) a chunk
 * at a time, and the DMA writing into them directly.  What does each step
 * cost, and does a pipeline of them beat the link's share of a staged
 * download into fresh memory (0.39-0.47)?  Methods:
 *   raw      cudaMemcpy into page-locked memory (the link)
 *   whole    fresh: register all of it, one DMA, unregister
 *   touched  touched memory: register all of it, one DMA, unregister
 *   chunks   fresh: THREADS threads each take CHUNK-sized chunks in turn:
 *            fault in (memset 0 of one byte a page), register, DMA on the
 *            thread's own stream, wait, unregister
 *   gcc -O2 -pthread -I/usr/local/cuda/include tools/research/register-fresh.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/register-fresh
 *   /tmp/register-fresh MIB [THREADS CHUNK_MIB]
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static char *fresh(size_t n)
{
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(p, n, MADV_HUGEPAGE);
    return p;
}

typedef struct { char *dst; const char *dev; size_t n, chunk; atomic_size_t *next; double reg, dma, unreg, fault; } job;

static void *worker(void *a)
{
    job *j = a;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (;;) {
        size_t o = atomic_fetch_add(j->next, j->chunk);
        if (o >= j->n)
            break;
        size_t len = j->n - o < j->chunk ? j->n - o : j->chunk;
        double t0 = now();
        for (size_t k = 0; k < len; k += 4096)
            ((volatile char *)j->dst)[o + k] = 0;
        double t1 = now();
        CK(cudaHostRegister(j->dst + o, len, cudaHostRegisterDefault));
        double t2 = now();
        CK(cudaMemcpyAsync(j->dst + o, j->dev + o, len, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        double t3 = now();
        CK(cudaHostUnregister(j->dst + o));
        double t4 = now();
        j->fault += t1 - t0, j->reg += t2 - t1, j->dma += t3 - t2, j->unreg += t4 - t3;
    }
    cudaStreamDestroy(s);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MIB [THREADS CHUNK_MIB]\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atoll(argv[1]) << 20;
    int threads = argc > 2 ? atoi(argv[2]) : 8;
    if (n == 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "MIB > 0, THREADS 1-64\n");
        return 2;
    }
    size_t chunk = (argc > 3 ? (size_t)atoll(argv[3]) : 16) << 20;
    char *dev, *pin;
    CK(cudaMalloc((void **)&dev, n));
    CK(cudaMemset(dev, 5, n));
    CK(cudaMallocHost((void **)&pin, n));
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double t = now();
        CK(cudaMemcpy(pin, dev, n, cudaMemcpyDeviceToHost));
        t = now() - t;
        best = t < best ? t : best;
    }
    double link = n / best / 1e9;
    printf("%5zu MiB raw pinned: %.1f GB/s\n", n >> 20, link);
    for (int touched = 0; touched < 2; touched++) {
        double tr = 0, td = 0, tu = 0, tot = 1e9;
        for (int r = 0; r < 3; r++) {
            char *p = fresh(n);
            if (touched)
                memset(p, 1, n);
            double t0 = now();
            CK(cudaHostRegister(p, n, cudaHostRegisterDefault));
            double t1 = now();
            CK(cudaMemcpy(p, dev, n, cudaMemcpyDeviceToHost));
            double t2 = now();
            CK(cudaHostUnregister(p));
            double t3 = now();
            if (p[n / 2] != 5) { fprintf(stderr, "wrong data\n"); return 1; }
            if (t3 - t0 < tot)
                tot = t3 - t0, tr = t1 - t0, td = t2 - t1, tu = t3 - t2;
            munmap(p, n);
        }
        printf("%5zu MiB %s: register %.2f ms, DMA %.2f ms, unregister %.2f ms: %.1f GB/s (%.2f of the link)\n",
               n >> 20, touched ? "touched" : "fresh  ", tr * 1e3, td * 1e3, tu * 1e3, n / tot / 1e9, n / tot / 1e9 / link);
    }
    for (int r = 0; r < 3; r++) {
        char *p = fresh(n);
        atomic_size_t next = 0;
        pthread_t th[64];
        job jb[64];
        double t0 = now();
        for (int k = 0; k < threads; k++) {
            jb[k] = (job){p, dev, n, chunk, &next, 0, 0, 0, 0};
            pthread_create(&th[k], NULL, worker, &jb[k]);
        }
        double fa = 0, re = 0, dm = 0, un = 0;
        for (int k = 0; k < threads; k++) {
            pthread_join(th[k], NULL);
            fa += jb[k].fault, re += jb[k].reg, dm += jb[k].dma, un += jb[k].unreg;
        }
        double t = now() - t0;
        for (size_t k = 0; k < n; k += 1 << 20)
            if (p[k] != 5) { fprintf(stderr, "wrong data at %zu\n", k); return 1; }
        printf("%5zu MiB chunks of %zu MiB on %d threads: %.1f GB/s (%.2f of the link); thread-ms fault %.1f reg %.1f dma %.1f unreg %.1f\n",
               n >> 20, chunk >> 20, threads, n / t / 1e9, n / t / 1e9 / link, fa * 1e3, re * 1e3, dm * 1e3, un * 1e3);
        munmap(p, n);
    }
    return 0;
}
