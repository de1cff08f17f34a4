/*
 * test_logmerge.c - the log layout's merge (agent/log/nsa_logmerge.h) on real
 * batches built as writers build them: records of slots a load does not
 * keep stay out (the cross-master merge after resharding), and with a
 * batch key only segments signed with it count; compaction's mark
 * leaves out the checkpoints it does not name and the segments it covers,
 * and counts only signed with the batch key when there is one.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "ns_batch.h"
#include "compact/nsa_compact_plan.h"
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

/* The mark as stored reads back whole; a reader under it takes the marked
 * round's checkpoint parts and the segments of each family above its
 * cover, decided by the key alone, and nothing else; with no mark, every
 * checkpoint and segment. */
Test(logmerge, the_mark_selects_its_checkpoint_and_the_segments_above_it)
{
	static struct nsa_logmark mk = {
		.set = 1,
		.id = 0xabcdef00u,
		.gen = 0x1f,
		.parts = 3,
		.grace_ms = 5000,
		.n_covers = 2,
		.cover = {{10, 0xabcd, 5}, {11, 0xabcd, 7}}};
	static const struct nsa_logmark none = {0};
	static struct nsa_logmark back;
	char v[NSA_LOGMARK_MAX], key[NS_SEGMENT_KEY_MAX];
	int len = nsa_logmark_format(&mk, NULL, 0, v, sizeof(v));

	cr_assert_str_eq(v, "natsync-mark 2 abcdef00 1f 3 5000 2 "
			    "10:0000abcd:5 11:0000abcd:7");
	cr_assert_eq(nsa_logmark_parse(v, (size_t)len, &back), 0);
	cr_assert(nsa_logmark_same(&back, &mk));
	cr_assert_eq(back.set, 1);
	cr_assert_eq(back.grace_ms, 5000);
	cr_assert_eq(nsa_logmark_parse(v, (size_t)len - 2, &back), -EINVAL);
	cr_assert_eq(nsa_logmark_parse("natsync-mark 1 1 1 1 1 1 1", 26, &back),
		     -EINVAL);
	cr_assert_eq(back.set, 0);

	nsa_logmark_key(0, key, sizeof(key));
	cr_assert_eq(nsa_logkey_kind(key, strlen(key)), NSA_LOGKEY_MARK);
	cr_assert_eq(strncmp(key, "ns:l:{", 6), 0);
	cr_assert_eq(strcmp(key + strlen(key) - 3, "}:c"), 0);

#define TAKES(m, k) nsa_logmark_takes(m, k, strlen(k), NULL, 0)
	cr_assert_eq(TAKES(&mk, "ns:l:{10}:0000abcd:5"), 0);
	cr_assert_eq(TAKES(&mk, "ns:l:{10}:0000abcd:1"), 0);
	cr_assert_eq(TAKES(&mk, "ns:l:{10}:0000abcd:6"), 1);
	cr_assert_eq(TAKES(&mk, "ns:l:{11}:0000abcd:7"), 0);
	cr_assert_eq(TAKES(&mk, "ns:l:{11}:0000abcd:8"), 1);
	cr_assert_eq(TAKES(&mk, "ns:l:{12}:0000abcd:1"), 1);
	cr_assert_eq(TAKES(&mk, "ns:l:{10}:0000abce:1"), 1);
	cr_assert_eq(TAKES(&mk, "ns:l:{a}:k:abcdef00:1f:0"), 1);
	cr_assert_eq(TAKES(&mk, "ns:l:{a}:k:abcdef00:1f:2"), 1);
	cr_assert_eq(TAKES(&mk, "ns:l:{a}:k:abcdef00:1e:0"), 0);
	cr_assert_eq(TAKES(&mk, "ns:l:{a}:k:abcdef00:1f0:0"), 0);
	cr_assert_eq(TAKES(&mk, "ns:l:{a}:k:12345678:1f:0"), 0);
	cr_assert_eq(TAKES(&mk, "ns:l:{a}:c"), 0);
	cr_assert_eq(TAKES(&none, "ns:l:{10}:0000abcd:5"), 1);
	cr_assert_eq(TAKES(&none, "ns:l:{a}:k:12345678:1f:0"), 1);
	cr_assert_eq(TAKES(&none, "ns:l:{a}:c"), 0);
#undef TAKES
}

/* With a batch key a mark counts only with its HMAC: an unsigned one, one
 * signed with another key and one whose text was changed after signing
 * are refused (-EACCES); without a key a signed mark reads as well. Marks
 * order by gen, then id. */
Test(logmerge, a_mark_not_signed_with_the_batch_key_is_refused)
{
	static struct nsa_logmark mk = {.set = 1,
					.id = 7,
					.gen = 9,
					.parts = 1,
					.grace_ms = 100,
					.n_covers = 1,
					.cover = {{3560, 0x01020304, 99}}};
	static struct nsa_logmark back, older;
	char v[NSA_LOGMARK_MAX], plain[NSA_LOGMARK_MAX];
	int len = nsa_logmark_format(&mk, KEY, strlen(KEY), v, sizeof(v));
	int plen = nsa_logmark_format(&mk, NULL, 0, plain, sizeof(plain));

	cr_assert_gt(len, plen);
	cr_assert_eq(nsa_logmark_parse_signed(v, (size_t)len, KEY, strlen(KEY),
					      &back),
		     0);
	cr_assert(nsa_logmark_same(&back, &mk));
	cr_assert_eq(nsa_logmark_parse(v, (size_t)len, &back), 0);
	cr_assert_eq(nsa_logmark_parse_signed(plain, (size_t)plen, KEY,
					      strlen(KEY), &back),
		     -EACCES);
	cr_assert_eq(back.set, 0);
	cr_assert_eq(nsa_logmark_parse_signed(v, (size_t)len, "another key", 11,
					      &back),
		     -EACCES);
	v[plen - 1] = '8'; /* the cover's seq 99 -> 98 */
	cr_assert_eq(nsa_logmark_parse_signed(v, (size_t)len, KEY, strlen(KEY),
					      &back),
		     -EACCES);

	older = mk;
	older.gen = 8;
	older.id = 0xffffffffu;
	cr_assert(nsa_logmark_newer(&mk, &older));
	cr_assert(!nsa_logmark_newer(&older, &mk));
	older.gen = 9;
	cr_assert(nsa_logmark_newer(&older, &mk));
	older.set = 0;
	cr_assert(nsa_logmark_newer(&mk, &older));
	cr_assert(!nsa_logmark_newer(&older, &mk));
}

/* The newest record per session wins by (epoch, timestamp_ns), whatever the
 * order the records come in, across many growths of the merge's table;
 * deletes and expired records are left out at the end. Checked against a
 * plain array indexed by flow. */
#define MANY_FLOWS 200000
#define MANY_RECORDS 1000000

struct newest {
	struct ns_session s;
	int seen;
};

static unsigned int check_emitted(void *arg, const struct ns_session *s,
				  unsigned int n)
{
	struct newest *ref = arg;

	for (unsigned int i = 0; i < n; i++) {
		uint32_t flow = s[i].timeout_ms - 1000; /* see below */

		cr_assert_lt(flow, MANY_FLOWS);
		cr_assert_eq(ref[flow].seen, 1,
			     "flow %u emitted twice or "
			     "should not be",
			     flow);
		cr_assert_eq(memcmp(&ref[flow].s, &s[i], sizeof(s[i])), 0,
			     "flow %u: not the newest record", flow);
		ref[flow].seen = 2;
	}
	return n;
}

/* MANY_RECORDS records of MANY_FLOWS flows into a merge sized for expect
 * sessions (0: grown as it fills): the newest of each live flow comes
 * out, once. */
static void newest_wins(size_t expect)
{
	static struct newest ref[MANY_FLOWS];
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;
	uint64_t x = 88172645463325252ull, want = 0;

	memset(ref, 0, sizeof(ref));
	cr_assert_eq(nsa_logmerge_init(&m), 0);
	nsa_logmerge_expect(&m, expect);
	for (uint32_t i = 0; i < MANY_RECORDS; i++) {
		struct ns_session s;
		uint32_t flow;
		int newer;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		flow = (uint32_t)(x % MANY_FLOWS);
		/* Events out of order: timestamps and epochs drawn, not
		 * rising; a tenth are deletes, some already expired. The
		 * timeout names the flow (the emitted records carry it). */
		s = nst_session(
			6, (x >> 20) % 10 == 0 ? NS_EV_DELETE : NS_EV_REFRESH,
			1, (uint32_t)((x >> 24) % 3) + 1, 1000 + flow,
			(x >> 28) % 50 == 0 ? now - 10000000000ull
					    : now + ((x >> 32) % 1000000));
		nst_session_flow(&s, flow);
		newer = !ref[flow].seen || s.epoch > ref[flow].s.epoch ||
			(s.epoch == ref[flow].s.epoch &&
			 s.timestamp_ns >= ref[flow].s.timestamp_ns);
		if (newer) {
			ref[flow].s = s;
			ref[flow].seen = 1;
		}
		cr_assert_eq(nsa_logmerge_record(&m, &s), 0);
	}
	cr_assert_eq(m.records, MANY_RECORDS);
	for (uint32_t f = 0; f < MANY_FLOWS; f++) {
		if (ref[f].seen && !nsa_logmerge_live(&ref[f].s, now)) {
			ref[f].seen = 3; /* must not be emitted */
			continue;
		}
		want += ref[f].seen == 1;
	}
	cr_assert_gt(want, MANY_FLOWS / 2);
	cr_assert_eq(nsa_logmerge_emit(&m, now, check_emitted, ref), want);
	for (uint32_t f = 0; f < MANY_FLOWS; f++)
		cr_assert_neq(ref[f].seen, 1, "flow %u live but not emitted",
			      f);
	nsa_logmerge_free(&m);
}

Test(logmerge, the_newest_record_per_session_wins_in_any_order)
{
	newest_wins(0);
}

/* Told it may take a million, its pages faulted in by a thread of its own
 * once it holds 65 536: the same merge. */
Test(logmerge, a_merge_told_its_size_merges_the_same)
{
	newest_wins(1000000);
}

static unsigned int mark_flows(void *arg, const struct ns_session *s,
			       unsigned int n)
{
	uint8_t *seen = arg;

	for (unsigned int i = 0; i < n; i++) {
		uint32_t flow = s[i].timeout_ms - 1000;

		cr_assert_eq(seen[flow], 0, "flow %u emitted twice", flow);
		seen[flow] = 1;
	}
	return n;
}

/* Flows [first, last) created into m. */
static void create_flows(struct nsa_logmerge *m, uint32_t first, uint32_t last,
			 uint64_t now)
{
	for (uint32_t i = first; i < last; i++) {
		struct ns_session s =
			nst_session(6, NS_EV_CREATE, 1, 1, 1000 + i, now + i);

		nst_session_flow(&s, i);
		cr_assert_eq(nsa_logmerge_record(m, &s), 0);
	}
}

/* A merge told its size starts faulting blocks for it at 65 536
 * sessions, moves into them at its next growth once their index is
 * faulted in (here given 1 s), past them grows as any (the thread stopped
 * first: the entries move), and emits every session once. */
Test(logmerge, a_merge_told_its_size_moves_into_it_then_grows_past)
{
	enum { FLOWS_PAST = 400000 };
	static uint8_t seen[FLOWS_PAST];
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	nsa_logmerge_expect(&m, 262144);
	create_flows(&m, 0, 65535, now);
	cr_assert_null(m.prefault);
	create_flows(&m, 65535, 65536, now);
	cr_assert_not_null(m.prefault);
	cr_assert_eq(m.cap, (size_t)1 << 17);
	nsdp_sleep_ms(1000);
	create_flows(&m, 65536, 65537, now);
	cr_assert_eq(m.cap, (size_t)1 << 19, "not moved into its size");
	create_flows(&m, 65537, FLOWS_PAST, now);
	cr_assert_eq(m.cap, (size_t)1 << 20);
	cr_assert_null(m.prefault);
	cr_assert_eq(nsa_logmerge_emit(&m, now, mark_flows, seen), FLOWS_PAST);
	nsa_logmerge_free(&m);
}

/* A small load told a large size never starts the thread; one freed
 * while the thread runs stops it. */
Test(logmerge, a_small_merge_told_a_large_size_stays_small)
{
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	nsa_logmerge_expect(&m, 8000000);
	create_flows(&m, 0, 1000, now);
	cr_assert_null(m.prefault);
	cr_assert_eq(m.cap, 2048);
	cr_assert_lt(m.peak_bytes, 1u << 20);
	nsa_logmerge_free(&m);

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	nsa_logmerge_expect(&m, 8000000);
	create_flows(&m, 0, 65536, now);
	cr_assert_not_null(m.prefault);
	nsa_logmerge_free(&m);
	cr_assert_null(m.prefault);
}

/* A merge given max_bytes says -ENOBUFS instead of growing past it, and
 * its peak stays within it. */
Test(logmerge, a_merge_never_grows_past_its_budget)
{
	const size_t budget = 256 * 1024;
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;
	int rc = 0;
	uint32_t i;

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	m.max_bytes = budget;
	for (i = 0; i < 100000 && rc == 0; i++) {
		struct ns_session s =
			nst_session(6, NS_EV_CREATE, 1, 1, 60000, now);

		nst_session_flow(&s, i);
		rc = nsa_logmerge_record(&m, &s);
	}
	cr_assert_eq(rc, -ENOBUFS);
	cr_assert_leq(m.peak_bytes, budget);
	cr_assert_leq(nsa_logmerge_bytes(&m), budget);
	cr_assert_gt(m.used, 1000);
	nsa_logmerge_free(&m);
}

static unsigned int count_deletes(void *arg, const struct ns_session *s,
				  unsigned int n)
{
	unsigned int *deletes = arg;

	for (unsigned int i = 0; i < n; i++)
		*deletes += s[i].event == NS_EV_DELETE;
	return n;
}

/* What a round writes back: the live records and the deletes merged from
 * segments; a delete merged from a checkpoint only when asked to keep it
 * (a round that may not have listed every older record). */
Test(logmerge, a_checkpoint_keeps_the_deletes_of_segments_for_one_round)
{
	const uint64_t now = nsdp_realtime_ns();
	struct nsa_logmerge m;
	unsigned int deletes = 0;

	cr_assert_eq(nsa_logmerge_init(&m), 0);
	for (uint32_t i = 0; i < 30; i++) {
		struct ns_session s =
			nst_session(6, i < 10 ? NS_EV_CREATE : NS_EV_DELETE, 1,
				    1, 60000, now);

		nst_session_flow(&s, i);
		/* 10-19 deleted in a checkpoint, 20-29 in a segment. */
		m.from_checkpoint = i >= 10 && i < 20;
		cr_assert_eq(nsa_logmerge_record(&m, &s), 0);
	}
	cr_assert_eq(nsa_logmerge_emit(&m, now, count, NULL), 10);
	cr_assert_eq(nsa_logmerge_emit_checkpoint(&m, now, 1, count_deletes,
						  &deletes),
		     20);
	cr_assert_eq(deletes, 10);
	deletes = 0;
	cr_assert_eq(nsa_logmerge_emit_checkpoint(&m, now, 0, count_deletes,
						  &deletes),
		     30);
	cr_assert_eq(deletes, 20);
	nsa_logmerge_free(&m);
}

/* A round's plan (compact/nsa_compact_plan.h): per family, what lies
 * between the mark's cover and the sighting's highest seq is merged and
 * covered, holes included (never written, or lost); what the mark covers
 * already is expired again; above the sighting waits; a family whose slot
 * moves is held as the mark has it; the marked checkpoint is merged and
 * the others below the round's gen expired; a family with nothing left
 * leaves the mark. */
Test(logmerge, a_round_covers_up_to_its_sighting_and_holds_moving_slots)
{
	static const char *names[] = {
		"ns:l:{10}:0000000a:3", /* covered: expired again */
		"ns:l:{10}:0000000a:4", /* merged (5 is a hole) */
		"ns:l:{10}:0000000a:6", /* merged: the sighting saw 6 */
		"ns:l:{10}:0000000a:7", /* after the sighting: waits */
		"ns:l:{11}:0000000b:2", /* its slot moves: held */
		"ns:l:{10}:k:00000001:5:0", /* the marked checkpoint */
		"ns:l:{10}:k:00000002:4:0", /* another round's, older */
		"ns:l:{10}:c", /* a mark */
	};
	static const uint8_t want[] = {
		NSA_PLAN_EXPIRE,    NSA_PLAN_MERGE, NSA_PLAN_MERGE,
		NSA_PLAN_NONE,	    NSA_PLAN_NONE,  NSA_PLAN_MERGE_CP,
		NSA_PLAN_EXPIRE_CP, NSA_PLAN_NONE,
	};
	static struct nsa_logmark mk = {
		.set = 1,
		.id = 1,
		.gen = 5,
		.parts = 1,
		.n_covers = 3,
		.cover = {{10, 0xa, 3}, {11, 0xb, 1}, {12, 0xc, 9}}};
	static struct nsa_logmark done = {.set = 1, .id = 1, .gen = 6};
	static struct nsa_logmark_cover seen_hi[] = {{10, 0xa, 6},
						     {11, 0xb, 2}};
	static uint64_t unsettled[NS_SLOTS / 64];
	const struct nsa_compact_sighting seen = {.hi = seen_hi, .n = 2};
	struct nsa_compact_sighting listed = {0};
	struct nsa_compact_keys l = {0};
	char *k[8];
	size_t len[8];
	uint8_t plan[8];
	unsigned int held;
	uint16_t moving = nsa_compact_tag_slot(11);

	for (int i = 0; i < 8; i++) {
		k[i] = (char *)names[i];
		len[i] = strlen(names[i]);
	}
	l.k = k;
	l.len = len;
	l.plan = plan;
	l.n = 8;
	unsettled[moving / 64] |= 1ull << (moving % 64);
	cr_assert_eq(nsa_compact_sighting_of(&l, 1, &listed), 0);
	cr_assert_eq(listed.n, 2);
	cr_assert_eq(nsa_compact_sighting_hi(&listed, 10, 0xa), 7);
	cr_assert_eq(nsa_compact_plan(&l, 1, &mk, &seen, &listed, unsettled,
				      &done, &held),
		     0);
	cr_assert_eq(held, 1);
	/* {12} has nothing left: it leaves the mark. */
	cr_assert_eq(done.n_covers, 2);
	cr_assert_eq(nsa_logmark_covered(&done, 10, 0xa), 6);
	cr_assert_eq(nsa_logmark_covered(&done, 11, 0xb), 1);
	cr_assert_eq(nsa_logmark_covered(&done, 12, 0xc), 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(plan[i], want[i], "%s: plan %u, not %u", names[i],
			     plan[i], want[i]);
	nsa_compact_sighting_free(&listed);
}
