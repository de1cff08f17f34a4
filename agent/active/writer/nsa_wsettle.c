/*
 * nsa_wsettle.c - the settle ledger: for each burst a writer drained from
 * a lane, the records of it that are in batches and not yet acknowledged.
 * Once every record of a burst and of every burst drained before it is
 * acknowledged, the lane is told (nsdp_lane_settle) up to the burst's end,
 * and a gateway with defer on lets go of the first packets of the
 * sessions those records created (dataplane/nat/nsdp_nat.h).
 *
 * A producer that holds packets says which record it waits for
 * (nsdp_lane_hold): the writer then sends the batches holding it at once
 * instead of after flush_us (nsa_settle_urgent), and polls its lanes
 * often while idle (nsa_settle_deferring).
 *
 * Invariants:
 * - Entries are in drain order; a lane's settled count only rises, and
 *   never passes a record that was pushed into a batch and neither
 *   acknowledged nor given up.
 * - A ticket names one entry for its life: an entry given up and its slot
 *   reused does not take the acknowledgements of the old one.
 * - A record that never enters a batch (fenced) awaits nothing.
 *
 * Given up, counted in settle_abandoned: a burst waiting longer than
 * NSA_SETTLE_ABANDON_NS (its records were held for a resend after a
 * failure: the resend carries no ticket). That lets go of no packet that
 * still waits: defer lets a packet go after defer_max_us at most, less
 * than the time a burst waits to be given up. A full ledger merges the new
 * burst into the newest entry of the same lane (which then settles later,
 * never earlier); only with writers of several lanes does it give up the
 * oldest. One writer's lanes share the ledger, so one lane's stuck burst
 * holds back the others' until it is given up.
 */
#include <errno.h>
#include <stdlib.h>

#include "nsa_wsettle.h"
#include "nsdp_lane.h"

static struct nsa_settle_entry *entry(struct nsa_writer *w, uint64_t id)
{
	return &w->settle[id % NSA_SETTLE_LEDGER];
}

int nsa_settle_init(struct nsa_writer *w)
{
	w->settle = calloc(NSA_SETTLE_LEDGER, sizeof(*w->settle));
	if (w->settle == NULL)
		return -ENOMEM;
	/* Ticket 0 means none. */
	w->settle_head = w->settle_tail = 1;
	w->ticket = 0;
	return 0;
}

void nsa_settle_fini(struct nsa_writer *w)
{
	free(w->settle);
	w->settle = NULL;
}

/* The oldest entry leaves: its lane is settled up to its end. */
static void settle_pop(struct nsa_writer *w, int abandoned)
{
	struct nsa_settle_entry *e = entry(w, w->settle_head);

	if (abandoned)
		W_STAT_ADD(w, settle_abandoned, 1);
	nsdp_lane_settle(w->lanes[e->lane], e->end);
	e->id = 0;
	w->settle_head++;
}

void nsa_settle_open(struct nsa_writer *w, unsigned int lane)
{
	struct nsa_settle_entry *e;

	if (w->settle_tail - w->settle_head >= NSA_SETTLE_LEDGER) {
		/* Full: the newest entry takes this burst too (it settles
		 * later, never earlier than its records). */
		e = entry(w, w->settle_tail - 1);
		if (e->lane == lane) {
			e->open = 1;
			e->end = NSDP_STAT_READ(w->lanes[lane]->drained);
			w->ticket = e->id;
			return;
		}
		/* Another lane's: the oldest is given up to make room. */
		settle_pop(w, 1);
	}
	e = entry(w, w->settle_tail);
	e->id = w->settle_tail;
	e->lane = (uint8_t)lane;
	e->open = 1;
	e->pending = 0;
	e->born_ns = w->now_ns;
	e->end = NSDP_STAT_READ(w->lanes[lane]->drained);
	w->ticket = w->settle_tail++;
}

void nsa_settle_close(struct nsa_writer *w)
{
	if (w->ticket != 0)
		entry(w, w->ticket)->open = 0;
	w->ticket = 0;
	nsa_settle_advance(w);
}

uint64_t nsa_settle_push(struct nsa_writer *w)
{
	if (w->ticket != 0)
		entry(w, w->ticket)->pending++;
	return w->ticket;
}

void nsa_settle_ack(struct nsa_writer *w, uint64_t t)
{
	struct nsa_settle_entry *e;

	if (t < w->settle_head || t >= w->settle_tail)
		return;
	e = entry(w, t);
	if (e->id == t && e->pending > 0)
		e->pending--;
}

void nsa_settle_advance(struct nsa_writer *w)
{
	while (w->settle_head != w->settle_tail) {
		struct nsa_settle_entry *e = entry(w, w->settle_head);

		if (e->open)
			return;
		if (e->pending == 0)
			settle_pop(w, 0);
		else if (w->now_ns - e->born_ns >= NSA_SETTLE_ABANDON_NS)
			settle_pop(w, 1);
		else
			return;
	}
}

int nsa_settle_urgent(struct nsa_writer *w)
{
	int urgent = 0;
	unsigned int l;

	for (l = 0; l < w->n_lanes; l++) {
		struct nsdp_lane *lane = w->lanes[l];
		uint64_t waiting =
			__atomic_load_n(&lane->waiting, __ATOMIC_ACQUIRE);
		uint64_t drained = NSDP_STAT_READ(lane->drained);

		if (waiting > w->settle_flushed[l] && waiting <= drained) {
			w->settle_flushed[l] = drained;
			urgent = 1;
		}
	}
	return urgent;
}

int nsa_settle_deferring(const struct nsa_writer *w)
{
	unsigned int l;

	for (l = 0; l < w->n_lanes; l++)
		if (__atomic_load_n(&w->lanes[l]->deferring, __ATOMIC_ACQUIRE))
			return 1;
	return 0;
}
