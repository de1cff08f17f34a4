/*
 * nsa_conn.c - the store transport: a non-blocking connection, its
 * buffers, the replies it owes, RESP encoding and reply parsing.
 *
 * Invariants:
 * - Commands are encoded in one place, the way hiredis' __redisAppendCommand
 *   does: "*<argc>" then "$<len>" and the bytes of each argument. A command
 *   is either whole in the output buffer or not there at all.
 * - Replies come back in the order commands went out, so each one belongs
 *   to the oldest queued expectation; this module only keeps the queue, the
 *   caller decides what a reply means.
 * - The output buffer is compacted only when it is full, so a slow reader
 *   costs no copying per command.
 *
 * Not here: deciding what to resend or when to reconnect (the callers), the
 * topology (nsa_cluster.c). hiredis still connects and authenticates, and
 * its reader parses replies that are more than one line.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nsa_conn.h"
#include "nsdp_time.h"

#define NSA_CONN_OUT_MIN 65536
#define NSA_CONN_EXP_MIN 1024

void nsa_conn_init(struct nsa_conn *c, const struct nsa_addr *addr)
{
	c->fd = -1;
	c->addr = *addr;
}

struct nsa_conn *nsa_conn_new(const struct nsa_addr *addr)
{
	struct nsa_conn *c = calloc(1, sizeof(*c));

	if (c != NULL)
		nsa_conn_init(c, addr);
	return c;
}

int nsa_conn_open(struct nsa_conn *c, const struct nsa_store_conf *conf,
		  char *err, size_t errlen)
{
	return nsa_conn_open_named(c, conf, NULL, err, errlen);
}

int nsa_conn_open_named(struct nsa_conn *c, const struct nsa_store_conf *conf,
			const char *name, char *err, size_t errlen)
{
	int fl, rc = -ECONNREFUSED;
	/* The name is acknowledged before the socket turns non-blocking. */
	redisContext *ctx =
		name ? nsa_store_connect_named(conf, &c->addr, name, &rc, err,
					       errlen)
		     : nsa_store_connect(conf, &c->addr, err, errlen);

	if (ctx == NULL)
		return rc;
	fl = fcntl(ctx->fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "fcntl: %s", strerror(errno));
		redisFree(ctx);
		return rc;
	}
	ctx->flags &= ~REDIS_BLOCK;
	c->ctx = ctx;
	c->fd = ctx->fd;
	c->in_pos = c->in_len = 0;
	c->out_head = c->out_len = 0;
	c->err[0] = '\0';
	return 0;
}

void nsa_conn_close(struct nsa_conn *c)
{
	if (c->ctx != NULL)
		redisFree(c->ctx); /* closes fd */
	c->ctx = NULL;
	c->fd = -1;
	c->out_head = c->out_len = 0;
	c->in_pos = c->in_len = 0;
}

void nsa_conn_fini(struct nsa_conn *c)
{
	nsa_conn_close(c);
	free(c->out);
	free(c->exp);
	c->out = NULL;
	c->exp = NULL;
	c->out_cap = c->exp_cap = c->exp_count = c->exp_head = 0;
}

void nsa_conn_free(struct nsa_conn *c)
{
	if (c == NULL)
		return;
	nsa_conn_fini(c);
	free(c);
}

/* ---- encoding --------------------------------------------------------- */

static int out_reserve(struct nsa_conn *c, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (c->cmd_failed)
		return -ENOMEM;
	if (c->out_len + n <= c->out_cap)
		return 0;
	if (c->out_head > 0) {
		/* Nothing is sent while a command is built: cmd_start is
		 * past out_head. */
		c->out_len -= c->out_head;
		c->cmd_start -= c->out_head;
		memmove(c->out, c->out + c->out_head, c->out_len);
		c->out_head = 0;
		if (c->out_len + n <= c->out_cap)
			return 0;
	}
	cap = c->out_cap ? c->out_cap : NSA_CONN_OUT_MIN;
	while (cap < c->out_len + n)
		cap *= 2;
	p = realloc(c->out, cap);
	if (p == NULL) {
		c->cmd_failed = 1;
		return -ENOMEM;
	}
	c->out = p;
	c->out_cap = cap;
	return 0;
}

static inline void out_put(struct nsa_conn *c, const void *p, size_t n)
{
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
}

/* "<prefix><v>\r\n" */
static void out_header(struct nsa_conn *c, char prefix, uint64_t v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	c->out[c->out_len++] = (uint8_t)prefix;
	while (n)
		c->out[c->out_len++] = (uint8_t)tmp[--n];
	c->out[c->out_len++] = '\r';
	c->out[c->out_len++] = '\n';
}

void nsa_conn_cmd(struct nsa_conn *c, unsigned int argc)
{
	c->cmd_start = c->out_len;
	c->cmd_failed = 0;
	if (out_reserve(c, 24) == 0)
		out_header(c, '*', argc);
}

void nsa_conn_arg2(struct nsa_conn *c, const void *p1, size_t l1,
		   const void *p2, size_t l2)
{
	if (out_reserve(c, 24 + l1 + l2 + 2) != 0)
		return;
	out_header(c, '$', l1 + l2);
	out_put(c, p1, l1);
	if (l2)
		out_put(c, p2, l2);
	out_put(c, "\r\n", 2);
}

void nsa_conn_arg(struct nsa_conn *c, const void *p, size_t len)
{
	nsa_conn_arg2(c, p, len, NULL, 0);
}

void nsa_conn_arg_u32(struct nsa_conn *c, uint32_t v)
{
	char dec[10];
	size_t n = sizeof(dec);

	do {
		dec[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	nsa_conn_arg(c, dec + n, sizeof(dec) - n);
}

static int exp_push(struct nsa_conn *c, const struct nsa_exp *e)
{
	if (c->exp_count == c->exp_cap) {
		size_t cap = c->exp_cap ? 2 * c->exp_cap : NSA_CONN_EXP_MIN, i;
		struct nsa_exp *x = malloc(cap * sizeof(*x));

		if (x == NULL)
			return -ENOMEM;
		for (i = 0; i < c->exp_count; i++)
			x[i] = c->exp[(c->exp_head + i) & (c->exp_cap - 1)];
		free(c->exp);
		c->exp = x;
		c->exp_cap = cap;
		c->exp_head = 0;
	}
	c->exp[(c->exp_head + c->exp_count) & (c->exp_cap - 1)] = *e;
	c->exp_count++;
	return 0;
}

int nsa_conn_cmd_end(struct nsa_conn *c, const struct nsa_exp *e)
{
	if (c->cmd_failed || (e != NULL && exp_push(c, e) != 0)) {
		c->out_len = c->cmd_start;
		c->cmd_failed = 0;
		return -ENOMEM;
	}
	return 0;
}

/* ---- the socket ------------------------------------------------------- */

ssize_t nsa_conn_send(struct nsa_conn *c)
{
	size_t total = 0;

	while (c->fd >= 0 && c->out_head < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_head,
				 c->out_len - c->out_head,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			snprintf(c->err, sizeof(c->err), "%s", strerror(errno));
			return -1;
		}
		c->out_head += (size_t)n;
		total += (size_t)n;
	}
	if (c->out_head == c->out_len)
		c->out_head = c->out_len = 0;
	return (ssize_t)total;
}

ssize_t nsa_conn_recv(struct nsa_conn *c)
{
	ssize_t n;

	if (c->in_pos > 0) {
		c->in_len -= c->in_pos;
		memmove(c->in, c->in + c->in_pos, c->in_len);
		c->in_pos = 0;
	}
	if (c->in_len == NSA_CONN_IN_CAP) {
		snprintf(c->err, sizeof(c->err), "reply line too long");
		return -1;
	}
	for (;;) {
		n = recv(c->fd, c->in + c->in_len, NSA_CONN_IN_CAP - c->in_len,
			 MSG_DONTWAIT);
		if (n > 0) {
			c->in_len += (size_t)n;
			return n;
		}
		if (n == 0) {
			snprintf(c->err, sizeof(c->err),
				 "closed by the server");
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		snprintf(c->err, sizeof(c->err), "%s", strerror(errno));
		return -1;
	}
}

int nsa_conn_line(struct nsa_conn *c, char *type, const char **text,
		  size_t *len)
{
	uint8_t *p = c->in + c->in_pos, *end = c->in + c->in_len, *nl;
	size_t tl;

	if (p == end)
		return 0;
	nl = memchr(p, '\n', (size_t)(end - p));
	if (nl == NULL) {
		if (c->in_pos == 0 && c->in_len == NSA_CONN_IN_CAP) {
			snprintf(c->err, sizeof(c->err), "reply line too long");
			return -1;
		}
		return 0;
	}
	if (*p != '+' && *p != '-' && *p != ':') {
		snprintf(c->err, sizeof(c->err), "unexpected reply");
		return -1;
	}
	tl = (size_t)(nl - p - 1);
	if (tl > 0 && p[tl] == '\r')
		tl--;
	*type = (char)*p;
	*text = (const char *)p + 1;
	*len = tl;
	c->in_pos = (size_t)(nl + 1 - c->in);
	return 1;
}

int nsa_conn_bulk(struct nsa_conn *c, const uint8_t **data, long *len)
{
	uint8_t *p = c->in + c->in_pos, *end = c->in + c->in_len, *nl, *q;
	long n = 0;

	if (p == end)
		return 0;
	if (*p != '$') {
		snprintf(c->err, sizeof(c->err), "unexpected reply");
		return -1;
	}
	nl = memchr(p, '\n', (size_t)(end - p));
	if (nl == NULL)
		goto incomplete;
	if (p[1] == '-') {
		*data = NULL;
		*len = -1;
		c->in_pos = (size_t)(nl + 1 - c->in);
		return 1;
	}
	for (q = p + 1; q < nl && *q >= '0' && *q <= '9'; q++) {
		n = n * 10 + (*q - '0');
		if (n > NSA_CONN_IN_CAP)
			break;
	}
	if (n > NSA_CONN_IN_CAP - 64 || q == p + 1 || (*q != '\r' && q != nl)) {
		snprintf(c->err, sizeof(c->err), "bad or oversized bulk reply");
		return -1;
	}
	if (end - (nl + 1) < n + 2)
		return 0;
	*data = nl + 1;
	*len = n;
	c->in_pos = (size_t)(nl + 1 + n + 2 - c->in);
	return 1;
incomplete:
	if (c->in_pos == 0 && c->in_len == NSA_CONN_IN_CAP) {
		snprintf(c->err, sizeof(c->err), "reply line too long");
		return -1;
	}
	return 0;
}

int nsa_conn_reply(struct nsa_conn *c, redisReply **r)
{
	void *rv = NULL;

	if (c->in_len > c->in_pos) {
		if (redisReaderFeed(c->ctx->reader,
				    (const char *)c->in + c->in_pos,
				    c->in_len - c->in_pos) != REDIS_OK)
			goto fail;
		c->in_pos = c->in_len = 0;
	}
	if (redisReaderGetReply(c->ctx->reader, &rv) != REDIS_OK)
		goto fail;
	*r = rv;
	return rv != NULL;
fail:
	snprintf(c->err, sizeof(c->err), "%s", c->ctx->reader->errstr);
	return -1;
}

int nsa_conn_call(struct nsa_conn *c, int timeout_ms, redisReply **r)
{
	uint64_t deadline = nsdp_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

	*r = NULL;
	for (;;) {
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		uint64_t now;
		int rc;

		if (nsa_conn_send(c) < 0)
			return -1;
		rc = nsa_conn_reply(c, r);
		if (rc != 0)
			return rc;
		now = nsdp_mono_ns();
		if (now >= deadline) {
			snprintf(c->err, sizeof(c->err),
				 "Resource temporarily unavailable");
			return -1;
		}
		if (nsa_conn_want_write(c))
			p.events |= POLLOUT;
		rc = poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
		if (rc < 0 && errno != EINTR) {
			snprintf(c->err, sizeof(c->err), "%s", strerror(errno));
			return -1;
		}
		if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) &&
		    nsa_conn_recv(c) < 0)
			return -1;
	}
}
