/*
 * nsa_logmerge.h - reading the log layout (schema/FORMAT.md, Log layout):
 * the records of every segment read are merged per session, the newest by
 * (epoch, timestamp_ns) kept, deletes included as tombstones; at the end
 * the live records (no tombstones, none past its timeout) are what the keys
 * layout would hold.
 */
#ifndef NSA_LOGMERGE_H
#define NSA_LOGMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"
#include "nsa_logmark.h"

struct nsa_logmerge_entry;
struct nsa_logmerge_entry6;
struct nsa_logmerge_prefault;

struct nsa_logmerge {
	struct nsa_logmerge_entry *e; /* the sessions, dense: used of them */
	uint64_t *idx; /* open addressing into e, cap a power of 2 */
	size_t cap, used;
	/* The IPv6 sessions (40-byte keys, two lines each), apart: an IPv4
	 * merge keeps its 80 B a session. Empty (cap6 0) until one comes. */
	struct nsa_logmerge_entry6 *e6;
	uint64_t *idx6;
	size_t cap6, used6;
	uint64_t records; /* records merged */
	uint64_t segments; /* segments merged */
	/* NULL, or a bitmap of NS_SLOTS bits: only records whose session key
	 * is in a slot set here are merged (set after nsa_logmerge_init). */
	const uint64_t *keep_slots;
	/* batch_key_len > 0: only segments signed with batch_key (a version
	 * 2 batch whose HMAC trailer matches, as a standby asks of a
	 * notification) are merged; others are refused with -EACCES. Set
	 * after nsa_logmerge_init. */
	const char *batch_key;
	size_t batch_key_len;
	/* > 0: the merge never grows past this many bytes; what would
	 * makes nsa_logmerge_segment and nsa_logmerge_record -ENOBUFS. */
	size_t max_bytes;
	size_t peak_bytes; /* the most it held at once */
	/* Set while a checkpoint is merged: its records are flagged so
	 * (nsa_logmerge_emit_checkpoint). */
	int from_checkpoint;
	/* Sessions it may take (nsa_logmerge_expect; 0 once the blocks for
	 * them are asked for), and the thread faulting those blocks in, or
	 * NULL. */
	size_t expect;
	struct nsa_logmerge_prefault *prefault;
};

/* Empty; 0 or -ENOMEM. A merge that would outgrow max_bytes says
 * -ENOBUFS, and holds part of what it was given: start it anew. */
int nsa_logmerge_init(struct nsa_logmerge *m);
void nsa_logmerge_free(struct nsa_logmerge *m);

/* A merge that may take up to sessions IPv4 sessions (a whole table's
 * load; 8 388 608 at most): once it holds 65 536, blocks sized for them
 * are mapped and a thread of its own faults their pages in on another
 * core, the index first, then the entries a little ahead of their use;
 * at its next growth after that the merge moves into them and never
 * grows nor rehashes again below sessions. A merge that stays small
 * costs nothing more. nsa_logmerge_free, or the merge outgrowing them,
 * stops the thread. */
void nsa_logmerge_expect(struct nsa_logmerge *m, size_t sessions);

/* Merge one segment value (a batch as published): 0, -ENOMEM, -ENOBUFS, or the
 * decoder's negative errno when it is not a valid batch (nothing merged).
 * A batch flagged STORE is not a segment: -EINVAL; one not signed with
 * the batch key (when m has one): -EACCES. Records of every family are
 * merged, an IPv6 session under its 40-byte key. */
int nsa_logmerge_segment(struct nsa_logmerge *m, const uint8_t *v, size_t len);

/* As nsa_logmerge_segment, but only a batch sent (its header's sent_ns)
 * before until_ns: 1 merged, 0 left out, or a negative errno. */
int nsa_logmerge_segment_until(struct nsa_logmerge *m, const uint8_t *v,
			       size_t len, uint64_t until_ns);

/* Merge one record (an IPv6 one's second line after it): 0, -ENOMEM or
 * -ENOBUFS. */
int nsa_logmerge_record(struct nsa_logmerge *m, const struct ns_session *s);

/* Call fn with the live records at realtime now_ns, in chunks of at most
 * 16, an IPv6 one alone (n = 1, its second line after it); returns the
 * sum of what fn returned. Leaves m as it is. */
uint64_t nsa_logmerge_emit(const struct nsa_logmerge *m, uint64_t now_ns,
			   unsigned int (*fn)(void *arg,
					      const struct ns_session *s,
					      unsigned int n),
			   void *arg);

/* What a compaction round writes back: the live records and the
 * tombstones (deletes) merged from segments, and those merged from a
 * checkpoint unless drop_old_tombstones: a tombstone is written into one
 * checkpoint at least, so that an older record of its session that the
 * round could not merge yet (a segment it did not list) is beaten until
 * the next round merges it. Calls fn as nsa_logmerge_emit. */
uint64_t nsa_logmerge_emit_checkpoint(
	const struct nsa_logmerge *m, uint64_t now_ns, int drop_old_tombstones,
	unsigned int (*fn)(void *arg, const struct ns_session *s,
			   unsigned int n),
	void *arg);

/* The bytes the merge holds now. */
size_t nsa_logmerge_bytes(const struct nsa_logmerge *m);

/* Whether s, a record of the log, is live at realtime now_ns. */
int nsa_logmerge_live(const struct ns_session *s, uint64_t now_ns);

#endif
