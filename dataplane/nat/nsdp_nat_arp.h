/*
 * nsdp_nat_arp.h - ARP and the neighbour caches of the NAT44 fast path
 * (nsdp_nat_arp.c): the per-packet lookup and the common case of learning
 * inline, the rest in the .c. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT_ARP_H
#define NSDP_NAT_ARP_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "nsdp_nat_defer.h"
#include "nsdp_nat_state.h"

/* The set of NEIGH_WAYS entries ip belongs to on port. */
static inline struct neigh *neigh_set(struct nsdp_nat *nat, enum nat_port port,
				      uint32_t ip)
{
	uint32_t h = (ip * 0x9e3779b1u) >> (32 - NEIGH_SET_BITS);

	return &nat->neigh[port][h * NEIGH_WAYS];
}

static inline const struct neigh *neigh_lookup(struct nsdp_nat *nat,
					       enum nat_port port, uint32_t ip)
{
	struct neigh *set = neigh_set(nat, port, ip);
	unsigned int i;

	for (i = 0; i < NEIGH_WAYS; i++)
		if (set[i].ip == ip && set[i].state == NEIGH_RESOLVED)
			return &set[i];
	return NULL;
}

void nsdp_nat_neigh_store(struct nsdp_nat *nat, enum nat_port port, uint32_t ip,
			  const struct rte_ether_addr *mac, uint64_t now);

/* Learn ip at mac on port. Inline for the common case of every packet of
 * a host: the entry is there already and only its time moves. */
static inline void neigh_learn(struct nsdp_nat *nat, enum nat_port port,
			       uint32_t ip, const struct rte_ether_addr *mac,
			       uint64_t now)
{
	struct neigh *set = neigh_set(nat, port, ip);
	unsigned int i;

	if (ip == 0 || !rte_is_valid_assigned_ether_addr(mac))
		return;
	for (i = 0; i < NEIGH_WAYS; i++) {
		struct neigh *e = &set[i];

		if (e->ip == ip && e->state == NEIGH_RESOLVED &&
		    rte_is_same_ether_addr(&e->mac, mac)) {
			e->updated_ns = now;
			return;
		}
	}
	nsdp_nat_neigh_store(nat, port, ip, mac, now);
}

/* Ask for ip on port unless it was asked for in the last 100 ms. */
void nsdp_nat_neigh_ask(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			enum nat_port port, uint32_t ip, uint64_t now);

/* Build and queue one ARP frame on port: eth_dst NULL means broadcast,
 * tha NULL means all zeroes. 0 or a negative errno (counted). */
int nsdp_nat_arp_send(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
		      enum nat_port port, uint16_t op,
		      const struct rte_ether_addr *eth_dst, uint32_t sip,
		      const struct rte_ether_addr *tha, uint32_t tip);

/* An ARP frame received on port: learn, answer, free m. */
void nsdp_nat_arp_input(struct nsdp_nat *nat, enum nat_port port,
			struct rte_mbuf *m, uint64_t now,
			struct nsdp_nat_tx *tx);

/* Rewrite the Ethernet header eth of m for IPv4 next hop nh on port and
 * queue m (or hold it until record defer_seq settles, when not 0), or
 * drop it and ask for nh. */
static inline void forward(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			   enum nat_port port, struct rte_ether_hdr *eth,
			   struct rte_mbuf *m, uint32_t nh, uint64_t now,
			   uint64_t defer_seq)
{
	const struct neigh *n = neigh_lookup(nat, port, nh);

	if (unlikely(!n)) {
		drop(m, &nat->st.neigh_miss);
		nsdp_nat_neigh_ask(nat, tx, port, nh, now);
		return;
	}
	rte_ether_addr_copy(&n->mac, &eth->dst_addr);
	rte_ether_addr_copy(&nat->port_mac[port], &eth->src_addr);
	if (defer_seq && nsdp_nat_defer_hold(nat, m, defer_seq, now) == 0)
		return;
	tx_put(nat, tx, port, m);
}

#endif
