/*
 * nsa_wbatch.h - nsa_wbatch.c: a writer's batch pool, its segments in
 * flight and the end of a batch. The bottom of the writer's stack
 * (nsa_writer.h): it calls no other file of the writer.
 */
#ifndef NSA_WBATCH_H
#define NSA_WBATCH_H

#include <stdint.h>

#include "nsa_writer.h"

/* The most records a batch holds: [active] batch_size times
 * NSA_BATCH_GROW, NS_BATCH_MAX_RECORDS at most (nsa_batch_push). */
unsigned int nsa_batch_cap(const struct nsa_writer *w);
/* An empty batch, opened now with the next wseq; NULL without memory. */
struct nsa_batch *nsa_batch_get(struct nsa_writer *w);
void nsa_batch_put(struct nsa_writer *w, struct nsa_batch *b);
void nsa_batch_free_all(struct nsa_writer *w);
/* Keep b for the resend (w->held); -ENOMEM. */
int nsa_batch_hold(struct nsa_writer *w, struct nsa_batch *b);
/* No reply is due for b any more: count it acknowledged and keep it in
 * the replay window, or hold it for the resend in retry mode. */
void nsa_batch_finalize(struct nsa_writer *w, struct nsa_batch *b);
/* n records given up for want of memory (flags: NSA_REC_* each, or NULL
 * for records new from a lane): replays and corrections leave their
 * counts, the rest are counted dropped. Returns how many were dropped. */
unsigned int nsa_records_lost(struct nsa_writer *w, const uint8_t *flags,
			      unsigned int n);

/* Log layout: b's segment is about to be signed and sent. */
void nsa_seg_track(struct nsa_writer *w, struct nsa_batch *b);
/* b's segment was answered, or its connection lost. */
void nsa_seg_untrack(struct nsa_writer *w, struct nsa_batch *b);

/* Log layout: the master of channel slot took a segment: the batches it
 * refused before are due for their rewrite. */
void nsa_log_lost_taken(struct nsa_writer *w, uint16_t slot);

/* Let acknowledgements older than replay_ms leave the replay window. */
void nsa_writer_replay_trim(struct nsa_writer *w);

#endif
