/*
 * env.c -- the one reader of PyGPU's environment variables: every
 * PYGPU_* variable the C code knows, read once, at the first call, into
 * one struct (env.h; the table is docs/environment.md).  Pure C.
 */
#include "env.h"
#include "tuning.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

size_t pygpu_parse_bytes(const char *s)
{
    char *end;
    if (!s || !*s)
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return 0;
    switch (*end) {
    case 'T': case 't': v <<= 10; /* fall through */
    case 'G': case 'g': v <<= 10; /* fall through */
    case 'M': case 'm': v <<= 10; /* fall through */
    case 'K': case 'k': v <<= 10; break;
    default: break;
    }
    return (size_t)v;
}

static pygpu_env env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* A switch that is on unless the variable says "0" (atoi's reading). */
static int unless_zero(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s ? atoi(s) != 0 : dflt;
}

/* PYGPU_HOST_NUMA: a node for each device in turn, comma-separated; one
 * that is not a number of 0 or more, and the devices past the list, -1. */
static void read_host_numa(const char *s)
{
    for (int i = 0; i < PYGPU_HOST_DEVICES_MAX; i++) {
        char *end = NULL;
        long v = -1;
        if (s && *s) {
            errno = 0;
            v = strtol(s, &end, 10);
            if (errno || end == s || (*end != ',' && *end) || v < 0 || v > INT_MAX)
                v = -1;
            s = strchr(s, ',');
            s = s ? s + 1 : NULL;
        }
        env.host_numa[i] = (int)v;
    }
}

static void read_host(void)
{
    const char *s = getenv("PYGPU_HOST_DEVICES");
    int n = s ? atoi(s) : 1;
    env.host_devices = n < 1 ? 1 : n > PYGPU_HOST_DEVICES_MAX ? PYGPU_HOST_DEVICES_MAX : n;
    env.host_memory = pygpu_parse_bytes(getenv("PYGPU_HOST_MEMORY"));
    s = getenv("PYGPU_HOST_PEER");
    env.host_peer = !s ? 1 : atoi(s) == 2 ? 2 : atoi(s) != 0;
    env.host_wait_value = unless_zero("PYGPU_HOST_WAIT_VALUE", 1);
    env.host_capture = unless_zero("PYGPU_HOST_CAPTURE", 0);
    s = getenv("PYGPU_HOST_FAIL_COPY");
    if (s) {
        char *colon;
        env.host_fail_copy_bytes = (size_t)strtoull(s, &colon, 10);
        env.host_fail_copy_nth = *colon == ':' ? atol(colon + 1) : 0;
    }
    s = getenv("PYGPU_HOST_POOL");
    env.host_pool = s ? pygpu_parse_bytes(s) : PYGPU_HOST_POOL_DEFAULT;
    env.host_locked = pygpu_parse_bytes(getenv("PYGPU_HOST_LOCKED"));
    s = getenv("PYGPU_HOST_FORK_RULE");
    env.host_fork_rule_gpu = s && strcmp(s, "gpu") == 0;
    s = getenv("PYGPU_HOST_RESET_RULE");
    env.host_reset_rule_gpu = s && strcmp(s, "gpu") == 0;
    read_host_numa(getenv("PYGPU_HOST_NUMA"));
}

static void read_env(void)
{
    const char *s = getenv("PYGPU_KERNELS");
    env.kernels_off = s && strcmp(s, "0") == 0;
    env.numa_off = !unless_zero("PYGPU_NUMA", 1);
    s = getenv("PYGPU_BLOCK_CACHE");
    env.block_cache = s && *s ? atoi(s) != 0 : -1;
    s = getenv("PYGPU_STAGING_TRACE");
    env.staging_trace = s && strcmp(s, "0") != 0;
    s = getenv("PYGPU_PINNED_LIMIT");
    env.pinned_limit_set = s && *s;
    env.pinned_limit = pygpu_parse_bytes(s);
    s = getenv("PYGPU_REGISTER_LIMIT");
    env.register_limit_set = s && *s;
    env.register_limit = pygpu_parse_bytes(s);
    env.cache_bytes = pygpu_parse_bytes(getenv("PYGPU_CACHE_BYTES"));
    read_host();
}

const pygpu_env *pygpu_env_get(void)
{
    pthread_once(&env_once, read_env);
    return &env;
}
