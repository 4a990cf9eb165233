/*
 * settings_py.h -- the functions settings_py.c offers the files above it
 * (settings_py.c: the Python face of the transfer machinery: its settings
 * (transfer_config), the pinned pool's limit and statistics, and the one call
 * that readies the machinery at module init).
 */
#ifndef PYGPU_TRANSFER_SETTINGS_PY_H
#define PYGPU_TRANSFER_SETTINGS_PY_H

#include "../pygpu.h"

int pygpu_transfer_functions_init(PyObject *m);

/* Ready the transfer machinery (transfer/settings_py.c): module init. */
void pygpu_transfer_init(void);

#endif /* PYGPU_TRANSFER_SETTINGS_PY_H */
