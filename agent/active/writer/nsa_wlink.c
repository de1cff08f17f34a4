/*
 * nsa_wlink.c - a writer's links to the masters: connecting them after
 * the topology, sending what is queued on them, following ASK
 * redirections, the recovery that ends retry mode with a resend, and the
 * health the writer publishes: connected to its masters, or retrying.
 *
 * Invariants:
 * - Once any batch needs a resend the writer is in retry mode: it sends
 *   nothing new, lets every connection's replies come in (or the connection
 *   die), and only then requeues every unacknowledged record - including
 *   those of batches that completed during retry mode - in its original
 *   order ahead of the lanes. Resending acknowledged records is harmless
 *   (SET and DEL are idempotent); sending an older record after a newer one
 *   is not.
 * - A lost connection or a master gone from the map (its replica was
 *   promoted) makes the resend replay the window too (nsa_replay.c).
 * - The connections follow a new topology only when no reply is due.
 * - The masters published for health are rewritten under a seqlock:
 *   health_seq is odd while they are (nsa_active_health.c reads them).
 *
 * Not here: what goes into the pipeline (nsa_wpipe.c), losing a
 * connection's replies when it dies (nsa_wreply.c), the topology itself
 * (nsa_cluster.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_fence.h"
#include "nsa_log.h"
#include "nsa_wbatch.h"
#include "nsa_wlink.h"
#include "nsa_wreply.h"
#include "nsdp_time.h"

#define NSA_CONN_BACKOFF_MIN_MS 100
#define NSA_CONN_BACKOFF_MAX_MS 2000

void nsa_link_free(struct nsa_link *c)
{
	if (c == NULL)
		return;
	nsa_conn_fini(&c->conn);
	free(c);
}

/* Returns the number of bytes sent. */
size_t nsa_link_send(struct nsa_writer *w, struct nsa_link *c)
{
	ssize_t n;

	if (c->conn.fd < 0)
		return 0;
	n = nsa_conn_send(&c->conn);
	if (n < 0) {
		nsa_link_kill(w, c, c->conn.err);
		return 0;
	}
	return (size_t)n;
}

/* Open c, named as a writer, then read the store's epoch before anything
 * is written on it (nsa_fence.h): a connection the store cannot tell the
 * epoch on stays closed. */
static int link_open(struct nsa_writer *w, struct nsa_link *c, char *err,
		     size_t errlen)
{
	const struct nsa_store_conf *store = &w->a->conf.store;
	char name[NSA_PAIR_NAME_MAX];
	uint64_t epoch;
	int rc = nsa_conn_open_named(&c->conn, store,
				     nsa_writer_name(store->pair, name), err,
				     errlen);

	if (rc == 0) {
		rc = nsa_fence_read(store, &w->topo, &epoch, err, errlen);
		if (rc < 0)
			nsa_conn_close(&c->conn);
		else if (epoch > w->fence)
			__atomic_store_n(&w->fence,
					 epoch > UINT32_MAX ? UINT32_MAX
							    : (uint32_t)epoch,
					 __ATOMIC_RELAXED);
	}
	if (rc == 0 && w->connected_once)
		W_STAT_ADD(w, reconnects, 1);
	return rc;
}

static struct nsa_link *link_new(const struct nsa_addr *addr)
{
	struct nsa_link *c = calloc(1, sizeof(*c));

	if (c != NULL)
		nsa_conn_init(&c->conn, addr);
	return c;
}

/* Take the connection to addr out of old[], or make a new one. */
static struct nsa_link *link_take(struct nsa_link **old, unsigned int n_old,
				  const struct nsa_addr *addr)
{
	unsigned int i;

	for (i = 0; i < n_old; i++) {
		if (old[i] != NULL &&
		    nsa_addr_equal(&old[i]->conn.addr, addr)) {
			struct nsa_link *c = old[i];

			old[i] = NULL;
			return c;
		}
	}
	return link_new(addr);
}

/* Make conns[] follow topo_new (keeping live connections to the same
 * addresses) and connect every master. Only called when no reply is due. */
static int links_reconcile(struct nsa_writer *w, char *err, size_t errlen)
{
	struct nsa_link *old[NSA_MAX_CONNS];
	unsigned int n_old = w->n_conns, n_old_masters = w->topo.n_nodes, i;
	int rc = 0;

	memcpy(old, w->conns, sizeof(old));
	memset(w->conns, 0, sizeof(w->conns));
	w->topo = w->topo_new;
	w->n_conns = 0;
	for (i = 0; i < w->topo.n_nodes; i++) {
		struct nsa_link *c =
			link_take(old, n_old, &w->topo.nodes[i].addr);

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
		nsa_link_free(old[i]);
	}
	/* Asks learnt under another map are stale now. */
	w->n_ask = 0;
	for (i = 0; rc == 0 && i < w->n_conns; i++)
		if (w->conns[i]->conn.fd < 0)
			rc = link_open(w, w->conns[i], err, errlen);
	return rc;
}

int nsa_writer_connect(struct nsa_writer *w)
{
	unsigned int delay = NSA_CONN_BACKOFF_MIN_MS;
	char err[256];

	while (!nsa_writer_stopping(w)) {
		int rc = nsa_topology_fetch(&w->a->conf.store, &w->topo_new,
					    err, sizeof(err));

		if (rc == 0) {
			W_STAT_ADD(w, topology_refreshes, 1);
			rc = links_reconcile(w, err, sizeof(err));
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
		nsdp_sleep_ms_unless(&w->a->stop, delay);
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
			if (nsa_addr_equal(&w->conns[j]->conn.addr, &a->addr))
				break;
		if (j == w->n_conns) {
			struct nsa_link *c;

			if (w->n_conns == NSA_MAX_CONNS ||
			    (c = link_new(&a->addr)) == NULL)
				continue;
			if (link_open(w, c, err, sizeof(err)) != 0) {
				NSA_WARN("writer %u: ASK target %s:%u: %s",
					 w->idx, a->addr.host, a->addr.port,
					 err);
				nsa_link_free(c);
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

/* Requeue every unacknowledged record - and after a lost master the replay
 * window - in original order, ahead of what is still waiting. */
static int resend_build(struct nsa_writer *w)
{
	int replay = w->master_lost && w->replay.count > 0;
	size_t n = 0, n_rp = 0, i, j;
	uint64_t dropped = 0, replay_dropped = 0;
	struct nsa_resend_item *items;

	for (i = 0; i < w->n_held; i++)
		n += w->held[i]->lines;
	if (replay)
		n += w->replay.count;
	items = malloc((n ? n : 1) * sizeof(*items));
	if (items == NULL)
		return -ENOMEM;
	n = 0;
	for (i = 0; i < w->n_held; i++) {
		struct nsa_batch *b = w->held[i];

		for (j = 0; j < b->lines; j++) {
			uint8_t f = b->rflags[j];

			if (f & NSA_REC_LINE2)
				continue;
			if (!(f & NSA_REC_DROPPED))
				items[n++] = (struct nsa_resend_item){
					b->wseq, j, &b->sess[j],
					ns_session_lines(&b->sess[j]) == 2
						? (const void *)&b->sess[j + 1]
						: NULL,
					f & (NSA_REC_REPLAY | NSA_REC_STORE |
					     NSA_REC_ASKED)};
			else if (!(f & NSA_REC_REPLAY))
				dropped++; /* refused for good, not retried */
			else
				replay_dropped++;
		}
	}
	if (replay) {
		n_rp = nsa_replay_items(&w->replay, items + n, NSA_REC_REPLAY);
		n += n_rp;
	}
	if (nsa_resend_queue(&w->resend, items, n) != 0) {
		free(items);
		return -ENOMEM;
	}
	free(items);
	for (i = 0; i < w->n_held; i++)
		nsa_batch_put(w, w->held[i]);
	if (w->master_lost) {
		if (n_rp > 0)
			NSA_WARN("writer %u: a master was lost or replaced; "
				 "replaying %zu acknowledged record(s) of the "
				 "last %u ms with %zu unacknowledged",
				 w->idx, n_rp, w->a->conf.replay_ms, n - n_rp);
		/* Once resent, they come back when acknowledged again. */
		nsa_replay_clear(&w->replay);
	}
	w->master_lost = 0;
	w->n_held = 0;
	W_STAT_SUB(w, replay_inflight, replay_dropped);
	W_STAT_ADD(w, resent, n - n_rp);
	W_STAT_ADD(w, replayed, n_rp);
	W_STAT_ADD(w, replay_inflight, n_rp);
	W_STAT_ADD(w, dropped, dropped);
	return 0;
}

int nsa_writer_recover(struct nsa_writer *w)
{
	unsigned int i;
	int dead = 0;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_link *c = w->conns[i];

		if (c->open != NULL) {
			/* Its records are newer than any closed batch of the
			 * same master, and their wseq says so. */
			if (nsa_batch_hold(w, c->open) != 0)
				return -ENOMEM;
			c->open = NULL;
		}
		c->inflight_batches = 0;
		dead |= c->conn.fd < 0;
	}
	if (w->err_seen) {
		nsdp_sleep_ms_unless(&w->a->stop, w->err_backoff_ms);
		w->err_backoff_ms =
			w->err_backoff_ms * 2 > NSA_ERR_BACKOFF_MAX_MS
				? NSA_ERR_BACKOFF_MAX_MS
				: w->err_backoff_ms * 2;
		w->err_seen = 0;
	}
	if (dead || w->need_refresh)
		if (nsa_writer_connect(w) != 0)
			return -ECANCELED;
	asks_resolve(w);
	if (resend_build(w) != 0)
		return -ENOMEM;
	w->retry_mode = 0;
	return 0;
}

/* ---- health, as nsa_active_writer_health reads it ---------------------- */

void nsa_writer_health_retrying(struct nsa_writer *w)
{
	if (__atomic_load_n(&w->retry_since_ns, __ATOMIC_RELAXED) == 0)
		__atomic_store_n(&w->retry_since_ns, nsdp_mono_ns(),
				 __ATOMIC_RELAXED);
}

/* Connected to every master of w->topo: publish them (a seqlock: the
 * reader retries while health_seq is odd or moved). */
void nsa_writer_health_connected(struct nsa_writer *w)
{
	unsigned int i, k, n = w->topo.n_nodes;
	uint32_t seq = w->health_seq;

	if (n > NSA_MAX_NODES)
		n = NSA_MAX_NODES;
	__atomic_store_n(&w->health_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < n; i++) {
		char text[NSA_WRITER_MASTER_LEN] = {0};
		uint64_t word;

		snprintf(text, sizeof(text), "%s:%u",
			 w->topo.nodes[i].addr.host,
			 w->topo.nodes[i].addr.port);
		for (k = 0; k < NSA_WRITER_MASTER_LEN / 8; k++) {
			memcpy(&word, text + 8 * k, 8);
			__atomic_store_n(&w->masters_pub[i][k], word,
					 __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&w->n_masters_pub, n, __ATOMIC_RELAXED);
	__atomic_store_n(&w->health_seq, seq + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&w->retry_since_ns, 0, __ATOMIC_RELAXED);
}
