/*
 * pygpu_dlpack.h -- the DLPack ABI as PyGPU declares it, for PyGPU itself
 * and for C extensions that exchange tensors with it.
 *
 * DLPack is a C struct layout for handing a strided tensor from one library
 * to another without copying it.  These are PyGPU's own declarations of
 * that layout, written from the specification (dmlc/dlpack, versions 0.x to
 * 1.3, and the Python array API standard's data interchange section): the
 * field order, the widths and the enum values below are what the ABI fixes;
 * names follow the specification so that readers can look them up there.
 *
 * An extension that includes the specification's own dlpack/dlpack.h first
 * gets its types instead of these (they are the same layout): include it
 * before this header, never after.
 *
 * Two managed forms travel in PyCapsules:
 *   - DLManagedTensor, the legacy form, in a capsule named "dltensor";
 *   - DLManagedTensorVersioned (DLPack 1.0 and later: a version and flags
 *     in front of the tensor), in a capsule named "dltensor_versioned".
 * A consumer that takes the tensor renames the capsule "used_dltensor" /
 * "used_dltensor_versioned" and from then on owes exactly one call of the
 * tensor's deleter; a capsule that is never consumed calls it from its own
 * destructor.
 *
 * DLPack 1.3 adds the C exchange API (DLPackExchangeAPI, at the end): a
 * table of functions that an array type publishes as the PyCapsule
 * `type(x).__dlpack_c_exchange_api__`, named "dlpack_exchange_api", so that
 * C code exchanges tensors without calling into Python.
 */
#ifndef PYGPU_DLPACK_ABI_H
#define PYGPU_DLPACK_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The version of the versioned struct PyGPU writes and reads.  A major
 * version other than 1 means another layout: only the version and the
 * deleter may be read from it (the deleter must still be called). */
#define PYGPU_DLPACK_MAJOR 1
#define PYGPU_DLPACK_MINOR 1
/* The version of the exchange API table PyGPU publishes and accepts
 * (major 1; any minor from 3 on keeps the layout below). */
#define PYGPU_DLPACK_EXCHANGE_MINOR 3

#define PYGPU_DLPACK_CAPSULE "dltensor"
#define PYGPU_DLPACK_CAPSULE_USED "used_dltensor"
#define PYGPU_DLPACK_VERSIONED_CAPSULE "dltensor_versioned"
#define PYGPU_DLPACK_VERSIONED_CAPSULE_USED "used_dltensor_versioned"
#define PYGPU_DLPACK_EXCHANGE_CAPSULE "dlpack_exchange_api"
#define PYGPU_DLPACK_EXCHANGE_ATTR "__dlpack_c_exchange_api__"

#ifndef DLPACK_DLPACK_H_        /* (the specification's header was not included first) */

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
    kDLTrn = 18,
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

/* ---- the C exchange API (DLPack 1.3) -------------------------------------
 *
 * Every function below but the allocator is called holding the GIL, and
 * reports failure by returning -1 with a Python exception set (0 on
 * success).  "_no_sync" means the producer orders no stream: a consumer
 * asks current_work_stream for the producer's stream of that device and
 * queues its work there (or orders its own stream after it). */

/* Make a new tensor of the prototype's dtype, ndim, shape and device (its
 * other fields are ignored) in the producer's memory: 0 with *out set, or
 * -1 after calling SetError(error_ctx, kind, message) exactly once (kind:
 * an exception class name such as "MemoryError").  May be called without
 * the GIL (the producer takes it if it needs it). */
typedef int (*DLPackManagedTensorAllocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                                            void (*SetError)(void *error_ctx, const char *kind,
                                                             const char *message));

/* An owning managed tensor for `py_object` (of the type the table came
 * from): the consumer calls its deleter once. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object, DLManagedTensorVersioned **out);

/* Fill *out (the consumer's storage) with a view of `py_object` that owns
 * nothing: shape and strides point into the producer's object, valid while
 * the consumer holds it and does not change it. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);

/* The producer's current work stream on a device (NULL for kDLCPU, and for
 * CUDA's legacy default stream), in *out_current_stream. */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id, void **out_current_stream);

/* A producer's array owning `tensor` (stolen: on failure too, the deleter
 * is called) in *out_py_object, a new reference. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor, void **out_py_object);

/* The part of the table that every version keeps: a consumer checks the
 * major version, and may walk prev_api (NULL: none) to an older table it
 * knows when the major version is newer than its own. */
typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

/* The table, static for the life of the process.  Every pointer is set,
 * except that dltensor_from_py_object_no_sync may be NULL. */
typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    DLPackManagedTensorAllocator managed_tensor_allocator;
    DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
    DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
    DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
    DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#endif /* DLPACK_DLPACK_H_ */

#endif /* PYGPU_DLPACK_ABI_H */
