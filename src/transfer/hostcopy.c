/*
 * hostcopy.c -- element-range copies between host layouts on the workers,
 * and the fault-in of fresh destinations; see hostcopy.h.
 */
#define _GNU_SOURCE
#include "hostcopy.h"
#include "settings.h"
#include "trace.h"
#include "workers.h"
#include "../env.h"
#include "../shape.h"
#include "../tuning.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif

/* ---- one range, on one thread ------------------------------------------------ */

/* Runs going up of PYGPU_STREAM_MIN bytes or more, in chunks of at most
 * PYGPU_STREAM_MAX_CHUNK, are written with non-temporal stores: the
 * staging buffer then holds no dirty lines for the DMA engine to snoop out
 * of the caches (docs/performance.md#non-temporal-stores). */

int pygpu_up_stream(ptrdiff_t bytes)
{
    return bytes <= PYGPU_STREAM_MAX_CHUNK;
}

/* The size of cpu0's level-3 cache as sysfs gives it ("307200K"), or 0. */
static size_t sysfs_cache_bytes(void)
{
    char text[32] = "";
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!f)
        return 0;
    if (!fgets(text, sizeof text, f))
        text[0] = 0;
    fclose(f);
    return pygpu_parse_bytes(text);
}

size_t pygpu_cache_bytes(void)
{
    static size_t known;                /* (read once; every thread finds the same) */
    size_t b = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (b)
        return b;
    b = pygpu_env_get()->cache_bytes;
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!b) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        b = l3 > 0 ? (size_t)l3 : 0;
    }
#endif
    if (!b)
        b = sysfs_cache_bytes();
    if (!b)
        b = PYGPU_CACHE_BYTES_GUESS;
    __atomic_store_n(&known, b, __ATOMIC_RELAXED);
    return b;
}

int pygpu_down_stream(size_t total)
{
    return total > pygpu_cache_bytes();
}

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
#else
static void stream_copy(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }
#endif

/* Elements [start, start + count), in C order over shape, from src to dst. */
static void range_copy(pygpu_range_side dst, pygpu_range_side src, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize,
                       ptrdiff_t start, ptrdiff_t count, int stream)
{
    ptrdiff_t idx[PYGPU_MAXDIMS];
    pygpu_range_side *sides[2] = {&dst, &src};
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
        if (stream && step[0] == itemsize && step[1] == itemsize && run * itemsize >= PYGPU_STREAM_MIN)
            stream_copy(p[0], p[1], (size_t)(run * itemsize));
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

static pygpu_range_side advance(pygpu_range_side s, ptrdiff_t elements, ptrdiff_t itemsize)
{
    if (!s.strides)
        s.ptr += elements * itemsize;
    return s;
}

/* ---- a range on the workers ----------------------------------------------------- */

/* A range copy is cut into up to PYGPU_PARTS_PER_THREAD parts per thread,
 * of at least PYGPU_PART_MIN bytes each, claimed one at a time: a worker
 * that starts late (descheduled, or its core taken) then just does fewer
 * of them (docs/performance.md#parts). */

int pygpu_range_parts(ptrdiff_t bytes, int threads)
{
    ptrdiff_t n = bytes / PYGPU_PART_MIN, most = (ptrdiff_t)threads * (threads > 1 ? PYGPU_PARTS_PER_THREAD : 1);
    if (n > most)
        n = most;
    return n < 1 ? 1 : (int)n;
}

static void range_part(void *arg, int k, int n)
{
    pygpu_range_job *j = arg;
    ptrdiff_t per = (j->count + n - 1) / n, a = per * k, b = a + per > j->count ? j->count : a + per;
    if (j->traced)
        PYGPU_TRACE_PART(k, n, 0);
    if (a < b)
        range_copy(advance(j->dst, a, j->itemsize), advance(j->src, a, j->itemsize), j->nd, j->shape,
                   j->itemsize, j->start + a, b - a, j->stream);
    if (j->traced)
        PYGPU_TRACE_PART(k, n, 1);
}

/* (the traced transfer's copies alone go into the trace: the parts of
 * several threads' copies at once would mix there) */
pygpu_job pygpu_range_start(pygpu_range_job *j, int threads)
{
    j->traced = pygpu_trace_mine();
    return pygpu_job_start(range_part, j, pygpu_range_parts(j->count * j->itemsize, threads), threads);
}

void pygpu_parallel_range(pygpu_range_job *j, int threads)
{
    pygpu_job p = pygpu_range_start(j, threads);
    pygpu_job_join(&p);
}

void pygpu_parallel_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                                 const ptrdiff_t *src_strides, int nd, const ptrdiff_t *shape,
                                 ptrdiff_t itemsize, ptrdiff_t start, ptrdiff_t count)
{
    pygpu_transfer_config c;
    pygpu_transfer_config_get(&c);
    pygpu_range_job j = {{dst, dst_strides, 0}, {(char *)src, src_strides, 0}, shape, nd, itemsize, start, count, 0, 0};
    pygpu_parallel_range(&j, c.threads);
}

/* ---- fresh memory ------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t n, page;
} prefault_job;

#define HUGE_PAGE ((size_t)2 << 20)

/* Where part k of nparts starts, in pages from j->p: on a huge page's
 * boundary, so that no two threads fault in one. */
static size_t part_start(const prefault_job *j, int k, int nparts)
{
    size_t pages = j->n / j->page, huge = HUGE_PAGE / j->page, at = pages * (size_t)k / (size_t)nparts;
    size_t first = (HUGE_PAGE - (uintptr_t)j->p % HUGE_PAGE) % HUGE_PAGE / j->page;    /* (the first boundary) */
    if (k == 0 || k == nparts || huge == 0)
        return at;
    at = at <= first ? first : first + (at - first + huge - 1) / huge * huge;
    return at < pages ? at : pages;
}

static void prefault_part(void *arg, int k, int nparts)
{
    prefault_job *j = arg;
    size_t a = part_start(j, k, nparts), b = part_start(j, k + 1, nparts);
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

/* (4 pages sampled: mincore costs about a microsecond a call) */
int pygpu_looks_fresh(const void *p, size_t n)
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

/* Ask for huge pages over the 2 MiB-aligned interior of [lo, lo + n): a
 * fault there then gets 2 MiB at once, where 4 KiB pages cost the kernel a
 * fault each (docs/performance.md#fresh-destinations: where the time
 * goes).  Where the kernel has transparent huge pages off, or none
 * to give, the faults are those of small pages, as before. */
static void want_huge_pages(char *lo, size_t n)
{
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)lo + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    uintptr_t b = ((uintptr_t)lo + n) / HUGE_PAGE * HUGE_PAGE;
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)lo;
    (void)n;
#endif
}

void pygpu_parallel_prefault(void *p, size_t n, int threads)
{
    char *lo;
    size_t page, pages = whole_pages(p, n, &lo, &page);
    if (pages == 0)
        return;
    want_huge_pages(lo, pages * page);
    prefault_job j = {lo, pages * page, page};
    int parts = (int)(pages * page / PYGPU_PREFAULT_PART_MIN);
    pygpu_run_parallel(prefault_part, &j, parts < 1 ? 1 : parts > threads ? threads : parts, threads);
}
