/*
 * nsa_logmark.h - compaction's commit mark (schema/FORMAT.md, Compaction):
 * what a reader of the log layout merges, the key names of the log, and
 * the mark's stored form, signed with the batch key when there is one.
 */
#ifndef NSA_LOGMARK_H
#define NSA_LOGMARK_H

#include <stddef.h>
#include <stdint.h>

/* A round's checkpoint is complete once its mark, "ns:l:{N}:c" on every
 * master, names it. The mark covers segments by what the round merged,
 * never by a clock: per family (a publisher's segments on one channel,
 * "ns:l:{tag}:<publisher>:<seq>"), every seq at or below the family's
 * cover. Readers merge the marked round's checkpoint and the segments the
 * mark does not cover; a checkpoint not marked (a round that failed, or
 * one a newer round replaced) and a covered segment are left out whether
 * or not they have expired yet. Marks order by gen (then id): a reader
 * and a round take the newest valid mark of every master's. */
struct nsa_logmark_cover {
	uint32_t tag; /* the N of the family's "{N}" */
	uint32_t publisher;
	uint64_t seq; /* covered: every seq at or below it */
};

/* Families a mark may cover: a few per active writer and master. */
#define NSA_LOGMARK_COVERS 1024

struct nsa_logmark {
	int set; /* 0: no mark (every checkpoint and segment is read) */
	uint32_t id; /* the round's checkpoint names: k:<id>:<gen>: */
	uint64_t gen; /* the round's number: a newer round's is higher */
	uint32_t parts; /* checkpoint parts over every master */
	/* What the round replaced expires no sooner than this long after
	 * the mark was written (its PEXPIREs follow the mark). */
	uint32_t grace_ms;
	uint32_t n_covers;
	/* By (tag, publisher), ascending, each family once. */
	struct nsa_logmark_cover cover[NSA_LOGMARK_COVERS];
};

/* The longest mark as stored: its fields, every cover, the HMAC. */
#define NSA_LOGMARK_MAX (80 + NSA_LOGMARK_COVERS * 36 + 72)

enum nsa_logkey {
	NSA_LOGKEY_SEGMENT,
	NSA_LOGKEY_CHECKPOINT,
	NSA_LOGKEY_MARK,
	NSA_LOGKEY_OTHER,
};

/* What a key under "ns:l:" is. */
enum nsa_logkey nsa_logkey_kind(const char *k, size_t len);

/* A writer's segment key "ns:l:{tag}:<publisher>:<seq>": 0 with its
 * parts, or -EINVAL. */
int nsa_logkey_segment(const char *k, size_t len, uint32_t *tag,
		       uint32_t *publisher, uint64_t *seq);

/* A checkpoint key "ns:l:{tag}:k:<id>:<gen>:<i>": 0 with its round's id
 * and gen, or -EINVAL. */
int nsa_logkey_checkpoint(const char *k, size_t len, uint32_t *id,
			  uint64_t *gen);

/* The mark's key on the master of channel slot (NS_SEGMENT_KEY_MAX). */
void nsa_logmark_key(uint16_t channel_slot, char *buf, size_t len);

/* The mark as stored (text, NUL-terminated, NSA_LOGMARK_MAX bytes at
 * most), signed with key when key_len > 0: its length, or -EINVAL
 * (covers not in order, or no room). */
int nsa_logmark_format(const struct nsa_logmark *mk, const char *key,
		       size_t key_len, char *buf, size_t len);

/* mk from a stored value: 0; -EACCES when key_len > 0 and the value does
 * not carry a valid HMAC under key (a forged or unsigned mark); -EINVAL
 * when it is no mark of this version. mk->set is 0 on any error. */
int nsa_logmark_parse_signed(const char *v, size_t len, const char *key,
			     size_t key_len, struct nsa_logmark *mk);

/* nsa_logmark_parse_signed without a batch key (a deployment without
 * [store] batch_key_file): a signed mark is read too, unchecked. */
int nsa_logmark_parse(const char *v, size_t len, struct nsa_logmark *mk);

/* Whether two marks name the same round with the same covers. */
int nsa_logmark_same(const struct nsa_logmark *a, const struct nsa_logmark *b);

/* Whether a is newer than b: set, and b unset or of a lower gen (the
 * higher id at the same gen). */
int nsa_logmark_newer(const struct nsa_logmark *a, const struct nsa_logmark *b);

/* The seq mk covers of family (tag, publisher): 0 when none. */
uint64_t nsa_logmark_covered(const struct nsa_logmark *mk, uint32_t tag,
			     uint32_t publisher);

/* Whether a reader under mk merges key k (a key under "ns:l:"): 1 for a
 * checkpoint of the marked round (every checkpoint without a mark) and a
 * segment mk does not cover (every one without a mark, and one whose key
 * is not a writer's), 0 otherwise (a covered segment, another round's
 * checkpoint, a mark). Decided from the key alone: v and vlen (the value,
 * or NULL) are not read. */
int nsa_logmark_takes(const struct nsa_logmark *mk, const char *k, size_t klen,
		      const uint8_t *v, size_t vlen);

#endif
