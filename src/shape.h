/*
 * shape.h -- array layout arithmetic in pure C (no Python): sizes with
 * overflow checks, contiguous strides, contiguity, byte extents, reshape
 * without copying, and the simplification of a pair of layouts that the copy
 * planner runs on.  Functions return 0 on success and a negative
 * PYGPU_SHAPE_* code on failure; none touches Python error state.
 */
#ifndef PYGPU_SHAPE_H
#define PYGPU_SHAPE_H

#include <stddef.h>

/* The most axes an array has: NumPy 2's NPY_MAXDIMS.  Shapes and strides
 * of this many live on the stack (512 bytes each; a pygpu_pair, about 1.5
 * KiB); PyGPU's kernels walk at most PK_MAXDIMS of them a launch and the
 * copy planner loops over the rest (copy/devcopy.c). */
#define PYGPU_MAXDIMS 64

enum {
    PYGPU_SHAPE_OK = 0,
    PYGPU_SHAPE_NEGATIVE = -1,     /* a negative dimension */
    PYGPU_SHAPE_OVERFLOW = -2,     /* the size or byte count overflows */
    PYGPU_SHAPE_TOO_MANY = -3,     /* more than PYGPU_MAXDIMS axes */
};

/* *size = product of the dims (1 for nd == 0); overflow of the non-zero
 * dims' product is an error even if another dim is 0, as in NumPy. */
int pygpu_shape_size(int nd, const ptrdiff_t *shape, ptrdiff_t *size);

/* *nbytes = size * itemsize; PYGPU_SHAPE_OVERFLOW when the byte count of
 * the non-zero dims does not fit in ptrdiff_t (as NumPy: even if another
 * dim is 0, so that the strides of an empty array are finite too). */
int pygpu_shape_nbytes(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, ptrdiff_t *nbytes);

/* Strides (bytes) of a contiguous array, C order or (fortran) F order;
 * fails as pygpu_shape_nbytes does. */
int pygpu_shape_strides(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, int fortran,
                        ptrdiff_t *strides);

/* Strides (bytes) of a contiguous array whose axes lie in memory in the
 * order of `like`'s (largest |stride| outermost; equal ones in axis
 * order), as NumPy lays out a copy in order 'K'; fails as
 * pygpu_shape_nbytes does. */
int pygpu_shape_strides_like(int nd, const ptrdiff_t *shape, const ptrdiff_t *like, ptrdiff_t itemsize,
                             ptrdiff_t *strides);

/* 1 if the layout is contiguous in C (or, with fortran, F) order, by NumPy's
 * rules: axes of length 1 do not count, and empty arrays are contiguous. */
int pygpu_shape_is_contiguous(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                              ptrdiff_t itemsize, int fortran);

/* The bytes the layout touches, [*lo, *hi) relative to element 0 (both 0
 * for an empty array). */
void pygpu_shape_extent(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                        ptrdiff_t itemsize, ptrdiff_t *lo, ptrdiff_t *hi);

/* The same for a layout nobody checked yet (strides of any sign and size,
 * shape not negative): PYGPU_SHAPE_OVERFLOW when the size, or the bytes
 * between the lowest and the highest element, do not fit in ptrdiff_t. */
int pygpu_shape_extent_checked(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                               ptrdiff_t itemsize, ptrdiff_t *lo, ptrdiff_t *hi);

/* If the elements of (shape, strides), read in C (or F) order, can be
 * viewed as new_shape without copying, write the new strides and return 1;
 * else return 0.  The sizes must agree. */
int pygpu_shape_reshape_view(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                             int new_nd, const ptrdiff_t *new_shape, ptrdiff_t itemsize,
                             int fortran, ptrdiff_t *new_strides);

/* Two layouts of one shape, as a copy sees them: layout 0 and layout 1,
 * each a byte offset from its base pointer and strides per axis. */
typedef struct {
    int nd;                         /* -1: empty (nothing to copy) */
    ptrdiff_t shape[PYGPU_MAXDIMS];
    ptrdiff_t strides[2][PYGPU_MAXDIMS];
    ptrdiff_t offset[2];
} pygpu_pair;

/* Fill `p` from a shape and the two layouts' strides (offsets zero). */
void pygpu_pair_init(pygpu_pair *p, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides0,
                     const ptrdiff_t *strides1);

/* Rewrite `p` as the same copy with the fewest axes: drop axes of length 1,
 * order axes by layout `lead`'s |stride| (largest first), reverse the axes
 * whose stride is negative in layout `lead` (so its strides are all >= 0;
 * the other layout's stride on such an axis changes sign), and merge
 * neighbouring axes that are contiguous in both.  nd becomes -1 if the
 * shape is empty, 0 for a single element. */
void pygpu_pair_simplify(pygpu_pair *p, int lead);

/* 1 if layout `which` of `p` is dense: all its elements adjacent, in the
 * axis order of `p` (so one copy of size * itemsize moves it). */
int pygpu_pair_is_dense(const pygpu_pair *p, int which, ptrdiff_t itemsize);

/* Copy n elements, ds and ss bytes apart (any strides, 0 for a repeated
 * source element). */
void pygpu_copy_row(char *dst, ptrdiff_t ds, const char *src, ptrdiff_t ss, ptrdiff_t n, ptrdiff_t itemsize);

/* Copy elements between two host layouts of one shape (src strides may be
 * 0: broadcast).  Plain C, callable without the GIL. */
void pygpu_host_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                             const ptrdiff_t *src_strides, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize);

#endif /* PYGPU_SHAPE_H */
