/*
 * nsa_store_conf.h - the values of [store]: the seeds' addresses, the
 * credentials, the publish mode and the layout. Plain types and the
 * address parser: connecting is store/'s (nsa_cluster.h).
 */
#ifndef NSA_STORE_CONF_H
#define NSA_STORE_CONF_H

#include <stdint.h>

#define NSA_MAX_SEEDS 16
#define NSA_HOST_MAX 64

enum nsa_publish_mode {
	NSA_PUBLISH_AUTO, /* SPUBLISH where the server has it, else PUBLISH */
	NSA_PUBLISH_SHARDED, /* SPUBLISH / SSUBSCRIBE (Redis 7) */
	NSA_PUBLISH_CLASSIC, /* PUBLISH / SUBSCRIBE */
};

/* [store] layout: how the store holds the sessions (schema/FORMAT.md). */
enum nsa_layout {
	NSA_LAYOUT_KEYS, /* one key per session, SET or DEL per record */
	NSA_LAYOUT_LOG, /* one segment key per batch (Log layout) */
};

struct nsa_addr {
	char host[NSA_HOST_MAX];
	uint16_t port;
};

struct nsa_store_conf {
	struct nsa_addr seeds[NSA_MAX_SEEDS];
	unsigned int n_seeds;
	char user[64]; /* empty: AUTH with the password alone */
	char password[256]; /* empty: no AUTH */
	int connect_timeout_ms;
	/* Every read and write of a blocking connection (nsa_cluster.h);
	 * 0 = 5 000 ms. Not a key: callers that must not wait set it on a
	 * copy (a promotion's first try for an epoch). */
	int io_timeout_ms;
	/* A topology read (nsa_topology_fetch) over every seed ends within
	 * this many ms, each seed's connect and reply bounded by what is
	 * left; 0 = no bound but each seed's own. Not a key: a standby's
	 * watch of a hung store sets it on its copy. */
	int fetch_budget_ms;
	/* After natsync:epoch was raised: WAIT for a replica this long
	 * where its master has one; 0 = no WAIT. */
	unsigned int epoch_wait_ms;
	enum nsa_publish_mode publish;
	enum nsa_layout layout;
	/* The gateway pair ([agent] gateway_id >> 8) whose epoch counter
	 * and writer connections these are (nsa_fence.h). Not a key. */
	uint32_t pair;
	/* The token of an epoch ask that may give up and of the provisional
	 * epoch's registration (nsa_fence.h): a late ask of one's own is
	 * told from a newer active's by it. 0 = a new one at every call.
	 * Not a key. */
	uint64_t epoch_token;
};

/* A copy of c for a caller that must not wait on a store that hangs (a
 * promotion's or an active's first ask for an epoch): each connect and
 * reply, a replica's WAIT, and the topology read over every seed together
 * bounded by wait_ms. */
static inline struct nsa_store_conf
nsa_store_conf_quick(const struct nsa_store_conf *c, unsigned int wait_ms)
{
	struct nsa_store_conf q = *c;

	q.connect_timeout_ms = (int)wait_ms;
	q.io_timeout_ms = (int)wait_ms;
	q.fetch_budget_ms = (int)wait_ms;
	if (q.epoch_wait_ms > wait_ms)
		q.epoch_wait_ms = wait_ms;
	return q;
}

/* Parse "host:port" into addr; 0 or -EINVAL. */
int nsa_addr_parse(const char *s, struct nsa_addr *addr);

#endif
