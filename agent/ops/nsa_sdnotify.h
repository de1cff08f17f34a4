/*
 * nsa_sdnotify.h - telling systemd how a natsync program is doing (the
 * sd_notify protocol, without libsystemd): READY=1 once started, WATCHDOG=1
 * from the main loop, STOPPING=1, STATUS=... lines.
 *
 * Everything is a no-op outside a Type=notify unit (no $NOTIFY_SOCKET), so
 * the programs call it unconditionally. Main thread only: the state below
 * is not shared with other threads.
 */
#ifndef NSA_SDNOTIFY_H
#define NSA_SDNOTIFY_H

#include <stdint.h>

/* Read $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID again (the first
 * call of any function below does it once by itself). 0; -EINVAL when
 * NOTIFY_SOCKET is set but not a usable AF_UNIX path ("/..." or "@..."),
 * after which nothing is sent. */
int nsa_sd_open(void);

/* Send one datagram of newline-separated assignments. 1 sent, 0 nothing to
 * send to, -errno. */
int nsa_sd_notify(const char *state);

/* READY=1 with STATUS=status (NULL: none). */
int nsa_sd_ready(const char *status);

/* WATCHDOG=1 when half of $WATCHDOG_USEC has passed since the last one
 * (the first call sends); cheap enough for every loop iteration. 1 sent, 0
 * not yet or no watchdog, -errno. */
int nsa_sd_watchdog(void);

/* STOPPING=1. */
int nsa_sd_stopping(void);

/* The watchdog interval the unit asked for, in microseconds (0: none). */
uint64_t nsa_sd_watchdog_usec(void);

#endif
