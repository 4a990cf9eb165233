/*
 * event.h -- the functions event.c offers the files above it (event.c: the
 * Event type: markers in a stream, for ordering across streams and for
 * timing).
 */
#ifndef PYGPU_EVENT_H
#define PYGPU_EVENT_H

#include "pygpu.h"

int pygpu_event_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_EVENT_H */
