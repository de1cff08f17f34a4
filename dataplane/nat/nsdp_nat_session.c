/*
 * nsdp_nat_session.c - the NAT44's outside ports and the life of its
 * sessions: create, refresh, close, each stored in the table and recorded
 * into the lane.
 *
 * Invariants
 * - A port bit is set exactly while a live session this gateway knows
 *   holds that (protocol, outside address, port); ports_in_use counts the
 *   set bits. Bits past port_max in a map's last word are always set, so a
 *   scan never returns them.
 * - side[pos] describes the session at table position pos when live is set
 *   and its proto and orig equal the table's; anything else is treated as
 *   a new occupant of the position and reinitialised from the table.
 *
 * Choices the header leaves open
 * - At promotion the TCP state of a replicated session is inferred from its
 *   timeout: tcp_syn_ms -> SYN sent, tcp_closing_ms -> closing, anything
 *   else -> established (a wrong "established" only keeps a dead flow a
 *   little longer; a wrong "SYN sent" would cut a live one). When two of
 *   the timeouts are equal, established wins.
 * - A session is created (and recorded) before the next hop is resolved:
 *   the first packet of a flow towards an unresolved next hop is dropped,
 *   its retransmission finds the session.
 *
 * NAT64 sessions (family 64) take their ports from the same maps (an
 * ICMPv6 echo session from the ICMP one), so a NAT44 and a NAT64 session
 * never share an outside port; they live in the table's IPv6 table, with
 * their side state in side6 by its positions. NAT66 sessions (family 6)
 * live there too, but their outside address is outside_addr6: they take
 * their ports from that address's own maps (maps6), where the same
 * invariants hold.
 *
 * Not here: endpoint-dependent mappings. A port held by two replicated
 * sessions (which this gateway never creates) is freed when the first of
 * them goes.
 */
#include <errno.h>
#include <string.h>

#include <rte_hash_crc.h>
#include <rte_malloc.h>

#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"

static inline int map_proto(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return MAP_TCP;
	case IPPROTO_UDP:
		return MAP_UDP;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: /* NAT64 echo: the same identifiers */
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

static void map_clear(const struct nsdp_nat *nat, struct port_map *pm)
{
	uint32_t tail = nat->n_ports % 64;

	memset(pm->bits, 0, (size_t)nat->map_words * sizeof(uint64_t));
	pm->used = 0;
	pm->cursor = 0;
	if (tail)
		pm->bits[nat->map_words - 1] = ~0ull << tail;
}

void nsdp_nat_maps_clear(struct nsdp_nat *nat)
{
	uint32_t i;

	for (i = 0; i < MAP_PROTOS * nat->n_pool; i++)
		map_clear(nat, &nat->maps[i]);
	if (nat->nat66)
		for (i = 0; i < MAP_PROTOS; i++)
			map_clear(nat, &nat->maps6[i]);
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

/* Take a free port of pm into *port: 0, or -ENOSPC when it has none. */
static int map_take(struct nsdp_nat *nat, struct port_map *pm, uint16_t *port)
{
	uint32_t bit;

	if (pm->used >= nat->n_ports)
		return -ENOSPC;
	bit = map_find_free(nat, pm);
	if (unlikely(bit >= nat->n_ports))
		return -ENOSPC;
	pm->bits[bit / 64] |= 1ull << (bit % 64);
	pm->used++;
	pm->cursor = bit + 1 < nat->n_ports ? bit + 1 : 0;
	NSDP_STAT_INC(nat->ports_in_use);
	*port = (uint16_t)(nat->conf.port_min + bit);
	return 0;
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

		if (map_take(nat, map_of(nat, mp, a), port) == 0) {
			*addr = nat->conf.pool_first + a;
			return 0;
		}
	}
	return -ENOSPC;
}

/* The map of (proto, addr, port) and its bit there, or NULL when the map
 * does not cover it (an address outside the pool or a port outside the
 * range). */
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

/* port_locate() for a NAT66 session's port (on outside_addr6). */
static inline struct port_map *
port_locate66(struct nsdp_nat *nat, uint8_t proto, uint16_t port, uint32_t *bit)
{
	int mp = map_proto(proto);

	if (mp < 0 || !nat->nat66 || port < nat->conf.port_min ||
	    port > nat->conf.port_max)
		return NULL;
	*bit = (uint32_t)(port - nat->conf.port_min);
	return &nat->maps6[mp];
}

static void map_free(struct nsdp_nat *nat, struct port_map *pm, uint32_t bit)
{
	uint64_t mask = 1ull << (bit % 64);

	if (!pm || !(pm->bits[bit / 64] & mask))
		return;
	pm->bits[bit / 64] &= ~mask;
	pm->used--;
	NSDP_STAT_SUB(nat->ports_in_use, 1);
}

static void port_free(struct nsdp_nat *nat, uint8_t proto, uint32_t addr,
		      uint16_t port)
{
	uint32_t bit = 0;
	struct port_map *pm = port_locate(nat, proto, addr, port, &bit);

	map_free(nat, pm, bit);
}

/* The map's cursor moves past the highest port marked, roughly where the
 * previous active left it. */
static void map_mark(struct nsdp_nat *nat, struct port_map *pm, uint32_t bit)
{
	uint64_t mask = 1ull << (bit % 64);

	if (!pm || (pm->bits[bit / 64] & mask))
		return;
	pm->bits[bit / 64] |= mask;
	pm->used++;
	if (bit + 1 > pm->cursor)
		pm->cursor = bit + 1 < nat->n_ports ? bit + 1 : 0;
	NSDP_STAT_INC(nat->ports_in_use);
}

void nsdp_nat_port_mark(struct nsdp_nat *nat, uint8_t proto, uint32_t addr,
			uint16_t port)
{
	uint32_t bit = 0;
	struct port_map *pm = port_locate(nat, proto, addr, port, &bit);

	map_mark(nat, pm, bit);
}

void nsdp_nat6_port_mark(struct nsdp_nat *nat, const struct ns_rec *r)
{
	uint32_t bit = 0;
	struct port_map *pm;

	if (r->s.family == NS_FAMILY_NAT66) {
		pm = port_locate66(nat, r->s.proto, r->s.xlat.sport, &bit);
		map_mark(nat, pm, bit);
	} else {
		nsdp_nat_port_mark(nat, r->s.proto, r->s.xlat.saddr,
				   r->s.xlat.sport);
	}
}

/* Free the outside port of the IPv6 session r (NAT64 or NAT66). */
static void port_free6(struct nsdp_nat *nat, const struct ns_rec *r)
{
	uint32_t bit = 0;
	struct port_map *pm;

	if (r->s.family == NS_FAMILY_NAT66) {
		pm = port_locate66(nat, r->s.proto, r->s.xlat.sport, &bit);
		map_free(nat, pm, bit);
	} else {
		port_free(nat, r->s.proto, r->s.xlat.saddr, r->s.xlat.sport);
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

static void side_set(struct side *sd, const struct ns_session *s, uint8_t tcp,
		     uint64_t last_seen, uint64_t last_record)
{
	sd->last_seen_ns = last_seen;
	sd->last_record_ns = last_record;
	sd->orig = s->orig;
	sd->proto = s->proto;
	sd->timeout_ms = s->timeout_ms;
	sd->tcp = tcp;
	__atomic_store_n(&sd->seen, 0, __ATOMIC_RELAXED);
	sd->live = 1;
}

void nsdp_nat_side_adopt(const struct nsdp_nat *nat, struct side *sd,
			 const struct ns_session *s, uint64_t now)
{
	side_set(sd, s,
		 s->proto == IPPROTO_TCP
			 ? tcp_state_from_timeout(nat, s->timeout_ms)
			 : TCP_NONE,
		 now, s->timestamp_ns < now ? s->timestamp_ns : now);
}

/* The stamp rises strictly from record to record whatever the wall clock
 * does (nsdp_stamp_next), so that neither this table nor the standby's
 * takes a session's later event for an older one. */
static inline void session_stamp(struct nsdp_nat *nat, struct ns_session *s,
				 uint8_t event, uint64_t now)
{
	s->version = NS_RECORD_VERSION;
	s->event = event;
	s->gateway_id = nat->conf.gateway_id;
	s->epoch = nat->epoch_now;
	s->timestamp_ns = nsdp_stamp_next(&nat->last_stamp_ns, now);
	memset(s->reserved, 0, sizeof(s->reserved));
}

static inline void session_record(struct nsdp_nat *nat,
				  const struct ns_session *s)
{
	nat->rec_seq = 0;
	if (!nat->lane)
		return;
	if (likely(nsdp_record(nat->lane, s) == 0)) {
		NSDP_STAT_INC(nat->st.recorded);
		nat->rec_seq = nsdp_lane_last(nat->lane);
	} else {
		NSDP_STAT_INC(nat->st.record_drops);
	}
}

int nsdp_nat_session_adopt(struct nsdp_nat *nat, const struct ns_session *s,
			   uint64_t now)
{
	uint32_t bit = 0;
	struct port_map *pm =
		port_locate(nat, s->proto, s->xlat.saddr, s->xlat.sport, &bit);
	struct ns_session got;
	int32_t pos;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	if (nsdp_table_find(nat->table, s->proto, &s->orig, &got) >= 0)
		return -EEXIST;
	if (pm && (pm->bits[bit / 64] & (1ull << (bit % 64)))) {
		got = *s;
		session_stamp(nat, &got, NS_EV_DELETE, now);
		session_record(nat, &got);
		return -EADDRINUSE;
	}
	if (nsdp_table_apply_pos(nat->table, s, &pos) != 0)
		return -ENOSPC;
	/* A tombstone newer than s (this gateway ended the flow) stays. */
	if (nsdp_table_at(nat->table, (uint32_t)pos, &got) != 0 ||
	    got.timestamp_ns != s->timestamp_ns || got.epoch != s->epoch)
		return -EEXIST;
	map_mark(nat, pm, bit);
	nsdp_nat_side_adopt(nat, &nat->side[pos], s, now);
	__atomic_store_n(&nat->side[pos].seen, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Store a new session; 0 with *pos, or -ENOSPC. A tombstone of the same
 * flow left from the standby days that is newer than s (another clock)
 * would make the table ignore s: it is removed and s applied again. */
static int session_store(struct nsdp_nat *nat, const struct ns_session *s,
			 int32_t *pos)
{
	struct ns_session check;
	int attempt;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
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

int32_t nsdp_nat_session_create(struct nsdp_nat *nat, const struct pkt *p,
				uint64_t now, struct ns_session *s,
				uint64_t **why)
{
	struct nsdp_table_stats ts;
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
	s->family = NS_FAMILY_IPV4;
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
	side_set(&nat->side[pos], s, tcp, now, now);
	NSDP_STAT_INC(nat->st.created);
	session_record(nat, s);
	return pos;
}

void nsdp_nat_session_refresh(struct nsdp_nat *nat, struct side *sd,
			      struct ns_session *s, uint64_t now)
{
	int32_t pos;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	s->timeout_ms = sd->timeout_ms;
	session_stamp(nat, s, NS_EV_REFRESH, now);
	nsdp_table_apply_pos(nat->table, s, &pos);
	sd->last_record_ns = now;
	NSDP_STAT_INC(nat->st.refreshed);
	session_record(nat, s);
}

void nsdp_nat_session_close(struct nsdp_nat *nat, int32_t pos,
			    struct ns_session *s, uint64_t now)
{
	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	nsdp_table_remove(nat->table, s->proto, &s->orig);
	nat->side[pos].live = 0;
	port_free(nat, s->proto, s->xlat.saddr, s->xlat.sport);
	session_stamp(nat, s, NS_EV_DELETE, now);
	session_record(nat, s);
}

/* ---- NAT64 sessions ------------------------------------------------ */

void nsdp_nat64_side_adopt(const struct nsdp_nat *nat, struct side6 *sd6,
			   const struct ns_rec *r, uint64_t now)
{
	nsdp_nat_side_adopt(nat, &sd6->sd, &r->s, now);
	memcpy(sd6->saddr, r->v6.orig_saddr, 16);
	memcpy(sd6->daddr, r->v6.orig_daddr, 16);
}

static inline void session_record_v6(struct nsdp_nat *nat,
				     const struct ns_rec *r)
{
	nat->rec_seq = 0;
	if (!nat->lane)
		return;
	if (likely(nsdp_record_v6(nat->lane, &r->s) == 0)) {
		NSDP_STAT_INC(nat->st.recorded);
		nat->rec_seq = nsdp_lane_last(nat->lane);
	} else {
		NSDP_STAT_INC(nat->st.record_drops);
	}
}

/* session_store() for the IPv6 table. */
static int session_store_v6(struct nsdp_nat *nat, const struct ns_rec *r,
			    int32_t *pos)
{
	struct ns_rec check;
	int attempt;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	for (attempt = 0; attempt < 2; attempt++) {
		if (nsdp_table_apply_pos_v6(nat->table, &r->s, pos) != 0 ||
		    *pos < 0)
			return -ENOSPC;
		if (nsdp_table_at_v6(nat->table, (uint32_t)*pos, &check) == 0 &&
		    check.s.xlat.saddr == r->s.xlat.saddr &&
		    check.s.xlat.sport == r->s.xlat.sport &&
		    check.s.timestamp_ns == r->s.timestamp_ns)
			return 0;
		nsdp_table_remove_v6(nat->table, (uint32_t)*pos);
	}
	return -ENOSPC;
}

/* The fields of the new IPv6 session r of family that every IPv6 family
 * fills alike from p, with outside port port; the caller adds its own. */
static void rec6_init(const struct nsdp_nat *nat, struct ns_rec *r,
		      uint8_t family, const struct pkt6 *p, uint16_t port,
		      uint8_t tcp)
{
	memset(r, 0, sizeof(*r));
	r->s.family = family;
	r->s.proto = p->proto;
	r->s.orig.sport = p->t.sport;
	r->s.orig.dport = p->t.dport;
	r->s.xlat.sport = port;
	r->s.xlat.dport = p->t.dport;
	r->s.timeout_ms = timeout_for(nat, p->proto, tcp);
	memcpy(r->v6.orig_saddr, p->ip6->src_addr, 16);
	memcpy(r->v6.orig_daddr, p->ip6->dst_addr, 16);
}

/* Stamp, store, count and record the new IPv6 session r (its port
 * taken), with its side state: its position, or -1 with the port freed
 * again and *why the counter. */
static int32_t session6_commit(struct nsdp_nat *nat, struct ns_rec *r,
			       uint8_t tcp, uint64_t now, uint64_t **why)
{
	struct side6 *sd6;
	int32_t pos;

	session_stamp(nat, &r->s, NS_EV_CREATE, now);
	if (unlikely(session_store_v6(nat, r, &pos) != 0)) {
		port_free6(nat, r);
		*why = &nat->st.table_full;
		return -1;
	}
	sd6 = &nat->side6[pos];
	side_set(&sd6->sd, &r->s, tcp, now, now);
	memcpy(sd6->saddr, r->v6.orig_saddr, 16);
	memcpy(sd6->daddr, r->v6.orig_daddr, 16);
	NSDP_STAT_INC(nat->st.created);
	session_record_v6(nat, r);
	return pos;
}

int nsdp_nat6_session_adopt(struct nsdp_nat *nat, const struct ns_rec *r,
			    uint64_t now)
{
	uint32_t bit = 0;
	struct port_map *pm =
		r->s.family == NS_FAMILY_NAT66
			? port_locate66(nat, r->s.proto, r->s.xlat.sport, &bit)
			: port_locate(nat, r->s.proto, r->s.xlat.saddr,
				      r->s.xlat.sport, &bit);
	struct ns_rec got;
	int32_t pos;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	if (nsdp_table_find_v6(nat->table, r->s.proto, r->v6.orig_saddr,
			       r->s.orig.sport, r->v6.orig_daddr,
			       r->s.orig.dport, &got) >= 0)
		return -EEXIST;
	if (pm && (pm->bits[bit / 64] & (1ull << (bit % 64)))) {
		got = *r;
		session_stamp(nat, &got.s, NS_EV_DELETE, now);
		session_record_v6(nat, &got);
		return -EADDRINUSE;
	}
	if (nsdp_table_apply_pos_v6(nat->table, &r->s, &pos) != 0)
		return -ENOSPC;
	if (nsdp_table_at_v6(nat->table, (uint32_t)pos, &got) != 0 ||
	    got.s.timestamp_ns != r->s.timestamp_ns ||
	    got.s.epoch != r->s.epoch)
		return -EEXIST;
	map_mark(nat, pm, bit);
	nsdp_nat64_side_adopt(nat, &nat->side6[pos], r, now);
	__atomic_store_n(&nat->side6[pos].sd.seen, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Whether the table and its IPv6 table have room for one more session;
 * else *why says why not. */
static int table6_room(struct nsdp_nat *nat, uint64_t **why)
{
	struct nsdp_table_stats ts;

	nsdp_table_stats(nat->table, &ts);
	if (unlikely(ts.live >= nat->conf.max_sessions ||
		     ts.live_v6 >= nat->n_positions6)) {
		*why = &nat->st.table_full;
		return 0;
	}
	return 1;
}

int32_t nsdp_nat64_session_create(struct nsdp_nat *nat, const struct pkt6 *p,
				  uint64_t now, struct ns_rec *r,
				  uint64_t **why)
{
	uint64_t src6[2];
	uint32_t addr;
	uint16_t port;
	uint8_t tcp = p->proto == IPPROTO_TCP ? TCP_SYN_SENT : TCP_NONE;

	if (!table6_room(nat, why))
		return -1;
	/* Aligned for rte_hash_crc's 8-byte loads (the packet's is not). */
	memcpy(src6, p->ip6->src_addr, sizeof(src6));
	if (unlikely(port_alloc(nat, map_proto(p->proto),
				rte_hash_crc(src6, 16, 0), &addr,
				&port) != 0)) {
		*why = &nat->st.ports_exhausted;
		return -1;
	}
	rec6_init(nat, r, NS_FAMILY_NAT64, p, port, tcp);
	r->s.xlat.saddr = addr;
	r->s.xlat.daddr = p->t.daddr;
	r->v6.prefix_len = nat->conf.nat64_prefix_len;
	return session6_commit(nat, r, tcp, now, why);
}

void nsdp_nat64_session_refresh(struct nsdp_nat *nat, struct side *sd,
				struct ns_rec *r, uint64_t now)
{
	int32_t pos;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	r->s.timeout_ms = sd->timeout_ms;
	session_stamp(nat, &r->s, NS_EV_REFRESH, now);
	nsdp_table_apply_pos_v6(nat->table, &r->s, &pos);
	sd->last_record_ns = now;
	NSDP_STAT_INC(nat->st.refreshed);
	session_record_v6(nat, r);
}

void nsdp_nat64_session_close(struct nsdp_nat *nat, int32_t pos,
			      struct ns_rec *r, uint64_t now)
{
	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	nsdp_table_remove_v6(nat->table, (uint32_t)pos);
	nat->side6[pos].sd.live = 0;
	port_free6(nat, r);
	session_stamp(nat, &r->s, NS_EV_DELETE, now);
	session_record_v6(nat, r);
}

/* ---- NAT66 sessions ------------------------------------------------ */

int32_t nsdp_nat66_session_create(struct nsdp_nat *nat, const struct pkt6 *p,
				  uint64_t now, struct ns_rec *r,
				  uint64_t **why)
{
	int mp = map_proto(p->proto);
	uint16_t port;
	uint8_t tcp = p->proto == IPPROTO_TCP ? TCP_SYN_SENT : TCP_NONE;

	if (!table6_room(nat, why))
		return -1;
	if (unlikely(mp < 0 || map_take(nat, &nat->maps6[mp], &port) != 0)) {
		*why = &nat->st.ports_exhausted;
		return -1;
	}
	rec6_init(nat, r, NS_FAMILY_NAT66, p, port, tcp);
	memcpy(r->v6.xlat_saddr, nat->conf.outside_addr6, 16);
	memcpy(r->v6.xlat_daddr, p->ip6->dst_addr, 16);
	return session6_commit(nat, r, tcp, now, why);
}

int nsdp_nat66_maps_init(struct nsdp_nat *nat)
{
	unsigned int i;

	nat->map6_bits = rte_zmalloc("nsdp_nat_ports6",
				     (size_t)MAP_PROTOS * nat->map_words *
					     sizeof(uint64_t),
				     RTE_CACHE_LINE_SIZE);
	if (!nat->map6_bits)
		return -ENOMEM;
	for (i = 0; i < MAP_PROTOS; i++) {
		nat->maps6[i].bits =
			nat->map6_bits + (size_t)i * nat->map_words;
		map_clear(nat, &nat->maps6[i]);
	}
	return 0;
}
