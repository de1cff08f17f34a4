/*
 * nsdp_nat_nd.h - IPv6 neighbour discovery for NAT64 and NAT66
 * (nsdp_nat_nd.c): the neighbour caches of the IPv6 hosts on each port,
 * their per-packet lookup and forwarding inline, and the ND frames the
 * gateway answers and sends. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT_ND_H
#define NSDP_NAT_ND_H

#include <stdint.h>
#include <string.h>

#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_mbuf.h>

#include "nsdp_nat_defer.h"
#include "nsdp_nat_state.h"

/* ICMPv6 types (RFC 4443, RFC 4861) the NAT64 path tells apart. */
#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY 129
#define ND_ROUTER_SOLICIT 133
#define ND_REDIRECT 137
#define ND_NEIGHBOR_SOLICIT 135
#define ND_NEIGHBOR_ADVERT 136

static inline struct neigh6 *
neigh6_set(struct nsdp_nat *nat, enum nat_port port, const uint8_t ip[16])
{
	uint64_t w[2]; /* aligned for rte_hash_crc's 8-byte loads */
	uint32_t h;

	memcpy(w, ip, sizeof(w));
	h = rte_hash_crc(w, 16, 0) >> (32 - NEIGH6_SET_BITS);
	return &nat->neigh6[port][h * NEIGH_WAYS];
}

static inline const struct neigh6 *
neigh6_lookup(struct nsdp_nat *nat, enum nat_port port, const uint8_t ip[16])
{
	struct neigh6 *set = neigh6_set(nat, port, ip);
	unsigned int i;

	for (i = 0; i < NEIGH_WAYS; i++)
		if (set[i].state == NEIGH_RESOLVED &&
		    memcmp(set[i].ip, ip, 16) == 0)
			return &set[i];
	return NULL;
}

/* Learn host ip at mac on port (not one of the gateway's own addresses,
 * not an unspecified or multicast one). */
void nsdp_nat_neigh6_learn(struct nsdp_nat *nat, enum nat_port port,
			   const uint8_t ip[16],
			   const struct rte_ether_addr *mac, uint64_t now);

/* Ask for host ip on port (a Neighbor Solicitation to its solicited-node
 * group) unless it was asked for in the last 100 ms. */
void nsdp_nat_neigh6_ask(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			 enum nat_port port, const uint8_t ip[16],
			 uint64_t now);

/* Neighbour discovery received on port, told from the rest before the
 * mode and MAC checks (solicitations come to a multicast group); ip6 is
 * m's checked IPv6 header. 1 when m was consumed (a Neighbor
 * Solicitation or Advertisement learned from and answered as RFC 4861
 * asks, the rest of ND counted and dropped), 0 when m is no ND. */
int nsdp_nat_nd_take(struct nsdp_nat *nat, enum nat_port port,
		     struct rte_mbuf *m, const struct rte_ipv6_hdr *ip6,
		     uint64_t now, struct nsdp_nat_tx *tx);

/* An unsolicited Neighbor Advertisement of the gateway's address on port
 * to all nodes (after a promotion): 0 or a negative errno (counted). */
int nsdp_nat_nd_announce(struct nsdp_nat *nat, enum nat_port port,
			 struct nsdp_nat_tx *tx);

/* Rewrite the Ethernet header eth of m for IPv6 host ip on port and queue
 * m (or hold it until record defer_seq settles, when not 0), or drop it
 * and ask for ip. */
static inline void forward6(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			    enum nat_port port, struct rte_ether_hdr *eth,
			    struct rte_mbuf *m, const uint8_t ip[16],
			    uint64_t now, uint64_t defer_seq)
{
	const struct neigh6 *n = neigh6_lookup(nat, port, ip);

	if (unlikely(!n)) {
		drop(m, &nat->st.neigh_miss);
		nsdp_nat_neigh6_ask(nat, tx, port, ip, now);
		return;
	}
	rte_ether_addr_copy(&n->mac, &eth->dst_addr);
	rte_ether_addr_copy(&nat->port_mac[port], &eth->src_addr);
	if (defer_seq && nsdp_nat_defer_hold(nat, m, defer_seq, now) == 0)
		return;
	tx_put(nat, tx, port, m);
}

#endif
