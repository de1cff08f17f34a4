/*
 * nsdp_nat_nd.h - IPv6 neighbour discovery on the inside port for NAT64
 * (nsdp_nat_nd.c): the neighbour cache of the inside IPv6 hosts, its
 * per-packet lookup inline, and the ND frames the gateway answers and
 * sends. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT_ND_H
#define NSDP_NAT_ND_H

#include <stdint.h>
#include <string.h>

#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_mbuf.h>

#include "nsdp_nat_state.h"

/* ICMPv6 types (RFC 4443, RFC 4861) the NAT64 path tells apart. */
#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY 129
#define ND_ROUTER_SOLICIT 133
#define ND_REDIRECT 137
#define ND_NEIGHBOR_SOLICIT 135
#define ND_NEIGHBOR_ADVERT 136

static inline struct neigh6 *neigh6_set(struct nsdp_nat *nat,
					const uint8_t ip[16])
{
	uint64_t w[2]; /* aligned for rte_hash_crc's 8-byte loads */
	uint32_t h;

	memcpy(w, ip, sizeof(w));
	h = rte_hash_crc(w, 16, 0) >> (32 - NEIGH6_SET_BITS);
	return &nat->neigh6[h * NEIGH_WAYS];
}

static inline const struct neigh6 *neigh6_lookup(struct nsdp_nat *nat,
						 const uint8_t ip[16])
{
	struct neigh6 *set = neigh6_set(nat, ip);
	unsigned int i;

	for (i = 0; i < NEIGH_WAYS; i++)
		if (set[i].state == NEIGH_RESOLVED &&
		    memcmp(set[i].ip, ip, 16) == 0)
			return &set[i];
	return NULL;
}

/* Learn inside host ip at mac (not the gateway's own address, not an
 * unspecified or multicast one). */
void nsdp_nat_neigh6_learn(struct nsdp_nat *nat, const uint8_t ip[16],
			   const struct rte_ether_addr *mac, uint64_t now);

/* Ask for inside host ip (a Neighbor Solicitation to its solicited-node
 * group) unless it was asked for in the last 100 ms. */
void nsdp_nat_neigh6_ask(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			 const uint8_t ip[16], uint64_t now);

/* A Neighbor Solicitation or Advertisement received on the inside (m's
 * IPv6 header checked, its payload in the frame): learn, answer an NS
 * for inside_addr6 while active, free m. */
void nsdp_nat_nd_input(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
		       struct nsdp_nat_tx *tx);

/* An unsolicited Neighbor Advertisement of inside_addr6 to all nodes
 * (after a promotion): 0 or a negative errno (counted). */
int nsdp_nat_nd_announce(struct nsdp_nat *nat, struct nsdp_nat_tx *tx);

#endif
