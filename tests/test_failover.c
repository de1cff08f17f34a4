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
 * NAT64 and NAT66, in the first of those tests: the client also has
 * fd00:1::2/64 and routes to 64:ff9b::/96 and 2001:db8:2::/64 via the
 * gateways' inside_address6 fd00:1::1, the server also has
 * 2001:db8:2::2/64 beside the gateways' outside_address6 2001:db8:2::1,
 * and the client's TCP connection and UDP flow to the IPv4 server
 * through NAT64, and another pair to the IPv6 server through NAT66, go
 * the same way. At the kill the IPv6 client falls silent and, once B is
 * promoted, the server speaks first on each TCP connection (B's first
 * packet of it comes from the outside, to a host it has to solicit), then
 * the client goes on.
 *
 * Both ways to run the agent: threads inside the gateways, and
 * natsync-agent secondary processes attached to the gateways' rings
 * (hugepages, started with deploy/agent-secondary.sh).
 *
 * Split brain: B is promoted while A lives on, cut off from B but not from
 * the client, the server or the store. The store must keep B's view (a
 * fresh standby cold-loads it, natsync-verify compares) and A must demote
 * itself. With the store stopped at the failover B forwards at once on a
 * provisional epoch; a gateway that may make none is refused.
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
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_fence.h"
#include "nsa_host.h"
#include "nsdp_time.h"
#include "nst_agents.h"
#include "nst_netns.h"
#include "nst_session.h"
#include "nst_skip.h"
#include "nst_stats.h"
#include "nst_store.h"
#include "nst_storewrite.h"

#define STORE_PORT 7800
#define TCP_PORT 5001
#define UDP_PORT 5002
#define SERVER_ADDR "198.51.100.2"
#define POOL_FIRST "198.51.100.10"
#define POOL_LAST "198.51.100.11"
#define TICK_MS 20
#define MAX_SOURCES 8
/* NAT64: the server's ports for the IPv6 client's flows, and the
 * addresses (the server as the client sees it: 64:ff9b::198.51.100.2). */
#define TCP6_PORT 5011
#define UDP6_PORT 5012
#define CLIENT6_ADDR "fd00:1::2"
#define INSIDE6_ADDR "fd00:1::1"
#define SERVER6_ADDR "64:ff9b::c633:6402"
/* NAT66: the IPv6 server's ports and address, and the gateways'
 * outside_address6 (the server's neighbour, on its link). */
#define TCP66_PORT 5021
#define UDP66_PORT 5022
#define SERVER66_ADDR "2001:db8:2::2"
#define OUTSIDE6_ADDR "2001:db8:2::1"

/* What the client and server threads saw; written by them, read by the
 * test with atomics. */
static struct {
	int stop;
	/* client */
	uint64_t tcp_sent, tcp_echoed; /* bytes */
	uint64_t tcp_mismatch, tcp_closed;
	uint64_t udp_sent, udp_replies;
	/* when the last UDP reply came, and the longest time between two
	 * replies since the test last cleared it (us): the outage */
	uint64_t udp_last_us, udp_gap_us;
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

/* Set by a test: the gateways also do NAT64 and NAT66, the client and the
 * server have IPv6. */
static int nat64;

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
		/* DPDK's af_packet names its fanout group (pid ^ ifindex)
		 * & 0xffff, and a group on another device is refused
		 * (EINVAL): with A's and B's pids and ifindexes a few apart
		 * that happened. A's and B's ifindexes differ in bit 15, as
		 * two pids started together do not. */
		"pair() { ip link add $1 index $4 type veth peer name $2 "
		"netns $3\n"
		"  sysctl -qw net.ipv6.conf.$1.disable_ipv6=1\n"
		"  ip link set $1 up\n"
		"  ip -n $3 link set $2 master br0 up; }\n"
		"pair nstfoAi ca nstfo-c 20001\n"
		"pair nstfoBi cb nstfo-c 52769\n"
		"pair nstfoAo sa nstfo-s 20002\n"
		"pair nstfoBo sb nstfo-s 52770\n"
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
	if (!nat64)
		return;
	rc = nst_sh(
		"set -e\n"
		"ip netns exec nstfo-c sysctl -qw "
		"net.ipv6.conf.br0.disable_ipv6=0\n"
		"ip -n nstfo-c addr add " CLIENT6_ADDR "/64 dev br0 nodad\n"
		"ip -n nstfo-c -6 route add 64:ff9b::/96 via " INSIDE6_ADDR "\n"
		"ip -n nstfo-c -6 route add 2001:db8:2::/64 via " INSIDE6_ADDR
		"\n"
		"ip netns exec nstfo-s sysctl -qw "
		"net.ipv6.conf.br0.disable_ipv6=0\n"
		"ip -n nstfo-s addr add " SERVER66_ADDR "/64 dev br0 nodad\n");
	cr_assert_eq(rc, 0, "cannot give the client and the server IPv6");
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
	nst_enter_netns("nstfo-s");
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
	nst_enter_netns("nstfo-c");
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
		    recv(ufd, buf, sizeof(buf), 0) > 0) {
			uint64_t now = (uint64_t)(nsdp_now_s() * 1e6);
			uint64_t last = LOAD(udp_last_us);

			if (last && now - last > LOAD(udp_gap_us))
				__atomic_store_n(&net.udp_gap_us, now - last,
						 __ATOMIC_RELEASE);
			__atomic_store_n(&net.udp_last_us, now,
					 __ATOMIC_RELEASE);
			ADD(udp_replies, 1);
		}
	}
	close(tfd);
	close(ufd);
	return NULL;
}

/* New UDP flows from the client, one more socket (a new source port) every
 * BURST_EVERY_MS until BURST_FLOWS, each sending a datagram per tick, for
 * burst.secs once the test sets burst.go: sessions the gateway that
 * forwards them has to create. */
#define BURST_FLOWS 30
#define BURST_EVERY_MS 100

static struct {
	int go;
	double secs;
	uint16_t ports[BURST_FLOWS]; /* the flows' source ports, host order */
	uint64_t n_ports;
	uint64_t sent, replies;
} burst;

static void *burst_main(void *arg)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	int fds[BURST_FLOWS];
	size_t n = 0;
	double until;

	(void)arg;
	nst_enter_netns("nstfo-c");
	inet_pton(AF_INET, SERVER_ADDR, &to.sin_addr);
	to.sin_port = htons(UDP_PORT);
	/* The test starts the burst within its own bound. */
	for (int i = 0;
	     i < 1200 && !__atomic_load_n(&burst.go, __ATOMIC_ACQUIRE); i++)
		nsdp_sleep_ms(50);
	until = nsdp_now_s() + burst.secs;
	/* Every flow opens even when the ticks run late under load (30 ticks
	 * of 100 ms fill the 3 s burst exactly), at most 5 s past it. */
	while ((nsdp_now_s() < until || n < BURST_FLOWS) &&
	       nsdp_now_s() < until + 5 && !LOAD(stop)) {
		char buf[64];

		if (n < BURST_FLOWS) {
			struct sockaddr_in me;
			socklen_t len = sizeof(me);
			int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

			if (fd < 0)
				abort();
			if (connect(fd, (struct sockaddr *)&to, sizeof(to)) !=
				    0 ||
			    getsockname(fd, (struct sockaddr *)&me, &len) != 0)
				abort();
			fds[n] = fd;
			burst.ports[n++] = ntohs(me.sin_port);
			__atomic_store_n(&burst.n_ports, n, __ATOMIC_RELEASE);
		}
		for (size_t i = 0; i < n; i++) {
			if (send(fds[i], "new", 3, 0) == 3)
				__atomic_add_fetch(&burst.sent, 1,
						   __ATOMIC_RELEASE);
			while (recv(fds[i], buf, sizeof(buf), 0) > 0)
				__atomic_add_fetch(&burst.replies, 1,
						   __ATOMIC_RELEASE);
		}
		nsdp_sleep_ms(BURST_EVERY_MS);
	}
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	return NULL;
}

/* ---- IPv6 flows: an IPv6 client, through NAT64 and NAT66 ------------------ */

/* What one of the IPv6 client's pairs of flows (a TCP connection and a UDP
 * flow) saw; its thread writes, the test reads with atomics. quiet: the
 * client sends nothing; speak: the server sends SPEAK_BYTES of its own on
 * the TCP connection (once). The server listens on family (AF_INET: the
 * IPv4 server reached through NAT64; AF_INET6: the IPv6 server reached
 * through NAT66) and the client connects to server_addr. */
#define SPEAK_BYTES 32

struct flow6 {
	const char *name;
	int family;
	const char *server_addr;
	uint16_t tcp_port, udp_port;
	pthread_t thread;
	int quiet, speak;
	/* the value of quiet the client last acted on, stored after its
	 * send: once it reads 1, nothing more is on its way */
	int quiet_seen;
	uint64_t tcp_sent, tcp_echoed, tcp_mismatch, tcp_closed, accepts;
	uint64_t udp_sent, udp_replies;
	uint64_t spoken, heard; /* server-first bytes sent, received */
	uint64_t n_udp_sources;
	struct sockaddr_storage tcp_peer, udp_source;
};

static struct flow6 f6[2];
#define N_FLOWS6 (sizeof(f6) / sizeof(f6[0]))

#define LOAD6(fl, f) __atomic_load_n(&(fl)->f, __ATOMIC_ACQUIRE)
#define ADD6(fl, f, v) __atomic_add_fetch(&(fl)->f, (v), __ATOMIC_RELEASE)

/* The server side, sockets made in nstfo-s: echo TCP (and speak first
 * when told), echo UDP noting its translated source. */
struct server6 {
	int lfd, ufd, cfd;
};

static void server6_step(struct flow6 *fl, struct server6 *sv,
			 const struct pollfd *p)
{
	char buf[4096];
	ssize_t n;

	if (p[0].revents & POLLIN) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = accept(sv->lfd, (struct sockaddr *)&peer, &len);

		if (fd >= 0) {
			if (sv->cfd >= 0)
				close(sv->cfd);
			sv->cfd = fd;
			fl->tcp_peer = peer;
			ADD6(fl, accepts, 1);
		}
	}
	if (p[1].revents & POLLIN) {
		struct sockaddr_storage from;
		socklen_t len = sizeof(from);

		memset(&from, 0, sizeof(from));
		n = recvfrom(sv->ufd, buf, sizeof(buf), 0,
			     (struct sockaddr *)&from, &len);
		if (n > 0) {
			if (LOAD6(fl, n_udp_sources) == 0 ||
			    memcmp(&from, &fl->udp_source, len) != 0) {
				fl->udp_source = from;
				ADD6(fl, n_udp_sources, 1);
			}
			sendto(sv->ufd, buf, (size_t)n, 0,
			       (struct sockaddr *)&from, len);
		}
	}
	if (sv->cfd >= 0 && (p[2].revents & (POLLIN | POLLHUP))) {
		n = read(sv->cfd, buf, sizeof(buf));
		if (n <= 0 || write(sv->cfd, buf, (size_t)n) != n) {
			close(sv->cfd);
			sv->cfd = -1;
		}
	}
	if (sv->cfd >= 0 && LOAD6(fl, speak) && LOAD6(fl, spoken) == 0) {
		char msg[SPEAK_BYTES];

		memset(msg, 's', sizeof(msg));
		if (write(sv->cfd, msg, sizeof(msg)) == (ssize_t)sizeof(msg))
			ADD6(fl, spoken, sizeof(msg));
	}
}

/* The client side, sockets made in nstfo-c: a tick of stream bytes and a
 * ping, unless quiet; what comes back is checked. Server-first bytes come
 * before any echo of what was sent after them, as the client is quiet
 * while the server speaks. */
static void client6_step(struct flow6 *fl, int tfd, int ufd, double *next_tick,
			 const struct pollfd *p)
{
	uint8_t buf[4096];
	double t = nsdp_now_s();
	int quiet = LOAD6(fl, quiet);

	if (t >= *next_tick && !quiet) {
		uint8_t msg[32];
		uint64_t base = LOAD6(fl, tcp_sent);
		ssize_t n;

		for (size_t i = 0; i < sizeof(msg); i++)
			msg[i] = stream_byte(base + i);
		n = send(tfd, msg, sizeof(msg), MSG_NOSIGNAL);
		if (n > 0)
			ADD6(fl, tcp_sent, (uint64_t)n);
		if (send(ufd, "ping6", 5, 0) == 5)
			ADD6(fl, udp_sent, 1);
		*next_tick = t + TICK_MS / 1000.0;
	}
	__atomic_store_n(&fl->quiet_seen, quiet, __ATOMIC_RELEASE);
	if (p[3].revents & (POLLIN | POLLHUP | POLLERR)) {
		ssize_t n = recv(tfd, buf, sizeof(buf), 0);

		if (n == 0 || (n < 0 && errno != EAGAIN))
			ADD6(fl, tcp_closed, 1);
		for (ssize_t i = 0; i < n; i++) {
			if (LOAD6(fl, heard) < LOAD6(fl, spoken) &&
			    LOAD6(fl, tcp_echoed) == LOAD6(fl, tcp_sent)) {
				if (buf[i] != 's')
					ADD6(fl, tcp_mismatch, 1);
				ADD6(fl, heard, 1);
				continue;
			}
			if (buf[i] != stream_byte(LOAD6(fl, tcp_echoed)))
				ADD6(fl, tcp_mismatch, 1);
			ADD6(fl, tcp_echoed, 1);
		}
	}
	if ((p[4].revents & POLLIN) && recv(ufd, buf, sizeof(buf), 0) > 0)
		ADD6(fl, udp_replies, 1);
}

/* A listening TCP and a bound UDP socket of fl's family on its ports (in
 * the namespace the thread is in). */
static void server6_open(const struct flow6 *fl, struct server6 *sv)
{
	struct sockaddr_storage sa;
	socklen_t len;
	int one = 1;

	memset(&sa, 0, sizeof(sa));
	sa.ss_family = (sa_family_t)fl->family;
	len = fl->family == AF_INET ? sizeof(struct sockaddr_in)
				    : sizeof(struct sockaddr_in6);
	sv->lfd = socket(fl->family, SOCK_STREAM, 0);
	sv->ufd = socket(fl->family, SOCK_DGRAM, 0);
	setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* sin_port and sin6_port lie at the same offset */
	((struct sockaddr_in *)&sa)->sin_port = htons(fl->tcp_port);
	if (bind(sv->lfd, (struct sockaddr *)&sa, len) != 0 ||
	    listen(sv->lfd, 4) != 0)
		abort();
	((struct sockaddr_in *)&sa)->sin_port = htons(fl->udp_port);
	if (bind(sv->ufd, (struct sockaddr *)&sa, len) != 0)
		abort();
}

/* Both ends in one thread: a socket keeps the namespace it was made in. */
static void *flow6_main(void *arg)
{
	struct flow6 *fl = arg;
	struct sockaddr_in6 to = {.sin6_family = AF_INET6};
	struct server6 sv = {.cfd = -1};
	double next_tick = 0;
	int one = 1, tfd = -1, ufd;

	nst_enter_netns("nstfo-s");
	server6_open(fl, &sv);

	nst_enter_netns("nstfo-c");
	inet_pton(AF_INET6, fl->server_addr, &to.sin6_addr);
	to.sin6_port = htons(fl->udp_port);
	ufd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (ufd < 0 || connect(ufd, (struct sockaddr *)&to, sizeof(to)) != 0)
		abort();
	/* Non-blocking connect: the server side accepts in the same loop. */
	to.sin6_port = htons(fl->tcp_port);
	tfd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(tfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(tfd, (struct sockaddr *)&to, sizeof(to)) != 0 &&
	    errno != EINPROGRESS)
		abort();

	while (!LOAD(stop)) {
		struct pollfd p[5] = {{sv.lfd, POLLIN, 0},
				      {sv.ufd, POLLIN, 0},
				      {sv.cfd, POLLIN, 0},
				      {tfd, POLLIN, 0},
				      {ufd, POLLIN, 0}};

		if (poll(p, 5, TICK_MS) < 0)
			break;
		server6_step(fl, &sv, p);
		if (LOAD6(fl, accepts) > 0)
			client6_step(fl, tfd, ufd, &next_tick, p);
	}
	close(tfd);
	close(ufd);
	if (sv.cfd >= 0)
		close(sv.cfd);
	close(sv.lfd);
	close(sv.ufd);
	return NULL;
}

/* ---- gateways --------------------------------------------------------------- */

/* Set by each test: 1 when the agents run as DPDK secondary processes. */
static int external;
/* The gateways' [store] layout (schema/FORMAT.md): the environment's
 * (nst_layout_one) unless a test sets it. */
NST_LAYOUT_VAR(layout)
/* [gateway] promote_wait_ms: the default (50), or longer where a test is
 * about the fence a store epoch raises at once, not about a store that
 * does not answer (on a loaded machine 50 ms may pass). */
static unsigned int promote_wait_ms = 50;
/* [gateway] defer and defer_max_us (0: defer off), [standby]
 * table_capacity and [gateway] udp_timeout, set by the defer test. */
static unsigned int defer_max_us;
static unsigned int table_capacity = 4096, udp_timeout = 300;

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
		 "[store]\nseeds = 127.0.0.1:%d\nlayout = %s\n"
		 "[active]\nflush_us = 200\n"
		 "[rings]\nlanes = 1\nring_size = 4096\n"
		 "[standby]\ntable_capacity = %u\n%s"
		 "[gateway]\n"
		 "inside_port = net_af_packet0\n"
		 "outside_port = net_af_packet1\n"
		 "inside_address = 10.1.0.1\n%s"
		 "pool = " POOL_FIRST "-" POOL_LAST "\n"
		 "ports = 20000-29999\n"
		 "control_socket = %s\n"
		 "idle_sleep_us = 200\n"
		 "mbufs = 4095\n"
		 "promote_wait_ms = %u\n"
		 "defer = %s\n"
		 "defer_max_us = %u\n"
		 "udp_timeout = %u\n"
		 "agent = %s\n",
		 id == 'A' ? "active" : "standby", id == 'A' ? 1 : 2, eal,
		 STORE_PORT, layout, table_capacity,
		 nat64 ? "table_capacity_v6 = 1024\n" : "",
		 nat64 ? "inside_address6 = " INSIDE6_ADDR
			 "\noutside_address6 = " OUTSIDE6_ADDR "\n"
		       : "",
		 nst_run_path(id == 'A' ? "a.sock" : "b.sock"), promote_wait_ms,
		 defer_max_us ? "yes" : "no",
		 defer_max_us ? defer_max_us : 2000, udp_timeout,
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

/* How long one control command took on gateway id's socket, asked
 * directly (no program started), in ms; -1 without a reply. */
static double ctl_ms(char id, const char *cmd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	double t0 = nsdp_now_s();
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	size_t got = 0;
	char buf[8192];
	ssize_t n;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s",
		 nst_run_path(id == 'A' ? "a.sock" : "b.sock"));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    dprintf(fd, "%s\n", cmd) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (got < sizeof(buf) &&
	       (n = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	close(fd);
	return got > 0 ? 1e3 * (nsdp_now_s() - t0) : -1;
}

/* Gateway id's log, in the run directory. */
static const char *gw_log(char id)
{
	return id == 'A' ? "gwA.log" : "gwB.log";
}

static int status_has(char id, const char *what)
{
	char buf[4096];

	return ctl(id, "status", buf, sizeof(buf)) == 0 && strstr(buf, what);
}

/* The number after "<sep>name=" in a control reply, or -1: stats are one
 * per line, status fields separated by spaces. */
static long reply_value(const char *buf, char sep, const char *name)
{
	char key[128];
	const char *at;

	snprintf(key, sizeof(key), "%c%s=", sep, name);
	at = strstr(buf, key);
	return at ? atol(at + strlen(key)) : -1;
}

static long ctl_value(char id, const char *cmd, char sep, const char *name)
{
	char buf[8192];

	if (ctl(id, cmd, buf, sizeof(buf)) != 0)
		return -1;
	return reply_value(buf, sep, name);
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

static pid_t gw_a, gw_b, agent_a, agent_b, fresh_standby;

/* Not a zombie either: the programs run in the background of a shell
 * that exited, and the init that reaps them may take seconds. */
static int alive(pid_t pid)
{
	return pid > 0 && nst_running(pid);
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
		 "[store]\nseeds = 127.0.0.1:%d\nlayout = %s\n"
		 "[active]\nflush_us = 200\n"
		 "[rings]\nlanes = 1\n",
		 id == 'A' ? 1 : 2, STORE_PORT, layout);
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

/* Send sig to the store's masters (only the one that owns natsync:epoch
 * when epoch_master_only), by their pid files. */
static void store_signal(int sig, int epoch_master_only)
{
	/* Found while the store answers (SIGSTOP first), kept for SIGCONT. */
	static int port;

	if (!epoch_master_only) {
		port = 0;
	} else if (sig == SIGSTOP) {
		static struct nsa_topology topo;
		struct nsa_store_conf sc = {.n_seeds = 1,
					    .connect_timeout_ms = 1000};
		char err[256];

		snprintf(sc.seeds[0].host, sizeof(sc.seeds[0].host),
			 "127.0.0.1");
		sc.seeds[0].port = STORE_PORT;
		cr_assert_eq(nsa_topology_fetch(&sc, &topo, err, sizeof(err)),
			     0, "%s", err);
		port = topo
			       .nodes[topo.slot_node[ns_key_slot(
				       NSA_EPOCH_KEY, strlen(NSA_EPOCH_KEY))]]
			       .addr.port;
	}
	if (port)
		cr_assert_eq(nst_sh("kill -%d $(cat %s/%d/%d/redis.pid)", sig,
				    nst_build("tests/run"), STORE_PORT, port),
			     0);
	else
		nst_sh("for f in %s/%d/*/redis.pid; do [ -f \"$f\" ] && "
		       "kill -%d $(cat \"$f\"); done; true",
		       nst_build("tests/run"), STORE_PORT, sig);
}

static void keepalived_stop(void);

static void fixture_fini(void)
{
	__atomic_store_n(&net.stop, 1, __ATOMIC_RELEASE);
	keepalived_stop();
	stop_pid(&gw_a, SIGKILL);
	stop_pid(&gw_b, SIGTERM);
	stop_pid(&agent_a, SIGTERM);
	stop_pid(&agent_b, SIGTERM);
	stop_pid(&fresh_standby, SIGTERM);
	store_signal(SIGCONT, 0);
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

/* ---- keepalived ------------------------------------------------------------ */

/* Elect the active gateway with keepalived itself (scenario_start). */
static int with_keepalived;

/* keepalived of gateway id (A or B) in a namespace of its own, nstfo-vA
 * or nstfo-vB, VRRP over a veth between the two (10.9.0.1 and .2,
 * unicast), with the configuration deploy/ ships: its paths replaced by
 * the test's, A at priority 150 and B at 100, both BACKUP and nopreempt. */
/* keepalived with the shipped configuration, but the track scripts'
 * timeouts raised (natsync_alive 5 s, natsync_ready 6 s; under
 * AddressSanitizer 20 s each, and keepalived-track.sh's own bound on its
 * `--ctl health` 15 s): a sanitizer build's `--ctl` takes over a second
 * to start on a loaded machine (a CI run under AddressSanitizer saw one
 * take more than 5 s beside the phase's other tests and both gateways'
 * polling lcores), and keepalived would count the slow answer as a
 * failure. A killed gateway still fails its script at once (its socket
 * refuses). */
static void keepalived_start(char id)
{
	int me = id == 'A' ? 1 : 2;
	int alive_s = NST_ASAN ? 20 : 5, ready_s = NST_ASAN ? 20 : 6;
	char conf[64], log[64], pid[64], track_t[16] = "";

	if (id == 'A')
		cr_assert_eq(
			nst_sh("set -e; for g in A B; do ip netns del nstfo-v$g "
			       "2>/dev/null || true; ip netns add nstfo-v$g; "
			       "ip -n nstfo-v$g link set lo up; done\n"
			       "ip link add vA0 netns nstfo-vA type veth peer "
			       "name vB0 netns nstfo-vB\n"
			       "ip -n nstfo-vA addr add 10.9.0.1/24 dev vA0\n"
			       "ip -n nstfo-vB addr add 10.9.0.2/24 dev vB0\n"
			       "ip -n nstfo-vA link set vA0 up\n"
			       "ip -n nstfo-vB link set vB0 up"),
			0, "cannot build the VRRP link");
	snprintf(conf, sizeof(conf), "keepalived%c.conf", id);
	snprintf(log, sizeof(log), "keepalived%c.log", id);
	snprintf(pid, sizeof(pid), "keepalived%c.pid", id);
	if (NST_ASAN)
		snprintf(track_t, sizeof(track_t), " -t 15");
	cr_assert_eq(
		nst_sh("{ printf 'global_defs {\n    router_id nstfo-%c\n    "
		       "script_user root\n}\n'; sed "
		       "-e 's|/usr/local/bin/natsync-gateway|%s|' "
		       "-e 's|/usr/libexec/natsync/\\([a-z-]*\\.sh\\) -S "
		       "/run/natsync/gateway.sock|%s/deploy/\\1 -S %s -g %s|' "
		       "-e 's|\\(keepalived-track\\.sh[^\"]*\\)\"|\\1%s\"|' "
		       "-e 's|/run/natsync/gateway.sock|%s|' "
		       "-e 's|interface eth0 .*|interface v%c0\\n    "
		       "unicast_src_ip 10.9.0.%d\\n    unicast_peer {\\n"
		       "        10.9.0.%d\\n    }|' "
		       "-e 's|priority 150|priority %d|' "
		       "-e 's|^\\( *\\)interval 1$|&\\n\\1timeout %d|' "
		       "-e 's|timeout 3$|timeout %d|' %s; } >%s",
		       id, nst_build("gateway/natsync-gateway"), nst_src(""),
		       nst_run_path(me == 1 ? "a.sock" : "b.sock"),
		       nst_build("gateway/natsync-gateway"), track_t,
		       nst_run_path(me == 1 ? "a.sock" : "b.sock"), id, me,
		       3 - me, me == 1 ? 150 : 100, alive_s, ready_s,
		       nst_src("deploy/keepalived.conf.example"),
		       nst_run_path(conf)),
		0);
	cr_assert_eq(nst_sh("ip netns exec nstfo-v%c keepalived -n -l -D -P "
			    "-f %s -p %s -r %s.vrrp >%s 2>&1 &",
			    id, nst_run_path(conf), nst_run_path(pid),
			    nst_run_path(pid), nst_run_path(log)),
		     0);
}

/* Stop both keepalived (before the gateways: nothing promotes during the
 * teardown) and remove their namespaces. */
static void keepalived_stop(void)
{
	if (!with_keepalived)
		return;
	for (const char *f = "AB"; *f; f++) {
		char pid[64];

		snprintf(pid, sizeof(pid), "keepalived%c.pid", *f);
		nst_sh("f=%s; [ -f $f ] || exit 0; p=$(cat $f); kill $p "
		       "2>/dev/null; for i in $(seq 50); do kill -0 $p "
		       "2>/dev/null || exit 0; sleep 0.1; done; kill -9 $p",
		       nst_run_path(pid));
	}
	nst_sh("ip netns del nstfo-vA 2>/dev/null; ip netns del nstfo-vB "
	       "2>/dev/null; true");
	with_keepalived = 0;
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

/* The IPv6 client's flows, through A's NAT64 to the IPv4 server and
 * through A's NAT66 to the IPv6 server: the four sessions (and only they)
 * in B's IPv6 table. */
static void flows6_start(void)
{
	static const struct {
		const char *name, *server_addr;
		int family;
		uint16_t tcp_port, udp_port;
	} kinds[N_FLOWS6] = {
		{"NAT64", SERVER6_ADDR, AF_INET, TCP6_PORT, UDP6_PORT},
		{"NAT66", SERVER66_ADDR, AF_INET6, TCP66_PORT, UDP66_PORT},
	};
	char reply[4096];
	size_t i;

	memset(f6, 0, sizeof(f6));
	for (i = 0; i < N_FLOWS6; i++) {
		struct flow6 *fl = &f6[i];

		fl->name = kinds[i].name;
		fl->server_addr = kinds[i].server_addr;
		fl->family = kinds[i].family;
		fl->tcp_port = kinds[i].tcp_port;
		fl->udp_port = kinds[i].udp_port;
		pthread_create(&fl->thread, NULL, flow6_main, fl);
	}
	for (i = 0; i < N_FLOWS6; i++) {
		struct flow6 *fl = &f6[i];

		cr_assert(WAIT_FOR(LOAD6(fl, tcp_echoed) >= 640 &&
					   LOAD6(fl, udp_replies) >= 20,
				   20),
			  "no %s traffic through gateway A: tcp echoed %lu, "
			  "udp %lu, accepts %lu; A: %s",
			  fl->name, (unsigned long)LOAD6(fl, tcp_echoed),
			  (unsigned long)LOAD6(fl, udp_replies),
			  (unsigned long)LOAD6(fl, accepts),
			  (ctl('A', "stats", reply, sizeof(reply)), reply));
	}
	cr_assert(WAIT_FOR(stat_value('B', "table.live_v6") == 4, 10),
		  "standby B's IPv6 table holds %ld sessions, not the 2 "
		  "NAT64 and 2 NAT66 ones",
		  stat_value('B', "table.live_v6"));
}

/* The IPv6 client falls silent once all it sent came back; the server
 * will speak first again when told. */
static void flows6_quiet(void)
{
	size_t i;

	for (i = 0; i < N_FLOWS6; i++) {
		struct flow6 *fl = &f6[i];

		__atomic_store_n(&fl->speak, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&fl->quiet, 1, __ATOMIC_RELEASE);
		/* A send that read quiet before it was set may still be on
		 * its way: wait until the client has read it set. */
		cr_assert(WAIT_FOR(LOAD6(fl, quiet_seen) &&
					   LOAD6(fl, tcp_echoed) ==
						   LOAD6(fl, tcp_sent),
				   5),
			  "%s: %lu of %lu bytes echoed before the move",
			  fl->name, (unsigned long)LOAD6(fl, tcp_echoed),
			  (unsigned long)LOAD6(fl, tcp_sent));
		__atomic_store_n(&fl->spoken, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&fl->heard, 0, __ATOMIC_RELEASE);
	}
}

/* On each pair of flows the server speaks first through gateway id, then
 * the client goes on: its bytes and pings come back. */
static void flows6_go_on_through(char id, const char *when)
{
	uint64_t sent[N_FLOWS6], udp[N_FLOWS6];
	char reply[4096];
	size_t i;

	for (i = 0; i < N_FLOWS6; i++)
		__atomic_store_n(&f6[i].speak, 1, __ATOMIC_RELEASE);
	for (i = 0; i < N_FLOWS6; i++) {
		struct flow6 *fl = &f6[i];

		cr_assert(WAIT_FOR(LOAD6(fl, heard) == SPEAK_BYTES, 15),
			  "%s: %s: the server's first %d bytes: %lu came "
			  "through %c: %s",
			  when, fl->name, SPEAK_BYTES,
			  (unsigned long)LOAD6(fl, heard), id,
			  (ctl(id, "stats", reply, sizeof(reply)), reply));
		sent[i] = LOAD6(fl, tcp_sent);
		udp[i] = LOAD6(fl, udp_replies);
		__atomic_store_n(&fl->quiet, 0, __ATOMIC_RELEASE);
	}
	for (i = 0; i < N_FLOWS6; i++) {
		struct flow6 *fl = &f6[i];

		cr_assert(
			WAIT_FOR(LOAD6(fl, tcp_echoed) >= sent[i] + 640 &&
					 LOAD6(fl, udp_replies) >= udp[i] + 20,
				 30),
			"%s: %s tcp echoed %lu (sent %lu), udp replies %lu "
			"(was %lu); %c: %s",
			when, fl->name, (unsigned long)LOAD6(fl, tcp_echoed),
			(unsigned long)sent[i],
			(unsigned long)LOAD6(fl, udp_replies),
			(unsigned long)udp[i], id,
			(ctl(id, "stats", reply, sizeof(reply)), reply));
	}
}

/* After the stop: on each pair, one connection, exactly the bytes sent
 * and the server's, one translated UDP source, a TCP peer from the pool
 * (NAT64) or outside_address6 (NAT66). */
static void flows6_end_whole(void)
{
	char addr[INET6_ADDRSTRLEN];
	size_t i;

	for (i = 0; i < N_FLOWS6; i++) {
		struct flow6 *fl = &f6[i];
		const struct sockaddr_storage *peer = &fl->tcp_peer;

		pthread_join(fl->thread, NULL);
		cr_expect_eq(LOAD6(fl, tcp_mismatch), 0, "%s: bytes differ",
			     fl->name);
		cr_expect_eq(LOAD6(fl, tcp_closed), 0,
			     "%s: the connection closed", fl->name);
		cr_expect_eq(LOAD6(fl, accepts), 1,
			     "%s: the client connected again", fl->name);
		cr_expect_eq(LOAD6(fl, heard), SPEAK_BYTES);
		cr_expect_eq(LOAD6(fl, n_udp_sources), 1,
			     "%s: the server saw the UDP flow from %lu sources",
			     fl->name, (unsigned long)LOAD6(fl, n_udp_sources));
		if (fl->family == AF_INET) {
			inet_ntop(AF_INET,
				  &((const struct sockaddr_in *)peer)->sin_addr,
				  addr, sizeof(addr));
			cr_expect(strcmp(addr, POOL_FIRST) == 0 ||
					  strcmp(addr, POOL_LAST) == 0,
				  "NAT64: the server saw the TCP client as %s",
				  addr);
		} else {
			inet_ntop(
				AF_INET6,
				&((const struct sockaddr_in6 *)peer)->sin6_addr,
				addr, sizeof(addr));
			cr_expect_str_eq(addr, OUTSIDE6_ADDR,
					 "NAT66: the server saw the TCP client "
					 "as %s",
					 addr);
		}
	}
}

/* The network, the store, A active and B a synced standby, the client's
 * TCP connection and UDP flow through A, both sessions on B; A's epoch. */
static long scenario_start(const char *name, pthread_t *server,
			   pthread_t *client)
{
	char reply[4096];
	long epoch_a;

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
	gw_a = start_gateway('A', with_keepalived ? "--role standby" : "");
	gw_b = start_gateway('B', "");
	if (with_keepalived) {
		/* Both standbys, loaded; A's keepalived first, B's once A is
		 * MASTER. Started together, the one whose first script answer
		 * came first could win: with nopreempt, priority decides only
		 * between two that start their master-down timers together,
		 * and under load B's ran out first. */
		cr_assert(WAIT_FOR(status_has('A', "synced=yes") &&
					   status_has('B', "synced=yes"),
				   20));
		keepalived_start('A');
		cr_assert(WAIT_FOR(status_has('A', "mode=active"), 20),
			  "keepalived did not make A MASTER; see %s",
			  nst_run_path("keepalivedA.log"));
		keepalived_start('B');
	}
	cr_assert(
		WAIT_FOR(status_has('A', "mode=active"), 20),
		"gateway A never became active; see %s",
		nst_run_path(with_keepalived ? "keepalivedA.log" : "gwA.log"));
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

	pthread_create(server, NULL, server_main, NULL);
	pthread_create(client, NULL, client_main, NULL);
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
	if (nat64)
		flows6_start();
	return epoch_a;
}

/* Everything sent before the kill comes back through B, and more after
 * it (when: what the message calls the moment). */
static void flows_go_on_through(char id, uint64_t tcp_sent_at_kill,
				uint64_t udp_at_kill, const char *when)
{
	char reply[4096];

	cr_assert(WAIT_FOR(LOAD(tcp_echoed) >= tcp_sent_at_kill + 640 &&
				   LOAD(udp_replies) >= udp_at_kill + 20,
			   30),
		  "%s: tcp echoed %lu (sent %lu at the kill), udp replies %lu "
		  "(was %lu); %c: %s",
		  when, (unsigned long)LOAD(tcp_echoed),
		  (unsigned long)tcp_sent_at_kill,
		  (unsigned long)LOAD(udp_replies), (unsigned long)udp_at_kill,
		  id, (ctl(id, "stats", reply, sizeof(reply)), reply));
}

/* Stop the client and the server: the one TCP connection carried exactly
 * the bytes sent, and the UDP flow kept its translated source. */
static void flows_end_whole(pthread_t server, pthread_t client,
			    const struct sockaddr_in *udp_before)
{
	__atomic_store_n(&net.stop, 1, __ATOMIC_RELEASE);
	pthread_join(client, NULL);
	pthread_join(server, NULL);
	cr_expect_eq(LOAD(tcp_mismatch), 0, "echoed bytes differ from sent");
	cr_expect_eq(LOAD(tcp_closed), 0, "the TCP connection was closed");
	cr_expect_eq(LOAD(accepts), 1, "the client had to connect again");
	cr_expect_eq(net.udp_sources[0].sin_addr.s_addr,
		     udp_before->sin_addr.s_addr);
	cr_expect_eq(net.udp_sources[0].sin_port, udp_before->sin_port);
}

static void failover_scenario(const char *name)
{
	pthread_t server, client;
	char reply[4096];
	struct sockaddr_in udp_before, tcp_peer;
	uint64_t udp_before_n, tcp_sent_at_kill;
	long epoch_a, epoch_b;
	char addr[INET_ADDRSTRLEN];
	int rc;

	epoch_a = scenario_start(name, &server, &client);
	udp_before = net.udp_sources[0];
	cr_assert_eq(LOAD(n_udp_sources), 1);
	cr_assert_eq(LOAD(accepts), 1);

	if (nat64)
		flows6_quiet();
	kill(gw_a, SIGKILL);
	waitpid(gw_a, NULL, 0);
	gw_a = 0;
	tcp_sent_at_kill = LOAD(tcp_sent);
	nsdp_sleep_ms(300);
	udp_before_n = LOAD(udp_replies);

	rc = keepalived_notify('B', "MASTER");
	cr_assert_eq(rc, 0, "promotion through the keepalived hook failed");
	cr_assert(status_has('B', "mode=active"));
	epoch_b = status_value('B', "epoch");
	cr_assert_gt(epoch_b, epoch_a, "a promotion must raise the epoch");

	flows_go_on_through('B', tcp_sent_at_kill, udp_before_n,
			    "after failover");
	if (nat64)
		flows6_go_on_through('B', "after failover");
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
	if (nat64)
		cr_assert(WAIT_FOR(stat_value('A', "table.live_v6") == 4, 10),
			  "the restarted A's IPv6 table holds %ld sessions",
			  stat_value('A', "table.live_v6"));
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
	if (nat64) {
		flows6_quiet();
		flows6_go_on_through('A', "after failback");
	}
	cr_expect_eq(stat_value('A', "nat.created"), 0,
		     "A created sessions for flows B had replicated");
	/* The demoted B resyncs as a standby. */
	cr_expect(WAIT_FOR(status_has('B', "synced=yes") &&
				   status_value('B', "sessions") >= 2,
			   20),
		  "the demoted gateway B did not resync");

	flows_end_whole(server, client, &udp_before);
	if (nat64)
		flows6_end_whole();
	/* One translated source per flow, the same before and after. */
	cr_expect_eq(LOAD(n_udp_sources), 1,
		     "the server saw the UDP flow from %lu sources",
		     (unsigned long)LOAD(n_udp_sources));
	tcp_peer = net.tcp_peer;
	inet_ntop(AF_INET, &tcp_peer.sin_addr, addr, sizeof(addr));
	cr_expect(strcmp(addr, POOL_FIRST) == 0 || strcmp(addr, POOL_LAST) == 0,
		  "the server saw the TCP client as %s, not a pool address",
		  addr);
}

/* In both store layouts (schema/FORMAT.md), with NAT64 flows beside the
 * NAT44 ones (the same gateways). In the log layout B's cold load merges
 * the segments A wrote, and B, promoted, writes segments of its own (and
 * compacts A's). */
NST_LAYOUTS_TEST(failover, tcp_and_udp_flows_survive_the_active_gateways_death)
{
	char name[32];

	external = 0;
	nat64 = 1;
	layout = l->name;
	snprintf(name, sizeof(name), "failover-%s", l->name);
	failover_scenario(name);
}

Test(failover, flows_survive_with_the_agents_as_secondary_processes)
{
	external = 1;
	failover_scenario("failover-external");
}

/* ---- split brain ------------------------------------------------------------ */

/* [gateway] fence_check_ms left at its default: how often a gateway reads
 * natsync:epoch to learn that a newer active took over. */
#define FENCE_CHECK_MS 200

/* What the test grants a demotion beyond fence_check_ms: the status
 * polling and the load of the suite; under AddressSanitizer every part of
 * the gateway runs two to three times slower (a fresh-clone run measured
 * 1.32 s there). */
#define DEMOTE_SLACK_S (NST_ASAN ? 2.0 : 1.0)

/* A natsync-agent standby that has seen no batch: the table it cold-loads
 * is what the store holds. It dumps to standby.tbl. */
static pid_t fresh_standby_start(void)
{
	char text[1024];
	pid_t pid;

	snprintf(text, sizeof(text),
		 "[agent]\nrole = standby\ngateway_id = 3\nprogress_ms = 0\n"
		 "eal_args = --no-huge --no-shconf -m 256 --no-pci "
		 "--no-telemetry -l 0\n"
		 "[store]\nseeds = 127.0.0.1:%d\nlayout = %s\n"
		 "[standby]\ntable_capacity = 4096\ndump = %s\n%s",
		 STORE_PORT, layout, nst_run_path("standby.tbl"),
		 nat64 ? "table_capacity_v6 = 1024\n" : "");
	nst_write_file(nst_run_path("standby.ini"), text);
	pid = (pid_t)nst_agent_spawn("standby", "");
	nst_wait_synced(pid);
	return pid;
}

/* natsync-verify, the store against the standby pid's table: whether they
 * match, with both sizes. The last dump it asked for stays in
 * standby.tbl. */
static int verify_store_against_standby(pid_t pid, unsigned long *store,
					unsigned long *standby)
{
	unsigned long source;
	int rc;

	rc = nst_sh("%s -S 127.0.0.1:%d -L %s -b %s -p %d -t 10 >%s 2>&1",
		    nst_build("tools/natsync-verify"), STORE_PORT, layout,
		    nst_run_path("standby.tbl"), (int)pid,
		    nst_run_path("verify.out"));
	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	nst_verify_counts(store, &source, standby);
	return rc == 0 && nst_run_file_has("verify.out", "match=yes");
}

/* How many of the burst's flows the table file at path holds: UDP
 * sessions from the client whose inside source port is a burst port. */
static unsigned long burst_flows_in(const char *path)
{
	size_t reclen = ns_record_wire_len(NS_FAMILY_IPV4);
	uint64_t n_ports = __atomic_load_n(&burst.n_ports, __ATOMIC_ACQUIRE);
	uint8_t buf[NS_RECORD_MAX_LEN];
	unsigned long found = 0;
	struct in_addr client;
	struct ns_session s;
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f, "no table file %s", path);
	inet_pton(AF_INET, "10.1.0.2", &client);
	while (fread(buf, 1, reclen, f) == reclen) {
		cr_assert_geq(ns_record_decode(buf, reclen, &s), 0);
		if (s.proto != IPPROTO_UDP ||
		    s.orig.saddr != ntohl(client.s_addr))
			continue;
		for (uint64_t i = 0; i < n_ports; i++)
			if (s.orig.sport == burst.ports[i])
				found++;
	}
	fclose(f);
	return found;
}

/*
 * Split brain: the VRRP link between the gateways is cut, keepalived
 * promotes B, and nothing demotes A, which still reaches the store and
 * keeps forwarding. B's promotion fences the store: A's writers are cut
 * off and refused, and A, seeing the newer epoch, demotes itself. The
 * sessions A creates after B took over never reach the store, so a
 * standby that cold-loads it gets B's view.
 */
/* across: the burst of new flows through A starts 1.5 s before B's
 * promotion and goes on across it, so that A creates sessions while B
 * promotes: those A published before the fence are B's too (the
 * promotion's barrier), none after it reaches anyone. Otherwise the burst
 * starts once B's promotion returned, and none of it may reach the store. */
static void split_brain(const char *name, int across)
{
	pthread_t server, client, burster;
	long epoch_a, epoch_b, created_before, created_after, b_sessions,
		fenced;
	unsigned long store = 0, standby = 0, in_store;
	double promoted_at, demoted_after = -1;
	char reply[4096];
	int match, demoted;

	external = 0;
	promote_wait_ms = 2000;
	epoch_a = scenario_start(name, &server, &client);
	burst.secs = across ? 4.5 : 3;
	pthread_create(&burster, NULL, burst_main, NULL);

	/* The partition: B loses the client and the server, A keeps both, as
	 * when only the link that carries VRRP between the gateways fails and
	 * each side's neighbours still resolve the shared addresses to A.
	 * Cut before the promotion, so that B's announcements of the shared
	 * addresses reach nobody and every packet still goes to A. */
	cr_assert_eq(nst_sh("ip -n nstfo-c link set cb down && "
			    "ip -n nstfo-s link set sb down"),
		     0);
	created_before = stat_value('A', "nat.created");
	if (across) {
		__atomic_store_n(&burst.go, 1, __ATOMIC_RELEASE);
		nsdp_sleep_ms(1500);
	}

	cr_assert_eq(keepalived_notify('B', "MASTER"), 0,
		     "promotion through the keepalived hook failed");
	promoted_at = nsdp_now_s();
	__atomic_store_n(&burst.go, 1, __ATOMIC_RELEASE);
	cr_assert(status_has('B', "mode=active"));
	epoch_b = status_value('B', "epoch");
	cr_assert_gt(epoch_b, epoch_a, "a promotion must raise the epoch");

	/* Measured now, asserted after the store: on a gateway that does not
	 * fence both failures show. */
	demoted = WAIT_FOR(status_has('A', "mode=standby"), 5);
	if (demoted)
		demoted_after = nsdp_now_s() - promoted_at;
	pthread_join(burster, NULL);
	created_after = stat_value('A', "nat.created");
	cr_log_info("A created %ld sessions since the partition and was a "
		    "standby %.3f s after it (-1: not); the burst sent %lu "
		    "datagrams on %lu flows, %lu answered",
		    created_after - created_before, demoted_after,
		    (unsigned long)burst.sent, (unsigned long)burst.n_ports,
		    (unsigned long)burst.replies);
	cr_assert_eq(burst.n_ports, BURST_FLOWS);
	/* Whatever A still sends is on the wire in milliseconds (flush_us =
	 * 200): give it a second before reading the store. */
	nsdp_sleep_ms(1000);

	b_sessions = status_value('B', "sessions");
	fresh_standby = fresh_standby_start();
	match = verify_store_against_standby(fresh_standby, &store, &standby);
	in_store = burst_flows_in(nst_run_path("standby.tbl"));
	if (across)
		/* About 15 flows began before the promotion: A replicated
		 * them, and B holds them (the equalities below). */
		cr_expect_geq(in_store, 5,
			      "only %lu of the flows A created before B's "
			      "promotion are in the store",
			      in_store);
	else
		cr_expect_eq(in_store, 0,
			     "%lu of the %d flows the client opened through "
			     "A after B's promotion are in the store (A "
			     "created %ld sessions after the promotion)",
			     in_store, BURST_FLOWS,
			     created_after - created_before);
	cr_expect_eq(store, (unsigned long)b_sessions,
		     "the store holds %lu sessions, the new active B %ld",
		     store, b_sessions);
	cr_expect(match,
		  "the store (%lu) and the fresh standby (%lu) "
		  "differ; see %s",
		  store, standby, nst_run_path("verify.out"));
	cr_expect_eq(standby, store);

	cr_expect(demoted,
		  "A is still %s 5 s after B's promotion (A created %ld "
		  "sessions since)",
		  status_has('A', "mode=active") ? "active" : "not standby",
		  created_after - created_before);
	if (demoted)
		cr_expect_leq(demoted_after,
			      FENCE_CHECK_MS / 1000.0 + DEMOTE_SLACK_S,
			      "A demoted itself %.2f s after B's promotion",
			      demoted_after);
	fenced = stat_value('A', "gateway.fenced");
	cr_expect_eq(fenced, 1, "gateway.fenced of A is %ld", fenced);
	/* The demoted A is a standby like any other: B's view. */
	cr_expect(WAIT_FOR(status_has('A', "synced=yes") &&
				   status_value('A', "sessions") == (long)store,
			   20),
		  "A did not resync from the store: %ld sessions, the store "
		  "%lu",
		  status_value('A', "sessions"), store);
	/* keepalived still holds A MASTER (the VRRP link is cut): A says it
	 * is unfit, so that its track script's weight loses it the election
	 * once VRRP sees both, until keepalived makes it BACKUP. */
	cr_expect_neq(ctl('A', "health", reply, sizeof(reply)), 0,
		      "the fenced A is healthy: %s", reply);
	cr_expect(strstr(reply, "unfit for MASTER") != NULL,
		  "the fenced A's health: %s", reply);
	cr_expect_eq(nst_sh("%s -S %s -g %s >/dev/null 2>&1",
			    nst_src("deploy/keepalived-track.sh"),
			    nst_run_path("a.sock"),
			    nst_build("gateway/natsync-gateway")),
		     1, "keepalived's track script finds the fenced A fit");
	cr_expect_eq(keepalived_notify('A', "BACKUP"), 0);
	cr_expect_eq(ctl('A', "health", reply, sizeof(reply)), 0,
		     "A, told BACKUP, is not healthy: %s", reply);
	cr_expect(status_has('A', "mode=standby"));
	stop_pid(&fresh_standby, SIGTERM);
}

Test(failover, a_partitioned_active_is_fenced_out_of_the_store)
{
	split_brain("failover-split-brain", 0);
}

Test(failover, a_partitioned_active_creating_sessions_across_the_promotion)
{
	split_brain("failover-split-brain-across", 1);
}

/* ---- the store down at the failover ----------------------------------------- */

/*
 * The store stops answering (every master stopped with SIGSTOP, or only
 * the one that owns natsync:epoch) and then the active A dies. B's
 * promotion does not wait for the store: within promote_wait_ms it
 * forwards on a provisional epoch, the next generation above A's with
 * its gateway_id (2) in the low byte. The TCP connection and the UDP
 * flow go on, and new flows through B get sessions. Once the store
 * answers again B makes its epoch known (natsync:epoch raised to it),
 * its writers send what they queued, and a standby that cold-loads the
 * store holds exactly what the store and B hold, the new flows included.
 */
static void store_down_failover(const char *name, int epoch_master_only)
{
	pthread_t server, client, burster;
	uint64_t tcp_sent_at_kill, udp_at_kill;
	unsigned long store = 0, standby = 0, in_store;
	struct sockaddr_in udp_before;
	long epoch_a, epoch_b, b_sessions;
	double t_kill, t_promoted, t_udp, t_flowing, worst_ms = 0;
	int match;

	external = 0;
	epoch_a = scenario_start(name, &server, &client);
	udp_before = net.udp_sources[0];
	/* 30 new flows, one every 100 ms. */
	burst.secs = 3.5;
	pthread_create(&burster, NULL, burst_main, NULL);

	store_signal(SIGSTOP, epoch_master_only);
	kill(gw_a, SIGKILL);
	waitpid(gw_a, NULL, 0);
	gw_a = 0;
	t_kill = nsdp_now_s();
	tcp_sent_at_kill = LOAD(tcp_sent);
	udp_at_kill = LOAD(udp_replies);
	/* New flows from now on: none is answered until B forwards. */
	__atomic_store_n(&burst.go, 1, __ATOMIC_RELEASE);

	cr_assert_eq(keepalived_notify('B', "MASTER"), 0,
		     "promotion through the keepalived hook failed; see %s",
		     nst_run_path("gwB.log"));
	t_promoted = nsdp_now_s();
	cr_assert(status_has('B', "mode=active"));
	cr_assert(status_has('B', "provisional=yes"),
		  "B is not on a provisional epoch with the store stopped");
	epoch_b = status_value('B', "epoch");
	cr_assert_eq(epoch_b,
		     (epoch_a / NSA_EPOCH_STEP + 1) * NSA_EPOCH_STEP + 2,
		     "provisional epoch %ld after A's %ld", epoch_b, epoch_a);
	/* The first answer to a new flow through B (the burst's thread
	 * waits on nothing else; the client's UDP flow shares a thread with
	 * its TCP connection, which waits for TCP's retransmissions). */
	cr_assert(WAIT_FOR(
		__atomic_load_n(&burst.replies, __ATOMIC_ACQUIRE) > 0, 30));
	t_udp = nsdp_now_s();
	flows_go_on_through('B', tcp_sent_at_kill, udp_at_kill,
			    "with the store stopped");
	t_flowing = nsdp_now_s();
	pthread_join(burster, NULL);
	cr_assert_eq(burst.n_ports, BURST_FLOWS);
	cr_assert_gt(burst.replies, 0, "no new flow through B was answered");
	printf("store down (%s): promote returned %.0f ms after the kill, "
	       "a new flow answered through B %.0f ms after it, TCP and "
	       "UDP both 640 B / 20 replies further %.0f ms after it (TCP "
	       "retransmits on its own timer); provisional epoch %ld after "
	       "%ld\n",
	       epoch_master_only ? "the epoch key's master" : "every master",
	       1e3 * (t_promoted - t_kill), 1e3 * (t_udp - t_kill),
	       1e3 * (t_flowing - t_kill), epoch_b, epoch_a);
	cr_expect(status_has('B', "provisional=yes"));
	/* The control socket answers at once while the store hangs: B's
	 * own store calls (its epoch's registration, the fence's read,
	 * GW_STORE_LOOP_MS each, every second) run beside it. */
	for (int i = 0; i < 20; i++) {
		double ms = ctl_ms('B', "status");

		worst_ms = ms < 0 || ms > worst_ms ? ms : worst_ms;
		if (ms < 0)
			break;
		nsdp_sleep_ms(100);
	}
	printf("store down (%s): the slowest of 20 status answers from B "
	       "took %.1f ms\n",
	       epoch_master_only ? "the epoch key's master" : "every master",
	       worst_ms);
	cr_expect(worst_ms >= 0 && worst_ms < 150,
		  "B's control socket took %.1f ms to answer status with the "
		  "store stopped",
		  worst_ms);

	/* The store answers again: B's epoch is made known, the fence
	 * raised, and what B queued reaches the store. */
	store_signal(SIGCONT, epoch_master_only);
	cr_assert(WAIT_FOR(!status_has('B', "provisional=yes"), 20),
		  "B did not make its epoch known to the store; see %s",
		  nst_run_path("gwB.log"));
	cr_assert(status_has('B', "mode=active"));
	cr_assert_eq(status_value('B', "epoch"), epoch_b);
	cr_assert_eq(nst_sh("test \"$(redis-cli -c -p %d GET natsync:epoch)\" "
			    "= %ld",
			    STORE_PORT, epoch_b),
		     0, "natsync:epoch is not B's provisional epoch");
	cr_assert(flows_progress(640, 20, 30),
		  "after the store returned: tcp echoed %lu of %lu sent",
		  (unsigned long)LOAD(tcp_echoed),
		  (unsigned long)LOAD(tcp_sent));
	/* flush_us = 200: a second for the queued records to be written. */
	nsdp_sleep_ms(1000);
	b_sessions = status_value('B', "sessions");
	fresh_standby = fresh_standby_start();
	match = verify_store_against_standby(fresh_standby, &store, &standby);
	in_store = burst_flows_in(nst_run_path("standby.tbl"));
	cr_expect(match, "the store (%lu) and the fresh standby (%lu) differ",
		  store, standby);
	cr_expect_eq(store, (unsigned long)b_sessions,
		     "the store holds %lu sessions, the new active B %ld",
		     store, b_sessions);
	cr_expect_eq(in_store, BURST_FLOWS,
		     "%lu of the %d flows opened through B with the store "
		     "stopped are in the store",
		     in_store, BURST_FLOWS);
	cr_expect_eq(stat_value('B', "nat.created"), BURST_FLOWS);
	stop_pid(&fresh_standby, SIGTERM);

	/* The burst's flows are the server's other UDP sources. */
	flows_end_whole(server, client, &udp_before);
	if (nat64)
		flows6_end_whole();
}

Test(failover, with_every_master_stopped_the_standby_forwards_at_once)
{
	store_down_failover("failover-store-down", 0);
}

Test(failover, with_the_epoch_keys_master_stopped_the_standby_forwards)
{
	store_down_failover("failover-epoch-master-down", 1);
}

/*
 * A gateway whose gateway_id has a low byte of 0 makes no provisional
 * epoch: without the store's counter it cannot know that its epoch is
 * above the last active's. It stays a standby and forwards nothing, and
 * promotes itself once the store gives it an epoch.
 */
Test(failover, promotion_is_refused_when_no_epoch_can_be_had)
{
	static const char refusal[] = "error promote: no epoch from the store";
	pthread_t burster;
	long tx_before, tx_after, epoch;
	char reply[4096];
	int rc;

	nst_need_root("needs root for network namespaces");
	external = 0;
	nst_run_dir_make("failover-no-epoch");
	net_setup();
	cr_assert_eq(nst_store_start(STORE_PORT, 3, 0), 0);
	write_gateway_config('B');
	gw_b = start_gateway('B', "--set agent.gateway_id=256");
	cr_assert(WAIT_FOR(status_has('B', "synced=yes"), 20),
		  "gateway B never loaded the table; see %s",
		  nst_run_path("gwB.log"));
	nst_store_stop(STORE_PORT);
	tx_before = stat_value('B', "nat.tx_outside");

	rc = ctl('B', "promote", reply, sizeof(reply));
	cr_expect_neq(rc, 0, "the promotion succeeded: %s", reply);
	cr_expect(strncmp(reply, refusal, strlen(refusal)) == 0,
		  "the reply to promote is: %s", reply);
	cr_expect(nst_run_file_has("gwB.log", "makes no provisional one"));
	cr_expect(status_has('B', "mode=standby"),
		  "B is not a standby after the refused promotion");

	/* New flows from the client: a standby forwards none of them. */
	burst.secs = 1;
	burst.go = 1;
	pthread_create(&burster, NULL, burst_main, NULL);
	pthread_join(burster, NULL);
	tx_after = stat_value('B', "nat.tx_outside");
	cr_expect_eq(tx_after, tx_before,
		     "B forwarded %ld packets after the refused promotion",
		     tx_after - tx_before);
	cr_expect(status_has('B', "mode=standby"));

	/* keepalived asked once; the gateway goes on asking the store, and
	 * is promoted once the store is back with a store epoch: 256 from
	 * the fresh store, or a later generation when a try that gave up
	 * (its 50 ms bound, a cluster just formed on a loaded machine) ran
	 * late and took 256 (seen under AddressSanitizer: 512). */
	cr_expect(nst_run_file_has("gwB.log", "trying again every 1000 ms"));
	cr_assert_eq(nst_store_start(STORE_PORT, 3, 0), 0);
	cr_assert(WAIT_FOR(status_has('B', "mode=active"), 20),
		  "B was not promoted once the store was back; see %s",
		  nst_run_path("gwB.log"));
	epoch = status_value('B', "epoch");
	cr_expect(epoch >= NSA_EPOCH_STEP && epoch % NSA_EPOCH_STEP == 0,
		  "B's epoch %ld is not a store epoch", epoch);
}

/* The test store's topology (asserts it was read). */
static const struct nsa_topology *store_topology(void)
{
	static struct nsa_topology topo;
	struct nsa_store_conf sc = {.n_seeds = 1, .connect_timeout_ms = 1000};
	char err[256];

	snprintf(sc.seeds[0].host, sizeof(sc.seeds[0].host), "127.0.0.1");
	sc.seeds[0].port = STORE_PORT;
	cr_assert_eq(nsa_topology_fetch(&sc, &topo, err, sizeof(err)), 0, "%s",
		     err);
	return &topo;
}

/* The port of the master that owns natsync:epoch. */
static int epoch_master_port(void)
{
	const struct nsa_topology *t = store_topology();

	return t->nodes[t->slot_node[ns_key_slot(NSA_EPOCH_KEY,
						 strlen(NSA_EPOCH_KEY))]]
		.addr.port;
}

/*
 * A gateway configured active does not promote itself before its cold
 * load ended while the store answers: a table without the stored sessions
 * would hand out ports they hold. One master stopped (neither the seed nor
 * the epoch key's) holds the load up; the gateway waits, and promotes once
 * the master is back and the load done. With no store at all it promotes
 * after GW_START_WAIT_MS, on a provisional epoch.
 */
Test(failover, a_gateway_configured_active_waits_for_its_cold_load)
{
	int stopped = STORE_PORT + 1, port;

	nst_need_root("needs root for network namespaces");
	external = 0;
	/* The epoch asked once the load ends may meet the master just
	 * continued: 1 s for it, not 50 ms (a run under AddressSanitizer
	 * went provisional, 257). */
	promote_wait_ms = 1000;
	nst_run_dir_make("failover-active-load");
	net_setup();
	cr_assert_eq(nst_store_start(STORE_PORT, 3, 0), 0);
	if (epoch_master_port() == stopped)
		stopped = STORE_PORT + 2;
	cr_assert_eq(nst_sh("kill -STOP $(cat %s/%d/%d/redis.pid)",
			    nst_build("tests/run"), STORE_PORT, stopped),
		     0);
	write_gateway_config('A');
	gw_a = start_gateway('A', "");
	cr_assert(
		WAIT_FOR(nst_run_file_has("gwA.log", "promoting when it ends"),
			 15),
		"A did not say that it waits for its load; see %s",
		nst_run_path("gwA.log"));
	nsdp_sleep_ms(1500);
	cr_expect(status_has('A', "mode=standby"),
		  "A promoted itself before its cold load ended");
	cr_expect(status_has('A', "synced=no"));
	cr_assert_eq(nst_sh("kill -CONT $(cat %s/%d/%d/redis.pid)",
			    nst_build("tests/run"), STORE_PORT, stopped),
		     0);
	cr_assert(WAIT_FOR(status_has('A', "mode=active"), 30),
		  "A was not promoted once its load could end; see %s",
		  nst_run_path("gwA.log"));
	cr_expect(status_has('A', "synced=yes"));
	cr_expect_eq(status_value('A', "epoch"), NSA_EPOCH_STEP);
	stop_pid(&gw_a, SIGTERM);

	/* No store: promoted after the start wait, provisional. */
	store_signal(SIGSTOP, 0);
	gw_a = start_gateway('A', "");
	cr_assert(WAIT_FOR(status_has('A', "mode=active"), 20),
		  "A, with no store, was not promoted; see %s",
		  nst_run_path("gwA.log"));
	cr_expect(status_has('A', "provisional=yes"));
	cr_expect(nst_run_file_has("gwA.log", "the store does not answer"));
	port = (int)status_value('A', "epoch");
	cr_expect_eq(port, NSA_EPOCH_STEP + 1, "the provisional epoch is %d",
		     port);
	store_signal(SIGCONT, 0);
}

#define MAX_ROUNDS 64

/*
 * keepalived itself elects the active: both gateways start as standbys,
 * keepalived (Debian's, with deploy/keepalived.conf.example and the
 * notify and track scripts deploy/ ships, VRRP over a veth between two
 * namespaces) makes A MASTER, which promotes it. The active is SIGKILLed:
 * its keepalived's natsync_alive check fails, it leaves MASTER, the other
 * keepalived becomes MASTER and its notify promotes the other gateway;
 * the TCP connection and the UDP flow go on through it. The killed
 * gateway restarts as a standby, and nopreempt keeps it one.
 *
 * NATSYNC_FAILOVER_ROUNDS=N (at most 64; default 1) kills the active N
 * times, each time the one that took over, and prints the outage of the
 * UDP flow (the longest time between two replies: from the last through
 * the dead gateway to the first through the new one; one datagram every
 * 20 ms) with its p50 and p99: scripts/bench-failover.sh.
 * NATSYNC_FAILOVER_DIRECT=1 does the same without keepalived, the notify
 * script called at once after the kill: the gateway's own part.
 * NATSYNC_FAILOVER_STORE=down stops every master (SIGSTOP) before each
 * kill: the promotion forwards on a provisional epoch; once the flows go
 * on, the store continues and the new active makes its epoch known
 * before the dead gateway restarts.
 */
static void failover_rounds(int rounds, int direct, int store_down)
{
	uint64_t outage[MAX_ROUNDS], promoted[MAX_ROUNDS], notified[MAX_ROUNDS];
	const char *how = direct ? "direct" : "keepalived";
	char active = 'A', standby = 'B', reply[4096];
	struct sockaddr_in udp_before;
	pthread_t server, client;

	if (rounds < 1 || rounds > MAX_ROUNDS)
		rounds = rounds < 1 ? 1 : MAX_ROUNDS;
	external = 0;
	with_keepalived = !direct;
	scenario_start(store_down ? "failover-store-down-rounds"
		       : direct	  ? "failover-direct"
				  : "failover-keepalived",
		       &server, &client);
	udp_before = net.udp_sources[0];
	for (int r = 0; r < rounds; r++) {
		pid_t *dying = active == 'A' ? &gw_a : &gw_b;
		long epoch = status_value(active, "epoch");
		uint64_t tcp_at_kill, udp_at_kill;
		double killed_at;
		char when[80];

		__atomic_store_n(&net.udp_gap_us, 0, __ATOMIC_RELEASE);
		if (store_down)
			store_signal(SIGSTOP, 0);
		kill(*dying, SIGKILL);
		waitpid(*dying, NULL, 0);
		*dying = 0;
		killed_at = nsdp_now_s();
		tcp_at_kill = LOAD(tcp_sent);
		udp_at_kill = LOAD(udp_replies);
		notified[r] = 0;
		if (direct) {
			cr_assert_eq(keepalived_notify(standby, "MASTER"), 0);
			notified[r] =
				(uint64_t)((nsdp_now_s() - killed_at) * 1e6);
		}
		cr_assert(WAIT_FOR(status_has(standby, "mode=active"), 20),
			  "%c was not promoted after %c's death; see %s",
			  standby, active,
			  nst_run_path(standby == 'A' ? "keepalivedA.log"
						      : "keepalivedB.log"));
		promoted[r] = (uint64_t)((nsdp_now_s() - killed_at) * 1e6);
		cr_assert_gt(status_value(standby, "epoch"), epoch);
		snprintf(when, sizeof(when), "round %d, after %c's death", r,
			 active);
		flows_go_on_through(standby, tcp_at_kill, udp_at_kill, when);
		outage[r] = LOAD(udp_gap_us);
		cr_expect_eq(stat_value(standby, "nat.created"), 0,
			     "%c created sessions for flows it had", standby);
		if (store_down) {
			cr_expect(status_has(standby, "provisional=yes"));
			store_signal(SIGCONT, 0);
			cr_assert(WAIT_FOR(!status_has(standby,
						       "provisional=yes"),
					   20),
				  "%c did not make its epoch known", standby);
			cr_assert(status_has(standby, "mode=active"),
				  "%c was fenced when it made its epoch known; "
				  "see %s",
				  standby, nst_run_path(gw_log(standby)));
		}
		snprintf(when, sizeof(when),
			 "the notify script returned %.0f "
			 "ms after the kill, ",
			 notified[r] / 1e3);
		printf("failover %s round %d: %c -> %c, %spromoted %.0f ms "
		       "after the kill (status), UDP outage %.0f ms%s\n",
		       how, r, active, standby, direct ? when : "",
		       promoted[r] / 1e3, outage[r] / 1e3,
		       store_down ? ", store down" : "");
		fflush(stdout);

		/* The dead gateway comes back as a standby and stays one. */
		*dying = start_gateway(active, "--role standby");
		cr_assert(
			WAIT_FOR(status_has(active, "synced=yes") &&
					 status_value(active, "sessions") >= 2,
				 20),
			"the restarted %c did not resync", active);
		if (direct) {
			cr_assert_eq(keepalived_notify(active, "BACKUP"), 0);
		} else {
			/* Its keepalived sees it alive again (rise 2 of 1 s)
			 * and ready (rise 2 of 2 s), and stays BACKUP. */
			cr_assert(WAIT_FOR(ctl(active, "health", reply,
					       sizeof(reply)) == 0,
					   20));
			nsdp_sleep_ms(5000);
			cr_expect(status_has(active, "mode=standby"),
				  "the restarted %c was promoted again",
				  active);
			cr_expect(status_has(standby, "mode=active"));
		}
		active = standby;
		standby = active == 'A' ? 'B' : 'A';
	}
	flows_end_whole(server, client, &udp_before);
	if (nat64)
		flows6_end_whole();
	cr_expect_eq(LOAD(n_udp_sources), 1);
	nst_sort_u64(outage, (size_t)rounds);
	nst_sort_u64(promoted, (size_t)rounds);
	printf("RESULT failover how=%s store=%s rounds=%d outage_p50_ms=%.0f "
	       "outage_p99_ms=%.0f outage_max_ms=%.0f promoted_p50_ms=%.0f "
	       "promoted_p99_ms=%.0f\n",
	       how, store_down ? "down" : "up", rounds,
	       nst_percentile(outage, rounds, 50) / 1e3,
	       nst_percentile(outage, rounds, 99) / 1e3,
	       outage[rounds - 1] / 1e3,
	       nst_percentile(promoted, rounds, 50) / 1e3,
	       nst_percentile(promoted, rounds, 99) / 1e3);
}

Test(failover, keepalived_moves_the_flows_when_the_active_dies, .timeout = 900)
{
	const char *env = getenv("NATSYNC_FAILOVER_ROUNDS");
	const char *d = getenv("NATSYNC_FAILOVER_DIRECT");
	const char *sd = getenv("NATSYNC_FAILOVER_STORE");

	failover_rounds(env ? atoi(env) : 1, d && !strcmp(d, "1"),
			sd && !strcmp(sd, "down"));
}

/* Two failovers in a row with the store down at each (the notify script
 * called at once): B forwards on provisional epoch 514 and makes it known
 * once the store continues; A restarts as a standby, whose table holds
 * no record of 514 (B created no session), and is promoted with the
 * store down again: its provisional epoch must be above 514 (769), which
 * it learnt from the store's counter when it synced. Before, it took 513
 * from its table's 256, below B's: its records lost to B's, and
 * registering it found the counter above (fenced). */
Test(failover, store_down_failovers_back_and_forth_take_rising_epochs,
     .timeout = 300)
{
	failover_rounds(2, 1, 1);
}

/* Cut (up = 0) or heal the VRRP link: nftables in A's keepalived
 * namespace drops VRRP both ways. */
static void vrrp_link(int up)
{
	if (up)
		cr_assert_eq(nst_sh("ip netns exec nstfo-vA nft delete table "
				    "inet nstfo_cut"),
			     0);
	else
		cr_assert_eq(nst_sh("ip netns exec nstfo-vA nft -f - <<'EOF'\n"
				    "table inet nstfo_cut {\n"
				    " chain in { type filter hook input "
				    "priority 0; ip protocol 112 drop; }\n"
				    " chain out { type filter hook output "
				    "priority 0; ip protocol 112 drop; }\n"
				    "}\n"
				    "EOF"),
			     0, "cannot cut the VRRP link");
}

/*
 * A partition of the VRRP link, healed, with keepalived itself: B's
 * keepalived hears A no more, becomes MASTER and promotes B, whose
 * promotion fences A (A's keepalived stays MASTER: it hears no B either).
 * The fenced A says it is unfit for MASTER, so that its track script's
 * weight takes 100 off its priority (150 to 50). When the link heals, A
 * hears B's 100 above its 50 and becomes BACKUP (its notify's demote makes
 * it fit again; nopreempt keeps it BACKUP), and B stays MASTER and goes on
 * forwarding. Were A still at 150, B would become BACKUP, be demoted, and
 * no gateway would forward.
 */
Test(failover, keepalived_heals_a_partition_with_the_fenced_gateway_backup)
{
	struct sockaddr_in udp_before;
	pthread_t server, client;
	char reply[4096];
	long epoch_a;

	external = 0;
	with_keepalived = 1;
	epoch_a = scenario_start("failover-keepalived-partition", &server,
				 &client);
	udp_before = net.udp_sources[0];

	vrrp_link(0);
	cr_assert(WAIT_FOR(status_has('B', "mode=active"), 20),
		  "B's keepalived did not promote B; see %s",
		  nst_run_path("keepalivedB.log"));
	cr_assert_gt(status_value('B', "epoch"), epoch_a);
	cr_assert(WAIT_FOR(status_has('A', "mode=standby"), 5),
		  "A was not fenced");
	cr_expect_neq(ctl('A', "health", reply, sizeof(reply)), 0,
		      "the fenced A is healthy: %s", reply);
	cr_assert(
		WAIT_FOR(nst_run_file_has("keepalivedA.log",
					  "VRRP_Script(natsync_ready) failed"),
			 20),
		"A's keepalived did not find A unfit; see %s",
		nst_run_path("keepalivedA.log"));
	nsdp_sleep_ms(500);

	vrrp_link(1);
	cr_expect(WAIT_FOR(ctl('A', "health", reply, sizeof(reply)) == 0, 20),
		  "A was not made BACKUP when the link healed: %s", reply);
	/* A's priority is 150 again (rise 2 of 2 s): nopreempt keeps it
	 * BACKUP. */
	nsdp_sleep_ms(6000);
	cr_expect(status_has('B', "mode=active"),
		  "B was demoted when the link healed: no gateway forwards");
	cr_expect(status_has('A', "mode=standby"));
	cr_expect(flows_progress(640, 20, 30),
		  "the flows stopped after the link healed: tcp echoed %lu "
		  "of %lu sent",
		  (unsigned long)LOAD(tcp_echoed),
		  (unsigned long)LOAD(tcp_sent));
	flows_end_whole(server, client, &udp_before);
	if (nat64)
		flows6_end_whole();
}

/* ---- defer ------------------------------------------------------------------ */

/* New UDP flows at a steady rate (one every NF_EVERY_US from the client,
 * each from a socket of its own that stays open), to NF_PORT on the
 * server, which notes the translated source each flow's first datagram
 * came from. After the failover the server sends to every source it
 * noted; the datagram reaches the client only through a session the new
 * active holds: a flow whose session it lacks is lost at failover. */
#define NF_PORT 5003
#define NF_MAX 4096
#define NF_EVERY_US 500

static struct {
	int go, halt;
	int srv_fd;
	uint64_t opened;
	int fd[NF_MAX];
	uint8_t seen[NF_MAX]; /* the server got the flow's first datagram */
	uint8_t answered[NF_MAX]; /* the client got the server's datagram */
	struct sockaddr_in src[NF_MAX]; /* as the server saw the flow */
	uint64_t seen_ns[NF_MAX];
	uint64_t sent_ns[NF_MAX]; /* when the client sent it */
	/* the client's source ports: the next to try, and when each was
	 * last taken (across rounds) */
	uint16_t port_next;
	uint64_t port_ns[65536];
} nf;

/* The client's source ports: 10000..32767 and 61000..65535 (outside the
 * kernel's ephemeral range, which the other flows take), none taken again
 * within NF_PORT_REST_NS: a flow whose tuple an earlier one had would find
 * that one's session, not make a new one, while any gateway may hold it
 * (the store, for the UDP timeout after its last record; a gateway
 * promoted meanwhile, a timeout after its promotion: 20 s here). */
#define NF_PORT_FIRST 10000
#define NF_PORT_LAST 65535
#define NF_PORT_EPHEMERAL(p) ((p) >= 32768 && (p) < 61000)
#define NF_PORT_REST_NS (22 * 1000000000ull)
/* The gateway times a held packet from the start of the poll that
 * received it, which may have begun before the client sent it: a first
 * packet that reached the server this much short of defer_max_us may
 * still have been let go unacknowledged. */
#define NF_HOLD_SLACK_NS (2 * 1000000ull)

/* Bind fd to a source port not taken within NF_PORT_REST_NS; 0, or -1
 * when none is free. */
static int nf_bind(int fd)
{
	struct sockaddr_in me = {.sin_family = AF_INET};
	uint64_t now = nsdp_mono_ns();

	for (int tries = 0; tries <= NF_PORT_LAST - NF_PORT_FIRST; tries++) {
		uint16_t port = nf.port_next;

		nf.port_next = port >= NF_PORT_LAST || port < NF_PORT_FIRST
				       ? NF_PORT_FIRST
				       : (uint16_t)(port + 1);
		if (port < NF_PORT_FIRST || NF_PORT_EPHEMERAL(port) ||
		    (nf.port_ns[port] &&
		     now - nf.port_ns[port] < NF_PORT_REST_NS))
			continue;
		me.sin_port = htons(port);
		if (bind(fd, (struct sockaddr *)&me, sizeof(me)) == 0) {
			nf.port_ns[port] = now;
			return 0;
		}
	}
	return -1;
}

static void *nf_client_main(void *arg)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint64_t next;

	(void)arg;
	nst_enter_netns("nstfo-c");
	inet_pton(AF_INET, SERVER_ADDR, &to.sin_addr);
	to.sin_port = htons(NF_PORT);
	for (int i = 0; i < 1200 && !__atomic_load_n(&nf.go, __ATOMIC_ACQUIRE);
	     i++)
		nsdp_sleep_ms(50);
	next = nsdp_mono_ns();
	while (!__atomic_load_n(&nf.halt, __ATOMIC_ACQUIRE) &&
	       nf.opened < NF_MAX) {
		uint32_t idx = (uint32_t)nf.opened;
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

		if (fd >= 0 && nf_bind(fd) != 0) {
			close(fd); /* every port rests: no more flows */
			break;
		}
		if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)))
			abort();
		nf.fd[idx] = fd;
		nf.sent_ns[idx] = nsdp_mono_ns();
		__atomic_store_n(&nf.opened, idx + 1, __ATOMIC_RELEASE);
		if (send(fd, &idx, sizeof(idx), 0) != sizeof(idx))
			abort();
		/* Behind (the thread was not scheduled): no catching up in
		 * a burst. Hundreds of first packets at once fill the
		 * gateway's hold queue (NSDP_NAT_DEFER_MAX), and the rest go
		 * unheld (nat.defer_overflow), which a steady rate never
		 * does. */
		next += NF_EVERY_US * 1000ull;
		if (next < nsdp_mono_ns())
			next = nsdp_mono_ns();
		while (nsdp_mono_ns() < next)
			nsdp_sleep_us(50);
	}
	return NULL;
}

static void *nf_server_main(void *arg)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd;

	(void)arg;
	nst_enter_netns("nstfo-s");
	sa.sin_port = htons(NF_PORT);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		abort();
	__atomic_store_n(&nf.srv_fd, fd, __ATOMIC_RELEASE);
	while (!LOAD(stop)) {
		struct pollfd p = {nf.srv_fd, POLLIN, 0};
		struct sockaddr_in from;
		socklen_t len = sizeof(from);
		uint32_t idx;

		if (poll(&p, 1, 100) <= 0)
			continue;
		if (recvfrom(nf.srv_fd, &idx, sizeof(idx), 0,
			     (struct sockaddr *)&from, &len) == sizeof(idx) &&
		    idx < NF_MAX && !nf.seen[idx]) {
			nf.src[idx] = from;
			nf.seen_ns[idx] = nsdp_mono_ns();
			__atomic_store_n(&nf.seen[idx], 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

/* The server sends to every flow it saw, five times 100 ms apart (the
 * first may wait for the new active's ARP); the flows the client heard
 * from. */
static uint64_t nf_answered(void)
{
	uint64_t n = 0;

	for (int r = 0; r < 5; r++) {
		for (uint64_t i = 0; i < NF_MAX; i++)
			if (__atomic_load_n(&nf.seen[i], __ATOMIC_ACQUIRE) &&
			    !nf.answered[i])
				sendto(nf.srv_fd, "p", 1, 0,
				       (struct sockaddr *)&nf.src[i],
				       sizeof(nf.src[i]));
		nsdp_sleep_ms(100);
		for (uint64_t i = 0;
		     i < __atomic_load_n(&nf.opened, __ATOMIC_ACQUIRE); i++) {
			char c;

			if (!nf.answered[i] && recv(nf.fd[i], &c, 1, 0) == 1)
				nf.answered[i] = 1;
		}
	}
	for (uint64_t i = 0; i < NF_MAX; i++)
		n += nf.answered[i];
	return n;
}

/* Count the flows the server saw (all, and those it saw within the last
 * 20 ms before at_ns) and, of those, the ones the client did not hear
 * from after the failover. */
static void nf_count(uint64_t at_ns, uint64_t *seen, uint64_t *late,
		     uint64_t *lost, uint64_t *lost_late)
{
	*seen = *late = *lost = *lost_late = 0;
	for (uint64_t i = 0; i < NF_MAX; i++) {
		int is_late;

		if (!__atomic_load_n(&nf.seen[i], __ATOMIC_ACQUIRE))
			continue;
		is_late = nf.seen_ns[i] + 20 * 1000000ull >= at_ns;
		(*seen)++;
		*late += (uint64_t)is_late;
		if (!nf.answered[i]) {
			(*lost)++;
			*lost_late += (uint64_t)is_late;
		}
	}
}

/* The lines of run file name that hold what. */
static unsigned long run_file_count(const char *name, const char *what)
{
	FILE *f = fopen(nst_run_path(name), "r");
	unsigned long n = 0;
	char line[1024];

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

/* The warnings of a promotion that went ahead without confirming that
 * its table holds every batch the old active published (the barrier or
 * the resync after the fence did not end in time: ngw_promote.c), in
 * gateway id's log. */
static unsigned long promote_unconfirmed(char id)
{
	const char *log = gw_log(id);

	return run_file_count(log, "promote: the subscriber did not confirm") +
	       run_file_count(log, "promote: the resync of every master after "
				   "the fence did not end");
}

/* Print the store's copy of flow i's session (natsync-verify --get), or
 * that it has none. */
static void nf_look_up(uint64_t i)
{
	struct sockaddr_in me;
	socklen_t len = sizeof(me);

	if (getsockname(nf.fd[i], (struct sockaddr *)&me, &len) != 0)
		return;
	fflush(stdout);
	nst_sh("%s -S 127.0.0.1:%d -L %s --get udp:10.1.0.2:%u-%s:%d || "
	       "echo 'flow %lu: not in the store'",
	       nst_build("tools/natsync-verify"), STORE_PORT, layout,
	       ntohs(me.sin_port), SERVER_ADDR, NF_PORT, (unsigned long)i);
}

static void nf_reset(void)
{
	for (uint64_t i = 0; i < nf.opened; i++)
		close(nf.fd[i]);
	nf.opened = 0;
	nf.go = nf.halt = 0;
	memset(nf.seen, 0, sizeof(nf.seen));
	memset(nf.answered, 0, sizeof(nf.answered));
}

/*
 * defer on: new UDP flows open through the active at 2 000 a second; the
 * active is SIGKILLed in the middle of them and the standby promoted at
 * once (the notify script, as keepalived calls it). Every flow whose first
 * datagram reached the server must be answered through the new active:
 * with defer, a first packet leaves only once its record was acknowledged
 * by the store, so the standby has it (the promotion applies everything
 * published before it). lost_at_failover, the flows the new active has no
 * session for, must be 0 but for flows whose first packet took
 * defer_max_us or more to reach the server (let go unacknowledged, maybe:
 * 50 ms here, so that a loaded machine seldom does; within 2 ms of it
 * counts, NF_HOLD_SLACK_NS), or up to as many as the active sent unheld
 * (a full hold queue or lane), or when the promotion logged that it could
 * not confirm that it applied everything (an overloaded machine): these
 * are printed, with the stats of the active read just before the kill,
 * the store's copy of the first lost flows and the new active's warnings.
 * Each flow's tuple is new (nf_bind): none a gateway may still hold a
 * session of.
 *
 * NATSYNC_DEFER_ROUNDS=N (at most 64; default 1) fails over N times, each
 * time killing the one that took over; NATSYNC_DEFER=off runs with defer
 * off; NATSYNC_DEFER_MAX_US sets defer_max_us (default 50 000 here, so
 * that a loaded machine does not let a first packet go unacknowledged;
 * the gateway's default is 2 000). Each round prints its figures, and a
 * RESULT line sums them: scripts/bench-defer.sh.
 */
Test(failover, with_defer_no_new_session_is_lost_when_the_active_dies,
     .timeout = 900)
{
	const char *env_rounds = getenv("NATSYNC_DEFER_ROUNDS");
	const char *env_defer = getenv("NATSYNC_DEFER");
	const char *env_max = getenv("NATSYNC_DEFER_MAX_US");
	int rounds = env_rounds ? atoi(env_rounds) : 1;
	int on = !(env_defer && !strcmp(env_defer, "off"));
	uint64_t lost_total = 0, lost_max = 0, seen_total = 0;
	uint64_t late_total = 0, timeouts_total = 0, held_total = 0;
	uint64_t waited_total = 0;
	char active = 'A', standby = 'B';
	struct sockaddr_in udp_before;
	pthread_t server, client, nf_server;
	struct rlimit rl;

	if (rounds < 1 || rounds > MAX_ROUNDS)
		rounds = rounds < 1 ? 1 : MAX_ROUNDS;
	defer_max_us = on ? (env_max ? (unsigned int)atoi(env_max) : 50000) : 0;
	table_capacity = 65536;
	udp_timeout = 10;
	external = 0;
	with_keepalived = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 8192) {
		rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	scenario_start(on ? "failover-defer" : "failover-nodefer", &server,
		       &client);
	udp_before = net.udp_sources[0];
	nf.srv_fd = -1;
	pthread_create(&nf_server, NULL, nf_server_main, NULL);
	cr_assert(WAIT_FOR(__atomic_load_n(&nf.srv_fd, __ATOMIC_ACQUIRE) >= 0,
			   5));
	for (int r = 0; r < rounds; r++) {
		pid_t *dying = active == 'A' ? &gw_a : &gw_b;
		uint64_t seen, late, lost, lost_late, answered, killed_ns;
		uint64_t lost_waited = 0, lost_looked = 0, unconfirmed;
		long held, timeouts, unheld, p50, p99;
		char st[8192];
		pthread_t nf_client;

		nf_reset();
		pthread_create(&nf_client, NULL, nf_client_main, NULL);
		__atomic_store_n(&nf.go, 1, __ATOMIC_RELEASE);
		/* Kill at a different point of the stream each round. */
		nsdp_sleep_ms(800 + (unsigned int)(r * 37 % 400));
		/* One read (each is a program run, slow under a
		 * sanitizer), as close to the kill as it can be. */
		if (ctl(active, "stats", st, sizeof(st)) != 0)
			st[0] = '\0';
		held = reply_value(st, '\n', "nat.defer_held");
		timeouts = reply_value(st, '\n', "nat.defer_timeouts");
		unheld = reply_value(st, '\n', "nat.defer_overflow") +
			 reply_value(st, '\n', "nat.defer_unrecorded");
		p50 = reply_value(st, '\n', "defer.p50_us");
		p99 = reply_value(st, '\n', "defer.p99_us");
		unconfirmed = promote_unconfirmed(standby);
		kill(*dying, SIGKILL);
		killed_ns = nsdp_mono_ns();
		__atomic_store_n(&nf.halt, 1, __ATOMIC_RELEASE);
		waitpid(*dying, NULL, 0);
		*dying = 0;
		pthread_join(nf_client, NULL);
		cr_assert_eq(keepalived_notify(standby, "MASTER"), 0);
		cr_assert(WAIT_FOR(status_has(standby, "mode=active"), 20));
		unconfirmed = promote_unconfirmed(standby) - unconfirmed;
		answered = nf_answered();
		nf_count(killed_ns, &seen, &late, &lost, &lost_late);
		/* The stats above were read before the kill: a first
		 * packet that took defer_max_us or more to reach the server
		 * may have been let go unacknowledged after them. */
		for (uint64_t i = 0; defer_max_us && i < NF_MAX; i++) {
			if (!nf.seen[i] || nf.answered[i])
				continue;
			if (nf.seen_ns[i] - nf.sent_ns[i] + NF_HOLD_SLACK_NS >=
			    defer_max_us * 1000ull) {
				lost_waited++;
				continue;
			}
			if (!on)
				continue;
			/* What the assertion below counts: its timing, and
			 * whether the store holds its session. */
			printf("defer=%s round %d: flow %lu lost, its first "
			       "packet took %.3f ms, sent %.3f ms before the "
			       "kill\n",
			       on ? "on" : "off", r, (unsigned long)i,
			       (double)(nf.seen_ns[i] - nf.sent_ns[i]) / 1e6,
			       ((double)killed_ns - (double)nf.sent_ns[i]) /
				       1e6);
			if (lost_looked++ < 3)
				nf_look_up(i);
		}
		printf("defer=%s round %d: %c -> %c, %lu flows opened, %lu "
		       "reached the server (%lu in the last 20 ms), "
		       "%lu answered through %c: lost_at_failover=%lu "
		       "(%lu of the last 20 ms, %lu whose first packet took "
		       "defer_max_us or within 2 ms of it); %c had held %ld first "
		       "packets, %ld let go unacknowledged, %ld sent unheld "
		       "(queue full, lane full), held p50 %ld us "
		       "p99 %ld us; its writers: acked %ld, dropped %ld, "
		       "bursts given up %ld\n",
		       on ? "on" : "off", r, active, standby,
		       (unsigned long)nf.opened, (unsigned long)seen,
		       (unsigned long)late, (unsigned long)answered, standby,
		       (unsigned long)lost, (unsigned long)lost_late,
		       (unsigned long)lost_waited, active, held, timeouts,
		       unheld, p50, p99, reply_value(st, '\n', "agent.acked"),
		       reply_value(st, '\n', "agent.dropped"),
		       reply_value(st, '\n', "agent.settle_abandoned"));
		if (lost_looked > 0) /* how the promotion went */
			nst_sh("grep -E ' (warn|error): ' %s | tail -n 20",
			       nst_run_path(gw_log(standby)));
		fflush(stdout);
		cr_assert_gt(seen, 100, "too few new flows reached the server");
		lost_total += lost;
		lost_max = lost > lost_max ? lost : lost_max;
		seen_total += seen;
		late_total += late;
		held_total += (uint64_t)(held > 0 ? held : 0);
		timeouts_total += (uint64_t)(timeouts > 0 ? timeouts : 0);
		waited_total += lost_waited;
		/* Only a first packet let go unacknowledged (after
		 * defer_max_us) can leave a flow behind; or one sent unheld
		 * (a full hold queue or lane, counted: at most as many lost),
		 * or a promotion that
		 * went ahead without confirming that it applied everything
		 * (an overloaded machine; logged): each by design, and
		 * printed. */
		if (on && lost > lost_waited &&
		    ((unheld > 0 && lost - lost_waited <= (uint64_t)unheld) ||
		     unconfirmed))
			printf("defer=on round %d: %lu flows lost within "
			       "defer_max_us, with %ld first packets sent "
			       "unheld before the kill and %lu unconfirmed "
			       "promotion warning(s) from %c: not counted as "
			       "a failure\n",
			       r, (unsigned long)(lost - lost_waited), unheld,
			       (unsigned long)unconfirmed, standby);
		else if (on)
			cr_expect_eq(lost - lost_waited, 0,
				     "round %d: %lu flows lost with defer on "
				     "whose first packet reached the server "
				     "within defer_max_us, none sent unheld, "
				     "and %c's promotion confirmed",
				     r, (unsigned long)(lost - lost_waited),
				     standby);
		if (on)
			cr_expect_gt(held, 0, "%c held no first packet",
				     active);

		/* The dead gateway comes back as a standby. */
		*dying = start_gateway(active, "--role standby");
		cr_assert(WAIT_FOR(status_has(active, "synced=yes"), 20),
			  "the restarted %c did not resync", active);
		cr_assert_eq(keepalived_notify(active, "BACKUP"), 0);
		active = standby;
		standby = active == 'A' ? 'B' : 'A';
	}
	printf("RESULT defer defer=%s defer_max_us=%u rounds=%d flows_seen=%lu "
	       "flows_seen_last_20ms=%lu lost_at_failover=%lu lost_max=%lu "
	       "held=%lu unacknowledged=%lu lost_waited=%lu\n",
	       on ? "on" : "off", defer_max_us, rounds,
	       (unsigned long)seen_total, (unsigned long)late_total,
	       (unsigned long)lost_total, (unsigned long)lost_max,
	       (unsigned long)held_total, (unsigned long)timeouts_total,
	       (unsigned long)waited_total);
	nf_reset();
	flows_end_whole(server, client, &udp_before);
	if (nat64)
		flows6_end_whole();
	pthread_join(nf_server, NULL);
	close(nf.srv_fd);
}

/*
 * defer on, a session the store let expire while a gateway still holds it:
 * a promotion restarts every session's idle timer (the standby does not know
 * when the old active last saw a packet), so the new active keeps a session
 * up to a whole timeout after the store's copy expired (its last record's
 * stamp plus its timeout) and a cold-loaded standby dropped it. A packet on
 * it then is the first of a session the standby lacks: it must wait for its
 * refresh's acknowledgement like a new session's first packet, or a failover
 * right after it loses the flow. Flows opened through A, A killed 4 s
 * later (B promoted, its timers restarted), A back as a standby; once the
 * store's copies expired (udp_timeout 10 s), one datagram more on each flow
 * through B: each is held (nat.defer_held rises by exactly the flows), B is
 * killed and A promoted, and every flow is answered through A.
 */
Test(failover,
     with_defer_a_packet_on_a_session_the_store_expired_waits_for_its_refresh,
     .timeout = 300)
{
	struct sockaddr_in udp_before;
	pthread_t server, client, nf_server, nf_client;
	uint64_t opened, seen, late, lost, lost_late, created_ns, killed_ns;
	long held_before, held_after, timeouts;
	char tuple[96], cmd[512];

	defer_max_us = 50000;
	udp_timeout = 10;
	external = 0;
	with_keepalived = 0;
	scenario_start("failover-defer-revive", &server, &client);
	udp_before = net.udp_sources[0];
	nf.srv_fd = -1;
	pthread_create(&nf_server, NULL, nf_server_main, NULL);
	cr_assert(WAIT_FOR(__atomic_load_n(&nf.srv_fd, __ATOMIC_ACQUIRE) >= 0,
			   5));

	/* At least 20 flows through A (their first packets held and
	 * acknowledged), all seen by the server. */
	nf_reset();
	pthread_create(&nf_client, NULL, nf_client_main, NULL);
	__atomic_store_n(&nf.go, 1, __ATOMIC_RELEASE);
	(void)WAIT_FOR(__atomic_load_n(&nf.opened, __ATOMIC_ACQUIRE) >= 20, 5);
	__atomic_store_n(&nf.halt, 1, __ATOMIC_RELEASE);
	pthread_join(nf_client, NULL);
	created_ns = nsdp_mono_ns();
	opened = nf.opened;
	cr_assert_geq(opened, 20, "the client opened %lu flows",
		      (unsigned long)opened);
	nf_count(0, &seen, &late, &lost, &lost_late);
	cr_assert(WAIT_FOR((nf_count(0, &seen, &late, &lost, &lost_late),
			    seen == opened),
			   5),
		  "the server saw %lu of %lu flows through A",
		  (unsigned long)seen, (unsigned long)opened);

	/* B takes over 4 s later: its idle timers restart there, so it
	 * keeps the flows at least 10 s after the kill, the store 10 s after
	 * they began; A's restart (seconds on a loaded machine) is in
	 * between. */
	nsdp_sleep_ms(4000);
	kill(gw_a, SIGKILL);
	killed_ns = nsdp_mono_ns();
	waitpid(gw_a, NULL, 0);
	gw_a = 0;
	cr_assert_eq(keepalived_notify('B', "MASTER"), 0);
	cr_assert(WAIT_FOR(status_has('B', "mode=active"), 20));
	gw_a = start_gateway('A', "--role standby");
	cr_assert(WAIT_FOR(status_has('A', "synced=yes"), 20),
		  "the restarted A did not load the table");
	cr_assert_eq(keepalived_notify('A', "BACKUP"), 0);

	/* The store's copies have expired; B still holds the sessions. */
	while (nsdp_mono_ns() < created_ns + 10300 * 1000000ull)
		nsdp_sleep_ms(10);
	cr_assert_lt(nsdp_mono_ns(), killed_ns + 9000 * 1000000ull,
		     "too slow: B's idle timers may have ended the sessions");
	{
		struct sockaddr_in me;
		socklen_t ml = sizeof(me);
		char inside[32];

		getsockname(nf.fd[0], (struct sockaddr *)&me, &ml);
		inet_ntop(AF_INET, &me.sin_addr, inside, sizeof(inside));
		snprintf(tuple, sizeof(tuple), "udp:%s:%u-%s:%d", inside,
			 ntohs(me.sin_port), SERVER_ADDR, NF_PORT);
	}
	snprintf(cmd, sizeof(cmd),
		 "%s -S 127.0.0.1:%d -L %s --get %s "
		 ">/dev/null 2>&1",
		 nst_build("tools/natsync-verify"), STORE_PORT, layout, tuple);
	cr_assert_eq(nst_sh("%s", cmd), 1,
		     "the store still holds %s: the test's timing is off",
		     tuple);

	/* One datagram more on every flow, through B. */
	held_before = stat_value('B', "nat.defer_held");
	memset(nf.seen, 0, sizeof(nf.seen));
	for (uint64_t i = 0; i < opened; i++) {
		uint32_t idx = (uint32_t)i;

		cr_assert_eq(send(nf.fd[i], &idx, sizeof(idx), 0),
			     (ssize_t)sizeof(idx));
	}
	cr_assert(WAIT_FOR((nf_count(0, &seen, &late, &lost, &lost_late),
			    seen == opened),
			   5),
		  "the server saw %lu of %lu flows through B",
		  (unsigned long)seen, (unsigned long)opened);
	held_after = stat_value('B', "nat.defer_held");
	timeouts = stat_value('B', "nat.defer_timeouts");
	kill(gw_b, SIGKILL);
	waitpid(gw_b, NULL, 0);
	gw_b = 0;
	cr_assert_eq(keepalived_notify('A', "MASTER"), 0);
	cr_assert(WAIT_FOR(status_has('A', "mode=active"), 20));
	nf_answered();
	nf_count(0, &seen, &late, &lost, &lost_late);
	printf("revived: %lu flows, B held %ld of their packets (%ld let go "
	       "unacknowledged), %lu lost through A\n",
	       (unsigned long)opened, held_after - held_before, timeouts,
	       (unsigned long)lost);
	cr_expect_eq(held_after - held_before, (long)opened,
		     "B held %ld of the %lu packets on sessions the store had "
		     "let expire",
		     held_after - held_before, (unsigned long)opened);
	cr_expect_eq(lost, 0, "%lu of %lu flows lost at the failover",
		     (unsigned long)lost, (unsigned long)opened);
	cr_expect_eq(nst_sh("%s", cmd), 0, "the store lacks %s", tuple);
	nf_reset();
	flows_end_whole(server, client, &udp_before);
	pthread_join(nf_server, NULL);
	close(nf.srv_fd);
}

/* ---- a promotion the forwarding lcore does not take ------------------------ */

/* The thread of gateway pid that runs the forwarding lcore (DPDK names it
 * rte-worker-N), or -1. */
static pid_t lcore_thread(pid_t pid)
{
	char path[128], comm[64];
	pid_t tid = -1;
	FILE *f;

	snprintf(path, sizeof(path),
		 "grep -l '^rte-worker' /proc/%d/task/*/comm 2>/dev/null | "
		 "head -1",
		 (int)pid);
	f = popen(path, "r");
	if (f == NULL)
		return -1;
	if (fgets(comm, sizeof(comm), f) != NULL)
		sscanf(comm, "/proc/%*d/task/%d/comm", &tid);
	pclose(f);
	return tid;
}

/*
 * The standby's forwarding lcore is stopped (ptrace stops that one thread;
 * the rest of the gateway runs) when the active dies and keepalived's
 * notify promotes it: the lcore takes neither the promotion nor its
 * withdrawal, and the gateway is stuck. keepalived asks once. Once the
 * lcore runs again, the gateway must finish the promotion by itself and
 * forward the flows, with no second promote.
 */
Test(failover, a_promotion_the_lcore_did_not_take_is_completed_by_itself)
{
	uint64_t tcp_at_kill, udp_at_kill;
	struct sockaddr_in udp_before;
	pthread_t server, client;
	char reply[4096];
	int status;
	pid_t tid;

	external = 0;
	with_keepalived = 0;
	scenario_start("failover-lcore-stalled", &server, &client);
	udp_before = net.udp_sources[0];
	tid = lcore_thread(gw_b);
	cr_assert_gt(tid, 0, "no rte-worker thread in gateway B");
	cr_assert_eq(ptrace(PTRACE_SEIZE, tid, NULL, NULL), 0,
		     "ptrace seize %d: %s", (int)tid, strerror(errno));
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, tid, NULL, NULL), 0);
	cr_assert_eq(waitpid(tid, &status, __WALL), tid);
	cr_assert(WIFSTOPPED(status), "the lcore thread did not stop");

	kill(gw_a, SIGKILL);
	waitpid(gw_a, NULL, 0);
	gw_a = 0;
	tcp_at_kill = LOAD(tcp_sent);
	udp_at_kill = LOAD(udp_replies);
	cr_expect_neq(keepalived_notify('B', "MASTER"), 0,
		      "promote succeeded with the lcore stopped");
	/* Stuck it stays while the lcore is stopped, retrying. */
	nsdp_sleep_ms(1500);
	cr_expect_eq(ctl('B', "status", reply, sizeof(reply)), 1);
	cr_expect(strstr(reply, "error mode=stuck") != NULL, "B: %s", reply);

	/* The lcore runs again: no one asks B again. */
	cr_assert_eq(ptrace(PTRACE_DETACH, tid, NULL, NULL), 0,
		     "ptrace detach: %s", strerror(errno));
	cr_assert(WAIT_FOR(status_has('B', "mode=active"), 20),
		  "B did not finish its promotion; see %s",
		  nst_run_path("gwB.log"));
	flows_go_on_through('B', tcp_at_kill, udp_at_kill,
			    "after the lcore ran again");
	cr_expect_eq(stat_value('B', "nat.created"), 0);
	flows_end_whole(server, client, &udp_before);
	if (nat64)
		flows6_end_whole();
}

/* Pair pair's writer connections (nst_store_writers) into file in the
 * run directory. */
static void pair_writers(unsigned int pair, const char *file)
{
	nst_store_writers(STORE_PORT, 3, pair, nst_run_path(file));
}

/* The value of key in the store (a cluster), as a number; -1 if none. */
static long store_number(const char *key)
{
	char cmd[256], out[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "redis-cli -c -p %d GET %s", STORE_PORT,
		 key);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	if (fgets(out, sizeof(out), p) == NULL)
		out[0] = 0;
	pclose(p);
	return out[0] >= '0' && out[0] <= '9' ? atol(out) : -1;
}

/*
 * Gateway pairs share one store and fence only their own (gateway_id >>
 * 8, docs/gateway-and-failover.md, Gateway pairs): DPDK gateways A (513)
 * and B (514) of pair 2 take their epochs from natsync:epoch:2, and B's
 * promotion closes A's writer connections (natsync-writer:2), fencing A,
 * while an active agent of pair 1 (257, synthetic source) writes beside
 * them: its connections stay, none of its records is fenced, every one is
 * acknowledged, and pair 1's counter and pair 0's are untouched.
 */
Test(failover, a_gateway_pair_fences_only_its_own_writers)
{
	char text[2048], reply[4096];
	int n;

	nst_need_root("needs root for network namespaces");
	external = 0;
	/* The epochs asserted are the store's: 1 s for the ask, not 50 ms
	 * (under AddressSanitizer A's first ask went provisional). */
	promote_wait_ms = 1000;
	nst_run_dir_make("failover-pairs");
	net_setup();
	cr_assert_eq(nst_store_start(STORE_PORT, 3, 0), 0);
	n = nst_agent_ini(text, sizeof(text), "active", 1 << 8 | 1, 0, 256,
			  "0-1", "127.0.0.1:7800");
	snprintf(text + n, sizeof(text) - n,
		 "layout = %s\nconnect_timeout_ms = 5000\n[agent]\nepoch = 0\n"
		 "[rings]\nlanes = 1\n[source]\ntype = synth\nflows = 20000\n"
		 "events = 2000000\nrate = 20000\nseed = 3\n",
		 layout);
	/* Pair 1's active runs until the test stops it (100 s of events):
	 * a fixed time could end before B's promotion on a slow run. */
	nst_write_file(nst_run_path("pair1.ini"), text);
	agent_a = nst_agent_spawn("pair1", "");
	cr_assert(WAIT_FOR(nst_run_file_has("pair1.log",
					    "epoch 256 from the store"),
			   15),
		  "pair 1's active took no epoch; see %s",
		  nst_run_path("pair1.log"));

	write_gateway_config('A');
	write_gateway_config('B');
	gw_a = start_gateway('A', "--set agent.gateway_id=513");
	cr_assert(WAIT_FOR(status_has('A', "mode=active"), 20),
		  "A was not promoted; see %s", nst_run_path("gwA.log"));
	cr_expect_eq(status_value('A', "epoch"), NSA_EPOCH_STEP,
		     "pair 2's first epoch");
	gw_b = start_gateway('B', "--set agent.gateway_id=514");
	cr_assert(WAIT_FOR(status_has('B', "synced=yes"), 20),
		  "B never loaded the table; see %s", nst_run_path("gwB.log"));

	pair_writers(1, "writers1-before");
	pair_writers(2, "writers2-before");
	cr_assert_eq(nst_sh("test -s %s && test -s %s",
			    nst_run_path("writers1-before"),
			    nst_run_path("writers2-before")),
		     0, "no writer connection of pair 1 or 2 to watch");
	cr_assert_eq(ctl('B', "promote", reply, sizeof(reply)), 0, "%s", reply);
	cr_expect_eq(status_value('B', "epoch"), 2 * NSA_EPOCH_STEP);
	cr_assert(WAIT_FOR(status_has('A', "mode=standby"), 10),
		  "A was not fenced; see %s", nst_run_path("gwA.log"));
	cr_expect(nst_run_file_has("gwA.log", "fenced: "));
	nsdp_sleep_ms(300);
	pair_writers(1, "writers1-after");
	pair_writers(2, "writers2-after");
	/* None closed; one more may open (a log compaction round's, named
	 * as the pair's writers: a fresh-clone run saw one). */
	cr_expect_eq(nst_sh("comm -23 %s %s | grep -q .",
			    nst_run_path("writers1-before"),
			    nst_run_path("writers1-after")),
		     1, "a writer connection of pair 1 was closed");
	cr_expect_eq(nst_sh("comm -12 %s %s | grep -q .",
			    nst_run_path("writers2-before"),
			    nst_run_path("writers2-after")),
		     1, "a writer connection of A outlived the fence");
	cr_expect_eq(store_number("natsync:epoch:2"), 2 * NSA_EPOCH_STEP);
	cr_expect_eq(store_number("natsync:epoch:1"), NSA_EPOCH_STEP);
	cr_expect_eq(store_number("natsync:epoch"), -1,
		     "pair 0's counter was raised");

	kill(agent_a, SIGTERM);
	cr_assert(WAIT_FOR(nst_run_file_has("pair1.out", "^REPORT"), 30),
		  "pair 1's active did not end; see %s",
		  nst_run_path("pair1.log"));
	agent_a = 0;
	cr_expect(nst_run_file_has("pair1.out", "fenced=0 "),
		  "pair 1's active was fenced");
	cr_expect(nst_run_file_has("pair1.out", "drained=yes"),
		  "pair 1's records were not all acknowledged");
	cr_expect_eq(nst_report_field(nst_run_path("pair1.out"), "acked"),
		     nst_report_field(nst_run_path("pair1.out"), "records"),
		     "pair 1's records were not all acknowledged");
}

/* Write n sessions of gateway gateway_id and epoch into the store (in
 * the gateways' layout: nst_store_record), each on the master of its
 * key's slot, and publish none: what an active whose SPUBLISH the fence
 * cut off leaves behind. With pool_addr (host order) their translated
 * source is pool_addr, port 20000 (the gateways' first) + i % n_ports;
 * and n66 NAT66 sessions, on ports 20000 + i % (n66 - 2) of
 * outside_address6 (the last 2 on the first 2's ports). */
static void store_unannounced(uint32_t gateway_id, uint32_t epoch, uint32_t n,
			      uint32_t pool_addr, uint32_t n_ports,
			      uint32_t n66)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct ns_rec rec = {.s = nst_session(IPPROTO_UDP, NS_EV_CREATE,
						      gateway_id, epoch, 600000,
						      nsdp_realtime_ns())};

		nst_session_flow(&rec.s, i);
		if (pool_addr) {
			rec.s.xlat.saddr = pool_addr;
			rec.s.xlat.sport = (uint16_t)(20000 + i % n_ports);
		}
		nst_store_record(STORE_PORT, layout, &rec, 0);
	}
	/* NAT66 ones: from fd00:1::1:i to the IPv6 server, translated to
	 * outside_address6. */
	for (i = 0; i < n66; i++) {
		struct ns_rec rec = {.s = nst_session(IPPROTO_UDP, NS_EV_CREATE,
						      gateway_id, epoch, 600000,
						      nsdp_realtime_ns())};

		rec.s.family = NS_FAMILY_NAT66;
		rec.s.orig.sport = (uint16_t)(40000 + i);
		rec.s.orig.dport = UDP66_PORT;
		rec.s.xlat.sport = (uint16_t)(20000 + i % (n66 - 2));
		rec.s.xlat.dport = UDP66_PORT;
		cr_assert_eq(
			inet_pton(AF_INET6, "fd00:1::1:0", rec.v6.orig_saddr),
			1);
		rec.v6.orig_saddr[15] = (uint8_t)i;
		cr_assert_eq(
			inet_pton(AF_INET6, SERVER66_ADDR, rec.v6.orig_daddr),
			1);
		cr_assert_eq(
			inet_pton(AF_INET6, OUTSIDE6_ADDR, rec.v6.xlat_saddr),
			1);
		memcpy(rec.v6.xlat_daddr, rec.v6.orig_daddr, 16);
		nst_store_record(STORE_PORT, layout, &rec, 0);
	}
}

/* OTHER_PAIR NAT44 sessions of gateway pair 7 (gateway_id 7 << 8 | 1)
 * and A's epoch written into the store (del: deleted), translated to
 * POOL_LAST, ports 20000 and up, which no session of this test's pair
 * holds. (In the log layout nst_store_record writes them under one
 * publisher id, so an epoch below the one it wrote before would make
 * readers pass them over as stale.) */
#define OTHER_PAIR 7
static uint32_t other_pair_epoch;
static void other_pair_sessions(int del)
{
	if (!del)
		other_pair_epoch = (uint32_t)status_value('A', "epoch");
	for (uint32_t i = 0; i < OTHER_PAIR; i++) {
		struct ns_rec rec = {.s = nst_session(IPPROTO_UDP, NS_EV_CREATE,
						      7u << 8 | 1u,
						      other_pair_epoch, 600000,
						      nsdp_realtime_ns())};

		nst_session_flow(&rec.s, 1000 + i);
		rec.s.xlat.saddr = 0xc633640bu; /* POOL_LAST */
		rec.s.xlat.sport = (uint16_t)(20000 + i);
		nst_store_record(STORE_PORT, layout, &rec, del);
	}
}

/* Sessions B loads at its start and A then ends without announcing it:
 * GONE NAT44 ones (flows 1000.. of nst_session_flow, translated to
 * POOL_FIRST:21000..) and GONE66 NAT66 ones (from fd00:2::N to the IPv6
 * server, translated to outside_address6:21100..), of A's gateway id and
 * epoch; written into the store (del 0) or ended there (del 1), on the
 * master of each key's slot (nst_store_record). */
#define GONE 6
#define GONE66 2

static void store_gone(uint32_t epoch, int del)
{
	for (uint32_t i = 0; i < GONE + GONE66; i++) {
		struct ns_rec rec = {.s = nst_session(IPPROTO_UDP, NS_EV_CREATE,
						      1, epoch, 600000,
						      nsdp_realtime_ns())};

		if (i < GONE) {
			nst_session_flow(&rec.s, 1000 + i);
			rec.s.xlat.saddr = 0xc633640au; /* POOL_FIRST */
			rec.s.xlat.sport = (uint16_t)(21000 + i);
		} else {
			rec.s.family = NS_FAMILY_NAT66;
			rec.s.orig.sport = (uint16_t)(41000 + i);
			rec.s.orig.dport = UDP66_PORT;
			rec.s.xlat.sport = (uint16_t)(21100 + i);
			rec.s.xlat.dport = UDP66_PORT;
			cr_assert_eq(inet_pton(AF_INET6, "fd00:2::1:0",
					       rec.v6.orig_saddr),
				     1);
			rec.v6.orig_saddr[15] = (uint8_t)i;
			cr_assert_eq(inet_pton(AF_INET6, SERVER66_ADDR,
					       rec.v6.orig_daddr),
				     1);
			cr_assert_eq(inet_pton(AF_INET6, OUTSIDE6_ADDR,
					       rec.v6.xlat_saddr),
				     1);
			memcpy(rec.v6.xlat_daddr, rec.v6.orig_daddr, 16);
		}
		nst_store_record(STORE_PORT, layout, &rec, del);
	}
}

/* A active, B a synced standby, a 3-master store holding 60 sessions of
 * A's that nobody published (store_unannounced with pool_addr, n_ports;
 * with NAT64 and NAT66 on, 20 NAT66 ones too), in run directory name.
 * With gone, B also loaded store_gone's sessions at its start, which the
 * store no longer holds. */
static void unannounced_pair(const char *name, uint32_t pool_addr,
			     uint32_t n_ports, int gone)
{
	nst_need_root("needs root for network namespaces");
	external = 0;
	nst_run_dir_make(name);
	net_setup();
	cr_assert_eq(nst_store_start(STORE_PORT, 3, 0), 0);
	write_gateway_config('A');
	write_gateway_config('B');
	gw_a = start_gateway('A', "");
	cr_assert(WAIT_FOR(status_has('A', "mode=active"), 20),
		  "A was not promoted; see %s", nst_run_path("gwA.log"));
	if (gone)
		store_gone((uint32_t)status_value('A', "epoch"), 0);
	gw_b = start_gateway('B', "");
	cr_assert(WAIT_FOR(status_has('B', "synced=yes"), 20),
		  "B never loaded the table; see %s", nst_run_path("gwB.log"));
	if (gone) {
		cr_assert_eq(stat_value('B', "table.live"), GONE + GONE66);
		store_gone((uint32_t)status_value('A', "epoch"), 1);
	}
	store_unannounced(1, (uint32_t)status_value('A', "epoch"), 60,
			  pool_addr, n_ports, nat64 ? 20 : 0);
}

/*
 * The fence can close the old active's connection between a batch's
 * writes and its SPUBLISH: the store holds the sessions, no subscriber was
 * told. The promoted gateway reads every master again after the fence, so
 * its table holds them too: here 60 sessions written by A (its gateway id
 * and epoch) into the store alone, none published; B, synced before, ends
 * its promotion with exactly those 60.
 */
Test(failover, a_promotion_reads_back_what_the_fenced_active_never_published)
{
	char reply[4096];

	unannounced_pair("failover-unannounced", 0, 0, 0);
	other_pair_sessions(0);
	nsdp_sleep_ms(200);
	cr_expect_eq(stat_value('B', "table.live"), 0,
		     "B was told of sessions nobody published");

	cr_assert_eq(ctl('B', "promote", reply, sizeof(reply)), 0, "%s", reply);
	cr_expect_eq(stat_value('B', "table.live"), 60,
		     "B's table after its promotion: %ld sessions, the store "
		     "60",
		     stat_value('B', "table.live"));
	cr_assert(WAIT_FOR(status_has('A', "mode=standby"), 10),
		  "A was not fenced; see %s", nst_run_path("gwA.log"));
}

/*
 * The same with the store gone at the promotion: B forwards at once on a
 * provisional epoch and cannot read the store then. Once the store
 * answers and B has made its epoch known, it reads the store back and
 * takes into its table the sessions A wrote and never published, their
 * ports marked: here 60 NAT44 ones with translated sources in B's pool,
 * the last 10 on the ports of the first 10, and 20 NAT66 ones, the last 2
 * on the ports of the first 2, so that 50 + 18 are taken and 10 + 2
 * refused (their ends recorded). B also loaded, at its start, 6 NAT44
 * and 2 NAT66 sessions that A then ended without announcing it (deleted
 * from the store alone): once the store was read whole, B ends them too
 * (nat.forgotten 8). Sessions of another gateway pair in the store stay
 * out of B's table. The store, B and a fresh standby end with the same
 * 68.
 */
Test(failover, a_provisional_promotion_reads_back_once_the_store_answers)
{
	char reply[4096];
	unsigned long store = 0, standby = 0;
	int match;

	nat64 = 1;
	unannounced_pair("failover-unannounced-provisional",
			 0xc633640au /* POOL_FIRST */, 50, 1);
	/* Sessions of another gateway pair (7) sharing the store, on free
	 * ports of B's pool: the read-back leaves them to their pair. */
	other_pair_sessions(0);

	store_signal(SIGSTOP, 0);
	stop_pid(&gw_a, SIGKILL);
	cr_assert_eq(ctl('B', "promote", reply, sizeof(reply)), 0, "%s", reply);
	cr_assert(status_has('B', "provisional=yes"),
		  "B is not on a provisional epoch with the store stopped");
	cr_expect_eq(stat_value('B', "table.live"), GONE + GONE66);
	store_signal(SIGCONT, 0);
	cr_assert(WAIT_FOR(!status_has('B', "provisional=yes"), 20),
		  "B did not make its epoch known to the store; see %s",
		  nst_run_path("gwB.log"));
	cr_assert(WAIT_FOR(stat_value('B', "table.live") == 68, 10),
		  "B's table once the store answered: %ld sessions, the "
		  "store's with free ports 68; see %s",
		  stat_value('B', "table.live"), nst_run_path("gwB.log"));
	cr_expect_eq(stat_value('B', "table.live_v6"), 18);
	cr_expect_eq(stat_value('B', "gateway.readbacks"), 1);
	cr_expect_eq(stat_value('B', "nat.adopted"), 68);
	cr_expect_eq(stat_value('B', "nat.adopt_known"), 0);
	cr_expect_eq(stat_value('B', "nat.adopt_port_taken"), 12);
	cr_assert(
		WAIT_FOR(stat_value('B', "nat.forgotten") == GONE + GONE66, 10),
		"B ended %ld of the %d sessions the store no longer "
		"holds; see %s",
		stat_value('B', "nat.forgotten"), GONE + GONE66,
		nst_run_path("gwB.log"));
	cr_expect_eq(stat_value('B', "table.live"), 68);
	cr_expect_eq(stat_value('B', "table.live_v6"), 18);
	cr_expect_eq(status_value('B', "ports_in_use"), 68);
	/* The 10 ends go out with flush_us: a second is ample. The other
	 * pair's sessions go, so that the store holds this pair's alone. */
	other_pair_sessions(1);
	nsdp_sleep_ms(1000);
	fresh_standby = fresh_standby_start();
	match = verify_store_against_standby(fresh_standby, &store, &standby);
	cr_expect(match, "the store (%lu) and a fresh standby (%lu) differ",
		  store, standby);
	cr_expect_eq(store, 68, "the store holds %lu sessions, B 68", store);
	stop_pid(&fresh_standby, SIGTERM);
}
