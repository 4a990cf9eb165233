/*
 * pages.c -- the host blocks PyGPU page-locks; see pages.h.
 */
#define _GNU_SOURCE                 /* (madvise's advice) */
#include "pages.h"
#include "numa.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#  define MADV_POPULATE_WRITE 23    /* (Linux 5.14; older headers lack it, and older kernels refuse it) */
#endif

#define HUGE_PAGE ((size_t)2 << 20)     /* (from this size on, aligned to a huge page) */

static size_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : (size_t)4096;
}

size_t pygpu_pages_bytes(size_t n)
{
    size_t page = page_size();
    n = n ? n : 1;
    return n > SIZE_MAX - page ? 0 : (n + page - 1) / page * page;
}

int pygpu_pages_map(void **p, size_t n, int shared, int node, int *placement)
{
    size_t len = pygpu_pages_bytes(n), slack = len >= HUGE_PAGE ? HUGE_PAGE : 0;
    long pages = sysconf(_SC_PHYS_PAGES);
    *p = NULL;
    *placement = PYGPU_PAGES_UNPLACED;
    if (!len || len > SIZE_MAX - HUGE_PAGE || (pages > 0 && len / page_size() > (size_t)pages))
        return ENOMEM;
    char *base = mmap(NULL, len + slack, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return ENOMEM;
    char *at = slack ? (char *)(((uintptr_t)base + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1)) : base;
    if (at > base)                                  /* (the slack on both sides back) */
        munmap(base, (size_t)(at - base));
    if (base + len + slack > at + len)
        munmap(at + len, (size_t)(base + len + slack - (at + len)));
    if (node >= 0)                                  /* (before a page is faulted in) */
        *placement = pygpu_numa_prefer(at, len, node);
    if (slack)                                      /* (where the host gives shared memory huge pages) */
        (void)madvise(at, len, MADV_HUGEPAGE);
    if (madvise(at, len, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {  /* (EINVAL: a kernel before 5.14; registering faults them in) */
        munmap(at, len);
        return ENOMEM;
    }
    *p = at;
    return 0;
}

void pygpu_pages_unmap(void *p, size_t n)
{
    if (p)
        munmap(p, pygpu_pages_bytes(n));
}
