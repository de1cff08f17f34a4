/*
 * nsa_loader_list.c - the loader's shared machinery on its non-blocking
 * connection: listing a master's keys, asking their values, probing its
 * slots.
 *
 * A cluster master is read slot by slot: CLUSTER GETKEYSINSLOT for each
 * slot it owns (NSA_SLOT_WINDOW of them in flight), each answered by one
 * MGET of that slot's keys. A plain server (or a master that refuses
 * GETKEYSINSLOT) is read with SCAN MATCH and one MGET per SCAN reply (one
 * per slot on a cluster: MGET keys must share a slot). Which keys are read
 * and what their values mean is the layout's reader's (ld->layout).
 *
 * On a cluster the slot map may be out of date (slots moved since it was
 * read) or a slot half moved (MIGRATING here, IMPORTING on its target).
 * So after listing a slot the loader asks the node for a key of that slot
 * (MGET of the slot's channel name, which no one stores): a nil says the
 * node still serves the slot, MOVED that it does not (the map is stale),
 * ASK that it is migrating it, and then the target's half of the slot is
 * read there (nsa_loader_ask.c). Only slots answered for are marked read
 * (nsa_loader_slot_read).
 *
 * Invariants:
 * - Every command queues what its reply means; a key list lives until the
 *   last MGET that names its keys is answered (or its expectation is
 *   dropped when the loader closes).
 * - The MGETs of one listing go out in the order of their keys' slots.
 * - With a layout's mget_window, at most that many MGETs are in flight;
 *   the listings still to ask for wait, oldest first, each holding its
 *   keys.
 *
 * Not here: driving the load and dispatching replies (nsa_loader.c), the
 * layouts' keys and values (nsa_loader_keys.c, nsa_loader_log.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_loader_ask.h"
#include "nsa_loader_layout.h"
#include "nsa_loader_list.h"

/* Keys per SCAN unless the layout says (one MGET each, or one per
 * mget_keys of them). */
#define NSA_SCAN_COUNT "1000"
/* CLUSTER GETKEYSINSLOT requests kept in flight. */
#define NSA_SLOT_WINDOW 32
/* Keys handed to the layout's reader at once. */
#define NSA_VALUES_CHUNK 512

/* Keys of one SCAN or GETKEYSINSLOT reply, in the order the MGETs asked
 * for them (the keys the layout reads only). */
struct key_batch {
	redisReply *reply; /* owns the key strings */
	redisReply **keys;
	unsigned int refs; /* MGETs still to answer, and the wait below */
	/* Waiting for room in the window: keys [next, end) of order still
	 * to ask for, and the next listing waiting. */
	uint32_t next, end;
	struct key_batch *wait_next;
	uint32_t order[];
};

static void key_batch_unref(struct key_batch *b)
{
	if (--b->refs == 0) {
		freeReplyObject(b->reply);
		free(b);
	}
}

void nsa_loader_exp_drop(const struct nsa_exp *e)
{
	if (e->kind == NSA_LD_MGET)
		key_batch_unref(e->ptr);
}

int nsa_loader_send_scan(struct nsa_loader *ld, const char *cursor)
{
	const struct nsa_exp e = {.kind = NSA_LD_SCAN};

	nsa_conn_cmd(ld->conn, 6);
	nsa_conn_arg_str(ld->conn, "SCAN");
	nsa_conn_arg_str(ld->conn, cursor);
	nsa_conn_arg_str(ld->conn, "MATCH");
	nsa_conn_arg_str(ld->conn, ld->layout->scan_match);
	nsa_conn_arg_str(ld->conn, "COUNT");
	nsa_conn_arg_str(ld->conn, ld->layout->scan_count
					   ? ld->layout->scan_count
					   : NSA_SCAN_COUNT);
	return nsa_conn_cmd_end(ld->conn, &e);
}

/* Ask for a key of slot that no one stores: whether the node serves the
 * slot (nil), not (MOVED) or is migrating it (ASK). */
static int send_probe(struct nsa_loader *ld, uint32_t slot)
{
	const struct nsa_exp e = {.kind = NSA_LD_PROBE, .pos = slot};
	char key[NS_CHANNEL_MAX];

	ns_channel_for_slot((uint16_t)slot, key);
	nsa_conn_cmd(ld->conn, 2);
	nsa_conn_arg_str(ld->conn, "MGET");
	nsa_conn_arg_str(ld->conn, key);
	return nsa_conn_cmd_end(ld->conn, &e);
}

int nsa_loader_send_slots(struct nsa_loader *ld)
{
	const struct nsa_topology *t = ld->topo;
	const struct nsa_exp e = {.kind = NSA_LD_SLOT};

	while (ld->slots_inflight < NSA_SLOT_WINDOW && !ld->keys_done) {
		while (ld->next_slot < NS_SLOTS &&
		       !nsa_loader_node_slot(ld, ld->next_slot))
			ld->next_slot++;
		if (ld->next_slot == NS_SLOTS) {
			ld->keys_done = 1;
			break;
		}
		nsa_conn_cmd(ld->conn, 4);
		nsa_conn_arg_str(ld->conn, "CLUSTER");
		nsa_conn_arg_str(ld->conn, "GETKEYSINSLOT");
		nsa_conn_arg_u32(ld->conn, ld->next_slot);
		nsa_conn_arg_str(ld->conn, NSA_SLOT_MAX_KEYS);
		if (nsa_conn_cmd_end(ld->conn, &e) != 0 ||
		    (t->cluster && send_probe(ld, ld->next_slot) != 0))
			return -ENOMEM;
		ld->next_slot++;
		ld->slots_inflight++;
	}
	return 0;
}

static int send_mget_one(struct nsa_loader *ld, struct key_batch *b,
			 uint32_t first, uint32_t n)
{
	const struct nsa_exp e = {
		.ptr = b, .kind = NSA_LD_MGET, .pos = first, .count = n};
	uint32_t i;

	nsa_conn_cmd(ld->conn, n + 1);
	nsa_conn_arg_str(ld->conn, "MGET");
	for (i = first; i < first + n; i++) {
		const redisReply *k = b->keys[b->order[i]];

		nsa_conn_arg(ld->conn, k->str, k->len);
	}
	if (nsa_conn_cmd_end(ld->conn, &e) != 0)
		return -ENOMEM;
	b->refs++; /* the MGET's reply holds the keys until it comes */
	ld->mgets_inflight++;
	return 0;
}

/* The MGETs of n keys of b from first: one, or one per mget_keys of the
 * layout. */
static int send_mget(struct nsa_loader *ld, struct key_batch *b, uint32_t first,
		     uint32_t n)
{
	const uint32_t most = ld->layout->mget_keys ? ld->layout->mget_keys : n;
	uint32_t i, k;

	for (i = 0; i < n; i += k) {
		k = n - i < most ? n - i : most;
		if (send_mget_one(ld, b, first + i, k) != 0)
			return -ENOMEM;
	}
	return 0;
}

/* Send the waiting listings' MGETs while the window has room: 0 or
 * -ENOMEM. */
static int send_waiting(struct nsa_loader *ld)
{
	const uint32_t most = ld->layout->mget_keys;
	struct key_batch *b;
	uint32_t k;

	while ((b = ld->mget_wait) != NULL &&
	       ld->mgets_inflight < ld->layout->mget_window) {
		k = b->end - b->next < most ? b->end - b->next : most;
		if (send_mget_one(ld, b, b->next, k) != 0)
			return -ENOMEM;
		b->next += k;
		if (b->next < b->end)
			continue;
		ld->mget_wait = b->wait_next;
		if (ld->mget_wait == NULL)
			ld->mget_wait_last = NULL;
		key_batch_unref(b);
	}
	return 0;
}

/* The MGETs of n keys of b from first, at most the layout's mget_window
 * of them in flight (with none, all now). */
static int send_mget_windowed(struct nsa_loader *ld, struct key_batch *b,
			      uint32_t first, uint32_t n)
{
	if (ld->layout->mget_window == 0 || ld->layout->mget_keys == 0)
		return send_mget(ld, b, first, n);
	b->next = first;
	b->end = first + n;
	b->wait_next = NULL;
	b->refs++; /* the wait's */
	if (ld->mget_wait_last)
		ld->mget_wait_last->wait_next = b;
	else
		ld->mget_wait = b;
	ld->mget_wait_last = b;
	return send_waiting(ld);
}

void nsa_loader_mget_wait_drop(struct nsa_loader *ld)
{
	struct key_batch *b;

	while ((b = ld->mget_wait) != NULL) {
		ld->mget_wait = b->wait_next;
		key_batch_unref(b);
	}
	ld->mget_wait_last = NULL;
	ld->mgets_inflight = 0;
}

/* A key's slot above its index: sorting these sorts by slot, then index,
 * with no state outside the array (loaders of several standbys run at
 * once in one process). */
static int by_slot_then_index(const void *a, const void *b)
{
	uint64_t ka = *(const uint64_t *)a, kb = *(const uint64_t *)b;

	return (ka > kb) - (ka < kb);
}

/* Queue one MGET per slot of the m keys of b (b->order sorted by slot). */
static int send_mget_per_slot(struct nsa_loader *ld, struct key_batch *b,
			      size_t m)
{
	uint64_t *sorted = malloc(m * sizeof(*sorted));
	size_t i, first;
	int rc = 0;

	if (!sorted)
		return -ENOMEM;
	for (i = 0; i < m; i++)
		sorted[i] = (uint64_t)ns_key_slot(b->keys[b->order[i]]->str,
						  b->keys[b->order[i]]->len)
				    << 32 |
			    b->order[i];
	qsort(sorted, m, sizeof(*sorted), by_slot_then_index);
	for (i = 0; i < m; i++)
		b->order[i] = (uint32_t)sorted[i];
	for (first = 0; first < m && rc == 0; first = i) {
		for (i = first + 1;
		     i < m && sorted[i] >> 32 == sorted[first] >> 32; i++)
			;
		rc = send_mget(ld, b, (uint32_t)first, (uint32_t)(i - first));
	}
	free(sorted);
	return rc;
}

/* A list of keys (owned by reply r): queue MGETs of the keys the layout
 * reads, one for all of them when they share a slot or the store is one
 * server, else one per slot. Takes r. */
static int on_keys(struct nsa_loader *ld, redisReply *r, redisReply **keys,
		   size_t n, int one_slot)
{
	struct key_batch *b;
	size_t m = 0, i;
	uint64_t bad = 0;
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
		int want = nsa_loader_key_wanted(ld, keys[i]);

		bad += want < 0;
		if (want > 0)
			b->order[m++] = (uint32_t)i;
	}
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
	if (m == 0)
		; /* nothing to ask */
	else if (one_slot || !ld->topo->cluster)
		rc = send_mget_windowed(ld, b, 0, (uint32_t)m);
	else
		rc = send_mget_per_slot(ld, b, m);
	/* On error the loader is closed, which drops the MGETs' references
	 * through their expectations. */
	key_batch_unref(b);
	return rc;
}

int nsa_loader_on_scan(struct nsa_loader *ld, redisReply *r)
{
	int rc;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -EPROTO;
	}
	if (strcmp(r->element[0]->str, "0") == 0) {
		uint32_t slot;

		ld->keys_done = 1;
		for (slot = 0; ld->topo->cluster &&
			       nsa_loader_conn_loaded(ld) && slot < NS_SLOTS;
		     slot++)
			if (nsa_loader_node_slot(ld, slot) &&
			    send_probe(ld, slot) != 0) {
				freeReplyObject(r);
				return -ENOMEM;
			}
	} else if ((rc = nsa_loader_send_scan(ld, r->element[0]->str)) < 0) {
		freeReplyObject(r);
		return rc;
	}
	return on_keys(ld, r, r->element[1]->element, r->element[1]->elements,
		       0);
}

int nsa_loader_on_slot(struct nsa_loader *ld, redisReply *r)
{
	int rc;

	ld->slots_inflight--;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -EPROTO;
	}
	rc = on_keys(ld, r, r->element, r->elements, 1);
	return rc < 0 ? rc : nsa_loader_send_slots(ld);
}

void nsa_loader_on_mget(struct nsa_loader *ld, const struct nsa_exp *e,
			const redisReply *r)
{
	struct key_batch *b = e->ptr;
	const redisReply *keys[NSA_VALUES_CHUNK];
	uint32_t i, m, n = e->count;
	uint64_t got = 0, bytes = 0;

	if (r->type == REDIS_REPLY_ARRAY && r->elements == n) {
		for (i = 0; i < n; i++)
			if (r->element[i]->type == REDIS_REPLY_STRING) {
				got++;
				bytes += r->element[i]->len;
			}
		ld->values_read += got;
		ld->value_bytes += bytes;
		if (got && ld->sink.read)
			ld->sink.read(ld->sink.arg, got, bytes);
		for (i = 0; i < n; i += m) {
			for (m = 0; m < NSA_VALUES_CHUNK && i + m < n; m++)
				keys[m] = b->keys[b->order[e->pos + i + m]];
			if (ld->layout->values(ld, keys, r->element + i, m) !=
			    0)
				ld->values_failed = 1;
		}
	}
	key_batch_unref(b);
	ld->mgets_inflight--;
	if (send_waiting(ld) != 0)
		ld->values_failed = 1;
}

int nsa_loader_is_probe_reply(const struct nsa_loader *ld, const redisReply *r)
{
	const struct nsa_exp *head = nsa_conn_exp_peek(ld->conn);

	return head && head->kind == NSA_LD_PROBE &&
	       (r->type != REDIS_REPLY_ERROR ||
		strncmp(r->str, "MOVED ", 6) == 0 ||
		strncmp(r->str, "ASK ", 4) == 0);
}

static void slot_mark_read(struct nsa_loader *ld, uint32_t slot)
{
	ld->slot_read[slot / 64] |= 1ull << (slot % 64);
}

void nsa_loader_on_probe(struct nsa_loader *ld, uint32_t slot,
			 const redisReply *r)
{
	struct nsa_addr at;
	const char *sp;

	if (r->type != REDIS_REPLY_ERROR) {
		slot_mark_read(ld, slot);
	} else if (strncmp(r->str, "MOVED ", 6) == 0) {
		ld->slots_moved++;
	} else {
		/* "ASK <slot> <host>:<port>" */
		ld->slots_migrating++;
		sp = strchr(r->str + 4, ' ');
		if (sp && nsa_addr_parse(sp + 1, &at) == 0 &&
		    nsa_loader_read_importing(ld, slot, &at) == 0)
			slot_mark_read(ld, slot);
		else
			ld->slots_unread++;
	}
}
