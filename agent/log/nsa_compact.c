/*
 * nsa_compact.c - compaction rounds: checkpointing the log of one master
 * or of all of them (schema/FORMAT.md, Compaction).
 *
 * A round reads the mark in force, lists and reads the segments and the
 * checkpoint it leaves in (compact/nsa_compact_segments.c), merges them
 * (nsa_logmerge), checks that its epoch is still the store's, writes the
 * live records as checkpoint batches, then its commit mark on every
 * master, then gives every checkpoint and segment merged PEXPIRE LT
 * (compact/nsa_compact_checkpoint.c).
 *
 * The mark is what makes a checkpoint count: readers (this one included)
 * merge only the checkpoint of the marked round and the segments sent
 * after the mark's until_ns, so no read that spans a round's expiries
 * pairs an old checkpoint's record with a missing delete.
 *
 * Only segments sent (header sent_ns) a grace period before the listing
 * began (and before the caller's until_ns) are merged, and the marked
 * checkpoint: SCAN returns every key that exists throughout it, so each
 * older segment of their records' sessions is listed too (or expired, or
 * covered by a listed checkpoint), and the tombstones the checkpoint
 * leaves out have no older record left outside it. A younger segment may
 * have been listed while an older one, written while the SCAN ran, was
 * not: it waits for the next round.
 *
 * Invariants:
 * - Nothing is expired before every checkpoint batch and then every mark
 *   is acknowledged: a failure leaves the log as it was, plus checkpoints
 *   that no mark names (no reader merges them).
 * - A reader that reads the checkpoint and the segments it covers merges
 *   the same table as from either alone.
 * - A round of a fenced active writes nothing: its connections are named
 *   as writers (a newer active's fence closes them) and it reads the
 *   store's epoch once they are, before its first write (nsa_fence.h).
 * - A round blocks on connections of its own (hiredis, the store's
 *   timeouts), never on the writers'.
 *
 * Not here: when to compact (active/nsa_compactor.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_compact.h"
#include "nsa_compact_checkpoint.h"
#include "nsa_compact_parts.h"
#include "nsa_compact_segments.h"
#include "nsa_fence.h"
#include "nsdp_time.h"

/* One master of a round. */
struct node_round {
	redisContext *c; /* named as a writer */
	uint16_t slot; /* its channel slot: its checkpoint's and mark's */
	struct nsa_compact_keys l; /* what was listed on it */
	uint8_t *merged, *stale; /* per listed key: to expire */
	struct nsa_checkpoint cp;
};

/* An empty merge that takes only segments signed with the round's key: a
 * segment not signed with it is left to its expiry, never signed into a
 * checkpoint. 0 or -ENOMEM. */
static int round_merge_init(struct nsa_logmerge *m,
			    const struct nsa_compact_round *rd)
{
	if (nsa_logmerge_init(m) != 0)
		return -ENOMEM;
	m->batch_key = rd->key;
	m->batch_key_len = rd->key ? rd->key_len : 0;
	return 0;
}

/* Connect to master i, named as a writer so that a newer active's fence
 * closes the connection: 0 or -EIO. */
static int node_connect(const struct nsa_store_conf *conf,
			const struct nsa_topology *topo, unsigned int i,
			struct node_round *nr, char *err, size_t errlen)
{
	nr->slot = topo->nodes[i].channel_slot;
	nr->c = nsa_store_connect_named(conf, &topo->nodes[i].addr,
					NSA_WRITER_NAME, NULL, err, errlen);
	return nr->c ? 0 : -EIO;
}

/* List the master's segments and merge into m what the round under mark
 * mk takes of them. */
static int node_read(struct node_round *nr, const struct nsa_logmark *mk,
		     const struct nsa_compact_round *rd, struct nsa_logmerge *m,
		     struct nsa_compact_result *res, char *err, size_t errlen)
{
	int rc = nsa_compact_list(nr->c, &nr->l, err, errlen);

	if (rc == 0 &&
	    ((nr->merged = calloc(nr->l.n ? nr->l.n : 1, 1)) == NULL ||
	     (nr->stale = calloc(nr->l.n ? nr->l.n : 1, 1)) == NULL))
		rc = -ENOMEM;
	if (rc == 0)
		rc = nsa_compact_read(nr->c, &nr->l, mk, rd->until_ns,
				      nr->merged, nr->stale, m, res, err,
				      errlen);
	return rc;
}

static void node_round_free(struct node_round *nr)
{
	nsa_checkpoint_close(&nr->cp);
	free(nr->merged);
	free(nr->stale);
	nsa_compact_keys_free(&nr->l);
	if (nr->c)
		redisFree(nr->c);
}

/* Start the checkpoint of each of the n masters: 0 or -ENOMEM. */
static int checkpoints_open(struct node_round *nr, unsigned int n,
			    const struct nsa_compact_round *rd,
			    struct nsa_compact_result *res, char *err,
			    size_t errlen)
{
	unsigned int i;
	int rc = 0;

	for (i = 0; i < n && rc == 0; i++)
		rc = nsa_checkpoint_open(&nr[i].cp, nr[i].c, nr[i].slot, rd,
					 nsdp_realtime_ns(), res, err, errlen);
	return rc;
}

/* The live records are in the checkpoints: every batch acknowledged on
 * every master, then the mark on every master, then the expiries. From the
 * mark on, readers leave out the checkpoints it replaces and the segments
 * it covers, expired or not. 0, or a negative errno with the reason in
 * err (nothing expired unless every mark is written). */
static int round_commit(struct node_round *nr, unsigned int n,
			const struct nsa_compact_round *rd,
			const struct nsa_logmark *mk, struct nsa_logmark *done,
			char *err, size_t errlen)
{
	unsigned int i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		int settled = nsa_checkpoint_settle(&nr[i].cp);

		if (settled != 0)
			rc = settled;
		done->parts += nr[i].cp.index;
	}
	if (rc == 0) {
		nsa_compact_mark_of_round(done, rd, mk);
		for (i = 0; i < n; i++)
			nsa_compact_mark_write(nr[i].c, nr[i].slot, done);
		for (i = 0; i < n; i++)
			if (nsa_compact_replies(nr[i].c, 1, err, errlen) != 0)
				rc = -EIO;
	}
	for (i = 0; i < n && rc == 0; i++)
		rc = nsa_compact_expire(nr[i].c, &nr[i].l, nr[i].merged,
					nr[i].stale, rd->grace_ms, err, errlen);
	return rc;
}

int nsa_compact_node(const struct nsa_store_conf *conf,
		     const struct nsa_topology *topo, unsigned int node,
		     const struct nsa_compact_round *rd,
		     struct nsa_compact_result *res, char *err, size_t errlen)
{
	struct node_round nr = {0};
	struct nsa_logmerge m;
	struct nsa_logmark mk, done = {0};
	int rc;

	memset(res, 0, sizeof(*res));
	if (node_connect(conf, topo, node, &nr, err, errlen) != 0)
		return -EIO;
	if (round_merge_init(&m, rd) != 0) {
		node_round_free(&nr);
		return -ENOMEM;
	}
	done.round_ns = nsdp_realtime_ns();
	rc = nsa_compact_mark_read(nr.c, nr.slot, &mk, err, errlen);
	if (rc == 0)
		rc = node_read(&nr, &mk, rd, &m, res, err, errlen);
	if (rc == 0)
		rc = nsa_fence_check(conf, topo, rd->epoch, err, errlen);
	if (rc == 0)
		rc = checkpoints_open(&nr, 1, rd, res, err, errlen);
	if (rc == 0) {
		nsa_logmerge_emit(&m, nr.cp.now_ns, nsa_checkpoint_add, &nr.cp);
		rc = round_commit(&nr, 1, rd, &mk, &done, err, errlen);
	}
	node_round_free(&nr);
	nsa_logmerge_free(&m);
	return rc;
}

/* Where a record goes: the checkpoint of the master that serves its
 * session key's slot now (the first master for a slot no one serves). */
struct route {
	const struct nsa_topology *topo;
	struct node_round *nr;
};

static unsigned int route_add(void *arg, const struct ns_session *s,
			      unsigned int n)
{
	struct route *r = arg;
	uint8_t key[NS_KEY_LEN];
	unsigned int i;

	for (i = 0; i < n; i++) {
		uint16_t slot;
		unsigned int node;

		ns_key_build(s[i].proto, &s[i].orig, key);
		slot = ns_key_slot(key, NS_KEY_LEN);
		node = r->topo->slot_covered[slot] ? r->topo->slot_node[slot]
						   : 0;
		nsa_checkpoint_add(&r->nr[node].cp, &s[i], 1);
	}
	return n;
}

/* Whether the slot map of topo is still the store's, and no slot is
 * being migrated (CLUSTER NODES shows "[slot->-" or "[slot-<-"): a
 * segment key that moved between two listings could have been missed. */
static int slots_still(const struct nsa_store_conf *conf,
		       const struct nsa_topology *topo, char *err,
		       size_t errlen)
{
	struct nsa_topology *now = malloc(sizeof(*now));
	unsigned int i;
	int still;

	if (now == NULL)
		return 0;
	still = nsa_topology_fetch(conf, now, err, errlen) == 0 &&
		memcmp(now->slot_node, topo->slot_node,
		       sizeof(topo->slot_node)) == 0 &&
		memcmp(now->slot_covered, topo->slot_covered,
		       sizeof(topo->slot_covered)) == 0;
	free(now);
	for (i = 0; still && i < topo->n_nodes; i++) {
		redisContext *c = nsa_store_connect(conf, &topo->nodes[i].addr,
						    err, errlen);
		redisReply *r;

		if (c == NULL)
			return 0;
		r = redisCommand(c, "CLUSTER NODES");
		if (r && r->type == REDIS_REPLY_ERROR)
			nsa_set_err(err, errlen, "CLUSTER NODES: %s", r->str);
		still = r && r->type == REDIS_REPLY_STRING &&
			strstr(r->str, "->-") == NULL &&
			strstr(r->str, "-<-") == NULL;
		if (r)
			freeReplyObject(r);
		redisFree(c);
	}
	if (!still && err[0] == '\0')
		nsa_set_err(err, errlen,
			    "slots moved during the round: retried later");
	return still;
}

/* Connect to every master and merge into m what the round takes of its
 * segments. The round in force is the first master's mark (every master
 * has the same one unless a round failed half way, and then nothing was
 * expired); done->round_ns is when it was read. */
static int read_all(const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo,
		    const struct nsa_compact_round *rd, struct node_round *nr,
		    struct nsa_logmerge *m, struct nsa_logmark *mk,
		    struct nsa_logmark *done, struct nsa_compact_result *res,
		    char *err, size_t errlen)
{
	unsigned int i;
	int rc = 0;

	for (i = 0; i < topo->n_nodes && rc == 0; i++) {
		rc = node_connect(conf, topo, i, &nr[i], err, errlen);
		if (rc == 0 && i == 0) {
			done->round_ns = nsdp_realtime_ns();
			rc = nsa_compact_mark_read(nr[0].c, nr[0].slot, mk, err,
						   errlen);
		}
		if (rc == 0)
			rc = node_read(&nr[i], mk, rd, m, res, err, errlen);
	}
	return rc;
}

int nsa_compact_all(const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo,
		    const struct nsa_compact_round *rd,
		    struct nsa_compact_result *res, char *err, size_t errlen)
{
	const unsigned int n = topo->n_nodes;
	struct node_round *nr = calloc(n ? n : 1, sizeof(*nr));
	struct nsa_logmerge m;
	struct route route = {topo, nr};
	struct nsa_logmark mk = {0}, done = {0};
	unsigned int i;
	int rc;

	memset(res, 0, sizeof(*res));
	if (errlen)
		err[0] = '\0';
	if (nr == NULL)
		return -ENOMEM;
	if (round_merge_init(&m, rd) != 0) {
		free(nr);
		return -ENOMEM;
	}
	rc = read_all(conf, topo, rd, nr, &m, &mk, &done, res, err, errlen);
	if (rc == 0 && topo->cluster && !slots_still(conf, topo, err, errlen))
		rc = -EAGAIN;
	if (rc == 0)
		rc = nsa_fence_check(conf, topo, rd->epoch, err, errlen);
	if (rc == 0)
		rc = checkpoints_open(nr, n, rd, res, err, errlen);
	if (rc == 0) {
		nsa_logmerge_emit(&m, nsdp_realtime_ns(), route_add, &route);
		rc = round_commit(nr, n, rd, &mk, &done, err, errlen);
	}
	for (i = 0; i < n; i++)
		node_round_free(&nr[i]);
	free(nr);
	nsa_logmerge_free(&m);
	return rc;
}
