/* Downloads of 1-4 MiB through page-locked buffers: where in the buffers
 * should each one land?  A DMA into lines the cores have just read waits
 * while they are snooped out of the caches (docs/performance.md: the
 * staging buffers' lines).  For each size and each slot policy, in a
 * loop (DMA into the slot, then the copy out of it into the same pageable
 * array by THREADS spinning threads): the DMA's time, the copy's, their sum
 * (medians of 200).  Policies: the same slot every time; turning round 2, 4
 * or 8 slots of the transfer's size; turning round 64 MiB (as built:
 * pipeline.c, download_start).
 *   gcc -O2 -msse4.1 -pthread -I/usr/local/cuda/include tools/research/down-slots.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/down-slots
 *   /tmp/down-slots [THREADS]
 */
#define _GNU_SOURCE
#include "probe-pool.h"

#define REPS 200

int main(int argc, char **argv)
{
    pool_start(argc, argv);
    size_t ring = 64u << 20;
    char *dev, *pin, *out = aligned_alloc(4096, (16u << 20) + 4096);
    memset(out, 4, (16u << 20) + 4096);
    /* PROBE_OUT_OFFSET=16: the array where NumPy's malloc puts its data,
     * 16 bytes past a page, so 16 bytes out of step with the slots */
    const char *off = getenv("PROBE_OUT_OFFSET");
    out += off ? atoi(off) % 4096 : 0;
    printf("the array at %zu bytes past a page\n", (size_t)((unsigned long)out % 4096));
    CK(cudaMalloc((void **)&dev, ring));
    CK(cudaMemset(dev, 5, ring));
    CK(cudaMallocHost((void **)&pin, ring));
    memset(pin, 0, ring);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    printf("%d threads copying out; medians of %d, us: DMA + copy = sum (GB/s of the sum)\n", nthreads, REPS);
    size_t sizes[] = {256 << 10, 1 << 20, 4 << 20};
    int slots[] = {1, 2, 4, 8, 0};
    for (int i = 0; i < 3; i++) {
        size_t n = sizes[i];
        for (int p = 0; p < 5; p++) {
            size_t nslots = slots[p] ? (size_t)slots[p] : ring / n;
            double d[REPS], c[REPS], s[REPS];
            for (int r = 0; r < REPS + 20; r++) {
                char *at = pin + (size_t)r % nslots * n;
                double t0 = now();
                CK(cudaMemcpyAsync(at, dev, n, cudaMemcpyDeviceToHost, st));
                CK(cudaStreamSynchronize(st));
                double t1 = now();
                par_copy(out, at, n, PLAIN);
                double t2 = now();
                if (r >= 20)
                    d[r - 20] = t1 - t0, c[r - 20] = t2 - t1, s[r - 20] = t2 - t0;
            }
            double md = med(d, REPS), mc = med(c, REPS), ms = med(s, REPS);
            printf("%5zu KiB, %s%-3d slots: %6.1f + %6.1f = %6.1f (%.1f)\n", n >> 10, slots[p] ? "" : "64 MiB, ",
                   (int)nslots, md * 1e6, mc * 1e6, ms * 1e6, n / ms / 1e9);
        }
    }
    /* The copy alone, out of the same slot into the same array, each
     * thread copying the same part every time, or the parts turning round
     * the threads (as the pipeline's workers claim them: a part's
     * destination lines then sit in another core's cache). */
    for (int i = 0; i < 3; i++) {
        size_t n = sizes[i];
        for (int turn = 0; turn < 2; turn++) {
            double c[REPS];
            for (int r = 0; r < REPS + 20; r++) {
                atomic_store(&rot, turn ? r : 0);
                double t0 = now();
                par_copy(out, pin, n, PLAIN);
                if (r >= 20)
                    c[r - 20] = now() - t0;
            }
            double mc = med(c, REPS);
            printf("%5zu KiB copy, %s: %6.1f us (%.1f GB/s)\n", n >> 10, turn ? "parts turning round the threads" : "each thread its part", mc * 1e6, n / mc / 1e9);
        }
    }
    atomic_store(&rot, 0);
    /* The same downloads in windows, as the pipeline does (turning round
     * 64 MiB): every window's DMA and event queued, then each window
     * copied out once its event has passed (by spinning on the query). */
    cudaEvent_t ev[16];
    for (int k = 0; k < 16; k++)
        CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    for (int i = 0; i < 3; i++) {
        size_t n = sizes[i];
        for (int nw = 1; nw <= 8; nw *= 2) {
            size_t w = n / nw, nslots = ring / n;
            double s[REPS];
            for (int r = 0; r < REPS + 20; r++) {
                char *at = pin + (size_t)r % nslots * n;
                double t0 = now();
                for (int k = 0; k < nw; k++) {
                    CK(cudaMemcpyAsync(at + k * w, dev + k * w, w, cudaMemcpyDeviceToHost, st));
                    CK(cudaEventRecord(ev[k], st));
                }
                for (int k = 0; k < nw; k++) {
                    while (cudaEventQuery(ev[k]) == cudaErrorNotReady)
                        _mm_pause();
                    par_copy(out + k * w, at + k * w, w, PLAIN);
                }
                if (r >= 20)
                    s[r - 20] = now() - t0;
            }
            double ms = med(s, REPS);
            printf("%5zu KiB in %d windows, pipelined: %6.1f us (%.1f GB/s)\n", n >> 10, nw, ms * 1e6, n / ms / 1e9);
        }
    }
    atomic_store(&gen, -1);
    return 0;
}
