/*
 * array_mapping.h -- the functions array_mapping.c offers the files above it
 * (array_mapping.c: indexing).
 */
#ifndef PYGPU_ARRAY_MAPPING_H
#define PYGPU_ARRAY_MAPPING_H

#include "pygpu.h"

PyObject *pygpu_array_subscript(PyObject *self, PyObject *key);

int pygpu_array_ass_subscript(PyObject *self, PyObject *key, PyObject *value);

Py_ssize_t pygpu_array_length(PyObject *self);

PyObject *pygpu_array_item(PyObject *self, Py_ssize_t i);

#endif /* PYGPU_ARRAY_MAPPING_H */
