/*
 * workers-wake.c -- what a job on PyGPU's workers (src/transfer/workers.c)
 * costs when more workers have been started than it asks for: a job of
 * WANT threads (a 256 KiB host copy in WANT parts, heated and cooled as
 * the pipeline does, 20 us apart so that the workers left out sleep), the
 * median of 2000, first with WANT - 1 workers started, then after a job of
 * MANY threads has started MANY - 1.  Before 2026-11-29 every job woke
 * every sleeping worker; docs/performance.md, "Mid-size calls slow down
 * after the bench's other sections".
 *
 *   gcc -O2 -std=c11 -pthread -Isrc tools/research/workers-wake.c src/transfer/workers.c -o /tmp/workers-wake
 *   /tmp/workers-wake [WANT [MANY]]         (default 7 14)
 */
#define _POSIX_C_SOURCE 200809L
#include "fork.h"
#include "transfer/workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void pygpu_fork_register(pygpu_fork_fn fn) { (void)fn; }   /* (no fork here) */

static char src[1 << 20], dst[1 << 20];

static void part(void *arg, int k, int n)
{
    size_t sz = (size_t)arg / (size_t)n;
    memcpy(dst + (size_t)k * sz, src + (size_t)k * sz, sz);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median microseconds of `reps` jobs of `threads` threads. */
static double jobs(int reps, int threads)
{
    double *t = malloc(sizeof *t * (size_t)reps), m;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        pygpu_workers_heat(threads - 1);
        pygpu_run_parallel(part, (void *)(size_t)(256 << 10), threads, threads);
        pygpu_workers_cool();
        t[i] = now() - t0;
        nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    qsort(t, (size_t)reps, sizeof *t, by_value);
    m = t[reps / 2] * 1e6;
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    int want = argc > 1 ? atoi(argv[1]) : 7, many = argc > 2 ? atoi(argv[2]) : 14;
    if (want < 2 || many < want)
        return fprintf(stderr, "workers-wake: 2 <= WANT <= MANY\n"), 2;
    printf("a job of %d threads, %d workers started: %.2f us\n", want, want - 1, jobs(2000, want));
    jobs(3, many);
    printf("a job of %d threads, %d workers started: %.2f us\n", want, many - 1, jobs(2000, want));
    return 0;
}
