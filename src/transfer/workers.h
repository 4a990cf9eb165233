/*
 * workers.h -- a small persistent pool of host threads, one per process,
 * that share out the parts of jobs (workers.c): the host copies of staged
 * transfers, prefaulting.  Jobs of several threads' transfers are open at
 * once and served oldest first.  Pure C, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_WORKERS_H
#define PYGPU_TRANSFER_WORKERS_H

/* One part of a job: part `part` of `nparts`. */
typedef void (*pygpu_part_fn)(void *arg, int part, int nparts);

/* A job handed to the workers, to be joined by its caller. */
typedef struct {
    pygpu_part_fn fn;
    void *arg;
    int nparts, shared;         /* shared: the workers have it (its slot + 1), else 0 */
} pygpu_job;

/* Hand fn(arg, k, nparts), k in [0, nparts), to at most threads - 1 workers
 * and return at once, so that the caller can do something else (queue a
 * DMA) before it joins in with pygpu_job_join.  Where no worker can be
 * had (too many jobs open), the join runs every part. */
pygpu_job pygpu_job_start(pygpu_part_fn fn, void *arg, int nparts, int threads);
/* Run the parts no worker has claimed; return when all are done. */
void pygpu_job_join(const pygpu_job *p);
/* Start and join. */
void pygpu_run_parallel(pygpu_part_fn fn, void *arg, int nparts, int threads);

/* A transfer sets out: `want` workers spin (rather than sleep) between its
 * jobs until pygpu_workers_cool; the others sleep. */
void pygpu_workers_heat(int want);
void pygpu_workers_cool(void);

/* How many times the workers from number `from` on were woken from their
 * sleep apart (beyond the workers a job wanted): for the tests. */
int pygpu_workers_idle_woken(int from);

/* Registers the workers' fork handler (the child starts with none). */
void pygpu_workers_init(void);

#endif /* PYGPU_TRANSFER_WORKERS_H */
