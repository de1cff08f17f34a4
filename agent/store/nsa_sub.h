/*
 * nsa_sub.h - one pub/sub subscription to a master's notification channel:
 * subscribe and wait for the confirmation, receive messages, and keep it
 * honest with a PING when it has been quiet.
 */
#ifndef NSA_SUB_H
#define NSA_SUB_H

#include <stddef.h>
#include <stdint.h>

#include "nsa_conn.h"

#define NSA_SUB_NONE 0 /* no complete message now */
#define NSA_SUB_MESSAGE 1
#define NSA_SUB_RESET (-1) /* unsubscribed, an error, or a broken stream */
#define NSA_SUB_DEAD (-2) /* PING unanswered */

struct nsa_sub {
	struct nsa_conn *conn; /* NULL: closed */
	/* When it last delivered anything, and when the PING that asks for a
	 * sign of life went (0: none due). */
	uint64_t quiet_since_ns;
	uint64_t ping_sent_ns;
	/* PINGs sent and answered on this subscription: answers come in
	 * order, after every message published before the PING. */
	uint64_t pings, pongs;
	redisReply *msg; /* the message last returned */
};

/* Connect to addr and SSUBSCRIBE (sharded) or SUBSCRIBE to channel, waiting
 * at most timeout_ms for the confirmation. 0, or a negative errno with the
 * reason in err. */
int nsa_sub_open(struct nsa_sub *s, const struct nsa_store_conf *conf,
		 const struct nsa_addr *addr, const char *channel, int sharded,
		 int timeout_ms, char *err, size_t errlen);
void nsa_sub_close(struct nsa_sub *s);

/* Read what the socket holds (when it is readable): 0, or -1 when the
 * subscription is lost (reason in s->conn->err). */
int nsa_sub_recv(struct nsa_sub *s, uint64_t now_ns);

/* The next message received: NSA_SUB_MESSAGE with its payload (valid until
 * the next call), NSA_SUB_NONE, or NSA_SUB_RESET with a reason in *why
 * (NULL when none is worth a log line). */
int nsa_sub_next(struct nsa_sub *s, const uint8_t **msg, size_t *len,
		 const char **why);

/* After a round's reads: PING a subscription quiet for ping_ns, and give up
 * on one whose PING stays unanswered for twice that (so that a process
 * that was itself paused gets its answer before it judges). 0,
 * NSA_SUB_DEAD, or NSA_SUB_RESET when the PING cannot be sent. */
int nsa_sub_check_alive(struct nsa_sub *s, uint64_t ping_ns, uint64_t now_ns);

/* Queue a PING: once s->pongs reaches the s->pings it returns, every message
 * published on the channel before the PING reached the server has been
 * returned by nsa_sub_next. 0 or NSA_SUB_RESET. */
int nsa_sub_ping(struct nsa_sub *s);

#endif
