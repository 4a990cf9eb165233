/* Write-combined staging for downloads?  A DMA into page-locked memory that
 * the cores have just read waits while the lines are snooped out of their
 * caches (1 MiB: 27.6 us alone, 47-59 us after a copy-out; docs/performance.md).
 * Write-combined page-locked memory (cudaHostAllocWriteCombined) is never
 * cached, so the DMA should find nothing to snoop; the cores read it back
 * with streaming loads (MOVNTDQA), whose speed is the question.  For each
 * size: the DMA's time into write-back (cudaMallocHost) memory after a copy
 * out of it, the same into write-combined memory after a streaming-load copy
 * out of it, each copy's time, and the uploads the same way (the copy in by
 * plain stores into write-combined memory, by streaming stores into
 * write-back memory).  Medians of 50.
 *   gcc -O2 -msse4.1 -pthread -I/usr/local/cuda/include tools/research/wc-probe.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/wc-probe
 *   /tmp/wc-probe [THREADS]
 */
#define _GNU_SOURCE
#include "probe-pool.h"

int main(int argc, char **argv)
{
    pool_start(argc, argv);
    size_t big = 64u << 20;
    char *dev, *wb, *wc, *host = aligned_alloc(4096, big), *host2 = aligned_alloc(4096, big);
    memset(host, 3, big), memset(host2, 4, big);
    CK(cudaMalloc((void **)&dev, big));
    CK(cudaMallocHost((void **)&wb, big));
    CK(cudaHostAlloc((void **)&wc, big, cudaHostAllocWriteCombined));
    memset(wb, 0, big), memset(wc, 0, big);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    printf("%d threads copying; medians of 50, us (GB/s)\n", nthreads);
    size_t sizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (int i = 0; i < 6; i++) {
        size_t n = sizes[i];
        double v[8][50];
        for (int r = 0; r < 50; r++) {
            for (int w = 0; w < 2; w++) {           /* downloads: DMA, then the copy out */
                char *pin = w ? wc : wb;
                double t0 = now();
                CK(cudaMemcpyAsync(pin, dev, n, cudaMemcpyDeviceToHost, st));
                CK(cudaStreamSynchronize(st));
                double t1 = now();
                par_copy(host2, pin, n, w ? STREAM_LOAD : PLAIN);
                double t2 = now();
                v[w * 2][r] = t1 - t0, v[w * 2 + 1][r] = t2 - t1;
            }
            for (int w = 0; w < 2; w++) {           /* uploads: the copy in, then DMA */
                char *pin = w ? wc : wb;
                double t0 = now();
                par_copy(pin, host, n, w ? PLAIN : STREAM_STORE);
                double t1 = now();
                CK(cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, st));
                CK(cudaStreamSynchronize(st));
                double t2 = now();
                v[4 + w * 2][r] = t2 - t1, v[5 + w * 2][r] = t1 - t0;
            }
        }
        if (memcmp(host2, wc, n) || host2[n - 1] != wb[n - 1]) { fprintf(stderr, "copy mismatch\n"); return 1; }
        const char *name[8] = {"D2H DMA into WB", "copy out of WB", "D2H DMA into WC", "stream-load out of WC",
                               "H2D DMA from WB", "NT-store into WB", "H2D DMA from WC", "copy into WC"};
        printf("%6zu KiB:", n >> 10);
        for (int k = 0; k < 8; k++) {
            double m = med(v[k], 50);
            printf("  %s %.1f (%.1f)%s", name[k], m * 1e6, n / m / 1e9, k % 4 == 3 ? "\n           " : "");
        }
        printf("\n");
    }
    atomic_store(&gen, -1);
    return 0;
}
