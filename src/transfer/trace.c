/*
 * trace.c -- the staged transfers' trace; see trace.h.  One transfer's
 * events are kept at a time, under their own lock: with several at once
 * (other threads, other devices), the first to begin while none is traced
 * is followed to its end, and the others print only their name and size.
 */
#define _GNU_SOURCE
#include "trace.h"
#include "hostcopy.h"
#include "settings.h"
#include "../env.h"
#include "../fork.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int trace_on;

int pygpu_trace_is_on(void) { return trace_on; }

#define TRACE_MAX 512
#define MAX_PARTS (4 * PYGPU_MAX_THREADS)       /* (pygpu_range_parts gives no more) */

typedef struct {
    char what;
    int chunk;
    size_t bytes;
    long long t;
    int parts, threads, cpus;   /* 'c': the host copy's parts, on how many threads and CPUs */
    long long first, last, end; /* their first and last start, their last end */
} trace_event;

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int n;
    long long t0;
    trace_event ev[TRACE_MAX];
} trace;
static long long part_t[MAX_PARTS][2];  /* when each part of the last job started and ended */
static int part_cpu[MAX_PARTS];
static pthread_t part_thread[MAX_PARTS];        /* (a thread may move between CPUs mid-part) */
static int part_n;              /* the last job's parts */
static pygpu_event_t dma[PYGPU_TRACE_DMA_MAX + 1];
static int dma_n;
static const char *name;
static _Thread_local long long entered;
static _Thread_local size_t untraced;   /* the size of this thread's transfer, if another's is traced */
static pthread_t owner;         /* the thread whose transfer is traced, */
static int owned;               /* if one is */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long pygpu_trace_now_ns(void)
{
    return now_ns();
}

void pygpu_trace_call(const pygpu_trace_clock *c, const char *const *names, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr);          /* (one line, whatever other threads print) */
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; in the call (us):");
    for (int i = 1; i < c->n; i++)
        fprintf(stderr, " %s %.1f", names[i - 1], (double)(c->t[i] - c->t[i - 1]) / 1e3);
    fprintf(stderr, " (%.1f in all)\n", c->n ? (double)(c->t[c->n - 1] - c->t[0]) / 1e3 : 0.0);
    funlockfile(stderr);
    va_end(ap);
}

/* The child of a fork traces nothing of the parent's: the thread whose
 * transfer was traced is not in it. */
static void trace_fork(enum pygpu_fork_phase phase)
{
    if (phase == PYGPU_FORK_CHILD) {
        owned = 0;
        name = NULL;
        dma_n = 0;
    }
    pygpu_fork_hold_calling(phase, &trace_mu);     /* (events are waited for under it) */
}

void pygpu_trace_init(void)
{
    trace_on = pygpu_env_get()->staging_trace;
    pygpu_fork_register(trace_fork);
}

void pygpu_trace_part(int k, int n, int end)
{
    part_n = n;
    if (k < MAX_PARTS) {
        part_t[k][end] = now_ns();
        if (!end) {
            part_cpu[k] = sched_getcpu();
            part_thread[k] = pthread_self();
        }
    }
}

/* The parts of the host copy just done, into v. */
static void note_parts(trace_event *v)
{
    int seen[1024] = {0};
    v->parts = part_n;
    v->first = LLONG_MAX;
    for (int k = 0; k < v->parts && k < MAX_PARTS; k++) {
        v->first = part_t[k][0] < v->first ? part_t[k][0] : v->first;
        v->last = part_t[k][0] > v->last ? part_t[k][0] : v->last;
        v->end = part_t[k][1] > v->end ? part_t[k][1] : v->end;
        if (part_cpu[k] >= 0 && part_cpu[k] < 1024 && !seen[part_cpu[k]]++)
            v->cpus++;
        int before = 0;
        for (int j = 0; j < k && !before; j++)
            before = pthread_equal(part_thread[j], part_thread[k]);
        v->threads += !before;
    }
}

/* 1 if the calling thread's transfer is the one traced (trace_mu held):
 * a transfer that begins ('b') while none is takes the trace. */
static int mine(char what)
{
    if (owned)
        return pthread_equal(owner, pthread_self());
    if (what != 'b')
        return 0;
    owned = 1;
    owner = pthread_self();
    return 1;
}

int pygpu_trace_mine(void)
{
    if (!trace_on)
        return 0;
    pthread_mutex_lock(&trace_mu);
    int r = owned && pthread_equal(owner, pthread_self());
    pthread_mutex_unlock(&trace_mu);
    return r;
}

/* (trace_mu held) */
static void blame(char what, int chunk, size_t bytes)
{
    if (what == 'b') {
        trace.n = 0;
        trace.t0 = now_ns();
    }
    if (trace.n < TRACE_MAX) {
        trace_event v = {.what = what, .chunk = chunk, .bytes = bytes, .t = now_ns()};
        if (what == 'c')
            note_parts(&v);
        trace.ev[trace.n++] = v;
    }
}

void pygpu_trace_note(char what, int chunk, size_t bytes)
{
    pthread_mutex_lock(&trace_mu);
    if (mine(what))
        blame(what, chunk, bytes);
    else if (what == 'b')
        untraced = bytes;
    pthread_mutex_unlock(&trace_mu);
}

/* Record timing event i on `stream`; 0 if it could not be. */
static int record(int i, pygpu_stream_t stream)
{
    int ok = (dma[i] || pygpu_rt_event_create(&dma[i], 0) == 0) && pygpu_rt_event_record(dma[i], stream) == 0;
    (void)pygpu_rt_get_last_error();
    return ok;
}

void pygpu_trace_dma(int k, pygpu_stream_t stream)
{
    pthread_mutex_lock(&trace_mu);
    if (!mine(0))
        ;
    else if (k < 0)
        dma_n = record(0, stream) ? 1 : 0;
    else if (dma_n == k + 1 && k + 1 <= PYGPU_TRACE_DMA_MAX && record(k + 1, stream))
        dma_n = k + 2;
    pthread_mutex_unlock(&trace_mu);
}

/* The traced transfer's name is kept for its line; another's is printed
 * at once, with its size, so that every staged transfer says which way it
 * went. */
void pygpu_trace_name(const char *n)
{
    pthread_mutex_lock(&trace_mu);
    if (mine(0))
        name = n;
    else
        fprintf(stderr, "pygpu staging %s: [%zuK], not traced (another transfer's trace was under way)\n", n,
                untraced >> 10);
    pthread_mutex_unlock(&trace_mu);
}

void pygpu_trace_enter(void)
{
    if (trace_on)
        entered = now_ns();
}

static void print_dma(void)
{
    if (dma_n > 1 && pygpu_rt_event_synchronize(dma[dma_n - 1]) == 0) {
        fprintf(stderr, "; DMA calls ended, from the device's start");
        for (int k = 1; k < dma_n; k++) {
            float ms = 0;
            if (pygpu_rt_event_elapsed_ms(&ms, dma[0], dma[k]) == 0)
                fprintf(stderr, " %d@%.1f", k - 1, ms * 1e3);
        }
    }
    (void)pygpu_rt_get_last_error();
    dma_n = 0;
}

void pygpu_trace_done(void)
{
    if (!trace_on)
        return;
    pthread_mutex_lock(&trace_mu);
    if (!mine(0)) {
        pthread_mutex_unlock(&trace_mu);
        return;
    }
    owned = 0;
    if (name) {
        blame('s', 0, 0);
        flockfile(stderr);      /* (one line, whatever other threads print) */
        fprintf(stderr, "pygpu staging %s: copy entered %.1f us before b0;", name, (double)(trace.t0 - entered) / 1e3);
        for (int i = 0; i < trace.n; i++) {
            const trace_event *v = &trace.ev[i];
            fprintf(stderr, " %c%d@%.1f", v->what, v->chunk, (double)(v->t - trace.t0) / 1e3);
            if (v->bytes)
                fprintf(stderr, "[%zuK]", v->bytes >> 10);
            if (v->parts)
                fprintf(stderr, "{%d parts on %d threads, %d cpus: starts %.1f..%.1f, last end %.1f}", v->parts,
                        v->threads, v->cpus,
                        (double)(v->first - trace.t0) / 1e3, (double)(v->last - trace.t0) / 1e3,
                        (double)(v->end - trace.t0) / 1e3);
        }
        print_dma();
        fprintf(stderr, " (us)\n");
        funlockfile(stderr);
        name = NULL;
    }
    pthread_mutex_unlock(&trace_mu);
}
