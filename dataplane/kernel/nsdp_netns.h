/*
 * nsdp_netns.h - a socket opened inside another network namespace: the
 * calling thread enters it, opens, and comes back. Shared by the kernel
 * source's conntrack handles and the defer queue's socket.
 */
#ifndef NSDP_NETNS_H
#define NSDP_NETNS_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

/* Enter the namespace of netns_fd on this thread (-1: stay where it is).
 * The descriptor to come back with (nsdp_netns_leave), -1 when none was
 * entered, or -2 with errno set when it could not enter. */
static inline int nsdp_netns_enter(int netns_fd)
{
	int own, saved;

	if (netns_fd < 0)
		return -1;
	own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (own < 0 || setns(netns_fd, CLONE_NEWNET) != 0) {
		saved = errno;
		if (own >= 0)
			close(own);
		errno = saved;
		return -2;
	}
	return own;
}

/* Back to the namespace nsdp_netns_enter() left (own; nothing for -1),
 * errno kept. Aborts when it cannot: the thread would run on in the wrong
 * namespace. */
static inline void nsdp_netns_leave(int own)
{
	int saved = errno;

	if (own >= 0) {
		if (setns(own, CLONE_NEWNET) != 0)
			abort();
		close(own);
	}
	errno = saved;
}

#endif
