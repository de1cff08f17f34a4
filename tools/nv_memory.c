/*
 * nv_memory.c - natsync-verify --used-memory and --memory-base
 * (nv_memory.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "nsa_storemem.h"
#include "nv_memory.h"

/* A figure, or n/a when it was not measured (negative). */
static const char *figure(char *buf, size_t cap, double v)
{
	if (v < 0)
		return "n/a";
	snprintf(buf, cap, "%.1f", v);
	return buf;
}

/* --memory-base: the store's growth since base per session of store (the
 * table read from it), in all and for each family. 0, or -EIO (logged). */
int nv_memory_report(const struct nsa_config *conf,
		     const struct nv_table *store, uint64_t base)
{
	struct nsa_storemem before = {.used_memory = base}, after;
	struct nsa_storemem_live live = {0};
	struct nsa_storemem_bytes b;
	char all[32], v4[32], v6[32];

	if (nsa_storemem_probe(&conf->store, &after) != 0)
		return -EIO;
	for (size_t i = 0; i < store->n; i++)
		nsa_storemem_count(&live, &store->s[i].s);
	nsa_storemem_per_session(&conf->store, &before, &after, &live, &b);
	printf("memory: live=%" PRIu64 " live_v6=%" PRIu64
	       " used_memory=%" PRIu64 " keys=%" PRIu64
	       " store_bytes_per_session=%s store_bytes_per_session_v4=%s"
	       " store_bytes_per_session_v6=%s\n",
	       live.live, live.live_v6, after.used_memory, after.keys,
	       figure(all, sizeof(all), b.all), figure(v4, sizeof(v4), b.v4),
	       figure(v6, sizeof(v6), b.v6));
	return 0;
}

/* --used-memory: what the store uses now, summed over its masters. */
int nv_used_memory(const struct nsa_config *conf)
{
	struct nsa_storemem m;

	if (nsa_storemem_probe(&conf->store, &m) != 0)
		return 2;
	printf("used_memory=%" PRIu64 " keys=%" PRIu64 " masters=%u\n",
	       m.used_memory, m.keys, m.masters);
	return 0;
}
