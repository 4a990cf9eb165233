/*
 * settings.h -- the transfer machinery's settings (settings.c): chunk size,
 * depth, threads, the staging threshold, the peer rule and the staging
 * buffers' placement, set from Python through transfer_config
 * (settings_py.c).  Pure C, process-wide, locked.
 */
#ifndef PYGPU_TRANSFER_SETTINGS_H
#define PYGPU_TRANSFER_SETTINGS_H

#include <stddef.h>

#include "../tuning.h"          /* (PYGPU_BOUNCE_MAX and PYGPU_SOLO_MAX, for the planner too) */

#define PYGPU_MAX_DEPTH 16      /* staging buffers, at most */
#define PYGPU_MAX_THREADS 64    /* host threads of one copy, at most */

/* PYGPU_BOUNCE_MAX: copies down into pageable memory of at most so many
 * bytes bounce through a page-locked block; PYGPU_SOLO_MAX: staged
 * transfers of at most so many are copied by their caller alone (tuning.h). */

typedef struct {
    size_t chunk;               /* bytes per staging buffer */
    int depth;                  /* staging buffers in flight */
    int threads;                /* host threads copying each chunk (1 = the caller alone) */
    int threads_alone;          /* the same, for a transfer bigger than the staging buffers
                                 * while no other is at work in the process (0: threads) */
    size_t min_bytes;           /* smaller pageable copies go the runtime's own way */
    int peer;                   /* copies between devices go peer to peer where the
                                 * hardware allows (else staged through the host) */
    size_t crowd_up, crowd_down;        /* bytes per staging buffer, at most, of an upload
                                         * (download) that starts while another transfer is
                                         * at work on its device (0: chunk) */
    int crowd_threads;          /* host threads copying each chunk of an upload while another
                                 * transfer is at work on its device (0: threads) */
    size_t register_limit;      /* bytes of the users' host buffers page-locked in place, at most
                                 * (registered.c; 0: none) */
    int numa;                   /* PyGPU's page-locked blocks for a device lie on its NUMA node,
                                 * where the host tells it (pinned_pool.c) */
} pygpu_transfer_config;

void pygpu_transfer_config_get(pygpu_transfer_config *c);
/* The threads for an upload's next chunk (c->threads, the transfer's own):
 * fewer while its lane is `crowded` (crowd_threads). */
int pygpu_upload_threads(const pygpu_transfer_config *c, int crowded);
/* Set them, clamped to their ranges (the caller releases the staging
 * buffers of the old size: pygpu_staging_release). */
void pygpu_transfer_config_set(const pygpu_transfer_config *c);
/* The host threads that copy a transfer of `bytes` under settings c, where
 * `alone` says whether no other staged transfer is at work in the
 * process: threads_alone for one bigger than the staging buffers alone
 * (docs/performance.md: threads for a transfer alone), the caller only
 * for one of PYGPU_SOLO_MAX bytes or less, else threads. */
int pygpu_transfer_threads(const pygpu_transfer_config *c, size_t bytes, int alone);

/* Registers the settings' fork handler (its lock held over fork). */
void pygpu_settings_init(void);

#endif /* PYGPU_TRANSFER_SETTINGS_H */
