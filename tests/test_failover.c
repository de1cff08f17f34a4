/*
 * test_failover.c - natsync's purpose, end to end: a TCP connection and a
 * UDP flow through the active gateway survive its death, because the
 * standby gateway already holds their NAT sessions.
 *
 * The test builds its own network (root required):
 *
 *   netns nstfo-c (client)                 netns nstfo-s (server)
 *   br0 10.1.0.2/24, default via 10.1.0.1  br0 198.51.100.2/24
 *    |- ca <-> nstfoAi  [gateway A]  nstfoAo <-> sa -|
 *    |- cb <-> nstfoBi  [gateway B]  nstfoBo <-> sb -|
 *
 * The gateways are natsync-gateway processes on net_af_packet over the
 * root-namespace ends of the veth pairs, inside address 10.1.0.1, outside
 * pool 198.51.100.10-11, both replicating through a 3-master Redis Cluster
 * on loopback. A starts active, B standby. The client and server run in
 * threads of this process that entered the namespaces (setns).
 *
 * Then A is killed with SIGKILL and B is promoted through the keepalived
 * notify hook, as keepalived would. The test asserts that the same TCP
 * connection keeps echoing exactly the bytes sent (no reset, no second
 * connection), that the UDP flow keeps being answered, that the server saw
 * one translated source per flow before and after, and that B forwarded
 * with the replicated sessions (it created none for these flows). A then
 * restarts as a standby and resyncs; B is demoted and A promoted again
 * (failback), and the same connection goes on through A.
 *
 * Both ways to run the agent: threads inside the gateways, and
 * natsync-agent secondary processes attached to the gateways' rings
 * (hugepages, started with deploy/agent-secondary.sh).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsa_host.h"
#include "nsdp_time.h"
#include "nst_agents.h"
#include "nst_skip.h"
#include "nst_store.h"

#define STORE_PORT 7800
#define TCP_PORT 5001
#define UDP_PORT 5002
#define SERVER_ADDR "198.51.100.2"
#define POOL_FIRST "198.51.100.10"
#define POOL_LAST "198.51.100.11"
#define TICK_MS 20
#define MAX_SOURCES 8

/* What the client and server threads saw; written by them, read by the
 * test with atomics. */
static struct {
	int stop;
	/* client */
	uint64_t tcp_sent, tcp_echoed; /* bytes */
	uint64_t tcp_mismatch, tcp_closed;
	uint64_t udp_sent, udp_replies;
	/* server */
	uint64_t accepts;
	struct sockaddr_in tcp_peer;
	struct sockaddr_in udp_sources[MAX_SOURCES];
	uint64_t n_udp_sources;
	uint64_t udp_received;
} net;

#define LOAD(f) __atomic_load_n(&net.f, __ATOMIC_ACQUIRE)
#define ADD(f, v) __atomic_add_fetch(&net.f, (v), __ATOMIC_RELEASE)

/* ---- the network -------------------------------------------------------- */

static void net_teardown(void)
{
	nst_sh("ip netns del nstfo-c 2>/dev/null; ip netns del nstfo-s "
	       "2>/dev/null; for l in nstfoAi nstfoAo nstfoBi nstfoBo; do ip "
	       "link del $l 2>/dev/null; done; true");
}

static void net_setup(void)
{
	int rc;

	net_teardown();
	rc = nst_sh(
		"set -e\n"
		"ip netns add nstfo-c\n"
		"ip netns add nstfo-s\n"
		"for ns in nstfo-c nstfo-s; do\n"
		"  ip -n $ns link set lo up\n"
		"  ip -n $ns link add br0 type bridge\n"
		"  ip -n $ns link set br0 up\n"
		"  ip netns exec $ns sysctl -qw "
		"net.ipv6.conf.all.disable_ipv6=1\n"
		"done\n"
		"pair() { ip link add $1 type veth peer name $2 netns $3\n"
		"  sysctl -qw net.ipv6.conf.$1.disable_ipv6=1\n"
		"  ip link set $1 up\n"
		"  ip -n $3 link set $2 master br0 up; }\n"
		"pair nstfoAi ca nstfo-c\n"
		"pair nstfoBi cb nstfo-c\n"
		"pair nstfoAo sa nstfo-s\n"
		"pair nstfoBo sb nstfo-s\n"
		"ip -n nstfo-c addr add 10.1.0.2/24 dev br0\n"
		"ip -n nstfo-c route add default via 10.1.0.1\n"
		"ip -n nstfo-s addr add " SERVER_ADDR "/24 dev br0\n"
		/* Checksums in software: with offload, veth hands
		     * af_packet frames whose TCP/UDP checksum holds only the
		     * pseudo-header part, which a forwarder cannot know. */
		"for d in br0 ca cb; do ip netns exec nstfo-c ethtool -K $d "
		"tx off >/dev/null; done\n"
		"for d in br0 sa sb; do ip netns exec nstfo-s ethtool -K $d "
		"tx off >/dev/null; done\n"
		"for d in nstfoAi nstfoAo nstfoBi nstfoBo; do ethtool -K $d "
		"tx off >/dev/null; done\n");
	cr_assert_eq(rc, 0, "cannot build the test network (root needed)");
}

static void enter_netns(const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
		fprintf(stderr, "setns %s: %s\n", name, strerror(errno));
		abort();
	}
	close(fd);
}

/* ---- server (nstfo-s) ------------------------------------------------------ */

static void note_udp_source(const struct sockaddr_in *from)
{
	uint64_t n = LOAD(n_udp_sources);

	for (uint64_t i = 0; i < n; i++)
		if (net.udp_sources[i].sin_addr.s_addr ==
			    from->sin_addr.s_addr &&
		    net.udp_sources[i].sin_port == from->sin_port)
			return;
	if (n < MAX_SOURCES) {
		net.udp_sources[n] = *from;
		ADD(n_udp_sources, 1);
	}
}

static void *server_main(void *arg)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int one = 1, lfd, ufd, cfd = -1;

	(void)arg;
	enter_netns("nstfo-s");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ufd = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_port = htons(TCP_PORT);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(lfd, 4) != 0)
		abort();
	sa.sin_port = htons(UDP_PORT);
	if (bind(ufd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		abort();

	while (!LOAD(stop)) {
		struct pollfd p[3] = {
			{lfd, POLLIN, 0}, {ufd, POLLIN, 0}, {cfd, POLLIN, 0}};
		char buf[4096];

		if (poll(p, cfd >= 0 ? 3 : 2, 100) <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			struct sockaddr_in peer;
			socklen_t len = sizeof(peer);
			int fd = accept(lfd, (struct sockaddr *)&peer, &len);

			if (fd >= 0) {
				if (cfd >= 0)
					close(cfd);
				cfd = fd;
				net.tcp_peer = peer;
				ADD(accepts, 1);
			}
		}
		if (p[1].revents & POLLIN) {
			struct sockaddr_in from;
			socklen_t len = sizeof(from);
			ssize_t n = recvfrom(ufd, buf, sizeof(buf), 0,
					     (struct sockaddr *)&from, &len);

			if (n > 0) {
				note_udp_source(&from);
				ADD(udp_received, 1);
				sendto(ufd, buf, (size_t)n, 0,
				       (struct sockaddr *)&from, len);
			}
		}
		if (cfd >= 0 && (p[2].revents & (POLLIN | POLLHUP))) {
			ssize_t n = read(cfd, buf, sizeof(buf));

			if (n <= 0) {
				close(cfd);
				cfd = -1;
			} else if (write(cfd, buf, (size_t)n) != n) {
				close(cfd);
				cfd = -1;
			}
		}
	}
	if (cfd >= 0)
		close(cfd);
	close(lfd);
	close(ufd);
	return NULL;
}

/* ---- client (nstfo-c) ------------------------------------------------------ */

/* Byte i of the TCP stream: the echo must give back exactly these. */
static uint8_t stream_byte(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
}

static void *client_main(void *arg)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	double next_tick = 0;
	int tfd = -1, ufd;

	(void)arg;
	enter_netns("nstfo-c");
	inet_pton(AF_INET, SERVER_ADDR, &to.sin_addr);
	ufd = socket(AF_INET, SOCK_DGRAM, 0);

	/* Connect through gateway A, retrying until it forwards. */
	for (int i = 0; i < 100 && !LOAD(stop) && tfd < 0; i++) {
		int one = 1;

		tfd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(tfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		to.sin_port = htons(TCP_PORT);
		if (connect(tfd, (struct sockaddr *)&to, sizeof(to)) != 0) {
			close(tfd);
			tfd = -1;
			nsdp_sleep_ms(200);
		}
	}
	if (tfd < 0)
		return NULL;
	fcntl(tfd, F_SETFL, O_NONBLOCK);
	to.sin_port = htons(UDP_PORT);

	while (!LOAD(stop)) {
		struct pollfd p[2] = {{tfd, POLLIN, 0}, {ufd, POLLIN, 0}};
		uint8_t buf[4096];
		double t = nsdp_now_s();

		if (t >= next_tick) {
			uint8_t msg[32];
			uint64_t base = LOAD(tcp_sent);
			ssize_t n;

			for (size_t i = 0; i < sizeof(msg); i++)
				msg[i] = stream_byte(base + i);
			n = send(tfd, msg, sizeof(msg), MSG_NOSIGNAL);
			if (n > 0)
				ADD(tcp_sent, (uint64_t)n);
			if (sendto(ufd, "ping", 4, 0, (struct sockaddr *)&to,
				   sizeof(to)) == 4)
				ADD(udp_sent, 1);
			next_tick = t + TICK_MS / 1000.0;
		}
		if (poll(p, 2, TICK_MS) <= 0)
			continue;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(tfd, buf, sizeof(buf), 0);

			if (n == 0 || (n < 0 && errno != EAGAIN)) {
				ADD(tcp_closed, 1);
				break;
			}
			for (ssize_t i = 0; i < n; i++) {
				uint64_t at = LOAD(tcp_echoed);

				if (buf[i] != stream_byte(at))
					ADD(tcp_mismatch, 1);
				ADD(tcp_echoed, 1);
			}
		}
		if ((p[1].revents & POLLIN) &&
		    recv(ufd, buf, sizeof(buf), 0) > 0)
			ADD(udp_replies, 1);
	}
	close(tfd);
	close(ufd);
	return NULL;
}

/* ---- gateways --------------------------------------------------------------- */

/* Set by each test: 1 when the agents run as DPDK secondary processes. */
static int external;

static void write_gateway_config(char id)
{
	char name[32], text[4096], eal[512];

	/* A secondary process maps the gateway's memory: hugepages, shared
	 * configuration. Otherwise process-private memory is enough. */
	snprintf(eal, sizeof(eal),
		 "%s --no-pci --no-telemetry --file-prefix nstfo%c "
		 "--vdev=net_af_packet0,iface=nstfo%ci "
		 "--vdev=net_af_packet1,iface=nstfo%co -l 0,1",
		 external ? "-m 128 --base-virtaddr=" NSA_BASE_VIRTADDR
			  : "--no-huge --no-shconf -m 256",
		 id, id, id);
	snprintf(text, sizeof(text),
		 "[agent]\n"
		 "role = %s\n"
		 "gateway_id = %d\n"
		 "progress_ms = 0\n"
		 "log_level = info\n"
		 "eal_args = %s\n"
		 "[store]\nseeds = 127.0.0.1:%d\n"
		 "[active]\nflush_us = 200\n"
		 "[rings]\nlanes = 1\nring_size = 4096\n"
		 "[standby]\ntable_capacity = 4096\n"
		 "[gateway]\n"
		 "inside_port = net_af_packet0\n"
		 "outside_port = net_af_packet1\n"
		 "inside_address = 10.1.0.1\n"
		 "pool = " POOL_FIRST "-" POOL_LAST "\n"
		 "ports = 20000-29999\n"
		 "control_socket = %s\n"
		 "idle_sleep_us = 200\n"
		 "mbufs = 4095\n"
		 "agent = %s\n",
		 id == 'A' ? "active" : "standby", id == 'A' ? 1 : 2, eal,
		 STORE_PORT, nst_run_path(id == 'A' ? "a.sock" : "b.sock"),
		 external ? "external" : "threads");
	snprintf(name, sizeof(name), "gw%c.ini", id);
	nst_write_file(nst_run_path(name), text);
}

static pid_t start_gateway(char id, const char *extra)
{
	char name[8];

	snprintf(name, sizeof(name), "gw%c", id);
	return (pid_t)nst_spawn(nst_build("gateway/natsync-gateway"), name,
				extra, 1);
}

/* Send a control command; the reply goes to buf. Returns the exit status. */
static int ctl(char id, const char *cmd, char *buf, size_t len)
{
	char out[4400];
	FILE *f;
	int rc;

	snprintf(out, sizeof(out), "%s", nst_run_path("ctl.out"));
	rc = nst_sh("%s --ctl %s -S %s >%s 2>&1",
		    nst_build("gateway/natsync-gateway"), cmd,
		    nst_run_path(id == 'A' ? "a.sock" : "b.sock"), out);
	buf[0] = '\0';
	f = fopen(out, "r");
	if (f) {
		size_t n = fread(buf, 1, len - 1, f);

		buf[n] = '\0';
		fclose(f);
	}
	return rc;
}

static int status_has(char id, const char *what)
{
	char buf[4096];

	return ctl(id, "status", buf, sizeof(buf)) == 0 && strstr(buf, what);
}

/* The number after "<sep>name=" in the reply to control command cmd, or
 * -1: stats are one per line, status fields separated by spaces. */
static long ctl_value(char id, const char *cmd, char sep, const char *name)
{
	char buf[4096], key[128];
	const char *at;

	if (ctl(id, cmd, buf, sizeof(buf)) != 0)
		return -1;
	snprintf(key, sizeof(key), "%c%s=", sep, name);
	at = strstr(buf, key);
	return at ? atol(at + strlen(key)) : -1;
}

static long stat_value(char id, const char *name)
{
	return ctl_value(id, "stats", '\n', name);
}

static long status_value(char id, const char *name)
{
	return ctl_value(id, "status", ' ', name);
}

/* Wait up to secs for cond; returns whether it became true. */
#define WAIT_FOR(cond, secs)                                       \
	({                                                         \
		double until_ = nsdp_now_s() + (secs);             \
		int ok_ = 0;                                       \
		while (!(ok_ = !!(cond)) && nsdp_now_s() < until_) \
			nsdp_sleep_ms(50);                         \
		ok_;                                               \
	})

static pid_t gw_a, gw_b, agent_a, agent_b;

static int alive(pid_t pid)
{
	return pid > 0 && kill(pid, 0) == 0;
}

/* External mode: natsync-agent as a secondary process of gateway id,
 * started the way operators do, with deploy/agent-secondary.sh. */
static pid_t start_agent(char id)
{
	char ini[32], text[1024], pidf[32], log[32];
	pid_t pid;

	snprintf(ini, sizeof(ini), "agent%c.ini", id);
	snprintf(pidf, sizeof(pidf), "agent%c.pid", id);
	snprintf(log, sizeof(log), "agent%c.log", id);
	snprintf(text, sizeof(text),
		 "[agent]\ngateway_id = %d\nprogress_ms = 0\n"
		 "[store]\nseeds = 127.0.0.1:%d\n"
		 "[active]\nflush_us = 200\n"
		 "[rings]\nlanes = 1\n",
		 id == 'A' ? 1 : 2, STORE_PORT);
	nst_write_file(nst_run_path(ini), text);
	nst_sh("%s -c %s --prefix nstfo%c --pages 256 --agent %s "
	       ">>%s 2>&1 & echo $! >%s",
	       nst_src("deploy/agent-secondary.sh"), nst_run_path(ini), id,
	       nst_build("tools/natsync-agent"), nst_run_path(log),
	       nst_run_path(pidf));
	pid = (pid_t)nst_read_pid(nst_run_path(pidf));
	nsdp_sleep_ms(500);
	cr_assert(alive(pid), "agent %c did not start; see %s", id,
		  nst_run_path(log));
	return pid;
}

static void stop_pid(pid_t *pid, int sig)
{
	if (*pid > 0) {
		kill(*pid, sig);
		for (int i = 0; i < 100 && alive(*pid); i++)
			nsdp_sleep_ms(50);
		kill(*pid, SIGKILL);
	}
	*pid = 0;
}

static void fixture_fini(void)
{
	__atomic_store_n(&net.stop, 1, __ATOMIC_RELEASE);
	stop_pid(&gw_a, SIGKILL);
	stop_pid(&gw_b, SIGTERM);
	stop_pid(&agent_a, SIGTERM);
	stop_pid(&agent_b, SIGTERM);
	nst_store_stop(STORE_PORT);
	net_teardown();
	/* A gateway killed with SIGKILL leaves its hugepage files behind:
	 * give the pages back. */
	nst_sh("for m in $(awk '$3 == \"hugetlbfs\" { print $2 }' "
	       "/proc/mounts); do rm -f \"$m\"/nstfo[AB]map_*; done; true");
}

TestSuite(failover, .fini = fixture_fini, .timeout = 240);

/* Run a keepalived notify for gateway id; its exit status. */
static int keepalived_notify(char id, const char *state)
{
	return nst_sh("%s -S %s -g %s INSTANCE NAT %s >>%s 2>&1",
		      nst_src("deploy/keepalived-notify.sh"),
		      nst_run_path(id == 'A' ? "a.sock" : "b.sock"),
		      nst_build("gateway/natsync-gateway"), state,
		      nst_run_path("notify.out"));
}

/* Wait until everything sent so far is echoed, plus more bytes and UDP
 * replies: the flows are alive. */
static int flows_progress(uint64_t more_bytes, uint64_t more_udp, double secs)
{
	uint64_t sent = LOAD(tcp_sent), udp = LOAD(udp_replies);

	return WAIT_FOR(LOAD(tcp_echoed) >= sent + more_bytes &&
				LOAD(udp_replies) >= udp + more_udp,
			secs);
}

static void failover_scenario(const char *name)
{
	pthread_t server, client;
	char reply[4096];
	struct sockaddr_in udp_before, tcp_peer;
	uint64_t echoed_before, udp_before_n, tcp_sent_at_kill;
	long epoch_a, epoch_b;
	char addr[INET_ADDRSTRLEN];
	int rc;

	nst_need_root("needs root for network namespaces");
	nst_run_dir_make(name);
	net_setup();
	if (external)
		cr_assert_eq(nst_sh("%s -n 256 >/dev/null",
				    nst_src("deploy/hugepages.sh")),
			     0, "cannot reserve hugepages");
	cr_assert_eq(nst_store_start(STORE_PORT, 3, 0), 0);
	write_gateway_config('A');
	write_gateway_config('B');
	gw_a = start_gateway('A', "");
	gw_b = start_gateway('B', "");
	cr_assert(WAIT_FOR(status_has('A', "mode=active"), 20),
		  "gateway A never became active; see %s",
		  nst_run_path("gwA.log"));
	cr_assert(WAIT_FOR(status_has('B', "synced=yes"), 20),
		  "gateway B never loaded the table; see %s",
		  nst_run_path("gwB.log"));
	cr_assert(status_has('B', "mode=standby"));
	epoch_a = status_value('A', "epoch");
	cr_assert_gt(epoch_a, 0);
	if (external) {
		agent_a = start_agent('A');
		agent_b = start_agent('B');
	}

	pthread_create(&server, NULL, server_main, NULL);
	pthread_create(&client, NULL, client_main, NULL);
	cr_assert(WAIT_FOR(LOAD(tcp_echoed) >= 640 && LOAD(udp_replies) >= 20,
			   20),
		  "no traffic through gateway A: tcp echoed %lu, udp %lu "
		  "(server: %lu accepts, %lu datagrams); A: %s",
		  (unsigned long)LOAD(tcp_echoed),
		  (unsigned long)LOAD(udp_replies),
		  (unsigned long)LOAD(accepts),
		  (unsigned long)LOAD(udp_received),
		  (ctl('A', "stats", reply, sizeof(reply)), reply));
	/* B holds both sessions before A dies. */
	cr_assert(WAIT_FOR(status_value('B', "sessions") >= 2, 10),
		  "standby B did not receive the sessions");

	udp_before = net.udp_sources[0];
	cr_assert_eq(LOAD(n_udp_sources), 1);
	cr_assert_eq(LOAD(accepts), 1);

	kill(gw_a, SIGKILL);
	waitpid(gw_a, NULL, 0);
	gw_a = 0;
	tcp_sent_at_kill = LOAD(tcp_sent);
	nsdp_sleep_ms(300);
	echoed_before = LOAD(tcp_echoed);
	udp_before_n = LOAD(udp_replies);

	rc = keepalived_notify('B', "MASTER");
	cr_assert_eq(rc, 0, "promotion through the keepalived hook failed");
	cr_assert(status_has('B', "mode=active"));
	epoch_b = status_value('B', "epoch");
	cr_assert_gt(epoch_b, epoch_a, "a promotion must raise the epoch");

	/* Everything sent before the kill comes back, and more after it. */
	cr_assert(WAIT_FOR(LOAD(tcp_echoed) >= tcp_sent_at_kill + 640 &&
				   LOAD(udp_replies) >= udp_before_n + 20,
			   30),
		  "after failover: tcp echoed %lu (sent %lu at the kill, %lu "
		  "echoed then), udp replies %lu (was %lu); B: %s",
		  (unsigned long)LOAD(tcp_echoed),
		  (unsigned long)tcp_sent_at_kill, (unsigned long)echoed_before,
		  (unsigned long)LOAD(udp_replies), (unsigned long)udp_before_n,
		  (ctl('B', "stats", reply, sizeof(reply)), reply));
	/* B forwarded with the replicated sessions. */
	cr_expect_eq(stat_value('B', "nat.created"), 0,
		     "B created sessions for flows it should have had");
	cr_expect_gt(stat_value('B', "nat.tx_outside"), 0);
	cr_expect_gt(stat_value('B', "nat.tx_inside"), 0);

	/* The old active comes back as a standby and loads B's table. A's
	 * old agent must be gone first: it exits once its gateway is. */
	if (external) {
		cr_assert(WAIT_FOR(!alive(agent_a), 10),
			  "agent A outlived its gateway");
		agent_a = 0;
	}
	gw_a = start_gateway('A', "--role standby");
	cr_assert(WAIT_FOR(status_has('A', "synced=yes") &&
				   status_value('A', "sessions") >= 2,
			   20),
		  "the restarted gateway A did not resync as a standby");
	cr_assert(status_has('A', "mode=standby"));
	if (external)
		agent_a = start_agent('A');

	/* Failback, as keepalived does it: B demoted, then A promoted. The
	 * same connection goes on through A with B's sessions. */
	cr_assert_eq(keepalived_notify('B', "BACKUP"), 0);
	cr_assert(status_has('B', "mode=standby"));
	cr_assert_eq(keepalived_notify('A', "MASTER"), 0);
	cr_assert(status_has('A', "mode=active"));
	cr_assert_gt(status_value('A', "epoch"), epoch_b,
		     "a promotion must raise the epoch");
	cr_assert(flows_progress(640, 20, 30),
		  "after failback: tcp echoed %lu of %lu sent; A: %s",
		  (unsigned long)LOAD(tcp_echoed),
		  (unsigned long)LOAD(tcp_sent),
		  (ctl('A', "stats", reply, sizeof(reply)), reply));
	cr_expect_eq(stat_value('A', "nat.created"), 0,
		     "A created sessions for flows B had replicated");
	/* The demoted B resyncs as a standby. */
	cr_expect(WAIT_FOR(status_has('B', "synced=yes") &&
				   status_value('B', "sessions") >= 2,
			   20),
		  "the demoted gateway B did not resync");

	__atomic_store_n(&net.stop, 1, __ATOMIC_RELEASE);
	pthread_join(client, NULL);
	pthread_join(server, NULL);

	cr_expect_eq(LOAD(tcp_mismatch), 0, "echoed bytes differ from sent");
	cr_expect_eq(LOAD(tcp_closed), 0, "the TCP connection was closed");
	cr_expect_eq(LOAD(accepts), 1, "the client had to connect again");
	/* One translated source per flow, the same before and after. */
	cr_expect_eq(LOAD(n_udp_sources), 1,
		     "the server saw the UDP flow from %lu sources",
		     (unsigned long)LOAD(n_udp_sources));
	cr_expect_eq(net.udp_sources[0].sin_addr.s_addr,
		     udp_before.sin_addr.s_addr);
	cr_expect_eq(net.udp_sources[0].sin_port, udp_before.sin_port);
	tcp_peer = net.tcp_peer;
	inet_ntop(AF_INET, &tcp_peer.sin_addr, addr, sizeof(addr));
	cr_expect(strcmp(addr, POOL_FIRST) == 0 || strcmp(addr, POOL_LAST) == 0,
		  "the server saw the TCP client as %s, not a pool address",
		  addr);
}

Test(failover, tcp_and_udp_flows_survive_the_active_gateways_death)
{
	external = 0;
	failover_scenario("failover-threads");
}

Test(failover, flows_survive_with_the_agents_as_secondary_processes)
{
	external = 1;
	failover_scenario("failover-external");
}
