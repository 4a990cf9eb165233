/*
 * test_pin_gpu.c -- page-locked blocks as the GPU backends make them
 * (pygpu_rt_host_pin/unpin, src/backend/rt_gpu.c), built against the CUDA
 * runtime: more than the machine has is refused at once with out of
 * memory; where a GPU is present each block is page-locked, aligned to a
 * huge page from 2 MiB on, writable, read by a forked child as the parent
 * wrote it, and unpinned; where none is, the registration fails and
 * nothing is left mapped.  Either way no mapping is left behind.  Blocks
 * asked for on NUMA node 0 prefer it, where the kernel lets them (its
 * refusal is said, and the block is made all the same).
 */
#define _GNU_SOURCE
#include "check.h"
#include "backend/rt.h"
#include "numa.h"
#include "pages.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child's reading of the n bytes at p, written with `byte`: 0 if all
 * are right. */
static int child_reads(const unsigned char *p, size_t n, unsigned char byte)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(p[0] == byte && p[n / 2] == byte && p[n - 1] == byte ? 0 : 3);
    int status = -1;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void)
{
    const size_t huge = (size_t)2 << 20;
    size_t sizes[] = {1, 4095, 4096, huge, (5u << 20) + 3, (size_t)64 << 20, (size_t)rng_range(1, 8 << 20)};
    int pinned_ok = 0, refused = 0, placement, placed = 0;
    void *p = NULL;
    /* (the runtime's own mappings made first: a block, or its refusal) */
    if (pygpu_rt_host_pin(&p, 1, -1, &placement) == 0)
        (void)pygpu_rt_host_unpin(p, 1);
    (void)pygpu_rt_get_last_error();
    int before = mappings();

    pygpu_status s = pygpu_rt_host_pin(&p, (size_t)1 << 62, -1, &placement);
    CHECK(s != 0 && pygpu_rt_is_out_of_memory(s) && p == NULL);
    s = pygpu_rt_host_pin(&p, SIZE_MAX - 100, 0, &placement);
    CHECK(s != 0 && pygpu_rt_is_out_of_memory(s) && p == NULL);

    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        p = (void *)1;
        s = pygpu_rt_host_pin(&p, n, (int)(k % 2) - 1, &placement);     /* (on node 0, or none) */
        CHECK(k % 2 ? placement != PYGPU_PAGES_UNPLACED : placement == PYGPU_PAGES_UNPLACED);
        if (s != 0) {           /* (no GPU here: the registration refused) */
            (void)pygpu_rt_get_last_error();
            CHECK(p == NULL);
            refused++;
            continue;
        }
        CHECK(p != NULL);
        if (!p)
            continue;
        if (n >= huge)
            CHECK((uintptr_t)p % huge == 0);
        int pinned = 0;
        CHECK(pygpu_rt_host_is_pinned(p, n, &pinned) == 0 && pinned);
        if (placement == PYGPU_PAGES_PLACED) {
            CHECK(pygpu_numa_preferred(p) == 0 && pygpu_numa_node_of_page((char *)p + n - 1) == 0);
            placed++;
        }
        unsigned char byte = (unsigned char)(0x40 + k);
        memset(p, byte, n);
        CHECK(child_reads(p, n, byte) == 0);
        CHECK(pygpu_rt_host_unpin(p, n) == 0);
        pinned_ok++;
    }
    CHECK(pinned_ok + refused == (int)(sizeof sizes / sizeof *sizes));
    CHECK(pinned_ok == 0 || refused == 0);      /* (a GPU takes them all, or none) */
    CHECK(mappings() == before);
    printf("blocks page-locked: %d, refused (no GPU): %d, placed on node 0: %d\n", pinned_ok, refused, placed);
    return check_done("test_pin_gpu");
}
