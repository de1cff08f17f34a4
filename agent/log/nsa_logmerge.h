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

struct nsa_logmerge_entry;

struct nsa_logmerge {
	struct nsa_logmerge_entry *e; /* the sessions, dense: used of them */
	uint64_t *idx; /* open addressing into e, cap a power of 2 */
	size_t cap, used;
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
};

/* Empty; 0 or -ENOMEM. */
int nsa_logmerge_init(struct nsa_logmerge *m);
void nsa_logmerge_free(struct nsa_logmerge *m);

/* Merge one segment value (a batch as published): 0, -ENOMEM, or the
 * decoder's negative errno when it is not a valid batch (nothing merged).
 * A batch flagged STORE is not a segment: -EINVAL; one not signed with
 * the batch key (when m has one): -EACCES. */
int nsa_logmerge_segment(struct nsa_logmerge *m, const uint8_t *v, size_t len);

/* As nsa_logmerge_segment, but only a batch sent (its header's sent_ns)
 * before until_ns: 1 merged, 0 left out, or a negative errno. */
int nsa_logmerge_segment_until(struct nsa_logmerge *m, const uint8_t *v,
			       size_t len, uint64_t until_ns);

/* Merge one record: 0 or -ENOMEM. */
int nsa_logmerge_record(struct nsa_logmerge *m, const struct ns_session *s);

/* Call fn with the live records at realtime now_ns, in chunks of at most
 * 16; returns the sum of what fn returned. Leaves m as it is. */
uint64_t nsa_logmerge_emit(const struct nsa_logmerge *m, uint64_t now_ns,
			   unsigned int (*fn)(void *arg,
					      const struct ns_session *s,
					      unsigned int n),
			   void *arg);

/* Whether s, a record of the log, is live at realtime now_ns. */
int nsa_logmerge_live(const struct ns_session *s, uint64_t now_ns);

/* ---- compaction's commit mark (schema/FORMAT.md, Compaction) ----------
 * A round's checkpoint is complete once its mark, "ns:l:{N}:c" on every
 * master, names it: readers merge only the marked round's checkpoint and
 * the segments sent after its until_ns; a checkpoint not marked (a round
 * that failed, or one that another round replaced) and a segment the
 * mark covers are left out whether or not they have expired yet. */
struct nsa_logmark {
	int set; /* 0: no mark (every checkpoint and segment is read) */
	uint32_t id; /* the round's checkpoint names: k:<id>:<gen>: */
	uint64_t gen;
	uint64_t until_ns; /* segments sent at or before it are covered */
	uint64_t round_ns; /* when the round began (before any of its parts) */
	uint32_t parts; /* checkpoint parts over every master */
	/* What the round replaced expires no sooner than this long after
	 * the mark was written (its PEXPIREs follow the mark). */
	uint32_t grace_ms;
};

#define NSA_LOGMARK_MAX 96

enum nsa_logkey {
	NSA_LOGKEY_SEGMENT,
	NSA_LOGKEY_CHECKPOINT,
	NSA_LOGKEY_MARK,
	NSA_LOGKEY_OTHER,
};

/* What a key under "ns:l:" is. */
enum nsa_logkey nsa_logkey_kind(const char *k, size_t len);

/* The mark's key on the master of channel slot (NS_SEGMENT_KEY_MAX). */
void nsa_logmark_key(uint16_t channel_slot, char *buf, size_t len);

/* The mark as stored (text, NUL-terminated): its length. */
int nsa_logmark_format(const struct nsa_logmark *mk, char *buf, size_t len);

/* mk from a stored value: 0, or -EINVAL (mk->set 0). */
int nsa_logmark_parse(const char *v, size_t len, struct nsa_logmark *mk);

/* Whether two marks name the same round. */
int nsa_logmark_same(const struct nsa_logmark *a, const struct nsa_logmark *b);

/* Whether a reader under mk merges key k of value v: 1 or 0. */
int nsa_logmark_takes(const struct nsa_logmark *mk, const char *k, size_t klen,
		      const uint8_t *v, size_t vlen);

#endif
