/*
 * nsa_standby.h - the standby role: rebuilds the active's session table.
 *
 * One thread subscribes to every master's notification channel, then loads
 * the whole table from the store (per master, pipelined: GETKEYSINSLOT or
 * SCAN for the keys, MGET for the sessions) while
 * live batches keep being applied, and from then on applies every batch it
 * receives. A sequence gap, a lost subscription or a topology change makes
 * it resync the masters concerned the same way. What it drops is counted
 * in its stats, by reason.
 */
#ifndef NSA_STANDBY_H
#define NSA_STANDBY_H

#include <stdint.h>

#include "nsa_config.h"
#include "nsa_standby_stats.h"
#include "nsdp_ctcommit.h"
#include "nsdp_table.h"

struct nsa_standby;

/* A standby with a table of its own ([standby] table_capacity). */
struct nsa_standby *nsa_standby_create(const struct nsa_config *conf);
/* A standby that fills table, which the caller owns and frees after
 * nsa_standby_free (natsync-gateway lends its fast path's table). Between
 * nsa_standby_start and nsa_standby_stop the subscriber is the table's only
 * writer: it holds it (NSDP_TABLE_SUBSCRIBER). */
struct nsa_standby *nsa_standby_create_on(const struct nsa_config *conf,
					  struct nsdp_table *table);

/* Start the subscriber thread (connects with backoff until stopped). 0,
 * -EALREADY, -EBUSY when another writer holds the table, or -errno. */
int nsa_standby_start(struct nsa_standby *sb);
void nsa_standby_stop(struct nsa_standby *sb);

/* Wait until every batch published on the subscribed channels before this
 * call has been applied (a PING per subscription, its answer awaited), at
 * most timeout_ms: what a promotion needs after the fence, so that the
 * table holds everything the old active published. 0, -ETIMEDOUT, or
 * -ENOTCONN when the subscriber is not running. */
int nsa_standby_barrier(struct nsa_standby *sb, int timeout_ms);
/* The barrier in two steps, so that the caller can do something else
 * while the PINGs are answered: ask (the ticket, 0 when the subscriber is
 * not running), then wait for that ticket as nsa_standby_barrier waits. */
uint64_t nsa_standby_barrier_ask(struct nsa_standby *sb);
int nsa_standby_barrier_wait(struct nsa_standby *sb, uint64_t ticket,
			     int timeout_ms);
/* Resync every master (each after a resync under way there) and wait
 * until each of those resyncs ended, at most timeout_ms: the table then
 * holds what the store held at the call, published or not. What a
 * promotion needs after the fence, when the old active may have written
 * without publishing. 0, -ETIMEDOUT, or -ENOTCONN when the subscriber is
 * not running. */
int nsa_standby_resync_all(struct nsa_standby *sb, int timeout_ms);
/* The highest epoch of its pair the standby knows: its table's sessions',
 * and what its subscriber saw (epoch_seen: batches, the store's counter
 * when it synced; a provisional epoch made known before it started is in
 * no record it loaded). What a promotion's epoch must be above. Walks
 * the table as one of its readers. */
uint32_t nsa_standby_epoch_known(struct nsa_standby *sb);
void nsa_standby_free(struct nsa_standby *sb);

struct nsdp_table *nsa_standby_table(struct nsa_standby *sb);
void nsa_standby_stats(const struct nsa_standby *sb,
		       struct nsa_standby_stats *s);

/* The kernel conntrack commit's counters ([standby] commit = conntrack):
 * 0, or -ENOENT when the standby does not commit. */
int nsa_standby_commit_stats(const struct nsa_standby *sb,
			     struct nsdp_ctcommit_stats *s);

/* Ask the subscriber thread to dump the table to path between two batches,
 * and wait for it (at most timeout_ms). Returns the count or negative errno. */
int64_t nsa_standby_dump(struct nsa_standby *sb, const char *path,
			 int timeout_ms);

#endif
