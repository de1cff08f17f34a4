/*
 * nsa_compact_checkpoint.h - what a compaction round writes on one master
 * (nsa_compact_checkpoint.c): the checkpoint, the commit mark, the
 * expiries of what the marked round replaced. Blocking, on the round's
 * own connection.
 */
#ifndef NSA_COMPACT_CHECKPOINT_H
#define NSA_COMPACT_CHECKPOINT_H

#include "nsa_compact_parts.h"

/* Start the checkpoint of round rd on the master of c (channel slot),
 * stamped now_ns: 0 or -ENOMEM. */
int nsa_checkpoint_open(struct nsa_checkpoint *cp, redisContext *c,
			uint16_t slot, const struct nsa_compact_round *rd,
			uint64_t now_ns, struct nsa_compact_result *res,
			char *err, size_t errlen);

/* Add n live records (an nsa_logmerge_emit callback, arg the checkpoint):
 * each full batch is queued as a SET. Returns n. */
unsigned int nsa_checkpoint_add(void *arg, const struct ns_session *s,
				unsigned int n);

/* Queue the last batch, then collect the reply of every SET queued: 0,
 * -EINVAL (a batch could not be made), or -EIO with the reason in err. */
int nsa_checkpoint_settle(struct nsa_checkpoint *cp);

void nsa_checkpoint_close(struct nsa_checkpoint *cp);

/* Collect the replies of n commands queued on c: 0, or -EIO (the reason
 * of the first error in err). */
int nsa_compact_replies(redisContext *c, unsigned int n, char *err,
			size_t errlen);

/* The mark of the master of c (channel slot), read with MGET as every
 * reader may: 0 (mk->set 0 when there is none), or -EIO. */
int nsa_compact_mark_read(redisContext *c, uint16_t slot,
			  struct nsa_logmark *mk, char *err, size_t errlen);

/* The mark of round rd over the mark in force mk: its id and gen, its
 * grace, and covered up to rd->until_ns (never less than mk's). */
void nsa_compact_mark_of_round(struct nsa_logmark *done,
			       const struct nsa_compact_round *rd,
			       const struct nsa_logmark *mk);

/* Queue mk as the mark of the master of c (no expiry: the next round
 * replaces it); its reply is the caller's to collect. */
void nsa_compact_mark_write(redisContext *c, uint16_t slot,
			    const struct nsa_logmark *mk);

/* Give every listed key merged or stale its expiry (PEXPIRE LT): a grace
 * period for checkpoints, two for segments. 0, or -EIO when a reply was
 * an error (every expiry is sent still). */
int nsa_compact_expire(redisContext *c, const struct nsa_compact_keys *l,
		       const uint8_t *merged, const uint8_t *stale,
		       unsigned int grace_ms, char *err, size_t errlen);

#endif
