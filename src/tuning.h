/*
 * tuning.h -- every tuned constant of PyGPU's C code in one place: the
 * sizes, counts, thresholds and windows chosen by measurement, each with
 * its reason in a line and the section of docs/performance.md that keeps
 * the runs behind it.  Bounds that are no choice (array capacities, the
 * vendors' limits) stay with their code.  Pure preprocessor: any file,
 * on any floor, may include it.
 */
#ifndef PYGPU_TUNING_H
#define PYGPU_TUNING_H

#include <stddef.h>

/* ---- the staging pipeline's default settings (transfer/settings.c) ---- */

/* Bytes per staging buffer: big enough that the link runs at full speed. See performance.md#staging-buffers */
#define PYGPU_STAGING_CHUNK ((size_t)16 << 20)
/* Staging buffers in flight: the host copy of one overlaps the DMA of the next. See performance.md#staging-buffers */
#define PYGPU_STAGING_DEPTH 4
/* Copy threads leave one core in this many to the runtime and the system. See performance.md#threads */
#define PYGPU_THREADS_SPARE 4
/* Copy threads at most: more lost for mid-size transfers. See performance.md#threads */
#define PYGPU_THREADS_MAX 16
/* A big transfer alone in the process leaves one core in this many. See performance.md#threads-alone */
#define PYGPU_THREADS_ALONE_SPARE 8
/* And takes at most this many threads. See performance.md#threads-alone */
#define PYGPU_THREADS_ALONE_MAX 16
/* Pageable copies from this size are staged on a GPU (smaller: the runtime's way). See performance.md#staged-from */
#define PYGPU_STAGE_MIN ((size_t)32 << 10)
/* Staging buffers of an upload that starts while another transfer is at work. See performance.md#crowded-lanes */
#define PYGPU_CROWD_UP ((size_t)2 << 20)
/* The same for a download: smaller buffers lost going down. See performance.md#crowded-lanes */
#define PYGPU_CROWD_DOWN ((size_t)8 << 20)
/* A crowded upload copies on one core in this many, leaving cores to the other. See performance.md#crowded-uploads */
#define PYGPU_CROWD_THREADS_SHARE 3
/* Hosts with fewer cores keep every upload's thread count. See performance.md#crowded-uploads */
#define PYGPU_CROWD_CORES_MIN 6

/* ---- the staging pipeline's fixed choices ---- */

/* Synchronous uploads of at most this many bytes (1, 2, 4, 8 or 16) of pageable memory go in a kernel's arguments. See performance.md#small-uploads-by-launch */
#define PYGPU_LAUNCH_MAX 16
/* Copies down of at most this many bytes bounce through one page-locked block. See performance.md#bounce */
#define PYGPU_BOUNCE_MAX 4096
/* Staged transfers of at most this many bytes are copied by their caller alone. See performance.md#solo-copies */
#define PYGPU_SOLO_MAX ((size_t)64 << 10)
/* Upload runs from this size are written with non-temporal stores. See performance.md#non-temporal-stores */
#define PYGPU_STREAM_MIN 4096
/* ... in chunks of at most this size (plain stores won for bigger ones). See performance.md#non-temporal-stores */
#define PYGPU_STREAM_MAX_CHUNK ((ptrdiff_t)8 << 20)
/* A host copy is cut into up to this many parts per thread, claimed one at a time. See performance.md#parts */
#define PYGPU_PARTS_PER_THREAD 4
/* ... each of at least this many bytes. See performance.md#parts */
#define PYGPU_PART_MIN ((ptrdiff_t)32 << 10)
/* The last-level cache's size where the system does not say. See performance.md#streaming-stores-down */
#define PYGPU_CACHE_BYTES_GUESS ((size_t)32 << 20)
/* A synchronous DMA of page-locked memory this big or bigger goes in pieces... See performance.md#dma-pieces */
#define PYGPU_DMA_PIECES_FROM ((size_t)16 << 20)
/* ... of this many bytes... See performance.md#dma-pieces */
#define PYGPU_DMA_PIECE ((size_t)4 << 20)
/* ... at most this many queued at a time, so that another transfer waits for a piece, not for all. See performance.md#dma-pieces */
#define PYGPU_DMA_QUEUED 2
/* Host buffers that synchronous transfers of at least so many bytes meet again are page-locked in place. See performance.md#registered-in-place */
#define PYGPU_REGISTER_MIN ((size_t)1 << 20)
/* ... once these many bytes have moved through them (a second meeting at least), so a registration pays back. See performance.md#registered-in-place */
#define PYGPU_REGISTER_MOVED ((size_t)64 << 20)
/* Buffers page-locked in place at once, at most. See performance.md#registered-in-place */
#define PYGPU_REGISTER_SLOTS 64
/* Buffers met once that are remembered for a second meeting. See performance.md#registered-in-place */
#define PYGPU_REGISTER_SEEN 16
/* Asynchronous copies of one registered buffer whose events are kept till it is let go; more: the oldest waited for. See performance.md#registered-in-place */
#define PYGPU_REGISTER_QUEUED 8
/* On a GPU backend, host buffers page-locked in place take at most this share of physical memory by default. See performance.md#registered-in-place */
#define PYGPU_REGISTER_SHARE 8
/* Destinations this big may be fresh from the kernel: the workers fault in. See performance.md#fresh-destinations */
#define PYGPU_FRESH_MIN ((size_t)32 << 20)
/* Each worker's share of a fault-in is at least this big. See performance.md#fresh-destinations */
#define PYGPU_PREFAULT_PART_MIN ((size_t)4 << 20)
/* DMA calls of a whole-buffer transfer, at most: each call costs the link time. See performance.md#whole-buffers */
#define PYGPU_WHOLE_CHUNKS 32
/* A whole-buffer download queues its DMAs this many windows ahead at first ... See performance.md#whole-buffers */
#define PYGPU_WHOLE_AHEAD_FIRST 2
/* ... then this many while the workers copy each window out. See performance.md#whole-buffers */
#define PYGPU_WHOLE_AHEAD 4
/* Windows are no smaller than a quarter of the transfer up to this size. See performance.md#mid-size-windows */
#define PYGPU_MID_WINDOW ((size_t)1 << 20)
/* ... nor smaller than this. See performance.md#mid-size-windows */
#define PYGPU_MIN_WINDOW ((size_t)512 << 10)
/* The quarter above: windows are at least this-th of the transfer, to 1 MiB. See performance.md#mid-size-windows */
#define PYGPU_MID_WINDOW_SHARE 4
/* A transfer goes in this many windows per staging buffer, to overlap. See performance.md#mid-size-windows */
#define PYGPU_WINDOWS_PER_BUFFER 2
/* A transfer's first and last chunks (mid-size ones: PYGPU_MIN_WINDOW): the first copy and last DMA overlap nothing. See performance.md#first-chunk */
#define PYGPU_FIRST_CHUNK ((ptrdiff_t)256 << 10)
/* Downloads land a slot further round the buffers each time, slots of this. See performance.md#download-slots */
#define PYGPU_DOWN_SLOT ((ptrdiff_t)64 << 10)
/* An upload alone through the ring writes chunks above this in plain stores. See performance.md#plain-stores-alone */
#define PYGPU_PLAIN_MIN ((ptrdiff_t)2 << 20)
/* Uploads of fewer bytes are not worth a background task. See performance.md#background-uploads */
#define PYGPU_BG_MIN ((size_t)1 << 20)

/* ---- the background (transfer/background.c, background_up.c, background_down.c) ---- */

/* An upload's chunks, at most: each costs the caller two calls on the stream. See performance.md#background-chunks */
#define PYGPU_BG_CHUNKS 256
/* Bytes of an upload's chunk: 4 MiB came no sooner and doubled the call. See performance.md#background-chunks */
#define PYGPU_BG_UP_CHUNK ((ptrdiff_t)8 << 20)
/* Smaller transfers go in this many chunks: the first copy is time added. See performance.md#background-chunks */
#define PYGPU_BG_SMALL_CHUNKS 4
/* A download's chunks into a whole block, at most: each has an event. See performance.md#background-chunks */
#define PYGPU_BG_DOWN_CHUNKS 32
/* Bytes of a download's chunk into a whole block (4 and 8 MiB came alike). See performance.md#background-chunks */
#define PYGPU_BG_DOWN_CHUNK ((ptrdiff_t)8 << 20)
/* A ring's block holds this many chunks, each DMA in lines still cached. See performance.md#background-rings */
#define PYGPU_BG_RING_SLOTS 4
/* Bytes of a ring's chunk, at most: plain stores into a small ring won. See performance.md#background-rings */
#define PYGPU_BG_RING_CHUNK ((ptrdiff_t)16 << 20)
/* Chunks of a transfer through a ring, at most (a 128th of one over 2 GiB). See performance.md#background-rings */
#define PYGPU_BG_RING_CHUNKS 128
/* A smaller transfer goes round its ring this many times (4 slots: eighths). See performance.md#background-rings */
#define PYGPU_BG_RING_LAPS 2
/* Upload counters in use at once, at most; then host functions gate uploads. See performance.md#background-waits */
#define PYGPU_BG_COUNTERS 1024
/* A background thread looks this many times at a counter before it naps. See performance.md#background-waits */
#define PYGPU_BG_SPINS 64
/* ... each nap this many nanoseconds. See performance.md#background-waits */
#define PYGPU_BG_NAP_NS 20000
/* Tasks not yet over that a reaper call looks past, at most: bounded work. See performance.md#background-waits */
#define PYGPU_BG_REAP_LOOK_PAST 8

/* ---- between devices (transfer/cross.c) ---- */

/* Copies between devices not in reach go in sixteenths: both legs busy. See performance.md#between-devices */
#define PYGPU_CROSS_PARTS 16
/* ... of this many bytes at least. See performance.md#between-devices */
#define PYGPU_CROSS_CHUNK_MIN ((size_t)1 << 20)

/* ---- the copy planner (src/copy/) ---- */

/* Runtime calls worth issuing for one copy straight between two layouts. See performance.md#direct-copies */
#define PYGPU_DIRECT_CALLS_MAX 64
/* Rows this wide go straight between page-locked (or small) memory and a GPU. See performance.md#direct-copies */
#define PYGPU_DIRECT_ROW_MIN 512
/* Narrower rows stay with the host: the device moves 1- and 2-byte rows slowly. See performance.md#narrow-rows */
#define PYGPU_NARROW_MIN 4
/* Narrower rows are narrow; from this width runtime copies gather rows well. See performance.md#narrow-rows */
#define PYGPU_NARROW_LIMIT 64
/* A view covering over this many times its bytes is sparse: copies gather it. See performance.md#narrow-rows */
#define PYGPU_SPARSE_RATIO 4
/* Narrow rows going up are scattered in calls of this many bytes at least. See performance.md#scatter-up */
#define PYGPU_SCATTER_MIN ((size_t)1 << 20)
/* Narrow rows going down, not staged, are gathered in pieces from this size. See performance.md#gather-down */
#define PYGPU_GATHER_MIN ((size_t)1 << 20)
/* A gather's pieces: one per this many bytes ... See performance.md#gather-down */
#define PYGPU_GATHER_PIECE_MIN ((size_t)1 << 20)
/* ... up to this many pieces ... See performance.md#gather-down */
#define PYGPU_GATHER_FEW 4
/* ... then pieces of this many bytes or more ... See performance.md#gather-down */
#define PYGPU_GATHER_PIECE ((size_t)4 << 20)
/* ... and this many pieces at most: each costs microseconds. See performance.md#gather-down */
#define PYGPU_GATHER_PIECES 16
/* The transpose kernel takes a copy whose two tile axes are this long at least. See performance.md#transpose-tiles */
#define PYGPU_TILE_MIN 8
/* ... and an axis of strides up to this many elements counts as contiguous. See performance.md#transpose-tiles */
#define PYGPU_TILE_NEAR 2

/* ---- lanes, workers, pools ---- */

/* Transfers staged at once to one device; the next waits. See performance.md#lanes */
#define PYGPU_LANES_PER_DEVICE 8
/* A device's second idle lane keeps its buffers this long (seconds). See performance.md#lanes */
#define PYGPU_LANE_IDLE_S 1.0
/* Workers spin this many rounds after a job before they sleep (waking one is slow). See performance.md#worker-spin */
#define PYGPU_SPIN_ROUNDS 20000
/* ... pausing without yielding for this many of them. See performance.md#worker-spin */
#define PYGPU_PAUSE_ROUNDS 2000
/* get()'s arrays of this size or more come from the pinned pool. See performance.md#pooled-get */
#define PYGPU_POOLED_GET_MIN ((size_t)1 << 20)
/* The pinned pool holds at most the physical memory over this, by default. See performance.md#pinned-pool */
#define PYGPU_PINNED_LIMIT_SHARE 4
/* ... or this, where the system does not say its memory. See performance.md#pinned-pool */
#define PYGPU_PINNED_LIMIT_GUESS ((size_t)1 << 30)
/* Pinned blocks from this size are rounded to it, smaller ones to the next. See performance.md#pinned-pool */
#define PYGPU_PINNED_GRAIN_BIG ((size_t)1 << 20)
/* ... so that requests of about one size share blocks. See performance.md#pinned-pool */
#define PYGPU_PINNED_GRAIN ((size_t)4 << 10)
/* Blocks kept for reuse on the legacy stream, per module. See performance.md#block-cache */
#define PYGPU_CACHE_SLOTS 16
/* ... each of at most this many bytes. See performance.md#block-cache */
#define PYGPU_CACHE_MAX_BLOCK ((size_t)64 << 10)

/* ---- the backends ---- */

/* Blocks per multiprocessor of PyGPU's own kernels (of 256 threads: a full SM). See performance.md#kernel-grid */
#define PYGPU_BLOCKS_PER_SM 8
/* The host backend pools freed blocks of this size or more. See performance.md#host-pool */
#define PYGPU_HOST_POOL_MIN ((size_t)1 << 20)
/* ... rounded up to this grain. See performance.md#host-pool */
#define PYGPU_HOST_POOL_GRAIN ((size_t)64 << 10)
/* ... at most this many blocks. See performance.md#host-pool */
#define PYGPU_HOST_POOL_SLOTS 32
/* ... and this many bytes unless PYGPU_HOST_POOL says. See performance.md#host-pool */
#define PYGPU_HOST_POOL_DEFAULT ((size_t)1 << 30)
/* A pooled block serves a request up to 1/N of the request smaller. See performance.md#host-pool */
#define PYGPU_HOST_POOL_FIT 8

#endif /* PYGPU_TUNING_H */
