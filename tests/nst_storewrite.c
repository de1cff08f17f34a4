/*
 * nst_storewrite.c - test support: a record written into the store behind
 * the agents' backs (nst_storewrite.h).
 *
 * The log layout's segment is what a writer stores for a batch of one
 * record (schema/FORMAT.md, Log layout): a version-2 header naming the
 * channel of the master that owns the record's key, the record, no MAC;
 * under NST_PUBLISHER, seq rising per call, so that no two calls and no
 * agent write the same segment key.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsdp_time.h"
#include "nst_storewrite.h"

/* The tests' publisher id: an agent draws its upper 24 bits at random
 * and puts its worker's index in the low byte (nsa_active.c); no agent of
 * the tests has a worker 255. */
#define NST_PUBLISHER 0x7e5700ffu

static uint64_t nst_seq;

void nst_store_record(int port, const char *layout, const struct ns_rec *r,
		      int del)
{
	static struct nsa_topology topo;
	struct nsa_store_conf sc = {.n_seeds = 1, .connect_timeout_ms = 1000};
	struct ns_rec w = *r;
	uint8_t key[NS_KEY_MAX], seg[NS_BATCH_HDR_LEN + NS_RECORD_MAX_LEN];
	char err[256], seg_key[NS_SEGMENT_KEY_MAX];
	size_t key_len = ns_key_of(&w.s, key);
	unsigned int node;
	redisContext *c;
	redisReply *rep;
	int len;

	snprintf(sc.seeds[0].host, sizeof(sc.seeds[0].host), "127.0.0.1");
	sc.seeds[0].port = port;
	cr_assert_eq(nsa_topology_fetch(&sc, &topo, err, sizeof(err)), 0, "%s",
		     err);
	node = topo.slot_node[ns_key_slot(key, key_len)];
	c = redisConnect("127.0.0.1", topo.nodes[node].addr.port);
	cr_assert(c && !c->err, "cannot reach the store's master on %d",
		  topo.nodes[node].addr.port);
	if (strcmp(layout, "log") != 0) {
		len = ns_record_encode(&w.s, seg, sizeof(seg));
		cr_assert_gt(len, 0);
		rep = del ? redisCommand(c, "DEL %b", key, key_len)
			  : redisCommand(c, "SET %b %b PX %u", key, key_len,
					 seg, (size_t)len, w.s.timeout_ms);
	} else {
		struct ns_batch_hdr h = {.publisher_id = NST_PUBLISHER,
					 .gateway_id = w.s.gateway_id,
					 .epoch = w.s.epoch,
					 .count = 1,
					 .seq = ++nst_seq,
					 .channel_slot =
						 topo.nodes[node].channel_slot,
					 .sent_ns = nsdp_realtime_ns()};

		if (del) {
			w.s.event = NS_EV_DELETE;
			w.s.timestamp_ns = h.sent_ns > w.s.timestamp_ns
						   ? h.sent_ns
						   : w.s.timestamp_ns + 1;
		}
		len = ns_record_encode(&w.s, seg + NS_BATCH_HDR_LEN,
				       sizeof(seg) - NS_BATCH_HDR_LEN);
		cr_assert_gt(len, 0);
		h.body_len = (uint32_t)len;
		ns_batch_hdr_encode(&h, seg);
		cr_assert_gt(ns_segment_key(h.channel_slot, h.publisher_id,
					    h.seq, seg_key),
			     0);
		rep = w.s.timeout_ms
			      ? redisCommand(c, "SET %s %b PX %u", seg_key, seg,
					     NS_BATCH_HDR_LEN + (size_t)len,
					     w.s.timeout_ms)
			      : redisCommand(c, "SET %s %b", seg_key, seg,
					     NS_BATCH_HDR_LEN + (size_t)len);
	}
	cr_assert(rep && rep->type != REDIS_REPLY_ERROR, "%s refused: %s",
		  del ? "the delete" : "the write", rep ? rep->str : c->errstr);
	freeReplyObject(rep);
	redisFree(c);
}
