/*
 * natsync_gwbench.c - the natsync-gwbench program: what session recording
 * costs the reference NAT44 gateway, in packets per second per core.
 *
 * One EAL worker lcore runs a gateway's loop over two net_ring ports,
 * exactly as a gateway lcore does: receive a burst on the inside port,
 * nsdp_nat_inside(), transmit the tx lists; the same for the outside
 * port; nsdp_nat_housekeep() once per iteration. Before each iteration,
 * in the same thread, a traffic generator keeps the inside port's rx ring
 * fed with UDP (optionally TCP) frames of --flows flows from --hosts
 * inside hosts, replaces --new-pct of the flows every second by new ones
 * (so that sessions are created, refreshed and expire), drains the
 * outside port's tx ring, answers ARP requests for the next hop and the
 * inside hosts, and reflects --reply-pct of the translated packets back
 * into the outside port as return traffic. Only the gateway's part of the iteration (clock
 * read, rx bursts, NAT calls, tx bursts, housekeeping) is timed with the
 * TSC; the whole iteration, generator included, is reported beside it.
 * Iterations that took over a millisecond (the lcore was preempted: the
 * machine is shared) are left out of the gateway figure and counted.
 *
 * Rounds alternate recording off (the NAT has no lane) and on (it records
 * into a lane that a consumer thread on another CPU drains, standing in
 * for the agent). Every round starts from a new, empty table and a new
 * NAT in standby, promoted with nsdp_nat_activate() while the lcore
 * housekeeps, warms up, then measures; the generator replays the same
 * traffic in every round. The medians of each mode and their ratio end
 * the run, in one RESULT line on stdout. With --slice-ms both gateways
 * live side by side instead, each with its own table, ports, generator
 * and clock (which stops while the other runs), taking turns on the
 * lcore every few milliseconds: what a shared machine does to one it
 * does to the other, and the pairs of slices give the ratio.
 *
 * Invariants: the generator and the gateway share one lcore and its mbuf
 * cache; every mbuf is either in a ring, on a tx list or back in the pool
 * at the end of a round. Nothing here touches the NAT's or the table's
 * internals: only nsdp_nat.h, nsdp_table.h and nsdp_lane.h.
 *
 * Not done here: real NICs (net_ring moves pointers, not bytes, so the
 * figures are the NAT's cost without the driver's), several gateway
 * lcores, the store (records are drained and dropped), IP fragments or
 * ICMP.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "nsa_host.h"
#include "nsdp_lane.h"
#include "nsdp_nat.h"
#include "nsdp_table.h"
#include "nsdp_time.h"

#define GWB_EAL_ARGS "--no-huge --no-shconf -m 1024 --no-pci --no-telemetry"
#define GWB_LCORES "0-1"
#define GWB_PORT_RING 1024 /* each port ring, in mbufs */
#define GWB_MBUFS 16383
#define GWB_MBUF_CACHE 256
#define GWB_DRAIN 256 /* mbufs the generator takes off a tx ring at once */
#define GWB_CONSUME 512 /* records the lane consumer takes at once */
#define GWB_ACTIVATE_MS 5000
/* A gateway iteration longer than 1/GWB_STALL_DIV s (some 50 times the
 * usual) was preempted, not slow: it is left out of the gateway figure
 * and counted. */
#define GWB_STALL_DIV 1000
#define GWB_MAX_FLOWS 10000000u
#define GWB_PORTS_PER_ADDR (65535u - 1024u + 1u)

/* Addresses (host byte order): RFC 2544's benchmarking range outside. */
#define GWB_INSIDE_NET 0x0a000000u /* 10.0.0.0/8: host h is 10.0.0.0 + 1 + h */
#define GWB_INSIDE_MASK 0xff000000u
#define GWB_GW_INSIDE 0x0afffffeu /* 10.255.255.254 */
#define GWB_NEXT_HOP 0xc6120001u /* 198.18.0.1 */
#define GWB_POOL_FIRST 0xc6120101u /* 198.18.1.1 */
#define GWB_REMOTE_NET 0xc6130000u /* 198.19.0.0/16: the servers */
#define GWB_REMOTES 4093u
#define GWB_DPORT 443

/* A 60-byte frame (64 on the wire): Ethernet, IPv4, L4 header, payload. */
#define GWB_FRAME 60
#define GWB_L3 RTE_ETHER_HDR_LEN
#define GWB_L4 (GWB_L3 + (int)sizeof(struct rte_ipv4_hdr))
#define GWB_IP_LEN (GWB_FRAME - GWB_L3)

static const struct rte_ether_addr gwb_gw_inside_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x01, 0x01}};
static const struct rte_ether_addr gwb_gw_outside_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x02, 0x01}};
static const struct rte_ether_addr gwb_host_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x01, 0x02}};
static const struct rte_ether_addr gwb_next_hop_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x02, 0x02}};

struct gwb_opts {
	uint32_t flows;
	uint32_t hosts; /* inside hosts the flows come from */
	double new_pct; /* of the flows, replaced per second */
	unsigned int tcp_pct; /* of the flows, TCP rather than UDP */
	unsigned int reply_pct; /* of translated packets, reflected back */
	unsigned int timeout_s, seconds, warmup_s, rounds, burst;
	unsigned int ring_size; /* the lane's */
	unsigned int slice_ms; /* 0: rounds; else both gateways in slices */
	int verify;
	const char *csv;
	const char *eal_args; /* replaces GWB_EAL_ARGS */
};

/* The two ring-backed ports and the rings behind them: the gateway
 * receives from *_rx and transmits into *_tx; the generator does the
 * opposite. */
struct gwb_ports {
	uint16_t inside, outside;
	int inside_up, outside_up; /* started, to stop and close */
	struct rte_ring *in_rx, *in_tx, *out_rx, *out_tx;
	struct rte_mempool *pool;
};

struct gwb_gen {
	const struct gwb_opts *o;
	struct gwb_ports *ports;
	uint8_t udp_tmpl[GWB_FRAME], tcp_tmpl[GWB_FRAME];
	uint32_t per_host; /* flow slots per inside host */
	/* Per TCP slot: the source port of the flow whose SYN was sent, 0
	 * when the next packet must be a SYN. NULL without TCP. */
	uint16_t *tcp_state;
	uint32_t cursor; /* next slot to send from */
	uint32_t live_slots; /* slots in use: all but while ramping up */
	uint64_t ramp_cycles; /* after promotion, to bring every slot in */
	/* Flows replaced so far, in slot order from slot 0: slot i is in
	 * generation ret_q + (i < ret_r). */
	uint64_t retired, ret_q;
	uint32_t ret_r;
	uint64_t churn_start; /* TSC; 0: churn not started */
	double new_per_cycle;
	unsigned int reply_acc;
	uint64_t arp_answered, bad_out, bad_in;
};

enum gwb_phase { PH_STANDBY, PH_WARMUP, PH_MEASURE, PH_DONE };

/* Published by the lcore every iteration, read by the progress lines. */
struct gwb_live {
	uint64_t phase, packets, gw_cycles, phase_cycles;
} __rte_cache_aligned;

struct gwb_round {
	unsigned int index; /* 0-based */
	char label[16]; /* "round N", or "slices" */
	int recording;
	struct nsdp_nat *nat;
	struct nsdp_table *table;
	struct gwb_gen *gen;
	struct gwb_ports *ports;
	/* Written by the main thread. */
	int stop;
	struct gwb_live live;
	int done;
	/* Results, valid after rte_eal_wait_lcore(). */
	uint64_t packets; /* received on both ports */
	uint64_t gw_packets, gw_cycles; /* in iterations that did not stall */
	uint64_t stalls, stall_cycles; /* iterations that did */
	uint64_t loop_cycles, warm_tx_outside;
	struct nsdp_nat_stats before, after;
	uint64_t sessions_end;
	int failed;
};

struct gwb_consumer {
	struct nsdp_lane *lane;
	pthread_t thread;
	int stop;
	uint64_t drained;
};

/* A gateway loop's ports and tx lists (large, so not on the stack). */
struct gwb_gw {
	uint16_t inside, outside;
	unsigned int burst;
	struct nsdp_nat_tx tx;
};

static volatile sig_atomic_t gwb_signalled;
/* The rounds' gateway loop. */
static struct gwb_gw gwb_gw;

static void on_signal(int sig)
{
	gwb_signalled = sig;
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
		1000.0 / GWB_STALL_DIV);
}

static void sleep_us(unsigned int us)
{
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};

	nanosleep(&ts, NULL);
}

static uint32_t remote_of(uint32_t slot)
{
	return GWB_REMOTE_NET + 1 + slot % GWB_REMOTES;
}

/* ---- the traffic generator ---------------------------------------- */

static void template_build(uint8_t *frame, uint8_t proto)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + GWB_L3);

	memset(frame, 0, GWB_FRAME);
	eth->dst_addr = gwb_gw_inside_mac;
	eth->src_addr = gwb_host_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16(GWB_IP_LEN);
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	if (proto == IPPROTO_UDP) {
		struct rte_udp_hdr *udp =
			(struct rte_udp_hdr *)(frame + GWB_L4);

		udp->dst_port = rte_cpu_to_be_16(GWB_DPORT);
		udp->dgram_len = rte_cpu_to_be_16(GWB_IP_LEN -
						  sizeof(struct rte_ipv4_hdr));
	} else {
		struct rte_tcp_hdr *tcp =
			(struct rte_tcp_hdr *)(frame + GWB_L4);

		tcp->dst_port = rte_cpu_to_be_16(GWB_DPORT);
		tcp->sent_seq = rte_cpu_to_be_32(1);
		tcp->data_off = (sizeof(struct rte_tcp_hdr) / 4) << 4;
		tcp->rx_win = rte_cpu_to_be_16(65535);
	}
}

static int gen_init(struct gwb_gen *g, const struct gwb_opts *o,
		    struct gwb_ports *ports)
{
	memset(g, 0, sizeof(*g));
	g->o = o;
	g->ports = ports;
	g->per_host = (o->flows + o->hosts - 1) / o->hosts;
	template_build(g->udp_tmpl, IPPROTO_UDP);
	template_build(g->tcp_tmpl, IPPROTO_TCP);
	if (o->tcp_pct) {
		g->tcp_state = calloc(o->flows, sizeof(*g->tcp_state));
		if (!g->tcp_state)
			return -ENOMEM;
	}
	return 0;
}

/* The same traffic again, from the start, for a new round. */
static void gen_reset(struct gwb_gen *g)
{
	g->cursor = 0;
	g->live_slots = g->o->flows;
	g->retired = g->ret_q = 0;
	g->ret_r = 0;
	g->churn_start = 0;
	g->reply_acc = 0;
	g->arp_answered = 0;
	g->bad_out = g->bad_in = 0;
	if (g->tcp_state)
		memset(g->tcp_state, 0, g->o->flows * sizeof(*g->tcp_state));
}

/* The gateway took its promotion (the lcore saw it in the iteration
 * that ended at tsc). What it received as a standby was dropped, so the
 * traffic starts again: TCP flows with a SYN, and the flows come in over
 * the first half timeout, so that their refreshes (every half timeout)
 * spread evenly instead of coming in one burst a second; from then on
 * they are replaced at --new-pct. */
static void gen_promoted(struct gwb_gen *g, uint64_t tsc)
{
	gen_reset(g);
	g->churn_start = tsc;
	g->new_per_cycle = (double)g->o->flows * g->o->new_pct / 100.0 /
			   (double)rte_get_tsc_hz();
	g->ramp_cycles = (uint64_t)g->o->timeout_s * rte_get_tsc_hz() / 2;
	g->live_slots = 1;
}

static void gen_churn(struct gwb_gen *g, uint64_t tsc)
{
	uint64_t due;

	if (!g->churn_start)
		return;
	if (g->live_slots < g->o->flows) {
		uint64_t t = tsc - g->churn_start;

		g->live_slots =
			t >= g->ramp_cycles
				? g->o->flows
				: 1 + (uint32_t)((double)g->o->flows *
						 (double)t /
						 (double)g->ramp_cycles);
	}
	due = (uint64_t)((double)(tsc - g->churn_start) * g->new_per_cycle);
	if (due == g->retired)
		return;
	g->retired = due;
	g->ret_q = due / g->o->flows;
	g->ret_r = (uint32_t)(due % g->o->flows);
}

/* Slot i is flow i / hosts of inside host i % hosts. Its successive
 * generations take source ports per_host apart, so that a new flow never
 * reuses the tuple of one still in the table. */
static void gen_packet(struct gwb_gen *g, struct rte_mbuf *m, uint32_t slot)
{
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + GWB_L3);
	uint64_t gen = g->ret_q + (slot < g->ret_r);
	uint16_t sport =
		(uint16_t)(1024 + (slot / g->o->hosts + gen * g->per_host) %
					  GWB_PORTS_PER_ADDR);
	int tcp = g->tcp_state && slot % 100 < g->o->tcp_pct;

	memcpy(frame, tcp ? g->tcp_tmpl : g->udp_tmpl, GWB_FRAME);
	m->data_len = GWB_FRAME;
	m->pkt_len = GWB_FRAME;
	ip->src_addr =
		rte_cpu_to_be_32(GWB_INSIDE_NET + 1 + slot % g->o->hosts);
	ip->dst_addr = rte_cpu_to_be_32(remote_of(slot));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	if (tcp) {
		struct rte_tcp_hdr *th = (struct rte_tcp_hdr *)(frame + GWB_L4);
		uint16_t *st = &g->tcp_state[slot];

		if (*st == 0) {
			th->tcp_flags = RTE_TCP_SYN_FLAG;
			*st = sport;
		} else if (*st == sport) {
			th->tcp_flags = RTE_TCP_ACK_FLAG | RTE_TCP_PSH_FLAG;
		} else {
			/* The flow was replaced: close the old one first. */
			th->tcp_flags = RTE_TCP_FIN_FLAG | RTE_TCP_ACK_FLAG;
			sport = *st;
			*st = 0;
		}
		th->src_port = rte_cpu_to_be_16(sport);
		th->cksum = rte_ipv4_udptcp_cksum(ip, th);
	} else {
		struct rte_udp_hdr *uh = (struct rte_udp_hdr *)(frame + GWB_L4);

		uh->src_port = rte_cpu_to_be_16(sport);
		uh->dgram_cksum = rte_ipv4_udptcp_cksum(ip, uh);
	}
}

/* Keep between one and two bursts waiting on the inside port. */
static void gen_feed(struct gwb_gen *g)
{
	struct rte_mbuf *m[NSDP_NAT_BURST];
	unsigned int n = g->o->burst, done;

	if (rte_ring_count(g->ports->in_rx) >= n ||
	    rte_pktmbuf_alloc_bulk(g->ports->pool, m, n) != 0)
		return;
	for (unsigned int i = 0; i < n; i++) {
		gen_packet(g, m[i], g->cursor);
		if (++g->cursor >= g->live_slots)
			g->cursor = 0;
	}
	done = rte_ring_sp_enqueue_burst(g->ports->in_rx, (void **)m, n, NULL);
	if (done < n)
		rte_pktmbuf_free_bulk(m + done, n - done);
}

/* Turn an ARP request for an address in [lo, hi] into the reply of
 * mac, in place; 1 if it did. */
static int arp_answer(struct rte_mbuf *m, uint32_t lo, uint32_t hi,
		      uint32_t except, const struct rte_ether_addr *mac)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp;
	uint32_t tip, sip;

	if (m->data_len < RTE_ETHER_HDR_LEN + sizeof(*arp))
		return 0;
	arp = (struct rte_arp_hdr *)(eth + 1);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST))
		return 0;
	tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
	sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
	if (tip < lo || tip > hi || tip == except || tip == sip)
		return 0;
	eth->dst_addr = eth->src_addr;
	eth->src_addr = *mac;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	arp->arp_data.arp_tha = arp->arp_data.arp_sha;
	arp->arp_data.arp_tip = arp->arp_data.arp_sip;
	arp->arp_data.arp_sha = *mac;
	arp->arp_data.arp_sip = rte_cpu_to_be_32(tip);
	return 1;
}

/* A translated IPv4 packet with good checksums whose source (outside)
 * or destination (inside) is in [lo, hi]. */
static int packet_ok(struct rte_mbuf *m, int outside, uint32_t lo, uint32_t hi)
{
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + GWB_L3);
	uint32_t addr;
	uint16_t saved, zero = 0;
	size_t ck;
	int ok;

	if (m->data_len < GWB_FRAME || rte_raw_cksum(ip, sizeof(*ip)) != 0xffff)
		return 0;
	addr = rte_be_to_cpu_32(outside ? ip->src_addr : ip->dst_addr);
	if (addr < lo || addr > hi)
		return 0;
	if (ip->next_proto_id == IPPROTO_UDP)
		ck = GWB_L4 + offsetof(struct rte_udp_hdr, dgram_cksum);
	else if (ip->next_proto_id == IPPROTO_TCP)
		ck = GWB_L4 + offsetof(struct rte_tcp_hdr, cksum);
	else
		return 0;
	memcpy(&saved, frame + ck, sizeof(saved));
	memcpy(frame + ck, &zero, sizeof(zero));
	ok = rte_ipv4_udptcp_cksum(ip, frame + GWB_L4) == saved;
	memcpy(frame + ck, &saved, sizeof(saved));
	return ok;
}

/* Send a translated packet back as the server's answer: swap the
 * addresses and ports (the checksums do not change), answer a SYN with
 * a SYN-ACK. */
static void reflect(struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *l4 = (struct rte_udp_hdr *)(ip + 1);
	struct rte_ether_addr mac = eth->dst_addr;
	uint32_t a = ip->src_addr;
	uint16_t p = l4->src_port;

	eth->dst_addr = eth->src_addr;
	eth->src_addr = mac;
	ip->src_addr = ip->dst_addr;
	ip->dst_addr = a;
	l4->src_port = l4->dst_port;
	l4->dst_port = p;
	if (ip->next_proto_id == IPPROTO_TCP) {
		struct rte_tcp_hdr *th = (struct rte_tcp_hdr *)l4;

		if (th->tcp_flags == RTE_TCP_SYN_FLAG) {
			th->tcp_flags = RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG;
			th->cksum = 0;
			th->cksum = rte_ipv4_udptcp_cksum(ip, th);
		}
	}
}

/* Take what the gateway sent on the outside: answer ARP for the next
 * hop, reflect a share of the packets as return traffic, free the rest. */
static void gen_drain_outside(struct gwb_gen *g)
{
	struct rte_mbuf *m[GWB_DRAIN], *back[GWB_DRAIN], *gone[GWB_DRAIN];
	unsigned int n, nb = 0, ng = 0, done;
	uint32_t pool_last = GWB_POOL_FIRST + 255;

	n = rte_ring_sc_dequeue_burst(g->ports->out_tx, (void **)m, GWB_DRAIN,
				      NULL);
	for (unsigned int i = 0; i < n; i++) {
		struct rte_ether_hdr *eth =
			rte_pktmbuf_mtod(m[i], struct rte_ether_hdr *);

		if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
			if (arp_answer(m[i], GWB_NEXT_HOP, GWB_NEXT_HOP, 0,
				       &gwb_next_hop_mac)) {
				back[nb++] = m[i];
				g->arp_answered++;
			} else {
				gone[ng++] = m[i];
			}
			continue;
		}
		if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
			gone[ng++] = m[i];
			continue;
		}
		if (g->o->verify &&
		    !packet_ok(m[i], 1, GWB_POOL_FIRST, pool_last))
			g->bad_out++;
		g->reply_acc += g->o->reply_pct;
		if (g->reply_acc >= 100) {
			g->reply_acc -= 100;
			reflect(m[i]);
			back[nb++] = m[i];
		} else {
			gone[ng++] = m[i];
		}
	}
	done = nb ? rte_ring_sp_enqueue_burst(g->ports->out_rx, (void **)back,
					      nb, NULL)
		  : 0;
	if (done < nb)
		rte_pktmbuf_free_bulk(back + done, nb - done);
	if (ng)
		rte_pktmbuf_free_bulk(gone, ng);
}

/* Take what the gateway sent on the inside: answer ARP for the inside
 * hosts, free the rest (the translated return traffic). */
static void gen_drain_inside(struct gwb_gen *g)
{
	struct rte_mbuf *m[GWB_DRAIN], *back[GWB_DRAIN], *gone[GWB_DRAIN];
	unsigned int n, nb = 0, ng = 0, done;

	n = rte_ring_sc_dequeue_burst(g->ports->in_tx, (void **)m, GWB_DRAIN,
				      NULL);
	for (unsigned int i = 0; i < n; i++) {
		struct rte_ether_hdr *eth =
			rte_pktmbuf_mtod(m[i], struct rte_ether_hdr *);

		if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP) &&
		    arp_answer(m[i], GWB_INSIDE_NET,
			       GWB_INSIDE_NET | ~GWB_INSIDE_MASK, GWB_GW_INSIDE,
			       &gwb_host_mac)) {
			back[nb++] = m[i];
			g->arp_answered++;
			continue;
		}
		if (g->o->verify &&
		    eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) &&
		    !packet_ok(m[i], 0, GWB_INSIDE_NET + 1,
			       GWB_INSIDE_NET + g->o->hosts))
			g->bad_in++;
		gone[ng++] = m[i];
	}
	done = nb ? rte_ring_sp_enqueue_burst(g->ports->in_rx, (void **)back,
					      nb, NULL)
		  : 0;
	if (done < nb)
		rte_pktmbuf_free_bulk(back + done, nb - done);
	if (ng)
		rte_pktmbuf_free_bulk(gone, ng);
}

static void gen_step(struct gwb_gen *g, uint64_t tsc)
{
	gen_churn(g, tsc);
	gen_drain_outside(g);
	gen_drain_inside(g);
	gen_feed(g);
}

/* ---- the gateway's loop ------------------------------------------- */

/* Transmit what the NAT put on a tx list, as natsync-gateway does: in
 * bursts until the port takes no more, then free the rest. */
static void gw_send(uint16_t port, struct rte_mbuf **pkts, unsigned int n)
{
	unsigned int sent = 0;

	while (sent < n) {
		uint16_t k = rte_eth_tx_burst(
			port, 0, pkts + sent,
			(uint16_t)RTE_MIN(n - sent,
					  (unsigned int)NSDP_NAT_BURST));

		if (k == 0)
			break;
		sent += k;
	}
	if (sent < n)
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
}

/* One iteration of a gateway lcore, the shape of natsync-gateway's
 * forwarding loop; returns the packets received. The NAT's clock runs
 * clock_offset_ns behind the real one (the time it spent paused). */
static unsigned int gw_iteration(struct gwb_gw *gw, struct nsdp_nat *nat,
				 uint64_t clock_offset_ns)
{
	struct rte_mbuf *pkts[NSDP_NAT_BURST];
	struct nsdp_nat_tx *tx = &gw->tx;
	uint64_t now_ns = nsdp_realtime_ns() - clock_offset_ns;
	uint16_t n_in, n_out;

	tx->n_inside = tx->n_outside = 0;
	n_in = rte_eth_rx_burst(gw->inside, 0, pkts, (uint16_t)gw->burst);
	if (n_in)
		nsdp_nat_inside(nat, pkts, n_in, now_ns, tx);
	n_out = rte_eth_rx_burst(gw->outside, 0, pkts, (uint16_t)gw->burst);
	if (n_out)
		nsdp_nat_outside(nat, pkts, n_out, now_ns, tx);
	nsdp_nat_housekeep(nat, now_ns, tx);
	if (tx->n_outside)
		gw_send(gw->outside, tx->outside, tx->n_outside);
	if (tx->n_inside)
		gw_send(gw->inside, tx->inside, tx->n_inside);
	return (unsigned int)n_in + n_out;
}

static void ring_free_all(struct rte_ring *r)
{
	struct rte_mbuf *m[GWB_DRAIN];
	unsigned int n;

	while ((n = rte_ring_sc_dequeue_burst(r, (void **)m, GWB_DRAIN, NULL)) >
	       0)
		rte_pktmbuf_free_bulk(m, n);
}

static void live_publish(struct gwb_live *l, enum gwb_phase ph, uint64_t pkts,
			 uint64_t gw_cycles, uint64_t phase_cycles)
{
	__atomic_store_n(&l->phase, (uint64_t)ph, __ATOMIC_RELAXED);
	__atomic_store_n(&l->packets, pkts, __ATOMIC_RELAXED);
	__atomic_store_n(&l->gw_cycles, gw_cycles, __ATOMIC_RELAXED);
	__atomic_store_n(&l->phase_cycles, phase_cycles, __ATOMIC_RELAXED);
}

/* The lcore's side of a round: standby until promoted, warm-up, then
 * the measured seconds. */
static int round_lcore(void *arg)
{
	struct gwb_round *r = arg;
	const struct gwb_opts *o = r->gen->o;
	struct gwb_gw *gw = &gwb_gw;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t warm = (uint64_t)o->warmup_s * hz,
		 meas = (uint64_t)o->seconds * hz;
	uint64_t stall = hz / GWB_STALL_DIV;
	uint64_t t_phase = rte_rdtsc(), pkts = 0, gw_pkts = 0, gw_cycles = 0;
	uint64_t stalls = 0, stall_cycles = 0;
	unsigned int n;
	enum gwb_phase ph = PH_STANDBY;
	struct nsdp_nat_stats s;

	gen_reset(r->gen);
	for (;;) {
		uint64_t t0 = rte_rdtsc(), t1;

		if (ph == PH_STANDBY &&
		    nsdp_nat_mode(r->nat) == NSDP_NAT_ACTIVE) {
			ph = PH_WARMUP;
			t_phase = t0;
			gen_promoted(r->gen, t0);
			nsdp_nat_stats(r->nat, &s);
			r->warm_tx_outside = s.tx_outside;
		} else if (ph == PH_WARMUP && t0 - t_phase >= warm) {
			nsdp_nat_stats(r->nat, &r->before);
			r->warm_tx_outside =
				r->before.tx_outside - r->warm_tx_outside;
			ph = PH_MEASURE;
			t_phase = t0;
			pkts = gw_pkts = gw_cycles = stalls = stall_cycles = 0;
		} else if (ph == PH_MEASURE && t0 - t_phase >= meas) {
			nsdp_nat_stats(r->nat, &r->after);
			r->loop_cycles = t0 - t_phase;
			break;
		}
		if (__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
			r->failed = 1;
			break;
		}
		gen_step(r->gen, t0);
		t1 = rte_rdtsc();
		n = gw_iteration(gw, r->nat, 0);
		t1 = rte_rdtsc() - t1;
		pkts += n;
		if (likely(t1 < stall)) {
			gw_pkts += n;
			gw_cycles += t1;
		} else {
			stalls++;
			stall_cycles += t1;
		}
		live_publish(&r->live, ph, gw_pkts, gw_cycles, t0 - t_phase);
	}
	r->packets = pkts;
	r->gw_packets = gw_pkts;
	r->gw_cycles = gw_cycles;
	r->stalls = stalls;
	r->stall_cycles = stall_cycles;
	live_publish(&r->live, PH_DONE, gw_pkts, gw_cycles, 0);
	ring_free_all(r->ports->in_rx);
	ring_free_all(r->ports->in_tx);
	ring_free_all(r->ports->out_rx);
	ring_free_all(r->ports->out_tx);
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return 0;
}

/* ---- set-up -------------------------------------------------------- */

static int port_create(const char *name, struct rte_ring **rx,
		       struct rte_ring **tx, struct rte_mempool *pool,
		       uint16_t *port, int *up)
{
	static const struct rte_eth_conf eth_conf;
	char rname[RTE_RING_NAMESIZE];
	int socket = (int)rte_socket_id(), id;

	snprintf(rname, sizeof(rname), "%s_rx", name);
	*rx = rte_ring_create(rname, GWB_PORT_RING, socket,
			      RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(rname, sizeof(rname), "%s_tx", name);
	*tx = rte_ring_create(rname, GWB_PORT_RING, socket,
			      RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!*rx || !*tx) {
		fprintf(stderr, "natsync-gwbench: %s: rings: %s\n", name,
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	id = rte_eth_from_rings(name, rx, 1, tx, 1, (unsigned int)socket);
	if (id < 0) {
		fprintf(stderr, "natsync-gwbench: %s: net_ring port: %s\n",
			name, rte_strerror(rte_errno));
		return -ENODEV;
	}
	*port = (uint16_t)id;
	if (rte_eth_dev_configure(*port, 1, 1, &eth_conf) != 0 ||
	    rte_eth_rx_queue_setup(*port, 0, GWB_PORT_RING, (unsigned)socket,
				   NULL, pool) != 0 ||
	    rte_eth_tx_queue_setup(*port, 0, GWB_PORT_RING, (unsigned)socket,
				   NULL) != 0 ||
	    rte_eth_dev_start(*port) != 0) {
		fprintf(stderr, "natsync-gwbench: %s: cannot start the port\n",
			name);
		rte_eth_dev_close(*port);
		return -EIO;
	}
	*up = 1;
	return 0;
}

/* The inside and outside ports of gateway idx, over mbufs from pool. */
static int ports_create(struct gwb_ports *p, unsigned int idx,
			struct rte_mempool *pool)
{
	char in[16], out[16];

	p->pool = pool;
	snprintf(in, sizeof(in), "gwb_in%u", idx);
	snprintf(out, sizeof(out), "gwb_out%u", idx);
	if (port_create(in, &p->in_rx, &p->in_tx, pool, &p->inside,
			&p->inside_up) != 0 ||
	    port_create(out, &p->out_rx, &p->out_tx, pool, &p->outside,
			&p->outside_up) != 0)
		return -ENODEV;
	return 0;
}

static void ports_close(struct gwb_ports *p)
{
	if (p->inside_up) {
		rte_eth_dev_stop(p->inside);
		rte_eth_dev_close(p->inside);
	}
	if (p->outside_up) {
		rte_eth_dev_stop(p->outside);
		rte_eth_dev_close(p->outside);
	}
	rte_ring_free(p->in_rx);
	rte_ring_free(p->in_tx);
	rte_ring_free(p->out_rx);
	rte_ring_free(p->out_tx);
}

static void gw_init(struct gwb_gw *gw, const struct gwb_ports *p,
		    unsigned int burst)
{
	gw->inside = p->inside;
	gw->outside = p->outside;
	gw->burst = burst;
}

/* Sessions a round may hold: every flow, plus the replaced ones until
 * they expire (a timeout, and up to a second until the expiry sweep
 * reaches them), with a margin. */
static uint32_t sessions_needed(const struct gwb_opts *o)
{
	double replaced =
		(double)o->flows * o->new_pct / 100.0 * (o->timeout_s + 2.0);
	double n = ((double)o->flows + replaced) * 1.25 + 1024;

	return n > (double)UINT32_MAX / 4 ? UINT32_MAX / 4 : (uint32_t)n;
}

static int nat_conf_build(struct nsdp_nat_conf *c, const struct gwb_opts *o,
			  struct rte_mempool *pool)
{
	uint32_t sessions = sessions_needed(o);
	uint64_t addrs = (uint64_t)sessions / GWB_PORTS_PER_ADDR + 2;
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
	c->inside_addr = GWB_GW_INSIDE;
	c->pool_first = GWB_POOL_FIRST;
	c->pool_last = GWB_POOL_FIRST + (uint32_t)addrs - 1;
	c->next_hop = GWB_NEXT_HOP;
	c->port_min = 1024;
	c->port_max = 65535;
	c->inside_mac = gwb_gw_inside_mac;
	c->outside_mac = gwb_gw_outside_mac;
	c->gateway_id = 1;
	c->tcp_syn_ms = c->tcp_established_ms = c->tcp_closing_ms = c->udp_ms =
		c->icmp_ms = o->timeout_s * 1000;
	c->max_sessions = sessions;
	c->mbuf_pool = pool;
	if (nsdp_nat_conf_check(c, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-gwbench: NAT configuration: %s\n",
			err);
		return -EINVAL;
	}
	return 0;
}

/* ---- the lane consumer, standing in for the agent ------------------ */

static void *consumer_main(void *arg)
{
	struct gwb_consumer *c = arg;
	static struct ns_session buf[GWB_CONSUME];

	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		unsigned int n = nsdp_lane_drain(c->lane, buf, GWB_CONSUME);

		__atomic_store_n(&c->drained, c->drained + n, __ATOMIC_RELAXED);
		if (n == 0)
			sleep_us(50);
	}
	return NULL;
}

/* Start the consumer on the main lcore's CPU, off the gateway's. */
static int consumer_start(struct gwb_consumer *c)
{
	pthread_attr_t attr;
	cpu_set_t cpus;
	int rc;

	CPU_ZERO(&cpus);
	CPU_SET(rte_lcore_to_cpu_id((int)rte_get_main_lcore()), &cpus);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
	rc = pthread_create(&c->thread, &attr, consumer_main, c);
	pthread_attr_destroy(&attr);
	return -rc;
}

static void consumer_stop(struct gwb_consumer *c)
{
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELAXED);
	pthread_join(c->thread, NULL);
}

/* ---- rounds and figures -------------------------------------------- */

static uint64_t drops_of(const struct nsdp_nat_stats *s)
{
	return s->standby_drops + s->not_ipv4 + s->truncated +
	       s->bad_ip_header + s->bad_ip_checksum + s->ip_options +
	       s->fragments + s->ttl_expired + s->unknown_proto +
	       s->icmp_unsupported + s->tcp_no_session + s->no_session +
	       s->not_ours + s->to_gateway + s->ports_exhausted +
	       s->table_full + s->neigh_miss + s->alloc_failures;
}

#define DELTA(field) (r->after.field - r->before.field)

static void print_drops(const struct gwb_round *r)
{
	static const struct {
		const char *name;
		size_t off;
	} reasons[] = {
#define REASON(f) {#f, offsetof(struct nsdp_nat_stats, f)}
		REASON(standby_drops),	 REASON(not_ipv4),
		REASON(truncated),	 REASON(bad_ip_header),
		REASON(bad_ip_checksum), REASON(ip_options),
		REASON(fragments),	 REASON(ttl_expired),
		REASON(unknown_proto),	 REASON(icmp_unsupported),
		REASON(tcp_no_session),	 REASON(no_session),
		REASON(not_ours),	 REASON(to_gateway),
		REASON(ports_exhausted), REASON(table_full),
		REASON(neigh_miss),	 REASON(alloc_failures),
		REASON(arp_ignored),
#undef REASON
	};
	char line[1024];
	size_t len = 0;

	for (size_t i = 0; i < RTE_DIM(reasons); i++) {
		uint64_t a, b;

		memcpy(&a, (const char *)&r->after + reasons[i].off, sizeof(a));
		memcpy(&b, (const char *)&r->before + reasons[i].off,
		       sizeof(b));
		if (a != b && len < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len,
						" %s=%" PRIu64, reasons[i].name,
						a - b);
	}
	if (len)
		fprintf(stderr, "%s: dropped while measuring:%s\n", r->label,
			line);
}

static double round_gw_pps(const struct gwb_round *r)
{
	return r->gw_cycles ? (double)r->gw_packets * (double)rte_get_tsc_hz() /
				      (double)r->gw_cycles
			    : 0.0;
}

static double round_cycles_per_pkt(const struct gwb_round *r)
{
	return r->gw_packets ? (double)r->gw_cycles / (double)r->gw_packets
			     : 0.0;
}

static double round_loop_pps(const struct gwb_round *r)
{
	return r->loop_cycles ? (double)r->packets * (double)rte_get_tsc_hz() /
					(double)r->loop_cycles
			      : 0.0;
}

static void progress_line(struct gwb_round *r, unsigned int n_rounds,
			  uint64_t *last_pkts, uint64_t *last_gw,
			  uint64_t *last_phase_cycles, uint64_t *last_phase,
			  uint64_t *last_recorded)
{
	static const char *phase_names[] = {"standby", "warm-up", "measure",
					    "done"};
	double hz = (double)rte_get_tsc_hz();
	uint64_t ph = __atomic_load_n(&r->live.phase, __ATOMIC_RELAXED);
	uint64_t pkts = __atomic_load_n(&r->live.packets, __ATOMIC_RELAXED);
	uint64_t gw = __atomic_load_n(&r->live.gw_cycles, __ATOMIC_RELAXED);
	uint64_t pc = __atomic_load_n(&r->live.phase_cycles, __ATOMIC_RELAXED);
	struct nsdp_nat_stats s;
	struct nsdp_table_stats ts;
	double gw_mpps = 0, loop_mpps = 0, rec_s = 0;

	if (ph >= PH_DONE)
		return;
	if (ph != *last_phase)
		*last_pkts = *last_gw = *last_phase_cycles = 0;
	nsdp_nat_stats(r->nat, &s);
	nsdp_table_stats(r->table, &ts);
	if (gw > *last_gw)
		gw_mpps = (double)(pkts - *last_pkts) * hz /
			  (double)(gw - *last_gw) / 1e6;
	if (pc > *last_phase_cycles) {
		loop_mpps = (double)(pkts - *last_pkts) * hz /
			    (double)(pc - *last_phase_cycles) / 1e6;
		rec_s = (double)(s.recorded - *last_recorded) * hz /
			(double)(pc - *last_phase_cycles);
	}
	fprintf(stderr,
		"progress: round %u/%u recording=%s %s %.1fs: gw %.3f Mpps, "
		"loop %.3f Mpps, sessions %" PRIu64 ", records %.0f/s, "
		"record_drops %" PRIu64 ", neigh_miss %" PRIu64 "\n",
		r->index + 1, n_rounds, r->recording ? "on" : "off",
		phase_names[ph], (double)pc / hz, gw_mpps, loop_mpps, ts.live,
		rec_s, s.record_drops, s.neigh_miss);
	*last_pkts = pkts;
	*last_gw = gw;
	*last_phase_cycles = pc;
	*last_phase = ph;
	*last_recorded = s.recorded;
}

/* One round on the worker lcore; 0, 1 on failure, -1 when interrupted. */
static int round_run(struct gwb_round *r, unsigned int n_rounds,
		     unsigned int worker, const struct nsdp_nat_conf *conf,
		     struct nsdp_lane *lane)
{
	char name[32];
	struct nsdp_table_stats ts;
	uint64_t lp = 0, lg = 0, lc = 0, lph = PH_STANDBY, lrec = 0;
	int rc, status = 0;
	time_t last = time(NULL);

	snprintf(name, sizeof(name), "gwb%u", r->index);
	r->table = nsdp_table_create(name, conf->max_sessions);
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
	rte_eal_remote_launch(round_lcore, r, worker);
	rc = nsdp_nat_activate(r->nat, 1, GWB_ACTIVATE_MS);
	if (rc != 0) {
		fprintf(stderr, "natsync-gwbench: nsdp_nat_activate: %s\n",
			strerror(-rc));
		__atomic_store_n(&r->stop, 1, __ATOMIC_RELAXED);
		status = 1;
	}
	while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
		sleep_us(100000);
		if (gwb_signalled && !r->stop) {
			__atomic_store_n(&r->stop, 1, __ATOMIC_RELAXED);
			status = -1;
		}
		if (time(NULL) != last) {
			last = time(NULL);
			progress_line(r, n_rounds, &lp, &lg, &lc, &lph, &lrec);
		}
	}
	rte_eal_wait_lcore(worker);
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

/* Check a measured round and say what it measured; 0 if it is usable. */
static int round_report(const struct gwb_round *r, const struct gwb_gen *g)
{
	double secs = (double)r->loop_cycles / (double)rte_get_tsc_hz();
	uint64_t records = DELTA(recorded);
	int ok = 1;

	printf("%s recording=%-3s gw_mpps=%.3f loop_mpps=%.3f "
	       "cycles_per_pkt=%.1f packets=%" PRIu64 " stalls=%" PRIu64
	       " created=%" PRIu64 " refreshed=%" PRIu64 " closed=%" PRIu64
	       " expired=%" PRIu64 " records_per_s=%.0f record_drops=%" PRIu64
	       " drops=%" PRIu64 " sessions=%" PRIu64 "\n",
	       r->label, r->recording ? "on" : "off", round_gw_pps(r) / 1e6,
	       round_loop_pps(r) / 1e6, round_cycles_per_pkt(r), r->packets,
	       r->stalls, DELTA(created), DELTA(refreshed), DELTA(closed),
	       DELTA(expired), secs > 0 ? (double)records / secs : 0.0,
	       DELTA(record_drops), drops_of(&r->after) - drops_of(&r->before),
	       r->sessions_end);
	fflush(stdout);
	print_drops(r);
	if (r->packets == 0 || DELTA(tx_outside) == 0) {
		fprintf(stderr,
			"%s: the gateway forwarded nothing "
			"(tx_outside during warm-up %" PRIu64
			", ARP answered %" PRIu64 ")\n",
			r->label, r->warm_tx_outside, g->arp_answered);
		ok = 0;
	}
	if (r->stalls)
		fprintf(stderr,
			"%s: %" PRIu64 " gateway iterations over %.1f ms "
			"(%.3f s in all) left out of gw_mpps: the lcore was "
			"preempted\n",
			r->label, r->stalls, 1000.0 / GWB_STALL_DIV,
			(double)r->stall_cycles / (double)rte_get_tsc_hz());
	if (DELTA(neigh_miss))
		fprintf(stderr,
			"%s: warning: neigh_miss grew by %" PRIu64
			" while measuring (next hop not resolved?)\n",
			r->label, DELTA(neigh_miss));
	if (r->recording && DELTA(record_drops))
		fprintf(stderr,
			"%s: warning: %" PRIu64
			" records dropped (lane full)\n",
			r->label, DELTA(record_drops));
	if (g->bad_out || g->bad_in)
		fprintf(stderr,
			"%s: --verify: %" PRIu64 " bad outside and %" PRIu64
			" bad inside packets (checksum or address)\n",
			r->label, g->bad_out, g->bad_in);
	return ok ? 0 : -1;
}

static void csv_append(const char *path, const struct gwb_opts *o,
		       const struct gwb_round *r)
{
	struct stat sb;
	int is_new = stat(path, &sb) != 0 || sb.st_size == 0;
	FILE *f = fopen(path, "a");

	if (!f) {
		fprintf(stderr, "natsync-gwbench: csv: %s: %s\n", path,
			strerror(errno));
		return;
	}
	if (is_new)
		fprintf(f, "time,round,recording,flows,hosts,new_pct,tcp_pct,"
			   "reply_pct,timeout_s,burst,slice_ms,seconds,packets,"
			   "gw_pps,loop_pps,cycles_per_pkt,stalls,created,"
			   "refreshed,closed,expired,recorded,record_drops,"
			   "drops,neigh_miss\n");
	fprintf(f,
		"%ld,%u,%s,%" PRIu32 ",%" PRIu32
		",%g,%u,%u,%u,%u,%u,%.3f,%" PRIu64 ",%.0f,%.0f,%.1f,%" PRIu64
		",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
		(long)time(NULL), r->index + 1, r->recording ? "on" : "off",
		o->flows, o->hosts, o->new_pct, o->tcp_pct, o->reply_pct,
		o->timeout_s, o->burst, o->slice_ms,
		(double)r->loop_cycles / (double)rte_get_tsc_hz(), r->packets,
		round_gw_pps(r), round_loop_pps(r), round_cycles_per_pkt(r),
		r->stalls, DELTA(created), DELTA(refreshed), DELTA(closed),
		DELTA(expired), DELTA(recorded), DELTA(record_drops),
		drops_of(&r->after) - drops_of(&r->before), DELTA(neigh_miss));
	fclose(f);
}

#undef DELTA

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned int n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* ---- side by side: both gateways on the lcore, in slices ----------- */

/* One of the two gateways of --slice-ms: its results as a round (before
 * stays zero, after sums the measured slices), its own generator, and
 * the clocks it sees, which stop while the other gateway runs. */
struct gwb_ctx {
	struct gwb_round res;
	struct gwb_gen gen;
	struct gwb_gw gw; /* over ports of its own: nothing to drain */
	uint64_t clock_offset_ns; /* realtime spent paused */
	uint64_t paused_ns, paused_tsc; /* when the last slice ended */
	int active_seen; /* the lcore took the promotion */
	uint64_t all_packets, all_cycles; /* every slice's, for progress */
	double *samples; /* gw pps of each measured slice */
	unsigned int n_samples, max_samples;
};

struct gwb_pair {
	struct gwb_ctx ctx[2]; /* 0: recording off, 1: on */
	const struct gwb_opts *o;
	struct gwb_ports *ports; /* [2], one pair per gateway */
	uint64_t slice_cycles;
	uint64_t phase; /* published, enum gwb_phase */
	int stop, done, failed;
};

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
static void pair_slice(struct gwb_pair *p, struct gwb_ctx *x, int measuring)
{
	struct gwb_round *r = &x->res;
	struct gwb_gw *gw = &x->gw;
	uint64_t hz = rte_get_tsc_hz(), stall = hz / GWB_STALL_DIV;
	uint64_t start = rte_rdtsc(), now_ns = nsdp_realtime_ns();
	uint64_t pkts = 0, gw_pkts = 0, gw_cycles = 0;
	uint64_t stalls = 0, stall_cycles = 0;
	struct nsdp_nat_stats before, after;

	if (x->paused_ns)
		x->clock_offset_ns += now_ns - x->paused_ns;
	if (x->gen.churn_start)
		x->gen.churn_start += start - x->paused_tsc;
	nsdp_nat_stats(r->nat, &before);
	for (;;) {
		uint64_t t0 = rte_rdtsc(), t1;
		unsigned int n;

		if (t0 - start >= p->slice_cycles)
			break;
		if (unlikely(!x->active_seen) &&
		    nsdp_nat_mode(r->nat) == NSDP_NAT_ACTIVE) {
			x->active_seen = 1;
			gen_promoted(&x->gen, t0);
		}
		gen_step(&x->gen, t0);
		t1 = rte_rdtsc();
		n = gw_iteration(gw, r->nat, x->clock_offset_ns);
		t1 = rte_rdtsc() - t1;
		pkts += n;
		if (likely(t1 < stall)) {
			gw_pkts += n;
			gw_cycles += t1;
		} else {
			stalls++;
			stall_cycles += t1;
		}
		live_publish(&r->live, (enum gwb_phase)p->phase,
			     x->all_packets + gw_pkts,
			     x->all_cycles + gw_cycles, 0);
	}
	nsdp_nat_stats(r->nat, &after);
	x->paused_ns = nsdp_realtime_ns();
	x->paused_tsc = rte_rdtsc();
	x->all_packets += gw_pkts;
	x->all_cycles += gw_cycles;
	if (!measuring)
		return;
	r->packets += pkts;
	r->gw_packets += gw_pkts;
	r->gw_cycles += gw_cycles;
	r->stalls += stalls;
	r->stall_cycles += stall_cycles;
	r->loop_cycles += x->paused_tsc - start;
	stats_add(&r->after, &after, &before);
	if (gw_cycles && x->n_samples < x->max_samples)
		x->samples[x->n_samples++] =
			(double)gw_pkts * (double)hz / (double)gw_cycles;
}

/* The lcore's side of --slice-ms: the two gateways take turns, a slice
 * each; warm-up and measurement start at a pair boundary, so both get
 * the same number of measured slices. */
static int pair_lcore(void *arg)
{
	struct gwb_pair *p = arg;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t warm = 2 * (uint64_t)p->o->warmup_s * hz;
	uint64_t meas = 2 * (uint64_t)p->o->seconds * hz;
	uint64_t t_phase = 0;
	enum gwb_phase ph = PH_STANDBY;
	int first = 0;

	gen_reset(&p->ctx[0].gen);
	gen_reset(&p->ctx[1].gen);
	while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) {
		uint64_t t = rte_rdtsc();

		if (ph == PH_STANDBY && p->ctx[0].active_seen &&
		    p->ctx[1].active_seen) {
			ph = PH_WARMUP;
			t_phase = t;
		} else if (ph == PH_WARMUP && t - t_phase >= warm) {
			ph = PH_MEASURE;
			t_phase = t;
		} else if (ph == PH_MEASURE && t - t_phase >= meas) {
			break;
		}
		__atomic_store_n(&p->phase, (uint64_t)ph, __ATOMIC_RELAXED);
		/* Who goes first alternates: with both gateways alike
		 * (recording off), the second of each pair ran some 0.5%
		 * faster than the first. */
		pair_slice(p, &p->ctx[first], ph == PH_MEASURE);
		pair_slice(p, &p->ctx[!first], ph == PH_MEASURE);
		first = !first;
	}
	if (ph != PH_MEASURE)
		p->failed = 1;
	for (int i = 0; i < 2; i++) {
		ring_free_all(p->ports[i].in_rx);
		ring_free_all(p->ports[i].in_tx);
		ring_free_all(p->ports[i].out_rx);
		ring_free_all(p->ports[i].out_tx);
	}
	__atomic_store_n(&p->phase, (uint64_t)PH_DONE, __ATOMIC_RELAXED);
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	return 0;
}

static void pair_progress(struct gwb_pair *p, uint64_t last[2][2])
{
	static const char *phase_names[] = {"standby", "warm-up", "measure",
					    "done"};
	uint64_t ph = __atomic_load_n(&p->phase, __ATOMIC_RELAXED);
	double mpps[2] = {0, 0};
	uint64_t recorded = 0, sessions[2];

	if (ph >= PH_DONE)
		return;
	for (int i = 0; i < 2; i++) {
		struct gwb_round *r = &p->ctx[i].res;
		uint64_t pk =
			__atomic_load_n(&r->live.packets, __ATOMIC_RELAXED);
		uint64_t cy =
			__atomic_load_n(&r->live.gw_cycles, __ATOMIC_RELAXED);
		struct nsdp_table_stats ts;
		struct nsdp_nat_stats s;

		if (cy > last[i][1] && pk >= last[i][0])
			mpps[i] = (double)(pk - last[i][0]) *
				  (double)rte_get_tsc_hz() /
				  (double)(cy - last[i][1]) / 1e6;
		last[i][0] = pk;
		last[i][1] = cy;
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

static void pair_close(struct gwb_pair *p)
{
	for (int i = 0; i < 2; i++) {
		struct gwb_ctx *x = &p->ctx[i];

		nsdp_nat_free(x->res.nat);
		nsdp_table_free(x->res.table);
		x->res.nat = NULL;
		x->res.table = NULL;
		free(x->gen.tcp_state);
		x->gen.tcp_state = NULL;
		free(x->samples);
		x->samples = NULL;
	}
}

/* Both gateways side by side on the worker lcore; 0, 1 on failure, -1
 * when interrupted. */
static int pair_run(struct gwb_pair *p, unsigned int worker,
		    const struct nsdp_nat_conf *conf, struct nsdp_lane *lane)
{
	uint64_t last[2][2] = {{0, 0}, {0, 0}};
	time_t tick = time(NULL);
	int status = 0;

	for (int i = 0; i < 2; i++) {
		struct gwb_ctx *x = &p->ctx[i];
		char name[32];

		x->res.index = (unsigned int)i;
		snprintf(x->res.label, sizeof(x->res.label), "slices");
		x->res.recording = i;
		x->res.gen = &x->gen;
		x->res.ports = &p->ports[i];
		gw_init(&x->gw, &p->ports[i], p->o->burst);
		x->max_samples = p->o->seconds * 1000u / p->o->slice_ms + 4;
		x->samples = calloc(x->max_samples, sizeof(*x->samples));
		snprintf(name, sizeof(name), "gwbp%d", i);
		x->res.table = nsdp_table_create(name, conf->max_sessions);
		x->res.nat = x->res.table ? nsdp_nat_create(conf, x->res.table,
							    i ? lane : NULL)
					  : NULL;
		if (!x->samples || gen_init(&x->gen, p->o, &p->ports[i]) != 0 ||
		    !x->res.nat) {
			fprintf(stderr,
				"natsync-gwbench: cannot set up gateway %d: "
				"%s\n",
				i, strerror(errno));
			return 1;
		}
	}
	p->slice_cycles = rte_get_tsc_hz() * p->o->slice_ms / 1000;
	rte_eal_remote_launch(pair_lcore, p, worker);
	for (int i = 0; i < 2 && status == 0; i++) {
		int rc =
			nsdp_nat_activate(p->ctx[i].res.nat, 1,
					  GWB_ACTIVATE_MS + 2 * p->o->slice_ms);

		if (rc != 0) {
			fprintf(stderr,
				"natsync-gwbench: nsdp_nat_activate: %s\n",
				strerror(-rc));
			__atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
			status = 1;
		}
	}
	while (!__atomic_load_n(&p->done, __ATOMIC_ACQUIRE)) {
		sleep_us(100000);
		if (gwb_signalled && !p->stop) {
			__atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
			status = -1;
		}
		if (time(NULL) != tick) {
			tick = time(NULL);
			pair_progress(p, last);
		}
	}
	rte_eal_wait_lcore(worker);
	for (int i = 0; i < 2; i++) {
		struct nsdp_table_stats ts;

		nsdp_table_stats(p->ctx[i].res.table, &ts);
		p->ctx[i].res.sessions_end = ts.live;
	}
	if (status == 0 && p->failed)
		status = 1;
	return status;
}

/* ---- options ------------------------------------------------------- */

static int parse_uint(const char *opt, const char *v, uint64_t min,
		      uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < min || n > max) {
		fprintf(stderr,
			"natsync-gwbench: --%s: '%s' is not a number in "
			"%" PRIu64 "..%" PRIu64 "\n",
			opt, v, min, max);
		return -1;
	}
	*out = n;
	return 0;
}

static int parse_pct(const char *opt, const char *v, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if ((*v < '0' || *v > '9') || *end || errno || !(d >= 0 && d <= 100)) {
		fprintf(stderr,
			"natsync-gwbench: --%s: '%s' is not a percentage "
			"0..100\n",
			opt, v);
		return -1;
	}
	*out = d;
	return 0;
}

/* 0, 1 when the program should exit 0 (help, version), -1 on error. */
static int parse_options(int argc, char **argv, struct gwb_opts *o)
{
	enum {
		OPT_FLOWS = 256,
		OPT_HOSTS,
		OPT_NEW_PCT,
		OPT_TCP_PCT,
		OPT_REPLY_PCT,
		OPT_TIMEOUT,
		OPT_SECONDS,
		OPT_WARMUP,
		OPT_ROUNDS,
		OPT_BURST,
		OPT_RING_SIZE,
		OPT_VERIFY,
		OPT_CSV,
		OPT_EAL,
		OPT_SLICE_MS,
	};
	static const struct option opts[] = {
		{"flows", required_argument, NULL, OPT_FLOWS},
		{"hosts", required_argument, NULL, OPT_HOSTS},
		{"new-pct", required_argument, NULL, OPT_NEW_PCT},
		{"tcp-pct", required_argument, NULL, OPT_TCP_PCT},
		{"reply-pct", required_argument, NULL, OPT_REPLY_PCT},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"seconds", required_argument, NULL, OPT_SECONDS},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"rounds", required_argument, NULL, OPT_ROUNDS},
		{"burst", required_argument, NULL, OPT_BURST},
		{"ring-size", required_argument, NULL, OPT_RING_SIZE},
		{"verify", no_argument, NULL, OPT_VERIFY},
		{"csv", required_argument, NULL, OPT_CSV},
		{"eal", required_argument, NULL, OPT_EAL},
		{"slice-ms", required_argument, NULL, OPT_SLICE_MS},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int opt, warmup_set = 0;

	*o = (struct gwb_opts){
		.flows = 100000,
		.hosts = 256,
		.new_pct = 10,
		.tcp_pct = 0,
		.reply_pct = 50,
		.timeout_s = 2,
		.seconds = 5,
		.rounds = 3,
		.burst = NSDP_NAT_BURST,
		.ring_size = 65536,
		.eal_args = GWB_EAL_ARGS,
	};
	while ((opt = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_FLOWS:
			if (parse_uint("flows", optarg, 1, GWB_MAX_FLOWS, &v))
				return -1;
			o->flows = (uint32_t)v;
			break;
		case OPT_HOSTS:
			if (parse_uint("hosts", optarg, 1, 1u << 23, &v))
				return -1;
			o->hosts = (uint32_t)v;
			break;
		case OPT_NEW_PCT:
			if (parse_pct("new-pct", optarg, &o->new_pct))
				return -1;
			break;
		case OPT_TCP_PCT:
			if (parse_uint("tcp-pct", optarg, 0, 100, &v))
				return -1;
			o->tcp_pct = (unsigned int)v;
			break;
		case OPT_REPLY_PCT:
			if (parse_uint("reply-pct", optarg, 0, 100, &v))
				return -1;
			o->reply_pct = (unsigned int)v;
			break;
		case OPT_TIMEOUT:
			if (parse_uint("timeout", optarg, 1, 86400, &v))
				return -1;
			o->timeout_s = (unsigned int)v;
			break;
		case OPT_SECONDS:
			if (parse_uint("seconds", optarg, 1, 3600, &v))
				return -1;
			o->seconds = (unsigned int)v;
			break;
		case OPT_WARMUP:
			if (parse_uint("warmup", optarg, 0, 3600, &v))
				return -1;
			o->warmup_s = (unsigned int)v;
			warmup_set = 1;
			break;
		case OPT_ROUNDS:
			if (parse_uint("rounds", optarg, 1, 100, &v))
				return -1;
			o->rounds = (unsigned int)v;
			break;
		case OPT_BURST:
			if (parse_uint("burst", optarg, 1, NSDP_NAT_BURST, &v))
				return -1;
			o->burst = (unsigned int)v;
			break;
		case OPT_RING_SIZE:
			if (parse_uint("ring-size", optarg, 64, 1u << 24, &v))
				return -1;
			if (v & (v - 1)) {
				fprintf(stderr, "natsync-gwbench: --ring-size: "
						"not a power of two\n");
				return -1;
			}
			o->ring_size = (unsigned int)v;
			break;
		case OPT_VERIFY:
			o->verify = 1;
			break;
		case OPT_CSV:
			o->csv = optarg;
			break;
		case OPT_EAL:
			o->eal_args = optarg;
			break;
		case OPT_SLICE_MS:
			if (parse_uint("slice-ms", optarg, 0, 10000, &v))
				return -1;
			o->slice_ms = (unsigned int)v;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("natsync-gwbench %s\n", NATSYNC_VERSION);
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
	if (o->hosts < (o->flows + GWB_PORTS_PER_ADDR - 1) / GWB_PORTS_PER_ADDR)
		o->hosts = (o->flows + GWB_PORTS_PER_ADDR - 1) /
			   GWB_PORTS_PER_ADDR;
	return 0;
}

/* What RESULT reports, whichever way it was measured. */
struct gwb_summary {
	double pps_off, pps_on; /* medians of the gateway part */
	double loop_off, loop_on; /* medians of the whole loop */
	uint64_t recorded, record_drops;
};

/* Rounds off, on, off, on, ...: 0, 1 on failure, -1 when interrupted. */
static int run_rounds(const struct gwb_opts *o, struct gwb_ports *ports,
		      struct gwb_gen *gen, unsigned int worker,
		      const struct nsdp_nat_conf *conf, struct nsdp_lane *lane,
		      struct gwb_summary *sum)
{
	static struct gwb_round rounds[200];
	double off[100], on[100], loop_off[100], loop_on[100];
	unsigned int n_off = 0, n_on = 0, n_rounds = 2 * o->rounds;

	for (unsigned int i = 0; i < n_rounds; i++) {
		struct gwb_round *r = &rounds[i];
		int st;

		memset(r, 0, sizeof(*r));
		r->index = i;
		snprintf(r->label, sizeof(r->label), "round %u", i + 1);
		r->recording = i % 2;
		r->gen = gen;
		r->ports = ports;
		st = round_run(r, n_rounds, worker, conf, lane);
		if (st < 0) {
			fprintf(stderr, "natsync-gwbench: interrupted\n");
			return -1;
		}
		if (st > 0 || round_report(r, gen) != 0)
			return 1;
		if (o->csv)
			csv_append(o->csv, o, r);
		if (r->recording) {
			on[n_on] = round_gw_pps(r);
			loop_on[n_on++] = round_loop_pps(r);
			sum->recorded += r->after.recorded - r->before.recorded;
			sum->record_drops +=
				r->after.record_drops - r->before.record_drops;
		} else {
			off[n_off] = round_gw_pps(r);
			loop_off[n_off++] = round_loop_pps(r);
		}
	}
	sum->pps_off = median(off, n_off);
	sum->pps_on = median(on, n_on);
	sum->loop_off = median(loop_off, n_off);
	sum->loop_on = median(loop_on, n_on);
	return 0;
}

/* Both gateways side by side in slices: 0, 1 on failure, -1 when
 * interrupted. The gateway figures are over all measured slices (the
 * medians of slices hide the slow ones); the on/off ratio of each pair
 * of slices, a check that noise does not decide the result, is printed
 * besides. */
static int run_slices(const struct gwb_opts *o, struct gwb_ports *ports,
		      unsigned int worker, const struct nsdp_nat_conf *conf,
		      struct nsdp_lane *lane, struct gwb_summary *sum)
{
	static struct gwb_pair pair;
	struct gwb_ctx *off = &pair.ctx[0], *on = &pair.ctx[1];
	unsigned int n;
	double *ratios;
	int st;

	memset(&pair, 0, sizeof(pair));
	pair.o = o;
	pair.ports = ports;
	st = pair_run(&pair, worker, conf, lane);
	if (st < 0)
		fprintf(stderr, "natsync-gwbench: interrupted\n");
	if (st != 0 || round_report(&off->res, &off->gen) != 0 ||
	    round_report(&on->res, &on->gen) != 0) {
		pair_close(&pair);
		return st ? st : 1;
	}
	if (o->csv) {
		csv_append(o->csv, o, &off->res);
		csv_append(o->csv, o, &on->res);
	}
	n = RTE_MIN(off->n_samples, on->n_samples);
	ratios = calloc(n ? n : 1, sizeof(*ratios));
	for (unsigned int i = 0; ratios && i < n; i++)
		ratios[i] = off->samples[i] > 0
				    ? on->samples[i] / off->samples[i]
				    : 0.0;
	if (ratios && n) {
		qsort(ratios, n, sizeof(*ratios), cmp_double);
		printf("slice pairs: %u, on/off per pair: median %.4f, "
		       "quartiles %.4f..%.4f; median slice gw Mpps: off %.3f "
		       "on %.3f\n",
		       n, ratios[n / 2], ratios[n / 4], ratios[(3 * n) / 4],
		       median(off->samples, off->n_samples) / 1e6,
		       median(on->samples, on->n_samples) / 1e6);
	}
	free(ratios);
	sum->pps_off = round_gw_pps(&off->res);
	sum->pps_on = round_gw_pps(&on->res);
	sum->loop_off = round_loop_pps(&off->res);
	sum->loop_on = round_loop_pps(&on->res);
	sum->recorded = on->res.after.recorded;
	sum->record_drops = on->res.after.record_drops;
	pair_close(&pair);
	return 0;
}

int main(int argc, char **argv)
{
	static struct gwb_opts o;
	static struct gwb_ports ports[2];
	struct rte_mempool *pool = NULL;
	static struct gwb_gen gen;
	static struct gwb_consumer consumer;
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
	if (ports_create(&ports[0], 0, pool) != 0 ||
	    (o.slice_ms && ports_create(&ports[1], 1, pool) != 0) ||
	    gen_init(&gen, &o, &ports[0]) != 0 ||
	    nat_conf_build(&conf, &o, pool) != 0)
		goto out;
	gw_init(&gwb_gw, &ports[0], o.burst);
	lane = nsdp_lane_create(0, o.ring_size, (int)rte_socket_id());
	if (!lane) {
		fprintf(stderr, "natsync-gwbench: lane: %s\n",
			rte_strerror(rte_errno));
		goto out;
	}
	consumer.lane = lane;
	if (consumer_start(&consumer) != 0) {
		fprintf(stderr, "natsync-gwbench: cannot start the consumer\n");
		goto out;
	}
	consumer_running = 1;

	fprintf(stderr,
		"gwbench: flows=%" PRIu32 " hosts=%" PRIu32
		" new_pct=%g tcp_pct=%u reply_pct=%u timeout=%us warmup=%us "
		"seconds=%u %s=%u burst=%u sessions<=%" PRIu32 " pool=%" PRIu32
		" addresses, gateway on lcore %u (cpu %u), tsc %.3f GHz\n",
		o.flows, o.hosts, o.new_pct, o.tcp_pct, o.reply_pct,
		o.timeout_s, o.warmup_s, o.seconds,
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
	       __atomic_load_n(&consumer.drained, __ATOMIC_RELAXED));
	printf("RESULT gwbench flows=%" PRIu32 " new_pct=%g pps_off=%.0f "
	       "pps_on=%.0f cost_pct=%.2f recorded=%" PRIu64
	       " record_drops=%" PRIu64 "\n",
	       o.flows, o.new_pct, pps_off, pps_on, cost, sum.recorded,
	       sum.record_drops);
	fflush(stdout);
	rc = 0;
out:
	if (consumer_running)
		consumer_stop(&consumer);
	if (lane)
		nsdp_lane_free(lane);
	free(gen.tcp_state);
	ports_close(&ports[0]);
	ports_close(&ports[1]);
	rte_mempool_free(pool);
	rte_eal_cleanup();
	return rc;
}
