/*
 * nsb_record.c - natsync-bench's record mode: what one fast-path
 * record call costs.
 *
 * A producer on an EAL worker lcore (pinned, as a gateway's forwarding
 * lcore is) calls nsdp_record() --calls times per run, timed with
 * rte_rdtsc() around the whole loop, while this thread drains the lane.
 * Then the same with nsdp_record_burst() of 32 records per call. Each run
 * starts with an empty ring; the median over --runs runs is reported, with
 * the fastest and slowest run.
 *
 * The cost depends on the drainer, because producer and drainer share the
 * ring's index and slot cache lines. Both are measured, one after the
 * other: a drainer that works like the agent's writer (takes up to 256
 * records, encodes each into wire form, comes back), which gives the
 * figures, and a drainer that only spins on the ring and takes every
 * record the moment it appears (the _spin figures), the worst case for the
 * producer. backlog_median, the records left in the ring as a single-call
 * run ends, shows whether the drainer really ran alongside (near 0) or
 * not (near --calls: the figure is then the uncontended one).
 *
 * A run of at most the ring's size never finds the ring full, whatever
 * the drainer does, so every call measured is a record accepted (the
 * default is half the ring). A record the ring refused would be counted
 * in drops: a run with drops measured partly the cheaper refusal path.
 * The records are 32 prepared sessions reused in turn, so the figure is
 * the lane's cost (ring slot copy, head and tail updates, counters, and
 * the cache lines the drainer takes away) and not the making of a record.
 *
 * Not here: a store, a standby, the writers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "ns_record.h"
#include "nsb_bench.h"
#include "nsa_log.h"
#include "nsdp_lane.h"

#define RECORD_SET 32
#define RECORD_BURST 32
/* The agent's writers take up to this many records per drain. */
#define RECORD_DRAIN 256
#define RECORD_MAX_RUNS 1000

struct record_job {
	struct nsdp_lane *lane;
	const struct ns_session *set;
	uint64_t runs, calls;
	int encode; /* the drainer encodes what it takes, as a writer does */
	uint64_t cycles_one[RECORD_MAX_RUNS], cycles_burst[RECORD_MAX_RUNS];
	uint64_t backlog[RECORD_MAX_RUNS];
	uint64_t drops_one, drops_burst;
	int done; /* written by the producer, read by the drainer */
};

/* One drainer's figures: ns per call (median, min, max) and per burst. */
struct record_figures {
	double one[3], burst[3];
	double backlog;
	uint64_t drops_one, drops_burst;
};

static void wait_ring_empty(const struct nsdp_lane *lane)
{
	while (!rte_ring_empty(lane->ring))
		rte_pause();
}

static int record_producer(void *arg)
{
	struct record_job *j = arg;
	struct nsdp_lane *lane = j->lane;
	uint64_t bursts = j->calls / RECORD_BURST, dropped;

	for (uint64_t r = 0; r < j->runs; r++) {
		uint64_t t0;

		wait_ring_empty(lane);
		dropped = lane->dropped;
		t0 = rte_rdtsc();
		for (uint64_t i = 0; i < j->calls; i++)
			nsdp_record(lane, &j->set[i % RECORD_SET]);
		j->cycles_one[r] = rte_rdtsc() - t0;
		j->backlog[r] = rte_ring_count(lane->ring);
		j->drops_one += lane->dropped - dropped;
	}
	for (uint64_t r = 0; r < j->runs; r++) {
		uint64_t t0;

		wait_ring_empty(lane);
		dropped = lane->dropped;
		t0 = rte_rdtsc();
		for (uint64_t i = 0; i < bursts; i++)
			nsdp_record_burst(lane, j->set, RECORD_BURST);
		j->cycles_burst[r] = rte_rdtsc() - t0;
		j->drops_burst += lane->dropped - dropped;
	}
	__atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sort cycles[0..n-1] and convert its median, minimum and maximum to ns
 * per unit of `units` per run. */
static void summarise(uint64_t *cycles, uint64_t n, uint64_t units,
		      double ns[3])
{
	double per = 1e9 / (double)rte_get_tsc_hz() / (double)units;

	qsort(cycles, n, sizeof(cycles[0]), cmp_u64);
	ns[0] = (n % 2 ? (double)cycles[n / 2]
		       : ((double)cycles[n / 2 - 1] + (double)cycles[n / 2]) /
				 2) *
		per;
	ns[1] = (double)cycles[0] * per;
	ns[2] = (double)cycles[n - 1] * per;
}

static void prepare_sessions(struct ns_session *set, uint32_t gateway_id)
{
	memset(set, 0, RECORD_SET * sizeof(*set));
	for (unsigned int i = 0; i < RECORD_SET; i++) {
		struct ns_session *s = &set[i];

		s->version = NS_RECORD_VERSION;
		s->family = NS_FAMILY_IPV4;
		s->proto = IPPROTO_UDP;
		s->event = NS_EV_CREATE;
		s->gateway_id = gateway_id;
		s->timeout_ms = 30000;
		s->timestamp_ns = i;
		s->orig = (struct ns_tuple){0x0a000001u + i, 0xc6120001u,
					    (uint16_t)(40000 + i), 53};
		s->xlat = (struct ns_tuple){0xcb007101u, 0xc6120001u,
					    (uint16_t)(1024 + i), 53};
	}
}

/* Drain the lane until the producer is done and the ring empty. */
static uint64_t drain_until_done(struct record_job *j)
{
	static uint8_t wire[RECORD_DRAIN * NS_RECORD_MAX_LEN];
	struct ns_session out[RECORD_DRAIN];
	uint64_t drained = 0;

	for (;;) {
		unsigned int n = nsdp_lane_drain(j->lane, out, RECORD_DRAIN);

		drained += n;
		for (unsigned int i = 0; j->encode && i < n; i++)
			ns_record_encode(&out[i], wire + i * NS_RECORD_MAX_LEN,
					 NS_RECORD_MAX_LEN);
		if (n)
			continue;
		if (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) &&
		    rte_ring_empty(j->lane->ring))
			return drained;
		rte_pause();
	}
}

/* All runs with one drainer; 0 or -1 (logged). */
static int measure(struct record_job *j, unsigned int lcore, int encode,
		   struct record_figures *f)
{
	uint64_t drained, recorded = j->lane->recorded;

	j->encode = encode;
	j->drops_one = j->drops_burst = 0;
	__atomic_store_n(&j->done, 0, __ATOMIC_RELEASE);
	if (rte_eal_remote_launch(record_producer, j, lcore) != 0) {
		NSA_ERR("record: cannot launch the producer on lcore %u",
			lcore);
		return -1;
	}
	drained = drain_until_done(j);
	rte_eal_wait_lcore(lcore);
	if (drained != j->lane->recorded - recorded) {
		NSA_ERR("record: %" PRIu64 " records in, %" PRIu64 " out",
			j->lane->recorded - recorded, drained);
		return -1;
	}
	summarise(j->cycles_one, j->runs, j->calls, f->one);
	summarise(j->cycles_burst, j->runs, j->calls / RECORD_BURST, f->burst);
	qsort(j->backlog, j->runs, sizeof(j->backlog[0]), cmp_u64);
	f->backlog = (double)j->backlog[j->runs / 2];
	f->drops_one = j->drops_one;
	f->drops_burst = j->drops_burst;
	return 0;
}

int nsb_record(const struct nsa_config *conf, const struct nsb_opts *o)
{
	static struct ns_session set[RECORD_SET];
	struct record_job *j;
	struct record_figures w, spin;
	unsigned int lcore = rte_get_next_lcore(-1, 1, 0);
	int rc = 1;

	if (o->runs > RECORD_MAX_RUNS ||
	    (o->calls && o->calls < RECORD_BURST)) {
		NSA_ERR("record: --runs at most %d, --calls at least %d",
			RECORD_MAX_RUNS, RECORD_BURST);
		return 1;
	}
	if (lcore >= RTE_MAX_LCORE) {
		NSA_ERR("record: the producer needs an EAL worker lcore");
		return 1;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return 1;
	prepare_sessions(set, conf->gateway_id);
	j->set = set;
	j->runs = o->runs;
	j->calls = o->calls ? o->calls : conf->ring_size / 2;
	j->lane = nsdp_lane_create(0, conf->ring_size, (int)rte_socket_id());
	if (!j->lane) {
		NSA_ERR("record: cannot create a lane of %u records",
			conf->ring_size);
		goto out;
	}
	if (measure(j, lcore, 1, &w) != 0 || measure(j, lcore, 0, &spin) != 0)
		goto out;
	printf("RESULT mode=record ns_per_call=%.2f ns_per_call_burst32=%.2f"
	       " ns_per_record_burst32=%.2f ns_per_call_min=%.2f"
	       " ns_per_call_max=%.2f backlog_median=%.0f"
	       " ns_per_call_spin=%.2f ns_per_record_burst32_spin=%.2f"
	       " backlog_median_spin=%.0f runs=%" PRIu64 " calls=%" PRIu64
	       " ring_size=%u drops=%" PRIu64 " tsc_hz=%" PRIu64 "\n",
	       w.one[0], w.burst[0], w.burst[0] / RECORD_BURST, w.one[1],
	       w.one[2], w.backlog, spin.one[0], spin.burst[0] / RECORD_BURST,
	       spin.backlog, j->runs, j->calls, conf->ring_size,
	       w.drops_one + w.drops_burst + spin.drops_one + spin.drops_burst,
	       rte_get_tsc_hz());
	fflush(stdout);
	rc = 0;
out:
	if (j->lane)
		nsdp_lane_free(j->lane);
	free(j);
	return rc;
}
