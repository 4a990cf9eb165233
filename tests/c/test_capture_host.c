/*
 * test_capture_host.c -- the host backend's captures (src/backend/rt_host.c,
 * captured_host.c) keep the runtime's rule for the legacy stream: while a
 * blocking stream of a device is being captured, work on that device's
 * legacy stream (a stream-ordered call on it, or a plain copy) is refused
 * with cudaErrorStreamCaptureImplicit and the capture is broken (its end
 * fails); asking whether the legacy stream is captured answers "implicit"
 * and breaks nothing; a non-blocking stream's capture, or a blocking
 * stream's on another device, leaves the legacy stream alone.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "backend/rt.h"
#include "backend/host_shared.h"

#include <stdlib.h>

static int capturing(pygpu_stream_t s)
{
    int how = -1;
    CHECK(pygpu_rt_stream_capturing(s, &how) == 0);
    return how;
}

int main(void)
{
    char a[64] = {0}, b[64] = {0};
    pygpu_stream_t blocking, nb, other;
    setenv("PYGPU_HOST_DEVICES", "2", 1);
    CHECK(pygpu_rt_set_device(1) == 0);
    CHECK(pygpu_rt_stream_create(&other, 0, 0) == 0);       /* (a blocking stream of device 1) */
    CHECK(pygpu_rt_set_device(0) == 0);
    CHECK(pygpu_rt_stream_create(&blocking, 0, 0) == 0);
    CHECK(pygpu_rt_stream_create(&nb, PYGPU_STREAM_NON_BLOCKING, 0) == 0);

    /* A blocking stream captured: the legacy stream refused, the capture broken. */
    CHECK(pygpu_rt_stream_begin_capture(blocking, PYGPU_CAPTURE_MODE_GLOBAL) == 0);
    CHECK(capturing(PYGPU_STREAM_NULL) == PYGPU_CAPTURE_IMPLICIT);
    CHECK(capturing((pygpu_stream_t)1) == PYGPU_CAPTURE_IMPLICIT);       /* (cudaStreamLegacy named) */
    CHECK(capturing(nb) == PYGPU_CAPTURE_NONE);
    CHECK(pygpu_rt_memcpy_async(a, b, 8, PYGPU_COPY_DEFAULT, nb) == 0);      /* (another stream: untouched) */
    CHECK(pygpu_rt_stream_synchronize(nb) == 0);
    CHECK(pygpu_rt_stream_end_capture(blocking) == 0);                  /* (asking broke nothing) */

    CHECK(pygpu_rt_stream_begin_capture(blocking, PYGPU_CAPTURE_MODE_RELAXED) == 0);
    CHECK(pygpu_rt_memcpy_async(a, b, 8, PYGPU_COPY_DEFAULT, PYGPU_STREAM_NULL) == H_CAPTURE_IMPLICIT);
    CHECK(pygpu_rt_get_last_error() == H_CAPTURE_IMPLICIT);
    CHECK(pygpu_rt_stream_end_capture(blocking) == H_CAPTURE_INVALIDATED);
    (void)pygpu_rt_get_last_error();
    CHECK(capturing(PYGPU_STREAM_NULL) == PYGPU_CAPTURE_NONE);          /* (over) */

    /* Each kind of call on the legacy stream breaks it (in an order that
     * starts anywhere: no kind depends on the one before). */
    for (int i = 0, first = (int)rng_range(0, 5); i < 6; i++) {
        int k = (first + i) % 6;
        pygpu_status r = -1;
        void *p = NULL;
        int pooled = 0;
        CHECK(pygpu_rt_stream_begin_capture(blocking, PYGPU_CAPTURE_MODE_GLOBAL) == 0);
        switch (k) {
        case 0: r = pygpu_rt_memcpy(a, b, 8, PYGPU_COPY_DEFAULT); break;   /* (the plain copy: the legacy stream's) */
        case 1: r = pygpu_rt_memset_async(a, 0, 8, PYGPU_STREAM_NULL); break;
        case 2: r = pygpu_rt_malloc_async(&p, 64, PYGPU_STREAM_NULL, &pooled); break;
        case 3: r = pygpu_rt_stream_synchronize(PYGPU_STREAM_NULL); break;
        case 4: r = pygpu_rt_memcpy2d_async(a, 8, b, 8, 8, 2, PYGPU_COPY_DEFAULT, (pygpu_stream_t)1); break;
        default: r = pygpu_rt_stream_wait_event(PYGPU_STREAM_NULL, NULL); break;
        }
        CHECK(r == H_CAPTURE_IMPLICIT && p == NULL);
        (void)pygpu_rt_get_last_error();
        CHECK(pygpu_rt_stream_end_capture(blocking) == H_CAPTURE_INVALIDATED);
        (void)pygpu_rt_get_last_error();
    }

    /* A non-blocking stream captured, or a blocking one of another device:
     * the legacy stream of device 0 works, the capture stays valid. */
    CHECK(pygpu_rt_stream_begin_capture(nb, PYGPU_CAPTURE_MODE_GLOBAL) == 0);
    CHECK(capturing(PYGPU_STREAM_NULL) == PYGPU_CAPTURE_NONE);
    CHECK(pygpu_rt_memcpy(a, b, 8, PYGPU_COPY_DEFAULT) == 0);
    CHECK(pygpu_rt_stream_end_capture(nb) == 0);
    CHECK(pygpu_rt_stream_begin_capture(other, PYGPU_CAPTURE_MODE_GLOBAL) == 0);
    CHECK(pygpu_rt_memset_async(a, 1, 8, PYGPU_STREAM_NULL) == 0 && a[7] == 1);
    CHECK(pygpu_rt_set_device(1) == 0);
    CHECK(capturing(PYGPU_STREAM_NULL) == PYGPU_CAPTURE_IMPLICIT);
    CHECK(pygpu_rt_set_device(0) == 0);
    CHECK(pygpu_rt_stream_end_capture(other) == 0);

    CHECK(pygpu_rt_stream_destroy(blocking) == 0 && pygpu_rt_stream_destroy(nb) == 0 &&
          pygpu_rt_stream_destroy(other) == 0);
    return check_done("test_capture_host");
}
