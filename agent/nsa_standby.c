/*
 * nsa_standby.c - the standby role: one subscriber thread that rebuilds the
 * active's session table from the store and its notifications.
 *
 * The thread fetches the topology, subscribes to every master's channel
 * (SSUBSCRIBE, or SUBSCRIBE on servers without sharded pub/sub), then
 * resyncs every master on a second, non-blocking connection per master,
 * interleaved in the same poll() loop as the subscriber sockets. A cluster
 * master is read slot by slot: CLUSTER GETKEYSINSLOT for each slot it owns
 * (SB_SLOT_WINDOW of them in flight), each answered by one MGET of that
 * slot's keys; a plain server (or a master that refuses GETKEYSINSLOT) by
 * SCAN MATCH ns:* + one MGET per SCAN reply (per slot on a cluster). The
 * table therefore has exactly one writer and live batches keep being
 * applied while a load runs; the table's generations make live records win
 * over what a load read.
 *
 * Invariants
 * - Only the subscriber thread touches the table, the connections and the
 *   sequence state. Other threads read stats (relaxed atomics) and ask for
 *   dumps through a mutex/condvar handshake.
 * - A master's resync is either running (loader connected, table resync
 *   begun) or not; restarting one aborts the running one first.
 * - Any subscription trouble (lost connection, sunsubscribe, MOVED, error)
 *   resets everything: topology refetched, every master resubscribed and
 *   resynced. Simple and always correct; a finer reaction per master is
 *   possible later.
 * - A subscription can die without a sound (a firewall that forgets the
 *   connection, a cable pulled between two switches): no reset ever comes
 *   and the master's batches just stop. One silent for [standby] ping_ms
 *   gets a PING; unanswered for twice that, it is declared dead and
 *   everything resets. A resync waiting three times ping_ms for a reply
 *   is abandoned and retried.
 * - A master cut off from its cluster keeps answering: its subscription
 *   stays up while its replica takes over its slots and the active
 *   publishes there. So a watcher thread asks the store for its topology
 *   every [standby] topology_check_ms and resets the subscriber when the
 *   masters it follows are no longer the masters (slots moving between the
 *   same masters do not matter: the data moves with them). The watcher has
 *   its own thread so that a slow seed never stalls the subscriber.
 *
 * Not done here: authentication of batches, replicas as load sources.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <rte_cycles.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsdp_time.h"

/* Keys per SCAN of a plain server (one MGET each). */
#define SB_SCAN_COUNT "1000"
/* CLUSTER GETKEYSINSLOT requests a cluster loader keeps in flight; each
 * reply is followed by one MGET of the slot's keys. */
#define SB_SLOT_WINDOW 32
#define SB_SLOT_MAX_KEYS "1000000000"
#define SB_BACKOFF_MIN_MS 100
#define SB_BACKOFF_MAX_MS 2000
#define SB_SUBSCRIBE_TIMEOUT_MS 2000
#define SB_PURGE_PERIOD_NS (1000ull * 1000 * 1000)
#define SB_MAX_PUBS 1024
#define SB_MAX_GATEWAYS 64

enum load_op { OP_SCAN, OP_SLOT, OP_MGET };

/* Keys of one SCAN or GETKEYSINSLOT reply, in the order the MGETs asked
 * for them (session keys only). */
struct key_batch {
	redisReply *reply; /* owns the key strings */
	redisReply **keys;
	unsigned int refs; /* MGETs still to answer */
	uint32_t order[];
};

struct pend_op {
	enum load_op op;
	struct key_batch *b;
	uint32_t first, n;
};

struct loader {
	redisContext *c;
	int active;
	uint64_t gen;
	uint32_t mark;
	int by_slot; /* GETKEYSINSLOT per slot, else SCAN */
	int keys_done; /* every SCAN or GETKEYSINSLOT is sent */
	uint32_t next_slot; /* by_slot: the next slot to ask for */
	uint32_t slots_inflight;
	uint64_t retry_at; /* monotonic ns; 0 = no retry pending */
	uint64_t last_rx_ns; /* monotonic: started, or last read a reply */
	struct pend_op *ops; /* FIFO of replies expected */
	uint32_t ops_head, ops_n, ops_cap;
	char *cmd; /* MGET commands being formatted */
	size_t cmd_len, cmd_cap;
	uint64_t loaded;
};

struct sb_node {
	struct nsa_addr addr;
	char channel[NS_CHANNEL_MAX];
	redisContext *sub;
	/* Liveness of the subscription: when it last delivered anything, and
	 * when the PING that asks for a sign of life went (0: none due). */
	uint64_t quiet_since_ns;
	uint64_t ping_sent_ns;
	int loaded_once; /* a resync of this master finished */
	int scan_only; /* GETKEYSINSLOT was refused: load with SCAN */
	struct loader ld;
};

/* The last batch seen from one publisher on one channel (named by its
 * slot). Kept across resubscriptions: a publisher's seq on a channel only
 * grows for its whole life, whichever master serves the channel, so a
 * batch at or below last is an old one delivered late. */
struct pub_seq {
	uint32_t publisher_id;
	uint16_t channel_slot;
	uint8_t rebase; /* resubscribed since: the next batch is no gap */
	uint64_t last;
};

struct gw_epoch {
	uint32_t gateway_id;
	uint32_t epoch;
};

struct nsa_standby {
	struct nsa_config conf;
	struct nsdp_table *table;
	pthread_t thread;
	int running;
	int stop;
	int wake_fd;

	struct nsa_topology topo;
	struct sb_node nodes[NSA_MAX_NODES];
	unsigned int n_nodes;
	uint32_t resync_counter;
	int reset; /* the run loop must tear down and start over */

	/* The topology watcher: watch_ref is what the subscriptions follow,
	 * watch_gen counts subscriptions (both under topo_lock), and
	 * topo_changed (atomic) tells the subscriber to start over. */
	pthread_t watcher;
	int watching;
	pthread_mutex_t topo_lock;
	struct nsa_topology watch_ref;
	uint64_t watch_gen;
	int watch_valid;
	int topo_changed;
	uint8_t scope[NS_SLOTS];

	struct pub_seq pubs[SB_MAX_PUBS];
	unsigned int n_pubs;
	struct gw_epoch gws[SB_MAX_GATEWAYS];
	unsigned int n_gws;

	pthread_mutex_t dump_lock;
	pthread_cond_t dump_cond;
	int dump_requested;
	char dump_path[4096];
	int64_t dump_result;
	uint64_t dump_serial;

	struct nsa_standby_stats st;
	/* Lag of the batch being applied: each record's timestamp and the TSC
	 * when it was in the table. */
	uint64_t lag_ts[NS_BATCH_MAX_RECORDS];
	uint64_t lag_tsc[NS_BATCH_MAX_RECORDS];
	double ns_per_tsc; /* 0: count every record at the batch's end */
};

#define STAT_ADD(sb, f, v) \
	__atomic_store_n(&(sb)->st.f, (sb)->st.f + (v), __ATOMIC_RELAXED)

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int stopping(const struct nsa_standby *sb)
{
	return __atomic_load_n(&sb->stop, __ATOMIC_ACQUIRE);
}

static void wake(struct nsa_standby *sb)
{
	uint64_t one = 1;

	if (write(sb->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter saturated: the thread is awake anyway */
	}
}

/* Sleep ms, returning early when stopped. */
static void sb_sleep(struct nsa_standby *sb, int ms)
{
	struct pollfd p = {.fd = sb->wake_fd, .events = POLLIN};
	uint64_t v;

	if (poll(&p, 1, ms) > 0 && read(sb->wake_fd, &v, sizeof(v)) < 0) {
		/* drained or spurious: nothing to do */
	}
}

static int set_nonblocking(redisContext *c)
{
	int fl = fcntl(c->fd, F_GETFL);

	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	c->flags &= ~REDIS_BLOCK;
	return 0;
}

/* ---- loading (SCAN or GETKEYSINSLOT, then MGET) ------------------- */

static void key_batch_unref(struct key_batch *b)
{
	if (--b->refs == 0) {
		freeReplyObject(b->reply);
		free(b);
	}
}

static void loader_drop_ops(struct loader *ld)
{
	while (ld->ops_n) {
		struct pend_op *op = &ld->ops[ld->ops_head];

		if (op->op == OP_MGET)
			key_batch_unref(op->b);
		ld->ops_head = (ld->ops_head + 1) % ld->ops_cap;
		ld->ops_n--;
	}
	ld->ops_head = 0;
}

static void loader_close(struct nsa_standby *sb, struct loader *ld)
{
	loader_drop_ops(ld);
	if (ld->c)
		redisFree(ld->c);
	ld->c = NULL;
	if (ld->active)
		nsdp_table_resync_abort(sb->table);
	ld->active = 0;
}

static int loader_push(struct loader *ld, enum load_op op, struct key_batch *b,
		       uint32_t first, uint32_t n)
{
	if (ld->ops_n == ld->ops_cap) {
		uint32_t cap = ld->ops_cap ? ld->ops_cap * 2 : 4096, i;
		struct pend_op *ops = malloc(cap * sizeof(*ops));

		if (!ops)
			return -ENOMEM;
		for (i = 0; i < ld->ops_n; i++)
			ops[i] = ld->ops[(ld->ops_head + i) % ld->ops_cap];
		free(ld->ops);
		ld->ops = ops;
		ld->ops_cap = cap;
		ld->ops_head = 0;
	}
	ld->ops[(ld->ops_head + ld->ops_n) % ld->ops_cap] =
		(struct pend_op){.op = op, .b = b, .first = first, .n = n};
	ld->ops_n++;
	return 0;
}

static int loader_send_scan(struct loader *ld, const char *cursor)
{
	if (redisAppendCommand(ld->c, "SCAN %s MATCH ns:* COUNT " SB_SCAN_COUNT,
			       cursor) != REDIS_OK)
		return -EIO;
	return loader_push(ld, OP_SCAN, NULL, 0, 0);
}

/* Keep SB_SLOT_WINDOW GETKEYSINSLOT in flight over the slots node owns. */
static int loader_send_slots(struct nsa_standby *sb, unsigned int node)
{
	struct loader *ld = &sb->nodes[node].ld;
	char slot[8];
	int rc;

	while (ld->slots_inflight < SB_SLOT_WINDOW && !ld->keys_done) {
		while (ld->next_slot < NS_SLOTS &&
		       !(sb->topo.slot_covered[ld->next_slot] &&
			 sb->topo.slot_node[ld->next_slot] == node))
			ld->next_slot++;
		if (ld->next_slot == NS_SLOTS) {
			ld->keys_done = 1;
			break;
		}
		snprintf(slot, sizeof(slot), "%u", ld->next_slot++);
		if (redisAppendCommand(
			    ld->c, "CLUSTER GETKEYSINSLOT %s " SB_SLOT_MAX_KEYS,
			    slot) != REDIS_OK)
			return -EIO;
		rc = loader_push(ld, OP_SLOT, NULL, 0, 0);
		if (rc < 0)
			return rc;
		ld->slots_inflight++;
	}
	return 0;
}

static int cmd_reserve(struct loader *ld, size_t more)
{
	if (ld->cmd_len + more <= ld->cmd_cap)
		return 0;
	size_t cap = ld->cmd_cap ? ld->cmd_cap : 65536;
	char *p;

	while (cap < ld->cmd_len + more)
		cap *= 2;
	p = realloc(ld->cmd, cap);
	if (!p)
		return -ENOMEM;
	ld->cmd = p;
	ld->cmd_cap = cap;
	return 0;
}

/* Append "<c><n>\r\n" (a RESP header) to the command being built. */
static int cmd_header(struct loader *ld, char c, size_t n)
{
	char digits[24];
	size_t k = 0;

	if (cmd_reserve(ld, sizeof(digits) + 3) < 0)
		return -ENOMEM;
	do {
		digits[k++] = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	ld->cmd[ld->cmd_len++] = c;
	while (k)
		ld->cmd[ld->cmd_len++] = digits[--k];
	ld->cmd[ld->cmd_len++] = '\r';
	ld->cmd[ld->cmd_len++] = '\n';
	return 0;
}

static int cmd_mget(struct loader *ld, struct key_batch *b, uint32_t first,
		    uint32_t n)
{
	uint32_t i;

	if (cmd_header(ld, '*', (size_t)n + 1) < 0 || cmd_reserve(ld, 10) < 0)
		return -ENOMEM;
	memcpy(ld->cmd + ld->cmd_len, "$4\r\nMGET\r\n", 10);
	ld->cmd_len += 10;
	for (i = first; i < first + n; i++) {
		const redisReply *k = b->keys[b->order[i]];

		if (cmd_header(ld, '$', k->len) < 0 ||
		    cmd_reserve(ld, k->len + 2) < 0)
			return -ENOMEM;
		memcpy(ld->cmd + ld->cmd_len, k->str, k->len);
		memcpy(ld->cmd + ld->cmd_len + k->len, "\r\n", 2);
		ld->cmd_len += k->len + 2;
	}
	if (loader_push(ld, OP_MGET, b, first, n) < 0)
		return -ENOMEM;
	b->refs++; /* the MGET's reply holds the keys until it comes */
	return 0;
}

static const uint16_t *sort_slots; /* qsort has no context argument */

static int by_slot(const void *a, const void *b)
{
	uint16_t sa = sort_slots[*(const uint32_t *)a];
	uint16_t sb = sort_slots[*(const uint32_t *)b];

	return (sa > sb) - (sa < sb);
}

/* A list of keys (owned by reply r): queue MGETs of its session keys, one
 * for all of them when they share a slot or the store is one server, else
 * one per slot (MGET keys must share a slot on a cluster). Takes r. */
static int loader_on_keys(struct nsa_standby *sb, struct loader *ld,
			  redisReply *r, redisReply **keys, size_t n,
			  int one_slot)
{
	struct key_batch *b;
	uint16_t *slots = NULL;
	size_t m = 0, i, first;
	int rc = 0;

	b = malloc(sizeof(*b) + n * sizeof(uint32_t));
	if (!b) {
		freeReplyObject(r);
		return -ENOMEM;
	}
	b->reply = r;
	b->keys = keys;
	b->refs = 1; /* ours until the MGETs are queued */
	for (i = 0; i < n; i++) {
		const redisReply *k = keys[i];

		if (k->type != REDIS_REPLY_STRING ||
		    k->len < NS_KEY_PREFIX_LEN ||
		    memcmp(k->str, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN) != 0)
			continue; /* not natsync's */
		if (k->len != NS_KEY_LEN || k->str[3] == 0) {
			STAT_ADD(sb, bad_values, 1);
			continue;
		}
		b->order[m++] = (uint32_t)i;
	}
	ld->cmd_len = 0;
	if (m == 0) {
		/* nothing to ask */
	} else if (one_slot || !sb->topo.cluster) {
		rc = cmd_mget(ld, b, 0, (uint32_t)m);
	} else {
		slots = malloc(n * sizeof(*slots));
		if (!slots) {
			key_batch_unref(b);
			return -ENOMEM;
		}
		for (i = 0; i < m; i++)
			slots[b->order[i]] = ns_key_slot(
				keys[b->order[i]]->str, keys[b->order[i]]->len);
		sort_slots = slots;
		qsort(b->order, m, sizeof(uint32_t), by_slot);
		for (first = 0; first < m && rc == 0; first = i) {
			for (i = first + 1;
			     i < m &&
			     slots[b->order[i]] == slots[b->order[first]];
			     i++)
				;
			rc = cmd_mget(ld, b, (uint32_t)first,
				      (uint32_t)(i - first));
		}
		free(slots);
	}
	if (rc == 0 && ld->cmd_len &&
	    redisAppendFormattedCommand(ld->c, ld->cmd, ld->cmd_len) !=
		    REDIS_OK)
		rc = -EIO;
	/* On error the loader is closed, which drops the MGETs' references
	 * through its ops. */
	key_batch_unref(b);
	return rc;
}

/* A SCAN reply: queue the next SCAN, then MGETs of its keys. */
static int loader_on_scan(struct nsa_standby *sb, struct loader *ld,
			  redisReply *r)
{
	int rc;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -EPROTO;
	}
	if (strcmp(r->element[0]->str, "0") == 0)
		ld->keys_done = 1;
	else if ((rc = loader_send_scan(ld, r->element[0]->str)) < 0) {
		freeReplyObject(r);
		return rc;
	}
	return loader_on_keys(sb, ld, r, r->element[1]->element,
			      r->element[1]->elements, 0);
}

/* A GETKEYSINSLOT reply: one MGET of the slot's keys, and the next slot. */
static int loader_on_slot(struct nsa_standby *sb, unsigned int node,
			  redisReply *r)
{
	struct loader *ld = &sb->nodes[node].ld;
	int rc;

	ld->slots_inflight--;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -EPROTO;
	}
	rc = loader_on_keys(sb, ld, r, r->element, r->elements, 1);
	return rc < 0 ? rc : loader_send_slots(sb, node);
}

/* Sessions decoded ahead of their apply, so that their table buckets are
 * prefetched while the others are decoded. */
#define SB_APPLY_CHUNK 16

static void loader_on_mget(struct nsa_standby *sb, struct loader *ld,
			   const struct pend_op *op, redisReply *r)
{
	struct ns_session ss[SB_APPLY_CHUNK];
	redisReply **keys = op->b->keys;
	uint64_t loaded = 0, bad = 0;
	uint32_t i = 0, j, m;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != op->n)
		return;
	while (i < op->n) {
		for (m = 0; i < op->n && m < SB_APPLY_CHUNK; i++) {
			const redisReply *v = r->element[i];
			const redisReply *k = keys[op->b->order[op->first + i]];
			uint8_t key[NS_KEY_LEN];

			if (v->type != REDIS_REPLY_STRING)
				continue; /* expired since the key was listed */
			if (ns_record_decode((const uint8_t *)v->str, v->len,
					     &ss[m]) != (int)v->len) {
				bad++;
				continue;
			}
			ns_key_build(ss[m].proto, &ss[m].orig, key);
			if (k->len != NS_KEY_LEN ||
			    memcmp(k->str, key, NS_KEY_LEN) != 0) {
				bad++;
				continue;
			}
			nsdp_table_prefetch(sb->table, &ss[m]);
			m++;
		}
		for (j = 0; j < m; j++)
			if (nsdp_table_apply_resync(sb->table, &ss[j], ld->gen,
						    ld->mark) == 0)
				loaded++;
	}
	ld->loaded += loaded;
	STAT_ADD(sb, loaded, loaded);
	if (bad)
		STAT_ADD(sb, bad_values, bad);
}

static void node_scope(const struct nsa_standby *sb, unsigned int node,
		       uint8_t *scope)
{
	unsigned int s;

	for (s = 0; s < NS_SLOTS; s++)
		scope[s] = sb->topo.slot_covered[s] &&
			   sb->topo.slot_node[s] == node;
}

static void sync_check(struct nsa_standby *sb)
{
	unsigned int i;

	if (sb->st.synced)
		return;
	for (i = 0; i < sb->n_nodes; i++)
		if (!sb->nodes[i].loaded_once)
			return;
	__atomic_store_n(&sb->st.synced, 1, __ATOMIC_RELAXED);
	NSA_INFO("standby: synced, %" PRIu64 " sessions in the table",
		 __atomic_load_n(&sb->st.loaded, __ATOMIC_RELAXED));
}

static void loader_finish(struct nsa_standby *sb, unsigned int node)
{
	struct loader *ld = &sb->nodes[node].ld;
	uint64_t removed;

	node_scope(sb, node, sb->scope);
	removed = nsdp_table_resync_finish(sb->table, ld->gen, ld->mark,
					   sb->scope);
	ld->active = 0; /* resync_finish ended the table's resync */
	loader_close(sb, ld);
	sb->nodes[node].loaded_once = 1;
	STAT_ADD(sb, resyncs, 1);
	NSA_DEBUG("standby: resync of %s:%u done, %" PRIu64 " read, %" PRIu64
		  " removed",
		  sb->nodes[node].addr.host, sb->nodes[node].addr.port,
		  ld->loaded, removed);
	sync_check(sb);
}

static void loader_fail(struct nsa_standby *sb, unsigned int node,
			const char *why)
{
	struct loader *ld = &sb->nodes[node].ld;

	NSA_WARN("standby: resync of %s:%u failed (%s), retrying",
		 sb->nodes[node].addr.host, sb->nodes[node].addr.port, why);
	loader_close(sb, ld);
	ld->retry_at =
		now_ns(CLOCK_MONOTONIC) + SB_BACKOFF_MAX_MS * 1000000ull / 2;
}

/* Start (or restart) the resync of one master. */
static void loader_start(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];
	struct loader *ld = &nd->ld;
	char err[256] = "";

	loader_close(sb, ld);
	ld->retry_at = 0;
	ld->c = nsa_store_connect(&sb->conf.store, &nd->addr, err, sizeof(err));
	if (!ld->c || set_nonblocking(ld->c) < 0) {
		loader_fail(sb, node, err[0] ? err : "connect");
		return;
	}
	ld->gen = nsdp_table_resync_begin(sb->table);
	ld->mark = ++sb->resync_counter;
	ld->active = 1;
	ld->last_rx_ns = now_ns(CLOCK_MONOTONIC);
	ld->by_slot = sb->topo.cluster && !nd->scan_only;
	ld->keys_done = 0;
	ld->next_slot = 0;
	ld->slots_inflight = 0;
	ld->loaded = 0;
	if ((ld->by_slot ? loader_send_slots(sb, node)
			 : loader_send_scan(ld, "0")) < 0)
		loader_fail(sb, node, "out of memory");
	else if (ld->keys_done && ld->ops_n == 0)
		loader_finish(sb, node); /* owns no slot */
}

static void loader_on_readable(struct nsa_standby *sb, unsigned int node)
{
	struct loader *ld = &sb->nodes[node].ld;
	redisReply *r;
	void *rv;
	int rc;

	if (redisBufferRead(ld->c) != REDIS_OK) {
		loader_fail(sb, node, ld->c->errstr);
		return;
	}
	ld->last_rx_ns = now_ns(CLOCK_MONOTONIC);
	for (;;) {
		struct pend_op op;

		if (redisGetReplyFromReader(ld->c, &rv) != REDIS_OK) {
			loader_fail(sb, node, ld->c->errstr);
			return;
		}
		if (!rv)
			break;
		r = rv;
		if (ld->ops_n == 0 || r->type == REDIS_REPLY_ERROR) {
			char why[160];
			/* refused for good (ACL, an older or stripped
			 * server), not a passing state such as LOADING */
			int slot_refused =
				ld->ops_n &&
				ld->ops[ld->ops_head].op == OP_SLOT &&
				r->type == REDIS_REPLY_ERROR &&
				(strncmp(r->str, "NOPERM", 6) == 0 ||
				 strncmp(r->str, "ERR", 3) == 0);

			snprintf(why, sizeof(why), "%.150s",
				 r->type == REDIS_REPLY_ERROR ? r->str
							      : "unexpected");
			freeReplyObject(r);
			if (slot_refused) {
				NSA_WARN(
					"standby: %s:%u refuses CLUSTER "
					"GETKEYSINSLOT (%s): loading with SCAN",
					sb->nodes[node].addr.host,
					sb->nodes[node].addr.port, why);
				sb->nodes[node].scan_only = 1;
				loader_start(sb, node);
				return;
			}
			loader_fail(sb, node, why);
			return;
		}
		op = ld->ops[ld->ops_head];
		ld->ops_head = (ld->ops_head + 1) % ld->ops_cap;
		ld->ops_n--;
		if (op.op == OP_MGET) {
			loader_on_mget(sb, ld, &op, r);
			freeReplyObject(r);
			key_batch_unref(op.b);
			continue;
		}
		rc = op.op == OP_SCAN ? loader_on_scan(sb, ld, r)
				      : loader_on_slot(sb, node, r);
		if (rc < 0) {
			loader_fail(sb, node, strerror(-rc));
			return;
		}
	}
	if (ld->keys_done && ld->ops_n == 0)
		loader_finish(sb, node);
}

static void loader_flush(struct nsa_standby *sb, unsigned int node)
{
	struct loader *ld = &sb->nodes[node].ld;
	int done = 0;

	if (ld->c && ld->c->obuf[0] &&
	    redisBufferWrite(ld->c, &done) != REDIS_OK)
		loader_fail(sb, node, ld->c->errstr);
}

/* ---- live batches ------------------------------------------------- */

static unsigned int lag_bucket(uint64_t us)
{
	unsigned int e;

	if (us < NSA_STANDBY_LAG_SUB)
		return (unsigned int)us;
	e = 63 - (unsigned int)__builtin_clzll(us);
	if (e >= NSA_STANDBY_LAG_TOP_EXP)
		return NSA_STANDBY_LAG_BUCKETS - 1;
	return NSA_STANDBY_LAG_SUB +
	       (e - NSA_STANDBY_LAG_SUB_EXP) * NSA_STANDBY_LAG_SUB +
	       (unsigned int)(us >> (e - NSA_STANDBY_LAG_SUB_EXP)) -
	       NSA_STANDBY_LAG_SUB;
}

/* The largest lag bucket b holds (not for the last, open-ended one). */
static uint64_t lag_bucket_top(unsigned int b)
{
	unsigned int e, sub;

	if (b < NSA_STANDBY_LAG_SUB)
		return b;
	e = NSA_STANDBY_LAG_SUB_EXP +
	    (b - NSA_STANDBY_LAG_SUB) / NSA_STANDBY_LAG_SUB;
	sub = (b - NSA_STANDBY_LAG_SUB) % NSA_STANDBY_LAG_SUB;
	return ((uint64_t)(NSA_STANDBY_LAG_SUB + sub + 1)
		<< (e - NSA_STANDBY_LAG_SUB_EXP)) -
	       1;
}

#define LAG_ADD(s, f, v) \
	__atomic_store_n(&(s)->f, (s)->f + (v), __ATOMIC_RELAXED)

void nsa_standby_lag_record(struct nsa_standby_stats *s, uint64_t lag_us)
{
	LAG_ADD(s, lag_count, 1);
	LAG_ADD(s, lag_sum_us, lag_us);
	LAG_ADD(s, lag_hist[lag_bucket(lag_us)], 1);
	if (lag_us > s->lag_max_us)
		__atomic_store_n(&s->lag_max_us, lag_us, __ATOMIC_RELAXED);
}

/* Returns 0 to apply, -1 to drop a batch from an older epoch. */
static int epoch_check(struct nsa_standby *sb, const struct ns_batch_hdr *h)
{
	unsigned int i;

	for (i = 0; i < sb->n_gws; i++) {
		if (sb->gws[i].gateway_id != h->gateway_id)
			continue;
		if (h->epoch < sb->gws[i].epoch)
			return -1;
		sb->gws[i].epoch = h->epoch;
		return 0;
	}
	if (sb->n_gws == SB_MAX_GATEWAYS)
		sb->n_gws = 0; /* forget everything rather than fence wrongly */
	sb->gws[sb->n_gws++] = (struct gw_epoch){.gateway_id = h->gateway_id,
						 .epoch = h->epoch};
	return 0;
}

enum seq_verdict { SEQ_NEXT, SEQ_GAP, SEQ_STALE };

/* Where a batch stands in its (publisher, channel) sequence. */
static enum seq_verdict seq_check(struct nsa_standby *sb, unsigned int node,
				  const struct ns_batch_hdr *h)
{
	uint16_t slot = sb->topo.nodes[node].channel_slot;
	struct pub_seq *p = NULL;
	enum seq_verdict v;
	unsigned int i;

	for (i = 0; i < sb->n_pubs; i++) {
		if (sb->pubs[i].publisher_id == h->publisher_id &&
		    sb->pubs[i].channel_slot == slot) {
			p = &sb->pubs[i];
			break;
		}
	}
	if (!p) {
		if (sb->n_pubs == SB_MAX_PUBS)
			sb->n_pubs = 0;
		p = &sb->pubs[sb->n_pubs++];
		*p = (struct pub_seq){.publisher_id = h->publisher_id,
				      .channel_slot = slot,
				      .last = h->seq};
		/* Not a gap, whatever its seq: the subscription was in place
		 * before this master's load began, so what the publisher sent
		 * earlier reached us (and it would be known) or was in the
		 * store when the load read it. */
		return SEQ_NEXT;
	}
	/* Already seen, or older than what was: a master cut off from its
	 * cluster hands its channel's messages over the cluster bus to the
	 * master that replaced it once the two meet again, long after the
	 * writers replayed those records and moved on. */
	if (h->seq <= p->last)
		return SEQ_STALE;
	/* The first batch after a resubscription is no gap either: a load
	 * follows every subscription. */
	v = !p->rebase && h->seq > p->last + 1 ? SEQ_GAP : SEQ_NEXT;
	p->rebase = 0;
	p->last = h->seq;
	return v;
}

static void on_batch(struct nsa_standby *sb, unsigned int node,
		     const uint8_t *buf, size_t len)
{
	struct ns_batch_iter it;
	struct ns_batch_hdr h;
	const uint8_t *body;
	struct ns_session s;
	enum seq_verdict seq;
	uint64_t now, tsc_now, n = 0;
	uint32_t i, k = 0;
	int rc;

	if (ns_batch_decode(buf, len, &h, &body) < 0) {
		STAT_ADD(sb, bad_messages, 1);
		return;
	}
	/* With a batch key, only batches signed with it count: a writer
	 * without the key (or a forger on the channel) changes nothing. */
	if (sb->conf.batch_key_len &&
	    ns_batch_verify(buf, len, (const uint8_t *)sb->conf.batch_key,
			    sb->conf.batch_key_len) != 0) {
		STAT_ADD(sb, unauthenticated, 1);
		return;
	}
	if (epoch_check(sb, &h) < 0) {
		STAT_ADD(sb, fenced, 1);
		return;
	}
	seq = seq_check(sb, node, &h);
	if (seq == SEQ_STALE) {
		STAT_ADD(sb, stale, 1);
		return;
	}
	ns_batch_iter_init(&it, body, h.body_len);
	while ((rc = ns_batch_iter_next(&it, &s)) == 1) {
		if (nsdp_table_apply(sb->table, &s) == 0)
			n++;
		if (k < NS_BATCH_MAX_RECORDS) {
			sb->lag_ts[k] = s.timestamp_ns;
			sb->lag_tsc[k++] = rte_rdtsc();
		}
	}
	/* A record's lag ends when it is in the table: the wall clock is read
	 * once per batch, and each record's time is that minus the TSC
	 * cycles between its apply and now. */
	now = now_ns(CLOCK_REALTIME);
	tsc_now = rte_rdtsc();
	for (i = 0; i < k; i++) {
		uint64_t at =
			now - (uint64_t)((double)(tsc_now - sb->lag_tsc[i]) *
					 sb->ns_per_tsc);

		nsa_standby_lag_record(
			&sb->st,
			at > sb->lag_ts[i] ? (at - sb->lag_ts[i]) / 1000 : 0);
	}
	STAT_ADD(sb, batches, 1);
	STAT_ADD(sb, records, n);
	if (seq == SEQ_GAP) {
		STAT_ADD(sb, gaps, 1);
		NSA_WARN("standby: gap on %s from publisher %u (seq %" PRIu64
			 "), resyncing %s:%u",
			 sb->nodes[node].channel, h.publisher_id, h.seq,
			 sb->nodes[node].addr.host, sb->nodes[node].addr.port);
		loader_start(sb, node);
	}
}

static int is_str(const redisReply *r, const char *s)
{
	return r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

static void on_push(struct nsa_standby *sb, unsigned int node, redisReply *r)
{
	if (r->type == REDIS_REPLY_ERROR) {
		NSA_WARN("standby: %s:%u: %s", sb->nodes[node].addr.host,
			 sb->nodes[node].addr.port, r->str);
		sb->reset = 1;
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
		return;
	if ((is_str(r->element[0], "smessage") ||
	     is_str(r->element[0], "message")) &&
	    r->element[2]->type == REDIS_REPLY_STRING)
		on_batch(sb, node, (const uint8_t *)r->element[2]->str,
			 r->element[2]->len);
	else if (is_str(r->element[0], "sunsubscribe") ||
		 is_str(r->element[0], "unsubscribe"))
		sb->reset = 1;
}

static void sub_drain(struct nsa_standby *sb, unsigned int node)
{
	redisContext *c = sb->nodes[node].sub;
	void *rv;

	while (!sb->reset) {
		if (redisGetReplyFromReader(c, &rv) != REDIS_OK) {
			sb->reset = 1;
			return;
		}
		if (!rv)
			return;
		on_push(sb, node, rv);
		freeReplyObject(rv);
	}
}

/* ---- dump requests -------------------------------------------------- */

static void dump_serve(struct nsa_standby *sb)
{
	char path[sizeof(sb->dump_path)];
	int64_t rc;

	if (!__atomic_load_n(&sb->dump_requested, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&sb->dump_lock);
	if (!sb->dump_requested) { /* withdrawn meanwhile */
		pthread_mutex_unlock(&sb->dump_lock);
		return;
	}
	memcpy(path, sb->dump_path, sizeof(path));
	sb->dump_requested = 0;
	pthread_mutex_unlock(&sb->dump_lock);

	/* The caller may time out meanwhile; it does not wait for the lock. */
	rc = nsdp_table_dump(sb->table, path);

	pthread_mutex_lock(&sb->dump_lock);
	sb->dump_result = rc;
	sb->dump_serial++;
	pthread_cond_broadcast(&sb->dump_cond);
	pthread_mutex_unlock(&sb->dump_lock);
}

/* ---- setup and the loop --------------------------------------------- */

static void sb_teardown(struct nsa_standby *sb)
{
	unsigned int i;

	for (i = 0; i < sb->n_nodes; i++) {
		loader_close(sb, &sb->nodes[i].ld);
		sb->nodes[i].ld.retry_at = 0;
		if (sb->nodes[i].sub)
			redisFree(sb->nodes[i].sub);
		sb->nodes[i].sub = NULL;
	}
	sb->n_nodes = 0;
	for (i = 0; i < sb->n_pubs; i++)
		sb->pubs[i].rebase = 1;
	pthread_mutex_lock(&sb->topo_lock);
	sb->watch_valid = 0;
	pthread_mutex_unlock(&sb->topo_lock);
}

static int sb_subscribe(struct nsa_standby *sb, unsigned int i, char *err,
			size_t errlen)
{
	struct sb_node *nd = &sb->nodes[i];
	struct timeval tv = {.tv_sec = SB_SUBSCRIBE_TIMEOUT_MS / 1000,
			     .tv_usec = SB_SUBSCRIBE_TIMEOUT_MS % 1000 * 1000};
	redisReply *r;
	int ok;

	nd->sub = nsa_store_connect(&sb->conf.store, &nd->addr, err, errlen);
	if (!nd->sub)
		return -ECONNREFUSED;
	redisSetTimeout(nd->sub, tv);
	r = redisCommand(nd->sub, "%s %s",
			 sb->topo.sharded_pubsub ? "SSUBSCRIBE" : "SUBSCRIBE",
			 nd->channel);
	ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	     (is_str(r->element[0], "ssubscribe") ||
	      is_str(r->element[0], "subscribe"));
	if (!ok)
		snprintf(err, errlen, "subscribe to %s on %s:%u: %s",
			 nd->channel, nd->addr.host, nd->addr.port,
			 !r				? nd->sub->errstr
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "unexpected reply");
	if (r)
		freeReplyObject(r);
	if (!ok || set_nonblocking(nd->sub) < 0)
		return -EPROTO;
	nd->quiet_since_ns = now_ns(CLOCK_MONOTONIC);
	nd->ping_sent_ns = 0;
	return 0;
}

/* Ask a quiet subscription for a sign of life, and give up on one whose
 * PING stays unanswered for twice ping_ms (so a standby that was itself
 * paused gets its answer before it judges): 0, or -1 when node's
 * subscription is dead. Called after the round's reads. */
static int sub_check_alive(struct nsa_standby *sb, unsigned int node,
			   uint64_t now)
{
	struct sb_node *nd = &sb->nodes[node];
	uint64_t ping_ns = (uint64_t)sb->conf.ping_ms * 1000000ull;
	int done = 0;

	if (ping_ns == 0)
		return 0;
	if (nd->ping_sent_ns && now - nd->ping_sent_ns >= 2 * ping_ns) {
		NSA_WARN("standby: no word from %s:%u for %" PRIu64
			 " ms, PING unanswered; resubscribing",
			 nd->addr.host, nd->addr.port,
			 (now - nd->quiet_since_ns) / 1000000);
		STAT_ADD(sb, dead_subscriptions, 1);
		return -1;
	}
	if (now - nd->quiet_since_ns >= ping_ns && nd->ping_sent_ns == 0) {
		if (redisAppendCommand(nd->sub, "PING") != REDIS_OK)
			return -1;
		nd->ping_sent_ns = now;
	}
	/* A few bytes: written at once, or on a later round. */
	if (nd->sub->obuf[0] && redisBufferWrite(nd->sub, &done) != REDIS_OK)
		return -1;
	return 0;
}

/* The same for a resync: one waiting for replies that do not come for
 * three times ping_ms is abandoned and retried. */
static void loader_check_alive(struct nsa_standby *sb, unsigned int node,
			       uint64_t now)
{
	struct loader *ld = &sb->nodes[node].ld;
	uint64_t ping_ns = (uint64_t)sb->conf.ping_ms * 1000000ull;

	if (ping_ns && ld->c && ld->ops_n > 0 &&
	    now - ld->last_rx_ns >= 3 * ping_ns)
		loader_fail(sb, node, "no reply");
}

/* Fetch the topology and subscribe everywhere, with backoff, until done
 * or stopped. Returns 0 when subscribed. */
static int sb_setup(struct nsa_standby *sb)
{
	char err[256], last_err[256] = "";
	int backoff = SB_BACKOFF_MIN_MS;
	unsigned int i;

	while (!stopping(sb)) {
		int rc;

		err[0] = 0;
		rc = nsa_topology_fetch(&sb->conf.store, &sb->topo, err,
					sizeof(err));
		if (rc == 0 && sb->topo.n_nodes == 0) {
			snprintf(err, sizeof(err), "no master in the topology");
			rc = -ENOENT;
		}
		if (rc == 0) {
			sb->n_nodes = sb->topo.n_nodes;
			for (i = 0; i < sb->n_nodes && rc == 0; i++) {
				struct sb_node *nd = &sb->nodes[i];

				nd->addr = sb->topo.nodes[i].addr;
				nd->loaded_once = 0;
				nd->scan_only = 0;
				nsa_topology_channel(&sb->topo, i, nd->channel);
				rc = sb_subscribe(sb, i, err, sizeof(err));
			}
			if (rc == 0) {
				pthread_mutex_lock(&sb->topo_lock);
				sb->watch_ref = sb->topo;
				sb->watch_gen++;
				sb->watch_valid = 1;
				__atomic_store_n(&sb->topo_changed, 0,
						 __ATOMIC_RELEASE);
				pthread_mutex_unlock(&sb->topo_lock);
				NSA_INFO("standby: subscribed to %u master(s) "
					 "(%s)",
					 sb->n_nodes,
					 sb->topo.sharded_pubsub ? "sharded"
								 : "classic");
				return 0;
			}
			sb_teardown(sb);
		}
		if (strcmp(err, last_err) != 0) {
			NSA_WARN("standby: store not ready: %s", err);
			snprintf(last_err, sizeof(last_err), "%s", err);
		}
		sb_sleep(sb, backoff);
		backoff = backoff * 2 > SB_BACKOFF_MAX_MS ? SB_BACKOFF_MAX_MS
							  : backoff * 2;
	}
	return -ECANCELED;
}

static void sb_run(struct nsa_standby *sb)
{
	struct pollfd pfd[1 + 2 * NSA_MAX_NODES];
	int who[1 + 2 * NSA_MAX_NODES]; /* node*2 (+1 for the loader) */
	uint64_t next_purge = now_ns(CLOCK_MONOTONIC) + SB_PURGE_PERIOD_NS;
	unsigned int i;

	for (i = 0; i < sb->n_nodes; i++)
		loader_start(sb, i);
	for (i = 0; i < sb->n_nodes; i++)
		sub_drain(sb, i); /* replies read along with the confirmation */

	while (!stopping(sb) && !sb->reset) {
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		int n = 0, k, timeout = 100;
		uint64_t v;

		if (__atomic_exchange_n(&sb->topo_changed, 0,
					__ATOMIC_ACQ_REL)) {
			NSA_WARN("standby: the store's masters changed under "
				 "working subscriptions; resubscribing and "
				 "resyncing");
			STAT_ADD(sb, topology_changes, 1);
			sb->reset = 1;
			break;
		}

		if (now >= next_purge) {
			nsdp_table_purge_tombstones(sb->table);
			next_purge = now + SB_PURGE_PERIOD_NS;
		}
		pfd[n] = (struct pollfd){.fd = sb->wake_fd, .events = POLLIN};
		who[n++] = -1;
		for (i = 0; i < sb->n_nodes; i++) {
			struct loader *ld = &sb->nodes[i].ld;

			pfd[n] = (struct pollfd){.fd = sb->nodes[i].sub->fd,
						 .events = POLLIN};
			who[n++] = (int)(2 * i);
			if (!ld->c && ld->retry_at && now >= ld->retry_at)
				loader_start(sb, i);
			if (ld->c) {
				loader_flush(sb, i);
			}
			if (ld->c) {
				pfd[n] = (struct pollfd){
					.fd = ld->c->fd,
					.events = (short)(POLLIN |
							  (ld->c->obuf[0]
								   ? POLLOUT
								   : 0))};
				who[n++] = (int)(2 * i + 1);
			} else if (ld->retry_at) {
				timeout = 20;
			}
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			NSA_ERR("standby: poll: %s", strerror(errno));
			sb->reset = 1;
			break;
		}
		for (k = 0; k < n && !sb->reset; k++) {
			unsigned int node;

			if (!pfd[k].revents)
				continue;
			if (who[k] < 0) {
				if (read(sb->wake_fd, &v, sizeof(v)) < 0) {
					/* already drained */
				}
				continue;
			}
			node = (unsigned int)who[k] / 2;
			if (who[k] & 1) {
				if (sb->nodes[node].ld.c)
					loader_on_readable(sb, node);
				continue;
			}
			if (redisBufferRead(sb->nodes[node].sub) != REDIS_OK) {
				NSA_WARN("standby: lost subscription to "
					 "%s:%u: %s",
					 sb->nodes[node].addr.host,
					 sb->nodes[node].addr.port,
					 sb->nodes[node].sub->errstr);
				sb->reset = 1;
				break;
			}
			sb->nodes[node].quiet_since_ns =
				now_ns(CLOCK_MONOTONIC);
			sb->nodes[node].ping_sent_ns = 0;
			sub_drain(sb, node);
		}
		now = now_ns(CLOCK_MONOTONIC);
		for (i = 0; i < sb->n_nodes && !sb->reset; i++) {
			if (sub_check_alive(sb, i, now) < 0)
				sb->reset = 1;
			loader_check_alive(sb, i, now);
		}
		dump_serve(sb);
	}
}

/* Whether a and b have the same masters with the same channels: what the
 * subscriptions depend on. */
static int same_masters(const struct nsa_topology *a,
			const struct nsa_topology *b)
{
	unsigned int i;

	if (a->cluster != b->cluster || a->n_nodes != b->n_nodes)
		return 0;
	for (i = 0; i < a->n_nodes; i++) {
		const struct nsa_node *x = &a->nodes[i], *y = &b->nodes[i];

		if (x->addr.port != y->addr.port ||
		    x->channel_slot != y->channel_slot ||
		    strcmp(x->addr.host, y->addr.host) != 0)
			return 0;
	}
	return 1;
}

/* The watcher thread: every topology_check_ms, fetch the topology and flag
 * the subscriber when its masters are not the ones subscribed to. A fetch
 * that fails changes nothing: a store the subscriber cannot reach breaks
 * its subscriptions, which it notices itself. */
static void *sb_watch(void *arg)
{
	struct nsa_standby *sb = arg;
	struct nsa_topology *t = malloc(sizeof(*t));
	const unsigned int period_ms = sb->conf.topology_check_ms;
	char err[256];

	if (!t) {
		NSA_ERR("standby: out of memory: topology checks off");
		return NULL;
	}
	while (!stopping(sb)) {
		uint64_t gen;
		int valid, changed;

		for (unsigned int slept = 0; slept < period_ms && !stopping(sb);
		     slept += 50)
			nsdp_sleep_ms(period_ms - slept < 50 ? period_ms - slept
							     : 50);
		pthread_mutex_lock(&sb->topo_lock);
		valid = sb->watch_valid;
		gen = sb->watch_gen;
		pthread_mutex_unlock(&sb->topo_lock);
		if (!valid || stopping(sb) ||
		    nsa_topology_fetch(&sb->conf.store, t, err, sizeof(err)))
			continue;
		pthread_mutex_lock(&sb->topo_lock);
		changed = sb->watch_valid && sb->watch_gen == gen &&
			  !same_masters(t, &sb->watch_ref);
		pthread_mutex_unlock(&sb->topo_lock);
		if (changed) {
			__atomic_store_n(&sb->topo_changed, 1,
					 __ATOMIC_RELEASE);
			wake(sb);
		}
	}
	free(t);
	return NULL;
}

static void *sb_main(void *arg)
{
	struct nsa_standby *sb = arg;

	while (!stopping(sb)) {
		if (sb_setup(sb) < 0)
			break;
		sb->reset = 0;
		sb_run(sb);
		sb_teardown(sb);
		if (sb->reset && !stopping(sb)) {
			STAT_ADD(sb, resubscribes, 1);
			sb_sleep(sb, SB_BACKOFF_MIN_MS);
		}
	}
	sb_teardown(sb);
	dump_serve(sb);
	return NULL;
}

/* ---- public interface ----------------------------------------------- */

struct nsa_standby *nsa_standby_create(const struct nsa_config *conf)
{
	struct nsa_standby *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->conf = *conf;
	sb->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sb->table = nsdp_table_create("nsa_sb", conf->table_capacity);
	if (sb->wake_fd < 0 || !sb->table) {
		NSA_ERR("standby: cannot create the table of %u sessions",
			conf->table_capacity);
		if (sb->wake_fd >= 0)
			close(sb->wake_fd);
		nsdp_table_free(sb->table);
		free(sb);
		return NULL;
	}
	pthread_mutex_init(&sb->dump_lock, NULL);
	pthread_cond_init(&sb->dump_cond, NULL);
	pthread_mutex_init(&sb->topo_lock, NULL);
	if (rte_get_tsc_hz())
		sb->ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	return sb;
}

int nsa_standby_start(struct nsa_standby *sb)
{
	int rc;

	if (sb->running)
		return -EALREADY;
	__atomic_store_n(&sb->stop, 0, __ATOMIC_RELEASE);
	rc = pthread_create(&sb->thread, NULL, sb_main, sb);
	if (rc != 0)
		return -rc;
	sb->running = 1;
	if (sb->conf.topology_check_ms > 0) {
		rc = pthread_create(&sb->watcher, NULL, sb_watch, sb);
		if (rc == 0)
			sb->watching = 1;
		else
			NSA_WARN("standby: no topology watcher (%s): a master "
				 "cut off from its cluster goes unnoticed",
				 strerror(rc));
	}
	return 0;
}

void nsa_standby_stop(struct nsa_standby *sb)
{
	if (!sb || !sb->running)
		return;
	__atomic_store_n(&sb->stop, 1, __ATOMIC_RELEASE);
	wake(sb);
	pthread_join(sb->thread, NULL);
	if (sb->watching)
		pthread_join(sb->watcher, NULL);
	sb->watching = 0;
	sb->running = 0;
}

void nsa_standby_free(struct nsa_standby *sb)
{
	unsigned int i;

	if (!sb)
		return;
	nsa_standby_stop(sb);
	for (i = 0; i < NSA_MAX_NODES; i++) {
		free(sb->nodes[i].ld.ops);
		free(sb->nodes[i].ld.cmd);
	}
	nsdp_table_free(sb->table);
	close(sb->wake_fd);
	pthread_mutex_destroy(&sb->dump_lock);
	pthread_cond_destroy(&sb->dump_cond);
	pthread_mutex_destroy(&sb->topo_lock);
	free(sb);
}

struct nsdp_table *nsa_standby_table(struct nsa_standby *sb)
{
	return sb->table;
}

void nsa_standby_stats(const struct nsa_standby *sb,
		       struct nsa_standby_stats *s)
{
	const struct nsa_standby_stats *st = &sb->st;
	unsigned int i;

#define LOAD(f) s->f = __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	LOAD(batches);
	LOAD(records);
	LOAD(loaded);
	LOAD(gaps);
	LOAD(resyncs);
	LOAD(bad_messages);
	LOAD(resubscribes);
	LOAD(topology_changes);
	LOAD(stale);
	LOAD(dead_subscriptions);
	LOAD(synced);
	LOAD(lag_count);
	LOAD(lag_sum_us);
	LOAD(lag_max_us);
	LOAD(fenced);
	LOAD(unauthenticated);
	LOAD(bad_values);
	for (i = 0; i < NSA_STANDBY_LAG_BUCKETS; i++)
		LOAD(lag_hist[i]);
#undef LOAD
}

uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p)
{
	uint64_t want, seen = 0, top;
	double rank;
	unsigned int b;

	if (s->lag_count == 0)
		return 0;
	rank = p / 100.0 * (double)s->lag_count;
	want = (uint64_t)rank;
	if ((double)want < rank)
		want++;
	if (want == 0)
		want = 1;
	for (b = 0; b + 1 < NSA_STANDBY_LAG_BUCKETS; b++) {
		seen += s->lag_hist[b];
		if (seen >= want) {
			top = lag_bucket_top(b);
			return top < s->lag_max_us ? top : s->lag_max_us;
		}
	}
	return s->lag_max_us;
}

int64_t nsa_standby_dump(struct nsa_standby *sb, const char *path,
			 int timeout_ms)
{
	struct timespec deadline;
	uint64_t serial;
	int64_t rc;

	if (strlen(path) >= sizeof(sb->dump_path))
		return -ENAMETOOLONG;
	if (!sb->running)
		return nsdp_table_dump(sb->table, path);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&sb->dump_lock);
	while (sb->dump_requested) /* another caller's dump */
		if (pthread_cond_timedwait(&sb->dump_cond, &sb->dump_lock,
					   &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&sb->dump_lock);
			return -ETIMEDOUT;
		}
	snprintf(sb->dump_path, sizeof(sb->dump_path), "%s", path);
	__atomic_store_n(&sb->dump_requested, 1, __ATOMIC_RELEASE);
	serial = sb->dump_serial;
	wake(sb);
	while (sb->dump_serial == serial) {
		if (pthread_cond_timedwait(&sb->dump_cond, &sb->dump_lock,
					   &deadline) == ETIMEDOUT &&
		    sb->dump_serial == serial) {
			sb->dump_requested = 0; /* not taken yet: withdraw */
			pthread_mutex_unlock(&sb->dump_lock);
			return -ETIMEDOUT;
		}
	}
	rc = sb->dump_result;
	pthread_mutex_unlock(&sb->dump_lock);
	return rc;
}
