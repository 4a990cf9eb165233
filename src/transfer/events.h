/*
 * events.h -- events kept for reuse, per device (events.c).  Pure C,
 * callable with the GIL released.
 *
 * A copy between devices orders itself after the source device's work
 * with an event, and made and destroyed each time the pair of calls cost
 * half a microsecond (docs/performance.md#between-devices-call-by-call).
 */
#ifndef PYGPU_TRANSFER_EVENTS_H
#define PYGPU_TRANSFER_EVENTS_H

#include "../backend/rt.h"

/* An event of device `dev` (the current device), timing off: one given
 * back earlier, or a new one. */
pygpu_status pygpu_event_take(int dev, pygpu_event_t *e);
/* Give back event `e` of `dev`, taken above, once the caller is done with
 * it: no call of its own will query it, synchronize on it or queue a wait
 * on it again (waits queued already are not disturbed when it is recorded
 * again: each waits for the record before it).  Kept, or destroyed when
 * enough are kept. */
void pygpu_event_give(int dev, pygpu_event_t e);
/* How many events of `dev` are kept (for tests). */
int pygpu_events_kept(int dev);
/* Destroy every event kept (before a device reset). */
void pygpu_events_release(void);
/* Register the fork handler (module init). */
void pygpu_events_init(void);

#endif /* PYGPU_TRANSFER_EVENTS_H */
