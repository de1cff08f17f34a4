/*
 * test_nat.c - the NAT44 fast path: translation and checksums both ways,
 * session life (create, TCP states, refresh rate limit, RST, idle expiry),
 * port allocation, ARP and neighbors, standby and promotion over a
 * replicated table, and the policy for bad input; then NAT64 (IPv6 inside,
 * IPv4 outside): translations both ways, records, neighbour discovery,
 * shared ports, promotion, expiry and its drops; and NAT66 (IPv6 both
 * sides, from outside_addr6): the same, neighbour discovery on the
 * outside, its own ports.
 *
 * Frames are built byte by byte (bench/nsb_frame.h, which natsync-gwbench
 * shares) into mbufs and run through
 * nsdp_nat_inside()/nsdp_nat_outside()/nsdp_nat_housekeep() with a fake
 * clock (real time at the start of the test, moved by hand). The thread
 * calling the fast path is the lcore; while nsdp_nat_activate() or
 * nsdp_nat_deactivate() waits for the lcore, a helper thread plays it
 * (calls housekeep only) and is joined before any packet is sent; only the
 * tests of a promotion that times out let that thread forward too (and
 * stall it, for real, between reading a mode request and acting on it).
 * Each test runs in its own process (Criterion forks).
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "nsb_frame.h"
#include "nsdp_lane.h"
#include "nsdp_nat.h"
#include "nsdp_nat_state.h"
#include "nsdp_table.h"
#include "nsdp_time.h"
#include "nst_store.h"

#define MS 1000000ull
#define SEC 1000000000ull

#define INSIDE_ADDR 0x0a000001u /* 10.0.0.1 */
#define HOST_A 0x0a000064u /* 10.0.0.100 */
#define HOST_B 0x0a000065u /* 10.0.0.101 */
#define POOL_FIRST 0xc6336401u /* 198.51.100.1 */
#define POOL_LAST 0xc6336402u /* 198.51.100.2 */
#define NEXT_HOP 0xc63364feu /* 198.51.100.254 */
#define REMOTE 0xcb007107u /* 203.0.113.7 */
#define GATEWAY_ID 42u
#define EPOCH 5u

#define TCP_SYN_MS 20000u
#define TCP_EST_MS 600000u
#define TCP_CLOSING_MS 10000u
#define UDP_MS 30000u
#define ICMP_MS 15000u

#define STAT(field) offsetof(struct nsdp_nat_stats, field)
#define NO_STAT SIZE_MAX

static const struct rte_ether_addr inside_mac = {{2, 0, 0, 0, 0, 1}};
static const struct rte_ether_addr outside_mac = {{2, 0, 0, 0, 0, 2}};
static const struct rte_ether_addr router_mac = {{2, 0, 0, 0, 2, 0xfe}};
static const struct rte_ether_addr bcast_mac = {
	{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

static void eal_up(void)
{
	cr_assert_eq(nst_eal_init(512), 0, "EAL init");
}

TestSuite(nat, .init = eal_up, .timeout = 60);

/* ------------------------------------------------------------------ */
/* fixture                                                              */
/* ------------------------------------------------------------------ */

struct fx {
	struct rte_mempool *pool;
	struct nsdp_table *table;
	struct nsdp_lane *lane;
	struct nsdp_nat *nat;
	struct nsdp_nat_conf conf;
	struct nsdp_nat_tx tx;
	uint64_t now;
};

static uint64_t mono_ms(void)
{
	return nsdp_mono_ns() / MS;
}

static void conf_default(struct nsdp_nat_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->inside_addr = INSIDE_ADDR;
	c->pool_first = POOL_FIRST;
	c->pool_last = POOL_LAST;
	c->next_hop = NEXT_HOP;
	c->port_min = 1024;
	c->port_max = 65535;
	c->inside_mac = inside_mac;
	c->outside_mac = outside_mac;
	c->gateway_id = GATEWAY_ID;
	c->tcp_syn_ms = TCP_SYN_MS;
	c->tcp_established_ms = TCP_EST_MS;
	c->tcp_closing_ms = TCP_CLOSING_MS;
	c->udp_ms = UDP_MS;
	c->icmp_ms = ICMP_MS;
	c->max_sessions = 1u << 20;
}

/* conf_default() with source ports from min to max. */
static void conf_ports(struct nsdp_nat_conf *c, uint16_t min, uint16_t max)
{
	conf_default(c);
	c->port_min = min;
	c->port_max = max;
}

/* A helper thread that plays the lcore (lcore_sim_run: while
 * activate/deactivate wait, housekeep only, until told to stop, at most
 * about 2 s), and what it put on its tx lists. */
struct lcore_sim {
	struct fx *f;
	struct nsdp_nat_tx tx;
	int stop;
};

static void *lcore_sim_run(void *arg)
{
	struct lcore_sim *ls = arg;
	unsigned int i;

	for (i = 0; i < 10000 && !__atomic_load_n(&ls->stop, __ATOMIC_ACQUIRE);
	     i++) {
		nsdp_nat_housekeep(ls->f->nat, ls->f->now, &ls->tx);
		nsdp_sleep_us(200);
	}
	return NULL;
}

static void tx_free(struct nsdp_nat_tx *tx)
{
	unsigned int i;

	for (i = 0; i < tx->n_inside; i++)
		rte_pktmbuf_free(tx->inside[i]);
	for (i = 0; i < tx->n_outside; i++)
		rte_pktmbuf_free(tx->outside[i]);
	tx->n_inside = tx->n_outside = 0;
}

/* Run op (activate when activate != 0, else deactivate) with a helper
 * lcore; what the lcore put on its tx lists goes to *out (or is freed). */
static int with_lcore(struct fx *f, int activate, uint32_t epoch,
		      struct nsdp_nat_tx *out)
{
	struct lcore_sim ls;
	pthread_t th;
	int rc;

	memset(&ls, 0, sizeof(ls));
	ls.f = f;
	cr_assert_eq(pthread_create(&th, NULL, lcore_sim_run, &ls), 0);
	rc = activate ? nsdp_nat_activate(f->nat, epoch, 2000)
		      : nsdp_nat_deactivate(f->nat, 2000);
	__atomic_store_n(&ls.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	if (out)
		*out = ls.tx;
	else
		tx_free(&ls.tx);
	return rc;
}

static struct rte_mbuf *frame_arp(struct fx *f, uint16_t op,
				  const struct rte_ether_addr *sha,
				  uint32_t sip, uint32_t tip);

/* Teach the gateway the next hop's MAC address as an ARP reply would. */
static void learn_router(struct fx *f)
{
	struct rte_mbuf *m = frame_arp(f, RTE_ARP_OP_REPLY, &router_mac,
				       NEXT_HOP, POOL_FIRST);

	nsdp_nat_outside(f->nat, &m, 1, f->now, &f->tx);
	cr_assert_eq(f->tx.n_outside, 0);
}

/* A gateway over a fresh table; active (with the router learned) unless
 * standby is set. conf NULL: conf_default(). */
static void fx_open_conf(struct fx *f, const struct nsdp_nat_conf *conf,
			 uint32_t capacity, unsigned int ring, int standby)
{
	memset(f, 0, sizeof(*f));
	f->pool = rte_pktmbuf_pool_create("nst_nat_pool", 8191, 0, 0,
					  RTE_MBUF_DEFAULT_BUF_SIZE,
					  SOCKET_ID_ANY);
	cr_assert_not_null(f->pool, "mbuf pool");
	f->table = nsdp_table_create("nst_nat", capacity);
	cr_assert_not_null(f->table, "table");
	f->lane = nsdp_lane_create(0, ring, SOCKET_ID_ANY);
	cr_assert_not_null(f->lane, "lane");
	if (conf)
		f->conf = *conf;
	else
		conf_default(&f->conf);
	f->conf.mbuf_pool = f->pool;
	if (f->conf.inside_addr6[0]) /* NAT64: an IPv6 table as large */
		cr_assert_eq(nsdp_table_add_v6(f->table, capacity), 0);
	f->nat = nsdp_nat_create(&f->conf, f->table, f->lane);
	cr_assert_not_null(f->nat, "nat: %s", strerror(errno));
	f->now = nsdp_realtime_ns();
	if (standby)
		return;
	cr_assert_eq(with_lcore(f, 1, EPOCH, NULL), 0, "activate");
	cr_assert_eq(nsdp_nat_mode(f->nat), NSDP_NAT_ACTIVE);
	learn_router(f);
}

static void fx_open(struct fx *f)
{
	fx_open_conf(f, NULL, 8192, 8192, 0);
}

static void fx_close(struct fx *f)
{
	tx_free(&f->tx);
	nsdp_nat_free(f->nat);
	nsdp_lane_free(f->lane);
	nsdp_table_free(f->table);
	rte_mempool_free(f->pool);
}

static struct nsdp_nat_stats stats(const struct fx *f)
{
	struct nsdp_nat_stats s;

	nsdp_nat_stats(f->nat, &s);
	return s;
}

static uint64_t table_live(const struct fx *f)
{
	struct nsdp_table_stats ts;

	nsdp_table_stats(f->table, &ts);
	return ts.live;
}

static unsigned int drain(struct fx *f, struct ns_session *out, unsigned int n)
{
	return nsdp_lane_drain(f->lane, out, n);
}

/* Exactly one record waiting in the lane, with this event. */
static struct ns_session one_record(struct fx *f, uint8_t event)
{
	struct ns_session r[4];
	unsigned int n = drain(f, r, 4);

	cr_assert_eq(n, 1, "expected one record, got %u", n);
	cr_assert_eq(r[0].event, event, "event %u, expected %u", r[0].event,
		     event);
	cr_assert_eq(r[0].version, NS_RECORD_VERSION);
	cr_assert_eq(r[0].family, NS_FAMILY_IPV4);
	cr_assert_eq(r[0].gateway_id, GATEWAY_ID);
	return r[0];
}

static void no_record(struct fx *f)
{
	struct ns_session r[4];

	cr_assert_eq(drain(f, r, 4), 0, "no record expected");
}

/* ------------------------------------------------------------------ */
/* frames                                                               */
/* ------------------------------------------------------------------ */

static struct rte_ether_addr host_mac(uint32_t ip)
{
	struct rte_ether_addr a = {{2, 0xa, (uint8_t)(ip >> 16),
				    (uint8_t)(ip >> 8), (uint8_t)ip, 0x11}};
	return a;
}

/* A frame with a 32-byte payload: outbound from an inside host (saddr)
 * through the inside port, or inbound from a remote host through the
 * outside port, as the router forwards it. */
static struct nsb_frame fr_dir(int inbound, uint8_t proto, uint32_t saddr,
			       uint16_t sport, uint32_t daddr, uint16_t dport)
{
	struct nsb_frame fr = {
		.src = inbound ? router_mac : host_mac(saddr),
		.dst = inbound ? outside_mac : inside_mac,
		.saddr = saddr,
		.daddr = daddr,
		.proto = proto,
		.ttl = inbound ? 50 : 64,
		.sport = sport,
		.dport = dport,
		.tcp_flags = inbound ? RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG
				     : RTE_TCP_SYN_FLAG,
		.icmp_type = inbound ? RTE_IP_ICMP_ECHO_REPLY
				     : RTE_IP_ICMP_ECHO_REQUEST,
		.payload = 32,
	};
	return fr;
}

/* From an inside host to a remote host, through the inside port. */
#define fr_out(...) fr_dir(0, __VA_ARGS__)
/* From a remote host to a pool address, through the outside port. */
#define fr_in(...) fr_dir(1, __VA_ARGS__)

static struct rte_mbuf *frame_build(struct fx *f, const struct nsb_frame *fr)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(f->pool);
	uint8_t buf[2048];
	uint32_t len = nsb_frame_write(fr, buf);
	char *data;

	cr_assert_not_null(m, "mbuf");
	data = rte_pktmbuf_append(m, (uint16_t)len);
	cr_assert_not_null(data);
	memcpy(data, buf, len);
	return m;
}

static struct rte_mbuf *frame_arp(struct fx *f, uint16_t op,
				  const struct rte_ether_addr *sha,
				  uint32_t sip, uint32_t tip)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(f->pool);
	char *data;

	cr_assert_not_null(m);
	data = rte_pktmbuf_append(m, NSB_FRAME_ARP_LEN);
	cr_assert_not_null(data);
	nsb_frame_arp_write((uint8_t *)data, op,
			    op == RTE_ARP_OP_REQUEST ? &bcast_mac
						     : &outside_mac,
			    sha, sip, tip);
	return m;
}

static struct rte_ipv4_hdr *ip_of(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *,
				       sizeof(struct rte_ether_hdr));
}

static void *l4_of(struct rte_mbuf *m)
{
	return (uint8_t *)ip_of(m) + rte_ipv4_hdr_len(ip_of(m));
}

static void send_in(struct fx *f, const struct nsb_frame *fr)
{
	struct rte_mbuf *m = frame_build(f, fr);

	nsdp_nat_inside(f->nat, &m, 1, f->now, &f->tx);
}

static void send_out(struct fx *f, const struct nsb_frame *fr)
{
	struct rte_mbuf *m = frame_build(f, fr);

	nsdp_nat_outside(f->nat, &m, 1, f->now, &f->tx);
}

/* The single frame the last call put on the outside (or inside) list;
 * line is the caller's, for the failure message. */
static struct rte_mbuf *take_at(struct fx *f, int outside, int line)
{
	struct rte_mbuf *m;
	unsigned int want_in = outside ? 0 : 1, want_out = outside ? 1 : 0;

	cr_assert(
		f->tx.n_inside == want_in && f->tx.n_outside == want_out,
		"line %d: %u inside and %u outside frames, expected %u and %u",
		line, f->tx.n_inside, f->tx.n_outside, want_in, want_out);
	m = outside ? f->tx.outside[0] : f->tx.inside[0];
	f->tx.n_inside = f->tx.n_outside = 0;
	return m;
}

#define take(f, outside) take_at((f), (outside), __LINE__)
/* Send fr through the inside (outside) port and take the one frame the
 * gateway sends on the other side. */
#define pass_in(f, fr) (send_in((f), (fr)), take_at((f), 1, __LINE__))
#define pass_out(f, fr) (send_out((f), (fr)), take_at((f), 0, __LINE__))

/* The checksums of m recomputed from scratch equal the ones it carries. */
static void check_cksums(struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip = ip_of(m);
	uint16_t got = ip->hdr_checksum, want = nsb_frame_ip_cksum(ip);

	cr_assert_eq(got, want, "IP checksum %04x, recomputed %04x", got, want);
	nsb_frame_l4_cksums(ip, &got, &want);
	cr_assert_eq(got, want, "L4 checksum %04x, recomputed %04x", got, want);
}

static uint16_t udp_verify_sum(struct rte_mbuf *m)
{
	return nsb_frame_l4_verify_sum(ip_of(m));
}

/* m's IP packet is byte for byte the one fr describes. */
static void check_same_ip(struct rte_mbuf *m, const struct nsb_frame *fr)
{
	uint8_t buf[2048];
	uint32_t len = nsb_frame_write(fr, buf);

	cr_assert_eq(rte_pktmbuf_pkt_len(m), len);
	cr_assert(memcmp(rte_pktmbuf_mtod_offset(m, uint8_t *, 14), buf + 14,
			 len - 14) == 0,
		  "translated packet differs from the expected one");
}

/* m's IP packet is fr translated: outbound its source becomes addr:port,
 * inbound its destination does (for ICMP the identifier, in sport, either
 * way); one hop less to live. */
static void check_xlat(struct rte_mbuf *m, const struct nsb_frame *fr,
		       int outbound, uint32_t addr, uint16_t port)
{
	struct nsb_frame want = *fr;

	if (outbound) {
		want.saddr = addr;
		want.sport = port;
	} else {
		want.daddr = addr;
		if (fr->proto == IPPROTO_ICMP)
			want.sport = port;
		else
			want.dport = port;
	}
	want.ttl = (uint8_t)(fr->ttl - 1);
	check_same_ip(m, &want);
}

static void check_eth(struct rte_mbuf *m, const struct rte_ether_addr *src,
		      const struct rte_ether_addr *dst)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);

	cr_assert(rte_is_same_ether_addr(&eth->src_addr, src), "eth src");
	cr_assert(rte_is_same_ether_addr(&eth->dst_addr, dst), "eth dst");
}

/* Send an outbound UDP flow's first packet and return its translation
 * (the CREATE record, drained). */
static struct ns_session open_udp(struct fx *f, uint32_t host, uint16_t sport)
{
	struct nsb_frame fr = fr_out(IPPROTO_UDP, host, sport, REMOTE, 53);
	struct ns_session r;

	rte_pktmbuf_free(pass_in(f, &fr));
	r = one_record(f, NS_EV_CREATE);
	return r;
}

/* n outbound UDP flows to REMOTE:53, flow i from HOST_A + i % hosts and
 * source port sport + i; what the gateway sends is freed. */
static void send_udp_flows(struct fx *f, unsigned int n, unsigned int hosts,
			   uint16_t sport)
{
	for (unsigned int i = 0; i < n; i++) {
		struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A + i % hosts,
					     (uint16_t)(sport + i), REMOTE, 53);

		send_in(f, &fr);
		tx_free(&f->tx);
	}
}

/* ------------------------------------------------------------------ */
/* configuration and modes                                              */
/* ------------------------------------------------------------------ */

Test(nat, conf_check_rejects_each_inconsistency_with_a_reason)
{
	struct nsdp_nat_conf c, bad[7];
	char err[128];
	unsigned int i;

	conf_default(&c);
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), 0);

	for (i = 0; i < 7; i++)
		conf_default(&bad[i]);
	bad[0].pool_last = POOL_FIRST - 1;
	bad[1].pool_last = POOL_FIRST + NSDP_NAT_MAX_POOL;
	bad[2].inside_addr = POOL_LAST;
	bad[3].port_min = 2000;
	bad[3].port_max = 1999;
	bad[4].port_min = 0;
	bad[5].udp_ms = 0;
	bad[6].next_hop = POOL_FIRST;
	for (i = 0; i < 7; i++) {
		cr_assert_eq(nsdp_nat_conf_check(&bad[i], err, sizeof(err)),
			     -EINVAL, "case %u", i);
		if (i == 0)
			cr_assert_str_not_empty(err);
	}
	conf_default(&c);
	c.max_sessions = 0;
	cr_assert_eq(nsdp_nat_conf_check(&c, NULL, 0), -EINVAL);
	c.max_sessions = 1;
	c.next_hop = 0;
	c.pool_last = POOL_FIRST + NSDP_NAT_MAX_POOL - 1;
	c.port_min = c.port_max = 7;
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), 0);
}

Test(nat, activate_needs_the_lcore_and_deactivate_waits_for_it)
{
	struct fx f;
	uint64_t t0;

	fx_open_conf(&f, NULL, 1024, 1024, 1);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY);

	/* No lcore: it neither takes the promotion nor confirms the
	 * withdrawal, so the table stays the fast path's. */
	t0 = mono_ms();
	cr_assert_eq(nsdp_nat_activate(f.nat, 7, 30), -EINPROGRESS);
	cr_assert_lt(mono_ms() - t0, 1000, "bounded wait");
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_FASTPATH);
	cr_assert_eq(nsdp_table_take(f.table, NSDP_TABLE_SUBSCRIBER), -EBUSY);
	cr_assert_eq(nsdp_nat_deactivate(f.nat, 0), -ETIMEDOUT);
	cr_assert_eq(nsdp_nat_activate(f.nat, 7, 0), -EINPROGRESS,
		     "nothing new before the lcore confirms");
	/* The withdrawn request is not taken later; the lcore's answer to
	 * the withdrawal gives the table back. */
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_FASTPATH);
	cr_assert_eq(nsdp_nat_deactivate(f.nat, 0), 0);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_NOBODY);
	/* A subscriber holding the table keeps the fast path out. */
	cr_assert_eq(nsdp_table_take(f.table, NSDP_TABLE_SUBSCRIBER), 0);
	cr_assert_eq(nsdp_nat_activate(f.nat, 7, 30), -EBUSY);
	cr_assert_eq(nsdp_table_give_back(f.table, NSDP_TABLE_FASTPATH),
		     -EPERM);
	cr_assert_eq(nsdp_table_give_back(f.table, NSDP_TABLE_SUBSCRIBER), 0);

	cr_assert_eq(with_lcore(&f, 1, 7, NULL), 0);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_ACTIVE);
	cr_assert_eq(nsdp_nat_epoch(f.nat), 7);
	cr_assert_eq(nsdp_nat_activate(f.nat, 8, 10), -EBUSY);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_FASTPATH);

	t0 = mono_ms();
	cr_assert_eq(nsdp_nat_deactivate(f.nat, 30), -ETIMEDOUT);
	cr_assert_lt(mono_ms() - t0, 1000);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_FASTPATH);
	cr_assert_eq(with_lcore(&f, 0, 0, NULL), 0);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_NOBODY);
	/* Already a standby: nothing to wait for. */
	cr_assert_eq(nsdp_nat_deactivate(f.nat, 0), 0);
	tx_free(&f.tx);
	fx_close(&f);
}

/* ---- a promotion that times out: one writer of the table at a time ---- */

/* An lcore that stalls in the middle of taking a mode change: it has read
 * the request and is about to act on it when it loses the CPU (a vCPU
 * steal, an SMI, a page fault). Played for real: the NAT's lcore-written
 * fields are made read-only, so that the lcore's first write after it
 * read the request faults; the fault handler holds the lcore there until
 * the test lets it go, then makes the fields writable again and the lcore
 * carries on where it was. A write by any other thread just makes them
 * writable again. */
static struct {
	pthread_t lcore;
	void *base;
	size_t len;
	int stalled, released;
} stall;

static void stall_on_fault(int sig, siginfo_t *si, void *ctx)
{
	uint64_t end = nsdp_mono_ns() + 10 * SEC;

	(void)sig;
	(void)ctx;
	if ((char *)si->si_addr < (char *)stall.base ||
	    (char *)si->si_addr >= (char *)stall.base + stall.len)
		abort(); /* a real crash */
	if (pthread_equal(pthread_self(), stall.lcore)) {
		__atomic_store_n(&stall.stalled, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&stall.released, __ATOMIC_ACQUIRE) &&
		       nsdp_mono_ns() < end)
			nsdp_sleep_us(100);
	}
	mprotect(stall.base, stall.len, PROT_READ | PROT_WRITE);
}

/* The lcore: waits for go, then housekeeps (stalling as above) and, while
 * it is active, opens a new flow per loop (a table write). A write made
 * while the table was the subscriber's (sub_owns) is a second writer. */
struct late_lcore {
	struct fx *f;
	struct nsdp_nat_tx tx;
	int go, stop, sub_owns;
	uint32_t writes, late_writes;
};

static void *late_lcore_run(void *arg)
{
	struct late_lcore *ll = arg;
	uint64_t end = nsdp_mono_ns() + 20 * SEC;
	uint16_t sport = 2000;

	while (!__atomic_load_n(&ll->go, __ATOMIC_ACQUIRE) &&
	       nsdp_mono_ns() < end)
		nsdp_sleep_us(100);
	while (!__atomic_load_n(&ll->stop, __ATOMIC_ACQUIRE) &&
	       nsdp_mono_ns() < end) {
		nsdp_nat_housekeep(ll->f->nat, ll->f->now, &ll->tx);
		if (nsdp_nat_mode(ll->f->nat) == NSDP_NAT_ACTIVE) {
			struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A,
						     sport++, REMOTE, 53);
			struct rte_mbuf *m = frame_build(ll->f, &fr);
			int handed_back = __atomic_load_n(&ll->sub_owns,
							  __ATOMIC_ACQUIRE);

			nsdp_nat_inside(ll->f->nat, &m, 1, ll->f->now, &ll->tx);
			__atomic_add_fetch(&ll->writes, 1, __ATOMIC_RELEASE);
			if (handed_back)
				__atomic_add_fetch(&ll->late_writes, 1,
						   __ATOMIC_RELEASE);
		}
		tx_free(&ll->tx);
		nsdp_sleep_us(200);
	}
	return NULL;
}

struct activate_call {
	struct nsdp_nat *nat;
	int rc;
};

static void *activate_run(void *arg)
{
	struct activate_call *ac = arg;

	ac->rc = nsdp_nat_activate(ac->nat, EPOCH, 200);
	return NULL;
}

Test(nat, a_promotion_the_lcore_takes_late_never_leaves_two_table_writers)
{
	struct late_lcore ll;
	struct activate_call ac;
	struct sigaction sa, old;
	struct fx f;
	pthread_t th, ctl;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;
	unsigned int i;

	fx_open_conf(&f, NULL, 1024, 1024, 1);
	memset(&ll, 0, sizeof(ll));
	ll.f = &f;
	cr_assert_eq(pthread_create(&th, NULL, late_lcore_run, &ll), 0);
	stall.lcore = th;
	/* The lcore's own fields, up to the handshake. */
	lo = (uintptr_t)&f.nat->mode & ~(page - 1);
	hi = ((uintptr_t)(&f.nat->epoch + 1) + page - 1) & ~(page - 1);
	stall.base = (void *)lo;
	stall.len = hi - lo;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = stall_on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSEGV, &sa, &old), 0);

	/* The promotion asks; the lcore reads the request and stalls. */
	ac.nat = f.nat;
	ac.rc = 1;
	cr_assert_eq(pthread_create(&ctl, NULL, activate_run, &ac), 0);
	for (i = 0;
	     i < 20000 && (__atomic_load_n(&f.nat->mode_req, __ATOMIC_ACQUIRE) &
			   1) != NSDP_NAT_ACTIVE;
	     i++)
		nsdp_sleep_us(50);
	cr_assert_eq(mprotect(stall.base, stall.len, PROT_READ), 0);
	__atomic_store_n(&ll.go, 1, __ATOMIC_RELEASE);
	for (i = 0;
	     i < 20000 && !__atomic_load_n(&stall.stalled, __ATOMIC_ACQUIRE);
	     i++)
		nsdp_sleep_us(50);
	cr_assert(stall.stalled, "the lcore did not read the request");

	/* The promotion gives up while the lcore is stalled. */
	pthread_join(ctl, NULL);
	cr_log_info("activate: %d (%s)", ac.rc, strerror(-ac.rc));
	if (ac.rc == -ETIMEDOUT) {
		/* The lcore did not take the table: the gateway gives it
		 * back to the subscriber, then the lcore wakes up. */
		__atomic_store_n(&ll.sub_owns, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&stall.released, 1, __ATOMIC_RELEASE);
	} else {
		/* Not confirmed: the table stays the fast path's until the
		 * lcore confirms that it is a standby. */
		cr_assert_eq(ac.rc, -EINPROGRESS, "activate: %d", ac.rc);
		cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_FASTPATH);
		cr_assert_eq(nsdp_table_take(f.table, NSDP_TABLE_SUBSCRIBER),
			     -EBUSY, "the subscriber is kept out");
		__atomic_store_n(&stall.released, 1, __ATOMIC_RELEASE);
		cr_assert_eq(nsdp_nat_deactivate(f.nat, 2000), 0);
		cr_assert_eq(nsdp_table_take(f.table, NSDP_TABLE_SUBSCRIBER),
			     0);
		__atomic_store_n(&ll.sub_owns, 1, __ATOMIC_RELEASE);
	}
	/* The lcore runs on for a while (about 100 loops). */
	nsdp_sleep_ms(40);
	__atomic_store_n(&ll.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	sigaction(SIGSEGV, &old, NULL);
	cr_log_info("the lcore wrote the table %u times, %u of them while "
		    "the subscriber had it",
		    ll.writes, ll.late_writes);
	cr_assert_eq(ll.late_writes, 0,
		     "two writers: the lcore wrote the table %u times after "
		     "the failed promotion (activate %d) gave it back to the "
		     "subscriber",
		     ll.late_writes, ac.rc);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY);
	fx_close(&f);
}

/* The lcore that wakes up between the withdrawal and its deadline: it
 * never saw the promotion, confirms the withdrawal, and the table is
 * nobody's again (-ETIMEDOUT, the subscriber may take it back). */
static void *wake_after_withdrawal_run(void *arg)
{
	struct lcore_sim *w = arg;
	uint64_t end = nsdp_mono_ns() + 10 * SEC;

	/* Requests so far: 0 standby, 1 the promotion, 2 its withdrawal. */
	while (__atomic_load_n(&w->f->nat->mode_req, __ATOMIC_ACQUIRE) >> 1 <
		       2 &&
	       nsdp_mono_ns() < end)
		nsdp_sleep_us(50);
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) &&
	       nsdp_mono_ns() < end) {
		nsdp_nat_housekeep(w->f->nat, w->f->now, &w->tx);
		nsdp_sleep_us(200);
	}
	return NULL;
}

Test(nat, a_promotion_withdrawn_before_the_lcore_reads_it_gives_the_table_back)
{
	struct lcore_sim w;
	struct fx f;
	pthread_t th;

	fx_open_conf(&f, NULL, 1024, 1024, 1);
	memset(&w, 0, sizeof(w));
	w.f = &f;
	cr_assert_eq(pthread_create(&th, NULL, wake_after_withdrawal_run, &w),
		     0);
	cr_assert_eq(nsdp_nat_activate(f.nat, EPOCH, 50), -ETIMEDOUT);
	cr_assert_eq(nsdp_table_writer(f.table), NSDP_TABLE_NOBODY);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY);
	cr_assert_eq(nsdp_table_take(f.table, NSDP_TABLE_SUBSCRIBER), 0);
	nsdp_sleep_ms(10);
	cr_assert_eq(nsdp_nat_mode(f.nat), NSDP_NAT_STANDBY, "stays standby");
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	tx_free(&w.tx);
	cr_assert_eq(stats(&f).created, 0);
	cr_assert_eq(stats(&f).arp_announcements, 0, "never active");
	fx_close(&f);
}

Test(nat, standby_drops_every_ip_packet_and_answers_no_arp)
{
	struct rte_ether_addr hm = host_mac(HOST_B);
	struct fx f;
	struct nsb_frame fr;
	struct rte_mbuf *m;
	struct nsdp_nat_stats s;
	unsigned int avail;

	fx_open_conf(&f, NULL, 1024, 1024, 1);
	avail = rte_mempool_avail_count(f.pool);

	fr = fr_out(IPPROTO_UDP, HOST_A, 5000, REMOTE, 53);
	send_in(&f, &fr);
	fr = fr_out(IPPROTO_TCP, HOST_A, 5001, REMOTE, 80);
	send_in(&f, &fr);
	fr = fr_in(IPPROTO_UDP, REMOTE, 53, POOL_FIRST, 1024);
	send_out(&f, &fr);
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &router_mac, NEXT_HOP,
		      POOL_FIRST);
	nsdp_nat_outside(f.nat, &m, 1, f.now, &f.tx);
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &hm, HOST_B, INSIDE_ADDR);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	nsdp_nat_housekeep(f.nat, f.now + 5 * SEC, &f.tx);

	s = stats(&f);
	cr_assert_eq(s.standby_drops, 3);
	cr_assert_eq(s.arp_in, 2);
	cr_assert_eq(s.arp_replies_sent, 0);
	cr_assert_eq(s.arp_ignored, 2);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0, "nothing sent");
	cr_assert_eq(table_live(&f), 0);
	cr_assert_eq(s.created, 0);
	no_record(&f);
	cr_assert_eq(rte_mempool_avail_count(f.pool), avail,
		     "every frame freed");

	/* What it learned from ARP as a standby serves it once active: the
	 * next hop answers without a new ARP request. */
	cr_assert_eq(with_lcore(&f, 1, EPOCH, NULL), 0);
	fr = fr_out(IPPROTO_UDP, HOST_A, 5000, REMOTE, 53);
	m = pass_in(&f, &fr);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).neigh_miss, 0);

	/* Demoted again: forwards nothing, even existing sessions. */
	cr_assert_eq(with_lcore(&f, 0, 0, NULL), 0);
	send_in(&f, &fr);
	cr_assert_eq(f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).standby_drops, 4);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* translation                                                          */
/* ------------------------------------------------------------------ */

Test(nat, udp_outbound_is_translated_recorded_and_checksummed)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 5353, REMOTE, 53);
	struct ns_session r, t;
	struct rte_mbuf *m;
	struct nsdp_nat_stats s, s0;

	fx_open(&f);
	s0 = stats(&f);
	m = pass_in(&f, &fr);

	r = one_record(&f, NS_EV_CREATE);
	cr_assert_eq(r.proto, IPPROTO_UDP);
	cr_assert_eq(r.epoch, EPOCH);
	cr_assert_eq(r.timeout_ms, UDP_MS);
	cr_assert_eq(r.timestamp_ns, f.now);
	cr_assert_eq(r.orig.saddr, HOST_A);
	cr_assert_eq(r.orig.sport, 5353);
	cr_assert_eq(r.orig.daddr, REMOTE);
	cr_assert_eq(r.orig.dport, 53);
	cr_assert(r.xlat.saddr >= POOL_FIRST && r.xlat.saddr <= POOL_LAST);
	cr_assert(r.xlat.sport >= 1024);
	cr_assert_eq(r.xlat.daddr, REMOTE);
	cr_assert_eq(r.xlat.dport, 53);
	cr_assert_eq(nsdp_table_lookup(f.table, IPPROTO_UDP, &r.orig, &t), 0);
	cr_assert(ns_session_equal_state(&r, &t), "table holds the record");

	check_cksums(m);
	check_xlat(m, &fr, 1, r.xlat.saddr, r.xlat.sport);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);

	s = stats(&f);
	cr_assert_eq(s.created, 1);
	cr_assert_eq(s.recorded, 1);
	cr_assert_eq(s.tx_outside - s0.tx_outside, 1);
	cr_assert_eq(s.rx_inside - s0.rx_inside, 1);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 1);

	/* The next packet of the flow uses the session, records nothing. */
	f.now += 1 * SEC;
	m = pass_in(&f, &fr);
	check_xlat(m, &fr, 1, r.xlat.saddr, r.xlat.sport);
	rte_pktmbuf_free(m);
	no_record(&f);
	cr_assert_eq(stats(&f).created, 1);
	fx_close(&f);
}

Test(nat, udp_inbound_reply_restores_the_inside_address_and_port)
{
	struct fx f;
	struct ns_session r;
	struct nsb_frame in;
	struct rte_mbuf *m;
	uint64_t tx0;

	fx_open(&f);
	r = open_udp(&f, HOST_A, 5353);
	tx0 = stats(&f).tx_inside;

	in = fr_in(IPPROTO_UDP, REMOTE, 53, r.xlat.saddr, r.xlat.sport);
	m = pass_out(&f, &in);
	check_cksums(m);
	check_xlat(m, &in, 0, HOST_A, 5353);
	{
		struct rte_ether_addr hm = host_mac(HOST_A);

		check_eth(m, &inside_mac, &hm);
	}
	rte_pktmbuf_free(m);
	no_record(&f);
	cr_assert_eq(stats(&f).tx_inside - tx0, 1);

	/* From another remote port: no such session. */
	in.sport = 54;
	send_out(&f, &in);
	cr_assert_eq(stats(&f).no_session, 1);
	cr_assert_eq(f.tx.n_inside, 0);
	fx_close(&f);
}

Test(nat, udp_zero_checksum_stays_zero)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 7000, REMOTE, 9);
	struct rte_mbuf *m;
	struct rte_udp_hdr *udp;

	fx_open(&f);
	fr.no_udp_cksum = 1;
	m = pass_in(&f, &fr);
	udp = l4_of(m);
	cr_assert_eq(udp->dgram_cksum, 0, "no checksum stays no checksum");
	cr_assert_eq(rte_raw_cksum(ip_of(m), 20), 0xffff, "IP checksum");
	rte_pktmbuf_free(m);
	fx_close(&f);
}

Test(nat, udp_bad_checksum_stays_wrong_by_the_same_amount)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 7001, REMOTE, 9);
	struct rte_mbuf *m = NULL;
	struct rte_udp_hdr *udp;
	uint16_t before;

	fx_open(&f);
	m = frame_build(&f, &fr);
	udp = l4_of(m);
	udp->dgram_cksum = (uint16_t)(udp->dgram_cksum ^ 0x0f0f);
	before = udp_verify_sum(m);
	cr_assert_neq(before, 0xffff);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	m = take(&f, 1);
	cr_assert_neq(ip_of(m)->src_addr, rte_cpu_to_be_32(HOST_A),
		      "translated");
	cr_assert_eq(udp_verify_sum(m), before,
		     "the error is carried over unchanged");
	rte_pktmbuf_free(m);
	fx_close(&f);
}

Test(nat, icmp_echo_identifier_is_translated_both_ways)
{
	struct fx f;
	struct nsb_frame ping = fr_out(IPPROTO_ICMP, HOST_B, 0x1234, REMOTE, 0);
	struct nsb_frame pong;
	struct ns_session r;
	struct rte_mbuf *m;

	fx_open(&f);
	m = pass_in(&f, &ping);
	r = one_record(&f, NS_EV_CREATE);
	cr_assert_eq(r.proto, IPPROTO_ICMP);
	cr_assert_eq(r.orig.sport, 0x1234);
	cr_assert_eq(r.orig.dport, 0);
	cr_assert_eq(r.xlat.dport, 0);
	cr_assert(r.xlat.sport >= 1024);
	cr_assert_eq(r.timeout_ms, ICMP_MS);
	check_cksums(m);
	check_xlat(m, &ping, 1, r.xlat.saddr, r.xlat.sport);
	rte_pktmbuf_free(m);

	pong = fr_in(IPPROTO_ICMP, REMOTE, r.xlat.sport, r.xlat.saddr, 0);
	m = pass_out(&f, &pong);
	check_cksums(m);
	check_xlat(m, &pong, 0, HOST_B, 0x1234);
	rte_pktmbuf_free(m);
	no_record(&f);
	fx_close(&f);
}

Test(nat, multi_segment_frame_with_headers_in_the_first_is_forwarded)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 6000, REMOTE, 53);
	struct rte_mbuf *m, *tail;
	struct ns_session r;
	uint8_t buf[2048];
	uint32_t len, head = 14 + 20 + 8 + 10;
	const uint8_t *flat;
	char *d;

	fx_open(&f);
	fr.payload = 100;
	len = nsb_frame_write(&fr, buf);
	m = rte_pktmbuf_alloc(f.pool);
	tail = rte_pktmbuf_alloc(f.pool);
	d = rte_pktmbuf_append(m, (uint16_t)head);
	memcpy(d, buf, head);
	d = rte_pktmbuf_append(tail, (uint16_t)(len - head));
	memcpy(d, buf + head, len - head);
	cr_assert_eq(rte_pktmbuf_chain(m, tail), 0);

	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	m = take(&f, 1);
	r = one_record(&f, NS_EV_CREATE);
	cr_assert_eq(m->nb_segs, 2);
	/* Verify the checksum over a flat copy of both segments. */
	cr_assert_eq(rte_pktmbuf_pkt_len(m), len);
	flat = rte_pktmbuf_read(m, 0, len, buf);
	cr_assert_not_null(flat);
	cr_assert_eq(nsb_frame_l4_verify_sum(
			     (const struct rte_ipv4_hdr *)(flat + 14)),
		     0xffff, "checksum over both segments still valid");
	cr_assert_eq(
		rte_be_to_cpu_16(((struct rte_udp_hdr *)l4_of(m))->src_port),
		r.xlat.sport);
	rte_pktmbuf_free(m);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* TCP                                                                  */
/* ------------------------------------------------------------------ */

Test(nat, tcp_only_a_syn_opens_a_session)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_TCP, HOST_A, 40000, REMOTE, 443);
	struct ns_session r;
	struct rte_mbuf *m;

	fx_open(&f);
	fr.tcp_flags = RTE_TCP_ACK_FLAG;
	send_in(&f, &fr);
	fr.tcp_flags = RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG;
	send_in(&f, &fr);
	fr.tcp_flags = RTE_TCP_FIN_FLAG | RTE_TCP_ACK_FLAG;
	send_in(&f, &fr);
	cr_assert_eq(stats(&f).tcp_no_session, 3);
	cr_assert_eq(f.tx.n_outside, 0);
	cr_assert_eq(table_live(&f), 0);
	no_record(&f);

	fr.tcp_flags = RTE_TCP_SYN_FLAG;
	m = pass_in(&f, &fr);
	check_cksums(m);
	rte_pktmbuf_free(m);
	r = one_record(&f, NS_EV_CREATE);
	cr_assert_eq(r.proto, IPPROTO_TCP);
	cr_assert_eq(r.timeout_ms, TCP_SYN_MS);

	/* Now the flow's other segments pass. */
	fr.tcp_flags = RTE_TCP_ACK_FLAG;
	m = pass_in(&f, &fr);
	check_cksums(m);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).tcp_no_session, 3);
	fx_close(&f);
}

/* Open a TCP flow from HOST_A and have the remote answer SYN+ACK. */
static struct ns_session tcp_established(struct fx *f, uint16_t sport)
{
	struct nsb_frame fr = fr_out(IPPROTO_TCP, HOST_A, sport, REMOTE, 443);
	struct ns_session r, refresh;
	struct rte_mbuf *m;

	rte_pktmbuf_free(pass_in(f, &fr));
	r = one_record(f, NS_EV_CREATE);
	fr = fr_in(IPPROTO_TCP, REMOTE, 443, r.xlat.saddr, r.xlat.sport);
	fr.tcp_flags = RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG;
	m = pass_out(f, &fr);
	check_cksums(m);
	rte_pktmbuf_free(m);
	refresh = one_record(f, NS_EV_REFRESH);
	cr_assert_eq(refresh.timeout_ms, TCP_EST_MS);
	cr_assert(ns_session_same_flow(&r, &refresh));
	cr_assert_eq(refresh.xlat.sport, r.xlat.sport);
	return refresh;
}

/* A segment of HOST_A's flow from sport with these flags, through the
 * inside port; the frame forwarded is freed. */
static void tcp_segment_out(struct fx *f, uint16_t sport, uint8_t flags)
{
	struct nsb_frame fr = fr_out(IPPROTO_TCP, HOST_A, sport, REMOTE, 443);

	fr.tcp_flags = flags;
	rte_pktmbuf_free(pass_in(f, &fr));
}

Test(nat, tcp_syn_ack_from_outside_establishes_with_an_immediate_refresh)
{
	struct fx f;
	struct ns_session r, t;

	fx_open(&f);
	r = tcp_established(&f, 40001);
	cr_assert_eq(r.epoch, EPOCH);
	cr_assert_eq(nsdp_table_lookup(f.table, IPPROTO_TCP, &r.orig, &t), 0);
	cr_assert_eq(t.timeout_ms, TCP_EST_MS, "the table follows");
	cr_assert_eq(stats(&f).refreshed, 1);

	/* Established traffic within half the timeout records nothing. */
	f.now += 60 * SEC;
	tcp_segment_out(&f, 40001, RTE_TCP_ACK_FLAG);
	no_record(&f);
	fx_close(&f);
}

Test(nat, tcp_fin_moves_the_session_to_closing)
{
	struct fx f;
	struct ns_session r, c;
	struct nsb_frame fin;

	fx_open(&f);
	r = tcp_established(&f, 40002);
	tcp_segment_out(&f, 40002, RTE_TCP_FIN_FLAG | RTE_TCP_ACK_FLAG);
	c = one_record(&f, NS_EV_REFRESH);
	cr_assert_eq(c.timeout_ms, TCP_CLOSING_MS);

	/* The other side's FIN changes nothing more. */
	fin = fr_in(IPPROTO_TCP, REMOTE, 443, r.xlat.saddr, r.xlat.sport);
	fin.tcp_flags = RTE_TCP_FIN_FLAG | RTE_TCP_ACK_FLAG;
	rte_pktmbuf_free(pass_out(&f, &fin));
	no_record(&f);

	/* Closing sessions expire after tcp_closing_ms. */
	f.now += (uint64_t)TCP_CLOSING_MS * MS + 1;
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	c = one_record(&f, NS_EV_DELETE);
	cr_assert(ns_session_same_flow(&c, &r));
	cr_assert_eq(stats(&f).expired, 1);
	fx_close(&f);
}

Test(nat, tcp_rst_either_way_forwards_then_deletes_the_session)
{
	struct fx f;
	struct ns_session r, d, t;
	struct nsb_frame rst;
	struct rte_mbuf *m;

	fx_open(&f);
	r = tcp_established(&f, 40003);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 1);
	rst = fr_in(IPPROTO_TCP, REMOTE, 443, r.xlat.saddr, r.xlat.sport);
	rst.tcp_flags = RTE_TCP_RST_FLAG;
	m = pass_out(&f, &rst);
	check_cksums(m);
	cr_assert_eq(ip_of(m)->dst_addr, rte_cpu_to_be_32(HOST_A));
	rte_pktmbuf_free(m);
	d = one_record(&f, NS_EV_DELETE);
	cr_assert(ns_session_same_flow(&d, &r));
	cr_assert_eq(d.xlat.sport, r.xlat.sport);
	cr_assert_eq(d.epoch, EPOCH);
	cr_assert_eq(stats(&f).closed, 1);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	cr_assert_eq(nsdp_table_lookup(f.table, IPPROTO_TCP, &r.orig, &t),
		     -ENOENT);

	/* The late segments of the flow have no session any more. */
	rst.tcp_flags = RTE_TCP_ACK_FLAG;
	send_out(&f, &rst);
	cr_assert_eq(stats(&f).no_session, 1);

	/* From the inside too. */
	r = tcp_established(&f, 40004);
	tcp_segment_out(&f, 40004, RTE_TCP_RST_FLAG | RTE_TCP_ACK_FLAG);
	d = one_record(&f, NS_EV_DELETE);
	cr_assert(ns_session_same_flow(&d, &r));
	cr_assert_eq(stats(&f).closed, 2);
	cr_assert_eq(table_live(&f), 0);
	fx_close(&f);
}

/* The wall clock steps back 10 s in the middle of a TCP flow: its FIN
 * and RST are still recorded as its newest events, so that this table
 * takes the FIN's closing timeout and a standby's table, fed the records
 * in order, ends without the flow. */
Test(nat, a_clock_stepped_back_still_stamps_each_record_above_the_last)
{
	struct nsb_frame fr = fr_out(IPPROTO_TCP, HOST_A, 40005, REMOTE, 443);
	struct ns_session rec[4], t;
	struct nsdp_table_stats ts;
	struct nsdp_table *standby;
	struct fx f;
	unsigned int i;

	fx_open(&f);
	standby = nsdp_table_create("nst_nat_standby", 1024);
	cr_assert_not_null(standby);
	rte_pktmbuf_free(pass_in(&f, &fr));
	rec[0] = one_record(&f, NS_EV_CREATE);
	fr = fr_in(IPPROTO_TCP, REMOTE, 443, rec[0].xlat.saddr,
		   rec[0].xlat.sport);
	fr.tcp_flags = RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG;
	rte_pktmbuf_free(pass_out(&f, &fr));
	rec[1] = one_record(&f, NS_EV_REFRESH);

	f.now -= 10 * SEC;
	tcp_segment_out(&f, 40005, RTE_TCP_FIN_FLAG | RTE_TCP_ACK_FLAG);
	rec[2] = one_record(&f, NS_EV_REFRESH);
	cr_assert_eq(rec[2].timeout_ms, TCP_CLOSING_MS);
	cr_assert_eq(nsdp_table_lookup(f.table, IPPROTO_TCP, &rec[0].orig, &t),
		     0);
	cr_expect_eq(t.timeout_ms, TCP_CLOSING_MS,
		     "the gateway's own table kept timeout %u ms",
		     t.timeout_ms);
	tcp_segment_out(&f, 40005, RTE_TCP_RST_FLAG | RTE_TCP_ACK_FLAG);
	rec[3] = one_record(&f, NS_EV_DELETE);

	for (i = 1; i < 4; i++)
		cr_expect_gt(rec[i].timestamp_ns, rec[i - 1].timestamp_ns,
			     "record %u stamped %lld ns after record %u", i,
			     (long long)(rec[i].timestamp_ns -
					 rec[i - 1].timestamp_ns),
			     i - 1);
	for (i = 0; i < 4; i++)
		cr_assert_eq(nsdp_table_apply(standby, &rec[i]), 0);
	nsdp_table_stats(standby, &ts);
	cr_expect_eq(ts.stale_ignored, 0, "the standby ignored %llu records",
		     (unsigned long long)ts.stale_ignored);
	cr_expect_eq(ts.live, 0, "the standby still holds %llu sessions",
		     (unsigned long long)ts.live);
	nsdp_table_free(standby);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* refresh and expiry                                                   */
/* ------------------------------------------------------------------ */

Test(nat, refresh_is_recorded_at_most_once_per_half_timeout)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 5400, REMOTE, 53);
	struct ns_session r, t;
	uint64_t t0;

	fx_open(&f);
	t0 = f.now;
	r = open_udp(&f, HOST_A, 5400);
	f.now = t0 + 1 * SEC;
	send_in(&f, &fr);
	f.now = t0 + (uint64_t)UDP_MS * MS / 2 - 1;
	send_in(&f, &fr);
	tx_free(&f.tx);
	no_record(&f);

	f.now = t0 + (uint64_t)UDP_MS * MS / 2;
	send_in(&f, &fr);
	t = one_record(&f, NS_EV_REFRESH);
	cr_assert(ns_session_same_flow(&t, &r));
	cr_assert_eq(t.timestamp_ns, f.now);
	cr_assert_eq(t.timeout_ms, UDP_MS);
	cr_assert_eq(t.epoch, EPOCH);
	cr_assert_eq(t.xlat.sport, r.xlat.sport);
	cr_assert_eq(nsdp_table_lookup(f.table, IPPROTO_UDP, &r.orig, &t), 0);
	cr_assert_eq(t.timestamp_ns, f.now, "the table entry is refreshed");

	/* Return traffic counts as well, and is rate limited the same way. */
	fr = fr_in(IPPROTO_UDP, REMOTE, 53, r.xlat.saddr, r.xlat.sport);
	f.now += 1 * SEC;
	send_out(&f, &fr);
	no_record(&f);
	f.now += (uint64_t)UDP_MS * MS / 2;
	send_out(&f, &fr);
	one_record(&f, NS_EV_REFRESH);
	tx_free(&f.tx);
	cr_assert_eq(stats(&f).refreshed, 2);
	fx_close(&f);
}

Test(nat, idle_session_expires_in_housekeep_and_frees_its_port)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 5500, REMOTE, 53);
	struct ns_session r, d, t;
	uint64_t t0;
	unsigned int i;

	fx_open(&f);
	t0 = f.now;
	r = open_udp(&f, HOST_A, 5500);
	/* Traffic at t0 + 10 s moves the idle timer. */
	f.now = t0 + 10 * SEC;
	send_in(&f, &fr);
	tx_free(&f.tx);
	f.now = t0 + 10 * SEC + (uint64_t)UDP_MS * MS - 1;
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	no_record(&f);
	cr_assert_eq(stats(&f).expired, 0);

	f.now += 1;
	for (i = 0; i < 1000 && stats(&f).expired == 0; i++)
		nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	d = one_record(&f, NS_EV_DELETE);
	cr_assert(ns_session_same_flow(&d, &r));
	cr_assert_eq(d.xlat.saddr, r.xlat.saddr);
	cr_assert_eq(d.xlat.sport, r.xlat.sport);
	cr_assert_eq(d.timestamp_ns, f.now);
	cr_assert_eq(d.epoch, EPOCH);
	cr_assert_eq(stats(&f).expired, 1);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	cr_assert_eq(nsdp_table_lookup(f.table, IPPROTO_UDP, &r.orig, &t),
		     -ENOENT);

	/* The return traffic finds nothing; a new packet opens a new one. */
	fr = fr_in(IPPROTO_UDP, REMOTE, 53, r.xlat.saddr, r.xlat.sport);
	send_out(&f, &fr);
	cr_assert_eq(stats(&f).no_session, 1);
	open_udp(&f, HOST_A, 5500);
	fx_close(&f);
}

Test(nat, expiry_sweep_covers_the_table_in_about_a_second)
{
	struct fx f;
	struct ns_session recs[256];
	uint32_t i, calls, n = 2000, positions, slice;
	uint64_t t0, first;

	fx_open_conf(&f, NULL, 65536, 8192, 0);
	positions = nsdp_table_positions(f.table);
	t0 = f.now;
	for (i = 0; i < n; i++) {
		struct nsb_frame fr =
			fr_out(IPPROTO_UDP, HOST_A + i / 1000,
			       (uint16_t)(10000 + i % 1000), REMOTE, 53);

		send_in(&f, &fr);
		tx_free(&f.tx);
	}
	cr_assert_eq(stats(&f).created, n);
	while (drain(&f, recs, 256))
		;

	/* Just before they are idle long enough: a full pass ends none. */
	f.now = t0 + (uint64_t)UDP_MS * MS - 1;
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	cr_assert_eq(stats(&f).expired, 0);

	/* Every 10 ms from then on a call visits 1/100 of the positions:
	 * the first ends no more sessions than that, and within a second
	 * of calls all of them are gone. */
	slice = positions / 100;
	f.now += 10 * MS;
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	first = stats(&f).expired;
	cr_assert_leq(first, slice, "a 10 ms slice ended %lu (slice %u)",
		      (unsigned long)first, slice);
	for (calls = 1; stats(&f).expired < n && calls < 200; calls++) {
		f.now += 10 * MS;
		nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	}
	cr_assert_eq(stats(&f).expired, n);
	cr_assert_leq(calls, 101, "%u calls of 10 ms", calls);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	cr_assert_eq(table_live(&f), 0);
	i = drain(&f, recs, 256);
	cr_assert_gt(i, 0);
	cr_assert_eq(recs[0].event, NS_EV_DELETE);
	fx_close(&f);
}

Test(nat, back_to_back_housekeeping_still_visits_64_positions_per_call)
{
	struct fx f;
	uint32_t positions, calls;
	uint64_t t_end;

	fx_open_conf(&f, NULL, 4096, 1024, 0);
	positions = nsdp_table_positions(f.table);
	open_udp(&f, HOST_A, 1);
	t_end = f.now + (uint64_t)UDP_MS * MS;
	nsdp_nat_housekeep(f.nat, t_end - 1, &f.tx); /* a full pass */
	cr_assert_eq(stats(&f).expired, 0);
	/* No time passes between these calls: 64 positions each. */
	for (calls = 0; calls < positions / 64 + 2 && !stats(&f).expired;
	     calls++)
		nsdp_nat_housekeep(f.nat, t_end, &f.tx);
	cr_assert_eq(stats(&f).expired, 1);
	cr_assert_leq(calls, (positions + 63) / 64);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* ports                                                                */
/* ------------------------------------------------------------------ */

Test(nat, five_thousand_flows_get_distinct_ports_and_keep_their_host_address)
{
	static uint8_t seen[2][65536];
	static struct ns_session recs[5000];
	struct fx f;
	struct rte_mbuf *burst[NSDP_NAT_BURST];
	uint32_t host_addr[50] = {0};
	unsigned int i, n = 5000, got = 0, per_addr[2] = {0, 0};

	fx_open_conf(&f, NULL, 16384, 8192, 0);
	for (i = 0; i < n;) {
		unsigned int k;

		for (k = 0; k < NSDP_NAT_BURST && i < n; k++, i++) {
			struct nsb_frame fr =
				fr_out(IPPROTO_UDP, HOST_A + i % 50,
				       (uint16_t)(20000 + i / 50), REMOTE, 53);

			burst[k] = frame_build(&f, &fr);
		}
		nsdp_nat_inside(f.nat, burst, k, f.now, &f.tx);
		cr_assert_eq(f.tx.n_outside, k);
		tx_free(&f.tx);
	}
	while (got < n) {
		unsigned int k = drain(&f, recs + got, n - got);

		if (k == 0)
			break;
		got += k;
	}
	cr_assert_eq(got, n);
	for (i = 0; i < n; i++) {
		const struct ns_session *r = &recs[i];
		uint32_t a = r->xlat.saddr - POOL_FIRST;
		uint32_t h = r->orig.saddr - HOST_A;

		cr_assert_eq(r->event, NS_EV_CREATE);
		cr_assert_lt(a, 2);
		cr_assert_geq(r->xlat.sport, 1024);
		cr_assert_eq(seen[a][r->xlat.sport], 0,
			     "port %u of %08x given twice", r->xlat.sport,
			     r->xlat.saddr);
		seen[a][r->xlat.sport] = 1;
		per_addr[a]++;
		if (!host_addr[h])
			host_addr[h] = r->xlat.saddr;
		cr_assert_eq(host_addr[h], r->xlat.saddr,
			     "a host keeps its outside address");
	}
	cr_assert_gt(per_addr[0], 0, "hosts spread over the pool");
	cr_assert_gt(per_addr[1], 0, "hosts spread over the pool");
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), n);
	cr_assert_eq(table_live(&f), n);
	cr_assert_eq(stats(&f).recorded, n);
	fx_close(&f);
}

Test(nat, tiny_port_range_is_exhausted_without_duplicates_then_reused)
{
	struct fx f;
	struct nsdp_nat_conf c;
	struct ns_session r[16];
	uint8_t used[8] = {0};
	unsigned int i, k;

	conf_ports(&c, 2000, 2007);
	c.pool_last = POOL_FIRST;
	fx_open_conf(&f, &c, 1024, 1024, 0);
	send_udp_flows(&f, 12, 3, 3000);
	k = drain(&f, r, 16);
	cr_assert_eq(k, 8);
	for (i = 0; i < k; i++) {
		cr_assert_eq(r[i].xlat.saddr, POOL_FIRST);
		cr_assert(r[i].xlat.sport >= 2000 && r[i].xlat.sport <= 2007);
		cr_assert_eq(used[r[i].xlat.sport - 2000], 0, "duplicate");
		used[r[i].xlat.sport - 2000] = 1;
	}
	cr_assert_eq(stats(&f).ports_exhausted, 4);
	cr_assert_eq(stats(&f).created, 8);
	cr_assert_eq(table_live(&f), 8);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 8);

	/* TCP and ICMP have their own maps. */
	{
		struct nsb_frame syn =
			fr_out(IPPROTO_TCP, HOST_A, 3000, REMOTE, 80);

		rte_pktmbuf_free(pass_in(&f, &syn));
		one_record(&f, NS_EV_CREATE);
	}

	/* Expired sessions give their ports back. */
	f.now += (uint64_t)UDP_MS * MS;
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	cr_assert_eq(stats(&f).expired, 9);
	while (drain(&f, r, 16))
		;
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	for (i = 0; i < 8; i++)
		open_udp(&f, HOST_B, (uint16_t)(4000 + i));
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 8);
	fx_close(&f);
}

Test(nat, a_host_spills_to_the_next_pool_address_when_its_own_is_full)
{
	struct fx f;
	struct nsdp_nat_conf c;
	struct ns_session r[16];
	unsigned int i, k, on_first = 0;
	uint32_t home;

	conf_ports(&c, 2000, 2007);
	fx_open_conf(&f, &c, 1024, 1024, 0);
	send_udp_flows(&f, 12, 1, 3000);
	k = drain(&f, r, 16);
	cr_assert_eq(k, 12);
	home = r[0].xlat.saddr;
	for (i = 0; i < k; i++)
		on_first += r[i].xlat.saddr == home;
	cr_assert_eq(on_first, 8, "the host's address first, all its ports");
	cr_assert_eq(stats(&f).ports_exhausted, 0);
	fx_close(&f);
}

Test(nat, full_table_and_max_sessions_are_counted_and_free_the_port)
{
	struct fx f;
	struct nsdp_nat_conf c;
	struct ns_session r[8];

	conf_default(&c);
	c.max_sessions = 3;
	fx_open_conf(&f, &c, 1024, 1024, 0);
	send_udp_flows(&f, 5, 1, 3000);
	cr_assert_eq(drain(&f, r, 8), 3);
	cr_assert_eq(stats(&f).table_full, 2);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 3);
	cr_assert_eq(table_live(&f), 3);
	fx_close(&f);
}

Test(nat, full_lane_drops_records_and_counts_them)
{
	struct fx f;
	struct nsdp_nat_stats s;

	fx_open_conf(&f, NULL, 1024, 64, 0);
	send_udp_flows(&f, 100, 1, 3000);
	s = stats(&f);
	cr_assert_eq(s.created, 100, "forwarding goes on");
	/* nobody drains the lane: it takes 64 records, the rest drop */
	cr_assert_eq(s.recorded, 64);
	cr_assert_eq(s.record_drops, 36);
	cr_assert_eq(s.recorded, f.lane->recorded);
	cr_assert_eq(s.record_drops, f.lane->dropped);
	fx_close(&f);
}

Test(nat, full_tx_list_frees_the_packet_and_counts_it)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 3000, REMOTE, 53);
	unsigned int avail;

	fx_open(&f);
	avail = rte_mempool_avail_count(f.pool);
	f.tx.n_outside = NSDP_NAT_TX_MAX; /* entries never read */
	send_in(&f, &fr);
	cr_assert_eq(f.tx.n_outside, NSDP_NAT_TX_MAX);
	cr_assert_eq(stats(&f).alloc_failures, 1);
	cr_assert_eq(rte_mempool_avail_count(f.pool), avail);
	f.tx.n_outside = 0;
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* ARP and neighbors                                                    */
/* ------------------------------------------------------------------ */

static void check_arp(struct rte_mbuf *m, uint16_t op,
		      const struct rte_ether_addr *eth_dst,
		      const struct rte_ether_addr *sha, uint32_t sip,
		      const struct rte_ether_addr *tha, uint32_t tip)
{
	static const struct rte_ether_addr zero;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	cr_assert_geq(rte_pktmbuf_data_len(m), 42);
	cr_assert_eq(eth->ether_type, rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP));
	cr_assert(rte_is_same_ether_addr(&eth->dst_addr, eth_dst), "eth dst");
	cr_assert(rte_is_same_ether_addr(&eth->src_addr, sha), "eth src");
	cr_assert_eq(arp->arp_hardware, rte_cpu_to_be_16(RTE_ARP_HRD_ETHER));
	cr_assert_eq(arp->arp_protocol, rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4));
	cr_assert_eq(arp->arp_hlen, 6);
	cr_assert_eq(arp->arp_plen, 4);
	cr_assert_eq(arp->arp_opcode, rte_cpu_to_be_16(op));
	cr_assert(rte_is_same_ether_addr(&arp->arp_data.arp_sha, sha), "sha");
	cr_assert_eq(arp->arp_data.arp_sip, rte_cpu_to_be_32(sip));
	cr_assert(rte_is_same_ether_addr(&arp->arp_data.arp_tha,
					 tha ? tha : &zero),
		  "tha");
	cr_assert_eq(arp->arp_data.arp_tip, rte_cpu_to_be_32(tip));
}

Test(nat, arp_requests_for_our_addresses_are_answered_on_their_port)
{
	struct fx f;
	struct rte_ether_addr hm = host_mac(HOST_B);
	struct rte_mbuf *m;
	struct nsdp_nat_stats s;

	fx_open(&f);
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &hm, HOST_B, INSIDE_ADDR);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	m = take(&f, 0);
	check_arp(m, RTE_ARP_OP_REPLY, &hm, &inside_mac, INSIDE_ADDR, &hm,
		  HOST_B);
	rte_pktmbuf_free(m);

	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &router_mac, NEXT_HOP, POOL_LAST);
	nsdp_nat_outside(f.nat, &m, 1, f.now, &f.tx);
	m = take(&f, 1);
	check_arp(m, RTE_ARP_OP_REPLY, &router_mac, &outside_mac, POOL_LAST,
		  &router_mac, NEXT_HOP);
	rte_pktmbuf_free(m);

	/* Not ours: a pool address asked on the inside, inside_addr on the
	 * outside, another host, a gratuitous request. */
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &hm, HOST_B, POOL_FIRST);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &router_mac, NEXT_HOP,
		      INSIDE_ADDR);
	nsdp_nat_outside(f.nat, &m, 1, f.now, &f.tx);
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &hm, HOST_B, HOST_A);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &hm, HOST_B, HOST_B);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	s = stats(&f);
	cr_assert_eq(s.arp_replies_sent, 2);
	cr_assert_eq(s.arp_ignored, 4);
	cr_assert_eq(s.arp_in, 1 + 6); /* the router's reply at setup */

	/* HOST_B was learned from its request: return traffic to it goes
	 * out at once. */
	{
		struct ns_session r;
		struct nsb_frame fr =
			fr_out(IPPROTO_UDP, HOST_B, 777, REMOTE, 53);
		struct nsb_frame back;

		rte_pktmbuf_free(pass_in(&f, &fr));
		r = one_record(&f, NS_EV_CREATE);
		back = fr_in(IPPROTO_UDP, REMOTE, 53, r.xlat.saddr,
			     r.xlat.sport);
		m = pass_out(&f, &back);
		check_eth(m, &inside_mac, &hm);
		rte_pktmbuf_free(m);
	}
	cr_assert_eq(stats(&f).neigh_miss, 0);
	fx_close(&f);
}

Test(nat, unresolved_next_hop_drops_and_asks_at_most_every_100ms)
{
	struct fx f;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 5000, REMOTE, 53);
	struct rte_mbuf *m;
	uint64_t t0;

	fx_open_conf(&f, NULL, 1024, 1024, 1);
	cr_assert_eq(with_lcore(&f, 1, EPOCH, NULL), 0);
	t0 = f.now;

	m = pass_in(&f, &fr);
	check_arp(m, RTE_ARP_OP_REQUEST, &bcast_mac, &outside_mac, POOL_FIRST,
		  NULL, NEXT_HOP);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).neigh_miss, 1);
	cr_assert_eq(stats(&f).created, 1, "the session exists");
	one_record(&f, NS_EV_CREATE);

	f.now = t0 + 50 * MS;
	send_in(&f, &fr);
	cr_assert_eq(f.tx.n_outside, 0, "no second request within 100 ms");
	cr_assert_eq(stats(&f).neigh_miss, 2);
	f.now = t0 + 100 * MS;
	rte_pktmbuf_free(pass_in(&f, &fr));
	cr_assert_eq(stats(&f).arp_requests_sent, 3, "2 + 1 at promotion");

	learn_router(&f);
	m = pass_in(&f, &fr);
	check_eth(m, &outside_mac, &router_mac);
	cr_assert_eq(stats(&f).neigh_miss, 3);
	rte_pktmbuf_free(m);
	fx_close(&f);
}

Test(nat, on_link_destinations_are_resolved_when_there_is_no_next_hop)
{
	struct fx f;
	struct nsdp_nat_conf c;
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 5000, REMOTE, 53);
	struct rte_ether_addr rm = {{2, 0, 0, 0, 7, 7}};
	struct rte_mbuf *m;

	conf_default(&c);
	c.next_hop = 0;
	fx_open_conf(&f, &c, 1024, 1024, 0);
	m = pass_in(&f, &fr);
	check_arp(m, RTE_ARP_OP_REQUEST, &bcast_mac, &outside_mac, POOL_FIRST,
		  NULL, REMOTE);
	rte_pktmbuf_free(m);
	m = frame_arp(&f, RTE_ARP_OP_REPLY, &rm, REMOTE, POOL_FIRST);
	nsdp_nat_outside(f.nat, &m, 1, f.now, &f.tx);
	m = pass_in(&f, &fr);
	check_eth(m, &outside_mac, &rm);
	rte_pktmbuf_free(m);
	fx_close(&f);
}

Test(nat, unknown_inside_host_is_asked_for_on_the_inside)
{
	struct fx f;
	struct ns_session s;
	struct nsb_frame back;
	struct rte_mbuf *m;

	/* A replicated session whose inside host this gateway never heard. */
	fx_open_conf(&f, NULL, 1024, 1024, 1);
	memset(&s, 0, sizeof(s));
	s.version = NS_RECORD_VERSION;
	s.family = NS_FAMILY_IPV4;
	s.proto = IPPROTO_UDP;
	s.event = NS_EV_CREATE;
	s.epoch = EPOCH - 1;
	s.timeout_ms = UDP_MS;
	s.timestamp_ns = f.now - SEC;
	s.orig = (struct ns_tuple){HOST_B, REMOTE, 6000, 53};
	s.xlat = (struct ns_tuple){POOL_LAST, REMOTE, 30000, 53};
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	cr_assert_eq(with_lcore(&f, 1, EPOCH, NULL), 0);
	learn_router(&f);

	back = fr_in(IPPROTO_UDP, REMOTE, 53, POOL_LAST, 30000);
	m = pass_out(&f, &back);
	check_arp(m, RTE_ARP_OP_REQUEST, &bcast_mac, &inside_mac, INSIDE_ADDR,
		  NULL, HOST_B);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).neigh_miss, 1);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* promotion over replicated sessions                                   */
/* ------------------------------------------------------------------ */

static struct ns_session replicated(uint8_t proto, uint32_t host,
				    uint16_t sport, uint32_t out_addr,
				    uint16_t out_port, uint32_t timeout_ms,
				    uint64_t ts)
{
	struct ns_session s;

	memset(&s, 0, sizeof(s));
	s.version = NS_RECORD_VERSION;
	s.family = NS_FAMILY_IPV4;
	s.proto = proto;
	s.event = NS_EV_CREATE;
	s.gateway_id = GATEWAY_ID;
	s.epoch = 3;
	s.timeout_ms = timeout_ms;
	s.timestamp_ns = ts;
	s.orig = (struct ns_tuple){host, REMOTE, sport,
				   proto == IPPROTO_ICMP ? 0 : 443};
	s.xlat = s.orig;
	s.xlat.saddr = out_addr;
	s.xlat.sport = out_port;
	return s;
}

Test(nat, promotion_forwards_replicated_sessions_and_new_ones_avoid_their_ports)
{
	static uint8_t taken[2][65536];
	struct rte_ether_addr hm = host_mac(HOST_A);
	struct fx f;
	struct nsdp_nat_conf c;
	struct ns_session s, r[64];
	struct nsb_frame fr;
	struct rte_mbuf *m;
	uint64_t ts;
	unsigned int i, k, n_repl = 0;

	/* A narrow range so that new sessions must work around the
	 * replicated ones. */
	conf_ports(&c, 1024, 1024 + 99);
	fx_open_conf(&f, &c, 4096, 4096, 1);
	ts = f.now - 2 * SEC;

	/* What the subscriber applied while this gateway was a standby:
	 * every other UDP port of both pool addresses, a TCP session in
	 * each state, an ICMP one, one outside the port range and one on an
	 * address outside the pool (neither of which the maps hold). */
	for (i = 0; i < 100; i += 2) {
		uint32_t a = POOL_FIRST + (i / 2) % 2;

		s = replicated(IPPROTO_UDP, HOST_A + i, 7000, a,
			       (uint16_t)(1024 + i), UDP_MS, ts);
		cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
		taken[a - POOL_FIRST][1024 + i] = 1;
		n_repl++;
	}
	s = replicated(IPPROTO_TCP, HOST_A, 41000, POOL_FIRST, 1030, TCP_EST_MS,
		       ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	s = replicated(IPPROTO_TCP, HOST_A, 41001, POOL_FIRST, 1031, TCP_SYN_MS,
		       ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	s = replicated(IPPROTO_TCP, HOST_A, 41002, POOL_FIRST, 1032,
		       TCP_CLOSING_MS, ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	s = replicated(IPPROTO_ICMP, HOST_B, 0x77, POOL_LAST, 1033, ICMP_MS,
		       ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	s = replicated(IPPROTO_UDP, HOST_B, 7001, POOL_LAST, 60000, UDP_MS, ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	s = replicated(IPPROTO_UDP, HOST_B, 7002, 0x0b000001u, 1040, UDP_MS,
		       ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	/* A deleted one leaves a tombstone behind. */
	s = replicated(IPPROTO_UDP, HOST_B, 7003, POOL_LAST, 1041, UDP_MS, ts);
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);
	s.event = NS_EV_DELETE;
	s.timestamp_ns = ts + 1;
	cr_assert_eq(nsdp_table_apply(f.table, &s), 0);

	cr_assert_eq(with_lcore(&f, 1, EPOCH, NULL), 0);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), n_repl + 3 + 1,
		     "UDP, TCP and ICMP ports in range are held");
	learn_router(&f);

	/* Return traffic of a replicated UDP session reaches its host
	 * (whose MAC the gateway learns from its first packet). */
	fr = fr_out(IPPROTO_UDP, HOST_A + 4, 7000, REMOTE, 443);
	m = pass_in(&f, &fr);
	cr_assert_eq(ip_of(m)->src_addr, rte_cpu_to_be_32(POOL_FIRST));
	cr_assert_eq(((struct rte_udp_hdr *)l4_of(m))->src_port,
		     rte_cpu_to_be_16(1028));
	check_cksums(m);
	rte_pktmbuf_free(m);
	fr = fr_in(IPPROTO_UDP, REMOTE, 443, POOL_FIRST, 1028);
	m = pass_out(&f, &fr);
	cr_assert_eq(ip_of(m)->dst_addr, rte_cpu_to_be_32(HOST_A + 4));
	check_cksums(m);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).created, 0, "no session made for those");
	no_record(&f);

	/* The established TCP session keeps its timeout (no refresh); the
	 * one in SYN sent is established by a SYN+ACK (refresh). HOST_A
	 * makes itself known by ARP first. */
	m = frame_arp(&f, RTE_ARP_OP_REQUEST, &hm, HOST_A, INSIDE_ADDR);
	nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
	rte_pktmbuf_free(take(&f, 0));
	fr = fr_in(IPPROTO_TCP, REMOTE, 443, POOL_FIRST, 1030);
	fr.tcp_flags = RTE_TCP_ACK_FLAG;
	m = pass_out(&f, &fr);
	cr_assert_eq(ip_of(m)->dst_addr, rte_cpu_to_be_32(HOST_A));
	check_cksums(m);
	rte_pktmbuf_free(m);
	no_record(&f);
	fr = fr_in(IPPROTO_TCP, REMOTE, 443, POOL_FIRST, 1031);
	m = pass_out(&f, &fr);
	cr_assert_eq(ip_of(m)->dst_addr, rte_cpu_to_be_32(HOST_A));
	rte_pktmbuf_free(m);
	s = one_record(&f, NS_EV_REFRESH);
	cr_assert_eq(s.timeout_ms, TCP_EST_MS);
	cr_assert_eq(s.epoch, EPOCH, "records carry the new epoch");
	cr_assert_eq(s.xlat.sport, 1031);

	/* The tombstone's flow opens again under the new epoch. */
	fr = fr_out(IPPROTO_UDP, HOST_B, 7003, REMOTE, 443);
	rte_pktmbuf_free(pass_in(&f, &fr));
	s = one_record(&f, NS_EV_CREATE);
	taken[s.xlat.saddr - POOL_FIRST][s.xlat.sport] = 1;

	/* New UDP sessions take only the free ports: 100 per address, 50
	 * replicated plus the one above: 149 left in all. */
	for (i = 0; i < 160; i++) {
		fr = fr_out(IPPROTO_UDP, HOST_B + 1 + i % 4,
			    (uint16_t)(8000 + i), REMOTE, 443);
		send_in(&f, &fr);
		tx_free(&f.tx);
		k = drain(&f, r, 64);
		if (k == 0)
			continue;
		cr_assert_eq(k, 1);
		cr_assert_eq(r[0].epoch, EPOCH);
		cr_assert_eq(
			taken[r[0].xlat.saddr - POOL_FIRST][r[0].xlat.sport], 0,
			"port %u of %08x was in use", r[0].xlat.sport,
			r[0].xlat.saddr);
		taken[r[0].xlat.saddr - POOL_FIRST][r[0].xlat.sport] = 1;
	}
	cr_assert_eq(stats(&f).created, 1 + 149);
	cr_assert_eq(stats(&f).ports_exhausted, 11);
	fx_close(&f);
}

Test(nat, promotion_announces_every_address_and_asks_for_the_next_hop)
{
	struct fx f;
	struct nsdp_nat_tx sent;
	struct nsdp_nat_stats s;

	fx_open_conf(&f, NULL, 1024, 1024, 1);
	cr_assert_eq(with_lcore(&f, 1, EPOCH, &sent), 0);
	cr_assert_eq(sent.n_inside, 1);
	check_arp(sent.inside[0], RTE_ARP_OP_REQUEST, &bcast_mac, &inside_mac,
		  INSIDE_ADDR, NULL, INSIDE_ADDR);
	cr_assert_eq(sent.n_outside, 3);
	check_arp(sent.outside[0], RTE_ARP_OP_REQUEST, &bcast_mac, &outside_mac,
		  POOL_FIRST, NULL, POOL_FIRST);
	check_arp(sent.outside[1], RTE_ARP_OP_REQUEST, &bcast_mac, &outside_mac,
		  POOL_LAST, NULL, POOL_LAST);
	check_arp(sent.outside[2], RTE_ARP_OP_REQUEST, &bcast_mac, &outside_mac,
		  POOL_FIRST, NULL, NEXT_HOP);
	tx_free(&sent);
	s = stats(&f);
	cr_assert_eq(s.arp_announcements, 3);
	cr_assert_eq(s.arp_requests_sent, 1);

	/* Once: the next housekeeping sends nothing more (the next hop is
	 * asked for again only after a second). */
	nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	nsdp_nat_housekeep(f.nat, f.now + 2 * SEC, &f.tx);
	cr_assert_eq(f.tx.n_outside, 1, "unresolved next hop asked again");
	tx_free(&f.tx);

	/* A second promotion announces again. */
	cr_assert_eq(with_lcore(&f, 0, 0, NULL), 0);
	cr_assert_eq(with_lcore(&f, 1, EPOCH + 1, &sent), 0);
	cr_assert_eq(sent.n_inside + sent.n_outside, 4);
	tx_free(&sent);
	cr_assert_eq(stats(&f).arp_announcements, 6);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* bad input                                                            */
/* ------------------------------------------------------------------ */

/* How a bad case spoils a good frame, by arg. */
enum spoil {
	SP_NONE,
	SP_KEEP, /* keep the first arg bytes */
	SP_ETHER_TYPE, /* Ethernet type arg */
	SP_VERSION_IHL, /* version_ihl arg, IP checksum fixed */
	SP_IP_CKSUM, /* IP checksum xor arg */
	SP_TOTAL_LEN, /* IP total length arg bytes past the frame, fixed */
	SP_FRAGMENT, /* fragment_offset arg, fixed */
	SP_TTL, /* TTL arg */
	SP_OPTIONS, /* arg words of IP options */
	SP_ICMP_TYPE, /* ICMP type arg */
	SP_TCP_FLAGS, /* TCP flags arg */
	SP_TCP_DOFF, /* TCP data offset arg words */
	SP_L4_LEN, /* the IP packet cut to arg bytes of L4, fixed */
	SP_SPLIT, /* the first arg bytes in a segment of their own */
	SP_FOREIGN_MAC, /* to another host's MAC address */
	SP_ARP_HLEN, /* ARP hardware length arg */
};

/* The good frame spoiled: fr_in() from REMOTE if from_remote, else
 * fr_out() from HOST_A; with proto 0 an ARP request from HOST_A for
 * INSIDE_ADDR. */
struct bad_case {
	const char *name;
	int outside;
	size_t counter;
	size_t also; /* a second counter the frame moves, or NO_STAT */
	int from_remote;
	uint8_t proto;
	uint16_t sport;
	uint32_t daddr;
	uint16_t dport;
	enum spoil spoil;
	unsigned int arg;
};

#define UDP_OUT 0, IPPROTO_UDP, 9999, REMOTE, 53
#define TCP_OUT 0, IPPROTO_TCP, 9999, REMOTE, 80
#define ICMP_OUT 0, IPPROTO_ICMP, 1, REMOTE, 0
#define UDP_IN 1, IPPROTO_UDP, 53, POOL_FIRST, 1024
#define ARP_REQ 0, 0, 0, 0, 0

static const struct bad_case bad_cases[] = {
	{"truncated ethernet", 0, STAT(truncated), NO_STAT, UDP_OUT, SP_KEEP,
	 10},
	{"IPv6 ethertype", 0, STAT(not_ipv4), NO_STAT, UDP_OUT, SP_ETHER_TYPE,
	 RTE_ETHER_TYPE_IPV6},
	{"truncated IP", 0, STAT(truncated), NO_STAT, UDP_OUT, SP_KEEP, 24},
	{"IP version 6", 0, STAT(bad_ip_header), NO_STAT, UDP_OUT,
	 SP_VERSION_IHL, 0x65},
	{"IHL 4", 0, STAT(bad_ip_header), NO_STAT, UDP_OUT, SP_VERSION_IHL,
	 0x44},
	{"bad IP checksum", 0, STAT(bad_ip_checksum), NO_STAT, UDP_OUT,
	 SP_IP_CKSUM, 0x0100},
	{"total length past the frame", 0, STAT(bad_ip_header), NO_STAT,
	 UDP_OUT, SP_TOTAL_LEN, 1},
	{"IP options", 0, STAT(ip_options), NO_STAT, UDP_OUT, SP_OPTIONS, 1},
	{"more fragments", 0, STAT(fragments), NO_STAT, UDP_OUT, SP_FRAGMENT,
	 RTE_IPV4_HDR_MF_FLAG},
	{"fragment offset", 0, STAT(fragments), NO_STAT, UDP_OUT, SP_FRAGMENT,
	 185},
	{"TTL 1", 0, STAT(ttl_expired), NO_STAT, UDP_OUT, SP_TTL, 1},
	{"GRE", 0, STAT(unknown_proto), NO_STAT, 0, 47, 0, REMOTE, 0, SP_NONE,
	 0},
	{"ICMP destination unreachable", 0, STAT(icmp_unsupported), NO_STAT,
	 ICMP_OUT, SP_ICMP_TYPE, 3},
	{"truncated TCP", 0, STAT(truncated), NO_STAT, TCP_OUT, SP_L4_LEN, 12},
	{"TCP data offset 4", 0, STAT(truncated), NO_STAT, TCP_OUT, SP_TCP_DOFF,
	 4},
	{"truncated UDP", 0, STAT(truncated), NO_STAT, UDP_OUT, SP_L4_LEN, 4},
	{"truncated ICMP", 0, STAT(truncated), NO_STAT, ICMP_OUT, SP_L4_LEN, 4},
	{"headers split over segments", 0, STAT(truncated), NO_STAT, UDP_OUT,
	 SP_SPLIT, 24},
	{"to the gateway's inside address", 0, STAT(to_gateway), NO_STAT, 0,
	 IPPROTO_UDP, 9999, INSIDE_ADDR, 53, SP_NONE, 0},
	{"inside to a pool address", 0, STAT(to_gateway), NO_STAT, 0,
	 IPPROTO_ICMP, 1, POOL_LAST, 0, SP_NONE, 0},
	{"inside to multicast", 0, STAT(not_ours), NO_STAT, 0, IPPROTO_UDP,
	 5353, 0xe00000fbu, 5353, SP_NONE, 0},
	{"another host's MAC", 0, STAT(not_ours), NO_STAT, UDP_OUT,
	 SP_FOREIGN_MAC, 0},
	{"TCP ACK without session", 0, STAT(tcp_no_session), NO_STAT, TCP_OUT,
	 SP_TCP_FLAGS, RTE_TCP_ACK_FLAG},
	{"inside echo reply", 0, STAT(no_session), NO_STAT, ICMP_OUT,
	 SP_ICMP_TYPE, RTE_IP_ICMP_ECHO_REPLY},
	{"malformed ARP", 0, STAT(arp_ignored), STAT(arp_in), ARP_REQ,
	 SP_ARP_HLEN, 5},
	{"short ARP", 0, STAT(arp_ignored), STAT(arp_in), ARP_REQ, SP_KEEP, 30},
	{"outside truncated IP", 1, STAT(truncated), NO_STAT, UDP_OUT, SP_KEEP,
	 24},
	{"outside bad IP checksum", 1, STAT(bad_ip_checksum), NO_STAT, UDP_OUT,
	 SP_IP_CKSUM, 0x0100},
	{"outside fragment", 1, STAT(fragments), NO_STAT, UDP_OUT, SP_FRAGMENT,
	 RTE_IPV4_HDR_MF_FLAG},
	{"outside to a non-pool address", 1, STAT(not_ours), NO_STAT, 1,
	 IPPROTO_UDP, 53, 0xc6336477u, 1024, SP_NONE, 0},
	{"outside without session", 1, STAT(no_session), NO_STAT, UDP_IN,
	 SP_NONE, 0},
	{"outside echo request", 1, STAT(no_session), NO_STAT, 1, IPPROTO_ICMP,
	 9, POOL_FIRST, 0, SP_ICMP_TYPE, RTE_IP_ICMP_ECHO_REQUEST},
	{"outside TTL 1", 1, STAT(ttl_expired), NO_STAT, UDP_IN, SP_TTL, 1},
};

static void ip_fix_cksum(struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip = ip_of(m);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = (uint16_t)~rte_raw_cksum(ip, 20);
}

/* The good frame of bc, with the spoils that change its description. */
static struct rte_mbuf *bad_frame_build(struct fx *f, const struct bad_case *bc)
{
	struct rte_ether_addr hm = host_mac(HOST_A);
	struct nsb_frame fr;

	if (bc->proto == 0)
		return frame_arp(f, RTE_ARP_OP_REQUEST, &hm, HOST_A,
				 INSIDE_ADDR);
	if (bc->from_remote)
		fr = fr_in(bc->proto, REMOTE, bc->sport, bc->daddr, bc->dport);
	else
		fr = fr_out(bc->proto, HOST_A, bc->sport, bc->daddr, bc->dport);
	if (bc->spoil == SP_TTL)
		fr.ttl = (uint8_t)bc->arg;
	else if (bc->spoil == SP_OPTIONS)
		fr.opt_words = (uint8_t)bc->arg;
	else if (bc->spoil == SP_ICMP_TYPE)
		fr.icmp_type = (uint8_t)bc->arg;
	else if (bc->spoil == SP_TCP_FLAGS)
		fr.tcp_flags = (uint8_t)bc->arg;
	else if (bc->spoil == SP_FOREIGN_MAC)
		fr.dst = host_mac(HOST_B);
	if (bc->spoil != SP_SPLIT)
		return frame_build(f, &fr);
	{
		struct rte_mbuf *m = rte_pktmbuf_alloc(f->pool);
		struct rte_mbuf *tail = rte_pktmbuf_alloc(f->pool);
		uint8_t buf[2048];
		uint32_t len = nsb_frame_write(&fr, buf);

		memcpy(rte_pktmbuf_append(m, (uint16_t)bc->arg), buf, bc->arg);
		memcpy(rte_pktmbuf_append(tail, (uint16_t)(len - bc->arg)),
		       buf + bc->arg, len - bc->arg);
		cr_assert_eq(rte_pktmbuf_chain(m, tail), 0);
		return m;
	}
}

/* A frame for bc: built, then spoiled in its bytes. */
static struct rte_mbuf *bad_frame(struct fx *f, const struct bad_case *bc)
{
	struct rte_mbuf *m = bad_frame_build(f, bc);
	struct rte_ipv4_hdr *ip = ip_of(m);
	uint16_t arg = (uint16_t)bc->arg;

	switch (bc->spoil) {
	case SP_KEEP:
		rte_pktmbuf_trim(m, (uint16_t)(rte_pktmbuf_pkt_len(m) - arg));
		break;
	case SP_ETHER_TYPE:
		rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type =
			rte_cpu_to_be_16(arg);
		break;
	case SP_VERSION_IHL:
		ip->version_ihl = (uint8_t)arg;
		ip_fix_cksum(m);
		break;
	case SP_IP_CKSUM:
		ip->hdr_checksum ^= arg;
		break;
	case SP_TOTAL_LEN:
		ip->total_length = rte_cpu_to_be_16(
			(uint16_t)(rte_pktmbuf_pkt_len(m) - 14 + arg));
		ip_fix_cksum(m);
		break;
	case SP_FRAGMENT:
		ip->fragment_offset = rte_cpu_to_be_16(arg);
		ip_fix_cksum(m);
		break;
	case SP_TCP_DOFF:
		((struct rte_tcp_hdr *)l4_of(m))->data_off =
			(uint8_t)(arg << 4);
		break;
	case SP_L4_LEN:
		ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + arg));
		ip_fix_cksum(m);
		rte_pktmbuf_trim(
			m, (uint16_t)(rte_pktmbuf_pkt_len(m) - 14 - 20 - arg));
		break;
	case SP_ARP_HLEN:
		rte_pktmbuf_mtod_offset(m, struct rte_arp_hdr *, 14)->arp_hlen =
			(uint8_t)arg;
		break;
	default:
		break;
	}
	return m;
}

Test(nat, every_bad_input_is_dropped_counted_once_and_changes_nothing)
{
	struct fx f;
	struct nsdp_nat_stats before, after;
	struct nsdp_table_stats tb, ta;
	unsigned int i, avail;
	size_t w;

	fx_open(&f);
	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		size_t rx = bc->outside ? STAT(rx_outside) : STAT(rx_inside);
		struct rte_mbuf *m;

		avail = rte_mempool_avail_count(f.pool);
		before = stats(&f);
		nsdp_table_stats(f.table, &tb);
		m = bad_frame(&f, bc);
		if (bc->outside && rte_pktmbuf_data_len(m) >= 14)
			rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->dst_addr =
				outside_mac;
		if (bc->outside)
			nsdp_nat_outside(f.nat, &m, 1, f.now, &f.tx);
		else
			nsdp_nat_inside(f.nat, &m, 1, f.now, &f.tx);
		after = stats(&f);
		nsdp_table_stats(f.table, &ta);

		for (w = 0; w < sizeof(after); w += sizeof(uint64_t)) {
			uint64_t b, a, want = 0;

			memcpy(&b, (const uint8_t *)&before + w, sizeof(b));
			memcpy(&a, (const uint8_t *)&after + w, sizeof(a));
			if (w == bc->counter || w == rx || w == bc->also)
				want = 1;
			cr_expect_eq(a - b, want,
				     "%s: counter at offset %zu moved by %lu",
				     bc->name, w, (unsigned long)(a - b));
		}
		cr_expect_eq(f.tx.n_inside + f.tx.n_outside, 0,
			     "%s: nothing sent", bc->name);
		cr_expect_eq(ta.live, tb.live, "%s: table unchanged", bc->name);
		cr_expect_eq(ta.applied, tb.applied, "%s: table unchanged",
			     bc->name);
		cr_expect_eq(rte_ring_count(f.lane->ring), 0,
			     "%s: nothing recorded", bc->name);
		cr_expect_eq(rte_mempool_avail_count(f.pool), avail,
			     "%s: frame freed", bc->name);
		tx_free(&f.tx);
	}
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* defer                                                                */
/* ------------------------------------------------------------------ */

/* The consumer's side of the lane: every record drained settled. */
static void settle_all(struct fx *f)
{
	struct ns_session r[64];

	while (drain(f, r, 64) > 0)
		;
	nsdp_lane_settle(f->lane, f->lane->drained);
}

static void housekeep(struct fx *f)
{
	nsdp_nat_housekeep(f->nat, f->now, &f->tx);
}

Test(nat, defer_holds_a_new_sessions_first_packet_until_its_record_settles)
{
	struct nsb_frame f1 = fr_out(IPPROTO_UDP, HOST_A, 4001, REMOTE, 53);
	struct nsb_frame f2 = fr_out(IPPROTO_UDP, HOST_A, 4002, REMOTE, 53);
	struct nsb_frame f3 = fr_out(IPPROTO_UDP, HOST_A, 4003, REMOTE, 53);
	struct nsb_frame f4 = fr_out(IPPROTO_UDP, HOST_B, 4004, REMOTE, 53);
	struct nsdp_nat_conf c;
	struct nsdp_nat_stats s;
	struct ns_session r[4];
	uint64_t h[NSDP_NAT_DEFER_BUCKETS], seq2;
	struct rte_mbuf *m;
	struct fx f;

	conf_default(&c);
	c.defer_max_us = 2000;
	fx_open_conf(&f, &c, 8192, 8192, 0);

	/* The first packet waits; the flow's second one goes at once. */
	send_in(&f, &f1);
	cr_assert_eq(f.tx.n_outside, 0, "the first packet was not held");
	cr_assert_eq(nsdp_nat_deferred(f.nat), 1);
	m = pass_in(&f, &f1);
	rte_pktmbuf_free(m);
	f.now += 500 * 1000;
	housekeep(&f);
	cr_assert_eq(f.tx.n_outside, 0, "let go before its record settled");

	/* Drained is not settled; settled is. */
	cr_assert_eq(drain(&f, r, 4), 1);
	housekeep(&f);
	cr_assert_eq(f.tx.n_outside, 0, "let go when drained, not settled");
	nsdp_lane_settle(f.lane, f.lane->drained);
	housekeep(&f);
	m = take(&f, 1);
	check_xlat(m, &f1, 1, r[0].xlat.saddr, r[0].xlat.sport);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);
	s = stats(&f);
	cr_assert_eq(s.defer_held, 1);
	cr_assert_eq(s.defer_settled, 1);
	cr_assert_eq(s.defer_timeouts, 0);
	cr_assert_eq(nsdp_nat_deferred(f.nat), 0);

	/* In order: two held, only the older one's record settles. */
	send_in(&f, &f2);
	seq2 = f.lane->recorded;
	send_in(&f, &f3);
	cr_assert_eq(f.tx.n_outside, 0);
	cr_assert_eq(nsdp_nat_deferred(f.nat), 2);
	cr_assert_eq(drain(&f, r, 4), 2);
	nsdp_lane_settle(f.lane, seq2);
	housekeep(&f);
	m = take(&f, 1);
	check_xlat(m, &f2, 1, r[0].xlat.saddr, r[0].xlat.sport);
	rte_pktmbuf_free(m);

	/* Unsettled, it goes after defer_max_us, not a microsecond before. */
	f.now += 1999 * 1000;
	housekeep(&f);
	cr_assert_eq(f.tx.n_outside, 0, "let go before defer_max_us");
	f.now += 1000;
	housekeep(&f);
	m = take(&f, 1);
	check_xlat(m, &f3, 1, r[1].xlat.saddr, r[1].xlat.sport);
	rte_pktmbuf_free(m);
	s = stats(&f);
	cr_assert_eq(s.defer_held, 3);
	cr_assert_eq(s.defer_settled, 2);
	cr_assert_eq(s.defer_timeouts, 1);
	nsdp_nat_defer_hist(f.nat, h);
	/* waits: 500 us, 0 us (settled at once), 2000 us */
	cr_assert_eq(h[500 / NSDP_NAT_DEFER_BUCKET_US], 1);
	cr_assert_eq(h[0], 1);
	cr_assert_eq(h[2000 / NSDP_NAT_DEFER_BUCKET_US], 1);

	/* Held across a demotion: dropped, counted, never sent. */
	f.now += SEC;
	send_in(&f, &f4);
	cr_assert_eq(nsdp_nat_deferred(f.nat), 1);
	cr_assert_eq(with_lcore(&f, 0, 0, NULL), 0, "deactivate");
	cr_assert_eq(nsdp_nat_deferred(f.nat), 0);
	s = stats(&f);
	cr_assert_eq(s.defer_dropped, 1);
	cr_assert_eq(s.defer_held, 4);
	settle_all(&f);
	fx_close(&f);
}

/* A defer fixture (defer_max_us 2000) whose one UDP session, f1's, is
 * created, its record settled and its packet sent; when that was. */
static uint64_t defer_session_settled(struct fx *f, const struct nsb_frame *f1)
{
	struct nsdp_nat_conf c;
	struct ns_session r[4];
	uint64_t t0;

	conf_default(&c);
	c.defer_max_us = 2000;
	fx_open_conf(f, &c, 8192, 8192, 0);
	t0 = f->now;
	send_in(f, f1);
	cr_assert_eq(drain(f, r, 4), 1);
	settle_all(f);
	housekeep(f);
	rte_pktmbuf_free(take(f, 1));
	return t0;
}

/*
 * A packet on a session whose replicated copy has expired (its last
 * record's stamp plus its timeout passed, while the fast path keeps it: a
 * packet came since the record, or a promotion restarted the idle timer)
 * is the first of a session the store and a standby lack: under defer it
 * waits for its refresh's settlement as a new session's first packet does.
 * One within the copy's life goes at once.
 */
Test(nat, defer_holds_a_packet_on_a_session_whose_replicated_copy_expired)
{
	struct nsb_frame f1 = fr_out(IPPROTO_UDP, HOST_A, 4001, REMOTE, 53);
	struct ns_session r[4];
	struct rte_mbuf *m;
	struct fx f;
	uint64_t t0;

	t0 = defer_session_settled(&f, &f1);

	/* 0.4 of the timeout later: no refresh due, the packet goes. */
	f.now = t0 + UDP_MS * 4 / 10 * MS;
	m = pass_in(&f, &f1);
	rte_pktmbuf_free(m);
	cr_assert_eq(drain(&f, r, 4), 0);

	/* The create's copy ends at t0 + UDP_MS; the fast path keeps the
	 * session until t0 + 1.4 UDP_MS. Just after the copy's end: a
	 * refresh, and the packet waits for it. */
	f.now = t0 + (uint64_t)UDP_MS * MS + MS;
	send_in(&f, &f1);
	cr_assert_eq(f.tx.n_outside, 0,
		     "a packet on a session the store no longer holds went "
		     "before its refresh settled");
	cr_assert_eq(nsdp_nat_deferred(f.nat), 1);
	cr_assert_eq(stats(&f).revived, 1);
	cr_assert_eq(stats(&f).defer_held, 2);
	(void)one_record(&f, NS_EV_REFRESH);
	settle_all(&f);
	housekeep(&f);
	rte_pktmbuf_free(take(&f, 1));

	/* The refresh renewed the copy: the next packet goes at once. */
	f.now += MS;
	m = pass_in(&f, &f1);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).revived, 1);
	cr_assert_eq(stats(&f).defer_held, 2);
	fx_close(&f);
}

/*
 * A refresh that lands when the replicated copy has less than
 * NSDP_NAT_COPY_MARGIN_MS of life left: a failover before it is
 * acknowledged finds the copy expired in the standby's table (a standby
 * expires by the record's stamp) and loses the session, so under defer
 * the packet waits for it. A refresh with more life left goes at once.
 */
Test(nat, defer_holds_a_refresh_whose_replicated_copy_is_about_to_expire)
{
	struct nsb_frame f1 = fr_out(IPPROTO_UDP, HOST_A, 4002, REMOTE, 53);
	struct rte_mbuf *m;
	struct fx f;
	uint64_t t0;

	t0 = defer_session_settled(&f, &f1);

	/* 0.6 of the timeout on: a refresh, the copy lives 12 s more. */
	f.now = t0 + UDP_MS * 6 / 10 * MS;
	m = pass_in(&f, &f1);
	rte_pktmbuf_free(m);
	(void)one_record(&f, NS_EV_REFRESH);
	settle_all(&f);
	housekeep(&f);
	cr_assert_eq(stats(&f).defer_held, 1);

	/* 1 s before that refresh's copy ends: the next refresh waits. */
	f.now = t0 + (UDP_MS * 6 / 10 + UDP_MS - 1000) * MS;
	send_in(&f, &f1);
	cr_assert_eq(f.tx.n_outside, 0,
		     "a refresh 1 s before the store's copy expires went "
		     "before it settled");
	cr_assert_eq(nsdp_nat_deferred(f.nat), 1);
	cr_assert_eq(stats(&f).revived, 0);
	cr_assert_eq(stats(&f).defer_held, 2);
	(void)one_record(&f, NS_EV_REFRESH);
	settle_all(&f);
	housekeep(&f);
	rte_pktmbuf_free(take(&f, 1));
	fx_close(&f);
}

/* n new UDP flows from HOST_A, one packet each; the packets the gateway
 * sent at once. */
static unsigned int new_udp_flows(struct fx *f, unsigned int n)
{
	unsigned int i, sent = 0;

	for (i = 0; i < n; i++) {
		struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A,
					     (uint16_t)(10000 + i), REMOTE, 53);

		send_in(f, &fr);
		sent += f->tx.n_outside;
		tx_free(&f->tx);
	}
	return sent;
}

Test(nat, defer_lets_a_full_queue_and_an_unrecorded_session_go_at_once)
{
	struct nsdp_nat_conf c;
	struct nsdp_nat_stats s;
	unsigned int i, sent;
	struct fx f;

	conf_default(&c);
	c.defer_max_us = 2000;
	/* A lane of 512 records: once it is full, new sessions are not
	 * recorded, and their first packets go at once. */
	fx_open_conf(&f, &c, 8192, 512, 0);
	sent = new_udp_flows(&f, 600);
	s = stats(&f);
	cr_assert(s.recorded == 512 || s.recorded == 511, "recorded %lu",
		  (unsigned long)s.recorded);
	cr_assert_eq(s.defer_held, s.recorded);
	cr_assert_eq(s.defer_unrecorded, 600 - s.recorded);
	cr_assert_eq(s.record_drops, 600 - s.recorded);
	cr_assert_eq(sent, 600 - s.recorded);
	cr_assert_eq(s.defer_overflow, 0);
	settle_all(&f);
	/* Room in the tx list for NSDP_NAT_TX_MAX at a time. */
	for (i = 0; i < 16 && nsdp_nat_deferred(f.nat) > 0; i++) {
		housekeep(&f);
		sent += f.tx.n_outside;
		tx_free(&f.tx);
	}
	cr_assert_eq(nsdp_nat_deferred(f.nat), 0);
	cr_assert_eq(sent, 600);
	cr_assert_eq(stats(&f).defer_settled, s.recorded);

	/* With a lane that takes everything, the 1025th held one overflows. */
	fx_close(&f);
	fx_open_conf(&f, &c, 8192, 8192, 0);
	sent = new_udp_flows(&f, NSDP_NAT_DEFER_MAX + 3);
	s = stats(&f);
	cr_assert_eq(s.defer_held, NSDP_NAT_DEFER_MAX);
	cr_assert_eq(s.defer_overflow, 3);
	cr_assert_eq(sent, 3);
	settle_all(&f);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* NAT64                                                                */
/* ------------------------------------------------------------------ */

/* The gateway's inside IPv6 address fd00::1, and an inside host fd00::64
 * (with its own MAC address). */
static const uint8_t gw6[16] = {0xfd, 0, [15] = 1};
static const uint8_t host6[16] = {0xfd, 0, [15] = 0x64};
static const struct rte_ether_addr host6_mac = {{2, 0xb, 0, 0, 0, 0x64}};
static const uint8_t wkp[12] = {0, 0x64, 0xff, 0x9b};

#define ETH6 (14u + 40u)

static void conf_nat64(struct nsdp_nat_conf *c)
{
	conf_default(c);
	memcpy(c->inside_addr6, gw6, 16);
	memcpy(c->nat64_prefix, wkp, 12);
	c->nat64_prefix_len = 96;
}

/* 64:ff9b::v4 */
static void v6_of(uint8_t out[16], uint32_t v4)
{
	uint32_t be = rte_cpu_to_be_32(v4);

	memcpy(out, wkp, 12);
	memcpy(out + 12, &be, 4);
}

/* Where the checksum of proto (TCP, UDP, ICMP or ICMPv6) lies. */
static size_t cksum_at(uint8_t proto)
{
	return proto == IPPROTO_TCP ? 16 : proto == IPPROTO_UDP ? 6 : 2;
}

/* An IPv6 frame from s6 to d6 with hop limit hop whose L4 part is fr's
 * (ICMP echo as ICMPv6 echo), checksummed from scratch; its length. */
static uint32_t frame6_write(const struct nsb_frame *fr, const uint8_t s6[16],
			     const uint8_t d6[16], uint8_t hop, uint8_t *buf)
{
	uint8_t b4[2048];
	uint32_t l4_len = nsb_frame_write(fr, b4) - 34;
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(eth + 1);
	uint8_t *l4 = (uint8_t *)(ip6 + 1);
	uint16_t c;

	memset(buf, 0, ETH6);
	eth->dst_addr = fr->dst;
	eth->src_addr = fr->src;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip6->payload_len = rte_cpu_to_be_16((uint16_t)l4_len);
	ip6->proto = fr->proto == IPPROTO_ICMP ? IPPROTO_ICMPV6 : fr->proto;
	ip6->hop_limits = hop;
	memcpy(ip6->src_addr, s6, 16);
	memcpy(ip6->dst_addr, d6, 16);
	memcpy(l4, b4 + 34, l4_len);
	if (ip6->proto == IPPROTO_ICMPV6)
		l4[0] = fr->icmp_type == RTE_IP_ICMP_ECHO_REQUEST ? 128 : 129;
	memset(l4 + cksum_at(fr->proto), 0, 2);
	c = rte_ipv6_udptcp_cksum(ip6, l4);
	memcpy(l4 + cksum_at(fr->proto), &c, 2);
	return ETH6 + l4_len;
}

/* The frame buf (len bytes) received on the inside. */
static void send_raw_in(struct fx *f, const uint8_t *buf, uint32_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(f->pool);

	cr_assert_not_null(m);
	memcpy(rte_pktmbuf_append(m, (uint16_t)len), buf, len);
	nsdp_nat_inside(f->nat, &m, 1, f->now, &f->tx);
}

/* fr's L4 part from host6 to 64:ff9b::<fr.daddr>, through the inside. */
static void send6(struct fx *f, const struct nsb_frame *fr, uint8_t hop)
{
	uint8_t buf[2048], d6[16];
	struct nsb_frame e = *fr;

	v6_of(d6, fr->daddr);
	e.src = host6_mac;
	send_raw_in(f, buf, frame6_write(&e, host6, d6, hop, buf));
}

/* Exactly one IPv6 record (two lines) of family (NAT64, NAT66) from
 * host6 waiting in the lane, of event. */
static struct ns_rec one_record6(struct fx *f, uint8_t family, uint8_t event)
{
	struct ns_session l[8];
	unsigned int n = drain(f, l, 8);
	struct ns_rec r;

	cr_assert_eq(n, 2, "expected one record of family %u (2 lines), got %u",
		     family, n);
	cr_assert_eq(l[0].family, family);
	cr_assert_eq(l[0].event, event, "event %u, expected %u", l[0].event,
		     event);
	cr_assert_eq(l[0].gateway_id, GATEWAY_ID);
	cr_assert_eq(l[0].epoch, EPOCH);
	r.s = l[0];
	memcpy(&r.v6, &l[1], sizeof(r.v6));
	cr_assert(memcmp(r.v6.orig_saddr, host6, 16) == 0, "orig_saddr");
	return r;
}

/* Exactly one NAT64 record waiting in the lane, of event. */
static struct ns_rec one_record64(struct fx *f, uint8_t event)
{
	struct ns_rec r = one_record6(f, NS_FAMILY_NAT64, event);

	cr_assert_eq(r.v6.prefix_len, 96);
	return r;
}

/* An IPv4 frame m is exactly fr (TCP, UDP, ICMP) after NAT64: the L4
 * part byte for byte (checksum recomputed from scratch by nsb_frame),
 * the IPv4 header as RFC 7915 makes it (no DF at this size), a good
 * header checksum. */
static void check_v4_of(struct rte_mbuf *m, const struct nsb_frame *fr)
{
	uint8_t buf[2048];
	uint32_t len = nsb_frame_write(fr, buf);
	struct rte_ipv4_hdr *ip = ip_of(m), *want = (void *)(buf + 14);

	cr_assert_eq(rte_pktmbuf_pkt_len(m), len, "length %u, expected %u",
		     rte_pktmbuf_pkt_len(m), len);
	cr_assert_eq(rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type,
		     rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4));
	cr_assert_eq(ip->version_ihl, 0x45);
	cr_assert_eq(ip->type_of_service, 0);
	cr_assert_eq(ip->total_length, want->total_length);
	cr_assert_eq(ip->fragment_offset, 0);
	cr_assert_eq(ip->time_to_live, fr->ttl);
	cr_assert_eq(ip->next_proto_id, fr->proto);
	cr_assert_eq(ip->src_addr, want->src_addr);
	cr_assert_eq(ip->dst_addr, want->dst_addr);
	cr_assert_eq(ip->hdr_checksum, nsb_frame_ip_cksum(ip));
	cr_assert(memcmp(l4_of(m), buf + 34, len - 34) == 0,
		  "L4 part differs from the expected one");
}

/* An IPv6 frame m is exactly fr's L4 part from 64:ff9b::<fr.saddr> to
 * host6, hop limit hop, checksummed from scratch, for host6's MAC. */
static void check_v6_of(struct rte_mbuf *m, const struct nsb_frame *fr,
			uint8_t hop)
{
	uint8_t buf[2048], s6[16];
	uint32_t len;

	v6_of(s6, fr->saddr);
	len = frame6_write(fr, s6, host6, hop, buf);
	cr_assert_eq(rte_pktmbuf_pkt_len(m), len, "length %u, expected %u",
		     rte_pktmbuf_pkt_len(m), len);
	cr_assert(memcmp(rte_pktmbuf_mtod_offset(m, uint8_t *, 14), buf + 14,
			 len - 14) == 0,
		  "IPv6 packet differs from the expected one");
	check_eth(m, &inside_mac, &host6_mac);
}

static void fx_open64(struct fx *f)
{
	struct nsdp_nat_conf c;

	conf_nat64(&c);
	fx_open_conf(f, &c, 4096, 4096, 0);
}

/* One flow of proto from host6:sport to REMOTE:dport there and back;
 * returns its record. */
static struct ns_rec nat64_round_trip(struct fx *f, uint8_t proto,
				      uint16_t sport, uint16_t dport)
{
	struct nsb_frame out = fr_out(proto, HOST_A, sport, REMOTE, dport);
	struct nsb_frame want, back;
	struct rte_mbuf *m;
	struct ns_rec r;
	uint8_t d6[16];

	send6(f, &out, 64);
	m = take(f, 1);
	r = one_record64(f, NS_EV_CREATE);
	cr_assert_eq(r.s.proto, proto == IPPROTO_ICMP ? IPPROTO_ICMPV6 : proto);
	cr_assert_eq(r.s.orig.sport, sport);
	cr_assert_eq(r.s.orig.dport, dport);
	cr_assert_eq(r.s.xlat.daddr, REMOTE);
	cr_assert_eq(r.s.xlat.dport, dport);
	cr_assert(r.s.xlat.saddr == POOL_FIRST || r.s.xlat.saddr == POOL_LAST);
	cr_assert(r.s.xlat.sport >= 1024);
	v6_of(d6, REMOTE);
	cr_assert(memcmp(r.v6.orig_daddr, d6, 16) == 0, "orig_daddr");

	want = out;
	want.saddr = r.s.xlat.saddr;
	want.sport = r.s.xlat.sport;
	want.ttl = 63;
	check_v4_of(m, &want);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);

	/* the reply: to the pool address and port, back to host6 */
	back = fr_in(proto, REMOTE, dport, r.s.xlat.saddr, r.s.xlat.sport);
	if (proto == IPPROTO_ICMP) /* the identifier travels in sport */
		back.sport = r.s.xlat.sport;
	m = pass_out(f, &back);
	back.dport = sport;
	if (proto == IPPROTO_ICMP)
		back.sport = sport;
	check_v6_of(m, &back, 49);
	rte_pktmbuf_free(m);
	cr_assert_eq(nsdp_nat_ports_in_use(f->nat), 1);
	return r;
}

/* defer_holds_a_packet_on_a_session_whose_replicated_copy_expired, for
 * NAT64 (nsdp_nat6_session_out): the packet waits for its refresh. */
Test(nat, nat64_defer_holds_a_packet_on_a_session_whose_copy_expired)
{
	struct nsb_frame out = fr_out(IPPROTO_UDP, HOST_A, 40001, REMOTE, 53);
	struct nsdp_nat_conf c;
	struct fx f;
	uint64_t t0;

	conf_nat64(&c);
	c.defer_max_us = 2000;
	fx_open_conf(&f, &c, 4096, 4096, 0);
	t0 = f.now;
	send6(&f, &out, 64);
	cr_assert_eq(f.tx.n_outside, 0, "the first packet was not held");
	(void)one_record64(&f, NS_EV_CREATE);
	settle_all(&f);
	housekeep(&f);
	rte_pktmbuf_free(take(&f, 1));

	/* Within the copy's life: no refresh due, the packet goes. */
	f.now = t0 + UDP_MS * 4 / 10 * MS;
	send6(&f, &out, 64);
	rte_pktmbuf_free(take(&f, 1));
	no_record(&f);

	/* Past it (the fast path keeps the session until 1.4 UDP_MS):
	 * the refresh is recorded and the packet waits for it. */
	f.now = t0 + (uint64_t)UDP_MS * MS + MS;
	send6(&f, &out, 64);
	cr_assert_eq(f.tx.n_outside, 0,
		     "a packet on a session the store no longer holds went "
		     "before its refresh settled");
	cr_assert_eq(stats(&f).revived, 1);
	(void)one_record64(&f, NS_EV_REFRESH);
	settle_all(&f);
	housekeep(&f);
	rte_pktmbuf_free(take(&f, 1));
	cr_assert_eq(stats(&f).defer_held, 2);
	fx_close(&f);
}

/* defer_holds_a_refresh_whose_replicated_copy_is_about_to_expire, for
 * NAT64 (nsdp_nat6_session_out). */
Test(nat, nat64_defer_holds_a_refresh_whose_copy_is_about_to_expire)
{
	struct nsb_frame out = fr_out(IPPROTO_UDP, HOST_A, 40002, REMOTE, 53);
	struct nsdp_nat_conf c;
	struct fx f;
	uint64_t t0;

	conf_nat64(&c);
	c.defer_max_us = 2000;
	fx_open_conf(&f, &c, 4096, 4096, 0);
	t0 = f.now;
	send6(&f, &out, 64);
	(void)one_record64(&f, NS_EV_CREATE);
	settle_all(&f);
	housekeep(&f);
	rte_pktmbuf_free(take(&f, 1));

	/* 1 s before the create's copy ends: the refresh waits. */
	f.now = t0 + (uint64_t)(UDP_MS - 1000) * MS;
	send6(&f, &out, 64);
	cr_assert_eq(f.tx.n_outside, 0,
		     "a refresh 1 s before the store's copy expires went "
		     "before it settled");
	cr_assert_eq(stats(&f).revived, 0);
	(void)one_record64(&f, NS_EV_REFRESH);
	settle_all(&f);
	housekeep(&f);
	rte_pktmbuf_free(take(&f, 1));
	cr_assert_eq(stats(&f).defer_held, 2);
	fx_close(&f);
}

Test(nat, nat64_udp_is_translated_exactly_both_ways_and_recorded_once)
{
	struct fx f;
	struct nsdp_table_stats ts;
	struct ns_rec r;

	fx_open64(&f);
	r = nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	cr_assert_eq(r.s.timeout_ms, UDP_MS);
	no_record(&f); /* the reply refreshes nothing yet */
	nsdp_table_stats(f.table, &ts);
	cr_assert_eq(ts.live_v6, 1);
	cr_assert_eq(ts.live, 1);
	cr_assert_eq(stats(&f).created, 1);
	fx_close(&f);
}

Test(nat, nat64_tcp_syn_and_syn_ack_are_translated_exactly_and_establish)
{
	struct fx f;
	struct ns_rec r;

	fx_open64(&f);
	r = nat64_round_trip(&f, IPPROTO_TCP, 40001, 443);
	cr_assert_eq(r.s.timeout_ms, TCP_SYN_MS);
	/* the SYN-ACK established it: refreshed with the longer timeout */
	r = one_record64(&f, NS_EV_REFRESH);
	cr_assert_eq(r.s.timeout_ms, TCP_EST_MS);
	fx_close(&f);
}

Test(nat, nat64_icmpv6_echo_becomes_icmp_echo_and_back)
{
	struct fx f;
	struct ns_rec r;

	fx_open64(&f);
	r = nat64_round_trip(&f, IPPROTO_ICMP, 0x1234, 0);
	cr_assert_eq(r.s.timeout_ms, ICMP_MS);
	fx_close(&f);
}

Test(nat, nat64_a_non_syn_tcp_segment_opens_nothing_and_an_rst_closes)
{
	struct nsb_frame fr = fr_out(IPPROTO_TCP, HOST_A, 40002, REMOTE, 80);
	struct fx f;
	struct ns_rec r;

	fx_open64(&f);
	fr.tcp_flags = RTE_TCP_ACK_FLAG;
	send6(&f, &fr, 64);
	cr_assert_eq(f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).tcp_no_session, 1);
	no_record(&f);
	r = nat64_round_trip(&f, IPPROTO_TCP, 40002, 80);
	one_record64(&f, NS_EV_REFRESH);
	fr.tcp_flags = RTE_TCP_RST_FLAG;
	send6(&f, &fr, 64);
	rte_pktmbuf_free(take(&f, 1));
	r = one_record64(&f, NS_EV_DELETE);
	cr_assert_eq(r.s.orig.sport, 40002);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	cr_assert_eq(table_live(&f), 0);
	cr_assert_eq(stats(&f).closed, 1);
	fx_close(&f);
}

Test(nat, nat64_and_nat44_sessions_never_share_an_outside_port)
{
	struct nsdp_nat_conf c;
	struct nsb_frame fr;
	struct ns_session s4;
	struct ns_rec r;
	struct fx f;

	/* one address, two UDP ports */
	conf_nat64(&c);
	c.pool_last = c.pool_first;
	c.port_min = 1024;
	c.port_max = 1025;
	fx_open_conf(&f, &c, 1024, 1024, 0);
	fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	send6(&f, &fr, 64);
	rte_pktmbuf_free(take(&f, 1));
	r = one_record64(&f, NS_EV_CREATE);
	s4 = open_udp(&f, HOST_B, 40000);
	cr_assert_neq(s4.xlat.sport, r.s.xlat.sport);
	/* both ports taken: neither family gets a third */
	fr.sport = 40001;
	send6(&f, &fr, 64);
	fr = fr_out(IPPROTO_UDP, HOST_B, 40001, REMOTE, 53);
	send_in(&f, &fr);
	cr_assert_eq(f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).ports_exhausted, 2);
	no_record(&f);
	fx_close(&f);
}

Test(nat, nat64_idle_session_expires_with_a_delete_record_and_frees_its_port)
{
	struct fx f;
	unsigned int i;

	fx_open64(&f);
	nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	f.now += (uint64_t)UDP_MS * MS + SEC;
	for (i = 0; i < 4; i++)
		nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	one_record64(&f, NS_EV_DELETE);
	cr_assert_eq(stats(&f).expired, 1);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	cr_assert_eq(table_live(&f), 0);
	fx_close(&f);
}

Test(nat, nat64_promotion_forwards_replicated_sessions_and_marks_their_ports)
{
	struct nsdp_nat_conf c;
	struct nsb_frame back, fr;
	struct ns_session s4;
	struct ns_rec r;
	struct fx f;
	uint8_t d6[16];

	conf_nat64(&c);
	c.pool_last = c.pool_first;
	c.port_min = 1024;
	c.port_max = 1025;
	fx_open_conf(&f, &c, 1024, 1024, 1);
	/* what the subscriber applied: host6:40000 -> REMOTE:53 as 1024 */
	memset(&r, 0, sizeof(r));
	r.s.version = NS_RECORD_VERSION;
	r.s.family = NS_FAMILY_NAT64;
	r.s.proto = IPPROTO_UDP;
	r.s.event = NS_EV_CREATE;
	r.s.gateway_id = 7;
	r.s.epoch = 3;
	r.s.timeout_ms = UDP_MS;
	r.s.timestamp_ns = f.now - SEC;
	r.s.orig = (struct ns_tuple){0, 0, 40000, 53};
	r.s.xlat = (struct ns_tuple){POOL_FIRST, REMOTE, 1024, 53};
	memcpy(r.v6.orig_saddr, host6, 16);
	v6_of(d6, REMOTE);
	memcpy(r.v6.orig_daddr, d6, 16);
	r.v6.prefix_len = 96;
	cr_assert_eq(nsdp_table_apply(f.table, &r.s), 0);
	cr_assert_eq(with_lcore(&f, 1, EPOCH, NULL), 0, "activate");
	learn_router(&f);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 1);

	/* a new NAT44 session takes the other port */
	s4 = open_udp(&f, HOST_B, 40000);
	cr_assert_eq(s4.xlat.sport, 1025);

	/* the reply finds the replicated session; the host is solicited
	 * first (unknown), then, once it answered, reached */
	back = fr_in(IPPROTO_UDP, REMOTE, 53, POOL_FIRST, 1024);
	send_out(&f, &back);
	cr_assert_eq(stats(&f).neigh_miss, 1);
	cr_assert_eq(stats(&f).nd_solicits_sent, 1);
	cr_assert_eq(f.tx.n_inside, 1);
	tx_free(&f.tx);
	/* adopted with its timer restarted: nothing to record yet */
	no_record(&f);
	fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	send6(&f, &fr, 64); /* the host speaks: learned */
	rte_pktmbuf_free(take(&f, 1));
	no_record(&f);
	send_out(&f, &back);
	{
		struct rte_mbuf *m = take(&f, 0);

		back.dport = 40000;
		check_v6_of(m, &back, 49);
		rte_pktmbuf_free(m);
	}
	fx_close(&f);
}

/* A Neighbor Solicitation from host6 for target (hop limit hop) into
 * buf, to target's solicited-node group; its length. */
static uint32_t ns_write(const uint8_t target[16], uint8_t hop, uint8_t *buf)
{
	static const uint8_t group_head[13] = {0xff, 2, [11] = 1, [12] = 0xff};
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(eth + 1);
	uint8_t *nd = (uint8_t *)(ip6 + 1);
	struct rte_ether_addr group_mac = {
		{0x33, 0x33, 0xff, target[13], target[14], target[15]}};
	uint16_t c;

	memset(buf, 0, ETH6 + 32);
	eth->dst_addr = group_mac;
	eth->src_addr = host6_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip6->payload_len = rte_cpu_to_be_16(32);
	ip6->proto = IPPROTO_ICMPV6;
	ip6->hop_limits = hop;
	memcpy(ip6->src_addr, host6, 16);
	memcpy(ip6->dst_addr, group_head, 13);
	memcpy(ip6->dst_addr + 13, target + 13, 3);
	nd[0] = 135;
	memcpy(nd + 8, target, 16);
	nd[24] = 1; /* source link-layer address */
	nd[25] = 1;
	memcpy(nd + 26, &host6_mac, 6);
	c = rte_ipv6_udptcp_cksum(ip6, nd);
	memcpy(nd + 2, &c, 2);
	return ETH6 + 32;
}

Test(nat, nat64_neighbor_solicitation_for_the_inside_address_is_answered)
{
	static const uint8_t other[16] = {0xfd, 0, [15] = 2};
	struct rte_ipv6_hdr *ip6;
	struct rte_mbuf *m;
	uint8_t buf[256], *nd;
	uint32_t len;
	struct fx f;

	fx_open64(&f);
	len = ns_write(gw6, 255, buf);
	send_raw_in(&f, buf, len);
	m = take(&f, 0);
	check_eth(m, &inside_mac, &host6_mac);
	cr_assert_eq(rte_pktmbuf_pkt_len(m), ETH6 + 32);
	ip6 = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, 14);
	nd = (uint8_t *)(ip6 + 1);
	cr_assert_eq(ip6->proto, IPPROTO_ICMPV6);
	cr_assert_eq(ip6->hop_limits, 255);
	cr_assert_eq(rte_be_to_cpu_16(ip6->payload_len), 32);
	cr_assert(memcmp(ip6->src_addr, gw6, 16) == 0, "NA source");
	cr_assert(memcmp(ip6->dst_addr, host6, 16) == 0, "NA destination");
	cr_assert_eq(nd[0], 136);
	cr_assert_eq(nd[1], 0);
	cr_assert_eq(nd[4], 0xe0, "router, solicited, override");
	cr_assert(memcmp(nd + 8, gw6, 16) == 0, "target");
	cr_assert_eq(nd[24], 2, "target link-layer address option");
	cr_assert_eq(nd[25], 1);
	cr_assert(memcmp(nd + 26, &inside_mac, 6) == 0);
	cr_assert_eq(rte_ipv6_udptcp_cksum(ip6, nd), 0, "ICMPv6 checksum");
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).nd_in, 1);
	/* this answer, and the announcement at the promotion */
	cr_assert_eq(stats(&f).nd_adverts_sent, 2);

	/* not for us, or not from the link: learned from or ignored, no
	 * answer */
	len = ns_write(other, 255, buf);
	send_raw_in(&f, buf, len);
	len = ns_write(gw6, 254, buf);
	send_raw_in(&f, buf, len);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).nd_ignored, 2);
	cr_assert_eq(stats(&f).nd_adverts_sent, 2);
	no_record(&f);

	/* the host's address was learned from the first: a reply to it
	 * needs no solicitation (nat64_round_trip checks the MAC) */
	nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	cr_assert_eq(stats(&f).nd_solicits_sent, 0);
	fx_close(&f);
}

enum spoil6 {
	S6_DST_OUTSIDE_PREFIX,
	S6_DST_GATEWAY,
	S6_DST_POOL,
	S6_HOP_1,
	S6_FRAGMENT,
	S6_HOP_BY_HOP,
	S6_UDP_NO_CKSUM,
	S6_ECHO_REPLY,
	S6_ICMP6_ERROR,
	S6_PAYLOAD_LONG,
	S6_VERSION,
	S6_TRUNCATED,
	S6_ETH_DST,
	S6_PROTO_GRE,
};

static const struct {
	const char *what;
	enum spoil6 spoil;
	uint8_t proto;
	size_t counter;
} bad6[] = {
	{"outside the prefix", S6_DST_OUTSIDE_PREFIX, IPPROTO_UDP,
	 STAT(not_ours)},
	{"to the gateway", S6_DST_GATEWAY, IPPROTO_UDP, STAT(to_gateway)},
	{"to a pool address", S6_DST_POOL, IPPROTO_UDP, STAT(to_gateway)},
	{"hop limit 1", S6_HOP_1, IPPROTO_UDP, STAT(ttl_expired)},
	{"fragment header", S6_FRAGMENT, IPPROTO_UDP, STAT(fragments)},
	{"hop-by-hop header", S6_HOP_BY_HOP, IPPROTO_UDP,
	 STAT(ip6_ext_headers)},
	{"UDP without checksum", S6_UDP_NO_CKSUM, IPPROTO_UDP,
	 STAT(udp6_zero_checksum)},
	{"echo reply", S6_ECHO_REPLY, IPPROTO_ICMP, STAT(no_session)},
	{"ICMPv6 error quoting too little", S6_ICMP6_ERROR, IPPROTO_ICMP,
	 STAT(icmp_error_bad)},
	{"payload length past the frame", S6_PAYLOAD_LONG, IPPROTO_UDP,
	 STAT(bad_ip_header)},
	{"version 4 in an IPv6 frame", S6_VERSION, IPPROTO_UDP,
	 STAT(bad_ip_header)},
	{"truncated header", S6_TRUNCATED, IPPROTO_UDP, STAT(truncated)},
	{"not our MAC address", S6_ETH_DST, IPPROTO_UDP, STAT(not_ours)},
	{"GRE", S6_PROTO_GRE, IPPROTO_UDP, STAT(unknown_proto)},
};

static uint64_t stat_at(const struct nsdp_nat_stats *s, size_t off)
{
	return *(const uint64_t *)(const void *)((const uint8_t *)s + off);
}

Test(nat, nat64_bad_input_is_dropped_and_counted_once_each)
{
	struct fx f;
	unsigned int i;

	fx_open64(&f);
	for (i = 0; i < sizeof(bad6) / sizeof(bad6[0]); i++) {
		struct nsb_frame fr =
			fr_out(bad6[i].proto, HOST_A, 40000, REMOTE, 53);
		struct nsdp_nat_stats before = stats(&f), after;
		uint8_t buf[2048], d6[16];
		struct rte_ipv6_hdr *ip6 = (void *)(buf + 14);
		uint8_t *l4 = buf + ETH6;
		uint32_t len;

		fr.src = host6_mac;
		v6_of(d6, REMOTE);
		len = frame6_write(&fr, host6, d6, 64, buf);
		switch (bad6[i].spoil) {
		case S6_DST_OUTSIDE_PREFIX:
			ip6->dst_addr[1] = 0x65;
			break;
		case S6_DST_GATEWAY:
			memcpy(ip6->dst_addr, gw6, 16);
			break;
		case S6_DST_POOL:
			v6_of(ip6->dst_addr, POOL_LAST);
			break;
		case S6_HOP_1:
			ip6->hop_limits = 1;
			break;
		case S6_FRAGMENT:
			ip6->proto = IPPROTO_FRAGMENT;
			break;
		case S6_HOP_BY_HOP:
			ip6->proto = IPPROTO_HOPOPTS;
			break;
		case S6_UDP_NO_CKSUM:
			l4[6] = l4[7] = 0;
			break;
		case S6_ECHO_REPLY:
			l4[0] = 129;
			break;
		case S6_ICMP6_ERROR:
			l4[0] = 1;
			break;
		case S6_PAYLOAD_LONG:
			ip6->payload_len =
				rte_cpu_to_be_16((uint16_t)(len - ETH6 + 1));
			break;
		case S6_VERSION:
			ip6->vtc_flow = rte_cpu_to_be_32(4u << 28);
			break;
		case S6_TRUNCATED:
			len = ETH6 - 1;
			break;
		case S6_ETH_DST:
			buf[0] ^= 0x10;
			break;
		case S6_PROTO_GRE:
			ip6->proto = 47;
			break;
		}
		send_raw_in(&f, buf, len);
		after = stats(&f);
		cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0, "%s: sent",
			     bad6[i].what);
		cr_assert_eq(stat_at(&after, bad6[i].counter),
			     stat_at(&before, bad6[i].counter) + 1,
			     "%s: not counted", bad6[i].what);
		cr_assert_eq(after.created, 0, "%s: created", bad6[i].what);
	}
	no_record(&f);
	cr_assert_eq(table_live(&f), 0);
	fx_close(&f);
}

Test(nat, nat64_standby_drops_ipv6_and_answers_no_solicitation)
{
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	struct nsdp_nat_conf c;
	uint8_t buf[256];
	struct fx f;

	conf_nat64(&c);
	fx_open_conf(&f, &c, 1024, 1024, 1);
	send6(&f, &fr, 64);
	send_raw_in(&f, buf, ns_write(gw6, 255, buf));
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).standby_drops, 1);
	cr_assert_eq(stats(&f).nd_ignored, 1);
	no_record(&f);
	fx_close(&f);
}

Test(nat, nat64_a_padded_minimum_ipv4_frame_becomes_an_exact_ipv6_one)
{
	struct nsb_frame back;
	struct rte_mbuf *m;
	struct ns_rec r;
	struct fx f;
	uint8_t buf[128];
	uint32_t len;

	fx_open64(&f);
	r = nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	back = fr_in(IPPROTO_UDP, REMOTE, 53, r.s.xlat.saddr, r.s.xlat.sport);
	back.payload = 4; /* 46 bytes, padded to 60 */
	len = nsb_frame_write(&back, buf);
	cr_assert_eq(len, 46);
	memset(buf + len, 0xee, 60 - len);
	m = rte_pktmbuf_alloc(f.pool);
	memcpy(rte_pktmbuf_append(m, 60), buf, 60);
	nsdp_nat_outside(f.nat, &m, 1, f.now, &f.tx);
	m = take(&f, 0);
	back.dport = 40000;
	check_v6_of(m, &back, 49); /* 66 bytes: no padding left */
	rte_pktmbuf_free(m);
	fx_close(&f);
}

Test(nat, nat64_conf_check_and_create_refuse_what_nat64_cannot_run_with)
{
	struct nsdp_nat_conf c;
	struct nsdp_table *t;
	char err[128];

	conf_nat64(&c);
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), 0);
	c.nat64_prefix_len = 64;
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "the NAT64 prefix must be a /96");
	conf_nat64(&c);
	c.inside_addr6[0] = 0xff;
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "inside_addr6 is a multicast address");
	conf_nat64(&c);
	v6_of(c.inside_addr6, INSIDE_ADDR);
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "inside_addr6 is in the NAT64 prefix");
	/* a table without an IPv6 table has nowhere to keep the sessions */
	conf_nat64(&c);
	t = nsdp_table_create("nst_nat64_no_v6", 64);
	cr_assert_not_null(t);
	errno = 0;
	cr_assert_null(nsdp_nat_create(&c, t, NULL));
	cr_assert_eq(errno, EINVAL);
	nsdp_table_free(t);
}

/* ------------------------------------------------------------------ */
/* NAT64 ICMP errors (RFC 7915 sections 4.2 and 5.2)                   */
/* ------------------------------------------------------------------ */

/* A router on the outside path, and one of the inside host's. */
#define ROUTER4 0xc0000201u /* 192.0.2.1 */

/* An ICMPv4 error (type, code, rest) from ROUTER4 to the pool address
 * dst quoting qlen bytes of the IPv4 packet q, through the outside, TTL
 * 50; checksums from scratch. Its length. */
static uint32_t icmp4_err_write(uint8_t type, uint8_t code, uint32_t rest,
				uint32_t dst, const uint8_t *q, uint32_t qlen,
				uint8_t *buf)
{
	struct nsb_frame fr = fr_in(IPPROTO_ICMP, ROUTER4, 0, dst, 0);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(buf + 14);
	uint8_t *icmp = buf + 34;
	uint32_t be = rte_cpu_to_be_32(rest);
	uint16_t c;

	fr.payload = 0;
	nsb_frame_write(&fr, buf);
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + 8 + qlen));
	ip->hdr_checksum = 0;
	ip->hdr_checksum = nsb_frame_ip_cksum(ip);
	icmp[0] = type;
	icmp[1] = code;
	memset(icmp + 2, 0, 2);
	memcpy(icmp + 4, &be, 4);
	memcpy(icmp + 8, q, qlen);
	c = nsb_frame_icmp_cksum(icmp, 8 + qlen);
	memcpy(icmp + 2, &c, 2);
	return 34 + 8 + qlen;
}

/* An ICMPv6 error (type, code, rest) from s6 to d6, hop limit hop,
 * quoting qlen bytes of the IPv6 packet q; checksum from scratch; the
 * Ethernet header of a frame from host6 to the gateway. Its length. */
static uint32_t icmp6_err_write(uint8_t type, uint8_t code, uint32_t rest,
				const uint8_t s6[16], const uint8_t d6[16],
				uint8_t hop, const uint8_t *q, uint32_t qlen,
				uint8_t *buf)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(eth + 1);
	uint8_t *icmp = buf + ETH6;
	uint32_t be = rte_cpu_to_be_32(rest);
	uint16_t c;

	memset(buf, 0, ETH6 + 8);
	eth->dst_addr = inside_mac;
	eth->src_addr = host6_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip6->payload_len = rte_cpu_to_be_16((uint16_t)(8 + qlen));
	ip6->proto = IPPROTO_ICMPV6;
	ip6->hop_limits = hop;
	memcpy(ip6->src_addr, s6, 16);
	memcpy(ip6->dst_addr, d6, 16);
	icmp[0] = type;
	icmp[1] = code;
	memcpy(icmp + 4, &be, 4);
	memcpy(icmp + 8, q, qlen);
	c = rte_ipv6_udptcp_cksum(ip6, icmp);
	memcpy(icmp + 2, &c, 2);
	return ETH6 + 8 + qlen;
}

static void send_raw_out(struct fx *f, const uint8_t *buf, uint32_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(f->pool);

	cr_assert_not_null(m);
	memcpy(rte_pktmbuf_append(m, (uint16_t)len), buf, len);
	nsdp_nat_outside(f->nat, &m, 1, f->now, &f->tx);
}

/* m's packet from its IP header on is byte for byte want's (len bytes
 * with the Ethernet header). */
static void check_bytes(struct rte_mbuf *m, const uint8_t *want, uint32_t len)
{
	const uint8_t *got = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t i;

	cr_assert_eq(rte_pktmbuf_pkt_len(m), len, "length %u, expected %u",
		     rte_pktmbuf_pkt_len(m), len);
	for (i = 12; i < len; i++)
		cr_assert_eq(got[i], want[i], "byte %u: %02x, expected %02x", i,
			     got[i], want[i]);
}

/* The outbound IPv4 packet of NAT64 session r for fr (as the gateway
 * sent it, TTL 63) into q; its length. */
static uint32_t sent4(const struct nsb_frame *fr, const struct ns_rec *r,
		      uint8_t *q)
{
	struct nsb_frame w = *fr;
	uint8_t buf[2048];
	uint32_t len;

	w.saddr = r->s.xlat.saddr;
	w.sport = r->s.xlat.sport;
	w.ttl = 63;
	len = nsb_frame_write(&w, buf) - 14;
	memcpy(q, buf + 14, len);
	return len;
}

/* An outside error about fr's flow (session r) quoting its first qlen
 * bytes becomes, on the inside, exactly the ICMPv6 error (type, code,
 * rest) from 64:ff9b::ROUTER4 quoting fr's IPv6 packet. */
static void err4_becomes(struct fx *f, const struct nsb_frame *fr,
			 const struct ns_rec *r, uint8_t type4, uint8_t code4,
			 uint32_t rest4, uint8_t type6, uint8_t code6,
			 uint32_t rest6)
{
	uint8_t q[2048], buf[2048], want[2048], d6[16], s6[16];
	uint32_t qlen = sent4(fr, r, q), len, q6len;
	struct nsb_frame e = *fr;
	struct rte_mbuf *m;

	len = icmp4_err_write(type4, code4, rest4, r->s.xlat.saddr, q, qlen,
			      buf);
	send_raw_out(f, buf, len);
	m = take(f, 0);
	/* the quote: fr's IPv6 packet, hop limit 63 (the quoted TTL) */
	v6_of(d6, fr->daddr);
	e.src = host6_mac;
	q6len = frame6_write(&e, host6, d6, 63, q) - 14;
	v6_of(s6, ROUTER4);
	len = icmp6_err_write(type6, code6, rest6, s6, host6, 49, q + 14, q6len,
			      want);
	check_bytes(m, want, len);
	check_eth(m, &inside_mac, &host6_mac);
	rte_pktmbuf_free(m);
}

Test(nat, nat64_icmp_errors_from_the_outside_become_exact_icmpv6_errors)
{
	struct nsb_frame udp = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	struct nsb_frame tcp = fr_out(IPPROTO_TCP, HOST_A, 40001, REMOTE, 80);
	struct nsb_frame echo = fr_out(IPPROTO_ICMP, HOST_A, 7, REMOTE, 0);
	struct ns_rec ru, rt, re;
	struct nsdp_nat_stats s;
	struct fx f;

	fx_open64(&f);
	ru = nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	send6(&f, &tcp, 64);
	rte_pktmbuf_free(take(&f, 1));
	rt = one_record64(&f, NS_EV_CREATE);
	send6(&f, &echo, 64);
	rte_pktmbuf_free(take(&f, 1));
	re = one_record64(&f, NS_EV_CREATE);

	/* fragmentation needed, MTU 1400: Packet Too Big, MTU 1420 */
	err4_becomes(&f, &tcp, &rt, 3, 4, 1400, 2, 0, 1420);
	/* port unreachable: port unreachable */
	err4_becomes(&f, &udp, &ru, 3, 3, 0, 1, 4, 0);
	/* TTL exceeded in transit, about an echo request */
	err4_becomes(&f, &echo, &re, 11, 0, 0, 3, 0, 0);
	/* host unreachable: no route; protocol unreachable: parameter
	 * problem at the next header field; a parameter problem at the
	 * TTL: at the hop limit */
	err4_becomes(&f, &udp, &ru, 3, 1, 0, 1, 0, 0);
	err4_becomes(&f, &udp, &ru, 3, 2, 0, 4, 1, 6);
	err4_becomes(&f, &tcp, &rt, 12, 0, 8u << 24, 4, 0, 7);
	s = stats(&f);
	cr_assert_eq(s.icmp_errors_translated, 6);
	cr_assert_eq(s.icmp_error_no_session + s.icmp_error_bad, 0);
	no_record(&f); /* errors refresh nothing */
	fx_close(&f);
}

/* An inside error about the reply fr (from REMOTE to a NAT64 session r's
 * pool address and port, delivered to host6 with hop limit 49) quoting
 * all of it becomes on the outside exactly the ICMPv4 error (type, code,
 * rest) from the pool address to REMOTE, its identification aside. */
static void err6_becomes(struct fx *f, const struct nsb_frame *fr,
			 const struct ns_rec *r, uint8_t type6, uint8_t code6,
			 uint32_t rest6, uint8_t type4, uint8_t code4,
			 uint32_t rest4)
{
	uint8_t q[2048], buf[2048], want[2048], s6[16];
	struct nsb_frame e = *fr;
	struct rte_ipv4_hdr *iq = (struct rte_ipv4_hdr *)(q + 14), *ip;
	uint32_t qlen, len, be = rte_cpu_to_be_32(rest4);
	struct rte_mbuf *m;
	uint8_t *icmp = want + 34;
	uint16_t c;

	/* the quote: what host6 received */
	e.dport = (uint16_t)r->s.orig.sport;
	if (fr->proto == IPPROTO_ICMP)
		e.sport = r->s.orig.sport;
	v6_of(s6, fr->saddr);
	qlen = frame6_write(&e, s6, host6, 49, q) - 14;
	v6_of(s6, REMOTE);
	len = icmp6_err_write(type6, code6, rest6, host6, s6, 64, q + 14, qlen,
			      buf);
	send_raw_in(f, buf, len);
	m = take(f, 1);
	ip = ip_of(m);
	cr_assert_eq(ip->hdr_checksum, nsb_frame_ip_cksum(ip));
	cr_assert_eq(ip->fragment_offset, 0);

	/* the expected: fr's IPv4 packet, TTL 49, no identification, no
	 * DF, behind the ICMPv4 header, behind the outer header */
	e = *fr;
	e.ttl = 49;
	qlen = nsb_frame_write(&e, q) - 14;
	iq->packet_id = 0;
	iq->fragment_offset = 0;
	iq->hdr_checksum = 0;
	iq->hdr_checksum = nsb_frame_ip_cksum(iq);
	e = fr_out(IPPROTO_ICMP, r->s.xlat.saddr, 0, REMOTE, 0);
	e.payload = 0;
	e.ttl = 63;
	nsb_frame_write(&e, want);
	((struct rte_ipv4_hdr *)(want + 14))->total_length =
		rte_cpu_to_be_16((uint16_t)(20 + 8 + qlen));
	((struct rte_ipv4_hdr *)(want + 14))->packet_id = ip->packet_id;
	((struct rte_ipv4_hdr *)(want + 14))->fragment_offset = 0;
	((struct rte_ipv4_hdr *)(want + 14))->hdr_checksum = ip->hdr_checksum;
	icmp[0] = type4;
	icmp[1] = code4;
	memset(icmp + 2, 0, 2);
	memcpy(icmp + 4, &be, 4);
	memcpy(icmp + 8, q + 14, qlen);
	c = nsb_frame_icmp_cksum(icmp, 8 + qlen);
	memcpy(icmp + 2, &c, 2);
	check_bytes(m, want, 34 + 8 + qlen);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);
}

Test(nat, nat64_icmpv6_errors_from_the_inside_become_exact_icmp_errors)
{
	struct nsb_frame echo = fr_out(IPPROTO_ICMP, HOST_A, 7, REMOTE, 0);
	struct nsb_frame back;
	struct ns_rec ru, re;
	struct nsdp_nat_stats s;
	struct fx f;

	fx_open64(&f);
	ru = nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	back = fr_in(IPPROTO_UDP, REMOTE, 53, ru.s.xlat.saddr, ru.s.xlat.sport);
	/* port unreachable: port unreachable */
	err6_becomes(&f, &back, &ru, 1, 4, 0, 3, 3, 0);
	/* Packet Too Big, MTU 1300: fragmentation needed, MTU 1280 */
	err6_becomes(&f, &back, &ru, 2, 0, 1300, 3, 4, 1280);
	/* hop limit exceeded: TTL exceeded */
	err6_becomes(&f, &back, &ru, 3, 0, 0, 11, 0, 0);
	/* administratively prohibited: communication prohibited */
	err6_becomes(&f, &back, &ru, 1, 1, 0, 3, 10, 0);
	/* unrecognised next header: protocol unreachable; a parameter
	 * problem at the hop limit: at the TTL */
	err6_becomes(&f, &back, &ru, 4, 1, 0, 3, 2, 0);
	err6_becomes(&f, &back, &ru, 4, 0, 7, 12, 0, 8u << 24);
	/* address unreachable, about an echo reply: host unreachable */
	send6(&f, &echo, 64);
	rte_pktmbuf_free(take(&f, 1));
	re = one_record64(&f, NS_EV_CREATE);
	back = fr_in(IPPROTO_ICMP, REMOTE, 0, re.s.xlat.saddr, 0);
	back.sport = re.s.xlat.sport;
	err6_becomes(&f, &back, &re, 1, 3, 0, 3, 1, 0);
	s = stats(&f);
	cr_assert_eq(s.icmp_errors_translated, 7);
	cr_assert_eq(s.icmp_error_no_session + s.icmp_error_bad, 0);
	no_record(&f);
	fx_close(&f);
}

/* How an error is spoilt, and the counter that takes it. */
enum spoil_err {
	SE_NO_SESSION, /* quotes a port no session has */
	SE_QUOTE_SHORT, /* 4 bytes of the quoted L4 header */
	SE_BAD_CKSUM,
	SE_QUOTE_VERSION, /* the quote is of the other family */
	SE_UNMAPPED, /* a code without counterpart */
};

static const struct {
	const char *what;
	enum spoil_err spoil;
	size_t counter;
} bad_err[] = {
	{"no session", SE_NO_SESSION, STAT(icmp_error_no_session)},
	{"quote cut in its L4 header", SE_QUOTE_SHORT, STAT(icmp_error_bad)},
	{"bad checksum", SE_BAD_CKSUM, STAT(icmp_error_bad)},
	{"quote of the wrong version", SE_QUOTE_VERSION, STAT(icmp_error_bad)},
	{"code without counterpart", SE_UNMAPPED, STAT(icmp_unsupported)},
};

/* The outside error of case i about session r's UDP flow into buf. */
static uint32_t bad_err4(unsigned int i, const struct ns_rec *r, uint8_t *buf)
{
	struct nsb_frame udp = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	uint8_t q[2048], code = 3;
	uint32_t qlen = sent4(&udp, r, q), len;

	switch (bad_err[i].spoil) {
	case SE_NO_SESSION:
		q[21] ^= 1; /* the source port */
		break;
	case SE_QUOTE_SHORT:
		qlen = 24;
		break;
	case SE_QUOTE_VERSION:
		q[0] = 0x65;
		break;
	case SE_UNMAPPED:
		code = 14; /* precedence cutoff */
		break;
	default:
		break;
	}
	len = icmp4_err_write(3, code, 0, r->s.xlat.saddr, q, qlen, buf);
	if (bad_err[i].spoil == SE_BAD_CKSUM)
		buf[36] ^= 1;
	return len;
}

/* The inside error of case i about session r's UDP replies into buf. */
static uint32_t bad_err6(unsigned int i, const struct ns_rec *r, uint8_t *buf)
{
	struct nsb_frame back = fr_in(IPPROTO_UDP, REMOTE, 53, r->s.xlat.saddr,
				      r->s.orig.sport);
	uint8_t q[2048], s6[16], code = 4;
	uint32_t qlen, len;

	v6_of(s6, REMOTE);
	qlen = frame6_write(&back, s6, host6, 49, q) - 14;
	switch (bad_err[i].spoil) {
	case SE_NO_SESSION:
		q[14 + 43] ^= 1; /* the destination port */
		break;
	case SE_QUOTE_SHORT:
		qlen = 44;
		break;
	case SE_QUOTE_VERSION:
		q[14] = 0x45;
		break;
	case SE_UNMAPPED:
		code = 5; /* source address failed policy */
		break;
	default:
		break;
	}
	len = icmp6_err_write(1, code, 0, host6, s6, 64, q + 14, qlen, buf);
	if (bad_err[i].spoil == SE_BAD_CKSUM)
		buf[ETH6 + 2] ^= 1;
	return len;
}

Test(nat, nat64_icmp_errors_bad_or_of_no_session_are_dropped_and_counted_once)
{
	struct ns_rec r;
	struct fx f;
	unsigned int i, in;

	fx_open64(&f);
	r = nat64_round_trip(&f, IPPROTO_UDP, 40000, 53);
	for (in = 0; in < 2; in++) {
		for (i = 0; i < RTE_DIM(bad_err); i++) {
			struct nsdp_nat_stats before = stats(&f), after;
			uint8_t buf[2048];
			uint32_t len;

			if (in) {
				len = bad_err6(i, &r, buf);
				send_raw_in(&f, buf, len);
			} else {
				len = bad_err4(i, &r, buf);
				send_raw_out(&f, buf, len);
			}
			after = stats(&f);
			cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0,
				     "%s (%s): sent", bad_err[i].what,
				     in ? "inside" : "outside");
			cr_assert_eq(stat_at(&after, bad_err[i].counter),
				     stat_at(&before, bad_err[i].counter) + 1,
				     "%s (%s): not counted", bad_err[i].what,
				     in ? "inside" : "outside");
			cr_assert_eq(after.icmp_error_bad +
					     after.icmp_error_no_session +
					     after.icmp_unsupported,
				     before.icmp_error_bad +
					     before.icmp_error_no_session +
					     before.icmp_unsupported + 1,
				     "%s: counted more than once",
				     bad_err[i].what);
		}
	}
	cr_assert_eq(stats(&f).icmp_errors_translated, 0);
	no_record(&f);
	fx_close(&f);
}

Test(nat,
     nat64_defer_holds_a_new_sessions_first_packet_until_its_record_settles)
{
	struct nsb_frame out = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	struct nsdp_nat_conf c;
	struct nsdp_nat_stats s;
	struct rte_mbuf *m;
	struct ns_rec r;
	struct fx f;

	conf_nat64(&c);
	c.defer_max_us = 2000;
	fx_open_conf(&f, &c, 1024, 1024, 0);

	/* the first packet waits; the flow's second one goes at once */
	send6(&f, &out, 64);
	cr_assert_eq(f.tx.n_outside, 0, "the first packet was not held");
	cr_assert_eq(nsdp_nat_deferred(f.nat), 1);
	send6(&f, &out, 64);
	rte_pktmbuf_free(take(&f, 1));
	f.now += 500 * 1000;
	housekeep(&f);
	cr_assert_eq(f.tx.n_outside, 0, "let go before its record settled");

	/* drained is not settled; settled is */
	r = one_record64(&f, NS_EV_CREATE);
	housekeep(&f);
	cr_assert_eq(f.tx.n_outside, 0, "let go when drained, not settled");
	nsdp_lane_settle(f.lane, f.lane->drained);
	housekeep(&f);
	m = take(&f, 1);
	out.saddr = r.s.xlat.saddr;
	out.sport = r.s.xlat.sport;
	out.ttl = 63;
	check_v4_of(m, &out);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);
	s = stats(&f);
	cr_assert_eq(s.defer_held, 1);
	cr_assert_eq(s.defer_settled, 1);
	cr_assert_eq(s.defer_timeouts + s.defer_unrecorded, 0);
	cr_assert_eq(nsdp_nat_deferred(f.nat), 0);
	fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* NAT66                                                                */
/* ------------------------------------------------------------------ */

/* The gateway's outside IPv6 address 2001:db8:1::1, the outside router
 * 2001:db8:1::fe (at router_mac), and a remote server 2001:db8:2::5. */
static const uint8_t out6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, [15] = 1};
static const uint8_t router6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, [15] = 0xfe};
static const uint8_t remote6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 2, [15] = 5};

static void conf_nat66(struct nsdp_nat_conf *c)
{
	conf_nat64(c);
	memcpy(c->outside_addr6, out6, 16);
	memcpy(c->next_hop6, router6, 16);
}

/* A Neighbor Solicitation (type 135, to target's solicited-node group,
 * with a source link-layer option) or Advertisement (136, to all nodes,
 * solicited and override, with a target link-layer option) from s6 at
 * smac about target, hop limit 255, into buf; its length. */
static uint32_t nd6_write(uint8_t type, const uint8_t s6[16],
			  const struct rte_ether_addr *smac,
			  const uint8_t target[16], uint8_t *buf)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(eth + 1);
	uint8_t *nd = (uint8_t *)(ip6 + 1);
	uint16_t c;

	memset(buf, 0, ETH6 + 32);
	eth->src_addr = *smac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip6->payload_len = rte_cpu_to_be_16(32);
	ip6->proto = IPPROTO_ICMPV6;
	ip6->hop_limits = 255;
	memcpy(ip6->src_addr, s6, 16);
	ip6->dst_addr[0] = 0xff;
	ip6->dst_addr[1] = 2;
	if (type == 135) {
		ip6->dst_addr[11] = 1;
		ip6->dst_addr[12] = 0xff;
		memcpy(ip6->dst_addr + 13, target + 13, 3);
	} else {
		ip6->dst_addr[15] = 1;
		nd[4] = 0x60;
	}
	memcpy(eth->dst_addr.addr_bytes, "\x33\x33", 2);
	memcpy(eth->dst_addr.addr_bytes + 2, ip6->dst_addr + 12, 4);
	nd[0] = type;
	memcpy(nd + 8, target, 16);
	nd[24] = type == 135 ? 1 : 2;
	nd[25] = 1;
	memcpy(nd + 26, smac, 6);
	c = rte_ipv6_udptcp_cksum(ip6, nd);
	memcpy(nd + 2, &c, 2);
	return ETH6 + 32;
}

/* The router advertises itself on the outside: learned, nothing sent. */
static void learn_router6(struct fx *f)
{
	uint8_t buf[256];

	send_raw_out(f, buf,
		     nd6_write(136, router6, &router_mac, router6, buf));
	cr_assert_eq(f->tx.n_inside + f->tx.n_outside, 0);
}

static void fx_open66(struct fx *f, uint16_t port_min, uint16_t port_max)
{
	struct nsdp_nat_conf c;

	conf_nat66(&c);
	c.port_min = port_min;
	c.port_max = port_max;
	fx_open_conf(f, &c, 1024, 1024, 0);
	learn_router6(f);
}

/* fr's L4 part (ports and flags as fr has them) from s6 to d6 through
 * the inside (from host6) or the outside (from the router). */
static void send66(struct fx *f, int outside, const struct nsb_frame *fr,
		   const uint8_t s6[16], const uint8_t d6[16], uint8_t hop)
{
	struct nsb_frame e = *fr;
	uint8_t buf[2048];

	e.src = outside ? router_mac : host6_mac;
	e.dst = outside ? outside_mac : inside_mac;
	if (outside)
		send_raw_out(f, buf, frame6_write(&e, s6, d6, hop, buf));
	else
		send_raw_in(f, buf, frame6_write(&e, s6, d6, hop, buf));
}

/* m is exactly fr's L4 part from s6 to d6 with hop limit hop, checksummed
 * from scratch. */
static void check_v6_exact(struct rte_mbuf *m, const struct nsb_frame *fr,
			   const uint8_t s6[16], const uint8_t d6[16],
			   uint8_t hop)
{
	uint8_t buf[2048];
	uint32_t len = frame6_write(fr, s6, d6, hop, buf);

	cr_assert_eq(rte_pktmbuf_pkt_len(m), len, "length %u, expected %u",
		     rte_pktmbuf_pkt_len(m), len);
	cr_assert(memcmp(rte_pktmbuf_mtod_offset(m, uint8_t *, 14), buf + 14,
			 len - 14) == 0,
		  "IPv6 packet differs from the expected one");
}

/* Exactly one NAT66 record waiting in the lane, of event. */
static struct ns_rec one_record66(struct fx *f, uint8_t event)
{
	struct ns_rec r = one_record6(f, NS_FAMILY_NAT66, event);

	cr_assert(memcmp(r.v6.orig_daddr, remote6, 16) == 0, "orig_daddr");
	cr_assert(memcmp(r.v6.xlat_saddr, out6, 16) == 0, "xlat_saddr");
	cr_assert(memcmp(r.v6.xlat_daddr, remote6, 16) == 0, "xlat_daddr");
	cr_assert_eq(r.s.xlat.saddr, 0);
	cr_assert_eq(r.s.xlat.daddr, 0);
	return r;
}

/* One flow of proto from host6:sport to remote6:dport there and back,
 * each way byte for byte; returns its record. */
static struct ns_rec nat66_round_trip(struct fx *f, uint8_t proto,
				      uint16_t sport, uint16_t dport)
{
	struct nsb_frame out = fr_out(proto, HOST_A, sport, REMOTE, dport);
	struct nsb_frame back;
	struct rte_mbuf *m;
	struct ns_rec r;

	send66(f, 0, &out, host6, remote6, 64);
	m = take(f, 1);
	r = one_record66(f, NS_EV_CREATE);
	cr_assert_eq(r.s.proto, proto == IPPROTO_ICMP ? IPPROTO_ICMPV6 : proto);
	cr_assert_eq(r.s.orig.sport, sport);
	cr_assert_eq(r.s.orig.dport, proto == IPPROTO_ICMP ? 0 : dport);
	cr_assert_eq(r.s.xlat.dport, r.s.orig.dport);
	cr_assert(r.s.xlat.sport >= f->conf.port_min &&
		  r.s.xlat.sport <= f->conf.port_max);
	out.sport = r.s.xlat.sport; /* the identifier, for ICMP */
	check_v6_exact(m, &out, out6, remote6, 63);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);

	back = fr_in(proto, REMOTE, dport, 0, r.s.xlat.sport);
	if (proto == IPPROTO_ICMP)
		back.sport = r.s.xlat.sport;
	send66(f, 1, &back, remote6, out6, 50);
	m = take(f, 0);
	if (proto == IPPROTO_ICMP)
		back.sport = sport;
	else
		back.dport = sport;
	check_v6_exact(m, &back, remote6, host6, 49);
	check_eth(m, &inside_mac, &host6_mac);
	rte_pktmbuf_free(m);
	return r;
}

static struct nsdp_table_stats table_stats(const struct fx *f)
{
	struct nsdp_table_stats ts;

	nsdp_table_stats(f->table, &ts);
	return ts;
}

Test(nat, nat66_udp_is_translated_exactly_both_ways_and_recorded_once)
{
	struct ns_rec r;
	struct fx f;

	fx_open66(&f, 1024, 65535);
	r = nat66_round_trip(&f, IPPROTO_UDP, 40000, 53);
	cr_assert_eq(r.s.timeout_ms, UDP_MS);
	no_record(&f);
	cr_assert_eq(table_stats(&f).live_v6, 1);
	cr_assert_eq(table_live(&f), 1);
	cr_assert_eq(stats(&f).created, 1);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 1);
	/* the next packet finds the session: same port, no record */
	{
		struct nsb_frame fr =
			fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
		struct rte_mbuf *m;

		send66(&f, 0, &fr, host6, remote6, 64);
		m = take(&f, 1);
		fr.sport = r.s.xlat.sport;
		check_v6_exact(m, &fr, out6, remote6, 63);
		rte_pktmbuf_free(m);
	}
	no_record(&f);
	cr_assert_eq(stats(&f).created, 1);
	fx_close(&f);
}

Test(nat, nat66_tcp_syn_ack_establishes_and_an_rst_forwards_then_closes)
{
	struct nsb_frame rst;
	struct ns_rec r;
	struct fx f;

	fx_open66(&f, 1024, 65535);
	r = nat66_round_trip(&f, IPPROTO_TCP, 40001, 443);
	cr_assert_eq(r.s.timeout_ms, TCP_SYN_MS);
	r = one_record66(&f, NS_EV_REFRESH);
	cr_assert_eq(r.s.timeout_ms, TCP_EST_MS);
	rst = fr_out(IPPROTO_TCP, HOST_A, 40001, REMOTE, 443);
	rst.tcp_flags = RTE_TCP_RST_FLAG | RTE_TCP_ACK_FLAG;
	send66(&f, 0, &rst, host6, remote6, 64);
	rte_pktmbuf_free(take(&f, 1));
	one_record66(&f, NS_EV_DELETE);
	cr_assert_eq(stats(&f).closed, 1);
	cr_assert_eq(table_live(&f), 0);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	/* and a non-SYN segment opens nothing */
	rst.tcp_flags = RTE_TCP_ACK_FLAG;
	send66(&f, 0, &rst, host6, remote6, 64);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).tcp_no_session, 1);
	no_record(&f);
	fx_close(&f);
}

Test(nat, nat66_icmpv6_echo_identifier_is_translated_both_ways)
{
	struct ns_rec r;
	struct fx f;

	fx_open66(&f, 1024, 65535);
	r = nat66_round_trip(&f, IPPROTO_ICMP, 777, 0);
	cr_assert_eq(r.s.timeout_ms, ICMP_MS);
	cr_assert_eq(stats(&f).created, 1);
	fx_close(&f);
}

Test(nat, nat66_ports_are_the_outside_addresss_own_and_never_collide)
{
	struct nsb_frame fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	struct ns_session s4;
	struct ns_rec a, b;
	struct fx f;

	/* two ports for each outside address: NAT66 takes both of
	 * outside_addr6's, the NAT44 its pool's */
	fx_open66(&f, 1024, 1025);
	a = nat66_round_trip(&f, IPPROTO_UDP, 40000, 53);
	b = nat66_round_trip(&f, IPPROTO_UDP, 40001, 53);
	cr_assert_neq(a.s.xlat.sport, b.s.xlat.sport);
	fr.sport = 40002;
	send66(&f, 0, &fr, host6, remote6, 64);
	cr_assert_eq(f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).ports_exhausted, 1);
	no_record(&f);
	s4 = open_udp(&f, HOST_B, 40000);
	cr_assert(s4.xlat.sport == 1024 || s4.xlat.sport == 1025);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 3);
	cr_assert_eq(table_stats(&f).live_v6, 2);
	cr_assert_eq(table_live(&f), 3);
	fx_close(&f);
}

Test(nat, nat66_idle_session_expires_with_a_delete_record_and_frees_its_port)
{
	struct fx f;
	unsigned int i;

	fx_open66(&f, 1024, 65535);
	nat66_round_trip(&f, IPPROTO_UDP, 40000, 53);
	f.now += (uint64_t)UDP_MS * MS + SEC;
	for (i = 0; i < 4; i++)
		nsdp_nat_housekeep(f.nat, f.now, &f.tx);
	one_record66(&f, NS_EV_DELETE);
	cr_assert_eq(stats(&f).expired, 1);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	cr_assert_eq(table_live(&f), 0);
	fx_close(&f);
}

/* An unsolicited NA of target from the gateway (mac) to all nodes. */
static void check_announce6(struct rte_mbuf *m,
			    const struct rte_ether_addr *mac,
			    const uint8_t target[16])
{
	struct rte_ipv6_hdr *ip6 =
		rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, 14);
	uint8_t *nd = (uint8_t *)(ip6 + 1);

	cr_assert_eq(rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type,
		     rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6));
	cr_assert_eq(ip6->dst_addr[0], 0xff, "to all nodes");
	cr_assert_eq(ip6->dst_addr[15], 1);
	cr_assert(memcmp(ip6->src_addr, target, 16) == 0, "NA source");
	cr_assert_eq(nd[0], 136);
	cr_assert_eq(nd[4], 0xa0, "router, override");
	cr_assert(memcmp(nd + 8, target, 16) == 0, "target");
	cr_assert(memcmp(nd + 26, mac, 6) == 0, "target link-layer address");
	cr_assert_eq(rte_ipv6_udptcp_cksum(ip6, nd), 0, "ICMPv6 checksum");
}

Test(nat,
     nat66_promotion_forwards_replicated_sessions_marks_ports_and_announces)
{
	struct nsb_frame back, fr;
	struct nsdp_nat_conf c;
	struct nsdp_nat_tx tx;
	struct rte_mbuf *m;
	struct ns_rec r, n;
	unsigned int i, announced = 0;
	struct fx f;

	conf_nat66(&c);
	c.port_min = 1024;
	c.port_max = 1025;
	fx_open_conf(&f, &c, 1024, 1024, 1);
	/* what the subscriber applied: host6:40000 -> remote6:53 as 1024 */
	memset(&r, 0, sizeof(r));
	r.s.version = NS_RECORD_VERSION;
	r.s.family = NS_FAMILY_NAT66;
	r.s.proto = IPPROTO_UDP;
	r.s.event = NS_EV_CREATE;
	r.s.gateway_id = 7;
	r.s.epoch = 3;
	r.s.timeout_ms = UDP_MS;
	r.s.timestamp_ns = f.now - SEC;
	r.s.orig = (struct ns_tuple){0, 0, 40000, 53};
	r.s.xlat = (struct ns_tuple){0, 0, 1024, 53};
	memcpy(r.v6.orig_saddr, host6, 16);
	memcpy(r.v6.orig_daddr, remote6, 16);
	memcpy(r.v6.xlat_saddr, out6, 16);
	memcpy(r.v6.xlat_daddr, remote6, 16);
	cr_assert_eq(nsdp_table_apply(f.table, &r.s), 0);
	cr_assert_eq(with_lcore(&f, 1, EPOCH, &tx), 0, "activate");
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 1);
	/* outside_addr6 announced on the outside, inside_addr6 inside */
	for (i = 0; i < tx.n_outside; i++) {
		m = tx.outside[i];
		if (rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type !=
		    rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6))
			continue;
		if (rte_pktmbuf_mtod_offset(m, uint8_t *, ETH6)[0] != 136)
			continue;
		check_announce6(m, &outside_mac, out6);
		announced++;
	}
	cr_assert_eq(announced, 1, "outside_addr6 announced %u times",
		     announced);
	tx_free(&tx);
	learn_router(&f);
	learn_router6(&f);

	/* the reply finds the replicated session once the host is known */
	fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	send66(&f, 0, &fr, host6, remote6, 64);
	m = take(&f, 1);
	fr.sport = 1024;
	check_v6_exact(m, &fr, out6, remote6, 63);
	rte_pktmbuf_free(m);
	no_record(&f); /* adopted with its timer restarted */
	back = fr_in(IPPROTO_UDP, REMOTE, 53, 0, 1024);
	send66(&f, 1, &back, remote6, out6, 50);
	m = take(&f, 0);
	back.dport = 40000;
	check_v6_exact(m, &back, remote6, host6, 49);
	rte_pktmbuf_free(m);

	/* a new NAT66 session takes the other port */
	fr = fr_out(IPPROTO_UDP, HOST_A, 40001, REMOTE, 53);
	send66(&f, 0, &fr, host6, remote6, 64);
	rte_pktmbuf_free(take(&f, 1));
	n = one_record66(&f, NS_EV_CREATE);
	cr_assert_eq(n.s.xlat.sport, 1025);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 2);
	fx_close(&f);
}

Test(nat, nat66_neighbour_discovery_on_the_outside_answers_learns_and_asks)
{
	static const uint8_t other6[16] = {0x20, 0x01, 0x0d,	0xb8,
					   0,	 1,    [15] = 7};
	static const struct rte_ether_addr router_group = {
		{0x33, 0x33, 0xff, 0, 0, 0xfe}};
	unsigned int i, solicited = 0;
	struct nsdp_nat_conf c;
	struct rte_ipv6_hdr *ip6;
	struct nsdp_nat_tx tx;
	struct nsb_frame fr;
	struct rte_mbuf *m;
	uint8_t buf[256], *nd;
	struct fx f;

	conf_nat66(&c);
	fx_open_conf(&f, &c, 1024, 1024, 1);
	/* promoted, the gateway solicits the router on the outside, from
	 * outside_addr6 */
	cr_assert_eq(with_lcore(&f, 1, EPOCH, &tx), 0, "activate");
	for (i = 0; i < tx.n_outside; i++) {
		m = tx.outside[i];
		ip6 = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, 14);
		nd = (uint8_t *)(ip6 + 1);
		if (rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type !=
			    rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6) ||
		    nd[0] != 135)
			continue;
		check_eth(m, &outside_mac, &router_group);
		cr_assert(memcmp(ip6->src_addr, out6, 16) == 0, "NS source");
		cr_assert(memcmp(nd + 8, router6, 16) == 0, "NS target");
		cr_assert(memcmp(nd + 26, &outside_mac, 6) == 0);
		cr_assert_eq(rte_ipv6_udptcp_cksum(ip6, nd), 0,
			     "ICMPv6 checksum");
		solicited++;
	}
	cr_assert_eq(solicited, 1);
	tx_free(&tx);
	learn_router(&f);
	/* still unknown: the first packet is dropped (the router was asked
	 * for less than 100 ms ago) */
	fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	send66(&f, 0, &fr, host6, remote6, 64);
	cr_assert_eq(stats(&f).neigh_miss, 1);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	one_record66(&f, NS_EV_CREATE); /* created before the next hop */

	/* the router asks for outside_addr6: answered, and learned */
	send_raw_out(&f, buf, nd6_write(135, router6, &router_mac, out6, buf));
	m = take(&f, 1);
	check_eth(m, &outside_mac, &router_mac);
	ip6 = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, 14);
	nd = (uint8_t *)(ip6 + 1);
	cr_assert_eq(nd[0], 136);
	cr_assert_eq(nd[4], 0xe0, "router, solicited, override");
	cr_assert(memcmp(ip6->src_addr, out6, 16) == 0, "NA source");
	cr_assert(memcmp(ip6->dst_addr, router6, 16) == 0, "NA destination");
	cr_assert(memcmp(nd + 8, out6, 16) == 0, "NA target");
	cr_assert(memcmp(nd + 26, &outside_mac, 6) == 0);
	cr_assert_eq(rte_ipv6_udptcp_cksum(ip6, nd), 0, "ICMPv6 checksum");
	rte_pktmbuf_free(m);
	/* a solicitation for another address, or the inside address on the
	 * outside: learned from, not answered */
	send_raw_out(&f, buf,
		     nd6_write(135, router6, &router_mac, other6, buf));
	send_raw_out(&f, buf, nd6_write(135, router6, &router_mac, gw6, buf));
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	cr_assert_eq(stats(&f).nd_ignored, 2);

	/* the retransmission goes, to the router learned from its NS */
	send66(&f, 0, &fr, host6, remote6, 64);
	m = take(&f, 1);
	check_eth(m, &outside_mac, &router_mac);
	rte_pktmbuf_free(m);
	cr_assert_eq(stats(&f).nd_solicits_sent, 1);
	no_record(&f);
	fx_close(&f);
}

enum spoil66 {
	S66_NONE,
	S66_DST_SET, /* the destination becomes addr */
	S66_HOP_1,
	S66_FRAGMENT,
	S66_EXT_HEADER,
	S66_UDP_NO_CKSUM,
	S66_ICMP_TYPE, /* the ICMPv6 type becomes type */
	S66_PAYLOAD_LONG,
	S66_TRUNCATED,
	S66_ETH_DST,
	S66_PROTO_GRE,
};

static const uint8_t mcast6[16] = {0xff, 2, [15] = 1};
static const uint8_t linklocal6[16] = {0xfe, 0x80, [15] = 5};

static const struct {
	const char *what;
	int outside;
	enum spoil66 spoil;
	uint8_t proto;
	const uint8_t *addr;
	uint8_t type;
	size_t counter;
} bad66[] = {
	{"inside: to outside_addr6", 0, S66_DST_SET, IPPROTO_UDP, out6, 0,
	 STAT(to_gateway)},
	{"inside: to a multicast group", 0, S66_DST_SET, IPPROTO_UDP, mcast6, 0,
	 STAT(not_ours)},
	{"inside: to a link-local address", 0, S66_DST_SET, IPPROTO_UDP,
	 linklocal6, 0, STAT(not_ours)},
	{"inside: hop limit 1", 0, S66_HOP_1, IPPROTO_UDP, NULL, 0,
	 STAT(ttl_expired)},
	{"inside: fragment header", 0, S66_FRAGMENT, IPPROTO_UDP, NULL, 0,
	 STAT(fragments)},
	{"inside: routing header", 0, S66_EXT_HEADER, IPPROTO_UDP, NULL, 0,
	 STAT(ip6_ext_headers)},
	{"inside: UDP without checksum", 0, S66_UDP_NO_CKSUM, IPPROTO_UDP, NULL,
	 0, STAT(udp6_zero_checksum)},
	{"inside: echo reply", 0, S66_ICMP_TYPE, IPPROTO_ICMP, NULL, 129,
	 STAT(no_session)},
	{"inside: ICMPv6 error", 0, S66_ICMP_TYPE, IPPROTO_ICMP, NULL, 1,
	 STAT(icmp_unsupported)},
	{"inside: not our MAC address", 0, S66_ETH_DST, IPPROTO_UDP, NULL, 0,
	 STAT(not_ours)},
	{"inside: GRE", 0, S66_PROTO_GRE, IPPROTO_UDP, NULL, 0,
	 STAT(unknown_proto)},
	{"outside: no session", 1, S66_NONE, IPPROTO_UDP, NULL, 0,
	 STAT(no_session)},
	{"outside: to another address", 1, S66_DST_SET, IPPROTO_UDP, router6, 0,
	 STAT(not_ours)},
	{"outside: echo request", 1, S66_ICMP_TYPE, IPPROTO_ICMP, NULL, 128,
	 STAT(no_session)},
	{"outside: ICMPv6 error", 1, S66_ICMP_TYPE, IPPROTO_ICMP, NULL, 1,
	 STAT(icmp_unsupported)},
	{"outside: hop limit 1", 1, S66_HOP_1, IPPROTO_UDP, NULL, 0,
	 STAT(ttl_expired)},
	{"outside: fragment header", 1, S66_FRAGMENT, IPPROTO_UDP, NULL, 0,
	 STAT(fragments)},
	{"outside: routing header", 1, S66_EXT_HEADER, IPPROTO_UDP, NULL, 0,
	 STAT(ip6_ext_headers)},
	{"outside: payload length past the frame", 1, S66_PAYLOAD_LONG,
	 IPPROTO_UDP, NULL, 0, STAT(bad_ip_header)},
	{"outside: truncated header", 1, S66_TRUNCATED, IPPROTO_UDP, NULL, 0,
	 STAT(truncated)},
	{"outside: not our MAC address", 1, S66_ETH_DST, IPPROTO_UDP, NULL, 0,
	 STAT(not_ours)},
};

/* bad66[i]'s frame into buf: a good packet of its direction, spoiled. */
static uint32_t bad66_write(unsigned int i, uint8_t *buf)
{
	struct nsb_frame fr = fr_out(bad66[i].proto, HOST_A, 40000, REMOTE, 53);
	struct rte_ipv6_hdr *ip6 = (void *)(buf + 14);
	uint8_t *l4 = buf + ETH6;
	uint32_t len;

	fr.src = bad66[i].outside ? router_mac : host6_mac;
	fr.dst = bad66[i].outside ? outside_mac : inside_mac;
	if (bad66[i].outside)
		len = frame6_write(&fr, remote6, out6, 64, buf);
	else
		len = frame6_write(&fr, host6, remote6, 64, buf);
	switch (bad66[i].spoil) {
	case S66_NONE:
		break;
	case S66_DST_SET:
		memcpy(ip6->dst_addr, bad66[i].addr, 16);
		break;
	case S66_HOP_1:
		ip6->hop_limits = 1;
		break;
	case S66_FRAGMENT:
		ip6->proto = IPPROTO_FRAGMENT;
		break;
	case S66_EXT_HEADER:
		ip6->proto = IPPROTO_ROUTING;
		break;
	case S66_UDP_NO_CKSUM:
		l4[6] = l4[7] = 0;
		break;
	case S66_ICMP_TYPE:
		l4[0] = bad66[i].type;
		break;
	case S66_PAYLOAD_LONG:
		ip6->payload_len = rte_cpu_to_be_16((uint16_t)(len - ETH6 + 1));
		break;
	case S66_TRUNCATED:
		len = ETH6 - 1;
		break;
	case S66_ETH_DST:
		buf[0] ^= 0x10;
		break;
	case S66_PROTO_GRE:
		ip6->proto = 47;
		break;
	}
	return len;
}

Test(nat, nat66_bad_input_either_way_is_dropped_and_counted_once_each)
{
	struct fx f;
	unsigned int i;

	fx_open66(&f, 1024, 65535);
	for (i = 0; i < sizeof(bad66) / sizeof(bad66[0]); i++) {
		struct nsdp_nat_stats before = stats(&f), after;
		uint8_t buf[2048];
		uint32_t len = bad66_write(i, buf);

		if (bad66[i].outside)
			send_raw_out(&f, buf, len);
		else
			send_raw_in(&f, buf, len);
		after = stats(&f);
		cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0, "%s: sent",
			     bad66[i].what);
		cr_assert_eq(stat_at(&after, bad66[i].counter),
			     stat_at(&before, bad66[i].counter) + 1,
			     "%s: not counted", bad66[i].what);
		cr_assert_eq(after.created, 0, "%s: created", bad66[i].what);
	}
	no_record(&f);
	cr_assert_eq(table_live(&f), 0);
	cr_assert_eq(nsdp_nat_ports_in_use(f.nat), 0);
	fx_close(&f);
}

Test(nat, nat66_standby_drops_outside_ipv6_and_nat66_off_leaves_it_not_ipv4)
{
	struct nsb_frame fr = fr_in(IPPROTO_UDP, REMOTE, 53, 0, 1024);
	struct nsdp_nat_conf c;
	struct fx f;

	conf_nat66(&c);
	fx_open_conf(&f, &c, 1024, 1024, 1);
	send66(&f, 1, &fr, remote6, out6, 64);
	cr_assert_eq(stats(&f).standby_drops, 1);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	fx_close(&f);

	/* NAT64 only: outside IPv6 is nobody's, inside IPv6 outside the
	 * prefix is not ours */
	fx_open64(&f);
	send66(&f, 1, &fr, remote6, out6, 64);
	cr_assert_eq(stats(&f).not_ipv4, 1);
	fr = fr_out(IPPROTO_UDP, HOST_A, 40000, REMOTE, 53);
	send66(&f, 0, &fr, host6, remote6, 64);
	cr_assert_eq(stats(&f).not_ours, 1);
	cr_assert_eq(f.tx.n_inside + f.tx.n_outside, 0);
	no_record(&f);
	fx_close(&f);
}

static void nat66_spoil_no_nat64(struct nsdp_nat_conf *c)
{
	memset(c->inside_addr6, 0, 16);
}

static void nat66_spoil_multicast(struct nsdp_nat_conf *c)
{
	c->outside_addr6[0] = 0xff;
}

static void nat66_spoil_inside(struct nsdp_nat_conf *c)
{
	memcpy(c->outside_addr6, gw6, 16);
}

static void nat66_spoil_prefix(struct nsdp_nat_conf *c)
{
	v6_of(c->outside_addr6, POOL_FIRST);
}

static void nat66_spoil_next_hop(struct nsdp_nat_conf *c)
{
	memcpy(c->next_hop6, out6, 16);
}

static void nat66_spoil_next_hop_alone(struct nsdp_nat_conf *c)
{
	memset(c->outside_addr6, 0, 16);
}

Test(nat, nat66_conf_check_refuses_what_nat66_cannot_run_with)
{
	static const struct {
		void (*spoil)(struct nsdp_nat_conf *c);
		const char *why;
	} cases[] = {
		{nat66_spoil_no_nat64,
		 "outside_addr6 (NAT66) needs inside_addr6 (NAT64) set"},
		{nat66_spoil_multicast,
		 "outside_addr6 is not a global unicast address"},
		{nat66_spoil_inside, "outside_addr6 is inside_addr6"},
		{nat66_spoil_prefix, "outside_addr6 is in the NAT64 prefix"},
		{nat66_spoil_next_hop, "next_hop6 is outside_addr6"},
		{nat66_spoil_next_hop_alone, "next_hop6 without outside_addr6"},
	};
	struct nsdp_nat_conf c;
	char err[128];
	unsigned int i;

	conf_nat66(&c);
	cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		conf_nat66(&c);
		cases[i].spoil(&c);
		cr_assert_eq(nsdp_nat_conf_check(&c, err, sizeof(err)), -EINVAL,
			     "%s: accepted", cases[i].why);
		cr_assert_str_eq(err, cases[i].why);
	}
}
