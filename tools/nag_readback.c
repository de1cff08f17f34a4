/*
 * nag_readback.c - the store read back into conntrack after a provisional
 * epoch (nag_readback.h).
 *
 * Invariants: the thread owns the committer (opened in the kernel
 * source's namespace and zone, create only: nsdp_ctcommit_conf
 * keep_existing); sessions of this active's epoch or later are its own or
 * a newer active's and are skipped, and so are another gateway pair's.
 *
 * Not here: when to start (nag_active.c: once the epoch is made known and
 * the queued records reached the store); the DPDK gateway's read-back
 * (gateway/ngw_readback.c).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "nag_readback.h"
#include "nsa_fence.h"
#include "nsa_loader.h"
#include "nsa_log.h"
#include "nsdp_ctcommit.h"

/* Each reply of the read-back's loads, ms; a load a compaction round
 * overtook is read again (log layout). */
#define RB_TIMEOUT_MS 5000
#define RB_LOAD_TRIES 4

struct nag_readback {
	pthread_t thread;
	const struct nsa_config *conf;
	struct nsdp_ctcommit *ct;
	uint32_t epoch;
	int done; /* atomic: the thread ended */
	uint64_t read, older, other_pair;
	struct nsdp_ctcommit_stats cs;
	int failed;
	char err[512];
};

/* n sessions (an IPv6 one alone, its second line after it). */
static unsigned int rb_apply(void *arg, unsigned int node,
			     const struct ns_session *s, unsigned int n)
{
	struct nag_readback *rb = arg;

	(void)node;
	for (unsigned int i = 0; i < n; i++) {
		rb->read++;
		/* Another gateway pair's session: not this gateway's. */
		if (s[i].gateway_id >> NSA_PAIR_SHIFT != rb->conf->store.pair) {
			rb->other_pair++;
			continue;
		}
		if (s[i].epoch >= rb->epoch)
			continue;
		rb->older++;
		/* What the kernel refuses is in the committer's counters. */
		nsdp_ctcommit_add(rb->ct, &s[i]);
	}
	return n;
}

static void *rb_main(void *arg)
{
	struct nag_readback *rb = arg;
	const struct nsa_config *c = rb->conf;
	const struct nsa_loader_sink sink = {.apply = rb_apply,
					     .arg = rb,
					     .batch_key = c->batch_key,
					     .batch_key_len = c->batch_key_len};
	struct nsdp_ctcommit_conf cc = {
		.batch_bytes = NSDP_CTCOMMIT_BATCH_DEFAULT,
		.zone = c->ksrc_conf.zone_filter ? c->ksrc_conf.zone : 0,
		.keep_existing = 1};

	snprintf(cc.netns, sizeof(cc.netns), "%s", c->ksrc_conf.netns);
	rb->ct = nsdp_ctcommit_open(&cc, rb->err, sizeof(rb->err));
	if (!rb->ct) {
		rb->failed = 1;
	} else {
		rb->failed =
			nsa_loader_run_all(&c->store, &sink, RB_TIMEOUT_MS,
					   RB_LOAD_TRIES, rb->err,
					   sizeof(rb->err)) != NSA_LOADER_DONE;
		nsdp_ctcommit_flush(rb->ct);
		nsdp_ctcommit_stats(rb->ct, &rb->cs);
		nsdp_ctcommit_close(rb->ct);
	}
	__atomic_store_n(&rb->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct nag_readback *nag_readback_start(const struct nsa_config *conf,
					uint32_t epoch)
{
	struct nag_readback *rb = calloc(1, sizeof(*rb));

	if (!rb) {
		NSA_ERR("read-back after provisional epoch %u: out of memory",
			epoch);
		return NULL;
	}
	rb->conf = conf;
	rb->epoch = epoch;
	if (pthread_create(&rb->thread, NULL, rb_main, rb) != 0) {
		NSA_ERR("read-back after provisional epoch %u: no thread",
			epoch);
		free(rb);
		return NULL;
	}
	return rb;
}

void nag_readback_finish(struct nag_readback *rb)
{
	pthread_join(rb->thread, NULL);
	if (rb->failed)
		NSA_ERR("read-back after provisional epoch %u: the store was "
			"not read whole (%s): sessions the old active wrote "
			"and never announced may be missing from conntrack",
			rb->epoch, rb->err);
	NSA_INFO("read-back after provisional epoch %u: %" PRIu64
		 " sessions read from the store, %" PRIu64
		 " of an earlier epoch: %" PRIu64
		 " written into conntrack, %" PRIu64
		 " left out (conntrack had the flow, or another flow holds "
		 "its port), %" PRIu64 " errors, %" PRIu64 " refused; %" PRIu64
		 " of another gateway pair left alone",
		 rb->epoch, rb->read, rb->older, rb->cs.committed, rb->cs.kept,
		 rb->cs.errors, rb->cs.refused, rb->other_pair);
	free(rb);
}

int nag_readback_poll(struct nag_readback *rb)
{
	if (!__atomic_load_n(&rb->done, __ATOMIC_ACQUIRE))
		return 0;
	nag_readback_finish(rb);
	return 1;
}
