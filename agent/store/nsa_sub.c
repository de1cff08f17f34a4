/*
 * nsa_sub.c - a pub/sub subscription over nsa_conn.
 *
 * Invariants: a subscription is open only once the server confirmed it;
 * anything but a message on it (an error, an unsubscribe, a broken reply)
 * ends it, and the caller starts over. A subscription can die without a
 * sound (a firewall that forgets the connection): only the PING tells.
 *
 * Not here: what a message means, or what to do after a reset.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nsa_sub.h"
#include "nsdp_time.h"

static int is_str(const redisReply *r, const char *s)
{
	return r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

static void drop_msg(struct nsa_sub *s)
{
	if (s->msg)
		freeReplyObject(s->msg);
	s->msg = NULL;
}

void nsa_sub_close(struct nsa_sub *s)
{
	drop_msg(s);
	nsa_conn_free(s->conn);
	s->conn = NULL;
}

int nsa_sub_open(struct nsa_sub *s, const struct nsa_store_conf *conf,
		 const struct nsa_addr *addr, const char *channel, int sharded,
		 int timeout_ms, char *err, size_t errlen)
{
	redisReply *r = NULL;
	int ok;

	nsa_sub_close(s);
	s->conn = nsa_conn_new(addr);
	if (!s->conn) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (nsa_conn_open(s->conn, conf, err, errlen) < 0)
		return -ECONNREFUSED;
	nsa_conn_cmd(s->conn, 2);
	nsa_conn_arg_str(s->conn, sharded ? "SSUBSCRIBE" : "SUBSCRIBE");
	nsa_conn_arg_str(s->conn, channel);
	if (nsa_conn_cmd_end(s->conn, NULL) == 0)
		nsa_conn_call(s->conn, timeout_ms, &r);
	ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	     (is_str(r->element[0], "ssubscribe") ||
	      is_str(r->element[0], "subscribe"));
	if (!ok)
		snprintf(err, errlen, "subscribe to %s on %s:%u: %s", channel,
			 addr->host, addr->port,
			 !r				? s->conn->err
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "unexpected reply");
	if (r)
		freeReplyObject(r);
	if (!ok)
		return -EPROTO;
	s->quiet_since_ns = nsdp_mono_ns();
	s->ping_sent_ns = 0;
	s->pings = s->pongs = 0;
	return 0;
}

int nsa_sub_recv(struct nsa_sub *s, uint64_t now_ns)
{
	if (nsa_conn_recv(s->conn) < 0)
		return -1;
	s->quiet_since_ns = now_ns;
	s->ping_sent_ns = 0;
	return 0;
}

int nsa_sub_next(struct nsa_sub *s, const uint8_t **msg, size_t *len,
		 const char **why)
{
	redisReply *r;

	*why = NULL;
	drop_msg(s);
	for (;;) {
		int rc = nsa_conn_reply(s->conn, &r);

		if (rc <= 0)
			return rc < 0 ? NSA_SUB_RESET : NSA_SUB_NONE;
		s->msg = r;
		if (r->type == REDIS_REPLY_ERROR) {
			*why = r->str;
			return NSA_SUB_RESET;
		}
		if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3) {
			if ((is_str(r->element[0], "smessage") ||
			     is_str(r->element[0], "message")) &&
			    r->element[2]->type == REDIS_REPLY_STRING) {
				*msg = (const uint8_t *)r->element[2]->str;
				*len = r->element[2]->len;
				return NSA_SUB_MESSAGE;
			}
			if (is_str(r->element[0], "sunsubscribe") ||
			    is_str(r->element[0], "unsubscribe"))
				return NSA_SUB_RESET;
		}
		/* A subscribed connection answers PING with ["pong", ""]. */
		if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
		    is_str(r->element[0], "pong"))
			s->pongs++;
		drop_msg(s); /* a PING's answer, or other chatter */
	}
}

int nsa_sub_check_alive(struct nsa_sub *s, uint64_t ping_ns, uint64_t now_ns)
{
	if (ping_ns == 0)
		return 0;
	if (s->ping_sent_ns && now_ns - s->ping_sent_ns >= 2 * ping_ns)
		return NSA_SUB_DEAD;
	if (now_ns - s->quiet_since_ns >= ping_ns && s->ping_sent_ns == 0) {
		if (nsa_sub_ping(s) != 0)
			return NSA_SUB_RESET;
		s->ping_sent_ns = now_ns;
	}
	/* A few bytes: written at once, or on a later round. */
	if (nsa_conn_want_write(s->conn) && nsa_conn_send(s->conn) < 0)
		return NSA_SUB_RESET;
	return 0;
}

int nsa_sub_ping(struct nsa_sub *s)
{
	nsa_conn_cmd(s->conn, 1);
	nsa_conn_arg_str(s->conn, "PING");
	if (nsa_conn_cmd_end(s->conn, NULL) != 0)
		return NSA_SUB_RESET;
	s->pings++;
	return 0;
}
