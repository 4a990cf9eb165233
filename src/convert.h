/*
 * convert.h -- the functions convert.c offers the files above it (convert.c:
 * argument conversion and value building for the Python faces of every type:
 * shapes and dims, orders, byte counts, casting rules, and the tuples and
 * reprs of shapes).
 */
#ifndef PYGPU_CONVERT_H
#define PYGPU_CONVERT_H

#include "pygpu.h"

/* 1 if `obj` is one integer (a NumPy array of one or more axes is not, nor
 * a GPUArray, though a 0-d one of integers has __index__). */
int pygpu_is_int_arg(pygpu_state *st, PyObject *obj);

/* Parse a shape argument (int or sequence of ints); 0, or -1 with an
 * exception (TypeError, ValueError for negative or too many dims). */
int pygpu_shape_arg(pygpu_state *st, PyObject *obj, int *nd, ptrdiff_t *shape);

/* The same for any ints >= `min` (ValueError below it). */
int pygpu_dims_arg(pygpu_state *st, PyObject *obj, int *nd, ptrdiff_t *out, ptrdiff_t min);

/* An order argument: 'C' -> 0, 'F' -> 1; with allow_any also 'A' and 'K'
 * (enum pygpu_order) and None -> -1; -2 with ValueError otherwise. */
int pygpu_order_arg(PyObject *obj, int allow_any);

/* A byte count argument: a non-negative int; 0, or -1 with an exception. */
int pygpu_size_arg(PyObject *obj, const char *what, size_t *out);

/* A tuple of n ints; new reference. */
PyObject *pygpu_tuple_of(const ptrdiff_t *v, int n);

/* repr() of a shape tuple, for messages; new reference. */
PyObject *pygpu_shape_repr(const ptrdiff_t *shape, int nd);

/* NumPy's casting rule named by `obj` (NULL: no argument, 'unsafe') in
 * *rule; 'same_value' (NumPy 2.4's rule that checks every value) leaves
 * *rule unsafe and sets *by_numpy: NumPy does that one, on the host.  0, or
 * -1 with NumPy's TypeError or ValueError. */
int pygpu_casting_arg(PyObject *obj, NPY_CASTING *rule, int *by_numpy);

/* The byte count of an array of `shape` and `itemsize` in *nbytes; 0, or
 * -1 with ValueError (negative dimensions, or a count that overflows). */
int pygpu_checked_nbytes(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, ptrdiff_t *nbytes);

#endif /* PYGPU_CONVERT_H */
