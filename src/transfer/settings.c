/*
 * settings.c -- the transfer settings; see settings.h.  The defaults are
 * the measured winners (docs/performance.md says what was measured).
 */
#include "settings.h"
#include "../backend/rt.h"
#include "../fork.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t pygpu_parse_bytes(const char *s)
{
    char *end;
    if (!s || !*s)
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'T': case 't': v <<= 10; /* fall through */
    case 'G': case 'g': v <<= 10; /* fall through */
    case 'M': case 'm': v <<= 10; /* fall through */
    case 'K': case 'k': v <<= 10; break;
    default: break;
    }
    return (size_t)v;
}

static pthread_mutex_t config_mu = PTHREAD_MUTEX_INITIALIZER;
static pygpu_transfer_config config;
static int config_ready;

static void config_defaults(void)
{
    if (config_ready)
        return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    config.chunk = (size_t)16 << 20;
    config.depth = 4;
    /* Three cores in four, up to 16: a worker descheduled mid-part holds up
     * its chunk, and the runtime's threads need cores too. */
    config.threads = cpus > 1 ? (int)(cpus - cpus / 4) : 1;
    if (config.threads > 16)
        config.threads = 16;
    /* A big transfer alone in the process: seven cores in eight, up to 16.
     * On 16-core GPU hosts 14 threads moved 256 MiB to 1 GiB downloads at
     * 0.91-0.97 of the link where 12 gave 0.83-0.88, but lost at 16 MiB,
     * and 16 for every transfer lost from 8 threads at once
     * (docs/performance.md: threads for a transfer alone). */
    config.threads_alone = cpus > 1 ? (int)(cpus - cpus / 8) : 1;
    if (config.threads_alone > 16)
        config.threads_alone = 16;
    /* Pageable copies from 32 KiB are staged on a GPU; on the host backend
     * "device memory" is host memory, and staging would only add a copy. */
    config.min_bytes = strcmp(pygpu_rt_vendor(), "host") ? (size_t)32 << 10 : SIZE_MAX;
    config.peer = 1;
    /* Transfers from several threads at once: their lanes of staging
     * buffers in a smaller footprint (8 threads on an H100, touched
     * pageable 64 MiB each: docs/performance.md, crowded lanes). */
    config.crowd_up = (size_t)2 << 20;
    config.crowd_down = (size_t)8 << 20;
    /* Uploads while another transfer is at work on the device: a core in
     * three.  On 16-core H100 hosts, 5 threads took a 1 MiB upload beside
     * a 1 GiB one from 4-5x its time alone to 2.1x, and with 4 or 6, 2, 4
     * and 8 threads' uploads at once moved 0.84-0.88 of the link where 12
     * moved 0.79-0.81 (docs/performance.md: crowded uploads).  Downloads
     * keep theirs: with 4 threads they lost. */
    config.crowd_threads = cpus > 5 ? (int)(cpus / 3) : 0;
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
    if (phase == PYGPU_FORK_PREPARE)
        pthread_mutex_lock(&config_mu);
    else
        pthread_mutex_unlock(&config_mu);
}

void pygpu_settings_init(void)
{
    pygpu_fork_register(settings_fork);
}
