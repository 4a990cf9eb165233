/*
 * workers.c -- the worker pool; see workers.h.
 */
#define _GNU_SOURCE
#include "workers.h"
#include "settings.h"
#include "../fork.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Workers spin for a while after each job before they sleep: a transfer
 * hands them a job per chunk, every few tens of microseconds, and waking a
 * sleeping thread costs about as much.  After the first rounds they yield
 * as they spin, so that the thread queuing the DMA always gets a core. */
#define SPIN_ROUNDS 20000
#define PAUSE_ROUNDS 2000

static pthread_mutex_t job_mu = PTHREAD_MUTEX_INITIALIZER;    /* one job at a time */
static pthread_mutex_t work_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static atomic_int nworkers;       /* started (they only grow, under job_mu) */
static atomic_int alive, quitting;      /* workers running; set at exit: they stop */
static atomic_ulong job_gen;
static atomic_int sleepers;
static pygpu_part_fn job_fn;
static void *job_arg;
static atomic_int job_next, job_parts, job_finished, job_workers;     /* workers [0, job_workers) take part */
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

/* Claim and run parts of the current job until none are left. */
static void run_parts(void)
{
    int k;
    while ((k = atomic_fetch_add(&job_next, 1)) < atomic_load(&job_parts)) {
        job_fn(job_arg, k, atomic_load(&job_parts));
        atomic_fetch_add(&job_finished, 1);
    }
}

static void *worker_main(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned long seen = atomic_load(&job_gen);
    while (!atomic_load(&quitting)) {
        /* (a worker beyond those the settings ask for sleeps) */
        for (int i = 0; i < SPIN_ROUNDS && atomic_load(&job_gen) == seen && !atomic_load(&quitting) &&
                        me < atomic_load(&job_workers);
             i++) {
            if (atomic_load(&hot) > 0) {
                i = 0;
                cpu_relax();
            } else if (i < PAUSE_ROUNDS) {
                cpu_relax();
            } else {
                sched_yield();
            }
        }
        if (atomic_load(&job_gen) == seen) {
            pthread_mutex_lock(&work_mu);
            atomic_fetch_add(&sleepers, 1);
            while (atomic_load(&job_gen) == seen && (atomic_load(&hot) == 0 || me >= atomic_load(&job_workers)) &&
                   !atomic_load(&quitting))
                pthread_cond_wait(&work_cv, &work_mu);
            atomic_fetch_sub(&sleepers, 1);
            pthread_mutex_unlock(&work_mu);
        }
        seen = atomic_load(&job_gen);
        if (me < atomic_load(&job_workers))
            run_parts();
    }
    atomic_fetch_sub(&alive, 1);
    return NULL;
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
    pthread_mutex_unlock(&work_mu);
    for (int i = 0; i < 1000 && atomic_load(&alive) > 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Start workers up to `n` (job_mu held); returns how many there are. */
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
    if (nparts <= 1 || threads <= 1 || pthread_mutex_trylock(&job_mu) != 0)
        return p;               /* (another job holds the workers) */
    int workers = ensure_workers((nparts < threads ? nparts : threads) - 1);
    if (workers > threads - 1)
        workers = threads - 1;
    if (workers == 0) {
        pthread_mutex_unlock(&job_mu);
        return p;
    }
    job_fn = fn;
    job_arg = arg;
    atomic_store(&job_parts, nparts);
    atomic_store(&job_workers, workers);
    atomic_store(&job_finished, 0);
    atomic_store(&job_next, 0);
    atomic_fetch_add(&job_gen, 1);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&work_mu);
        pthread_cond_broadcast(&work_cv);
        pthread_mutex_unlock(&work_mu);
    }
    p.shared = 1;
    return p;
}

void pygpu_job_join(const pygpu_job *p)
{
    if (!p->shared) {
        for (int k = 0; k < p->nparts; k++)
            p->fn(p->arg, k, p->nparts);
        return;
    }
    run_parts();
    while (atomic_load(&job_finished) < p->nparts)     /* the last parts are short */
        cpu_relax();
    atomic_store(&job_parts, 0);        /* late workers find nothing to claim */
    pthread_mutex_unlock(&job_mu);
}

void pygpu_run_parallel(pygpu_part_fn fn, void *arg, int nparts, int threads)
{
    pygpu_job p = pygpu_job_start(fn, arg, nparts, threads);
    pygpu_job_join(&p);
}

void pygpu_workers_heat(int want)
{
    int started = atomic_load(&nworkers);
    atomic_store(&job_workers, want < started ? want : started);
    atomic_fetch_add(&hot, 1);
    if (want > 0 && atomic_load(&sleepers) > 0) {     /* wake them while the transfer sets out */
        pthread_mutex_lock(&work_mu);
        pthread_cond_broadcast(&work_cv);
        pthread_mutex_unlock(&work_mu);
    }
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
    pthread_mutex_init(&job_mu, NULL);
    pthread_mutex_init(&work_mu, NULL);
    pthread_cond_init(&work_cv, NULL);
    atomic_store(&sleepers, 0);
    atomic_store(&alive, 0);
    atomic_store(&hot, 0);
    atomic_store(&job_workers, 0);
    atomic_store(&nworkers, 0);
}

void pygpu_workers_init(void)
{
    pygpu_fork_register(workers_fork);
}
