/*
 * test_table6.c - the session table's IPv6 sessions (NAT66, NAT64): they
 * are applied, ordered, deleted, resynchronised, walked and dumped as
 * IPv4 ones, found by their IPv6 inside tuple, cost the documented bytes
 * per position, and are refused and counted without an IPv6 table. A
 * reader never sees a torn second line.
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

static struct nsdp_table *table;

static void table_up(void)
{
	cr_assert_eq(nst_eal_init(512), 0, "EAL init");
	table = nsdp_table_create("t6", 1024);
	cr_assert_not_null(table);
	cr_assert_eq(nsdp_table_add_v6(table, 1024), 0);
}

static void table_down(void)
{
	nsdp_table_free(table);
}

TestSuite(table6, .init = table_up, .fini = table_down);

/* Flow i: NAT66 when i is even, NAT64 (64:ff9b::/96) when odd, from
 * 2001:db8::i to a destination whose last byte is i % 251. */
static struct ns_rec flow6(uint32_t i, uint8_t event, uint64_t ts)
{
	struct ns_rec r;

	memset(&r, 0, sizeof(r));
	r.s = nst_session(6, event, 1, 1, 30000, ts);
	r.s.orig.sport = (uint16_t)(1024 + i % 60000);
	r.s.orig.dport = 443;
	r.s.xlat.sport = (uint16_t)(2048 + i % 60000);
	r.s.xlat.dport = 443;
	r.v6.orig_saddr[0] = 0x20;
	r.v6.orig_saddr[1] = 0x01;
	r.v6.orig_saddr[2] = 0x0d;
	r.v6.orig_saddr[3] = 0xb8;
	r.v6.orig_saddr[12] = (uint8_t)(i >> 24);
	r.v6.orig_saddr[13] = (uint8_t)(i >> 16);
	r.v6.orig_saddr[14] = (uint8_t)(i >> 8);
	r.v6.orig_saddr[15] = (uint8_t)i;
	if (i % 2 == 0) {
		r.s.family = NS_FAMILY_NAT66;
		r.v6.orig_daddr[0] = 0x26;
		r.v6.orig_daddr[15] = (uint8_t)(i % 251);
		memcpy(r.v6.xlat_daddr, r.v6.orig_daddr, 16);
		r.v6.xlat_saddr[0] = 0x20;
		r.v6.xlat_saddr[15] = 7;
		return r;
	}
	r.s.family = NS_FAMILY_NAT64;
	r.s.xlat.saddr = 0xc6336407u; /* 198.51.100.7 */
	r.s.xlat.daddr = 0x5db8d800u | (i % 251);
	r.v6.orig_daddr[1] = 0x64;
	r.v6.orig_daddr[2] = 0xff;
	r.v6.orig_daddr[3] = 0x9b;
	r.v6.orig_daddr[12] = 0x5d;
	r.v6.orig_daddr[13] = 0xb8;
	r.v6.orig_daddr[14] = 0xd8;
	r.v6.orig_daddr[15] = (uint8_t)(i % 251);
	r.v6.prefix_len = 96;
	return r;
}

static int lookup6(const struct ns_rec *r, struct ns_rec *out)
{
	return nsdp_table_lookup_v6(table, r->s.proto, r->v6.orig_saddr,
				    r->s.orig.sport, r->v6.orig_daddr,
				    r->s.orig.dport, out);
}

static uint16_t slot6(const struct ns_rec *r)
{
	uint8_t key[NS_KEY_MAX];
	size_t len = ns_key_of(&r->s, key);

	return ns_key_slot(key, len);
}

Test(table6, both_families_apply_and_read_back_whole)
{
	struct ns_rec a = flow6(2, NS_EV_CREATE, 10), b = flow6(3, 1, 10), out;
	struct nsdp_table_stats st;

	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	cr_assert_eq(nsdp_table_apply(table, &b.s), 0);
	cr_assert_eq(lookup6(&a, &out), 0);
	cr_assert_arr_eq(&out, &a, sizeof(out));
	cr_assert_eq(lookup6(&b, &out), 0);
	cr_assert_arr_eq(&out, &b, sizeof(out));
	nsdp_table_stats(table, &st);
	cr_assert_eq(st.live, 2);
	cr_assert_eq(st.live_v6, 2);
	cr_assert_eq(st.applied, 2);
	cr_assert_eq(nsdp_table_applied(table), 2);
}

Test(table6, flows_that_differ_only_in_an_ipv6_address_are_two_entries)
{
	struct ns_rec a = flow6(2, NS_EV_CREATE, 10), b = a, out;

	b.v6.orig_saddr[8] = 0x80; /* same ports, same everything else */
	b.s.timeout_ms = 7;
	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	cr_assert_eq(nsdp_table_apply(table, &b.s), 0);
	cr_assert_eq(lookup6(&a, &out), 0);
	cr_assert_eq(out.s.timeout_ms, 30000);
	cr_assert_eq(lookup6(&b, &out), 0);
	cr_assert_eq(out.s.timeout_ms, 7);
	b.v6.orig_daddr[9] = 1;
	cr_assert_eq(lookup6(&b, &out), -ENOENT);
}

Test(table6, ordering_deletes_and_tombstones_as_for_ipv4)
{
	struct ns_rec a = flow6(4, NS_EV_CREATE, 100), old, del, out;

	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	old = a;
	old.s.timestamp_ns = 50;
	old.s.event = NS_EV_REFRESH;
	old.v6.xlat_saddr[15] = 9;
	cr_assert_eq(nsdp_table_apply(table, &old.s), 0);
	cr_assert_eq(lookup6(&a, &out), 0);
	cr_assert_arr_eq(&out, &a, sizeof(out), "an older record won");
	/* a newer one changes the translated IPv6 address */
	a.s.timestamp_ns = 200;
	a.s.event = NS_EV_REFRESH;
	a.v6.xlat_saddr[15] = 9;
	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	cr_assert_eq(lookup6(&a, &out), 0);
	cr_assert_eq(out.v6.xlat_saddr[15], 9);
	del = a;
	del.s.event = NS_EV_DELETE;
	del.s.timestamp_ns = 300;
	cr_assert_eq(nsdp_table_apply(table, &del.s), 0);
	cr_assert_eq(lookup6(&a, &out), -ENOENT);
	/* the tombstone holds off an older create */
	a.s.event = NS_EV_CREATE;
	a.s.timestamp_ns = 250;
	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	cr_assert_eq(lookup6(&a, &out), -ENOENT);
	cr_assert_eq(nsdp_table_purge_tombstones(table), 1);
	/* a STORE record applies over whatever is there */
	a.s.timestamp_ns = 1;
	cr_assert_eq(nsdp_table_apply_store(table, &a.s), 0);
	cr_assert_eq(lookup6(&a, &out), 0);
}

Test(table6, resync_covers_both_families_with_one_generation)
{
	struct ns_rec a = flow6(6, 1, 100), b = flow6(7, 1, 100), store_a, out;
	struct ns_session v4 = nst_session(6, NS_EV_CREATE, 1, 1, 30000, 100);
	static uint8_t scope[NS_SLOTS];
	int32_t pos;
	uint64_t gen;

	nst_session_flow(&v4, 6);
	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	cr_assert_eq(nsdp_table_apply(table, &b.s), 0);
	cr_assert_eq(nsdp_table_apply(table, &v4), 0);
	memset(scope, 1, sizeof(scope));
	gen = nsdp_table_resync_begin(table);
	cr_assert_eq(gen, nsdp_table_generation(table));
	cr_assert_eq(gen, 3, "one generation per change, both families");
	/* a changes live after the resync began: the store's a is older */
	a.s.event = NS_EV_REFRESH;
	a.s.timestamp_ns = 200;
	a.s.timeout_ms = 111;
	cr_assert_eq(nsdp_table_apply(table, &a.s), 0);
	cr_assert_eq(nsdp_table_generation(table), 4);
	store_a = a;
	store_a.s.timestamp_ns = 250;
	store_a.s.timeout_ms = 999;
	cr_assert_eq(nsdp_table_apply_resync(table, &store_a.s, gen, 5), 0);
	/* the IPv4 session is in the store, b is not */
	cr_assert_eq(nsdp_table_apply_resync(table, &v4, gen, 5), 0);
	cr_assert_eq(nsdp_table_resync_finish(table, gen, 5, scope), 1);
	cr_assert_eq(lookup6(&a, &out), 0);
	cr_assert_eq(out.s.timeout_ms, 111);
	cr_assert_eq(lookup6(&b, &out), -ENOENT);
	cr_assert_eq(nsdp_table_apply_pos(table, &a.s, &pos), -EAFNOSUPPORT);
	(void)slot6;
}

static void count_families(const struct ns_session *s, void *arg)
{
	unsigned int *n = arg;

	n[s->family == NS_FAMILY_IPV4	 ? 0
	  : s->family == NS_FAMILY_NAT66 ? 1
					 : 2]++;
}

Test(table6, walk_and_dump_give_every_family_as_wire_records)
{
	const char *path = nst_build("tests/run/table6_dump.bin");
	unsigned int n[3] = {0}, read_n[3] = {0};
	uint8_t buf[NS_RECORD_MAX_LEN * 600];
	size_t len, off = 0;
	uint32_t i;
	FILE *f;

	nst_sh("mkdir -p %s", nst_build("tests/run"));
	for (i = 0; i < 300; i++) {
		struct ns_rec r = flow6(i, NS_EV_CREATE, 10 + i);
		struct ns_session v4 =
			nst_session(17, NS_EV_CREATE, 1, 1, 1000, 10 + i);

		nst_session_flow(&v4, i);
		cr_assert_eq(nsdp_table_apply(table, &r.s), 0);
		if (i < 200)
			cr_assert_eq(nsdp_table_apply(table, &v4), 0);
	}
	for (i = 0; i < 30; i++) {
		struct ns_rec r = flow6(i, NS_EV_DELETE, 5000);

		cr_assert_eq(nsdp_table_apply(table, &r.s), 0);
	}
	cr_assert_eq(nsdp_table_walk(table, count_families, n), 470);
	cr_assert_eq(n[0], 200);
	cr_assert_eq(n[1], 135);
	cr_assert_eq(n[2], 135);
	cr_assert_eq(nsdp_table_dump(table, path), 470);
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	cr_assert_eq(len, 200 * 48 + 135 * 96 + 135 * 76);
	while (off < len) {
		struct ns_rec r, out;
		int used = ns_record_decode_rec(buf + off, len - off, &r);

		cr_assert_gt(used, 0);
		count_families(&r.s, read_n);
		if (r.s.family != NS_FAMILY_IPV4) {
			cr_assert_eq(lookup6(&r, &out), 0);
			cr_assert_arr_eq(&out, &r, sizeof(out));
		}
		off += (size_t)used;
	}
	cr_assert_arr_eq(read_n, n, sizeof(n));
}

Test(table6, an_ipv6_position_costs_148_bytes)
{
	const uint32_t cap = 100000;
	struct nsdp_table *t = nsdp_table_create("t6_mem", 64);
	struct nsdp_table_stats st;

	cr_assert_not_null(t);
	cr_assert_eq(nsdp_table_add_v6(t, cap), 0);
	cr_assert_eq(nsdp_table_add_v6(t, cap), -EEXIST);
	nsdp_table_stats(t, &st);
	cr_assert_eq(st.capacity_v6, cap);
	printf("IPv6 table: %.2f B per position at capacity %u\n",
	       (double)st.memory_bytes_v6 / cap, cap);
	/* 64 + 64 for the two lines, 2 x 64 B buckets of 8 ways per 10/8
	 * positions... rounded up to whole buckets, plus the heap's own */
	cr_assert_geq(st.memory_bytes_v6, 148ull * cap);
	cr_assert_leq(st.memory_bytes_v6, 149ull * cap);
	nsdp_table_free(t);
}

Test(table6, without_an_ipv6_table_ipv6_is_refused_and_counted)
{
	struct nsdp_table *t = nsdp_table_create("t6_none", 64);
	struct ns_rec a = flow6(1, NS_EV_CREATE, 1), out;
	struct nsdp_table_stats st;

	cr_assert_eq(nsdp_table_apply(t, &a.s), -EAFNOSUPPORT);
	cr_assert_eq(nsdp_table_apply_resync(t, &a.s, 0, 1), -EAFNOSUPPORT);
	nsdp_table_stats(t, &st);
	cr_assert_eq(st.full_drops, 2);
	cr_assert_eq(st.live, 0);
	cr_assert_eq(nsdp_table_lookup_v6(t, 6, a.v6.orig_saddr, 1,
					  a.v6.orig_daddr, 1, &out),
		     -ENOENT);
	nsdp_table_free(t);
}

Test(table6, full_ipv6_table_returns_enospc)
{
	struct nsdp_table *t = nsdp_table_create("t6_full", 64);
	struct nsdp_table_stats st;
	uint32_t i;

	cr_assert_eq(nsdp_table_add_v6(t, 32), 0);
	for (i = 0; i < 32; i++) {
		struct ns_rec r = flow6(i, NS_EV_CREATE, 1);

		cr_assert_eq(nsdp_table_apply(t, &r.s), 0, "entry %u", i);
	}
	{
		struct ns_rec r = flow6(99, NS_EV_CREATE, 1);

		cr_assert_eq(nsdp_table_apply(t, &r.s), -ENOSPC);
	}
	nsdp_table_stats(t, &st);
	cr_assert_eq(st.full_drops, 1);
	cr_assert_eq(st.live_v6, 32);
	nsdp_table_free(t);
}

struct reader6 {
	const struct nsdp_table *t;
	struct ns_rec key;
	volatile int stop;
	uint64_t reads, torn;
};

/* Every version the writer stores has all 64 bytes of xlat_saddr and
 * xlat_daddr equal to the low byte of its timeout: a mix is torn. */
static void *reader6(void *p)
{
	struct reader6 *a = p;
	struct ns_rec out;

	while (!a->stop) {
		if (nsdp_table_lookup_v6(a->t, 6, a->key.v6.orig_saddr,
					 a->key.s.orig.sport,
					 a->key.v6.orig_daddr,
					 a->key.s.orig.dport, &out) != 0)
			continue;
		const uint8_t *xlat = (const uint8_t *)&out.v6 + 32;

		for (int i = 0; i < 32; i++)
			if (xlat[i] != (uint8_t)out.s.timeout_ms) {
				a->torn++;
				break;
			}
		a->reads++;
	}
	return NULL;
}

Test(table6, concurrent_reader_never_sees_a_torn_second_line)
{
	struct reader6 a = {.t = table, .key = flow6(8, NS_EV_CREATE, 1)};
	pthread_t th;
	uint64_t i;

	a.key.s.timeout_ms = 1;
	memset((uint8_t *)&a.key.v6 + 32, 1, 32);
	cr_assert_eq(nsdp_table_apply(table, &a.key.s), 0);
	cr_assert_eq(pthread_create(&th, NULL, reader6, &a), 0);
	for (i = 2; i < 200000; i++) {
		struct ns_rec s = a.key;

		s.s.event = NS_EV_REFRESH;
		s.s.timestamp_ns = i;
		s.s.timeout_ms = (uint32_t)i;
		memset((uint8_t *)&s.v6 + 32, (int)(i & 0xff), 32);
		cr_assert_eq(nsdp_table_apply(table, &s.s), 0);
	}
	a.stop = 1;
	pthread_join(th, NULL);
	cr_assert_gt(a.reads, 0);
	cr_assert_eq(a.torn, 0, "%lu torn of %lu reads", (unsigned long)a.torn,
		     (unsigned long)a.reads);
}
