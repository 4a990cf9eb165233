/* What moving device memory between two processes costs (issue 39: MPI
 * ranks on one node, device to device).  Two processes, one per device
 * (device 0 exports, device 1 imports; both 0 on a one-GPU machine),
 * forked before either touches CUDA, talking over a socketpair (which also
 * carries the pool's file descriptor).  It times:
 *   - an IPC-capable pool (cudaMemPoolCreate, POSIX fd handles): creating
 *     it, exporting and importing it (once per pair of processes), and per
 *     allocation: cudaMemPoolExportPointer, cudaMemPoolImportPointer, the
 *     copy out of the imported pointer, and freeing the import;
 *   - the legacy handles of cudaMalloc memory (cudaIpcGetMemHandle,
 *     cudaIpcOpenMemHandle, cudaIpcCloseMemHandle), for comparison;
 *   - the copy's ceiling: cudaMemcpyPeerAsync within one process between
 *     the same devices with peer access on, and a local device copy.
 * Every copy out of an import is checked (first and last words).
 *   gcc -O2 -I/usr/local/cuda/include tools/research/ipc-probe.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/ipc-probe
 *   /tmp/ipc-probe
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

#define REPS 15
static const size_t sizes[] = {1 << 20, 16 << 20, 64 << 20, 256 << 20, (size_t)1 << 30};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void put(int s, const void *p, size_t n) { if (write(s, p, n) != (ssize_t)n) { perror("write"); exit(1); } }
static void get(int s, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(s, (char *)p + got, n - got);
        if (r <= 0) { perror("read"); exit(1); }
        got += (size_t)r;
    }
}
static void put_fd(int s, int fd)
{
    char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(s, &m, 0) != 1) { perror("sendmsg"); exit(1); }
}
static int get_fd(int s)
{
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    if (recvmsg(s, &m, 0) != 1) { perror("recvmsg"); exit(1); }
    int fd;
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
    return fd;
}

static void exporter(int s, int dev)
{
    int types = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&types, cudaDevAttrMemoryPoolSupportedHandleTypes, dev));
    printf("exporter: device %d, pool handle types 0x%x (POSIX fd %s)\n", dev, types,
           types & cudaMemHandleTypePosixFileDescriptor ? "yes" : "no");
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    double t0 = now();
    CK(cudaMemPoolCreate(&pool, &props));
    uint64_t keep = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    int fd;
    CK(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
    printf("exporter: pool created and exported in %.1f us\n", (now() - t0) * 1e6);
    put_fd(s, fd);
    close(fd);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (size_t i = 0; i < NSIZES; i++) {
        void *p;
        double ta = now();
        CK(cudaMallocFromPoolAsync(&p, sizes[i], pool, st));
        CK(cudaMemsetAsync(p, (int)(i + 1), sizes[i], st));
        CK(cudaStreamSynchronize(st));
        double tb = now();
        struct cudaMemPoolPtrExportData data;
        CK(cudaMemPoolExportPointer(&data, p));
        double tc = now();
        printf("exporter: %zu MiB: alloc+fill %.1f us, export pointer %.2f us\n", sizes[i] >> 20,
               (tb - ta) * 1e6, (tc - tb) * 1e6);
        put(s, &data, sizeof data);
        char done;
        get(s, &done, 1);                                 /* the importer freed its imports */
        CK(cudaFreeAsync(p, st));
        CK(cudaStreamSynchronize(st));
    }
    /* legacy handles, 64 MiB and 1 GiB */
    for (int k = 0; k < 2; k++) {
        size_t n = k ? (size_t)1 << 30 : 64 << 20;
        void *p;
        CK(cudaMalloc(&p, n));
        CK(cudaMemset(p, 7, n));
        CK(cudaDeviceSynchronize());
        cudaIpcMemHandle_t h;
        double ta = now();
        CK(cudaIpcGetMemHandle(&h, p));
        printf("exporter: legacy %zu MiB: get handle %.2f us\n", n >> 20, (now() - ta) * 1e6);
        put(s, &h, sizeof h);
        char done;
        get(s, &done, 1);
        CK(cudaFree(p));
    }
}

static void importer(int s, int dev, int src)
{
    double t[REPS], ti[REPS], tf[REPS];
    CK(cudaSetDevice(dev));
    int fd = get_fd(s);
    cudaMemPool_t pool;
    double t0 = now();
    CK(cudaMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd, cudaMemHandleTypePosixFileDescriptor, 0));
    double t1 = now();
    struct cudaMemAccessDesc d = {0};
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = dev;
    d.flags = cudaMemAccessFlagsProtReadWrite;
    cudaError_t acc = src == dev ? cudaSuccess : cudaMemPoolSetAccess(pool, &d, 1);
    printf("importer: device %d: pool imported in %.1f us, access for this device: %s (%.1f us)\n", dev,
           (t1 - t0) * 1e6, cudaGetErrorString(acc), (now() - t1) * 1e6);
    close(fd);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    void *local;
    CK(cudaMalloc(&local, (size_t)1 << 30));
    printf("%10s %12s %12s %12s %12s %12s\n", "MiB", "import us", "copy GB/s", "free us", "all GB/s", "peer GB/s");
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = sizes[i];
        struct cudaMemPoolPtrExportData data;
        get(s, &data, sizeof data);
        double all[REPS];
        for (int r = 0; r < REPS; r++) {
            void *p;
            double a = now();
            CK(cudaMemPoolImportPointer(&p, pool, &data));
            double b = now();
            CK(cudaMemcpyAsync(local, p, n, cudaMemcpyDefault, st));
            CK(cudaStreamSynchronize(st));
            double c = now();
            CK(cudaFreeAsync(p, st));
            CK(cudaStreamSynchronize(st));
            double e = now();
            ti[r] = (b - a) * 1e6;
            t[r] = n / (c - b) / 1e9;
            tf[r] = (e - c) * 1e6;
            all[r] = n / (e - a) / 1e9;
            unsigned char first, last;
            CK(cudaMemcpy(&first, local, 1, cudaMemcpyDefault));
            CK(cudaMemcpy(&last, (char *)local + n - 1, 1, cudaMemcpyDefault));
            if (first != i + 1 || last != i + 1) { fprintf(stderr, "importer: wrong data\n"); exit(1); }
        }
        char done = 1;
        put(s, &done, 1);
        printf("%10zu %12.1f %12.1f %12.1f %12.1f\n", n >> 20, med(ti, REPS), med(t, REPS), med(tf, REPS), med(all, REPS));
    }
    for (int k = 0; k < 2; k++) {
        size_t n = k ? (size_t)1 << 30 : 64 << 20;
        cudaIpcMemHandle_t h;
        get(s, &h, sizeof h);
        for (int r = 0; r < 5; r++) {
            void *p;
            double a = now();
            CK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
            double b = now();
            CK(cudaMemcpyAsync(local, p, n, cudaMemcpyDefault, st));
            CK(cudaStreamSynchronize(st));
            double c = now();
            CK(cudaIpcCloseMemHandle(p));
            double e = now();
            ti[r] = (b - a) * 1e6;
            t[r] = n / (c - b) / 1e9;
            tf[r] = (e - c) * 1e6;
        }
        char done = 1;
        put(s, &done, 1);
        printf("legacy %4zu MiB: open %.1f us, copy %.1f GB/s, close %.1f us\n", n >> 20, med(ti, 5), med(t, 5), med(tf, 5));
    }
    /* The ceiling: a peer copy inside this process, and a local copy. */
    if (src != dev) {
        void *remote;
        CK(cudaSetDevice(src));
        CK(cudaMalloc(&remote, (size_t)1 << 30));
        CK(cudaSetDevice(dev));
        cudaError_t pe = cudaDeviceEnablePeerAccess(src, 0);
        printf("peer access %d -> %d: %s\n", dev, src, cudaGetErrorString(pe));
        for (size_t i = 0; i < NSIZES; i++) {
            for (int r = 0; r < REPS; r++) {
                double a = now();
                CK(cudaMemcpyPeerAsync(local, dev, remote, src, sizes[i], st));
                CK(cudaStreamSynchronize(st));
                t[r] = sizes[i] / (now() - a) / 1e9;
            }
            printf("peer copy in one process %4zu MiB: %.1f GB/s\n", sizes[i] >> 20, med(t, REPS));
        }
    }
}

int main(void)
{
    int sv[2], n = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { perror("socketpair"); return 1; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        CK(cudaGetDeviceCount(&n));
        importer(sv[1], n > 1 ? 1 : 0, 0);
        return 0;
    }
    close(sv[1]);
    exporter(sv[0], 0);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
