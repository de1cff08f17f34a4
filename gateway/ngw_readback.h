/*
 * ngw_readback.h - natsync-gateway's read-back of the store after a
 * promotion on a provisional epoch (ngw_readback.c): what the old active
 * wrote and never announced, taken into the table once the store answers.
 * Private to the program; every call on the control thread.
 */
#ifndef NGW_READBACK_H
#define NGW_READBACK_H

#include <stdint.h>

#include "ngw_gw.h"

/* Provisional epoch epoch was made known to the store at t: read the
 * store back once this gateway's queued records reached it. */
void gw_readback_due(struct gw *g, uint32_t epoch, double t);

/* At every loop: start the read-back when due, end it when done. */
void gw_readback_poll(struct gw *g, double t);

/* A demotion or the exit: stop the read-back (its thread joined). */
void gw_readback_stop(struct gw *g);

#endif
