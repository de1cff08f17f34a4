/*
 * nsa_loader_keys.c - the loader's reader of the keys layout ([store]
 * layout = keys, schema/FORMAT.md): one key per session, "ns:" and the
 * session's tuple, its value the encoded record.
 *
 * Invariants:
 * - Only keys of natsync's length are read, and a value counts only when
 *   it decodes whole and its session builds the key it was stored under;
 *   the rest goes to the sink's bad counter.
 * - Sessions go to the sink as their values come, NSA_APPLY_CHUNK at a
 *   time, so that it can prefetch their table buckets.
 *
 * Not here: listing the keys and asking their values (nsa_loader_list.c,
 * nsa_loader_ask.c); the log layout's keys ("ns:l:...", left out).
 */
#include <string.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_loader_keys.h"

static int keys_key_wanted(const redisReply *k)
{
	if (nsa_loader_key_of_log(k))
		return 0;
	return (k->len == NS_KEY_LEN || k->len == NS_KEY_V6_LEN) &&
			       k->str[3] != 0
		       ? 1
		       : -1;
}

/* The session stored as v under key k (an IPv6 one with its second
 * line): 1, 0 when v is nil (expired since the key was listed), -1 when
 * it is not a valid session under that key. */
static int value_session(const redisReply *k, const redisReply *v,
			 struct ns_rec *r)
{
	uint8_t key[NS_KEY_MAX];

	if (v->type != REDIS_REPLY_STRING)
		return 0;
	if (ns_record_decode_rec((const uint8_t *)v->str, v->len, r) !=
	    (int)v->len)
		return -1;
	if (ns_key_of(&r->s, key) != k->len || memcmp(k->str, key, k->len) != 0)
		return -1;
	return 1;
}

static int keys_values(struct nsa_loader *ld, const redisReply *const *k,
		       redisReply *const *v, size_t n)
{
	struct ns_session ss[NSA_APPLY_CHUNK];
	struct ns_rec r;
	uint64_t bad = 0;
	unsigned int m;
	size_t i = 0;

	while (i < n) {
		for (m = 0; i < n && m < NSA_APPLY_CHUNK; i++) {
			int rc = value_session(k[i], v[i], &r);

			bad += rc < 0;
			if (rc <= 0)
				continue;
			if (ns_session_lines(&r.s) == 1)
				ss[m++] = r.s;
			else /* alone, its second line after it */
				ld->loaded += ld->sink.apply(ld->sink.arg,
							     ld->node, &r.s, 1);
		}
		if (m > 0)
			ld->loaded +=
				ld->sink.apply(ld->sink.arg, ld->node, ss, m);
	}
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
	return 0;
}

/* Every value was handed to the sink as it came. */
static int keys_finish(struct nsa_loader *ld)
{
	(void)ld;
	return NSA_LOADER_DONE;
}

const struct nsa_loader_layout nsa_loader_keys = {
	.scan_match = NS_KEY_PREFIX "*",
	.key_wanted = keys_key_wanted,
	.values = keys_values,
	.finish = keys_finish,
};
