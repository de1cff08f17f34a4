/*
 * nsdp_nat_ctl.c - the NAT44 outside its per-packet path: creation,
 * housekeeping on the lcore (announcements after a promotion, the expiry
 * sweep, next hop resolution, the held first packets let go), and the mode handshake with the control
 * thread (nsdp_nat_activate/deactivate).
 *
 * Invariants
 * - The lcore is the only writer of the table, the port maps and the
 *   per-position side state while it is ACTIVE. nsdp_nat_activate() writes
 *   them on the control thread only while the lcore has acknowledged
 *   STANDBY; the acknowledgement (mode_seen, release) and the request
 *   (mode_req, release) order those writes with the lcore's.
 * - The fast path holds the table (nsdp_table_take) from the moment
 *   nsdp_nat_activate() rebuilds from it until the lcore has acknowledged
 *   a STANDBY request made after the last ACTIVE one: only then can it no
 *   longer write. A promotion that times out withdraws its request and
 *   waits for that acknowledgement; without it the table stays the fast
 *   path's (-EINPROGRESS) until nsdp_nat_deactivate() sees it. The lcore
 *   reads a request and acknowledges it in two steps, so "the
 *   acknowledgement still shows STANDBY" proves nothing while an ACTIVE
 *   request was out: hence a generation in every request.
 * - The announcements after a promotion wait for room on the tx lists
 *   rather than being dropped.
 *
 * Choices the header leaves open
 * - The timeout is a function of protocol and TCP state under this
 *   gateway's configuration; a session whose recorded timeout differs (a
 *   replicated one) is refreshed with the new timeout on its next packet.
 *
 * Not here: anything per packet (nsdp_nat.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_malloc.h>

#include "nsdp_nat64.h"
#include "nsdp_nat6.h"
#include "nsdp_nat66.h"
#include "nsdp_nat_arp.h"
#include "nsdp_nat_defer.h"
#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"
#include "nsdp_time.h"

/* The housekeeper asks for an unresolved next hop at most this often. */
#define NEXTHOP_RETRY_NS NAT_NS_PER_S

/* ---- housekeeping (lcore) ----------------------------------------- */

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
				if (nsdp_nat_arp_send(
					    nat, tx, PORT_OUTSIDE,
					    RTE_ARP_OP_REQUEST, NULL,
					    nat->port_ip[PORT_OUTSIDE], NULL,
					    nat->conf.next_hop) == 0)
					NSDP_STAT_INC(
						nat->st.arp_requests_sent);
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
		if (nsdp_nat_arp_send(nat, tx, port, RTE_ARP_OP_REQUEST, NULL,
				      ip, NULL, ip) == 0)
			NSDP_STAT_INC(nat->st.arp_announcements);
		nat->announce_next = i + 1;
	}
}

/* Visit the next slice of positions and end the idle sessions there. */
static void expire_step(struct nsdp_nat *nat, uint64_t now)
{
	uint32_t n = nat->n_positions, slice = sweep_slice(nat, n, now), i;

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
		nsdp_nat_session_close(nat, (int32_t)pos, &s, now);
		NSDP_STAT_INC(nat->st.expired);
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
	nsdp_nat_neigh_ask(nat, tx, PORT_OUTSIDE, nh, now);
}

/* Sessions read back from the store (nsdp_nat_adopt): ADOPT_BURST at a
 * time, taken while active, let go otherwise (a demotion's resync reads
 * them again). */
#define ADOPT_BURST 64
#define ADOPT_QUEUE 4096

static void adopt_step(struct nsdp_nat *nat, uint64_t now)
{
	struct ns_rec r[ADOPT_BURST];
	unsigned int n, i;

	n = rte_ring_sc_dequeue_burst_elem(nat->adopt, r, sizeof(r[0]),
					   ADOPT_BURST, NULL);
	for (i = 0; i < n && nat->mode == NSDP_NAT_ACTIVE; i++) {
		int rc = ns_family_is_v6(r[i].s.family)
				 ? nsdp_nat6_session_adopt(nat, &r[i], now)
				 : nsdp_nat_session_adopt(nat, &r[i].s, now);

		if (rc == 0)
			NSDP_STAT_INC(nat->st.adopted);
		else if (rc == -EADDRINUSE)
			NSDP_STAT_INC(nat->st.adopt_port_taken);
		else if (rc == -ENOSPC)
			NSDP_STAT_INC(nat->st.table_full);
		else
			NSDP_STAT_INC(nat->st.adopt_known);
	}
}

/* A forget walk's positions per housekeeping, of each family. */
#define FORGET_SLICE 1024

/* Whether the live session at a position survives the forget walk below
 * epoch: the read-back saw it (the mark cleared for the next one), or
 * its epoch is this gateway's own or later. */
static int forget_keeps(struct side *sd, uint32_t epoch, uint32_t s_epoch)
{
	if (__atomic_load_n(&sd->seen, __ATOMIC_RELAXED)) {
		__atomic_store_n(&sd->seen, 0, __ATOMIC_RELAXED);
		return 1;
	}
	return s_epoch >= epoch;
}

/* A slice of the forget walk (nsdp_nat_readback_forget): IPv4 positions,
 * then IPv6 ones; at the end the walk is done. */
static void forget_step(struct nsdp_nat *nat, uint64_t now)
{
	uint32_t epoch = __atomic_load_n(&nat->forget_epoch, __ATOMIC_ACQUIRE);
	uint32_t i;

	for (i = 0; i < FORGET_SLICE && nat->forget_pos < nat->n_positions;
	     i++) {
		uint32_t pos = nat->forget_pos++;
		struct side *sd = &nat->side[pos];
		struct ns_session s;

		if (!sd->live || nsdp_table_at(nat->table, pos, &s) != 0 ||
		    !side_owns(sd, &s) || forget_keeps(sd, epoch, s.epoch))
			continue;
		nsdp_nat_session_close(nat, (int32_t)pos, &s, now);
		NSDP_STAT_INC(nat->st.forgotten);
	}
	for (i = 0; i < FORGET_SLICE && nat->side6 &&
		    nat->forget_pos6 < nat->n_positions6;
	     i++) {
		uint32_t pos = nat->forget_pos6++;
		struct side6 *sd6 = &nat->side6[pos];
		struct ns_rec r;

		if (!sd6->sd.live ||
		    nsdp_table_at_v6(nat->table, pos, &r) != 0 ||
		    !side6_owns(sd6, &r) ||
		    forget_keeps(&sd6->sd, epoch, r.s.epoch))
			continue;
		nsdp_nat64_session_close(nat, (int32_t)pos, &r, now);
		NSDP_STAT_INC(nat->st.forgotten);
	}
	if (nat->forget_pos >= nat->n_positions &&
	    (!nat->side6 || nat->forget_pos6 >= nat->n_positions6))
		__atomic_store_n(&nat->forget_epoch, 0, __ATOMIC_RELEASE);
}

void nsdp_nat_housekeep(struct nsdp_nat *nat, uint64_t now_ns,
			struct nsdp_nat_tx *tx)
{
	uint32_t req = __atomic_load_n(&nat->mode_req, __ATOMIC_ACQUIRE);

	if (unlikely(req != nat->req_taken)) {
		nat->req_taken = req;
		if (REQ_MODE(req) != nat->mode) {
			nat->mode = REQ_MODE(req);
			if (nat->mode == NSDP_NAT_ACTIVE) {
				NSDP_TABLE_ASSERT_WRITER(nat->table,
							 NSDP_TABLE_FASTPATH);
				nat->epoch_now = __atomic_load_n(
					&nat->epoch, __ATOMIC_RELAXED);
				nat->announce_next = 0;
				nat->announce6 = nat->side6 != NULL;
				nat->announce66 = nat->nat66;
				nat->nexthop6_asked_ns = 0;
				nat->sweep_pos = 0;
				nat->nexthop_asked_ns = now_ns;
			} else {
				nat->announce_next = ANNOUNCE_DONE;
			}
		}
		__atomic_store_n(&nat->mode_seen, req, __ATOMIC_RELEASE);
	}
	if (nat->mode == NSDP_NAT_ACTIVE) {
		announce_step(nat, now_ns, tx);
		expire_step(nat, now_ns);
		nexthop_step(nat, now_ns, tx);
		if (nat->side6)
			nsdp_nat64_housekeep(nat, now_ns, tx);
		if (nat->nat66)
			nsdp_nat66_housekeep(nat, now_ns, tx);
	}
	if (unlikely(!rte_ring_empty(nat->adopt)))
		adopt_step(nat, now_ns);
	else if (unlikely(__atomic_load_n(&nat->forget_epoch,
					  __ATOMIC_RELAXED)) &&
		 nat->mode == NSDP_NAT_ACTIVE)
		forget_step(nat, now_ns);
	nsdp_nat_defer_release(nat, now_ns, tx);
	nat->last_housekeep_ns = now_ns;
}

/* ---- modes (control thread) --------------------------------------- */

/* Wait until the lcore acknowledges request req, polling every
 * millisecond, until deadline (CLOCK_MONOTONIC). 0 or -ETIMEDOUT. */
static int mode_wait(const struct nsdp_nat *nat, uint32_t req,
		     uint64_t deadline)
{
	for (;;) {
		if (__atomic_load_n(&nat->mode_seen, __ATOMIC_ACQUIRE) == req)
			return 0;
		if (nsdp_mono_ns() >= deadline)
			return -ETIMEDOUT;
		nsdp_sleep_ms(1);
	}
}

static uint64_t deadline_after(int timeout_ms)
{
	return nsdp_mono_ns() +
	       (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * NAT_NS_PER_MS;
}

/* The request after req, asking for mode. */
static uint32_t req_next(uint32_t req, enum nsdp_nat_mode mode)
{
	return (((req >> 1) + 1) << 1) | (uint32_t)mode;
}

/* Ask the lcore for mode (control thread); returns the request. */
static uint32_t mode_request(struct nsdp_nat *nat, enum nsdp_nat_mode mode)
{
	uint32_t req = req_next(
		__atomic_load_n(&nat->mode_req, __ATOMIC_RELAXED), mode);

	__atomic_store_n(&nat->mode_req, req, __ATOMIC_RELEASE);
	return req;
}

/* Port maps and side state from the table as the standby left it. */
static void rebuild_from_table(struct nsdp_nat *nat, uint64_t now)
{
	struct ns_session s;
	uint32_t pos;

	NSDP_TABLE_ASSERT_WRITER(nat->table, NSDP_TABLE_FASTPATH);
	nsdp_table_purge_tombstones(nat->table);
	nsdp_nat_maps_clear(nat);
	memset(nat->side, 0, (size_t)nat->n_positions * sizeof(*nat->side));
	for (pos = 0; pos < nat->n_positions; pos++) {
		if (nsdp_table_at(nat->table, pos, &s) != 0)
			continue;
		nsdp_nat_port_mark(nat, s.proto, s.xlat.saddr, s.xlat.sport);
		nsdp_nat_side_adopt(nat, &nat->side[pos], &s, now);
	}
	if (nat->side6)
		nsdp_nat64_rebuild(nat, now);
}

int nsdp_nat_activate(struct nsdp_nat *nat, uint32_t epoch, int timeout_ms)
{
	uint64_t deadline = deadline_after(timeout_ms);
	uint32_t req = __atomic_load_n(&nat->mode_req, __ATOMIC_ACQUIRE);
	int rc;

	if (REQ_MODE(req) == NSDP_NAT_ACTIVE)
		return -EBUSY;
	/* A deactivation (or a withdrawn promotion) that timed out may
	 * still be on its way: until the lcore confirms it, it may write. */
	if (mode_wait(nat, req, deadline) != 0)
		return -EINPROGRESS;
	/* The lcore is a standby. The table is the fast path's already when
	 * that confirmation came after the last nsdp_nat_deactivate() gave
	 * up; otherwise the caller must have stopped the subscriber. */
	if (nsdp_table_writer(nat->table) != NSDP_TABLE_FASTPATH &&
	    nsdp_table_take(nat->table, NSDP_TABLE_FASTPATH) != 0)
		return -EBUSY;
	rebuild_from_table(nat, nsdp_realtime_ns());
	__atomic_store_n(&nat->epoch, epoch, __ATOMIC_RELAXED);
	req = mode_request(nat, NSDP_NAT_ACTIVE);
	if (mode_wait(nat, req, deadline) == 0)
		return 0;
	/* Withdraw the request. The lcore may have read it and not yet
	 * acknowledged it (or acknowledged it since we last looked): it is a
	 * standby again only once it acknowledges the withdrawal. */
	req = mode_request(nat, NSDP_NAT_STANDBY);
	rc = mode_wait(nat, req, deadline_after(timeout_ms));
	if (rc != 0)
		return -EINPROGRESS;
	nsdp_table_give_back(nat->table, NSDP_TABLE_FASTPATH);
	return -ETIMEDOUT;
}

int nsdp_nat_deactivate(struct nsdp_nat *nat, int timeout_ms)
{
	uint64_t deadline = deadline_after(timeout_ms);
	uint32_t req = __atomic_load_n(&nat->mode_req, __ATOMIC_ACQUIRE);
	int rc;

	/* A STANDBY request still unconfirmed is waited for, not renewed,
	 * so that polling with timeout_ms 0 ends once the lcore answers. */
	if (REQ_MODE(req) == NSDP_NAT_ACTIVE)
		req = mode_request(nat, NSDP_NAT_STANDBY);
	rc = mode_wait(nat, req, deadline);
	if (rc == 0)
		nsdp_table_give_back(nat->table, NSDP_TABLE_FASTPATH);
	return rc;
}

int nsdp_nat_adopt(struct nsdp_nat *nat, const struct ns_rec *r)
{
	struct ns_rec copy = *r;

	if (r->s.family == NS_FAMILY_NAT64   ? nat->side6 == NULL
	    : r->s.family == NS_FAMILY_NAT66 ? !nat->nat66
					     : r->s.family != NS_FAMILY_IPV4)
		return -EAFNOSUPPORT;
	return rte_ring_sp_enqueue_elem(nat->adopt, &copy, sizeof(copy)) == 0
		       ? 0
		       : -ENOBUFS;
}

int nsdp_nat_readback_known(struct nsdp_nat *nat, const struct ns_rec *r)
{
	struct ns_rec in;
	int32_t pos;

	if (ns_family_is_v6(r->s.family)) {
		pos = nsdp_table_find_v6(nat->table, r->s.proto,
					 r->v6.orig_saddr, r->s.orig.sport,
					 r->v6.orig_daddr, r->s.orig.dport,
					 &in);
		if (pos >= 0 && nat->side6 &&
		    (r->s.family != NS_FAMILY_NAT66 || nat->nat66))
			__atomic_store_n(&nat->side6[pos].sd.seen, 1,
					 __ATOMIC_RELAXED);
		return pos >= 0;
	}
	pos = nsdp_table_find(nat->table, r->s.proto, &r->s.orig, &in.s);
	if (pos >= 0)
		__atomic_store_n(&nat->side[pos].seen, 1, __ATOMIC_RELAXED);
	return pos >= 0;
}

void nsdp_nat_readback_forget(struct nsdp_nat *nat, uint32_t epoch)
{
	/* The cursors are the lcore's once forget_epoch is set: reset them
	 * before (no walk runs now, the last one having ended). */
	nat->forget_pos = 0;
	nat->forget_pos6 = 0;
	__atomic_store_n(&nat->forget_epoch, epoch, __ATOMIC_RELEASE);
}

int nsdp_nat_forgetting(const struct nsdp_nat *nat)
{
	return __atomic_load_n(&nat->forget_epoch, __ATOMIC_ACQUIRE) != 0;
}

enum nsdp_nat_mode nsdp_nat_mode(const struct nsdp_nat *nat)
{
	return REQ_MODE(__atomic_load_n(&nat->mode_seen, __ATOMIC_ACQUIRE));
}

uint32_t nsdp_nat_epoch(const struct nsdp_nat *nat)
{
	return __atomic_load_n(&nat->epoch, __ATOMIC_RELAXED);
}

/* ---- creation and counters ---------------------------------------- */

static int addr6_set(const uint8_t a[16])
{
	static const uint8_t zero[16];

	return memcmp(a, zero, sizeof(zero)) != 0;
}

static int nat64_on(const struct nsdp_nat_conf *c)
{
	return addr6_set(c->inside_addr6);
}

/* NAT66's part of nsdp_nat_conf_check: the reason, or NULL. */
static const char *nat66_conf_problem(const struct nsdp_nat_conf *c)
{
	const uint8_t *a = c->outside_addr6;

	if (!addr6_set(a))
		return addr6_set(c->next_hop6)
			       ? "next_hop6 without outside_addr6"
			       : NULL;
	if (!nat64_on(c))
		return "outside_addr6 (NAT66) needs inside_addr6 (NAT64) set";
	if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80))
		return "outside_addr6 is not a global unicast address";
	if (memcmp(a, c->inside_addr6, 16) == 0)
		return "outside_addr6 is inside_addr6";
	if (memcmp(a, c->nat64_prefix, 12) == 0)
		return "outside_addr6 is in the NAT64 prefix";
	if (memcmp(c->next_hop6, a, 16) == 0)
		return "next_hop6 is outside_addr6";
	return NULL;
}

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
	else if (nat64_on(c) && c->nat64_prefix_len != 96)
		why = "the NAT64 prefix must be a /96";
	else if (nat64_on(c) && c->inside_addr6[0] == 0xff)
		why = "inside_addr6 is a multicast address";
	else if (nat64_on(c) &&
		 memcmp(c->inside_addr6, c->nat64_prefix, 12) == 0)
		why = "inside_addr6 is in the NAT64 prefix";
	else
		why = nat66_conf_problem(c);
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
	char name[RTE_RING_NAMESIZE];
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
	snprintf(name, sizeof(name), "nat_adopt_%" PRIxPTR, (uintptr_t)nat);
	nat->adopt = rte_ring_create_elem(name, sizeof(struct ns_rec),
					  ADOPT_QUEUE, SOCKET_ID_ANY,
					  RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!nat->map_bits || !nat->side || !nat->neigh[0] || !nat->neigh[1] ||
	    !nat->adopt || nsdp_nat_defer_init(nat) != 0) {
		nsdp_nat_free(nat);
		errno = ENOMEM;
		return NULL;
	}
	if (nat64_on(conf)) {
		int rc = nsdp_nat64_init(nat);

		if (rc == 0)
			rc = nsdp_nat66_init(nat);
		if (rc != 0) {
			nsdp_nat_free(nat);
			errno = -rc;
			return NULL;
		}
	}
	for (i = 0; i < MAP_PROTOS * nat->n_pool; i++)
		nat->maps[i].bits = nat->map_bits + (size_t)i * nat->map_words;
	nsdp_nat_maps_clear(nat);
	return nat;
}

void nsdp_nat_free(struct nsdp_nat *nat)
{
	unsigned int i;

	if (!nat)
		return;
	nsdp_nat_defer_fini(nat);
	nsdp_nat66_fini(nat);
	nsdp_nat64_fini(nat);
	for (i = 0; i < 2; i++)
		rte_free(nat->neigh[i]);
	rte_free(nat->map_bits);
	rte_free(nat->side);
	rte_ring_free(nat->adopt);
	rte_free(nat);
}

void nsdp_nat_stats(const struct nsdp_nat *nat, struct nsdp_nat_stats *s)
{
	const uint64_t *src = (const uint64_t *)&nat->st;
	uint64_t *dst = (uint64_t *)s;
	size_t i;

	for (i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		dst[i] = NSDP_STAT_READ(src[i]);
}

void nsdp_nat_defer_hist(const struct nsdp_nat *nat, uint64_t *buckets)
{
	unsigned int i;

	for (i = 0; i < NSDP_NAT_DEFER_BUCKETS; i++)
		buckets[i] = NSDP_STAT_READ(nat->defer_hist[i]);
}

unsigned int nsdp_nat_deferred(const struct nsdp_nat *nat)
{
	return nat->defer_n;
}

uint64_t nsdp_nat_ports_in_use(const struct nsdp_nat *nat)
{
	return NSDP_STAT_READ(nat->ports_in_use);
}
