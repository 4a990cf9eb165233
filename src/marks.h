/*
 * marks.h -- for research builds only (-DPYGPU_MARKS): the time at fixed
 * points of one call on this thread, read back by lowlevel._marks(), so
 * that where a small transfer's microseconds go can be seen without the
 * staging trace's events (tools/research/call-marks.py).  In every other
 * build each mark is nothing.
 */
#ifndef PYGPU_MARKS_H
#define PYGPU_MARKS_H

#define PYGPU_MARKS_N 16

#ifdef PYGPU_MARKS
/* (out of line, in lowlevel.c, whose headers give the monotonic clock) */
void pygpu_mark(int i);
#else
#define pygpu_mark(i) ((void)0)
#endif

#endif
