/*
 * natsync_gwbench.c - the natsync-gwbench program: what session recording
 * costs the reference NAT44 gateway, in packets per second per core.
 *
 * One EAL worker lcore runs the gateway's own forwarding loop
 * (gateway/ngw_fwd.h) over two net_ring ports (nsb_gw_ports.c), fed
 * between iterations by a traffic generator in the same thread
 * (nsb_gw_traffic.c). Rounds alternate recording off (the NAT has no
 * lane) and on (it records into a lane that a consumer thread on another
 * CPU drains, standing in for the agent), or with --slice-ms both
 * gateways take turns on the lcore (nsb_gw_sched.c). The medians of each
 * mode and their ratio end the run, in one RESULT line on stdout.
 *
 * This file parses the options, sets up EAL, the mbufs, the ports, the
 * NAT's configuration and the lane, and prints the summary; each round's
 * own figures come from nsb_gw_report.c.
 *
 * Invariants: nothing here touches the NAT's or the table's internals:
 * only nsdp_nat.h, nsdp_table.h and nsdp_lane.h.
 *
 * Not done here: real NICs (net_ring moves pointers, not bytes, so the
 * figures are the NAT's cost without the driver's), several gateway
 * lcores, the store (records are drained and dropped), IP fragments or
 * ICMP.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "ngw_fwd.h"
#include "nsa_host.h"
#include "nsb_gw.h"
#include "nsb_gw_report.h"
#include "nsb_gw_sched.h"
#include "nsb_gw_traffic.h"
#include "nsb_num.h"
#include "nsdp_lane.h"
#include "nsdp_nat.h"
#include "nsdp_stat.h"

#define GWB_EAL_ARGS "--no-huge --no-shconf -m 1024 --no-pci --no-telemetry"
#define GWB_LCORES "0-1"
#define GWB_MBUFS 16383
#define GWB_MBUF_CACHE 256
#define GWB_MAX_FLOWS 10000000u
#define GWB_PROG "natsync-gwbench"

volatile sig_atomic_t nsb_gw_signalled;

static void on_signal(int sig)
{
	nsb_gw_signalled = sig;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-gwbench [options] [-- EAL-ARGS...]\n"
		"\n"
		"Packets per second per core of the reference NAT44 gateway's "
		"lcore loop\n"
		"(net_ring ports, nsdp_nat), session recording off and on, in "
		"alternating\n"
		"rounds: off, on, off, on, ... Each round starts from an empty "
		"table and a\n"
		"standby NAT, promotes it, warms up, then measures.\n"
		"\n"
		"  --flows N        inside flows (default 100000); after the "
		"promotion they\n"
		"                   come in over half a timeout, so that "
		"their refreshes\n"
		"                   spread\n"
		"  --hosts N        on-link inside hosts the flows come from "
		"(default 256,\n"
		"                   at least flows / 64512; the NAT's "
		"neighbour cache\n"
		"                   holds 4096 per port)\n"
		"  --new-pct P      percentage of the flows replaced by new "
		"ones every\n"
		"                   second, decimals allowed (default 10)\n"
		"  --tcp-pct N      percentage of the flows that are TCP (SYN, "
		"data, FIN\n"
		"                   when replaced), the rest UDP (default 0)\n"
		"  --nat64-pct N    percentage of the flows that are UDP from "
		"inside IPv6\n"
		"                   hosts through NAT64 (64:ff9b::/96); a "
		"flow both\n"
		"                   options would take is NAT64 (default 0)\n"
		"  --reply-pct N    percentage of translated packets sent back "
		"as return\n"
		"                   traffic into the outside port (default "
		"50)\n"
		"  --timeout S      idle timeout of every session kind, "
		"seconds (default 2,\n"
		"                   short so that replaced flows expire within "
		"a round)\n"
		"  --warmup S       seconds from promotion to measurement "
		"(default timeout+1)\n"
		"  --seconds S      measured seconds per round (default 5)\n"
		"  --rounds N       rounds per mode (default 3)\n"
		"  --slice-ms N     instead of rounds: both gateways live side "
		"by side, each\n"
		"                   with its own table and clock, taking "
		"turns on the lcore\n"
		"                   every N ms (e.g. 100; warm-up and "
		"measurement count\n"
		"                   each one's own time); the figures are over "
		"all slices,\n"
		"                   and the on/off ratio of each pair of "
		"slices is shown.\n"
		"                   Cancels the drift of a shared machine "
		"(default 0: rounds)\n"
		"  --burst N        rx burst and generator burst, 1..%u "
		"(default %u, as\n"
		"                   natsync-gateway)\n"
		"  --ring-size N    records the lane holds, a power of two "
		"(default 65536)\n"
		"  --defer-us N     the recording gateway defers (holds a new "
		"session's\n"
		"                   first packet until the consumer has "
		"drained its record),\n"
		"                   at most N us (default 0: defer off)\n"
		"  --verify         check every translated packet's checksums "
		"and addresses\n"
		"                   (in the generator, outside the timed "
		"part)\n"
		"  --csv FILE       append one line per round (per gateway "
		"with "
		"--slice-ms)\n"
		"  --eal \"ARGS\"     EAL arguments instead of the default "
		"ones below, e.g.\n"
		"                   \"--in-memory -m 512 --no-pci "
		"--no-telemetry\" for hugepages\n"
		"  -h, --help       this text\n"
		"  -V, --version    the version\n"
		"\n"
		"EAL arguments, unless --eal gives others:\n"
		"  %s\n"
		"then EAL-ARGS (and -l %s unless they give the lcores). The "
		"gateway loop\n"
		"runs on the first worker lcore, the generator in the same "
		"thread, the lane\n"
		"consumer on the main lcore's CPU.\n"
		"\n"
		"gw Mpps: packets the gateway received on both ports per "
		"second spent in\n"
		"its part of the loop (clock read, rx bursts, NAT calls, tx "
		"bursts,\n"
		"housekeeping), TSC-timed; iterations over %.0f ms (the lcore "
		"was\n"
		"preempted) are left out and counted as stalls. loop Mpps: "
		"the same\n"
		"packets per second of the whole loop, generator included.\n"
		"Progress goes to stderr; stdout gets one line per round (per "
		"gateway with\n"
		"--slice-ms), the figures of each mode, and last:\n"
		"RESULT gwbench flows=F new_pct=P pps_off=X pps_on=Y "
		"cost_pct=Z "
		"recorded=R record_drops=D\n"
		"(gw pps: the median of the rounds, or over all slices; "
		"cost_pct "
		"= (1 - on/off)\n"
		"* 100; recorded and record_drops: summed over the measured "
		"seconds of\n"
		"recording).\n"
		"Exit status: 0 done, 1 failure, 2 bad options.\n",
		NSDP_NAT_BURST, NSDP_NAT_BURST, GWB_EAL_ARGS, GWB_LCORES,
		1000.0 / NSB_GW_STALL_DIV);
}

/* Sessions a round may hold: every flow, plus the replaced ones until
 * they expire (a timeout, and up to a second until the expiry sweep
 * reaches them), with a margin. */
static uint32_t sessions_needed(const struct nsb_gw_opts *o)
{
	double replaced =
		(double)o->flows * o->new_pct / 100.0 * (o->timeout_s + 2.0);
	double n = ((double)o->flows + replaced) * 1.25 + 1024;

	return n > (double)UINT32_MAX / 4 ? UINT32_MAX / 4 : (uint32_t)n;
}

static int nat_conf_build(struct nsdp_nat_conf *c, const struct nsb_gw_opts *o,
			  struct rte_mempool *pool)
{
	uint32_t sessions = sessions_needed(o);
	uint64_t addrs = (uint64_t)sessions / NSB_GW_PORTS_PER_ADDR + 2;
	char err[256];

	if (addrs > NSDP_NAT_MAX_POOL) {
		fprintf(stderr,
			"natsync-gwbench: %" PRIu32
			" sessions need more than %u pool addresses; lower "
			"--flows, --new-pct or --timeout\n",
			sessions, NSDP_NAT_MAX_POOL);
		return -EINVAL;
	}
	memset(c, 0, sizeof(*c));
	c->inside_addr = NSB_GW_GW_INSIDE;
	c->pool_first = NSB_GW_POOL_FIRST;
	c->pool_last = NSB_GW_POOL_FIRST + (uint32_t)addrs - 1;
	c->next_hop = NSB_GW_NEXT_HOP;
	c->port_min = 1024;
	c->port_max = 65535;
	c->inside_mac = nsb_gw_inside_mac;
	c->outside_mac = nsb_gw_outside_mac;
	c->gateway_id = 1;
	c->tcp_syn_ms = c->tcp_established_ms = c->tcp_closing_ms = c->udp_ms =
		c->icmp_ms = o->timeout_s * 1000;
	c->max_sessions = sessions;
	c->mbuf_pool = pool;
	if (o->nat64_pct) {
		static const uint8_t wkp[12] = {0, 0x64, 0xff, 0x9b};

		c->inside_addr6[0] = 0xfd;
		c->inside_addr6[15] = 0xfe;
		memcpy(c->nat64_prefix, wkp, sizeof(wkp));
		c->nat64_prefix_len = 96;
	}
	/* Only the recording gateway has a lane, so only it defers. */
	c->defer_max_us = o->defer_us;
	if (nsdp_nat_conf_check(c, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-gwbench: NAT configuration: %s\n",
			err);
		return -EINVAL;
	}
	return 0;
}

/* The options that take a whole number: range, default and field. */
static const struct {
	const char *name;
	uint64_t min, max;
	unsigned int def;
	size_t off; /* of an unsigned int in struct nsb_gw_opts */
} num_opts[] = {
#define NUM(name, min, max, def, field)                                  \
	{                                                                \
		name, min, max, def, offsetof(struct nsb_gw_opts, field) \
	}
	NUM("flows", 1, GWB_MAX_FLOWS, 100000, flows),
	NUM("hosts", 1, 1u << 23, 256, hosts),
	NUM("tcp-pct", 0, 100, 0, tcp_pct),
	NUM("nat64-pct", 0, 100, 0, nat64_pct),
	NUM("reply-pct", 0, 100, 50, reply_pct),
	NUM("timeout", 1, 86400, 2, timeout_s),
	NUM("seconds", 1, 3600, 5, seconds),
	NUM("warmup", 0, 3600, 0, warmup_s),
	NUM("rounds", 1, 100, 3, rounds),
	NUM("burst", 1, NSDP_NAT_BURST, NSDP_NAT_BURST, burst),
	NUM("ring-size", 64, 1u << 24, 65536, ring_size),
	NUM("defer-us", 0, 500000, 0, defer_us),
	NUM("slice-ms", 0, 10000, 0, slice_ms),
#undef NUM
};

#define N_NUM_OPTS RTE_DIM(num_opts)

static unsigned int *num_field(struct nsb_gw_opts *o, size_t i)
{
	return (unsigned int *)((char *)o + num_opts[i].off);
}

/* 0, 1 when the program should exit 0 (help, version), -1 on error. */
static int parse_options(int argc, char **argv, struct nsb_gw_opts *o)
{
	const struct option more[] = {
		{"new-pct", required_argument, NULL, 'p'},
		{"verify", no_argument, &o->verify, 1},
		{"csv", required_argument, NULL, 'c'},
		{"eal", required_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct option opts[N_NUM_OPTS + RTE_DIM(more)];
	uint64_t v;
	int opt, idx = 0, warmup_set = 0;

	*o = (struct nsb_gw_opts){.new_pct = 10, .eal_args = GWB_EAL_ARGS};
	for (size_t i = 0; i < N_NUM_OPTS; i++) {
		opts[i] = (struct option){num_opts[i].name, required_argument,
					  NULL, 0};
		*num_field(o, i) = num_opts[i].def;
	}
	memcpy(opts + N_NUM_OPTS, more, sizeof(more));
	while ((opt = getopt_long(argc, argv, "hV", opts, &idx)) != -1) {
		if (opt == 0 && (size_t)idx < N_NUM_OPTS) {
			if (nsb_parse_u64(GWB_PROG, num_opts[idx].name, optarg,
					  num_opts[idx].min, num_opts[idx].max,
					  &v))
				return -1;
			*num_field(o, (size_t)idx) = (unsigned int)v;
			warmup_set |= num_field(o, (size_t)idx) == &o->warmup_s;
			if (num_field(o, (size_t)idx) == &o->ring_size &&
			    (v & (v - 1))) {
				fprintf(stderr, GWB_PROG ": --ring-size: not "
							 "a power of two\n");
				return -1;
			}
			continue;
		}
		switch (opt) {
		case 0: /* --verify */
			break;
		case 'p':
			if (nsb_parse_pct(GWB_PROG, "new-pct", optarg,
					  &o->new_pct))
				return -1;
			break;
		case 'c':
			o->csv = optarg;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'e':
			o->eal_args = optarg;
			break;
		case 'V':
			printf(GWB_PROG " %s\n", NATSYNC_VERSION);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (!warmup_set)
		o->warmup_s = o->timeout_s + 1;
	if (o->hosts > o->flows)
		o->hosts = o->flows;
	if (o->hosts <
	    (o->flows + NSB_GW_PORTS_PER_ADDR - 1) / NSB_GW_PORTS_PER_ADDR)
		o->hosts = (o->flows + NSB_GW_PORTS_PER_ADDR - 1) /
			   NSB_GW_PORTS_PER_ADDR;
	return 0;
}

/* What RESULT reports, whichever way it was measured. */
struct gwb_summary {
	double pps_off, pps_on; /* medians of the gateway part */
	double loop_off, loop_on; /* medians of the whole loop */
	uint64_t recorded, record_drops;
};

/* Rounds off, on, off, on, ...: 0, 1 on failure, -1 when interrupted. */
static int run_rounds(const struct nsb_gw_opts *o, struct nsb_gw_ports *ports,
		      struct nsb_gw_gen *gen, unsigned int worker,
		      const struct nsdp_nat_conf *conf, struct nsdp_lane *lane,
		      struct gwb_summary *sum)
{
	static struct nsb_gw_round rounds[200];
	static struct ngw_fwd fwd;
	double off[100], on[100], loop_off[100], loop_on[100];
	unsigned int n_off = 0, n_on = 0, n_rounds = 2 * o->rounds;

	ngw_fwd_init(&fwd, NULL, ports->inside, ports->outside);
	fwd.burst = (uint16_t)o->burst;
	for (unsigned int i = 0; i < n_rounds; i++) {
		struct nsb_gw_round *r = &rounds[i];
		int st;

		memset(r, 0, sizeof(*r));
		r->index = i;
		snprintf(r->label, sizeof(r->label), "round %u", i + 1);
		r->recording = i % 2;
		r->gen = gen;
		r->ports = ports;
		r->fwd = &fwd;
		st = nsb_gw_round_run(r, n_rounds, worker, conf, lane);
		if (st < 0) {
			fprintf(stderr, "natsync-gwbench: interrupted\n");
			return -1;
		}
		if (st > 0 || nsb_gw_round_report(r, gen) != 0)
			return 1;
		if (o->csv)
			nsb_gw_csv_append(o->csv, o, r);
		if (r->recording) {
			on[n_on] = nsb_gw_round_gw_pps(r);
			loop_on[n_on++] = nsb_gw_round_loop_pps(r);
			sum->recorded += r->after.recorded - r->before.recorded;
			sum->record_drops +=
				r->after.record_drops - r->before.record_drops;
		} else {
			off[n_off] = nsb_gw_round_gw_pps(r);
			loop_off[n_off++] = nsb_gw_round_loop_pps(r);
		}
	}
	sum->pps_off = nsb_median(off, n_off);
	sum->pps_on = nsb_median(on, n_on);
	sum->loop_off = nsb_median(loop_off, n_off);
	sum->loop_on = nsb_median(loop_on, n_on);
	return 0;
}

/* Both gateways side by side in slices: 0, 1 on failure, -1 when
 * interrupted. The gateway figures are over all measured slices (the
 * medians of slices hide the slow ones); the on/off ratio of each pair
 * of slices, a check that noise does not decide the result, is printed
 * besides. */
static int run_slices(const struct nsb_gw_opts *o, struct nsb_gw_ports *ports,
		      unsigned int worker, const struct nsdp_nat_conf *conf,
		      struct nsdp_lane *lane, struct gwb_summary *sum)
{
	static struct nsb_gw_pair pair;
	struct nsb_gw_ctx *off = &pair.ctx[0], *on = &pair.ctx[1];
	unsigned int n;
	double *ratios;
	int st;

	memset(&pair, 0, sizeof(pair));
	pair.o = o;
	pair.ports = ports;
	st = nsb_gw_pair_run(&pair, worker, conf, lane);
	if (st < 0)
		fprintf(stderr, "natsync-gwbench: interrupted\n");
	if (st != 0 || nsb_gw_round_report(&off->res, &off->gen) != 0 ||
	    nsb_gw_round_report(&on->res, &on->gen) != 0) {
		nsb_gw_pair_close(&pair);
		return st ? st : 1;
	}
	if (o->csv) {
		nsb_gw_csv_append(o->csv, o, &off->res);
		nsb_gw_csv_append(o->csv, o, &on->res);
	}
	n = RTE_MIN(off->n_samples, on->n_samples);
	ratios = calloc(n ? n : 1, sizeof(*ratios));
	for (unsigned int i = 0; ratios && i < n; i++)
		ratios[i] = off->samples[i] > 0
				    ? on->samples[i] / off->samples[i]
				    : 0.0;
	if (ratios && n) {
		qsort(ratios, n, sizeof(*ratios), nsb_cmp_double);
		printf("slice pairs: %u, on/off per pair: median %.4f, "
		       "quartiles %.4f..%.4f; median slice gw Mpps: off %.3f "
		       "on %.3f\n",
		       n, ratios[n / 2], ratios[n / 4], ratios[(3 * n) / 4],
		       nsb_median(off->samples, off->n_samples) / 1e6,
		       nsb_median(on->samples, on->n_samples) / 1e6);
	}
	free(ratios);
	sum->pps_off = nsb_gw_round_gw_pps(&off->res);
	sum->pps_on = nsb_gw_round_gw_pps(&on->res);
	sum->loop_off = nsb_gw_round_loop_pps(&off->res);
	sum->loop_on = nsb_gw_round_loop_pps(&on->res);
	sum->recorded = on->res.after.recorded;
	sum->record_drops = on->res.after.record_drops;
	nsb_gw_pair_close(&pair);
	return 0;
}

int main(int argc, char **argv)
{
	static struct nsb_gw_opts o;
	static struct nsb_gw_ports ports[2];
	struct rte_mempool *pool = NULL;
	static struct nsb_gw_gen gen;
	static struct nsb_gw_consumer consumer;
	struct gwb_summary sum = {0};
	struct nsdp_nat_conf conf;
	struct nsdp_lane *lane = NULL;
	unsigned int worker;
	double pps_off, pps_on, cost;
	char err[1024];
	int rc = 1, st, consumer_running = 0;

	switch (parse_options(argc, argv, &o)) {
	case 0:
		break;
	case 1:
		return 0;
	default:
		return 2;
	}
	if (nsa_eal_start("natsync-gwbench", o.eal_args, argc - optind,
			  argv + optind, GWB_LCORES, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-gwbench: %s\n", err);
		return 2;
	}
	worker = rte_get_next_lcore((unsigned int)-1, 1, 0);
	if (worker >= RTE_MAX_LCORE) {
		fprintf(stderr, "natsync-gwbench: needs an EAL worker lcore "
				"for the gateway loop (e.g. -l 0-1)\n");
		rte_eal_cleanup();
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	pool = rte_pktmbuf_pool_create("gwb_mbufs", GWB_MBUFS, GWB_MBUF_CACHE,
				       0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       (int)rte_socket_id());
	if (!pool) {
		fprintf(stderr, "natsync-gwbench: mbuf pool: %s\n",
			rte_strerror(rte_errno));
		goto out;
	}
	if (nsb_gw_ports_create(&ports[0], 0, pool) != 0 ||
	    (o.slice_ms && nsb_gw_ports_create(&ports[1], 1, pool) != 0) ||
	    nsb_gw_gen_init(&gen, &o, &ports[0]) != 0 ||
	    nat_conf_build(&conf, &o, pool) != 0)
		goto out;
	lane = nsdp_lane_create(0, o.ring_size, (int)rte_socket_id());
	if (!lane) {
		fprintf(stderr, "natsync-gwbench: lane: %s\n",
			rte_strerror(rte_errno));
		goto out;
	}
	consumer.lane = lane;
	if (nsb_gw_consumer_start(&consumer) != 0) {
		fprintf(stderr, "natsync-gwbench: cannot start the consumer\n");
		goto out;
	}
	consumer_running = 1;

	fprintf(stderr,
		"gwbench: flows=%" PRIu32 " hosts=%" PRIu32
		" new_pct=%g tcp_pct=%u nat64_pct=%u reply_pct=%u timeout=%us "
		"warmup=%us "
		"seconds=%u %s=%u burst=%u sessions<=%" PRIu32 " pool=%" PRIu32
		" addresses, gateway on lcore %u (cpu %u), tsc %.3f GHz\n",
		o.flows, o.hosts, o.new_pct, o.tcp_pct, o.nat64_pct,
		o.reply_pct, o.timeout_s, o.warmup_s, o.seconds,
		o.slice_ms ? "slice_ms" : "rounds",
		o.slice_ms ? o.slice_ms : o.rounds, o.burst, conf.max_sessions,
		conf.pool_last - conf.pool_first + 1, worker,
		rte_lcore_to_cpu_id((int)worker),
		(double)rte_get_tsc_hz() / 1e9);
	if (o.slice_ms)
		st = run_slices(&o, ports, worker, &conf, lane, &sum);
	else
		st = run_rounds(&o, &ports[0], &gen, worker, &conf, lane, &sum);
	if (st != 0)
		goto out;
	pps_off = sum.pps_off;
	pps_on = sum.pps_on;
	cost = pps_off > 0 ? (1.0 - pps_on / pps_off) * 100.0 : 0.0;
	printf("gw Mpps/core: off %.3f on %.3f (on/off %.4f); "
	       "whole loop with generator: off %.3f on %.3f; records drained "
	       "%" PRIu64 "\n",
	       pps_off / 1e6, pps_on / 1e6, pps_off > 0 ? pps_on / pps_off : 0,
	       sum.loop_off / 1e6, sum.loop_on / 1e6,
	       NSDP_STAT_READ(consumer.drained));
	printf("RESULT gwbench flows=%" PRIu32 " new_pct=%g pps_off=%.0f "
	       "pps_on=%.0f cost_pct=%.2f recorded=%" PRIu64
	       " record_drops=%" PRIu64 "\n",
	       o.flows, o.new_pct, pps_off, pps_on, cost, sum.recorded,
	       sum.record_drops);
	fflush(stdout);
	rc = 0;
out:
	if (consumer_running)
		nsb_gw_consumer_stop(&consumer);
	if (lane)
		nsdp_lane_free(lane);
	nsb_gw_gen_free(&gen);
	nsb_gw_ports_close(&ports[0]);
	nsb_gw_ports_close(&ports[1]);
	rte_mempool_free(pool);
	rte_eal_cleanup();
	return rc;
}
