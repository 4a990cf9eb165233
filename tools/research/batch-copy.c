/* The runtime's batched copy (cudaMemcpyBatchAsync, CUDA 12.8+) from and
 * into pageable memory, against cudaMemcpyAsync and raw page-locked copies:
 * is it faster, and is it asynchronous (the call's share of the time until
 * the stream is done)?  The issue of transfers at scale asked for this
 * measurement beside the staging pipeline (`python -m pygpu.bench` gives
 * PyGPU's in the same run).  Touched pageable memory, a non-blocking stream
 * (the batched copy refuses the legacy default one), medians of 30, for
 * each size: GB/s (call's share of the time).  The source orders: stream
 * (in stream order), during (read before the call returns) and any (read
 * at any time, the host buffer left alone until the stream is done).
 *   gcc -O2 -pthread -I/usr/local/cuda/include tools/research/batch-copy.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/batch-copy
 *   /tmp/batch-copy
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

#define REPS 30
enum { ASYNC, BATCH_STREAM, BATCH_DURING, BATCH_ANY, PINNED, WAYS };
static const char *const names[WAYS] = {"MemcpyAsync", "batch, stream", "batch, during", "batch, any", "pinned"};
static const enum cudaMemcpySrcAccessOrder order[WAYS] = {0, cudaMemcpySrcAccessOrderStream,
    cudaMemcpySrcAccessOrderDuringApiCall, cudaMemcpySrcAccessOrderAny, 0};

int main(void)
{
    size_t big = 64u << 20, sizes[] = {64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    char *dev, *pin, *host = aligned_alloc(4096, big);
    memset(host, 3, big);
    CK(cudaMalloc((void **)&dev, big));
    CK(cudaMallocHost((void **)&pin, big));
    memset(pin, 3, big);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    printf("GB/s (the call's share of the time); touched pageable memory, medians of %d\n", REPS);
    for (int up = 1; up >= 0; up--) {
        printf("%s%12s", up ? "H2D" : "D2H", "");
        for (int w = 0; w < WAYS; w++)
            printf("%22s", names[w]);
        printf("\n");
        for (int i = 0; i < 5; i++) {
            size_t n = sizes[i];
            printf("%9zu KiB   ", n >> 10);
            for (int w = 0; w < WAYS; w++) {
                double t[REPS], c[REPS];
                int ok = 1;
                for (int r = 0; r < REPS + 3 && ok; r++) {
                    char *h = w == PINNED ? pin : host;
                    void *dst = up ? (void *)dev : (void *)h;
                    const void *src = up ? (const void *)h : (const void *)dev;
                    double t0 = now(), t1;
                    if (w == ASYNC || w == PINNED) {
                        CK(cudaMemcpyAsync(dst, src, n, up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, st));
                    } else {
                        struct cudaMemcpyAttributes a;
                        memset(&a, 0, sizeof a);
                        a.srcAccessOrder = order[w];
                        a.srcLocHint.type = up ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
                        a.dstLocHint.type = up ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
                        size_t idx = 0;
                        void *dsts[1] = {dst};
                        const void *srcs[1] = {src};
                        cudaError_t e = cudaMemcpyBatchAsync(dsts, srcs, &n, 1, &a, &idx, 1, st);
                        if (e != cudaSuccess) {
                            printf("%22s", cudaGetErrorName(e));
                            (void)cudaGetLastError();
                            ok = 0;
                            break;
                        }
                    }
                    t1 = now();
                    CK(cudaStreamSynchronize(st));
                    if (r >= 3)
                        t[r - 3] = now() - t0, c[r - 3] = (t1 - t0) / (now() - t0);
                }
                if (ok) {
                    char cell[32];
                    snprintf(cell, sizeof cell, "%.1f (%.2f)", n / med(t, REPS) / 1e9, med(c, REPS));
                    printf("%22s", cell);
                }
            }
            printf("\n");
        }
    }
    return 0;
}
