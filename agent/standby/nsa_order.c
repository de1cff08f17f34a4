/*
 * nsa_order.c - the standby's fencing and sequence state.
 *
 * Invariants:
 * - A gateway pair's epoch on a channel only grows here (but by
 *   nsa_order_epoch_reset, when the store lost the pair's counter); a
 *   batch below it on that channel is fenced, the first above it is told
 *   (NSA_ORDER_ROSE): a new active fenced the older ones there.
 * - A (publisher, channel) sequence only grows; a batch at or below it is
 *   stale, one past it by more than one is a gap - except the first after
 *   a resubscription, which a load covers.
 * - A sequence starts at 1 (schema/FORMAT.md). The first batch seen of a
 *   (publisher, channel) is a gap when its seq is past 1 and the channel's
 *   load is done; while a load is running or still to come, it covers
 *   what came before.
 * - Replays: a batch (version 2) sent before its subscription began, less
 *   the clock slack, is stale: the standby missed it, and the load read
 *   what it wrote. Sequences are never wiped: when the table is full the
 *   least recently seen (publisher, channel) is forgotten and its newest
 *   send time kept as forgotten_ns, below which a batch of an unknown
 *   (publisher, channel) is stale. So a signed batch is applied at most
 *   once, except one sent within the slack before a subscription and
 *   replayed before its publisher's next batch on that channel.
 *
 * Not here: what a gap or a stale batch leads to (nsa_standby.c). The
 * epoch table is bounded: when full it is forgotten, which can only cost a
 * missed fence, never a wrong one.
 */
#include "nsa_order.h"

int nsa_order_epoch(struct nsa_order *o, uint16_t channel_slot,
		    const struct ns_batch_hdr *h, uint32_t *known)
{
	const uint32_t pair = h->gateway_id >> 8;
	unsigned int i;

	for (i = 0; i < o->n_pairs; i++) {
		struct nsa_pair_epoch *g = &o->pairs[i];

		if (g->pair != pair || g->channel_slot != channel_slot)
			continue;
		if (h->epoch < g->epoch) {
			if (g->reported == h->epoch)
				return -1;
			g->reported = h->epoch;
			*known = g->epoch;
			return NSA_ORDER_FENCED_NEW;
		}
		if (h->epoch > g->epoch) {
			*known = g->epoch;
			g->epoch = h->epoch;
			return NSA_ORDER_ROSE;
		}
		return 0;
	}
	/* Full: forget everything rather than fence wrongly. */
	if (o->n_pairs == NSA_ORDER_MAX_PAIRS)
		o->n_pairs = 0;
	o->pairs[o->n_pairs++] = (struct nsa_pair_epoch){
		.pair = pair, .channel_slot = channel_slot, .epoch = h->epoch};
	return 0;
}

void nsa_order_epoch_reset(struct nsa_order *o, uint32_t pair, uint32_t epoch)
{
	for (unsigned int i = 0; i < o->n_pairs; i++)
		if (o->pairs[i].pair == pair) {
			o->pairs[i].epoch = epoch;
			o->pairs[i].reported = 0;
		}
}

/* Room for one more (publisher, channel): a free entry, or the least
 * recently seen one, forgotten. */
static struct nsa_pub_seq *pub_slot(struct nsa_order *o)
{
	struct nsa_pub_seq *old;
	unsigned int i;

	if (o->n_pubs < NSA_ORDER_MAX_PUBS)
		return &o->pubs[o->n_pubs++];
	old = &o->pubs[0];
	for (i = 1; i < NSA_ORDER_MAX_PUBS; i++)
		if (o->pubs[i].used < old->used)
			old = &o->pubs[i];
	if (old->sent_max > o->forgotten_ns)
		o->forgotten_ns = old->sent_max;
	return old;
}

enum nsa_seq_verdict nsa_order_seq(struct nsa_order *o, uint16_t channel_slot,
				   const struct ns_batch_hdr *h,
				   uint64_t not_before_ns, int loaded)
{
	const int timed = h->version != NS_BATCH_V1;
	struct nsa_pub_seq *p = NULL;
	enum nsa_seq_verdict v;
	unsigned int i;

	if (timed && h->sent_ns < not_before_ns)
		return NSA_SEQ_STALE;
	for (i = 0; i < o->n_pubs; i++) {
		if (o->pubs[i].publisher_id == h->publisher_id &&
		    o->pubs[i].channel_slot == channel_slot) {
			p = &o->pubs[i];
			break;
		}
	}
	if (!p) {
		if (timed && h->sent_ns <= o->forgotten_ns)
			return NSA_SEQ_STALE;
		p = pub_slot(o);
		*p = (struct nsa_pub_seq){.publisher_id = h->publisher_id,
					  .channel_slot = channel_slot,
					  .last = h->seq,
					  .sent_max = h->sent_ns,
					  .used = ++o->tick};
		/* The subscription was in place before this master's load
		 * began: what the publisher sent before the load was in the
		 * store when the load read it, what it sent since should have
		 * reached us. A publisher silent on the channel for the whole
		 * load and back later costs one needless resync. */
		o->gap_from = 1;
		return loaded && h->seq > 1 ? NSA_SEQ_GAP : NSA_SEQ_NEXT;
	}
	/* Already seen, or older than what was: a master cut off from its
	 * cluster hands its channel's messages over the cluster bus to the
	 * master that replaced it once the two meet again, long after the
	 * writers replayed those records and moved on. */
	if (h->seq <= p->last)
		return NSA_SEQ_STALE;
	v = !p->rebase && h->seq > p->last + 1 ? NSA_SEQ_GAP : NSA_SEQ_NEXT;
	o->gap_from = p->last + 1;
	p->rebase = 0;
	p->last = h->seq;
	if (h->sent_ns > p->sent_max)
		p->sent_max = h->sent_ns;
	p->used = ++o->tick;
	return v;
}

void nsa_order_rebase(struct nsa_order *o)
{
	unsigned int i;

	for (i = 0; i < o->n_pubs; i++)
		o->pubs[i].rebase = 1;
}
