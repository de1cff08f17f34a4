/*
 * nsb_frame.c - frames built and checked byte by byte, for the NAT's tests
 * and natsync-gwbench.
 *
 * A frame written here is what a well-behaved host sends: IPv4 with DF,
 * NOP options when asked, a payload with a fixed pattern, every checksum
 * right (unless no_udp_cksum). The checkers recompute checksums from the
 * bytes alone, so they judge the NAT's incremental updates independently.
 *
 * Not here: mbufs (the callers own allocation), malformed frames (a test
 * spoils a good one itself).
 */
#include <stddef.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "nsb_frame.h"

uint32_t nsb_frame_l4_header_len(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return sizeof(struct rte_tcp_hdr);
	case IPPROTO_UDP:
		return sizeof(struct rte_udp_hdr);
	case IPPROTO_ICMP:
		return sizeof(struct rte_icmp_hdr);
	default:
		return 0;
	}
}

uint16_t nsb_frame_icmp_cksum(const void *icmp, uint32_t len)
{
	return (uint16_t)~rte_raw_cksum(icmp, len);
}

static void l4_write(const struct nsb_frame *fr, struct rte_ipv4_hdr *ip,
		     uint8_t *l4, uint32_t l4_len)
{
	switch (fr->proto) {
	case IPPROTO_TCP: {
		struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)l4;

		tcp->src_port = rte_cpu_to_be_16(fr->sport);
		tcp->dst_port = rte_cpu_to_be_16(fr->dport);
		tcp->sent_seq = rte_cpu_to_be_32(1000);
		tcp->recv_ack = rte_cpu_to_be_32(
			fr->tcp_flags & RTE_TCP_ACK_FLAG ? 2000 : 0);
		tcp->data_off = 5 << 4;
		tcp->tcp_flags = fr->tcp_flags;
		tcp->rx_win = rte_cpu_to_be_16(65535);
		tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
		break;
	}
	case IPPROTO_UDP: {
		struct rte_udp_hdr *udp = (struct rte_udp_hdr *)l4;

		udp->src_port = rte_cpu_to_be_16(fr->sport);
		udp->dst_port = rte_cpu_to_be_16(fr->dport);
		udp->dgram_len = rte_cpu_to_be_16((uint16_t)l4_len);
		if (!fr->no_udp_cksum)
			udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
		break;
	}
	case IPPROTO_ICMP: {
		struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)l4;

		icmp->icmp_type = fr->icmp_type;
		icmp->icmp_ident = rte_cpu_to_be_16(fr->sport);
		icmp->icmp_seq_nb = rte_cpu_to_be_16(1);
		icmp->icmp_cksum = nsb_frame_icmp_cksum(icmp, l4_len);
		break;
	}
	default:
		break;
	}
}

uint32_t nsb_frame_write(const struct nsb_frame *fr, uint8_t *buf)
{
	uint32_t ihl = 20 + 4u * fr->opt_words;
	uint32_t l4_len = nsb_frame_l4_header_len(fr->proto) + fr->payload;
	uint32_t len = (uint32_t)sizeof(struct rte_ether_hdr) + ihl + l4_len;
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint8_t *l4 = (uint8_t *)ip + ihl;
	uint8_t *payload = l4 + nsb_frame_l4_header_len(fr->proto);
	uint32_t i;

	memset(buf, 0, len);
	eth->dst_addr = fr->dst;
	eth->src_addr = fr->src;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = (uint8_t)(0x40 | ihl / 4);
	ip->total_length = rte_cpu_to_be_16((uint16_t)(ihl + l4_len));
	ip->packet_id = rte_cpu_to_be_16(0x4d2);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = fr->ttl;
	ip->next_proto_id = fr->proto;
	ip->src_addr = rte_cpu_to_be_32(fr->saddr);
	ip->dst_addr = rte_cpu_to_be_32(fr->daddr);
	for (i = 20; i < ihl; i++)
		((uint8_t *)ip)[i] = 1; /* NOP options */
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	for (i = 0; i < fr->payload; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	l4_write(fr, ip, l4, l4_len);
	return len;
}

void nsb_frame_arp_write(uint8_t *buf, uint16_t op,
			 const struct rte_ether_addr *eth_dst,
			 const struct rte_ether_addr *sha, uint32_t sip,
			 uint32_t tip)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	memset(buf, 0, NSB_FRAME_ARP_LEN);
	eth->dst_addr = *eth_dst;
	eth->src_addr = *sha;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = 6;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(op);
	arp->arp_data.arp_sha = *sha;
	arp->arp_data.arp_sip = rte_cpu_to_be_32(sip);
	arp->arp_data.arp_tip = rte_cpu_to_be_32(tip);
}

uint16_t nsb_frame_ip_cksum(struct rte_ipv4_hdr *ip)
{
	uint16_t got = ip->hdr_checksum, want;

	ip->hdr_checksum = 0;
	want = rte_ipv4_cksum(ip);
	ip->hdr_checksum = got;
	return want;
}

void nsb_frame_l4_cksums(struct rte_ipv4_hdr *ip, uint16_t *got, uint16_t *want)
{
	uint8_t *l4 = (uint8_t *)ip + rte_ipv4_hdr_len(ip);
	uint32_t l4_len =
		rte_be_to_cpu_16(ip->total_length) - rte_ipv4_hdr_len(ip);
	int udptcp = ip->next_proto_id == IPPROTO_TCP ||
		     ip->next_proto_id == IPPROTO_UDP;
	size_t off = ip->next_proto_id == IPPROTO_TCP
			     ? offsetof(struct rte_tcp_hdr, cksum)
		     : ip->next_proto_id == IPPROTO_UDP
			     ? offsetof(struct rte_udp_hdr, dgram_cksum)
			     : offsetof(struct rte_icmp_hdr, icmp_cksum);
	const uint16_t zero = 0;

	memcpy(got, l4 + off, sizeof(*got));
	memcpy(l4 + off, &zero, sizeof(zero));
	*want = udptcp ? rte_ipv4_udptcp_cksum(ip, l4)
		       : nsb_frame_icmp_cksum(l4, l4_len);
	memcpy(l4 + off, got, sizeof(*got));
}

uint16_t nsb_frame_l4_verify_sum(const struct rte_ipv4_hdr *ip)
{
	uint32_t len = rte_be_to_cpu_16(ip->total_length) - 20;
	uint32_t sum = rte_raw_cksum((const uint8_t *)ip + 20, len);

	sum += rte_ipv4_phdr_cksum(ip, 0);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}
