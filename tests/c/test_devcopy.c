/*
 * test_devcopy.c -- unit tests of PyGPU's own kernels as the host backend
 * runs them, and of what the device kernels share with it: division by
 * multiply-high (kernels.h), the float16 conversions, and src/copy/devcopy.c
 * (the unit chosen, the cut into launches, the transpose's tile axes)
 * driving src/backend/kernels_host.c, against element-by-element oracles
 * on random layouts (sizes lowered so that big copies are cut too).
 */
#include "check.h"
#include "copy/devcopy.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- division by multiply-high ------------------------------------------------ */

static void check_div(uint32_t d, uint32_t n)
{
    uint32_t mul, shr;
    pk_divmod_init(d, &mul, &shr);
    CHECK(pk_div(n, mul, shr) == n / d);
}

static void test_divmod(void)
{
    static const uint32_t edges[] = {0, 1, 2, 3, 7, 255, 256, 65535, 65536, 0x3fffffff, 0x40000000, 0x7ffffffe,
                                     0x7fffffff};
    for (uint32_t d = 1; d < 3000; d++)
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
            check_div(d, edges[e]);
    for (int t = 0; t < 20000; t++) {
        uint32_t d = (uint32_t)rng_range(1, 0x7fffffff) >> rng_range(0, 30);
        uint32_t n = (uint32_t)rng_range(0, 0x7fffffff) >> rng_range(0, 30);
        uint32_t q = n / (d ? d : 1);
        check_div(d ? d : 1, n);
        if (d && q)     /* both sides of each multiple of d */
            check_div(d, q * d - 1), check_div(d, q * d);
    }
    check_div(0x7fffffff, 0x7fffffff);
    check_div(0x40000001, 0x7fffffff);
}

/* ---- float16 ---------------------------------------------------------------------- */

static void test_half(void)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = pk_half_to_float((uint16_t)h);
        if (isnan(f)) {
            CHECK(((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff));
            uint16_t back = pk_double_to_half(f);   /* NaN again, same sign (quieted, maybe) */
            CHECK((back & 0x8000) == (h & 0x8000) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff));
            continue;
        }
        CHECK(pk_double_to_half(f) == h);           /* exact both ways */
        if ((h & 0x7fff) < 0x7bff) {                /* between h and the next float16 up */
            double next = pk_half_to_float((uint16_t)(h + 1)), mid = ((double)f + next) / 2;
            CHECK(pk_double_to_half(mid) == ((h & 1) ? h + 1 : h));     /* ties to even */
            CHECK(pk_double_to_half(nextafter(mid, signbit(f) ? -1e300 : 1e300)) == h + 1);
            CHECK(pk_double_to_half(nextafter(mid, 0.0)) == h);
        }
    }
    CHECK(pk_double_to_half(65520.0) == 0x7c00);    /* rounds past the largest: inf */
    CHECK(pk_double_to_half(65519.99) == 0x7bff);
    CHECK(pk_double_to_half(-1e300) == 0xfc00);
    CHECK(pk_double_to_half(ldexp(1, -25)) == 0);   /* half the smallest subnormal: to even */
    CHECK(pk_double_to_half(nextafter(ldexp(1, -25), 1)) == 1);
    CHECK(pk_double_to_half(-0.0) == 0x8000);
    CHECK(pk_double_to_half(5e-324) == 0);
}

/* ---- floats to integers ------------------------------------------------------------ */

static void test_truncation(void)
{
    CHECK(pk_trunc32(NAN) == INT32_MIN && pk_trunc32(2147483648.0) == INT32_MIN);
    CHECK(pk_trunc32(2147483647.9) == INT32_MAX && pk_trunc32(-2147483648.9) == INT32_MIN);
    CHECK(pk_trunc32(-2147483649.0) == INT32_MIN && pk_trunc32(-1.5) == -1);
    CHECK(pk_trunc64(9223372036854775808.0) == INT64_MIN && pk_trunc64(-9223372036854775808.0) == INT64_MIN);
    CHECK(pk_trunc64(9223372036854774784.0) == 9223372036854774784LL);
    CHECK(pk_to_u32_vector(3e9) == 3000000000u && pk_to_u32_vector(NAN) == 0x80000000u);
    CHECK(pk_to_u32_vector(1e10) == 0 && pk_to_u32_vector(-1.0) == 0xffffffffu);
    CHECK(pk_to_u64(1e19) == 10000000000000000000ull && pk_to_u64(NAN) == 0x8000000000000000ull);
    CHECK(pk_to_u64(1e20) == 0 && pk_to_u64(-1.0) == UINT64_MAX);
}

/* ---- layouts ------------------------------------------------------------------------ */

#define MAXND 11
#define ARENA 4096

typedef struct {
    int nd;
    ptrdiff_t shape[MAXND];
    ptrdiff_t strides[2][MAXND];
    ptrdiff_t base[2];          /* byte offset of element [0, ...] in each arena */
} layout_pair;

/* A random pair of layouts of one shape that fits in two arenas of ARENA
 * bytes: each side's axes in a random order, some reversed or stepped,
 * each side shifted by `misalign` bytes. */
static int random_pair(layout_pair *lp, ptrdiff_t itemsize, int maxnd, ptrdiff_t misalign)
{
    lp->nd = (int)rng_range(0, maxnd);
    ptrdiff_t n = 1;
    for (int i = 0; i < lp->nd; i++) {
        lp->shape[i] = rng_range(1, lp->nd > 6 ? 2 : 6);
        n *= lp->shape[i];
    }
    for (int w = 0; w < 2; w++) {
        int order[MAXND];
        ptrdiff_t step = itemsize, lo = 0, hi = 0;
        for (int i = 0; i < lp->nd; i++)
            order[i] = i;
        for (int i = lp->nd - 1; i > 0; i--) {
            int j = (int)rng_range(0, i), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = lp->nd - 1; i >= 0; i--) {
            int ax = order[i];
            ptrdiff_t mult = rng_range(1, 3);
            lp->strides[w][ax] = step * mult * (rng_range(0, 3) == 0 ? -1 : 1);
            step *= mult * lp->shape[ax];
        }
        for (int i = 0; i < lp->nd; i++) {
            ptrdiff_t span = (lp->shape[i] - 1) * lp->strides[w][i];
            if (span < 0)
                lo += span;
            else
                hi += span;
        }
        if (hi - lo + itemsize + 32 > ARENA)
            return 0;
        lp->base[w] = -lo + 16 + misalign * w;
    }
    (void)n;
    return 1;
}

/* The element offsets of index `flat` (C order) on side w. */
static ptrdiff_t offset_of(const layout_pair *lp, int w, ptrdiff_t flat)
{
    ptrdiff_t off = lp->base[w];
    for (int i = lp->nd - 1; i >= 0; i--) {
        off += (flat % lp->shape[i]) * lp->strides[w][i];
        flat /= lp->shape[i];
    }
    return off;
}

static ptrdiff_t count_of(const layout_pair *lp)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < lp->nd; i++)
        n *= lp->shape[i];
    return n;
}

/* The planner's view of the pair: simplified with lead 0, pointers at its
 * element [0, ...]. */
static pygpu_pair planned(const layout_pair *lp, unsigned char *a0, unsigned char *a1, char **dst, char **src)
{
    pygpu_pair p;
    pygpu_pair_init(&p, lp->nd, lp->shape, lp->strides[0], lp->strides[1]);
    pygpu_pair_simplify(&p, 0);
    *dst = (char *)a0 + lp->base[0] + p.offset[0];
    *src = (char *)a1 + lp->base[1] + p.offset[1];
    return p;
}

static void fill_random(unsigned char *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (unsigned char)rng_next();
}

static void test_copies(ptrdiff_t max_launch)
{
    static const ptrdiff_t sizes[] = {1, 2, 4, 8, 16};
    unsigned char *dst = malloc(ARENA), *src = malloc(ARENA), *want = malloc(ARENA);
    pygpu_dev_max_launch = max_launch;
    for (int t = 0; t < 1500; t++) {
        ptrdiff_t itemsize = sizes[rng_range(0, 4)];
        layout_pair lp;
        if (!random_pair(&lp, itemsize, MAXND, rng_range(0, 3) == 0 ? rng_range(1, 7) : 0))
            continue;
        fill_random(dst, ARENA);
        fill_random(src, ARENA);
        memcpy(want, dst, ARENA);
        for (ptrdiff_t i = 0, n = count_of(&lp); i < n; i++)
            memcpy(want + offset_of(&lp, 0, i), src + offset_of(&lp, 1, i), (size_t)itemsize);
        char *d, *s;
        pygpu_pair p = planned(&lp, dst, src, &d, &s);
        CHECK(pygpu_dev_copy(&p, d, s, itemsize, NULL) == 0);
        CHECK(memcmp(dst, want, ARENA) == 0);
    }
    pygpu_dev_max_launch = 0x7fffffff;
    free(dst);
    free(src);
    free(want);
}

static void test_fills(ptrdiff_t max_launch)
{
    static const ptrdiff_t sizes[] = {1, 2, 4, 8, 16};
    unsigned char *dst = malloc(ARENA), *want = malloc(ARENA), value[16];
    pygpu_dev_max_launch = max_launch;
    for (int t = 0; t < 1000; t++) {
        ptrdiff_t itemsize = sizes[rng_range(0, 4)];
        layout_pair lp;
        if (!random_pair(&lp, itemsize, MAXND, 0))
            continue;
        lp.base[1] = lp.base[0];
        memcpy(lp.strides[1], lp.strides[0], sizeof lp.strides[0]);
        fill_random(dst, ARENA);
        fill_random(value, sizeof value);
        memcpy(want, dst, ARENA);
        for (ptrdiff_t i = 0, n = count_of(&lp); i < n; i++)
            memcpy(want + offset_of(&lp, 0, i), value, (size_t)itemsize);
        char *d, *s;
        pygpu_pair p = planned(&lp, dst, dst, &d, &s);
        CHECK(pygpu_dev_aligned(&p, 0, d, itemsize));
        CHECK(pygpu_dev_fill(&p, d, itemsize, value, NULL) == 0);
        CHECK(memcmp(dst, want, ARENA) == 0);
    }
    pygpu_dev_max_launch = 0x7fffffff;
    free(dst);
    free(want);
}

/* int16 -> int64 and float64 -> int8 through the cast walk, against the
 * same conversions element by element. */
static void test_casts(ptrdiff_t max_launch)
{
    unsigned char *dst = malloc(ARENA * 4), *src = malloc(ARENA * 4), *want = malloc(ARENA * 4);
    pygpu_dev_max_launch = max_launch;
    for (int t = 0; t < 600; t++) {
        int wide = t & 1, stype = wide ? PK_I16 : PK_F64, dtype = wide ? PK_I64 : PK_I8;
        ptrdiff_t ss = pk_itemsize(stype), ds = pk_itemsize(dtype);
        layout_pair lp;
        if (!random_pair(&lp, 8, 8, 0))
            continue;
        for (int i = 0; i < lp.nd; i++)     /* each side's strides for its own element */
            lp.strides[0][i] = lp.strides[0][i] / 8 * ds, lp.strides[1][i] = lp.strides[1][i] / 8 * ss;
        lp.base[0] = lp.base[0] / 8 * ds;
        lp.base[1] = lp.base[1] / 8 * ss;
        fill_random(dst, ARENA);
        for (ptrdiff_t i = 0; i < ARENA / 8; i++)   /* float64 values in the int8 range and beyond */
            ((double *)src)[i] = (double)rng_range(-300, 300) / 2;
        memcpy(want, dst, ARENA);
        for (ptrdiff_t i = 0, n = count_of(&lp); i < n; i++)
            pk_convert(dtype, want + offset_of(&lp, 0, i), stype, src + offset_of(&lp, 1, i));
        char *d, *s;
        pygpu_pair p = planned(&lp, dst, src, &d, &s);
        CHECK(pygpu_dev_cast(&p, d, dtype, s, stype, NULL) == 0);
        CHECK(memcmp(dst, want, ARENA) == 0);
    }
    pygpu_dev_max_launch = 0x7fffffff;
    free(dst);
    free(src);
    free(want);
}

int main(void)
{
    test_divmod();
    test_half();
    test_truncation();
    test_copies(0x7fffffff);
    test_copies(7);
    test_fills(0x7fffffff);
    test_fills(5);
    test_casts(0x7fffffff);
    test_casts(3);
    return check_done("test_devcopy");
}
