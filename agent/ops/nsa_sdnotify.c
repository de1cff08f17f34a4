/*
 * nsa_sdnotify.c - the sd_notify protocol: one AF_UNIX datagram per
 * notification to the socket systemd names in $NOTIFY_SOCKET, a path or,
 * with a leading '@', an abstract name. No libsystemd: the protocol is one
 * sendto(), and the programs then run the same with and without systemd.
 *
 * The watchdog is kicked at most every WATCHDOG_USEC/2 (what sd_notify(3)
 * asks for), so that the 20-50 ms main loops can call it each time round;
 * a WATCHDOG_PID naming another process means the watchdog is not ours.
 *
 * Not here: the fd store, MAINPID, vsock addresses, credentials.
 */
#include "nsa_sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static struct {
	int opened;
	int usable;
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t watchdog_usec;
	uint64_t last_watchdog_us; /* 0: never sent */
} sd;

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t watchdog_from_env(void)
{
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!usec || !*usec)
		return 0;
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno || *end || v == 0)
		return 0;
	if (pid && *pid) {
		long p = strtol(pid, &end, 10);

		if (*end || p != (long)getpid())
			return 0;
	}
	return v;
}

int nsa_sd_open(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len;

	memset(&sd, 0, sizeof(sd));
	sd.opened = 1;
	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') ||
	    len >= sizeof(sd.addr.sun_path))
		return -EINVAL;
	sd.addr.sun_family = AF_UNIX;
	memcpy(sd.addr.sun_path, path, len);
	if (path[0] == '@')
		sd.addr.sun_path[0] = 0; /* abstract: no terminating NUL */
	else
		len++;
	sd.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	sd.usable = 1;
	sd.watchdog_usec = watchdog_from_env();
	return 0;
}

int nsa_sd_notify(const char *state)
{
	int fd, rc = 1;

	if (!sd.opened)
		nsa_sd_open();
	if (!sd.usable)
		return 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (const struct sockaddr *)&sd.addr, sd.addr_len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int nsa_sd_ready(const char *status)
{
	char msg[256];

	if (!status)
		return nsa_sd_notify("READY=1");
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
	return nsa_sd_notify(msg);
}

int nsa_sd_watchdog(void)
{
	uint64_t t;
	int rc;

	if (!sd.opened)
		nsa_sd_open();
	if (!sd.usable || !sd.watchdog_usec)
		return 0;
	t = now_us();
	if (sd.last_watchdog_us &&
	    t - sd.last_watchdog_us < sd.watchdog_usec / 2)
		return 0;
	rc = nsa_sd_notify("WATCHDOG=1");
	if (rc > 0)
		sd.last_watchdog_us = t;
	return rc;
}

int nsa_sd_stopping(void)
{
	return nsa_sd_notify("STOPPING=1");
}

uint64_t nsa_sd_watchdog_usec(void)
{
	if (!sd.opened)
		nsa_sd_open();
	return sd.usable ? sd.watchdog_usec : 0;
}
