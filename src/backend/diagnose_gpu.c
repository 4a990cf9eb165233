/*
 * diagnose_gpu.c -- why the CUDA or HIP runtime found no usable device
 * (pygpu_rt_diagnose, rt.h): no driver, a driver too old for the runtime
 * PyGPU was built with, or a driver that sees no device (and the
 * vendor's *_VISIBLE_DEVICES that may hide them).  One source for both
 * vendors, as rt_gpu.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(PYGPU_BACKEND_CUDA)
#  include <cuda_runtime_api.h>
#  define RT(name) cuda##name
#  define VENDOR "NVIDIA"
#  define API "CUDA"
#  define VISIBLE_VARS {"CUDA_VISIBLE_DEVICES", NULL}
#  define OLDER_BUILD "build PyGPU for the driver's CUDA: PYGPU_CUDA_MAJOR=12 pip install ."

/* 1 if the driver's library loads (the runtime loads it the same way);
 * else 0, with the loader's reason in why. */
static int driver_present(char *why, size_t n)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, n, "no NVIDIA driver found: libcuda.so.1 could not be loaded (%s)", e ? e : "not found");
        return 0;
    }
    dlclose(lib);
    return 1;
}

/* "12.4" from a CUDA version number (1000 * major + 10 * minor). */
static void version_text(int v, char *buf, size_t n) { snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10); }
#elif defined(PYGPU_BACKEND_HIP)
#  ifndef __HIP_PLATFORM_AMD__
#    define __HIP_PLATFORM_AMD__ 1
#  endif
#  include <hip/hip_runtime_api.h>
#  define RT(name) hip##name
#  define VENDOR "AMD"
#  define API "HIP"
#  define VISIBLE_VARS {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", NULL}
#  define OLDER_BUILD "build PyGPU with an older ROCm"

/* 1 if the amdgpu kernel driver's device file is there and usable; else
 * 0, with the reason in why. */
static int driver_present(char *why, size_t n)
{
    if (access("/dev/kfd", F_OK) != 0) {
        snprintf(why, n, "no AMD GPU driver found: /dev/kfd is absent (the amdgpu kernel driver is not loaded)");
        return 0;
    }
    if (access("/dev/kfd", R_OK | W_OK) != 0) {
        snprintf(why, n, "the AMD GPU driver is there but this user may not open /dev/kfd (on most systems: "
                 "join the 'render' and 'video' groups)");
        return 0;
    }
    return 1;
}

/* "6.2" from a HIP version number (10^7 * major + 10^5 * minor + patch). */
static void version_text(int v, char *buf, size_t n) { snprintf(buf, n, "%d.%d", v / 10000000, v / 100000 % 100); }
#else
#  error "diagnose_gpu.c needs PYGPU_BACKEND_CUDA or PYGPU_BACKEND_HIP"
#endif

const char *pygpu_rt_diagnose(pygpu_status s, char *buf, size_t n)
{
    static const char *const visible_vars[] = VISIBLE_VARS;
    char why[384], drv_text[24] = "unknown", rt_text[24] = "unknown", hidden[160] = "";
    int drv = 0, rtv = 0;
    if (s != (pygpu_status)RT(ErrorInsufficientDriver) && s != (pygpu_status)RT(ErrorNoDevice))
        return NULL;
    if (!driver_present(why, sizeof why)) {
        snprintf(buf, n, "%s; install the driver, or choose the host backend (PYGPU_BACKEND=host)", why);
        return buf;
    }
    if (RT(DriverGetVersion)(&drv) == RT(Success) && drv > 0)
        version_text(drv, drv_text, sizeof drv_text);
    if (RT(RuntimeGetVersion)(&rtv) == RT(Success) && rtv > 0)
        version_text(rtv, rt_text, sizeof rt_text);
    if (s == (pygpu_status)RT(ErrorInsufficientDriver)) {
        snprintf(buf, n, "the %s driver is too old for this runtime: the driver supports %s %s, PyGPU was built "
                 "with %s %s; update the driver (or " OLDER_BUILD ")",
                 VENDOR, API, drv_text, API, rt_text);
        return buf;
    }
    for (int i = 0; visible_vars[i]; i++) {
        const char *v = getenv(visible_vars[i]);
        if (v) {
            snprintf(hidden, sizeof hidden, " (%s=\"%.100s\" is set)", visible_vars[i], v);
            break;
        }
    }
    snprintf(buf, n, "the %s driver is there (%s %s) but sees no device%s", VENDOR, API, drv_text, hidden);
    return buf;
}
