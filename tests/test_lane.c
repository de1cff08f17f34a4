/*
 * test_lane.c - a lane is found by name, carries records intact and in
 * order, never blocks its producer, and counts what it had to drop.
 *
 * Runs EAL without hugepages; each test runs in its own process (Criterion
 * forks), so lane indexes may repeat between tests.
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <rte_errno.h>
#include <rte_memzone.h>

#include "nsdp_lane.h"
#include "nst_session.h"
#include "nst_store.h"
#include "nsdp_time.h"

static void eal_up(void)
{
	cr_assert_eq(nst_eal_init(256), 0, "EAL init failed");
}

TestSuite(lane, .init = eal_up);

static struct ns_session numbered(uint64_t seq)
{
	struct ns_session s = nst_session(6, NS_EV_CREATE + (uint8_t)(seq % 3),
					  7, 3, 30000, seq);

	nst_session_snat(&s, 0x0A000000u + (uint32_t)seq,
			 (uint16_t)(1024 + seq), 0xC6120001u, 443, 0xCB007101u,
			 (uint16_t)(1024 + seq));
	return s;
}

Test(lane, create_is_found_by_name)
{
	struct nsdp_lane *lane = nsdp_lane_create(3, 1024, SOCKET_ID_ANY);

	cr_assert_not_null(lane, "create: %s", rte_strerror(rte_errno));
	cr_assert_eq(lane->idx, 3);
	cr_assert_eq(nsdp_lane_lookup(3), lane);
	cr_assert_not_null(rte_memzone_lookup("natsync_lane_3"));
	cr_assert_eq(rte_ring_lookup("natsync_ring_3"), lane->ring);
	cr_assert_null(nsdp_lane_lookup(4));
	cr_assert_eq(lane->recorded, 0);
	cr_assert_eq(lane->dropped, 0);

	nsdp_lane_free(lane);
	cr_assert_null(nsdp_lane_lookup(3));
	cr_assert_null(rte_ring_lookup("natsync_ring_3"));
}

Test(lane, create_refuses_a_taken_index)
{
	struct nsdp_lane *lane = nsdp_lane_create(1, 64, SOCKET_ID_ANY);

	cr_assert_not_null(lane);
	cr_assert_null(nsdp_lane_create(1, 64, SOCKET_ID_ANY));
	cr_assert_eq(nsdp_lane_lookup(1), lane);
	nsdp_lane_free(lane);
	/* The index is free again once the lane is gone. */
	lane = nsdp_lane_create(1, 64, SOCKET_ID_ANY);
	cr_assert_not_null(lane);
	nsdp_lane_free(lane);
}

Test(lane, create_rejects_bad_sizes_and_indexes)
{
	cr_assert_null(nsdp_lane_create(0, 100, SOCKET_ID_ANY));
	cr_assert_eq(rte_errno, EINVAL);
	cr_assert_null(nsdp_lane_create(0, 0, SOCKET_ID_ANY));
	cr_assert_null(nsdp_lane_create(NSDP_MAX_LANES, 64, SOCKET_ID_ANY));
	cr_assert_null(nsdp_lane_lookup(0));
}

Test(lane, records_come_out_in_order_and_intact)
{
	struct nsdp_lane *lane = nsdp_lane_create(0, 256, SOCKET_ID_ANY);
	struct ns_session out[300];
	unsigned int i, n;

	cr_assert_not_null(lane);
	for (i = 0; i < 200; i++) {
		struct ns_session s = numbered(i);

		cr_assert_eq(nsdp_record(lane, &s), 0);
	}
	cr_assert_eq(lane->recorded, 200);
	n = nsdp_lane_drain(lane, out, 300);
	cr_assert_eq(n, 200);
	for (i = 0; i < n; i++) {
		struct ns_session want = numbered(i);

		cr_assert_eq(memcmp(&out[i], &want, sizeof(want)), 0,
			     "record %u differs", i);
	}
	cr_assert_eq(nsdp_lane_drain(lane, out, 300), 0);
	nsdp_lane_free(lane);
}

Test(lane, full_ring_drops_and_counts)
{
	struct nsdp_lane *lane = nsdp_lane_create(0, 64, SOCKET_ID_ANY);
	struct ns_session out[128];
	unsigned int i, ok = 0, refused = 0;

	cr_assert_not_null(lane);
	for (i = 0; i < 100; i++) {
		struct ns_session s = numbered(i);
		int rc = nsdp_record(lane, &s);

		if (rc == 0)
			ok++;
		else if (rc == -ENOBUFS)
			refused++;
		else
			cr_assert_fail("unexpected rc %d", rc);
	}
	cr_assert_eq(ok, 64, "the ring holds exactly ring_size records");
	cr_assert_eq(refused, 36);
	cr_assert_eq(lane->recorded, 64);
	cr_assert_eq(lane->dropped, 36);
	/* The ones kept are the first 64; the late ones were dropped. */
	cr_assert_eq(nsdp_lane_drain(lane, out, 128), 64);
	for (i = 0; i < 64; i++)
		cr_assert_eq(out[i].timestamp_ns, i);
	nsdp_lane_free(lane);
}

Test(lane, burst_counts_partial_acceptance)
{
	struct nsdp_lane *lane = nsdp_lane_create(0, 64, SOCKET_ID_ANY);
	struct ns_session in[40], out[128];
	unsigned int i;

	cr_assert_not_null(lane);
	for (i = 0; i < 40; i++)
		in[i] = numbered(i);
	cr_assert_eq(nsdp_record_burst(lane, in, 40), 40);
	cr_assert_eq(nsdp_record_burst(lane, in, 40), 24);
	cr_assert_eq(lane->recorded, 64);
	cr_assert_eq(lane->dropped, 16);
	cr_assert_eq(nsdp_record_burst(lane, in, 40), 0);
	cr_assert_eq(lane->dropped, 56);

	cr_assert_eq(nsdp_lane_drain(lane, out, 128), 64);
	for (i = 0; i < 64; i++)
		cr_assert_eq(out[i].timestamp_ns, i % 40);
	/* Space freed by the consumer is usable again. */
	cr_assert_eq(nsdp_record_burst(lane, in, 40), 40);
	cr_assert_eq(lane->recorded, 104);
	nsdp_lane_free(lane);
}

#define MOVE_COUNT 1000000u
#define MOVE_DEADLINE_S 40.0

/* One side of the transfer, on a thread of its own. */
struct mover {
	unsigned int idx;
	uint64_t count;
	int consume; /* 0: the producer, 1: the consumer */
	double deadline;
	/* Results, asserted on by the main thread. */
	uint64_t moved;
	uint64_t first_bad; /* index of the first out-of-order record */
	int failed;
	int timed_out;
};

/* Nothing to move this round: 1 (and timed_out) once the deadline has
 * passed, else 0 after giving the CPU to the other thread, which may
 * share it. */
static int mover_idle(struct mover *m)
{
	if (nsdp_now_s() > m->deadline) {
		m->timed_out = 1;
		return 1;
	}
	sched_yield();
	return 0;
}

static void produce(struct mover *m, struct nsdp_lane *lane)
{
	struct ns_session burst[64];
	uint64_t seq = 0;

	while (seq < m->count) {
		/* Only the consumer frees space, so a burst no larger than the
		 * free space goes in whole: a real fast path would not wait,
		 * but this test is about loss and order. */
		unsigned int room = rte_ring_free_count(lane->ring), n, i;

		if (room == 0) {
			if (mover_idle(m))
				return;
			continue;
		}
		n = RTE_MIN(room, 64u);
		if (n > m->count - seq)
			n = (unsigned int)(m->count - seq);
		for (i = 0; i < n; i++)
			burst[i] = numbered(seq + i);
		if (nsdp_record_burst(lane, burst, n) != n) {
			m->failed = 1;
			return;
		}
		seq += n;
		m->moved = seq;
	}
}

static void consume(struct mover *m, struct nsdp_lane *lane)
{
	struct ns_session out[256];
	uint64_t expect = 0;

	while (expect < m->count) {
		unsigned int n = nsdp_lane_drain(lane, out, 256), i;

		if (n == 0) {
			if (mover_idle(m))
				break;
			continue;
		}
		for (i = 0; i < n; i++, expect++) {
			struct ns_session want = numbered(expect);

			if (m->first_bad == UINT64_MAX &&
			    memcmp(&out[i], &want, sizeof(want)) != 0)
				m->first_bad = expect;
		}
	}
	m->moved = expect;
}

static void *mover_main(void *arg)
{
	struct mover *m = arg;
	struct nsdp_lane *lane = nsdp_lane_lookup(m->idx);

	m->first_bad = UINT64_MAX;
	m->deadline = nsdp_now_s() + MOVE_DEADLINE_S;
	if (lane == NULL)
		m->failed = 1;
	else if (m->consume)
		consume(m, lane);
	else
		produce(m, lane);
	return NULL;
}

Test(lane, producer_and_consumer_threads_move_a_million_records_in_order,
     .timeout = 60)
{
	struct nsdp_lane *lane = nsdp_lane_create(5, 1024, SOCKET_ID_ANY);
	struct mover prod = {.idx = 5, .count = MOVE_COUNT};
	struct mover cons = {.idx = 5, .count = MOVE_COUNT, .consume = 1};
	pthread_t pt, ct;

	cr_assert_not_null(lane);
	cr_assert_eq(pthread_create(&ct, NULL, mover_main, &cons), 0);
	cr_assert_eq(pthread_create(&pt, NULL, mover_main, &prod), 0);
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);

	cr_assert_not(prod.failed || cons.failed,
		      "lane lookup or record failed");
	cr_assert_not(prod.timed_out || cons.timed_out, "timed out");
	cr_assert_eq(prod.moved, MOVE_COUNT);
	cr_assert_eq(cons.moved, MOVE_COUNT);
	cr_assert_eq(cons.first_bad, UINT64_MAX,
		     "record %llu out of order or damaged",
		     (unsigned long long)cons.first_bad);
	cr_assert_eq(lane->recorded, MOVE_COUNT);
	cr_assert_eq(lane->dropped, 0);
	nsdp_lane_free(lane);
}

/* A NAT66 record numbered seq, both lines. */
static struct ns_rec numbered_v6(uint64_t seq)
{
	struct ns_rec r = {.s = numbered(seq)};

	r.s.family = NS_FAMILY_NAT66;
	r.s.orig.saddr = r.s.orig.daddr = 0;
	r.s.xlat.saddr = r.s.xlat.daddr = 0;
	memset(&r.v6, (int)(seq & 0xff), sizeof(r.v6));
	return r;
}

Test(lane, ipv6_records_are_two_lines_and_one_record)
{
	struct nsdp_lane *lane = nsdp_lane_create(2, 64, SOCKET_ID_ANY);
	struct ns_session out[128];
	unsigned int i, n, rec = 0, ok = 0;

	cr_assert_not_null(lane);
	/* v4, v6, v4, v6...: 21 pairs and 21 singles fill 63 of 64 slots, the
	 * next IPv6 record finds one slot and is refused whole */
	for (i = 0; i < 44; i++) {
		int rc;

		if (i % 2) {
			struct ns_rec r = numbered_v6(i);

			rc = nsdp_record_v6(lane, &r.s);
		} else {
			struct ns_session s = numbered(i);

			rc = nsdp_record(lane, &s);
		}
		ok += rc == 0;
	}
	cr_assert_eq(ok, 43);
	cr_assert_eq(lane->recorded, 43);
	cr_assert_eq(lane->dropped, 1);
	cr_assert_eq(rte_ring_count(lane->ring), 64);
	n = nsdp_lane_drain(lane, out, 128);
	cr_assert_eq(n, 64);
	cr_assert_eq(lane->drained, 43);
	for (i = 0; i < n; i += ns_session_lines(&out[i]), rec++) {
		cr_assert_eq(out[i].timestamp_ns, rec);
		if (rec % 2) {
			struct ns_rec want = numbered_v6(rec);

			cr_assert_arr_eq(&out[i], &want, sizeof(want));
		}
	}
	cr_assert_eq(rec, 43);
	nsdp_lane_free(lane);
}

Test(lane, a_drain_never_ends_between_the_lines_of_a_record)
{
	struct nsdp_lane *lane = nsdp_lane_create(5, 256, SOCKET_ID_ANY);
	struct ns_session out[7];
	unsigned int i, n, lines = 0, rec = 0;

	cr_assert_not_null(lane);
	for (i = 0; i < 60; i++) {
		struct ns_rec r = numbered_v6(i);
		struct ns_session s = numbered(i);

		if (i % 3 == 0)
			cr_assert_eq(nsdp_record(lane, &s), 0);
		else
			cr_assert_eq(nsdp_record_v6(lane, &r.s), 0);
	}
	/* 7 lines at a time: a head at the end of a drain waits for the
	 * next one */
	while ((n = nsdp_lane_drain(lane, out, 7)) > 0) {
		cr_assert_leq(n, 7);
		for (i = 0; i < n; i += ns_session_lines(&out[i]), rec++) {
			cr_assert_eq(out[i].timestamp_ns, rec);
			cr_assert_eq(out[i].family, rec % 3 == 0
							    ? NS_FAMILY_IPV4
							    : NS_FAMILY_NAT66);
			cr_assert_leq(i + ns_session_lines(&out[i]), n);
		}
		lines += n;
	}
	cr_assert_eq(rec, 60);
	cr_assert_eq(lines, 20 + 40 * 2);
	cr_assert_eq(lane->drained, 60);
	nsdp_lane_free(lane);
}
