/*
 * test_logmerge.c - the log layout's merge (agent/nsa_logmerge.h) on real
 * batches built as writers build them: records of slots a load does not
 * keep stay out (the cross-master merge after resharding), and with a
 * batch key only segments signed with it count.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_logmerge.h"
#include "nsdp_time.h"
#include "nst_session.h"

#define FLOWS 1000
#define KEY "0123456789abcdef0123456789abcdef"

/* Flows [first, first + n) as one segment (version 2, signed with key when
 * key is not NULL); its length. */
static size_t segment(uint8_t *buf, uint32_t first, uint32_t n, uint64_t now_ns,
		      const char *key, uint8_t version)
{
	struct ns_batch_hdr h = {.publisher_id = 7,
				 .count = (uint16_t)n,
				 .flags = key ? NS_BATCH_F_HMAC : 0,
				 .version = version,
				 .seq = 1,
				 .sent_ns = now_ns};
	size_t len = ns_batch_hdr_len(version);

	for (uint32_t i = first; i < first + n; i++) {
		struct ns_session s =
			nst_session(6, NS_EV_CREATE, 1, 1, 60000, now_ns + i);
		int w;

		nst_session_flow(&s, i);
		w = ns_record_encode(&s, buf + len, NS_BATCH_MAX_LEN - len);
		cr_assert_gt(w, 0);
		len += (size_t)w;
	}
	h.body_len = (uint32_t)(len - ns_batch_hdr_len(version));
	ns_batch_hdr_encode(&h, buf);
	if (key) {
		cr_assert_eq(ns_batch_mac((const uint8_t *)key, strlen(key),
					  buf, len, buf + len),
			     0);
		len += NS_BATCH_MAC_LEN;
	}
	return len;
}

static unsigned int count(void *arg, const struct ns_session *s, unsigned int n)
{
	(void)arg;
	(void)s;
	return n;
}

static uint8_t buf[NS_BATCH_MAX_LEN];

Test(logmerge, only_the_kept_slots_are_merged)
{
	static uint64_t keep[NS_SLOTS / 64];
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;
	unsigned int want = 0;
	size_t len = segment(buf, 0, FLOWS, now, NULL, 0);

	/* The first half of the slots, as a master that serves 0-8191. */
	for (uint32_t s = 0; s < NS_SLOTS / 2; s++)
		keep[s / 64] |= 1ull << (s % 64);
	for (uint32_t i = 0; i < FLOWS; i++) {
		struct ns_session s =
			nst_session(6, NS_EV_CREATE, 1, 1, 60000, now + i);
		uint8_t k[NS_KEY_LEN];

		nst_session_flow(&s, i);
		ns_key_build(s.proto, &s.orig, k);
		want += ns_key_slot(k, NS_KEY_LEN) < NS_SLOTS / 2;
	}
	cr_assert(want > 0 && want < FLOWS, "want %u", want);
	cr_assert_eq(nsa_logmerge_init(&m), 0);
	m.keep_slots = keep;
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), 0);
	cr_assert_eq(m.records, want);
	cr_assert_eq(nsa_logmerge_emit(&m, now, count, NULL), want);
	nsa_logmerge_free(&m);

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), 0);
	cr_assert_eq(nsa_logmerge_emit(&m, now, count, NULL), FLOWS);
	nsa_logmerge_free(&m);
}

Test(logmerge, with_a_batch_key_only_signed_segments_count)
{
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;
	size_t len;

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	m.batch_key = KEY;
	m.batch_key_len = strlen(KEY);
	/* Unsigned, signed with another key, version 1: refused. */
	len = segment(buf, 0, 10, now, NULL, 0);
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), -EACCES);
	len = segment(buf, 0, 10, now, "another key", 0);
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), -EACCES);
	len = segment(buf, 0, 10, now, NULL, NS_BATCH_V1);
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), -EACCES);
	/* A signed segment with one byte of a record changed. */
	len = segment(buf, 0, 10, now, KEY, 0);
	buf[NS_BATCH_HDR_LEN + 20] ^= 1;
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), -EACCES);
	cr_assert_eq(m.records, 0);
	/* Signed: merged. */
	len = segment(buf, 0, 10, now, KEY, 0);
	cr_assert_eq(nsa_logmerge_segment(&m, buf, len), 0);
	cr_assert_eq(m.segments, 1);
	cr_assert_eq(nsa_logmerge_emit(&m, now, count, NULL), 10);
	nsa_logmerge_free(&m);
}
