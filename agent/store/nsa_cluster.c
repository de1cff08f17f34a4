/*
 * nsa_cluster.c - connecting to the store and learning its shape.
 *
 * A topology is what one seed answered: the masters of CLUSTER SLOTS (or the
 * seed alone when the server is not a cluster), which master serves each
 * slot, and whether notifications go over sharded pub/sub. The first seed
 * whose node says the cluster is up (cluster_state:ok) and whose map has
 * a master for every slot is believed: a master cut off from most of its
 * cluster says fail, and keeps claiming the slots its replica has taken
 * over meanwhile; a node of a cluster being formed (with
 * cluster-require-full-coverage no) says ok while it knows only its own
 * slots. Only when no seed says both is the first answer used. Masters are
 * numbered by the lowest slot they own, so the active side and the standby,
 * asking different seeds, give a master the same index and the same channel.
 *
 * Everything here is blocking and runs at start-up or after a redirection,
 * never per record. No connection is kept: callers own what
 * nsa_store_connect returns. Replicas are not recorded; writes and
 * notifications only ever go to masters.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "nsa_cluster.h"

#define NSA_CONNECT_TIMEOUT_DEFAULT_MS 2000
/* Long enough for CLUSTER SLOTS or INFO on a loaded server, short enough
 * that a hung server is noticed. */
#define NSA_COMMAND_TIMEOUT_MS 5000

void nsa_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static struct timeval ms_to_tv(int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000,
			     .tv_usec = (ms % 1000) * 1000};

	return tv;
}

static int store_auth(const struct nsa_store_conf *conf, redisContext *c,
		      const struct nsa_addr *addr, char *err, size_t errlen)
{
	const char *argv[3] = {"AUTH"};
	redisReply *r;
	int argc = 1;
	int rc = 0;

	if (conf->user[0])
		argv[argc++] = conf->user;
	argv[argc++] = conf->password;
	r = redisCommandArgv(c, argc, argv, NULL);
	if (!r) {
		nsa_set_err(err, errlen, "%s:%u: AUTH: %s", addr->host,
			    addr->port, c->errstr);
		return -EIO;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		nsa_set_err(err, errlen, "%s:%u: AUTH failed: %s", addr->host,
			    addr->port, r->str);
		rc = -EACCES;
	}
	freeReplyObject(r);
	return rc;
}

static int store_open(const struct nsa_store_conf *conf,
		      const struct nsa_addr *addr, redisContext **out,
		      char *err, size_t errlen)
{
	int timeout_ms = conf->connect_timeout_ms > 0
				 ? conf->connect_timeout_ms
				 : NSA_CONNECT_TIMEOUT_DEFAULT_MS;
	redisContext *c;
	int one = 1;
	int rc;

	c = redisConnectWithTimeout(addr->host, addr->port,
				    ms_to_tv(timeout_ms));
	if (!c) {
		nsa_set_err(err, errlen, "%s:%u: out of memory", addr->host,
			    addr->port);
		return -ENOMEM;
	}
	if (c->err) {
		nsa_set_err(err, errlen, "%s:%u: %s", addr->host, addr->port,
			    c->errstr);
		rc = -ECONNREFUSED;
		goto fail;
	}
	/* Batches are small and latency matters more than segment count. */
	if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) {
		rc = -errno;
		nsa_set_err(err, errlen, "%s:%u: TCP_NODELAY: %s", addr->host,
			    addr->port, strerror(errno));
		goto fail;
	}
	/* The connect timeout covers only connect(); without a socket timeout
	 * a server that accepts and then hangs would block us forever. */
	if (redisSetTimeout(c, ms_to_tv(conf->io_timeout_ms > 0
						? conf->io_timeout_ms
						: NSA_COMMAND_TIMEOUT_MS)) !=
	    REDIS_OK) {
		nsa_set_err(err, errlen, "%s:%u: cannot set timeout: %s",
			    addr->host, addr->port, c->errstr);
		rc = -EIO;
		goto fail;
	}
	if (conf->password[0]) {
		rc = store_auth(conf, c, addr, err, errlen);
		if (rc)
			goto fail;
	}
	*out = c;
	return 0;
fail:
	redisFree(c);
	return rc;
}

redisContext *nsa_store_connect(const struct nsa_store_conf *conf,
				const struct nsa_addr *addr, char *err,
				size_t errlen)
{
	redisContext *c = NULL;

	if (store_open(conf, addr, &c, err, errlen))
		return NULL;
	return c;
}

redisContext *nsa_store_connect_named(const struct nsa_store_conf *conf,
				      const struct nsa_addr *addr,
				      const char *name, int *rc, char *err,
				      size_t errlen)
{
	redisContext *c = nsa_store_connect(conf, addr, err, errlen);
	redisReply *r;

	if (rc)
		*rc = -ECONNREFUSED;
	if (c == NULL)
		return NULL;
	r = redisCommand(c, "CLIENT SETNAME %s", name);
	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		nsa_set_err(err, errlen, "%s:%u: CLIENT SETNAME: %s",
			    addr->host, addr->port, r ? r->str : c->errstr);
		if (rc)
			*rc = r ? -EACCES : -EIO;
		if (r)
			freeReplyObject(r);
		redisFree(c);
		return NULL;
	}
	freeReplyObject(r);
	return c;
}

/* Major version from INFO server, or a negative errno. */
static int server_major_version(redisContext *c, char *err, size_t errlen)
{
	redisReply *r = redisCommand(c, "INFO server");
	const char *v;
	long major = -1;

	if (!r) {
		nsa_set_err(err, errlen, "INFO: %s", c->errstr);
		return -EIO;
	}
	if (r->type == REDIS_REPLY_STRING &&
	    (v = strstr(r->str, "redis_version:")) != NULL)
		major = strtol(v + strlen("redis_version:"), NULL, 10);
	if (major < 0) {
		nsa_set_err(err, errlen, "INFO server: no redis_version");
		freeReplyObject(r);
		return -EPROTO;
	}
	freeReplyObject(r);
	return (int)major;
}

static int decide_pubsub(const struct nsa_store_conf *conf, redisContext *c,
			 struct nsa_topology *t, char *err, size_t errlen)
{
	int major;

	if (conf->publish == NSA_PUBLISH_CLASSIC) {
		t->sharded_pubsub = 0;
		return 0;
	}
	major = server_major_version(c, err, errlen);
	if (major < 0)
		return major;
	if (conf->publish == NSA_PUBLISH_SHARDED && major < 7) {
		nsa_set_err(
			err, errlen,
			"sharded pub/sub needs Redis 7, server is version %d",
			major);
		return -ENOTSUP;
	}
	t->sharded_pubsub = major >= 7;
	return 0;
}

static void topology_plain(struct nsa_topology *t, const struct nsa_addr *seed)
{
	t->cluster = 0;
	t->n_nodes = 1;
	t->nodes[0].addr = *seed;
	t->nodes[0].channel_slot = 0;
	memset(t->slot_node, 0, sizeof(t->slot_node));
	memset(t->slot_covered, 1, sizeof(t->slot_covered));
}

static int node_add(struct nsa_topology *t, const struct nsa_addr *addr)
{
	int i = nsa_topology_find(t, addr);

	if (i >= 0)
		return i;
	if (t->n_nodes == NSA_MAX_NODES)
		return -E2BIG;
	t->nodes[t->n_nodes].addr = *addr;
	t->nodes[t->n_nodes].channel_slot = NS_SLOTS - 1;
	return (int)t->n_nodes++;
}

/* One CLUSTER SLOTS entry: [start, end, [host, port, id, ...], replicas...].
 */
static int slot_range_add(struct nsa_topology *t, const redisReply *e,
			  const struct nsa_addr *seed, char *err, size_t errlen)
{
	const redisReply *m;
	/* Zeroed: no uninitialized byte after the host's end goes into the
	 * topology (its nodes are copied whole, and compared whole by the
	 * cluster test). */
	struct nsa_addr addr = {0};
	long long start, end;
	int node;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
	    e->element[0]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->type != REDIS_REPLY_INTEGER ||
	    e->element[2]->type != REDIS_REPLY_ARRAY)
		goto malformed;
	start = e->element[0]->integer;
	end = e->element[1]->integer;
	m = e->element[2];
	if (start < 0 || end >= NS_SLOTS || start > end || m->elements < 2 ||
	    (m->element[0]->type != REDIS_REPLY_STRING &&
	     m->element[0]->type != REDIS_REPLY_NIL) ||
	    m->element[1]->type != REDIS_REPLY_INTEGER ||
	    m->element[1]->integer <= 0 || m->element[1]->integer > 65535 ||
	    m->element[0]->len >= NSA_HOST_MAX)
		goto malformed;
	/* An empty host (or NULL, Redis 7's unknown-endpoint) means the node
	 * is reached at the host we asked, on the port it gives. */
	if (m->element[0]->type == REDIS_REPLY_NIL || m->element[0]->len == 0)
		memcpy(addr.host, seed->host, sizeof(addr.host));
	else
		memcpy(addr.host, m->element[0]->str, m->element[0]->len + 1);
	addr.port = (uint16_t)m->element[1]->integer;

	node = node_add(t, &addr);
	if (node < 0) {
		nsa_set_err(err, errlen, "CLUSTER SLOTS: more than %d masters",
			    NSA_MAX_NODES);
		return node;
	}
	if (start < t->nodes[node].channel_slot)
		t->nodes[node].channel_slot = (uint16_t)start;
	for (long long s = start; s <= end; s++) {
		t->slot_node[s] = (uint8_t)node;
		t->slot_covered[s] = 1;
	}
	return 0;
malformed:
	nsa_set_err(err, errlen, "CLUSTER SLOTS: malformed reply");
	return -EPROTO;
}

/* Renumber masters by their lowest slot, the order both sides agree on. */
static void nodes_sort(struct nsa_topology *t)
{
	struct nsa_node sorted[NSA_MAX_NODES];
	uint8_t order[NSA_MAX_NODES];
	uint8_t new_index[NSA_MAX_NODES];
	unsigned int i, j;

	for (i = 0; i < t->n_nodes; i++) {
		uint8_t n = (uint8_t)i;

		for (j = i; j > 0 && t->nodes[order[j - 1]].channel_slot >
					     t->nodes[n].channel_slot;
		     j--)
			order[j] = order[j - 1];
		order[j] = n;
	}
	for (i = 0; i < t->n_nodes; i++) {
		sorted[i] = t->nodes[order[i]];
		new_index[order[i]] = (uint8_t)i;
	}
	memcpy(t->nodes, sorted, t->n_nodes * sizeof(sorted[0]));
	for (i = 0; i < NS_SLOTS; i++)
		if (t->slot_covered[i])
			t->slot_node[i] = new_index[t->slot_node[i]];
}

static int topology_from_slots(struct nsa_topology *t, const redisReply *r,
			       const struct nsa_addr *seed, char *err,
			       size_t errlen)
{
	int rc;

	t->cluster = 1;
	t->n_nodes = 0;
	memset(t->slot_node, 0, sizeof(t->slot_node));
	memset(t->slot_covered, 0, sizeof(t->slot_covered));
	for (size_t i = 0; i < r->elements; i++) {
		rc = slot_range_add(t, r->element[i], seed, err, errlen);
		if (rc)
			return rc;
	}
	if (t->n_nodes == 0) {
		nsa_set_err(err, errlen, "cluster has no slots assigned");
		return -EAGAIN;
	}
	nodes_sort(t);
	return 0;
}

static int topology_from_seed(const struct nsa_store_conf *conf,
			      redisContext *c, const struct nsa_addr *seed,
			      struct nsa_topology *t, char *err, size_t errlen)
{
	redisReply *r = redisCommand(c, "CLUSTER SLOTS");
	int rc;

	if (!r) {
		nsa_set_err(err, errlen, "CLUSTER SLOTS: %s", c->errstr);
		return -EIO;
	}
	if (r->type == REDIS_REPLY_ERROR &&
	    strstr(r->str, "cluster support disabled")) {
		topology_plain(t, seed);
		rc = 0;
	} else if (r->type == REDIS_REPLY_ERROR) {
		nsa_set_err(err, errlen, "CLUSTER SLOTS: %s", r->str);
		rc = -EPROTO;
	} else if (r->type != REDIS_REPLY_ARRAY) {
		nsa_set_err(err, errlen, "CLUSTER SLOTS: unexpected reply");
		rc = -EPROTO;
	} else {
		rc = topology_from_slots(t, r, seed, err, errlen);
	}
	freeReplyObject(r);
	if (rc)
		return rc;
	return decide_pubsub(conf, c, t, err, errlen);
}

/* Whether the node behind c says the cluster is up (CLUSTER INFO
 * cluster_state:ok). Also 1 when it cannot say (a user without CLUSTER
 * INFO, an old server): there is nothing better to go by. */
static int cluster_state_ok(redisContext *c)
{
	redisReply *r = redisCommand(c, "CLUSTER INFO");
	int ok = 1;

	if (r && r->type == REDIS_REPLY_STRING)
		ok = strstr(r->str, "cluster_state:ok") != NULL;
	if (r)
		freeReplyObject(r);
	return ok;
}

int nsa_topology_fetch(const struct nsa_store_conf *conf,
		       struct nsa_topology *t, char *err, size_t errlen)
{
	char reason[256] = "";
	char tried[512] = "";
	struct nsa_topology *first =
		NULL; /* from a node whose cluster is down */
	struct nsa_store_conf bounded = *conf;
	struct timespec t0, now;
	size_t used = 0;
	int rc = -EINVAL;

	if (conf->n_seeds == 0 || conf->n_seeds > NSA_MAX_SEEDS) {
		nsa_set_err(err, errlen, "no store seeds configured");
		return -EINVAL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned int i = 0; i < conf->n_seeds; i++) {
		const struct nsa_addr *seed = &conf->seeds[i];
		redisContext *c = NULL;
		int n, up;

		if (conf->fetch_budget_ms > 0) {
			long left;

			clock_gettime(CLOCK_MONOTONIC, &now);
			left = conf->fetch_budget_ms -
			       ((now.tv_sec - t0.tv_sec) * 1000L +
				(now.tv_nsec - t0.tv_nsec) / 1000000L);
			if (left <= 0) {
				if (rc != 0) {
					size_t l = strlen(reason);

					/* What passed, measured: the budget
					 * plus the last seed's overrun. */
					snprintf(
						reason + l, sizeof(reason) - l,
						" (%ld ms passed, budget %d ms)",
						conf->fetch_budget_ms - left,
						conf->fetch_budget_ms);
				}
				break;
			}
			bounded.connect_timeout_ms =
				(int)(left < conf->connect_timeout_ms ||
						      conf->connect_timeout_ms <=
							      0
					      ? left
					      : conf->connect_timeout_ms);
			bounded.io_timeout_ms =
				(int)(left < conf->io_timeout_ms ||
						      conf->io_timeout_ms <= 0
					      ? left
					      : conf->io_timeout_ms);
		}
		n = snprintf(tried + used, sizeof(tried) - used, "%s%s:%u",
			     i ? ", " : "", seed->host, seed->port);
		if (n > 0 && (size_t)n < sizeof(tried) - used)
			used += (size_t)n;

		rc = store_open(&bounded, seed, &c, reason, sizeof(reason));
		if (rc)
			continue;
		rc = topology_from_seed(&bounded, c, seed, t, reason,
					sizeof(reason));
		up = rc == 0 && (!t->cluster ||
				 (nsa_topology_slots_served(t) == NS_SLOTS &&
				  cluster_state_ok(c)));
		redisFree(c);
		if (up) {
			free(first);
			return 0;
		}
		if (rc == 0 && first == NULL) {
			first = malloc(sizeof(*first));
			if (first)
				*first = *t;
		}
	}
	if (first) {
		*t = *first;
		free(first);
		return 0;
	}
	if (rc == 0) /* out of memory for the copy: the last answer */
		return 0;
	nsa_set_err(err, errlen, "no store topology from seeds %s; last: %s",
		    tried, reason);
	return rc;
}

void nsa_topology_channel(const struct nsa_topology *t, unsigned int node,
			  char buf[NS_CHANNEL_MAX])
{
	if (node >= t->n_nodes) {
		buf[0] = '\0';
		return;
	}
	ns_channel_for_slot(t->nodes[node].channel_slot, buf);
}

int nsa_addr_equal(const struct nsa_addr *x, const struct nsa_addr *y)
{
	return x->port == y->port && strcmp(x->host, y->host) == 0;
}

unsigned int nsa_topology_slots_served(const struct nsa_topology *t)
{
	unsigned int s, n = 0;

	for (s = 0; s < NS_SLOTS; s++)
		n += t->slot_covered[s] != 0;
	return n;
}

int nsa_topology_find(const struct nsa_topology *t, const struct nsa_addr *addr)
{
	for (unsigned int i = 0; i < t->n_nodes; i++)
		if (nsa_addr_equal(&t->nodes[i].addr, addr))
			return (int)i;
	return -1;
}

/* Whether CLUSTER NODES flags mark a node the cluster agreed is failed:
 * "fail", not "fail?" (a node merely suspected, which may be the one
 * promoted next). */
static int flagged_failed(const char *flags)
{
	for (const char *f = strstr(flags, "fail"); f;
	     f = strstr(f + 4, "fail"))
		if ((f == flags || f[-1] == ',') &&
		    (f[4] == '\0' || f[4] == ','))
			return 1;
	return 0;
}

/* The replicas of the CLUSTER NODES line flagged myself, but those the
 * cluster agreed are failed; -1 if nodes lists no myself. */
static int listed_replicas(const char *nodes)
{
	const char *line = strstr(nodes, "myself");
	char me[48] = "";
	int n = 0;

	while (line && line > nodes && line[-1] != '\n')
		line--;
	if (line == NULL || sscanf(line, "%47s", me) != 1)
		return -1;
	for (line = nodes; line && *line;) {
		char flags[128], master[48];

		if (sscanf(line, "%*s %*s %127s %47s", flags, master) == 2 &&
		    strcmp(master, me) == 0 && strstr(flags, "slave") != NULL &&
		    !flagged_failed(flags))
			n++;
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return n;
}

int nsa_store_replicas(redisContext *c)
{
	redisReply *r = redisCommand(c, "CLUSTER NODES");
	int listed = -1, connected = 0;

	if (r && r->type == REDIS_REPLY_STRING)
		listed = listed_replicas(r->str);
	if (r)
		freeReplyObject(r);
	/* The replicas connected now (ROLE): in a cluster too, since its
	 * gossip lists a replica that just attached late. */
	r = redisCommand(c, "ROLE");
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
	    r->element[2]->type == REDIS_REPLY_ARRAY)
		connected = (int)r->element[2]->elements;
	if (r)
		freeReplyObject(r);
	return listed > connected ? listed : connected;
}

int nsa_store_wait_replica(redisContext *c, unsigned int wait_ms, char *err,
			   size_t errlen)
{
	redisReply *r;
	int ok;

	if (nsa_store_replicas(c) == 0)
		return 0;
	r = redisCommand(c, "WAIT 1 %u",
			 wait_ms ? wait_ms : NSA_STORE_WAIT_MS_DEFAULT);
	ok = r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1;
	if (!ok)
		nsa_set_err(err, errlen,
			    "%s:%d: no replica acknowledged within %u ms%s%s",
			    c->tcp.host, c->tcp.port,
			    wait_ms ? wait_ms : NSA_STORE_WAIT_MS_DEFAULT,
			    r && r->type == REDIS_REPLY_ERROR ? ": " : "",
			    r && r->type == REDIS_REPLY_ERROR ? r->str : "");
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -ETIMEDOUT;
}
