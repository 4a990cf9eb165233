/*
 * kernels.h -- what PyGPU's own copy kernels and their callers share: the
 * argument block of a launch, the element types, division by a fixed
 * divisor, and the element conversions of a cast.
 *
 * One header for three compilers: the CUDA kernels (nvcc), the same
 * kernels for HIP (hipcc, or hiprtc at run time, where no system header
 * may be included), and plain C (the host backend runs the same
 * conversions, and the launchers fill the argument block).  Everything
 * here is pure arithmetic on fixed-width integers and IEEE floats, with no
 * undefined behaviour, so that each compiler gives the same bits.
 *
 * The conversions give NumPy's results on x86-64, where NumPy's casts are
 * C casts compiled for SSE: a float converted to an integer goes through
 * the truncating conversion to int32 (or int64), whose answer for NaN and
 * out-of-range values is the lowest integer, and is then cut to the target
 * width.  Floats to uint32 are the one case where NumPy's answer depends
 * on where the element sits: its vectorised loop converts through int32
 * (x >= 2^31 shifted down first) and its scalar tail through int64; here
 * every element gets the vectorised loop's answer, which is what NumPy
 * gives for all but the last few elements of an array (float16 sources
 * have no vectorised loop in NumPy and get the int64 form).
 */
#ifndef PYGPU_KERNELS_H
#define PYGPU_KERNELS_H

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIPCC_RTC__)
#  define PK_DEVICE_CODE 1
#  define PK_FN static __device__ __forceinline__
#  define PK_LOOP_ROLLED _Pragma("unroll 1")
typedef signed char pk_i8;
typedef short pk_i16;
typedef int pk_i32;
typedef long long pk_i64;
typedef unsigned char pk_u8;
typedef unsigned short pk_u16;
typedef unsigned int pk_u32;
typedef unsigned long long pk_u64;
#else
#  include <stdint.h>
#  include <string.h>
#  define PK_FN static inline
#  define PK_LOOP_ROLLED
typedef int8_t pk_i8;
typedef int16_t pk_i16;
typedef int32_t pk_i32;
typedef int64_t pk_i64;
typedef uint8_t pk_u8;
typedef uint16_t pk_u16;
typedef uint32_t pk_u32;
typedef uint64_t pk_u64;
#endif

/* ---- what a launch carries -------------------------------------------------- */

/* The element types, numbered as the kernels' names number them. */
enum pygpu_ktype {
    PK_BOOL, PK_I8, PK_I16, PK_I32, PK_I64, PK_U8, PK_U16, PK_U32, PK_U64,
    PK_F16, PK_F32, PK_F64, PK_C64, PK_C128,
    PK_NTYPES
};

#define PK_MAXDIMS 8            /* axes one launch walks (the caller loops over more) */
#define PK_TILE 32              /* the transpose kernel's tile edge, in elements */
#define PK_TILE_ROWS 8          /* its blocks: PK_TILE x PK_TILE_ROWS threads */
#define PK_BLOCK 256            /* threads per block of the other kernels */
#define PK_UNROLL 4             /* elements each thread has in flight */

/* One launch: `n` elements (n < 2^31) of a layout pair walked in C order
 * of `shape`, byte strides on each side (any sign; 0 repeats an element).
 * `mul`/`shr` divide by shape[k] (pk_divmod_init).  `ta`/`tb` are the
 * transpose kernel's two tile axes (the destination's fastest, the
 * source's fastest); `value` is the fill kernel's element, `dtype` the
 * cast kernels' destination type.  The layout is
 * the same in C and in the kernels: fixed-width fields, largest first. */
typedef struct pygpu_kargs_s {
    pk_u64 dst, src;          /* device addresses of element [0, ..., 0] */
    pk_i64 n;
    pk_i64 shape[PK_MAXDIMS];
    pk_i64 dstride[PK_MAXDIMS], sstride[PK_MAXDIMS];
    pk_u32 mul[PK_MAXDIMS], shr[PK_MAXDIMS];
    pk_i32 nd;                  /* 1 .. PK_MAXDIMS */
    pk_i32 ta, tb;
    pk_i32 dtype;               /* the cast kernels' destination type */
    pk_u64 value[2];          /* the fill element's bytes */
} pygpu_kargs;

/* ---- division by a fixed divisor ---------------------------------------------- */

/* For 1 <= d < 2^31: *mul and *shr such that pk_div(n) == n / d for every
 * 0 <= n < 2^31 (a multiply-high, an add and a shift instead of a
 * division, which the GPUs do slowly). */
PK_FN void pk_divmod_init(pk_u32 d, pk_u32 *mul, pk_u32 *shr)
{
    pk_u32 l = 0;
    while (l < 32 && ((pk_u64)1 << l) < d)
        l++;
    *shr = l;
    *mul = (pk_u32)((((pk_u64)1 << 32) * (((pk_u64)1 << l) - d)) / d + 1);
}

PK_FN pk_u32 pk_mulhi(pk_u32 a, pk_u32 b)
{
#if defined(PK_DEVICE_CODE)
    return __umulhi(a, b);
#else
    return (pk_u32)(((pk_u64)a * b) >> 32);
#endif
}

PK_FN pk_u32 pk_div(pk_u32 n, pk_u32 mul, pk_u32 shr)
{
    return (pk_mulhi(n, mul) + n) >> shr;
}

/* Byte offsets on both sides of element `i` (< 2^31) of launch `a`, C
 * order of its shape; `os` may be NULL (a fill). */
PK_FN void pk_offsets(const pygpu_kargs *a, pk_u32 i, pk_i64 *od, pk_i64 *os)
{
    pk_i64 d = 0, s = 0;
    PK_LOOP_ROLLED
    for (int k = a->nd - 1; k > 0; k--) {
        pk_u32 q = pk_div(i, a->mul[k], a->shr[k]);
        pk_u32 r = i - q * (pk_u32)a->shape[k];
        d += (pk_i64)r * a->dstride[k];
        if (os)
            s += (pk_i64)r * a->sstride[k];
        i = q;
    }
    *od = d + (pk_i64)i * a->dstride[0];
    if (os)
        *os = s + (pk_i64)i * a->sstride[0];
}

/* ---- bits of floats ------------------------------------------------------------- */

PK_FN pk_u64 pk_bits64(double x)
{
#if defined(PK_DEVICE_CODE)
    return (pk_u64)__double_as_longlong(x);
#else
    pk_u64 u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

PK_FN float pk_float_of(pk_u32 u)
{
#if defined(PK_DEVICE_CODE)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* float16 bits to the float they stand for (exact). */
PK_FN float pk_half_to_float(pk_u16 h)
{
    pk_u32 sign = (pk_u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0x1f)              /* inf, NaN (the payload kept in the top bits) */
        return pk_float_of(sign | 0x7f800000u | (m << 13));
    if (e == 0) {               /* zero, subnormal: m * 2^-24 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return pk_float_of(sign | ((e + 112) << 23) | (m << 13));
}

/* The double `x` to float16 bits, rounded to nearest even (a float goes
 * through here exactly: one rounding, as from the float itself).  NaN keeps
 * the top of its payload, as NumPy's conversion does. */
PK_FN pk_u16 pk_double_to_half(double x)
{
    pk_u64 b = pk_bits64(x);
    pk_u16 sign = (pk_u16)((b >> 48) & 0x8000u);
    int e = (int)((b >> 52) & 0x7ff);
    pk_u64 m = b & 0xfffffffffffffull, keep, rest, half;
    int shift;
    if (e == 0x7ff) {
        pk_u16 r = (pk_u16)(0x7c00u + (m >> 42));
        return (pk_u16)(sign | (m && r == 0x7c00u ? 0x7c01u : r));
    }
    e -= 1023;
    if (e >= 16)
        return (pk_u16)(sign | 0x7c00u);
    if (e >= -14) {             /* a normal float16, or rounds up into the next binade */
        keep = m >> 42;
        rest = m & ((1ull << 42) - 1);
        half = 1ull << 41;
        keep += rest > half || (rest == half && (keep & 1));
        return (pk_u16)(sign + (((pk_u32)(e + 15) << 10) + keep));
    }
    /* Subnormal float16 (or zero): the 53-bit significand in units of 2^-24. */
    if (e < -25 || (b & 0x7fffffffffffffffull) == 0)
        return sign;            /* below half the smallest subnormal: zero */
    m |= 1ull << 52;
    shift = 28 - e;             /* 43 .. 53 */
    keep = m >> shift;
    rest = m & ((1ull << shift) - 1);
    half = 1ull << (shift - 1);
    keep += rest > half || (rest == half && (keep & 1));
    return (pk_u16)(sign | keep);
}

/* ---- floats to integers, as NumPy does them on x86-64 --------------------------- */

/* The truncating conversions of SSE: NaN and out of range give the lowest
 * integer. */
PK_FN pk_i32 pk_trunc32(double x)
{
    if (!(x > -2147483649.0 && x < 2147483648.0))
        return (pk_i32)0x80000000u;
    return (pk_i32)x;
}

PK_FN pk_i64 pk_trunc64(double x)
{
    if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
        return (pk_i64)0x8000000000000000ull;
    return (pk_i64)x;
}

/* uint32 through int32, as NumPy's vectorised loops give it. */
PK_FN pk_u32 pk_to_u32_vector(double x)
{
    if (x >= 2147483648.0)
        return (pk_u32)pk_trunc32(x - 2147483648.0) ^ 0x80000000u;
    return (pk_u32)pk_trunc32(x);
}

/* uint64: values from 2^63 shifted down first (NaN takes the other branch). */
PK_FN pk_u64 pk_to_u64(double x)
{
    if (x >= 9223372036854775808.0)
        return (pk_u64)pk_trunc64(x - 9223372036854775808.0) ^ 0x8000000000000000ull;
    return (pk_u64)pk_trunc64(x);
}

/* ---- one element converted -------------------------------------------------------- */

/* What an element reads as, without loss: every integer as int64 or
 * uint64, every float as a double, a complex as two doubles. */
typedef struct {
    int kind;                   /* 0 bool or signed, 1 unsigned, 2 float, 3 complex */
    pk_i64 i;
    pk_u64 u;
    double re, im;
} pk_value;

/* Reads and writes of one value: straight on the device (the planner
 * aligns what the kernels touch), through memcpy in C (host memory at any
 * alignment, and no aliasing questions). */
#if defined(PK_DEVICE_CODE)
#  define PK_RD(T, p) (*(const T *)(p))
#  define PK_WR(T, p, x) (*(T *)(p) = (T)(x))
#else
#  define PK_READER(T)                                  \
    PK_FN T pk_rd_##T(const void *p)                    \
    {                                                   \
        T x;                                            \
        memcpy(&x, p, sizeof x);                        \
        return x;                                       \
    }
PK_READER(pk_i8)
PK_READER(pk_i16)
PK_READER(pk_i32)
PK_READER(pk_i64)
PK_READER(pk_u8)
PK_READER(pk_u16)
PK_READER(pk_u32)
PK_READER(pk_u64)
PK_READER(float)
PK_READER(double)
#  undef PK_READER
#  define PK_RD(T, p) pk_rd_##T(p)
#  define PK_WR(T, p, x)                                \
    do {                                                \
        T pk_wr_ = (T)(x);                              \
        memcpy((p), &pk_wr_, sizeof pk_wr_);            \
    } while (0)
#endif
#define PK_LOAD(T) PK_RD(T, src)

PK_FN pk_value pk_load(int type, const void *src)
{
    pk_value v;
    v.kind = 0;
    v.i = 0;
    v.u = 0;
    v.re = 0;
    v.im = 0;
    switch (type) {
    case PK_BOOL: v.i = PK_LOAD(pk_u8) != 0; break;
    case PK_I8: v.i = PK_LOAD(pk_i8); break;
    case PK_I16: v.i = PK_LOAD(pk_i16); break;
    case PK_I32: v.i = PK_LOAD(pk_i32); break;
    case PK_I64: v.i = PK_LOAD(pk_i64); break;
    case PK_U8: v.kind = 1; v.u = PK_LOAD(pk_u8); break;
    case PK_U16: v.kind = 1; v.u = PK_LOAD(pk_u16); break;
    case PK_U32: v.kind = 1; v.u = PK_LOAD(pk_u32); break;
    case PK_U64: v.kind = 1; v.u = PK_LOAD(pk_u64); break;
    case PK_F16: v.kind = 2; v.re = pk_half_to_float(PK_LOAD(pk_u16)); break;
    case PK_F32: v.kind = 2; v.re = PK_LOAD(float); break;
    case PK_F64: v.kind = 2; v.re = PK_LOAD(double); break;
    case PK_C64: v.kind = 3; v.re = PK_LOAD(float); v.im = PK_RD(float, (const char *)src + 4); break;
    default: v.kind = 3; v.re = PK_LOAD(double); v.im = PK_RD(double, (const char *)src + 8); break;
    }
    return v;
}

/* The integer bits of `v` for an integer destination of `dst` type (cut
 * to its width by the caller); `stype` is the source's type. */
PK_FN pk_u64 pk_int_bits(pk_value v, int dst, int stype)
{
    if (v.kind == 0)
        return (pk_u64)v.i;
    if (v.kind == 1)
        return v.u;
    switch (dst) {
    case PK_I64: return (pk_u64)pk_trunc64(v.re);
    case PK_U64: return pk_to_u64(v.re);
    case PK_U32: return stype == PK_F16 ? (pk_u64)pk_trunc64(v.re) : pk_to_u32_vector(v.re);
    default: return (pk_u64)(pk_u32)pk_trunc32(v.re);
    }
}

/* The real part of `v` as a double or a float: one rounding from the
 * source value, as C's conversion from the source type rounds. */
PK_FN double pk_real64(pk_value v)
{
    return v.kind == 0 ? (double)v.i : v.kind == 1 ? (double)v.u : v.re;
}

PK_FN float pk_real32(pk_value v)
{
    return v.kind == 0 ? (float)v.i : v.kind == 1 ? (float)v.u : (float)v.re;
}

#define PK_STORE(T, x) PK_WR(T, dst, x)

/* Bytes per element of each type. */
PK_FN int pk_itemsize(int type)
{
    return type == PK_C128 ? 16 : type == PK_C64 || type == PK_I64 || type == PK_U64 || type == PK_F64 ? 8
         : type == PK_I32 || type == PK_U32 || type == PK_F32 ? 4 : type == PK_I16 || type == PK_U16 || type == PK_F16 ? 2
         : 1;
}

/* Store `v`, read from an element of type `stype`, into `dst` (type
 * `dtype`). */
PK_FN void pk_store(int dtype, void *dst, pk_value v, int stype)
{
    switch (dtype) {
    case PK_BOOL:
        PK_STORE(pk_u8, v.kind == 0 ? v.i != 0 : v.kind == 1 ? v.u != 0 : (v.re != 0 || v.im != 0));
        break;
    case PK_I8: case PK_U8: PK_STORE(pk_u8, pk_int_bits(v, dtype, stype) & 0xffu); break;
    case PK_I16: case PK_U16: PK_STORE(pk_u16, pk_int_bits(v, dtype, stype) & 0xffffu); break;
    case PK_I32: case PK_U32: PK_STORE(pk_u32, pk_int_bits(v, dtype, stype) & 0xffffffffu); break;
    case PK_I64: case PK_U64: PK_STORE(pk_u64, pk_int_bits(v, dtype, stype)); break;
    /* Integers reach float16 through float (exact below 2^24, and float16
     * ends at 65504), floats straight from their value. */
    case PK_F16: PK_STORE(pk_u16, pk_double_to_half(v.kind >= 2 ? v.re : (double)pk_real32(v))); break;
    case PK_F32: PK_STORE(float, pk_real32(v)); break;
    case PK_F64: PK_STORE(double, pk_real64(v)); break;
    case PK_C64:
        PK_STORE(float, pk_real32(v));
        PK_WR(float, (char *)dst + 4, (float)v.im);
        break;
    default:
        PK_STORE(double, pk_real64(v));
        PK_WR(double, (char *)dst + 8, v.im);
        break;
    }
}

#undef PK_LOAD
#undef PK_STORE

/* Convert the element at `src` (type `stype`) into `dst` (type `dtype`). */
PK_FN void pk_convert(int dtype, void *dst, int stype, const void *src)
{
    pk_store(dtype, dst, pk_load(stype, src), stype);
}

#endif /* PYGPU_KERNELS_H */
