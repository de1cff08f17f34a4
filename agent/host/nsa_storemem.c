/*
 * nsa_storemem.c - the store's memory: what every master holds, and what
 * a run of sessions added to it, per session and per family.
 *
 * Every call fetches the topology afresh and opens one short-lived blocking
 * connection per master, so it works on one plain server and on a cluster
 * alike and never shares a connection with the agent's writers or standby.
 *
 * Memory per session is the growth of INFO memory's used_memory (the
 * allocator's view: keys, values, expiry entries, hash tables) divided by
 * the keys added, measured while no natsync client is connected, so that
 * client buffers are not counted. It is only defined from an empty store:
 * keys a run merely overwrites add no key. In the log layout the keys are
 * segments: the growth is per live session instead, compaction as far as
 * it got.
 *
 * Not here: replicas (FLUSHALL on a master reaches its replicas; their
 * memory is not counted).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_log.h"
#include "nsa_storemem.h"

typedef int (*master_fn)(redisContext *c, const struct nsa_addr *addr,
			 void *arg);

static int for_each_master(const struct nsa_store_conf *store, master_fn fn,
			   void *arg)
{
	struct nsa_topology *topo = calloc(1, sizeof(*topo));
	char err[256];
	int rc;

	if (!topo)
		return -ENOMEM;
	rc = nsa_topology_fetch(store, topo, err, sizeof(err));
	if (rc != 0) {
		NSA_ERR("store: %s", err);
		free(topo);
		return rc;
	}
	for (unsigned int i = 0; i < topo->n_nodes && rc == 0; i++) {
		const struct nsa_addr *addr = &topo->nodes[i].addr;
		redisContext *c =
			nsa_store_connect(store, addr, err, sizeof(err));

		if (!c) {
			NSA_ERR("store: %s:%u: %s", addr->host, addr->port,
				err);
			rc = -ECONNREFUSED;
			break;
		}
		rc = fn(c, addr, arg);
		redisFree(c);
	}
	free(topo);
	return rc;
}

/* r when it has the expected type, else NULL (freed, logged). */
static redisReply *expect(redisContext *c, const struct nsa_addr *addr,
			  const char *cmd, redisReply *r, int type)
{
	if (r && r->type == type)
		return r;
	NSA_ERR("store: %s:%u: %s: %s", addr->host, addr->port, cmd,
		r && r->type == REDIS_REPLY_ERROR ? r->str
		: c->err			  ? c->errstr
						  : "unexpected reply");
	if (r)
		freeReplyObject(r);
	return NULL;
}

static int probe_master(redisContext *c, const struct nsa_addr *addr, void *arg)
{
	struct nsa_storemem *m = arg;
	redisReply *r =
		expect(c, addr, "INFO memory", redisCommand(c, "INFO memory"),
		       REDIS_REPLY_STRING);
	const char *used;

	if (!r)
		return -EIO;
	used = strstr(r->str, "used_memory:");
	if (!used) {
		NSA_ERR("store: %s:%u: INFO memory has no used_memory",
			addr->host, addr->port);
		freeReplyObject(r);
		return -EPROTO;
	}
	m->used_memory += strtoull(used + strlen("used_memory:"), NULL, 10);
	freeReplyObject(r);
	r = expect(c, addr, "DBSIZE", redisCommand(c, "DBSIZE"),
		   REDIS_REPLY_INTEGER);
	if (!r)
		return -EIO;
	m->keys += (uint64_t)r->integer;
	m->masters++;
	freeReplyObject(r);
	return 0;
}

int nsa_storemem_probe(const struct nsa_store_conf *store,
		       struct nsa_storemem *m)
{
	memset(m, 0, sizeof(*m));
	return for_each_master(store, probe_master, m);
}

static int flush_master(redisContext *c, const struct nsa_addr *addr, void *arg)
{
	redisReply *r = expect(c, addr, "FLUSHALL", redisCommand(c, "FLUSHALL"),
			       REDIS_REPLY_STATUS);

	(void)arg;
	if (!r)
		return -EIO;
	freeReplyObject(r);
	return 0;
}

int nsa_storemem_flush(const struct nsa_store_conf *store)
{
	return for_each_master(store, flush_master, NULL);
}

struct family_usage {
	uint64_t usage[2], keys[2];
};

/* One SCAN step's keys: MEMORY USAGE of each, pipelined, added by family. */
static int usage_of_keys(redisContext *c, const struct nsa_addr *addr,
			 const redisReply *names, struct family_usage *fu)
{
	for (size_t i = 0; i < names->elements; i++)
		redisAppendCommand(c, "MEMORY USAGE %b", names->element[i]->str,
				   names->element[i]->len);
	for (size_t i = 0; i < names->elements; i++) {
		int v6 = names->element[i]->len != NS_KEY_LEN;
		redisReply *r = NULL;

		if (redisGetReply(c, (void **)&r) != REDIS_OK)
			r = NULL;
		r = expect(c, addr, "MEMORY USAGE", r, REDIS_REPLY_INTEGER);
		if (!r)
			return -EIO;
		fu->usage[v6] += (uint64_t)r->integer;
		fu->keys[v6]++;
		freeReplyObject(r);
	}
	return 0;
}

static int usage_master(redisContext *c, const struct nsa_addr *addr, void *arg)
{
	char cursor[32] = "0";
	int rc = 0;

	do {
		redisReply *r =
			expect(c, addr, "SCAN",
			       redisCommand(c, "SCAN %s COUNT 1000", cursor),
			       REDIS_REPLY_ARRAY);

		if (!r || r->elements != 2)
			return -EIO;
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		rc = usage_of_keys(c, addr, r->element[1], arg);
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

/* MEMORY USAGE of every key of the store, summed by family (index 0:
 * IPv4 keys, 1: IPv6 keys, told apart by their length), with the keys
 * counted in keys[]. */
static int usage_by_family(const struct nsa_store_conf *store,
			   uint64_t usage[2], uint64_t keys[2])
{
	struct family_usage fu = {0};
	int rc = for_each_master(store, usage_master, &fu);

	memcpy(usage, fu.usage, sizeof(fu.usage));
	memcpy(keys, fu.keys, sizeof(fu.keys));
	return rc;
}

double nsa_storemem_per_key(const struct nsa_storemem *before,
			    const struct nsa_storemem *after)
{
	if (before->keys != 0 || after->keys == 0 ||
	    after->used_memory < before->used_memory)
		return -1;
	return (double)(after->used_memory - before->used_memory) /
	       (double)after->keys;
}

/* Each family's store bytes per session in a mix: the store's growth
 * (out->all per live session) split between the families. Keys layout:
 * in the shares MEMORY USAGE gives their keys (so the overhead INFO
 * counts beyond the keys, expiry entries and hash tables, goes to each in
 * proportion). Log layout: segments hold both, so in the shares of their
 * record bytes (schema/FORMAT.md's lengths: l->v6_wire for the IPv6
 * sessions, NAT66 and NAT64). */
static void per_family(const struct nsa_store_conf *store,
		       const struct nsa_storemem_live *l,
		       struct nsa_storemem_bytes *out)
{
	uint64_t live4 = l->live - l->live_v6, usage[2], keys[2];
	double total = out->all * (double)l->live;
	double w4 = (double)ns_record_wire_len(NS_FAMILY_IPV4);

	if (out->all < 0 || l->live_v6 == 0 || live4 == 0)
		return;
	if (store->layout == NSA_LAYOUT_LOG) {
		double per_byte =
			total / ((double)live4 * w4 + (double)l->v6_wire);

		out->v4 = per_byte * w4;
		out->v6 = per_byte * (double)l->v6_wire / (double)l->live_v6;
		return;
	}
	if (usage_by_family(store, usage, keys) != 0 || keys[0] == 0 ||
	    keys[1] == 0)
		return;
	total = out->all * (double)(keys[0] + keys[1]);
	out->v4 = total * (double)usage[0] / (double)(usage[0] + usage[1]) /
		  (double)keys[0];
	out->v6 = total * (double)usage[1] / (double)(usage[0] + usage[1]) /
		  (double)keys[1];
}

void nsa_storemem_per_session(const struct nsa_store_conf *store,
			      const struct nsa_storemem *before,
			      const struct nsa_storemem *after,
			      const struct nsa_storemem_live *l,
			      struct nsa_storemem_bytes *out)
{
	out->all = nsa_storemem_per_key(before, after);
	out->v4 = out->v6 = -1;
	if (store->layout == NSA_LAYOUT_LOG && out->all >= 0 && l->live > 0)
		out->all *= (double)after->keys / (double)l->live;
	per_family(store, l, out);
}
