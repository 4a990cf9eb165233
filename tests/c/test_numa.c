/*
 * test_numa.c -- the host's NUMA nodes (src/numa.c) and the blocks PyGPU
 * page-locks (src/pages.c): a PCI device's node read from a sysfs tree made
 * here, whatever the runtime's spelling of its address, and -1 for every
 * address or file that is not one; pages preferring node 0 (the node every
 * Linux host has) say so and lie there, a node past the kernel's or none
 * refused with EINVAL and the pages left alone; blocks aligned, faulted in,
 * placed as asked, shared with a fork's child or copied as asked, refused
 * at once past the machine's memory, and unmapped whole.  Where the kernel
 * refuses the calls themselves (a sandbox without them), it says so and
 * checks that the blocks are made all the same.
 */
#define _GNU_SOURCE
#include "check.h"
#include "numa.h"
#include "pages.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[64];

/* root/bus/pci/devices/<dev>/numa_node holding `text`. */
static void device_file(const char *dev, const char *text)
{
    char path[256];
    const char *parts[] = {"bus", "bus/pci", "bus/pci/devices"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        snprintf(path, sizeof path, "%s/%s", root, parts[i]);
        (void)mkdir(path, 0700);
    }
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s", root, dev);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", root, dev);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void remove_tree(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

static void sysfs_reading(void)
{
    snprintf(root, sizeof root, "/tmp/pygpu-numa-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    device_file("0000:1b:00.0", "1\n");
    device_file("0000:3d:00.0", "-1\n");
    device_file("0001:00:02.1", "node two\n");
    device_file("0000:9a:00.0", "5000\n");          /* (past PYGPU_NUMA_NODES_MAX) */
    device_file("10000:01:00.0", "3");              /* (a domain of five digits, no newline) */
    /* the runtimes' spellings: CUDA's upper case, nvidia-smi's eight digits */
    CHECK(pygpu_numa_node_of_pci(root, "0000:1b:00.0") == 1);
    CHECK(pygpu_numa_node_of_pci(root, "0000:1B:00.0") == 1);
    CHECK(pygpu_numa_node_of_pci(root, "00000000:1B:00.0") == 1);
    CHECK(pygpu_numa_node_of_pci(root, "10000:01:00.0") == 3);
    /* what the host says is no node, or nothing it can say */
    CHECK(pygpu_numa_node_of_pci(root, "0000:3d:00.0") == -1);
    CHECK(pygpu_numa_node_of_pci(root, "0001:00:02.1") == -1);
    CHECK(pygpu_numa_node_of_pci(root, "0000:9a:00.0") == -1);
    CHECK(pygpu_numa_node_of_pci(root, "0000:1c:00.0") == -1);      /* (no such device) */
    /* addresses that are not one */
    const char *bad[] = {"", "1b:00.0", "0000:1b:00", "0000:1b:00.0x", "0000:1b:00.8", "0000:100:00.0",
                         "0000:1b:20.0", "zz:1b:00.0", "0000:1b:00.0/../../../x", " "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(pygpu_numa_node_of_pci(root, bad[i]) == -1);
    CHECK(pygpu_numa_node_of_pci(root, NULL) == -1);
    CHECK(pygpu_numa_node_of_pci("/nonexistent-sysfs", "0000:1b:00.0") == -1);
    remove_tree();
}

/* 1 if the kernel places pages here (0: it refuses the calls, said). */
static int policies(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 4 * page;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED)
        return 0;
    CHECK(pygpu_numa_preferred(p) == -1);                           /* (the default policy) */
    int r = pygpu_numa_prefer(p, n, 0);
    if (r == EPERM || r == ENOSYS) {
        printf("placement refused here (%s): blocks checked unplaced\n", strerror(r));
        munmap(p, n);
        return 0;
    }
    CHECK(r == 0);
    CHECK(pygpu_numa_preferred(p) == 0 && pygpu_numa_preferred(p + n - 1) == 0);
    memset(p, 1, n);
    CHECK(pygpu_numa_node_of_page(p) == 0 && pygpu_numa_node_of_page(p + 3 * page) == 0);
    /* refused: no node, one past the mask, one past any host's; the policy kept */
    CHECK(pygpu_numa_prefer(p, n, -1) == EINVAL);
    CHECK(pygpu_numa_prefer(p, n, PYGPU_NUMA_NODES_MAX) == EINVAL);
    CHECK(pygpu_numa_prefer(p, n, PYGPU_NUMA_NODES_MAX - 1) == EINVAL);
    CHECK(pygpu_numa_prefer(NULL, n, 0) == EINVAL && pygpu_numa_prefer(p, 0, 0) == EINVAL);
    CHECK(pygpu_numa_preferred(p) == 0);
    munmap(p, n);
    return 1;
}

/* What the parent reads at b[n - 1] after a fork's child wrote 0xA5 there:
 * the child's byte where the block is shared, its own where private (the
 * host backend's: its child goes on transferring with the pool's blocks
 * while the parent does with the same; shared, each wrote the other's). */
static int child_writes(unsigned char *b, size_t n)
{
    pid_t pid = fork();
    int status = -1;
    if (pid == 0) {
        b[n - 1] = 0xA5;
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
        return -1;
    return b[n - 1];
}

static void blocks(int placing)
{
    const size_t huge = (size_t)2 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    size_t sizes[] = {1, page - 1, page, page + 1, huge, huge + 3, (size_t)9 << 20, (size_t)rng_range(1, 4 << 20)};
    int placement, before = mappings();
    void *p = (void *)1;
    CHECK(pygpu_pages_map(&p, (size_t)1 << 62, PYGPU_PAGES_SHARED, 0, &placement) == ENOMEM && p == NULL);
    CHECK(pygpu_pages_map(&p, SIZE_MAX - 100, PYGPU_PAGES_PRIVATE, -1, &placement) == ENOMEM && p == NULL);
    CHECK(pygpu_pages_bytes(SIZE_MAX - 1) == 0 && pygpu_pages_bytes(0) == page && pygpu_pages_bytes(page + 1) == 2 * page);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        int node = k % 2 ? 0 : -1, shared = k % 4 < 2 ? PYGPU_PAGES_SHARED : PYGPU_PAGES_PRIVATE;
        CHECK(pygpu_pages_map(&p, n, shared, node, &placement) == 0 && p != NULL);
        if (!p)
            continue;
        CHECK((uintptr_t)p % page == 0 && (n < huge || (uintptr_t)p % huge == 0));
        if (node < 0)
            CHECK(placement == PYGPU_PAGES_UNPLACED && pygpu_numa_preferred(p) == -1);
        else if (placing)
            CHECK(placement == PYGPU_PAGES_PLACED && pygpu_numa_preferred((char *)p + n - 1) == 0 &&
                  pygpu_numa_node_of_page((char *)p + n / 2) == 0);
        else
            CHECK(placement > 0);           /* (the kernel's refusal, said; the block made all the same) */
        unsigned char *b = p;
        CHECK(b[0] == 0 && b[n - 1] == 0);  /* (fresh pages) */
        memset(b, 0x5A, pygpu_pages_bytes(n));
        CHECK(child_writes(b, n) == (shared == PYGPU_PAGES_SHARED ? 0xA5 : 0x5A));
        pygpu_pages_unmap(p, n);
    }
    /* a node the kernel has not: the block made, unplaced, the refusal said */
    CHECK(pygpu_pages_map(&p, huge, PYGPU_PAGES_SHARED, PYGPU_NUMA_NODES_MAX - 1, &placement) == 0 && p != NULL);
    CHECK(placement == (placing ? EINVAL : placement) && placement != PYGPU_PAGES_PLACED);
    CHECK(pygpu_numa_preferred(p) == -1);
    pygpu_pages_unmap(p, huge);
    pygpu_pages_unmap(NULL, huge);
    CHECK(mappings() == before);
}

int main(void)
{
    sysfs_reading();
    blocks(policies());
    return check_done("test_numa");
}
