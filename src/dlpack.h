/*
 * dlpack.h -- what every DLPack file shares: the ABI (declared in the
 * public include/pygpu/pygpu_dlpack.h, through which C extensions exchange
 * tensors too), this backend's own device type, and small inline helpers.
 * Each DLPack file's functions are in its own header (dlpack_check.h,
 * dlpack_shared.h, dlpack_import.h, dlpack_export.h, dlpack_exchange.h).
 */
#ifndef PYGPU_DLPACK_H
#define PYGPU_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#include "pygpu/pygpu_dlpack.h"
#include "shape.h"

/* This backend's DLPack device type. */
#if defined(PYGPU_BACKEND_CUDA)
#  define PYGPU_DL_OWN_TYPE kDLCUDA
#elif defined(PYGPU_BACKEND_HIP)
#  define PYGPU_DL_OWN_TYPE kDLROCM
#else
#  define PYGPU_DL_OWN_TYPE kDLCPU
#  define PYGPU_DL_HOST_BACKEND 1
#endif
#ifndef PYGPU_DL_HOST_BACKEND
#  define PYGPU_DL_HOST_BACKEND 0
#endif

/* Whether the interpreter is finalizing (a deleter may run then). */
#if PY_VERSION_HEX >= 0x030D0000
#  define PYGPU_FINALIZING() Py_IsFinalizing()
#else
#  define PYGPU_FINALIZING() _Py_IsFinalizing()
#endif

/* 1 if device type `t` is host memory. */
static inline int pygpu_dl_is_host_type(long t) { return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost; }

#endif /* PYGPU_DLPACK_H */
