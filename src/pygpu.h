/*
 * pygpu.h -- what the C files of the extension share: the module state, the
 * object layouts, and the helpers each file exports to the others.
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
#include "env.h"
#include "fork.h"
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
    pygpu_names names;          /* interned names and constants (names.c) */
    /* The DLPack exchange API of the types last imported from (dlpack_exchange.c):
     * a borrowed type pointer made safe by its version tag (a type's tag
     * changes when its attributes do, and a new type never gets an old
     * tag); api NULL: the type has none that PyGPU can use. */
    pygpu_xcache_entry xcache[PYGPU_XCACHE_SLOTS];
} pygpu_state;

/* ---- state.c ----------------------------------------------------------- */

/* The module's definition (module.c fills it in at PyInit); borrowed. */
PyModuleDef *pygpu_module_def(void);
/* Import NumPy's C API for every file (module init); 0, or -1 with an exception. */
int pygpu_import_numpy(void);
/* The state of the module that defined `tp` (or a base of it); borrowed.
 * Walks to the first base defined by this module (subclasses may be plain
 * Python classes), as PyType_GetModuleByDef does on 3.11+.  NULL with
 * TypeError for a type of no pygpu module. */
pygpu_state *pygpu_state_of_type(PyTypeObject *tp);
#define pygpu_state_of(obj) pygpu_state_of_type(Py_TYPE(obj))
/* The state of module `m` (a module function's first argument); borrowed. */
static inline pygpu_state *pygpu_module_state(PyObject *m) { return (pygpu_state *)PyModule_GetState(m); }
/* Push `item` on the context-variable chain `var` (st->stream_var,
 * st->device_var); pop returns the item (new reference) or NULL with
 * RuntimeError if the chain is empty. */
int pygpu_ctxstack_push(PyObject *var, PyObject *item);
PyObject *pygpu_ctxstack_pop(PyObject *var);

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
} PyGPUStream;

typedef struct {
    PyObject_HEAD
    pygpu_event_t handle;
    int device;
    unsigned flags;
    int recorded;               /* record() was called at least once */
} PyGPUEvent;

typedef struct {                /* DeviceAllocation: owner of one device allocation */
    PyObject_HEAD
    void *ptr;
    size_t size;
    int device;
    int pooled;                 /* from the stream-ordered pool: free on `stream` */
    int cacheable;              /* may go back to the module's block cache */
    int freed;                  /* free() was called (the memory may wait for `views`) */
    Py_ssize_t views;           /* GPUArrays using it: they hold the memory past free() */
    size_t capacity;            /* bytes really allocated (>= size) */
    pygpu_stream_t stream;      /* the stream the allocation is ordered on */
    PyObject *stream_ref;       /* the Stream object owning it, or NULL */
    PyObject *weakreflist;
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

/* ---- convert.c --------------------------------------------------------- */

/* 1 if `obj` is one integer (a NumPy array of one or more axes is not, nor
 * a GPUArray, though a 0-d one of integers has __index__). */
int pygpu_is_int_arg(pygpu_state *st, PyObject *obj);
/* Parse a shape argument (int or sequence of ints); 0, or -1 with an
 * exception (TypeError, ValueError for negative or too many dims). */
int pygpu_shape_arg(pygpu_state *st, PyObject *obj, int *nd, ptrdiff_t *shape);
/* The same for any ints >= `min` (ValueError below it). */
int pygpu_dims_arg(pygpu_state *st, PyObject *obj, int *nd, ptrdiff_t *out, ptrdiff_t min);
/* An order argument: 'C' -> 0, 'F' -> 1; with allow_any also 'A' and 'K'
 * (enum pygpu_order) and None -> -1; -2 with ValueError otherwise. */
int pygpu_order_arg(PyObject *obj, int allow_any);
/* A byte count argument: a non-negative int; 0, or -1 with an exception. */
int pygpu_size_arg(PyObject *obj, const char *what, size_t *out);
/* A tuple of n ints; new reference. */
PyObject *pygpu_tuple_of(const ptrdiff_t *v, int n);
/* repr() of a shape tuple, for messages; new reference. */
PyObject *pygpu_shape_repr(const ptrdiff_t *shape, int nd);
/* NumPy's casting rule named by `obj` (NULL: no argument, 'unsafe') in
 * *rule; 'same_value' (NumPy 2.4's rule that checks every value) leaves
 * *rule unsafe and sets *by_numpy: NumPy does that one, on the host.  0, or
 * -1 with NumPy's TypeError or ValueError. */
int pygpu_casting_arg(PyObject *obj, NPY_CASTING *rule, int *by_numpy);
/* The byte count of an array of `shape` and `itemsize` in *nbytes; 0, or
 * -1 with ValueError (negative dimensions, or a count that overflows). */
int pygpu_checked_nbytes(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, ptrdiff_t *nbytes);

/* ---- errors.c ---------------------------------------------------------- */

/* Return 0 if `status` is success; else clear the runtime's last error, set
 * GPUError (GPUMemoryError when out of memory) naming `call` (the runtime
 * function without its vendor prefix: "MallocAsync"), and return -1. */
int pygpu_check(pygpu_state *st, pygpu_status status, const char *call);
/* A query's answer (StreamQuery, EventQuery): True if done, False if not
 * ready yet, else NULL with GPUError naming `call`. */
PyObject *pygpu_query_result(pygpu_state *st, pygpu_status status, const char *call);
/* The door to the runtime for a forked child (fork.h): 0 if this process
 * may call the runtime (noting that it does), else -1 with GPUError saying
 * that the process forked after using the device. */
int pygpu_fork_check(pygpu_state *st);
/* A new cudaError_t object for `code`; new reference. */
PyObject *pygpu_error_object(pygpu_state *st, int code);
int pygpu_errors_init(PyObject *m, pygpu_state *st);

/* ---- device.c ---------------------------------------------------------- */

/* Make `dev` current, saving the current one in *prev; -1 with an exception
 * set if `dev` is out of range or the runtime fails. */
int pygpu_device_enter(pygpu_state *st, int dev, int *prev);
/* Make `prev` current again; -1 with an exception set on failure. */
int pygpu_device_leave(pygpu_state *st, int prev);
/* The number of devices; -1 with an exception set (no device, no driver). */
int pygpu_device_count(pygpu_state *st);
/* The current device; -1 with an exception set. */
int pygpu_current_device(pygpu_state *st);
/* Check a device ordinal: 0 if valid, -1 with ValueError naming the range. */
int pygpu_check_device_id(pygpu_state *st, long dev);
/* The Device object for `dev` (cached); new reference. */
PyObject *pygpu_device_get(pygpu_state *st, int dev);
/* A `device=` argument: a Device or an int ordinal in range; 0 with *dev
 * set, or -1 with TypeError/ValueError naming `what`. */
int pygpu_device_arg(pygpu_state *st, PyObject *obj, const char *what, int *dev);
int pygpu_device_init(PyObject *m, pygpu_state *st);
/* The module functions of devices (device_count, get_device, set_device,
 * synchronize, mem_get_info) and of streams (current_stream,
 * stream_priority_range), beside their types. */
int pygpu_device_functions_init(PyObject *m);
int pygpu_stream_functions_init(PyObject *m);

/* ---- peer.c ---------------------------------------------------------- */

#include "peer.h"

/* ---- names.c ----------------------------------------------------------- */

/* Make st->names (module init); 0, or -1 with an exception set. */
int pygpu_names_init(pygpu_state *st);
int pygpu_names_visit(pygpu_state *st, visitproc visit, void *arg);
void pygpu_names_clear(pygpu_state *st);

/* ---- stream.c ---------------------------------------------------------- */

/* The current stream of this thread/context: the innermost `with stream:`,
 * else Stream.null; new reference. */
PyObject *pygpu_current_stream(pygpu_state *st);
/* Resolve a `stream=` argument: None (the current stream), a Stream, or an
 * int handle; 0 on success, -1 with TypeError set. */
int pygpu_stream_arg(pygpu_state *st, PyObject *obj, pygpu_stream_t *out);
/* The same for work on device `dev` (run with `dev` current): None gives
 * the current stream if it belongs to `dev`, else `dev`'s legacy default
 * stream (each device has its own current stream, as in CuPy); a Stream
 * of another device is a ValueError naming both devices and `what` (the
 * object the work is for: "array").  `dev` -1: as pygpu_stream_arg. */
int pygpu_stream_for(pygpu_state *st, PyObject *obj, int dev, const char *what, pygpu_stream_t *out);
/* Whether `obj`, a stream argument that gave handle `h`, owns that stream,
 * so that memory or a record ordered on it must keep `obj` alive: a
 * created Stream, or another library's stream object (__cuda_stream__,
 * such as cuda.core's, which destroys its stream when it goes).  An int
 * handle is the caller's to keep alive. */
int pygpu_stream_owner(pygpu_state *st, PyObject *obj, pygpu_stream_t h);
/* The handle that `current` (the current Stream, from pygpu_current_stream)
 * stands for in work on device `dev`: its own, or dev's legacy stream. */
pygpu_stream_t pygpu_current_stream_on(PyObject *current, int dev);
/* Record event `e` on the stream argument `stream` (on e's device); 0, or
 * -1 with an exception set. */
int pygpu_event_record_on(pygpu_state *st, PyGPUEvent *e, PyObject *stream);
int pygpu_stream_init(PyObject *m, pygpu_state *st);

/* ---- event.c ----------------------------------------------------------- */

int pygpu_event_init(PyObject *m, pygpu_state *st);

/* ---- memory.c / pinned.c ----------------------------------------------- */

/* Allocate `nbytes` on the current device, ordered on `stream` (a
 * `stream=` argument: None, a Stream or a handle; borrowed); new reference
 * to a DeviceAllocation. */
PyObject *pygpu_memory_new(pygpu_state *st, size_t nbytes, PyObject *stream);
/* A device address argument: a DeviceAllocation (its size in *size) or an
 * int (*size set to SIZE_MAX: unknown); 0, or -1 with TypeError. */
int pygpu_address_arg(pygpu_state *st, PyObject *obj, void **ptr, size_t *size);
/* Count a GPUArray that starts (delta 1) or stops (-1) using `mem`, its
 * memory owner (anything: only DeviceAllocations count).  An allocation
 * freed while arrays use it is given back when the last of them goes. */
void pygpu_memory_view(PyObject *mem, int delta);
/* 0 if an array whose owner is `mem` may touch its memory; -1 with
 * ValueError when that is a DeviceAllocation that was freed. */
int pygpu_memory_usable(PyObject *mem);
int pygpu_memory_init(PyObject *m, pygpu_state *st);
/* Give every block of the module's cache back to the pool. */
void pygpu_cache_flush(pygpu_state *st);
int pygpu_memory_functions_init(PyObject *m);

int pygpu_pinned_init(PyObject *m, pygpu_state *st);
/* A NumPy array of `shape` (C order) in page-locked memory; new reference.
 * With `pooled`, the memory comes from the pinned pool, and NULL without an
 * exception set means the pool's limit refused it. */
PyObject *pygpu_pagelocked_empty(pygpu_state *st, PyArray_Descr *descr, int nd, const ptrdiff_t *shape,
                                 int pooled);

/* ---- dtype.c ------------------------------------------------------------- */

/* Convert a dtype argument (None: float64) to a supported descriptor; new
 * reference, or NULL with TypeError naming the unsupported dtype. */
PyArray_Descr *pygpu_descr_arg(PyObject *obj);
/* 1 if `d` is a dtype GPUArray holds (numeric, native byte order). */
int pygpu_descr_supported(PyArray_Descr *d);

/* ---- one side of a copy (the copy planner's doors: copy/copy.h) --------- */

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
} pygpu_side;

/* A GPUArray as one side of a copy. */
static inline pygpu_side pygpu_device_side(PyGPUArray *a)
{
    return (pygpu_side){a->data, GA_STRIDES(a), 1, a->device, NULL};
}

/* ---- array*.c ------------------------------------------------------------ */

/* The one internal constructor: a GPUArray of type `tp` viewing `data` on
 * `device`.  Steals `descr`; takes new references to `mem` and `base` (base
 * may be NULL).  strides NULL means C-contiguous.  New reference. */
PyObject *pygpu_array_wrap(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                           const ptrdiff_t *shape, const ptrdiff_t *strides, char *data,
                           PyObject *mem, PyObject *base, int device, int writeable);
/* The one upload door: host data `obj` (anything NumPy converts; cast to
 * `descr` if not NULL, which is stolen) in a new array on the current
 * device, copied on `stream` (a stream argument), done on return unless
 * `async`.  to_gpu, to_gpu_async, asarray and from_dlpack of host data all
 * come here.  New reference. */
PyObject *pygpu_array_from_host(pygpu_state *st, PyObject *obj, PyArray_Descr *descr, PyObject *stream, int async);
/* The same, making an array of type `tp` (GPUArray or a subclass). */
PyObject *pygpu_array_from_host_as(pygpu_state *st, PyTypeObject *tp, PyObject *obj, PyArray_Descr *descr,
                                   PyObject *stream, int async);
/* A new array with fresh device memory on the current device, C or F
 * order, allocated on `stream` (a stream argument).  Steals `descr`. */
PyObject *pygpu_array_empty(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                            const ptrdiff_t *shape, int fortran, PyObject *stream);
/* A new array of `a`'s shape and type, with `descr` (stolen), laid out in
 * `order` (enum pygpu_order) relative to `a`, on the current device,
 * allocated on `stream` (a stream argument); new reference. */
PyObject *pygpu_array_empty_like(pygpu_state *st, PyGPUArray *a, PyArray_Descr *descr, int order, PyObject *stream);
/* A view of `a` with another shape/strides/offset; new reference. */
PyObject *pygpu_array_view(PyGPUArray *a, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                           char *data, PyArray_Descr *descr);
/* Copy host data `value` (anything NumPy converts) into `a`, broadcast. */
int pygpu_array_assign(PyGPUArray *a, PyObject *value, PyObject *stream, int async);
/* A new NumPy array with `a`'s elements (C order), or them into `out`; with
 * `async`, a copy into a page-locked `out` is only queued on the stream. */
PyObject *pygpu_array_get(PyGPUArray *a, PyObject *out, PyObject *stream, int pagelocked, int async);
/* `a` converted to `descr` (borrowed) in a new array laid out in `order`
 * (enum pygpu_order) on a's device, queued on `stream` (a stream
 * argument): by PyGPU's cast kernel, or where it cannot run (or for
 * `numpy_casting`, a rule NumPy checks value by value: "same_value"),
 * through NumPy on the host.  Same dtype: a copy.  New reference. */
PyObject *pygpu_array_astype(PyGPUArray *a, PyArray_Descr *descr, int order, const char *numpy_casting,
                             PyObject *stream);
int pygpu_array_init(PyObject *m, pygpu_state *st);
/* GPUArray(...) (array_new.c), the type's tp_new. */
PyObject *pygpu_array_new(PyTypeObject *tp, PyObject *args, PyObject *kwds);
/* Add the creation functions (empty, to_gpu, to_gpu_async) to module `m`. */
int pygpu_array_new_init(PyObject *m);
/* The host array an upload copies (array_host.c): `obj` as NumPy converts
 * it (cast to `descr` if given, which is stolen), in a dtype PyGPU holds;
 * new reference. */
PyArrayObject *pygpu_upload_source(PyObject *obj, PyArray_Descr *descr);
/* Host array `h` copied into `a` (a new array of its shape and type) on
 * `stream`, which `a` then records; 0, or -1. */
int pygpu_upload_into(pygpu_state *st, PyGPUArray *a, PyArrayObject *h, PyObject *stream, int async);
/* A host value converted to `descr` for an assignment or a fill (a NumPy
 * array, FORCECAST); new reference. */
PyArrayObject *pygpu_host_value(PyObject *value, PyArray_Descr *descr);
/* 1 if `a` already is laid out as `order` asks (enum pygpu_order). */
int pygpu_array_in_order(PyGPUArray *a, int order);
/* The method and attribute tables of GPUArray (array_methods.c, array_getset.c). */
PyMethodDef *pygpu_array_method_defs(void);
PyGetSetDef *pygpu_array_getset_defs(void);
extern PyMappingMethods pygpu_array_as_mapping;
/* NumPy's scalar protocol (array_scalar.c): float(), int(), index(),
 * complex() and bool() of a size-1 array, item(*args), tolist(); each a
 * read to the host, NumPy's results and errors. */
PyObject *pygpu_array_float(PyObject *self);
PyObject *pygpu_array_int(PyObject *self);
PyObject *pygpu_array_index(PyObject *self);
PyObject *pygpu_array_complex(PyObject *self, PyObject *unused);
int pygpu_array_bool(PyObject *self);
/* The shape methods (array_shape.c), in pygpu_array_methods. */
PyObject *pygpu_array_view_method(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_reshape(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_ravel(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_flatten(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_squeeze(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_transpose(PyObject *self, PyObject *args);
PyObject *pygpu_array_swapaxes(PyObject *self, PyObject *args);
/* a.T: the view with the axes reversed; new reference. */
PyObject *pygpu_array_T(PyGPUArray *a);
/* A dense copy of `a` on device `dev` (stream `s` of it), laid out in
 * `order` (enum pygpu_order); new reference.  A copy to another device is
 * done when this returns. */
PyObject *pygpu_array_dense_copy(pygpu_state *st, PyGPUArray *a, int order, pygpu_stream_t s, PyObject *stream,
                                 int dev);
PyObject *pygpu_array_item_method(PyObject *self, PyObject *args);
PyObject *pygpu_array_tolist(PyObject *self, PyObject *unused);
int pygpu_flags_init(PyObject *m, pygpu_state *st);
int pygpu_capi_init(PyObject *m, pygpu_state *st);
PyObject *pygpu_array_subscript(PyObject *self, PyObject *key);
int pygpu_array_ass_subscript(PyObject *self, PyObject *key, PyObject *value);
Py_ssize_t pygpu_array_length(PyObject *self);
PyObject *pygpu_array_item(PyObject *self, Py_ssize_t i);
int pygpu_pinned_functions_init(PyObject *m);
int pygpu_transfer_functions_init(PyObject *m);
/* Ready the transfer machinery (transfer/settings_py.c): module init. */
void pygpu_transfer_init(void);

/* ---- stream.c (arrays), cai.c ------------------------------------------- */


/* 0 if a layout received from another library (element strides already in
 * bytes) has a size and a byte span that fit in ptrdiff_t; else -1 with
 * BufferError naming `who`. */
int pygpu_foreign_layout(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize,
                         const char *who);

/* The array that keeps the stream of the work on `a`'s memory: the array
 * `a` views (its base, when that is a GPUArray), else `a`; borrowed. */
static inline PyGPUArray *pygpu_array_root(PyGPUArray *a)
{
    return a->base && PyObject_TypeCheck(a->base, Py_TYPE(a)) ? (PyGPUArray *)a->base : a;
}
/* Record that work on `a`'s memory was queued on handle `s`, the resolved
 * value of the stream argument `stream` (a Stream, an int, None or NULL:
 * borrowed); a created Stream is kept alive with the array. */
void pygpu_array_set_last_stream(pygpu_state *st, PyGPUArray *a, PyObject *stream, pygpu_stream_t s);
/* Make later work on stream `to` wait for the work queued so far on stream
 * `from` (an event recorded on `from`, on device `dev`); nothing when they
 * are the same stream.  0, or -1 with an exception set. */
int pygpu_stream_order(pygpu_state *st, int dev, pygpu_stream_t from, pygpu_stream_t to);
/* The __cuda_array_interface__ getter (CUDA builds only). */
PyObject *pygpu_array_cai(PyObject *self, void *closure);
/* A GPUArray viewing the memory `obj` describes with its
 * __cuda_array_interface__ `iface` (a dict); obj is kept alive as the
 * owner.  New reference. */
PyObject *pygpu_cai_import(pygpu_state *st, PyObject *obj, PyObject *iface);

/* ---- dlpack.c ---------------------------------------------------------- */

/* GPUArray.__dlpack__ (METH_FASTCALL | METH_KEYWORDS) and __dlpack_device__. */
PyObject *pygpu_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pygpu_array_dlpack_device(PyObject *self, PyObject *unused);
/* pygpu.asarray(obj) without a dtype; new reference. */
PyObject *pygpu_asarray(pygpu_state *st, PyObject *obj);
/* Module functions from_dlpack and asarray, and the cached values. */
int pygpu_interop_init(PyObject *m);

/* ---- dlpack_exchange.c: the DLPack 1.3 C exchange API ------------------- */

/* The exchange API of type `tp` that PyGPU can consume (a
 * const DLPackExchangeAPI *), looked up once per type; NULL if none (no
 * attribute, or one that is not a usable table: the caller falls back to
 * the Python protocol), or NULL with an exception set. */
const void *pygpu_exchange_api_of(pygpu_state *st, PyTypeObject *tp);
/* `x` imported through its type's exchange table `api` (copy and target as
 * from_dlpack's; copy_host: copy host data even where it is reachable, as
 * asarray does).  NULL with an exception, or NULL with *fallback set and no
 * exception where only the Python protocol can reach the data.  New
 * reference. */
PyObject *pygpu_exchange_import(pygpu_state *st, PyObject *x, const void *api, int target, int copy, int copy_host,
                                int *fallback);
/* GPUArray's table (a const DLPackExchangeAPI *), for the C API. */
const void *pygpu_exchange_table(void);
/* Publish GPUArray's table on its type (module init). */
int pygpu_exchange_init(pygpu_state *st);
/* Add pygpu._exchange_timing (exchange_timing.c) to module `m`. */
int pygpu_exchange_timing_init(PyObject *m);

/* NumPy's ComplexWarning where complex values go into a real or integer
 * type (dtype.c); 0, or -1 when the warning is an error. */
int pygpu_complex_warning(pygpu_state *st, PyArray_Descr *from, PyArray_Descr *to);

/* ---- dtype.c (kernels) --------------------------------------------------- */

/* The number PyGPU's kernels know `d` by (enum pygpu_ktype in
 * kernels/kernels.h), or -1 for a dtype GPUArray does not hold. */
int pygpu_ktype_of(PyArray_Descr *d);

/* ---- dtype.c (interop) --------------------------------------------------- */

/* The descriptor for an element of kind 'b', 'i', 'u', 'f' or 'c' and
 * `itemsize` bytes, or NULL (no exception set) when GPUArray has none;
 * new reference. */
PyArray_Descr *pygpu_descr_from_kind(char kind, int itemsize);

/* ---- lowlevel.c: what the original PyGPU interface needs from C ---------- */

/* _HostBuffer and the status-returning runtime calls of pygpu/lowlevel.py. */
int pygpu_lowlevel_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_INTERNAL_H */
