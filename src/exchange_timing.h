/*
 * exchange_timing.h -- the functions exchange_timing.c offers the files above
 * it (exchange_timing.c: pygpu._exchange_timing: the cost of one exchange
 * through a type's DLPack C exchange table, timed in C (no Python call in the
 * loop), for the tests and the hand-off benchmarks).
 */
#ifndef PYGPU_EXCHANGE_TIMING_H
#define PYGPU_EXCHANGE_TIMING_H

#include "pygpu.h"

/* Add pygpu._exchange_timing (exchange_timing.c) to module `m`. */
int pygpu_exchange_timing_init(PyObject *m);

#endif /* PYGPU_EXCHANGE_TIMING_H */
