/*
 * dlpack.h -- the DLPack ABI, as far as PyGPU uses it.
 *
 * DLPack is a C struct layout for handing a strided tensor from one library
 * to another without copying it.  This header is PyGPU's own declaration of
 * that layout, written from the specification (dmlc/dlpack, versions 0.x and
 * 1.x, and the Python array API standard's data interchange section): the
 * field order, the widths and the enum values below are what the ABI fixes;
 * names follow the specification so that readers can look them up there.
 *
 * Two managed forms travel in PyCapsules:
 *   - DLManagedTensor, the legacy form, in a capsule named "dltensor";
 *   - DLManagedTensorVersioned (DLPack 1.0 and later: a version and flags
 *     in front of the tensor), in a capsule named "dltensor_versioned".
 * A consumer that takes the tensor renames the capsule "used_dltensor" /
 * "used_dltensor_versioned" and from then on owes exactly one call of the
 * tensor's deleter; a capsule that is never consumed calls it from its own
 * destructor.
 */
#ifndef PYGPU_DLPACK_H
#define PYGPU_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#include "shape.h"

/* The version of the versioned struct this header declares.  A major
 * version other than 1 means another layout: only the version and the
 * deleter may be read from it (the deleter must still be called). */
#define PYGPU_DLPACK_MAJOR 1
#define PYGPU_DLPACK_MINOR 1

#define PYGPU_DLPACK_CAPSULE "dltensor"
#define PYGPU_DLPACK_CAPSULE_USED "used_dltensor"
#define PYGPU_DLPACK_VERSIONED_CAPSULE "dltensor_versioned"
#define PYGPU_DLPACK_VERSIONED_CAPSULE_USED "used_dltensor_versioned"

/* Where the memory is.  device_id is the runtime's device ordinal for GPU
 * types and 0 for kDLCPU. */
typedef enum {
    kDLCPU = 1,             /* ordinary host memory */
    kDLCUDA = 2,            /* CUDA device memory */
    kDLCUDAHost = 3,        /* page-locked host memory from the CUDA runtime */
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,           /* HIP device memory */
    kDLROCMHost = 11,       /* page-locked host memory from the HIP runtime */
    kDLExtDev = 12,
    kDLCUDAManaged = 13,    /* CUDA managed (unified) memory */
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;   /* an int-sized enum in the ABI */
    int32_t device_id;
} DLDevice;

/* The kind of number in an element; with `bits` and `lanes` it makes the
 * dtype (lanes > 1 would be a short vector per element). */
typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,         /* bits counts both parts: complex64 has 64 */
    kDLBool = 6,            /* one byte per element (bits = 8) */
    /* 7..: the 8-, 6- and 4-bit float formats of DLPack 1.1 */
} DLDataTypeCode;

typedef struct {
    uint8_t code;           /* a DLDataTypeCode */
    uint8_t bits;           /* bits per lane */
    uint16_t lanes;         /* 1 for plain scalars */
} DLDataType;

/* A strided view; it owns nothing.  Element [i0, i1, ...] is at
 * (char *)data + byte_offset + sum(i_k * strides[k]) * (bits * lanes / 8).
 * Strides count elements, not bytes; NULL strides mean C-contiguous (the
 * 1.2 specification asks producers for explicit strides: PyGPU always
 * writes them and accepts NULL from others). */
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;         /* ndim entries */
    int64_t *strides;       /* ndim entries, or NULL */
    uint64_t byte_offset;
} DLTensor;

/* The legacy managed form: the tensor, the producer's context, and the
 * deleter the consumer calls once when it no longer needs the memory. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY ((uint64_t)1 << 0)   /* the consumer must not write */
#define DLPACK_FLAG_BITMASK_IS_COPIED ((uint64_t)1 << 1)   /* the producer made a copy for the consumer */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED ((uint64_t)1 << 2)

/* The versioned managed form (DLPack 1.x).  The fields up to `flags` keep
 * their place in every future version, so that any consumer can read the
 * version and call the deleter. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* ---- checking a tensor that another library made (dlpack_check.c) ------ */

/* What a checked tensor is, in GPUArray's terms. */
typedef struct {
    int nd;
    ptrdiff_t shape[PYGPU_MAXDIMS];
    ptrdiff_t strides[PYGPU_MAXDIMS];   /* bytes */
    char kind;                          /* 'b', 'i', 'u', 'f' or 'c' */
    int itemsize;
    char *data;                         /* data + byte_offset: element [0, ..., 0] */
} pygpu_dl_layout;

/* Check the dimensions, dtype, shape, strides and data pointer of `t` (not
 * its device: that is the backend's business) and fill *out.  Pure C, no
 * Python: 0, or -1 with a sentence saying what is wrong in why[0..n). */
int pygpu_dl_check(const DLTensor *t, pygpu_dl_layout *out, char *why, size_t n);

#endif /* PYGPU_DLPACK_H */
