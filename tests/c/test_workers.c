/*
 * test_workers.c -- the worker pool (src/transfer/workers.c) with several
 * callers at once: each part of each job runs exactly once, and before its
 * join returns, whether the workers took part or the caller ran it alone;
 * jobs of different callers open at once all complete (no caller waits
 * on parts nobody runs), with transfers "hot" and cold, and more callers
 * than job slots.  Workers a job leaves out sleep apart, and a later job
 * that wants them again wakes them, and only them.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "transfer/workers.h"
#include "fork.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sched.h>
#include <time.h>

/* The pool registers a fork handler; these tests do not fork. */
void pygpu_fork_register(pygpu_fork_fn fn) { (void)fn; }

#define CALLERS 12
#define JOBS 300
#define MAX_PARTS 24

typedef struct {
    atomic_int ran[MAX_PARTS];
    atomic_int bad;             /* a part called with the wrong count */
    int nparts;
} job;

static void part(void *arg, int k, int nparts)
{
    job *j = arg;
    if (nparts != j->nparts || k < 0 || k >= nparts)
        atomic_fetch_add(&j->bad, 1);
    else
        atomic_fetch_add(&j->ran[k], 1);
}

static atomic_int wrong, done_jobs, shared_jobs;

static uint64_t seeds[CALLERS];

static void *caller(void *arg)
{
    uint64_t seed = *(uint64_t *)arg;
    for (int i = 0; i < JOBS; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        job j;
        memset(&j, 0, sizeof j);
        j.nparts = 1 + (int)(seed % MAX_PARTS);
        int threads = 1 + (int)((seed >> 8) % 6), hot = (seed >> 16) & 1;
        if (hot)
            pygpu_workers_heat(threads - 1);
        pygpu_job p = pygpu_job_start(part, &j, j.nparts, threads);
        atomic_fetch_add(&shared_jobs, p.shared != 0);
        pygpu_job_join(&p);
        for (int k = 0; k < j.nparts; k++)
            if (atomic_load(&j.ran[k]) != 1)
                atomic_fetch_add(&wrong, 1);
        if (atomic_load(&j.bad))
            atomic_fetch_add(&wrong, 1);
        if (hot)
            pygpu_workers_cool();
        atomic_fetch_add(&done_jobs, 1);
    }
    return NULL;
}

/* A job whose parts each note the thread that ran it, then wait until
 * `want` threads have run some part of it or its deadline has passed:
 * the workers it wakes get parts whatever the scheduling (under valgrind
 * threads take turns), and workers that never wake cost it the deadline. */
#define SLOW_PARTS 24
static struct {
    pthread_mutex_t mu;
    pthread_t seen[8];
    int n, want;
    struct timespec deadline;
} spread = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int passed(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void spread_part(void *arg, int k, int nparts)
{
    (void)arg;
    (void)k;
    (void)nparts;
    pthread_mutex_lock(&spread.mu);
    int known = 0;
    for (int m = 0; m < spread.n && !known; m++)
        known = pthread_equal(spread.seen[m], pthread_self());
    if (!known && spread.n < 8)
        spread.seen[spread.n++] = pthread_self();
    pthread_mutex_unlock(&spread.mu);
    for (;;) {
        pthread_mutex_lock(&spread.mu);
        int enough = spread.n >= spread.want || passed(&spread.deadline);
        pthread_mutex_unlock(&spread.mu);
        if (enough)
            break;
        sched_yield();
    }
}

/* The threads that ran parts of one job of `threads` threads (heated as a
 * transfer does), waiting up to `seconds` for `want` of them. */
static int threads_seen(int threads, int want, int seconds)
{
    spread.n = 0;
    spread.want = want;
    clock_gettime(CLOCK_MONOTONIC, &spread.deadline);
    spread.deadline.tv_sec += seconds;
    pygpu_workers_heat(threads - 1);
    pygpu_run_parallel(spread_part, NULL, SLOW_PARTS, threads);
    pygpu_workers_cool();
    return spread.n;
}

int main(void)
{
    int woken_before = 0;
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++)
        seeds[i] = rng_next() | 1;      /* (xorshift's state must not be 0) */
    for (int i = 0; i < CALLERS; i++)
        CHECK(pthread_create(&t[i], NULL, caller, &seeds[i]) == 0);
    for (int i = 0; i < CALLERS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&wrong) == 0);
    CHECK(atomic_load(&done_jobs) == CALLERS * JOBS);
    CHECK(atomic_load(&shared_jobs) > 0);       /* the workers did take jobs */
    /* One caller alone after the crowd: its jobs still share and complete. */
    job j;
    memset(&j, 0, sizeof j);
    j.nparts = (int)rng_range(2, MAX_PARTS);
    pygpu_run_parallel(part, &j, j.nparts, 4);
    for (int k = 0; k < j.nparts; k++)
        CHECK(atomic_load(&j.ran[k]) == 1);
    /* Jobs of 2 threads (one worker wanted: the others, started by the
     * crowd, go to sleep apart), then a job of 6: the workers left out are
     * woken, and its parts run on more threads than the caller and one
     * worker (the deadline is only for the failure: a few microseconds
     * when they wake). */
    for (int i = 0; i < 20; i++) {
        struct timespec gap = {0, 100000};
        CHECK(threads_seen(2, 1, 0) >= 1);
        nanosleep(&gap, NULL);
    }
    CHECK(threads_seen(6, 3, 10) >= 3);
    /* Outside a transfer, jobs of 2 threads and of 4 parts (on up to 12
     * threads) in turn lower the workers wanted to one and raise them to
     * three: workers 1 and 2 are woken each time, and never those beyond
     * them (started by a job of 12, asleep apart).  One condition variable
     * for every idle worker woke all of them at each raise, and a job let
     * in every worker started, not only as many as its parts (up to 8 x
     * 200 here, either way). */
    memset(&j, 0, sizeof j);
    j.nparts = 12;
    pygpu_run_parallel(part, &j, 12, 12);
    for (int i = 0; i < 201; i++) {
        job two, four;
        memset(&two, 0, sizeof two);
        memset(&four, 0, sizeof four);
        two.nparts = 2;
        four.nparts = 4;
        if (i == 1)
            woken_before = pygpu_workers_idle_woken(3);
        pygpu_run_parallel(part, &two, 2, 2);
        nanosleep(&(struct timespec){0, 200000}, NULL);     /* (those left out go to sleep) */
        pygpu_run_parallel(part, &four, 4, 12);
        for (int k = 0; k < 4; k++)
            CHECK(atomic_load(&four.ran[k]) == 1 && (k >= 2 || atomic_load(&two.ran[k]) == 1));
    }
    CHECK(pygpu_workers_idle_woken(3) - woken_before <= 20);
    return check_done("test_workers");
}
