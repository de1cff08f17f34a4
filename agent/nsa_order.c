/*
 * nsa_order.c - the standby's fencing and sequence state.
 *
 * Invariants:
 * - A gateway's epoch only grows here; a batch below it is fenced.
 * - A (publisher, channel) sequence only grows; a batch at or below it is
 *   stale, one past it by more than one is a gap - except the first after
 *   a resubscription, which a load covers.
 * - A sequence starts at 1 (schema/FORMAT.md). The first batch seen of a
 *   (publisher, channel) is a gap when its seq is past 1 and the channel's
 *   load is done; while a load is running or still to come, it covers
 *   what came before.
 *
 * Not here: what a gap or a stale batch leads to (nsa_standby.c). The
 * tables are bounded: when full they are forgotten, which can only cost a
 * missed fence or stale check, or a needless resync.
 */
#include "nsa_order.h"

int nsa_order_epoch(struct nsa_order *o, const struct ns_batch_hdr *h)
{
	unsigned int i;

	for (i = 0; i < o->n_gws; i++) {
		if (o->gws[i].gateway_id != h->gateway_id)
			continue;
		if (h->epoch < o->gws[i].epoch)
			return -1;
		o->gws[i].epoch = h->epoch;
		return 0;
	}
	if (o->n_gws == NSA_ORDER_MAX_GATEWAYS)
		o->n_gws = 0; /* forget everything rather than fence wrongly */
	o->gws[o->n_gws++] = (struct nsa_gw_epoch){.gateway_id = h->gateway_id,
						   .epoch = h->epoch};
	return 0;
}

enum nsa_seq_verdict nsa_order_seq(struct nsa_order *o, uint16_t channel_slot,
				   const struct ns_batch_hdr *h, int loaded)
{
	struct nsa_pub_seq *p = NULL;
	enum nsa_seq_verdict v;
	unsigned int i;

	for (i = 0; i < o->n_pubs; i++) {
		if (o->pubs[i].publisher_id == h->publisher_id &&
		    o->pubs[i].channel_slot == channel_slot) {
			p = &o->pubs[i];
			break;
		}
	}
	if (!p) {
		if (o->n_pubs == NSA_ORDER_MAX_PUBS)
			o->n_pubs = 0;
		p = &o->pubs[o->n_pubs++];
		*p = (struct nsa_pub_seq){.publisher_id = h->publisher_id,
					  .channel_slot = channel_slot,
					  .last = h->seq};
		/* The subscription was in place before this master's load
		 * began: what the publisher sent before the load was in the
		 * store when the load read it, what it sent since should have
		 * reached us. A publisher silent on the channel for the whole
		 * load and back later costs one needless resync. */
		return loaded && h->seq > 1 ? NSA_SEQ_GAP : NSA_SEQ_NEXT;
	}
	/* Already seen, or older than what was: a master cut off from its
	 * cluster hands its channel's messages over the cluster bus to the
	 * master that replaced it once the two meet again, long after the
	 * writers replayed those records and moved on. */
	if (h->seq <= p->last)
		return NSA_SEQ_STALE;
	v = !p->rebase && h->seq > p->last + 1 ? NSA_SEQ_GAP : NSA_SEQ_NEXT;
	p->rebase = 0;
	p->last = h->seq;
	return v;
}

void nsa_order_rebase(struct nsa_order *o)
{
	unsigned int i;

	for (i = 0; i < o->n_pubs; i++)
		o->pubs[i].rebase = 1;
}
