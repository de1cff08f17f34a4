/*
 * test_ksrc.c - the kernel session source, through the real programs: a
 * Linux kernel NAT gateway in a network namespace, natsync-agent with
 * [source] type = kernel capturing its conntrack entries with BPF, a
 * 3-master Redis Cluster and a standby natsync-agent; natsync-verify
 * compares the gateway's conntrack table (dumped over ctnetlink) with the
 * store and the standby's table, entry by entry.
 *
 *   netns k1ks-c 10.71.0.2 --veth-- 10.71.0.1 netns k1ks-g 198.51.100.1
 *   --veth-- 198.51.100.2 netns k1ks-s
 *
 * k1ks-g forwards and masquerades (nftables) what leaves towards k1ks-s.
 * The client and server run in threads of this process that entered
 * their namespaces (setns). Root is needed.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nsdp_time.h"
#include "nst_agents.h"
#include "nst_netns.h"
#include "nst_skip.h"
#include "nst_store.h"

#define STORE_PORT 7950
#define SEEDS "127.0.0.1:7950,127.0.0.1:7951,127.0.0.1:7952"
#define SERVER_ADDR "198.51.100.2"
/* Flow i of a protocol goes from client port FIRST_PORT + i % PORT_SPAN
 * to server port UDP_PORT (TCP_PORT) + i / PORT_SPAN, so no two flows
 * share a tuple (an ephemeral port drawn twice would make one entry of
 * two). */
#define UDP_PORT 9000
#define TCP_PORT 9010
#define SERVER_PORTS 5
#define FIRST_PORT 10000
#define PORT_SPAN 50000
/* Flows per protocol; NATSYNC_KSRC_FLOWS sets another count for a capture
 * measurement (docs/kernel-gateways.md). */
#define DEFAULT_FLOWS 1000
#define MAX_FLOWS (SERVER_PORTS * PORT_SPAN)

static unsigned int n_flows = DEFAULT_FLOWS;

static struct {
	int stop, server_ready;
	uint64_t udp_received, tcp_accepted;
	uint64_t udp_sent, tcp_connected, client_errors;
} rig;

#define LOAD(f) __atomic_load_n(&rig.f, __ATOMIC_ACQUIRE)
#define ADD(f, v) __atomic_add_fetch(&rig.f, (v), __ATOMIC_RELEASE)

static void net_teardown(void)
{
	nst_sh("for n in k1ks-c k1ks-g k1ks-s; do ip netns del $n "
	       "2>/dev/null; done; true");
}

static void net_setup(void)
{
	int rc;

	net_teardown();
	rc = nst_sh(
		"set -e\n"
		"for n in k1ks-c k1ks-g k1ks-s; do ip netns add $n; "
		"ip -n $n link set lo up; done\n"
		"ip link add k1ksc0 netns k1ks-c type veth peer name k1ksg0 "
		"netns k1ks-g\n"
		"ip link add k1ksg1 netns k1ks-g type veth peer name k1kss0 "
		"netns k1ks-s\n"
		"ip -n k1ks-c link set k1ksc0 up\n"
		"ip -n k1ks-g link set k1ksg0 up\n"
		"ip -n k1ks-g link set k1ksg1 up\n"
		"ip -n k1ks-s link set k1kss0 up\n"
		"ip -n k1ks-c addr add 10.71.0.2/24 dev k1ksc0\n"
		"ip -n k1ks-c route add default via 10.71.0.1\n"
		"ip -n k1ks-g addr add 10.71.0.1/24 dev k1ksg0\n"
		"ip -n k1ks-g addr add 198.51.100.1/24 dev k1ksg1\n"
		"ip -n k1ks-s addr add " SERVER_ADDR "/24 dev k1kss0\n"
		"ip netns exec k1ks-g sysctl -qw net.ipv4.ip_forward=1\n"
		"ip netns exec k1ks-g nft add table ip k1nat\n"
		"ip netns exec k1ks-g nft add chain ip k1nat post "
		"'{ type nat hook postrouting priority 100 ; }'\n"
		"ip netns exec k1ks-g nft add rule ip k1nat post oifname "
		"k1ksg1 masquerade\n"
		/* UDP flows carry conntrack mark 7, for the filter test. */
		"ip netns exec k1ks-g nft add chain ip k1nat markudp "
		"'{ type filter hook forward priority 0 ; }'\n"
		"ip netns exec k1ks-g nft add rule ip k1nat markudp udp dport "
		"9000-9004 ct mark set 7\n"
		/* Unanswered UDP entries would expire (30 s) while the test
		 * still compares. */
		"ip netns exec k1ks-g sysctl -qw "
		"net.netfilter.nf_conntrack_udp_timeout=600\n");
	cr_assert_eq(rc, 0, "cannot build the test network");
}

static int bound_socket(int type, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	int one = 1, fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Counts datagrams and accepts (and closes) connections until stopped. */
static void *server_main(void *arg)
{
	struct pollfd p[2 * SERVER_PORTS];

	(void)arg;
	nst_enter_netns("k1ks-s");
	for (int i = 0; i < SERVER_PORTS; i++) {
		int u = bound_socket(SOCK_DGRAM, UDP_PORT + i);
		int t = bound_socket(SOCK_STREAM, TCP_PORT + i);
		int rcvbuf = 4 << 20;

		if (u < 0 || t < 0 || listen(t, 4096) != 0)
			abort();
		setsockopt(u, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
			   sizeof(rcvbuf));
		p[2 * i] = (struct pollfd){u, POLLIN, 0};
		p[2 * i + 1] = (struct pollfd){t, POLLIN, 0};
	}
	ADD(server_ready, 1);
	while (!LOAD(stop)) {
		char buf[64];
		int c;

		if (poll(p, 2 * SERVER_PORTS, 50) <= 0)
			continue;
		for (int i = 0; i < 2 * SERVER_PORTS; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			if (i % 2 == 0) {
				while (recv(p[i].fd, buf, sizeof(buf),
					    MSG_DONTWAIT) > 0)
					ADD(udp_received, 1);
			} else if ((c = accept(p[i].fd, NULL, NULL)) >= 0) {
				ADD(tcp_accepted, 1);
				close(c);
			}
		}
	}
	for (int i = 0; i < 2 * SERVER_PORTS; i++)
		close(p[i].fd);
	return NULL;
}

/* A new UDP flow and a new TCP connection (closed at once) per step, as
 * fast as one thread makes them. */
static void *client_main(void *arg)
{
	struct sockaddr_in to = {.sin_family = AF_INET};

	(void)arg;
	nst_enter_netns("k1ks-c");
	inet_pton(AF_INET, SERVER_ADDR, &to.sin_addr);
	for (unsigned int i = 0; i < n_flows; i++) {
		uint16_t sport = (uint16_t)(FIRST_PORT + i % PORT_SPAN);
		uint16_t dport_off = (uint16_t)(i / PORT_SPAN);
		int fd;

		to.sin_port = htons(UDP_PORT + dport_off);
		fd = bound_socket(SOCK_DGRAM, sport);
		if (fd >= 0 && sendto(fd, "k1", 2, 0, (struct sockaddr *)&to,
				      sizeof(to)) == 2)
			ADD(udp_sent, 1);
		else
			ADD(client_errors, 1);
		if (fd >= 0)
			close(fd);

		to.sin_port = htons(TCP_PORT + dport_off);
		fd = bound_socket(SOCK_STREAM, sport);
		if (fd >= 0 &&
		    connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0)
			ADD(tcp_connected, 1);
		else
			ADD(client_errors, 1);
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/* The agents' and natsync-verify's [store] layout (schema/FORMAT.md):
 * the environment's (nst_layout_one) unless a test sets it. */
NST_LAYOUT_VAR(layout)

static void write_configs(unsigned int ringbuf_bytes)
{
	char text[1024];
	int n;

	n = nst_agent_ini(text, sizeof(text), "standby", 1, 0, 256, "0", SEEDS);
	snprintf(text + n, sizeof(text) - n,
		 "layout = %s\n"
		 "[standby]\ntable_capacity = %u\ntable_capacity_v6 = 4096\n"
		 "dump = %s\n",
		 layout, 4 * n_flows > 65536 ? 4 * n_flows : 65536,
		 nst_run_path("standby.tbl"));
	nst_write_file(nst_run_path("standby.ini"), text);
	n = nst_agent_ini(text, sizeof(text), "active", 1, 200, 256, "0",
			  SEEDS);
	snprintf(text + n, sizeof(text) - n,
		 "layout = %s\n[rings]\nlanes = 1\n"
		 "[source]\ntype = kernel\nnetns = k1ks-g\n"
		 "ringbuf_size = %u\ndump = %s\n",
		 layout, ringbuf_bytes, nst_run_path("source.tbl"));
	nst_write_file(nst_run_path("active.ini"), text);
}

static void stop_pid(int pid)
{
	kill(pid, SIGTERM);
	for (int i = 0; i < 150 && nst_running(pid); i++)
		nsdp_sleep_ms(100);
	kill(pid, SIGKILL);
}

/* The number after "name=" in the active's REPORT line. */
static unsigned long report_field(const char *name)
{
	return nst_report_field(nst_run_path("active.out"), name);
}

/* Entries `conntrack -L` shows in the gateway's namespace; the dump also
 * makes the kernel reap expired entries at once, rather than when its
 * garbage collector comes by. */
static unsigned long conntrack_count(void)
{
	return nst_conntrack_count("k1ks-g");
}

/* natsync-verify, identity only: the conntrack dump (source.tbl) against
 * the store and the standby; asserts equal with expect entries each. */
static void verify_equal(int standby_pid, unsigned long expect)
{
	unsigned long store = 0, source = 0, standby = 0;
	int rc = nst_sh("%s -S " SEEDS " -L %s -i -s %s -b %s -p %d -t 30 "
			">%s 2>&1",
			nst_build("tools/natsync-verify"), layout,
			nst_run_path("source.tbl"), nst_run_path("standby.tbl"),
			standby_pid, nst_run_path("verify.out"));

	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	cr_assert_eq(rc, 0, "store or standby differ from conntrack");
	nst_verify_counts(&store, &source, &standby);
	cr_assert_eq(source, expect);
	cr_assert_eq(store, expect);
	cr_assert_eq(standby, expect);
}

/* Ask the running active for a fresh conntrack dump (SIGUSR1); the
 * dumps so far counted in its log tell when this one is written. */
static void dump_kernel_table(int active_pid)
{
	static int dumps;

	unlink(nst_run_path("source.tbl"));
	cr_assert_eq(kill(active_pid, SIGUSR1), 0);
	dumps++;
	cr_assert_eq(nst_sh("for i in $(seq 100); do [ $(grep -c 'entries "
			    "written' %s) -ge %d ] && exit 0; sleep 0.1; "
			    "done; exit 1",
			    nst_run_path("active.log"), dumps),
		     0, "the active wrote no dump");
}

static void wait_for_at_most(int secs, const char *what,
			     unsigned long (*count)(void), unsigned long want)
{
	unsigned long got = 0;

	for (int i = 0; i < secs * 10 && (got = count()) != want; i++)
		nsdp_sleep_ms(100);
	cr_assert_eq(got, want, "%s: %lu, expected %lu", what, got, want);
}

static void wait_for(const char *what, unsigned long (*count)(void),
		     unsigned long want)
{
	wait_for_at_most(30, what, count, want);
}

static unsigned long server_saw(void)
{
	return LOAD(udp_received) + LOAD(tcp_accepted);
}

/* The agents of a failed test must not write into the next test's
 * store (same ports). */
static int agent_pids[2];

static void stop_all(void)
{
	for (int i = 0; i < 2; i++)
		if (agent_pids[i] > 0)
			kill(agent_pids[i], SIGKILL);
	__atomic_store_n(&rig.stop, 1, __ATOMIC_RELEASE);
	nst_store_stop(STORE_PORT);
	net_teardown();
}

TestSuite(ksrc, .fini = stop_all, .timeout = 300);

struct run {
	int standby, active;
	pthread_t server;
};

static void active_start(struct run *r, const char *active_args)
{
	r->active = nst_agent_spawn("active", active_args);
	agent_pids[1] = r->active;
	cr_assert_eq(nst_sh("for i in $(seq 100); do grep -q 'progress: "
			    "active' %s && exit 0; sleep 0.1; done; exit 1",
			    nst_run_path("active.log")),
		     0, "the active did not start; see %s",
		     nst_run_path("active.log"));
}

/* The network, the store, a synced standby and the server. */
static void rig_start(struct run *r, const char *name,
		      unsigned int ringbuf_bytes)
{
	nst_run_dir_make(name);
	net_setup();
	cr_assert_eq(nst_store_start_fresh(STORE_PORT, 3, 0), 0);
	write_configs(ringbuf_bytes);
	r->standby = nst_agent_spawn("standby", "");
	agent_pids[0] = r->standby;
	nst_wait_synced(r->standby);
	pthread_create(&r->server, NULL, server_main, NULL);
	for (int i = 0; i < 100 && !LOAD(server_ready); i++)
		nsdp_sleep_ms(50);
	cr_assert(LOAD(server_ready), "the server did not start");
}

/* rig_start, then an active with the kernel source running. */
static void run_start(struct run *r, const char *name,
		      unsigned int ringbuf_bytes, const char *active_args)
{
	rig_start(r, name, ringbuf_bytes);
	active_start(r, active_args);
}

/* n_flows UDP flows and as many TCP connections through the gateway;
 * returns once conntrack holds them all. */
static void make_flows(void)
{
	unsigned long flows = 2UL * n_flows;
	pthread_t client;
	double t0 = nsdp_now_s(), secs;

	pthread_create(&client, NULL, client_main, NULL);
	pthread_join(client, NULL);
	secs = nsdp_now_s() - t0;
	cr_assert_eq(LOAD(client_errors), 0);
	cr_assert_eq(LOAD(udp_sent), n_flows);
	cr_assert_eq(LOAD(tcp_connected), n_flows);
	wait_for("datagrams and connections at the server", server_saw, flows);
	wait_for("conntrack entries", conntrack_count, flows);
	fprintf(stderr, "ksrc: %lu new flows in %.3f s (%.0f/s)\n", flows, secs,
		(double)flows / secs);
}

/* Stop the active (its REPORT then in active.out) and the standby. */
static void run_stop(struct run *r)
{
	stop_pid(r->active);
	agent_pids[1] = 0;
	cr_assert_eq(nst_wait_report(10), 0);
	nst_sh("cat %s >&2", nst_run_path("active.out"));
	cr_assert(nst_run_file_has("active.out", "drained=yes"));
	cr_assert_eq(report_field("lane_drops"), 0);
	stop_pid(r->standby);
	agent_pids[0] = 0;
	cr_assert(nst_run_file_has("standby.out", "bad_messages=0"));
	__atomic_store_n(&rig.stop, 1, __ATOMIC_RELEASE);
	pthread_join(r->server, NULL);
}

/* In both store layouts (one test, its parameter the layout). */
NST_LAYOUTS_TEST(
	ksrc, every_new_nat_flow_is_one_create_and_the_store_equals_conntrack)
{
	const char *env = getenv("NATSYNC_KSRC_FLOWS");
	unsigned long flows;
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	layout = l->name;
	if (env && atoi(env) > 0 && atoi(env) <= MAX_FLOWS)
		n_flows = (unsigned int)atoi(env);
	flows = 2UL * n_flows;
	run_start(&r, strcmp(layout, "log") == 0 ? "ksrc-log" : "ksrc", 4 << 20,
		  "");
	make_flows();

	/* Every entry as conntrack holds it now, in the store and on the
	 * standby. */
	dump_kernel_table(r.active);
	verify_equal(r.standby, flows);

	/* Ends: deleted entries leave the store and the standby. */
	cr_assert_eq(nst_sh("ip netns exec k1ks-g conntrack -D -p udp "
			    ">/dev/null 2>&1"),
		     0);
	wait_for("conntrack entries after deleting UDP", conntrack_count,
		 n_flows);
	dump_kernel_table(r.active);
	verify_equal(r.standby, n_flows);

	run_stop(&r);
	cr_assert_eq(report_field("creates"), flows, "one CREATE per new flow");
	cr_assert_eq(report_field("deletes"), n_flows);
	cr_assert_eq(report_field("dumped"), 0);
	cr_assert_eq(report_field("ringbuf_drops"), 0);
	cr_assert_eq(report_field("redumps"), 0);
}

/* IPv6 beside the rig's IPv4: client fd71::2 behind an ip6 masquerade
 * gateway (2001:db8:71::1) towards the server 2001:db8:71::2. */
static void net6_setup(void)
{
	cr_assert_eq(
		nst_sh("set -e\n"
		       "ip -n k1ks-c addr add fd71::2/64 dev k1ksc0 nodad\n"
		       "ip -n k1ks-c route add default via fd71::1\n"
		       "ip -n k1ks-g addr add fd71::1/64 dev k1ksg0 nodad\n"
		       "ip -n k1ks-g addr add 2001:db8:71::1/64 dev k1ksg1 "
		       "nodad\n"
		       "ip -n k1ks-s addr add 2001:db8:71::2/64 dev k1kss0 "
		       "nodad\n"
		       "ip netns exec k1ks-g sysctl -qw "
		       "net.ipv6.conf.all.forwarding=1\n"
		       "ip netns exec k1ks-g nft add table ip6 k1nat6\n"
		       "ip netns exec k1ks-g nft add chain ip6 k1nat6 post "
		       "'{ type nat hook postrouting priority 100 ; }'\n"
		       "ip netns exec k1ks-g nft add rule ip6 k1nat6 post "
		       "oifname k1ksg1 masquerade\n"),
		0, "cannot add IPv6 to the test network");
}

/* From the client: n UDP flows (source ports FIRST_PORT + i), n TCP
 * connections to a listener on the server (accepted, kept open until all
 * are made), one ICMPv6 echo and n_fwd UDP flows to the gateway's
 * [fd71::1]:FWD6_PORT (source ports FIRST_PORT + n + i); 0 when all went. */
#define FWD6_PORT 8080

static int make_flows6(unsigned int n, unsigned int n_fwd)
{
	return nst_sh(
		"ready=$(mktemp -u)\n"
		"ip netns exec k1ks-s python3 -c '\n"
		"import socket, sys, time\n"
		"s = socket.socket(socket.AF_INET6)\n"
		"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
		"s.bind((\"2001:db8:71::2\", %d)); s.listen(%u)\n"
		"open(sys.argv[1], \"w\").close()\n"
		"s.settimeout(10); c = [s.accept() for i in range(%u)]\n"
		"time.sleep(1)' \"$ready\" &\n"
		/* The listener first: a loaded machine starts python in
		 * more than a fixed pause (a CI run: connection refused). */
		"for i in $(seq 200); do [ -e \"$ready\" ] && break; "
		"sleep 0.05; done\n"
		"rm -f \"$ready\"\n"
		"ip netns exec k1ks-c python3 -c '\n"
		"import socket\n"
		"d = (\"2001:db8:71::2\", %d)\n"
		"for i in range(%u):\n"
		"  u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
		"  u.bind((\"fd71::2\", %d + i)); u.sendto(b\"x\", d); u.close()\n"
		"t = [socket.create_connection((\"2001:db8:71::2\", %d), 5) "
		"for i in range(%u)]\n"
		"p = socket.socket(socket.AF_INET6, socket.SOCK_RAW, 58)\n"
		"p.settimeout(5)\n"
		"p.sendto(bytes([128, 0, 0, 0, 0, 7, 0, 1]), "
		"(\"2001:db8:71::2\", 0))\n"
		"while p.recv(64)[0] != 129: pass\n"
		"for i in range(%u):\n"
		"  u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
		"  u.bind((\"fd71::2\", %d + i))\n"
		"  u.sendto(b\"x\", (\"fd71::1\", %d)); u.close()'\n"
		"rc=$?; wait; exit $rc",
		TCP_PORT + 10, n, n, UDP_PORT, n, FIRST_PORT, TCP_PORT + 10, n,
		n_fwd, FIRST_PORT + n, FWD6_PORT);
}

/* IPv6 entries `conntrack -L -f ipv6` shows in namespace ns. */
static unsigned long conntrack6_count_in(const char *ns)
{
	char cmd[128];
	unsigned long n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "ip netns exec %s conntrack -L -f ipv6 2>/dev/null | grep -c "
		 "src=",
		 ns);
	f = popen(cmd, "r");
	cr_assert(f);
	if (fscanf(f, "%lu", &n) != 1)
		n = 0;
	pclose(f);
	return n;
}

/* The same in the gateway. */
static unsigned long conntrack6_count(void)
{
	return conntrack6_count_in("k1ks-g");
}

#define FLOWS6 100u
#define FWD6 10u

/* Entries with destination NAT (conntrack's [DST_NAT] is not printed, the
 * forwarded port is): the IPv6 entries to the gateway's FWD6_PORT. */
static unsigned long conntrack6_fwd_count(void)
{
	FILE *f =
		popen("ip netns exec k1ks-g conntrack -L -f ipv6 -p udp "
		      "--orig-port-dst 8080 --reply-port-src 9000 2>/dev/null "
		      "| grep -c src=",
		      "r");
	unsigned long n = 0;

	cr_assert(f);
	if (fscanf(f, "%lu", &n) != 1)
		n = 0;
	pclose(f);
	return n;
}

/* The store's record of the first forwarded IPv6 flow, read back with
 * natsync-verify --get: from the client to the gateway's FWD6_PORT,
 * forwarded to the server's UDP_PORT and masqueraded, its port kept. */
static void assert_forwarded6_record(void)
{
	unsigned int sport = FIRST_PORT + FLOWS6;
	char want[256];

	cr_assert_eq(nst_sh("%s -S " SEEDS " -L %s --get 'udp:[fd71::2]:%u-"
			    "[fd71::1]:%d' >%s 2>&1",
			    nst_build("tools/natsync-verify"), layout, sport,
			    FWD6_PORT, nst_run_path("get.out")),
		     0,
		     "the store holds no record of the forwarded flow; see %s",
		     nst_run_path("get.out"));
	snprintf(want, sizeof(want),
		 "\"orig_saddr\":\"fd71::2\",\"orig_daddr\":\"fd71::1\","
		 "\"orig_sport\":%u,\"orig_dport\":%d,"
		 "\"new_saddr\":\"2001:db8:71::1\","
		 "\"new_daddr\":\"2001:db8:71::2\",\"new_sport\":%u,"
		 "\"new_dport\":%d}",
		 sport, FWD6_PORT, sport, UDP_PORT);
	cr_assert(nst_run_file_has("get.out",
				   "\"family\":6,\"event\":\"create\","
				   "\"proto\":17,\"gateway_id\":1,"),
		  "not a NAT66 UDP create of gateway 1; see %s",
		  nst_run_path("get.out"));
	cr_assert_eq(nst_sh("grep -qF '%s' %s", want, nst_run_path("get.out")),
		     0, "the forwarded record is not %s; see %s", want,
		     nst_run_path("get.out"));
}

/* NAT66: every new ip6 masqueraded flow (UDP, TCP, ICMPv6 echo) and every
 * flow an ip6 `dnat to` forwards to the server is one CREATE, every entry
 * conntrack -D removes one DELETE; the store and the standby equal
 * conntrack entry by entry, and the forwarded flow's record carries the
 * forwarded destination. */
Test(ksrc, every_new_nat66_flow_is_one_create_and_each_removal_one_delete)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	rig_start(&r, "ksrc-v6", 4 << 20);
	net6_setup();
	cr_assert_eq(nst_sh("ip netns exec k1ks-g nft add chain ip6 k1nat6 pre "
			    "'{ type nat hook prerouting priority -100 ; }' && "
			    "ip netns exec k1ks-g nft add rule ip6 k1nat6 pre "
			    "iifname k1ksg0 udp dport %d dnat to "
			    "'[2001:db8:71::2]:%d'",
			    FWD6_PORT, UDP_PORT),
		     0);
	active_start(&r, "");
	cr_assert_eq(make_flows6(FLOWS6, FWD6), 0, "the IPv6 flows did not go");
	wait_for("IPv6 conntrack entries", conntrack6_count,
		 2 * FLOWS6 + 1 + FWD6);
	cr_assert_eq(conntrack6_fwd_count(), FWD6);
	dump_kernel_table(r.active);
	verify_equal(r.standby, 2 * FLOWS6 + 1 + FWD6);
	assert_forwarded6_record();
	cr_assert_eq(nst_sh("ip netns exec k1ks-g conntrack -D -f ipv6 -p udp "
			    ">/dev/null 2>&1"),
		     0);
	wait_for("IPv6 entries after deleting UDP", conntrack6_count,
		 FLOWS6 + 1);
	dump_kernel_table(r.active);
	verify_equal(r.standby, FLOWS6 + 1);
	run_stop(&r);
	cr_assert_eq(report_field("creates"), 2 * FLOWS6 + 1 + FWD6,
		     "one CREATE per new flow");
	cr_assert_eq(report_field("deletes"), FLOWS6 + FWD6);
	cr_assert_eq(report_field("dumped"), 0);
	cr_assert_eq(report_field("ringbuf_drops"), 0);
}

/* The active is stopped (SIGSTOP) while the flows are made, so the
 * smallest ring buffer (64 KiB, about 1 170 events) overflows; once it
 * runs again, the drops it finds make it dump the table, and nothing is
 * missing. */
Test(ksrc, a_ring_buffer_overflow_is_counted_and_answered_with_a_dump)
{
	unsigned long flows = 2UL * n_flows;
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	run_start(&r, "ksrc-overflow", 65536, "");
	cr_assert_eq(kill(r.active, SIGSTOP), 0);
	make_flows();
	cr_assert_eq(kill(r.active, SIGCONT), 0);

	dump_kernel_table(r.active);
	verify_equal(r.standby, flows);

	run_stop(&r);
	cr_assert_gt(report_field("ringbuf_drops"), 0);
	cr_assert_geq(report_field("redumps"), 1);
	cr_assert_lt(report_field("creates"), flows);
	cr_assert_geq(report_field("dumped"), flows);
}

/* One ICMP echo from the client to the server, identifier ECHO_ID, and
 * its reply; 0 when the reply came. */
#define ECHO_ID 7

static int echo_once(void)
{
	return nst_sh("ip netns exec k1ks-c python3 -c '\n"
		      "import socket\n"
		      "p = [8, 0, 0, 0, 0, %d, 0, 1]\n"
		      "c = sum(p[i] << 8 | p[i + 1] for i in range(0, 8, 2))\n"
		      "c = ~((c & 0xffff) + (c >> 16)) & 0xffff\n"
		      "p[2:4] = [c >> 8, c & 255]\n"
		      "s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)\n"
		      "s.settimeout(5)\n"
		      "s.sendto(bytes(p), (\"" SERVER_ADDR "\", 0))\n"
		      "while s.recv(64)[20] != 0: pass'",
		      ECHO_ID);
}

/* An agent started on a running gateway replicates what is already there:
 * every entry comes from the dump at start, an ICMP echo's with its
 * identifier. (A closing TCP connection's last packets may pass between
 * the attach and the dump: such an entry is also sent by the BPF program,
 * so creates is not asserted.) */
Test(ksrc, an_agent_started_on_a_running_gateway_replicates_its_entries)
{
	unsigned long flows = 2UL * n_flows + 1;
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	rig_start(&r, "ksrc-late", 4 << 20);
	make_flows();
	cr_assert_eq(echo_once(), 0, "the echo got no reply");
	active_start(&r, "");
	dump_kernel_table(r.active);
	verify_equal(r.standby, flows);
	cr_assert_eq(nst_sh("%s -S " SEEDS
			    " -L %s --get icmp:10.71.0.2:%u-" SERVER_ADDR
			    ":0 >%s 2>&1",
			    nst_build("tools/natsync-verify"), layout, ECHO_ID,
			    nst_run_path("get.out")),
		     0, "the store holds no echo of identifier %d; see %s",
		     ECHO_ID, nst_run_path("get.out"));
	run_stop(&r);
	cr_assert_eq(report_field("dumped"), flows);
	cr_assert_eq(report_field("redumps"), 0);
}

/* Ends without conntrack -D: with the gateway's TCP close timers at 1 s,
 * the closed connections' entries expire, and each is a DELETE. */
Test(ksrc, closed_tcp_connections_become_delete_records_when_they_expire)
{
	pthread_t client;
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	run_start(&r, "ksrc-close", 4 << 20, "");
	cr_assert_eq(nst_sh("for t in fin_wait close_wait last_ack time_wait "
			    "close; do ip netns exec k1ks-g sysctl -qw "
			    "net.netfilter.nf_conntrack_tcp_timeout_$t=1; "
			    "done"),
		     0);
	pthread_create(&client, NULL, client_main, NULL);
	pthread_join(client, NULL);
	cr_assert_eq(LOAD(client_errors), 0);
	wait_for("datagrams and connections at the server", server_saw,
		 2UL * n_flows);
	/* Expired entries go (with their destroy events) when they are
	 * reaped: by the listing in conntrack_count, or by conntrack's garbage
	 * collector, which comes by at most 60 s apart. */
	wait_for_at_most(90, "conntrack entries once TCP's have expired",
			 conntrack_count, n_flows);
	dump_kernel_table(r.active);
	verify_equal(r.standby, n_flows);
	run_stop(&r);
	cr_assert_eq(report_field("creates"), 2UL * n_flows);
	cr_assert_eq(report_field("deletes"), n_flows);
}

/* The flows made through a run whose source filters the TCP ones out:
 * the store and the standby hold the UDP flows alone, the active created
 * n_flows records and filtered the rest. Stops the run. */
static void assert_only_the_udp_flows_replicated(struct run *r)
{
	make_flows();
	dump_kernel_table(r->active);
	verify_equal(r->standby, n_flows);
	run_stop(r);
	cr_assert_eq(report_field("creates"), n_flows);
	cr_assert_geq(report_field("filtered"), n_flows);
}

/* [source] mark: only the UDP flows (conntrack mark 7) are replicated. */
Test(ksrc, the_mark_filter_keeps_only_the_marked_entries)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	run_start(&r, "ksrc-mark", 4 << 20,
		  "--set source.mark=7 --set source.mark_mask=255");
	assert_only_the_udp_flows_replicated(&r);
	cr_assert_eq(report_field("ringbuf_drops"), 0);
}

/* [source] zone: only the UDP flows, put in conntrack zone 5 by a rule
 * before conntrack (they get no reply, so their zone needs none); IPv4
 * first, then IPv6 beside it, each compared entry by entry. */
Test(ksrc, the_zone_filter_keeps_only_the_entries_of_its_zone)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	run_start(&r, "ksrc-zone", 4 << 20, "--set source.zone=5");
	net6_setup();
	cr_assert_eq(nst_sh("set -e; for f in ip ip6; do ip netns exec k1ks-g "
			    "nft add table $f k1zone; ip netns exec k1ks-g nft "
			    "add chain $f k1zone pre '{ type filter hook "
			    "prerouting priority -300 ; }'; ip netns exec "
			    "k1ks-g nft add rule $f k1zone pre udp dport "
			    "9000-9004 ct zone set 5; done"),
		     0);
	make_flows();
	dump_kernel_table(r.active);
	verify_equal(r.standby, n_flows);
	cr_assert_eq(make_flows6(FLOWS6, 0), 0, "the IPv6 flows did not go");
	wait_for("IPv6 conntrack entries", conntrack6_count, 2 * FLOWS6 + 1);
	dump_kernel_table(r.active);
	verify_equal(r.standby, n_flows + FLOWS6);
	run_stop(&r);
	cr_assert_eq(report_field("creates"), n_flows + FLOWS6);
	cr_assert_geq(report_field("filtered"), n_flows + FLOWS6 + 1);
}

/* [source] ignore_mark: the marked UDP flows are left out, as entries a
 * standby committed with [standby] commit_mark would be. */
Test(ksrc, entries_with_the_ignored_mark_are_not_captured)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	run_start(&r, "ksrc-ignore", 4 << 20, "--set source.ignore_mark=7");
	assert_only_the_udp_flows_replicated(&r);
}

/* natsync-agent with the kernel source as cmd_prefix runs it, its stderr
 * in errors.log; its exit status. */
static int run_failing_agent(const char *cmd_prefix, const char *set)
{
	return nst_sh("%s %s -c %s %s >/dev/null 2>%s", cmd_prefix,
		      nst_build("tools/natsync-agent"),
		      nst_run_path("active.ini"), set,
		      nst_run_path("errors.log"));
}

Test(ksrc, missing_namespace_or_privileges_exit_2_saying_which)
{
	nst_need_root("dropping privileges needs root first");
	nst_run_dir_make("ksrc-errors");
	write_configs(4 << 20);
	nst_sh("chmod 755 %s && chmod 644 %s", nst_run_dir(),
	       nst_run_path("active.ini"));

	cr_assert_eq(run_failing_agent("", "--set source.netns=k1ks-none"), 2);
	cr_assert(nst_run_file_has("errors.log",
				   "network namespace /run/netns/k1ks-none"));

	cr_assert_eq(run_failing_agent("setpriv --reuid=65534 --regid=65534 "
				       "--clear-groups --inh-caps=-all",
				       "--set source.netns="),
		     2);
	cr_assert(nst_run_file_has("errors.log", "privileges missing"));
}

/* ---- ends lost to a full destroy-event socket -------------------------- */

/* The standby commits into the conntrack table of a namespace of its own,
 * so that a session the gateway ended is seen leaving the standby's table
 * and its conntrack. The active's destroy-event socket is shrunk to its
 * smallest ([source] ends_rcvbuf, about ten events), so that a flush in
 * the gateway loses most of its destroy events (end_overruns). */
#define STANDBY_NS "k1ks-b"
#define COMMIT_ARGS                                                             \
	"--set standby.commit=conntrack --set standby.commit_netns=" STANDBY_NS \
	" --set standby.table_capacity_v6=4096"
#define TINY_ENDS_ARGS "--set source.ends_rcvbuf=4096"
/* UDP flows made after the ends: client ports above the first n_flows,
 * which NATSYNC_KSRC_FLOWS may raise to MAX_ENDS_FLOWS for a measurement
 * (docs/kernel-gateways.md). */
#define LATE_FLOWS 500
#define MAX_ENDS_FLOWS (PORT_SPAN)

static void ends_fini(void)
{
	stop_all();
	nst_sh("ip netns del " STANDBY_NS " 2>/dev/null; true");
}

TestSuite(ksrc_ends, .fini = ends_fini, .timeout = 300);

static unsigned long standby_conntrack_count(void)
{
	return nst_conntrack_count(STANDBY_NS);
}

/* The last count within secs of waiting for want, asserting nothing. */
static unsigned long settle(int secs, unsigned long (*count)(void),
			    unsigned long want)
{
	unsigned long got = count();

	for (int i = 0; i < secs * 10 && got != want; i++) {
		nsdp_sleep_ms(100);
		got = count();
	}
	return got;
}

/* The gateway's conntrack, the store, the standby's table and the
 * standby's conntrack all hold exactly expect sessions, the first three
 * entry by entry. The counts are printed before they are asserted, so
 * that a failure shows the ghosts. */
static void expect_no_ghosts(struct run *r, unsigned long expect)
{
	unsigned long sb_ct;

	wait_for("conntrack entries", conntrack_count, expect);
	sb_ct = settle(30, standby_conntrack_count, expect);
	dump_kernel_table(r->active);
	fprintf(stderr,
		"ksrc-ends: gateway conntrack %lu, standby conntrack %lu "
		"(expected %lu)\n",
		conntrack_count(), sb_ct, expect);
	verify_equal(r->standby, expect);
	cr_assert_eq(sb_ct, expect, "standby's conntrack: %lu ghost(s)",
		     sb_ct - expect);
}

/* The network, the store, a standby committing into STANDBY_NS, the
 * server, an active whose destroy-event socket is the smallest, and the
 * flows of make_flows(), which the standby's table and conntrack then
 * hold. TCP entries outlive the test (their close timers at 600 s), so
 * that only what the test ends ends. */
static void ends_run_start(struct run *r, const char *name)
{
	const char *env = getenv("NATSYNC_KSRC_FLOWS");

	if (env && atoi(env) > 0 && atoi(env) <= MAX_ENDS_FLOWS)
		n_flows = (unsigned int)atoi(env);
	nst_run_dir_make(name);
	net_setup();
	nst_sh("ip netns del " STANDBY_NS " 2>/dev/null");
	cr_assert_eq(nst_sh("ip netns add " STANDBY_NS " && for t in fin_wait "
			    "close_wait last_ack time_wait close; do ip netns "
			    "exec k1ks-g sysctl -qw "
			    "net.netfilter.nf_conntrack_tcp_timeout_$t=600; "
			    "done"),
		     0);
	cr_assert_eq(nst_store_start_fresh(STORE_PORT, 3, 0), 0);
	write_configs(4 << 20);
	r->standby = nst_agent_spawn("standby", COMMIT_ARGS);
	agent_pids[0] = r->standby;
	nst_wait_synced(r->standby);
	pthread_create(&r->server, NULL, server_main, NULL);
	for (int i = 0; i < 100 && !LOAD(server_ready); i++)
		nsdp_sleep_ms(50);
	cr_assert(LOAD(server_ready), "the server did not start");
	active_start(r, TINY_ENDS_ARGS);
	make_flows();
	expect_no_ghosts(r, 2UL * n_flows);
}

/* LATE_FLOWS new UDP flows, one datagram each, from the client ports
 * above those of the first n_flows. */
static void *late_udp_flows(void *arg)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(UDP_PORT)};
	unsigned int first = FIRST_PORT + n_flows;

	(void)arg;
	nst_enter_netns("k1ks-c");
	inet_pton(AF_INET, SERVER_ADDR, &to.sin_addr);
	for (unsigned int i = 0; i < LATE_FLOWS; i++) {
		int fd = bound_socket(SOCK_DGRAM, (uint16_t)(first + i));

		if (fd >= 0 && sendto(fd, "k1", 2, 0, (struct sockaddr *)&to,
				      sizeof(to)) == 2)
			ADD(udp_sent, 1);
		else
			ADD(client_errors, 1);
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/* Stop the run; its REPORTs say that destroy events were lost, that the
 * standby's commit met no error, and that the ended sessions (at least
 * ended of them) were deleted, by their events or by the dump-diff. */
static void stop_after_lost_ends(struct run *r, unsigned long ended)
{
	run_stop(r);
	nst_sh("cat %s >&2", nst_run_path("standby.out"));
	cr_assert(nst_run_file_has("standby.out", "ct_errors=0"));
	cr_assert_gt(report_field("end_overruns"), 0,
		     "no destroy event was lost: the test proved nothing");
	cr_assert_geq(report_field("redumps"), 1);
	cr_assert_gt(report_field("reconciled"), 0);
	cr_assert_geq(report_field("deletes") + report_field("reconciled"),
		      ended);
}

/* After the ends: LATE_FLOWS new UDP flows while the active catches up;
 * then exactly expect sessions everywhere, and the active's REPORT says
 * that destroy events were lost and that the ended sessions (at least
 * ended of them) were deleted, by their events or by the dump-diff. */
static void late_flows_leave_no_ghost(struct run *r, unsigned long expect,
				      unsigned long ended)
{
	unsigned long made = 2UL * n_flows + LATE_FLOWS;
	pthread_t client;

	pthread_create(&client, NULL, late_udp_flows, NULL);
	pthread_join(client, NULL);
	cr_assert_eq(LOAD(client_errors), 0);
	wait_for("datagrams and connections at the server", server_saw, made);
	expect_no_ghosts(r, expect);
	stop_after_lost_ends(r, ended);
}

/* The UDP entries are deleted while the active is stopped (SIGSTOP), so
 * their destroy events overflow its socket. The sessions whose ends were
 * lost leave the store, the standby's table and its conntrack all the
 * same. */
Test(ksrc_ends, a_delete_whose_destroy_events_were_lost_leaves_no_ghost)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	ends_run_start(&r, "ksrc-lost-deletes");

	cr_assert_eq(kill(r.active, SIGSTOP), 0);
	cr_assert_eq(nst_sh("ip netns exec k1ks-g conntrack -D -p udp "
			    ">/dev/null 2>&1"),
		     0);
	wait_for("conntrack entries after deleting UDP", conntrack_count,
		 n_flows);
	cr_assert_eq(kill(r.active, SIGCONT), 0);
	late_flows_leave_no_ghost(&r, n_flows + LATE_FLOWS, n_flows);
}

static unsigned long standby_conntrack6_count(void)
{
	return conntrack6_count_in(STANDBY_NS);
}

/* IPv6: the NAT66 entries' destroy events lost the same way (the UDP and
 * ICMPv6 ones deleted while the active is stopped): the sessions leave the
 * standby's conntrack all the same, through the re-dump's diff, and the
 * TCP ones stay; the store and the standby's table equal the gateway's
 * conntrack entry by entry. */
Test(ksrc_ends, an_ipv6_delete_whose_destroy_events_were_lost_leaves_no_ghost)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	ends_run_start(&r, "ksrc-lost-deletes6");
	net6_setup();
	cr_assert_eq(make_flows6(FLOWS6, 0), 0, "the IPv6 flows did not go");
	wait_for("IPv6 conntrack entries", conntrack6_count, 2 * FLOWS6 + 1);
	wait_for("IPv6 entries in the standby's conntrack",
		 standby_conntrack6_count, 2 * FLOWS6 + 1);

	cr_assert_eq(kill(r.active, SIGSTOP), 0);
	cr_assert_eq(nst_sh("ip netns exec k1ks-g conntrack -D -f ipv6 -p udp "
			    ">/dev/null 2>&1 && ip netns exec k1ks-g conntrack "
			    "-D -f ipv6 -p icmpv6 >/dev/null 2>&1"),
		     0);
	wait_for("IPv6 entries after the deletes", conntrack6_count, FLOWS6);
	cr_assert_eq(kill(r.active, SIGCONT), 0);
	wait_for("IPv6 entries in the standby's conntrack after the deletes",
		 standby_conntrack6_count, FLOWS6);
	dump_kernel_table(r.active);
	verify_equal(r.standby, 2UL * n_flows + FLOWS6);
	stop_after_lost_ends(&r, FLOWS6 + 1);
}

/* A flush of the whole table with the active running: its destroy events
 * (2 000) come faster than the active reads them. */
Test(ksrc_ends, a_flush_whose_destroy_events_overflow_leaves_no_ghost)
{
	struct run r;

	nst_need_root("network namespaces, nftables and BPF need root");
	ends_run_start(&r, "ksrc-lost-flush");

	cr_assert_eq(nst_sh("ip netns exec k1ks-g conntrack -F "
			    ">/dev/null 2>&1"),
		     0);
	wait_for("conntrack entries after the flush", conntrack_count, 0);
	late_flows_leave_no_ghost(&r, LATE_FLOWS, 2UL * n_flows);
}
