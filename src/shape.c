/*
 * shape.c -- array layout arithmetic in pure C; see shape.h for contracts.
 */
#include "shape.h"

#include <stdint.h>
#include <string.h>

int pygpu_shape_size(int nd, const ptrdiff_t *shape, ptrdiff_t *size)
{
    ptrdiff_t n = 1;
    int zero = 0, overflow = 0;
    if (nd < 0 || nd > PYGPU_MAXDIMS)
        return PYGPU_SHAPE_TOO_MANY;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 0)
            return PYGPU_SHAPE_NEGATIVE;
        if (shape[i] == 0)
            zero = 1;
        else if (!overflow && n > PTRDIFF_MAX / shape[i])
            overflow = 1;
        else if (!overflow)
            n *= shape[i];
    }
    if (overflow)               /* as NumPy: even when another axis is empty */
        return PYGPU_SHAPE_OVERFLOW;
    if (zero) {
        *size = 0;
        return PYGPU_SHAPE_OK;
    }
    *size = n;
    return PYGPU_SHAPE_OK;
}

int pygpu_shape_nbytes(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, ptrdiff_t *nbytes)
{
    ptrdiff_t size, nonzero = 1;
    int r = pygpu_shape_size(nd, shape, &size);
    if (r < 0)
        return r;
    for (int i = 0; i < nd; i++)        /* (fits: pygpu_shape_size checked it) */
        if (shape[i] > 0)
            nonzero *= shape[i];
    if (nonzero > PTRDIFF_MAX / itemsize)
        return PYGPU_SHAPE_OVERFLOW;
    *nbytes = size * itemsize;
    return PYGPU_SHAPE_OK;
}

int pygpu_shape_strides(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, int fortran,
                        ptrdiff_t *strides)
{
    ptrdiff_t nbytes;
    int r = pygpu_shape_nbytes(nd, shape, itemsize, &nbytes);
    if (r < 0)
        return r;
    ptrdiff_t s = itemsize;
    for (int k = 0; k < nd; k++) {
        int i = fortran ? k : nd - 1 - k;
        strides[i] = s;
        if (shape[i] > 0)           /* empty arrays keep finite strides */
            s *= shape[i];
    }
    return PYGPU_SHAPE_OK;
}

int pygpu_shape_is_contiguous(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                              ptrdiff_t itemsize, int fortran)
{
    ptrdiff_t expect = itemsize;
    for (int i = 0; i < nd; i++)
        if (shape[i] == 0)
            return 1;
    for (int k = 0; k < nd; k++) {
        int i = fortran ? k : nd - 1 - k;
        if (shape[i] == 1)
            continue;
        if (strides[i] != expect)
            return 0;
        expect *= shape[i];
    }
    return 1;
}

void pygpu_shape_extent(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                        ptrdiff_t itemsize, ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t a = 0, b = itemsize;
    for (int i = 0; i < nd; i++) {
        if (shape[i] == 0) {
            *lo = *hi = 0;
            return;
        }
        if (strides[i] < 0)
            a += (shape[i] - 1) * strides[i];
        else
            b += (shape[i] - 1) * strides[i];
    }
    *lo = a;
    *hi = b;
}

int pygpu_shape_extent_checked(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                               ptrdiff_t itemsize, ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t size, a = 0, span = itemsize;
    int r = pygpu_shape_size(nd, shape, &size);
    *lo = *hi = 0;
    if (r < 0)
        return r;
    if (size == 0)
        return PYGPU_SHAPE_OK;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 2)
            continue;
        if (strides[i] == PTRDIFF_MIN)
            return PYGPU_SHAPE_OVERFLOW;
        ptrdiff_t step = strides[i] < 0 ? -strides[i] : strides[i];
        if (step > (PTRDIFF_MAX - span) / (shape[i] - 1))
            return PYGPU_SHAPE_OVERFLOW;
        span += step * (shape[i] - 1);          /* both stay below span */
        if (strides[i] < 0)
            a -= step * (shape[i] - 1);
    }
    *lo = a;
    *hi = a + span;
    return PYGPU_SHAPE_OK;
}

int pygpu_shape_reshape_view(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                             int new_nd, const ptrdiff_t *new_shape, ptrdiff_t itemsize,
                             int fortran, ptrdiff_t *new_strides)
{
    ptrdiff_t os[PYGPU_MAXDIMS], ost[PYGPU_MAXDIMS];
    int ond = 0, oi = 0, oj = 1, ni = 0, nj = 1, k;

    for (int i = 0; i < nd; i++) {
        if (shape[i] == 0)          /* empty: any strides will do */
            return pygpu_shape_strides(new_nd, new_shape, itemsize, fortran, new_strides) == 0;
        if (shape[i] != 1) {
            os[ond] = shape[i];
            ost[ond++] = strides[i];
        }
    }
    /* Walk groups of old and new axes whose products agree. */
    while (ni < new_nd && oi < ond) {
        ptrdiff_t np = new_shape[ni], op = os[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= new_nd)
                    return 0;
                np *= new_shape[nj++];
            } else {
                if (oj >= ond)
                    return 0;
                op *= os[oj++];
            }
        }
        for (k = oi; k < oj - 1; k++)   /* the old group must be one block */
            if (fortran ? ost[k + 1] != os[k] * ost[k] : ost[k] != os[k + 1] * ost[k + 1])
                return 0;
        if (fortran) {
            new_strides[ni] = ost[oi];
            for (k = ni + 1; k < nj; k++)
                new_strides[k] = new_strides[k - 1] * new_shape[k - 1];
        } else {
            new_strides[nj - 1] = ost[oj - 1];
            for (k = nj - 1; k > ni; k--)
                new_strides[k - 1] = new_strides[k] * new_shape[k];
        }
        ni = nj++;
        oi = oj++;
    }
    /* Remaining new axes have length 1: any stride is right. */
    ptrdiff_t last = itemsize;
    if (ni > 0)
        last = fortran ? new_strides[ni - 1] * new_shape[ni - 1] : new_strides[ni - 1];
    for (k = ni; k < new_nd; k++)
        new_strides[k] = last;
    return 1;
}

/* ---- pairs of layouts ----------------------------------------------------- */

void pygpu_pair_init(pygpu_pair *p, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides0,
                     const ptrdiff_t *strides1)
{
    p->nd = nd;
    p->offset[0] = p->offset[1] = 0;
    for (int i = 0; i < nd; i++) {
        p->shape[i] = shape[i];
        p->strides[0][i] = strides0[i];
        p->strides[1][i] = strides1[i];
    }
}

static ptrdiff_t absd(ptrdiff_t x) { return x < 0 ? -x : x; }

int pygpu_shape_strides_like(int nd, const ptrdiff_t *shape, const ptrdiff_t *like, ptrdiff_t itemsize,
                             ptrdiff_t *strides)
{
    int order[PYGPU_MAXDIMS];
    ptrdiff_t nbytes, s = itemsize;
    int r = pygpu_shape_nbytes(nd, shape, itemsize, &nbytes);
    if (r < 0)
        return r;
    for (int i = 0; i < nd; i++) {         /* insertion sort: stable */
        int j = i;
        for (; j > 0 && absd(like[order[j - 1]]) < absd(like[i]); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    for (int i = nd - 1; i >= 0; i--) {
        strides[order[i]] = s;
        if (shape[order[i]] > 0)     /* (as pygpu_shape_strides) */
            s *= shape[order[i]];
    }
    return PYGPU_SHAPE_OK;
}

void pygpu_pair_simplify(pygpu_pair *p, int lead)
{
    int n = 0;
    /* Drop axes of length 1; an empty axis empties the copy. */
    for (int i = 0; i < p->nd; i++) {
        if (p->shape[i] == 0) {
            p->nd = -1;
            return;
        }
        if (p->shape[i] == 1)
            continue;
        p->shape[n] = p->shape[i];
        p->strides[0][n] = p->strides[0][i];
        p->strides[1][n] = p->strides[1][i];
        n++;
    }
    p->nd = n;
    /* Reverse the axes that run backwards in the lead layout. */
    for (int i = 0; i < n; i++) {
        if (p->strides[lead][i] < 0) {
            for (int w = 0; w < 2; w++) {
                p->offset[w] += (p->shape[i] - 1) * p->strides[w][i];
                p->strides[w][i] = -p->strides[w][i];
            }
        }
    }
    /* Order axes by the lead layout's stride, largest first (stable). */
    for (int i = 1; i < n; i++) {
        ptrdiff_t sh = p->shape[i], s0 = p->strides[0][i], s1 = p->strides[1][i];
        ptrdiff_t key = absd(p->strides[lead][i]);
        int j = i;
        for (; j > 0 && absd(p->strides[lead][j - 1]) < key; j--) {
            p->shape[j] = p->shape[j - 1];
            p->strides[0][j] = p->strides[0][j - 1];
            p->strides[1][j] = p->strides[1][j - 1];
        }
        p->shape[j] = sh;
        p->strides[0][j] = s0;
        p->strides[1][j] = s1;
    }
    /* Merge axis i into i + 1 where both layouts step over i + 1 exactly. */
    int m = 0;
    for (int i = 1; i < n; i++) {
        if (p->strides[0][m] == p->shape[i] * p->strides[0][i] &&
            p->strides[1][m] == p->shape[i] * p->strides[1][i]) {
            p->shape[m] *= p->shape[i];
            p->strides[0][m] = p->strides[0][i];
            p->strides[1][m] = p->strides[1][i];
        } else {
            m++;
            p->shape[m] = p->shape[i];
            p->strides[0][m] = p->strides[0][i];
            p->strides[1][m] = p->strides[1][i];
        }
    }
    p->nd = n ? m + 1 : 0;
}

int pygpu_pair_is_dense(const pygpu_pair *p, int which, ptrdiff_t itemsize)
{
    ptrdiff_t expect = itemsize;
    for (int i = p->nd - 1; i >= 0; i--) {
        if (p->strides[which][i] != expect)
            return 0;
        expect *= p->shape[i];
    }
    return 1;
}

/* ---- host copies ------------------------------------------------------ */

typedef struct { uint64_t lo, hi; } bytes16;

void pygpu_copy_row(char *d, ptrdiff_t ds, const char *s, ptrdiff_t ss, ptrdiff_t n, ptrdiff_t itemsize)
{
    if (ds == itemsize && ss == itemsize) {
        memmove(d, s, (size_t)(n * itemsize));
        return;
    }
#define ROW(T)                                                  \
    for (ptrdiff_t i = 0; i < n; i++, d += ds, s += ss)         \
        memcpy(d, s, sizeof(T));                                \
    return;
    switch (itemsize) {
    case 1: ROW(uint8_t)
    case 2: ROW(uint16_t)
    case 4: ROW(uint32_t)
    case 8: ROW(uint64_t)
    case 16: ROW(bytes16)
    default:
        for (ptrdiff_t i = 0; i < n; i++, d += ds, s += ss)
            memcpy(d, s, (size_t)itemsize);
    }
#undef ROW
}

void pygpu_host_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                             const ptrdiff_t *src_strides, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize)
{
    pygpu_pair p;
    ptrdiff_t idx[PYGPU_MAXDIMS] = {0};
    pygpu_pair_init(&p, nd, shape, dst_strides, src_strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return;
    dst += p.offset[0];
    src += p.offset[1];
    if (p.nd == 0) {
        memmove(dst, src, (size_t)itemsize);
        return;
    }
    int inner = p.nd - 1;
    for (;;) {
        pygpu_copy_row(dst, p.strides[0][inner], src, p.strides[1][inner], p.shape[inner], itemsize);
        int k = inner - 1;      /* odometer over the outer axes */
        for (; k >= 0; k--) {
            dst += p.strides[0][k];
            src += p.strides[1][k];
            if (++idx[k] < p.shape[k])
                break;
            dst -= p.shape[k] * p.strides[0][k];
            src -= p.shape[k] * p.strides[1][k];
            idx[k] = 0;
        }
        if (k < 0)
            return;
    }
}
