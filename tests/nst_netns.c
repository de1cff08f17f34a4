/*
 * nst_netns.c - sockets in other network namespaces: the thread enters
 * the namespace only to create the socket (a socket belongs to the
 * namespace it was made in for its whole life) and comes back at once.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "nst_netns.h"

int nst_socket_in(const char *ns, int type, uint32_t addr, uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(addr)};
	struct timeval tv = {.tv_sec = 3};
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	char path[128];
	int target, fd;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	target = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(self >= 0 && target >= 0);
	cr_assert_eq(setns(target, CLONE_NEWNET), 0);
	fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	cr_assert_eq(setns(self, CLONE_NEWNET), 0);
	close(self);
	close(target);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0,
		     "bind %s:%u", ns, port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}
