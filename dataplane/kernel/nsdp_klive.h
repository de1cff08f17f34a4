/*
 * nsdp_klive.h - what the kernel session source has sent as live: the set
 * of conntrack entries (by nsdp_kern_key, its namespace left out: the
 * source has one) whose last record was a CREATE or a REFRESH, each with
 * the generation of the dump that last returned it. After a dump, every
 * entry the dump did not return has ended unseen (its destroy event was
 * lost) and gets its DELETE: nsdp_klive_sweep.
 *
 * Open addressing, linear probing, 80 bytes a slot (room for IPv6
 * addresses); it grows by doubling at three quarters full, up to a bound
 * of slots the caller sets (sized by conntrack's nf_conntrack_max), so a
 * tracked session costs 107 to 213 bytes. One thread uses it.
 */
#ifndef NSDP_KLIVE_H
#define NSDP_KLIVE_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "nsdp_kern.h"

struct nsdp_klive;

/* An empty set of at most bound_slots slots (a power of two, >= 4096);
 * NULL when out of memory. */
struct nsdp_klive *nsdp_klive_create(uint32_t bound_slots);
void nsdp_klive_free(struct nsdp_klive *l);

/* The bound for a table of at most max_entries entries: the power of two
 * at or above twice it, so that the set holds every entry plus half as
 * many ended unseen before it is full. */
uint32_t nsdp_klive_bound_for(uint64_t max_entries);

/* Raise the bound to bound_slots, rounded up to a power of two (never
 * lowers it). */
void nsdp_klive_set_bound(struct nsdp_klive *l, uint32_t bound_slots);

/* key sent as live, or returned by the current dump: enter it with the
 * current generation. 1 when it was there, 0 when entered, -ENOSPC when
 * the set is at its bound (key not tracked). */
int nsdp_klive_add(struct nsdp_klive *l, const struct nsdp_kern_key *key);

/* key ended (its DELETE sent): 1 when it was there, 0 when not. */
int nsdp_klive_remove(struct nsdp_klive *l, const struct nsdp_kern_key *key);

/* A dump begins: a new generation, which only what the dump returns
 * (nsdp_klive_add) carries until nsdp_klive_sweep. */
void nsdp_klive_begin(struct nsdp_klive *l);

/* The dump ended complete: remove every entry it did not return, calling
 * ended (key with netns 0) for each; their count. */
uint64_t nsdp_klive_sweep(struct nsdp_klive *l,
			  void (*ended)(const struct nsdp_kern_key *key,
					void *arg),
			  void *arg);

uint64_t nsdp_klive_count(const struct nsdp_klive *l);
/* Bytes of slots allocated now. */
size_t nsdp_klive_bytes(const struct nsdp_klive *l);

#endif
