/*
 * test_ctcommit.c - the kernel conntrack commit: records written into the
 * conntrack table of a network namespace the test creates (k2ct-*), read
 * back over ctnetlink and compared field by field; bad input refused and
 * counted; a natsync-agent standby with [standby] commit = conntrack whose
 * namespace's table equals its session table. Root only.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack_tcp.h>

#include "nsdp_ctcommit.h"
#include "nsdp_time.h"
#include "nst_agents.h"
#include "nst_netns.h"
#include "nst_session.h"
#include "nst_skip.h"
#include "nst_store.h"

#define NS_COMMIT "k2ct-a"
#define NS_BAD "k2ct-b"
#define ALL_STATUS (IPS_SRC_NAT | IPS_SEEN_REPLY | IPS_ASSURED)

/* ---- the namespace and its table ------------------------------------ */

static void netns_fresh(const char *name)
{
	nst_sh("ip netns del %s 2>/dev/null", name);
	cr_assert_eq(nst_sh("ip netns add %s", name), 0);
}

struct ct_dump {
	struct nf_conntrack **ct;
	unsigned int n, cap;
};

static int dump_cb(enum nf_conntrack_msg_type type, struct nf_conntrack *ct,
		   void *arg)
{
	struct ct_dump *d = arg;

	(void)type;
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 1024;
		d->ct = realloc(d->ct, d->cap * sizeof(*d->ct));
		cr_assert(d->ct);
	}
	d->ct[d->n++] = nfct_clone(ct);
	return NFCT_CB_CONTINUE;
}

/* Every entry of family (AF_INET, AF_INET6) of namespace name's conntrack
 * table. */
static struct ct_dump ct_table_of(const char *name, uint32_t family)
{
	struct ct_dump d = {0};
	struct nfct_handle *h;
	int self = nst_netns_visit(name);

	h = nfct_open(CONNTRACK, 0);
	nst_netns_back(self);
	cr_assert(h, "nfct_open in %s", name);
	nfct_callback_register(h, NFCT_T_ALL, dump_cb, &d);
	cr_assert_eq(nfct_query(h, NFCT_Q_DUMP, &family), 0,
		     "conntrack dump of %s", name);
	nfct_close(h);
	return d;
}

static struct ct_dump ct_table(const char *name)
{
	return ct_table_of(name, AF_INET);
}

static void ct_dump_free(struct ct_dump *d)
{
	for (unsigned int i = 0; i < d->n; i++)
		nfct_destroy(d->ct[i]);
	free(d->ct);
	*d = (struct ct_dump){0};
}

/* The entry of d whose original tuple is s's, or NULL. */
static const struct nf_conntrack *ct_find(const struct ct_dump *d,
					  const struct ns_session *s)
{
	for (unsigned int i = 0; i < d->n; i++) {
		const struct nf_conntrack *ct = d->ct[i];

		if (nfct_get_attr_u8(ct, ATTR_L4PROTO) == s->proto &&
		    ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC)) ==
			    s->orig.saddr &&
		    ntohl(nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST)) ==
			    s->orig.daddr &&
		    ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC)) ==
			    s->orig.sport &&
		    ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST)) ==
			    s->orig.dport)
			return ct;
	}
	return NULL;
}

/* The entry of s is in d as a source NAT entry that translates: reply
 * tuple from the destination to the translated address and port, status
 * SRC_NAT|SEEN_REPLY|ASSURED, TCP ESTABLISHED, timeout in [lo, hi] s. */
static void ct_check(const struct ct_dump *d, const struct ns_session *s,
		     uint32_t lo, uint32_t hi)
{
	const struct nf_conntrack *ct = ct_find(d, s);
	uint32_t status, timeout;

	cr_assert(ct, "no entry for proto %u sport %u", s->proto,
		  s->orig.sport);
	cr_assert_eq(ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC)),
		     s->orig.daddr);
	cr_assert_eq(ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_DST)),
		     s->xlat.saddr, "reply goes to the translated address");
	cr_assert_eq(ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC)),
		     s->orig.dport);
	cr_assert_eq(ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_DST)),
		     s->xlat.sport, "reply goes to the translated port");
	status = nfct_get_attr_u32(ct, ATTR_STATUS);
	cr_assert_eq(status & ALL_STATUS, ALL_STATUS, "status %#x", status);
	cr_assert_eq(status & IPS_DST_NAT, 0);
	if (s->proto == IPPROTO_TCP)
		cr_assert_eq(nfct_get_attr_u8(ct, ATTR_TCP_STATE),
			     TCP_CONNTRACK_ESTABLISHED);
	timeout = nfct_get_attr_u32(ct, ATTR_TIMEOUT);
	cr_assert(timeout >= lo && timeout <= hi, "timeout %u not in [%u, %u]",
		  timeout, lo, hi);
}

static struct nsdp_ctcommit *committer(const char *netns, uint32_t batch)
{
	struct nsdp_ctcommit_conf cc = {.batch_bytes = batch};
	char err[256] = "";
	struct nsdp_ctcommit *c;

	snprintf(cc.netns, sizeof(cc.netns), "%s", netns);
	c = nsdp_ctcommit_open(&cc, err, sizeof(err));
	cr_assert(c, "nsdp_ctcommit_open: %s", err);
	return c;
}

/* Flow i of proto: nst_session_flow's tuples, at now with timeout_s. */
static struct ns_session flow(uint8_t proto, uint8_t event, uint32_t i,
			      uint32_t timeout_s, uint64_t now)
{
	struct ns_session s =
		nst_session(proto, event, 1, 1, timeout_s * 1000u, now);

	nst_session_flow(&s, i);
	return s;
}

/* ---- the commit path alone ------------------------------------------ */

#define N_PER_PROTO 1000u

TestSuite(ctcommit, .timeout = 120);

/* The flows of both protocols, N_PER_PROTO each. */
static const uint8_t protos[2] = {IPPROTO_UDP, IPPROTO_TCP};

/* Every step-th flow of both protocols as event with timeout_s, stamped
 * now, added to c; then flushed. */
static void commit_flows(struct nsdp_ctcommit *c, uint8_t event,
			 unsigned int step, uint32_t timeout_s, uint64_t now)
{
	unsigned int i, p;

	for (p = 0; p < 2; p++)
		for (i = 0; i < N_PER_PROTO; i += step) {
			struct ns_session s =
				flow(protos[p], event, i, timeout_s, now);

			cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
		}
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
}

/* NS_COMMIT's conntrack table holds every flow of both protocols, as event
 * with timeout_s stamped now wrote it, with 10 s of its timeout gone at
 * most. */
static void check_flows(uint8_t event, uint32_t timeout_s, uint64_t now)
{
	struct ct_dump d = ct_table(NS_COMMIT);
	unsigned int i, p;

	cr_assert_eq(d.n, 2 * N_PER_PROTO, "%u entries", d.n);
	for (p = 0; p < 2; p++)
		for (i = 0; i < N_PER_PROTO; i++) {
			struct ns_session s =
				flow(protos[p], event, i, timeout_s, now);

			ct_check(&d, &s, timeout_s - 10, timeout_s);
		}
	ct_dump_free(&d);
}

Test(ctcommit, commits_updates_and_deletes_snat_sessions_field_by_field)
{
	struct nsdp_ctcommit_stats st;
	struct nsdp_ctcommit *c;
	struct ct_dump d;
	uint64_t now = nsdp_realtime_ns();
	unsigned int i, p;

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_COMMIT);
	c = committer(NS_COMMIT, NSDP_CTCOMMIT_BATCH_DEFAULT);

	commit_flows(c, NS_EV_CREATE, 1, 120, now);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.committed, 2 * N_PER_PROTO, "committed %" PRIu64,
		     st.committed);
	cr_expect_eq(st.updated + st.deleted + st.errors + st.refused, 0,
		     "last error %d", st.last_error);
	cr_expect_lt(st.sends, 2 * N_PER_PROTO / 100, "batched: %" PRIu64,
		     st.sends);
	check_flows(NS_EV_CREATE, 120, now);

	/* Refreshes: every entry exists, so each is an update with the new
	 * timeout. */
	now = nsdp_realtime_ns();
	commit_flows(c, NS_EV_REFRESH, 1, 600, now);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.committed, 2 * N_PER_PROTO);
	cr_expect_eq(st.updated, 2 * N_PER_PROTO, "updated %" PRIu64,
		     st.updated);
	cr_expect_eq(st.errors, 0, "last error %d", st.last_error);
	check_flows(NS_EV_REFRESH, 600, now);

	/* Deletes of the even flows, then of flows that are not there. */
	now = nsdp_realtime_ns();
	commit_flows(c, NS_EV_DELETE, 2, 600, now);
	for (i = 0; i < 10; i++) {
		struct ns_session s = flow(IPPROTO_UDP, NS_EV_DELETE,
					   N_PER_PROTO + i, 600, now);

		cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	}
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.deleted, N_PER_PROTO + 10, "deleted %" PRIu64,
		     st.deleted);
	cr_expect_eq(st.errors + st.refused, 0);
	d = ct_table(NS_COMMIT);
	cr_assert_eq(d.n, N_PER_PROTO, "%u entries", d.n);
	for (p = 0; p < 2; p++)
		for (i = 0; i < N_PER_PROTO; i++) {
			struct ns_session s =
				flow(protos[p], NS_EV_REFRESH, i, 600, now);

			if (i % 2)
				ct_check(&d, &s, 590, 600);
			else
				cr_assert_null(ct_find(&d, &s));
		}
	ct_dump_free(&d);
	nsdp_ctcommit_close(c);
	nst_sh("ip netns del %s", NS_COMMIT);
}

/* A destination NAT entry, then a source NAT one of the same protocol:
 * the second carries no destination NAT of the first (the committer
 * builds every message of a kind from one reused object). */
Test(ctcommit,
     a_source_nat_entry_after_a_destination_nat_one_is_source_nat_only)
{
	uint64_t now = nsdp_realtime_ns();
	struct ns_session dnat = flow(IPPROTO_UDP, NS_EV_CREATE, 1, 120, now);
	struct ns_session snat = flow(IPPROTO_UDP, NS_EV_CREATE, 2, 120, now);
	struct nsdp_ctcommit *c;
	struct ct_dump d;

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_COMMIT);
	c = committer(NS_COMMIT, NSDP_CTCOMMIT_BATCH_DEFAULT);
	dnat.xlat.saddr = dnat.orig.saddr;
	dnat.xlat.sport = dnat.orig.sport;
	dnat.xlat.daddr = dnat.orig.daddr + 1;
	dnat.xlat.dport = (uint16_t)(dnat.orig.dport + 1);
	cr_assert_eq(nsdp_ctcommit_add(c, &dnat), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &snat), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	d = ct_table(NS_COMMIT);
	cr_assert_eq(d.n, 2, "%u entries", d.n);
	cr_assert(nfct_get_attr_u32(ct_find(&d, &dnat), ATTR_STATUS) &
		  IPS_DST_NAT);
	/* Reply from the original destination, to the translated source;
	 * no IPS_DST_NAT. */
	ct_check(&d, &snat, 110, 120);
	ct_dump_free(&d);
	nsdp_ctcommit_close(c);
}

Test(ctcommit, one_at_a_time_commits_the_same_entries)
{
	struct nsdp_ctcommit_stats st;
	struct nsdp_ctcommit *c;
	struct ct_dump d;
	uint64_t now = nsdp_realtime_ns();
	unsigned int i;

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_COMMIT);
	c = committer(NS_COMMIT, 0);
	for (i = 0; i < 100; i++) {
		struct ns_session s =
			flow(IPPROTO_TCP, NS_EV_CREATE, i, 60, now);

		cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	}
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.committed, 100);
	cr_expect_eq(st.sends, 100, "one message per sendmsg");
	d = ct_table(NS_COMMIT);
	cr_assert_eq(d.n, 100);
	for (i = 0; i < 100; i++) {
		struct ns_session s =
			flow(IPPROTO_TCP, NS_EV_CREATE, i, 60, now);

		ct_check(&d, &s, 50, 60);
	}
	ct_dump_free(&d);
	nsdp_ctcommit_close(c);
	nst_sh("ip netns del %s", NS_COMMIT);
}

Test(ctcommit, refuses_unknown_protocol_expired_and_duplicate_records)
{
	struct nsdp_ctcommit_stats st;
	struct nsdp_ctcommit *c;
	struct ct_dump d;
	uint64_t now = nsdp_realtime_ns();
	struct ns_session good = flow(IPPROTO_UDP, NS_EV_CREATE, 1, 60, now);
	struct ns_session gre = flow(47, NS_EV_CREATE, 2, 60, now);
	struct ns_session zero = flow(IPPROTO_UDP, NS_EV_CREATE, 3, 0, now);
	struct ns_session past = flow(IPPROTO_TCP, NS_EV_CREATE, 4, 30,
				      now - 31ull * 1000000000ull);
	struct ns_session older = good,
			  v2 = flow(IPPROTO_UDP, NS_EV_CREATE, 5, 60, now);

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_BAD);
	c = committer(NS_BAD, NSDP_CTCOMMIT_BATCH_DEFAULT);
	older.timestamp_ns -= 1000;
	older.xlat.sport = 9; /* would translate elsewhere if it went in */
	v2.version = 2;

	cr_assert_eq(nsdp_ctcommit_add(c, &good), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &gre), 1);
	cr_assert_eq(nsdp_ctcommit_add(c, &zero), 1);
	cr_assert_eq(nsdp_ctcommit_add(c, &past), 1);
	cr_assert_eq(nsdp_ctcommit_add(c, &good), 1, "the same record again");
	cr_assert_eq(nsdp_ctcommit_add(c, &older), 1, "an older one");
	cr_assert_eq(nsdp_ctcommit_add(c, &v2), 1);
	cr_assert_eq(nsdp_ctcommit_pending(c), 1);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.committed, 1);
	cr_expect_eq(st.refused, 6);
	cr_expect_eq(st.refused_proto, 2);
	cr_expect_eq(st.refused_expired, 2);
	cr_expect_eq(st.refused_duplicate, 2);
	cr_expect_eq(st.errors + st.updated + st.deleted, 0);

	/* The same record once more, in a later flush: the entry is
	 * restated, not doubled. */
	cr_assert_eq(nsdp_ctcommit_add(c, &good), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.updated, 1);

	d = ct_table(NS_BAD);
	cr_assert_eq(d.n, 1, "%u entries", d.n);
	ct_check(&d, &good, 50, 60);
	ct_dump_free(&d);
	nsdp_ctcommit_close(c);
	nst_sh("ip netns del %s", NS_BAD);
}

Test(ctcommit, a_missing_namespace_is_an_error_at_open)
{
	struct nsdp_ctcommit_conf cc = {.batch_bytes = 65536};
	char err[256] = "";

	nst_need_root("enters namespaces");
	snprintf(cc.netns, sizeof(cc.netns), "k2ct-absent");
	cr_assert_null(nsdp_ctcommit_open(&cc, err, sizeof(err)));
	cr_assert(strstr(err, "/run/netns/k2ct-absent"), "%s", err);
}

Test(ctcommit, commits_icmp_echo_with_the_translated_identifier)
{
	struct nsdp_ctcommit_stats st;
	struct nsdp_ctcommit *c;
	struct ns_session s = nst_session(IPPROTO_ICMP, NS_EV_CREATE, 1, 1,
					  30000, nsdp_realtime_ns());

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_COMMIT);
	c = committer(NS_COMMIT, NSDP_CTCOMMIT_BATCH_DEFAULT);
	nst_session_snat(&s, 0x0a000001, 40000, 0x5db8d822, 0, 0xc6336407,
			 1025);
	cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.committed, 1);
	cr_expect_eq(nst_sh("ip netns exec %s conntrack -L -p icmp 2>/dev/null "
			    "| grep -q 'src=10.0.0.1 dst=93.184.216.34 type=8 "
			    "code=0 id=40000 src=93.184.216.34 "
			    "dst=198.51.100.7 type=0 code=0 id=1025'",
			    NS_COMMIT),
		     0, "the reply carries the translated identifier");
	nsdp_ctcommit_close(c);
	nst_sh("ip netns del %s", NS_COMMIT);
}

/* A NAT66 record of proto, created now with timeout_ms: orig from
 * [os]:osp to [od]:odp, xlat from [xs]:xsp to [xd]:xdp. */
static struct ns_rec rec66(uint8_t proto, uint32_t timeout_ms, const char *os,
			   uint16_t osp, const char *od, uint16_t odp,
			   const char *xs, uint16_t xsp, const char *xd,
			   uint16_t xdp)
{
	struct ns_rec r = {0};

	r.s = nst_session(proto, NS_EV_CREATE, 1, 1, timeout_ms,
			  nsdp_realtime_ns());
	r.s.family = NS_FAMILY_NAT66;
	r.s.orig = (struct ns_tuple){0, 0, osp, odp};
	r.s.xlat = (struct ns_tuple){0, 0, xsp, xdp};
	inet_pton(AF_INET6, os, r.v6.orig_saddr);
	inet_pton(AF_INET6, od, r.v6.orig_daddr);
	inet_pton(AF_INET6, xs, r.v6.xlat_saddr);
	inet_pton(AF_INET6, xd, r.v6.xlat_daddr);
	return r;
}

/* A NAT66 record of proto from [fd00::1]:40000 to [2001:db8::80]:443,
 * translated to [2001:db8:1::7]:1025 (ICMPv6: the echo identifier). */
static struct ns_rec nat66(uint8_t proto)
{
	uint16_t dport = proto == IPPROTO_ICMPV6 ? 0 : 443;

	return rec66(proto, 30000, "fd00::1", 40000, "2001:db8::80", dport,
		     "2001:db8:1::7", 1025, "2001:db8::80", dport);
}

Test(ctcommit, commits_nat66_tcp_udp_and_icmpv6_echo_with_their_translation)
{
	static const uint8_t p6[3] = {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6};
	struct nsdp_ctcommit_stats st;
	struct nsdp_ctcommit *c;
	struct ns_rec r;

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_COMMIT);
	c = committer(NS_COMMIT, NSDP_CTCOMMIT_BATCH_DEFAULT);
	for (int i = 0; i < 3; i++) {
		r = nat66(p6[i]);
		cr_assert_eq(nsdp_ctcommit_add(c, &r.s), 0, "proto %u", p6[i]);
	}
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.committed, 3);
	cr_expect_eq(nst_sh("test $(ip netns exec %s conntrack -L -f ipv6 "
			    "2>/dev/null | grep -c 'src=fd00::1 "
			    "dst=2001:db8::80 .*src=2001:db8::80 "
			    "dst=2001:db8:1::7 .*\\[ASSURED\\]') = 3",
			    NS_COMMIT),
		     0, "all three reply to the translated address");
	cr_expect_eq(nst_sh("ip netns exec %s conntrack -L -f ipv6 "
			    "2>/dev/null | grep -q 'src=fd00::1 "
			    "dst=2001:db8::80 sport=40000 dport=443 "
			    "src=2001:db8::80 dst=2001:db8:1::7 sport=443 "
			    "dport=1025'",
			    NS_COMMIT),
		     0, "the reply carries the translated port");
	cr_expect_eq(nst_sh("ip netns exec %s conntrack -L -f ipv6 -p icmpv6 "
			    "2>/dev/null | grep -q 'src=fd00::1 "
			    "dst=2001:db8::80 type=128 code=0 id=40000 "
			    "src=2001:db8::80 dst=2001:db8:1::7 type=129 "
			    "code=0 id=1025'",
			    NS_COMMIT),
		     0, "the echo reply carries the translated identifier");
	/* A delete of each takes it out again: none left. */
	for (int i = 0; i < 3; i++) {
		r = nat66(p6[i]);
		r.s.event = NS_EV_DELETE;
		r.s.timestamp_ns++;
		cr_assert_eq(nsdp_ctcommit_add(c, &r.s), 0);
	}
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	cr_expect_eq(nst_sh("test $(ip netns exec %s conntrack -L -f ipv6 "
			    "2>/dev/null | grep -c src=) = 0",
			    NS_COMMIT),
		     0, "the deletes removed all three");
	nsdp_ctcommit_close(c);
	nst_sh("ip netns del %s", NS_COMMIT);
}

/* ---- through the standby -------------------------------------------- */

#define SB_PORT 7970
#define NS_LIVE "k2ct-live"
#define NS_COLD "k2ct-cold"
#define SB_FLOWS 2000ul

static void stop_agent(int pid)
{
	kill(pid, SIGTERM);
	for (int i = 0; i < 100 && nst_running(pid); i++)
		nsdp_sleep_ms(100);
	kill(pid, SIGKILL);
}

/* A standby configuration name.ini committing into netns, from the one
 * nst_agents_configure wrote (its last section is [standby]). */
static void standby_ini(const char *name, const char *netns)
{
	char ini[64];

	snprintf(ini, sizeof(ini), "%s.ini", name);
	cr_assert_eq(nst_sh("sed 's#standby.tbl#%s.tbl#' %s >%s && printf "
			    "'commit = conntrack\\ncommit_netns = %s\\n' "
			    ">>%s",
			    name, nst_run_path("standby.ini"),
			    nst_run_path(ini), netns, nst_run_path(ini)),
		     0);
}

/* Dump standby pid's table (SIGUSR1) to file and wait for it. */
static void standby_dump_wait(int pid, const char *file)
{
	const char *path = nst_run_path(file);

	remove(path);
	kill(pid, SIGUSR1);
	for (int i = 0; i < 100 && access(path, R_OK) != 0; i++)
		nsdp_sleep_ms(100);
	cr_assert_eq(access(path, R_OK), 0, "no dump %s", path);
}

static unsigned int ct_count(const char *netns)
{
	struct ct_dump d = ct_table(netns);
	unsigned int n = d.n;

	ct_dump_free(&d);
	return n;
}

/* The IPv6 entry of NAT66 record r is in d (IPv6 entries) and translates:
 * reply tuple from the translated destination to the translated address
 * and port, status SRC_NAT|SEEN_REPLY|ASSURED, timeout in [lo, hi] s. */
static void ct_check66(const struct ct_dump *d, const struct ns_rec *r,
		       uint32_t lo, uint32_t hi)
{
	const struct ns_session *s = &r->s;

	for (unsigned int i = 0; i < d->n; i++) {
		const struct nf_conntrack *ct = d->ct[i];
		uint32_t status = nfct_get_attr_u32(ct, ATTR_STATUS),
			 timeout = nfct_get_attr_u32(ct, ATTR_TIMEOUT);

		if (nfct_get_attr_u8(ct, ATTR_L4PROTO) != s->proto ||
		    memcmp(nfct_get_attr(ct, ATTR_ORIG_IPV6_SRC),
			   r->v6.orig_saddr, 16) ||
		    memcmp(nfct_get_attr(ct, ATTR_ORIG_IPV6_DST),
			   r->v6.orig_daddr, 16) ||
		    ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC)) !=
			    s->orig.sport ||
		    ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST)) !=
			    s->orig.dport)
			continue;
		cr_assert_eq(memcmp(nfct_get_attr(ct, ATTR_REPL_IPV6_SRC),
				    r->v6.xlat_daddr, 16),
			     0);
		cr_assert_eq(memcmp(nfct_get_attr(ct, ATTR_REPL_IPV6_DST),
				    r->v6.xlat_saddr, 16),
			     0, "reply goes to the translated address");
		cr_assert_eq(ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_DST)),
			     s->xlat.sport,
			     "reply goes to the translated port");
		cr_assert_eq(status & ALL_STATUS, ALL_STATUS, "status %#x",
			     status);
		cr_assert(timeout >= lo && timeout <= hi,
			  "timeout %u not in [%u, %u]", timeout, lo, hi);
		return;
	}
	cr_assert_fail("no IPv6 entry for proto %u sport %u", s->proto,
		       s->orig.sport);
}

/* What a standby table file holds, by family. */
struct table_counts {
	unsigned int v4, nat66, nat64;
};

/* The conntrack tables of netns (IPv4 and IPv6) equal the standby table
 * file, entry by entry: as many entries of each family, each one the
 * session's translation; its NAT64 sessions have none (the kernel's
 * conntrack has no NAT64 entry). Returns the file's counts. */
static struct table_counts ct_equals_table(const char *netns, const char *file)
{
	uint8_t rec[NS_RECORD_MAX_LEN];
	struct ct_dump d = ct_table(netns), d6 = ct_table_of(netns, AF_INET6);
	struct table_counts n = {0};
	FILE *f = fopen(nst_run_path(file), "rb");

	cr_assert_not_null(f);
	while (fread(rec, 1, 2, f) == 2) {
		size_t len = ns_record_wire_len(rec[1]);
		struct ns_rec r;

		cr_assert(len > 2 && fread(rec + 2, 1, len - 2, f) == len - 2,
			  "%s: a record cut short", file);
		cr_assert_eq(ns_record_decode_rec(rec, len, &r), (int)len);
		if (r.s.family == NS_FAMILY_NAT64) {
			n.nat64++;
		} else if (r.s.family == NS_FAMILY_NAT66) {
			ct_check66(&d6, &r, 1, r.s.timeout_ms / 1000);
			n.nat66++;
		} else {
			ct_check(&d, &r.s, 1, r.s.timeout_ms / 1000);
			n.v4++;
		}
	}
	fclose(f);
	cr_assert_eq(d.n, n.v4, "%s holds %u IPv4 entries, the standby %u",
		     netns, d.n, n.v4);
	cr_assert_eq(d6.n, n.nat66, "%s holds %u IPv6 entries, the standby %u",
		     netns, d6.n, n.nat66);
	ct_dump_free(&d);
	ct_dump_free(&d6);
	return n;
}

/* Both families' entries in netns's conntrack. */
static unsigned int ct_count_all(const char *netns)
{
	struct ct_dump d = ct_table_of(netns, AF_INET6);
	unsigned int n = d.n + ct_count(netns);

	ct_dump_free(&d);
	return n;
}

/* The store's database 0 swapped with database 1 (SWAPDB: emptied, or
 * given back what it held, without a notification) and the subscriptions
 * cut (CLIENT KILL TYPE pubsub): each standby resubscribes and resyncs
 * from what the store then holds. */
static void store_swap_and_resync(void)
{
	cr_assert_eq(nst_sh("redis-cli -p %d swapdb 0 1 >/dev/null && "
			    "redis-cli -p %d client kill type pubsub "
			    ">/dev/null",
			    SB_PORT, SB_PORT),
		     0);
}

/* Standby pid's table, dumped to file, holds want's counts, and netns's
 * conntrack tables equal it entry by entry. */
static void standby_equals_ct(int pid, const char *netns, const char *file,
			      const struct table_counts *want)
{
	struct table_counts n;

	standby_dump_wait(pid, file);
	n = ct_equals_table(netns, file);
	cr_assert(n.v4 == want->v4 && n.nat66 == want->nat66 &&
			  n.nat64 == want->nat64,
		  "%s: %u IPv4, %u NAT66, %u NAT64 sessions; expected %u, %u, "
		  "%u",
		  file, n.v4, n.nat66, n.nat64, want->v4, want->nat66,
		  want->nat64);
}

/* Wait (10 s at most) until both namespaces hold want entries. */
static void wait_ct_counts(unsigned int want)
{
	for (int i = 0; i < 100 && (ct_count_all(NS_LIVE) != want ||
				    ct_count_all(NS_COLD) != want);
	     i++)
		nsdp_sleep_ms(100);
	cr_assert_eq(ct_count_all(NS_LIVE), want);
	cr_assert_eq(ct_count_all(NS_COLD), want);
}

TestSuite(ctcommit_standby, .timeout = 240);

/* The standbys take IPv6 sessions too: the synthetic source's flows are
 * V6_PCT % IPv6, half NAT66 (committed as IPv6 entries), half NAT64 (no
 * conntrack entry: refused). */
#define V6_PCT 30

/* A live standby and one loaded cold commit the store's sessions of both
 * families into their namespaces; a resync that finds the store empty
 * deletes them all, and the next one, after the store has them back,
 * commits them again. */
/* In both store layouts (one test, its parameter the layout). */
NST_LAYOUTS_TEST(ctcommit_standby, the_namespace_table_equals_the_standby_table)
{
	const struct nst_source_plan plan = {
		.flows = SB_FLOWS, .events = 3 * SB_FLOWS, .rate = 20000};
	struct table_counts live, none = {0};
	unsigned int entries;
	char seeds[64];
	int pid, cold_pid, rc;

	nst_need_root("writes namespaces' conntrack tables");
	netns_fresh(NS_LIVE);
	netns_fresh(NS_COLD);
	nst_run_dir_make(strcmp(l->name, "log") == 0 ? "ctcommit_standby-log"
						     : "ctcommit_standby");
	snprintf(seeds, sizeof(seeds), "127.0.0.1:%d", SB_PORT);
	cr_assert_eq(nst_store_start_fresh(SB_PORT, 0, 0), 0);
	nst_agents_layout(l->name);
	nst_agents_configure(seeds, &plan, 0);
	/* The last sections: the active's [source], the standby's
	 * [standby]. */
	cr_assert_eq(nst_sh("printf 'v6_pct = %d\\n' >>%s && printf "
			    "'table_capacity_v6 = %lu\\n' >>%s",
			    V6_PCT, nst_run_path("active.ini"), SB_FLOWS,
			    nst_run_path("standby.ini")),
		     0);
	standby_ini("live", NS_LIVE);
	standby_ini("cold", NS_COLD);

	/* Live: the standby is synced (empty) before the active runs. */
	pid = nst_agent_spawn("live", "");
	for (int i = 0; i < 300 && !nst_run_file_has("live.log", "synced"); i++)
		nsdp_sleep_ms(100);
	cr_assert(nst_run_file_has("live.log", "standby: synced"), "see %s",
		  nst_run_path("live.log"));
	rc = nst_sh("%s -c %s >%s 2>%s", nst_build("tools/natsync-agent"),
		    nst_run_path("active.ini"), nst_run_path("active.out"),
		    nst_run_path("active.log"));
	cr_assert_eq(rc, 0, "see %s", nst_run_path("active.log"));
	/* The store holds the source's table; the standby has it all once
	 * natsync-verify says so (it dumps the standby, live.tbl). */
	cr_assert_eq(nst_sh("%s -S %s -L %s -s %s -b %s -p %d -t 30 >%s 2>&1",
			    nst_build("tools/natsync-verify"), seeds, l->name,
			    nst_run_path("source.tbl"),
			    nst_run_path("live.tbl"), pid,
			    nst_run_path("verify.out")),
		     0, "see %s", nst_run_path("verify.out"));
	live = ct_equals_table(NS_LIVE, "live.tbl");
	cr_assert_gt(live.v4, SB_FLOWS / 4, "only %u IPv4 sessions", live.v4);
	cr_assert(live.nat66 > 0 && live.nat64 > 0, "IPv6: %u NAT66, %u NAT64",
		  live.nat66, live.nat64);
	entries = live.v4 + live.nat66;

	/* Cold load: a standby started on the filled store. */
	cold_pid = nst_spawn(nst_build("tools/natsync-agent"), "cold", "", 0);
	for (int i = 0; i < 300 && !nst_run_file_has("cold.log", "synced"); i++)
		nsdp_sleep_ms(100);
	cr_assert(nst_run_file_has("cold.log", "standby: synced"), "see %s",
		  nst_run_path("cold.log"));
	standby_equals_ct(cold_pid, NS_COLD, "cold.tbl", &live);

	/* The store emptied: both standbys resync, find nothing, and their
	 * sessions leave conntrack too. */
	store_swap_and_resync();
	wait_ct_counts(0);
	standby_equals_ct(cold_pid, NS_COLD, "cold.tbl", &none);

	/* The store given its sessions back: both standbys resync again and
	 * commit them, IPv4 and IPv6, as the cold load did. */
	store_swap_and_resync();
	wait_ct_counts(entries);
	standby_equals_ct(pid, NS_LIVE, "live.tbl", &live);
	standby_equals_ct(cold_pid, NS_COLD, "cold.tbl", &live);

	stop_agent(pid);
	stop_agent(cold_pid);
	nst_sh("cat %s %s >&2", nst_run_path("live.out"),
	       nst_run_path("cold.out"));
	cr_assert(nst_run_file_has("live.out", " ct_errors=0 "));
	cr_assert(nst_run_file_has("cold.out", " ct_errors=0 "));
	/* Loaded, deleted, loaded again: each entry committed twice and
	 * deleted once; each NAT64 session refused as often. */
	cr_assert_eq(nst_sh("grep -q ' ct_committed=%u ct_updated=0 "
			    "ct_deleted=%u .* ct_refused_proto=%u ' %s",
			    2 * entries, entries, 3 * live.nat64,
			    nst_run_path("cold.out")),
		     0,
		     "the cold standby committed %u twice, deleted them once",
		     entries);
	cr_assert(nst_run_file_has("live.out", " ct_refused_expired=0 "
					       "ct_refused_duplicate=0 "));
	nst_store_stop(SB_PORT);
	nst_sh("ip netns del %s; ip netns del %s", NS_LIVE, NS_COLD);
}

/* ---- a committed entry translates ----------------------------------- */

/*
 *   k2tr-c 10.99.1.2 --- 10.99.1.1 k2tr-g 10.99.2.1 --- 10.99.2.2 k2tr-s
 *   client                 gateway, masquerade out         server
 */
#define TR_CLIENT 0x0a630102u
#define TR_GW_OUT 0x0a630201u
#define TR_SERVER 0x0a630202u

static int udp_socket_in(const char *ns, uint32_t addr, uint16_t port)
{
	return nst_socket_in(ns, SOCK_DGRAM, addr, port);
}

/* Send from client to the server and answer back; the source port the
 * server saw (0: nothing came). Asserts the answer reached the client. */
static uint16_t udp_round_trip(int client, int server)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(7777),
				 .sin_addr.s_addr = htonl(TR_SERVER)};
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	char buf[16];

	cr_assert_eq(sendto(client, "ping", 4, 0, (struct sockaddr *)&to,
			    sizeof(to)),
		     4);
	if (recvfrom(server, buf, sizeof(buf), 0, (struct sockaddr *)&from,
		     &fl) != 4)
		return 0;
	cr_assert_eq(ntohl(from.sin_addr.s_addr), TR_GW_OUT,
		     "masqueraded to the gateway's address");
	cr_assert_eq(sendto(server, "pong", 4, 0, (struct sockaddr *)&from, fl),
		     4);
	fl = sizeof(to);
	cr_assert_eq(recvfrom(client, buf, sizeof(buf), 0,
			      (struct sockaddr *)&to, &fl),
		     4, "the answer came back through the gateway");
	cr_assert_eq(ntohl(to.sin_addr.s_addr), TR_SERVER);
	return ntohs(from.sin_port);
}

static void tr_cleanup(void)
{
	nst_sh("ip netns del k2tr-c 2>/dev/null; ip netns del k2tr-g "
	       "2>/dev/null; ip netns del k2tr-s 2>/dev/null");
}

/* The three namespaces, the gateway masquerading out of k2tr-g1. */
static void tr_rig(void)
{
	tr_cleanup();
	cr_assert_eq(
		nst_sh("set -e; for n in c g s; do ip netns add k2tr-$n; done\n"
		       "ip link add k2tr-c0 netns k2tr-c type veth peer name "
		       "k2tr-g0 netns k2tr-g\n"
		       "ip link add k2tr-g1 netns k2tr-g type veth peer name "
		       "k2tr-s0 netns k2tr-s\n"
		       "ip -n k2tr-c addr add 10.99.1.2/24 dev k2tr-c0\n"
		       "ip -n k2tr-g addr add 10.99.1.1/24 dev k2tr-g0\n"
		       "ip -n k2tr-g addr add 10.99.2.1/24 dev k2tr-g1\n"
		       "ip -n k2tr-s addr add 10.99.2.2/24 dev k2tr-s0\n"
		       "for l in c:c0 g:g0 g:g1 s:s0; do ip -n k2tr-${l%%:*} "
		       "link set k2tr-${l#*:} up; done\n"
		       "ip -n k2tr-c route add default via 10.99.1.1\n"
		       "ip netns exec k2tr-g sysctl -qw net.ipv4.ip_forward=1\n"
		       "ip netns exec k2tr-g nft -f - <<'EOF'\n"
		       "table ip nat {\n"
		       " chain post { type nat hook postrouting priority 100; "
		       "oifname \"k2tr-g1\" masquerade; }\n"
		       "}\nEOF\n"),
		0);
}

/* IPv6 beside the rig's IPv4: client fd99:1::2, gateway fd99:1::1 and
 * fd99:2::1 (ip6 masquerade out of k2tr-g1), server fd99:2::2, which routes
 * the client's network back through the gateway (for destination NAT). */
#define TR6_CLIENT "fd99:1::2"
#define TR6_GW_IN "fd99:1::1"
#define TR6_GW_OUT "fd99:2::1"
#define TR6_SERVER "fd99:2::2"

static void tr_rig6(void)
{
	cr_assert_eq(
		nst_sh("set -e\n"
		       "ip -n k2tr-c addr add " TR6_CLIENT "/64 dev k2tr-c0 "
		       "nodad\n"
		       "ip -n k2tr-g addr add " TR6_GW_IN "/64 dev k2tr-g0 "
		       "nodad\n"
		       "ip -n k2tr-g addr add " TR6_GW_OUT "/64 dev k2tr-g1 "
		       "nodad\n"
		       "ip -n k2tr-s addr add " TR6_SERVER "/64 dev k2tr-s0 "
		       "nodad\n"
		       "ip -n k2tr-c route add default via " TR6_GW_IN "\n"
		       "ip -n k2tr-s route add fd99:1::/64 via " TR6_GW_OUT "\n"
		       "ip netns exec k2tr-g sysctl -qw "
		       "net.ipv6.conf.all.forwarding=1\n"
		       "ip netns exec k2tr-g nft -f - <<'EOF'\n"
		       "table ip6 nat {\n"
		       " chain post { type nat hook postrouting priority 100; "
		       "oifname \"k2tr-g1\" masquerade; }\n"
		       "}\nEOF\n"),
		0, "cannot add IPv6 to the rig");
}

/* A UDP socket bound to [addr]:port in namespace ns, reads timing out
 * after 1 s. */
static int udp6_socket_in(const char *ns, const char *addr, uint16_t port)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6,
				  .sin6_port = htons(port)};
	struct timeval tv = {.tv_sec = 1};
	int self = nst_netns_visit(ns);
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	nst_netns_back(self);
	cr_assert_eq(inet_pton(AF_INET6, addr, &sa.sin6_addr), 1);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		  "cannot bind [%s]:%u in %s", addr, port, ns);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* A datagram from socket `from` to [addr]:port, received on socket `to`:
 * the port it came from there (0: nothing came), its address in src. */
static uint16_t udp6_pass(int from, int to, const char *addr, uint16_t port,
			  char src[INET6_ADDRSTRLEN])
{
	struct sockaddr_in6 dst = {.sin6_family = AF_INET6,
				   .sin6_port = htons(port)};
	struct sockaddr_in6 got;
	socklen_t gl = sizeof(got);
	char buf[16];

	cr_assert_eq(inet_pton(AF_INET6, addr, &dst.sin6_addr), 1);
	cr_assert_eq(sendto(from, "ping", 4, 0, (struct sockaddr *)&dst,
			    sizeof(dst)),
		     4);
	if (recvfrom(to, buf, sizeof(buf), 0, (struct sockaddr *)&got, &gl) !=
	    4)
		return 0;
	inet_ntop(AF_INET6, &got.sin6_addr, src, INET6_ADDRSTRLEN);
	return ntohs(got.sin6_port);
}

/* The IPv6 entry of d whose original source port is sport, or NULL. */
static const struct nf_conntrack *ct_find6(const struct ct_dump *d,
					   uint16_t sport)
{
	for (unsigned int i = 0; i < d->n; i++)
		if (nfct_get_attr_u8(d->ct[i], ATTR_L3PROTO) == AF_INET6 &&
		    ntohs(nfct_get_attr_u16(d->ct[i], ATTR_ORIG_PORT_SRC)) ==
			    sport)
			return d->ct[i];
	return NULL;
}

/* udp6_pass from client to the server's 7777 and the server's answer
 * back, which must come from the server: the port the server saw. */
static uint16_t udp6_round_trip(int client, int server)
{
	char src[INET6_ADDRSTRLEN], back[INET6_ADDRSTRLEN];
	uint16_t port = udp6_pass(client, server, TR6_SERVER, 7777, src);

	if (port == 0)
		return 0;
	cr_assert_str_eq(src, TR6_GW_OUT, "masqueraded to the gateway");
	cr_assert_eq(udp6_pass(server, client, TR6_GW_OUT, port, back), 7777,
		     "the answer came back through the gateway");
	cr_assert_str_eq(back, TR6_SERVER);
	return port;
}

Test(ctcommit, a_committed_udp_entry_translates_to_its_committed_port,
     .fini = tr_cleanup)
{
	struct ns_session s = nst_session(IPPROTO_UDP, NS_EV_CREATE, 1, 1,
					  60000, nsdp_realtime_ns());
	struct nsdp_ctcommit *c;
	int client, other, server;

	nst_need_root("builds namespaces with nftables masquerade");
	tr_rig();
	/* Masquerade keeps a free source port: 40123 can only come from the
	 * committed entry. */
	nst_session_snat(&s, TR_CLIENT, 5555, TR_SERVER, 7777, TR_GW_OUT,
			 40123);
	c = committer("k2tr-g", NSDP_CTCOMMIT_BATCH_DEFAULT);
	cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_close(c);

	server = udp_socket_in("k2tr-s", TR_SERVER, 7777);
	client = udp_socket_in("k2tr-c", TR_CLIENT, 5555);
	other = udp_socket_in("k2tr-c", TR_CLIENT, 5556);
	cr_assert_eq(udp_round_trip(client, server), 40123,
		     "the committed translation is used");
	cr_assert_eq(udp_round_trip(client, server), 40123);
	/* The control: a flow nobody committed keeps its own port. */
	cr_assert_eq(udp_round_trip(other, server), 5556);
	close(client);
	close(other);
	close(server);
}

/* Destination NAT (port forwarding, nftables `dnat to`): an entry
 * committed for the client's flow to the gateway's own 10.99.1.1:8080,
 * translated to the server's 7777, forwards it there although the gateway
 * has no dnat rule, unchanged in its source, and the answer comes back
 * from 10.99.1.1:8080; the entry is a DST_NAT one whose reply tuple comes
 * from the server. A flow nobody committed reaches no server. */
#define TR_GW_IN 0x0a630101u

static ssize_t udp_send_to(int fd, uint32_t addr, uint16_t port)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(addr)};

	return sendto(fd, "ping", 4, 0, (struct sockaddr *)&to, sizeof(to));
}

/* The same for IPv6 (`dnat ip6 to`): a NAT66 record from the client to
 * [fd99:1::1]:8080 translated to [fd99:2::2]:7777. */
static void dnat6_forwards(void)
{
	struct ns_rec r = rec66(IPPROTO_UDP, 60000, TR6_CLIENT, 5555, TR6_GW_IN,
				8080, TR6_CLIENT, 5555, TR6_SERVER, 7777);
	char src[INET6_ADDRSTRLEN], addr[INET6_ADDRSTRLEN];
	const struct nf_conntrack *ct;
	struct nsdp_ctcommit *c;
	int client, other, server;
	struct ct_dump d;
	uint32_t status;

	tr_rig6();
	c = committer("k2tr-g", NSDP_CTCOMMIT_BATCH_DEFAULT);
	cr_assert_eq(nsdp_ctcommit_add(c, &r.s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_close(c);

	d = ct_table_of("k2tr-g", AF_INET6);
	cr_assert_eq(d.n, 1, "%u IPv6 entries", d.n);
	ct = ct_find6(&d, 5555);
	cr_assert(ct, "no entry for the forwarded IPv6 flow");
	inet_ntop(AF_INET6, nfct_get_attr(ct, ATTR_REPL_IPV6_SRC), addr,
		  sizeof(addr));
	cr_assert_str_eq(addr, TR6_SERVER, "the reply comes from the server");
	cr_assert_eq(ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC)), 7777);
	inet_ntop(AF_INET6, nfct_get_attr(ct, ATTR_REPL_IPV6_DST), addr,
		  sizeof(addr));
	cr_assert_str_eq(addr, TR6_CLIENT);
	status = nfct_get_attr_u32(ct, ATTR_STATUS);
	cr_assert(status & IPS_DST_NAT, "status %#x", status);
	cr_assert_eq(status & IPS_SRC_NAT, 0, "status %#x", status);
	ct_dump_free(&d);

	server = udp6_socket_in("k2tr-s", TR6_SERVER, 7777);
	client = udp6_socket_in("k2tr-c", TR6_CLIENT, 5555);
	other = udp6_socket_in("k2tr-c", TR6_CLIENT, 5556);
	cr_assert_eq(udp6_pass(client, server, TR6_GW_IN, 8080, src), 5555,
		     "the forwarded IPv6 flow reached the server unchanged");
	cr_assert_str_eq(src, TR6_CLIENT);
	cr_assert_eq(udp6_pass(server, client, TR6_CLIENT, 5555, src), 8080,
		     "the answer comes back from the forwarded port");
	cr_assert_str_eq(src, TR6_GW_IN);
	cr_assert_eq(udp6_pass(other, server, TR6_GW_IN, 8080, src), 0,
		     "an IPv6 flow nobody committed was forwarded");
	close(client);
	close(other);
	close(server);
}

Test(ctcommit, a_committed_dnat_entry_forwards_to_its_committed_server,
     .fini = tr_cleanup)
{
	struct ns_session s = nst_session(IPPROTO_UDP, NS_EV_CREATE, 1, 1,
					  60000, nsdp_realtime_ns());
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	const struct nf_conntrack *ct;
	struct nsdp_ctcommit *c;
	int client, other, server;
	struct ct_dump d;
	uint32_t status;
	char buf[16];

	nst_need_root("builds namespaces with nftables");
	tr_rig();
	cr_assert_eq(nst_sh("ip -n k2tr-s route add 10.99.1.0/24 via "
			    "10.99.2.1"),
		     0);
	s.orig = (struct ns_tuple){TR_CLIENT, TR_GW_IN, 5555, 8080};
	s.xlat = (struct ns_tuple){TR_CLIENT, TR_SERVER, 5555, 7777};
	c = committer("k2tr-g", NSDP_CTCOMMIT_BATCH_DEFAULT);
	cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_close(c);

	d = ct_table("k2tr-g");
	ct = ct_find(&d, &s);
	cr_assert(ct, "no entry for the forwarded flow");
	cr_assert_eq(ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC)),
		     TR_SERVER, "the reply comes from the server");
	cr_assert_eq(ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC)), 7777);
	cr_assert_eq(ntohl(nfct_get_attr_u32(ct, ATTR_REPL_IPV4_DST)),
		     TR_CLIENT);
	cr_assert_eq(ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_DST)), 5555);
	status = nfct_get_attr_u32(ct, ATTR_STATUS);
	cr_assert(status & IPS_DST_NAT, "status %#x", status);
	cr_assert_eq(status & IPS_SRC_NAT, 0, "status %#x", status);
	ct_dump_free(&d);

	server = udp_socket_in("k2tr-s", TR_SERVER, 7777);
	client = udp_socket_in("k2tr-c", TR_CLIENT, 5555);
	other = udp_socket_in("k2tr-c", TR_CLIENT, 5556);
	cr_assert_eq(udp_send_to(client, TR_GW_IN, 8080), 4);
	cr_assert_eq(recvfrom(server, buf, sizeof(buf), 0,
			      (struct sockaddr *)&from, &fl),
		     4, "the forwarded flow reached the server");
	cr_assert_eq(ntohl(from.sin_addr.s_addr), TR_CLIENT);
	cr_assert_eq(ntohs(from.sin_port), 5555);
	cr_assert_eq(sendto(server, "pong", 4, 0, (struct sockaddr *)&from, fl),
		     4);
	fl = sizeof(from);
	cr_assert_eq(recvfrom(client, buf, sizeof(buf), 0,
			      (struct sockaddr *)&from, &fl),
		     4, "the answer came back through the gateway");
	cr_assert_eq(ntohl(from.sin_addr.s_addr), TR_GW_IN);
	cr_assert_eq(ntohs(from.sin_port), 8080);
	/* The control: no entry, no forwarding. */
	cr_assert_eq(udp_send_to(other, TR_GW_IN, 8080), 4);
	cr_assert_lt(recvfrom(server, buf, sizeof(buf), 0, NULL, NULL), 0,
		     "a flow nobody committed was forwarded");
	close(client);
	close(other);
	close(server);
	dnat6_forwards();
}

/* Conntrack zones: the gateway puts every packet in zone 5 (`ct zone set
 * 5` before conntrack); a flow committed into zone 5 translates to its
 * committed port, and the entry is in zone 5; the same kind of flow
 * committed into the default zone is not found by the zone's packets and
 * keeps its own port. The same for IPv6 beside it (NAT66 records, the ip6
 * table's packets in zone 5 too). */
Test(ctcommit, a_committed_entry_translates_in_its_zone, .fini = tr_cleanup)
{
	struct ns_session s = nst_session(IPPROTO_UDP, NS_EV_CREATE, 1, 1,
					  60000, nsdp_realtime_ns());
	struct ns_session t = s;
	struct ns_rec s6 =
		rec66(IPPROTO_UDP, 60000, TR6_CLIENT, 5555, TR6_SERVER, 7777,
		      TR6_GW_OUT, 40125, TR6_SERVER, 7777);
	struct ns_rec t6 =
		rec66(IPPROTO_UDP, 60000, TR6_CLIENT, 5556, TR6_SERVER, 7777,
		      TR6_GW_OUT, 40126, TR6_SERVER, 7777);
	struct nsdp_ctcommit_conf cc = {.batch_bytes = 0, .zone = 5};
	const struct nf_conntrack *ct;
	struct nsdp_ctcommit *c;
	int client, other, server;
	char err[256] = "";
	struct ct_dump d;

	nst_need_root("builds namespaces with nftables");
	tr_rig();
	tr_rig6();
	cr_assert_eq(nst_sh("set -e; for f in ip ip6; do ip netns exec k2tr-g "
			    "nft add table $f k2zone; ip netns exec k2tr-g nft "
			    "add chain $f k2zone pre '{ type filter hook "
			    "prerouting priority -300; }'; ip netns exec "
			    "k2tr-g nft add rule $f k2zone pre ct zone set 5; "
			    "done"),
		     0);
	nst_session_snat(&s, TR_CLIENT, 5555, TR_SERVER, 7777, TR_GW_OUT,
			 40123);
	nst_session_snat(&t, TR_CLIENT, 5556, TR_SERVER, 7777, TR_GW_OUT,
			 40124);
	snprintf(cc.netns, sizeof(cc.netns), "k2tr-g");
	c = nsdp_ctcommit_open(&cc, err, sizeof(err));
	cr_assert(c, "%s", err);
	cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &s6.s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_close(c);
	c = committer("k2tr-g", NSDP_CTCOMMIT_BATCH_DEFAULT);
	cr_assert_eq(nsdp_ctcommit_add(c, &t), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &t6.s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_close(c);

	d = ct_table("k2tr-g");
	ct = ct_find(&d, &s);
	cr_assert(ct, "no entry of the zone's flow");
	cr_assert_eq(nfct_get_attr_u16(ct, ATTR_ZONE), 5);
	ct = ct_find(&d, &t);
	cr_assert(ct, "no entry of the default zone's flow");
	cr_assert_eq(nfct_get_attr_u16(ct, ATTR_ZONE), 0);
	ct_dump_free(&d);
	d = ct_table_of("k2tr-g", AF_INET6);
	cr_assert_eq(d.n, 2, "%u IPv6 entries", d.n);
	ct = ct_find6(&d, 5555);
	cr_assert(ct, "no entry of the zone's IPv6 flow");
	cr_assert_eq(nfct_get_attr_u16(ct, ATTR_ZONE), 5);
	ct = ct_find6(&d, 5556);
	cr_assert(ct, "no entry of the default zone's IPv6 flow");
	cr_assert_eq(nfct_get_attr_u16(ct, ATTR_ZONE), 0);
	ct_dump_free(&d);

	server = udp_socket_in("k2tr-s", TR_SERVER, 7777);
	client = udp_socket_in("k2tr-c", TR_CLIENT, 5555);
	other = udp_socket_in("k2tr-c", TR_CLIENT, 5556);
	cr_assert_eq(udp_round_trip(client, server), 40123,
		     "the entry committed into zone 5 translates there");
	cr_assert_eq(udp_round_trip(other, server), 5556,
		     "an entry of the default zone is not zone 5's");
	close(client);
	close(other);
	close(server);
	server = udp6_socket_in("k2tr-s", TR6_SERVER, 7777);
	client = udp6_socket_in("k2tr-c", TR6_CLIENT, 5555);
	other = udp6_socket_in("k2tr-c", TR6_CLIENT, 5556);
	cr_assert_eq(udp6_round_trip(client, server), 40125,
		     "the IPv6 entry committed into zone 5 translates there");
	cr_assert_eq(udp6_round_trip(other, server), 5556,
		     "an IPv6 entry of the default zone is not zone 5's");
	close(client);
	close(other);
	close(server);
}

Test(ctcommit_standby, a_missing_commit_namespace_stops_the_agent_with_2)
{
	int rc;

	nst_need_root("enters namespaces");
	nst_run_dir_make("ctcommit_nons");
	nst_write_file(nst_run_path("standby.ini"),
		       "[agent]\nrole = standby\n"
		       "eal_args = --no-huge --no-shconf -m 128 --no-pci "
		       "--no-telemetry -l 0\n"
		       "[store]\nseeds = 127.0.0.1:7979\n"
		       "[standby]\ntable_capacity = 4096\ncommit = conntrack\n"
		       "commit_netns = k2ct-absent\n");
	rc = nst_sh("%s -c %s >%s 2>%s", nst_build("tools/natsync-agent"),
		    nst_run_path("standby.ini"), nst_run_path("standby.out"),
		    nst_run_path("standby.log"));
	cr_assert_eq(rc, 2, "exit status %d", rc);
	cr_assert(nst_run_file_has(
		"standby.log", "commit = conntrack: /run/netns/k2ct-absent"));
}

Test(ctcommit, a_newer_flow_evicts_the_entry_holding_its_translation)
{
	struct nsdp_ctcommit_stats st;
	struct nsdp_ctcommit *c;
	struct ct_dump d;
	uint64_t now = nsdp_realtime_ns();
	struct ns_session old = flow(IPPROTO_TCP, NS_EV_CREATE, 1, 60, now);
	struct ns_session fresh =
		flow(IPPROTO_TCP, NS_EV_CREATE, 2, 60, now + 1000);
	struct ns_session refresh =
		flow(IPPROTO_UDP, NS_EV_REFRESH, 3, 60, now);
	struct ns_session taker =
		flow(IPPROTO_UDP, NS_EV_REFRESH, 4, 60, now + 1000);

	nst_need_root("writes a namespace's conntrack table");
	netns_fresh(NS_COMMIT);
	c = committer(NS_COMMIT, NSDP_CTCOMMIT_BATCH_DEFAULT);
	/* The active gave old's and refresh's translations to other flows
	 * (their deletes were missed): a create and a refresh take them. */
	fresh.orig.daddr = old.orig.daddr;
	fresh.xlat = old.xlat;
	taker.orig.daddr = refresh.orig.daddr;
	taker.xlat = refresh.xlat;
	cr_assert_eq(nsdp_ctcommit_add(c, &old), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &refresh), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &fresh), 0);
	cr_assert_eq(nsdp_ctcommit_add(c, &taker), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_stats(c, &st);
	cr_expect_eq(st.evicted, 2, "evicted %" PRIu64, st.evicted);
	cr_expect_eq(st.committed, 4, "committed %" PRIu64, st.committed);
	cr_expect_eq(st.errors, 0, "last error %d", st.last_error);
	d = ct_table(NS_COMMIT);
	cr_assert_eq(d.n, 2, "%u entries", d.n);
	ct_check(&d, &fresh, 50, 60);
	ct_check(&d, &taker, 50, 60);
	ct_dump_free(&d);
	nsdp_ctcommit_close(c);
	nst_sh("ip netns del %s", NS_COMMIT);
}

/* A TCP connection from the client's port to the server through the
 * gateway; *server_side is the accepted end, *xport the translated port
 * the server saw. Returns the client's end. */
static int tcp_connect_through(int listener, uint16_t port, int *server_side,
			       uint16_t *xport)
{
	uint32_t xaddr;
	int client = nst_tcp_connect("k2tr-c", TR_CLIENT, port, TR_SERVER, 7780,
				     listener, server_side, &xaddr, xport);

	cr_assert_eq(xaddr, TR_GW_OUT);
	return client;
}

/* The server speaks first: 1 when the client got it, 0 when not. */
static int tcp_server_first(int server_side, int client)
{
	char buf[16];

	if (send(server_side, "hello", 5, MSG_NOSIGNAL) != 5)
		return 0;
	return recv(client, buf, sizeof(buf), 0) == 5;
}

Test(ctcommit, a_committed_tcp_entry_carries_a_connection_the_server_resumes,
     .fini = tr_cleanup)
{
	struct ns_session s = nst_session(IPPROTO_TCP, NS_EV_CREATE, 1, 1,
					  300000, nsdp_realtime_ns());
	int listener, kept_c, kept_s, lost_c, lost_s;
	uint16_t kept_x, lost_x;
	struct nsdp_ctcommit *c;
	char buf[16];

	nst_need_root("builds namespaces with nftables masquerade");
	tr_rig();
	listener = nst_socket_in("k2tr-s", SOCK_STREAM, TR_SERVER, 7780);
	cr_assert_eq(listen(listener, 4), 0);
	kept_c = tcp_connect_through(listener, 5600, &kept_s, &kept_x);
	lost_c = tcp_connect_through(listener, 5601, &lost_s, &lost_x);
	cr_assert(tcp_server_first(kept_s, kept_c));
	cr_assert(tcp_server_first(lost_s, lost_c));

	/* The gateway forgets both (what a takeover by a gateway without
	 * them looks like), and only the first is committed back. */
	cr_assert_eq(nst_sh("ip netns exec k2tr-g conntrack -F 2>/dev/null"),
		     0);
	nst_session_snat(&s, TR_CLIENT, 5600, TR_SERVER, 7780, TR_GW_OUT,
			 kept_x);
	c = committer("k2tr-g", NSDP_CTCOMMIT_BATCH_DEFAULT);
	cr_assert_eq(nsdp_ctcommit_add(c, &s), 0);
	cr_assert_eq(nsdp_ctcommit_flush(c), 0);
	nsdp_ctcommit_close(c);

	cr_assert(tcp_server_first(kept_s, kept_c),
		  "the server's first segment after the takeover arrives");
	cr_assert_eq(send(kept_c, "again", 5, MSG_NOSIGNAL), 5);
	cr_assert_eq(recv(kept_s, buf, sizeof(buf), 0), 5,
		     "and the client's next one");
	/* The control: without its entry, the server's segment dies at the
	 * gateway, so this test can fail. */
	cr_assert_not(tcp_server_first(lost_s, lost_c),
		      "an uncommitted connection must not survive");
	close(kept_c);
	close(kept_s);
	close(lost_c);
	close(lost_s);
	close(listener);
}
