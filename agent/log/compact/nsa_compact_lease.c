/*
 * nsa_compact_lease.c - the store's compaction lease (nsa_compact_lease.h).
 *
 * Every pair's actives compact the same log: a round merges every
 * segment whatever its pair. Two rounds at once read the same mark and
 * write their own, and the mark that wins (the higher id at one gen) may
 * cover less than the segments the other round let expire. So a round
 * holds the lease from before it reads the marks until its expiries are
 * given: rounds over the log follow one another, each reading the mark
 * of the one before, as the rounds of one active do.
 *
 * Invariants:
 * - Taken with SET NX PX: at most one holder at a time while the key
 *   lives; renewed and released only by a script that first compares
 *   the value with the holder's, so no round extends or drops another's.
 * - A round whose renewal finds the lease gone writes no mark (its
 *   checkpoints, named by no mark, are read by no one): a round stalled
 *   for a lease period cannot replace a later round's mark.
 * - The connection is named as a writer of the holder's pair: a newer
 *   active's fence closes it, and the round stops at its next renewal;
 *   its release then goes on a connection of its own, so that the newer
 *   active's rounds do not wait for the lease to expire.
 *
 * Not here: the round (nsa_compact.c), when rounds run (nsa_compactor.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ns_slot.h"
#include "nsa_compact_lease.h"
#include "nsa_fence.h"
#include "nsdp_time.h"

static const char keep_script[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
static const char drop_script[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('DEL', KEYS[1]) end return 0";

/* An error reply (or none) into err: -EIO without a reply, else -EPROTO. */
static int lease_error(const struct nsa_compact_lease *l, const redisReply *r,
		       const char *what, char *err, size_t errlen)
{
	nsa_set_err(err, errlen, "%s %s: %s", what, NSA_COMPACT_LEASE_KEY,
		    r == NULL			   ? l->c->errstr
		    : r->type == REDIS_REPLY_ERROR ? r->str
						   : "unexpected reply");
	return r == NULL ? -EIO : -EPROTO;
}

/* Who holds the lease, into err: -EBUSY. */
static int lease_busy(const struct nsa_compact_lease *l, char *err,
		      size_t errlen)
{
	redisReply *r = redisCommand(l->c, "GET %s", NSA_COMPACT_LEASE_KEY);

	nsa_set_err(err, errlen, "%s held by %s", NSA_COMPACT_LEASE_KEY,
		    r && r->type == REDIS_REPLY_STRING ? r->str : "(expired)");
	if (r)
		freeReplyObject(r);
	return -EBUSY;
}

int nsa_compact_lease_take(struct nsa_compact_lease *l,
			   const struct nsa_store_conf *conf,
			   const struct nsa_topology *topo, const char *holder,
			   char *err, size_t errlen)
{
	const uint16_t slot = ns_key_slot(NSA_COMPACT_LEASE_KEY,
					  strlen(NSA_COMPACT_LEASE_KEY));
	char name[NSA_PAIR_NAME_MAX];
	redisReply *r;
	int rc;

	memset(l, 0, sizeof(*l));
	if (!topo->slot_covered[slot]) {
		nsa_set_err(err, errlen, "slot %u of %s not served", slot,
			    NSA_COMPACT_LEASE_KEY);
		return -EIO;
	}
	l->conf = conf;
	l->addr = topo->nodes[topo->slot_node[slot]].addr;
	l->c = nsa_store_connect_named(conf, &l->addr,
				       nsa_writer_name(conf->pair, name), NULL,
				       err, errlen);
	if (l->c == NULL)
		return -EIO;
	snprintf(l->holder, sizeof(l->holder), "%s", holder);
	r = redisCommand(l->c, "SET %s %s NX PX %u", NSA_COMPACT_LEASE_KEY,
			 l->holder, NSA_COMPACT_LEASE_MS);
	if (r && r->type == REDIS_REPLY_STATUS)
		rc = 0;
	else if (r && r->type == REDIS_REPLY_NIL)
		rc = lease_busy(l, err, errlen);
	else
		rc = lease_error(l, r, "SET", err, errlen);
	if (r)
		freeReplyObject(r);
	l->renewed_ns = nsdp_mono_ns();
	if (rc == 0)
		return 0;
	l->holder[0] = '\0';
	nsa_compact_lease_drop(l);
	return rc;
}

int nsa_compact_lease_keep(struct nsa_compact_lease *l, int force, char *err,
			   size_t errlen)
{
	const uint64_t third_ns = NSA_COMPACT_LEASE_MS * 1000000ull / 3;
	const uint64_t now = nsdp_mono_ns();
	redisReply *r;
	int rc;

	if (l->c == NULL)
		return 0;
	if (!force && now - l->renewed_ns < third_ns)
		return 0;
	r = redisCommand(l->c, "EVAL %s 1 %s %s %u", keep_script,
			 NSA_COMPACT_LEASE_KEY, l->holder,
			 NSA_COMPACT_LEASE_MS);
	if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 1)
		rc = 0;
	else if (r && r->type == REDIS_REPLY_INTEGER)
		rc = lease_busy(l, err, errlen);
	else
		rc = lease_error(l, r, "renewing", err, errlen);
	if (r)
		freeReplyObject(r);
	if (rc == 0)
		l->renewed_ns = now;
	return rc;
}

/* The release script on c: whether c answered. */
static int lease_release(const struct nsa_compact_lease *l, redisContext *c)
{
	redisReply *r = redisCommand(c, "EVAL %s 1 %s %s", drop_script,
				     NSA_COMPACT_LEASE_KEY, l->holder);

	if (r == NULL)
		return 0;
	freeReplyObject(r);
	return 1;
}

void nsa_compact_lease_drop(struct nsa_compact_lease *l)
{
	if (l->c == NULL)
		return;
	if (l->holder[0] && (l->c->err || !lease_release(l, l->c))) {
		char err[256];
		redisContext *c =
			nsa_store_connect(l->conf, &l->addr, err, sizeof(err));

		if (c != NULL) {
			lease_release(l, c);
			redisFree(c);
		}
	}
	redisFree(l->c);
	l->c = NULL;
}
