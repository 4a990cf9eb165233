/*
 * ipc.h -- the functions ipc.c offers the files above it (ipc.c: device
 * memory shared between processes: mem_get_ipc_handle and the
 * IPCMemoryHandle type).
 */
#ifndef PYGPU_IPC_H
#define PYGPU_IPC_H

#include "pygpu.h"

/* Add IPCMemoryHandle and mem_get_ipc_handle to module `m`. */
int pygpu_ipc_init(PyObject *m);

#endif /* PYGPU_IPC_H */
