/*
 * kernels_gpu.c -- PyGPU's own kernels (src/kernels/) on the CUDA or HIP
 * runtime: found, made ready on each device at its first use there, and
 * launched.  Like rt_gpu.c, one source for both vendors.
 *
 * CUDA: setup.py had nvcc build a fatbin (machine code for the usual
 * architectures, PTX for the others), linked in as pygpu_kernel_image.  It
 * is loaded with cudaLibraryLoadData at the first copy that needs it, and
 * each device takes its own copy at its first use (the driver compiles the
 * PTX then where no machine code fits).
 * HIP: the kernels' source is linked in as text (pygpu_kernel_source) and
 * compiled by hiprtc for each device's architecture at its first use;
 * hiprtc is looked up at run time, so only that use needs it.
 * A failure (no image in this build, a driver too old for the PTX, no
 * hiprtc) is remembered per device and returned by every later
 * pygpu_rt_kernels_ready there: the planner then takes the host path.
 */
#define _GNU_SOURCE
#include "rt.h"
#include "env.h"
#include "kernels/kernels.h"
#include "tuning.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(PYGPU_BACKEND_CUDA)
#  include <cuda_runtime_api.h>
#  define RT(name) cuda##name
typedef cudaError_t rt_error;
typedef cudaKernel_t rt_fn;
#elif defined(PYGPU_BACKEND_HIP)
#  ifndef __HIP_PLATFORM_AMD__
#    define __HIP_PLATFORM_AMD__ 1
#  endif
#  include <dlfcn.h>
#  include <hip/hip_runtime_api.h>
#  include <hip/hiprtc.h>
#  define RT(name) hip##name
typedef hipError_t rt_error;
typedef hipFunction_t rt_fn;
#else
#  error "kernels_gpu.c needs PYGPU_BACKEND_CUDA or PYGPU_BACKEND_HIP"
#endif

#if defined(PYGPU_KERNEL_IMAGE)
extern const unsigned char pygpu_kernel_image[];       /* (setup.py's kernel_image.c) */
extern const char pygpu_kernel_image_origin[];
#endif

#define MAX_DEVICES 64
#define NSIZES 5                /* element sizes 1 2 4 8 16 */
#define NSIZED 3                /* copy, transpose, fill: a kernel per element size */

#if defined(PYGPU_BACKEND_HIP) || defined(PYGPU_KERNEL_IMAGE)      /* (the kernels' names, to find them) */
static const char *const sized_names[NSIZED] = {"pygpu_copy", "pygpu_transpose", "pygpu_fill"};
#endif

typedef struct {
    int state;                  /* 0 not tried, 1 ready, -1 failed (status) */
    rt_error status;
    unsigned blocks;            /* blocks that fill the device once */
#if defined(PYGPU_BACKEND_HIP)
    hipModule_t module;
    rt_fn sized[NSIZED][NSIZES], cast[PK_NTYPES];
#endif
} device_kernels;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static device_kernels devices[MAX_DEVICES];

static int size_index(int esize)
{
    return esize == 1 ? 0 : esize == 2 ? 1 : esize == 4 ? 2 : esize == 8 ? 3 : esize == 16 ? 4 : -1;
}

/* ---- finding the kernels -------------------------------------------------------- */

#if defined(PYGPU_BACKEND_CUDA)

static int library_state;       /* 0 not tried, 1 loaded, -1 failed */
static rt_error library_status;
static rt_fn sized_fn[NSIZED][NSIZES], cast_fn[PK_NTYPES];

static int switched_off(void);

const char *pygpu_rt_kernels_origin(void)
{
    if (switched_off())
        return "switched off by PYGPU_KERNELS=0";
#  if defined(PYGPU_KERNEL_IMAGE)
    return pygpu_kernel_image_origin;
#  elif defined(PYGPU_KERNELS_ABSENT)
    return "not in this build (" PYGPU_KERNELS_ABSENT ")";
#  else
    return "not in this build";
#  endif
}

#  if defined(PYGPU_KERNEL_IMAGE)
/* Look the kernels up in the library; the status of the first failure. */
static rt_error find_kernels(cudaLibrary_t lib)
{
    char name[32];
    rt_error e = cudaSuccess;
    for (int k = 0; e == cudaSuccess && k < NSIZED; k++)
        for (int i = 0; e == cudaSuccess && i < NSIZES; i++) {
            snprintf(name, sizeof name, "%s%d", sized_names[k], 1 << i);
            e = cudaLibraryGetKernel(&sized_fn[k][i], lib, name);
        }
    for (int t = 0; e == cudaSuccess && t < PK_NTYPES; t++) {
        snprintf(name, sizeof name, "pygpu_cast%d", t);
        e = cudaLibraryGetKernel(&cast_fn[t], lib, name);
    }
#  if CUDART_VERSION >= 12040
    /* The kernels and this file must agree on the argument block. */
    size_t offset = 0, size = 0;
    if (e == cudaSuccess && (e = cudaFuncGetParamInfo((const void *)cast_fn[0], 0, &offset, &size)) == cudaSuccess &&
        size != sizeof(pygpu_kargs))
        e = cudaErrorInvalidKernelImage;
#  endif
    return e;
}
#  endif

static rt_error load_library(void)
{
#  if defined(PYGPU_KERNEL_IMAGE)
    cudaLibrary_t lib;
    rt_error e = cudaLibraryLoadData(&lib, pygpu_kernel_image, NULL, NULL, 0, NULL, NULL, 0);
    if (e == cudaSuccess && (e = find_kernels(lib)) != cudaSuccess)
        (void)cudaLibraryUnload(lib);
    return e;
#  else
    return cudaErrorNotSupported;
#  endif
}

/* Ready on device `dev` (current): the library loaded once, and this
 * device's copy of it made (compiled from PTX if need be). */
static rt_error load_on(int dev, device_kernels *d)
{
    struct cudaFuncAttributes attr;
    int sms = 0;
    rt_error e;
    if (!library_state) {
        library_status = load_library();
        library_state = library_status == cudaSuccess ? 1 : -1;
    }
    if (library_state < 0)
        return library_status;
    for (int t = 0; t < PK_NTYPES; t++)     /* (the largest: if they load, all do) */
        if ((e = cudaFuncGetAttributes(&attr, (const void *)cast_fn[t])) != cudaSuccess)
            return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return e;
    d->blocks = (unsigned)(sms > 0 ? sms : 1) * PYGPU_BLOCKS_PER_SM;
    return cudaSuccess;
}

static rt_fn sized_kernel(device_kernels *d, int k, int i)
{
    (void)d;
    return sized_fn[k][i];
}

static rt_fn cast_kernel(device_kernels *d, int t)
{
    (void)d;
    return cast_fn[t];
}

static rt_error launch(rt_fn fn, unsigned grid, unsigned bx, unsigned by, const pygpu_kargs *a, pygpu_stream_t s)
{
    void *args[1] = {(void *)a};
    dim3 g = {grid, 1, 1}, b = {bx, by, 1};
    return cudaLaunchKernel((const void *)fn, g, b, args, 0, (cudaStream_t)s);
}

#else /* HIP */

#  if defined(PYGPU_KERNEL_SOURCE)
extern const char pygpu_kernel_source[];               /* (setup.py's kernel_source.c) */
#  endif

static int switched_off(void);

const char *pygpu_rt_kernels_origin(void)
{
    if (switched_off())
        return "switched off by PYGPU_KERNELS=0";
#  if defined(PYGPU_KERNEL_SOURCE)
    return "compiled by hiprtc on each device at its first use";
#  else
    return "not in this build";
#  endif
}

/* hiprtc, found at run time: libhiprtc (ROCm 6), else within libamdhip64 (ROCm 5). */
static struct {
    int state;                  /* 0 not looked for, 1 found, -1 not */
    hiprtcResult (*create)(hiprtcProgram *, const char *, const char *, int, const char **, const char **);
    hiprtcResult (*compile)(hiprtcProgram, int, const char **);
    hiprtcResult (*code_size)(hiprtcProgram, size_t *);
    hiprtcResult (*code)(hiprtcProgram, char *);
    hiprtcResult (*destroy)(hiprtcProgram *);
} rtc;

static int find_hiprtc(void)
{
    static const char *const libs[] = {"libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.5", "libamdhip64.so",
                                       "libamdhip64.so.6", "libamdhip64.so.5"};
    if (rtc.state)
        return rtc.state > 0;
    rtc.state = -1;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        *(void **)&rtc.create = dlsym(h, "hiprtcCreateProgram");
        *(void **)&rtc.compile = dlsym(h, "hiprtcCompileProgram");
        *(void **)&rtc.code_size = dlsym(h, "hiprtcGetCodeSize");
        *(void **)&rtc.code = dlsym(h, "hiprtcGetCode");
        *(void **)&rtc.destroy = dlsym(h, "hiprtcDestroyProgram");
        if (rtc.create && rtc.compile && rtc.code_size && rtc.code && rtc.destroy) {
            rtc.state = 1;
            return 1;
        }
        dlclose(h);
    }
    return 0;
}

/* The kernels compiled for architecture `arch` ("gfx90a:sramecc+:xnack-"),
 * into *image (malloc'd); 0, or -1. */
static int compile_for(const char *arch, char **image)
{
#  if defined(PYGPU_KERNEL_SOURCE)
    hiprtcProgram prog;
    char opt[300];
    const char *opts[2] = {opt, "-O3"};
    size_t n = 0;
    int ok = 0;
    snprintf(opt, sizeof opt, "--offload-arch=%s", arch);
    if (rtc.create(&prog, pygpu_kernel_source, "copy_kernels.cu", 0, NULL, NULL) != HIPRTC_SUCCESS)
        return -1;
    if (rtc.compile(prog, 2, opts) == HIPRTC_SUCCESS && rtc.code_size(prog, &n) == HIPRTC_SUCCESS && n &&
        (*image = malloc(n)) != NULL) {
        ok = rtc.code(prog, *image) == HIPRTC_SUCCESS;
        if (!ok)
            free(*image);
    }
    rtc.destroy(&prog);
    return ok ? 0 : -1;
#  else
    (void)arch;
    (void)image;
    return -1;
#  endif
}

static rt_error load_on(int dev, device_kernels *d)
{
    hipDeviceProp_t p;
    char name[32], *image = NULL;
    rt_error e = hipGetDeviceProperties(&p, dev);
    if (e != hipSuccess)
        return e;
    if (!find_hiprtc() || compile_for(p.gcnArchName, &image) < 0)
        return hipErrorNotSupported;
    e = hipModuleLoadData(&d->module, image);
    free(image);
    for (int k = 0; e == hipSuccess && k < NSIZED; k++)
        for (int i = 0; e == hipSuccess && i < NSIZES; i++) {
            snprintf(name, sizeof name, "%s%d", sized_names[k], 1 << i);
            e = hipModuleGetFunction(&d->sized[k][i], d->module, name);
        }
    for (int t = 0; e == hipSuccess && t < PK_NTYPES; t++) {
        snprintf(name, sizeof name, "pygpu_cast%d", t);
        e = hipModuleGetFunction(&d->cast[t], d->module, name);
    }
    d->blocks = (unsigned)(p.multiProcessorCount > 0 ? p.multiProcessorCount : 1) * PYGPU_BLOCKS_PER_SM;
    return e;
}

static rt_fn sized_kernel(device_kernels *d, int k, int i) { return d->sized[k][i]; }
static rt_fn cast_kernel(device_kernels *d, int t) { return d->cast[t]; }

static rt_error launch(rt_fn fn, unsigned grid, unsigned bx, unsigned by, const pygpu_kargs *a, pygpu_stream_t s)
{
    void *args[1] = {(void *)a};
    return hipModuleLaunchKernel(fn, grid, 1, 1, bx, by, 1, 0, (hipStream_t)s, args, NULL);
}

#endif

/* ---- ready, launch ------------------------------------------------------------------ */

/* PYGPU_KERNELS=0 switches them off: device copies take the planner's
 * other ways (a way round a kernel that misbehaves on some GPU). */
static int switched_off(void) { return pygpu_env_get()->kernels_off; }

/* This device's entry, made ready the first time; NULL with *e set when it
 * is not (or the device is not known). */
static device_kernels *ready_here(rt_error *e)
{
    int dev = -1;
    if ((*e = RT(GetDevice)(&dev)) != RT(Success))
        return NULL;
    if (dev < 0 || dev >= MAX_DEVICES) {
        *e = RT(ErrorNotSupported);
        return NULL;
    }
    device_kernels *d = &devices[dev];
    if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == 0) {
        pthread_mutex_lock(&lock);
        if (d->state == 0) {
            d->status = switched_off() ? RT(ErrorNotSupported) : load_on(dev, d);
            if (d->status != RT(Success))
                (void)RT(GetLastError)();   /* (not sticky: nothing ran) */
            __atomic_store_n(&d->state, d->status == RT(Success) ? 1 : -1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
    }
    *e = d->status;
    return d->state > 0 ? d : NULL;
}

pygpu_status pygpu_rt_kernels_ready(void)
{
    rt_error e;
    (void)ready_here(&e);
    return e;
}

pygpu_status pygpu_rt_launch(enum pygpu_kernel k, int variant, const pygpu_kargs *a, pygpu_stream_t s)
{
    rt_error e;
    device_kernels *d = ready_here(&e);
    int cast = k == PYGPU_KERNEL_CAST, i = size_index(variant);
    if (!d)
        return e;
    if (cast ? variant < 0 || variant >= PK_NTYPES || a->dtype < 0 || a->dtype >= PK_NTYPES
             : i < 0 || (int)k < 0 || (int)k >= NSIZED)
        return RT(ErrorInvalidValue);
    if (a->n <= 0)
        return RT(Success);
    /* Enough blocks for the work, at most a device-full (they walk on). */
    int tiles = k == PYGPU_KERNEL_TRANSPOSE;
    pk_i64 need = tiles ? a->n : (a->n + PK_BLOCK * PK_UNROLL - 1) / (PK_BLOCK * PK_UNROLL);
    unsigned grid = need < (pk_i64)d->blocks ? (unsigned)need : d->blocks;
    return launch(cast ? cast_kernel(d, variant) : sized_kernel(d, (int)k, i), grid, tiles ? PK_TILE : PK_BLOCK,
                  tiles ? PK_TILE_ROWS : 1, a, s);
}
