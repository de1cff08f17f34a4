/*
 * nsdp_synth.h - the synthetic session source.
 *
 * Runs on DPDK lcores and produces create, refresh and delete events for a
 * fixed population of flows into lanes, exactly as a NAT fast path would,
 * deterministically from a seed: the same configuration always yields the
 * same events and the same final table. Used by the demo, the tests and the
 * benchmarks; no NIC is needed.
 *
 * Worker w of n owns the flows whose index i satisfies i % n == w and
 * writes to lane w, so every flow's events stay in order on one lane.
 */
#ifndef NSDP_SYNTH_H
#define NSDP_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#include "ns_record.h"
#include "nsdp_lane.h"

struct nsdp_synth_conf {
	uint64_t flows; /* distinct flows (population) */
	uint64_t events; /* events to produce in all, then stop */
	uint64_t rate; /* events per second over all workers, 0 = flat out */
	uint64_t seed;
	uint32_t
		refresh_pct; /* of events on a live flow, % that are refreshes */
	/* % of flows that are IPv6, half NAT64 (64:ff9b::/96), half NAT66;
	 * 0: IPv4 only, as before */
	uint32_t v6_pct;
	uint32_t gateway_id;
	uint32_t epoch;
	uint32_t timeout_ms;
	int wait_when_full; /* 1: retry a full ring (test source), 0: drop */
	/* Test hook: once a worker has issued half of its events, its reading
	 * of CLOCK_REALTIME is this far behind, as after a step of the
	 * system clock; 0 = the clock as it is. */
	uint64_t clock_step_back_ms;
};

struct nsdp_synth_stats {
	uint64_t produced; /* events handed to nsdp_record() */
	uint64_t dropped; /* events the ring refused (wait_when_full = 0) */
	uint64_t full_waits; /* times the source waited on a full ring */
	uint64_t creates, refreshes, deletes;
	uint64_t v6_records; /* of produced, IPv6 (NAT66, NAT64) ones */
	int done;
};

struct nsdp_synth;

/* Build a source of nworkers workers writing to lanes[0..nworkers-1]. */
struct nsdp_synth *nsdp_synth_create(const struct nsdp_synth_conf *conf,
				     struct nsdp_lane **lanes,
				     unsigned int nworkers);
void nsdp_synth_free(struct nsdp_synth *s);

/* Body of worker w; returns when its share of events is produced or
 * nsdp_synth_stop() was called. Suitable for rte_eal_remote_launch() through
 * a small wrapper, or a plain thread. */
int nsdp_synth_run(struct nsdp_synth *s, unsigned int w);
void nsdp_synth_stop(struct nsdp_synth *s);

/* Sum of the workers' counters (readable while running). */
void nsdp_synth_stats(const struct nsdp_synth *s, struct nsdp_synth_stats *st);

/* The source's table after all events it produced: calls fn for every live
 * flow with the last record written for it (an IPv6 one as two lines). Valid once every worker has
 * returned. Returns the number of live flows. */
uint64_t nsdp_synth_final_table(const struct nsdp_synth *s,
				void (*fn)(const struct ns_session *, void *),
				void *arg);

/* Write the final table as a stream of wire records (a "table file", the
 * format natsync-verify reads). Returns the count or a negative errno. */
int64_t nsdp_synth_dump(const struct nsdp_synth *s, const char *path);

#endif
