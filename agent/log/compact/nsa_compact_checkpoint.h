/*
 * nsa_compact_checkpoint.h - what a compaction round writes on one master
 * (nsa_compact_checkpoint.c): the checkpoint, the commit mark, the
 * expiries of what the marked round replaced. Blocking, on the round's
 * own connection.
 */
#ifndef NSA_COMPACT_CHECKPOINT_H
#define NSA_COMPACT_CHECKPOINT_H

#include "nsa_compact_parts.h"

/* Start the checkpoint of round rd on the master of c, its parts in slot,
 * stamped now_ns: 0 or -ENOMEM. */
int nsa_checkpoint_open(struct nsa_checkpoint *cp, redisContext *c,
			uint16_t slot, const struct nsa_compact_round *rd,
			uint64_t gen, uint64_t now_ns,
			struct nsa_compact_result *res, char *err,
			size_t errlen);

/* Add n records (an nsa_logmerge_emit callback, arg the checkpoint): each
 * full batch is queued as a SET. Returns n. */
unsigned int nsa_checkpoint_add(void *arg, const struct ns_session *s,
				unsigned int n);

/* Collect the replies of the SETs queued so far (a failure is kept for
 * nsa_checkpoint_settle), so that the connection can carry other
 * commands. */
void nsa_checkpoint_drain(struct nsa_checkpoint *cp);

/* Queue the last batch, then collect the reply of every SET queued: 0,
 * -EINVAL (a batch could not be made), or -EIO with the reason in err. */
int nsa_checkpoint_settle(struct nsa_checkpoint *cp);

void nsa_checkpoint_close(struct nsa_checkpoint *cp);

/* Collect the replies of n commands queued on c: 0, or -EIO (the reason
 * of the first error in err). */
int nsa_compact_replies(redisContext *c, unsigned int n, char *err,
			size_t errlen);

/* A command on c; when the reply is MOVED or ASK, again on a connection
 * of its own to the target (named as a writer; after ASKING for ASK), up
 * to three times, the last left in *moved for the caller to use and free
 * (NULL otherwise). The reply, or NULL. */
redisReply *nsa_compact_cmd(const struct nsa_store_conf *conf, redisContext *c,
			    redisContext **moved, int argc, const char **argv,
			    const size_t *lens);

/* The mark of the master of c (channel slot), read with MGET as every
 * reader may, verified with the batch key when key_len > 0: 0 with mk
 * (mk->set 0 when there is none, or it is refused: *refused 1), or -EIO. */
int nsa_compact_mark_read(const struct nsa_store_conf *conf, redisContext *c,
			  uint16_t slot, const char *key, size_t key_len,
			  struct nsa_logmark *mk, int *refused, char *err,
			  size_t errlen);

/* Write text (a formatted mark) as the mark of the master of c (channel
 * slot; no expiry: the next round replaces it), and WAIT for a replica.
 * 0, or a negative errno with the reason in err. */
int nsa_compact_mark_write(const struct nsa_store_conf *conf, redisContext *c,
			   uint16_t slot, const char *text, size_t len,
			   unsigned int wait_ms, char *err, size_t errlen);

/* Give the listed keys their expiry by plan (PEXPIRE LT): a grace period
 * for checkpoints, two for segments. The expiries refused (a slot that
 * moved): every expiry is sent still. */
uint64_t nsa_compact_expire(redisContext *c, const struct nsa_compact_keys *l,
			    unsigned int grace_ms);

#endif
