/*
 * nsa_compact.c - compaction rounds: checkpointing the log of every master,
 * or of one (schema/FORMAT.md, Compaction).
 *
 * A round takes the store's compaction lease (compact/nsa_compact_lease.c:
 * one round at a time, whatever its gateway pair), reads every master's
 * mark and takes the newest valid one, lists every master (watching for
 * slots that move meanwhile), plans what it
 * merges and covers (compact/nsa_compact_plan.c), checks that its epoch is
 * still the store's, merges what it planned a range of slots at a time
 * within its budget (compact/nsa_compact_segments.c), writes the live
 * records and the tombstones it merged from segments as checkpoint
 * batches, acknowledged by a replica, then its mark on every master,
 * likewise, then gives what it replaced PEXPIRE LT
 * (compact/nsa_compact_checkpoint.c).
 *
 * The mark is what makes a checkpoint count: readers (this one included)
 * merge only the checkpoint of the newest mark and the segments it does
 * not cover, so no read that spans a round's expiries pairs an old
 * checkpoint's record with a missing delete.
 *
 * Invariants:
 * - Nothing is expired before every checkpoint batch, then every mark, is
 *   acknowledged (by a replica, where the master has one): a failure
 *   leaves the log as it was, plus checkpoints that no mark names (no
 *   reader merges them), or a newer mark on some masters whose
 *   checkpoint is whole (readers take the newest).
 * - A reader that reads the checkpoint and the segments it covers merges
 *   the same table as from either alone.
 * - A tombstone merged from a segment is written into the checkpoint; one
 *   read from the marked checkpoint is dropped only by a round whose
 *   listing, and its sighting's, no moving slot made partial: by then
 *   every older record of its session has been listed, so merged or
 *   covered (nsa_compact_plan.c).
 * - A pass's merge never outgrows the round's budget: a range of slots
 *   that would is split in two and read again.
 * - A round of a fenced active writes nothing: its connections are named
 *   as writers (a newer active's fence closes them) and it reads the
 *   store's epoch once they are, before its first write (nsa_fence.h).
 * - A round writes its marks only while it holds the lease (checked right
 *   before them, renewed between passes): no other round read the marks
 *   since this one did, so no mark replaces one this round did not merge.
 * - A round blocks on connections of its own (hiredis, the store's
 *   timeouts), never on the writers'.
 *
 * Not here: when to compact (active/nsa_compactor.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "nsa_compact.h"
#include "nsa_compact_checkpoint.h"
#include "nsa_compact_lease.h"
#include "nsa_compact_parts.h"
#include "nsa_compact_plan.h"
#include "nsa_compact_segments.h"
#include "nsa_fence.h"
#include "nsdp_time.h"

/* What a session costs a merge at most, with its index at its emptiest
 * (nsa_logmerge.c): the estimate a round's passes are planned by. */
#define MERGE_BYTES_PER_SESSION 96
/* A checkpoint's batches in flight, its buffer, on each master. */
#define CHECKPOINT_BYTES (9 * (size_t)NS_BATCH_MAX_LEN_IPV4)

/* One master of a round. */
struct node_round {
	redisContext *c; /* named as a writer */
	uint16_t slot; /* its channel slot: its mark's */
	uint16_t cp_slot; /* its checkpoint's: one it serves, not moving */
	struct nsa_compact_keys l; /* what was listed on it */
	struct nsa_checkpoint cp;
};

struct round {
	const struct nsa_store_conf *conf;
	const struct nsa_topology *topo;
	const struct nsa_compact_round *rd;
	struct nsa_compact_result *res;
	char *err;
	size_t errlen;
	/* nsa_compact_node: master first of topo alone, every record into
	 * its checkpoint, the slot map not compared. */
	int single;
	unsigned int first, n;
	struct node_round *nr;
	struct nsa_compact_lease lease; /* held from the marks read on */
	struct nsa_logmark *mk; /* the newest valid mark of any master */
	struct nsa_logmark *done; /* this round's */
	uint64_t unsettled[NS_SLOTS / 64]; /* slots moving while listed */
	struct nsa_compact_sighting listed;
	unsigned int held; /* families left as they were */
	size_t reply_bytes; /* the largest MGET reply */
};

static void bit_set(uint64_t *bits, unsigned int i)
{
	bits[i / 64] |= 1ull << (i % 64);
}

static int bit_get(const uint64_t *bits, unsigned int i)
{
	return (bits[i / 64] >> (i % 64)) & 1;
}

/* Connect to every master of the round, named as a writer so that a
 * newer active's fence closes the connections: 0 or -EIO. */
static int round_connect(struct round *r)
{
	char name[NSA_PAIR_NAME_MAX];

	for (unsigned int i = 0; i < r->n; i++) {
		const struct nsa_node *node = &r->topo->nodes[r->first + i];

		r->nr[i].slot = node->channel_slot;
		r->nr[i].cp_slot = node->channel_slot;
		r->nr[i].c = nsa_store_connect_named(
			r->conf, &node->addr,
			nsa_writer_name(r->conf->pair, name), NULL, r->err,
			r->errlen);
		if (r->nr[i].c == NULL)
			return -EIO;
	}
	return 0;
}

/* The store's compaction lease, named after the round's pair, compactor,
 * epoch and gen: 0, or -EBUSY when another round holds it. */
static int round_lease(struct round *r)
{
	char holder[sizeof(r->lease.holder)];

	snprintf(holder, sizeof(holder),
		 "pair:%u:compactor:%08x:epoch:%u:gen:%llu", r->conf->pair,
		 r->rd->id, r->rd->epoch, (unsigned long long)r->rd->gen);
	return nsa_compact_lease_take(&r->lease, r->conf, r->topo, holder,
				      r->err, r->errlen);
}

/* The newest valid mark of every master's into r->mk (a master failed
 * over may hold an older one, or one forged): 0 or -EIO. */
static int round_marks(struct round *r)
{
	struct nsa_logmark *mk = malloc(sizeof(*mk));
	int rc = mk ? 0 : -ENOMEM;

	memset(r->mk, 0, sizeof(*r->mk));
	for (unsigned int i = 0; i < r->n && rc == 0; i++) {
		int refused;

		rc = nsa_compact_mark_read(r->conf, r->nr[i].c, r->nr[i].slot,
					   r->rd->key, r->rd->key_len, mk,
					   &refused, r->err, r->errlen);
		r->res->marks_refused += (uint64_t)refused;
		if (rc == 0 && nsa_logmark_newer(mk, r->mk))
			memcpy(r->mk, mk, sizeof(*mk));
	}
	free(mk);
	return rc;
}

/* Set in bits the slots master c migrates or imports (CLUSTER NODES, its
 * line: "[slot->-id]", "[slot-<-id]"). */
static void slots_moving(redisContext *c, uint64_t *bits)
{
	redisReply *r = redisCommand(c, "CLUSTER NODES");
	const char *p, *end;

	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		if (r)
			freeReplyObject(r);
		return;
	}
	p = strstr(r->str, "myself");
	end = p ? strchr(p, '\n') : NULL;
	while (p && (p = strchr(p, '[')) != NULL && (end == NULL || p < end)) {
		unsigned int slot;

		if (sscanf(p, "[%u-", &slot) == 1 && slot < NS_SLOTS)
			bit_set(bits, slot);
		p++;
	}
	freeReplyObject(r);
}

/* Set in r->unsettled the slots whose master differs between the round's
 * map and the store's now. */
static int slots_moved(struct round *r)
{
	struct nsa_topology *now = malloc(sizeof(*now));
	int rc;

	if (now == NULL)
		return -ENOMEM;
	rc = nsa_topology_fetch(r->conf, now, r->err, r->errlen);
	for (unsigned int s = 0; rc == 0 && s < NS_SLOTS; s++) {
		const struct nsa_topology *t = r->topo;

		if (now->slot_covered[s] != t->slot_covered[s] ||
		    (t->slot_covered[s] &&
		     !nsa_addr_equal(&now->nodes[now->slot_node[s]].addr,
				     &t->nodes[t->slot_node[s]].addr)))
			bit_set(r->unsettled, s);
	}
	free(now);
	return rc;
}

/* List every master, the slots moving before and after; the listing as a
 * sighting. -EAGAIN when a segment of the caller's own writers signed
 * before the round's sighting is not answered yet. */
static int round_list(struct round *r)
{
	const struct nsa_compact_round *rd = r->rd;
	int rc = 0;

	if (rd->settled && rd->seen &&
	    !rd->settled(rd->settled_arg, rd->seen->listed_ns)) {
		nsa_set_err(r->err, r->errlen,
			    "a segment of ours signed before the sighting is "
			    "not answered yet");
		return -EAGAIN;
	}
	for (unsigned int i = 0; r->topo->cluster && i < r->n; i++)
		slots_moving(r->nr[i].c, r->unsettled);
	for (unsigned int i = 0; i < r->n && rc == 0; i++)
		rc = nsa_compact_list(r->nr[i].c, &r->nr[i].l, r->err,
				      r->errlen);
	for (unsigned int i = 0; r->topo->cluster && i < r->n && rc == 0; i++)
		slots_moving(r->nr[i].c, r->unsettled);
	if (rc == 0 && r->topo->cluster && !r->single)
		rc = slots_moved(r);
	if (rc == 0) {
		struct nsa_compact_keys *all = malloc(r->n * sizeof(*all));

		if (all == NULL)
			return -ENOMEM;
		for (unsigned int i = 0; i < r->n; i++)
			all[i] = r->nr[i].l;
		rc = nsa_compact_sighting_of(all, r->n, &r->listed);
		free(all);
		r->listed.listed_ns = nsdp_mono_ns();
	}
	return rc;
}

/* Whether no family's slot moved while listing. */
static int listing_exact(const struct round *r)
{
	for (size_t i = 0; i < r->listed.n; i++)
		if (bit_get(r->unsettled,
			    nsa_compact_tag_slot(r->listed.hi[i].tag)))
			return 0;
	for (uint32_t i = 0; r->mk->set && i < r->mk->n_covers; i++)
		if (bit_get(r->unsettled,
			    nsa_compact_tag_slot(r->mk->cover[i].tag)))
			return 0;
	return 1;
}

/* The round's number: above the mark's and every checkpoint listed (a
 * failed round's parts are never named again), at least rd->gen. */
static uint64_t round_gen(const struct round *r)
{
	uint64_t gen = r->rd->gen;

	if (r->mk->set && r->mk->gen + 1 > gen)
		gen = r->mk->gen + 1;
	for (unsigned int i = 0; i < r->n; i++)
		for (size_t j = 0; j < r->nr[i].l.n; j++) {
			uint32_t id;
			uint64_t g;

			if (nsa_logkey_checkpoint(r->nr[i].l.k[j],
						  r->nr[i].l.len[j], &id,
						  &g) == 0 &&
			    g + 1 > gen)
				gen = g + 1;
		}
	return gen;
}

/* Each master's checkpoint slot: its channel slot, or, when that one
 * moved, the lowest it serves that did not. 0 or -EAGAIN. */
static int round_cp_slots(struct round *r)
{
	for (unsigned int i = 0; i < r->n && !r->single; i++) {
		unsigned int s;

		if (!bit_get(r->unsettled, r->nr[i].cp_slot))
			continue;
		for (s = 0; s < NS_SLOTS; s++)
			if (r->topo->slot_covered[s] &&
			    r->topo->slot_node[s] == r->first + i &&
			    !bit_get(r->unsettled, s))
				break;
		if (s == NS_SLOTS) {
			nsa_set_err(r->err, r->errlen,
				    "every slot of master %u is moving", i);
			return -EAGAIN;
		}
		r->nr[i].cp_slot = (uint16_t)s;
	}
	return 0;
}

/* Where a record goes: the checkpoint of the master that serves its
 * session key's slot now (the first master for a slot no one serves). */
static unsigned int route_add(void *arg, const struct ns_session *s,
			      unsigned int n)
{
	struct round *r = arg;
	uint8_t key[NS_KEY_MAX];

	/* An IPv6 session comes alone (n = 1), its second line after it. */
	for (unsigned int i = 0; i < n; i++) {
		unsigned int node = 0;

		if (!r->single) {
			uint16_t slot;

			slot = ns_key_slot(key, ns_key_of(&s[i], key));
			if (r->topo->slot_covered[slot])
				node = r->topo->slot_node[slot];
		}
		nsa_checkpoint_add(&r->nr[node].cp, &s[i], 1);
	}
	return n;
}

/* One pass: the sessions of slots [lo, hi) of what the round merges,
 * merged within max_bytes and written to the checkpoints. 0, -ENOBUFS
 * (the range outgrew the budget: nothing written), or a negative errno. */
static int round_pass(struct round *r, unsigned int lo, unsigned int hi,
		      size_t max_bytes, int drop_old, int first)
{
	static __thread uint64_t keep[NS_SLOTS / 64];
	struct nsa_logmerge m;
	int rc = 0;

	if (nsa_logmerge_init(&m) != 0)
		return -ENOMEM;
	m.batch_key = r->rd->key;
	m.batch_key_len = r->rd->key ? r->rd->key_len : 0;
	m.max_bytes = max_bytes;
	if (lo > 0 || hi < NS_SLOTS) {
		memset(keep, 0, sizeof(keep));
		for (unsigned int s = lo; s < hi; s++)
			bit_set(keep, s);
		m.keep_slots = keep;
	}
	for (unsigned int i = 0; i < r->n && rc == 0; i++)
		rc = nsa_compact_read(r->conf, r->nr[i].c, &r->nr[i].l, &m,
				      first, r->res, &r->reply_bytes, r->err,
				      r->errlen);
	if (m.peak_bytes > r->res->merge_peak_bytes)
		r->res->merge_peak_bytes = m.peak_bytes;
	if (rc == 0) {
		r->res->records += m.records;
		nsa_logmerge_emit_checkpoint(&m, nsdp_realtime_ns(), drop_old,
					     route_add, r);
		r->res->passes++;
		/* The next pass reads on the connections the checkpoints
		 * write on. */
		for (unsigned int i = 0; i < r->n; i++)
			nsa_checkpoint_drain(&r->nr[i].cp);
	}
	nsa_logmerge_free(&m);
	return rc;
}

/* The passes a budget needs for the records planned, and the merge's
 * share of the budget (the rest: the keys listed, a reply, the
 * checkpoints in flight). */
static int round_passes(struct round *r, unsigned int *passes,
			size_t *merge_bytes)
{
	size_t fixed =
		(size_t)r->n * CHECKPOINT_BYTES + NS_BATCH_MAX_LEN_IPV4 * 64;
	uint64_t records = 0;
	int rc = 0;

	*passes = 1;
	*merge_bytes = 0;
	if (r->rd->budget_bytes == 0)
		return 0;
	for (unsigned int i = 0; i < r->n; i++)
		fixed += r->nr[i].l.bytes;
	for (unsigned int i = 0; i < r->n && rc == 0; i++)
		rc = nsa_compact_count(r->nr[i].c, &r->nr[i].l, &records,
				       r->err, r->errlen);
	*merge_bytes = r->rd->budget_bytes > 2 * fixed
			       ? r->rd->budget_bytes - fixed
			       : r->rd->budget_bytes / 2;
	records = records * MERGE_BYTES_PER_SESSION / *merge_bytes + 1;
	*passes = records < NS_SLOTS ? (unsigned int)records : NS_SLOTS;
	return rc;
}

/* Merge and write back what the round planned, in passes over ranges of
 * slots in order; a range that outgrows the budget is halved, and so are
 * the ranges after it. */
static int round_merge(struct round *r, int drop_old)
{
	unsigned int passes, a = 0, step;
	size_t merge_bytes;
	int rc = round_passes(r, &passes, &merge_bytes), first = 1;

	step = (NS_SLOTS + passes - 1) / passes;
	while (rc == 0 && a < NS_SLOTS) {
		unsigned int b = a + step < NS_SLOTS ? a + step : NS_SLOTS;

		rc = round_pass(r, a, b, merge_bytes, drop_old, first);
		if (rc == -ENOBUFS && b - a > 1) {
			step = (b - a) / 2;
			rc = 0;
			continue;
		}
		if (rc == -ENOBUFS)
			nsa_set_err(r->err, r->errlen,
				    "the sessions of slot %u exceed the "
				    "budget of %zu bytes",
				    a, r->rd->budget_bytes);
		first = 0;
		a = b;
		if (rc == 0)
			rc = nsa_compact_lease_keep(&r->lease, 0, r->err,
						    r->errlen);
	}
	return rc;
}

/* The live records are in the checkpoints: every batch acknowledged on
 * every master (and by a replica), then the mark on every master
 * (likewise), then the expiries. From the mark on, readers leave out the
 * checkpoints it replaces and the segments it covers, expired or not. */
static int round_commit(struct round *r)
{
	const unsigned int wait_ms = r->rd->wait_ms;
	char *text = malloc(NSA_LOGMARK_MAX);
	int rc = text ? 0 : -ENOMEM, len = 0;

	for (unsigned int i = 0; i < r->n && rc == 0; i++) {
		rc = nsa_checkpoint_settle(&r->nr[i].cp);
		r->done->parts += r->nr[i].cp.index;
		if (rc == 0)
			rc = nsa_store_wait_replica(r->nr[i].c, wait_ms, r->err,
						    r->errlen);
	}
	if (rc == 0)
		rc = nsa_compact_lease_keep(&r->lease, 1, r->err, r->errlen);
	if (rc == 0) {
		len = nsa_logmark_format(r->done, r->rd->key,
					 r->rd->key ? r->rd->key_len : 0, text,
					 NSA_LOGMARK_MAX);
		rc = len < 0 ? -EINVAL : 0;
	}
	for (unsigned int i = 0; i < r->n && rc == 0; i++)
		rc = nsa_compact_mark_write(r->conf, r->nr[i].c, r->nr[i].slot,
					    text, (size_t)len, wait_ms, r->err,
					    r->errlen);
	for (unsigned int i = 0; i < r->n && rc == 0; i++)
		r->res->expire_errors += nsa_compact_expire(
			r->nr[i].c, &r->nr[i].l, r->rd->grace_ms);
	free(text);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every part of the marked checkpoint was listed, or none can have been
 * missed: a part absent while no slot moved has expired (its records
 * with it), but one in a slot that moved between two listings may have
 * passed both (then -EAGAIN: the round is tried again). */
static int round_parts_listed(struct round *r)
{
	uint64_t parts = 0, moving = 0;
	const char **names;
	size_t n = 0;

	for (unsigned int i = 0; i < NS_SLOTS / 64; i++)
		moving |= r->unsettled[i];
	if (!r->mk->set || moving == 0)
		return 0;
	for (unsigned int i = 0; i < r->n; i++)
		n += r->nr[i].l.n;
	names = malloc((n ? n : 1) * sizeof(*names));
	if (names == NULL)
		return -ENOMEM;
	/* A part listed on both sides of a migration counts once. */
	n = 0;
	for (unsigned int i = 0; i < r->n; i++)
		for (size_t j = 0; j < r->nr[i].l.n; j++)
			if (r->nr[i].l.plan[j] == NSA_PLAN_MERGE_CP)
				names[n++] = r->nr[i].l.k[j];
	qsort(names, n, sizeof(*names), by_name);
	for (size_t j = 0; j < n; j++)
		parts += j == 0 || strcmp(names[j - 1], names[j]) != 0;
	free(names);
	if (parts >= r->mk->parts)
		return 0;
	nsa_set_err(r->err, r->errlen,
		    "%llu of the %u checkpoint parts of round %llx listed: "
		    "a slot moved meanwhile",
		    (unsigned long long)parts, r->mk->parts,
		    (unsigned long long)r->mk->gen);
	return -EAGAIN;
}

/* Plan the round over the marks and listings: its gen, covers, the plan
 * of every key, where its checkpoints go. Then the epoch: fenced, it
 * writes nothing. */
static int round_plan(struct round *r, int *drop_old)
{
	struct nsa_compact_keys *all = malloc(r->n * sizeof(*all));
	int rc;

	if (all == NULL)
		return -ENOMEM;
	for (unsigned int i = 0; i < r->n; i++)
		all[i] = r->nr[i].l;
	r->done->set = 1;
	r->done->id = r->rd->id;
	r->done->gen = round_gen(r);
	r->done->grace_ms = r->rd->grace_ms;
	rc = nsa_compact_plan(all, r->n, r->mk, r->rd->seen, &r->listed,
			      r->unsettled, r->done, &r->held);
	free(all);
	if (rc == -E2BIG)
		nsa_set_err(r->err, r->errlen,
			    "more than %d publisher channels in the log",
			    NSA_LOGMARK_COVERS);
	r->res->gen = r->done->gen;
	r->res->families_held = r->held;
	r->listed.exact = listing_exact(r);
	*drop_old = r->listed.exact && r->held == 0 &&
		    (r->rd->seen == NULL || r->rd->seen->exact);
	if (rc == 0)
		rc = round_parts_listed(r);
	if (rc == 0)
		rc = round_cp_slots(r);
	if (rc == 0)
		rc = nsa_fence_check(r->conf, r->topo, r->rd->epoch, r->err,
				     r->errlen);
	for (unsigned int i = 0; i < r->n && rc == 0; i++)
		rc = nsa_checkpoint_open(&r->nr[i].cp, r->nr[i].c,
					 r->nr[i].cp_slot, r->rd, r->done->gen,
					 nsdp_realtime_ns(), r->res, r->err,
					 r->errlen);
	return rc;
}

static void round_free(struct round *r)
{
	nsa_compact_lease_drop(&r->lease);
	for (unsigned int i = 0; r->nr && i < r->n; i++) {
		nsa_checkpoint_close(&r->nr[i].cp);
		nsa_compact_keys_free(&r->nr[i].l);
		if (r->nr[i].c)
			redisFree(r->nr[i].c);
	}
	free(r->nr);
	free(r->mk);
	free(r->done);
	nsa_compact_sighting_free(&r->listed);
}

static int round_run(struct round *r)
{
	int rc = 0, drop_old = 0;
	size_t listed_bytes = 0;

	memset(r->res, 0, sizeof(*r->res));
	if (r->errlen)
		r->err[0] = '\0';
	r->nr = calloc(r->n ? r->n : 1, sizeof(*r->nr));
	r->mk = calloc(1, sizeof(*r->mk));
	r->done = calloc(1, sizeof(*r->done));
	if (r->nr == NULL || r->mk == NULL || r->done == NULL)
		rc = -ENOMEM;
	if (rc == 0)
		rc = round_connect(r);
	if (rc == 0)
		rc = round_lease(r);
	if (rc == 0)
		rc = round_marks(r);
	if (rc == 0)
		rc = round_list(r);
	if (rc == 0)
		rc = round_plan(r, &drop_old);
	if (rc == 0)
		rc = round_merge(r, drop_old);
	if (rc == 0)
		rc = round_commit(r);
	for (unsigned int i = 0; r->nr && i < r->n; i++)
		listed_bytes += r->nr[i].l.bytes;
	r->res->peak_bytes = r->res->merge_peak_bytes + listed_bytes +
			     r->reply_bytes + (uint64_t)r->n * CHECKPOINT_BYTES;
	if (rc == 0 && r->rd->listed) {
		nsa_compact_sighting_free(r->rd->listed);
		*r->rd->listed = r->listed;
		memset(&r->listed, 0, sizeof(r->listed));
	}
	round_free(r);
	return rc;
}

int nsa_compact_node(const struct nsa_store_conf *conf,
		     const struct nsa_topology *topo, unsigned int node,
		     const struct nsa_compact_round *rd,
		     struct nsa_compact_result *res, char *err, size_t errlen)
{
	struct round r = {.conf = conf,
			  .topo = topo,
			  .rd = rd,
			  .res = res,
			  .err = err,
			  .errlen = errlen,
			  .single = 1,
			  .first = node,
			  .n = 1};

	return round_run(&r);
}

int nsa_compact_all(const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo,
		    const struct nsa_compact_round *rd,
		    struct nsa_compact_result *res, char *err, size_t errlen)
{
	struct round r = {.conf = conf,
			  .topo = topo,
			  .rd = rd,
			  .res = res,
			  .err = err,
			  .errlen = errlen,
			  .n = topo->n_nodes};

	return round_run(&r);
}

int nsa_compact_sight(const struct nsa_store_conf *conf,
		      const struct nsa_topology *topo,
		      struct nsa_compact_sighting *out, char *err,
		      size_t errlen)
{
	const struct nsa_compact_round rd = {0};
	struct nsa_compact_result res;
	struct round r = {.conf = conf,
			  .topo = topo,
			  .rd = &rd,
			  .res = &res,
			  .err = err,
			  .errlen = errlen,
			  .n = topo->n_nodes};
	int rc;

	memset(&res, 0, sizeof(res));
	r.nr = calloc(r.n ? r.n : 1, sizeof(*r.nr));
	r.mk = calloc(1, sizeof(*r.mk));
	rc = r.nr && r.mk ? round_connect(&r) : -ENOMEM;
	if (rc == 0)
		rc = round_list(&r);
	if (rc == 0) {
		r.listed.exact = listing_exact(&r);
		nsa_compact_sighting_free(out);
		*out = r.listed;
		memset(&r.listed, 0, sizeof(r.listed));
	}
	round_free(&r);
	return rc;
}
