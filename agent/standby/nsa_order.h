/*
 * nsa_order.h - where a batch stands among those the standby saw: its
 * gateway pair's epoch (fencing), its (publisher, channel) sequence (gaps and
 * late deliveries) and its send time (replays).
 */
#ifndef NSA_ORDER_H
#define NSA_ORDER_H

#include <stdint.h>

#include "ns_batch.h"

#define NSA_ORDER_MAX_PUBS 1024
#define NSA_ORDER_MAX_PAIRS 256 /* (pair, channel) */

/* The last batch seen from one publisher on one channel (named by its
 * slot). Kept across resubscriptions: a publisher's seq on a channel only
 * grows for its whole life, whichever master serves the channel, so a
 * batch at or below last is an old one delivered late. */
struct nsa_pub_seq {
	uint32_t publisher_id;
	uint16_t channel_slot;
	uint8_t rebase; /* resubscribed since: the next batch is no gap */
	uint64_t last;
	uint64_t sent_max; /* newest send time among its batches seen */
	uint64_t used; /* nsa_order.tick when last seen */
};

/* A gateway pair (gateway_id >> 8) on one channel (named by its slot)
 * and the newest epoch seen there of its gateways: both gateways of a pair
 * promote in turn on its counter, so the older active's epoch is fenced by
 * the newer's, whichever node. Per channel: a promotion's fence closes
 * the old active's connection on a master before the new active writes
 * there, so on one channel every batch of the old epoch comes before the
 * first of the new; across channels nothing orders them, and a batch the
 * old active published before the fence may arrive after the new
 * active's first on another channel. */
struct nsa_pair_epoch {
	uint32_t pair;
	uint16_t channel_slot;
	uint32_t epoch;
	/* The last older epoch told (NSA_ORDER_FENCED_NEW). */
	uint32_t reported;
};

struct nsa_order {
	struct nsa_pub_seq pubs[NSA_ORDER_MAX_PUBS];
	unsigned int n_pubs;
	uint64_t tick;
	/* The newest send time of a (publisher, channel) forgotten to make
	 * room: a batch of one not in pubs sent at or before it may be a
	 * batch of a forgotten one, and is refused. */
	uint64_t forgotten_ns;
	struct nsa_pair_epoch pairs[NSA_ORDER_MAX_PAIRS];
	unsigned int n_pairs;
	/* After NSA_SEQ_GAP: the first seq missed (the batches gap_from ..
	 * the batch's seq - 1 did not come). */
	uint64_t gap_from;
};

enum nsa_seq_verdict { NSA_SEQ_NEXT, NSA_SEQ_GAP, NSA_SEQ_STALE };

/* For a batch received on the channel of channel_slot: 0 to apply, -1
 * to drop it as from an older epoch of its gateway pair than one seen on
 * that channel, NSA_ORDER_FENCED_NEW (also a drop) for the first batch of
 * that older epoch since the last one reported: *known is then the pair's
 * epoch there, to be told. NSA_ORDER_ROSE (to apply) for the first batch
 * of an epoch above the pair's there: *known is the one it replaces. Its
 * active fenced the older ones before it wrote, so they send nothing more
 * on that channel; what they wrote there and never published is in the
 * store. A pair's first batch on a channel is 0. */
#define NSA_ORDER_FENCED_NEW (-2)
#define NSA_ORDER_ROSE 1
int nsa_order_epoch(struct nsa_order *o, uint16_t channel_slot,
		    const struct ns_batch_hdr *h, uint32_t *known);

/* Where a batch received on the channel of channel_slot stands in its
 * sequence (and remember it unless stale). A batch sent (h->sent_ns, a
 * version 2 header) before not_before_ns is stale: the subscription it
 * came by began after it was sent, less the clock slack. loaded: the
 * channel's master was loaded since it was subscribed and no load of it is
 * running, so a publisher's first batch there must be its seq 1. */
enum nsa_seq_verdict nsa_order_seq(struct nsa_order *o, uint16_t channel_slot,
				   const struct ns_batch_hdr *h,
				   uint64_t not_before_ns, int loaded);

/* Every channel was resubscribed (and will be loaded): no gap next. */
void nsa_order_rebase(struct nsa_order *o);

/* The store lost pair's counter and a new active took a lower epoch:
 * take epoch as the pair's on every channel, so that its batches of epoch
 * and above are applied again. */
void nsa_order_epoch_reset(struct nsa_order *o, uint32_t pair, uint32_t epoch);

#endif
