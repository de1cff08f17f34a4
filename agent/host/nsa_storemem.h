/*
 * nsa_storemem.h - the store's memory as the benchmarks and the demo
 * measure it: INFO memory and DBSIZE summed over the masters, and the
 * growth between two such probes per session, in all and for each
 * address family of a mix.
 */
#ifndef NSA_STOREMEM_H
#define NSA_STOREMEM_H

#include <stdint.h>

#include "ns_record.h"
#include "nsa_store_conf.h"

/* The store as INFO memory and DBSIZE see it, summed over the masters. */
struct nsa_storemem {
	uint64_t used_memory;
	uint64_t keys;
	unsigned int masters;
};

/* The live sessions a store's growth is shared among. */
struct nsa_storemem_live {
	uint64_t live, live_v6;
	uint64_t v6_wire; /* the IPv6 sessions' record bytes */
};

/* Store bytes per live session, in all and for each family; negative
 * when not measured. */
struct nsa_storemem_bytes {
	double all, v4, v6;
};

/* Sum used_memory (INFO memory) and DBSIZE over every master; 0, or a
 * negative errno (logged) when a master cannot be asked. */
int nsa_storemem_probe(const struct nsa_store_conf *store,
		       struct nsa_storemem *m);

/* FLUSHALL on every master; 0 or a negative errno (logged). */
int nsa_storemem_flush(const struct nsa_store_conf *store);

/* Store bytes per key added between two probes, or -1 when the store
 * was not empty before or holds no key after. */
double nsa_storemem_per_key(const struct nsa_storemem *before,
			    const struct nsa_storemem *after);

/* Count s among the live sessions of l. */
static inline void nsa_storemem_count(struct nsa_storemem_live *l,
				      const struct ns_session *s)
{
	l->live++;
	if (ns_family_is_v6(s->family)) {
		l->live_v6++;
		l->v6_wire += ns_record_wire_len(s->family);
	}
}

/* The store's growth from before (empty) to after (no client of ours
 * connected) per live session, and, when both families are live, each
 * family's share (nsa_storemem.c says how it is split). Asks the store
 * again in the keys layout (MEMORY USAGE of every key). */
void nsa_storemem_per_session(const struct nsa_store_conf *store,
			      const struct nsa_storemem *before,
			      const struct nsa_storemem *after,
			      const struct nsa_storemem_live *l,
			      struct nsa_storemem_bytes *out);

#endif
