/*
 * test_klive.c - the kernel session source's live set (nsdp_klive.h): the
 * entries sent as live, and the sweep after a dump that finds the ones
 * that ended unseen. Checked against a plain array over random operations,
 * in a set small enough that its runs wrap round the end of its slots.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nsdp_klive.h"

/* Entry id as a key: distinct ids, distinct keys; every field varies. */
static struct nsdp_kern_key key_of(uint32_t id)
{
	struct nsdp_kern_key k = {0};

	k.orig.src = 0x0a000000u | (id >> 8);
	k.orig.dst = 0xc6336402u;
	k.orig.sport = (__u16)(10000 + (id & 0xff));
	k.orig.dport = (__u16)(id % 3 == 0 ? 53 : 443);
	k.reply.src = k.orig.dst;
	k.reply.dst = 0xcb007101u;
	k.reply.sport = k.orig.dport;
	k.reply.dport = (__u16)(1024 + id % 60000);
	k.zone = (__u16)(id % 5 == 0 ? 7 : 0);
	k.proto = id % 2 ? 6 : 17;
	return k;
}

/* The id key_of made key from (its fields say it back). */
static uint32_t id_of(const struct nsdp_kern_key *k)
{
	return (k->orig.src & 0xffffffu) << 8 |
	       (uint32_t)(k->orig.sport - 10000);
}

struct ended_log {
	uint8_t *ended; /* per id */
	uint64_t n;
};

static void note_ended(const struct nsdp_kern_key *key, void *arg)
{
	struct ended_log *log = arg;
	struct nsdp_kern_key again = key_of(id_of(key));

	cr_assert_eq(key->netns, 0);
	cr_assert_eq(memcmp(key, &again, sizeof(again)), 0,
		     "the sweep gave back a key that was never entered");
	log->ended[id_of(key)]++;
	log->n++;
}

Test(klive, holds_what_was_added_until_removed_across_growth)
{
	enum { N = 200000 };
	struct nsdp_klive *l = nsdp_klive_create(nsdp_klive_bound_for(N));
	struct nsdp_kern_key k;

	cr_assert_not_null(l);
	cr_assert_eq(nsdp_klive_bytes(l), 4096 * 80);
	for (uint32_t i = 0; i < N; i++) {
		k = key_of(i);
		cr_assert_eq(nsdp_klive_add(l, &k), 0, "entry %u", i);
	}
	cr_assert_eq(nsdp_klive_count(l), N);
	/* 200 000 entries, at most 3/4 full: 2^19 slots, 16 MiB. */
	cr_assert_eq(nsdp_klive_bytes(l), (size_t)(1 << 19) * 80);
	for (uint32_t i = 0; i < N; i += 2) {
		k = key_of(i);
		cr_assert_eq(nsdp_klive_remove(l, &k), 1, "entry %u", i);
	}
	for (uint32_t i = 0; i < N; i++) {
		k = key_of(i);
		cr_assert_eq(nsdp_klive_remove(l, &k), i % 2, "entry %u", i);
	}
	cr_assert_eq(nsdp_klive_count(l), 0);
	nsdp_klive_free(l);
}

Test(klive, a_sweep_deletes_exactly_what_the_dump_did_not_return)
{
	enum { N = 30000 };
	struct nsdp_klive *l = nsdp_klive_create(nsdp_klive_bound_for(N));
	struct ended_log log = {.ended = calloc(N, 1)};
	struct nsdp_kern_key k;

	for (uint32_t i = 0; i < 20000; i++) {
		k = key_of(i);
		nsdp_klive_add(l, &k);
	}
	/* The dump returns every third entry of those and 10 000 new ones. */
	nsdp_klive_begin(l);
	for (uint32_t i = 0; i < N; i++) {
		k = key_of(i);
		if (i >= 20000 || i % 3 == 0)
			cr_assert_eq(nsdp_klive_add(l, &k), i < 20000);
	}
	cr_assert_eq(nsdp_klive_sweep(l, note_ended, &log), 13333);
	cr_assert_eq(log.n, 13333);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(log.ended[i], i < 20000 && i % 3 != 0,
			     "entry %u ended %u times", i, log.ended[i]);
	cr_assert_eq(nsdp_klive_count(l), 6667 + 10000);
	/* A sweep right after another, with nothing dumped: all go. */
	nsdp_klive_begin(l);
	cr_assert_eq(nsdp_klive_sweep(l, note_ended, &log), 16667);
	cr_assert_eq(nsdp_klive_count(l), 0);
	free(log.ended);
	nsdp_klive_free(l);
}

Test(klive, a_full_set_refuses_and_takes_again_after_a_removal_or_a_new_bound)
{
	struct nsdp_klive *l = nsdp_klive_create(4096);
	struct nsdp_kern_key k;
	uint32_t i;

	for (i = 0; i < 3072; i++) {
		k = key_of(i);
		cr_assert_eq(nsdp_klive_add(l, &k), 0);
	}
	k = key_of(i);
	cr_assert_eq(nsdp_klive_add(l, &k), -ENOSPC);
	k = key_of(5);
	cr_assert_eq(nsdp_klive_add(l, &k), 1, "an entry it has is taken");
	cr_assert_eq(nsdp_klive_remove(l, &k), 1);
	k = key_of(i);
	cr_assert_eq(nsdp_klive_add(l, &k), 0);
	k = key_of(i + 1);
	cr_assert_eq(nsdp_klive_add(l, &k), -ENOSPC);
	nsdp_klive_set_bound(l, 8192);
	cr_assert_eq(nsdp_klive_add(l, &k), 0);
	cr_assert_eq(nsdp_klive_count(l), 3073);
	cr_assert_eq(nsdp_klive_bytes(l), 8192 * 80);
	nsdp_klive_free(l);
}

/* Random adds, removes and dumps over 6 000 ids in a set bounded to 8 192
 * slots (runs wrap round its end), against a plain array. */
Test(klive, random_operations_agree_with_a_plain_array)
{
	enum { IDS = 6000, ROUNDS = 400 };
	struct nsdp_klive *l = nsdp_klive_create(8192);
	static uint8_t in[IDS], dumped[IDS], ended[IDS];
	struct ended_log log = {.ended = ended};
	uint64_t count = 0;

	srand(22);
	for (int r = 0; r < ROUNDS; r++) {
		for (int op = 0; op < 2000; op++) {
			uint32_t id = (uint32_t)rand() % IDS;
			struct nsdp_kern_key k = key_of(id);

			if (rand() % 3) {
				cr_assert_eq(nsdp_klive_add(l, &k), in[id]);
				count += !in[id];
				in[id] = 1;
			} else {
				cr_assert_eq(nsdp_klive_remove(l, &k), in[id]);
				count -= in[id];
				in[id] = 0;
			}
		}
		cr_assert_eq(nsdp_klive_count(l), count);
		/* A dump that returns about half of the entries and a few
		 * new ones. */
		nsdp_klive_begin(l);
		memset(dumped, 0, sizeof(dumped));
		for (uint32_t id = 0; id < IDS; id++) {
			struct nsdp_kern_key k = key_of(id);

			if (rand() % 2 == 0 || (!in[id] && rand() % 8))
				continue;
			cr_assert_eq(nsdp_klive_add(l, &k), in[id]);
			count += !in[id];
			in[id] = dumped[id] = 1;
		}
		memset(ended, 0, sizeof(ended));
		log.n = 0;
		nsdp_klive_sweep(l, note_ended, &log);
		for (uint32_t id = 0; id < IDS; id++) {
			cr_assert_eq(ended[id], in[id] && !dumped[id],
				     "round %d id %u", r, id);
			if (ended[id])
				in[id] = 0;
		}
		count -= log.n;
		cr_assert_eq(nsdp_klive_count(l), count);
	}
	nsdp_klive_free(l);
}
