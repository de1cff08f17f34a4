/*
 * nsa_conn.h - one non-blocking, pipelined connection to a store node: its
 * output and input buffers, the FIFO of replies it owes, RESP command
 * encoding and reply parsing. The writers, the subscriber, the loader and
 * natsync-verify all talk to the store through it.
 *
 * A command is built with nsa_conn_cmd() and nsa_conn_arg*() and ends with
 * nsa_conn_cmd_end(), which queues what its reply belongs to; a command
 * that ran out of memory is taken back whole. Replies are read either as
 * simple lines (status, error, integer: the writers' fast path) or as full
 * replies parsed by hiredis' reader.
 */
#ifndef NSA_CONN_H
#define NSA_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "nsa_cluster.h"

#define NSA_CONN_IN_CAP 65536

/* What one reply due on a connection belongs to: the caller's tags. */
struct nsa_exp {
	void *ptr;
	uint32_t kind;
	/* Where in ptr's items the reply belongs (a record's index in its
	 * batch, a read-back's index, a slot, an MGET's first key) and how
	 * many items from there it answers (an MGET's keys). */
	uint32_t pos, count;
};

struct nsa_conn {
	int fd; /* -1: not connected */
	redisContext *ctx; /* owns fd; its reader parses full replies */
	struct nsa_addr addr;
	char err[128]; /* why the last call failed */

	uint8_t *out;
	size_t out_head, out_len, out_cap;
	size_t cmd_start; /* where the command being built began */
	int cmd_failed;

	struct nsa_exp *exp;
	size_t exp_head, exp_count, exp_cap; /* exp_cap a power of two */

	size_t in_pos, in_len;
	uint8_t in[NSA_CONN_IN_CAP];
};

/* Prepare c (zeroed memory) for addr, not connected. */
void nsa_conn_init(struct nsa_conn *c, const struct nsa_addr *addr);
struct nsa_conn *nsa_conn_new(const struct nsa_addr *addr);

/* Connect (blocking, with the configured timeout and AUTH) and turn the
 * socket non-blocking. 0, or a negative errno with a reason in err. */
int nsa_conn_open(struct nsa_conn *c, const struct nsa_store_conf *conf,
		  char *err, size_t errlen);
/* The same, the connection named first (CLIENT SETNAME, acknowledged). */
int nsa_conn_open_named(struct nsa_conn *c, const struct nsa_store_conf *conf,
			const char *name, char *err, size_t errlen);

/* Close the socket and empty the buffers. The replies still due stay
 * queued: the caller pops them, since only it knows what they meant. */
void nsa_conn_close(struct nsa_conn *c);
/* Close and free the buffers (c itself is the caller's), or all of c. */
void nsa_conn_fini(struct nsa_conn *c);
void nsa_conn_free(struct nsa_conn *c);

/* ---- commands (RESP arrays of bulk strings) ---- */

void nsa_conn_cmd(struct nsa_conn *c, unsigned int argc);
void nsa_conn_arg(struct nsa_conn *c, const void *p, size_t len);
/* One argument made of two pieces (a message and its trailer). */
void nsa_conn_arg2(struct nsa_conn *c, const void *p1, size_t l1,
		   const void *p2, size_t l2);
void nsa_conn_arg_u32(struct nsa_conn *c, uint32_t v);
#define nsa_conn_arg_str(c, s) nsa_conn_arg((c), (s), strlen(s))
/* End the command and queue e for its reply (NULL: no reply is counted,
 * as for pub/sub). 0, or -ENOMEM with the command taken back. */
int nsa_conn_cmd_end(struct nsa_conn *c, const struct nsa_exp *e);

static inline int nsa_conn_want_write(const struct nsa_conn *c)
{
	return c->out_head < c->out_len;
}

/* Send what is buffered until done or the socket is full: the bytes sent,
 * or -1 when the connection is lost (reason in c->err). */
ssize_t nsa_conn_send(struct nsa_conn *c);

/* ---- replies ---- */

/* Receive once what the socket holds: the bytes read, 0 when none, -1 when
 * the connection is lost (reason in c->err). */
ssize_t nsa_conn_recv(struct nsa_conn *c);

/* The next simple reply (+status, -error or :integer) in the input: 1 with
 * its type and text (valid until the next receive), 0 when none is
 * complete, -1 when the input holds another kind of reply or a line longer
 * than the buffer (c->err). */
int nsa_conn_line(struct nsa_conn *c, char *type, const char **text,
		  size_t *len);

/* The next bulk string reply ($) in the input: 1 with its bytes (*data
 * NULL and *len -1 for a nil reply; valid until the next receive), 0 when
 * none is complete, -1 when the input holds another kind of reply or a
 * reply longer than the buffer (c->err). */
int nsa_conn_bulk(struct nsa_conn *c, const uint8_t **data, long *len);

/* The next complete reply of any type (the caller frees it): 1, 0 when
 * none is complete, -1 on a protocol error (c->err). */
int nsa_conn_reply(struct nsa_conn *c, redisReply **r);

/* Send, then wait at most timeout_ms for the next reply: 1 or -1
 * (c->err). For set-up steps such as SUBSCRIBE. */
int nsa_conn_call(struct nsa_conn *c, int timeout_ms, redisReply **r);

/* The FIFO of replies due. */
static inline const struct nsa_exp *nsa_conn_exp_peek(const struct nsa_conn *c)
{
	return c->exp_count ? &c->exp[c->exp_head] : NULL;
}

static inline struct nsa_exp nsa_conn_exp_pop(struct nsa_conn *c)
{
	struct nsa_exp e = c->exp[c->exp_head];

	c->exp_head = (c->exp_head + 1) & (c->exp_cap - 1);
	c->exp_count--;
	return e;
}

#endif
