/* How fast can fresh (never touched) anonymous memory be filled with data?
 * The floor of a download into np.empty(...): the kernel must give the
 * destination's pages before the copy-out writes them.  Modes:
 *   0  MADV_POPULATE_WRITE each thread's part, then memcpy into it
 *   1  memcpy into the fresh part (the copy takes the faults)
 *   2  userfaultfd: UFFDIO_COPY from the source into the missing pages
 *      (the kernel allocates each page and copies into it: no zeroing)
 *   3  memcpy into touched memory (the copy-out alone)
 * The destination is advised MADV_HUGEPAGE, as NumPy does from 4 MiB.
 *   gcc -O2 -pthread tools/research/fresh-fill.c -o /tmp/fresh-fill
 *   /tmp/fresh-fill MIB THREADS MODE [PIECE_KIB]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

typedef struct { int mode, uffd; char *dst; const char *src; size_t n, piece; } job;
enum { POP_COPY, COPY_FAULT, UFFD, TOUCHED };

static void *run(void *a)
{
    job *j = a;
    if (j->mode == POP_COPY) { madvise(j->dst, j->n, MADV_POPULATE_WRITE); memcpy(j->dst, j->src, j->n); }
    else if (j->mode == COPY_FAULT || j->mode == TOUCHED) memcpy(j->dst, j->src, j->n);
    else {
        for (size_t o = 0; o < j->n; o += j->piece) {
            struct uffdio_copy c = {.dst = (unsigned long)(j->dst + o), .src = (unsigned long)(j->src + o),
                                    .len = j->n - o < j->piece ? j->n - o : j->piece, .mode = 0};
            if (ioctl(j->uffd, UFFDIO_COPY, &c) != 0) { perror("UFFDIO_COPY"); exit(1); }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s MIB THREADS MODE [PIECE_KIB]\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atoll(argv[1]) << 20;
    int threads = atoi(argv[2]), mode = atoi(argv[3]);
    if (n == 0 || threads < 1 || threads > 64 || mode < 0 || mode > 3) {
        fprintf(stderr, "MIB > 0, THREADS 1-64, MODE 0-3\n");
        return 2;
    }
    size_t piece = argc > 4 ? (size_t)atoll(argv[4]) << 10 : 2u << 20;
    int reps = 5;
    char *src = aligned_alloc(4096, n); memset(src, 7, n);
    double best = 1e9, sum = 0;
    for (int r = 0; r < reps; r++) {
        char *dst = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise(dst, n, MADV_HUGEPAGE);
        if (mode == TOUCHED) memset(dst, 1, n);
        int uffd = -1;
        double t0 = now();
        if (mode == UFFD) {
            uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
            if (uffd < 0) { perror("userfaultfd"); return 1; }
            struct uffdio_api api = {.api = UFFD_API};
            if (ioctl(uffd, UFFDIO_API, &api)) { perror("api"); return 1; }
            struct uffdio_register reg = {.range = {(unsigned long)dst, n}, .mode = UFFDIO_REGISTER_MODE_MISSING};
            if (ioctl(uffd, UFFDIO_REGISTER, &reg)) { perror("register"); return 1; }
        }
        pthread_t th[64]; job jb[64];
        size_t part = (n / threads + 4095) & ~(size_t)4095;
        for (int k = 0; k < threads; k++) {
            size_t o = part * k; size_t len = o >= n ? 0 : (n - o < part ? n - o : part);
            jb[k] = (job){mode, uffd, dst + o, src + o, len, piece};
            pthread_create(&th[k], NULL, run, &jb[k]);
        }
        for (int k = 0; k < threads; k++) pthread_join(th[k], NULL);
        if (mode == UFFD) {
            struct uffdio_range rg = {(unsigned long)dst, n};
            ioctl(uffd, UFFDIO_UNREGISTER, &rg); close(uffd);
        }
        double t = now() - t0;
        if (memcmp(dst, src, n)) { fprintf(stderr, "MISMATCH\n"); return 1; }
        if (t < best)
            best = t;
        sum += t;
        munmap(dst, n);
    }
    const char *names[] = {"populate+copy", "copy (faulting)", "uffd copy", "touched copy"};
    printf("%-16s %5zu MiB %2d thr piece %5zu KiB: best %6.2f GB/s, mean %6.2f\n", names[mode], n >> 20, threads,
           piece >> 10, n / best / 1e9, n / (sum / reps) / 1e9);
    return 0;
}
