/*
 * nsa_fence.h - the promotion epoch in the store, and the fence that keeps
 * a stale active out of it.
 *
 * One counter per gateway pair issues every promotion's epoch of that
 * pair (raised atomically: no two promotions get the same one; WAIT for a
 * replica, so that a failover of its master cannot issue it twice), or
 * learns of a provisional one a gateway made while the store did not
 * answer. A promoted gateway then raises its pair's fence: on every
 * master it closes every connection named with its pair's writer name.
 * Writers name each connection before they read their pair's counter,
 * and read it on every (re)connection before they write on it; a record
 * whose epoch is below the counter is dropped as fenced. So no connection
 * that was open before the fence writes after it, and none opened after
 * it writes a record of an older epoch.
 *
 * A pair is a store-wide scope: [agent] gateway_id >> 8 (the store conf's
 * pair); its low byte names the node within the pair (provisional
 * epochs). Pair 0 uses the names of a store with one pair
 * (natsync:epoch, natsync-writer); pair P natsync:epoch:P and
 * natsync-writer:P. Pairs share nothing here: one pair's promotion
 * neither raises another's counter nor closes its writers.
 */
#ifndef NSA_FENCE_H
#define NSA_FENCE_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "nsa_cluster.h"

/* Pair 0's counter and writer name; pair P's add ":P". */
#define NSA_EPOCH_KEY "natsync:epoch"
/* CLIENT SETNAME of every writer connection; the fence closes these. */
#define NSA_WRITER_NAME "natsync-writer"
/* Room for a pair's counter key, taker key or writer name. */
#define NSA_PAIR_NAME_MAX 48
/* gateway_id >> NSA_PAIR_SHIFT is its pair. */
#define NSA_PAIR_SHIFT 8

/* Pair's epoch counter key into buf (NSA_PAIR_NAME_MAX); buf. */
const char *nsa_epoch_key(uint32_t pair, char *buf);

/* Pair's taker key into buf (NSA_PAIR_NAME_MAX); buf: "{natsync:epoch}:taker"
 * ("{natsync:epoch:P}:taker"), in the counter's slot, holding "E P T": the
 * counter's value E, the value P before it and the token T of the ask or
 * registration that set it (nsa_store_conf's epoch_token). */
const char *nsa_epoch_taker_key(uint32_t pair, char *buf);

/* A new random token for an ask that may give up (nsa_store_conf's
 * epoch_token): set it on the conf of the ask and of the provisional
 * epoch's registration, so that the registration knows that ask if it ran
 * late. Never 0. */
uint64_t nsa_epoch_token_new(void);

/* Pair's writer connection name into buf (NSA_PAIR_NAME_MAX); buf. */
const char *nsa_writer_name(uint32_t pair, char *buf);

/* Epochs come in generations of NSA_EPOCH_STEP. The store issues only
 * multiples of it (low byte 0); a gateway that must forward before the
 * store answers makes a provisional epoch in the generation after the
 * highest epoch it saw, with the low byte of its gateway_id: two gateways
 * with different low bytes never make the same one, and the store never
 * issues one. Ordering: a provisional epoch is above every store epoch of
 * its own and earlier generations, below every later one. */
#define NSA_EPOCH_STEP 256u

/* The provisional epoch of gateway_id after seen, or 0 when its low byte
 * is 0 (no provisional epochs) or the space is used up. */
static inline uint32_t nsa_epoch_provisional(uint32_t seen, uint32_t gateway_id)
{
	uint32_t node = gateway_id & (NSA_EPOCH_STEP - 1);

	if (node == 0 ||
	    seen / NSA_EPOCH_STEP >= UINT32_MAX / NSA_EPOCH_STEP - 1)
		return 0;
	return (seen / NSA_EPOCH_STEP + 1) * NSA_EPOCH_STEP + node;
}

/* Everything below works on conf->pair's counter and writers. */

/* A new store epoch: the counter raised atomically (EVAL) to the next
 * multiple of NSA_EPOCH_STEP above both its value and floor, on the
 * master that owns it (following one MOVED), with a fresh connection;
 * the taker key records it with the caller's token.
 * Every call returns a different value. Where that master has replicas
 * and conf->epoch_wait_ms is set, the value is returned only once a
 * replica acknowledged it (WAIT 1): one that a promoted replica could
 * issue again is never returned (-ETIMEDOUT; the next call takes the next
 * one). The epoch, or a negative errno with a reason in err. */
int64_t nsa_epoch_take(const struct nsa_store_conf *conf, uint64_t floor,
		       char *err, size_t errlen);

/* A provisional epoch made known: the counter raised to epoch when
 * below it, and WAITed for as nsa_epoch_take does. A counter above epoch
 * that an ask with conf's epoch_token set (the taker key names the token:
 * an ask that gave up and ran late, an epoch nobody uses) is first set
 * back to what it was before that ask. Otherwise the counter is never
 * lowered.
 * The counter's value after: epoch (registered; again on a second call),
 * or above it (a newer epoch was issued: epoch is fenced), or a negative
 * errno with a reason in err. */
int64_t nsa_epoch_register(const struct nsa_store_conf *conf, uint32_t epoch,
			   char *err, size_t errlen);

/* The epoch counter's value (0 when absent), read on the master that owns
 * it in t (a fresh topology when t is NULL), with a fresh connection.
 * 0 or a negative errno with a reason in err. */
int nsa_fence_read(const struct nsa_store_conf *conf,
		   const struct nsa_topology *t, uint64_t *epoch, char *err,
		   size_t errlen);

/* Read once every connection of a writer is named, before it writes:
 * -ESTALE (and why in err) when the store's epoch is above epoch, 0 when
 * not, or a negative errno. A fence raised before a name was given did not
 * close that connection, but its epoch was issued before, so this read
 * sees it. */
int nsa_fence_check(const struct nsa_store_conf *conf,
		    const struct nsa_topology *t, uint32_t epoch, char *err,
		    size_t errlen);

/* Close every writer connection of the pair (named exactly
 * nsa_writer_name) on every master; other pairs' stay open. *killed
 * counts them. 0 when every master did it, otherwise a
 * negative errno with the masters that did not in err. */
int nsa_fence_raise(const struct nsa_store_conf *conf, unsigned int *killed,
		    char *err, size_t errlen);

/* A kept connection for reading the counter again and again (the
 * gateway's check that no newer epoch took over). */
struct nsa_fence_watch {
	redisContext *ctx;
	char key[NSA_PAIR_NAME_MAX];
};

/* Read the counter over the kept connection, (re)connecting as needed.
 * 0 or a negative errno with a reason in err. */
int nsa_fence_watch_read(struct nsa_fence_watch *fw,
			 const struct nsa_store_conf *conf, uint64_t *epoch,
			 char *err, size_t errlen);
void nsa_fence_watch_close(struct nsa_fence_watch *fw);

#endif
