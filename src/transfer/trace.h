/*
 * trace.h -- PYGPU_STAGING_TRACE=1: each staged transfer prints, to
 * stderr, where its time went chunk by chunk (trace.c), a diagnostic for
 * tuning on a new machine.  Off, each trace point is one branch.
 */
#ifndef PYGPU_TRANSFER_TRACE_H
#define PYGPU_TRANSFER_TRACE_H

#include <stddef.h>

#include "../backend/rt.h"

/* 1 when PYGPU_STAGING_TRACE asks for traces (read once, at init). */
int pygpu_trace_is_on(void);

/* A staged transfer's events: 'b' start, 'w' buffer free, 'c' host copy of
 * a chunk done, 'q' DMA queued, 'e' end. */
#define PYGPU_TRACE(what, chunk, bytes)                        \
    do {                                                       \
        if (pygpu_trace_is_on())                                    \
            pygpu_trace_note((what), (chunk), (bytes));        \
    } while (0)
/* When part k of a host copy's n started (end 0) or ended (end 1), and
 * where. */
#define PYGPU_TRACE_PART(k, n, end)                            \
    do {                                                       \
        if (pygpu_trace_is_on())                                    \
            pygpu_trace_part((k), (n), (end));                 \
    } while (0)

/* The device's side of a transfer of whole buffers: timing events recorded
 * on `stream` at its start and after each DMA call k (at most
 * PYGPU_TRACE_DMA_MAX calls). */
#define PYGPU_TRACE_DMA_MAX 32
#define PYGPU_TRACE_DMA_START(stream)                          \
    do {                                                       \
        if (pygpu_trace_is_on())                                    \
            pygpu_trace_dma(-1, (stream));                     \
    } while (0)
#define PYGPU_TRACE_DMA_END(stream, k)                         \
    do {                                                       \
        if (pygpu_trace_is_on())                                    \
            pygpu_trace_dma((k), (stream));                    \
    } while (0)

/* The transfer's name: its trace is printed when the whole copy is done. */
#define PYGPU_TRACE_NAME(name)                                 \
    do {                                                       \
        if (pygpu_trace_is_on())                                    \
            pygpu_trace_name(name);                            \
    } while (0)

void pygpu_trace_note(char what, int chunk, size_t bytes);
void pygpu_trace_part(int k, int n, int end);
/* 1 if tracing is on and the calling thread's transfer is the one traced:
 * its host copies' parts go into the trace, other transfers' do not. */
int pygpu_trace_mine(void);
void pygpu_trace_dma(int k, pygpu_stream_t stream);
void pygpu_trace_name(const char *name);

/* A copy enters the planner / is done: with tracing on, the latter prints
 * the trace of the staged transfer it made, if any. */
void pygpu_trace_enter(void);
void pygpu_trace_done(void);

/* Where a call's time goes (the background's calls): a stamp at its
 * start and at the end of each part; pygpu_trace_call prints one line,
 * the printf-style `fmt` and then each part's microseconds after `names`
 * (one per part). */
#define PYGPU_TRACE_TICKS 8
typedef struct {
    long long t[PYGPU_TRACE_TICKS];
    int n;
} pygpu_trace_clock;
#define PYGPU_TRACE_TICK(clock)                                \
    do {                                                       \
        if (pygpu_trace_is_on() && (clock).n < PYGPU_TRACE_TICKS)   \
            (clock).t[(clock).n++] = pygpu_trace_now_ns();     \
    } while (0)
long long pygpu_trace_now_ns(void);
void pygpu_trace_call(const pygpu_trace_clock *c, const char *const *names, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reads PYGPU_STAGING_TRACE. */
void pygpu_trace_init(void);

#endif /* PYGPU_TRANSFER_TRACE_H */
