/*
 * nst_netns.c - network namespaces a test built: a thread visits one only
 * to create a socket or a netlink handle (which belong to the namespace
 * they were made in for their whole life) and comes back at once, or
 * enters one for good (a client or server thread); a TCP connection
 * through a gateway and the count of a namespace's conntrack entries.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "nst_netns.h"

int nst_netns_visit(const char *ns)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	char path[128];
	int target;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	target = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(self >= 0 && target >= 0, "namespace %s", ns);
	cr_assert_eq(setns(target, CLONE_NEWNET), 0, "setns %s", ns);
	close(target);
	return self;
}

void nst_netns_back(int self)
{
	cr_assert_eq(setns(self, CLONE_NEWNET), 0);
	close(self);
}

/* Called from client and server threads, where a Criterion assertion
 * cannot stop the test: a failure aborts the process. */
void nst_enter_netns(const char *ns)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
		fprintf(stderr, "setns %s: %s\n", ns, strerror(errno));
		abort();
	}
	close(fd);
}

int nst_socket_in(const char *ns, int type, uint32_t addr, uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(addr)};
	struct timeval tv = {.tv_sec = 3};
	int self = nst_netns_visit(ns);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	nst_netns_back(self);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0,
		     "bind %s:%u", ns, port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

int nst_tcp_connect(const char *client_ns, uint32_t client, uint16_t port,
		    uint32_t server, uint16_t server_port, int listener,
		    int *server_side, uint32_t *xaddr, uint16_t *xport)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(server_port),
				 .sin_addr.s_addr = htonl(server)};
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	int fd = nst_socket_in(client_ns, SOCK_STREAM, client, port);

	cr_assert_eq(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0,
		     "connect from %u", port);
	*server_side = accept(listener, (struct sockaddr *)&peer, &pl);
	cr_assert(*server_side >= 0);
	*xaddr = ntohl(peer.sin_addr.s_addr);
	*xport = ntohs(peer.sin_port);
	return fd;
}

unsigned long nst_conntrack_count(const char *ns)
{
	char cmd[256], line[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "ip netns exec %s conntrack -L 2>/dev/null | wc -l", ns);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	if (!fgets(line, sizeof(line), p))
		line[0] = 0;
	pclose(p);
	return strtoul(line, NULL, 10);
}
