/*
 * nsb_gw_sched.h - how natsync-gwbench gives the lcore to the gateways:
 * one round at a time (recording off, on, off, ...), or both gateways side
 * by side in slices of --slice-ms.
 */
#ifndef NSB_GW_SCHED_H
#define NSB_GW_SCHED_H

#include <stdint.h>

#include <rte_common.h>

#include "ngw_fwd.h"
#include "nsb_gw.h"
#include "nsb_gw_traffic.h"
#include "nsdp_lane.h"
#include "nsdp_nat.h"
#include "nsdp_table.h"

enum nsb_gw_phase {
	NSB_GW_STANDBY,
	NSB_GW_WARMUP,
	NSB_GW_MEASURE,
	NSB_GW_DONE
};

/* Published by the lcore every iteration, read by the progress lines. */
struct nsb_gw_live {
	uint64_t phase, packets, gw_cycles, phase_cycles;
} __rte_cache_aligned;

/* What the loop did: the gateway's part TSC-timed, stalls apart. */
struct nsb_gw_tally {
	uint64_t packets; /* received on both ports */
	uint64_t gw_packets, gw_cycles; /* in iterations that did not stall */
	uint64_t stalls, stall_cycles; /* iterations that did */
};

struct nsb_gw_round {
	unsigned int index; /* 0-based */
	char label[16]; /* "round N", or "slices" */
	int recording;
	struct nsdp_nat *nat;
	struct nsdp_table *table;
	struct nsb_gw_gen *gen;
	struct nsb_gw_ports *ports;
	struct ngw_fwd *fwd; /* the gateway loop, over ports */
	/* Written by the main thread. */
	int stop;
	struct nsb_gw_live live;
	int done;
	/* Results, valid after rte_eal_wait_lcore(). */
	struct nsb_gw_tally t;
	uint64_t loop_cycles, warm_tx_outside;
	struct nsdp_nat_stats before, after;
	uint64_t sessions_end;
	int failed;
};

/* One round on the worker lcore: a new table and NAT in standby, promoted,
 * warmed up, measured. 0, 1 on failure, -1 when interrupted. */
int nsb_gw_round_run(struct nsb_gw_round *r, unsigned int n_rounds,
		     unsigned int worker, const struct nsdp_nat_conf *conf,
		     struct nsdp_lane *lane);

/* One of the two gateways of --slice-ms: its results as a round (before
 * stays zero, after sums the measured slices), its own generator, and
 * the clocks it sees, which stop while the other gateway runs. */
struct nsb_gw_ctx {
	struct nsb_gw_round res;
	struct nsb_gw_gen gen;
	struct ngw_fwd fwd; /* over ports of its own: nothing to drain */
	uint64_t clock_offset_ns; /* realtime spent paused */
	uint64_t paused_ns, paused_tsc; /* when the last slice ended */
	int active_seen; /* the lcore took the promotion */
	uint64_t all_packets, all_cycles; /* every slice's, for progress */
	double *samples; /* gw pps of each measured slice */
	unsigned int n_samples, max_samples;
};

struct nsb_gw_pair {
	struct nsb_gw_ctx ctx[2]; /* 0: recording off, 1: on */
	const struct nsb_gw_opts *o;
	struct nsb_gw_ports *ports; /* [2], one pair per gateway */
	uint64_t slice_cycles;
	uint64_t phase; /* published, enum nsb_gw_phase */
	int stop, done, failed;
};

/* Both gateways side by side on the worker lcore, in slices; 0, 1 on
 * failure, -1 when interrupted. nsb_gw_pair_close() frees what it made. */
int nsb_gw_pair_run(struct nsb_gw_pair *p, unsigned int worker,
		    const struct nsdp_nat_conf *conf, struct nsdp_lane *lane);
void nsb_gw_pair_close(struct nsb_gw_pair *p);

#endif
