/*
 * nsb_gw_traffic.c - natsync-gwbench's traffic generator.
 *
 * It keeps the inside port's rx ring fed with UDP (optionally TCP) frames
 * of --flows flows from --hosts inside hosts, replaces --new-pct of the
 * flows every second by new ones (so that sessions are created, refreshed
 * and expire), drains the outside port's tx ring, answers ARP requests for
 * the next hop and the inside hosts, and reflects --reply-pct of the
 * translated packets back into the outside port as return traffic.
 * With --nat64-pct, that share of the flows is UDP from inside IPv6 hosts
 * (fd00::<the IPv4 host's address>) to 64:ff9b::<server>, through the
 * gateway's NAT64; their return traffic comes back as IPv6.
 *
 * Invariants: it runs in the gateway lcore's thread, between iterations,
 * and shares its mbuf cache; every mbuf it takes off a ring is sent back
 * or freed in the same step. A new round replays the same traffic.
 *
 * Not here: timing (nsb_gw_sched.c), IP fragments, ICMP, NAT64 over TCP.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "nsb_frame.h"
#include "nsb_gw_arp.h"
#include "nsb_gw_check.h"
#include "nsb_gw_traffic.h"
#include "nsdp_nat.h"

#define DRAIN 256 /* mbufs taken off a tx ring at once */

const struct rte_ether_addr nsb_gw_inside_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x01, 0x01}};
const struct rte_ether_addr nsb_gw_outside_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x02, 0x01}};
const struct rte_ether_addr nsb_gw_host_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x01, 0x02}};
const struct rte_ether_addr nsb_gw_next_hop_mac = {
	{0x02, 0x00, 0x00, 0x00, 0x02, 0x02}};

static uint32_t remote_of(uint32_t slot)
{
	return NSB_GW_REMOTE_NET + 1 + slot % NSB_GW_REMOTES;
}

/* A whole frame but for addresses, ports, flags and checksums, which
 * gen_packet() writes (the checksum fields stay 0 for it). */
static void template_build(uint8_t *frame, uint8_t proto)
{
	struct nsb_frame fr = {
		.src = nsb_gw_host_mac,
		.dst = nsb_gw_inside_mac,
		.proto = proto,
		.ttl = 64,
		.dport = NSB_GW_DPORT,
		.payload = (uint16_t)(NSB_GW_FRAME - NSB_GW_L4 -
				      nsb_frame_l4_header_len(proto)),
		.no_udp_cksum = 1,
	};
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + NSB_GW_L3);

	nsb_frame_write(&fr, frame);
	ip->hdr_checksum = 0;
	if (proto == IPPROTO_TCP)
		((struct rte_tcp_hdr *)(frame + NSB_GW_L4))->cksum = 0;
}

/* The NAT64 flows' frame: the UDP template's L4 part behind an IPv6
 * header; gen_packet6() writes addresses, port and checksum. */
static void template6_build(uint8_t *frame, const uint8_t *udp_tmpl)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)frame;
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(eth + 1);

	memcpy(frame, udp_tmpl, NSB_GW_L3);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	memset(ip6, 0, sizeof(*ip6));
	ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip6->payload_len = rte_cpu_to_be_16(NSB_GW_FRAME - NSB_GW_L4);
	ip6->proto = IPPROTO_UDP;
	ip6->hop_limits = 64;
	ip6->src_addr[0] = 0xfd;
	ip6->dst_addr[1] = 0x64;
	ip6->dst_addr[2] = 0xff;
	ip6->dst_addr[3] = 0x9b;
	memcpy(frame + NSB_GW_L4_6, udp_tmpl + NSB_GW_L4,
	       NSB_GW_FRAME - NSB_GW_L4);
}

int nsb_gw_gen_init(struct nsb_gw_gen *g, const struct nsb_gw_opts *o,
		    struct nsb_gw_ports *ports)
{
	memset(g, 0, sizeof(*g));
	g->o = o;
	g->ports = ports;
	g->per_host = (o->flows + o->hosts - 1) / o->hosts;
	template_build(g->udp_tmpl, IPPROTO_UDP);
	template_build(g->tcp_tmpl, IPPROTO_TCP);
	template6_build(g->udp6_tmpl, g->udp_tmpl);
	if (o->tcp_pct) {
		g->tcp_state = calloc(o->flows, sizeof(*g->tcp_state));
		if (!g->tcp_state)
			return -ENOMEM;
	}
	return 0;
}

void nsb_gw_gen_free(struct nsb_gw_gen *g)
{
	free(g->tcp_state);
	g->tcp_state = NULL;
}

void nsb_gw_gen_reset(struct nsb_gw_gen *g)
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
void nsb_gw_gen_promoted(struct nsb_gw_gen *g, uint64_t tsc)
{
	nsb_gw_gen_reset(g);
	g->churn_start = tsc;
	g->new_per_cycle = (double)g->o->flows * g->o->new_pct / 100.0 /
			   (double)rte_get_tsc_hz();
	g->ramp_cycles = (uint64_t)g->o->timeout_s * rte_get_tsc_hz() / 2;
	g->live_slots = 1;
}

static void gen_churn(struct nsb_gw_gen *g, uint64_t tsc)
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

/* A NAT64 flow's packet: from fd00::<host> (the IPv4 host's address in
 * the low 32 bits) to 64:ff9b::<server>. */
static void gen_packet6(struct nsb_gw_gen *g, struct rte_mbuf *m, uint32_t slot,
			uint16_t sport)
{
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(frame + NSB_GW_L3);
	struct rte_udp_hdr *uh = (struct rte_udp_hdr *)(frame + NSB_GW_L4_6);
	uint32_t src =
		rte_cpu_to_be_32(NSB_GW_INSIDE_NET + 1 + slot % g->o->hosts);
	uint32_t dst = rte_cpu_to_be_32(remote_of(slot));

	memcpy(frame, g->udp6_tmpl, NSB_GW_FRAME6);
	m->data_len = NSB_GW_FRAME6;
	m->pkt_len = NSB_GW_FRAME6;
	memcpy(ip6->src_addr + 12, &src, 4);
	memcpy(ip6->dst_addr + 12, &dst, 4);
	uh->src_port = rte_cpu_to_be_16(sport);
	uh->dgram_cksum = rte_ipv6_udptcp_cksum(ip6, uh);
}

/* Slot i is flow i / hosts of inside host i % hosts. Its successive
 * generations take source ports per_host apart, so that a new flow never
 * reuses the tuple of one still in the table. */
static void gen_packet(struct nsb_gw_gen *g, struct rte_mbuf *m, uint32_t slot)
{
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + NSB_GW_L3);
	uint64_t gen = g->ret_q + (slot < g->ret_r);
	uint16_t sport =
		(uint16_t)(1024 + (slot / g->o->hosts + gen * g->per_host) %
					  NSB_GW_PORTS_PER_ADDR);
	int nat64 = slot % 100 >= 100 - g->o->nat64_pct;
	int tcp = g->tcp_state && slot % 100 < g->o->tcp_pct && !nat64;

	if (nat64) {
		gen_packet6(g, m, slot, sport);
		return;
	}
	memcpy(frame, tcp ? g->tcp_tmpl : g->udp_tmpl, NSB_GW_FRAME);
	m->data_len = NSB_GW_FRAME;
	m->pkt_len = NSB_GW_FRAME;
	ip->src_addr =
		rte_cpu_to_be_32(NSB_GW_INSIDE_NET + 1 + slot % g->o->hosts);
	ip->dst_addr = rte_cpu_to_be_32(remote_of(slot));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	if (tcp) {
		struct rte_tcp_hdr *th =
			(struct rte_tcp_hdr *)(frame + NSB_GW_L4);
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
		struct rte_udp_hdr *uh =
			(struct rte_udp_hdr *)(frame + NSB_GW_L4);

		uh->src_port = rte_cpu_to_be_16(sport);
		uh->dgram_cksum = rte_ipv4_udptcp_cksum(ip, uh);
	}
}

/* Keep between one and two bursts waiting on the inside port. */
static void gen_feed(struct nsb_gw_gen *g)
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

/* An ARP request the gateway sent on one side, answered in place: for
 * the next hop outside, for the inside hosts inside. */
static int arp_reply(struct nsb_gw_gen *g, struct rte_mbuf *m, int outside)
{
	int answered =
		outside ? nsb_gw_arp_answer(m, NSB_GW_NEXT_HOP, NSB_GW_NEXT_HOP,
					    0, &nsb_gw_next_hop_mac)
			: nsb_gw_arp_answer(m, NSB_GW_INSIDE_NET,
					    NSB_GW_INSIDE_NET |
						    ~NSB_GW_INSIDE_MASK,
					    NSB_GW_GW_INSIDE, &nsb_gw_host_mac);

	g->arp_answered += (uint64_t)answered;
	return answered;
}

/* Whether a translated packet is correct, as --verify checks it. */
static int translated_ok(const struct nsb_gw_gen *g, struct rte_mbuf *m,
			 int outside)
{
	if (outside)
		return nsb_gw_packet_ok(m, 1, NSB_GW_POOL_FIRST,
					NSB_GW_POOL_FIRST + 255);
	return nsb_gw_packet_ok(m, 0, NSB_GW_INSIDE_NET + 1,
				NSB_GW_INSIDE_NET + g->o->hosts);
}

/* Take what the gateway sent on one side: answer its ARP requests; on the
 * outside reflect a share of the packets as return traffic; free the rest
 * (inside: the translated return traffic). */
static void gen_drain(struct nsb_gw_gen *g, int outside)
{
	struct rte_ring *from = outside ? g->ports->out_tx : g->ports->in_tx;
	struct rte_ring *to = outside ? g->ports->out_rx : g->ports->in_rx;
	struct rte_mbuf *m[DRAIN], *back[DRAIN], *gone[DRAIN];
	unsigned int n, nb = 0, ng = 0, done;

	n = rte_ring_sc_dequeue_burst(from, (void **)m, DRAIN, NULL);
	for (unsigned int i = 0; i < n; i++) {
		struct rte_ether_hdr *eth =
			rte_pktmbuf_mtod(m[i], struct rte_ether_hdr *);

		if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
			if (arp_reply(g, m[i], outside))
				back[nb++] = m[i];
			else
				gone[ng++] = m[i];
			continue;
		}
		if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
			gone[ng++] = m[i];
			continue;
		}
		if (g->o->verify && !translated_ok(g, m[i], outside)) {
			if (outside)
				g->bad_out++;
			else
				g->bad_in++;
		}
		if (outside && (g->reply_acc += g->o->reply_pct) >= 100) {
			g->reply_acc -= 100;
			reflect(m[i]);
			back[nb++] = m[i];
		} else {
			gone[ng++] = m[i];
		}
	}
	done = nb ? rte_ring_sp_enqueue_burst(to, (void **)back, nb, NULL) : 0;
	if (done < nb)
		rte_pktmbuf_free_bulk(back + done, nb - done);
	if (ng)
		rte_pktmbuf_free_bulk(gone, ng);
}

void nsb_gw_gen_step(struct nsb_gw_gen *g, uint64_t tsc)
{
	gen_churn(g, tsc);
	gen_drain(g, 1);
	gen_drain(g, 0);
	gen_feed(g);
}
