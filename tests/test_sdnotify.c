/*
 * test_sdnotify.c - nsa_sdnotify against a real AF_UNIX datagram socket the
 * test binds where systemd would, named by $NOTIFY_SOCKET: READY=1 with a
 * status, STOPPING=1, the watchdog kicked no more often than every
 * WATCHDOG_USEC/2, abstract socket names, and nothing sent at all without
 * NOTIFY_SOCKET.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nsa_sdnotify.h"

static char sock_path[108];

/* A datagram socket bound to NOTIFY_SOCKET's value (name: "/path" or
 * "@abstract"). */
static int notify_socket_bind(const char *name)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	memcpy(a.sun_path, name, len);
	if (name[0] == '@')
		a.sun_path[0] = 0;
	else
		unlink(name);
	cr_assert_eq(
		bind(fd, (struct sockaddr *)&a,
		     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)),
		0, "bind %s: %s", name, strerror(errno));
	return fd;
}

static int path_socket(void)
{
	snprintf(sock_path, sizeof(sock_path), "/tmp/nst-sdnotify-%d.sock",
		 (int)getpid());
	return notify_socket_bind(sock_path);
}

static void path_socket_gone(void)
{
	if (sock_path[0])
		unlink(sock_path);
}

/* The next datagram within ms into buf (NUL-terminated); its length, or -1
 * when none came. */
static int receive(int fd, char *buf, size_t len, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return -1;
	n = recv(fd, buf, len - 1, 0);
	cr_assert_geq(n, 0);
	buf[n] = 0;
	return (int)n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(sdnotify, ready_sends_ready_and_status_to_a_path_socket,
     .fini = path_socket_gone)
{
	int fd = path_socket();
	char buf[256];

	setenv("NOTIFY_SOCKET", sock_path, 1);
	cr_assert_eq(nsa_sd_open(), 0);
	cr_assert_eq(nsa_sd_ready("standby"), 1);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 1000), 22);
	cr_assert_str_eq(buf, "READY=1\nSTATUS=standby");
	cr_assert_eq(nsa_sd_ready(NULL), 1);
	receive(fd, buf, sizeof(buf), 1000);
	cr_assert_str_eq(buf, "READY=1");
	cr_assert_eq(nsa_sd_stopping(), 1);
	receive(fd, buf, sizeof(buf), 1000);
	cr_assert_str_eq(buf, "STOPPING=1");
	cr_assert_eq(nsa_sd_notify("STATUS=draining"), 1);
	receive(fd, buf, sizeof(buf), 1000);
	cr_assert_str_eq(buf, "STATUS=draining");
	close(fd);
}

Test(sdnotify, abstract_socket_names_start_with_at)
{
	char name[64], buf[256];
	int fd;

	snprintf(name, sizeof(name), "@nst-sdnotify-%d", (int)getpid());
	fd = notify_socket_bind(name);
	setenv("NOTIFY_SOCKET", name, 1);
	cr_assert_eq(nsa_sd_open(), 0);
	cr_assert_eq(nsa_sd_ready("active"), 1);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 1000), 21);
	cr_assert_str_eq(buf, "READY=1\nSTATUS=active");
	close(fd);
}

Test(sdnotify, nothing_is_sent_without_notify_socket, .fini = path_socket_gone)
{
	int fd = path_socket();
	char buf[256];

	unsetenv("NOTIFY_SOCKET");
	setenv("WATCHDOG_USEC", "100000", 1);
	cr_assert_eq(nsa_sd_open(), 0);
	cr_assert_eq(nsa_sd_ready("standby"), 0);
	cr_assert_eq(nsa_sd_watchdog(), 0);
	cr_assert_eq(nsa_sd_stopping(), 0);
	cr_assert_eq(nsa_sd_watchdog_usec(), 0);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 200), -1, "received \"%s\"",
		     buf);
	close(fd);
}

Test(sdnotify, a_relative_notify_socket_is_refused, .fini = path_socket_gone)
{
	int fd = path_socket();
	char buf[256];

	setenv("NOTIFY_SOCKET", sock_path + 1, 1); /* "tmp/...": relative */
	cr_assert_eq(nsa_sd_open(), -EINVAL);
	cr_assert_eq(nsa_sd_ready(NULL), 0);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 200), -1);
	close(fd);
}

Test(sdnotify, watchdog_is_kicked_at_most_every_half_interval,
     .fini = path_socket_gone)
{
	int fd = path_socket(), sent = 0, received = 0, calls = 0;
	char buf[256];
	double t0, elapsed;

	setenv("NOTIFY_SOCKET", sock_path, 1);
	setenv("WATCHDOG_USEC", "200000", 1); /* a kick every 100 ms */
	unsetenv("WATCHDOG_PID");
	cr_assert_eq(nsa_sd_open(), 0);
	cr_assert_eq(nsa_sd_watchdog_usec(), 200000);
	/* The first call sends, the next one right after does not. */
	cr_assert_eq(nsa_sd_watchdog(), 1);
	cr_assert_eq(nsa_sd_watchdog(), 0);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 1000), 10);
	cr_assert_str_eq(buf, "WATCHDOG=1");
	cr_assert_eq(receive(fd, buf, sizeof(buf), 50), -1);
	/* A 2 ms main loop for 1 s: about one kick per 100 ms, never more. */
	t0 = now_s();
	while ((elapsed = now_s() - t0) < 1.0 && calls < 2000) {
		int rc = nsa_sd_watchdog();

		cr_assert_geq(rc, 0);
		sent += rc;
		calls++;
		usleep(2000);
	}
	while (receive(fd, buf, sizeof(buf), 100) > 0) {
		cr_assert_str_eq(buf, "WATCHDOG=1");
		received++;
	}
	cr_assert_eq(received, sent);
	/* The first kick of the loop is 100 ms after the one before it. */
	cr_assert_leq(sent, (int)(elapsed / 0.1), "%d kicks in %.3f s", sent,
		      elapsed);
	cr_assert_geq(sent, 8, "%d kicks in %.3f s (%d calls)", sent, elapsed,
		      calls);
	close(fd);
}

Test(sdnotify, a_watchdog_meant_for_another_process_is_not_kicked,
     .fini = path_socket_gone)
{
	int fd = path_socket();
	char buf[256], pid[32];

	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	setenv("NOTIFY_SOCKET", sock_path, 1);
	setenv("WATCHDOG_USEC", "200000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	cr_assert_eq(nsa_sd_open(), 0);
	cr_assert_eq(nsa_sd_watchdog_usec(), 0);
	cr_assert_eq(nsa_sd_watchdog(), 0);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 200), -1);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	cr_assert_eq(nsa_sd_open(), 0);
	cr_assert_eq(nsa_sd_watchdog(), 1);
	cr_assert_eq(receive(fd, buf, sizeof(buf), 1000), 10);
	close(fd);
}
