/*
 * stream.h -- the functions stream.c offers the files above it (stream.c: the
 * Stream type, the current stream (`with stream:`, kept in a context-variable
 * chain of state.c: per thread, and per task under asyncio), stream
 * arguments, and the stream bookkeeping of arrays: the record of the stream
 * of an array's last work (which the CUDA Array Interface and DLPack hand to
 * consumers) and ordering one stream after another).
 */
#ifndef PYGPU_STREAM_H
#define PYGPU_STREAM_H

#include "pygpu.h"

int pygpu_stream_functions_init(PyObject *m);

/* The current stream of this thread/context: the innermost `with stream:`,
 * else Stream.null; new reference. */
PyObject *pygpu_current_stream(pygpu_state *st);

/* Resolve a `stream=` argument: None (the current stream), a Stream, or an
 * int handle; 0 on success, -1 with TypeError set. */
int pygpu_stream_arg(pygpu_state *st, PyObject *obj, pygpu_stream_t *out);

/* The same for work on device `dev` (run with `dev` current): None gives
 * the current stream if it belongs to `dev`, else `dev`'s legacy default
 * stream (each device has its own current stream, as in CuPy); a Stream
 * of another device is a ValueError naming both devices and `what` (the
 * object the work is for: "array").  `dev` -1: as pygpu_stream_arg. */
int pygpu_stream_for(pygpu_state *st, PyObject *obj, int dev, const char *what, pygpu_stream_t *out);

/* Whether `obj`, a stream argument that gave handle `h`, owns that stream,
 * so that memory or a record ordered on it must keep `obj` alive: a
 * created Stream, or another library's stream object (__cuda_stream__,
 * such as cuda.core's, which destroys its stream when it goes).  An int
 * handle is the caller's to keep alive. */
int pygpu_stream_owner(pygpu_state *st, PyObject *obj, pygpu_stream_t h);

/* The handle that `current` (the current Stream, from pygpu_current_stream)
 * stands for in work on device `dev`: its own, or dev's legacy stream. */
pygpu_stream_t pygpu_current_stream_on(PyObject *current, int dev);

/* Record event `e` on the stream argument `stream` (on e's device); 0, or
 * -1 with an exception set. */
int pygpu_event_record_on(pygpu_state *st, PyGPUEvent *e, PyObject *stream);
/* 0 if event `e` is still the runtime's; -1 with a GPUError if it was made
 * before a reset of its device (fork.h). */
int pygpu_event_live(pygpu_state *st, const PyGPUEvent *e);
int pygpu_stream_init(PyObject *m, pygpu_state *st);

/* Record that work on `a`'s memory was queued on handle `s`, the resolved
 * value of the stream argument `stream` (a Stream, an int, None or NULL:
 * borrowed); a created Stream is kept alive with the array. */
void pygpu_array_set_last_stream(pygpu_state *st, PyGPUArray *a, PyObject *stream, pygpu_stream_t s);

/* Make later work on stream `to` wait for the work queued so far on stream
 * `from` (an event recorded on `from`, on device `dev`); nothing when they
 * are the same stream, nor where one of them is being captured into a
 * graph and the other is not part of that capture (such a wait would break
 * the capture: the captured work has not run, and runs when the graph is
 * launched).  0, or -1 with an exception set. */
int pygpu_stream_order(pygpu_state *st, int dev, pygpu_stream_t from, pygpu_stream_t to);

/* How work queued on stream s of the current device would be captured
 * into a graph (enum pygpu_capture); PYGPU_CAPTURE_NONE where the runtime
 * cannot say. */
int pygpu_stream_capturing(pygpu_stream_t s);

/* The capture state of stream s of the current device where `what` may go
 * on it: PYGPU_CAPTURE_NONE, or PYGPU_CAPTURE_ACTIVE where `joins` (work
 * that a capture records correctly); else -1 with GPUError saying that
 * `what` cannot join the capture (before anything touched the stream, so
 * that the capture stays valid) and what to do instead (`instead`, a
 * sentence, or NULL). */
int pygpu_capture_refuse(pygpu_state *st, pygpu_stream_t s, int joins, const char *what, const char *instead);
/* The same for a capture state `how` already asked. */
int pygpu_capture_refused(pygpu_state *st, pygpu_stream_t s, int how, const char *what, const char *instead);

#endif /* PYGPU_STREAM_H */
