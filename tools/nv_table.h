/*
 * nv_table.h - natsync-verify's tables (nv_table.c): sessions read from a
 * table file (the synthetic source's or a standby's dump) or from the
 * store (as a standby loads it), kept sorted by flow for the comparison.
 * Private to the program.
 */
#ifndef NV_TABLE_H
#define NV_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"
#include "nsa_config.h"

/* Sessions of every family, an IPv6 one with its second line. */
struct nv_table {
	struct ns_rec *s;
	size_t n, cap;
	const char *name;
	uint64_t bad; /* store values that are not records */
	int oom; /* a session could not be kept: the table is incomplete */
	/* --pair: only sessions of this gateway pair (gateway_id >> 8);
	 * -1 all. */
	int64_t only_pair;
};

/* qsort order of struct ns_rec by flow (the session key): IPv4 flows
 * first, then IPv6 ones by their inside addresses and ports. */
int nv_flow_cmp(const void *pa, const void *pb);

/* Read the table file at path into t, sorted by flow: 0, or a negative
 * errno (a message printed) when it cannot be read whole. */
int nv_table_read_file(struct nv_table *t, const char *path);

/* The sessions of every master (only_slot < 0) or of the master that owns
 * only_slot into t, sorted by flow, read as the standby loads them; in the
 * log layout only segments signed with conf's batch key, if any. 0, or a
 * negative errno (printed). */
int nv_table_read_store(struct nv_table *t, const struct nsa_config *conf,
			int only_slot);

#endif
