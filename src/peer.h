/*
 * peer.h -- peer access between devices (peer.c): which pairs reach each
 * other's memory, the stream-ordered pools' grants included, and whether a
 * copy between them goes direct.  Pure C, no Python calls.
 */
#ifndef PYGPU_PEER_H
#define PYGPU_PEER_H

#include "backend/rt.h"

/* Register the fork handler of peer.c's lock (module init, after the
 * transfer machinery's: the runtime is called under it, theirs are not
 * taken). */
void pygpu_peer_init(void);
/* 1 if copies from device `src` to `dst` go peer to peer: the setting
 * allows it, so does the hardware both ways, peer access and the pools'
 * grants are on (enabled here the first time), and a small copy between
 * the two pools was seen to land (checked once per pair).  0 if they are
 * staged through the host. */
int pygpu_peer_usable(int dst, int src);
/* The same, with *why set to the reason in words (a static string). */
int pygpu_peer_route(int dst, int src, const char **why);
/* Let device `dev` address `peer`'s memory: the runtime's peer access and
 * `peer`'s pool granting `dev` read and write access, both or neither
 * (remembered, so that later copies know); the runtime's status.  The
 * current device is kept. */
pygpu_status pygpu_peer_enable(int dev, int peer);
/* Undo pygpu_peer_enable, once the work queued on `dev` (which may be
 * reading `peer`'s memory) is done. */
pygpu_status pygpu_peer_disable(int dev, int peer);
/* 1 once for each pair whose check found that a peer copy wrote nothing
 * (copies between them are staged since), with *dst and *src set: the
 * caller, holding the GIL, warns.  0 when there is nothing to say. */
int pygpu_peer_lossy_pair(int *dst, int *src);
/* Forget what is known of every pair with device `dev` (after its reset,
 * which takes its peer access and its pool's grants with it): the next
 * copy of such a pair enables, grants and checks again. */
void pygpu_peer_forget(int dev);

#endif /* PYGPU_PEER_H */
