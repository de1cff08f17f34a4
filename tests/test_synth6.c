/*
 * test_synth6.c - the synthetic source with IPv6 flows ([source] v6_pct):
 * the share of IPv6 flows is what was asked, every record is valid, the
 * lanes carry each IPv6 record as its two lines, and a table fed with what
 * the lanes carried equals the source's final table exactly, family by
 * family, whether the source waits on a full ring or drops.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ns_record.h"
#include "nsdp_lane.h"
#include "nsdp_synth.h"
#include "nsdp_table.h"
#include "nst_store.h"

#define WORKERS 2

static void eal_up(void)
{
	cr_assert_eq(nst_eal_init(512), 0, "EAL init failed");
}

TestSuite(synth6, .init = eal_up, .timeout = 120);

struct src {
	struct nsdp_lane *lanes[WORKERS];
	struct nsdp_synth *synth;
};

static struct nsdp_synth_conf conf_of(uint64_t events, uint64_t flows,
				      uint32_t v6_pct)
{
	struct nsdp_synth_conf c = {.flows = flows,
				    .events = events,
				    .seed = 42,
				    .refresh_pct = 70,
				    .gateway_id = 7,
				    .epoch = 1,
				    .timeout_ms = 30000,
				    .wait_when_full = 1,
				    .v6_pct = v6_pct};
	return c;
}

static void *worker(void *arg)
{
	struct src *s = arg;
	static unsigned int next;
	unsigned int w = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);

	nsdp_synth_run(s->synth, w % WORKERS);
	return NULL;
}

/* Run the source to its end into lanes of ring_size lines (big enough to
 * hold everything when waiting: nothing drains while it runs). */
static void src_run(struct src *s, const struct nsdp_synth_conf *conf,
		    unsigned int ring_size)
{
	pthread_t th[WORKERS];
	unsigned int w;

	for (w = 0; w < WORKERS; w++) {
		s->lanes[w] = nsdp_lane_create(w, ring_size, SOCKET_ID_ANY);
		cr_assert_not_null(s->lanes[w]);
	}
	s->synth = nsdp_synth_create(conf, s->lanes, WORKERS);
	cr_assert_not_null(s->synth);
	for (w = 0; w < WORKERS; w++)
		cr_assert_eq(pthread_create(&th[w], NULL, worker, s), 0);
	for (w = 0; w < WORKERS; w++)
		pthread_join(th[w], NULL);
}

static void src_close(struct src *s)
{
	nsdp_synth_free(s->synth);
	for (unsigned int w = 0; w < WORKERS; w++)
		nsdp_lane_free(s->lanes[w]);
}

/* Drain every lane into t (with an IPv6 table); count records by
 * family (IPv4, NAT66, NAT64), check each encodes. */
static void drain_into(struct src *s, struct nsdp_table *t, uint64_t fam[3])
{
	struct ns_session buf[256];
	uint8_t wire[NS_RECORD_MAX_LEN];

	for (unsigned int w = 0; w < WORKERS; w++) {
		unsigned int n, i;

		while ((n = nsdp_lane_drain(s->lanes[w], buf, 256)) > 0)
			for (i = 0; i < n; i += ns_session_lines(&buf[i])) {
				const struct ns_session *r = &buf[i];

				cr_assert_leq(i + ns_session_lines(r), n);
				cr_assert_gt(
					ns_record_encode(r, wire, sizeof(wire)),
					0, "an invalid record");
				fam[r->family == NS_FAMILY_IPV4	   ? 0
				    : r->family == NS_FAMILY_NAT66 ? 1
								   : 2]++;
				cr_assert_eq(nsdp_table_apply(t, r), 0);
			}
	}
}

struct cmp {
	const struct nsdp_table *t;
	uint64_t fam[3], same;
};

static void compare_one(const struct ns_session *s, void *arg)
{
	struct cmp *c = arg;
	struct ns_rec got;
	const struct ns_session_v6 *x = ns_session_v6_of(s);

	if (!ns_family_is_v6(s->family)) {
		c->fam[0]++;
		c->same += nsdp_table_lookup(c->t, s->proto, &s->orig,
					     &got.s) == 0 &&
			   ns_session_equal_state(&got.s, s);
		return;
	}
	c->fam[s->family == NS_FAMILY_NAT66 ? 1 : 2]++;
	c->same += nsdp_table_lookup_v6(c->t, s->proto, x->orig_saddr,
					s->orig.sport, x->orig_daddr,
					s->orig.dport, &got) == 0 &&
		   ns_session_equal_state(&got.s, s);
}

static void assert_table_is_the_final_table(struct src *s, struct nsdp_table *t)
{
	struct cmp c = {.t = t};
	struct nsdp_table_stats st;
	uint64_t live = nsdp_synth_final_table(s->synth, compare_one, &c);

	nsdp_table_stats(t, &st);
	cr_assert_eq(c.same, live, "%lu of %lu sessions equal",
		     (unsigned long)c.same, (unsigned long)live);
	cr_assert_eq(st.live, live);
	cr_assert_eq(st.live_v6, c.fam[1] + c.fam[2]);
}

Test(synth6, a_mixed_source_replays_exactly_into_a_table)
{
	struct nsdp_synth_conf conf = conf_of(20000, 4000, 40);
	struct nsdp_table *t = nsdp_table_create("s6", 8192);
	struct nsdp_synth_stats st;
	uint64_t fam[3] = {0}, lines = 0;
	struct src s;
	unsigned int w;

	cr_assert_eq(nsdp_table_add_v6(t, 8192), 0);
	src_run(&s, &conf, 65536);
	nsdp_synth_stats(s.synth, &st);
	cr_assert_eq(st.produced, 20000);
	cr_assert_eq(st.dropped, 0);
	for (w = 0; w < WORKERS; w++) {
		cr_assert_eq(s.lanes[w]->dropped, 0);
		lines += rte_ring_count(s.lanes[w]->ring);
	}
	cr_assert_eq(s.lanes[0]->recorded + s.lanes[1]->recorded, 20000);
	drain_into(&s, t, fam);
	cr_assert_eq(fam[0] + fam[1] + fam[2], 20000);
	cr_assert_eq(lines, fam[0] + 2 * (fam[1] + fam[2]));
	cr_assert_eq(s.lanes[0]->drained + s.lanes[1]->drained, 20000);
	/* 40 % of the flows, half NAT64, half NAT66: loosely, by events */
	cr_assert_gt(fam[1] + fam[2], 20000 * 30 / 100);
	cr_assert_lt(fam[1] + fam[2], 20000 * 50 / 100);
	cr_assert_gt(fam[1], fam[2] / 2);
	cr_assert_gt(fam[2], fam[1] / 2);
	assert_table_is_the_final_table(&s, t);
	src_close(&s);
	nsdp_table_free(t);
}

Test(synth6, a_dropping_mixed_source_keeps_its_table_exact)
{
	struct nsdp_synth_conf conf = conf_of(3000, 500, 50);
	struct nsdp_table *t = nsdp_table_create("s6d", 1024);
	struct nsdp_synth_stats st;
	uint64_t fam[3] = {0}, recorded;
	struct src s;

	cr_assert_eq(nsdp_table_add_v6(t, 1024), 0);
	conf.wait_when_full = 0;
	src_run(&s, &conf, 64);
	nsdp_synth_stats(s.synth, &st);
	recorded = s.lanes[0]->recorded + s.lanes[1]->recorded;
	cr_assert_eq(st.produced, 3000);
	cr_assert_eq(st.dropped, 3000 - recorded);
	cr_assert_eq(s.lanes[0]->dropped + s.lanes[1]->dropped, st.dropped);
	cr_assert_eq(st.creates + st.refreshes + st.deletes, recorded);
	drain_into(&s, t, fam);
	cr_assert_eq(fam[0] + fam[1] + fam[2], recorded);
	cr_assert_gt(fam[1] + fam[2], 0);
	assert_table_is_the_final_table(&s, t);
	src_close(&s);
	nsdp_table_free(t);
}

Test(synth6, v6_pct_above_100_is_refused)
{
	struct nsdp_synth_conf conf = conf_of(10, 10, 101);
	struct nsdp_lane *lane = nsdp_lane_create(0, 64, SOCKET_ID_ANY);

	cr_assert_null(nsdp_synth_create(&conf, &lane, 1));
	cr_assert_eq(errno, EINVAL);
	nsdp_lane_free(lane);
}
