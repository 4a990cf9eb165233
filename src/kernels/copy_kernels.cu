/*
 * copy_kernels.cu -- PyGPU's own device kernels: layout copies, casts and
 * fills of device memory, for CUDA (nvcc at build time) and HIP (hipcc, or
 * hiprtc at run time).  No header beyond kernels.h: hiprtc has none.
 *
 * Each kernel walks one launch's layout pair (pygpu_kargs, at most 2^31 - 1
 * elements: the launchers cut bigger copies into launches):
 *   pygpu_copy<E>        any strided layout to any other, E-byte elements
 *   pygpu_transpose<E>   the same through tiles in shared memory, for pairs
 *                        whose fastest axes differ (reads and writes both
 *                        coalesced)
 *   pygpu_fill<E>        one value into a strided layout
 *   pygpu_cast<S>        a strided copy converting type S (a number of
 *                        enum pygpu_ktype) into type a.dtype, as NumPy
 *                        converts
 * Element offsets are found per element from its index (a division by each
 * axis's length, by multiply-high); each thread keeps PK_UNROLL elements in
 * flight, loads before stores.  Layouts that overlap are the callers'
 * business (they buffer, as NumPy does).
 */
#include "kernels.h"

template <int E> struct pk_elem;
template <> struct pk_elem<1> { typedef pk_u8 t; };
template <> struct pk_elem<2> { typedef pk_u16 t; };
template <> struct pk_elem<4> { typedef pk_u32 t; };
template <> struct pk_elem<8> { typedef pk_u64 t; };
struct alignas(16) pk_b16 { pk_u64 lo, hi; };
template <> struct pk_elem<16> { typedef pk_b16 t; };

/* The grid-stride walk: each thread loads its PK_UNROLL elements of a
 * round (element i), then stores them (element u of the round). */
#define PK_WALK(n, BODY_LOAD, BODY_STORE)                                                   \
    for (pk_u32 base = blockIdx.x * (PK_BLOCK * PK_UNROLL) + threadIdx.x; base < (n);      \
         base += gridDim.x * (PK_BLOCK * PK_UNROLL)) {                                       \
        _Pragma("unroll") for (int u = 0; u < PK_UNROLL; u++) {                              \
            pk_u32 i = base + u * PK_BLOCK;                                                  \
            if (i < (n)) { BODY_LOAD }                                                       \
        }                                                                                    \
        _Pragma("unroll") for (int u = 0; u < PK_UNROLL; u++) {                              \
            pk_u32 i = base + u * PK_BLOCK;                                                  \
            if (i < (n)) { BODY_STORE }                                                      \
        }                                                                                    \
    }

template <int E>
static __device__ __forceinline__ void pk_copy_body(const pygpu_kargs &a)
{
    typedef typename pk_elem<E>::t T;
    char *dst = (char *)a.dst;
    const char *src = (const char *)a.src;
    pk_u32 n = (pk_u32)a.n;
    T v[PK_UNROLL];
    pk_i64 od[PK_UNROLL];
    PK_WALK(n,
            pk_i64 os; pk_offsets(&a, i, &od[u], &os); v[u] = *(const T *)(src + os);,
            *(T *)(dst + od[u]) = v[u];)
}

template <int E>
static __device__ __forceinline__ void pk_fill_body(const pygpu_kargs &a)
{
    typedef typename pk_elem<E>::t T;
    char *dst = (char *)a.dst;
    pk_u32 n = (pk_u32)a.n;
    const T value = *(const T *)a.value;
    pk_i64 od[PK_UNROLL];
    PK_WALK(n,
            pk_offsets(&a, i, &od[u], 0);,
            *(T *)(dst + od[u]) = value;)
}

/* Casts from type S: the destination's type (a.dtype) is the same for
 * every thread, and chosen once per PK_UNROLL elements. */
#define PK_STORES(D)                                                    \
    case D:                                                             \
        _Pragma("unroll") for (int u = 0; u < PK_UNROLL; u++)           \
            if (base + u * PK_BLOCK < n)                                \
                pk_store(D, dst + od[u], v[u], S);                      \
        break;

template <int S>
static __device__ __forceinline__ void pk_cast_body(const pygpu_kargs &a)
{
    char *dst = (char *)a.dst;
    const char *src = (const char *)a.src;
    pk_u32 n = (pk_u32)a.n;
    pk_value v[PK_UNROLL];
    pk_i64 od[PK_UNROLL];
    for (pk_u32 base = blockIdx.x * (PK_BLOCK * PK_UNROLL) + threadIdx.x; base < n;
         base += gridDim.x * (PK_BLOCK * PK_UNROLL)) {
#pragma unroll
        for (int u = 0; u < PK_UNROLL; u++) {
            pk_u32 i = base + u * PK_BLOCK;
            if (i < n) {
                pk_i64 os;
                pk_offsets(&a, i, &od[u], &os);
                v[u] = pk_load(S, src + os);
            }
        }
        switch (a.dtype) {
            PK_STORES(PK_BOOL) PK_STORES(PK_I8) PK_STORES(PK_I16) PK_STORES(PK_I32) PK_STORES(PK_I64)
            PK_STORES(PK_U8) PK_STORES(PK_U16) PK_STORES(PK_U32) PK_STORES(PK_U64) PK_STORES(PK_F16)
            PK_STORES(PK_F32) PK_STORES(PK_F64) PK_STORES(PK_C64) PK_STORES(PK_C128)
        }
    }
}

/* Tiles of PK_TILE x PK_TILE elements of the plane of axes ta (the
 * destination's fastest) and tb (the source's fastest), one at a time per
 * block; a.n counts the tiles of all the planes (the other axes). */
template <int E>                /* (not static: nvcc names the shared tile of an internal
                                   function with a random tag, and tools/gen-ptx.py's text
                                   must come out the same at every run) */
__device__ __forceinline__ void pk_transpose_body(const pygpu_kargs &a)
{
    typedef typename pk_elem<E>::t T;
    __shared__ T tile[PK_TILE][PK_TILE + 1];
    char *dst = (char *)a.dst;
    const char *src = (const char *)a.src;
    const int ta = a.ta, tb = a.tb;
    const pk_i64 na = a.shape[ta], nb = a.shape[tb];
    const pk_u32 tiles_a = (pk_u32)((na + PK_TILE - 1) / PK_TILE), tiles_b = (pk_u32)((nb + PK_TILE - 1) / PK_TILE);
    const pk_i64 das = a.dstride[ta], dbs = a.dstride[tb], sas = a.sstride[ta], sbs = a.sstride[tb];
    for (pk_u32 t = blockIdx.x; t < (pk_u32)a.n; t += gridDim.x) {
        pk_u32 ia = t % tiles_a, rest = t / tiles_a, ib = rest % tiles_b, plane = rest / tiles_b;
        pk_i64 d = 0, s = 0;
        for (int k = a.nd - 1; k >= 0; k--) {
            if (k == ta || k == tb)
                continue;
            pk_u32 len = (pk_u32)a.shape[k], q = plane / len, r = plane - q * len;
            d += (pk_i64)r * a.dstride[k];
            s += (pk_i64)r * a.sstride[k];
            plane = q;
        }
        const pk_i64 a0 = (pk_i64)ia * PK_TILE, b0 = (pk_i64)ib * PK_TILE;
#pragma unroll
        for (int r = 0; r < PK_TILE; r += PK_TILE_ROWS) {
            pk_i64 ai = a0 + threadIdx.y + r, bi = b0 + threadIdx.x;
            if (ai < na && bi < nb)
                tile[threadIdx.y + r][threadIdx.x] = *(const T *)(src + s + ai * sas + bi * sbs);
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < PK_TILE; r += PK_TILE_ROWS) {
            pk_i64 bi = b0 + threadIdx.y + r, ai = a0 + threadIdx.x;
            if (ai < na && bi < nb)
                *(T *)(dst + d + ai * das + bi * dbs) = tile[threadIdx.x][threadIdx.y + r];
        }
        __syncthreads();
    }
}

#define PK_SIZED(E)                                                                                  \
    extern "C" __global__ void __launch_bounds__(PK_BLOCK) pygpu_copy##E(pygpu_kargs a)              \
    {                                                                                                \
        pk_copy_body<E>(a);                                                                          \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(PK_BLOCK) pygpu_fill##E(pygpu_kargs a)              \
    {                                                                                                \
        pk_fill_body<E>(a);                                                                          \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(PK_TILE * PK_TILE_ROWS) pygpu_transpose##E(pygpu_kargs a) \
    {                                                                                                \
        pk_transpose_body<E>(a);                                                                     \
    }

PK_SIZED(1)
PK_SIZED(2)
PK_SIZED(4)
PK_SIZED(8)
PK_SIZED(16)

#define PK_CAST(S)                                                                                   \
    extern "C" __global__ void __launch_bounds__(PK_BLOCK) pygpu_cast##S(pygpu_kargs a)              \
    {                                                                                                \
        pk_cast_body<S>(a);                                                                          \
    }

PK_CAST(0)
PK_CAST(1)
PK_CAST(2)
PK_CAST(3)
PK_CAST(4)
PK_CAST(5)
PK_CAST(6)
PK_CAST(7)
PK_CAST(8)
PK_CAST(9)
PK_CAST(10)
PK_CAST(11)
PK_CAST(12)
PK_CAST(13)
