/*
 * test_slot_keyslot.c - ns_key_slot() and ns_channel_for_slot() agree with
 * a real Redis Cluster node's CLUSTER KEYSLOT: natsync's binary session
 * keys, arbitrary printable keys, keys full of hash-tag braces, and the
 * notification channels. A client that computed slots differently from
 * the servers would see every command redirected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "nst_store.h"
#include "ns_slot.h"

#define PORT 7100
/* CLUSTER KEYSLOT is computed by whichever node answers, so the number of
 * masters does not matter; 3 because deploy/redis-cluster.sh cannot yet
 * create a one-master cluster (redis-cli --cluster create wants two nodes
 * or more). */
#define MASTERS 3

static redisContext *rc;

static void store_down(void);

static void store_up(void)
{
	struct timeval tv = {5, 0};

	/* A restarted node keeps its nodes.conf and then refuses to join a
	 * new cluster, so every test starts from empty directories. */
	nst_store_stop(PORT);
	nst_sh("rm -rf '%s/%d'", nst_build("tests/run"), PORT);
	/* Criterion skips .fini when .init fails: clean up here first. */
	if (nst_store_start(PORT, MASTERS, 0) != 0) {
		nst_store_stop(PORT);
		cr_assert_fail("store did not start");
	}
	rc = redisConnectWithTimeout("127.0.0.1", PORT, tv);
	if (!rc || rc->err) {
		const char *why = rc ? rc->errstr : "out of memory";

		fprintf(stderr, "connect to %d: %s\n", PORT, why);
		store_down();
		cr_assert_fail("cannot connect to the store");
	}
}

static void store_down(void)
{
	if (rc)
		redisFree(rc);
	rc = NULL;
	nst_store_stop(PORT);
}

TestSuite(slot_keyslot, .init = store_up, .fini = store_down);

/* The server's slot for a binary key. */
static long long server_slot(const void *key, size_t len)
{
	const char *argv[] = {"CLUSTER", "KEYSLOT", key};
	size_t argvlen[] = {7, 7, len};
	redisReply *r;
	long long slot;

	r = redisCommandArgv(rc, 3, argv, argvlen);
	cr_assert_not_null(r, "CLUSTER KEYSLOT: %s", rc->errstr);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "reply type %d: %s", r->type,
		     r->type == REDIS_REPLY_ERROR ? r->str : "");
	slot = r->integer;
	freeReplyObject(r);
	return slot;
}

static uint32_t rnd_state = 20240601;

/* xorshift32: reproducible across runs, so a failure can be replayed. */
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static void check_key(const void *key, size_t len, const char *kind)
{
	long long want = server_slot(key, len);
	uint16_t got = ns_key_slot(key, len);

	cr_assert_eq(got, want, "%s key of %zu bytes: ns %u, server %lld", kind,
		     len, got, want);
}

Test(slot_keyslot, session_keys_match_cluster_keyslot)
{
	for (int i = 0; i < 2000; i++) {
		struct ns_tuple t = {rnd(), rnd(), (uint16_t)rnd(),
				     (uint16_t)rnd()};
		uint8_t key[NS_KEY_LEN];

		/* Every fourth key carries braces in its address bytes, so
		 * binary keys with hash tags are exercised too. */
		if (i % 4 == 0)
			t.saddr = (t.saddr & 0xff00ffffu) | (uint32_t)'{' << 16;
		if (i % 8 == 0)
			t.daddr = (t.daddr & 0xffffff00u) | '}';
		ns_key_build((uint8_t)(i % 3 == 0 ? 6 : 17), &t, key);
		check_key(key, sizeof(key), "session");
	}
}

Test(slot_keyslot, printable_keys_match_cluster_keyslot)
{
	char key[64];

	for (int i = 0; i < 2000; i++) {
		size_t len = 1 + rnd() % 40;

		for (size_t j = 0; j < len; j++)
			key[j] = (char)(' ' + rnd() % 95);
		check_key(key, len, "printable");
	}
}

Test(slot_keyslot, keys_with_braces_match_cluster_keyslot)
{
	static const char alphabet[] = "{}{}{}ab";
	char key[32];

	for (int i = 0; i < 2000; i++) {
		size_t len = rnd() % 16;

		for (size_t j = 0; j < len; j++)
			key[j] = alphabet[rnd() % (sizeof(alphabet) - 1)];
		check_key(key, len, "braces");
	}
}

Test(slot_keyslot, channels_land_in_their_slot)
{
	char ch[NS_CHANNEL_MAX];

	for (uint32_t i = 0; i < 2000; i++) {
		/* Spread over the whole range, both ends included. */
		uint16_t slot = (uint16_t)(i * (NS_SLOTS - 1) / 1999);
		int n = ns_channel_for_slot(slot, ch);

		cr_assert_gt(n, 0);
		cr_assert_eq(server_slot(ch, (size_t)n), slot, "%s", ch);
	}
}
