/*
 * test_dlpack_check.c -- unit tests of src/dlpack_check.c: the checks a
 * DLPack tensor from another library passes before PyGPU views it.  Each
 * refusal says why; accepted tensors have layouts whose byte span fits; and
 * a fuzz loop writes random garbage into every field (shape and strides in
 * buffers of exactly ndim entries, so that valgrind or ASan sees any read
 * past them) without a crash or an accepted impossible layout.
 */
#include "check.h"
#include "dlpack_check.h"

#include <stdlib.h>
#include <string.h>

static int64_t shape_buf[PYGPU_MAXDIMS], strides_buf[PYGPU_MAXDIMS];
static char data[4096];

static DLTensor tensor(int ndim, const int64_t *shape, const int64_t *strides, uint8_t code, uint8_t bits)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype.code = code;
    t.dtype.bits = bits;
    t.dtype.lanes = 1;
    for (int i = 0; i < ndim && i < PYGPU_MAXDIMS; i++) {
        shape_buf[i] = shape ? shape[i] : 0;
        strides_buf[i] = strides ? strides[i] : 0;
    }
    t.shape = shape ? shape_buf : NULL;
    t.strides = strides ? strides_buf : NULL;
    return t;
}

/* pygpu_dl_check refuses t with a message containing `why`. */
static int refuses(const DLTensor *t, const char *why)
{
    pygpu_dl_layout l;
    char msg[256] = "";
    int r = pygpu_dl_check(t, &l, msg, sizeof msg);
    if (r == 0 || !strstr(msg, why)) {
        fprintf(stderr, "  expected a refusal saying '%s', got %d '%s'\n", why, r, msg);
        return 0;
    }
    return 1;
}

static void test_refusals(void)
{
    int64_t s2[] = {3, 4}, st2[] = {4, 1};
    DLTensor t = tensor(2, s2, st2, kDLFloat, 32);
    t.dtype.lanes = 4;
    CHECK(refuses(&t, "4 lanes"));
    t = tensor(2, s2, st2, kDLBfloat, 16);
    CHECK(refuses(&t, "bfloat16"));
    t = tensor(2, s2, st2, kDLFloat, 24);
    CHECK(refuses(&t, "float24"));
    t = tensor(2, s2, st2, kDLOpaqueHandle, 64);
    CHECK(refuses(&t, "opaque handle"));
    t = tensor(2, s2, st2, 200, 8);
    CHECK(refuses(&t, "type code 200"));
    t = tensor(2, s2, st2, kDLBool, 16);
    CHECK(refuses(&t, "bool16"));
    t = tensor(2, s2, st2, kDLComplex, 32);
    CHECK(refuses(&t, "complex32"));
    t = tensor(40, NULL, NULL, kDLFloat, 32);
    CHECK(refuses(&t, "40 dimensions"));
    t = tensor(-1, NULL, NULL, kDLFloat, 32);
    CHECK(refuses(&t, "-1 dimensions"));
    t = tensor(2, NULL, NULL, kDLFloat, 32);
    CHECK(refuses(&t, "no shape"));
    int64_t neg[] = {-2, 4};
    t = tensor(2, neg, NULL, kDLFloat, 32);
    CHECK(refuses(&t, "negative dimension (-2 on axis 0)"));
    int64_t huge_stride[] = {(int64_t)1 << 62, 1};
    t = tensor(2, s2, huge_stride, kDLFloat, 32);
    CHECK(refuses(&t, "stride 4611686018427387904 on axis 0 is out of range"));
    int64_t min_stride[] = {INT64_MIN, 1};
    t = tensor(2, s2, min_stride, kDLInt, 8);
    CHECK(refuses(&t, "out of range"));
    int64_t big[] = {(int64_t)1 << 40, (int64_t)1 << 40};
    t = tensor(2, big, NULL, kDLFloat, 32);
    CHECK(refuses(&t, "byte count overflows"));
    int64_t bigz[] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
    int64_t ones[] = {1, 1, 1};
    t = tensor(3, bigz, ones, kDLFloat, 32);
    CHECK(refuses(&t, "size overflows"));
    int64_t long1[] = {(int64_t)1 << 62}, one[] = {1};
    t = tensor(1, long1, one, kDLInt, 32);          /* (4 bytes apart: 2**64 bytes) */
    CHECK(refuses(&t, "address space"));
    int64_t wide[] = {3, 3}, apart[] = {(int64_t)1 << 59, -((int64_t)1 << 59)};
    t = tensor(2, wide, apart, kDLFloat, 64);
    CHECK(refuses(&t, "address space"));
    t = tensor(2, s2, st2, kDLFloat, 32);
    t.data = NULL;
    CHECK(refuses(&t, "null data pointer"));
    t = tensor(2, s2, st2, kDLFloat, 32);
    t.byte_offset = ((uint64_t)1 << 63) + 5;
    CHECK(refuses(&t, "byte_offset is out of range"));
}

static void test_accepted(void)
{
    pygpu_dl_layout l;
    char msg[256];
    int64_t s2[] = {3, 4}, st2[] = {-4, 1};
    DLTensor t = tensor(2, s2, st2, kDLFloat, 32);
    t.byte_offset = 64;
    CHECK(pygpu_dl_check(&t, &l, msg, sizeof msg) == 0);
    CHECK(l.nd == 2 && l.kind == 'f' && l.itemsize == 4 && l.strides[0] == -16 && l.strides[1] == 4);
    CHECK(l.data == data + 64);
    t = tensor(2, s2, NULL, kDLComplex, 128);       /* no strides: C order */
    CHECK(pygpu_dl_check(&t, &l, msg, sizeof msg) == 0);
    CHECK(l.kind == 'c' && l.itemsize == 16 && l.strides[0] == 64 && l.strides[1] == 16);
    t = tensor(0, NULL, NULL, kDLBool, 8);          /* 0-d, no shape needed */
    CHECK(pygpu_dl_check(&t, &l, msg, sizeof msg) == 0 && l.nd == 0 && l.kind == 'b');
    int64_t empty[] = {0, 5};
    t = tensor(2, empty, NULL, kDLUInt, 16);
    t.data = NULL;                                  /* empty: no data needed */
    CHECK(pygpu_dl_check(&t, &l, msg, sizeof msg) == 0);
    int64_t bcast[] = {1000000, 3}, zero[] = {0, 1};
    t = tensor(2, bcast, zero, kDLInt, 64);         /* broadcast: a zero stride */
    CHECK(pygpu_dl_check(&t, &l, msg, sizeof msg) == 0 && l.strides[0] == 0);
    static const struct { uint8_t code, bits; char kind; } types[] = {
        {kDLInt, 8, 'i'}, {kDLInt, 64, 'i'}, {kDLUInt, 32, 'u'}, {kDLFloat, 16, 'f'}, {kDLFloat, 64, 'f'},
        {kDLComplex, 64, 'c'}, {kDLBool, 8, 'b'},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        t = tensor(2, s2, NULL, types[i].code, types[i].bits);
        CHECK(pygpu_dl_check(&t, &l, msg, sizeof msg) == 0 && l.kind == types[i].kind &&
              l.itemsize == types[i].bits / 8);
    }
    CHECK(pygpu_dl_check(&t, &l, NULL, 0) == 0);    /* no room for a message: fine */
    t.dtype.lanes = 2;
    CHECK(pygpu_dl_check(&t, &l, NULL, 0) == -1);
}

static int64_t random_extent(void)
{
    static const int64_t special[] = {0, 1, 2, 3, -1, -7, INT64_MAX, INT64_MIN, (int64_t)1 << 31,
                                      (int64_t)1 << 40, (int64_t)1 << 62, -((int64_t)1 << 62)};
    if (rng_range(0, 3) == 0)
        return special[rng_range(0, sizeof special / sizeof special[0] - 1)];
    return rng_range(-3, 6);
}

/* Random garbage in every field: no crash, no read past the arrays, and
 * whatever is accepted has a byte span that fits in ptrdiff_t. */
static void test_fuzz(void)
{
    for (int iter = 0; iter < 50000; iter++) {
        DLTensor t;
        memset(&t, 0, sizeof t);
        int nd = (int)rng_range(-2, PYGPU_MAXDIMS + 2);
        int n = nd < 0 ? 0 : nd > PYGPU_MAXDIMS ? 0 : nd;   /* (out-of-range ndim: never read) */
        int64_t *shape = n ? malloc((size_t)n * sizeof *shape) : NULL;
        int64_t *strides = n && rng_range(0, 2) ? malloc((size_t)n * sizeof *strides) : NULL;
        for (int i = 0; i < n; i++) {
            shape[i] = rng_range(0, 4) ? rng_range(0, 3) : random_extent();
            if (strides)
                strides[i] = random_extent();
        }
        t.ndim = nd;
        t.shape = n || rng_range(0, 1) ? shape : NULL;
        t.strides = strides;
        t.data = rng_range(0, 9) ? data : NULL;
        t.byte_offset = rng_range(0, 9) ? (uint64_t)rng_range(0, 64) : rng_next();
        t.dtype.code = (uint8_t)rng_range(0, 9);
        t.dtype.bits = (uint8_t)(rng_range(0, 4) ? (uint64_t)8 << rng_range(0, 4) : rng_next());
        t.dtype.lanes = (uint16_t)(rng_range(0, 9) ? 1 : rng_next());
        pygpu_dl_layout l;
        char msg[64];
        if (pygpu_dl_check(&t, &l, msg, sizeof msg) == 0) {
            ptrdiff_t lo, hi;
            CHECK(pygpu_shape_extent_checked(l.nd, l.shape, l.strides, l.itemsize, &lo, &hi) == 0);
            CHECK(l.itemsize >= 1 && l.itemsize <= 16 && l.nd == nd);
        } else {
            CHECK(msg[0] != '\0');
        }
        free(shape);
        free(strides);
    }
}

int main(void)
{
    test_refusals();
    test_accepted();
    test_fuzz();
    return check_done("test_dlpack_check");
}
