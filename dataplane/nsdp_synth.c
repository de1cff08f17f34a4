/*
 * nsdp_synth.c - the synthetic session source.
 *
 * A fixed population of flows, each with a tuple derived from its index
 * alone, receives create, refresh and delete events chosen by a per-worker
 * PRNG seeded from (seed, worker), so a configuration always produces the
 * same events in the same order on every lane (timestamps aside).
 *
 * Invariants:
 * - Worker w of n owns flows i with i % n == w, keeps their state in its own
 *   arrays (flow i is entry i / n) and is the only writer of lane w and of
 *   its counters, which others read with NSDP_STAT_READ.
 * - A flow's state changes only when its record was accepted by the ring.
 *   With wait_when_full = 0 a refused record is dropped: it is counted in
 *   stats.dropped (and in the lane), and the flow keeps the state it had, so
 *   the final table is exactly what a consumer that saw every accepted
 *   record would hold. creates/refreshes/deletes count accepted records
 *   only; produced counts accepted plus dropped records.
 * - Flow i's translated tuple is pool address 203.0.113.(i % 256), port
 *   1024 + i / 256, unique for distinct flows; hence at most
 *   NSDP_SYNTH_MAX_FLOWS = 256 * 64512 flows.
 * - Flow i's inside source is 10.0.0.0 + i + 1, its first byte raised by
 *   the gateway pair (gateway_id >> 8, modulo 64): the sources of two
 *   pairs replicating into one store never share a session key (the
 *   inside tuple, schema/FORMAT.md), as two real pairs' inside networks
 *   must not. Pair 0's are those of every earlier version.
 *
 * - With v6_pct > 0, flow i is IPv6 when its hash says so (v6_pct % of
 *   flows, the same ones for a seed whatever the events): NAT64 under
 *   64:ff9b::/96 or NAT66, half each, inside source
 *   2001:db8:<pair>::<i + 1>, translated to the IPv4 flow's pool address
 *   and port (NAT64) or to 2001:db8:ffff::<pool address> and that port
 *   (NAT66). Its second line never changes and is recomputed from i; an
 *   IPv6 record goes into the lane as its two lines at once.
 *
 * - A worker stamps its records with nsdp_stamp_next(): they rise strictly
 *   on its lane whatever the wall clock does, so a flow's later event is
 *   never older than its earlier one.
 *
 * - Every worker owns at least one flow (flows >= nworkers), else create
 *   fails with EINVAL.
 *
 * Not here: threads or lcore launching (callers run nsdp_synth_run() where
 * they like: an EAL lcore or a plain pthread; nothing depends on
 * rte_lcore_id()), consuming the lanes, the PRNG (nsdp_prng.h), the table
 * file's format and writing (nsdp_dump.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include "nsdp_dump.h"
#include "nsdp_prng.h"
#include "nsdp_stat.h"
#include "nsdp_synth.h"
#include "nsdp_time.h"

#define NSDP_SYNTH_BURST 32
#define NSDP_SYNTH_POOL_BASE 0xCB007100u /* 203.0.113.0/24 */
#define NSDP_SYNTH_POOL_SIZE 256u
#define NSDP_SYNTH_PORT_MIN 1024u
#define NSDP_SYNTH_PORTS (65536u - NSDP_SYNTH_PORT_MIN)
#define NSDP_SYNTH_MAX_FLOWS ((uint64_t)NSDP_SYNTH_POOL_SIZE * NSDP_SYNTH_PORTS)
#define NSDP_SYNTH_ORIG_SRC_BASE 0x0A000000u /* 10.0.0.0/8 */
/* Gateway pairs with inside sources of their own: 10/8 to 73/8. */
#define NSDP_SYNTH_PAIRS 64u
#define NSDP_SYNTH_ORIG_DST_BASE 0xC6120000u /* 198.18.0.0/15 */
#define NSDP_SYNTH_ORIG_DST_SPAN (1u << 17)
/* Sleep instead of spinning when the pacer is this far ahead: a paced
 * source shares its CPU with the agent and the store on small machines. */
#define NSDP_SYNTH_SLEEP_NS 20000u
/* A paced worker's events go in bursts of this many at least. */
#define NSDP_SYNTH_QUANTUM 32u
/* Spins on a full ring before each short sleep; the sleeps double while
 * the same burst waits, up to 8 times the first. */
#define NSDP_SYNTH_FULL_SPINS 256
#define NSDP_SYNTH_FULL_NAP_NS 20000u
#define NSDP_SYNTH_FULL_NAP_DOUBLINGS 3u
#define NSDP_SYNTH_MAX_NAP_NS 50000000ull

/* State a burst overwrote, to restore flows whose record the ring refused. */
struct nsdp_synth_undo {
	uint64_t k;
	uint8_t alive;
	struct ns_session last;
};

struct nsdp_synth_worker {
	/* Written by the worker only (NSDP_STAT_*), read by anyone. */
	uint64_t produced;
	uint64_t dropped;
	uint64_t full_waits;
	uint64_t creates;
	uint64_t refreshes;
	uint64_t deletes;
	uint64_t v6_records;
	int started;
	int finished;
	/* Private to the worker while it runs. */
	uint64_t s[4]; /* xoshiro256** state */
	uint64_t nflows;
	uint64_t events;
	uint64_t last_stamp_ns; /* nsdp_stamp_next() */
	uint64_t *alive; /* one bit a flow: small enough to stay cached */
	struct ns_session *last;
	struct ns_session burst[NSDP_SYNTH_BURST];
	struct nsdp_synth_undo undo[NSDP_SYNTH_BURST];
} __attribute__((aligned(64)));

struct nsdp_synth {
	struct nsdp_synth_conf conf;
	unsigned int nworkers;
	int stop;
	struct nsdp_lane *lanes[NSDP_MAX_LANES];
	struct nsdp_synth_worker *workers;
};

static inline uint64_t nsdp_flow_hash(uint64_t i)
{
	uint64_t x = i;

	return nsdp_splitmix64(&x);
}

/* Whether flow i (hash h) is IPv6, and then NAT64 (1) or NAT66 (2). */
static int nsdp_synth_v6_kind(const struct nsdp_synth_conf *conf, uint64_t h)
{
	if (conf->v6_pct == 0 || (h >> 40) % 100 >= conf->v6_pct)
		return 0;
	return (h >> 39) & 1 ? 1 : 2;
}

/* The second line of flow i, an IPv6 flow whose head is r. */
static void nsdp_synth_line(const struct nsdp_synth_conf *conf, uint64_t i,
			    const struct ns_session *r, struct ns_session_v6 *x)
{
	uint32_t n = (uint32_t)(i + 1), d = r->xlat.daddr, pool;

	memset(x, 0, sizeof(*x));
	x->orig_saddr[0] = 0x20;
	x->orig_saddr[1] = 0x01;
	x->orig_saddr[2] = 0x0d;
	x->orig_saddr[3] = 0xb8;
	x->orig_saddr[5] =
		(uint8_t)((conf->gateway_id >> 8) % NSDP_SYNTH_PAIRS);
	x->orig_saddr[12] = (uint8_t)(n >> 24);
	x->orig_saddr[13] = (uint8_t)(n >> 16);
	x->orig_saddr[14] = (uint8_t)(n >> 8);
	x->orig_saddr[15] = (uint8_t)n;
	if (r->family == NS_FAMILY_NAT64) {
		/* 64:ff9b::/96 and the IPv4 destination */
		x->orig_daddr[1] = 0x64;
		x->orig_daddr[2] = 0xff;
		x->orig_daddr[3] = 0x9b;
		x->prefix_len = 96;
	} else {
		x->orig_daddr[0] = 0x20;
		x->orig_daddr[1] = 0x01;
		x->orig_daddr[2] = 0x0d;
		x->orig_daddr[3] = 0xb8;
		x->orig_daddr[4] = 0xfe;
		pool = NSDP_SYNTH_POOL_BASE +
		       (uint32_t)(i % NSDP_SYNTH_POOL_SIZE);
		x->xlat_saddr[0] = 0x20;
		x->xlat_saddr[1] = 0x01;
		x->xlat_saddr[2] = 0x0d;
		x->xlat_saddr[3] = 0xb8;
		x->xlat_saddr[4] = 0xff;
		x->xlat_saddr[5] = 0xff;
		x->xlat_saddr[12] = (uint8_t)(pool >> 24);
		x->xlat_saddr[13] = (uint8_t)(pool >> 16);
		x->xlat_saddr[14] = (uint8_t)(pool >> 8);
		x->xlat_saddr[15] = (uint8_t)pool;
	}
	x->orig_daddr[12] = (uint8_t)(d >> 24);
	x->orig_daddr[13] = (uint8_t)(d >> 16);
	x->orig_daddr[14] = (uint8_t)(d >> 8);
	x->orig_daddr[15] = (uint8_t)d;
	if (r->family == NS_FAMILY_NAT66)
		memcpy(x->xlat_daddr, x->orig_daddr, 16);
}

/* The fields of flow i's record that never change. */
static inline int nsdp_synth_alive(const struct nsdp_synth_worker *wk,
				   uint64_t k)
{
	return (int)(wk->alive[k / 64] >> (k % 64)) & 1;
}

static inline void nsdp_synth_set_alive(struct nsdp_synth_worker *wk,
					uint64_t k, int alive)
{
	uint64_t bit = 1ull << (k % 64);

	wk->alive[k / 64] =
		alive ? wk->alive[k / 64] | bit : wk->alive[k / 64] & ~bit;
}

/* n flow states, zeroed, each on a cache line of its own (an ns_session is
 * one line): calloc's 16-byte alignment would split every state over two. */
static struct ns_session *nsdp_synth_lines(uint64_t n)
{
	size_t bytes = (size_t)n * sizeof(struct ns_session);
	struct ns_session *p;

	bytes = (bytes + 63) & ~(size_t)63;
	p = aligned_alloc(64, bytes ? bytes : 64);
	if (p != NULL)
		memset(p, 0, bytes);
	return p;
}

static void nsdp_synth_flow_init(const struct nsdp_synth_conf *conf, uint64_t i,
				 struct ns_session *r)
{
	static const uint16_t dports[4] = {80, 443, 53, 123};
	uint64_t h = nsdp_flow_hash(i);
	uint16_t dport = dports[h & 3];

	memset(r, 0, sizeof(*r));
	r->version = NS_RECORD_VERSION;
	r->family = NS_FAMILY_IPV4;
	r->proto = dport == 80 || dport == 443 ? IPPROTO_TCP : IPPROTO_UDP;
	r->gateway_id = conf->gateway_id;
	r->epoch = conf->epoch;
	r->timeout_ms = conf->timeout_ms;
	/* saddr alone makes orig unique: i + 1 < 2^24 for every allowed i. */
	r->orig.saddr = NSDP_SYNTH_ORIG_SRC_BASE +
			((conf->gateway_id >> 8) % NSDP_SYNTH_PAIRS << 24) +
			(uint32_t)(i + 1);
	r->orig.sport =
		(uint16_t)(NSDP_SYNTH_PORT_MIN + (h >> 8) % NSDP_SYNTH_PORTS);
	r->orig.daddr = NSDP_SYNTH_ORIG_DST_BASE +
			(uint32_t)((h >> 32) % NSDP_SYNTH_ORIG_DST_SPAN);
	r->orig.dport = dport;
	r->xlat.saddr =
		NSDP_SYNTH_POOL_BASE + (uint32_t)(i % NSDP_SYNTH_POOL_SIZE);
	r->xlat.sport =
		(uint16_t)(NSDP_SYNTH_PORT_MIN + i / NSDP_SYNTH_POOL_SIZE);
	r->xlat.daddr = r->orig.daddr;
	r->xlat.dport = r->orig.dport;
	switch (nsdp_synth_v6_kind(conf, h)) {
	case 1: /* NAT64: the IPv4 side stays the IPv4 flow's */
		r->family = NS_FAMILY_NAT64;
		r->orig.saddr = r->orig.daddr = 0;
		break;
	case 2:
		r->family = NS_FAMILY_NAT66;
		r->orig.saddr = r->orig.daddr = 0;
		r->xlat.saddr = r->xlat.daddr = 0;
		break;
	}
}

static inline int nsdp_synth_stopped(const struct nsdp_synth *s);

/* Record r (flow i) as its one or two lines: 1 when the ring took it, 0
 * when it refused (the lane counts a refusal only when not waiting). */
static int nsdp_synth_put(const struct nsdp_synth *s, struct nsdp_lane *lane,
			  const struct ns_session *r, uint64_t i)
{
	struct ns_rec rec;

	if (!ns_family_is_v6(r->family)) {
		if (!s->conf.wait_when_full)
			return nsdp_record(lane, r) == 0;
		if (rte_ring_sp_enqueue_elem(lane->ring, (void *)(uintptr_t)r,
					     sizeof(*r)) != 0)
			return 0;
		NSDP_STAT_INC(lane->recorded);
		return 1;
	}
	rec.s = *r;
	nsdp_synth_line(&s->conf, i, r, &rec.v6);
	if (!s->conf.wait_when_full)
		return nsdp_record_v6(lane, &rec.s) == 0;
	__atomic_store_n(&lane->has_v6, 1, __ATOMIC_RELAXED);
	if (rte_ring_sp_enqueue_bulk_elem(lane->ring, &rec, sizeof(rec.s), 2,
					  NULL) != 2)
		return 0;
	NSDP_STAT_INC(lane->recorded);
	return 1;
}

/* One wait on a full ring: a pause, or after NSDP_SYNTH_FULL_SPINS of
 * them a sleep, doubling with each sleep of the same burst (*naps, 0 at
 * its start): a ring that stays full (the writers bound by the store)
 * leaves the CPU to the store and the standby instead of spinning. */
static void nsdp_synth_full_wait(struct nsdp_synth_worker *wk,
				 unsigned int *naps)
{
	NSDP_STAT_INC(wk->full_waits);
	if (wk->full_waits % NSDP_SYNTH_FULL_SPINS != 0) {
		rte_pause();
		return;
	}
	nsdp_sleep_ns(NSDP_SYNTH_FULL_NAP_NS
		      << RTE_MIN(*naps, NSDP_SYNTH_FULL_NAP_DOUBLINGS));
	(*naps)++;
}

/* The burst of a source with IPv6 flows, record by record: how many went
 * in, in order (waiting on a full ring unless wait_when_full is 0; then
 * the first refusal ends the burst, and the rest are dropped). */
static unsigned int nsdp_synth_put_burst(const struct nsdp_synth *s,
					 struct nsdp_synth_worker *wk,
					 unsigned int w, struct nsdp_lane *lane,
					 unsigned int n)
{
	unsigned int j, naps = 0;

	for (j = 0; j < n; j++) {
		uint64_t i = wk->undo[j].k * s->nworkers + w;

		while (!nsdp_synth_put(s, lane, &wk->burst[j], i)) {
			if (!s->conf.wait_when_full) {
				NSDP_STAT_ADD(lane->dropped, n - j - 1);
				return j;
			}
			if (nsdp_synth_stopped(s))
				return j;
			nsdp_synth_full_wait(wk, &naps);
		}
	}
	return n;
}

static unsigned int nsdp_synth_count_v6(const struct ns_session *burst,
					unsigned int n)
{
	unsigned int j, v6 = 0;

	for (j = 0; j < n; j++)
		v6 += ns_family_is_v6(burst[j].family);
	return v6;
}

struct nsdp_synth *nsdp_synth_create(const struct nsdp_synth_conf *conf,
				     struct nsdp_lane **lanes,
				     unsigned int nworkers)
{
	struct nsdp_synth *s;
	unsigned int w;

	if (conf == NULL || lanes == NULL || nworkers == 0 ||
	    nworkers > NSDP_MAX_LANES || conf->flows < nworkers ||
	    conf->flows > NSDP_SYNTH_MAX_FLOWS || conf->refresh_pct > 100 ||
	    conf->v6_pct > 100) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->conf = *conf;
	s->nworkers = nworkers;
	s->workers = aligned_alloc(64, sizeof(*s->workers) * nworkers);
	if (s->workers == NULL) {
		free(s);
		return NULL;
	}
	memset(s->workers, 0, sizeof(*s->workers) * nworkers);
	for (w = 0; w < nworkers; w++) {
		struct nsdp_synth_worker *wk = &s->workers[w];
		uint64_t x = conf->seed ^ (0xD1B54A32D192ED03ull * (w + 1));
		int j;

		if (lanes[w] == NULL)
			goto fail_inval;
		s->lanes[w] = lanes[w];
		for (j = 0; j < 4; j++)
			wk->s[j] = nsdp_splitmix64(&x);
		wk->nflows = (conf->flows - w + nworkers - 1) / nworkers;
		wk->events = conf->events / nworkers +
			     (w < conf->events % nworkers ? 1 : 0);
		wk->alive = calloc((wk->nflows + 63) / 64, sizeof(uint64_t));
		wk->last = nsdp_synth_lines(wk->nflows);
		if (wk->alive == NULL || wk->last == NULL) {
			nsdp_synth_free(s);
			errno = ENOMEM;
			return NULL;
		}
	}
	return s;

fail_inval:
	nsdp_synth_free(s);
	errno = EINVAL;
	return NULL;
}

void nsdp_synth_free(struct nsdp_synth *s)
{
	unsigned int w;

	if (s == NULL)
		return;
	for (w = 0; w < s->nworkers; w++) {
		free(s->workers[w].alive);
		free(s->workers[w].last);
	}
	free(s->workers);
	free(s);
}

void nsdp_synth_stop(struct nsdp_synth *s)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
}

static inline int nsdp_synth_stopped(const struct nsdp_synth *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_RELAXED);
}

/* Run the burst's draws ahead on a copy of the generator and prefetch the
 * flow state each event will read and write, so that the burst's misses on
 * the flows' states (one line each, random over the flows) overlap instead
 * of stalling one event after the other. What is drawn is unchanged: the
 * copy is thrown away. A flow drawn twice in one burst can make the copy
 * take a different branch than the real pass; that costs a useless
 * prefetch, never a different event. */
static void nsdp_synth_prefetch_burst(const struct nsdp_synth_worker *wk,
				      unsigned int n)
{
	uint64_t x[4] = {wk->s[0], wk->s[1], wk->s[2], wk->s[3]};
	unsigned int j;

	for (j = 0; j < n; j++) {
		uint64_t k = nsdp_below(x, wk->nflows);

		rte_prefetch0(&wk->last[k]);
		if (nsdp_synth_alive(wk, k))
			(void)nsdp_below(x, 100);
	}
}

/* Generate event j of the burst for a random owned flow and apply it to the
 * flow's state, remembering what it replaced. */
static void nsdp_synth_step(const struct nsdp_synth *s,
			    struct nsdp_synth_worker *wk, unsigned int w,
			    unsigned int j, uint64_t now_ns)
{
	uint64_t k = nsdp_below(wk->s, wk->nflows);
	struct ns_session *r = &wk->burst[j];
	struct nsdp_synth_undo *u = &wk->undo[j];

	u->k = k;
	u->alive = nsdp_synth_alive(wk, k);
	u->last = wk->last[k];
	if (!u->alive) {
		nsdp_synth_flow_init(&s->conf, k * s->nworkers + w, r);
		r->event = NS_EV_CREATE;
	} else {
		*r = wk->last[k];
		r->event = nsdp_below(wk->s, 100) < s->conf.refresh_pct
				   ? NS_EV_REFRESH
				   : NS_EV_DELETE;
	}
	r->timestamp_ns = nsdp_stamp_next(&wk->last_stamp_ns, now_ns);
	if (r->event == NS_EV_DELETE) {
		nsdp_synth_set_alive(wk, k, 0);
	} else {
		nsdp_synth_set_alive(wk, k, 1);
		wk->last[k] = *r;
	}
}

/* Undo events from..n-1 of the burst, newest first. */
static void nsdp_synth_rollback(struct nsdp_synth_worker *wk, unsigned int from,
				unsigned int n)
{
	while (n > from) {
		const struct nsdp_synth_undo *u = &wk->undo[--n];

		nsdp_synth_set_alive(wk, u->k, u->alive);
		wk->last[u->k] = u->last;
	}
}

/* Enqueue the burst, waiting while the ring is full; returns how many went
 * in (fewer than n only when stopped). The lane counts only what it
 * accepted: nothing is dropped. */
static unsigned int nsdp_synth_enqueue_waiting(const struct nsdp_synth *s,
					       struct nsdp_synth_worker *wk,
					       struct nsdp_lane *lane,
					       unsigned int n)
{
	unsigned int done = 0, naps = 0;

	for (;;) {
		unsigned int got = rte_ring_sp_enqueue_burst_elem(
			lane->ring, &wk->burst[done], sizeof(wk->burst[0]),
			n - done, NULL);

		NSDP_STAT_ADD(lane->recorded, got);
		done += got;
		if (done == n || nsdp_synth_stopped(s))
			return done;
		nsdp_synth_full_wait(wk, &naps);
	}
}

/* How many events may go now so that the worker keeps its share of the
 * rate; waits (checking the stop flag) until at least quantum may: a
 * paced worker sends bursts of quantum events and sleeps between them
 * rather than spinning for each event, as a gateway's lcore gets packets
 * in bursts, so that on a small machine the CPU it would spin on goes to
 * the agent and the store. */
static uint64_t nsdp_synth_pace(const struct nsdp_synth *s, uint64_t start,
				double ticks_per_event, uint64_t issued,
				uint64_t quantum)
{
	for (;;) {
		uint64_t now = rte_rdtsc();
		uint64_t due =
			(uint64_t)((double)(now - start) / ticks_per_event) + 1;
		uint64_t ahead_ns;

		if (due >= issued + quantum)
			return due - issued;
		if (nsdp_synth_stopped(s))
			return 0;
		ahead_ns = (uint64_t)(((double)(issued + quantum - 1) *
					       ticks_per_event -
				       (double)(now - start)) *
				      1e9 / (double)rte_get_tsc_hz());
		if (ahead_ns > NSDP_SYNTH_SLEEP_NS) {
			uint64_t nap = ahead_ns - NSDP_SYNTH_SLEEP_NS / 4;

			/* Short naps so that a stop is seen promptly. */
			nsdp_sleep_ns(RTE_MIN(nap, NSDP_SYNTH_MAX_NAP_NS));
		} else {
			rte_pause();
		}
	}
}

int nsdp_synth_run(struct nsdp_synth *s, unsigned int w)
{
	struct nsdp_synth_worker *wk;
	struct nsdp_lane *lane;
	uint64_t issued = 0, by_event[4];
	double ticks_per_event = 0;
	uint64_t start = 0;

	if (s == NULL || w >= s->nworkers)
		return -EINVAL;
	wk = &s->workers[w];
	if (__atomic_exchange_n(&wk->started, 1, __ATOMIC_RELAXED))
		return -EALREADY;
	lane = s->lanes[w];
	/* Naps of tens of microseconds, not the default 50 us of slack. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	if (s->conf.rate > 0) {
		ticks_per_event = (double)rte_get_tsc_hz() * s->nworkers /
				  (double)s->conf.rate;
		start = rte_rdtsc();
	}

	while (issued < wk->events && !nsdp_synth_stopped(s)) {
		uint64_t want = wk->events - issued;
		unsigned int n, sent, j;
		uint64_t now_ns;

		if (want > NSDP_SYNTH_BURST)
			want = NSDP_SYNTH_BURST;
		if (ticks_per_event > 0) {
			uint64_t may = nsdp_synth_pace(
				s, start, ticks_per_event, issued,
				RTE_MIN(want, (uint64_t)NSDP_SYNTH_QUANTUM));

			if (may == 0)
				break;
			if (want > may)
				want = may;
		}
		n = (unsigned int)want;
		now_ns = nsdp_realtime_ns();
		if (issued >= wk->events / 2)
			now_ns -= s->conf.clock_step_back_ms * NSDP_NS_PER_MS;
		nsdp_synth_prefetch_burst(wk, n);
		for (j = 0; j < n; j++)
			nsdp_synth_step(s, wk, w, j, now_ns);

		if (s->conf.v6_pct > 0) {
			sent = nsdp_synth_put_burst(s, wk, w, lane, n);
			if (!s->conf.wait_when_full)
				NSDP_STAT_ADD(wk->dropped, n - sent);
			issued += s->conf.wait_when_full ? sent : n;
		} else if (s->conf.wait_when_full) {
			sent = nsdp_synth_enqueue_waiting(s, wk, lane, n);
			issued += sent;
		} else {
			sent = nsdp_record_burst(lane, wk->burst, n);
			NSDP_STAT_ADD(wk->dropped, n - sent);
			issued += n;
		}
		nsdp_synth_rollback(wk, sent, n);
		/* A waiting source sends fewer than n only when stopped; the
		 * rest were never handed over, so they are not produced. */
		NSDP_STAT_ADD(wk->produced, s->conf.wait_when_full ? sent : n);
		memset(by_event, 0, sizeof(by_event));
		for (j = 0; j < sent; j++)
			by_event[wk->burst[j].event & 3]++;
		if (s->conf.v6_pct > 0)
			NSDP_STAT_ADD(wk->v6_records,
				      nsdp_synth_count_v6(wk->burst, sent));
		NSDP_STAT_ADD(wk->creates, by_event[NS_EV_CREATE]);
		NSDP_STAT_ADD(wk->refreshes, by_event[NS_EV_REFRESH]);
		NSDP_STAT_ADD(wk->deletes, by_event[NS_EV_DELETE]);
	}
	/* Release: whoever sees finished also sees the final flow state. */
	__atomic_store_n(&wk->finished, 1, __ATOMIC_RELEASE);
	return 0;
}

void nsdp_synth_stats(const struct nsdp_synth *s, struct nsdp_synth_stats *st)
{
	unsigned int w;

	memset(st, 0, sizeof(*st));
	st->done = 1;
	for (w = 0; w < s->nworkers; w++) {
		const struct nsdp_synth_worker *wk = &s->workers[w];

		if (!__atomic_load_n(&wk->finished, __ATOMIC_ACQUIRE))
			st->done = 0;
		st->produced += NSDP_STAT_READ(wk->produced);
		st->dropped += NSDP_STAT_READ(wk->dropped);
		st->full_waits += NSDP_STAT_READ(wk->full_waits);
		st->creates += NSDP_STAT_READ(wk->creates);
		st->refreshes += NSDP_STAT_READ(wk->refreshes);
		st->deletes += NSDP_STAT_READ(wk->deletes);
		st->v6_records += NSDP_STAT_READ(wk->v6_records);
	}
}

uint64_t nsdp_synth_final_table(const struct nsdp_synth *s,
				void (*fn)(const struct ns_session *, void *),
				void *arg)
{
	uint64_t i, live = 0;

	for (i = 0; i < s->conf.flows; i++) {
		const struct nsdp_synth_worker *wk =
			&s->workers[i % s->nworkers];
		uint64_t k = i / s->nworkers;

		struct ns_rec r;

		if (!nsdp_synth_alive(wk, k))
			continue;
		live++;
		if (fn == NULL)
			continue;
		r.s = wk->last[k];
		if (ns_family_is_v6(r.s.family))
			nsdp_synth_line(&s->conf, i, &r.s, &r.v6);
		fn(&r.s, arg);
	}
	return live;
}

static uint64_t synth_walk(const void *s,
			   void (*fn)(const struct ns_session *, void *),
			   void *arg)
{
	return nsdp_synth_final_table(s, fn, arg);
}

int64_t nsdp_synth_dump(const struct nsdp_synth *s, const char *path)
{
	return nsdp_dump_write(path, synth_walk, s);
}
