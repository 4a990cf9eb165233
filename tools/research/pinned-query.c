/* What asking "is this host memory page-locked?" costs, and the calls a
 * small staged copy makes around its DMA, each timed alone (medians of
 * 20000 calls, microseconds, the legacy stream idle):
 *
 *   cudaPointerGetAttributes       of pageable and of page-locked memory (PyGPU's way today)
 *   cudaHostGetFlags               of pageable memory (an error, cleared) and of page-locked
 *   cuPointerGetAttribute          CU_POINTER_ATTRIBUTE_MEMORY_TYPE, the driver's single attribute
 *   cudaEventRecord / Query / Synchronize of a done event
 *   cudaStreamSynchronize / cudaStreamQuery of the idle legacy stream
 *   cudaThreadExchangeStreamCaptureMode, to relaxed and back (rt_gpu.c's
 *   relax/unrelax around each call the runtime calls unsafe under a capture)
 *
 *   gcc -O2 pinned-query.c -I$CUDA/include -L$CUDA/lib64 -lcudart -lcuda -o /tmp/pinned-query
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 20000
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double t[REPS];
static void *host[2];           /* pageable, page-locked */
static cudaEvent_t ev;

static void attrs(int k) { struct cudaPointerAttributes a; if (cudaPointerGetAttributes(&a, host[k])) cudaGetLastError(); }
static void flags(int k) { unsigned f; if (cudaHostGetFlags(&f, host[k])) cudaGetLastError(); }
static void drv(int k) { unsigned ty = 0; (void)cuPointerGetAttribute(&ty, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)host[k]); }
static void record(int k) { (void)k; CK(cudaEventRecord(ev, 0)); }
static void query(int k) { (void)k; CK(cudaEventQuery(ev)); }
static void esync(int k) { (void)k; CK(cudaEventSynchronize(ev)); }
static void ssync(int k) { (void)k; CK(cudaStreamSynchronize(0)); }
static void squery(int k) { (void)k; CK(cudaStreamQuery(0)); }
static void relaxed(int k)
{
    (void)k;
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    CK(cudaThreadExchangeStreamCaptureMode(&m));
    CK(cudaThreadExchangeStreamCaptureMode(&m));
}

static void time_it(const char *name, void (*fn)(int), int k)
{
    for (int i = 0; i < 100; i++)
        fn(k);
    for (int i = 0; i < REPS; i++) {
        double t0 = now();
        fn(k);
        t[i] = now() - t0;
    }
    qsort(t, REPS, sizeof *t, by_value);
    printf("%-52s %8.3f us\n", name, t[REPS / 2] * 1e6);
}

int main(void)
{
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    host[0] = malloc(1 << 20);
    memset(host[0], 1, 1 << 20);
    CK(cudaMallocHost(&host[1], 1 << 20));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventRecord(ev, 0));
    CK(cudaEventSynchronize(ev));
    time_it("cudaPointerGetAttributes (pageable)", attrs, 0);
    time_it("cudaPointerGetAttributes (page-locked)", attrs, 1);
    time_it("cudaHostGetFlags (pageable: an error, cleared)", flags, 0);
    time_it("cudaHostGetFlags (page-locked)", flags, 1);
    time_it("cuPointerGetAttribute MEMORY_TYPE (pageable)", drv, 0);
    time_it("cuPointerGetAttribute MEMORY_TYPE (page-locked)", drv, 1);
    time_it("cudaEventQuery (done)", query, 0);
    time_it("cudaEventSynchronize (done)", esync, 0);
    time_it("cudaStreamQuery (legacy, idle)", squery, 0);
    time_it("cudaStreamSynchronize (legacy, idle)", ssync, 0);
    time_it("cudaEventRecord (legacy)", record, 0);
    time_it("cudaThreadExchangeStreamCaptureMode, there and back", relaxed, 0);
    return 0;
}
