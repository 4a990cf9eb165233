/*
 * dlpack_exchange.h -- the functions dlpack_exchange.c offers the files above
 * it (dlpack_exchange.c: the DLPack 1.3 C exchange API, both ways).
 */
#ifndef PYGPU_DLPACK_EXCHANGE_H
#define PYGPU_DLPACK_EXCHANGE_H

#include "pygpu.h"

/* The exchange API of type `tp` that PyGPU can consume (a
 * const DLPackExchangeAPI *), looked up once per type; NULL if none (no
 * attribute, or one that is not a usable table: the caller falls back to
 * the Python protocol), or NULL with an exception set. */
const void *pygpu_exchange_api_of(pygpu_state *st, PyTypeObject *tp);

/* `x` imported through its type's exchange table `api` (copy and target as
 * from_dlpack's; copy_host: copy host data even where it is reachable, as
 * asarray does).  NULL with an exception, or NULL with *fallback set and no
 * exception where only the Python protocol can reach the data.  New
 * reference. */
PyObject *pygpu_exchange_import(pygpu_state *st, PyObject *x, const void *api, int target, int copy, int copy_host,
                                int *fallback);

/* GPUArray's table (a const DLPackExchangeAPI *), for the C API. */
const void *pygpu_exchange_table(void);

/* Publish GPUArray's table on its type (module init). */
int pygpu_exchange_init(pygpu_state *st);

#endif /* PYGPU_DLPACK_EXCHANGE_H */
