/*
 * nst_sub.h - test support: a test's own subscriber to what the writers
 * publish, one connection per master of the store, each subscribed to its
 * master's channel. Header-only: for tests that link the agent.
 */
#ifndef NST_SUB_H
#define NST_SUB_H

#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "ns_slot.h"
#include "nsa_cluster.h"

/* Connect to every master of the store seeded at 127.0.0.1:port and
 * subscribe each connection (c[i], room for NSA_MAX_NODES) to its
 * master's channel (SSUBSCRIBE where the store has sharded pub/sub, as
 * publish decides); the number of masters. */
static inline unsigned int
nst_subscribe_every_master(int port, enum nsa_publish_mode publish,
			   redisContext **c)
{
	struct nsa_store_conf sc;
	struct nsa_topology t;
	char err[256];
	unsigned int i;

	memset(&sc, 0, sizeof(sc));
	snprintf(sc.seeds[0].host, NSA_HOST_MAX, "127.0.0.1");
	sc.seeds[0].port = (uint16_t)port;
	sc.n_seeds = 1;
	sc.connect_timeout_ms = 1000;
	sc.publish = publish;
	cr_assert_eq(nsa_topology_fetch(&sc, &t, err, sizeof(err)), 0, "%s",
		     err);
	for (i = 0; i < t.n_nodes; i++) {
		char ch[NS_CHANNEL_MAX];
		redisReply *r;

		nsa_topology_channel(&t, i, ch);
		c[i] = redisConnect(t.nodes[i].addr.host, t.nodes[i].addr.port);
		cr_assert(c[i] && !c[i]->err);
		r = redisCommand(c[i], "%s %s",
				 t.sharded_pubsub ? "SSUBSCRIBE" : "SUBSCRIBE",
				 ch);
		cr_assert(r && r->type == REDIS_REPLY_ARRAY, "subscribe %s",
			  ch);
		freeReplyObject(r);
	}
	return t.n_nodes;
}

#endif
