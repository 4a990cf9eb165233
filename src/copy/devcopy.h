/*
 * devcopy.h -- copies, casts and fills of device layouts by PyGPU's own
 * kernels (src/kernels/), for the copy planner: the lowest file of its
 * wing (src/copy/), knowing nothing of the plan above it.  Pure C:
 * runtime statuses, no Python, callable with the GIL released.
 *
 * Each takes a pair of layouts as the planner simplified it (layout 0 the
 * destination, layout 1 the source; pygpu_pair_simplify with lead 0), with
 * dst and src already at the pair's element [0, ..., 0], and queues the
 * kernels on stream `s` of the current device.  Callers check
 * pygpu_rt_kernels_ready() first, and buffer layouts that overlap.
 */
#ifndef PYGPU_DEVCOPY_H
#define PYGPU_DEVCOPY_H

#include "../backend/rt.h"
#include "../shape.h"

/* Copy elements of `itemsize` bytes (any size; the kernels move them in
 * the largest units that the layouts' alignment allows). */
pygpu_status pygpu_dev_copy(const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize,
                            pygpu_stream_t s);

/* Convert elements of type `stype` into type `dtype` (enum pygpu_ktype),
 * as NumPy's unsafe casts do.  Both sides must be aligned to their
 * elements (pygpu_dev_aligned). */
pygpu_status pygpu_dev_cast(const pygpu_pair *p, char *dst, int dtype, const char *src, int stype,
                            pygpu_stream_t s);

/* Fill layout 0 of `p` with the element `value` (`itemsize` bytes, at most
 * 16); `dst` must be aligned to the element's unit (pygpu_dev_aligned with
 * pygpu_dev_unit(itemsize)). */
pygpu_status pygpu_dev_fill(const pygpu_pair *p, char *dst, ptrdiff_t itemsize, const void *value,
                            pygpu_stream_t s);

/* The alignment the kernels need for elements of type `t` (enum
 * pygpu_ktype): the element's size, or its component's for complex. */
ptrdiff_t pygpu_dev_unit(int t);

/* 1 if layout `which` of `p`, at `ptr`, is aligned to `align` bytes (the
 * address and every stride). */
int pygpu_dev_aligned(const pygpu_pair *p, int which, const char *ptr, ptrdiff_t align);

/* Elements per launch, at most (2^31 - 1: the kernels index in 32 bits).
 * Tests lower it to see big copies cut into launches. */
extern ptrdiff_t pygpu_dev_max_launch;

#endif /* PYGPU_DEVCOPY_H */
