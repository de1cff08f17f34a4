/*
 * nsdp_nat_nd.c - IPv6 neighbour discovery (RFC 4861) on the inside port,
 * for NAT64 and NAT66, and on the outside port, for NAT66: what
 * nsdp_nat_arp.c does for ARP. On each port the gateway answers Neighbor
 * Solicitations for its own address there (inside_addr6, outside_addr6),
 * learns hosts from the solicitations and advertisements they send (and,
 * inside, in nsdp_nat64.c and nsdp_nat66.c, from every packet), solicits
 * the hosts it does not know, and advertises its address to all nodes
 * after a promotion. Each port has its own cache.
 *
 * Invariants
 * - The gateway's own addresses are never learned.
 * - A host is solicited at most once per ND_RETRY_NS.
 * - Only ND with a hop limit of 255, code 0 and a good checksum is taken
 *   (RFC 4861 section 7.1.1); the rest counts as nd_ignored.
 *
 * Choices the header leaves open
 * - Every advertisement sets the router and override flags: the gateway
 *   is the inside hosts' router towards the NAT64 prefix and the IPv6
 *   outside, and the outside's way back to outside_addr6.
 * - Each cache is 256 sets of 4 ways, entries replaced by newer information
 *   and by eviction, never aged (as the ARP caches).
 *
 * Not here: router advertisements (the hosts get their route to the
 * prefix by configuration), redirects, duplicate address detection of
 * the gateway's addresses.
 */
#include <errno.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "nsdp_nat_nd.h"
#include "nsdp_nat_state.h"

#define ND_RETRY_NS (100 * NAT_NS_PER_MS)
#define IP6_LEN ((uint32_t)sizeof(struct rte_ipv6_hdr))
/* ICMPv6 header, reserved or flags word, target address. */
#define ND_LEN 24u
/* A link-layer address option for Ethernet: type, length 1 (8 bytes). */
#define ND_OPT_LEN 8u
#define ND_OPT_SOURCE_LL 1
#define ND_OPT_TARGET_LL 2
#define NA_FLAG_ROUTER 0x80u
#define NA_FLAG_SOLICITED 0x40u
#define NA_FLAG_OVERRIDE 0x20u

static const uint8_t all_nodes[16] = {0xff, 2, [15] = 1};

static int addr_unspecified(const uint8_t a[16])
{
	static const uint8_t zero[16];

	return memcmp(a, zero, 16) == 0;
}

/* The gateway's own IPv6 address on port. */
static const uint8_t *own_addr6(const struct nsdp_nat *nat, enum nat_port port)
{
	return port == PORT_INSIDE ? nat->conf.inside_addr6
				   : nat->conf.outside_addr6;
}

/* Build and queue one ND frame on port: an NS (target to solicit, with
 * our source link-layer address) or an NA (target our address there,
 * with our target link-layer address and flags). */
static int nd_send(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
		   enum nat_port port, uint8_t type, const uint8_t dst[16],
		   const struct rte_ether_addr *eth_dst,
		   const uint8_t target[16], uint8_t flags)
{
	const uint32_t len = ETH_LEN + IP6_LEN + ND_LEN + ND_OPT_LEN;
	struct rte_ether_hdr *eth;
	struct rte_ipv6_hdr *ip6;
	struct rte_mbuf *m = NULL;
	uint8_t *nd;

	if (nat->conf.mbuf_pool)
		m = rte_pktmbuf_alloc(nat->conf.mbuf_pool);
	if (unlikely(!m)) {
		NSDP_STAT_INC(nat->st.alloc_failures);
		return -ENOMEM;
	}
	eth = (struct rte_ether_hdr *)rte_pktmbuf_append(m, (uint16_t)len);
	if (unlikely(!eth)) {
		drop(m, &nat->st.alloc_failures);
		return -ENOMEM;
	}
	memset(eth, 0, len);
	rte_ether_addr_copy(eth_dst, &eth->dst_addr);
	rte_ether_addr_copy(&nat->port_mac[port], &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6 = (struct rte_ipv6_hdr *)(eth + 1);
	ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip6->payload_len = rte_cpu_to_be_16(ND_LEN + ND_OPT_LEN);
	ip6->proto = IPPROTO_ICMPV6;
	ip6->hop_limits = 255;
	memcpy(ip6->src_addr, own_addr6(nat, port), 16);
	memcpy(ip6->dst_addr, dst, 16);
	nd = (uint8_t *)(ip6 + 1);
	nd[0] = type;
	nd[4] = flags;
	memcpy(nd + 8, target, 16);
	nd[ND_LEN] = type == ND_NEIGHBOR_SOLICIT ? ND_OPT_SOURCE_LL
						 : ND_OPT_TARGET_LL;
	nd[ND_LEN + 1] = 1;
	memcpy(nd + ND_LEN + 2, &nat->port_mac[port], RTE_ETHER_ADDR_LEN);
	word_store(nd + 2, rte_ipv6_udptcp_cksum(ip6, nd));
	return tx_put(nat, tx, port, m);
}

/* The Ethernet group of IPv6 multicast address ip (RFC 2464). */
static struct rte_ether_addr mcast_mac(const uint8_t ip[16])
{
	struct rte_ether_addr mac = {
		{0x33, 0x33, ip[12], ip[13], ip[14], ip[15]}};
	return mac;
}

int nsdp_nat_nd_announce(struct nsdp_nat *nat, enum nat_port port,
			 struct nsdp_nat_tx *tx)
{
	struct rte_ether_addr to = mcast_mac(all_nodes);
	int rc = nd_send(nat, tx, port, ND_NEIGHBOR_ADVERT, all_nodes, &to,
			 own_addr6(nat, port),
			 NA_FLAG_ROUTER | NA_FLAG_OVERRIDE);

	if (rc == 0)
		NSDP_STAT_INC(nat->st.nd_adverts_sent);
	return rc;
}

/* Which of two occupied entries to give up first (as the ARP cache). */
static int neigh6_older(const struct neigh6 *a, const struct neigh6 *b)
{
	if (a->state != b->state)
		return a->state == NEIGH_PENDING;
	if (a->state == NEIGH_PENDING)
		return a->asked_ns < b->asked_ns;
	return a->updated_ns < b->updated_ns;
}

static struct neigh6 *neigh6_slot(struct nsdp_nat *nat, enum nat_port port,
				  const uint8_t ip[16])
{
	struct neigh6 *set = neigh6_set(nat, port, ip), *victim = NULL;
	unsigned int i;

	for (i = 0; i < NEIGH_WAYS; i++)
		if (set[i].state != NEIGH_EMPTY &&
		    memcmp(set[i].ip, ip, 16) == 0)
			return &set[i];
	for (i = 0; i < NEIGH_WAYS; i++) {
		if (set[i].state == NEIGH_EMPTY)
			return &set[i];
		if (!victim || neigh6_older(&set[i], victim))
			victim = &set[i];
	}
	victim->state = NEIGH_EMPTY;
	victim->asked_ns = 0;
	return victim;
}

void nsdp_nat_neigh6_learn(struct nsdp_nat *nat, enum nat_port port,
			   const uint8_t ip[16],
			   const struct rte_ether_addr *mac, uint64_t now)
{
	struct neigh6 *e;

	if (addr_unspecified(ip) || ip[0] == 0xff ||
	    memcmp(ip, nat->conf.inside_addr6, 16) == 0 ||
	    memcmp(ip, nat->conf.outside_addr6, 16) == 0 ||
	    !rte_is_valid_assigned_ether_addr(mac))
		return;
	e = neigh6_slot(nat, port, ip);
	if (e->state == NEIGH_RESOLVED &&
	    rte_is_same_ether_addr(&e->mac, mac)) {
		e->updated_ns = now;
		return;
	}
	memcpy(e->ip, ip, 16);
	rte_ether_addr_copy(mac, &e->mac);
	e->state = NEIGH_RESOLVED;
	e->updated_ns = now;
}

void nsdp_nat_neigh6_ask(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			 enum nat_port port, const uint8_t ip[16], uint64_t now)
{
	struct neigh6 *e = neigh6_slot(nat, port, ip);
	uint8_t group[16] = {0xff, 2, [11] = 1, [12] = 0xff};
	struct rte_ether_addr to;

	if (e->state != NEIGH_EMPTY && e->asked_ns &&
	    now - e->asked_ns < ND_RETRY_NS)
		return;
	if (e->state == NEIGH_EMPTY) {
		memcpy(e->ip, ip, 16);
		e->state = NEIGH_PENDING;
	}
	e->asked_ns = now;
	memcpy(group + 13, ip + 13, 3); /* solicited-node, RFC 4291 2.7.1 */
	to = mcast_mac(group);
	if (nd_send(nat, tx, port, ND_NEIGHBOR_SOLICIT, group, &to, ip, 0) == 0)
		NSDP_STAT_INC(nat->st.nd_solicits_sent);
}

/* The link-layer address option of type want among the options of the ND
 * message nd of len bytes, in *mac: 1 found, 0 absent, -1 malformed. */
static int nd_option(const uint8_t *nd, uint32_t len, uint8_t want,
		     struct rte_ether_addr *mac)
{
	uint32_t at = ND_LEN;

	while (at + 2 <= len) {
		uint32_t olen = (uint32_t)nd[at + 1] * 8;

		if (olen == 0 || at + olen > len)
			return -1;
		if (nd[at] == want && olen >= 2 + RTE_ETHER_ADDR_LEN) {
			memcpy(mac, nd + at + 2, RTE_ETHER_ADDR_LEN);
			return 1;
		}
		at += olen;
	}
	return 0;
}

/* A Neighbor Solicitation or Advertisement received on port (m's IPv6
 * header checked, its payload in the frame): learn, answer an NS for our
 * address there while active, free m. */
static void nd_input(struct nsdp_nat *nat, enum nat_port port,
		     struct rte_mbuf *m, uint64_t now, struct nsdp_nat_tx *tx)
{
	const uint8_t *own = own_addr6(nat, port);
	struct rte_ipv6_hdr *ip6 =
		rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, ETH_LEN);
	uint32_t len = rte_be_to_cpu_16(ip6->payload_len);
	const uint8_t *nd = (const uint8_t *)(ip6 + 1);
	uint8_t src[16], target[16];
	struct rte_ether_addr mac, from;
	int opt;

	NSDP_STAT_INC(nat->st.nd_in);
	if (len < ND_LEN || rte_pktmbuf_data_len(m) < ETH_LEN + IP6_LEN + len ||
	    ip6->hop_limits != 255 || nd[1] != 0 ||
	    rte_ipv6_udptcp_cksum(ip6, nd) != 0) { /* sums to all ones */
		drop(m, &nat->st.nd_ignored);
		return;
	}
	opt = nd_option(nd, len,
			nd[0] == ND_NEIGHBOR_SOLICIT ? ND_OPT_SOURCE_LL
						     : ND_OPT_TARGET_LL,
			&mac);
	if (opt < 0) {
		drop(m, &nat->st.nd_ignored);
		return;
	}
	memcpy(src, ip6->src_addr, 16);
	memcpy(target, nd + 8, 16);
	rte_ether_addr_copy(
		&rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->src_addr, &from);
	rte_pktmbuf_free(m);
	if (nd[0] == ND_NEIGHBOR_ADVERT) {
		nsdp_nat_neigh6_learn(nat, port, target, opt ? &mac : &from,
				      now);
		return;
	}
	if (opt)
		nsdp_nat_neigh6_learn(nat, port, src, &mac, now);
	if (nat->mode != NSDP_NAT_ACTIVE || memcmp(target, own, 16) != 0) {
		NSDP_STAT_INC(nat->st.nd_ignored);
		return;
	}
	if (addr_unspecified(src)) {
		struct rte_ether_addr to = mcast_mac(all_nodes);

		if (nd_send(nat, tx, port, ND_NEIGHBOR_ADVERT, all_nodes, &to,
			    target, NA_FLAG_ROUTER | NA_FLAG_OVERRIDE) == 0)
			NSDP_STAT_INC(nat->st.nd_adverts_sent);
		return;
	}
	if (nd_send(nat, tx, port, ND_NEIGHBOR_ADVERT, src, opt ? &mac : &from,
		    target,
		    NA_FLAG_ROUTER | NA_FLAG_SOLICITED | NA_FLAG_OVERRIDE) == 0)
		NSDP_STAT_INC(nat->st.nd_adverts_sent);
}

int nsdp_nat_nd_take(struct nsdp_nat *nat, enum nat_port port,
		     struct rte_mbuf *m, const struct rte_ipv6_hdr *ip6,
		     uint64_t now, struct nsdp_nat_tx *tx)
{
	uint8_t type;

	if (ip6->proto != IPPROTO_ICMPV6 ||
	    rte_pktmbuf_data_len(m) < ETH_LEN + IP6_LEN + 1)
		return 0;
	type = *(const uint8_t *)(ip6 + 1);
	if (type < ND_ROUTER_SOLICIT || type > ND_REDIRECT)
		return 0;
	if (type == ND_NEIGHBOR_SOLICIT || type == ND_NEIGHBOR_ADVERT) {
		nd_input(nat, port, m, now, tx);
	} else {
		NSDP_STAT_INC(nat->st.nd_in);
		drop(m, &nat->st.nd_ignored);
	}
	return 1;
}
