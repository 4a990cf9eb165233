/* What the C probes of tools/research that copy with several threads
 * share (wc-probe.c, down-slots.c): a clock, a check of the CUDA runtime's
 * calls, copies of three kinds, and a pool of spinning threads each
 * copying its part of a buffer (part (k + rot) % threads for thread k, so
 * that the parts can be made to turn round the threads), and medians. */
#ifndef PYGPU_PROBE_POOL_H
#define PYGPU_PROBE_POOL_H

#include <cuda_runtime.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

enum { PLAIN, STREAM_LOAD, STREAM_STORE };

static void copy_kind(char *d, const char *s, size_t n, int kind)
{
    if (kind == PLAIN) {
        memcpy(d, s, n);
        return;
    }
    for (size_t o = 0; o < n; o += 256) {
        __m128i r[16];
        for (int k = 0; k < 16; k++)
            r[k] = kind == STREAM_LOAD ? _mm_stream_load_si128((__m128i *)(s + o) + k) : _mm_load_si128((const __m128i *)(s + o) + k);
        for (int k = 0; k < 16; k++) {
            if (kind == STREAM_STORE)
                _mm_stream_si128((__m128i *)(d + o) + k, r[k]);
            else
                _mm_store_si128((__m128i *)(d + o) + k, r[k]);
        }
    }
    if (kind == STREAM_STORE)
        _mm_sfence();
}

/* the pool: released by a generation count, -1 to stop */
static int nthreads;
static atomic_int gen, done;
static char *cd;
static const char *cs;
static size_t cn;
static int ckind;
static atomic_int rot;
static void *pool(void *a)
{
    int me = (int)(size_t)a, seen = 0;
    for (;;) {
        while (atomic_load(&gen) == seen)
            _mm_pause();
        seen = atomic_load(&gen);
        if (seen < 0)
            return NULL;
        size_t part = (cn / nthreads + 255) & ~(size_t)255, o = part * ((me + atomic_load(&rot)) % nthreads);
        if (o < cn)
            copy_kind(cd + o, cs + o, cn - o < part ? cn - o : part, ckind);
        atomic_fetch_add(&done, 1);
    }
}
static void par_copy(char *d, const char *s, size_t n, int kind)
{
    cd = d, cs = s, cn = n, ckind = kind;
    atomic_store(&done, 0);
    atomic_fetch_add(&gen, 1);
    size_t part = (n / nthreads + 255) & ~(size_t)255, o = part * (atomic_load(&rot) % nthreads);
    if (o < n)      /* (this thread is part 0, turned by rot) */
        copy_kind(d + o, s + o, n - o < part ? n - o : part, kind);
    while (atomic_load(&done) < nthreads - 1)
        _mm_pause();
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

/* THREADS from argv[1] (default 8), the pool started; exits on a bad count. */
static void pool_start(int argc, char **argv)
{
    static pthread_t th[64];
    nthreads = argc > 1 ? atoi(argv[1]) : 8;
    if (nthreads < 1 || nthreads > 64) {
        fprintf(stderr, "THREADS 1-64\n");
        exit(2);
    }
    for (int k = 1; k < nthreads; k++)
        pthread_create(&th[k], NULL, pool, (void *)(size_t)k);
}

#endif
