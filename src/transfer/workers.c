/*
 * workers.c -- the worker pool; see workers.h.
 *
 * Several jobs may be open at once (one per transfer in flight, each for
 * one chunk's host copy): the workers serve the oldest first, each job up
 * to the workers it asked for, so that concurrent transfers take turns
 * chunk by chunk, and every caller works on its own job's parts too (it
 * never waits on parts that nobody runs).
 */
#define _GNU_SOURCE
#include "workers.h"
#include "settings.h"
#include "../fork.h"
#include "../tuning.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Workers spin for PYGPU_SPIN_ROUNDS after each job before they sleep: a
 * transfer hands them a job per chunk, and waking a sleeping thread costs
 * about as much as the gap between two (docs/performance.md#worker-spin).
 * After the first PYGPU_PAUSE_ROUNDS they yield as they spin, so that the
 * thread queuing the DMA always gets a core. */

/* Jobs in hand at once: each transfer in flight has at most two (the
 * chunk being copied, the next one started), and host copies outside a
 * transfer one; a job that finds no free slot is run by its caller. */
#define MAX_JOBS 32

/* A job open to the workers.  A worker looks at a slot only while counted
 * in `users`, and takes parts only while `live`: the joiner closes it
 * (live 0) and waits for its users to leave before the slot is reused. */
typedef struct {
    atomic_int live, users, next, finished, joined;
    atomic_int nparts, want;    /* want: workers that may work on it at once */
    atomic_ulong seq;           /* jobs are served oldest first */
    pygpu_part_fn fn;           /* (read only by its users while it is live) */
    void *arg;
} slot;

static slot slots[MAX_JOBS];
static int slot_taken[MAX_JOBS];
static unsigned long slot_seq;
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;  /* slot_taken, slot_seq, starting workers */
static pthread_mutex_t work_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
/* Workers beyond job_workers sleep apart, each on a condition variable of
 * its own, woken only when job_workers grows past it: a broadcast to every
 * sleeping worker at each job woke them all, and once a big transfer had
 * started many, each mid-size call paid for waking those it did not want.
 * One condition variable for all the idle ones still woke every one of
 * them whenever job_workers grew (a job outside a transfer lowers it, the
 * next transfer raises it again: once or twice a call), and those left
 * out slept again (docs/performance.md: mid-size calls slow down after the
 * bench's other sections).  idle_cv[i] is made before worker i first
 * starts (idle_made of them, under slots_mu; again in a forked child). */
static pthread_cond_t idle_cv[PYGPU_MAX_THREADS];
static int idle_made;
static atomic_int idle_woken[PYGPU_MAX_THREADS];        /* each worker's returns from idle_cv */
static atomic_int nworkers;       /* started (they only grow, under slots_mu) */
static atomic_int alive, quitting;      /* workers running; set at exit: they stop */
static atomic_ulong job_gen;            /* moves on at every job: a sign to look */
static atomic_int sleepers, idlers;     /* waiting on work_cv, on idle_cv */
static atomic_int job_workers;          /* workers [0, job_workers) take part; the others sleep */
/* While a staged transfer runs the workers spin without yielding or
 * sleeping: it hands them a job every few tens of microseconds, and a
 * sleeping (or descheduled) worker takes that long to come back. */
static atomic_int hot;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run parts of slot `s` until none are left. */
static void run_parts(slot *s)
{
    int k, n = atomic_load(&s->nparts);
    while ((k = atomic_fetch_add(&s->next, 1)) < n) {
        s->fn(s->arg, k, n);
        atomic_fetch_add(&s->finished, 1);
    }
}

/* The oldest open job with parts left and room for one more worker, or
 * NULL. */
static slot *oldest_open(void)
{
    slot *best = NULL;
    for (int i = 0; i < MAX_JOBS; i++) {
        slot *s = &slots[i];
        if (atomic_load(&s->live) && atomic_load(&s->next) < atomic_load(&s->nparts) &&
            atomic_load(&s->joined) < atomic_load(&s->want) && (!best || atomic_load(&s->seq) < atomic_load(&best->seq)))
            best = s;
    }
    return best;
}

/* Work on the oldest open job, if there is one; 1 if some was found. */
static int help(void)
{
    slot *s = oldest_open();
    if (!s)
        return 0;
    atomic_fetch_add(&s->users, 1);
    /* (the slot may have been closed, or reused for a newer job, since it
     * was seen: either way what it holds now is consistent) */
    if (atomic_load(&s->live)) {
        if (atomic_fetch_add(&s->joined, 1) < atomic_load(&s->want))
            run_parts(s);
        atomic_fetch_sub(&s->joined, 1);
    }
    atomic_fetch_sub(&s->users, 1);
    return 1;
}

static void *worker_main(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned long seen = atomic_load(&job_gen);
    while (!atomic_load(&quitting)) {
        if (me < atomic_load(&job_workers) && help())
            continue;
        /* (a worker beyond those the settings ask for sleeps; one that
         * spins looks now and then for a job that has room again) */
        for (int i = 0, polls = 0; i < PYGPU_SPIN_ROUNDS && atomic_load(&job_gen) == seen && !atomic_load(&quitting) &&
                                   me < atomic_load(&job_workers);
             i++) {
            if ((++polls & 63) == 0 && oldest_open())
                break;
            if (atomic_load(&hot) > 0) {
                i = 0;
                cpu_relax();
            } else if (i < PYGPU_PAUSE_ROUNDS) {
                cpu_relax();
            } else {
                sched_yield();
            }
        }
        if (atomic_load(&job_gen) == seen && !(me < atomic_load(&job_workers) && oldest_open())) {
            pthread_mutex_lock(&work_mu);
            /* (idlers counted before job_workers is read again: allow_workers
             * stores it before it reads idlers, so one of the two sees the other) */
            atomic_fetch_add(&idlers, 1);
            if (me >= atomic_load(&job_workers)) {
                while (me >= atomic_load(&job_workers) && !atomic_load(&quitting)) {
                    pthread_cond_wait(&idle_cv[me], &work_mu);
                    atomic_fetch_add(&idle_woken[me], 1);
                }
                atomic_fetch_sub(&idlers, 1);
            } else {
                atomic_fetch_sub(&idlers, 1);
                atomic_fetch_add(&sleepers, 1);
                while (atomic_load(&job_gen) == seen && (atomic_load(&hot) == 0 || me >= atomic_load(&job_workers)) &&
                       !atomic_load(&quitting))
                    pthread_cond_wait(&work_cv, &work_mu);
                atomic_fetch_sub(&sleepers, 1);
            }
            pthread_mutex_unlock(&work_mu);
        }
        seen = atomic_load(&job_gen);
    }
    atomic_fetch_sub(&alive, 1);
    return NULL;
}

static void wake_sleepers(void)
{
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&work_mu);
        pthread_cond_broadcast(&work_cv);
        pthread_mutex_unlock(&work_mu);
    }
}

/* Workers [0, want) take part: at least `want` while a transfer is hot
 * (another transfer in flight may want more), exactly `want` otherwise;
 * those it lets in that sleep apart (idle_cv) are woken, and only those. */
static void allow_workers(int want)
{
    int was = atomic_load(&job_workers), grew = 0;
    if (atomic_load(&hot) == 0)
        grew = (was = atomic_exchange(&job_workers, want)) < want;
    else        /* (a failed exchange reloads `was`; one that succeeds leaves it the old count) */
        while (was < want && !(grew = atomic_compare_exchange_weak(&job_workers, &was, want)))
            ;
    if (grew && atomic_load(&idlers) > 0) {
        int top = atomic_load(&nworkers);
        pthread_mutex_lock(&work_mu);
        for (int i = was < 0 ? 0 : was; i < want && i < top; i++)
            pthread_cond_signal(&idle_cv[i]);
        pthread_mutex_unlock(&work_mu);
    }
}

int pygpu_workers_idle_woken(int from)
{
    int n = 0, top = atomic_load(&nworkers);
    for (int i = from < 0 ? 0 : from; i < top; i++)
        n += atomic_load(&idle_woken[i]);
    return n;
}

/* At exit the workers stop, and are waited for (a second at most), so that
 * nothing runs while the process is torn down (LeakSanitizer's check at
 * exit, for one, stops every thread and crashed on a spinning worker).  A
 * transfer still running in a daemon thread finishes its parts itself. */
static void stop_workers(void)
{
    atomic_store(&quitting, 1);
    pthread_mutex_lock(&work_mu);
    pthread_cond_broadcast(&work_cv);
    for (int i = 0; i < atomic_load(&nworkers); i++)
        pthread_cond_broadcast(&idle_cv[i]);
    pthread_mutex_unlock(&work_mu);
    for (int i = 0; i < 1000 && atomic_load(&alive) > 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Start workers up to `n` (slots_mu held); returns how many there are. */
static int ensure_workers(int n)
{
    static int at_exit;
    if (n > PYGPU_MAX_THREADS - 1)
        n = PYGPU_MAX_THREADS - 1;
    if (!at_exit && atexit(stop_workers) == 0)
        at_exit = 1;
    while (atomic_load(&nworkers) < n && !atomic_load(&quitting)) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (idle_made <= atomic_load(&nworkers))        /* (a start that failed made it already) */
            pthread_cond_init(&idle_cv[idle_made++], NULL);
        atomic_fetch_add(&alive, 1);
        int r = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)atomic_load(&nworkers));
        pthread_attr_destroy(&attr);
        if (r != 0) {
            atomic_fetch_sub(&alive, 1);
            break;
        }
        atomic_fetch_add(&nworkers, 1);
    }
    return atomic_load(&nworkers);
}

/* Never more threads than asked for: the parts may be more, and workers
 * spinning beyond the cores stall everything. */
pygpu_job pygpu_job_start(pygpu_part_fn fn, void *arg, int nparts, int threads)
{
    pygpu_job p = {fn, arg, nparts, 0};
    int i, workers, most = (nparts < threads ? nparts : threads) - 1;
    if (nparts <= 1 || threads <= 1)
        return p;
    pthread_mutex_lock(&slots_mu);
    for (i = 0; i < MAX_JOBS && slot_taken[i]; i++)
        ;
    /* (no more than its parts can use, however many are started: a job of
     * 8 parts let in all 11 workers a bigger one had started, and woke the
     * 4 of them that the transfer's heat had left out, at every call) */
    workers = i < MAX_JOBS ? ensure_workers(most) : 0;
    if (workers > most)
        workers = most;
    if (workers == 0) {         /* (every slot in use, or no worker could start) */
        pthread_mutex_unlock(&slots_mu);
        return p;
    }
    slot *s = &slots[i];
    slot_taken[i] = 1;
    s->fn = fn;
    s->arg = arg;
    atomic_store(&s->nparts, nparts);
    atomic_store(&s->want, workers);
    atomic_store(&s->seq, slot_seq++);
    pthread_mutex_unlock(&slots_mu);
    atomic_store(&s->next, 0);
    atomic_store(&s->finished, 0);
    atomic_store(&s->live, 1);
    allow_workers(workers);
    atomic_fetch_add(&job_gen, 1);
    wake_sleepers();
    p.shared = i + 1;
    return p;
}

void pygpu_job_join(const pygpu_job *p)
{
    if (!p->shared) {
        for (int k = 0; k < p->nparts; k++)
            p->fn(p->arg, k, p->nparts);
        return;
    }
    slot *s = &slots[p->shared - 1];
    run_parts(s);
    while (atomic_load(&s->finished) < p->nparts)     /* the last parts are short */
        cpu_relax();
    atomic_store(&s->live, 0);          /* late workers find nothing to claim */
    while (atomic_load(&s->users) > 0)
        cpu_relax();
    pthread_mutex_lock(&slots_mu);
    slot_taken[p->shared - 1] = 0;
    pthread_mutex_unlock(&slots_mu);
}

void pygpu_run_parallel(pygpu_part_fn fn, void *arg, int nparts, int threads)
{
    pygpu_job p = pygpu_job_start(fn, arg, nparts, threads);
    pygpu_job_join(&p);
}

void pygpu_workers_heat(int want)
{
    int started = atomic_load(&nworkers);
    allow_workers(want < started ? want : started);
    atomic_fetch_add(&hot, 1);
    if (want > 0)               /* wake them while the transfer sets out */
        wake_sleepers();
}

void pygpu_workers_cool(void)
{
    atomic_fetch_sub(&hot, 1);
}

/* The workers stayed in the parent, and so did any transfer in flight: the
 * child starts with none, and spins for nothing of the parent's. */
static void workers_fork(enum pygpu_fork_phase phase)
{
    if (phase != PYGPU_FORK_CHILD)
        return;
    pthread_mutex_init(&slots_mu, NULL);
    pthread_mutex_init(&work_mu, NULL);
    memset(slots, 0, sizeof slots);
    memset(slot_taken, 0, sizeof slot_taken);
    pthread_cond_init(&work_cv, NULL);
    idle_made = 0;                          /* (idle_cv[i]: made again as worker i starts) */
    atomic_store(&sleepers, 0);
    atomic_store(&idlers, 0);
    atomic_store(&alive, 0);
    atomic_store(&hot, 0);
    atomic_store(&job_workers, 0);
    atomic_store(&nworkers, 0);
}

void pygpu_workers_init(void)
{
    pygpu_fork_register(workers_fork);
}
