/*
 * nsb_store.c - natsync-bench's look at the store itself: the memory
 * and key count of every master, and emptying them between runs.
 *
 * Every call fetches the topology afresh and opens one short-lived blocking
 * connection per master, so it works on one plain server and on a cluster
 * alike and never shares a connection with the agent's writers or standby.
 *
 * Memory per session is the growth of INFO memory's used_memory (the
 * allocator's view: keys, values, expiry entries, hash tables) divided by
 * the keys added, measured while no natsync client is connected, so that
 * client buffers are not counted. It is only defined from an empty store:
 * keys a run merely overwrites add no key.
 *
 * Not here: replicas (FLUSHALL on a master reaches its replicas; their
 * memory is not counted).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "nsb_bench.h"
#include "nsa_cluster.h"
#include "nsa_log.h"

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
	struct nsb_store_mem *m = arg;
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

int nsb_store_probe(const struct nsa_store_conf *store, struct nsb_store_mem *m)
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

int nsb_store_flush(const struct nsa_store_conf *store)
{
	return for_each_master(store, flush_master, NULL);
}

double nsb_store_bytes_per_session(const struct nsb_store_mem *a,
				   const struct nsb_store_mem *b)
{
	if (a->keys != 0 || b->keys == 0 || b->used_memory < a->used_memory)
		return -1;
	return (double)(b->used_memory - a->used_memory) / (double)b->keys;
}
