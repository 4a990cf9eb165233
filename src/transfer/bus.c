/*
 * bus.c -- one dense copy across the bus; see bus.h.
 *
 * A small copy queued on a stream of its own while another stream has a
 * big copy in the same direction waits for all of it: the copy engine
 * serves a stream as long as it has copies queued, so even a 1 GiB copy
 * cut into 4 MiB pieces, two queued at a time, held a 1 MiB copy beside it
 * for 20 ms, 720 times its time alone (raw runtime calls, H200:
 * docs/performance.md#beside-a-bulk-copy).  PyGPU's copy kernel reading the
 * same page-locked memory over the bus took 69 us there (42 us down): the
 * SMs do not queue behind the engine, and the bus is shared.  Alone the
 * engine is faster (1 MiB: 28 us against 37), so the kernel carries a copy
 * only while another thread's bulk copy in its direction is in flight on
 * its device, which this file counts.
 */
#include "bus.h"
#include "../copy/devcopy.h"
#include "../tuning.h"

#include <stdatomic.h>
#include <stdint.h>

#define BUS_DEVICES 64                          /* devices counted (more: every copy by DMA) */
#define BUS_UNIT 16                             /* the kernels' widest unit: the body goes in it */

static atomic_int bulk[BUS_DEVICES][2];          /* bulk copies in flight: [device][0 up, 1 down] */
static atomic_long by_kernel;                    /* copies the kernel carried */
static _Thread_local int mine[BUS_DEVICES][2];   /* of them this thread's */

static int dir_of(enum pygpu_copy_kind k) { return k == PYGPU_COPY_D2H; }

static int current_device(void)
{
    int d = -1;
    if (pygpu_rt_get_device(&d) != 0) {
        (void)pygpu_rt_get_last_error();
        return -1;
    }
    return d >= 0 && d < BUS_DEVICES ? d : -1;
}

int pygpu_bus_bulk_begin(enum pygpu_copy_kind k)
{
    int d = current_device();
    if (d < 0 || (k != PYGPU_COPY_H2D && k != PYGPU_COPY_D2H))
        return -1;
    atomic_fetch_add(&bulk[d][dir_of(k)], 1);
    mine[d][dir_of(k)]++;
    return d * 2 + dir_of(k);
}

void pygpu_bus_bulk_end(int token)
{
    if (token < 0)
        return;
    atomic_fetch_sub(&bulk[token / 2][token % 2], 1);
    mine[token / 2][token % 2]--;
}

int pygpu_bus_hold(int device, enum pygpu_copy_kind k, int delta)
{
    if (device < 0 || device >= BUS_DEVICES)
        return -1;
    int n = atomic_fetch_add(&bulk[device][dir_of(k)], delta) + delta;
    if (n < 0) {                /* (never below none: taken back) */
        atomic_fetch_sub(&bulk[device][dir_of(k)], delta);
        return -1;
    }
    return n;
}

long pygpu_bus_kernel_copies(void) { return atomic_load(&by_kernel); }

/* 1 if another thread's bulk copy in direction `k` is in flight on the
 * current device and this thread has none there: a bulk copy's own pieces
 * and chunks keep the engine (threads moving big copies at once share it
 * at its speed; the kernel is slower). */
static int engine_busy(enum pygpu_copy_kind k)
{
    if (k != PYGPU_COPY_H2D && k != PYGPU_COPY_D2H)
        return 0;
    int d = current_device();
    return d >= 0 && mine[d][dir_of(k)] == 0 && atomic_load_explicit(&bulk[d][dir_of(k)], memory_order_relaxed) > 0;
}

/* `n` bytes from `src` to `dst` (device addresses both) by PyGPU's copy
 * kernel: the body in the widest unit, the last bytes apart. */
static pygpu_status kernel_copy(char *dst, const char *src, size_t n, pygpu_stream_t s)
{
    size_t body = n / BUS_UNIT * BUS_UNIT;
    pygpu_pair p = {1, {0}, {{1}, {1}}, {0, 0}};
    pygpu_status r = 0;
    if (body) {
        p.shape[0] = (ptrdiff_t)body;
        r = pygpu_dev_copy(&p, dst, src, 1, s);
    }
    if (r == 0 && n > body) {
        p.shape[0] = (ptrdiff_t)(n - body);
        r = pygpu_dev_copy(&p, dst + body, src + body, 1, s);
    }
    return r;
}

/* 1 if PyGPU's kernel may carry a copy in direction `k` on stream `s`:
 * the engine is busy (engine_busy), no graph is being recorded on `s` (a
 * graph keeps the engine's copy node, as ever, and the kernels' first load
 * is no call to make under a capture), and the kernels run here. */
static int kernel_may_carry(enum pygpu_copy_kind k, pygpu_stream_t s)
{
    int capturing = PYGPU_CAPTURE_NONE;
    if (!engine_busy(k))
        return 0;
    if (pygpu_rt_stream_capturing(s, &capturing) != 0) {
        (void)pygpu_rt_get_last_error();
        return 0;
    }
    return capturing == PYGPU_CAPTURE_NONE && pygpu_rt_kernels_ready() == 0;
}

pygpu_status pygpu_bus_copy(void *dst, const void *src, size_t n, enum pygpu_copy_kind k, pygpu_stream_t s,
                            const char **call)
{
    /* (both sides at the same place in a unit: else the kernel moves bytes, a fraction of the bus) */
    if (n > 0 && n < PYGPU_DMA_PIECES_FROM && (((uintptr_t)dst | (uintptr_t)src) % BUS_UNIT) == 0 &&
        kernel_may_carry(k, s)) {
        void *host = k == PYGPU_COPY_H2D ? (void *)src : dst, *mapped;
        if (pygpu_rt_host_mapped(host, n, &mapped) == 0 && ((uintptr_t)mapped % BUS_UNIT) == 0) {
            pygpu_status r = k == PYGPU_COPY_H2D ? kernel_copy(dst, mapped, n, s) : kernel_copy(mapped, src, n, s);
            if (r != 0)
                *call = "LaunchKernel";
            else
                atomic_fetch_add(&by_kernel, 1);
            return r;
        }
        (void)pygpu_rt_get_last_error();        /* (not page-locked: the engine it is) */
    }
    pygpu_status r = pygpu_rt_memcpy_async(dst, src, n, k, s);
    if (r != 0)
        *call = "MemcpyAsync";
    return r;
}
