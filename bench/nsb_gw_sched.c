/*
 * nsb_gw_sched.c - natsync-gwbench's two ways of running the gateway loop
 * (gateway/ngw_fwd.h) on the worker lcore, with the generator in the same
 * thread before each iteration.
 *
 * Rounds: every round starts from a new, empty table and a new NAT in
 * standby, promoted with nsdp_nat_activate() while the lcore housekeeps,
 * warms up, then measures. Slices: both gateways live side by side, each
 * with its own table, ports, generator and clock (which stops while the
 * other runs), taking turns on the lcore every --slice-ms: what a shared
 * machine does to one it does to the other.
 *
 * Invariants: only the gateway's part of an iteration (clock read, rx
 * bursts, NAT calls, tx bursts, housekeeping) is timed, with the TSC; an
 * iteration over 1/NSB_GW_STALL_DIV s was preempted and is counted apart.
 * The lcore publishes its progress with relaxed stores; the main thread
 * reads the results only after rte_eal_wait_lcore(). Every mbuf is back in
 * the pool when a run ends.
 *
 * Not here: what the figures mean (nsb_gw_report.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_launch.h>

#include "nsb_gw_sched.h"
#include "nsdp_stat.h"
#include "nsdp_time.h"

/* The gateway's table for conf, with an IPv6 table as large when NAT64
 * is on; NULL and errno on failure. */
static struct nsdp_table *nsb_gw_table_create(const char *name,
					      const struct nsdp_nat_conf *conf)
{
	struct nsdp_table *t = nsdp_table_create(name, conf->max_sessions);
	int rc;

	if (!t || !conf->inside_addr6[0])
		return t;
	rc = nsdp_table_add_v6(t, conf->max_sessions);
	if (rc != 0) {
		nsdp_table_free(t);
		errno = -rc;
		return NULL;
	}
	return t;
}

static const char *const phase_names[] = {"standby", "warm-up", "measure",
					  "done"};

/* One gateway iteration, timed, its packets added to t; returns them. The
 * NAT's clock runs clock_offset_ns behind the real one. */
static unsigned int timed_poll(struct ngw_fwd *fwd, uint64_t clock_offset_ns,
			       uint64_t stall, struct nsb_gw_tally *t)
{
	uint64_t t0 = rte_rdtsc(), cycles;
	unsigned int n =
		ngw_fwd_poll(fwd, nsdp_realtime_ns() - clock_offset_ns);

	cycles = rte_rdtsc() - t0;
	t->packets += n;
	if (likely(cycles < stall)) {
		t->gw_packets += n;
		t->gw_cycles += cycles;
	} else {
		t->stalls++;
		t->stall_cycles += cycles;
	}
	return n;
}

static void tally_add(struct nsb_gw_tally *sum, const struct nsb_gw_tally *t)
{
	sum->packets += t->packets;
	sum->gw_packets += t->gw_packets;
	sum->gw_cycles += t->gw_cycles;
	sum->stalls += t->stalls;
	sum->stall_cycles += t->stall_cycles;
}

static void live_publish(struct nsb_gw_live *l, enum nsb_gw_phase ph,
			 uint64_t pkts, uint64_t gw_cycles,
			 uint64_t phase_cycles)
{
	__atomic_store_n(&l->phase, (uint64_t)ph, __ATOMIC_RELAXED);
	__atomic_store_n(&l->packets, pkts, __ATOMIC_RELAXED);
	__atomic_store_n(&l->gw_cycles, gw_cycles, __ATOMIC_RELAXED);
	__atomic_store_n(&l->phase_cycles, phase_cycles, __ATOMIC_RELAXED);
}

/* Promote the n NATs the lcore runs (it takes the promotion), then wait
 * until it is done: stop it on a signal, and call progress once a second.
 * 0, 1 when a NAT was not promoted, -1 when interrupted. */
static int promote_and_wait(struct nsdp_nat *const *nats, int n,
			    unsigned int timeout_ms, unsigned int worker,
			    const int *done, int *stop,
			    void (*progress)(void *), void *arg)
{
	double last = nsdp_now_s();
	int status = 0;

	for (int i = 0; i < n && status == 0; i++) {
		int rc = nsdp_nat_activate(nats[i], 1, timeout_ms);

		if (rc != 0) {
			fprintf(stderr,
				"natsync-gwbench: nsdp_nat_activate: %s\n",
				strerror(-rc));
			__atomic_store_n(stop, 1, __ATOMIC_RELAXED);
			status = 1;
		}
	}
	while (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
		nsdp_sleep_ms(100);
		if (nsb_gw_signalled &&
		    !__atomic_load_n(stop, __ATOMIC_RELAXED)) {
			__atomic_store_n(stop, 1, __ATOMIC_RELAXED);
			status = -1;
		}
		if (nsdp_now_s() - last >= 1.0) {
			last = nsdp_now_s();
			progress(arg);
		}
	}
	rte_eal_wait_lcore(worker);
	return status;
}

/* ---- rounds ------------------------------------------------------- */

/* The lcore's side of a round: standby until promoted, warm-up, then
 * the measured seconds. */
static int round_lcore(void *arg)
{
	struct nsb_gw_round *r = arg;
	const struct nsb_gw_opts *o = r->gen->o;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t warm = (uint64_t)o->warmup_s * hz,
		 meas = (uint64_t)o->seconds * hz;
	uint64_t stall = hz / NSB_GW_STALL_DIV;
	uint64_t t_phase = rte_rdtsc();
	struct nsb_gw_tally t = {0};
	enum nsb_gw_phase ph = NSB_GW_STANDBY;
	struct nsdp_nat_stats s;

	nsb_gw_gen_reset(r->gen);
	for (;;) {
		uint64_t t0 = rte_rdtsc();

		if (ph == NSB_GW_STANDBY &&
		    nsdp_nat_mode(r->nat) == NSDP_NAT_ACTIVE) {
			ph = NSB_GW_WARMUP;
			t_phase = t0;
			nsb_gw_gen_promoted(r->gen, t0);
			nsdp_nat_stats(r->nat, &s);
			r->warm_tx_outside = s.tx_outside;
		} else if (ph == NSB_GW_WARMUP && t0 - t_phase >= warm) {
			nsdp_nat_stats(r->nat, &r->before);
			r->warm_tx_outside =
				r->before.tx_outside - r->warm_tx_outside;
			ph = NSB_GW_MEASURE;
			t_phase = t0;
			memset(&t, 0, sizeof(t));
		} else if (ph == NSB_GW_MEASURE && t0 - t_phase >= meas) {
			nsdp_nat_stats(r->nat, &r->after);
			r->loop_cycles = t0 - t_phase;
			break;
		}
		if (__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
			r->failed = 1;
			break;
		}
		nsb_gw_gen_step(r->gen, t0);
		timed_poll(r->fwd, 0, stall, &t);
		live_publish(&r->live, ph, t.gw_packets, t.gw_cycles,
			     t0 - t_phase);
	}
	r->t = t;
	live_publish(&r->live, NSB_GW_DONE, t.gw_packets, t.gw_cycles, 0);
	nsb_gw_ports_drain(r->ports);
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return 0;
}

/* What a progress line compares with: the figures of the line before. */
struct round_progress {
	struct nsb_gw_round *r;
	unsigned int n_rounds;
	uint64_t pkts, gw, phase_cycles, phase, recorded;
};

static void round_progress(void *arg)
{
	struct round_progress *l = arg;
	struct nsb_gw_round *r = l->r;
	double hz = (double)rte_get_tsc_hz();
	uint64_t ph = __atomic_load_n(&r->live.phase, __ATOMIC_RELAXED);
	uint64_t pkts = __atomic_load_n(&r->live.packets, __ATOMIC_RELAXED);
	uint64_t gw = __atomic_load_n(&r->live.gw_cycles, __ATOMIC_RELAXED);
	uint64_t pc = __atomic_load_n(&r->live.phase_cycles, __ATOMIC_RELAXED);
	struct nsdp_nat_stats s;
	struct nsdp_table_stats ts;
	double gw_mpps = 0, loop_mpps = 0, rec_s = 0;

	if (ph >= NSB_GW_DONE)
		return;
	if (ph != l->phase)
		l->pkts = l->gw = l->phase_cycles = 0;
	nsdp_nat_stats(r->nat, &s);
	nsdp_table_stats(r->table, &ts);
	if (gw > l->gw)
		gw_mpps = (double)(pkts - l->pkts) * hz / (double)(gw - l->gw) /
			  1e6;
	if (pc > l->phase_cycles) {
		loop_mpps = (double)(pkts - l->pkts) * hz /
			    (double)(pc - l->phase_cycles) / 1e6;
		rec_s = (double)(s.recorded - l->recorded) * hz /
			(double)(pc - l->phase_cycles);
	}
	fprintf(stderr,
		"progress: round %u/%u recording=%s %s %.1fs: gw %.3f Mpps, "
		"loop %.3f Mpps, sessions %" PRIu64 ", records %.0f/s, "
		"record_drops %" PRIu64 ", neigh_miss %" PRIu64 "\n",
		r->index + 1, l->n_rounds, r->recording ? "on" : "off",
		phase_names[ph], (double)pc / hz, gw_mpps, loop_mpps, ts.live,
		rec_s, s.record_drops, s.neigh_miss);
	l->pkts = pkts;
	l->gw = gw;
	l->phase_cycles = pc;
	l->phase = ph;
	l->recorded = s.recorded;
}

int nsb_gw_round_run(struct nsb_gw_round *r, unsigned int n_rounds,
		     unsigned int worker, const struct nsdp_nat_conf *conf,
		     struct nsdp_lane *lane)
{
	struct round_progress l = {.r = r, .n_rounds = n_rounds};
	char name[32];
	struct nsdp_table_stats ts;
	int status;

	snprintf(name, sizeof(name), "gwb%u", r->index);
	r->table = nsb_gw_table_create(name, conf);
	if (!r->table) {
		fprintf(stderr,
			"natsync-gwbench: table of %" PRIu32 " sessions: %s\n",
			conf->max_sessions, strerror(errno));
		return 1;
	}
	r->nat = nsdp_nat_create(conf, r->table, r->recording ? lane : NULL);
	if (!r->nat) {
		fprintf(stderr, "natsync-gwbench: nsdp_nat_create: %s\n",
			strerror(errno));
		nsdp_table_free(r->table);
		return 1;
	}
	r->fwd->nat = r->nat;
	rte_eal_remote_launch(round_lcore, r, worker);
	status = promote_and_wait(&r->nat, 1, NSB_GW_ACTIVATE_MS, worker,
				  &r->done, &r->stop, round_progress, &l);
	nsdp_table_stats(r->table, &ts);
	r->sessions_end = ts.live;
	nsdp_nat_free(r->nat);
	nsdp_table_free(r->table);
	r->nat = NULL;
	r->table = NULL;
	if (status == 0 && r->failed)
		status = 1;
	return status;
}

/* ---- side by side: both gateways on the lcore, in slices ----------- */

static void stats_add(struct nsdp_nat_stats *sum,
		      const struct nsdp_nat_stats *after,
		      const struct nsdp_nat_stats *before)
{
	uint64_t s[sizeof(*sum) / sizeof(uint64_t)], a[RTE_DIM(s)],
		b[RTE_DIM(s)];

	memcpy(s, sum, sizeof(s));
	memcpy(a, after, sizeof(a));
	memcpy(b, before, sizeof(b));
	for (size_t i = 0; i < RTE_DIM(s); i++)
		s[i] += a[i] - b[i];
	memcpy(sum, s, sizeof(s));
}

_Static_assert(sizeof(struct nsdp_nat_stats) % sizeof(uint64_t) == 0,
	       "nsdp_nat_stats holds counters only");

/* One slice of context x: resume its clocks, run the gateway loop for a
 * slice, stop its clocks, and account for the slice when measuring. */
static void pair_slice(struct nsb_gw_pair *p, struct nsb_gw_ctx *x,
		       int measuring)
{
	struct nsb_gw_round *r = &x->res;
	uint64_t hz = rte_get_tsc_hz(), stall = hz / NSB_GW_STALL_DIV;
	uint64_t start = rte_rdtsc(), now_ns = nsdp_realtime_ns();
	struct nsb_gw_tally t = {0};
	struct nsdp_nat_stats before, after;

	if (x->paused_ns)
		x->clock_offset_ns += now_ns - x->paused_ns;
	if (x->gen.churn_start)
		x->gen.churn_start += start - x->paused_tsc;
	nsdp_nat_stats(r->nat, &before);
	for (;;) {
		uint64_t t0 = rte_rdtsc();

		if (t0 - start >= p->slice_cycles)
			break;
		if (unlikely(!x->active_seen) &&
		    nsdp_nat_mode(r->nat) == NSDP_NAT_ACTIVE) {
			x->active_seen = 1;
			nsb_gw_gen_promoted(&x->gen, t0);
		}
		nsb_gw_gen_step(&x->gen, t0);
		timed_poll(&x->fwd, x->clock_offset_ns, stall, &t);
		live_publish(&r->live, (enum nsb_gw_phase)p->phase,
			     x->all_packets + t.gw_packets,
			     x->all_cycles + t.gw_cycles, 0);
	}
	nsdp_nat_stats(r->nat, &after);
	x->paused_ns = nsdp_realtime_ns();
	x->paused_tsc = rte_rdtsc();
	x->all_packets += t.gw_packets;
	x->all_cycles += t.gw_cycles;
	if (!measuring)
		return;
	tally_add(&r->t, &t);
	r->loop_cycles += x->paused_tsc - start;
	stats_add(&r->after, &after, &before);
	if (t.gw_cycles && x->n_samples < x->max_samples)
		x->samples[x->n_samples++] =
			(double)t.gw_packets * (double)hz / (double)t.gw_cycles;
}

/* The lcore's side of --slice-ms: the two gateways take turns, a slice
 * each; warm-up and measurement start at a pair boundary, so both get
 * the same number of measured slices. */
static int pair_lcore(void *arg)
{
	struct nsb_gw_pair *p = arg;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t warm = 2 * (uint64_t)p->o->warmup_s * hz;
	uint64_t meas = 2 * (uint64_t)p->o->seconds * hz;
	uint64_t t_phase = 0;
	enum nsb_gw_phase ph = NSB_GW_STANDBY;
	int first = 0;

	nsb_gw_gen_reset(&p->ctx[0].gen);
	nsb_gw_gen_reset(&p->ctx[1].gen);
	while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) {
		uint64_t t = rte_rdtsc();

		if (ph == NSB_GW_STANDBY && p->ctx[0].active_seen &&
		    p->ctx[1].active_seen) {
			ph = NSB_GW_WARMUP;
			t_phase = t;
		} else if (ph == NSB_GW_WARMUP && t - t_phase >= warm) {
			ph = NSB_GW_MEASURE;
			t_phase = t;
		} else if (ph == NSB_GW_MEASURE && t - t_phase >= meas) {
			break;
		}
		__atomic_store_n(&p->phase, (uint64_t)ph, __ATOMIC_RELAXED);
		/* Who goes first alternates: with both gateways alike
		 * (recording off), the second of each pair ran some 0.5%
		 * faster than the first. */
		pair_slice(p, &p->ctx[first], ph == NSB_GW_MEASURE);
		pair_slice(p, &p->ctx[!first], ph == NSB_GW_MEASURE);
		first = !first;
	}
	if (ph != NSB_GW_MEASURE)
		p->failed = 1;
	nsb_gw_ports_drain(&p->ports[0]);
	nsb_gw_ports_drain(&p->ports[1]);
	__atomic_store_n(&p->phase, (uint64_t)NSB_GW_DONE, __ATOMIC_RELAXED);
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	return 0;
}

/* The pair and the figures of the progress line before. */
struct pair_progress {
	struct nsb_gw_pair *p;
	uint64_t last[2][2]; /* packets, gw cycles */
};

static void pair_progress(void *arg)
{
	struct pair_progress *l = arg;
	struct nsb_gw_pair *p = l->p;
	uint64_t ph = __atomic_load_n(&p->phase, __ATOMIC_RELAXED);
	double mpps[2] = {0, 0};
	uint64_t recorded = 0, sessions[2];

	if (ph >= NSB_GW_DONE)
		return;
	for (int i = 0; i < 2; i++) {
		struct nsb_gw_round *r = &p->ctx[i].res;
		uint64_t pk =
			__atomic_load_n(&r->live.packets, __ATOMIC_RELAXED);
		uint64_t cy =
			__atomic_load_n(&r->live.gw_cycles, __ATOMIC_RELAXED);
		uint64_t *last = l->last[i];
		struct nsdp_table_stats ts;
		struct nsdp_nat_stats s;

		if (cy > last[1] && pk >= last[0])
			mpps[i] = (double)(pk - last[0]) *
				  (double)rte_get_tsc_hz() /
				  (double)(cy - last[1]) / 1e6;
		last[0] = pk;
		last[1] = cy;
		nsdp_table_stats(r->table, &ts);
		sessions[i] = ts.live;
		if (r->recording) {
			nsdp_nat_stats(r->nat, &s);
			recorded = s.recorded;
		}
	}
	fprintf(stderr,
		"progress: slices %s: gw off %.3f Mpps, on %.3f Mpps; "
		"sessions %" PRIu64 " / %" PRIu64 ", recorded %" PRIu64 "\n",
		phase_names[ph], mpps[0], mpps[1], sessions[0], sessions[1],
		recorded);
}

void nsb_gw_pair_close(struct nsb_gw_pair *p)
{
	for (int i = 0; i < 2; i++) {
		struct nsb_gw_ctx *x = &p->ctx[i];

		nsdp_nat_free(x->res.nat);
		nsdp_table_free(x->res.table);
		x->res.nat = NULL;
		x->res.table = NULL;
		nsb_gw_gen_free(&x->gen);
		free(x->samples);
		x->samples = NULL;
	}
}

/* Gateway i of the pair: its table, NAT (recording if i), generator and
 * loop over ports[i]; 0 or -1. */
static int pair_ctx_init(struct nsb_gw_pair *p, int i,
			 const struct nsdp_nat_conf *conf,
			 struct nsdp_lane *lane)
{
	struct nsb_gw_ctx *x = &p->ctx[i];
	char name[32];

	x->res.index = (unsigned int)i;
	snprintf(x->res.label, sizeof(x->res.label), "slices");
	x->res.recording = i;
	x->res.gen = &x->gen;
	x->res.ports = &p->ports[i];
	x->res.fwd = &x->fwd;
	x->max_samples = p->o->seconds * 1000u / p->o->slice_ms + 4;
	x->samples = calloc(x->max_samples, sizeof(*x->samples));
	snprintf(name, sizeof(name), "gwbp%d", i);
	x->res.table = nsb_gw_table_create(name, conf);
	x->res.nat = x->res.table ? nsdp_nat_create(conf, x->res.table,
						    i ? lane : NULL)
				  : NULL;
	if (!x->samples || nsb_gw_gen_init(&x->gen, p->o, &p->ports[i]) != 0 ||
	    !x->res.nat) {
		fprintf(stderr,
			"natsync-gwbench: cannot set up gateway %d: %s\n", i,
			strerror(errno));
		return -1;
	}
	ngw_fwd_init(&x->fwd, x->res.nat, p->ports[i].inside,
		     p->ports[i].outside);
	x->fwd.burst = (uint16_t)p->o->burst;
	return 0;
}

int nsb_gw_pair_run(struct nsb_gw_pair *p, unsigned int worker,
		    const struct nsdp_nat_conf *conf, struct nsdp_lane *lane)
{
	struct pair_progress l = {.p = p};
	struct nsdp_nat *nats[2];
	int status;

	for (int i = 0; i < 2; i++) {
		if (pair_ctx_init(p, i, conf, lane) != 0)
			return 1;
		nats[i] = p->ctx[i].res.nat;
	}
	p->slice_cycles = rte_get_tsc_hz() * p->o->slice_ms / 1000;
	rte_eal_remote_launch(pair_lcore, p, worker);
	status = promote_and_wait(
		nats, 2, NSB_GW_ACTIVATE_MS + 2 * p->o->slice_ms, worker,
		&p->done, &p->stop, pair_progress, &l);
	for (int i = 0; i < 2; i++) {
		struct nsdp_table_stats ts;

		nsdp_table_stats(p->ctx[i].res.table, &ts);
		p->ctx[i].res.sessions_end = ts.live;
	}
	if (status == 0 && p->failed)
		status = 1;
	return status;
}
