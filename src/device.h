/*
 * device.h -- the functions device.c offers the files above it (device.c:
 * devices: ordinals, the current device, and the Device type).
 */
#ifndef PYGPU_DEVICE_H
#define PYGPU_DEVICE_H

#include "pygpu.h"

/* Make `dev` current, saving the current one in *prev; -1 with an exception
 * set if `dev` is out of range or the runtime fails. */
int pygpu_device_enter(pygpu_state *st, int dev, int *prev);

/* Make `prev` current again; -1 with an exception set on failure. */
int pygpu_device_leave(pygpu_state *st, int prev);

/* The number of devices; -1 with an exception set (no device, no driver). */
int pygpu_device_count(pygpu_state *st);

/* The current device; -1 with an exception set. */
int pygpu_current_device(pygpu_state *st);

/* Check a device ordinal: 0 if valid, -1 with ValueError naming the range. */
int pygpu_check_device_id(pygpu_state *st, long dev);

/* The Device object for `dev` (cached); new reference. */
PyObject *pygpu_device_get(pygpu_state *st, int dev);

/* A `device=` argument: a Device or an int ordinal in range; 0 with *dev
 * set, or -1 with TypeError/ValueError naming `what`. */
int pygpu_device_arg(pygpu_state *st, PyObject *obj, const char *what, int *dev);
int pygpu_device_init(PyObject *m, pygpu_state *st);

/* The module functions of devices (device_count, get_device, set_device,
 * synchronize, mem_get_info) and of streams (current_stream,
 * stream_priority_range), beside their types. */
int pygpu_device_functions_init(PyObject *m);

#endif /* PYGPU_DEVICE_H */
