/*
 * dlpack_check.c -- the checks a DLPack tensor from another library passes
 * before PyGPU views it, in pure C (no Python), so that they can be tested
 * and fuzzed on their own (tests/c/).  dlpack_import.c turns a refusal into a
 * BufferError carrying the sentence written here.
 *
 * A producer can write anything in the struct: a dimension count out of
 * range, a null shape, negative or huge sizes, strides that reach past the
 * address space, dtypes GPUArray has no equivalent for.  Nothing here
 * trusts a field before checking it, and no arithmetic overflows.
 */
#include "dlpack_check.h"
#include "shape.h"

#include <stdarg.h>
#include <stdio.h>

static int refuse(char *why, size_t n, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    if (n)
        vsnprintf(why, n, fmt, va);
    va_end(va);
    return -1;
}

/* GPUArray's kind and itemsize for a DLPack dtype; 0, or -1 with why. */
static int check_dtype(DLDataType t, char *kind, int *itemsize, char *why, size_t n)
{
    static const char kinds[] = {[kDLInt] = 'i', [kDLUInt] = 'u', [kDLFloat] = 'f', [kDLComplex] = 'c',
                                 [kDLBool] = 'b'};
    static const char *const names[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex", "bool"};
    char k = t.code < sizeof kinds ? kinds[t.code] : 0;
    int size = t.bits / 8, ok = 0;
    if (t.lanes != 1)
        return refuse(why, n, "DLPack dtype with %u lanes (short vectors as elements) is not supported: "
                      "GPUArray elements are scalars", (unsigned)t.lanes);
    if (k && t.bits % 8 == 0) {
        switch (k) {
        case 'b': ok = size == 1; break;
        case 'i': case 'u': ok = size == 1 || size == 2 || size == 4 || size == 8; break;
        case 'f': ok = size == 2 || size == 4 || size == 8; break;
        case 'c': ok = size == 8 || size == 16; break;
        default: break;
        }
    }
    if (!ok)
        return refuse(why, n, "DLPack dtype %s%u (type code %u) has no GPUArray dtype: GPUArray holds bool, "
                      "int8-64, uint8-64, float16/32/64 and complex64/128",
                      t.code < sizeof names / sizeof names[0] ? names[t.code] : "code-", (unsigned)t.bits,
                      (unsigned)t.code);
    *kind = k;
    *itemsize = size;
    return 0;
}

int pygpu_dl_check(const DLTensor *t, pygpu_dl_layout *out, char *why, size_t n)
{
    ptrdiff_t size, lo, hi, itemsize;
    if (t->ndim < 0 || t->ndim > PYGPU_MAXDIMS)
        return refuse(why, n, "DLPack tensor with %d dimensions: a GPUArray has 0 to %d", (int)t->ndim,
                      PYGPU_MAXDIMS);
    if (t->ndim > 0 && !t->shape)
        return refuse(why, n, "DLPack tensor with %d dimensions but no shape", (int)t->ndim);
    if (check_dtype(t->dtype, &out->kind, &out->itemsize, why, n) < 0)
        return -1;
    itemsize = out->itemsize;
    out->nd = t->ndim;
    for (int i = 0; i < out->nd; i++) {
        if (t->shape[i] < 0)
            return refuse(why, n, "DLPack shape has a negative dimension (%lld on axis %d)",
                          (long long)t->shape[i], i);
        out->shape[i] = (ptrdiff_t)t->shape[i];
        if (t->strides) {
            int64_t s = t->strides[i];
            if (s > PTRDIFF_MAX / itemsize || s < -(PTRDIFF_MAX / itemsize))
                return refuse(why, n, "DLPack stride %lld on axis %d is out of range", (long long)s, i);
            out->strides[i] = (ptrdiff_t)s * itemsize;
        }
    }
    if (!t->strides && pygpu_shape_strides(out->nd, out->shape, itemsize, 0, out->strides) < 0)
        return refuse(why, n, "DLPack shape: the byte count overflows");
    if (pygpu_shape_size(out->nd, out->shape, &size) < 0)
        return refuse(why, n, "DLPack tensor: the shape's size overflows");
    if (pygpu_shape_extent_checked(out->nd, out->shape, out->strides, itemsize, &lo, &hi) < 0)
        return refuse(why, n, "DLPack tensor: the strides reach past the address space");
    if (size > 0 && !t->data)
        return refuse(why, n, "DLPack tensor with a null data pointer");
    if (t->byte_offset > (uint64_t)PTRDIFF_MAX)
        return refuse(why, n, "DLPack byte_offset is out of range");
    out->data = (char *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    return 0;
}
