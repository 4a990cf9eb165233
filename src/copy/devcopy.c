/*
 * devcopy.c -- from a pair of device layouts to launches of PyGPU's own
 * kernels: the elements widened to the largest unit the alignment allows
 * (a row of float32 moves 16 bytes at a time), the copy cut into launches
 * the kernels take (at most PK_MAXDIMS axes, fewer than 2^31 elements
 * each), the tiled transpose chosen where the two layouts' fastest axes
 * differ, and each launch's argument block filled.
 */
#include "devcopy.h"
#include "../kernels/kernels.h"
#include "../tuning.h"

#include <stdint.h>
#include <string.h>

ptrdiff_t pygpu_dev_max_launch = 0x7fffffff;

typedef struct {
    enum pygpu_kernel kind;     /* COPY (the transpose chosen per launch), FILL or CAST */
    int variant;                /* the element size; a cast's source type */
    int dtype;                  /* a cast's destination type */
    pk_u64 value[2];            /* a fill's element */
    pygpu_stream_t s;
} job;

static ptrdiff_t absd(ptrdiff_t x) { return x < 0 ? -x : x; }

static ptrdiff_t size_of(const pygpu_pair *p)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < p->nd; i++)
        n *= p->shape[i];
    return n;
}

/* The transpose kernel moves `p` (elements of `esize` bytes) when the
 * destination's fastest axis (the last) is far apart in the source, and
 * the source runs (nearly: PYGPU_TILE_NEAR elements) contiguously along
 * another axis, both axes PYGPU_TILE_MIN long at least: then the tiles
 * make both the reads and the writes whole.  *ta, *tb: the two axes. */
static int transpose_axes(const pygpu_pair *p, ptrdiff_t esize, int *ta, int *tb)
{
    int a = p->nd - 1, b = -1;
    if (p->nd < 2 || absd(p->strides[1][a]) <= PYGPU_TILE_NEAR * esize || p->shape[a] < PYGPU_TILE_MIN)
        return 0;
    for (int k = 0; k < a; k++)
        if (b < 0 || absd(p->strides[1][k]) < absd(p->strides[1][b]))
            b = k;
    if (absd(p->strides[1][b]) > PYGPU_TILE_NEAR * esize || p->shape[b] < PYGPU_TILE_MIN)
        return 0;
    *ta = a;
    *tb = b;
    return 1;
}

/* One launch: `p` has 1 to PK_MAXDIMS axes and fewer than 2^31 elements. */
static pygpu_status launch_one(const job *j, const pygpu_pair *p, char *dst, const char *src)
{
    pygpu_kargs a;
    enum pygpu_kernel kind = j->kind;
    memset(&a, 0, sizeof a);
    a.dst = (pk_u64)(uintptr_t)dst;
    a.src = (pk_u64)(uintptr_t)src;
    a.nd = p->nd;
    a.n = 1;
    a.dtype = j->dtype;
    memcpy(a.value, j->value, sizeof a.value);
    for (int k = 0; k < p->nd; k++) {
        a.shape[k] = p->shape[k];
        a.dstride[k] = p->strides[0][k];
        a.sstride[k] = j->kind == PYGPU_KERNEL_FILL ? 0 : p->strides[1][k];
        a.n *= p->shape[k];
        pk_divmod_init((pk_u32)p->shape[k], &a.mul[k], &a.shr[k]);
    }
    if (kind == PYGPU_KERNEL_COPY && transpose_axes(p, j->variant, &a.ta, &a.tb)) {
        kind = PYGPU_KERNEL_TRANSPOSE;
        pk_i64 la = a.shape[a.ta], lb = a.shape[a.tb];
        a.n = a.n / la / lb * ((la + PK_TILE - 1) / PK_TILE) * ((lb + PK_TILE - 1) / PK_TILE);
    }
    return pygpu_rt_launch(kind, j->variant, &a, j->s);
}

/* `p` without its first axis. */
static pygpu_pair inner_of(const pygpu_pair *p)
{
    pygpu_pair q = *p;
    q.nd = p->nd - 1;
    for (int k = 0; k < q.nd; k++) {
        q.shape[k] = p->shape[k + 1];
        q.strides[0][k] = p->strides[0][k + 1];
        q.strides[1][k] = p->strides[1][k + 1];
    }
    return q;
}

/* Launches for `p` (at least one axis, no empty one) of any size: slabs of
 * its first axis each small enough for one launch, or, when one index of
 * that axis is too much already (or there are too many axes), a pass per
 * index over the rest. */
static pygpu_status launch_all(const job *j, const pygpu_pair *p, char *dst, const char *src)
{
    ptrdiff_t n = size_of(p), inner = n / p->shape[0];
    pygpu_status r = 0;
    if (p->nd <= PK_MAXDIMS && n <= pygpu_dev_max_launch)
        return launch_one(j, p, dst, src);
    if (p->nd <= PK_MAXDIMS && inner <= pygpu_dev_max_launch) {
        ptrdiff_t rows = pygpu_dev_max_launch / inner;
        for (ptrdiff_t r0 = 0; r == 0 && r0 < p->shape[0]; r0 += rows) {
            pygpu_pair q = *p;
            q.shape[0] = p->shape[0] - r0 < rows ? p->shape[0] - r0 : rows;
            r = launch_one(j, &q, dst + r0 * p->strides[0][0], src + r0 * p->strides[1][0]);
        }
        return r;
    }
    pygpu_pair q = inner_of(p);
    for (ptrdiff_t i = 0; r == 0 && i < p->shape[0]; i++)
        r = launch_all(j, &q, dst + i * p->strides[0][0], src + i * p->strides[1][0]);
    return r;
}

/* ---- units ---------------------------------------------------------------------- */

/* The largest power of two, at most 16, dividing `bits`. */
static ptrdiff_t pow2_unit(uintptr_t bits)
{
    ptrdiff_t u = 1;
    while (u < 16 && !(bits & (uintptr_t)u))
        u *= 2;
    return u;
}

int pygpu_dev_aligned(const pygpu_pair *p, int which, const char *ptr, ptrdiff_t align)
{
    uintptr_t bits = (uintptr_t)ptr;
    for (int k = 0; k < p->nd; k++)
        bits |= (uintptr_t)absd(p->strides[which][k]);
    return (bits & (uintptr_t)(align - 1)) == 0;
}

ptrdiff_t pygpu_dev_unit(int t)
{
    return t == PK_C64 ? 4 : t == PK_C128 ? 8 : pk_itemsize(t);
}

/* The unit the kernels move elements of `itemsize` bytes in, rewriting `p`
 * (at least one axis) for elements of that size: where the last axis is
 * contiguous on both sides, the largest power of two (at most 16) that
 * divides both addresses, the other strides and the row; elsewhere the
 * same with the element and the last strides, the element cut into units
 * (a last axis added) when the unit is smaller than it.  0 when that
 * would be one axis too many. */
static ptrdiff_t unit_for(pygpu_pair *p, const char *dst, const char *src, ptrdiff_t itemsize)
{
    int last = p->nd - 1;
    uintptr_t bits = (uintptr_t)dst | (uintptr_t)src;
    for (int k = 0; k < last; k++)
        bits |= (uintptr_t)absd(p->strides[0][k]) | (uintptr_t)absd(p->strides[1][k]);
    if (p->strides[0][last] == itemsize && p->strides[1][last] == itemsize) {
        ptrdiff_t u = pow2_unit(bits | (uintptr_t)(p->shape[last] * itemsize));
        p->shape[last] = p->shape[last] * itemsize / u;
        p->strides[0][last] = p->strides[1][last] = u;
        return u;
    }
    bits |= (uintptr_t)itemsize | (uintptr_t)absd(p->strides[0][last]) | (uintptr_t)absd(p->strides[1][last]);
    ptrdiff_t u = pow2_unit(bits);
    if (u == itemsize)
        return u;
    if (p->nd >= PYGPU_MAXDIMS)
        return 0;
    p->shape[p->nd] = itemsize / u;
    p->strides[0][p->nd] = p->strides[1][p->nd] = u;
    p->nd++;
    return u;
}

/* `p` with at least one axis (a single element as one of length 1). */
static pygpu_pair with_axes(const pygpu_pair *p, ptrdiff_t itemsize)
{
    pygpu_pair q = *p;
    if (q.nd == 0) {
        q.nd = 1;
        q.shape[0] = 1;
        q.strides[0][0] = q.strides[1][0] = itemsize;
    }
    return q;
}

/* ---- the three doors -------------------------------------------------------------- */

pygpu_status pygpu_dev_copy(const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize, pygpu_stream_t s)
{
    if (p->nd < 0)
        return 0;
    pygpu_pair q = with_axes(p, itemsize);
    ptrdiff_t u = unit_for(&q, dst, src, itemsize);
    if (u == 0) {       /* every axis taken, elements to cut: a pass per index of the first */
        pygpu_pair r = inner_of(&q);
        pygpu_status st = 0;
        for (ptrdiff_t i = 0; st == 0 && i < q.shape[0]; i++)
            st = pygpu_dev_copy(&r, dst + i * q.strides[0][0], src + i * q.strides[1][0], itemsize, s);
        return st;
    }
    job j = {PYGPU_KERNEL_COPY, (int)u, 0, {0, 0}, s};
    return launch_all(&j, &q, dst, src);
}

pygpu_status pygpu_dev_cast(const pygpu_pair *p, char *dst, int dtype, const char *src, int stype, pygpu_stream_t s)
{
    if (p->nd < 0)
        return 0;
    pygpu_pair q = with_axes(p, pk_itemsize(stype));
    job j = {PYGPU_KERNEL_CAST, stype, dtype, {0, 0}, s};
    return launch_all(&j, &q, dst, src);
}

pygpu_status pygpu_dev_fill(const pygpu_pair *p, char *dst, ptrdiff_t itemsize, const void *value, pygpu_stream_t s)
{
    if (p->nd < 0)
        return 0;
    pygpu_pair q = with_axes(p, itemsize);
    job j = {PYGPU_KERNEL_FILL, (int)itemsize, 0, {0, 0}, s};
    int last = q.nd - 1;
    memcpy(j.value, value, (size_t)itemsize);
    if (q.strides[0][last] == itemsize) {   /* a contiguous row: filled in units of up to 16 bytes */
        uintptr_t bits = (uintptr_t)dst | (uintptr_t)(q.shape[last] * itemsize);
        for (int k = 0; k < last; k++)
            bits |= (uintptr_t)absd(q.strides[0][k]);
        ptrdiff_t u = pow2_unit(bits);
        for (ptrdiff_t b = itemsize; b < u; b += itemsize)
            memcpy((char *)j.value + b, value, (size_t)itemsize);
        if (u > itemsize) {
            q.shape[last] = q.shape[last] * itemsize / u;
            q.strides[0][last] = u;
            j.variant = (int)u;
        }
    }
    return launch_all(&j, &q, dst, dst);
}
