/*
 * nsa_logmark.c - compaction's commit mark and the names of the log's keys
 * (schema/FORMAT.md, Compaction): the mark's text, its HMAC under the
 * batch key, and what a reader under it merges.
 *
 * The mark covers a writer's segments by their names alone (the seq of
 * each family, a publisher's segments on one channel), so what it covers
 * does not depend on any clock, the writers' or the readers'.
 *
 * Invariants:
 * - A mark's covers are in (tag, publisher) order, each family once: a
 *   reader finds a family by bisection, and a text in another order is
 *   no mark.
 * - With a batch key, a mark without a valid HMAC over its text is
 *   refused (-EACCES), as a batch is: whoever may write ns:* but lacks
 *   the key cannot hide a segment or name a checkpoint.
 *
 * Not here: reading and writing the mark in the store
 * (compact/nsa_compact_checkpoint.c, loader/nsa_loader_log.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_logmark.h"

#define MARK_MAGIC "natsync-mark 2 "
#define MARK_MAC " hmac "

enum nsa_logkey nsa_logkey_kind(const char *k, size_t len)
{
	const char *tag = memchr(k, '}', len);
	size_t rest;

	if (len < NS_SEGMENT_PREFIX_LEN ||
	    memcmp(k, NS_SEGMENT_PREFIX, NS_SEGMENT_PREFIX_LEN) != 0 ||
	    tag == NULL)
		return NSA_LOGKEY_OTHER;
	rest = len - (size_t)(tag - k);
	if (rest == 3 && tag[1] == ':' && tag[2] == 'c')
		return NSA_LOGKEY_MARK;
	if (rest >= 4 && tag[1] == ':' && tag[2] == 'k' && tag[3] == ':')
		return NSA_LOGKEY_CHECKPOINT;
	return NSA_LOGKEY_SEGMENT;
}

/* An unsigned number in base at *p (up to end), at least one digit, no
 * more than max: advances *p. 0 or -EINVAL. */
static int number(const char **p, const char *end, int base, uint64_t max,
		  uint64_t *out)
{
	uint64_t v = 0;
	const char *q = *p;

	for (; q < end; q++) {
		unsigned int d;

		if (*q >= '0' && *q <= '9')
			d = (unsigned int)(*q - '0');
		else if (base == 16 && *q >= 'a' && *q <= 'f')
			d = (unsigned int)(*q - 'a' + 10);
		else
			break;
		if (v > (max - d) / (unsigned int)base)
			return -EINVAL;
		v = v * (unsigned int)base + d;
	}
	if (q == *p)
		return -EINVAL;
	*p = q;
	*out = v;
	return 0;
}

/* *p at c: past it, 0; else -EINVAL. */
static int expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

int nsa_logkey_segment(const char *k, size_t len, uint32_t *tag,
		       uint32_t *publisher, uint64_t *seq)
{
	const char *p = k + NS_SEGMENT_PREFIX_LEN, *end = k + len;
	uint64_t t, pub;

	if (nsa_logkey_kind(k, len) != NSA_LOGKEY_SEGMENT ||
	    expect(&p, end, '{') || number(&p, end, 10, UINT32_MAX, &t) ||
	    expect(&p, end, '}') || expect(&p, end, ':') || end - p < 10 ||
	    number(&p, p + 8, 16, UINT32_MAX, &pub) || expect(&p, end, ':') ||
	    number(&p, end, 16, UINT64_MAX, seq) || p != end)
		return -EINVAL;
	*tag = (uint32_t)t;
	*publisher = (uint32_t)pub;
	return 0;
}

int nsa_logkey_checkpoint(const char *k, size_t len, uint32_t *id,
			  uint64_t *gen)
{
	const char *p = memchr(k, '}', len), *end = k + len;
	uint64_t v;

	if (nsa_logkey_kind(k, len) != NSA_LOGKEY_CHECKPOINT)
		return -EINVAL;
	p += 4; /* "}:k:" */
	if (number(&p, end, 16, UINT32_MAX, &v) || expect(&p, end, ':') ||
	    number(&p, end, 16, UINT64_MAX, gen) || expect(&p, end, ':'))
		return -EINVAL;
	*id = (uint32_t)v;
	return 0;
}

void nsa_logmark_key(uint16_t channel_slot, char *buf, size_t len)
{
	char chan[NS_CHANNEL_MAX];

	/* "ns:c:{N}" -> "ns:l:{N}:c": 'c' is no hex digit, so no writer's
	 * segment has this name. */
	ns_channel_for_slot(channel_slot, chan);
	snprintf(buf, len, NS_SEGMENT_PREFIX "%s:c", chan + 5);
}

static int cover_cmp(const struct nsa_logmark_cover *a, uint32_t tag,
		     uint32_t publisher)
{
	if (a->tag != tag)
		return a->tag < tag ? -1 : 1;
	if (a->publisher != publisher)
		return a->publisher < publisher ? -1 : 1;
	return 0;
}

/* The HMAC of text[0, len) under key, in hex (65 bytes with the NUL). */
static int mark_mac(const char *key, size_t key_len, const char *text,
		    size_t len, char hex[2 * NS_BATCH_MAC_LEN + 1])
{
	uint8_t mac[NS_BATCH_MAC_LEN];

	if (ns_batch_mac((const uint8_t *)key, key_len, (const uint8_t *)text,
			 len, mac) != 0)
		return -EINVAL;
	for (int i = 0; i < NS_BATCH_MAC_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	return 0;
}

int nsa_logmark_format(const struct nsa_logmark *mk, const char *key,
		       size_t key_len, char *buf, size_t len)
{
	char hex[2 * NS_BATCH_MAC_LEN + 1];
	size_t n;
	int w;

	if (mk->n_covers > NSA_LOGMARK_COVERS)
		return -EINVAL;
	w = snprintf(buf, len,
		     MARK_MAGIC "%08" PRIx32 " %" PRIx64 " %" PRIu32 " %" PRIu32
				" %" PRIu32,
		     mk->id, mk->gen, mk->parts, mk->grace_ms, mk->n_covers);
	if (w < 0 || (size_t)w >= len)
		return -EINVAL;
	n = (size_t)w;
	for (uint32_t i = 0; i < mk->n_covers; i++) {
		const struct nsa_logmark_cover *c = &mk->cover[i];

		if (i > 0 &&
		    cover_cmp(&mk->cover[i - 1], c->tag, c->publisher) >= 0)
			return -EINVAL;
		w = snprintf(buf + n, len - n,
			     " %" PRIu32 ":%08" PRIx32 ":%" PRIx64, c->tag,
			     c->publisher, c->seq);
		if (w < 0 || (size_t)w >= len - n)
			return -EINVAL;
		n += (size_t)w;
	}
	if (key_len == 0)
		return (int)n;
	if (mark_mac(key, key_len, buf, n, hex) != 0)
		return -EINVAL;
	w = snprintf(buf + n, len - n, MARK_MAC "%s", hex);
	if (w < 0 || (size_t)w >= len - n)
		return -EINVAL;
	return (int)(n + (size_t)w);
}

/* The fields and covers of text[0, len) (the HMAC taken off). */
static int mark_fields(const char *p, const char *end, struct nsa_logmark *mk)
{
	uint64_t id, parts, grace, n, tag, pub;

	if (end - p < (ptrdiff_t)strlen(MARK_MAGIC) ||
	    memcmp(p, MARK_MAGIC, strlen(MARK_MAGIC)) != 0)
		return -EINVAL;
	p += strlen(MARK_MAGIC);
	if (number(&p, end, 16, UINT32_MAX, &id) || expect(&p, end, ' ') ||
	    number(&p, end, 16, UINT64_MAX, &mk->gen) || expect(&p, end, ' ') ||
	    number(&p, end, 10, UINT32_MAX, &parts) || expect(&p, end, ' ') ||
	    number(&p, end, 10, UINT32_MAX, &grace) || expect(&p, end, ' ') ||
	    number(&p, end, 10, NSA_LOGMARK_COVERS, &n))
		return -EINVAL;
	mk->id = (uint32_t)id;
	mk->parts = (uint32_t)parts;
	mk->grace_ms = (uint32_t)grace;
	for (mk->n_covers = 0; mk->n_covers < n; mk->n_covers++) {
		struct nsa_logmark_cover *c = &mk->cover[mk->n_covers];

		if (expect(&p, end, ' ') ||
		    number(&p, end, 10, UINT32_MAX, &tag) ||
		    expect(&p, end, ':') ||
		    number(&p, end, 16, UINT32_MAX, &pub) ||
		    expect(&p, end, ':') ||
		    number(&p, end, 16, UINT64_MAX, &c->seq))
			return -EINVAL;
		c->tag = (uint32_t)tag;
		c->publisher = (uint32_t)pub;
		if (mk->n_covers > 0 &&
		    cover_cmp(c - 1, c->tag, c->publisher) >= 0)
			return -EINVAL;
	}
	return p == end ? 0 : -EINVAL;
}

/* Constant-time comparison of n bytes: 0 when equal. */
static int mac_differs(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d != 0;
}

int nsa_logmark_parse_signed(const char *v, size_t len, const char *key,
			     size_t key_len, struct nsa_logmark *mk)
{
	const size_t tail = strlen(MARK_MAC) + 2 * NS_BATCH_MAC_LEN;
	char hex[2 * NS_BATCH_MAC_LEN + 1];
	size_t body = len;
	int signed_ = len > tail &&
		      memcmp(v + len - tail, MARK_MAC, strlen(MARK_MAC)) == 0;
	int rc;

	memset(mk, 0, sizeof(*mk));
	if (signed_)
		body = len - tail;
	rc = mark_fields(v, v + body, mk);
	if (rc == 0 && key_len > 0 &&
	    (!signed_ || mark_mac(key, key_len, v, body, hex) != 0 ||
	     mac_differs(hex, v + body + strlen(MARK_MAC),
			 2 * NS_BATCH_MAC_LEN)))
		rc = -EACCES;
	if (rc != 0) {
		memset(mk, 0, sizeof(*mk));
		return rc;
	}
	mk->set = 1;
	return 0;
}

int nsa_logmark_parse(const char *v, size_t len, struct nsa_logmark *mk)
{
	return nsa_logmark_parse_signed(v, len, NULL, 0, mk);
}

int nsa_logmark_same(const struct nsa_logmark *a, const struct nsa_logmark *b)
{
	return a->set == b->set && a->id == b->id && a->gen == b->gen &&
	       a->parts == b->parts && a->grace_ms == b->grace_ms &&
	       a->n_covers == b->n_covers &&
	       memcmp(a->cover, b->cover, a->n_covers * sizeof(a->cover[0])) ==
		       0;
}

int nsa_logmark_newer(const struct nsa_logmark *a, const struct nsa_logmark *b)
{
	if (!a->set)
		return 0;
	return !b->set || a->gen > b->gen ||
	       (a->gen == b->gen && a->id > b->id);
}

uint64_t nsa_logmark_covered(const struct nsa_logmark *mk, uint32_t tag,
			     uint32_t publisher)
{
	size_t lo = 0, hi = mk->set ? mk->n_covers : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cover_cmp(&mk->cover[mid], tag, publisher);

		if (c == 0)
			return mk->cover[mid].seq;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int nsa_logmark_takes(const struct nsa_logmark *mk, const char *k, size_t klen,
		      const uint8_t *v, size_t vlen)
{
	uint32_t tag, publisher, id;
	uint64_t seq, gen;

	(void)v;
	(void)vlen;
	switch (nsa_logkey_kind(k, klen)) {
	case NSA_LOGKEY_SEGMENT:
		/* Not a writer's name: merged, and refused there. */
		if (!mk->set ||
		    nsa_logkey_segment(k, klen, &tag, &publisher, &seq) != 0)
			return 1;
		return seq > nsa_logmark_covered(mk, tag, publisher);
	case NSA_LOGKEY_CHECKPOINT:
		if (!mk->set)
			return 1;
		return nsa_logkey_checkpoint(k, klen, &id, &gen) == 0 &&
		       id == mk->id && gen == mk->gen;
	default:
		return 0;
	}
}
