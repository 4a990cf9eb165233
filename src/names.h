/*
 * names.h -- the functions names.c offers the files above it (names.c: the
 * module's interned names and constant values (the CUDA Array Interface's
 * keys, the protocols' attribute names, __dlpack__'s keyword names, the
 * typestr of each dtype...), made once per module into the named fields of
 * pygpu_state.names, so that the hot paths of the interop files and of stream
 * arguments build no string).
 */
#ifndef PYGPU_NAMES_H
#define PYGPU_NAMES_H

#include "pygpu.h"

/* Make st->names (module init); 0, or -1 with an exception set. */
int pygpu_names_init(pygpu_state *st);
int pygpu_names_visit(pygpu_state *st, visitproc visit, void *arg);
void pygpu_names_clear(pygpu_state *st);

#endif /* PYGPU_NAMES_H */
