/*
 * pipeline.h -- pageable host memory at the link's speed: the chunked
 * staging pipelines through page-locked buffers (pipeline.c).  Pure C over
 * the runtime interface: statuses, no Python, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_PIPELINE_H
#define PYGPU_TRANSFER_PIPELINE_H

#include <stddef.h>

#include "../backend/rt.h"
#include "../shape.h"

/* Polled between chunks; non-zero stops the transfer (KeyboardInterrupt). */
typedef int (*pygpu_interrupt_fn)(void *arg);

/* Told, in order, how many bytes of an upload's dense device side have
 * their DMA queued on the stream; non-zero (a status) stops the transfer. */
typedef pygpu_status (*pygpu_queued_fn)(void *arg, size_t bytes);

typedef struct {
    pygpu_stream_t stream;
    pygpu_interrupt_fn interrupted;
    void *interrupt_arg;
    const char *call;           /* set to the runtime call that failed */
    int stopped;                /* set when `interrupted` stopped it */
    pygpu_queued_fn queued;     /* if set: pygpu_staged_h2d calls it as its DMA is queued */
    void *queued_arg;
    struct pygpu_lane *lane;    /* the staging buffers the transfer has (pipeline.c's own) */
    int wait_after;             /* in: the caller waits for `stream` as soon as an upload returns (its
                                 * last step): the upload waits instead, before it gives its buffers
                                 * back, so that the next transfer need not ask whether they are free */
    int waited;                 /* out: it did; all that was queued on `stream` before is done */
} pygpu_staging_ctx;

/* The host layout of a staged copy: `ptr` + strides over the pair's shape
 * (the device side is dense in that order). */
typedef struct {
    char *ptr;
    const ptrdiff_t *strides;
    int nd;
    const ptrdiff_t *shape;
    ptrdiff_t itemsize;
} pygpu_host_layout;

/* Host (any layout) -> dense device memory, through the pinned pipeline.
 * Returns when the host memory may be reused and the copies are queued.
 * *staged is 0 if the staging buffers were busy or could not be had (the
 * caller goes another way; nothing was done). */
pygpu_status pygpu_staged_h2d(pygpu_staging_ctx *c, char *dev, pygpu_host_layout host, int *staged);
/* Dense device memory -> host (any layout); returns when the host has it. */
pygpu_status pygpu_staged_d2h(pygpu_staging_ctx *c, pygpu_host_layout host, const char *dev, int *staged);
/* A device view with non-negative strides `dev_strides` (over the host
 * layout's shape) -> host: windows of the bytes it covers come down and the
 * workers gather the elements; done when this returns. */
pygpu_status pygpu_staged_d2h_view(pygpu_staging_ctx *c, pygpu_host_layout host, const char *dev,
                                   const ptrdiff_t *dev_strides, int *staged);
/* Host -> device rows: the elements (in C order) go to rows of `width`
 * bytes, `pitch` bytes apart, by 2-D copies from the staging buffers. */
pygpu_status pygpu_staged_h2d_rows(pygpu_staging_ctx *c, char *dev, ptrdiff_t pitch, ptrdiff_t width,
                                   pygpu_host_layout host, int *staged);
/* Wait for and give back the staging buffers (before a fork, at exit, or
 * when the configuration changes). */
void pygpu_staging_release(void);

/* Registers the staging pipelines' fork handler. */
void pygpu_pipeline_init(void);

#endif /* PYGPU_TRANSFER_PIPELINE_H */
