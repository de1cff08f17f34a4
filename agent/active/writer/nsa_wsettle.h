/*
 * nsa_wsettle.h - nsa_wsettle.c: how far the store has taken each lane,
 * told back to the lane's producer (nsdp_lane_settle) for the gateway's
 * defer. Below the batch pool (nsa_wbatch.c): it calls no other file of
 * the writer.
 */
#ifndef NSA_WSETTLE_H
#define NSA_WSETTLE_H

#include <stdint.h>

#include "nsa_writer.h"

/* 0, or -ENOMEM. */
int nsa_settle_init(struct nsa_writer *w);
void nsa_settle_fini(struct nsa_writer *w);

/* A burst was drained from w->lanes[lane]: its records, pushed into
 * batches until nsa_settle_close, carry its ticket. */
void nsa_settle_open(struct nsa_writer *w, unsigned int lane);
void nsa_settle_close(struct nsa_writer *w);

/* The ticket of a record pushed into a batch now (0: none), counted as
 * awaiting its acknowledgement. */
uint64_t nsa_settle_push(struct nsa_writer *w);

/* A record of ticket t was acknowledged by the store (or given up:
 * dropped). */
void nsa_settle_ack(struct nsa_writer *w, uint64_t t);

/* Tell each lane how far its records are settled: bursts whose records
 * were all acknowledged, in drain order; a burst waiting longer than
 * NSA_SETTLE_ABANDON_NS (its records held for a resend, which carries no
 * ticket) is given up and counted (settle_abandoned). */
void nsa_settle_advance(struct nsa_writer *w);

/* Whether a held packet's record (nsdp_lane_hold) was drained since the
 * last time this said so: then the open batches are sent now rather than
 * after flush_us. */
int nsa_settle_urgent(struct nsa_writer *w);

/* Whether one of the writer's lanes is a deferring producer's: the writer
 * then polls its lanes at least every NSA_SETTLE_POLL_NS when idle. */
int nsa_settle_deferring(const struct nsa_writer *w);

#endif
