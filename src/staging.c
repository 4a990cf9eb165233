/*
 * staging.c -- pageable host memory at the link's speed.
 *
 * The runtimes copy pageable memory through small driver buffers at 7-15
 * GB/s; page-locked memory moves at the link's 55.  The pipeline here cuts a
 * transfer into chunks that pass through a few page-locked staging buffers
 * (from the pinned pool): the host copy of one chunk, split across a small
 * persistent pool of worker threads, overlaps the DMA of the previous ones.
 * Strided host layouts are gathered (or scattered) chunk by chunk, never
 * through a full temporary copy.  Everything here runs without the GIL.
 *
 * One transfer uses the staging buffers and the workers at a time (the
 * engine lock); a transfer that finds them busy goes the runtime's own way.
 */
#define _GNU_SOURCE
#include "staging.h"
#include "fork.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif

#define MAX_DEPTH 16
#define MAX_THREADS 64
#define MAX_PARTS_PER_THREAD 16

/* ---- settings ------------------------------------------------------------ */

static pthread_mutex_t config_mu = PTHREAD_MUTEX_INITIALIZER;
static pygpu_transfer_config config;
static int config_ready;

/* PYGPU_STAGING_TRACE=1: each staged transfer prints, to stderr, where its
 * time went chunk by chunk (a diagnostic for tuning on a new machine). */
static int trace_on;
static int stream_stores = 1;      /* see range_copy */
/* Rows going up by 2-D copies from the staging buffers cost more per copy
 * than plain ones: on an H200 host 256-byte rows ran at 0.37 of the link in
 * 2 MiB chunks (16 MiB transfers), 0.88 in full 16 MiB chunks (256 MiB),
 * where plain copies ran at 0.73 and 0.84.  So only transfers that fill
 * whole chunks go that way; smaller ones go up dense and are scattered on
 * the device.  PYGPU_STAGING_ROWS=1 sends every size by 2-D copies. */
static int rows_any_size;
/* Uploads that fit the staging buffers merge their DMA calls (h2d_whole);
 * PYGPU_STAGING_MERGE=0 sends them through the ring, a call per chunk. */
static int merge_up = 1;
/* Parts of a host copy per thread (range_parts): PYGPU_STAGING_PARTS=N, 1..16. */
static int parts_per_thread = 4;
static size_t bounce_max = 4096;

/* The environment's switches, read once. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *trace = getenv("PYGPU_STAGING_TRACE"), *nt = getenv("PYGPU_STAGING_NT");
    trace_on = trace && strcmp(trace, "0") != 0;
    stream_stores = nt && *nt ? (strcmp(nt, "2") == 0 ? 2 : strcmp(nt, "0") != 0) : 1;
    const char *rows = getenv("PYGPU_STAGING_ROWS"), *bounce = getenv("PYGPU_STAGING_BOUNCE");
    rows_any_size = rows && strcmp(rows, "1") == 0;
    if (bounce && *bounce)
        bounce_max = (size_t)strtoull(bounce, NULL, 10);
    const char *merge = getenv("PYGPU_STAGING_MERGE");
    merge_up = !(merge && strcmp(merge, "0") == 0);
    const char *parts = getenv("PYGPU_STAGING_PARTS");
    if (parts && atoi(parts) >= 1)
        parts_per_thread = atoi(parts) > MAX_PARTS_PER_THREAD ? MAX_PARTS_PER_THREAD : atoi(parts);
}

static void config_defaults(void)
{
    if (config_ready)
        return;
    pthread_once(&env_once, read_env);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    config.chunk = (size_t)16 << 20;
    config.depth = 4;
    /* Three cores in four, up to 16: a worker descheduled in the middle of
     * its part holds up the whole chunk, and with every core spinning the
     * runtime's and the system's threads take theirs.  Measured on a
     * 16-core H100 host, interleaved in one process, get(ary=pageable) of
     * 16 MiB: 16 threads 0.72 of the link, 14 0.78, 12 0.80, 10 0.80, 8
     * 0.77; 64 MiB 0.91, 0.90, 0.88, 0.86, 0.83; to_gpu 0.76-0.78 at every
     * count (the link is its limit).  A second such run, 16 threads against
     * 12: equal at 16 and 256 MiB, and at 1 GiB get(ary) 53.4 GB/s against
     * 46.2 (to_gpu 49.9 against 51.6).  A third, to 256 MiB: get(ary)
     * 0.77, 0.82, 0.90 with 16 threads against 0.80, 0.91, 0.85 with 12. */
    config.threads = cpus > 1 ? (int)(cpus - cpus / 4) : 1;
    if (config.threads > 16)
        config.threads = 16;
    /* Host "device memory" is host memory: staging only adds a copy there.
     * On a GPU, from 32 KiB (measured on an H200 host, us, the runtime's
     * own way -> the pipeline): uploads 32 KiB 12.6 -> 12.7, 64 KiB 18.5
     * -> 17.1, 256 KiB 35.1 -> 24.8, 512 KiB 57.3 -> 36.1 (but 16 KiB 10.2
     * -> 15.9); downloads into pageable memory 32 KiB 13.1 -> 11.4, 512 KiB
     * 70.7 -> 44.6. */
    config.min_bytes = strcmp(pygpu_rt_vendor(), "host") ? (size_t)32 << 10 : SIZE_MAX;
    const char *peer = getenv("PYGPU_PEER");
    config.peer = !(peer && strcmp(peer, "0") == 0);
    config_ready = 1;
}

size_t pygpu_bounce_max(void)
{
    pthread_once(&env_once, read_env);
    return bounce_max;
}

void pygpu_transfer_config_get(pygpu_transfer_config *c)
{
    pthread_mutex_lock(&config_mu);
    config_defaults();
    *c = config;
    pthread_mutex_unlock(&config_mu);
}

/* ---- worker threads ------------------------------------------------------- */

typedef void (*part_fn)(void *arg, int part, int nparts);

/* Workers spin for a while after each job before they sleep: a transfer
 * hands them a job per chunk, every few tens of microseconds, and waking a
 * sleeping thread costs about as much.  After the first rounds they yield
 * as they spin, so that the thread queuing the DMA always gets a core. */
#define SPIN_ROUNDS 20000
#define PAUSE_ROUNDS 2000

static pthread_mutex_t job_mu = PTHREAD_MUTEX_INITIALIZER;    /* one job at a time */
static pthread_mutex_t work_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static atomic_int nworkers;       /* started (they only grow, under job_mu) */
static atomic_int alive, quitting;      /* workers running; set at exit: they stop */
static atomic_ulong job_gen;
static atomic_int sleepers;
static part_fn job_fn;
static void *job_arg;
static atomic_int job_next, job_parts, job_finished, job_workers;     /* workers [0, job_workers) take part */
/* While a staged transfer runs the workers spin without yielding or
 * sleeping: it hands them a job every few tens of microseconds, and a
 * sleeping (or descheduled) worker takes that long to come back. */
static atomic_int hot;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run parts of the current job until none are left. */
static void run_parts(void)
{
    int k;
    while ((k = atomic_fetch_add(&job_next, 1)) < atomic_load(&job_parts)) {
        job_fn(job_arg, k, atomic_load(&job_parts));
        atomic_fetch_add(&job_finished, 1);
    }
}

static void *worker_main(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned long seen = atomic_load(&job_gen);
    while (!atomic_load(&quitting)) {
        /* (a worker beyond those the settings ask for sleeps) */
        for (int i = 0; i < SPIN_ROUNDS && atomic_load(&job_gen) == seen && !atomic_load(&quitting) &&
                        me < atomic_load(&job_workers);
             i++) {
            if (atomic_load(&hot) > 0) {
                i = 0;
                cpu_relax();
            } else if (i < PAUSE_ROUNDS) {
                cpu_relax();
            } else {
                sched_yield();
            }
        }
        if (atomic_load(&job_gen) == seen) {
            pthread_mutex_lock(&work_mu);
            atomic_fetch_add(&sleepers, 1);
            while (atomic_load(&job_gen) == seen && (atomic_load(&hot) == 0 || me >= atomic_load(&job_workers)) &&
                   !atomic_load(&quitting))
                pthread_cond_wait(&work_cv, &work_mu);
            atomic_fetch_sub(&sleepers, 1);
            pthread_mutex_unlock(&work_mu);
        }
        seen = atomic_load(&job_gen);
        if (me < atomic_load(&job_workers))
            run_parts();
    }
    atomic_fetch_sub(&alive, 1);
    return NULL;
}

/* At exit the workers stop, and are waited for (a second at most), so that
 * nothing runs while the process is torn down (LeakSanitizer's check at
 * exit, for one, stops every thread and crashed on a spinning worker).  A
 * transfer still running in a daemon thread finishes its parts itself. */
static void stop_workers(void)
{
    atomic_store(&quitting, 1);
    pthread_mutex_lock(&work_mu);
    pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&work_mu);
    for (int i = 0; i < 1000 && atomic_load(&alive) > 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Start workers up to `n` (job_mu held); returns how many there are. */
static int ensure_workers(int n)
{
    static int at_exit;
    if (n > MAX_THREADS - 1)
        n = MAX_THREADS - 1;
    if (!at_exit && atexit(stop_workers) == 0)
        at_exit = 1;
    while (atomic_load(&nworkers) < n && !atomic_load(&quitting)) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add(&alive, 1);
        int r = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)atomic_load(&nworkers));
        pthread_attr_destroy(&attr);
        if (r != 0) {
            atomic_fetch_sub(&alive, 1);
            break;
        }
        atomic_fetch_add(&nworkers, 1);
    }
    return atomic_load(&nworkers);
}

/* A job handed to the workers, to be joined by its caller. */
typedef struct {
    part_fn fn;
    void *arg;
    int nparts, shared;         /* shared: the workers have it (job_mu held) */
} pending_job;

/* Hand fn(arg, k, nparts), k in [0, nparts), to at most threads - 1 workers
 * and return at once, so that the caller can do something else (queue a
 * DMA) before it joins in with job_join.  Never more threads than asked
 * for: the parts may be more, and spinning workers beyond the cores stall
 * everything.  Where the workers cannot be had, job_join runs every part. */
static pending_job job_start(part_fn fn, void *arg, int nparts, int threads)
{
    pending_job p = {fn, arg, nparts, 0};
    if (nparts <= 1 || threads <= 1 || pthread_mutex_trylock(&job_mu) != 0)
        return p;               /* (another job holds the workers) */
    int workers = ensure_workers((nparts < threads ? nparts : threads) - 1);
    if (workers > threads - 1)
        workers = threads - 1;
    if (workers == 0) {
        pthread_mutex_unlock(&job_mu);
        return p;
    }
    job_fn = fn;
    job_arg = arg;
    atomic_store(&job_parts, nparts);
    atomic_store(&job_workers, workers);
    atomic_store(&job_finished, 0);
    atomic_store(&job_next, 0);
    atomic_fetch_add(&job_gen, 1);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&work_mu);
        pthread_cond_broadcast(&work_cv);
        pthread_mutex_unlock(&work_mu);
    }
    p.shared = 1;
    return p;
}

/* Run the parts of a started job that no worker has claimed; return when
 * all are done. */
static void job_join(const pending_job *p)
{
    if (!p->shared) {
        for (int k = 0; k < p->nparts; k++)
            p->fn(p->arg, k, p->nparts);
        return;
    }
    run_parts();
    while (atomic_load(&job_finished) < p->nparts)     /* the last parts are short */
        cpu_relax();
    atomic_store(&job_parts, 0);        /* late workers find nothing to claim */
    pthread_mutex_unlock(&job_mu);
}

static void run_parallel(part_fn fn, void *arg, int nparts, int threads)
{
    pending_job p = job_start(fn, arg, nparts, threads);
    job_join(&p);
}

/* ---- copies of element ranges --------------------------------------------- */

/* One side of a range copy.  A dense side holds exactly the range: `ptr` is
 * its first element and elements follow at itemsize.  A strided side holds
 * element [0, ..., 0] at `ptr` - `origin` (so a buffer can hold a window of
 * a bigger layout: origin is the window's first byte offset). */
typedef struct {
    char *ptr;
    const ptrdiff_t *strides;   /* NULL: dense */
    ptrdiff_t origin;
} side;

/* Chunks going up fill their staging buffer with non-temporal stores (long
 * contiguous runs): the bytes go to memory without first reading the
 * buffer's lines into the cache, and the buffer holds no dirty lines that
 * the DMA engine must then snoop out of the caches.  Measured on an H200
 * host (16 cores): 16 MiB to_gpu from pageable memory 0.44 -> 0.74 of the
 * link, 64 MiB 0.71 -> 0.79; with 16 MiB chunks (256 MiB transfers) plain
 * stores were faster (0.87 against 0.80), and copies into the user's memory
 * going down were slower with them.  PYGPU_STAGING_NT=0 turns it off;
 * PYGPU_STAGING_NT=2 writes with plain stores and then demotes each line to
 * the shared cache, where the DMA engine could read it with no memory
 * traffic: on an H100 host, interleaved, to_gpu 0.66 against 0.77 at 16
 * MiB and 0.72 against 0.78 at 64 MiB (get(ary=pageable) 0.85 against
 * 0.80 at 16 MiB), so it is not the default. */
#define STREAM_MIN 4096
#define STREAM_MAX_CHUNK ((ptrdiff_t)8 << 20)

#if defined(__x86_64__)
#include <emmintrin.h>
static void stream_copy(char *dst, const char *src, size_t n)
{
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16)),
                c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
    _mm_sfence();       /* the stores are visible before the part is reported done */
}
/* Plain stores, then each line demoted from the core's caches to the
 * shared one (CLDEMOTE, a hint: a no-op on CPUs without it). */
static void demote_copy(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n);
    for (uintptr_t a = (uintptr_t)dst & ~(uintptr_t)63; a < (uintptr_t)dst + n; a += 64)
        __asm__ volatile(".byte 0x0f, 0x1c, 0x00" : : "a"(a) : "memory");    /* cldemote (%rax) */
}
#else
static void stream_copy(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }
static void demote_copy(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }
#endif

/* Elements [start, start + count), in C order over shape, from src to dst. */
static void range_copy(side dst, side src, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize,
                       ptrdiff_t start, ptrdiff_t count, int stream)
{
    ptrdiff_t idx[PYGPU_MAXDIMS];
    side *sides[2] = {&dst, &src};
    char *p[2];
    if (count <= 0)
        return;
    if (nd == 0) {
        memcpy(dst.strides ? dst.ptr - dst.origin : dst.ptr, src.strides ? src.ptr - src.origin : src.ptr,
               (size_t)itemsize);
        return;
    }
    for (int i = nd - 1; i >= 0; i--) {      /* unravel start */
        idx[i] = start % shape[i];
        start /= shape[i];
    }
    for (int w = 0; w < 2; w++) {
        p[w] = sides[w]->ptr;
        if (sides[w]->strides) {
            p[w] -= sides[w]->origin;
            for (int i = 0; i < nd; i++)
                p[w] += idx[i] * sides[w]->strides[i];
        }
    }
    int inner = nd - 1;
    ptrdiff_t step[2] = {dst.strides ? dst.strides[inner] : itemsize, src.strides ? src.strides[inner] : itemsize};
    while (count > 0) {
        ptrdiff_t run = shape[inner] - idx[inner];
        if (run > count)
            run = count;
        if (stream && step[0] == itemsize && step[1] == itemsize && run * itemsize >= STREAM_MIN)
            (stream == 2 ? demote_copy : stream_copy)(p[0], p[1], (size_t)(run * itemsize));
        else
            pygpu_copy_row(p[0], step[0], p[1], step[1], run, itemsize);
        count -= run;
        p[0] += run * step[0];
        p[1] += run * step[1];
        idx[inner] += run;
        for (int k = inner; k > 0 && idx[k] == shape[k]; k--) {     /* carry */
            idx[k] = 0;
            idx[k - 1]++;
            for (int w = 0; w < 2; w++)
                if (sides[w]->strides)
                    p[w] += sides[w]->strides[k - 1] - shape[k] * sides[w]->strides[k];
        }
    }
}

typedef struct {
    side dst, src;
    const ptrdiff_t *shape;
    int nd;
    ptrdiff_t itemsize, start, count;
    int stream;                 /* into a staging buffer: 1 non-temporal stores, 2 demoted lines */
} range_job;

static side advance(side s, ptrdiff_t elements, ptrdiff_t itemsize)
{
    if (!s.strides)
        s.ptr += elements * itemsize;
    return s;
}

/* A range copy is cut into up to parts_per_thread parts per thread (4), of
 * at least PART_MIN bytes each, claimed one at a time: a worker that starts
 * late (descheduled, or its core taken by another thread) then just does
 * fewer of them.  With one part per thread, a chunk took as long as its
 * latest worker: on an H100 host with 16 threads on 16 cores, one core
 * often ran two of the 16 parts in turn, and the chunk took twice as long.
 * Measured there, interleaved runs, one part per thread -> four: get(ary=
 * pageable) 16 MiB 0.63 -> 0.76 of the link, 256 MiB 0.82 -> 0.90; to_gpu
 * 256 MiB 0.82 -> 0.86; every-other-row uploads 16 MiB 0.33 -> 0.43. */
#define PART_MIN ((ptrdiff_t)32 << 10)
#define MAX_PARTS (MAX_PARTS_PER_THREAD * MAX_THREADS)

static int range_parts(ptrdiff_t bytes, int threads)
{
    ptrdiff_t n = bytes / (parts_per_thread > 1 ? PART_MIN : 2 * PART_MIN),
              most = (ptrdiff_t)threads * (threads > 1 ? parts_per_thread : 1);
    if (n > most)
        n = most;
    return n < 1 ? 1 : (int)n;
}

static long long now_ns(void);
/* With tracing: when each part of the last job started and ended, and where. */
static long long part_t[MAX_PARTS][2];
static int part_cpu[MAX_PARTS];

static void range_part(void *arg, int k, int n)
{
    range_job *j = arg;
    ptrdiff_t per = (j->count + n - 1) / n, a = per * k, b = a + per > j->count ? j->count : a + per;
    if (trace_on && k < MAX_PARTS) {
        part_t[k][0] = now_ns();
        part_cpu[k] = sched_getcpu();
    }
    if (a < b)
        range_copy(advance(j->dst, a, j->itemsize), advance(j->src, a, j->itemsize), j->nd, j->shape,
                   j->itemsize, j->start + a, b - a, j->stream);
    if (trace_on && k < MAX_PARTS)
        part_t[k][1] = now_ns();
}

/* Split a range copy across the workers (see range_parts): started (the
 * caller joins it with job_join; j must live until then), or done. */
static pending_job range_start(range_job *j, int threads)
{
    return job_start(range_part, j, range_parts(j->count * j->itemsize, threads), threads);
}

static void parallel_range(range_job *j, int threads)
{
    pending_job p = range_start(j, threads);
    job_join(&p);
}

void pygpu_parallel_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                                 const ptrdiff_t *src_strides, int nd, const ptrdiff_t *shape,
                                 ptrdiff_t itemsize, ptrdiff_t start, ptrdiff_t count)
{
    pygpu_transfer_config c;
    pygpu_transfer_config_get(&c);
    range_job j = {{dst, dst_strides, 0}, {(char *)src, src_strides, 0}, shape, nd, itemsize, start, count, 0};
    parallel_range(&j, c.threads);
}

/* ---- fresh memory ------------------------------------------------------------ */

#define FRESH_MIN ((size_t)32 << 20)    /* smaller arrays come from malloc's reused memory */

typedef struct {
    char *p;
    size_t n, page;
} prefault_job;

static void prefault_part(void *arg, int k, int nparts)
{
    prefault_job *j = arg;
    size_t pages = j->n / j->page, per = (pages + (size_t)nparts - 1) / (size_t)nparts;
    size_t a = per * (size_t)k, b = a + per < pages ? a + per : pages;
    if (a >= b)
        return;
    char *from = j->p + a * j->page;
    if (madvise(from, (b - a) * j->page, MADV_POPULATE_WRITE) == 0)
        return;
    for (size_t i = a; i < b; i++) {     /* (an older kernel: write each page, keeping its byte) */
        volatile char *q = j->p + i * j->page;
        *q = *q;
    }
}

/* The whole pages of [p, p + n): their number, the first at *lo, of *page
 * bytes each. */
static size_t whole_pages(const void *p, size_t n, char **lo, size_t *page)
{
    long ps = sysconf(_SC_PAGESIZE);
    *page = ps > 0 ? (size_t)ps : 4096;
    uintptr_t a = ((uintptr_t)p + *page - 1) / *page * *page, b = ((uintptr_t)p + n) / *page * *page;
    *lo = (char *)a;
    return b > a ? (b - a) / *page : 0;
}

/* Whether [p, p + n) looks never touched: some of 4 pages sampled across it
 * have no memory yet (mincore costs about a microsecond a call). */
static int looks_fresh(const void *p, size_t n)
{
    char *lo;
    size_t page, pages = whole_pages(p, n, &lo, &page);
    for (size_t k = 0; pages > 0 && k < 4; k++) {
        unsigned char v = 1;
        if (mincore(lo + pages * (2 * k + 1) / 8 * page, page, &v) == 0 && !(v & 1))
            return 1;
    }
    return 0;
}

/* Fault in the pages of [p, p + n), split across `threads` threads; their
 * bytes are kept. */
static void parallel_prefault(void *p, size_t n, int threads)
{
    char *lo;
    size_t page, pages = whole_pages(p, n, &lo, &page);
    if (pages == 0)
        return;
    prefault_job j = {lo, pages * page, page};
    int parts = (int)(pages * page / ((size_t)4 << 20));      /* 4 MiB or more each */
    run_parallel(prefault_part, &j, parts < 1 ? 1 : parts > threads ? threads : parts, threads);
}

/* ---- the engine: staging buffers, their events, one transfer at a time ---- */

static pthread_mutex_t engine_mu = PTHREAD_MUTEX_INITIALIZER;
#define WHOLE_CHUNKS 32
static struct {
    int depth, device;
    size_t chunk;
    void *buf[MAX_DEPTH];
    pygpu_event_t ev[MAX_DEPTH];
    int recorded[MAX_DEPTH];
    pygpu_event_t whole[WHOLE_CHUNKS];  /* one per chunk of a whole-buffer transfer (d2h_whole) */
} eng = {0, -1, 0, {0}, {0}, {0}, {0}};

/* Wait for and free the buffers and events (engine_mu held). */
static void engine_drop(void)
{
    for (int b = 0; b < eng.depth; b++) {
        if (eng.ev[b] && !pygpu_fork_broken()) {   /* (a broken child leaves the parent's events alone) */
            if (eng.recorded[b])
                pygpu_rt_event_synchronize(eng.ev[b]);
            pygpu_rt_event_destroy(eng.ev[b]);
        }
        if (eng.buf[b])
            pygpu_pinned_give(eng.buf[b]);
        eng.ev[b] = NULL;
        eng.buf[b] = NULL;
        eng.recorded[b] = 0;
    }
    for (int k = 0; k < WHOLE_CHUNKS; k++) {
        if (eng.whole[k] && !pygpu_fork_broken())
            pygpu_rt_event_destroy(eng.whole[k]);
        eng.whole[k] = NULL;
    }
    (void)pygpu_rt_get_last_error();
    eng.depth = 0;
    eng.device = -1;
}

/* Make the buffers for `c` on the current device (engine_mu held); 0 if
 * they cannot be had. */
static int engine_ready(const pygpu_transfer_config *c)
{
    int dev = -1;
    if (pygpu_rt_get_device(&dev) != 0)
        return 0;
    if (eng.depth == c->depth && eng.chunk == c->chunk && eng.device == dev)
        return 1;
    engine_drop();
    for (int b = 0; b < c->depth; b++) {
        eng.buf[b] = pygpu_pinned_take(c->chunk);
        if (!eng.buf[b] || pygpu_rt_event_create(&eng.ev[b], PYGPU_EVENT_DISABLE_TIMING) != 0) {
            eng.depth = b + 1;
            engine_drop();
            return 0;
        }
    }
    eng.depth = c->depth;
    eng.chunk = c->chunk;
    eng.device = dev;
    return 1;
}

void pygpu_staging_fork(enum pygpu_fork_phase phase)
{
    if (phase == PYGPU_FORK_PREPARE) {
        pthread_mutex_lock(&config_mu);
        return;
    }
    pthread_mutex_unlock(&config_mu);
    if (phase != PYGPU_FORK_CHILD)
        return;
    /* The workers stayed in the parent, and so did any thread that was in
     * a transfer: the child starts with no workers and, if the engine was
     * busy, without its buffers (they stay "in use" in the child's pool). */
    pthread_mutex_init(&job_mu, NULL);
    pthread_mutex_init(&work_mu, NULL);
    pthread_cond_init(&work_cv, NULL);
    atomic_store(&sleepers, 0);
    atomic_store(&alive, 0);
    atomic_store(&hot, 0);          /* (a transfer in the parent is not the child's: no spinning on it) */
    atomic_store(&job_workers, 0);
    atomic_store(&nworkers, 0);
    if (pthread_mutex_trylock(&engine_mu) == 0) {
        pthread_mutex_unlock(&engine_mu);
    } else {
        pthread_mutex_init(&engine_mu, NULL);
        memset(&eng, 0, sizeof eng);
        eng.device = -1;
    }
}

void pygpu_staging_release(void)
{
    pthread_mutex_lock(&engine_mu);
    engine_drop();
    pthread_mutex_unlock(&engine_mu);
}

void pygpu_transfer_config_set(const pygpu_transfer_config *c)
{
    pthread_mutex_lock(&config_mu);
    config_defaults();
    config = *c;
    if (config.depth < 2)
        config.depth = 2;
    if (config.depth > MAX_DEPTH)
        config.depth = MAX_DEPTH;
    if (config.threads < 1)
        config.threads = 1;
    if (config.threads > MAX_THREADS)
        config.threads = MAX_THREADS;
    if (config.chunk < 4096)
        config.chunk = 4096;
    pthread_mutex_unlock(&config_mu);
    pygpu_staging_release();        /* buffers of the old size go back to the pool */
}

int pygpu_should_stage(const void *host, size_t nbytes)
{
    pygpu_transfer_config c;
    int pinned = 0;
    pygpu_transfer_config_get(&c);
    if (nbytes < c.min_bytes)
        return 0;
    return pygpu_rt_host_is_pinned(host, &pinned) == 0 && !pinned;
}

/* Wait until buffer b is free (its last DMA done). */
static pygpu_status buffer_free(pygpu_staging_ctx *c, int b)
{
    if (!eng.recorded[b])
        return 0;
    eng.recorded[b] = 0;
    pygpu_status r = pygpu_rt_event_synchronize(eng.ev[b]);
    if (r != 0)
        c->call = "EventSynchronize";
    return r;
}

static pygpu_status queue_copy(pygpu_staging_ctx *c, int b, void *dst, const void *src, size_t n,
                               enum pygpu_copy_kind k)
{
    pygpu_status r = pygpu_rt_memcpy_async(dst, src, n, k, c->stream);
    if (r != 0) {
        c->call = "MemcpyAsync";
        return r;
    }
    r = pygpu_rt_event_record(eng.ev[b], c->stream);
    if (r != 0)
        c->call = "EventRecord";
    else
        eng.recorded[b] = 1;
    return r;
}

static ptrdiff_t layout_size(const pygpu_host_layout *h)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < h->nd; i++)
        n *= h->shape[i];
    return n;
}

/* Bytes per chunk for a transfer of `total` bytes: small transfers use
 * smaller chunks so that several overlap (at least 2 * depth of them). */
static size_t chunk_bytes(const pygpu_transfer_config *cfg, size_t total)
{
    size_t want = total / (size_t)(2 * eng.depth), floor = (size_t)256 << 10;
    if (want < floor)
        want = floor;
    return want < cfg->chunk ? want : cfg->chunk;
}

/* ---- tracing ------------------------------------------------------------------ */

#define TRACE_MAX 512
typedef struct { char what; int chunk; size_t bytes; long long t; int parts, cpus; long long first, last, end; } trace_event;
static struct {
    int n;
    long long t0;
    trace_event ev[TRACE_MAX];
} trace;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Note an event of a transfer: 'b' start, 'w' buffer free, 'c' host copy
 * done, 'q' DMA queued, 'e' end (engine_mu held). */
static void trace_note(char what, int chunk, size_t bytes)
{
    if (!trace_on)
        return;
    if (what == 'b') {
        trace.n = 0;
        trace.t0 = now_ns();
    }
    if (trace.n < TRACE_MAX) {
        trace_event v = {what, chunk, bytes, now_ns(), 0, 0, 0, 0, 0};
        if (what == 'c') {      /* the parts of the host copy just done */
            int seen[1024] = {0};
            pygpu_transfer_config cfg;
            pygpu_transfer_config_get(&cfg);
            int n = range_parts((ptrdiff_t)bytes, cfg.threads);
            v.parts = n;
            v.first = LLONG_MAX;
            for (int k = 0; k < n && k < MAX_PARTS; k++) {
                v.first = part_t[k][0] < v.first ? part_t[k][0] : v.first;
                v.last = part_t[k][0] > v.last ? part_t[k][0] : v.last;
                v.end = part_t[k][1] > v.end ? part_t[k][1] : v.end;
                if (part_cpu[k] >= 0 && part_cpu[k] < 1024 && !seen[part_cpu[k]]++)
                    v.cpus++;
            }
        }
        trace.ev[trace.n++] = v;
    }
}

/* With tracing on, each DMA call of a whole-buffer transfer also records a
 * timing event, and the trace prints when each call ended on the device
 * (from an event recorded at the start), so that the link's side of the
 * timeline can be read beside the host copies'. */
static pygpu_event_t trace_dma[WHOLE_CHUNKS + 1];
static int trace_dma_n;

/* Record timing event i of the trace on c's stream; 0 if it could not be. */
static int trace_record(pygpu_staging_ctx *c, int i)
{
    int ok = (trace_dma[i] || pygpu_rt_event_create(&trace_dma[i], 0) == 0) &&
             pygpu_rt_event_record(trace_dma[i], c->stream) == 0;
    (void)pygpu_rt_get_last_error();
    return ok;
}

/* Record the device-side start of a traced transfer (engine_mu held). */
static void trace_dma_start(pygpu_staging_ctx *c)
{
    trace_dma_n = trace_on && trace_record(c, 0) ? 1 : 0;
}

/* Record the device-side end of DMA call k (engine_mu held). */
static void trace_dma_end(pygpu_staging_ctx *c, int k)
{
    if (trace_on && trace_dma_n == k + 1 && k + 1 <= WHOLE_CHUNKS && trace_record(c, k + 1))
        trace_dma_n = k + 2;
}

static const char *trace_name;
static _Thread_local long long trace_enter;

void pygpu_staging_trace_enter(void)
{
    if (trace_on)
        trace_enter = now_ns();
}

static void trace_print(const char *name)
{
    trace_name = name;      /* printed when the copy is done (pygpu_staging_trace_done) */
}

void pygpu_staging_trace_done(void)
{
    if (!trace_on || !trace_name)
        return;
    const char *name = trace_name;
    trace_name = NULL;
    pthread_mutex_lock(&engine_mu);
    trace_note('s', 0, 0);
    fprintf(stderr, "pygpu staging %s: copy entered %.1f us before b0;", name,
            (double)(trace.t0 - trace_enter) / 1e3);
    for (int i = 0; i < trace.n; i++) {
        const trace_event *v = &trace.ev[i];
        fprintf(stderr, " %c%d@%.1f", v->what, v->chunk, (double)(v->t - trace.t0) / 1e3);
        if (v->bytes)
            fprintf(stderr, "[%zuK]", v->bytes >> 10);
        if (v->parts)
            fprintf(stderr, "{%d parts on %d cpus: starts %.1f..%.1f, last end %.1f}", v->parts, v->cpus,
                    (double)(v->first - trace.t0) / 1e3, (double)(v->last - trace.t0) / 1e3,
                    (double)(v->end - trace.t0) / 1e3);
    }
    if (trace_dma_n > 1 && pygpu_rt_event_synchronize(trace_dma[trace_dma_n - 1]) == 0) {
        fprintf(stderr, "; DMA calls ended, from the device's start");
        for (int k = 1; k < trace_dma_n; k++) {
            float ms = 0;
            if (pygpu_rt_event_elapsed_ms(&ms, trace_dma[0], trace_dma[k]) == 0)
                fprintf(stderr, " %d@%.1f", k - 1, ms * 1e3);
        }
    }
    (void)pygpu_rt_get_last_error();
    trace_dma_n = 0;
    fprintf(stderr, " (us)\n");
    pthread_mutex_unlock(&engine_mu);
}

static int stop_now(pygpu_staging_ctx *c)
{
    if (c->interrupted && c->interrupted(c->interrupt_arg)) {
        c->stopped = 1;
        return 1;
    }
    return 0;
}

/* Whether a chunk of `bytes` going up is written with non-temporal stores. */
static int up_stream(ptrdiff_t bytes)
{
    return bytes <= STREAM_MAX_CHUNK ? stream_stores : 0;
}

/* Take the engine and its buffers for a transfer of host layout h; 0 if
 * not to be had. */
static int engine_take(pygpu_transfer_config *cfg, const pygpu_host_layout *h)
{
    pygpu_transfer_config_get(cfg);
    if (pthread_mutex_trylock(&engine_mu) != 0)
        return 0;
    if (!engine_ready(cfg) || cfg->chunk < (size_t)h->itemsize) {
        pthread_mutex_unlock(&engine_mu);
        return 0;
    }
    /* The workers that this transfer's biggest chunk can use spin while it
     * runs; the others sleep (a 64 KiB copy wakes one, not all). */
    size_t bytes = (size_t)(layout_size(h) * h->itemsize);
    int started = atomic_load(&nworkers),
        want = range_parts((ptrdiff_t)(bytes < cfg->chunk ? bytes : cfg->chunk), cfg->threads) - 1;
    if (want > cfg->threads - 1)
        want = cfg->threads - 1;
    atomic_store(&job_workers, want < started ? want : started);
    atomic_fetch_add(&hot, 1);
    if (want > 0 && atomic_load(&sleepers) > 0) {     /* wake them while the transfer sets out */
        pthread_mutex_lock(&work_mu);
        pthread_cond_broadcast(&work_cv);
        pthread_mutex_unlock(&work_mu);
    }
    return 1;
}

/* Give the engine back at the end of a transfer. */
static void engine_give(void)
{
    atomic_fetch_sub(&hot, 1);
    pthread_mutex_unlock(&engine_mu);
}

/* The chunks of a transfer of n elements: they start small (256 KiB, at
 * `unit` bytes moved per element) and double up to `per` elements, and
 * shrink again at the end, so that the first host copy (nothing to overlap
 * it yet) and the last DMA (nothing left to overlap) are short. */
typedef struct {
    ptrdiff_t n, next, cur, per, small;
} schedule;

static schedule schedule_of(ptrdiff_t n, ptrdiff_t per, ptrdiff_t unit)
{
    ptrdiff_t small = ((ptrdiff_t)256 << 10) / unit;
    if (small < 1)
        small = 1;
    if (small > per)
        small = per;
    return (schedule){n, 0, small, per, small};
}

/* The next chunk [*e, *e + *cnt); 0 when there is none. */
static int schedule_next(schedule *s, ptrdiff_t *e, ptrdiff_t *cnt)
{
    ptrdiff_t left = s->n - s->next;
    if (left <= 0)
        return 0;
    ptrdiff_t c = s->cur;
    if (left <= 2 * c && left > 2 * s->small)
        c = left / 2;                       /* wind down */
    if (c > left)
        c = left;
    *e = s->next;
    *cnt = c;
    s->next += c;
    if (s->cur < s->per)
        s->cur = 2 * s->cur < s->per ? 2 * s->cur : s->per;
    return 1;
}

typedef struct {
    ptrdiff_t e, cnt;           /* elements [e, e + cnt) */
    char *at;                   /* their place in the staging buffers */
    int buf;                    /* which buffer */
} part_window;

/* The chunks of a transfer of n elements laid out across the staging
 * buffers without reuse (the schedule's chunks, cut where a buffer ends);
 * their number, or 0 if the transfer does not fit (or needs too many). */
static int whole_windows(ptrdiff_t n, ptrdiff_t itemsize, const pygpu_transfer_config *cfg, part_window *win)
{
    ptrdiff_t e, cnt, per_buf = (ptrdiff_t)eng.chunk / itemsize;
    int nwin = 0;
    if (per_buf < 1 || n > per_buf * eng.depth)
        return 0;
    schedule sch = schedule_of(n, (ptrdiff_t)chunk_bytes(cfg, (size_t)(n * itemsize)) / itemsize, itemsize);
    while (schedule_next(&sch, &e, &cnt)) {
        while (cnt > 0) {
            ptrdiff_t b = e / per_buf, room = (b + 1) * per_buf - e, m = cnt < room ? cnt : room;
            if (nwin == WHOLE_CHUNKS)
                return 0;
            win[nwin++] = (part_window){e, m, (char *)eng.buf[b] + (e - b * per_buf) * itemsize, (int)b};
            e += m;
            cnt -= m;
        }
    }
    return nwin;
}

/* Wait until no DMA of an earlier transfer uses the buffers. */
static pygpu_status buffers_free(pygpu_staging_ctx *c)
{
    pygpu_status r = 0;
    for (int b = 0; b < eng.depth && r == 0; b++)
        r = buffer_free(c, b);
    return r;
}

/* Queue one DMA of a whole-buffer transfer as call k, and its event. */
static pygpu_status queue_whole(pygpu_staging_ctx *c, int k, void *dst, const void *src, size_t bytes,
                                enum pygpu_copy_kind kind)
{
    pygpu_status r;
    if (!eng.whole[k] && (r = pygpu_rt_event_create(&eng.whole[k], PYGPU_EVENT_DISABLE_TIMING)) != 0)
        c->call = "EventCreateWithFlags";
    else if ((r = pygpu_rt_memcpy_async(dst, src, bytes, kind, c->stream)) != 0)
        c->call = "MemcpyAsync";
    else if ((r = pygpu_rt_event_record(eng.whole[k], c->stream)) != 0)
        c->call = "EventRecord";
    trace_dma_end(c, k);
    trace_note('q', k, bytes);
    return r;
}

/* Queue the DMA of the windows of a whole-buffer download from *queued up
 * to `to` (at most nwin). */
static pygpu_status queue_windows(pygpu_staging_ctx *c, const part_window *win, int nwin, int to, int *queued,
                                  const char *dev, ptrdiff_t itemsize)
{
    for (; *queued < (to < nwin ? to : nwin); ++*queued) {
        const part_window *w = &win[*queued];
        pygpu_status r = queue_whole(c, *queued, w->at, dev + w->e * itemsize, (size_t)(w->cnt * itemsize),
                                     PYGPU_COPY_D2H);
        if (r != 0)
            return r;
    }
    return 0;
}

/* Queue the DMA of windows [from, to) of a whole-buffer upload: one call
 * for each run of them in one staging buffer (never across two: each is
 * its own page-locked allocation, and a copy from page-locked memory must
 * lie in one, even where two happen to be adjacent in the address space). */
static pygpu_status queue_up(pygpu_staging_ctx *c, char *dev, const part_window *win, int from, int to,
                             ptrdiff_t itemsize, int *calls)
{
    pygpu_status r = 0;
    for (int i = from, j; r == 0 && i < to; i = j) {
        ptrdiff_t cnt = win[i].cnt;
        for (j = i + 1; j < to && win[j].buf == win[i].buf; j++)
            cnt += win[j].cnt;
        if ((r = queue_whole(c, *calls, dev + win[i].e * itemsize, win[i].at, (size_t)(cnt * itemsize),
                             PYGPU_COPY_H2D)) == 0)
            ++*calls;
    }
    return r;
}

/* Tell the caller that the DMA of the first `elements` is queued. */
static pygpu_status tell_queued(pygpu_staging_ctx *c, ptrdiff_t elements, ptrdiff_t itemsize)
{
    return c->queued ? c->queued(c->queued_arg, (size_t)(elements * itemsize)) : 0;
}

/* h with its dimensions merged where the host memory runs on from one to
 * the next (and those of one element dropped), into shape and strides: for
 * a copy between h and dense staging, which runs in h's C order, so that a
 * C-contiguous host side of several dimensions (a dense buffer on the way
 * to or from a strided device view) is copied in long runs, not row by
 * row. */
static pygpu_host_layout collapsed(pygpu_host_layout h, ptrdiff_t *shape, ptrdiff_t *strides)
{
    int nd = 0;
    if (layout_size(&h) == 0)
        return h;
    for (int i = 0; i < h.nd; i++) {
        if (h.shape[i] == 1)
            continue;
        if (nd > 0 && strides[nd - 1] == h.shape[i] * h.strides[i]) {
            shape[nd - 1] *= h.shape[i];
            strides[nd - 1] = h.strides[i];
        } else {
            shape[nd] = h.shape[i];
            strides[nd++] = h.strides[i];
        }
    }
    if (nd == 0) {
        shape[0] = 1;
        strides[0] = h.itemsize;
        nd = 1;
    }
    h.nd = nd;
    h.shape = shape;
    h.strides = strides;
    return h;
}

/* The host copy of elements [e, e + cnt) of h into the staging memory at `to`. */
static range_job up_job(const pygpu_host_layout *h, char *to, ptrdiff_t e, ptrdiff_t cnt)
{
    return (range_job){{to, NULL, 0}, {h->ptr, h->strides, 0}, h->shape, h->nd, h->itemsize, e, cnt,
                       up_stream(cnt * h->itemsize)};
}

/* Host to device when the whole transfer fits in the staging buffers: the
 * chunks are copied end to end into them, so that the DMA of several can go
 * as one call.  Each call costs the link about 2.3 us on an H100 (16 MiB in
 * 8 calls moved at 0.94 of one call, in 64 calls at 0.66), and the workers
 * copy faster than the link: the chunks copied while two calls are still in
 * flight wait, and go with the next ones.  *done = 0 when the transfer is
 * not for this path.
 *
 * Where a 16 MiB upload's time goes, traced on an H200 host (the DMA side
 * from timing events): the workers copy a 2 MiB window in about 36 us (58
 * GB/s) and the link takes 47-54 us for it (39-44 GB/s), back to back, so
 * the link is the limit; calls after the last copy ran at 50-52 GB/s.  A
 * DMA from page-locked memory just written by the CPU runs at about 50
 * GB/s where the same buffer left alone runs at 53 (its lines still in the
 * cache); 2 MiB calls cost it 51 against 53; 11 threads
 * copying beside it, 46-48.  Prefetching the source 2-6 KiB ahead (the
 * copy from memory went 55 -> 65 GB/s on its own) and staging buffers
 * asking for 2 MiB pages (the guest gave none to NumPy's arrays) made no
 * difference. */
static pygpu_status h2d_whole(pygpu_staging_ctx *c, char *dev, pygpu_host_layout h,
                              const pygpu_transfer_config *cfg, int *done)
{
    ptrdiff_t n = layout_size(&h);
    part_window win[WHOLE_CHUNKS];
    range_job job[2];
    int nwin = merge_up ? whole_windows(n, h.itemsize, cfg, win) : 0, from = 0, calls = 0, k;
    pygpu_status r;
    if (!(*done = nwin > 0))
        return 0;
    r = buffers_free(c);
    trace_note('b', 0, (size_t)(n * h.itemsize));
    trace_dma_start(c);
    for (k = 0; r == 0 && k <= nwin; k++) {
        pending_job p = {0};
        if (k < nwin) {
            if (stop_now(c))
                break;
            trace_note('w', k, 0);
            job[k & 1] = up_job(&h, win[k].at, win[k].e, win[k].cnt);
            p = range_start(&job[k & 1], cfg->threads);
        }
        /* Windows [from, k) are in the buffers: they go now if the link
         * would otherwise run dry. */
        if (from < k && (k == nwin || calls < 2 || pygpu_rt_event_query(eng.whole[calls - 2]) == 0)) {
            if ((r = queue_up(c, dev, win, from, k, h.itemsize, &calls)) == 0)
                r = tell_queued(c, win[k - 1].e + win[k - 1].cnt, h.itemsize);
            from = k;
        }
        job_join(&p);
        if (k < nwin)
            trace_note('c', k, (size_t)(win[k].cnt * h.itemsize));
    }
    trace_note('e', 0, 0);
    trace_print("h2d (whole)");
    /* The next transfer waits for these calls before it reuses the buffers. */
    for (int b = 0; calls > 0 && b <= (n - 1) / ((ptrdiff_t)eng.chunk / h.itemsize); b++) {
        pygpu_status w = pygpu_rt_event_record(eng.ev[b], c->stream);
        eng.recorded[b] = w == 0;
        if (w != 0 && r == 0) {
            r = w;
            c->call = "EventRecord";
        }
    }
    return r;
}

pygpu_status pygpu_staged_h2d(pygpu_staging_ctx *c, char *dev, pygpu_host_layout h, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    h = collapsed(h, shape, strides);
    range_job job[2];           /* the last two chunks' host copies */
    ptrdiff_t e, cnt;
    int k = 0;                  /* chunks copied into the buffers */
    *staged = 0;
    if (!engine_take(&cfg, &h))
        return 0;
    *staged = 1;
    int whole = 0;
    r = h2d_whole(c, dev, h, &cfg, &whole);
    if (whole) {
        engine_give();
        return r;
    }
    ptrdiff_t n = layout_size(&h), per = (ptrdiff_t)chunk_bytes(&cfg, (size_t)(n * h.itemsize)) / h.itemsize;
    schedule sch = schedule_of(n, per, h.itemsize);
    trace_note('b', 0, (size_t)(n * h.itemsize));
    if (schedule_next(&sch, &e, &cnt) && (r = buffer_free(c, 0)) == 0 && !stop_now(c)) {
        trace_note('w', 0, 0);
        job[0] = up_job(&h, eng.buf[0], e, cnt);
        parallel_range(&job[0], cfg.threads);
        trace_note('c', 0, (size_t)(cnt * h.itemsize));
        k = 1;
    }
    /* Then the workers copy chunk k into its buffer while this thread
     * queues chunk k - 1's DMA (about 4 us a call: a tenth of the time of a
     * 2 MiB chunk, when the workers would otherwise wait). */
    while (r == 0 && k > 0) {
        int b = k % eng.depth, prev = (k - 1) % eng.depth, more = schedule_next(&sch, &e, &cnt);
        const range_job *done = &job[(k - 1) & 1];
        pending_job p = {0};
        if (more) {
            if ((r = buffer_free(c, b)) != 0 || stop_now(c))
                break;
            trace_note('w', k, 0);
            job[k & 1] = up_job(&h, eng.buf[b], e, cnt);
            p = range_start(&job[k & 1], cfg.threads);
        }
        r = queue_copy(c, prev, dev + done->start * h.itemsize, eng.buf[prev], (size_t)(done->count * h.itemsize),
                       PYGPU_COPY_H2D);
        if (r == 0)
            r = tell_queued(c, done->start + done->count, h.itemsize);
        trace_note('q', k - 1, 0);
        if (!more)
            break;
        job_join(&p);           /* (also after a failed queue: the workers are done with it) */
        trace_note('c', k, (size_t)(cnt * h.itemsize));
        k++;
    }
    trace_note('e', 0, 0);
    trace_print("h2d");
    engine_give();
    return r;
}

typedef struct {
    ptrdiff_t e, cnt, off;      /* elements [e, e + cnt), device bytes from off */
} window;

/* Device to host when the whole transfer fits in the staging buffers
 * (depth x chunk bytes): each chunk's DMA goes into its own part of the
 * buffers, queued a few ahead of the copy-out (all at once into fresh
 * memory, see below), and the workers copy each chunk out as soon as it has
 * landed.  No buffer is reused, so the DMA never waits for the host.
 * Measured on an H200 host: get(ary=pageable) of 64 MiB 0.78 -> 0.90-0.95
 * of the link, 16 MiB 0.42 -> 0.56-0.64; bigger transfers keep the ring of
 * buffers (a whole 256 MiB block this way ran at 0.71-0.78, the ring 0.88).
 * *done = 0 when the transfer is not for this path. */
static pygpu_status d2h_whole(pygpu_staging_ctx *c, pygpu_host_layout h, const char *dev,
                              const pygpu_transfer_config *cfg, int fresh, int *done)
{
    ptrdiff_t n = layout_size(&h);
    size_t total = (size_t)(n * h.itemsize);
    pygpu_status r;
    part_window win[WHOLE_CHUNKS];
    int nwin = whole_windows(n, h.itemsize, cfg, win), queued = 0, k;
    if (!(*done = nwin > 0))
        return 0;
    r = buffers_free(c);
    trace_note('b', 0, total);
    trace_dma_start(c);
    /* Into fresh memory: every window is queued, and the workers fault the
     * destination in while the DMA runs. */
    if (fresh && r == 0)
        r = queue_windows(c, win, nwin, nwin, &queued, dev, h.itemsize);
    if (fresh && r == 0)
        parallel_prefault(h.ptr, total, cfg->threads);
    /* Else queued two windows ahead at first, then more while the workers
     * copy each window out (each call takes about 4 us: queuing them all
     * before the first copy-out held it back by some 50 us of 16 MiB). */
    for (k = 0; r == 0 && k < nwin; k++) {
        if ((r = queue_windows(c, win, nwin, k + 2, &queued, dev, h.itemsize)) != 0)
            break;
        if ((r = pygpu_rt_event_synchronize(eng.whole[k])) != 0) {
            c->call = "EventSynchronize";
            break;
        }
        if (stop_now(c))
            break;
        trace_note('w', k, 0);
        range_job j = {{h.ptr, h.strides, 0}, {win[k].at, NULL, 0}, h.shape, h.nd, h.itemsize, win[k].e, win[k].cnt,
                       0};
        pending_job p = range_start(&j, cfg->threads);
        r = queue_windows(c, win, nwin, k + 4, &queued, dev, h.itemsize);
        job_join(&p);
        trace_note('c', k, (size_t)(win[k].cnt * h.itemsize));
    }
    trace_note('e', 0, 0);
    trace_print("d2h (whole)");
    if (queued > 0) {       /* nothing left in flight into the buffers */
        pygpu_status w = pygpu_rt_event_synchronize(eng.whole[queued - 1]);
        if (w != 0 && r == 0) {
            r = w;
            c->call = "EventSynchronize";
        }
    }
    return r;
}

pygpu_status pygpu_staged_d2h(pygpu_staging_ctx *c, pygpu_host_layout h, const char *dev, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    h = collapsed(h, shape, strides);
    window win[MAX_DEPTH];
    *staged = 0;
    if (!engine_take(&cfg, &h))
        return 0;
    *staged = 1;
    /* Into memory never touched (a new NumPy array of 32 MiB or more, or
     * the array get() makes past the pinned pool's limit, is fresh from the
     * kernel): its pages are faulted in by all the workers while the first
     * DMAs run, not one at a time by whichever worker meets them in the
     * middle of its part.  Measured on an H100 host: get(ary=fresh) 256 MiB
     * 15.9 GB/s; the same copy into a new array faulted in first, 24.4. */
    size_t total = (size_t)(layout_size(&h) * h.itemsize);
    int fresh = total >= FRESH_MIN && h.nd == 1 && h.strides[0] == h.itemsize && looks_fresh(h.ptr, total);
    int whole = 0;
    r = d2h_whole(c, h, dev, &cfg, fresh, &whole);
    if (whole) {
        engine_give();
        return r;
    }
    ptrdiff_t n = layout_size(&h), per = (ptrdiff_t)chunk_bytes(&cfg, (size_t)(n * h.itemsize)) / h.itemsize;
    schedule sch = schedule_of(n, per, h.itemsize);
    int issued = 0, retired = 0, more = 1;
    trace_note('b', 0, (size_t)(n * h.itemsize));
    /* Keep `depth` chunks in flight: DMA of the next ones overlaps the host
     * copy of this one. */
    while (r == 0) {
        for (; more && issued - retired < eng.depth && r == 0; issued++) {
            int b = issued % eng.depth;
            if (!(more = schedule_next(&sch, &win[b].e, &win[b].cnt)))
                break;
            if ((r = buffer_free(c, b)) == 0)
                r = queue_copy(c, b, eng.buf[b], dev + win[b].e * h.itemsize, (size_t)(win[b].cnt * h.itemsize),
                               PYGPU_COPY_D2H);
            trace_note('q', issued, 0);
        }
        if (fresh && r == 0)            /* (the first `depth` chunks are on their way) */
            parallel_prefault(h.ptr, total, cfg.threads);
        fresh = 0;
        if (retired == issued)
            break;
        int b = retired % eng.depth;
        if (r != 0 || (r = buffer_free(c, b)) != 0 || stop_now(c))
            break;
        trace_note('w', retired, 0);
        range_job j = {{h.ptr, h.strides, 0}, {eng.buf[b], NULL, 0}, h.shape, h.nd, h.itemsize, win[b].e,
                       win[b].cnt, 0};
        parallel_range(&j, cfg.threads);
        trace_note('c', retired, (size_t)(win[b].cnt * h.itemsize));
        retired++;
    }
    trace_note('e', 0, 0);
    trace_print("d2h");
    for (int b = 0; b < eng.depth; b++) {   /* nothing left in flight into the buffers */
        pygpu_status f = buffer_free(c, b);
        if (f != 0 && r == 0)
            r = f;
    }
    engine_give();
    return r;
}

/* ---- strided device views --------------------------------------------------- */

/* Byte offset of element `e` (C order over shape) in a layout. */
static ptrdiff_t offset_of(ptrdiff_t e, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides)
{
    ptrdiff_t off = 0;
    for (int i = nd - 1; i >= 0; i--) {
        off += (e % shape[i]) * strides[i];
        e /= shape[i];
    }
    return off;
}

/* The next window from element e: as many elements as fit `limit` bytes of
 * the device layout (at least one). */
static window next_window(ptrdiff_t e, ptrdiff_t n, ptrdiff_t guess, size_t limit, int nd,
                          const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize)
{
    window w = {e, n - e < guess ? n - e : guess, offset_of(e, nd, shape, strides)};
    while (w.cnt > 1 && (size_t)(offset_of(e + w.cnt - 1, nd, shape, strides) - w.off + itemsize) > limit)
        w.cnt /= 2;
    return w;
}

pygpu_status pygpu_staged_d2h_view(pygpu_staging_ctx *c, pygpu_host_layout h, const char *dev,
                                   const ptrdiff_t *dev_strides, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    window win[MAX_DEPTH];
    ptrdiff_t lo, hi;
    *staged = 0;
    if (!engine_take(&cfg, &h))
        return 0;
    *staged = 1;
    ptrdiff_t n = layout_size(&h);
    pygpu_shape_extent(h.nd, h.shape, dev_strides, h.itemsize, &lo, &hi);
    size_t limit = chunk_bytes(&cfg, (size_t)(hi - lo));
    double cover = (double)(hi - lo) / (double)n;       /* covering bytes per element */
    ptrdiff_t guess = (ptrdiff_t)((double)limit / cover), e, cnt;
    if (guess < 1)
        guess = 1;
    /* Windows start small and grow, as the chunks of a dense copy do. */
    schedule sch = schedule_of(n, guess, cover < 1 ? 1 : (ptrdiff_t)cover);     /* (bytes moved per element) */
    ptrdiff_t done = 0;
    int issued = 0, retired = 0;
    trace_note('b', 0, (size_t)(hi - lo));
    /* Windows of the covering bytes come down `depth` at a time; the
     * workers gather each one's elements while the next ones move. */
    while (done < n && r == 0) {
        for (; issued - retired < eng.depth && r == 0 && schedule_next(&sch, &e, &cnt); issued++) {
            int b = issued % eng.depth;
            win[b] = next_window(e, n, cnt, limit, h.nd, h.shape, dev_strides, h.itemsize);
            sch.next = e + win[b].cnt;      /* (fewer where the layout is sparser) */
            size_t bytes = (size_t)(offset_of(win[b].e + win[b].cnt - 1, h.nd, h.shape, dev_strides) - win[b].off +
                                    h.itemsize);
            if ((r = buffer_free(c, b)) == 0)
                r = queue_copy(c, b, eng.buf[b], dev + win[b].off, bytes, PYGPU_COPY_D2H);
            trace_note('q', issued, bytes);
        }
        int b = retired % eng.depth;
        if (r != 0 || (r = buffer_free(c, b)) != 0 || stop_now(c))
            break;
        trace_note('w', retired, 0);
        range_job j = {{h.ptr, h.strides, 0}, {eng.buf[b], dev_strides, win[b].off}, h.shape, h.nd, h.itemsize,
                       win[b].e, win[b].cnt, 0};
        parallel_range(&j, cfg.threads);
        trace_note('c', retired, (size_t)(win[b].cnt * h.itemsize));
        done += win[b].cnt;
        retired++;
    }
    trace_note('e', 0, 0);
    trace_print("d2h (view)");
    for (int b = 0; b < eng.depth; b++) {
        pygpu_status f = buffer_free(c, b);
        if (f != 0 && r == 0)
            r = f;
    }
    engine_give();
    return r;
}

pygpu_status pygpu_staged_h2d_rows(pygpu_staging_ctx *c, char *dev, ptrdiff_t pitch, ptrdiff_t width,
                                   pygpu_host_layout h, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    *staged = 0;
    ptrdiff_t n = layout_size(&h), per_row = width / h.itemsize, rows = n / per_row;
    if (!engine_take(&cfg, &h))
        return 0;
    size_t limit = chunk_bytes(&cfg, (size_t)(n * h.itemsize));
    ptrdiff_t k = (ptrdiff_t)limit / width;
    if (k < 1 || (limit < cfg.chunk && !rows_any_size)) {
        engine_give();
        return 0;               /* rows wider than a buffer, or chunks not full: another way */
    }
    *staged = 1;
    trace_note('b', 0, (size_t)(n * h.itemsize));
    for (ptrdiff_t row = 0, i = 0; row < rows && r == 0; row += k, i++) {
        int b = (int)(i % eng.depth);
        ptrdiff_t cnt = rows - row < k ? rows - row : k;
        if ((r = buffer_free(c, b)) != 0 || stop_now(c))
            break;
        trace_note('w', (int)i, 0);
        range_job j = {{eng.buf[b], NULL, 0}, {h.ptr, h.strides, 0}, h.shape, h.nd, h.itemsize, row * per_row,
                       cnt * per_row, up_stream(cnt * width)};
        parallel_range(&j, cfg.threads);
        trace_note('c', (int)i, (size_t)(cnt * width));
        r = pygpu_rt_memcpy2d_async(dev + row * pitch, (size_t)pitch, eng.buf[b], (size_t)width, (size_t)width,
                                    (size_t)cnt, PYGPU_COPY_H2D, c->stream);
        if (r != 0) {
            c->call = "Memcpy2DAsync";
            break;
        }
        if ((r = pygpu_rt_event_record(eng.ev[b], c->stream)) != 0)
            c->call = "EventRecord";
        else
            eng.recorded[b] = 1;
        trace_note('q', (int)i, 0);
    }
    trace_note('e', 0, 0);
    trace_print("h2d (rows)");
    engine_give();
    return r;
}
