/*
 * nsb_frame.h - test frames for the NAT44 fast path, built and checked
 * byte by byte: Ethernet + IPv4 (optionally with NOP options) + TCP, UDP or
 * ICMP echo with correct checksums, and ARP. Shared by tests/test_nat.c and
 * natsync-gwbench's traffic generator.
 *
 * Plain bytes in, plain bytes out: no mbufs, no allocation, nothing of the
 * NAT's. All addresses and ports are in host byte order.
 */
#ifndef NSB_FRAME_H
#define NSB_FRAME_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_ip.h>

/* An ARP frame, padded to the Ethernet minimum. */
#define NSB_FRAME_ARP_LEN 60

struct nsb_frame {
	struct rte_ether_addr src, dst;
	uint32_t saddr, daddr;
	uint8_t proto, ttl, tcp_flags, icmp_type;
	uint16_t sport, dport; /* ICMP: sport is the identifier */
	uint16_t payload; /* bytes after the L4 header */
	uint8_t opt_words; /* IP options, 4-byte words */
	int no_udp_cksum;
};

/* The L4 header's length for proto (TCP, UDP, ICMP), else 0. */
uint32_t nsb_frame_l4_header_len(uint8_t proto);

/* Fill buf (room for the whole frame) with fr; returns the frame length. */
uint32_t nsb_frame_write(const struct nsb_frame *fr, uint8_t *buf);

/* Fill buf with NSB_FRAME_ARP_LEN bytes: an ARP packet of op from sha/sip
 * asking for (or answering about) tip, sent to eth_dst. */
void nsb_frame_arp_write(uint8_t *buf, uint16_t op,
			 const struct rte_ether_addr *eth_dst,
			 const struct rte_ether_addr *sha, uint32_t sip,
			 uint32_t tip);

/* The ICMP checksum of len bytes at icmp (whose checksum field is 0). */
uint16_t nsb_frame_icmp_cksum(const void *icmp, uint32_t len);

/* The IP header checksum of ip recomputed from scratch. */
uint16_t nsb_frame_ip_cksum(struct rte_ipv4_hdr *ip);

/* The L4 checksum ip's packet carries (*got) and the one recomputed from
 * scratch (*want): TCP, UDP, else ICMP. The L4 header follows ip in
 * memory; the packet is left as it was. */
void nsb_frame_l4_cksums(struct rte_ipv4_hdr *ip, uint16_t *got,
			 uint16_t *want);

/* Sum over pseudo header and L4 segment (a 20-byte IP header's payload,
 * which follows it), checksum field included: 0xffff for a correct
 * checksum, something else by as much as it is wrong. */
uint16_t nsb_frame_l4_verify_sum(const struct rte_ipv4_hdr *ip);

#endif
