/*
 * nsa_fence.c - issuing promotion epochs, reading them, and fencing the
 * writers of older ones out of the store.
 *
 * Why closing connections fences: Redis runs one command at a time. A
 * promotion first takes its epoch (INCRBY), then lists and closes the
 * writer connections on each master. A writer connection the listing saw
 * is closed, and nothing it sends afterwards runs. One it did not see was
 * named after the listing, hence after the INCRBY; the writer reads the
 * counter only once the name is acknowledged, so it reads the new epoch
 * before it writes anything on that connection.
 *
 * Everything here is blocking and rare (a promotion, a reconnection, the
 * gateway's periodic check); nothing runs per record.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "nsa_fence.h"

const char *nsa_epoch_key(uint32_t pair, char *buf)
{
	if (pair == 0)
		snprintf(buf, NSA_PAIR_NAME_MAX, "%s", NSA_EPOCH_KEY);
	else
		snprintf(buf, NSA_PAIR_NAME_MAX, "%s:%u", NSA_EPOCH_KEY, pair);
	return buf;
}

const char *nsa_epoch_taker_key(uint32_t pair, char *buf)
{
	char key[NSA_PAIR_NAME_MAX];

	snprintf(buf, NSA_PAIR_NAME_MAX, "{%s}:taker",
		 nsa_epoch_key(pair, key));
	return buf;
}

uint64_t nsa_epoch_token_new(void)
{
	uint64_t t = 0;
	struct timespec ts;

	if (getrandom(&t, sizeof(t), 0) != (ssize_t)sizeof(t)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = (uint64_t)getpid() << 40 ^ (uint64_t)ts.tv_sec << 20 ^
		    (uint64_t)ts.tv_nsec;
	}
	return t != 0 ? t : 1;
}

/* conf's token as the scripts take it: a new one when it has none. */
static const char *token_of(const struct nsa_store_conf *conf, char *buf,
			    size_t len)
{
	uint64_t t = conf->epoch_token;

	snprintf(buf, len, "%016" PRIx64, t != 0 ? t : nsa_epoch_token_new());
	return buf;
}

const char *nsa_writer_name(uint32_t pair, char *buf)
{
	if (pair == 0)
		snprintf(buf, NSA_PAIR_NAME_MAX, "%s", NSA_WRITER_NAME);
	else
		snprintf(buf, NSA_PAIR_NAME_MAX, "%s:%u", NSA_WRITER_NAME,
			 pair);
	return buf;
}

/* A connection to the master that owns key in t (a fresh topology when t
 * is NULL), or NULL with err. */
static redisContext *key_connect(const struct nsa_store_conf *conf,
				 const struct nsa_topology *t, const char *key,
				 struct nsa_addr *addr, char *err,
				 size_t errlen)
{
	struct nsa_topology *own = NULL;
	redisContext *c;

	if (t == NULL) {
		own = malloc(sizeof(*own));
		if (own == NULL) {
			nsa_set_err(err, errlen, "out of memory");
			return NULL;
		}
		if (nsa_topology_fetch(conf, own, err, errlen) < 0) {
			free(own);
			return NULL;
		}
		t = own;
	}
	*addr = t->nodes[t->slot_node[ns_key_slot(key, strlen(key))]].addr;
	free(own);
	c = nsa_store_connect(conf, addr, err, errlen);
	return c;
}

/* The new address when r is a MOVED redirection. */
static int moved_to(const redisReply *r, struct nsa_addr *addr)
{
	const char *at;

	if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "MOVED ", 6))
		return 0;
	at = strchr(r->str + 6, ' ');
	return at && nsa_addr_parse(at + 1, addr) == 0;
}

/* Run a command on key's master, following one MOVED. The reply (the
 * caller frees it and *cp) or NULL with err. */
static redisReply *key_command(const struct nsa_store_conf *conf,
			       const struct nsa_topology *t, const char *key,
			       redisContext **cp, char *err, size_t errlen,
			       const char *fmt, ...)
{
	struct nsa_addr addr;
	redisContext *c = key_connect(conf, t, key, &addr, err, errlen);
	redisReply *r = NULL;

	for (int attempt = 0; c != NULL && attempt < 2; attempt++) {
		va_list ap;

		va_start(ap, fmt);
		r = redisvCommand(c, fmt, ap);
		va_end(ap);
		if (r == NULL) {
			nsa_set_err(err, errlen, "%s on %s:%u: %s", key,
				    addr.host, addr.port, c->errstr);
			break;
		}
		if (attempt > 0 || !moved_to(r, &addr)) {
			*cp = c;
			return r;
		}
		/* The slot moved since the map was read. */
		freeReplyObject(r);
		r = NULL;
		redisFree(c);
		c = nsa_store_connect(conf, &addr, err, errlen);
	}
	if (c != NULL)
		redisFree(c);
	return NULL;
}

/* Atomic on the key's master: the counter (KEYS[1]) raised to the next
 * multiple of NSA_EPOCH_STEP (ARGV[2]) above both its value and ARGV[1],
 * returned; the taker key (KEYS[2]) set to "value, value before, token"
 * (the token ARGV[3]). INCRBY, not SET, so that a user allowed this cannot set the
 * counter back (the ACL of deploy/redis-users.acl.example). */
static const char take_script[] =
	"local c = tonumber(redis.call('GET', KEYS[1]) or '0') "
	"local f = math.max(c, tonumber(ARGV[1])) "
	"local s = tonumber(ARGV[2]) "
	"local e = redis.call('INCRBY', KEYS[1], "
	"(math.floor(f / s) + 1) * s - c) "
	"redis.call('SET', KEYS[2], e .. ' ' .. c .. ' ' .. ARGV[3]) "
	"return e";
/* Atomic: the counter raised to ARGV[1] when below it (the taker key set
 * as a take sets it); its value after. When above it and the taker key
 * says this token's own ask set it (an ask that gave up and ran late:
 * nobody uses that epoch), first set back to the value before that ask. */
static const char raise_script[] =
	"local c = tonumber(redis.call('GET', KEYS[1]) or '0') "
	"local e = tonumber(ARGV[1]) "
	"local p = c "
	"if c > e then "
	" local t = redis.call('GET', KEYS[2]) "
	" if t then "
	"  local te, tp, tt = string.match(t, '^(%d+) (%d+) (%x+)$') "
	"  if tt == ARGV[3] and tonumber(te) == c then "
	"   p = tonumber(tp) "
	"   redis.call('INCRBY', KEYS[1], p - c) "
	"   c = p "
	"  end "
	" end "
	"end "
	"if c < e then "
	" redis.call('INCRBY', KEYS[1], e - c) "
	" redis.call('SET', KEYS[2], e .. ' ' .. p .. ' ' .. ARGV[3]) "
	" return e "
	"end "
	"return c";

/* Run script on the pair's counter and taker with arg and conf's token,
 * then WAIT for a replica where its master has one (conf->epoch_wait_ms):
 * the counter's value the script returned, or a negative errno with
 * err. */
static int64_t epoch_script(const struct nsa_store_conf *conf,
			    const char *script, uint64_t arg, char *err,
			    size_t errlen)
{
	char key[NSA_PAIR_NAME_MAX], taker[NSA_PAIR_NAME_MAX], token[24];
	redisContext *c = NULL;
	redisReply *r = key_command(
		conf, NULL, nsa_epoch_key(conf->pair, key), &c, err, errlen,
		"EVAL %s 2 %s %s %llu %u %s", script, key,
		nsa_epoch_taker_key(conf->pair, taker), (unsigned long long)arg,
		NSA_EPOCH_STEP, token_of(conf, token, sizeof(token)));
	int64_t rc;

	if (r == NULL)
		return -EIO;
	if (r->type != REDIS_REPLY_INTEGER) {
		nsa_set_err(err, errlen, "EVAL on %s: %s", key,
			    r->type == REDIS_REPLY_ERROR ? r->str
							 : "unexpected reply");
		rc = -EPROTO;
	} else if (conf->epoch_wait_ms > 0 &&
		   nsa_store_wait_replica(c, conf->epoch_wait_ms, err, errlen) <
			   0) {
		/* A replica promoted now could issue this value again. */
		size_t l = strlen(err);

		nsa_set_err(err + l, errlen - l,
			    ": %s %lld left unused, not durable", key,
			    r->integer);
		rc = -ETIMEDOUT;
	} else {
		rc = r->integer;
	}
	freeReplyObject(r);
	redisFree(c);
	return rc;
}

int64_t nsa_epoch_take(const struct nsa_store_conf *conf, uint64_t floor,
		       char *err, size_t errlen)
{
	int64_t e = epoch_script(conf, take_script, floor, err, errlen);
	char key[NSA_PAIR_NAME_MAX];

	if (e > UINT32_MAX - NSA_EPOCH_STEP) {
		nsa_set_err(err, errlen, "%s passed 2^32",
			    nsa_epoch_key(conf->pair, key));
		return -ERANGE;
	}
	return e;
}

int64_t nsa_epoch_register(const struct nsa_store_conf *conf, uint32_t epoch,
			   char *err, size_t errlen)
{
	return epoch_script(conf, raise_script, epoch, err, errlen);
}

/* The counter's value from a GET reply of key; 0 or -EPROTO with err. */
static int epoch_from_reply(const redisReply *r, const char *key,
			    uint64_t *epoch, char *err, size_t errlen)
{
	char *end;

	if (r->type == REDIS_REPLY_NIL) {
		*epoch = 0;
		return 0;
	}
	if (r->type == REDIS_REPLY_STRING) {
		errno = 0;
		*epoch = strtoull(r->str, &end, 10);
		if (errno == 0 && end != r->str && *end == '\0')
			return 0;
	}
	nsa_set_err(err, errlen, "GET %s: %s", key,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not a number");
	return -EPROTO;
}

int nsa_fence_read(const struct nsa_store_conf *conf,
		   const struct nsa_topology *t, uint64_t *epoch, char *err,
		   size_t errlen)
{
	char key[NSA_PAIR_NAME_MAX];
	redisContext *c = NULL;
	redisReply *r = key_command(conf, t, nsa_epoch_key(conf->pair, key), &c,
				    err, errlen, "GET %s", key);
	int rc;

	if (r == NULL)
		return -EIO;
	rc = epoch_from_reply(r, key, epoch, err, errlen);
	freeReplyObject(r);
	redisFree(c);
	return rc;
}

int nsa_fence_check(const struct nsa_store_conf *conf,
		    const struct nsa_topology *t, uint32_t epoch, char *err,
		    size_t errlen)
{
	uint64_t e;
	int rc = nsa_fence_read(conf, t, &e, err, errlen);

	if (rc < 0)
		return rc;
	if (e > epoch) {
		nsa_set_err(err, errlen,
			    "fenced: the store's epoch is %llu, above this "
			    "active's %u",
			    (unsigned long long)e, epoch);
		return -ESTALE;
	}
	return 0;
}

/* Close the connections named name that CLIENT LIST shows on c; their
 * number, or a negative errno with err. */
static int fence_node(redisContext *c, const char *name, char *err,
		      size_t errlen)
{
	redisReply *r = redisCommand(c, "CLIENT LIST TYPE normal");
	char field[NSA_PAIR_NAME_MAX + 8];
	const char *line;
	unsigned int sent = 0, killed = 0;
	int rc = 0;

	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		nsa_set_err(err, errlen, "CLIENT LIST: %s",
			    r == NULL ? c->errstr
			    : r->type == REDIS_REPLY_ERROR
				    ? r->str
				    : "unexpected reply");
		if (r)
			freeReplyObject(r);
		return r == NULL ? -EIO : -EPROTO;
	}
	/* The whole name, followed by the next field: natsync-writer is
	 * not natsync-writer:1, nor natsync-writer:1 natsync-writer:12. */
	snprintf(field, sizeof(field), " name=%s ", name);
	for (line = r->str; line && *line; line = strchr(line, '\n')) {
		const char *at, *eol;
		unsigned long long id;

		while (*line == '\n')
			line++;
		eol = strchr(line, '\n');
		at = strstr(line, field);
		if (sscanf(line, "id=%llu ", &id) != 1 || at == NULL ||
		    (eol && at > eol))
			continue;
		if (redisAppendCommand(c, "CLIENT KILL ID %llu", id) ==
		    REDIS_OK)
			sent++;
	}
	freeReplyObject(r);
	for (unsigned int i = 0; i < sent; i++) {
		void *v = NULL;

		if (redisGetReply(c, &v) != REDIS_OK) {
			nsa_set_err(err, errlen, "CLIENT KILL: %s", c->errstr);
			return -EIO;
		}
		r = v;
		/* 0: the connection went away by itself meanwhile. */
		if (r->type == REDIS_REPLY_INTEGER)
			killed += (unsigned int)r->integer;
		else if (rc == 0) {
			nsa_set_err(err, errlen, "CLIENT KILL: %s",
				    r->type == REDIS_REPLY_ERROR
					    ? r->str
					    : "unexpected reply");
			rc = -EPROTO;
		}
		freeReplyObject(r);
	}
	return rc < 0 ? rc : (int)killed;
}

int nsa_fence_raise(const struct nsa_store_conf *conf, unsigned int *killed,
		    char *err, size_t errlen)
{
	struct nsa_topology *t = malloc(sizeof(*t));
	char why[256] = "", name[NSA_PAIR_NAME_MAX];
	unsigned int failed = 0;
	int rc;

	*killed = 0;
	nsa_writer_name(conf->pair, name);
	if (t == NULL) {
		nsa_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = nsa_topology_fetch(conf, t, err, errlen);
	if (rc < 0) {
		free(t);
		return rc;
	}
	for (unsigned int i = 0; i < t->n_nodes; i++) {
		const struct nsa_addr *a = &t->nodes[i].addr;
		redisContext *c = nsa_store_connect(conf, a, why, sizeof(why));
		int n = c ? fence_node(c, name, why, sizeof(why))
			  : -ECONNREFUSED;

		if (c)
			redisFree(c);
		if (n >= 0) {
			*killed += (unsigned int)n;
			continue;
		}
		if (failed++ == 0)
			nsa_set_err(err, errlen, "%s:%u: %s", a->host, a->port,
				    why);
		rc = n;
	}
	if (failed > 1) {
		size_t l = strlen(err);

		nsa_set_err(err + l, errlen - l, " (and %u more master(s))",
			    failed - 1);
	}
	free(t);
	return failed ? rc : 0;
}

int nsa_fence_watch_read(struct nsa_fence_watch *fw,
			 const struct nsa_store_conf *conf, uint64_t *epoch,
			 char *err, size_t errlen)
{
	struct nsa_addr addr;
	redisReply *r;
	int rc;

	if (fw->ctx == NULL) {
		nsa_epoch_key(conf->pair, fw->key);
		fw->ctx = key_connect(conf, NULL, fw->key, &addr, err, errlen);
		if (fw->ctx == NULL)
			return -ECONNREFUSED;
	}
	r = redisCommand(fw->ctx, "GET %s", fw->key);
	if (r == NULL) {
		nsa_set_err(err, errlen, "GET %s: %s", fw->key,
			    fw->ctx->errstr);
		nsa_fence_watch_close(fw);
		return -EIO;
	}
	rc = epoch_from_reply(r, fw->key, epoch, err, errlen);
	freeReplyObject(r);
	/* A redirection or a refusal: find the owner again next time. */
	if (rc < 0)
		nsa_fence_watch_close(fw);
	return rc;
}

void nsa_fence_watch_close(struct nsa_fence_watch *fw)
{
	if (fw->ctx)
		redisFree(fw->ctx);
	fw->ctx = NULL;
}
