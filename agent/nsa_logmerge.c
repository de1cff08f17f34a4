/*
 * nsa_logmerge.c - merging log segments into the table the keys layout
 * holds (schema/FORMAT.md, "Reading the log: order and expiry").
 *
 * The merge is commutative: a record replaces the one kept for its session
 * only when it is newer or as new by (epoch, timestamp_ns), so segments may
 * be read in any order, and twice. Deletes are kept until the end, where
 * they and the records past their timeout are left out.
 *
 * Not here: finding and reading the segments (nsa_loader.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_logmerge.h"

#define MERGE_MIN_CAP 1024
#define EMIT_CHUNK 16

struct nsa_logmerge_entry {
	uint8_t key[NS_KEY_LEN]; /* key[0] == 0: empty */
	struct ns_session s;
};

static uint64_t key_hash(const uint8_t *k)
{
	uint64_t a, b;

	memcpy(&a, k, 8);
	memcpy(&b, k + 8, 8);
	a ^= b * 0x9e3779b97f4a7c15ull;
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return a;
}

int nsa_logmerge_init(struct nsa_logmerge *m)
{
	memset(m, 0, sizeof(*m));
	m->e = calloc(MERGE_MIN_CAP, sizeof(*m->e));
	if (m->e == NULL)
		return -ENOMEM;
	m->cap = MERGE_MIN_CAP;
	return 0;
}

void nsa_logmerge_free(struct nsa_logmerge *m)
{
	free(m->e);
	m->e = NULL;
	m->cap = m->used = 0;
}

static struct nsa_logmerge_entry *slot_of(struct nsa_logmerge_entry *e,
					  size_t cap, const uint8_t *key)
{
	size_t i = key_hash(key) & (cap - 1);

	while (e[i].key[0] != 0 && memcmp(e[i].key, key, NS_KEY_LEN) != 0)
		i = (i + 1) & (cap - 1);
	return &e[i];
}

static int grow(struct nsa_logmerge *m)
{
	size_t cap = m->cap * 2, i;
	struct nsa_logmerge_entry *e = calloc(cap, sizeof(*e));

	if (e == NULL)
		return -ENOMEM;
	for (i = 0; i < m->cap; i++)
		if (m->e[i].key[0] != 0)
			*slot_of(e, cap, m->e[i].key) = m->e[i];
	free(m->e);
	m->e = e;
	m->cap = cap;
	return 0;
}

int nsa_logmerge_record(struct nsa_logmerge *m, const struct ns_session *s)
{
	struct nsa_logmerge_entry *x;
	uint8_t key[NS_KEY_LEN];

	ns_key_build(s->proto, &s->orig, key);
	if (m->keep_slots) {
		uint16_t slot = ns_key_slot(key, NS_KEY_LEN);

		if (!((m->keep_slots[slot / 64] >> (slot % 64)) & 1))
			return 0;
	}
	if (2 * (m->used + 1) > m->cap && grow(m) != 0)
		return -ENOMEM;
	x = slot_of(m->e, m->cap, key);
	m->records++;
	if (x->key[0] == 0) {
		memcpy(x->key, key, NS_KEY_LEN);
		x->s = *s;
		m->used++;
	} else if (s->epoch > x->s.epoch ||
		   (s->epoch == x->s.epoch &&
		    s->timestamp_ns >= x->s.timestamp_ns)) {
		/* As new counts as newer: the same record read twice. */
		x->s = *s;
	}
	return 0;
}

int nsa_logmerge_segment_until(struct nsa_logmerge *m, const uint8_t *v,
			       size_t len, uint64_t until_ns)
{
	struct ns_batch_hdr h;
	struct ns_batch_iter it;
	struct ns_session s;
	const uint8_t *body;
	int rc = ns_batch_decode(v, len, &h, &body);

	if (rc < 0)
		return rc;
	if (h.flags & NS_BATCH_F_STORE)
		return -EINVAL;
	/* Whoever may write the store but lacks the key cannot put records
	 * into a table: a version 1 batch signs nothing, so it is refused
	 * too. */
	if (m->batch_key_len &&
	    (h.version == NS_BATCH_V1 ||
	     ns_batch_verify(v, len, (const uint8_t *)m->batch_key,
			     m->batch_key_len) != 0))
		return -EACCES;
	if (h.sent_ns >= until_ns)
		return 0;
	ns_batch_iter_init(&it, body, h.body_len);
	while (ns_batch_iter_next(&it, &s) > 0)
		if (nsa_logmerge_record(m, &s) != 0)
			return -ENOMEM;
	m->segments++;
	return 1;
}

int nsa_logmerge_segment(struct nsa_logmerge *m, const uint8_t *v, size_t len)
{
	int rc = nsa_logmerge_segment_until(m, v, len, UINT64_MAX);

	return rc < 0 ? rc : 0;
}

int nsa_logmerge_live(const struct ns_session *s, uint64_t now_ns)
{
	if (s->event == NS_EV_DELETE)
		return 0;
	return s->timeout_ms == 0 ||
	       s->timestamp_ns + (uint64_t)s->timeout_ms * 1000000u > now_ns;
}

uint64_t nsa_logmerge_emit(const struct nsa_logmerge *m, uint64_t now_ns,
			   unsigned int (*fn)(void *arg,
					      const struct ns_session *s,
					      unsigned int n),
			   void *arg)
{
	struct ns_session ss[EMIT_CHUNK];
	unsigned int n = 0;
	uint64_t taken = 0;
	size_t i;

	for (i = 0; i < m->cap; i++) {
		if (m->e[i].key[0] == 0 ||
		    !nsa_logmerge_live(&m->e[i].s, now_ns))
			continue;
		ss[n++] = m->e[i].s;
		if (n == EMIT_CHUNK) {
			taken += fn(arg, ss, n);
			n = 0;
		}
	}
	if (n > 0)
		taken += fn(arg, ss, n);
	return taken;
}
