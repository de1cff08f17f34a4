/*
 * nsa_active.c - the active role's writers: lanes in, pipelined SETs/DELs
 * and batch notifications out, replies accounted, errors retried in order.
 *
 * Each writer thread owns the lanes l with l % W == w and one non-blocking
 * connection per master. It encodes commands as raw RESP straight into the
 * connection's output buffer and parses the (simple) replies itself; hiredis
 * is used only to connect and authenticate. Every command sent pushes an
 * "expectation" on its connection's FIFO naming the batch (and record) the
 * reply belongs to, so that replies, which arrive in order per connection,
 * are charged to the right batch even when a record's SET went to another
 * node (ASK) than its batch's notification.
 *
 * Invariants:
 * - A record is counted once in records (drained), then ends exactly once
 *   in acked or dropped; inflight is the difference.
 * - Per connection, batches are opened, closed and acknowledged in order,
 *   and a session's key maps to one connection while a topology holds, so
 *   the store sees each session's records in order.
 * - Once any batch needs a resend the writer is in retry mode: it sends
 *   nothing new, lets every connection's replies come in (or the connection
 *   die), and then requeues every unacknowledged record - including those of
 *   batches that completed during retry mode - in its original order ahead
 *   of the lanes. Resending acknowledged records is harmless (SET and DEL
 *   are idempotent); sending an older record after a newer one is not.
 * - At most max_inflight closed batches await replies per connection; when
 *   a connection is full the writer stops draining lanes, it never drops.
 * - The replay window: a master acknowledges a write before its replica has
 *   it, so a master that dies may take acknowledged records with it when
 *   its replica is promoted. Each writer keeps the records acknowledged in
 *   the last replay_ms (at most replay_records of them, oldest evicted
 *   first), counted back from the last moment every master was known to
 *   answer, and frozen while in retry mode. When a connection is lost or a
 *   master leaves the topology, the resend replays the window merged with
 *   the unacknowledged records in the writers' opening order (wseq), so
 *   every flow's records go out again oldest first and the newest is last.
 *   The window is a suffix in wseq order: once a batch's records were
 *   evicted, no record of an earlier batch is replayed.
 *
 * Not here: the topology and connection set-up (nsa_cluster.c), the wire
 * formats (schema/), and any decision to drop at the producer (the lanes).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_active.h"
#include "nsa_log.h"
#include "nsdp_time.h"

#define NSA_BURST 256
#define NSA_IN_CAP 65536
#define NSA_MAX_CONNS (NSA_MAX_NODES + 8)
#define NSA_MAX_ASK 32
#define NSA_MAX_LOGGED_KINDS 16
/* A connection with replies due and silent for this long is dead. */
#define NSA_REPLY_TIMEOUT_NS (5000ull * 1000000ull)
/* Spin this long without work before sleeping in poll(). */
#define NSA_SPIN_NS (50ull * 1000ull)
#define NSA_POLL_MAX_NS (1000ull * 1000ull)
#define NSA_ERR_BACKOFF_MIN_MS 10
#define NSA_ERR_BACKOFF_MAX_MS 1000
#define NSA_CONN_BACKOFF_MIN_MS 100
#define NSA_CONN_BACKOFF_MAX_MS 2000

#define NSA_REC_DROPPED 0x01
/* Replayed: acknowledged once already, so not counted again. */
#define NSA_REC_REPLAY 0x02

/* An acknowledged record kept for replay. */
struct nsa_replay_rec {
	struct ns_session s;
	uint64_t wseq; /* its batch's */
	uint64_t acked_ns;
};

/* One record of a resend, sorted by (wseq, ord). */
struct nsa_resend_item {
	uint64_t wseq;
	uint64_t ord;
	const struct ns_session *s;
	uint8_t flags; /* NSA_REC_REPLAY or 0 */
};

enum nsa_exp_kind { NSA_EXP_ASKING, NSA_EXP_CMD, NSA_EXP_NOTIFY };

/* The records routed to one master between two notifications. */
struct nsa_batch {
	struct nsa_batch *next_free;
	uint64_t wseq; /* writer-wide opening order, merges resends */
	uint64_t open_ns;
	unsigned int count;
	/* The highest epoch among the records: a gateway promoted to a new
	 * epoch is not fenced by standbys because this agent was started
	 * with an older [agent] epoch (natsync-agent as a secondary). */
	uint32_t epoch;
	unsigned int pending; /* replies still due, over all connections */
	int closed;
	int retry;
	struct ns_session *sess; /* [batch_size], kept for resending */
	uint8_t *rflags; /* [batch_size] NSA_REC_* */
	uint8_t *body; /* ns_batch header + records in wire form */
	size_t body_len;
};

/* One reply a connection owes us. */
struct nsa_exp {
	struct nsa_batch *b;
	uint32_t rec;
	uint32_t kind;
};

struct nsa_conn {
	int fd; /* -1: dead or not connected */
	redisContext *ctx;
	struct nsa_addr addr;
	char channel[NS_CHANNEL_MAX];
	size_t channel_len;
	uint16_t channel_slot;
	struct nsa_batch *open;
	unsigned int inflight_batches;
	uint64_t wait_since_ns;

	uint8_t *out;
	size_t out_head, out_len, out_cap;

	struct nsa_exp *exp;
	size_t exp_head, exp_count, exp_cap; /* exp_cap a power of two */

	size_t in_len;
	uint8_t in[NSA_IN_CAP];
};

struct nsa_ask {
	uint16_t slot;
	unsigned int conn;
	struct nsa_addr addr;
};

struct nsa_writer {
	struct nsa_active *a;
	unsigned int idx;
	pthread_t thread;
	int started;
	uint32_t publisher_id;

	struct nsdp_lane *lanes[NSDP_MAX_LANES];
	unsigned int n_lanes, next_lane;

	struct nsa_topology topo;
	struct nsa_topology topo_new;
	struct nsa_conn *conns[NSA_MAX_CONNS]; /* [0, n_nodes): the masters */
	unsigned int n_conns;
	int connected_once;
	char reason[256]; /* last reason the store was unreachable */

	uint64_t seq[NS_SLOTS]; /* per channel slot */
	uint64_t wseq;
	struct nsa_batch *free_batches;
	struct nsa_batch **held; /* finalized but to be resent */
	size_t n_held, cap_held;

	int retry_mode;
	int need_refresh;
	/* TRYAGAIN, CLUSTERDOWN, LOADING, BUSY, NOREPLICAS, MASTERDOWN or
	 * READONLY since the last resend */
	int err_seen;
	unsigned int err_backoff_ms;

	struct ns_session *resend;
	uint8_t *resend_flags; /* NSA_REC_REPLAY or 0, per resend record */
	size_t resend_len, resend_pos, resend_cap;

	/* The replay window, in acknowledgement order: a ring of rp_cap.
	 * Only records of batches opened at or after rp_floor are replayed
	 * (records of earlier ones may have been evicted). */
	struct nsa_replay_rec *rp;
	size_t rp_cap, rp_head, rp_count;
	uint64_t rp_floor;
	int master_lost; /* replay the window with the next resend */

	struct nsa_ask ask[NSA_MAX_ASK]; /* in force: slot -> conn */
	unsigned int n_ask;
	struct nsa_ask ask_pending[NSA_MAX_ASK]; /* learnt, not yet resolved */
	unsigned int n_ask_pending;

	char logged[NSA_MAX_LOGGED_KINDS][32];
	unsigned int n_logged;

	uint64_t now_ns;
	atomic_int in_burst; /* set while drained records are not yet counted */
	struct nsa_active_stats st; /* written by this writer only */
	struct ns_session burst[NSA_BURST];
};

struct nsa_active {
	struct nsa_config conf;
	uint64_t replay_ns;
	struct nsdp_lane *lanes[NSDP_MAX_LANES];
	unsigned int n_lanes;
	unsigned int n_writers;
	atomic_int stop;
	int running;
	struct nsa_writer *w[];
};

/* Single-writer counters: a plain read-modify-write published with a
 * relaxed store is enough for readers of the progress line. */
#define W_ADD(w, f, n)                                          \
	__atomic_store_n(&(w)->st.f, (w)->st.f + (uint64_t)(n), \
			 __ATOMIC_RELAXED)
#define W_SUB(w, f, n)                                          \
	__atomic_store_n(&(w)->st.f, (w)->st.f - (uint64_t)(n), \
			 __ATOMIC_RELAXED)

static int stopping(const struct nsa_writer *w)
{
	return atomic_load_explicit(&w->a->stop, memory_order_relaxed);
}

/* Sleep ms in short steps so that nsa_active_stop() interrupts it. */
static void sleep_interruptible(struct nsa_writer *w, unsigned int ms)
{
	while (ms > 0 && !stopping(w)) {
		unsigned int step = ms < 10 ? ms : 10;
		struct timespec ts = {0, (long)step * 1000000L};

		nanosleep(&ts, NULL);
		ms -= step;
	}
}

static size_t u32_to_dec(uint32_t v, char *buf)
{
	char tmp[10];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

static int addr_equal(const struct nsa_addr *x, const struct nsa_addr *y)
{
	return x->port == y->port && strcmp(x->host, y->host) == 0;
}

/* Log an error reply once per kind (its first word) and writer. */
static void log_error_once(struct nsa_writer *w, const char *text, size_t len)
{
	char kind[32];
	size_t k = 0;
	unsigned int i;

	while (k < len && k < sizeof(kind) - 1 && text[k] != ' ') {
		kind[k] = text[k];
		k++;
	}
	kind[k] = '\0';
	for (i = 0; i < w->n_logged; i++)
		if (strcmp(w->logged[i], kind) == 0)
			return;
	if (w->n_logged < NSA_MAX_LOGGED_KINDS)
		memcpy(w->logged[w->n_logged++], kind, k + 1);
	NSA_ERR("writer %u: store refused a command: %.*s (records counted "
		"as dropped; further '%s' errors are counted, not logged)",
		w->idx, (int)(len > 200 ? 200 : len), text, kind);
}

/* ---- batches ---------------------------------------------------------- */

static struct nsa_batch *batch_get(struct nsa_writer *w)
{
	unsigned int bs = w->a->conf.batch_size;
	struct nsa_batch *b = w->free_batches;

	if (b != NULL) {
		w->free_batches = b->next_free;
	} else {
		b = calloc(1, sizeof(*b));
		if (b == NULL)
			return NULL;
		b->sess = malloc(bs * sizeof(*b->sess));
		b->rflags = malloc(bs);
		b->body = malloc(NS_BATCH_HDR_LEN +
				 (size_t)bs * NS_RECORD_MAX_LEN);
		if (!b->sess || !b->rflags || !b->body) {
			free(b->sess);
			free(b->rflags);
			free(b->body);
			free(b);
			return NULL;
		}
	}
	b->next_free = NULL;
	b->count = 0;
	b->epoch = w->a->conf.epoch;
	b->pending = 0;
	b->closed = 0;
	b->retry = 0;
	b->body_len = NS_BATCH_HDR_LEN;
	b->wseq = w->wseq++;
	b->open_ns = w->now_ns;
	return b;
}

static void batch_put(struct nsa_writer *w, struct nsa_batch *b)
{
	b->next_free = w->free_batches;
	w->free_batches = b;
}

static void batch_free_all(struct nsa_writer *w)
{
	struct nsa_batch *b;

	while ((b = w->free_batches) != NULL) {
		w->free_batches = b->next_free;
		free(b->sess);
		free(b->rflags);
		free(b->body);
		free(b);
	}
}

static int held_push(struct nsa_writer *w, struct nsa_batch *b)
{
	if (w->n_held == w->cap_held) {
		size_t cap = w->cap_held ? 2 * w->cap_held : 64;
		struct nsa_batch **h = realloc(w->held, cap * sizeof(*h));

		if (h == NULL)
			return -ENOMEM;
		w->held = h;
		w->cap_held = cap;
	}
	w->held[w->n_held++] = b;
	return 0;
}

/* ---- the replay window ------------------------------------------------ */

/* Acknowledgements older than this may leave the window: replay_ms before
 * the last moment every master was known to answer (a master whose replies
 * are overdue since wait_since_ns may be dying). */
static uint64_t replay_cutoff(const struct nsa_writer *w)
{
	uint64_t alive = w->now_ns, ns = w->a->replay_ns;
	unsigned int i;

	for (i = 0; i < w->n_conns; i++) {
		const struct nsa_conn *c = w->conns[i];

		if (c->fd >= 0 && c->exp_count > 0 && c->wait_since_ns < alive)
			alive = c->wait_since_ns;
	}
	return alive > ns ? alive - ns : 0;
}

static void replay_evict(struct nsa_writer *w, uint64_t cutoff)
{
	const struct nsa_replay_rec *r = &w->rp[w->rp_head];

	if (r->acked_ns >= cutoff) {
		/* Still within replay_ms: the bound bit. */
		if (w->st.replay_short == 0)
			NSA_WARN("writer %u: the replay window is full: "
				 "records leave it before %u ms (raise "
				 "[active] replay_records)",
				 w->idx, w->a->conf.replay_ms);
		W_ADD(w, replay_short, 1);
	}
	if (r->wseq + 1 > w->rp_floor)
		w->rp_floor = r->wseq + 1;
	if (++w->rp_head == w->rp_cap)
		w->rp_head = 0;
	w->rp_count--;
}

/* Drop what is older than the window; never in retry mode, where the
 * window waits for the resend that may replay it. */
static void replay_trim(struct nsa_writer *w)
{
	uint64_t cutoff;

	if (w->rp_count == 0 || w->retry_mode)
		return;
	cutoff = replay_cutoff(w);
	while (w->rp_count > 0 && w->rp[w->rp_head].acked_ns < cutoff)
		replay_evict(w, cutoff);
}

static void replay_keep(struct nsa_writer *w, const struct nsa_batch *b)
{
	uint64_t cutoff;
	unsigned int i;

	if (w->rp_cap == 0)
		return;
	replay_trim(w);
	cutoff = replay_cutoff(w);
	for (i = 0; i < b->count; i++) {
		struct nsa_replay_rec *r;
		size_t pos;

		if (b->rflags[i] & NSA_REC_DROPPED)
			continue;
		if (w->rp_count == w->rp_cap)
			replay_evict(w, cutoff);
		pos = w->rp_head + w->rp_count;
		if (pos >= w->rp_cap)
			pos -= w->rp_cap;
		r = &w->rp[pos];
		r->s = b->sess[i];
		r->wseq = b->wseq;
		r->acked_ns = w->now_ns;
		w->rp_count++;
	}
}

/* All replies of a closed batch are in: acknowledge it, or keep it for the
 * resend when it (or anything before it) failed. */
static void batch_finalize(struct nsa_writer *w, struct nsa_batch *b)
{
	unsigned int i, dropped = 0, replays = 0;

	if (b->retry || w->retry_mode) {
		w->retry_mode = 1;
		if (held_push(w, b) == 0)
			return;
		for (i = 0; i < b->count; i++)
			dropped += !(b->rflags[i] & NSA_REC_REPLAY);
		NSA_ERR("writer %u: out of memory holding a batch for resend; "
			"%u records dropped",
			w->idx, dropped);
		W_ADD(w, dropped, dropped);
		W_SUB(w, replay_inflight, b->count - dropped);
		batch_put(w, b);
		return;
	}
	for (i = 0; i < b->count; i++) {
		if (b->rflags[i] & NSA_REC_REPLAY)
			replays++;
		else if (b->rflags[i] & NSA_REC_DROPPED)
			dropped++;
	}
	W_ADD(w, dropped, dropped);
	W_ADD(w, acked, b->count - dropped - replays);
	W_SUB(w, replay_inflight, replays);
	W_ADD(w, batches, 1);
	w->err_backoff_ms = NSA_ERR_BACKOFF_MIN_MS;
	replay_keep(w, b);
	batch_put(w, b);
}

/* ---- connection buffers ----------------------------------------------- */

static int out_reserve(struct nsa_conn *c, size_t n)
{
	if (c->out_len + n <= c->out_cap)
		return 0;
	if (c->out_head > 0) {
		memmove(c->out, c->out + c->out_head, c->out_len - c->out_head);
		c->out_len -= c->out_head;
		c->out_head = 0;
		if (c->out_len + n <= c->out_cap)
			return 0;
	}
	size_t cap = c->out_cap ? c->out_cap : 65536;
	while (cap < c->out_len + n)
		cap *= 2;
	uint8_t *p = realloc(c->out, cap);
	if (p == NULL)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

static inline void out_put(struct nsa_conn *c, const void *p, size_t n)
{
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
}

#define OUT_LIT(c, s) out_put((c), (s), sizeof(s) - 1)

static int exp_push(struct nsa_writer *w, struct nsa_conn *c,
		    struct nsa_batch *b, uint32_t rec, uint32_t kind)
{
	if (c->exp_count == c->exp_cap) {
		size_t cap = c->exp_cap ? 2 * c->exp_cap : 1024, i;
		struct nsa_exp *e = malloc(cap * sizeof(*e));

		if (e == NULL)
			return -ENOMEM;
		for (i = 0; i < c->exp_count; i++)
			e[i] = c->exp[(c->exp_head + i) & (c->exp_cap - 1)];
		free(c->exp);
		c->exp = e;
		c->exp_cap = cap;
		c->exp_head = 0;
	}
	if (c->exp_count == 0)
		c->wait_since_ns = w->now_ns;
	c->exp[(c->exp_head + c->exp_count) & (c->exp_cap - 1)] =
		(struct nsa_exp){b, rec, kind};
	c->exp_count++;
	b->pending++;
	return 0;
}

static void conn_close(struct nsa_conn *c)
{
	if (c->ctx != NULL)
		redisFree(c->ctx); /* closes fd */
	c->ctx = NULL;
	c->fd = -1;
	c->out_head = c->out_len = 0;
	c->in_len = 0;
}

static void conn_free(struct nsa_conn *c)
{
	if (c == NULL)
		return;
	conn_close(c);
	free(c->out);
	free(c->exp);
	free(c);
}

/* The connection is gone: every reply it owed is lost, so every batch it
 * served must be resent after a reconnect. */
static void conn_kill(struct nsa_writer *w, struct nsa_conn *c, const char *why)
{
	NSA_WARN("writer %u: connection to %s:%u lost (%s); will reconnect and "
		 "resend",
		 w->idx, c->addr.host, c->addr.port, why);
	conn_close(c);
	w->retry_mode = 1;
	w->need_refresh = 1;
	w->master_lost = 1;
	while (c->exp_count > 0) {
		struct nsa_exp e = c->exp[c->exp_head];

		c->exp_head = (c->exp_head + 1) & (c->exp_cap - 1);
		c->exp_count--;
		e.b->retry = 1;
		if (e.kind == NSA_EXP_NOTIFY)
			c->inflight_batches--;
		if (--e.b->pending == 0 && e.b->closed)
			batch_finalize(w, e.b);
	}
	c->inflight_batches = 0;
}

/* ---- encoding --------------------------------------------------------- */

static int batch_close(struct nsa_writer *w, struct nsa_conn *c)
{
	const struct nsa_config *conf = &w->a->conf;
	struct nsa_batch *b = c->open;
	struct ns_batch_hdr h = {
		.publisher_id = w->publisher_id,
		.gateway_id = conf->gateway_id,
		.epoch = b->epoch,
		.count = (uint16_t)b->count,
		.flags = conf->batch_key_len ? NS_BATCH_F_HMAC : 0,
		.seq = ++w->seq[c->channel_slot],
		.body_len = (uint32_t)(b->body_len - NS_BATCH_HDR_LEN),
	};
	uint8_t mac[NS_BATCH_MAC_LEN];
	size_t msg_len = b->body_len;
	char num[10];
	size_t nl;

	ns_batch_hdr_encode(&h, b->body);
	if (conf->batch_key_len) {
		/* The trailer goes out after the body; the batch keeps only
		 * header and records, so a resend signs its new header. */
		if (ns_batch_mac((const uint8_t *)conf->batch_key,
				 conf->batch_key_len, b->body, b->body_len,
				 mac) != 0)
			return -EINVAL;
		msg_len += NS_BATCH_MAC_LEN;
	}
	if (out_reserve(c, 64 + c->channel_len + msg_len) != 0)
		return -ENOMEM;
	if (w->topo.sharded_pubsub)
		OUT_LIT(c, "*3\r\n$8\r\nSPUBLISH\r\n$");
	else
		OUT_LIT(c, "*3\r\n$7\r\nPUBLISH\r\n$");
	nl = u32_to_dec((uint32_t)c->channel_len, num);
	out_put(c, num, nl);
	OUT_LIT(c, "\r\n");
	out_put(c, c->channel, c->channel_len);
	OUT_LIT(c, "\r\n$");
	nl = u32_to_dec((uint32_t)msg_len, num);
	out_put(c, num, nl);
	OUT_LIT(c, "\r\n");
	out_put(c, b->body, b->body_len);
	if (conf->batch_key_len)
		out_put(c, mac, NS_BATCH_MAC_LEN);
	OUT_LIT(c, "\r\n");
	if (exp_push(w, c, b, 0, NSA_EXP_NOTIFY) != 0)
		return -ENOMEM;
	b->closed = 1;
	c->open = NULL;
	c->inflight_batches++;
	return 0;
}

/* Which master's batch a key belongs to, and which connection its command
 * goes to (another one, with ASKING, while its slot is being migrated). */
static unsigned int route(const struct nsa_writer *w, const uint8_t *key,
			  unsigned int *cmd_conn, int *asking)
{
	uint16_t slot;
	unsigned int node, i;

	*asking = 0;
	if (!w->topo.cluster) {
		*cmd_conn = 0;
		return 0;
	}
	slot = ns_key_slot(key, NS_KEY_LEN);
	node = w->topo.slot_node[slot];
	*cmd_conn = node;
	for (i = 0; i < w->n_ask; i++) {
		if (w->ask[i].slot == slot) {
			*cmd_conn = w->ask[i].conn;
			*asking = 1;
			break;
		}
	}
	return node;
}

/* Append one record: its command to the pipeline, its copy and wire form to
 * its master's open batch. rflag: NSA_REC_REPLAY or 0. */
static int append_record(struct nsa_writer *w, const struct ns_session *s,
			 uint8_t rflag)
{
	static const char set_hdr[] = "*5\r\n$3\r\nSET\r\n$16\r\n";
	static const char set3_hdr[] = "*3\r\n$3\r\nSET\r\n$16\r\n";
	static const char del_hdr[] = "*2\r\n$3\r\nDEL\r\n$16\r\n";
	uint8_t key[NS_KEY_LEN];
	unsigned int node, cmd_idx;
	struct nsa_conn *c, *cc;
	struct nsa_batch *b;
	int asking, len;
	char num[10];
	size_t nl;
	uint32_t rec;

	_Static_assert(NS_KEY_LEN == 16, "the command templates say $16");
	ns_key_build(s->proto, &s->orig, key);
	node = route(w, key, &cmd_idx, &asking);
	c = w->conns[node];
	cc = w->conns[cmd_idx];
	if (c->open == NULL && (c->open = batch_get(w)) == NULL)
		return -ENOMEM;
	b = c->open;
	rec = b->count;
	len = ns_record_encode(s, b->body + b->body_len, NS_RECORD_MAX_LEN);
	if (len < 0) {
		static const char why[] =
			"record-encode: unknown version, family or event";

		if (rflag & NSA_REC_REPLAY)
			W_SUB(w, replay_inflight, 1);
		else
			W_ADD(w, dropped, 1);
		log_error_once(w, why, sizeof(why) - 1);
		if (b->count == 0) {
			batch_put(w, b);
			c->open = NULL;
		}
		return 0;
	}
	if (out_reserve(cc, 160 + (size_t)len) != 0)
		return -ENOMEM;
	if (asking) {
		OUT_LIT(cc, "*1\r\n$6\r\nASKING\r\n");
		if (exp_push(w, cc, b, rec, NSA_EXP_ASKING) != 0)
			return -ENOMEM;
	}
	if (s->event == NS_EV_DELETE) {
		OUT_LIT(cc, del_hdr);
		out_put(cc, key, NS_KEY_LEN);
		OUT_LIT(cc, "\r\n");
		W_ADD(w, dels, 1);
	} else {
		if (s->timeout_ms)
			OUT_LIT(cc, set_hdr);
		else
			OUT_LIT(cc, set3_hdr);
		out_put(cc, key, NS_KEY_LEN);
		OUT_LIT(cc, "\r\n$");
		nl = u32_to_dec((uint32_t)len, num);
		out_put(cc, num, nl);
		OUT_LIT(cc, "\r\n");
		out_put(cc, b->body + b->body_len, (size_t)len);
		if (s->timeout_ms) {
			char dl[10];
			size_t dn;

			OUT_LIT(cc, "\r\n$2\r\nPX\r\n$");
			nl = u32_to_dec(s->timeout_ms, num);
			dn = u32_to_dec((uint32_t)nl, dl);
			out_put(cc, dl, dn);
			OUT_LIT(cc, "\r\n");
			out_put(cc, num, nl);
		}
		OUT_LIT(cc, "\r\n");
		W_ADD(w, sets, 1);
	}
	if (exp_push(w, cc, b, rec, NSA_EXP_CMD) != 0)
		return -ENOMEM;
	b->sess[rec] = *s;
	b->rflags[rec] = rflag;
	b->body_len += (size_t)len;
	b->count++;
	if (s->epoch > b->epoch)
		b->epoch = s->epoch;
	if (b->count >= w->a->conf.batch_size)
		return batch_close(w, c);
	return 0;
}

/* ---- replies ---------------------------------------------------------- */

static int starts_with(const char *t, size_t len, const char *word)
{
	size_t n = strlen(word);

	return len >= n && memcmp(t, word, n) == 0 && (len == n || t[n] == ' ');
}

/* "ASK <slot> <host>:<port>" */
static void learn_ask(struct nsa_writer *w, const char *t, size_t len)
{
	char buf[128], *sp;
	struct nsa_ask a;
	unsigned int i;

	if (len >= sizeof(buf))
		return;
	memcpy(buf, t, len);
	buf[len] = '\0';
	a.slot = (uint16_t)strtoul(buf + 4, &sp, 10);
	if (*sp != ' ' || nsa_addr_parse(sp + 1, &a.addr) != 0)
		return;
	for (i = 0; i < w->n_ask_pending; i++)
		if (w->ask_pending[i].slot == a.slot)
			return;
	if (w->n_ask_pending < NSA_MAX_ASK)
		w->ask_pending[w->n_ask_pending++] = a;
	else
		w->need_refresh = 1;
}

static void handle_reply(struct nsa_writer *w, struct nsa_conn *c,
			 const struct nsa_exp *e, char type, const char *t,
			 size_t len)
{
	struct nsa_batch *b = e->b;

	if (type == '-' && e->kind != NSA_EXP_ASKING) {
		int retry = 1;

		if (starts_with(t, len, "MOVED")) {
			W_ADD(w, moved, 1);
			w->need_refresh = 1;
		} else if (starts_with(t, len, "ASK")) {
			W_ADD(w, ask, 1);
			learn_ask(w, t, len);
		} else if (starts_with(t, len, "TRYAGAIN") ||
			   starts_with(t, len, "LOADING") ||
			   starts_with(t, len, "BUSY") ||
			   starts_with(t, len, "NOREPLICAS") ||
			   starts_with(t, len, "MASTERDOWN")) {
			/* Passing states of a server that will take the
			 * write again: wait and resend. */
			W_ADD(w, tryagain, 1);
			w->err_seen = 1;
		} else if (starts_with(t, len, "READONLY")) {
			/* A replica now, after a failover: find the master. */
			W_ADD(w, tryagain, 1);
			w->err_seen = 1;
			w->need_refresh = 1;
		} else if (starts_with(t, len, "CLUSTERDOWN")) {
			W_ADD(w, clusterdown, 1);
			w->err_seen = 1;
			w->need_refresh = 1;
		} else {
			retry = 0;
			W_ADD(w, other_errors, 1);
			log_error_once(w, t, len);
			if (e->kind == NSA_EXP_CMD)
				b->rflags[e->rec] |= NSA_REC_DROPPED;
		}
		if (retry) {
			b->retry = 1;
			w->retry_mode = 1;
		}
	}
	if (e->kind == NSA_EXP_NOTIFY)
		c->inflight_batches--;
	if (--b->pending == 0 && b->closed)
		batch_finalize(w, b);
}

/* Read what the socket has and account every complete reply line. Returns
 * the number of bytes read (0 if none); the connection may die meanwhile. */
static size_t conn_read(struct nsa_writer *w, struct nsa_conn *c)
{
	size_t total = 0;

	while (c->fd >= 0) {
		ssize_t n = recv(c->fd, c->in + c->in_len,
				 NSA_IN_CAP - c->in_len, MSG_DONTWAIT);
		uint8_t *p, *end;

		if (n == 0) {
			conn_kill(w, c, "closed by the server");
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_kill(w, c, strerror(errno));
			break;
		}
		total += (size_t)n;
		c->in_len += (size_t)n;
		c->wait_since_ns = w->now_ns;
		p = c->in;
		end = c->in + c->in_len;
		while (p < end) {
			uint8_t *nlp = memchr(p, '\n', (size_t)(end - p));
			struct nsa_exp e;
			size_t tl;

			if (nlp == NULL)
				break;
			if (c->exp_count == 0 ||
			    (*p != '+' && *p != '-' && *p != ':')) {
				conn_kill(w, c, "unexpected reply");
				return total;
			}
			e = c->exp[c->exp_head];
			c->exp_head = (c->exp_head + 1) & (c->exp_cap - 1);
			c->exp_count--;
			tl = (size_t)(nlp - p - 1);
			if (tl > 0 && p[tl] == '\r')
				tl--;
			handle_reply(w, c, &e, (char)*p, (const char *)p + 1,
				     tl);
			p = nlp + 1;
		}
		if (p == c->in && c->in_len == NSA_IN_CAP) {
			conn_kill(w, c, "reply line too long");
			break;
		}
		c->in_len = (size_t)(end - p);
		if (c->in_len > 0 && p != c->in)
			memmove(c->in, p, c->in_len);
		if ((size_t)n < NSA_IN_CAP / 2)
			break;
	}
	return total;
}

/* Returns the number of bytes sent. */
static size_t conn_send(struct nsa_writer *w, struct nsa_conn *c)
{
	size_t total = 0;

	while (c->fd >= 0 && c->out_head < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_head,
				 c->out_len - c->out_head,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_kill(w, c, strerror(errno));
			break;
		}
		c->out_head += (size_t)n;
		total += (size_t)n;
	}
	if (c->out_head == c->out_len)
		c->out_head = c->out_len = 0;
	return total;
}

/* ---- topology and connections ----------------------------------------- */

static int conn_open(struct nsa_writer *w, struct nsa_conn *c, char *err,
		     size_t errlen)
{
	redisContext *ctx =
		nsa_store_connect(&w->a->conf.store, &c->addr, err, errlen);
	int fl;

	if (ctx == NULL)
		return -ECONNREFUSED;
	fl = fcntl(ctx->fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		snprintf(err, errlen, "fcntl: %s", strerror(errno));
		redisFree(ctx);
		return -errno;
	}
	c->ctx = ctx;
	c->fd = ctx->fd;
	c->in_len = 0;
	c->out_head = c->out_len = 0;
	if (w->connected_once)
		W_ADD(w, reconnects, 1);
	return 0;
}

static struct nsa_conn *conn_new(const struct nsa_addr *addr)
{
	struct nsa_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->fd = -1;
	c->addr = *addr;
	return c;
}

/* Take the connection to addr out of old[], or make a new one. */
static struct nsa_conn *conn_take(struct nsa_conn **old, unsigned int n_old,
				  const struct nsa_addr *addr)
{
	unsigned int i;

	for (i = 0; i < n_old; i++) {
		if (old[i] != NULL && addr_equal(&old[i]->addr, addr)) {
			struct nsa_conn *c = old[i];

			old[i] = NULL;
			return c;
		}
	}
	return conn_new(addr);
}

/* Make conns[] follow topo_new (keeping live connections to the same
 * addresses) and connect every master. Only called when no reply is due. */
static int conns_reconcile(struct nsa_writer *w, char *err, size_t errlen)
{
	struct nsa_conn *old[NSA_MAX_CONNS];
	unsigned int n_old = w->n_conns, n_old_masters = w->topo.n_nodes, i;
	int rc = 0;

	memcpy(old, w->conns, sizeof(old));
	memset(w->conns, 0, sizeof(w->conns));
	w->topo = w->topo_new;
	w->n_conns = 0;
	for (i = 0; i < w->topo.n_nodes; i++) {
		struct nsa_conn *c =
			conn_take(old, n_old, &w->topo.nodes[i].addr);

		if (c == NULL) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
			break;
		}
		w->conns[w->n_conns++] = c;
		nsa_topology_channel(&w->topo, i, c->channel);
		c->channel_len = strlen(c->channel);
		c->channel_slot = w->topo.nodes[i].channel_slot;
	}
	for (i = 0; i < n_old; i++) {
		/* A master left the map: replaced by its replica, or gone. */
		if (old[i] != NULL && i < n_old_masters)
			w->master_lost = 1;
		conn_free(old[i]);
	}
	/* Asks learnt under another map are stale now. */
	w->n_ask = 0;
	for (i = 0; rc == 0 && i < w->n_conns; i++)
		if (w->conns[i]->fd < 0)
			rc = conn_open(w, w->conns[i], err, errlen);
	return rc;
}

/* Fetch the topology and connect every master, retrying with backoff until
 * it works or the writer is stopped. */
static int store_connect_all(struct nsa_writer *w)
{
	unsigned int delay = NSA_CONN_BACKOFF_MIN_MS;
	char err[256];

	while (!stopping(w)) {
		int rc = nsa_topology_fetch(&w->a->conf.store, &w->topo_new,
					    err, sizeof(err));

		if (rc == 0) {
			W_ADD(w, topology_refreshes, 1);
			rc = conns_reconcile(w, err, sizeof(err));
		}
		if (rc == 0) {
			if (w->reason[0] != '\0')
				NSA_INFO("writer %u: store reachable again "
					 "(%u master(s))",
					 w->idx, w->topo.n_nodes);
			w->reason[0] = '\0';
			w->connected_once = 1;
			w->need_refresh = 0;
			return 0;
		}
		if (strcmp(err, w->reason) != 0) {
			NSA_WARN("writer %u: store unreachable: %s (retrying "
				 "with backoff)",
				 w->idx, err);
			snprintf(w->reason, sizeof(w->reason), "%s", err);
		}
		sleep_interruptible(w, delay);
		delay = delay * 2 > NSA_CONN_BACKOFF_MAX_MS
				? NSA_CONN_BACKOFF_MAX_MS
				: delay * 2;
	}
	return -ECANCELED;
}

/* Turn the ASK redirections learnt in this round into routes, opening a
 * connection to a target outside the map when needed. */
static void asks_resolve(struct nsa_writer *w)
{
	unsigned int i, j;
	char err[256];

	w->n_ask = 0;
	for (i = 0; i < w->n_ask_pending; i++) {
		struct nsa_ask *a = &w->ask_pending[i];

		for (j = 0; j < w->n_conns; j++)
			if (addr_equal(&w->conns[j]->addr, &a->addr))
				break;
		if (j == w->n_conns) {
			struct nsa_conn *c;

			if (w->n_conns == NSA_MAX_CONNS ||
			    (c = conn_new(&a->addr)) == NULL)
				continue;
			if (conn_open(w, c, err, sizeof(err)) != 0) {
				NSA_WARN("writer %u: ASK target %s:%u: %s",
					 w->idx, a->addr.host, a->addr.port,
					 err);
				conn_free(c);
				w->need_refresh = 1;
				continue;
			}
			w->conns[w->n_conns++] = c;
		}
		a->conn = j;
		w->ask[w->n_ask++] = *a;
	}
	w->n_ask_pending = 0;
}

/* ---- the resend --------------------------------------------------------- */

static int cmp_item(const void *x, const void *y)
{
	const struct nsa_resend_item *a = x, *b = y;

	if (a->wseq != b->wseq)
		return a->wseq < b->wseq ? -1 : 1;
	return a->ord < b->ord ? -1 : a->ord > b->ord;
}

/* Requeue every unacknowledged record - and after a lost master the replay
 * window - in original order, ahead of what is still waiting in the resend
 * queue. */
static int resend_build(struct nsa_writer *w)
{
	size_t n = 0, n_rp = 0, i, j, keep = w->resend_len - w->resend_pos;
	int replay = w->master_lost && w->rp_count > 0;
	struct nsa_resend_item *items;
	uint64_t dropped = 0;
	struct ns_session *q;
	uint8_t *qf;

	for (i = 0; i < w->n_held; i++)
		n += w->held[i]->count;
	if (replay)
		n += w->rp_count;
	items = malloc((n ? n : 1) * sizeof(*items));
	q = malloc((n + keep ? n + keep : 1) * sizeof(*q));
	qf = malloc(n + keep ? n + keep : 1);
	if (items == NULL || q == NULL || qf == NULL) {
		free(items);
		free(q);
		free(qf);
		return -ENOMEM;
	}
	n = 0;
	for (i = 0; i < w->n_held; i++) {
		struct nsa_batch *b = w->held[i];

		for (j = 0; j < b->count; j++) {
			uint8_t f = b->rflags[j];

			if (!(f & NSA_REC_DROPPED))
				items[n++] = (struct nsa_resend_item){
					b->wseq, j, &b->sess[j],
					f & NSA_REC_REPLAY};
			else if (!(f & NSA_REC_REPLAY))
				dropped++; /* refused for good, not retried */
			else
				W_SUB(w, replay_inflight, 1);
		}
	}
	for (i = 0; replay && i < w->rp_count; i++) {
		size_t pos = w->rp_head + i;
		const struct nsa_replay_rec *r;

		if (pos >= w->rp_cap)
			pos -= w->rp_cap;
		r = &w->rp[pos];
		if (r->wseq < w->rp_floor)
			continue;
		items[n++] = (struct nsa_resend_item){r->wseq, i, &r->s,
						      NSA_REC_REPLAY};
		n_rp++;
	}
	qsort(items, n, sizeof(*items), cmp_item);
	for (i = 0; i < n; i++) {
		q[i] = *items[i].s;
		qf[i] = items[i].flags;
	}
	free(items);
	for (i = 0; i < w->n_held; i++)
		batch_put(w, w->held[i]);
	if (w->master_lost) {
		if (n_rp > 0)
			NSA_WARN("writer %u: a master was lost or replaced; "
				 "replaying %zu acknowledged record(s) of the "
				 "last %u ms with %zu unacknowledged",
				 w->idx, n_rp, w->a->conf.replay_ms, n - n_rp);
		/* Once resent, they come back when acknowledged again. */
		w->rp_head = w->rp_count = 0;
	}
	w->master_lost = 0;
	w->n_held = 0;
	W_ADD(w, resent, n - n_rp);
	W_ADD(w, replayed, n_rp);
	W_ADD(w, replay_inflight, n_rp);
	W_ADD(w, dropped, dropped);
	if (keep) {
		memcpy(q + n, w->resend + w->resend_pos, keep * sizeof(*q));
		memcpy(qf + n, w->resend_flags + w->resend_pos, keep);
	}
	free(w->resend);
	free(w->resend_flags);
	w->resend = q;
	w->resend_flags = qf;
	w->resend_cap = n + keep;
	w->resend_len = n + keep;
	w->resend_pos = 0;
	return 0;
}

static int quiescent(const struct nsa_writer *w)
{
	unsigned int i;

	for (i = 0; i < w->n_conns; i++)
		if (w->conns[i]->exp_count > 0)
			return 0;
	return 1;
}

/* Retry mode and no reply due any more: reconnect and refresh if needed,
 * back off after TRYAGAIN-like errors, and queue the resend. */
static int recover(struct nsa_writer *w)
{
	unsigned int i;
	int dead = 0;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_conn *c = w->conns[i];

		if (c->open != NULL) {
			/* Its records are newer than any closed batch of the
			 * same master, and their wseq says so. */
			if (held_push(w, c->open) != 0)
				return -ENOMEM;
			c->open = NULL;
		}
		c->inflight_batches = 0;
		dead |= c->fd < 0;
	}
	if (w->err_seen) {
		sleep_interruptible(w, w->err_backoff_ms);
		w->err_backoff_ms =
			w->err_backoff_ms * 2 > NSA_ERR_BACKOFF_MAX_MS
				? NSA_ERR_BACKOFF_MAX_MS
				: w->err_backoff_ms * 2;
		w->err_seen = 0;
	}
	if (dead || w->need_refresh)
		if (store_connect_all(w) != 0)
			return -ECANCELED;
	asks_resolve(w);
	if (resend_build(w) != 0)
		return -ENOMEM;
	w->retry_mode = 0;
	return 0;
}

/* ---- the writer loop ---------------------------------------------------- */

static int can_take(const struct nsa_writer *w)
{
	unsigned int i, max = w->a->conf.max_inflight;

	if (w->retry_mode)
		return 0;
	for (i = 0; i < w->n_conns; i++)
		if (w->conns[i]->inflight_batches >= max)
			return 0;
	return 1;
}

/* flags: NSA_REC_* per record, or NULL for records new from a lane. */
static int append_burst(struct nsa_writer *w, const struct ns_session *s,
			const uint8_t *flags, unsigned int n)
{
	unsigned int i, j, lost = 0;

	for (i = 0; i < n; i++) {
		int rc = append_record(w, &s[i], flags ? flags[i] : 0);

		if (rc != 0) {
			/* Only allocation fails here; the records are lost. */
			for (j = i; j < n; j++)
				if (flags && (flags[j] & NSA_REC_REPLAY))
					W_SUB(w, replay_inflight, 1);
				else
					lost++;
			NSA_ERR("writer %u: out of memory, %u record(s) "
				"dropped",
				w->idx, lost);
			W_ADD(w, dropped, lost);
			return rc;
		}
	}
	return 0;
}

/* Take records: the resend queue first, then the lanes in turn. A burst is
 * at most one batch, so one burst closes at most one batch per master and
 * max_inflight holds. */
static unsigned int take_records(struct nsa_writer *w)
{
	unsigned int burst = w->a->conf.batch_size < NSA_BURST
				     ? w->a->conf.batch_size
				     : NSA_BURST;
	unsigned int taken = 0, k;

	while (w->resend_pos < w->resend_len && can_take(w)) {
		size_t n = w->resend_len - w->resend_pos;

		if (n > burst)
			n = burst;
		append_burst(w, w->resend + w->resend_pos,
			     w->resend_flags + w->resend_pos, (unsigned int)n);
		w->resend_pos += n;
		taken += (unsigned int)n;
		if (taken >= 4 * NSA_BURST)
			return taken;
	}
	if (w->resend_pos < w->resend_len)
		return taken;
	w->resend_pos = w->resend_len = 0;

	for (k = 0; k < w->n_lanes && can_take(w); k++) {
		struct nsdp_lane *lane = w->lanes[w->next_lane];
		unsigned int n;

		w->next_lane = (w->next_lane + 1) % w->n_lanes;
		atomic_store(&w->in_burst, 1);
		n = nsdp_lane_drain(lane, w->burst, burst);
		if (n > 0) {
			W_ADD(w, records, n);
			append_burst(w, w->burst, NULL, n);
			taken += n;
		}
		atomic_store(&w->in_burst, 0);
	}
	return taken;
}

/* Close batches whose oldest record waited flush_us; returns the ns until
 * the next deadline (or NSA_POLL_MAX_NS). */
static uint64_t flush_due(struct nsa_writer *w)
{
	uint64_t flush_ns = (uint64_t)w->a->conf.flush_us * 1000ull;
	uint64_t next = NSA_POLL_MAX_NS;
	unsigned int i;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_conn *c = w->conns[i];
		uint64_t age;

		if (c->open == NULL || c->fd < 0)
			continue;
		age = w->now_ns - c->open->open_ns;
		if (age >= flush_ns) {
			if (batch_close(w, c) != 0)
				conn_kill(w, c, "out of memory");
		} else if (flush_ns - age < next) {
			next = flush_ns - age;
		}
	}
	return next;
}

static void idle_wait(struct nsa_writer *w, uint64_t timeout_ns)
{
	struct pollfd pfd[NSA_MAX_CONNS];
	unsigned int who[NSA_MAX_CONNS];
	struct timespec ts;
	unsigned int i, n = 0;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_conn *c = w->conns[i];

		if (c->fd < 0)
			continue;
		pfd[n].fd = c->fd;
		pfd[n].events = POLLIN;
		if (c->out_head < c->out_len)
			pfd[n].events |= POLLOUT;
		pfd[n].revents = 0;
		who[n++] = i;
	}
	ts.tv_sec = 0;
	ts.tv_nsec = (long)timeout_ns;
	if (ppoll(pfd, n, &ts, NULL) <= 0)
		return;
	/* A connection that owes nothing and turns readable was closed (a
	 * master killed while idle): notice it now, not at the next send. */
	for (i = 0; i < n; i++) {
		struct nsa_conn *c = w->conns[who[i]];

		if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    c->fd >= 0 && c->exp_count == 0) {
			w->now_ns = nsdp_mono_ns();
			conn_read(w, c);
		}
	}
}

static void check_timeouts(struct nsa_writer *w)
{
	unsigned int i;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_conn *c = w->conns[i];

		if (c->fd >= 0 && c->exp_count > 0 &&
		    w->now_ns - c->wait_since_ns > NSA_REPLY_TIMEOUT_NS)
			conn_kill(w, c, "no reply within 5 s");
	}
}

static void *writer_main(void *arg)
{
	struct nsa_writer *w = arg;
	uint64_t idle_since = 0;
	char name[16];

	snprintf(name, sizeof(name), "nsa-writer-%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	w->now_ns = nsdp_mono_ns();
	if (store_connect_all(w) != 0)
		return NULL;

	while (!stopping(w)) {
		size_t io = 0;
		unsigned int i, taken = 0;
		uint64_t next;

		w->now_ns = nsdp_mono_ns();
		for (i = 0; i < w->n_conns; i++)
			if (w->conns[i]->fd >= 0 && w->conns[i]->exp_count > 0)
				io += conn_read(w, w->conns[i]);
		if (w->retry_mode && quiescent(w)) {
			if (recover(w) != 0)
				break;
			w->now_ns = nsdp_mono_ns();
		}
		if (!w->retry_mode)
			taken = take_records(w);
		next = w->retry_mode ? NSA_POLL_MAX_NS : flush_due(w);
		for (i = 0; i < w->n_conns; i++)
			io += conn_send(w, w->conns[i]);

		if (taken > 0 || io > 0) {
			idle_since = 0;
			continue;
		}
		check_timeouts(w);
		replay_trim(w);
		if (idle_since == 0)
			idle_since = w->now_ns;
		/* Spinning helps only while new records may come any moment;
		 * replies wake poll() as fast as spinning would find them. */
		if (!can_take(w) || w->now_ns - idle_since >= NSA_SPIN_NS)
			idle_wait(w, next);
	}
	return NULL;
}

/* ---- public ------------------------------------------------------------- */

struct nsa_active *nsa_active_create(const struct nsa_config *conf,
				     struct nsdp_lane **lanes,
				     unsigned int n_lanes)
{
	unsigned int n_writers, i;
	struct nsa_active *a;
	uint32_t rnd = 0;

	if (conf == NULL || lanes == NULL || n_lanes == 0 ||
	    n_lanes > NSDP_MAX_LANES) {
		errno = EINVAL;
		return NULL;
	}
	n_writers = conf->workers ? conf->workers : 1;
	if (n_writers > n_lanes)
		n_writers = n_lanes; /* a writer without a lane has no work */
	a = calloc(1, sizeof(*a) + n_writers * sizeof(a->w[0]));
	if (a == NULL)
		return NULL;
	a->conf = *conf;
	if (a->conf.batch_size == 0)
		a->conf.batch_size = 1;
	if (a->conf.batch_size > NS_BATCH_MAX_RECORDS)
		a->conf.batch_size = NS_BATCH_MAX_RECORDS;
	if (a->conf.max_inflight == 0)
		a->conf.max_inflight = 1;
	memcpy(a->lanes, lanes, n_lanes * sizeof(*lanes));
	a->n_lanes = n_lanes;
	a->n_writers = n_writers;
	a->replay_ns = (uint64_t)conf->replay_ms * 1000000ull;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)nsdp_mono_ns() ^ (uint32_t)getpid();

	for (i = 0; i < n_writers; i++) {
		struct nsa_writer *w;
		unsigned int l;

		if (posix_memalign((void **)&a->w[i], 64, sizeof(*w)) != 0) {
			nsa_active_free(a);
			errno = ENOMEM;
			return NULL;
		}
		w = a->w[i];
		memset(w, 0, sizeof(*w));
		w->a = a;
		w->idx = i;
		w->publisher_id = (rnd & 0xffffffu) << 8 | (i & 0xffu);
		w->err_backoff_ms = NSA_ERR_BACKOFF_MIN_MS;
		if (conf->replay_ms > 0 && conf->replay_records > 0) {
			/* Pages are touched only as the window fills. */
			w->rp = malloc((size_t)conf->replay_records *
				       sizeof(*w->rp));
			if (w->rp == NULL) {
				nsa_active_free(a);
				errno = ENOMEM;
				return NULL;
			}
			w->rp_cap = conf->replay_records;
		}
		for (l = i; l < n_lanes; l += n_writers)
			w->lanes[w->n_lanes++] = lanes[l];
	}
	return a;
}

int nsa_active_start(struct nsa_active *a)
{
	unsigned int i;

	if (a == NULL || a->running)
		return -EINVAL;
	atomic_store(&a->stop, 0);
	for (i = 0; i < a->n_writers; i++) {
		int rc = pthread_create(&a->w[i]->thread, NULL, writer_main,
					a->w[i]);

		if (rc != 0) {
			nsa_active_stop(a);
			return -rc;
		}
		a->w[i]->started = 1;
		a->running = 1;
	}
	return 0;
}

void nsa_active_stats(const struct nsa_active *a, struct nsa_active_stats *s)
{
	const size_t nf = sizeof(*s) / sizeof(uint64_t);
	unsigned int i;
	size_t f;

	memset(s, 0, sizeof(*s));
	if (a == NULL)
		return;
	for (i = 0; i < a->n_writers; i++) {
		const uint64_t *src = (const uint64_t *)&a->w[i]->st;
		uint64_t *dst = (uint64_t *)s;

		for (f = 0; f < nf; f++)
			dst[f] += __atomic_load_n(&src[f], __ATOMIC_RELAXED);
	}
	for (i = 0; i < a->n_lanes; i++)
		s->lane_drops += __atomic_load_n(&a->lanes[i]->dropped,
						 __ATOMIC_RELAXED);
	s->inflight = s->records - s->acked - s->dropped;
}

static int drained(const struct nsa_active *a)
{
	struct nsa_active_stats s;
	unsigned int i;

	for (i = 0; i < a->n_lanes; i++)
		if (!rte_ring_empty(a->lanes[i]->ring))
			return 0;
	/* A writer that emptied a lane raised in_burst first and lowers it
	 * only after counting the records, so reading it after the lanes
	 * closes the window between dequeue and count. */
	for (i = 0; i < a->n_writers; i++)
		if (atomic_load(&a->w[i]->in_burst))
			return 0;
	nsa_active_stats(a, &s);
	return s.inflight == 0 && s.replay_inflight == 0;
}

int nsa_active_drain(struct nsa_active *a, int timeout_ms)
{
	uint64_t deadline =
		nsdp_mono_ns() +
		(uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	if (a == NULL)
		return -EINVAL;
	for (;;) {
		struct timespec ts = {0, 1000000L};

		if (drained(a))
			return 0;
		if (nsdp_mono_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&ts, NULL);
	}
}

void nsa_active_stop(struct nsa_active *a)
{
	unsigned int i;

	if (a == NULL)
		return;
	atomic_store(&a->stop, 1);
	for (i = 0; i < a->n_writers; i++) {
		struct nsa_writer *w = a->w[i];
		uint64_t left;

		if (w == NULL || !w->started)
			continue;
		pthread_join(w->thread, NULL);
		w->started = 0;
		left = w->st.records - w->st.acked - w->st.dropped;
		if (left > 0) {
			NSA_WARN("writer %u: stopped with %llu unacknowledged "
				 "record(s), counted as dropped",
				 w->idx, (unsigned long long)left);
			W_ADD(w, dropped, left);
		}
	}
	a->running = 0;
}

void nsa_active_free(struct nsa_active *a)
{
	unsigned int i, j;

	if (a == NULL)
		return;
	nsa_active_stop(a);
	for (i = 0; i < a->n_writers; i++) {
		struct nsa_writer *w = a->w[i];

		if (w == NULL)
			continue;
		for (j = 0; j < w->n_conns; j++) {
			struct nsa_conn *c = w->conns[j];

			/* A closed batch is owned by the replies it awaits. */
			for (; c->exp_count > 0; c->exp_count--) {
				struct nsa_batch *b = c->exp[c->exp_head].b;

				c->exp_head =
					(c->exp_head + 1) & (c->exp_cap - 1);
				if (--b->pending == 0 && b->closed)
					batch_put(w, b);
			}
		}
		for (j = 0; j < w->n_conns; j++) {
			if (w->conns[j]->open != NULL)
				batch_put(w, w->conns[j]->open);
			conn_free(w->conns[j]);
		}
		for (j = 0; j < w->n_held; j++)
			batch_put(w, w->held[j]);
		free(w->held);
		batch_free_all(w);
		free(w->resend);
		free(w->resend_flags);
		free(w->rp);
		free(w);
	}
	free(a);
}
