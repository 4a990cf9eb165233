/*
 * numa.h -- the host's NUMA nodes as PyGPU needs them (numa.c): which node
 * a PCI device hangs off (sysfs), a range of pages preferring a node before
 * they are faulted in, and where a page lies (the kernel's mbind and
 * get_mempolicy, asked without libnuma).  Pure C, no Python, no runtime.
 *
 * On a host of several nodes, a GPU's DMA reads and writes its own node's
 * memory at full speed and another node's through the link between the
 * sockets; PyGPU's staging buffers for a device are placed on its node
 * (pinned_pool.c).  Where the kernel has no NUMA calls, or a sandbox
 * refuses them (a container's seccomp rules without CAP_SYS_NICE), every
 * device is on no node and nothing is placed.
 */
#ifndef PYGPU_NUMA_H
#define PYGPU_NUMA_H

#include <stddef.h>

/* The highest node number PyGPU places memory on, plus one (the kernel's
 * own limit is a build option; 1024 is past any host sold). */
#define PYGPU_NUMA_NODES_MAX 1024

/* The NUMA node of the PCI device at `busid` ("dddd:bb:dd.f", hexadecimal
 * in either case, the domain of any width) as sysfs under `sysfs` (NULL:
 * "/sys") tells it, or -1 where it tells none (no such device, no file, a
 * host of one node that says -1, an address that is not one). */
int pygpu_numa_node_of_pci(const char *sysfs, const char *busid);

/* The pages of [p, p + n) (p page-aligned) prefer node `node` when they are
 * faulted in (the kernel takes another node's when that one has none
 * free).  0, or the kernel's errno: EINVAL (no such node online, or a bad
 * range), EPERM (refused here), ENOSYS (no NUMA calls in this kernel or on
 * this system), ... */
int pygpu_numa_prefer(void *p, size_t n, int node);

/* The node that the policy of the page at p prefers, or -1 (the default
 * policy, another kind of policy, or the kernel will not say). */
int pygpu_numa_preferred(const void *p);

/* The node the page at p lies on (faulting it in if it was not), or -1
 * where the kernel will not say. */
int pygpu_numa_node_of_page(const void *p);

#endif /* PYGPU_NUMA_H */
