/*
 * nsdp_nat_arp.c - ARP and the neighbour caches of the NAT44 fast path.
 *
 * The gateway answers ARP requests for its own addresses on each port
 * (inside_addr inside, the pool outside), learns senders, asks for next
 * hops it does not know, and builds these frames itself from
 * conf.mbuf_pool.
 *
 * Invariants
 * - Our own addresses are never learned: a peer that still claims them
 *   must not redirect our traffic.
 * - An address is asked for at most once per ARP_RETRY_NS.
 *
 * Choices the header leaves open
 * - arp_ignored counts malformed ARP and requests this gateway does not
 *   answer (not for its addresses, announcements, or while a standby);
 *   replies are learned, not counted there.
 * - The caches are fixed 4-way sets; entries are replaced by newer
 *   information and by eviction, never aged. In standby only ARP teaches
 *   them (IP frames are dropped before they are parsed).
 *
 * Not here: the per-packet lookup and the common case of learning, which
 * are inline in nsdp_nat_arp.h.
 */
#include <errno.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include "nsdp_nat_arp.h"
#include "nsdp_nat_state.h"

/* An ARP request for one address at most this often. */
#define ARP_RETRY_NS (100 * NAT_NS_PER_MS)

/* Frames the gateway builds: an ARP packet padded to the Ethernet
 * minimum (without FCS). */
#define ARP_FRAME_LEN (RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN)
#define ARP_LEN ((uint32_t)sizeof(struct rte_arp_hdr))

int nsdp_nat_arp_send(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
		      enum nat_port port, uint16_t op,
		      const struct rte_ether_addr *eth_dst, uint32_t sip,
		      const struct rte_ether_addr *tha, uint32_t tip)
{
	static const struct rte_ether_addr zero_mac;
	struct rte_ether_hdr *eth;
	struct rte_arp_hdr *arp;
	struct rte_mbuf *m = NULL;
	char *data;

	if (nat->conf.mbuf_pool)
		m = rte_pktmbuf_alloc(nat->conf.mbuf_pool);
	if (unlikely(!m)) {
		NSDP_STAT_INC(nat->st.alloc_failures);
		return -ENOMEM;
	}
	data = rte_pktmbuf_append(m, ARP_FRAME_LEN);
	if (unlikely(!data)) {
		drop(m, &nat->st.alloc_failures);
		return -ENOMEM;
	}
	memset(data, 0, ARP_FRAME_LEN);
	eth = (struct rte_ether_hdr *)data;
	if (eth_dst)
		rte_ether_addr_copy(eth_dst, &eth->dst_addr);
	else
		memset(&eth->dst_addr, 0xff, sizeof(eth->dst_addr));
	rte_ether_addr_copy(&nat->port_mac[port], &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp = (struct rte_arp_hdr *)(eth + 1);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = sizeof(uint32_t);
	arp->arp_opcode = rte_cpu_to_be_16(op);
	rte_ether_addr_copy(&nat->port_mac[port], &arp->arp_data.arp_sha);
	arp->arp_data.arp_sip = rte_cpu_to_be_32(sip);
	rte_ether_addr_copy(tha ? tha : &zero_mac, &arp->arp_data.arp_tha);
	arp->arp_data.arp_tip = rte_cpu_to_be_32(tip);
	return tx_put(nat, tx, port, m);
}

/* Which of two occupied entries to give up first: a pending one before a
 * resolved one, then the one asked for or learned longest ago. */
static inline int neigh_older(const struct neigh *a, const struct neigh *b)
{
	if (a->state != b->state)
		return a->state == NEIGH_PENDING;
	if (a->state == NEIGH_PENDING)
		return a->asked_ns < b->asked_ns;
	return a->updated_ns < b->updated_ns;
}

/* The entry for ip, or the one to give to it: an empty one, else the
 * oldest by neigh_older(), emptied. */
static struct neigh *neigh_slot(struct nsdp_nat *nat, enum nat_port port,
				uint32_t ip)
{
	struct neigh *set = neigh_set(nat, port, ip), *victim = NULL;
	unsigned int i;

	for (i = 0; i < NEIGH_WAYS; i++)
		if (set[i].state != NEIGH_EMPTY && set[i].ip == ip)
			return &set[i];
	for (i = 0; i < NEIGH_WAYS; i++) {
		if (set[i].state == NEIGH_EMPTY)
			return &set[i];
		if (!victim || neigh_older(&set[i], victim))
			victim = &set[i];
	}
	victim->state = NEIGH_EMPTY;
	victim->asked_ns = 0;
	return victim;
}

void nsdp_nat_neigh_store(struct nsdp_nat *nat, enum nat_port port, uint32_t ip,
			  const struct rte_ether_addr *mac, uint64_t now)
{
	struct neigh *e = neigh_slot(nat, port, ip);

	e->ip = ip;
	rte_ether_addr_copy(mac, &e->mac);
	e->state = NEIGH_RESOLVED;
	e->updated_ns = now;
}

void nsdp_nat_neigh_ask(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			enum nat_port port, uint32_t ip, uint64_t now)
{
	struct neigh *e = neigh_slot(nat, port, ip);

	if (e->state != NEIGH_EMPTY && e->asked_ns &&
	    now - e->asked_ns < ARP_RETRY_NS)
		return;
	if (e->state == NEIGH_EMPTY) {
		e->ip = ip;
		e->state = NEIGH_PENDING;
	}
	e->asked_ns = now;
	if (nsdp_nat_arp_send(nat, tx, port, RTE_ARP_OP_REQUEST, NULL,
			      nat->port_ip[port], NULL, ip) == 0)
		NSDP_STAT_INC(nat->st.arp_requests_sent);
}

static inline int own_addr(const struct nsdp_nat *nat, enum nat_port port,
			   uint32_t ip)
{
	return port == PORT_INSIDE ? ip == nat->conf.inside_addr
				   : in_pool(nat, ip);
}

void nsdp_nat_arp_input(struct nsdp_nat *nat, enum nat_port port,
			struct rte_mbuf *m, uint64_t now,
			struct nsdp_nat_tx *tx)
{
	const struct rte_arp_hdr *arp;
	struct rte_ether_addr sha;
	uint32_t sip, tip;
	uint16_t op;

	NSDP_STAT_INC(nat->st.arp_in);
	if (rte_pktmbuf_data_len(m) < ETH_LEN + ARP_LEN) {
		drop(m, &nat->st.arp_ignored);
		return;
	}
	arp = rte_pktmbuf_mtod_offset(m, const struct rte_arp_hdr *, ETH_LEN);
	op = rte_be_to_cpu_16(arp->arp_opcode);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN ||
	    arp->arp_plen != sizeof(uint32_t) ||
	    (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY)) {
		drop(m, &nat->st.arp_ignored);
		return;
	}
	rte_ether_addr_copy(&arp->arp_data.arp_sha, &sha);
	sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
	tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
	rte_pktmbuf_free(m);

	if (!own_addr(nat, port, sip))
		neigh_learn(nat, port, sip, &sha, now);
	if (op != RTE_ARP_OP_REQUEST)
		return;
	if (nat->mode != NSDP_NAT_ACTIVE || sip == tip ||
	    !own_addr(nat, port, tip)) {
		NSDP_STAT_INC(nat->st.arp_ignored);
		return;
	}
	if (nsdp_nat_arp_send(nat, tx, port, RTE_ARP_OP_REPLY, &sha, tip, &sha,
			      sip) == 0)
		NSDP_STAT_INC(nat->st.arp_replies_sent);
}
