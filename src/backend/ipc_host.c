/*
 * ipc_host.c -- memory other processes can map (the runtimes' IPC
 * handles, rt.h's pygpu_rt_ipc_*) on the host backend: shared mappings of
 * anonymous files, counted as device memory as rt_host.c counts its own.
 */
#define _GNU_SOURCE             /* memfd_create */
#include "rt.h"
#include "host_shared.h"
#include "forklock.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* An IPC allocation is a shared mapping of an anonymous file (memfd); its
 * handle names the exporting process, the file's descriptor there and its
 * inode, so that another process of the same user opens it through
 * /proc/<pid>/fd and maps the same pages (and a descriptor number reused
 * since for another file is refused, not mapped).  Both sides keep a list
 * of their mappings (address, size, descriptor). */
typedef struct {
    char magic[8];              /* "PYGPUIPC" */
    uint64_t pid, inode, size;
    int64_t fd;
    char unused[PYGPU_IPC_HANDLE_BYTES - 8 - 4 * 8];
} host_ipc_handle;
_Static_assert(sizeof(host_ipc_handle) == PYGPU_IPC_HANDLE_BYTES, "a handle is 64 bytes");

#define MAPPED(n) ((n) ? (n) : 1)     /* bytes mapped for n (a mapping has at least one) */

typedef struct ipc_map { void *p; size_t n; int fd; struct ipc_map *next; } ipc_map;
static pygpu_forklock ipc_lock = PYGPU_FORKLOCK_INIT;
static ipc_map *ipc_exported, *ipc_opened;

static void ipc_add(ipc_map **list, ipc_map *m)
{
    pygpu_forklock_lock(&ipc_lock);
    m->next = *list;
    *list = m;
    pygpu_forklock_unlock(&ipc_lock);
}

/* The mapping at `p` taken off `list` (take = 1) or only found; NULL if none. */
static ipc_map *ipc_find(ipc_map **list, const void *p, int take)
{
    pygpu_forklock_lock(&ipc_lock);
    ipc_map **at = list;
    while (*at && (*at)->p != p)
        at = &(*at)->next;
    ipc_map *m = *at;
    if (m && take)
        *at = m->next;
    pygpu_forklock_unlock(&ipc_lock);
    return m;
}

pygpu_status pygpu_rt_ipc_alloc(void **p, size_t n)
{
    *p = NULL;
    if (!pygpu_host_reserve(n, NULL))
        return pygpu_host_fail(H_MEMORY_ALLOCATION);
    ipc_map *m = calloc(1, sizeof *m);
    int fd = m ? memfd_create("pygpu-ipc", MFD_CLOEXEC) : -1;
    void *at = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)(MAPPED(n))) == 0)
        at = mmap(NULL, MAPPED(n), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (at == MAP_FAILED) {
        if (fd >= 0)
            close(fd);
        free(m);
        pygpu_host_release(n);
        return pygpu_host_fail(H_MEMORY_ALLOCATION);
    }
    *m = (ipc_map){at, n, fd, NULL};
    ipc_add(&ipc_exported, m);
    *p = at;
    return H_SUCCESS;
}

/* Take the mapping at `p` off `list` and unmap it; NULL if there is none. */
static ipc_map *ipc_unmap(ipc_map **list, void *p)
{
    ipc_map *m = ipc_find(list, p, 1);
    if (m)
        munmap(m->p, MAPPED(m->n));
    return m;
}

pygpu_status pygpu_rt_ipc_free(void *p)
{
    ipc_map *m = ipc_unmap(&ipc_exported, p);
    if (!m)
        return p ? pygpu_host_fail(H_INVALID_VALUE) : H_SUCCESS;
    close(m->fd);
    pygpu_host_release(m->n);
    free(m);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_ipc_handle(void *p, unsigned char h[PYGPU_IPC_HANDLE_BYTES])
{
    struct stat info;
    ipc_map *m = ipc_find(&ipc_exported, p, 0);
    if (!m || fstat(m->fd, &info) != 0)
        return pygpu_host_fail(H_INVALID_VALUE);   /* (as the runtimes for memory without a handle) */
    /* (the magic spelt as characters: it has no NUL, which clang warns of in a string) */
    host_ipc_handle out = {.magic = {'P', 'Y', 'G', 'P', 'U', 'I', 'P', 'C'}, .pid = (uint64_t)getpid(),
                           .inode = (uint64_t)info.st_ino, .size = m->n, .fd = m->fd};
    memcpy(h, &out, sizeof out);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_ipc_open(const unsigned char h[PYGPU_IPC_HANDLE_BYTES], void **p)
{
    host_ipc_handle in;
    struct stat info;
    char path[64];
    *p = NULL;
    memcpy(&in, h, sizeof in);
    if (memcmp(in.magic, "PYGPUIPC", 8) != 0 || in.pid == (uint64_t)getpid())
        return pygpu_host_fail(H_INVALID_VALUE);   /* not a handle, or this process's own memory */
    snprintf(path, sizeof path, "/proc/%llu/fd/%lld", (unsigned long long)in.pid, (long long)in.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &info) != 0 || (uint64_t)info.st_ino != in.inode || (uint64_t)info.st_size < in.size) {
        if (fd >= 0)
            close(fd);
        return pygpu_host_fail(H_INVALID_HANDLE);  /* freed, or its process gone */
    }
    ipc_map *m = calloc(1, sizeof *m);
    void *at = m ? mmap(NULL, MAPPED(in.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (at == MAP_FAILED) {
        free(m);
        return pygpu_host_fail(H_MEMORY_ALLOCATION);
    }
    *m = (ipc_map){at, in.size, -1, NULL};
    ipc_add(&ipc_opened, m);
    *p = at;
    return H_SUCCESS;
}

pygpu_status pygpu_rt_ipc_close(void *p)
{
    ipc_map *m = ipc_unmap(&ipc_opened, p);
    if (!m)
        return pygpu_host_fail(H_INVALID_VALUE);
    free(m);
    return H_SUCCESS;
}
