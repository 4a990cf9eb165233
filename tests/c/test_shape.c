/*
 * test_shape.c -- unit tests of src/shape.c, the pure-C layout arithmetic:
 * sizes and byte counts with their overflow rules, contiguous strides,
 * contiguity, extents (checked and not), reshape without a copy, and the
 * strided host copy, against element-by-element oracles on random layouts
 * (buffers of the exact size, so that valgrind or ASan sees any byte read
 * or written outside them).
 */
#include "check.h"
#include "shape.h"

#include <stdlib.h>
#include <string.h>

#define MAXD PYGPU_MAXDIMS
static const ptrdiff_t BIG = PTRDIFF_MAX;

static void test_size(void)
{
    ptrdiff_t s, shape[MAXD + 1];
    CHECK(pygpu_shape_size(0, NULL, &s) == 0 && s == 1);
    ptrdiff_t a[] = {3, 4, 5};
    CHECK(pygpu_shape_size(3, a, &s) == 0 && s == 60);
    ptrdiff_t z[] = {3, 0, 5};
    CHECK(pygpu_shape_size(3, z, &s) == 0 && s == 0);
    ptrdiff_t n[] = {3, -1};
    CHECK(pygpu_shape_size(2, n, &s) == PYGPU_SHAPE_NEGATIVE);
    ptrdiff_t o[] = {(ptrdiff_t)1 << 32, (ptrdiff_t)1 << 32};
    CHECK(pygpu_shape_size(2, o, &s) == PYGPU_SHAPE_OVERFLOW);
    ptrdiff_t oz[] = {(ptrdiff_t)1 << 32, 0, (ptrdiff_t)1 << 32};      /* as NumPy: still too big */
    CHECK(pygpu_shape_size(3, oz, &s) == PYGPU_SHAPE_OVERFLOW);
    ptrdiff_t edge[] = {BIG};
    CHECK(pygpu_shape_size(1, edge, &s) == 0 && s == BIG);
    ptrdiff_t edge2[] = {BIG, 1, 1};
    CHECK(pygpu_shape_size(3, edge2, &s) == 0 && s == BIG);
    ptrdiff_t edge3[] = {BIG / 2 + 1, 2};
    CHECK(pygpu_shape_size(2, edge3, &s) == PYGPU_SHAPE_OVERFLOW);
    for (int i = 0; i <= MAXD; i++)
        shape[i] = 1;
    CHECK(pygpu_shape_size(MAXD, shape, &s) == 0 && s == 1);
    CHECK(pygpu_shape_size(MAXD + 1, shape, &s) == PYGPU_SHAPE_TOO_MANY);
    CHECK(pygpu_shape_size(-1, shape, &s) == PYGPU_SHAPE_TOO_MANY);
}

static void test_nbytes_and_strides(void)
{
    ptrdiff_t nb, st[4];
    ptrdiff_t a[] = {2, 3, 4};
    CHECK(pygpu_shape_nbytes(3, a, 8, &nb) == 0 && nb == 192);
    CHECK(pygpu_shape_strides(3, a, 8, 0, st) == 0 && st[0] == 96 && st[1] == 32 && st[2] == 8);
    CHECK(pygpu_shape_strides(3, a, 8, 1, st) == 0 && st[0] == 8 && st[1] == 16 && st[2] == 48);
    ptrdiff_t e[] = {0, 3};                         /* empty arrays keep finite strides */
    CHECK(pygpu_shape_strides(2, e, 4, 0, st) == 0 && st[0] == 12 && st[1] == 4);
    ptrdiff_t h[] = {0, (ptrdiff_t)1 << 62};        /* the non-zero axes' bytes overflow: refused */
    CHECK(pygpu_shape_nbytes(2, h, 2, &nb) == PYGPU_SHAPE_OVERFLOW);
    CHECK(pygpu_shape_strides(2, h, 2, 0, st) == PYGPU_SHAPE_OVERFLOW);
    CHECK(pygpu_shape_nbytes(2, h, 1, &nb) == 0 && nb == 0);
    CHECK(pygpu_shape_strides(2, h, 1, 0, st) == 0 && st[1] == 1 && st[0] == (ptrdiff_t)1 << 62);
    ptrdiff_t b[] = {BIG / 8 + 1};
    CHECK(pygpu_shape_nbytes(1, b, 8, &nb) == PYGPU_SHAPE_OVERFLOW);
    ptrdiff_t c[] = {BIG / 8};
    CHECK(pygpu_shape_nbytes(1, c, 8, &nb) == 0 && nb == BIG / 8 * 8);
    ptrdiff_t n[] = {-3};
    CHECK(pygpu_shape_nbytes(1, n, 8, &nb) == PYGPU_SHAPE_NEGATIVE);
}

static void test_contiguity(void)
{
    ptrdiff_t sh[] = {2, 3}, c[] = {12, 4}, f[] = {4, 8}, odd[] = {16, 4};
    CHECK(pygpu_shape_is_contiguous(2, sh, c, 4, 0) && !pygpu_shape_is_contiguous(2, sh, c, 4, 1));
    CHECK(pygpu_shape_is_contiguous(2, sh, f, 4, 1) && !pygpu_shape_is_contiguous(2, sh, f, 4, 0));
    CHECK(!pygpu_shape_is_contiguous(2, sh, odd, 4, 0) && !pygpu_shape_is_contiguous(2, sh, odd, 4, 1));
    ptrdiff_t one[] = {1, 3}, any[] = {-999, 4};    /* axes of length 1 do not count */
    CHECK(pygpu_shape_is_contiguous(2, one, any, 4, 0) && pygpu_shape_is_contiguous(2, one, any, 4, 1));
    ptrdiff_t empty[] = {0, 3}, junk[] = {7, -5};   /* empty arrays are contiguous */
    CHECK(pygpu_shape_is_contiguous(2, empty, junk, 4, 0) && pygpu_shape_is_contiguous(2, empty, junk, 4, 1));
    CHECK(pygpu_shape_is_contiguous(0, NULL, NULL, 8, 0) && pygpu_shape_is_contiguous(0, NULL, NULL, 8, 1));
}

static void test_extents(void)
{
    ptrdiff_t lo, hi;
    ptrdiff_t sh[] = {3, 4}, st[] = {-32, 8};
    pygpu_shape_extent(2, sh, st, 8, &lo, &hi);
    CHECK(lo == -64 && hi == 32);
    CHECK(pygpu_shape_extent_checked(2, sh, st, 8, &lo, &hi) == 0 && lo == -64 && hi == 32);
    ptrdiff_t e[] = {0, 4};
    CHECK(pygpu_shape_extent_checked(2, e, st, 8, &lo, &hi) == 0 && lo == 0 && hi == 0);
    ptrdiff_t one[] = {1};
    ptrdiff_t wild[] = {PTRDIFF_MIN};               /* a length-1 axis: its stride is never used */
    CHECK(pygpu_shape_extent_checked(1, one, wild, 8, &lo, &hi) == 0 && lo == 0 && hi == 8);
    ptrdiff_t two[] = {2};
    CHECK(pygpu_shape_extent_checked(1, two, wild, 8, &lo, &hi) == PYGPU_SHAPE_OVERFLOW);
    ptrdiff_t four[] = {4}, s62[] = {(ptrdiff_t)1 << 62};   /* 3 * 2**62 wraps when unchecked */
    CHECK(pygpu_shape_extent_checked(1, four, s62, 8, &lo, &hi) == PYGPU_SHAPE_OVERFLOW);
    ptrdiff_t sh2[] = {2, 2}, mixed[] = {BIG / 2, -(BIG / 2)};  /* spans add up past the limit */
    CHECK(pygpu_shape_extent_checked(2, sh2, mixed, 8, &lo, &hi) == PYGPU_SHAPE_OVERFLOW);
    ptrdiff_t fits[] = {(BIG - 8) / 2, -((BIG - 8) / 2)};
    CHECK(pygpu_shape_extent_checked(2, sh2, fits, 1, &lo, &hi) == 0 && hi - lo <= BIG && lo < 0 && hi > 0);
    ptrdiff_t neg[] = {-1, 2};
    CHECK(pygpu_shape_extent_checked(2, neg, st, 8, &lo, &hi) == PYGPU_SHAPE_NEGATIVE);
}

/* Byte offset of C-order element `e` of a layout. */
static ptrdiff_t offset_of(ptrdiff_t e, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, int fortran)
{
    ptrdiff_t off = 0;
    for (int k = 0; k < nd; k++) {
        int i = fortran ? k : nd - 1 - k;
        off += (e % shape[i]) * strides[i];
        e /= shape[i];
    }
    return off;
}

/* A random small shape with random strides (multiples of itemsize, any sign). */
static int random_layout(ptrdiff_t *shape, ptrdiff_t *strides, ptrdiff_t itemsize)
{
    int nd = (int)rng_range(0, 4);
    for (int i = 0; i < nd; i++) {
        shape[i] = rng_range(0, 4);
        strides[i] = rng_range(-6, 6) * itemsize;
    }
    return nd;
}

static void test_reshape_view(void)
{
    ptrdiff_t shape[8], strides[8], ns[8], nst[8], size;
    for (int iter = 0; iter < 20000; iter++) {
        ptrdiff_t itemsize = 4;
        int nd = random_layout(shape, strides, itemsize);
        if (rng_range(0, 2) == 0)                   /* often a contiguous one */
            pygpu_shape_strides(nd, shape, itemsize, (int)rng_range(0, 1), strides);
        pygpu_shape_size(nd, shape, &size);
        /* a new shape of the same size: split the size into random factors */
        int nn = 0;
        ptrdiff_t left = size;
        while (nn < 5 && rng_range(0, 3)) {
            ptrdiff_t f = 1;
            for (ptrdiff_t d = rng_range(1, 4); d >= 1; d--)
                if (left % d == 0) {
                    f = d;
                    break;
                }
            ns[nn++] = f;
            left /= f;
        }
        if (left != 1 || nn == 0 || size == 0)
            ns[nn++] = left;
        int fortran = (int)rng_range(0, 1);
        ptrdiff_t nsize;
        pygpu_shape_size(nn, ns, &nsize);
        if (nsize != size)
            continue;
        int ok = pygpu_shape_reshape_view(nd, shape, strides, nn, ns, itemsize, fortran, nst);
        if (pygpu_shape_is_contiguous(nd, shape, strides, itemsize, fortran))
            CHECK(ok);                              /* a contiguous layout always reshapes */
        if (!ok)
            continue;
        int same = 1;                               /* every element where it was, in that order */
        for (ptrdiff_t e = 0; e < size; e++)
            same &= offset_of(e, nd, shape, strides, fortran) == offset_of(e, nn, ns, nst, fortran);
        CHECK(same);
    }
}

/* Random host layouts, copied by pygpu_host_strided_copy and element by
 * element: the same bytes, nothing outside the destination's elements
 * written, nothing read outside the source's. */
static void test_strided_copy(void)
{
    ptrdiff_t shape[8], ss[8], ds[8], dlo, dhi, slo, shi, size;
    for (int iter = 0; iter < 20000; iter++) {
        ptrdiff_t itemsizes[] = {1, 2, 4, 8, 16, 3};
        ptrdiff_t itemsize = itemsizes[rng_range(0, 5)];
        int nd = random_layout(shape, ss, itemsize);
        if (rng_range(0, 3) == 0 && nd > 0)
            ss[rng_range(0, nd - 1)] = 0;           /* a broadcast source axis */
        /* the destination: a permuted, maybe reversed, maybe gapped dense layout */
        ptrdiff_t step = itemsize * rng_range(1, 2);
        int order[8];
        for (int i = 0; i < nd; i++)
            order[i] = i;
        for (int i = nd - 1; i > 0; i--) {
            int j = (int)rng_range(0, i), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int k = nd - 1; k >= 0; k--) {
            int i = order[k];
            ds[i] = rng_range(0, 1) ? step : -step;
            step *= shape[i] > 0 ? shape[i] : 1;
        }
        pygpu_shape_size(nd, shape, &size);
        pygpu_shape_extent(nd, shape, ss, itemsize, &slo, &shi);
        pygpu_shape_extent(nd, shape, ds, itemsize, &dlo, &dhi);
        size_t sbytes = (size_t)(shi - slo), dbytes = (size_t)(dhi - dlo);
        unsigned char *src = malloc(sbytes ? sbytes : 1), *dst = malloc(dbytes ? dbytes : 1);
        unsigned char *want = malloc(dbytes ? dbytes : 1);
        for (size_t i = 0; i < sbytes; i++)
            src[i] = (unsigned char)rng_next();
        memset(dst, 0xA5, dbytes);
        memset(want, 0xA5, dbytes);
        for (ptrdiff_t e = 0; e < size; e++)
            memcpy(want - dlo + offset_of(e, nd, shape, ds, 0), src - slo + offset_of(e, nd, shape, ss, 0),
                   (size_t)itemsize);
        pygpu_host_strided_copy((char *)dst - dlo, ds, (const char *)src - slo, ss, nd, shape, itemsize);
        CHECK(memcmp(dst, want, dbytes) == 0);
        free(src);
        free(dst);
        free(want);
    }
}

static void test_pair_simplify(void)
{
    /* A C-contiguous pair merges to one axis; an F/C pair does not. */
    ptrdiff_t sh[] = {3, 4, 5}, c[] = {160, 40, 8}, f[] = {8, 24, 96};
    pygpu_pair p;
    pygpu_pair_init(&p, 3, sh, c, c);
    pygpu_pair_simplify(&p, 0);
    CHECK(p.nd == 1 && p.shape[0] == 60 && p.strides[0][0] == 8 && pygpu_pair_is_dense(&p, 1, 8));
    pygpu_pair_init(&p, 3, sh, c, f);
    pygpu_pair_simplify(&p, 0);
    CHECK(p.nd == 3 && pygpu_pair_is_dense(&p, 0, 8) && !pygpu_pair_is_dense(&p, 1, 8));
    ptrdiff_t rev[] = {-160, -40, -8};              /* reversed: offsets move to the first element */
    pygpu_pair_init(&p, 3, sh, rev, c);
    pygpu_pair_simplify(&p, 0);
    CHECK(p.nd == 1 && p.offset[0] == -472 && p.strides[0][0] == 8 && p.strides[1][0] == -8);
    ptrdiff_t empty[] = {3, 0, 5};
    pygpu_pair_init(&p, 3, empty, c, c);
    pygpu_pair_simplify(&p, 0);
    CHECK(p.nd == -1);
    ptrdiff_t ones[] = {1, 1};
    pygpu_pair_init(&p, 2, ones, c, f);
    pygpu_pair_simplify(&p, 1);
    CHECK(p.nd == 0);
}

int main(void)
{
    test_size();
    test_nbytes_and_strides();
    test_contiguity();
    test_extents();
    test_pair_simplify();
    test_reshape_view();
    test_strided_copy();
    return check_done("test_shape");
}
