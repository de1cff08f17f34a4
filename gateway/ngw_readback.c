/*
 * ngw_readback.c - after a promotion on a provisional epoch, the store
 * read back once it answers (ngw_readback.h).
 *
 * A promotion that got its epoch from the store reads every master again
 * before the fast path takes the table (ngw_promote.c), so that what the
 * old active wrote and never announced (its SPUBLISH cut off by the fence
 * or by the store going away) is in the table. A promotion on a
 * provisional epoch cannot: the store does not answer. So once the epoch
 * is made known and the fence raised, and this gateway's own queued
 * records have reached the store (its ends of flows among them), a thread
 * reads every master as a standby loads them and hands each session of
 * this gateway pair and an earlier epoch that the table lacks (NAT44,
 * NAT64, NAT66) to the fast path (nsdp_nat_adopt), which takes it if its
 * port is still free. The
 * sessions of an earlier epoch it finds in the table are marked; once the
 * store was read whole, the fast path ends those of an earlier epoch left
 * unmarked (nsdp_nat_readback_forget): the old active ended them and the
 * store no longer holds them, so the table, the store and a standby end
 * equal.
 *
 * Not here: the lcore's side of it (dataplane/nat/nsdp_nat_ctl.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ngw_readback.h"
#include "nsa_active.h"
#include "nsa_cluster.h"
#include "nsa_fence.h"
#include "nsa_loader.h"
#include "nsa_log.h"
#include "nsdp_nat.h"
#include "nsdp_time.h"

/* How long the read-back waits for this gateway's queued records to
 * reach the store before it reads anyway. */
#define RB_DRAIN_MS 2000
/* Each reply of the read-back's loads, ms. */
#define RB_TIMEOUT_MS 5000
/* A full adoption queue is waited for at most this long per session. */
#define RB_QUEUE_WAIT_MS 1000
/* A load a compaction round overtook is read again (log layout). */
#define RB_LOAD_TRIES 4

struct gw_readback {
	pthread_t thread;
	struct nsa_store_conf store;
	const struct nsa_config *agent;
	struct nsdp_nat *nat;
	uint32_t epoch;
	int stop; /* atomic: the gateway demotes or exits */
	int done; /* atomic: the thread ended */
	uint64_t read, handed, known, foreign, lost, other_pair;
	char err[512];
	int failed;
};

/* Hand r to the fast path, waiting for room in its queue. */
static void rb_hand(struct gw_readback *rb, const struct ns_rec *r)
{
	int rc;

	for (int w = 0; (rc = nsdp_nat_adopt(rb->nat, r)) == -ENOBUFS; w++) {
		if (w >= RB_QUEUE_WAIT_MS ||
		    __atomic_load_n(&rb->stop, __ATOMIC_RELAXED)) {
			rb->lost++;
			return;
		}
		nsdp_sleep_ms(1);
	}
	if (rc == 0)
		rb->handed++;
	else
		rb->foreign++;
}

/* n sessions (an IPv6 one alone, its second line after it). */
static unsigned int rb_apply(void *arg, unsigned int node,
			     const struct ns_session *s, unsigned int n)
{
	struct gw_readback *rb = arg;
	struct ns_rec r;

	(void)node;
	for (unsigned int i = 0; i < n; i++) {
		rb->read++;
		if (__atomic_load_n(&rb->stop, __ATOMIC_RELAXED))
			continue;
		/* Another gateway pair's session: its epochs are not ours
		 * to compare, nor its sessions ours to take. */
		if (s[i].gateway_id >> NSA_PAIR_SHIFT != rb->store.pair) {
			rb->other_pair++;
			continue;
		}
		if (s[i].epoch >= rb->epoch)
			continue;
		r.s = s[i];
		if (ns_family_is_v6(s[i].family))
			memcpy(&r.v6, &s[i + 1], sizeof(r.v6));
		if (nsdp_nat_readback_known(rb->nat, &r))
			rb->known++;
		else
			rb_hand(rb, &r);
	}
	return n;
}

/* Every master's sessions into rb_apply, read as a standby loads them. */
static void *rb_main(void *arg)
{
	struct gw_readback *rb = arg;
	const struct nsa_loader_sink sink = {.apply = rb_apply,
					     .arg = rb,
					     .batch_key = rb->agent->batch_key,
					     .batch_key_len =
						     rb->agent->batch_key_len};

	rb->failed = nsa_loader_run_all(&rb->store, &sink, RB_TIMEOUT_MS,
					RB_LOAD_TRIES, rb->err,
					sizeof(rb->err)) != NSA_LOADER_DONE;
	__atomic_store_n(&rb->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

void gw_readback_due(struct gw *g, uint32_t epoch, double t)
{
	g->readback_epoch = epoch;
	g->readback_from = t;
}

/* The thread ended: joined, said, freed. */
static void rb_end(struct gw *g)
{
	struct gw_readback *rb = g->readback;

	pthread_join(rb->thread, NULL);
	if (rb->failed)
		NSA_ERR("read-back after provisional epoch %u: the store was "
			"not read whole (%s): sessions the old active wrote "
			"and never announced may be missing from the table",
			rb->epoch, rb->err);
	NSA_INFO("read-back after provisional epoch %u: %" PRIu64
		 " sessions read from the store, %" PRIu64
		 " of an earlier epoch missing from the table handed to the "
		 "fast path, %" PRIu64 " in it already, %" PRIu64
		 " of a family this gateway does not translate, %" PRIu64
		 " dropped (queue full), %" PRIu64
		 " of another gateway pair left alone",
		 rb->epoch, rb->read, rb->handed, rb->known, rb->foreign,
		 rb->lost, rb->other_pair);
	/* Read whole and still active: what the table holds of an earlier
	 * epoch and the store did not is what the old active ended without
	 * announcing it; the fast path ends it too (nat.forgotten). */
	if (!rb->failed && !__atomic_load_n(&rb->stop, __ATOMIC_RELAXED) &&
	    nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE &&
	    !nsdp_nat_forgetting(g->nat)) {
		nsdp_nat_readback_forget(g->nat, rb->epoch);
		NSA_INFO("read-back after provisional epoch %u: the sessions "
			 "of an earlier epoch the store no longer holds are "
			 "ended (nat.forgotten)",
			 rb->epoch);
	}
	g->readbacks++;
	free(rb);
	g->readback = NULL;
}

void gw_readback_poll(struct gw *g, double t)
{
	struct gw_readback *rb;

	if (g->readback) {
		if (__atomic_load_n(&g->readback->done, __ATOMIC_ACQUIRE))
			rb_end(g);
		return;
	}
	if (g->readback_epoch == 0 || g->provisional != 0 ||
	    nsdp_nat_mode(g->nat) != NSDP_NAT_ACTIVE)
		return;
	/* This gateway's records queued while the store was away first:
	 * among them the ends of flows it closed, which the read-back must
	 * not bring back. */
	if (g->active && nsa_active_drain(g->active, 0) != 0 &&
	    (t - g->readback_from) * 1000 < RB_DRAIN_MS)
		return;
	rb = calloc(1, sizeof(*rb));
	if (!rb) {
		NSA_ERR("read-back after provisional epoch %u: out of memory",
			g->readback_epoch);
		g->readback_epoch = 0;
		return;
	}
	rb->store = g->conf.agent.store;
	rb->agent = &g->conf.agent;
	rb->nat = g->nat;
	rb->epoch = g->readback_epoch;
	g->readback_epoch = 0;
	if (pthread_create(&rb->thread, NULL, rb_main, rb) != 0) {
		NSA_ERR("read-back after provisional epoch %u: no thread",
			rb->epoch);
		free(rb);
		return;
	}
	g->readback = rb;
}

void gw_readback_stop(struct gw *g)
{
	g->readback_epoch = 0;
	if (!g->readback)
		return;
	__atomic_store_n(&g->readback->stop, 1, __ATOMIC_RELAXED);
	rb_end(g);
}
