/*
 * numa.c -- the host's NUMA nodes: a PCI device's node from sysfs, and the
 * kernel's memory policy calls made directly (no libnuma); see numa.h.
 */
#define _GNU_SOURCE             /* syscall */
#include "numa.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* The kernel's policy modes and flags (linux/mempolicy.h; its values are
 * the ABI). */
enum { MODE_DEFAULT = 0, MODE_PREFERRED = 1 };
enum { FLAG_NODE = 1, FLAG_ADDR = 2 };

#define MASK_WORDS (PYGPU_NUMA_NODES_MAX / (8 * sizeof(unsigned long)))

int pygpu_numa_node_of_pci(const char *sysfs, const char *busid)
{
    unsigned domain, bus, slot, fn;
    char tail, path[512];
    int node = -1;
    /* (sysfs names a device with the domain in at least four digits and
     * the rest in two, one and one, lower case: the runtimes' own spelling
     * differs, CUDA's in upper case, nvidia-smi's with eight digits) */
    if (!busid || busid[strspn(busid, "0123456789abcdefABCDEF:.")] ||     /* (no sign, space or "0x") */
        sscanf(busid, "%x:%x:%x.%x%c", &domain, &bus, &slot, &fn, &tail) != 4 || bus > 0xff || slot > 0x1f || fn > 7)
        return -1;
    int len = snprintf(path, sizeof path, "%s/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", sysfs ? sysfs : "/sys",
                       domain, bus, slot, fn);
    if (len < 0 || (size_t)len >= sizeof path)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%d", &node) != 1 || node < 0 || node >= PYGPU_NUMA_NODES_MAX)
        node = -1;
    fclose(f);
    return node;
}

#if defined(__linux__) && defined(SYS_mbind) && defined(SYS_get_mempolicy)

int pygpu_numa_prefer(void *p, size_t n, int node)
{
    unsigned long mask[MASK_WORDS] = {0};
    const size_t bits = 8 * sizeof mask[0];
    if (node < 0 || node >= PYGPU_NUMA_NODES_MAX || !p || !n)
        return EINVAL;
    mask[(size_t)node / bits] = 1ul << ((size_t)node % bits);
    /* (maxnode counts one past the mask's bits: the kernel reads maxnode - 1) */
    if (syscall(SYS_mbind, p, n, MODE_PREFERRED, mask, (unsigned long)PYGPU_NUMA_NODES_MAX + 1, 0ul) == 0)
        return 0;
    return errno ? errno : EINVAL;
}

int pygpu_numa_preferred(const void *p)
{
    unsigned long mask[MASK_WORDS] = {0};
    const size_t bits = 8 * sizeof mask[0];
    int mode = -1;
    if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)PYGPU_NUMA_NODES_MAX + 1, p, (unsigned long)FLAG_ADDR) != 0 ||
        mode != MODE_PREFERRED)
        return -1;
    for (size_t w = 0; w < MASK_WORDS; w++)
        if (mask[w])
            return (int)(w * bits + (size_t)__builtin_ctzl(mask[w]));
    return -1;
}

int pygpu_numa_node_of_page(const void *p)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0ul, p, (unsigned long)(FLAG_NODE | FLAG_ADDR)) != 0)
        return -1;
    return node;
}

#else   /* (no NUMA calls: every device on no node, nothing placed) */

int pygpu_numa_prefer(void *p, size_t n, int node)
{
    (void)p, (void)n, (void)node;
    return ENOSYS;
}

int pygpu_numa_preferred(const void *p)
{
    (void)p;
    return -1;
}

int pygpu_numa_node_of_page(const void *p)
{
    (void)p;
    return -1;
}

#endif
