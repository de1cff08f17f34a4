/*
 * nsa_loader.c - reading one master's sessions: open the connection,
 * begin the load, hand each reply to the part that asked for it, and say
 * when the load is done.
 *
 * The loader is shared machinery over one reader per store layout, the
 * way conntrack-tools runs its sync modes over one queue: the listing of
 * keys by slot or SCAN, their MGETs and the probes of each slot
 * (loader/nsa_loader_list.c), the blocking read of a migrating slot's
 * target (loader/nsa_loader_ask.c), and the keys layout's reader
 * (loader/nsa_loader_keys.c) or the log layout's (loader/nsa_loader_log.c:
 * merge, compaction's mark, the other masters' segments), chosen when the
 * loader opens (struct nsa_loader_layout, loader/nsa_loader_layout.h).
 *
 * Invariants:
 * - Replies come in the order commands went out (nsa_conn.h): each goes to
 *   the part whose expectation heads the queue; an error reply, or one
 *   nothing asked for, ends the load, except a probe's MOVED or ASK.
 * - A load is done when every key listing is sent and no reply is due;
 *   the layout's reader then says whether it is (NSA_LOADER_DONE) or
 *   queued more.
 *
 * Not here: what a load means for a table (the sink decides), retries and
 * liveness (the caller watches last_rx_ns).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_loader.h"
#include "nsa_loader_ask.h"
#include "nsa_loader_layout.h"
#include "nsa_loader_keys.h"
#include "nsa_loader_list.h"
#include "nsa_loader_log.h"
#include "nsdp_time.h"

void nsa_loader_close(struct nsa_loader *ld)
{
	if (ld->layout && ld->layout->close)
		ld->layout->close(ld);
	nsa_loader_importer_close(ld);
	if (ld->conn == NULL)
		return;
	while (ld->conn->exp_count) {
		struct nsa_exp e = nsa_conn_exp_pop(ld->conn);

		nsa_loader_exp_drop(&e);
	}
	nsa_loader_mget_wait_drop(ld);
	nsa_conn_free(ld->conn);
	ld->conn = NULL;
}

int nsa_loader_open(struct nsa_loader *ld, const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo, unsigned int node,
		    const struct nsa_loader_sink *sink, char *err,
		    size_t errlen)
{
	int rc;

	nsa_loader_close(ld);
	ld->conn = nsa_conn_new(&topo->nodes[node].addr);
	if (ld->conn == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = nsa_conn_open(ld->conn, conf, err, errlen);
	if (rc < 0) {
		nsa_conn_free(ld->conn);
		ld->conn = NULL;
		return rc;
	}
	ld->conf = conf;
	ld->topo = topo;
	ld->node = node;
	ld->sink = *sink;
	ld->layout = conf->layout == NSA_LAYOUT_LOG ? &nsa_loader_log
						    : &nsa_loader_keys;
	ld->conn_node = node;
	ld->every_master = 0;
	return 0;
}

int nsa_loader_every_master(struct nsa_loader *ld)
{
	if (ld->layout != &nsa_loader_log)
		return -EINVAL;
	ld->every_master = 1;
	return 0;
}

int nsa_loader_begin(struct nsa_loader *ld, int by_slot)
{
	ld->by_slot = by_slot;
	ld->keys_done = 0;
	ld->next_slot = 0;
	ld->slots_inflight = 0;
	ld->loaded = 0;
	ld->values_read = 0;
	ld->value_bytes = 0;
	memset(ld->slot_read, 0, sizeof(ld->slot_read));
	ld->slots_moved = 0;
	ld->slots_migrating = 0;
	ld->slots_unread = 0;
	ld->last_rx_ns = nsdp_mono_ns();
	ld->values_failed = 0;
	if ((ld->layout->begin && ld->layout->begin(ld) != 0) ||
	    (by_slot ? nsa_loader_send_slots(ld)
		     : nsa_loader_send_scan(ld, "0")) < 0) {
		snprintf(ld->why, sizeof(ld->why), "out of memory");
		return NSA_LOADER_FAILED;
	}
	if (ld->keys_done && ld->conn->exp_count == 0)
		return ld->layout->finish(ld);
	return NSA_LOADER_MORE;
}

int nsa_loader_flush(struct nsa_loader *ld)
{
	if (ld->conn && nsa_conn_want_write(ld->conn) &&
	    nsa_conn_send(ld->conn) < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", ld->conn->err);
		return NSA_LOADER_FAILED;
	}
	return 0;
}

/* An error reply, or a reply nothing asked for. */
static int on_refusal(struct nsa_loader *ld, redisReply *r)
{
	const struct nsa_exp *head = nsa_conn_exp_peek(ld->conn);
	int slot_refused = head && head->kind == NSA_LD_SLOT &&
			   r->type == REDIS_REPLY_ERROR &&
			   (strncmp(r->str, "NOPERM", 6) == 0 ||
			    strncmp(r->str, "ERR", 3) == 0);

	snprintf(ld->why, sizeof(ld->why), "%.150s",
		 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected");
	freeReplyObject(r);
	return slot_refused ? NSA_LOADER_SLOTS_REFUSED : NSA_LOADER_FAILED;
}

/* One reply r (taken) to the part that asked for it: 0, or a loader
 * result that ends the load. */
static int on_reply(struct nsa_loader *ld, redisReply *r)
{
	struct nsa_exp e;
	int rc = 0;

	if (nsa_loader_is_probe_reply(ld, r)) {
		e = nsa_conn_exp_pop(ld->conn);
		nsa_loader_on_probe(ld, e.pos, r);
		freeReplyObject(r);
		return 0;
	}
	if (ld->conn->exp_count == 0 || r->type == REDIS_REPLY_ERROR)
		return on_refusal(ld, r);
	e = nsa_conn_exp_pop(ld->conn);
	switch (e.kind) {
	case NSA_LD_MGET:
		nsa_loader_on_mget(ld, &e, r);
		freeReplyObject(r);
		break;
	case NSA_LD_READER:
		ld->layout->on_reply(ld, r);
		freeReplyObject(r);
		break;
	case NSA_LD_SCAN:
		rc = nsa_loader_on_scan(ld, r);
		break;
	default:
		rc = nsa_loader_on_slot(ld, r);
	}
	if (rc < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", strerror(-rc));
		return NSA_LOADER_FAILED;
	}
	return 0;
}

int nsa_loader_on_readable(struct nsa_loader *ld)
{
	redisReply *r;
	int rc;

	if (nsa_conn_recv(ld->conn) < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", ld->conn->err);
		return NSA_LOADER_FAILED;
	}
	ld->last_rx_ns = nsdp_mono_ns();
	while ((rc = nsa_conn_reply(ld->conn, &r)) == 1) {
		int end = on_reply(ld, r);

		if (end != 0)
			return end;
	}
	if (rc < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", ld->conn->err);
		return NSA_LOADER_FAILED;
	}
	if (ld->values_failed) {
		snprintf(ld->why, sizeof(ld->why),
			 "out of memory merging the log");
		return NSA_LOADER_FAILED;
	}
	if (ld->keys_done && ld->conn->exp_count == 0)
		return ld->layout->finish(ld);
	return NSA_LOADER_MORE;
}

static int run(const struct nsa_store_conf *conf,
	       const struct nsa_topology *topo, unsigned int node, int every,
	       int by_slot, const struct nsa_loader_sink *sink, int timeout_ms,
	       char *err, size_t errlen)
{
	struct nsa_loader ld = {0};
	int rc;

	if (nsa_loader_open(&ld, conf, topo, node, sink, err, errlen) < 0)
		return NSA_LOADER_FAILED;
	if (every && nsa_loader_every_master(&ld) < 0) {
		snprintf(err, errlen,
			 "a load of every master is for the log "
			 "layout");
		nsa_loader_close(&ld);
		return NSA_LOADER_FAILED;
	}
	rc = nsa_loader_begin(&ld, by_slot);
	while (rc == NSA_LOADER_MORE) {
		struct pollfd p = {.fd = ld.conn->fd, .events = POLLIN};
		int n;

		if (nsa_loader_flush(&ld) < 0) {
			rc = NSA_LOADER_FAILED;
			break;
		}
		if (nsa_conn_want_write(ld.conn))
			p.events |= POLLOUT;
		n = poll(&p, 1, timeout_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(ld.why, sizeof(ld.why), "%s",
				 n == 0 ? "no reply" : strerror(errno));
			rc = NSA_LOADER_FAILED;
			break;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			rc = nsa_loader_on_readable(&ld);
	}
	if (rc < 0)
		snprintf(err, errlen, "%s:%u: %s",
			 topo->nodes[ld.conn_node].addr.host,
			 topo->nodes[ld.conn_node].addr.port, ld.why);
	nsa_loader_close(&ld);
	return rc;
}

int nsa_loader_run(const struct nsa_store_conf *conf,
		   const struct nsa_topology *topo, unsigned int node,
		   int by_slot, const struct nsa_loader_sink *sink,
		   int timeout_ms, char *err, size_t errlen)
{
	return run(conf, topo, node, 0, by_slot, sink, timeout_ms, err, errlen);
}

int nsa_loader_run_every(const struct nsa_store_conf *conf,
			 const struct nsa_topology *topo, int by_slot,
			 const struct nsa_loader_sink *sink, int timeout_ms,
			 char *err, size_t errlen)
{
	return run(conf, topo, 0, 1, by_slot, sink, timeout_ms, err, errlen);
}

/* run() of one load (every: all masters at once), again while a
 * compaction round overtook it, tries times at most. */
static int run_tries(const struct nsa_store_conf *conf,
		     const struct nsa_topology *topo, unsigned int node,
		     int every, const struct nsa_loader_sink *sink,
		     int timeout_ms, int tries, char *err, size_t errlen)
{
	int lr = NSA_LOADER_FAILED;

	for (int t = 0; t < tries; t++) {
		lr = run(conf, topo, node, every, 0, sink, timeout_ms, err,
			 errlen);
		if (lr != NSA_LOADER_RACED)
			break;
	}
	return lr;
}

int nsa_loader_run_all(const struct nsa_store_conf *conf,
		       const struct nsa_loader_sink *sink, int timeout_ms,
		       int tries, char *err, size_t errlen)
{
	struct nsa_topology *topo = calloc(1, sizeof(*topo));
	int lr = NSA_LOADER_DONE;

	if (!topo) {
		snprintf(err, errlen, "out of memory");
		return NSA_LOADER_FAILED;
	}
	if (nsa_topology_fetch(conf, topo, err, errlen) != 0) {
		free(topo);
		return NSA_LOADER_FAILED;
	}
	if (conf->layout == NSA_LAYOUT_LOG && topo->cluster &&
	    topo->n_nodes > 1)
		lr = run_tries(conf, topo, 0, 1, sink, timeout_ms, tries, err,
			       errlen);
	else
		for (unsigned int i = 0;
		     i < topo->n_nodes && lr == NSA_LOADER_DONE; i++)
			lr = run_tries(conf, topo, i, 0, sink, timeout_ms,
				       tries, err, errlen);
	free(topo);
	return lr;
}
