/*
 * nsa_loader_ask.c - reading the half of a migrating slot that its target
 * holds: CLUSTER GETKEYSINSLOT there, then ASKING + MGET of the keys the
 * layout reads, on a blocking hiredis connection (nsa_store_connect).
 *
 * This is the only part of a load that blocks. It runs when a probe is
 * answered ASK (nsa_loader_list.c), that is only while a slot is being
 * migrated: rare, and short, since a migration moves a slot's keys in
 * batches. Each call is bounded by the connection's timeouts (the
 * configured connect timeout, then the store's command timeout on every
 * read and write, nsa_cluster.c). A standby's poll loop waits meanwhile:
 * its live batches queue on their subscriptions and are applied after.
 *
 * Invariants:
 * - The connection is kept for the next migrating slot on the same target
 *   and closed when the target changes, after an I/O error, or when the
 *   loader closes.
 * - A target that cannot be read leaves the slot unread: the caller counts
 *   it, and the slot is not reported read.
 *
 * Not here: which keys are read and what their values mean (the layout's
 * reader), the probe that found the migration (nsa_loader_list.c).
 */
#include <stdlib.h>

#include "nsa_loader_ask.h"
#include "nsa_loader_layout.h"

void nsa_loader_importer_close(struct nsa_loader *ld)
{
	if (ld->importer)
		redisFree(ld->importer);
	ld->importer = NULL;
}

/* A connection to at, the one kept when it is to the same target. */
static redisContext *importer_connect(struct nsa_loader *ld,
				      const struct nsa_addr *at)
{
	char err[160];

	if (ld->importer && !nsa_addr_equal(&ld->importer_addr, at))
		nsa_loader_importer_close(ld);
	if (!ld->importer) {
		ld->importer =
			nsa_store_connect(ld->conf, at, err, sizeof(err));
		if (ld->importer)
			ld->importer_addr = *at;
	}
	return ld->importer;
}

int nsa_loader_read_importing(struct nsa_loader *ld, uint32_t slot,
			      const struct nsa_addr *at)
{
	redisContext *c = importer_connect(ld, at);
	redisReply *list = NULL, *r = NULL;
	const redisReply **keys = NULL;
	const char **argv = NULL;
	size_t *lens = NULL, i, m = 0;
	int rc = -1;

	if (!c)
		return -1;
	list = redisCommand(c, "CLUSTER GETKEYSINSLOT %u %s", slot,
			    NSA_SLOT_MAX_KEYS);
	if (!list || list->type != REDIS_REPLY_ARRAY)
		goto out;
	argv = malloc((list->elements + 1) * sizeof(*argv));
	lens = malloc((list->elements + 1) * sizeof(*lens));
	keys = malloc((list->elements + 1) * sizeof(*keys));
	if (!argv || !lens || !keys)
		goto out;
	argv[0] = "MGET";
	lens[0] = 4;
	for (i = 0; i < list->elements; i++) {
		const redisReply *k = list->element[i];

		if (nsa_loader_key_wanted(ld, k) <= 0)
			continue; /* not one to read (counted on its owner) */
		keys[m++] = k;
		argv[m] = k->str;
		lens[m] = k->len;
	}
	if (m == 0) {
		rc = 0;
		goto out;
	}
	/* The slot is not the target's yet: it serves the keys only to a
	 * client that says ASKING first. */
	if (redisAppendCommand(c, "ASKING") != REDIS_OK ||
	    redisAppendCommandArgv(c, (int)m + 1, argv, lens) != REDIS_OK ||
	    redisGetReply(c, (void **)&r) != REDIS_OK)
		goto out;
	freeReplyObject(r);
	r = NULL;
	if (redisGetReply(c, (void **)&r) != REDIS_OK || !r ||
	    r->type != REDIS_REPLY_ARRAY || r->elements != m)
		goto out;
	rc = ld->layout->values(ld, keys, r->element, m);
out:
	if (rc < 0 && c->err)
		nsa_loader_importer_close(ld);
	if (r)
		freeReplyObject(r);
	if (list)
		freeReplyObject(list);
	free(keys);
	free(argv);
	free(lens);
	return rc;
}
