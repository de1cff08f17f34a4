/*
 * test_table.c - the standby's session table: live apply ordering,
 * tombstones, the reply-tuple index, resync rules, capacity, dumps, and
 * lock-free readers that never see a torn entry.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsdp_table.h"
#include "nst_session.h"
#include "nst_store.h"

static void eal_up(void)
{
	cr_assert_eq(nst_eal_init(512), 0, "EAL init");
}

TestSuite(table, .init = eal_up);

/* The table of the tests of one session or a few: room for 1024. */
static struct nsdp_table *table;

static void table_up(void)
{
	eal_up();
	table = nsdp_table_create("t_small", 1024);
	cr_assert_not_null(table);
}

static void table_down(void)
{
	nsdp_table_free(table);
}

/* s, now a refresh at timestamp ts to timeout_ms, applied to table. */
static void apply_refresh(struct ns_session *s, uint64_t ts,
			  uint32_t timeout_ms)
{
	s->event = NS_EV_REFRESH;
	s->timestamp_ns = ts;
	s->timeout_ms = timeout_ms;
	cr_assert_eq(nsdp_table_apply(table, s), 0);
}

static struct ns_session sess(uint32_t i, uint8_t event, uint64_t ts)
{
	struct ns_session s = nst_session(6, event, 1, 1, 30000, ts);

	nst_session_flow(&s, i);
	return s;
}

static struct ns_tuple reply_of(const struct ns_session *s)
{
	struct ns_tuple r = {.saddr = s->xlat.daddr,
			     .daddr = s->xlat.saddr,
			     .sport = s->xlat.dport,
			     .dport = s->xlat.sport};
	return r;
}

static uint16_t slot_of(const struct ns_session *s)
{
	uint8_t key[NS_KEY_LEN];

	ns_key_build(s->proto, &s->orig, key);
	return ns_key_slot(key, NS_KEY_LEN);
}

/* s, now as event at timestamp ts, applied to t. */
static void apply_event(struct nsdp_table *t, struct ns_session *s,
			uint8_t event, uint64_t ts)
{
	s->event = event;
	s->timestamp_ns = ts;
	cr_assert_eq(nsdp_table_apply(t, s), 0);
}

Test(table, apply_create_refresh_delete, .init = table_up, .fini = table_down)
{
	struct ns_session s = sess(1, NS_EV_CREATE, 100), out;
	struct nsdp_table_stats st;

	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);
	cr_assert(ns_session_equal_state(&s, &out));

	apply_refresh(&s, 200, 7000);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);
	cr_assert_eq(out.timeout_ms, 7000);

	apply_event(table, &s, NS_EV_DELETE, 300);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), -ENOENT);
	nsdp_table_stats(table, &st);
	cr_assert_eq(st.live, 0);
	cr_assert_eq(st.tombstones, 1);
	cr_assert_eq(st.applied, 3);
	cr_assert_gt(st.memory_bytes, 0);
}

Test(table, stale_record_is_ignored, .init = table_up, .fini = table_down)
{
	struct ns_session s = sess(2, NS_EV_CREATE, 200), old, out;
	struct nsdp_table_stats st;

	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	old = s;
	apply_refresh(&old, 100, 1);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);
	cr_assert_eq(out.timeout_ms, 30000, "older record must not win");

	/* A higher epoch wins whatever its timestamp. */
	old.epoch = 2;
	cr_assert_eq(nsdp_table_apply(table, &old), 0);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);
	cr_assert_eq(out.timeout_ms, 1);
	nsdp_table_stats(table, &st);
	cr_assert_eq(st.stale_ignored, 1);
}

Test(table, tombstone_blocks_older_create, .init = table_up, .fini = table_down)
{
	struct ns_session s = sess(3, NS_EV_CREATE, 100), out;
	struct ns_session u = sess(4, NS_EV_DELETE, 500);
	struct nsdp_table_stats st;

	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	apply_event(table, &s, NS_EV_DELETE, 200);
	apply_event(table, &s, NS_EV_CREATE, 150);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), -ENOENT);

	/* A delete that arrives before its session's create. */
	cr_assert_eq(nsdp_table_apply(table, &u), 0);
	apply_event(table, &u, NS_EV_CREATE, 400);
	cr_assert_eq(nsdp_table_lookup(table, 6, &u.orig, &out), -ENOENT);

	/* A newer create reopens the flow. */
	s.timestamp_ns = 300;
	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);

	cr_assert_eq(nsdp_table_purge_tombstones(table), 1);
	nsdp_table_stats(table, &st);
	cr_assert_eq(st.tombstones, 0);
	cr_assert_eq(st.live, 1);
}

/* What the store holds after a refused write wins over the refused write,
 * however newer: a delete's tombstone, or a refresh. */
Test(table, store_record_applies_over_newer_entries, .init = table_up,
     .fini = table_down)
{
	struct ns_session s = sess(5, NS_EV_CREATE, 100), d, out;
	struct nsdp_table_stats st;

	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	d = s;
	apply_event(table, &d, NS_EV_DELETE, 200);
	cr_assert_eq(nsdp_table_apply_store(table, &s), 0);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);
	cr_assert(ns_session_equal_state(&out, &s));

	apply_refresh(&d, 300, 1);
	cr_assert_eq(nsdp_table_apply_store(table, &s), 0);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), 0);
	cr_assert_eq(out.timeout_ms, s.timeout_ms);
	nsdp_table_stats(table, &st);
	cr_assert_eq(st.stale_ignored, 0);
	cr_assert_eq(st.live, 1);
}

Test(table, tombstones_survive_a_running_resync, .init = table_up,
     .fini = table_down)
{
	struct ns_session s = sess(5, NS_EV_DELETE, 500), out;
	uint8_t scope[NS_SLOTS] = {0};
	uint64_t gen = nsdp_table_resync_begin(table);

	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	cr_assert_eq(nsdp_table_purge_tombstones(table), 0, "resync running");
	/* The store still had the session when the resync read it. */
	s.event = NS_EV_CREATE;
	s.timestamp_ns = 100;
	cr_assert_eq(nsdp_table_apply_resync(table, &s, gen, 1), 0);
	cr_assert_eq(nsdp_table_lookup(table, 6, &s.orig, &out), -ENOENT);
	nsdp_table_resync_finish(table, gen, 1, scope);
	cr_assert_eq(nsdp_table_purge_tombstones(table), 0, "finish purged it");
}

/* The standby purges in slices (nsdp_table_purge_slice): each call sweeps
 * its share of the positions, from where the last one ended, so that a
 * purge never holds the subscriber for the whole table (6-9 ms a second
 * at 250 000 positions, when it purged all at once). */
Test(table, tombstones_go_in_slices_of_the_table, .init = table_up,
     .fini = table_down)
{
	struct nsdp_table_stats st;
	struct ns_session s;
	uint32_t i;

	/* 400 positions, one in two a tombstone: 50 in each quarter */
	for (i = 0; i < 400; i++) {
		s = sess(100 + i, NS_EV_CREATE, 100);
		cr_assert_eq(nsdp_table_apply(table, &s), 0);
	}
	for (i = 0; i < 400; i += 2) {
		s = sess(100 + i, NS_EV_CREATE, 100);
		apply_event(table, &s, NS_EV_DELETE, 200);
	}
	for (i = 0; i < 4; i++)
		cr_assert_eq(nsdp_table_purge_slice(table, 4), 50, "slice %u",
			     i);
	nsdp_table_stats(table, &st);
	cr_assert_eq(st.tombstones, 0);
	cr_assert_eq(st.live, 200);
	cr_assert_eq(nsdp_table_purge_slice(table, 4), 0);

	/* the sweep goes on where it ended, around the end of the table */
	for (i = 1; i < 400; i += 100) {
		s = sess(100 + i, NS_EV_CREATE, 100);
		apply_event(table, &s, NS_EV_DELETE, 300);
	}
	cr_assert_eq(nsdp_table_purge_slice(table, 2), 2);
	cr_assert_eq(nsdp_table_purge_slice(table, 2), 2);
	(void)nsdp_table_resync_begin(table);
	s = sess(101, NS_EV_CREATE, 400);
	apply_event(table, &s, NS_EV_DELETE, 500);
	cr_assert_eq(nsdp_table_purge_slice(table, 1), 0, "resync running");
	nsdp_table_resync_abort(table);
	cr_assert_eq(nsdp_table_purge_slice(table, 1), 1);
}

Test(table, reply_lookup_follows_xlat_change, .init = table_up,
     .fini = table_down)
{
	struct ns_session s = sess(6, NS_EV_CREATE, 100), out;
	struct ns_tuple r1 = reply_of(&s), r2;

	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	cr_assert_eq(nsdp_table_lookup_reply(table, 6, &r1, &out), 0);
	cr_assert(ns_session_same_flow(&s, &out));

	s.event = NS_EV_REFRESH;
	s.timestamp_ns = 200;
	s.xlat.sport = 4242;
	r2 = reply_of(&s);
	cr_assert_eq(nsdp_table_apply(table, &s), 0);
	cr_assert_eq(nsdp_table_lookup_reply(table, 6, &r1, &out), -ENOENT);
	cr_assert_eq(nsdp_table_lookup_reply(table, 6, &r2, &out), 0);
	cr_assert_eq(out.xlat.sport, 4242);
	cr_assert_eq(nsdp_table_lookup_reply(table, 17, &r2, &out), -ENOENT);

	apply_event(table, &s, NS_EV_DELETE, 300);
	cr_assert_eq(nsdp_table_lookup_reply(table, 6, &r2, &out), -ENOENT);
}

Test(table, resync_keeps_live_changes_and_removes_unseen_in_scope,
     .init = table_up, .fini = table_down)
{
	struct ns_session a = sess(10, NS_EV_CREATE, 100);
	struct ns_session b = sess(11, NS_EV_CREATE, 100);
	struct ns_session c = sess(12, NS_EV_CREATE, 100);
	struct ns_session d, store_a, out;
	static uint8_t scope[NS_SLOTS];
	uint32_t i = 13;
	uint64_t gen;

	do { /* d must live in a slot outside the scope */
		d = sess(i++, NS_EV_CREATE, 100);
	} while (slot_of(&d) == slot_of(&a) || slot_of(&d) == slot_of(&b) ||
		 slot_of(&d) == slot_of(&c));
	memset(scope, 0, sizeof(scope));
	scope[slot_of(&a)] = scope[slot_of(&b)] = scope[slot_of(&c)] = 1;

	cr_assert_eq(nsdp_table_apply(table, &a), 0);
	cr_assert_eq(nsdp_table_apply(table, &b), 0);
	cr_assert_eq(nsdp_table_apply(table, &c), 0);
	cr_assert_eq(nsdp_table_apply(table, &d), 0);

	gen = nsdp_table_resync_begin(table);
	cr_assert_eq(gen, nsdp_table_generation(table));
	/* a changes live after the resync began... */
	apply_refresh(&a, 200, 111);
	/* ...so what the resync read for a must not overwrite it, even with
	 * a later timestamp. */
	store_a = a;
	store_a.timestamp_ns = 250;
	store_a.timeout_ms = 999;
	cr_assert_eq(nsdp_table_apply_resync(table, &store_a, gen, 7), 0);
	/* c is in the store; b is not (expired or deleted while missed). */
	c.timeout_ms = 555;
	c.timestamp_ns = 150;
	cr_assert_eq(nsdp_table_apply_resync(table, &c, gen, 7), 0);

	cr_assert_eq(nsdp_table_resync_finish(table, gen, 7, scope), 1);
	cr_assert_eq(nsdp_table_lookup(table, 6, &a.orig, &out), 0);
	cr_assert_eq(out.timeout_ms, 111);
	cr_assert_eq(nsdp_table_lookup(table, 6, &b.orig, &out), -ENOENT);
	cr_assert_eq(nsdp_table_lookup(table, 6, &c.orig, &out), 0);
	cr_assert_eq(out.timeout_ms, 555);
	cr_assert_eq(nsdp_table_lookup(table, 6, &d.orig, &out), 0,
		     "out of scope: untouched");
	cr_assert_eq(
		nsdp_table_lookup_reply(table, 6, &(struct ns_tuple){0}, &out),
		-ENOENT);
	{
		struct ns_tuple rb = reply_of(&b);

		cr_assert_eq(nsdp_table_lookup_reply(table, 6, &rb, &out),
			     -ENOENT);
	}
}

Test(table, full_table_returns_enospc_and_counts)
{
	struct nsdp_table *t = nsdp_table_create("t_full", 64);
	struct ns_session s;
	struct nsdp_table_stats st;
	uint32_t i;

	for (i = 0; i < 64; i++) {
		s = sess(100 + i, NS_EV_CREATE, 1);
		cr_assert_eq(nsdp_table_apply(t, &s), 0, "entry %u", i);
	}
	s = sess(500, NS_EV_CREATE, 1);
	cr_assert_eq(nsdp_table_apply(t, &s), -ENOSPC);
	nsdp_table_stats(t, &st);
	cr_assert_eq(st.full_drops, 1);
	cr_assert_eq(st.live, 64);

	/* Room comes back once a session is gone and purged. */
	s = sess(100, NS_EV_DELETE, 2);
	cr_assert_eq(nsdp_table_apply(t, &s), 0);
	cr_assert_eq(nsdp_table_purge_tombstones(t), 1);
	s = sess(500, NS_EV_CREATE, 1);
	cr_assert_eq(nsdp_table_apply(t, &s), 0);
	nsdp_table_free(t);
}

struct collect {
	struct ns_session *v;
	size_t n;
};

static void collect_one(const struct ns_session *s, void *arg)
{
	struct collect *c = arg;

	c->v[c->n++] = *s;
}

Test(table, dump_round_trip)
{
	struct nsdp_table *t = nsdp_table_create("t_dump", 4096);
	const char *path = nst_build("tests/run/table_dump.bin");
	struct collect col = {calloc(2000, sizeof(struct ns_session)), 0};
	struct ns_session s, out;
	uint8_t buf[NS_RECORD_MAX_LEN];
	int64_t n;
	uint32_t i, read_n = 0;
	FILE *f;

	nst_sh("mkdir -p %s", nst_build("tests/run"));
	for (i = 0; i < 1000; i++) {
		s = sess(i, NS_EV_CREATE, 10 + i);
		cr_assert_eq(nsdp_table_apply(t, &s), 0);
	}
	for (i = 0; i < 100; i++) {
		s = sess(i, NS_EV_DELETE, 5000);
		cr_assert_eq(nsdp_table_apply(t, &s), 0);
	}
	cr_assert_eq(nsdp_table_walk(t, collect_one, &col), 900);
	cr_assert_eq(col.n, 900);

	n = nsdp_table_dump(t, path);
	cr_assert_eq(n, 900);
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	while (fread(buf, 1, NS_RECORD_V1_IPV4_LEN, f) ==
	       NS_RECORD_V1_IPV4_LEN) {
		cr_assert_eq(ns_record_decode(buf, sizeof(buf), &s),
			     NS_RECORD_V1_IPV4_LEN);
		cr_assert_eq(nsdp_table_lookup(t, s.proto, &s.orig, &out), 0);
		cr_assert(ns_session_equal_state(&s, &out));
		read_n++;
	}
	fclose(f);
	cr_assert_eq(read_n, 900);
	free(col.v);
	nsdp_table_free(t);
}

Test(table, costs_at_most_128_bytes_per_session)
{
	const uint32_t cap = 1000000;
	struct nsdp_table *t = nsdp_table_create("t_mem", cap);
	struct nsdp_table_stats st;

	cr_assert_not_null(t);
	cr_assert_geq(nsdp_table_positions(t), cap);
	nsdp_table_stats(t, &st);
	printf("table memory: %.1f B/session at capacity %u\n",
	       (double)st.memory_bytes / cap, cap);
	cr_assert_gt(st.memory_bytes, 64ull * cap, "less than the entries?");
	cr_assert_leq(st.memory_bytes, 128ull * cap);
	nsdp_table_free(t);
}

static int finds_both_ways(const struct nsdp_table *t,
			   const struct ns_session *s, int32_t *pos)
{
	struct ns_tuple r = reply_of(s);
	struct ns_session out;
	int32_t p2;

	*pos = nsdp_table_find(t, s->proto, &s->orig, &out);
	if (*pos < 0 || !ns_session_equal_state(s, &out))
		return 0;
	p2 = nsdp_table_find_reply(t, s->proto, &r, &out);
	return p2 == *pos && ns_session_equal_state(s, &out);
}

Test(table, full_table_finds_every_session_by_both_keys_through_churn)
{
	const uint32_t cap = 20000;
	struct nsdp_table *t = nsdp_table_create("t_fill", cap);
	uint32_t *id = calloc(cap, sizeof(*id));
	uint8_t *seen = calloc(cap, 1);
	struct ns_session s, out;
	struct nsdp_table_stats st;
	uint32_t i, round;
	int32_t pos;

	cr_assert_not_null(t);
	cr_assert(id && seen);
	for (i = 0; i < cap; i++) {
		id[i] = i;
		s = sess(id[i], NS_EV_CREATE, 10);
		cr_assert_eq(nsdp_table_apply(t, &s), 0, "entry %u", i);
	}
	/* Each round: the table is full and every session is found by both
	 * keys at its own position; half of them go, the other half must
	 * still be found, and new flows fill the table again. */
	for (round = 1; round <= 3; round++) {
		nsdp_table_stats(t, &st);
		cr_assert_eq(st.live, cap);
		s = sess(10000000, NS_EV_CREATE, 10);
		cr_assert_eq(nsdp_table_apply(t, &s), -ENOSPC);
		memset(seen, 0, cap);
		for (i = 0; i < cap; i++) {
			s = sess(id[i], NS_EV_CREATE, 10);
			cr_assert(finds_both_ways(t, &s, &pos),
				  "round %u: session %u lost", round, id[i]);
			cr_assert(pos >= 0 &&
				  (uint32_t)pos < nsdp_table_positions(t));
			cr_assert_eq(seen[pos], 0, "position %d twice", pos);
			seen[pos] = 1;
		}
		for (i = round % 2; i < cap; i += 2) {
			s = sess(id[i], NS_EV_CREATE, 10);
			cr_assert_eq(nsdp_table_remove(t, 6, &s.orig), 0);
		}
		for (i = 0; i < cap; i++) {
			s = sess(id[i], NS_EV_CREATE, 10);
			if (i % 2 == round % 2)
				cr_assert_eq(
					nsdp_table_lookup(t, 6, &s.orig, &out),
					-ENOENT);
			else
				cr_assert(finds_both_ways(t, &s, &pos),
					  "after removals: session %u lost",
					  id[i]);
		}
		for (i = round % 2; i < cap; i += 2) {
			id[i] = round * 1000000 + i;
			s = sess(id[i], NS_EV_CREATE, 10);
			cr_assert_eq(nsdp_table_apply(t, &s), 0);
		}
	}
	free(seen);
	free(id);
	nsdp_table_free(t);
}

Test(table, freed_positions_are_reused_last)
{
	struct nsdp_table *t = nsdp_table_create("t_reuse", 8);
	struct ns_session s;
	int32_t pos, first;
	uint32_t i;

	s = sess(1, NS_EV_CREATE, 1);
	cr_assert_eq(nsdp_table_apply_pos(t, &s, &first), 0);
	cr_assert_eq(nsdp_table_remove(t, 6, &s.orig), 0);
	/* Seven positions never used come first, then the freed one. */
	for (i = 2; i < 9; i++) {
		s = sess(i, NS_EV_CREATE, 1);
		cr_assert_eq(nsdp_table_apply_pos(t, &s, &pos), 0);
		cr_assert_neq(pos, first, "session %u", i);
	}
	s = sess(9, NS_EV_CREATE, 1);
	cr_assert_eq(nsdp_table_apply_pos(t, &s, &pos), 0);
	cr_assert_eq(pos, first);
	nsdp_table_free(t);
}

Test(table, reply_lookup_finds_the_survivor_of_two_sessions_sharing_a_reply)
{
	struct nsdp_table *t = nsdp_table_create("t_dup", 64);
	struct ns_session a = sess(20, NS_EV_CREATE, 100);
	struct ns_session b = sess(21, NS_EV_CREATE, 200), out;
	struct ns_tuple r;

	/* b took a's outside port before a's delete arrived. */
	b.xlat = a.xlat;
	r = reply_of(&a);
	cr_assert_eq(nsdp_table_apply(t, &a), 0);
	cr_assert_eq(nsdp_table_apply(t, &b), 0);
	cr_assert_eq(nsdp_table_lookup_reply(t, 6, &r, &out), 0);
	cr_assert(ns_session_same_flow(&out, &a) ||
		  ns_session_same_flow(&out, &b));
	apply_event(t, &a, NS_EV_DELETE, 300);
	cr_assert_eq(nsdp_table_lookup_reply(t, 6, &r, &out), 0);
	cr_assert(ns_session_same_flow(&out, &b));
	apply_event(t, &b, NS_EV_DELETE, 300);
	cr_assert_eq(nsdp_table_lookup_reply(t, 6, &r, &out), -ENOENT);
	nsdp_table_free(t);
}

struct reader_arg {
	const struct nsdp_table *t;
	struct ns_session key;
	volatile int stop;
	uint64_t reads, torn;
};

/* The writer keeps timeout_ms, xlat.sport and the timestamp in step: a
 * reader that saw half an update would see them disagree. */
static void *reader(void *p)
{
	struct reader_arg *a = p;
	struct ns_session out;

	while (!a->stop) {
		if (nsdp_table_lookup(a->t, 6, &a->key.orig, &out) != 0)
			continue;
		a->reads++;
		if (out.timeout_ms != (uint32_t)out.timestamp_ns ||
		    out.xlat.sport != (uint16_t)out.timestamp_ns ||
		    !ns_session_same_flow(&out, &a->key))
			a->torn++;
	}
	return NULL;
}

Test(table, concurrent_reader_never_sees_a_torn_entry)
{
	struct nsdp_table *t = nsdp_table_create("t_conc", 4096);
	struct reader_arg a = {.t = t, .key = sess(7, NS_EV_CREATE, 1)};
	struct ns_session s;
	pthread_t th;
	uint64_t i;

	a.key.timeout_ms = 1;
	a.key.xlat.sport = 1;
	cr_assert_eq(nsdp_table_apply(t, &a.key), 0);
	cr_assert_eq(pthread_create(&th, NULL, reader, &a), 0);
	for (i = 2; i < 400000; i++) {
		s = a.key;
		s.event = NS_EV_REFRESH;
		s.timestamp_ns = i;
		s.timeout_ms = (uint32_t)i;
		s.xlat.sport = (uint16_t)i;
		cr_assert_eq(nsdp_table_apply(t, &s), 0);
		/* churn other flows so that positions get reused */
		s = sess(1000 + (uint32_t)(i % 512), NS_EV_CREATE, i);
		nsdp_table_apply(t, &s);
		if (i % 1024 == 0) {
			uint32_t j;

			for (j = 0; j < 512; j++) {
				s = sess(1000 + j, NS_EV_DELETE, i + 1);
				nsdp_table_apply(t, &s);
			}
			nsdp_table_purge_tombstones(t);
		}
	}
	a.stop = 1;
	pthread_join(th, NULL);
	cr_assert_gt(a.reads, 0);
	cr_assert_eq(a.torn, 0, "%lu torn of %lu reads", (unsigned long)a.torn,
		     (unsigned long)a.reads);
	nsdp_table_free(t);
}

struct steady_arg {
	const struct nsdp_table *t;
	uint32_t n;
	volatile int stop;
	uint64_t reads, misses;
};

static void *steady_reader(void *p)
{
	struct steady_arg *a = p;
	struct ns_session s, out;
	uint32_t i = 0;

	while (!a->stop) {
		struct ns_tuple r;

		s = sess(i, NS_EV_CREATE, 1);
		r = reply_of(&s);
		if (nsdp_table_lookup(a->t, 6, &s.orig, &out) != 0 ||
		    nsdp_table_lookup_reply(a->t, 6, &r, &out) != 0)
			a->misses++;
		a->reads++;
		i = i + 1 < a->n ? i + 1 : 0;
	}
	return NULL;
}

Test(table, concurrent_reader_never_misses_a_session_that_stays)
{
	const uint32_t cap = 4096, steady = 1024, churn = 2800;
	struct nsdp_table *t = nsdp_table_create("t_steady", cap);
	struct steady_arg a = {.t = t, .n = steady};
	struct ns_session s;
	pthread_t th;
	uint32_t i, round;

	/* Other flows first, so that many steady ones live past their home
	 * bucket; then those flows come and go around them, near full
	 * capacity, while a reader looks the steady ones up. */
	for (i = 0; i < churn; i++) {
		s = sess(100000 + i, NS_EV_CREATE, 1);
		cr_assert_eq(nsdp_table_apply(t, &s), 0);
	}
	for (i = 0; i < steady; i++) {
		s = sess(i, NS_EV_CREATE, 1);
		cr_assert_eq(nsdp_table_apply(t, &s), 0);
	}
	cr_assert_eq(pthread_create(&th, NULL, steady_reader, &a), 0);
	for (round = 0; round < 300; round++) {
		for (i = 0; i < churn; i++) {
			s = sess(100000 + (round % 7) * churn + i, NS_EV_CREATE,
				 1);
			cr_assert_eq(nsdp_table_remove(t, 6, &s.orig), 0);
		}
		for (i = 0; i < churn; i++) {
			s = sess(100000 + ((round + 1) % 7) * churn + i,
				 NS_EV_CREATE, 1);
			cr_assert_eq(nsdp_table_apply(t, &s), 0);
		}
	}
	a.stop = 1;
	pthread_join(th, NULL);
	cr_assert_gt(a.reads, 0);
	cr_assert_eq(a.misses, 0, "%lu misses of %lu reads",
		     (unsigned long)a.misses, (unsigned long)a.reads);
	nsdp_table_free(t);
}
