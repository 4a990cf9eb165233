/*
 * pages.h -- the host blocks PyGPU page-locks (pages.c): shared anonymous
 * pages, aligned to a huge page from 2 MiB, on the NUMA node asked for
 * where the host lets it say, every page faulted in before the runtime
 * registers them.  Pure C, no runtime: both backends make their blocks so
 * (rt_gpu.c, rt_host.c).
 *
 * The GPU backends' are shared, as the runtime's own blocks are in
 * effect: a fork's child reads the same pages
 * (tools/research/fork-reads-pinned.py), and no copy-on-write can move a
 * page from under the DMA.  The host backend's are private: its forked
 * child goes on transferring (unless PYGPU_HOST_FORK_RULE=gpu), with the
 * pool's blocks it inherited, while the parent's threads go on with
 * theirs; shared, the two wrote each other's staging (CI, stop 62).
 */
#ifndef PYGPU_PAGES_H
#define PYGPU_PAGES_H

#include <stddef.h>

/* How a block's pages were placed (pygpu_pages_map's *placement): not
 * asked (no node given), or on the node asked for; else the errno with
 * which the kernel refused the node (pygpu_numa_prefer's), the block made
 * all the same. */
enum { PYGPU_PAGES_UNPLACED = -1, PYGPU_PAGES_PLACED = 0 };
/* pygpu_pages_map's `shared`: the pages copied on write in a fork's child,
 * or shared with it. */
enum { PYGPU_PAGES_PRIVATE = 0, PYGPU_PAGES_SHARED = 1 };

/* A block of n bytes (rounded up to whole pages) at *p, its pages shared
 * with a fork's child (PYGPU_PAGES_SHARED) or copied on write (_PRIVATE), preferring NUMA
 * node `node` (-1: the system's choice) and faulted in.
 * 0, or ENOMEM: more than the machine's memory (refused at once, as the
 * runtime refuses it, rather than faulted in until the kernel runs out),
 * or the kernel's refusal; then *p is NULL and nothing is left mapped. */
int pygpu_pages_map(void **p, size_t n, int shared, int node, int *placement);
/* The bytes a block of n takes: whole pages (0 where that overflows). */
size_t pygpu_pages_bytes(size_t n);
/* Unmap a block of pygpu_pages_map's of n bytes (NULL: nothing). */
void pygpu_pages_unmap(void *p, size_t n);

#endif /* PYGPU_PAGES_H */
