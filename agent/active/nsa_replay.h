/*
 * nsa_replay.h - what a writer sends again: the replay window (records
 * acknowledged lately, which a dying master may not have passed to its
 * replica yet) and the resend queue (records to send before the lanes).
 */
#ifndef NSA_REPLAY_H
#define NSA_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"

/* The flags of an IPv6 record's second line in the resend queue (the
 * writer's NSA_REC_LINE2): not a record of its own. */
#define NSA_RESEND_LINE2 0x10

/* One record of a resend, merged by (wseq, ord). */
struct nsa_resend_item {
	uint64_t wseq; /* its batch's opening order */
	uint64_t ord; /* its place in the batch, or in the window */
	const struct ns_session *s;
	const struct ns_session_v6 *v6; /* an IPv6 record's second line */
	uint8_t flags; /* the caller's, queued along with the record */
};

struct nsa_replay_rec {
	struct ns_session s;
	uint64_t wseq;
	uint64_t acked_ns;
};

/* A ring in acknowledgement order. Only records of batches opened at or
 * after floor are replayed: records of earlier ones may have left. An
 * IPv6 record's second line is in v6 at the same position. */
struct nsa_replay {
	struct nsa_replay_rec *rp;
	struct ns_session_v6 *v6;
	size_t cap, head, count;
	uint64_t floor;
};

/* cap 0: no window. 0 or -ENOMEM. */
int nsa_replay_init(struct nsa_replay *r, size_t cap);
void nsa_replay_fini(struct nsa_replay *r);

/* Let every record acknowledged before cutoff leave. */
void nsa_replay_trim(struct nsa_replay *r, uint64_t cutoff);

/* Keep one record of batch wseq, acknowledged at acked_ns. Returns 1 when
 * the window was full and a record acknowledged at or after cutoff had to
 * leave it (the window is too small for replay_ms), else 0. */
int nsa_replay_keep(struct nsa_replay *r, const struct ns_session *s,
		    uint64_t wseq, uint64_t acked_ns, uint64_t cutoff);

/* Append the records to replay to items (room for r->count), with flags.
 * Returns how many. */
size_t nsa_replay_items(const struct nsa_replay *r,
			struct nsa_resend_item *items, uint8_t flags);

static inline void nsa_replay_clear(struct nsa_replay *r)
{
	r->head = r->count = 0;
}

/* Records to send again, with their flags, ahead of the lanes: lines, an
 * IPv6 record's two in a row (the second's flags NSA_RESEND_LINE2). */
struct nsa_resend {
	struct ns_session *q;
	uint8_t *flags;
	size_t len, pos;
};

/* Sort items by (wseq, ord) and queue them ahead of what is still queued.
 * 0, or -ENOMEM with nothing changed. */
int nsa_resend_queue(struct nsa_resend *rs, struct nsa_resend_item *items,
		     size_t n);
void nsa_resend_fini(struct nsa_resend *rs);

#endif
