/*
 * nv_table.c - natsync-verify's tables (nv_table.h): a table file read
 * record by record, or the store read as a standby loads it
 * (nsa_loader.c), each kept sorted by flow.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_cluster.h"
#include "nsa_loader.h"
#include "nv_table.h"

/* A store that does not answer within this is an error. */
#define STORE_TIMEOUT_MS 5000
#define VERIFY_LOAD_TRIES 10

/* Keep s in t; a session of another pair than --pair's is passed over. */
static int table_push(struct nv_table *t, const struct ns_session *s)
{
	if (t->only_pair >= 0 && s->gateway_id >> 8 != t->only_pair)
		return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct ns_rec *p = realloc(t->s, cap * sizeof(*p));

		if (!p) {
			t->oom = 1;
			return -ENOMEM;
		}
		t->s = p;
		t->cap = cap;
	}
	t->s[t->n].s = *s;
	if (ns_family_is_v6(s->family))
		t->s[t->n].v6 = *ns_session_v6_of(s);
	else
		memset(&t->s[t->n].v6, 0, sizeof(t->s[t->n].v6));
	t->n++;
	return 0;
}

/* Order by flow (the session key): IPv4 flows first, then IPv6 ones by
 * their inside addresses and ports. */
int nv_flow_cmp(const void *pa, const void *pb)
{
	const struct ns_rec *ra = pa, *rb = pb;
	const struct ns_session *a = &ra->s, *b = &rb->s;
	int v6a = ns_family_is_v6(a->family), v6b = ns_family_is_v6(b->family);

	if (v6a != v6b)
		return v6a - v6b;
	if (v6a) {
		int c = memcmp(ra->v6.orig_saddr, rb->v6.orig_saddr, 32);

		if (a->proto != b->proto)
			return a->proto < b->proto ? -1 : 1;
		if (c)
			return c;
	}
	if (a->proto != b->proto)
		return a->proto < b->proto ? -1 : 1;
	if (a->orig.saddr != b->orig.saddr)
		return a->orig.saddr < b->orig.saddr ? -1 : 1;
	if (a->orig.daddr != b->orig.daddr)
		return a->orig.daddr < b->orig.daddr ? -1 : 1;
	if (a->orig.sport != b->orig.sport)
		return a->orig.sport < b->orig.sport ? -1 : 1;
	if (a->orig.dport != b->orig.dport)
		return a->orig.dport < b->orig.dport ? -1 : 1;
	return 0;
}

/* Read one record of a table file into r: 1, 0 at the end of the file,
 * or a negative errno (a message printed) for a partial or invalid
 * record. Its first two bytes give its length. */
static int table_read_record(FILE *f, const char *path, size_t at,
			     struct ns_rec *r)
{
	uint8_t buf[NS_RECORD_MAX_LEN];
	size_t got = fread(buf, 1, 2, f), len;

	if (got == 0)
		return 0;
	len = got == 2 && buf[0] == NS_RECORD_VERSION
		      ? ns_record_wire_len(buf[1])
		      : 0;
	if (got == 2 && len > 2)
		got += fread(buf + 2, 1, len - 2, f);
	if (len == 0 || ns_record_decode_rec(buf, got, r) < 0) {
		if (got < 2 || (len > 0 && got < len))
			fprintf(stderr,
				"natsync-verify: %s: ends in a partial record "
				"(%zu of %zu bytes) after %zu records\n",
				path, got, len ? len : 2, at);
		else
			fprintf(stderr,
				"natsync-verify: %s: record %zu is not a "
				"valid session record\n",
				path, at);
		return -EINVAL;
	}
	return 1;
}

int nv_table_read_file(struct nv_table *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	struct ns_rec r;
	int rc = 0, got;

	if (!f) {
		fprintf(stderr, "natsync-verify: %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	t->n = 0;
	while (rc == 0 && (got = table_read_record(f, path, t->n, &r)) != 0) {
		if (got < 0) {
			rc = got;
		} else if (table_push(t, &r.s) < 0) {
			fprintf(stderr,
				"natsync-verify: %s: out of memory after %zu "
				"records\n",
				path, t->n);
			rc = -ENOMEM;
		}
	}
	if (rc == 0 && ferror(f)) {
		rc = errno ? -errno : -EIO;
		fprintf(stderr, "natsync-verify: %s: %s\n", path,
			strerror(-rc));
	}
	fclose(f);
	if (rc == 0 && t->n > 1) /* none read: t->s may be NULL */
		qsort(t->s, t->n, sizeof(*t->s), nv_flow_cmp);
	return rc;
}

static unsigned int store_take(void *arg, unsigned int node,
			       const struct ns_session *s, unsigned int n)
{
	struct nv_table *t = arg;
	unsigned int i;

	(void)node;
	for (i = 0; i < n && table_push(t, &s[i]) == 0; i++)
		;
	return i;
}

static void store_count_bad(void *arg, uint64_t n)
{
	struct nv_table *t = arg;

	t->bad += n;
}

/* Load master node into sink as a standby does, or every master in one
 * load (every: log layout on a cluster, each segment read once): 0 or
 * -EIO, printed. */
static int node_read(const struct nsa_store_conf *sc,
		     const struct nsa_topology *topo, unsigned int node,
		     int every, const struct nsa_loader_sink *sink)
{
	char err[512];
	int lr = NSA_LOADER_FAILED;

	/* Log layout: a load that a compaction round overtook gave nothing;
	 * it is read again (a round per load at most, so a few tries
	 * suffice). */
	for (int try = 0; try < VERIFY_LOAD_TRIES; try++) {
		lr = every ? nsa_loader_run_every(sc, topo, 0, sink,
						  STORE_TIMEOUT_MS, err,
						  sizeof(err))
			   : nsa_loader_run(sc, topo, node, 0, sink,
					    STORE_TIMEOUT_MS, err, sizeof(err));
		if (lr != NSA_LOADER_RACED)
			break;
	}
	if (lr == NSA_LOADER_DONE)
		return 0;
	fprintf(stderr, "natsync-verify: store: %s\n", err);
	return -EIO;
}

/* The sessions of every master (only_slot < 0) or of the master that owns
 * only_slot, read as the standby loads them (GETKEYSINSLOT or SCAN, then
 * MGET; the log's segments and checkpoints merged); in the log layout only
 * segments signed with conf's batch key, if any. */
int nv_table_read_store(struct nv_table *t, const struct nsa_config *conf,
			int only_slot)
{
	const struct nsa_store_conf *sc = &conf->store;
	struct nsa_topology *topo = calloc(1, sizeof(*topo));
	const struct nsa_loader_sink sink = {.apply = store_take,
					     .bad = store_count_bad,
					     .arg = t,
					     .batch_key = conf->batch_key,
					     .batch_key_len =
						     conf->batch_key_len};
	char err[512];
	int rc = 0;

	t->n = 0;
	t->bad = 0;
	if (!topo || nsa_topology_fetch(sc, topo, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-verify: store: %s\n",
			topo ? err : "out of memory");
		free(topo);
		return -EIO;
	}
	if (only_slot < 0 && sc->layout == NSA_LAYOUT_LOG && topo->cluster &&
	    topo->n_nodes > 1)
		rc = node_read(sc, topo, 0, 1, &sink);
	else
		for (unsigned int i = 0; i < topo->n_nodes && rc == 0; i++)
			if (only_slot < 0 || topo->slot_node[only_slot] == i)
				rc = node_read(sc, topo, i, 0, &sink);
	free(topo);
	if (rc == 0 && t->oom) {
		fprintf(stderr,
			"natsync-verify: store: out of memory after %zu "
			"sessions\n",
			t->n);
		rc = -ENOMEM;
	}
	if (t->bad)
		fprintf(stderr,
			"natsync-verify: store: %" PRIu64
			" values are not valid session records\n",
			t->bad);
	if (t->n > 1) /* none read: t->s may be NULL */
		qsort(t->s, t->n, sizeof(*t->s), nv_flow_cmp);
	return rc;
}
