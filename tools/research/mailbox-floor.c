/* The floor of pygpu.mpi's exchange between two ranks of one node (issue
 * 39: MPI ping-pong at 64 MiB asked at 0.8 of the peer copy), with no
 * Python and no MPI: the same steps in C, two forked processes (device 0
 * and 1), signalled through shared memory by spinning on counters.
 *
 * A "mailbox" transfer is pygpu.mpi's: the sender copies the pieces of its
 * source into the slots of its own mailbox (cudaMalloc memory, 4 slots of
 * 32 MiB), announces each once its copy is done, and the receiver copies
 * each out of the sender's mailbox (opened once by a legacy IPC handle)
 * over the link, giving the slot back once read.  "direct" pulls the whole
 * source at once from the sender's own buffer opened once: what caching an
 * IPC mapping of the user's buffer would give.  The ceiling is
 * cudaMemcpyPeerAsync in one process with peer access on.
 *
 * Schedules (how a transfer is cut): "slots" whole slots (as built), "first
 * N" a first piece of N MiB then whole slots.
 *   gcc -O2 -pthread -I/usr/local/cuda/include tools/research/mailbox-floor.c \
 *       -L/usr/local/cuda/lib64 -lcudart -o /tmp/mailbox-floor
 *   /tmp/mailbox-floor [rounds]
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

#define SLOTS 4
#define SLOT ((size_t)32 << 20)
#define MAXN ((size_t)256 << 20)
#define MASK 0xfffffULL

struct ctl {
    cudaIpcMemHandle_t box[2], src[2];
    _Atomic uint64_t hdr[2];        /* the number of the message side i sent last */
    _Atomic uint64_t ready[2];      /* side i's message << 20 | pieces it announced */
    _Atomic uint64_t freed[2];      /* side i's message << 20 | pieces its receiver gave back */
    _Atomic int arrived[2];         /* a barrier: rounds each side has reached */
};

static struct ctl *C;
static int me, other;
static char *box, *src, *dst, *obox, *osrc;
static cudaStream_t bstream, stream;
static cudaEvent_t filled[SLOTS], done[SLOTS];

static void barrier(void)
{
    int mine = atomic_fetch_add(&C->arrived[me], 1) + 1;
    while (atomic_load(&C->arrived[other]) < mine) {}
}

static int cut(size_t n, size_t first, size_t *sizes)
{
    int k = 0;
    size_t at = 0;
    if (first && first < n) { sizes[k++] = first; at = first; }
    for (; at < n; at += SLOT) sizes[k++] = n - at < SLOT ? n - at : SLOT;
    return k;
}

static void send(uint64_t m, size_t n, size_t first, int direct)
{
    if (direct) {
        atomic_store(&C->hdr[me], m);
        while (atomic_load(&C->freed[me]) != (m << 20 | 1)) {}
        return;
    }
    size_t sizes[64], at[65] = {0};
    int pieces = cut(n, first, sizes);
    for (int k = 0; k < pieces; k++) at[k + 1] = at[k] + sizes[k];
    CK(cudaMemcpyAsync(box, src, sizes[0], cudaMemcpyDeviceToDevice, bstream));
    CK(cudaEventRecord(filled[0], bstream));
    atomic_store(&C->hdr[me], m);
    int queued = 1, announced = 0, freed = 0;
    while (freed < pieces) {
        if (announced < queued && cudaEventQuery(filled[announced % SLOTS]) == cudaSuccess)
            atomic_store(&C->ready[me], m << 20 | (uint64_t)++announced);
        if (announced && queued < pieces && queued < freed + SLOTS) {
            CK(cudaMemcpyAsync(box + (queued % SLOTS) * SLOT, src + at[queued], sizes[queued],
                               cudaMemcpyDeviceToDevice, bstream));
            CK(cudaEventRecord(filled[queued % SLOTS], bstream));
            queued++;
        }
        uint64_t f = atomic_load(&C->freed[me]);
        if (f >> 20 == m) freed = (int)(f & MASK);
    }
}

static void recv(uint64_t m, size_t n, size_t first, int direct)
{
    while (atomic_load(&C->hdr[other]) != m) {}
    if (direct) {
        CK(cudaMemcpyAsync(dst, osrc, n, cudaMemcpyDeviceToDevice, stream));
        CK(cudaEventRecord(done[0], stream));
        while (cudaEventQuery(done[0]) != cudaSuccess) {}
        atomic_store(&C->freed[other], m << 20 | 1);
        return;
    }
    size_t sizes[64], at[65] = {0};
    int pieces = cut(n, first, sizes);
    for (int k = 0; k < pieces; k++) at[k + 1] = at[k] + sizes[k];
    int k = 0, back = 0;
    while (back < pieces) {
        uint64_t r = atomic_load(&C->ready[other]);
        if (k < pieces && r >> 20 == m && (int)(r & MASK) > k) {
            CK(cudaMemcpyAsync(dst + at[k], obox + (k % SLOTS) * SLOT, sizes[k], cudaMemcpyDeviceToDevice, stream));
            CK(cudaEventRecord(done[k % SLOTS], stream));
            k++;
        }
        if (back < k && cudaEventQuery(done[back % SLOTS]) == cudaSuccess)
            atomic_store(&C->freed[other], m << 20 | (uint64_t)++back);
    }
}

static uint64_t msg;

static double pingpong(size_t n, size_t first, int direct, int rounds)
{
    barrier();
    double t0 = now();
    for (int r = 0; r < rounds; r++) {
        msg++;
        if (me == 0) { send(msg, n, first, direct); recv(msg, n, first, direct); }
        else { recv(msg, n, first, direct); send(msg, n, first, direct); }
    }
    return 2.0 * n * rounds / (now() - t0) / 1e9;
}

static void check(size_t n)
{
    static unsigned char host[MAXN];
    CK(cudaMemcpy(host, dst, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (host[i] != 0x10 + other) { fprintf(stderr, "side %d: wrong byte at %zu\n", me, i); exit(1); }
}

static double peer_copy(size_t n, int reps)
{
    void *a, *b;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&b, n));
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a, n));
    cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
    (void)cudaGetLastError();
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t = now();
        CK(cudaMemcpyPeerAsync(a, 0, b, 1, n, stream));     /* (into device 0: its engine reads over the link, as a pull) */
        CK(cudaStreamSynchronize(stream));
        double bw = n / (now() - t) / 1e9;
        if (r && bw > best) best = bw;
    }
    CK(cudaFree(a));
    CK(cudaSetDevice(1));
    CK(cudaFree(b));
    CK(cudaSetDevice(0));
    return best;
}

static void side(int rank, int ndev, int rounds)
{
    me = rank;
    other = 1 - rank;
    CK(cudaSetDevice(ndev > 1 ? rank : 0));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&bstream, cudaStreamNonBlocking));
    for (int i = 0; i < SLOTS; i++) {
        CK(cudaEventCreateWithFlags(&filled[i], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    CK(cudaMalloc((void **)&box, SLOTS * SLOT));
    CK(cudaMalloc((void **)&src, MAXN));
    CK(cudaMalloc((void **)&dst, MAXN));
    CK(cudaMemset(src, 0x10 + me, MAXN));
    CK(cudaDeviceSynchronize());
    CK(cudaIpcGetMemHandle(&C->box[me], box));
    CK(cudaIpcGetMemHandle(&C->src[me], src));
    barrier();
    CK(cudaIpcOpenMemHandle((void **)&obox, C->box[other], cudaIpcMemLazyEnablePeerAccess));
    CK(cudaIpcOpenMemHandle((void **)&osrc, C->src[other], cudaIpcMemLazyEnablePeerAccess));
    static const size_t sizes[] = {1 << 20, 16 << 20, 64 << 20, 256 << 20};
    static const struct { const char *name; size_t first; int direct; } ways[] = {
        {"slots", 0, 0}, {"first 4", 4 << 20, 0}, {"first 8", 8 << 20, 0}, {"first 16", 16 << 20, 0}, {"direct", 0, 1},
    };
    enum { NW = sizeof ways / sizeof ways[0] };
    if (me == 0) printf("%8s %10s %10s %10s %10s %10s %10s  (GB/s both ways over the round trip; ratio to the peer copy)\n",
                        "MiB", "peer", ways[0].name, ways[1].name, ways[2].name, ways[3].name, ways[4].name);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        int reps = n >= (64 << 20) ? rounds : 4 * rounds;
        double peer = 0, bw[NW] = {0};
        barrier();
        if (me == 0 && ndev > 1) peer = peer_copy(n, 10);
        barrier();
        for (int round = 0; round < 3; round++)     /* (taking turns, the best of 3) */
            for (int w = 0; w < NW; w++) {
                CK(cudaMemset(dst, 0, n));
                CK(cudaDeviceSynchronize());
                double b = pingpong(n, ways[w].first, ways[w].direct, reps);
                if (b > bw[w]) bw[w] = b;
                check(n);
            }
        if (me == 0) {
            printf("%8zu %10.1f", n >> 20, peer);
            for (int w = 0; w < NW; w++) printf(" %5.1f(%.2f)", bw[w], peer ? bw[w] / peer : 0);
            printf("\n");
        }
    }
    barrier();
    CK(cudaIpcCloseMemHandle(obox));
    CK(cudaIpcCloseMemHandle(osrc));
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    setvbuf(stdout, NULL, _IOLBF, 0);
    C = mmap(NULL, sizeof *C, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (C == MAP_FAILED) { perror("mmap"); return 1; }
    memset(C, 0, sizeof *C);
    pid_t pid = fork();         /* (before either side touches CUDA) */
    int ndev = 0;
    if (pid == 0) {
        CK(cudaGetDeviceCount(&ndev));
        side(1, ndev, rounds);
        return 0;
    }
    CK(cudaGetDeviceCount(&ndev));
    side(0, ndev, rounds);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
