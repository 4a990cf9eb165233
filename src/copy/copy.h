/*
 * copy.h -- the copy planner's doors (copy/copy.c): the only functions of
 * the wing src/copy/ that the rest of PyGPU calls.  Called with the GIL
 * held, they release it while data move and fail with an exception set;
 * the sides of a copy are pygpu_side (pygpu.h).
 */
#ifndef PYGPU_COPY_COPY_H
#define PYGPU_COPY_COPY_H

#include "../pygpu.h"

/* Copy the elements of `src` to `dst` (layouts of one shape; any strides,
 * src strides may be 0 where it is broadcast), on stream `s`.  Unless
 * `async`, the copy is done when this returns.  GIL released inside; 0, or
 * -1 with an exception set. */
int pygpu_copy(pygpu_state *st, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
               ptrdiff_t itemsize, pygpu_stream_t s, int async);
/* A copy into `dst`, fresh memory of dst.device allocated from its pool
 * on the legacy stream of src.device (pygpu_memory_new_across), which is
 * current and reaches dst.device peer to peer: on that stream, after the
 * work queued there, dense (or a strided source gathered straight into
 * dst over the link), and waited for.  GIL released inside; 0, or -1 with
 * an exception set. */
int pygpu_copy_across(pygpu_state *st, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                      ptrdiff_t itemsize);
/* Give back what finished background uploads held (their page-locked
 * blocks, their host memory's owners); the GIL held. */
void pygpu_copy_reap(void);
/* The same once every background transfer is over, and their counters'
 * page-locked block freed (before a device reset, which frees their
 * page-locked memory and events); the GIL held. */
void pygpu_copy_reap_all(void);
/* 1 if PyGPU's kernels can run on device `dev` (-1: the current one),
 * readying them there the first time; 0 if not (with the one-time
 * BackendWarning saying why); -1 with an exception set. */
int pygpu_kernels_usable(pygpu_state *st, int dev);
/* Convert the elements of device layout `src` (type `stype`) into device
 * layout `dst` (type `dtype`; both enum pygpu_ktype), on one device, by
 * PyGPU's cast kernel, as NumPy's unsafe casts convert (src strides may be
 * 0: broadcast; the layouts must not overlap).  Queued on `s`.  0 when
 * done, 1 when the kernels cannot run here (the caller takes the host's
 * way), -1 with an exception set. */
int pygpu_cast(pygpu_state *st, pygpu_side dst, int dtype, pygpu_side src, int stype, int nd, const ptrdiff_t *shape,
               pygpu_stream_t s);
/* Fill the elements of a device layout with one element's bytes `value`. */
int pygpu_fill(pygpu_state *st, pygpu_side dst, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize,
               const void *value, pygpu_stream_t s);

#endif
