/*
 * nsdp_nat.c - the NAT44 fast path (see nsdp_nat.h for the contract and the
 * policy for bad input).
 *
 * One struct nsdp_nat per forwarding lcore. The lcore parses each frame in
 * place, looks the flow up in the session table by its inside tuple
 * (outbound) or by its reply tuple (inbound), creates a session for a new
 * outbound flow, rewrites address, port or ICMP identifier, TTL and the
 * checksums incrementally (RFC 1624), and puts the frame on the other
 * port's tx list with the next hop's MAC address.
 *
 * Invariants
 * - The lcore is the only writer of the table, the port maps and the
 *   per-position side state while it is ACTIVE. nsdp_nat_activate() writes
 *   them on the control thread only while the lcore has acknowledged
 *   STANDBY; the acknowledgement (mode_seen, release) and the request
 *   (mode_req, release) order those writes with the lcore's.
 * - A port bit is set exactly while a live session this gateway knows
 *   holds that (protocol, outside address, port); ports_in_use counts the
 *   set bits. Bits past port_max in a map's last word are always set, so a
 *   scan never returns them.
 * - side[pos] describes the session at table position pos when live is set
 *   and its proto and orig equal the table's; anything else is treated as
 *   a new occupant of the position and reinitialised from the table.
 * - Every frame handed in is put on a tx list or freed and counted once.
 *   A full tx list (the caller did not empty it between calls) frees the
 *   frame and counts it in alloc_failures; the announcements after a
 *   promotion wait for room instead.
 *
 * Choices the header leaves open
 * - At promotion the TCP state of a replicated session is inferred from its
 *   timeout: tcp_syn_ms -> SYN sent, tcp_closing_ms -> closing, anything
 *   else -> established (a wrong "established" only keeps a dead flow a
 *   little longer; a wrong "SYN sent" would cut a live one). When two of
 *   the timeouts are equal, established wins.
 * - The timeout is a function of protocol and TCP state under this
 *   gateway's configuration; a session whose recorded timeout differs (a
 *   replicated one) is refreshed with the new timeout on its next packet.
 * - IP frames whose destination MAC is not the port's, inside packets to a
 *   multicast or broadcast destination, and outside packets to a non-pool
 *   address count as not_ours. Inside packets to inside_addr or to a pool
 *   address count as to_gateway (no hairpinning, no ping answering).
 * - An inside echo reply or an outside echo request has no session to
 *   match (only source NAT is done): no_session.
 * - arp_ignored counts malformed ARP and requests this gateway does not
 *   answer (not for its addresses, announcements, or while a standby);
 *   replies are learned, not counted there.
 * - The neighbor caches are fixed 4-way sets; entries are replaced by newer
 *   information and by eviction, never aged. In standby only ARP teaches
 *   them (IP frames are dropped before they are parsed).
 * - A TCP session opens only on a segment whose only flag among SYN, ACK,
 *   RST and FIN is SYN. An outbound SYN on a closing session (the tuple
 *   reused) puts it back in SYN sent.
 * - A session is created (and recorded) before the next hop is resolved:
 *   the first packet of a flow towards an unresolved next hop is dropped,
 *   its retransmission finds the session.
 *
 * Not done here: ICMP errors (neither sent nor translated), fragments,
 * IP options, VLANs, hairpinning, ping to the gateway, endpoint-dependent
 * mappings. A port held by two replicated sessions (which this gateway never
 * creates) is freed when the first of them goes.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "nsdp_nat.h"
#include "nsdp_time.h"

#define NAT_NS_PER_MS 1000000ull
#define NAT_NS_PER_S 1000000000ull

/* An ARP request for one address at most this often. */
#define ARP_RETRY_NS (100 * NAT_NS_PER_MS)
/* The housekeeper asks for an unresolved next hop at most this often. */
#define NEXTHOP_RETRY_NS NAT_NS_PER_S
/* Expiry sweep: the whole table per period, at least this many per call. */
#define SWEEP_PERIOD_NS NAT_NS_PER_S
#define SWEEP_MIN 64u

/* Neighbor cache: NEIGH_SETS sets of NEIGH_WAYS entries per port. */
#define NEIGH_SET_BITS 10
#define NEIGH_SETS (1u << NEIGH_SET_BITS)
#define NEIGH_WAYS 4u

/* Frames the gateway builds: an ARP packet padded to the Ethernet
 * minimum (without FCS). */
#define ARP_FRAME_LEN (RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN)

#define ETH_LEN ((uint32_t)sizeof(struct rte_ether_hdr))
#define IP_LEN ((uint32_t)sizeof(struct rte_ipv4_hdr))
#define ARP_LEN ((uint32_t)sizeof(struct rte_arp_hdr))

#define TCP_FLAGS_SEEN                                            \
	(RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG | RTE_TCP_RST_FLAG | \
	 RTE_TCP_FIN_FLAG)

enum nat_port { PORT_INSIDE = 0, PORT_OUTSIDE = 1 };

/* Port maps per protocol. */
enum map_proto { MAP_TCP = 0, MAP_UDP = 1, MAP_ICMP = 2, MAP_PROTOS = 3 };

enum tcp_state {
	TCP_NONE = 0, /* not TCP */
	TCP_SYN_SENT,
	TCP_ESTABLISHED,
	TCP_CLOSING,
};

/* What nsdp_nat_housekeep() still has to announce after a promotion. */
#define ANNOUNCE_DONE UINT32_MAX

/* Per table position: the lcore's own view of the session there. */
struct side {
	uint64_t last_seen_ns;
	uint64_t last_record_ns;
	struct ns_tuple orig; /* with proto: who the position belongs to */
	uint32_t timeout_ms;
	uint8_t proto;
	uint8_t live;
	uint8_t tcp; /* enum tcp_state */
	uint8_t pad;
};

struct port_map {
	uint64_t *bits; /* one bit per port, port_min first */
	uint32_t used;
	uint32_t cursor; /* next bit to try */
};

enum neigh_state { NEIGH_EMPTY = 0, NEIGH_PENDING = 1, NEIGH_RESOLVED = 2 };

struct neigh {
	uint32_t ip;
	uint8_t state;
	uint8_t pad;
	struct rte_ether_addr mac;
	uint64_t updated_ns; /* last learned (resolved entries) */
	uint64_t asked_ns; /* last ARP request sent for ip */
};

/* A frame the parser accepted: headers in place, tuple in host order as
 * the flow's direction carries it (ICMP: identifier as the port on our
 * side, 0 on the remote side). */
struct pkt {
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	void *l4;
	uint8_t proto;
	uint8_t tcp_flags;
	uint8_t icmp_type;
	struct ns_tuple t;
};

struct nsdp_nat {
	/* Written by the lcore only, read by nsdp_nat_stats(). */
	struct nsdp_nat_stats st __rte_cache_aligned;

	/* The lcore's (and, while it is a standby, activate's). */
	struct nsdp_nat_conf conf __rte_cache_aligned;
	struct nsdp_table *table;
	struct nsdp_lane *lane;
	struct side *side;
	uint32_t n_positions;
	uint32_t n_pool;
	uint32_t n_ports;
	uint32_t map_words;
	struct port_map maps[MAP_PROTOS * NSDP_NAT_MAX_POOL];
	uint64_t *map_bits;
	uint64_t ports_in_use; /* read by others with relaxed loads */
	struct neigh *neigh[2];
	struct rte_ether_addr port_mac[2];
	uint32_t port_ip[2]; /* sender address of our ARP requests */

	/* The lcore's alone. */
	enum nsdp_nat_mode mode;
	uint32_t epoch_now; /* the epoch records carry, taken at promotion */
	uint32_t announce_next;
	uint32_t sweep_pos;
	uint64_t last_housekeep_ns;
	uint64_t nexthop_asked_ns;

	/* The handshake with the control thread. */
	uint32_t mode_req __rte_cache_aligned;
	uint32_t mode_seen;
	uint32_t epoch;
};

static inline void count(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

#define COUNT(nat, field) count(&(nat)->st.field)

/* ------------------------------------------------------------------ */
/* parsing                                                              */
/* ------------------------------------------------------------------ */

static inline int in_pool(const struct nsdp_nat *nat, uint32_t addr)
{
	return addr - nat->conf.pool_first < nat->n_pool;
}

/* Validate the IPv4 header of m (after the Ethernet header); NULL when it
 * is good, else the counter of the reason to drop it. */
static inline uint64_t *ipv4_check(struct nsdp_nat *nat, struct rte_mbuf *m,
				   struct pkt *p)
{
	uint32_t seg = rte_pktmbuf_data_len(m);
	struct rte_ipv4_hdr *ip;
	uint16_t total, frag;

	if (unlikely(seg < ETH_LEN + IP_LEN))
		return &nat->st.truncated;
	ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, ETH_LEN);
	if (unlikely((ip->version_ihl >> 4) != 4 ||
		     (ip->version_ihl & 0xf) < 5))
		return &nat->st.bad_ip_header;
	if (unlikely((ip->version_ihl & 0xf) != 5))
		return &nat->st.ip_options;
	if (unlikely(rte_raw_cksum(ip, IP_LEN) != 0xffff))
		return &nat->st.bad_ip_checksum;
	total = rte_be_to_cpu_16(ip->total_length);
	if (unlikely(total < IP_LEN ||
		     total > rte_pktmbuf_pkt_len(m) - ETH_LEN))
		return &nat->st.bad_ip_header;
	frag = rte_be_to_cpu_16(ip->fragment_offset);
	if (unlikely(frag & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)))
		return &nat->st.fragments;
	p->ip = ip;
	p->proto = ip->next_proto_id;
	p->t.saddr = rte_be_to_cpu_32(ip->src_addr);
	p->t.daddr = rte_be_to_cpu_32(ip->dst_addr);
	return NULL;
}

/* Parse the L4 header of a checked IPv4 packet and fill the ports of
 * p->t; NULL when good, else the reason to drop. inbound: the
 * packet comes from the remote side (inbound), which decides where an
 * ICMP identifier goes. */
static inline uint64_t *l4_parse(struct nsdp_nat *nat, struct rte_mbuf *m,
				 struct pkt *p, int inbound)
{
	uint32_t in_seg = rte_pktmbuf_data_len(m) - ETH_LEN - IP_LEN;
	uint32_t l4_len = rte_be_to_cpu_16(p->ip->total_length) - IP_LEN;
	uint32_t have = RTE_MIN(in_seg, l4_len);
	uint8_t *l4 = (uint8_t *)p->ip + IP_LEN;

	p->l4 = l4;
	switch (p->proto) {
	case IPPROTO_TCP: {
		const struct rte_tcp_hdr *tcp = (const struct rte_tcp_hdr *)l4;
		uint32_t doff;

		if (unlikely(have < sizeof(*tcp)))
			return &nat->st.truncated;
		doff = (uint32_t)(tcp->data_off >> 4) * 4;
		if (unlikely(doff < sizeof(*tcp) || doff > l4_len))
			return &nat->st.truncated;
		p->t.sport = rte_be_to_cpu_16(tcp->src_port);
		p->t.dport = rte_be_to_cpu_16(tcp->dst_port);
		p->tcp_flags = tcp->tcp_flags;
		return NULL;
	}
	case IPPROTO_UDP: {
		const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)l4;

		if (unlikely(have < sizeof(*udp)))
			return &nat->st.truncated;
		p->t.sport = rte_be_to_cpu_16(udp->src_port);
		p->t.dport = rte_be_to_cpu_16(udp->dst_port);
		return NULL;
	}
	case IPPROTO_ICMP: {
		const struct rte_icmp_hdr *icmp =
			(const struct rte_icmp_hdr *)l4;
		uint16_t id;

		if (unlikely(have < sizeof(*icmp)))
			return &nat->st.truncated;
		if (unlikely(icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST &&
			     icmp->icmp_type != RTE_IP_ICMP_ECHO_REPLY))
			return &nat->st.icmp_unsupported;
		p->icmp_type = icmp->icmp_type;
		id = rte_be_to_cpu_16(icmp->icmp_ident);
		p->t.sport = inbound ? 0 : id;
		p->t.dport = inbound ? id : 0;
		return NULL;
	}
	default:
		return &nat->st.unknown_proto;
	}
}

/* ------------------------------------------------------------------ */
/* checksums (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'))                 */
/* ------------------------------------------------------------------ */

/* The helpers work on the 16-bit words as they lie in the packet (network
 * order); one's complement sums do not depend on the byte order as long
 * as every term is taken the same way. */
static inline uint32_t csum_delta16(uint32_t acc, uint16_t old, uint16_t new)
{
	return acc + (uint16_t)~old + new;
}

static inline uint32_t csum_delta32(uint32_t acc, uint32_t old, uint32_t new)
{
	acc = csum_delta16(acc, (uint16_t)(old >> 16), (uint16_t)(new >> 16));
	return csum_delta16(acc, (uint16_t)old, (uint16_t) new);
}

static inline uint16_t csum_apply(uint16_t cksum, uint32_t delta)
{
	uint32_t sum = (uint32_t)(uint16_t)~cksum + delta;

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Raw 16-bit words of a header, as they lie in the packet. */
static inline uint16_t word_load(const uint8_t *at)
{
	uint16_t v;

	memcpy(&v, at, sizeof(v));
	return v;
}

static inline void word_store(uint8_t *at, uint16_t v)
{
	memcpy(at, &v, sizeof(v));
}

/* Rewrite the source address and port (outbound) or the destination
 * address and port (inbound; for ICMP echo the identifier either way) and
 * decrement the TTL, updating every checksum. */
static inline void translate(struct pkt *p, int inbound, uint32_t addr_host,
			     uint16_t port_host)
{
	struct rte_ipv4_hdr *ip = p->ip;
	uint8_t *l4 = p->l4;
	rte_be32_t old_addr = inbound ? ip->dst_addr : ip->src_addr;
	rte_be32_t new_addr = rte_cpu_to_be_32(addr_host);
	uint16_t new_port = rte_cpu_to_be_16(port_host), old_port;
	uint16_t old_ttl = rte_cpu_to_be_16(
		(uint16_t)(ip->time_to_live << 8 | ip->next_proto_id));
	uint16_t new_ttl = rte_cpu_to_be_16(
		(uint16_t)((ip->time_to_live - 1) << 8 | ip->next_proto_id));
	uint32_t addr_delta = csum_delta32(0, old_addr, new_addr);
	size_t port_at, cksum_at;
	uint16_t c;

	ip->time_to_live--;
	if (inbound)
		ip->dst_addr = new_addr;
	else
		ip->src_addr = new_addr;
	ip->hdr_checksum = csum_apply(
		ip->hdr_checksum, csum_delta16(addr_delta, old_ttl, new_ttl));

	switch (p->proto) {
	case IPPROTO_TCP:
		port_at = inbound ? offsetof(struct rte_tcp_hdr, dst_port)
				  : offsetof(struct rte_tcp_hdr, src_port);
		cksum_at = offsetof(struct rte_tcp_hdr, cksum);
		break;
	case IPPROTO_UDP:
		port_at = inbound ? offsetof(struct rte_udp_hdr, dst_port)
				  : offsetof(struct rte_udp_hdr, src_port);
		cksum_at = offsetof(struct rte_udp_hdr, dgram_cksum);
		break;
	default: /* ICMP echo: the identifier, no pseudo header */
		port_at = offsetof(struct rte_icmp_hdr, icmp_ident);
		cksum_at = offsetof(struct rte_icmp_hdr, icmp_cksum);
		addr_delta = 0;
		break;
	}
	old_port = word_load(l4 + port_at);
	word_store(l4 + port_at, new_port);
	c = word_load(l4 + cksum_at);
	if (p->proto == IPPROTO_UDP && c == 0)
		return; /* no checksum, and none is added */
	c = csum_apply(c, csum_delta16(addr_delta, old_port, new_port));
	if (p->proto == IPPROTO_UDP && c == 0)
		c = 0xffff; /* 0 would mean "no checksum" */
	word_store(l4 + cksum_at, c);
}

/* ------------------------------------------------------------------ */
/* transmit lists and ARP frames                                        */
/* ------------------------------------------------------------------ */

static inline unsigned int tx_room(const struct nsdp_nat_tx *tx,
				   enum nat_port port)
{
	return NSDP_NAT_TX_MAX -
	       (port == PORT_INSIDE ? tx->n_inside : tx->n_outside);
}

/* Queue m on port's list; 0, or -ENOBUFS when the list is full (m freed
 * and counted). */
static inline int tx_put(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			 enum nat_port port, struct rte_mbuf *m)
{
	if (unlikely(tx_room(tx, port) == 0)) {
		rte_pktmbuf_free(m);
		COUNT(nat, alloc_failures);
		return -ENOBUFS;
	}
	if (port == PORT_INSIDE) {
		tx->inside[tx->n_inside++] = m;
		COUNT(nat, tx_inside);
	} else {
		tx->outside[tx->n_outside++] = m;
		COUNT(nat, tx_outside);
	}
	return 0;
}

/* Build and queue one ARP frame on port: eth_dst NULL means broadcast,
 * tha NULL means all zeroes. 0 or a negative errno (counted). */
static int arp_send(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
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
		COUNT(nat, alloc_failures);
		return -ENOMEM;
	}
	data = rte_pktmbuf_append(m, ARP_FRAME_LEN);
	if (unlikely(!data)) {
		rte_pktmbuf_free(m);
		COUNT(nat, alloc_failures);
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

/* ------------------------------------------------------------------ */
/* neighbors                                                            */
/* ------------------------------------------------------------------ */

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

static inline void neigh_learn(struct nsdp_nat *nat, enum nat_port port,
			       uint32_t ip, const struct rte_ether_addr *mac,
			       uint64_t now)
{
	struct neigh *set = neigh_set(nat, port, ip), *e;
	unsigned int i;

	if (ip == 0 || !rte_is_valid_assigned_ether_addr(mac))
		return;
	for (i = 0; i < NEIGH_WAYS; i++) {
		e = &set[i];
		if (e->ip == ip && e->state == NEIGH_RESOLVED &&
		    rte_is_same_ether_addr(&e->mac, mac)) {
			e->updated_ns = now;
			return;
		}
	}
	e = neigh_slot(nat, port, ip);
	e->ip = ip;
	rte_ether_addr_copy(mac, &e->mac);
	e->state = NEIGH_RESOLVED;
	e->updated_ns = now;
}

/* Ask for ip on port unless it was asked for in the last ARP_RETRY_NS. */
static void neigh_ask(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
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
	if (arp_send(nat, tx, port, RTE_ARP_OP_REQUEST, NULL,
		     nat->port_ip[port], NULL, ip) == 0)
		COUNT(nat, arp_requests_sent);
}

/* Rewrite the Ethernet header for next hop nh on port and queue m, or
 * drop it and ask for nh. */
static inline void forward(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			   enum nat_port port, struct pkt *p,
			   struct rte_mbuf *m, uint32_t nh, uint64_t now)
{
	const struct neigh *n = neigh_lookup(nat, port, nh);

	if (unlikely(!n)) {
		COUNT(nat, neigh_miss);
		rte_pktmbuf_free(m);
		neigh_ask(nat, tx, port, nh, now);
		return;
	}
	rte_ether_addr_copy(&n->mac, &p->eth->dst_addr);
	rte_ether_addr_copy(&nat->port_mac[port], &p->eth->src_addr);
	tx_put(nat, tx, port, m);
}

/* ------------------------------------------------------------------ */
/* ports                                                                */
/* ------------------------------------------------------------------ */

static inline int map_proto(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return MAP_TCP;
	case IPPROTO_UDP:
		return MAP_UDP;
	case IPPROTO_ICMP:
		return MAP_ICMP;
	default:
		return -1;
	}
}

static inline struct port_map *map_of(struct nsdp_nat *nat, int mp,
				      uint32_t addr_idx)
{
	return &nat->maps[(uint32_t)mp * nat->n_pool + addr_idx];
}

static void maps_clear(struct nsdp_nat *nat)
{
	uint32_t tail = nat->n_ports % 64, i;

	memset(nat->map_bits, 0,
	       (size_t)MAP_PROTOS * nat->n_pool * nat->map_words *
		       sizeof(uint64_t));
	for (i = 0; i < MAP_PROTOS * nat->n_pool; i++) {
		struct port_map *pm = &nat->maps[i];

		pm->used = 0;
		pm->cursor = 0;
		if (tail)
			pm->bits[nat->map_words - 1] = ~0ull << tail;
	}
	__atomic_store_n(&nat->ports_in_use, 0, __ATOMIC_RELAXED);
}

/* A clear bit at or after pm->cursor, wrapping; pm has one. */
static inline uint32_t map_find_free(const struct nsdp_nat *nat,
				     const struct port_map *pm)
{
	uint32_t words = nat->map_words, w = pm->cursor / 64, i;
	uint64_t free_bits = ~pm->bits[w] & (~0ull << (pm->cursor % 64));

	if (free_bits)
		return w * 64 + (uint32_t)__builtin_ctzll(free_bits);
	for (i = 1; i <= words; i++) {
		uint32_t x = (w + i) % words;

		free_bits = ~pm->bits[x];
		if (free_bits)
			return x * 64 + (uint32_t)__builtin_ctzll(free_bits);
	}
	return UINT32_MAX; /* not reached while used < n_ports */
}

/* An outside address and port for a new session of inside host saddr:
 * the address its hash picks while that one has free ports, else the
 * next ones. 0 or -ENOSPC. */
static int port_alloc(struct nsdp_nat *nat, int mp, uint32_t saddr,
		      uint32_t *addr, uint16_t *port)
{
	uint32_t start =
		(uint32_t)(((uint64_t)(saddr * 0x9e3779b1u) * nat->n_pool) >>
			   32);
	uint32_t i;

	for (i = 0; i < nat->n_pool; i++) {
		uint32_t a = start + i < nat->n_pool ? start + i
						     : start + i - nat->n_pool;
		struct port_map *pm = map_of(nat, mp, a);
		uint32_t bit;

		if (pm->used >= nat->n_ports)
			continue;
		bit = map_find_free(nat, pm);
		if (unlikely(bit >= nat->n_ports))
			continue;
		pm->bits[bit / 64] |= 1ull << (bit % 64);
		pm->used++;
		pm->cursor = bit + 1 < nat->n_ports ? bit + 1 : 0;
		__atomic_store_n(&nat->ports_in_use, nat->ports_in_use + 1,
				 __ATOMIC_RELAXED);
		*addr = nat->conf.pool_first + a;
		*port = (uint16_t)(nat->conf.port_min + bit);
		return 0;
	}
	return -ENOSPC;
}

/* The map bit of (proto, addr, port), or NULL when the map does not cover
 * it (an address outside the pool or a port outside the range). */
static inline struct port_map *port_locate(struct nsdp_nat *nat, uint8_t proto,
					   uint32_t addr, uint16_t port,
					   uint32_t *bit)
{
	int mp = map_proto(proto);

	if (mp < 0 || !in_pool(nat, addr) || port < nat->conf.port_min ||
	    port > nat->conf.port_max)
		return NULL;
	*bit = (uint32_t)(port - nat->conf.port_min);
	return map_of(nat, mp, addr - nat->conf.pool_first);
}

static void port_free(struct nsdp_nat *nat, uint8_t proto, uint32_t addr,
		      uint16_t port)
{
	uint32_t bit = 0;
	struct port_map *pm = port_locate(nat, proto, addr, port, &bit);
	uint64_t mask = 1ull << (bit % 64);

	if (!pm || !(pm->bits[bit / 64] & mask))
		return;
	pm->bits[bit / 64] &= ~mask;
	pm->used--;
	__atomic_store_n(&nat->ports_in_use, nat->ports_in_use - 1,
			 __ATOMIC_RELAXED);
}

/* Mark a replicated session's port; the map's cursor moves past the
 * highest port marked, roughly where the previous active left it. */
static void port_mark(struct nsdp_nat *nat, uint8_t proto, uint32_t addr,
		      uint16_t port)
{
	uint32_t bit = 0;
	struct port_map *pm = port_locate(nat, proto, addr, port, &bit);
	uint64_t mask = 1ull << (bit % 64);

	if (!pm || (pm->bits[bit / 64] & mask))
		return;
	pm->bits[bit / 64] |= mask;
	pm->used++;
	if (bit + 1 > pm->cursor)
		pm->cursor = bit + 1 < nat->n_ports ? bit + 1 : 0;
	__atomic_store_n(&nat->ports_in_use, nat->ports_in_use + 1,
			 __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* sessions                                                             */
/* ------------------------------------------------------------------ */

static inline uint32_t timeout_for(const struct nsdp_nat *nat, uint8_t proto,
				   uint8_t tcp)
{
	switch (proto) {
	case IPPROTO_TCP:
		if (tcp == TCP_ESTABLISHED)
			return nat->conf.tcp_established_ms;
		if (tcp == TCP_CLOSING)
			return nat->conf.tcp_closing_ms;
		return nat->conf.tcp_syn_ms;
	case IPPROTO_UDP:
		return nat->conf.udp_ms;
	default:
		return nat->conf.icmp_ms;
	}
}

static uint8_t tcp_state_from_timeout(const struct nsdp_nat *nat,
				      uint32_t timeout_ms)
{
	if (timeout_ms == nat->conf.tcp_established_ms)
		return TCP_ESTABLISHED;
	if (timeout_ms == nat->conf.tcp_syn_ms)
		return TCP_SYN_SENT;
	if (timeout_ms == nat->conf.tcp_closing_ms)
		return TCP_CLOSING;
	return TCP_ESTABLISHED;
}

static inline int side_owns(const struct side *sd, const struct ns_session *s)
{
	return sd->live && sd->proto == s->proto &&
	       sd->orig.saddr == s->orig.saddr &&
	       sd->orig.daddr == s->orig.daddr &&
	       sd->orig.sport == s->orig.sport &&
	       sd->orig.dport == s->orig.dport;
}

/* Side state for a session this lcore did not create (replicated, or a
 * position it finds reused): its idle timer restarts at now. */
static void side_adopt(const struct nsdp_nat *nat, struct side *sd,
		       const struct ns_session *s, uint64_t now)
{
	sd->last_seen_ns = now;
	sd->last_record_ns = s->timestamp_ns < now ? s->timestamp_ns : now;
	sd->orig = s->orig;
	sd->proto = s->proto;
	sd->timeout_ms = s->timeout_ms;
	sd->tcp = s->proto == IPPROTO_TCP
			  ? tcp_state_from_timeout(nat, s->timeout_ms)
			  : TCP_NONE;
	sd->live = 1;
}

static inline void session_stamp(const struct nsdp_nat *nat,
				 struct ns_session *s, uint8_t event,
				 uint64_t now)
{
	s->version = NS_RECORD_VERSION;
	s->family = NS_FAMILY_IPV4;
	s->event = event;
	s->gateway_id = nat->conf.gateway_id;
	s->epoch = nat->epoch_now;
	s->timestamp_ns = now;
	memset(s->reserved, 0, sizeof(s->reserved));
}

static inline void session_record(struct nsdp_nat *nat,
				  const struct ns_session *s)
{
	if (!nat->lane)
		return;
	if (likely(nsdp_record(nat->lane, s) == 0))
		COUNT(nat, recorded);
	else
		COUNT(nat, record_drops);
}

/* Store a new session; 0 with *pos, or -ENOSPC. A tombstone of the same
 * flow left from the standby days that is newer than s (another clock)
 * would make the table ignore s: it is removed and s applied again. */
static int session_store(struct nsdp_nat *nat, const struct ns_session *s,
			 int32_t *pos)
{
	struct ns_session check;
	int attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		if (nsdp_table_apply_pos(nat->table, s, pos) != 0)
			return -ENOSPC;
		if (nsdp_table_at(nat->table, (uint32_t)*pos, &check) == 0 &&
		    check.xlat.saddr == s->xlat.saddr &&
		    check.xlat.sport == s->xlat.sport &&
		    check.timestamp_ns == s->timestamp_ns)
			return 0;
		nsdp_table_remove(nat->table, s->proto, &s->orig);
	}
	return -ENOSPC;
}

/* Create the session of p's outbound flow into *s; its position, or -1
 * with *why the counter of the reason. */
static int32_t session_create(struct nsdp_nat *nat, const struct pkt *p,
			      uint64_t now, struct ns_session *s,
			      uint64_t **why)
{
	struct nsdp_table_stats ts;
	struct side *sd;
	uint32_t addr;
	uint16_t port;
	int32_t pos;
	uint8_t tcp = p->proto == IPPROTO_TCP ? TCP_SYN_SENT : TCP_NONE;

	nsdp_table_stats(nat->table, &ts);
	if (unlikely(ts.live >= nat->conf.max_sessions)) {
		*why = &nat->st.table_full;
		return -1;
	}
	if (unlikely(port_alloc(nat, map_proto(p->proto), p->t.saddr, &addr,
				&port) != 0)) {
		*why = &nat->st.ports_exhausted;
		return -1;
	}
	memset(s, 0, sizeof(*s));
	s->proto = p->proto;
	s->orig = p->t;
	s->xlat = p->t;
	s->xlat.saddr = addr;
	s->xlat.sport = port;
	s->timeout_ms = timeout_for(nat, p->proto, tcp);
	session_stamp(nat, s, NS_EV_CREATE, now);
	if (unlikely(session_store(nat, s, &pos) != 0)) {
		port_free(nat, p->proto, addr, port);
		*why = &nat->st.table_full;
		return -1;
	}
	sd = &nat->side[pos];
	sd->last_seen_ns = now;
	sd->last_record_ns = now;
	sd->orig = s->orig;
	sd->proto = s->proto;
	sd->timeout_ms = s->timeout_ms;
	sd->tcp = tcp;
	sd->live = 1;
	COUNT(nat, created);
	session_record(nat, s);
	return pos;
}

static void session_refresh(struct nsdp_nat *nat, struct side *sd,
			    struct ns_session *s, uint64_t now)
{
	int32_t pos;

	s->timeout_ms = sd->timeout_ms;
	session_stamp(nat, s, NS_EV_REFRESH, now);
	nsdp_table_apply_pos(nat->table, s, &pos);
	sd->last_record_ns = now;
	COUNT(nat, refreshed);
	session_record(nat, s);
}

/* Remove the session s at pos, free its port and record its end. */
static void session_close(struct nsdp_nat *nat, int32_t pos,
			  struct ns_session *s, uint64_t now)
{
	nsdp_table_remove(nat->table, s->proto, &s->orig);
	nat->side[pos].live = 0;
	port_free(nat, s->proto, s->xlat.saddr, s->xlat.sport);
	session_stamp(nat, s, NS_EV_DELETE, now);
	session_record(nat, s);
}

/* A packet of the existing session s at pos: idle timer, TCP state,
 * refresh. Returns 1 when the packet closes the session (RST). */
static inline int session_touch(struct nsdp_nat *nat, int32_t pos,
				struct ns_session *s, const struct pkt *p,
				int inbound, uint64_t now)
{
	struct side *sd = &nat->side[pos];
	uint32_t timeout;

	if (unlikely(!side_owns(sd, s)))
		side_adopt(nat, sd, s, now);
	sd->last_seen_ns = now;
	if (p->proto == IPPROTO_TCP) {
		uint8_t f = p->tcp_flags & TCP_FLAGS_SEEN;

		if (f & RTE_TCP_RST_FLAG)
			return 1;
		if (f & RTE_TCP_FIN_FLAG)
			sd->tcp = TCP_CLOSING;
		else if (inbound && sd->tcp == TCP_SYN_SENT &&
			 f == (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG))
			sd->tcp = TCP_ESTABLISHED;
		else if (!inbound && sd->tcp == TCP_CLOSING &&
			 f == RTE_TCP_SYN_FLAG)
			sd->tcp = TCP_SYN_SENT; /* the flow's tuple reused */
	}
	timeout = timeout_for(nat, p->proto, sd->tcp);
	if (timeout != sd->timeout_ms) {
		sd->timeout_ms = timeout;
		session_refresh(nat, sd, s, now);
	} else if ((int64_t)(now - sd->last_record_ns) >=
		   (int64_t)((uint64_t)timeout * NAT_NS_PER_MS / 2)) {
		session_refresh(nat, sd, s, now);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* inside path                                                          */
/* ------------------------------------------------------------------ */

static void arp_input(struct nsdp_nat *nat, enum nat_port port,
		      struct rte_mbuf *m, uint64_t now, struct nsdp_nat_tx *tx);

static inline void drop(struct rte_mbuf *m, uint64_t *why)
{
	count(why);
	rte_pktmbuf_free(m);
}

/* Ethernet demultiplexing common to both ports. Returns 1 when m is an
 * IPv4 frame for this port to process, 0 when it was consumed. */
static inline int frame_accept(struct nsdp_nat *nat, enum nat_port port,
			       struct rte_mbuf *m, uint64_t now,
			       struct nsdp_nat_tx *tx, struct pkt *p)
{
	struct rte_ether_hdr *eth;

	if (unlikely(rte_pktmbuf_data_len(m) < ETH_LEN)) {
		drop(m, &nat->st.truncated);
		return 0;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (unlikely(eth->ether_type !=
		     rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))) {
		if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
			arp_input(nat, port, m, now, tx);
		else
			drop(m, &nat->st.not_ipv4);
		return 0;
	}
	if (unlikely(nat->mode != NSDP_NAT_ACTIVE)) {
		drop(m, &nat->st.standby_drops);
		return 0;
	}
	if (unlikely(!rte_is_same_ether_addr(&eth->dst_addr,
					     &nat->port_mac[port]))) {
		drop(m, &nat->st.not_ours);
		return 0;
	}
	p->eth = eth;
	return 1;
}

static void inside_one(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
		       struct nsdp_nat_tx *tx)
{
	struct ns_session s;
	uint64_t *why;
	struct pkt p;
	int32_t pos;
	int closes = 0;

	if (!frame_accept(nat, PORT_INSIDE, m, now, tx, &p))
		return;
	why = ipv4_check(nat, m, &p);
	if (unlikely(why != NULL))
		goto out_drop;
	if (unlikely(p.t.daddr == nat->conf.inside_addr ||
		     in_pool(nat, p.t.daddr))) {
		why = &nat->st.to_gateway;
		goto out_drop;
	}
	if (unlikely(p.t.daddr >= 0xe0000000u)) { /* multicast, broadcast */
		why = &nat->st.not_ours;
		goto out_drop;
	}
	if (unlikely(p.ip->time_to_live <= 1)) {
		why = &nat->st.ttl_expired;
		goto out_drop;
	}
	why = l4_parse(nat, m, &p, 0);
	if (unlikely(why != NULL))
		goto out_drop;
	neigh_learn(nat, PORT_INSIDE, p.t.saddr, &p.eth->src_addr, now);

	pos = nsdp_table_find(nat->table, p.proto, &p.t, &s);
	if (pos < 0) {
		if (p.proto == IPPROTO_TCP &&
		    (p.tcp_flags & TCP_FLAGS_SEEN) != RTE_TCP_SYN_FLAG) {
			why = &nat->st.tcp_no_session;
			goto out_drop;
		}
		if (p.proto == IPPROTO_ICMP &&
		    p.icmp_type != RTE_IP_ICMP_ECHO_REQUEST) {
			why = &nat->st.no_session;
			goto out_drop;
		}
		pos = session_create(nat, &p, now, &s, &why);
		if (pos < 0)
			goto out_drop;
	} else {
		closes = session_touch(nat, pos, &s, &p, 0, now);
	}

	translate(&p, 0, s.xlat.saddr, s.xlat.sport);
	forward(nat, tx, PORT_OUTSIDE, &p, m,
		nat->conf.next_hop ? nat->conf.next_hop : p.t.daddr, now);
	if (closes) {
		session_close(nat, pos, &s, now);
		COUNT(nat, closed);
	}
	return;
out_drop:
	drop(m, why);
}

/* ------------------------------------------------------------------ */
/* outside path                                                         */
/* ------------------------------------------------------------------ */

static void outside_one(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
			struct nsdp_nat_tx *tx)
{
	struct ns_session s;
	uint64_t *why;
	struct pkt p;
	int32_t pos;
	int closes;

	if (!frame_accept(nat, PORT_OUTSIDE, m, now, tx, &p))
		return;
	why = ipv4_check(nat, m, &p);
	if (unlikely(why != NULL))
		goto out_drop;
	if (unlikely(!in_pool(nat, p.t.daddr))) {
		why = &nat->st.not_ours;
		goto out_drop;
	}
	if (unlikely(p.ip->time_to_live <= 1)) {
		why = &nat->st.ttl_expired;
		goto out_drop;
	}
	why = l4_parse(nat, m, &p, 1);
	if (unlikely(why != NULL))
		goto out_drop;
	if (unlikely(p.proto == IPPROTO_ICMP &&
		     p.icmp_type != RTE_IP_ICMP_ECHO_REPLY)) {
		why = &nat->st.no_session;
		goto out_drop;
	}
	pos = nsdp_table_find_reply(nat->table, p.proto, &p.t, &s);
	if (pos < 0) {
		why = &nat->st.no_session;
		goto out_drop;
	}
	closes = session_touch(nat, pos, &s, &p, 1, now);
	translate(&p, 1, s.orig.saddr, s.orig.sport);
	forward(nat, tx, PORT_INSIDE, &p, m, s.orig.saddr, now);
	if (closes) {
		session_close(nat, pos, &s, now);
		COUNT(nat, closed);
	}
	return;
out_drop:
	drop(m, why);
}

/* ------------------------------------------------------------------ */
/* ARP                                                                  */
/* ------------------------------------------------------------------ */

static inline int own_addr(const struct nsdp_nat *nat, enum nat_port port,
			   uint32_t ip)
{
	return port == PORT_INSIDE ? ip == nat->conf.inside_addr
				   : in_pool(nat, ip);
}

static void arp_input(struct nsdp_nat *nat, enum nat_port port,
		      struct rte_mbuf *m, uint64_t now, struct nsdp_nat_tx *tx)
{
	const struct rte_arp_hdr *arp;
	struct rte_ether_addr sha;
	uint32_t sip, tip;
	uint16_t op;

	COUNT(nat, arp_in);
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

	/* Never learn our own addresses: a peer that still claims them must
	 * not redirect our traffic. */
	if (!own_addr(nat, port, sip))
		neigh_learn(nat, port, sip, &sha, now);
	if (op != RTE_ARP_OP_REQUEST)
		return;
	if (nat->mode != NSDP_NAT_ACTIVE || sip == tip ||
	    !own_addr(nat, port, tip)) {
		COUNT(nat, arp_ignored);
		return;
	}
	if (arp_send(nat, tx, port, RTE_ARP_OP_REPLY, &sha, tip, &sha, sip) ==
	    0)
		COUNT(nat, arp_replies_sent);
}

/* ------------------------------------------------------------------ */
/* housekeeping                                                         */
/* ------------------------------------------------------------------ */

/* After a promotion: a gratuitous ARP for inside_addr, one for each pool
 * address, then a request for the next hop; as many as the tx lists take,
 * the rest at the next call. */
static void announce_step(struct nsdp_nat *nat, uint64_t now,
			  struct nsdp_nat_tx *tx)
{
	while (nat->announce_next != ANNOUNCE_DONE) {
		uint32_t i = nat->announce_next;
		enum nat_port port = i == 0 ? PORT_INSIDE : PORT_OUTSIDE;
		uint32_t ip;

		if (i > nat->n_pool) {
			if (nat->conf.next_hop && tx_room(tx, PORT_OUTSIDE)) {
				nat->nexthop_asked_ns = now;
				if (arp_send(nat, tx, PORT_OUTSIDE,
					     RTE_ARP_OP_REQUEST, NULL,
					     nat->port_ip[PORT_OUTSIDE], NULL,
					     nat->conf.next_hop) == 0)
					COUNT(nat, arp_requests_sent);
			} else if (nat->conf.next_hop) {
				return;
			}
			nat->announce_next = ANNOUNCE_DONE;
			return;
		}
		if (tx_room(tx, port) == 0)
			return;
		ip = i == 0 ? nat->conf.inside_addr
			    : nat->conf.pool_first + (i - 1);
		if (arp_send(nat, tx, port, RTE_ARP_OP_REQUEST, NULL, ip, NULL,
			     ip) == 0)
			COUNT(nat, arp_announcements);
		nat->announce_next = i + 1;
	}
}

/* Visit the next slice of positions and end the idle sessions there. */
static void expire_step(struct nsdp_nat *nat, uint64_t now)
{
	uint64_t elapsed =
		now > nat->last_housekeep_ns ? now - nat->last_housekeep_ns : 0;
	uint64_t slice;
	uint32_t n = nat->n_positions, i;

	if (elapsed > SWEEP_PERIOD_NS)
		elapsed = SWEEP_PERIOD_NS;
	slice = (uint64_t)n * elapsed / SWEEP_PERIOD_NS;
	if (slice < SWEEP_MIN)
		slice = SWEEP_MIN;
	if (slice > n)
		slice = n;
	for (i = 0; i < slice; i++) {
		uint32_t pos = nat->sweep_pos;
		struct side *sd = &nat->side[pos];
		struct ns_session s;
		uint64_t idle_end;

		nat->sweep_pos = pos + 1 < n ? pos + 1 : 0;
		if (!sd->live)
			continue;
		idle_end = sd->last_seen_ns +
			   (uint64_t)sd->timeout_ms * NAT_NS_PER_MS;
		if (idle_end > now)
			continue;
		if (nsdp_table_at(nat->table, pos, &s) != 0 ||
		    !side_owns(sd, &s)) {
			sd->live = 0; /* the session went another way */
			continue;
		}
		session_close(nat, (int32_t)pos, &s, now);
		COUNT(nat, expired);
	}
}

static void nexthop_step(struct nsdp_nat *nat, uint64_t now,
			 struct nsdp_nat_tx *tx)
{
	uint32_t nh = nat->conf.next_hop;

	if (!nh || now - nat->nexthop_asked_ns < NEXTHOP_RETRY_NS ||
	    neigh_lookup(nat, PORT_OUTSIDE, nh))
		return;
	nat->nexthop_asked_ns = now;
	neigh_ask(nat, tx, PORT_OUTSIDE, nh, now);
}

/* ------------------------------------------------------------------ */
/* modes                                                                */
/* ------------------------------------------------------------------ */

/* Wait until the lcore reports mode, polling every millisecond, until
 * deadline (CLOCK_MONOTONIC). 0 or -ETIMEDOUT. */
static int mode_wait(const struct nsdp_nat *nat, uint32_t mode,
		     uint64_t deadline)
{
	const struct timespec ms = {.tv_sec = 0, .tv_nsec = NAT_NS_PER_MS};

	for (;;) {
		if (__atomic_load_n(&nat->mode_seen, __ATOMIC_ACQUIRE) == mode)
			return 0;
		if (nsdp_mono_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&ms, NULL);
	}
}

/* Port maps and side state from the table as the standby left it. */
static void rebuild_from_table(struct nsdp_nat *nat, uint64_t now)
{
	struct ns_session s;
	uint32_t pos;

	nsdp_table_purge_tombstones(nat->table);
	maps_clear(nat);
	memset(nat->side, 0, (size_t)nat->n_positions * sizeof(*nat->side));
	for (pos = 0; pos < nat->n_positions; pos++) {
		if (nsdp_table_at(nat->table, pos, &s) != 0)
			continue;
		port_mark(nat, s.proto, s.xlat.saddr, s.xlat.sport);
		side_adopt(nat, &nat->side[pos], &s, now);
	}
}

/* ------------------------------------------------------------------ */
/* public                                                               */
/* ------------------------------------------------------------------ */

int nsdp_nat_conf_check(const struct nsdp_nat_conf *c, char *err, size_t errlen)
{
	const char *why = NULL;

	if (!c)
		why = "no configuration";
	else if (c->inside_addr == 0)
		why = "inside_addr is not set";
	else if (c->pool_first == 0 || c->pool_last < c->pool_first)
		why = "the pool is empty (pool_first must be 1..pool_last)";
	else if (c->pool_last - c->pool_first >= NSDP_NAT_MAX_POOL)
		why = "the pool has more than 256 addresses";
	else if (c->inside_addr >= c->pool_first &&
		 c->inside_addr <= c->pool_last)
		why = "inside_addr is in the pool";
	else if (c->next_hop && (c->next_hop == c->inside_addr ||
				 (c->next_hop >= c->pool_first &&
				  c->next_hop <= c->pool_last)))
		why = "next_hop is one of the gateway's own addresses";
	else if (c->port_min == 0 || c->port_max < c->port_min)
		why = "the port range is empty (port_min must be 1..port_max)";
	else if (!c->tcp_syn_ms || !c->tcp_established_ms ||
		 !c->tcp_closing_ms || !c->udp_ms || !c->icmp_ms)
		why = "every timeout must be at least 1 ms";
	else if (c->max_sessions == 0)
		why = "max_sessions is 0";
	if (!why)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

struct nsdp_nat *nsdp_nat_create(const struct nsdp_nat_conf *conf,
				 struct nsdp_table *table,
				 struct nsdp_lane *lane)
{
	struct nsdp_nat *nat;
	size_t words_all;
	uint32_t i;

	if (!table || nsdp_nat_conf_check(conf, NULL, 0) != 0) {
		errno = EINVAL;
		return NULL;
	}
	nat = rte_zmalloc("nsdp_nat", sizeof(*nat), RTE_CACHE_LINE_SIZE);
	if (!nat) {
		errno = ENOMEM;
		return NULL;
	}
	nat->conf = *conf;
	nat->table = table;
	nat->lane = lane;
	nat->n_positions = nsdp_table_positions(table);
	nat->n_pool = conf->pool_last - conf->pool_first + 1;
	nat->n_ports = (uint32_t)conf->port_max - conf->port_min + 1;
	nat->map_words = (nat->n_ports + 63) / 64;
	nat->port_mac[PORT_INSIDE] = conf->inside_mac;
	nat->port_mac[PORT_OUTSIDE] = conf->outside_mac;
	nat->port_ip[PORT_INSIDE] = conf->inside_addr;
	nat->port_ip[PORT_OUTSIDE] = conf->pool_first;
	nat->mode = NSDP_NAT_STANDBY;
	nat->announce_next = ANNOUNCE_DONE;

	words_all = (size_t)MAP_PROTOS * nat->n_pool * nat->map_words;
	nat->map_bits =
		rte_zmalloc("nsdp_nat_ports", words_all * sizeof(uint64_t),
			    RTE_CACHE_LINE_SIZE);
	nat->side = rte_zmalloc("nsdp_nat_side",
				(size_t)nat->n_positions * sizeof(struct side),
				RTE_CACHE_LINE_SIZE);
	for (i = 0; i < 2; i++)
		nat->neigh[i] = rte_zmalloc("nsdp_nat_neigh",
					    (size_t)NEIGH_SETS * NEIGH_WAYS *
						    sizeof(struct neigh),
					    RTE_CACHE_LINE_SIZE);
	if (!nat->map_bits || !nat->side || !nat->neigh[0] || !nat->neigh[1]) {
		nsdp_nat_free(nat);
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < MAP_PROTOS * nat->n_pool; i++)
		nat->maps[i].bits = nat->map_bits + (size_t)i * nat->map_words;
	maps_clear(nat);
	return nat;
}

void nsdp_nat_free(struct nsdp_nat *nat)
{
	if (!nat)
		return;
	rte_free(nat->map_bits);
	rte_free(nat->side);
	rte_free(nat->neigh[0]);
	rte_free(nat->neigh[1]);
	rte_free(nat);
}

void nsdp_nat_inside(struct nsdp_nat *nat, struct rte_mbuf **pkts,
		     unsigned int n, uint64_t now_ns, struct nsdp_nat_tx *tx)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		COUNT(nat, rx_inside);
		inside_one(nat, pkts[i], now_ns, tx);
	}
}

void nsdp_nat_outside(struct nsdp_nat *nat, struct rte_mbuf **pkts,
		      unsigned int n, uint64_t now_ns, struct nsdp_nat_tx *tx)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		COUNT(nat, rx_outside);
		outside_one(nat, pkts[i], now_ns, tx);
	}
}

void nsdp_nat_housekeep(struct nsdp_nat *nat, uint64_t now_ns,
			struct nsdp_nat_tx *tx)
{
	uint32_t req = __atomic_load_n(&nat->mode_req, __ATOMIC_ACQUIRE);

	if (unlikely(req != (uint32_t)nat->mode)) {
		nat->mode = (enum nsdp_nat_mode)req;
		if (req == NSDP_NAT_ACTIVE) {
			nat->epoch_now =
				__atomic_load_n(&nat->epoch, __ATOMIC_RELAXED);
			nat->announce_next = 0;
			nat->sweep_pos = 0;
			nat->nexthop_asked_ns = now_ns;
		} else {
			nat->announce_next = ANNOUNCE_DONE;
		}
		__atomic_store_n(&nat->mode_seen, req, __ATOMIC_RELEASE);
	}
	if (nat->mode == NSDP_NAT_ACTIVE) {
		announce_step(nat, now_ns, tx);
		expire_step(nat, now_ns);
		nexthop_step(nat, now_ns, tx);
	}
	nat->last_housekeep_ns = now_ns;
}

int nsdp_nat_activate(struct nsdp_nat *nat, uint32_t epoch, int timeout_ms)
{
	uint64_t deadline =
		nsdp_mono_ns() +
		(uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * NAT_NS_PER_MS;
	int rc;

	if (__atomic_load_n(&nat->mode_req, __ATOMIC_ACQUIRE) ==
	    NSDP_NAT_ACTIVE)
		return -EBUSY;
	/* A deactivation that timed out may still be on its way. */
	rc = mode_wait(nat, NSDP_NAT_STANDBY, deadline);
	if (rc)
		return rc;
	rebuild_from_table(nat, nsdp_realtime_ns());
	__atomic_store_n(&nat->epoch, epoch, __ATOMIC_RELAXED);
	__atomic_store_n(&nat->mode_req, NSDP_NAT_ACTIVE, __ATOMIC_RELEASE);
	rc = mode_wait(nat, NSDP_NAT_ACTIVE, deadline);
	if (rc) {
		/* Withdraw the request; should the lcore have taken it
		 * meanwhile, it returns to standby at its next housekeep
		 * (nsdp_nat_deactivate() waits for that). */
		__atomic_store_n(&nat->mode_req, NSDP_NAT_STANDBY,
				 __ATOMIC_RELEASE);
	}
	return rc;
}

int nsdp_nat_deactivate(struct nsdp_nat *nat, int timeout_ms)
{
	uint64_t deadline =
		nsdp_mono_ns() +
		(uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * NAT_NS_PER_MS;

	__atomic_store_n(&nat->mode_req, NSDP_NAT_STANDBY, __ATOMIC_RELEASE);
	return mode_wait(nat, NSDP_NAT_STANDBY, deadline);
}

enum nsdp_nat_mode nsdp_nat_mode(const struct nsdp_nat *nat)
{
	return (enum nsdp_nat_mode)__atomic_load_n(&nat->mode_seen,
						   __ATOMIC_ACQUIRE);
}

uint32_t nsdp_nat_epoch(const struct nsdp_nat *nat)
{
	return __atomic_load_n(&nat->epoch, __ATOMIC_RELAXED);
}

void nsdp_nat_stats(const struct nsdp_nat *nat, struct nsdp_nat_stats *s)
{
	const uint64_t *src = (const uint64_t *)&nat->st;
	uint64_t *dst = (uint64_t *)s;
	size_t i;

	for (i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

uint64_t nsdp_nat_ports_in_use(const struct nsdp_nat *nat)
{
	return __atomic_load_n(&nat->ports_in_use, __ATOMIC_RELAXED);
}
