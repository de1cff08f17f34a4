/*
 * nsa_compact_lease.h - the store's compaction lease: one round at a time
 * over the whole log, whichever gateway pair's active runs it.
 */
#ifndef NSA_COMPACT_LEASE_H
#define NSA_COMPACT_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "nsa_cluster.h"
#include "nsa_compact.h"

/* How long a lease lasts unless renewed; a round renews it once a third
 * of this has passed, between passes and before its marks. */
#define NSA_COMPACT_LEASE_MS 30000u

struct nsa_compact_lease {
	redisContext *c; /* to the key's master, named as a writer */
	const struct nsa_store_conf *conf;
	struct nsa_addr addr; /* the key's master */
	char holder[96];
	uint64_t renewed_ns; /* CLOCK_MONOTONIC: taken or last renewed */
};

/* Take the lease for holder (SET NX PX). 0; -EBUSY when another holds it
 * (its value in err); -EIO or -EPROTO with err. */
int nsa_compact_lease_take(struct nsa_compact_lease *l,
			   const struct nsa_store_conf *conf,
			   const struct nsa_topology *topo, const char *holder,
			   char *err, size_t errlen);

/* Renew the lease if a third of it has passed, or always when force: 0;
 * -EBUSY when it is no longer ours (expired, taken by another); -EIO or
 * -EPROTO with err. */
int nsa_compact_lease_keep(struct nsa_compact_lease *l, int force, char *err,
			   size_t errlen);

/* Release the lease if it is still ours (on a new connection when the
 * fence closed the lease's: a fenced round leaves no lease behind for the
 * newer active's rounds to wait out), and the connection. */
void nsa_compact_lease_drop(struct nsa_compact_lease *l);

#endif
