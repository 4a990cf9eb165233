/*
 * settings.c -- the transfer settings; see settings.h.  The defaults are
 * the measured winners (tuning.h; docs/performance.md says what was
 * measured).
 */
#define _GNU_SOURCE             /* sched_getaffinity */
#include "settings.h"
#include "../backend/rt.h"
#include "../env.h"
#include "../fork.h"
#include "../tuning.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t config_mu = PTHREAD_MUTEX_INITIALIZER;
static pygpu_transfer_config config;
static int config_ready;

/* The CPUs this process may run on: mpirun binds each rank to its cores,
 * a container or taskset to theirs; more threads than that only take turns
 * on them.  Else (no affinity to ask) the CPUs online. */
static long usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

static void config_defaults(void)
{
    if (config_ready)
        return;
    long cpus = usable_cpus();
    config.chunk = PYGPU_STAGING_CHUNK;
    config.depth = PYGPU_STAGING_DEPTH;
    /* Three cores in four, up to 16: a worker descheduled mid-part holds up
     * its chunk, and the runtime's threads need cores too. */
    config.threads = cpus > 1 ? (int)(cpus - cpus / PYGPU_THREADS_SPARE) : 1;
    if (config.threads > PYGPU_THREADS_MAX)
        config.threads = PYGPU_THREADS_MAX;
    /* A big transfer alone in the process: seven cores in eight, up to 16;
     * more threads pay for big transfers only, and lose from several
     * threads at once (docs/performance.md#threads-alone). */
    config.threads_alone = cpus > 1 ? (int)(cpus - cpus / PYGPU_THREADS_ALONE_SPARE) : 1;
    if (config.threads_alone > PYGPU_THREADS_ALONE_MAX)
        config.threads_alone = PYGPU_THREADS_ALONE_MAX;
    /* Pageable copies from 32 KiB are staged on a GPU; on the host backend
     * "device memory" is host memory, and staging would only add a copy. */
    config.min_bytes = strcmp(pygpu_rt_vendor(), "host") ? PYGPU_STAGE_MIN : SIZE_MAX;
    config.peer = 1;
    /* Transfers from several threads at once: their lanes of staging
     * buffers in a smaller footprint (docs/performance.md#crowded-lanes). */
    config.crowd_up = PYGPU_CROWD_UP;
    config.crowd_down = PYGPU_CROWD_DOWN;
    /* Uploads while another transfer is at work on the device: a core in
     * three, so that a small upload beside a big one gets cores
     * (docs/performance.md#crowded-uploads).  Downloads keep theirs: with
     * fewer threads they lost. */
    config.crowd_threads = cpus >= PYGPU_CROWD_CORES_MIN ? (int)(cpus / PYGPU_CROWD_THREADS_SHARE) : 0;
    /* Host buffers page-locked in place, on a GPU backend: up to an eighth
     * of physical memory (docs/performance.md#registered-in-place: on four
     * GPUs fed at once it took each from 0.30-0.48 of what raw pinned
     * copies reach at once to 0.95-1.09).  The host backend's "device"
     * memory is host memory: nothing to gain.  PYGPU_REGISTER_LIMIT says
     * otherwise (0: off). */
    config.register_limit = 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (strcmp(pygpu_rt_vendor(), "host") && pages > 0 && page > 0)
        config.register_limit = (size_t)pages * (size_t)page / PYGPU_REGISTER_SHARE;
    if (pygpu_env_get()->register_limit_set)
        config.register_limit = pygpu_env_get()->register_limit;
    /* Staging buffers on their device's NUMA node, where the host has
     * several: a DMA reads (writes) memory of its own socket's
     * (docs/performance.md#numa-placement).  PYGPU_NUMA=0: off. */
    config.numa = !pygpu_env_get()->numa_off;
    config_ready = 1;
}

void pygpu_transfer_config_get(pygpu_transfer_config *c)
{
    pthread_mutex_lock(&config_mu);
    config_defaults();
    *c = config;
    pthread_mutex_unlock(&config_mu);
}

int pygpu_upload_threads(const pygpu_transfer_config *c, int crowded)
{
    return crowded && c->crowd_threads > 0 && c->crowd_threads < c->threads ? c->crowd_threads : c->threads;
}

int pygpu_transfer_threads(const pygpu_transfer_config *c, size_t bytes, int alone)
{
    if (bytes <= PYGPU_SOLO_MAX)
        return 1;
    if (alone && c->threads_alone > 0 && bytes > (size_t)c->depth * c->chunk)
        return c->threads_alone;
    return c->threads;
}

void pygpu_transfer_config_set(const pygpu_transfer_config *c)
{
    pthread_mutex_lock(&config_mu);
    config_defaults();
    config = *c;
    if (config.depth < 2)
        config.depth = 2;
    if (config.depth > PYGPU_MAX_DEPTH)
        config.depth = PYGPU_MAX_DEPTH;
    if (config.threads < 1)
        config.threads = 1;
    if (config.threads > PYGPU_MAX_THREADS)
        config.threads = PYGPU_MAX_THREADS;
    if (config.threads_alone < 0)
        config.threads_alone = 0;
    if (config.threads_alone > PYGPU_MAX_THREADS)
        config.threads_alone = PYGPU_MAX_THREADS;
    if (config.crowd_threads < 0)
        config.crowd_threads = 0;
    if (config.crowd_threads > PYGPU_MAX_THREADS)
        config.crowd_threads = PYGPU_MAX_THREADS;
    if (config.chunk < 4096)
        config.chunk = 4096;
    if (config.crowd_up && config.crowd_up < 4096)
        config.crowd_up = 4096;
    if (config.crowd_down && config.crowd_down < 4096)
        config.crowd_down = 4096;
    pthread_mutex_unlock(&config_mu);
}

static void settings_fork(enum pygpu_fork_phase phase)
{
    pygpu_fork_hold(phase, &config_mu);
}

void pygpu_settings_init(void)
{
    pygpu_fork_register(settings_fork);
}
