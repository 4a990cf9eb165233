/*
 * pygpu.h -- what every C file of the object layer shares: the module
 * state, the object layouts, and small inline helpers.  Each file's
 * functions are declared in its own header (array.h for array.c, ...),
 * which the files that call it include.
 *
 * Ownership is written in each function's comment: "new reference" means
 * the caller owns the result; "borrowed" means it does not.
 */
#ifndef PYGPU_INTERNAL_H
#define PYGPU_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL pygpu_ARRAY_API
#ifndef PYGPU_IMPORT_ARRAY
#  define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "backend/rt.h"
#include "shape.h"
#include "tuning.h"

/* Small blocks freed on the legacy default stream, kept for the next
 * allocation of the same size on that stream (stream order makes the reuse
 * safe, as in the runtime's own pool, which costs more a call: this makes
 * empty(1000) cheap).  Bounded (PYGPU_CACHE_SLOTS blocks of at most
 * PYGPU_CACHE_MAX_BLOCK, tuning.h); trim_memory_pool() empties it. */
typedef struct {
    int n;
    struct { void *ptr; size_t size; int device; } block[PYGPU_CACHE_SLOTS];
} pygpu_block_cache;

/* Device memory whose stream-ordered free a graph capture put off (the
 * capture records its stream: a free queued there would be a free node,
 * which must free the graph's own allocation), freed once it has ended
 * (memory.c). */
typedef struct {
    int n, cap;
    struct { void *ptr; int device; unsigned resets; pygpu_stream_t stream; PyObject *stream_ref; } *item;
} pygpu_put_off;

#define PYGPU_XCACHE_SLOTS 8
typedef struct { PyTypeObject *type; unsigned int tag; const void *api; } pygpu_xcache_entry;

/* The module's interned names and constant values (names.c): every field
 * a strong reference, made at init. */
typedef struct {
    PyObject *shape, *typestr, *data, *version, *strides, *descr, *stream, *mask;  /* the CAI's keys */
    PyObject *zero, *three;                 /* the ints 0 and 3 */
    PyObject *typestrs, *descr_items;       /* by type_num: '<f4', ('', '<f4'); None if unsupported */
    PyObject *cai_attr, *dlpack_attr, *dlpack_device_attr;
    PyObject *exchange_attr, *cuda_stream_attr;     /* '__dlpack_c_exchange_api__', '__cuda_stream__' */
    PyObject *kw_s, *kw_sv, *kw_svc, *kw_svdc;      /* kwnames for __dlpack__: stream, max_version, ... */
    PyObject *max_version, *cpu_device;     /* (1, 1) and (kDLCPU, 0) */
    PyObject *old_producers;                /* set of types whose __dlpack__ takes only stream= */
    PyObject *cai_template;                 /* a dict of the CAI keys, copied for each export */
} pygpu_names;

/* Per-module state: one per imported backend module (PEP 489). */
typedef struct {
    PyTypeObject *Device, *Stream, *Event, *Memory, *HostMemory, *ErrorObj;
    PyTypeObject *Array, *Flags;
    PyObject *GPUError;         /* pygpu._errors.GPUError, shared by the backends */
    PyObject *GPUMemoryError;
    PyObject *BackendWarning;   /* pygpu._errors.BackendWarning */
    PyObject *ComplexWarning, *AxisError;   /* numpy.exceptions' */
    PyObject *stream_var;       /* ContextVar: (stream, outer) chain of `with stream:` */
    PyObject *device_var;       /* ContextVar: (previous device, outer) chain of `with Device:` */
    PyObject *devices;          /* tuple of Device objects, made on first use, or NULL */
    PyObject *null_stream;      /* Stream.null: the legacy default stream */
    PyObject *per_thread_stream;
    int use_pool;               /* allocate from the stream-ordered pool */
    int use_cache;              /* keep a pygpu_block_cache in front of it */
    pygpu_block_cache cache;
    pygpu_put_off put_off;      /* frees a capture put off (memory.c) */
    pygpu_names names;          /* interned names and constants (names.c) */
    /* The DLPack exchange API of the types last imported from (dlpack_exchange.c):
     * a borrowed type pointer made safe by its version tag (a type's tag
     * changes when its attributes do, and a new type never gets an old
     * tag); api NULL: the type has none that PyGPU can use. */
    pygpu_xcache_entry xcache[PYGPU_XCACHE_SLOTS];
} pygpu_state;

/* The state of the module that defined `obj`'s type (state.h's
 * pygpu_state_of_type); borrowed, or NULL with TypeError. */
#define pygpu_state_of(obj) pygpu_state_of_type(Py_TYPE(obj))
/* The state of module `m` (a module function's first argument); borrowed. */
static inline pygpu_state *pygpu_module_state(PyObject *m) { return (pygpu_state *)PyModule_GetState(m); }

typedef struct {
    PyObject_HEAD
    int id;
    int props_loaded;
    pygpu_device_props props;
} PyGPUDevice;

typedef struct {
    PyObject_HEAD
    pygpu_stream_t handle;
    int device;                 /* -1 for the special streams: the current device's */
    unsigned flags;
    int owned;                  /* destroy the handle with the object */
    unsigned resets;            /* its device's resets when made (fork.h: made before one, it died with it) */
} PyGPUStream;

typedef struct {
    PyObject_HEAD
    pygpu_event_t handle;
    int device;
    unsigned flags;
    int recorded;               /* record() was called at least once */
    unsigned resets;            /* its device's resets when made (fork.h) */
} PyGPUEvent;

typedef struct {                /* DeviceAllocation: owner of one device allocation */
    PyObject_HEAD
    void *ptr;
    size_t size;
    int device;
    int pooled;                 /* from the stream-ordered pool: free on `stream` */
    int ipc;                    /* mem_alloc(ipc=True): other processes can map it (src/ipc.c) */
    int cacheable;              /* may go back to the module's block cache */
    int freed;                  /* free() was called (the memory may wait for `views`) */
    Py_ssize_t views;           /* GPUArrays using it: they hold the memory past free() */
    size_t capacity;            /* bytes really allocated (>= size) */
    pygpu_stream_t stream;      /* the stream the allocation is ordered on */
    PyObject *stream_ref;       /* the Stream object owning it, or NULL */
    PyObject *weakreflist;
    unsigned resets;            /* its device's resets when allocated (fork.h) */
} PyGPUMemory;

typedef struct {                /* HostAllocation: page-locked host memory */
    PyObject_HEAD
    void *ptr;
    size_t size;
    Py_ssize_t exports;         /* live buffer views; free() refuses while > 0 */
    int pooled;                 /* from the pinned pool: given back there */
} PyGPUHostMemory;

typedef struct {                /* cudaError_t: the original PyGPU's error object */
    PyObject_HEAD
    int code;
} PyGPUErrorObj;

enum pygpu_array_flags {
    PYGPU_C_CONTIGUOUS = 1,
    PYGPU_F_CONTIGUOUS = 2,
    PYGPU_WRITEABLE = 4,
};

/* GPUArray: a strided view of device memory.  Views never own memory: `mem`
 * is the owner (a DeviceAllocation, or whatever object keeps foreign memory
 * alive), shared by every view of it.  Variable-sized: dims holds the shape,
 * the strides (bytes), and room for the strides in elements that a DLPack
 * view (pygpu_dl_view) points to, nd entries each. */
typedef struct {
    PyObject_VAR_HEAD
    char *data;                 /* element [0, ..., 0] */
    int nd;
    int flags;
    int device;
    PyArray_Descr *descr;       /* strong */
    PyObject *mem;              /* memory owner, strong; may be Py_None */
    PyObject *base;             /* the array (or object) this views, or NULL */
    PyObject *shape_tuple;      /* `shape` and `ptr`, made once: plain slot */
    PyObject *ptr_int;          /* reads are the cheapest attribute reads */
    PyObject *weakreflist;
    /* The stream of the last work queued on the memory, kept on the root
     * array (see pygpu_array_root) for __cuda_array_interface__ and
     * __dlpack__; last_stream_ref keeps a created Stream alive meanwhile. */
    pygpu_stream_t last_stream;
    PyObject *last_stream_ref;
    ptrdiff_t dims[1];
} PyGPUArray;

#define GA_SHAPE(a) ((a)->dims)
#define GA_STRIDES(a) ((a)->dims + (a)->nd)
#define GA_DLSTRIDES(a) ((a)->dims + 2 * (a)->nd)
#define GA_ITEMSIZE(a) ((ptrdiff_t)PyDataType_ELSIZE((a)->descr))

/* The number of elements of `a` (its shape was checked when it was made). */
static inline ptrdiff_t pygpu_array_size(const PyGPUArray *a)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < a->nd; i++)
        n *= a->dims[i];
    return n;
}

/* 1 if `obj` is a GPUArray of this module (or of a subclass), which has
 * __index__ but is an array first: never taken as one integer where an
 * int is wanted. */
static inline int pygpu_is_gpuarray(pygpu_state *st, PyObject *obj) { return PyObject_TypeCheck(obj, st->Array); }

/* The layout of a new array made from another: C, F, A (F if the other is
 * F-contiguous and not C-contiguous, else C) or K (the other's axis order). */
enum pygpu_order { PYGPU_ORDER_C = 0, PYGPU_ORDER_F = 1, PYGPU_ORDER_A = 2, PYGPU_ORDER_K = 3 };

/* ---- one side of a copy (the copy planner's doors take two: copy/copy.h) ---- */

/* One side of a copy: where its element [0, ..., 0] is, its strides, and
 * for device memory its device (-1: the current one).  A host side may
 * name its memory's owner: an asynchronous upload from (download into)
 * pageable memory can then complete in the background, keeping the owner
 * until it has read (written) the memory. */
typedef struct {
    char *ptr;
    const ptrdiff_t *strides;
    int on_device;
    int device;
    PyObject *owner;
    PyObject *mem;              /* a device array's memory owner (borrowed; the doors refuse one a reset
                                 * destroyed: fork.h), or NULL */
} pygpu_side;

/* A GPUArray as one side of a copy. */
static inline pygpu_side pygpu_device_side(PyGPUArray *a)
{
    return (pygpu_side){a->data, GA_STRIDES(a), 1, a->device, NULL, a->mem};
}

/* The array that keeps the stream of the work on `a`'s memory: the array
 * `a` views (its base, when that is a GPUArray), else `a`; borrowed. */
static inline PyGPUArray *pygpu_array_root(PyGPUArray *a)
{
    return a->base && PyObject_TypeCheck(a->base, Py_TYPE(a)) ? (PyGPUArray *)a->base : a;
}

#endif /* PYGPU_INTERNAL_H */
