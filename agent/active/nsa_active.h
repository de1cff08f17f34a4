/*
 * nsa_active.h - the active role: writer threads that drain the lanes and
 * replicate every record to the store.
 *
 * Each writer owns a share of the lanes and one pipelined connection per
 * master. It routes each record by its key's slot, appends
 * "SET key record PX timeout" (or "DEL key") to that master's open batch,
 * and closes a batch with one notification carrying all its records
 * (SPUBLISH, or PUBLISH) when it is full or its flush deadline passed.
 * Several batches are in flight per connection; replies are read as they
 * come. MOVED/ASK/TRYAGAIN/CLUSTERDOWN and lost connections make the writer
 * refresh the topology and resend every unacknowledged record in its
 * original order, so the store ends with each session's latest record.
 * A write refused for good (OOM, NOPERM) is dropped; since its
 * notification is already out, the writer reads the key back and
 * publishes what the store holds in a batch flagged NS_BATCH_F_STORE.
 *
 * A master acknowledges before its replica has the write. When a master is
 * lost (its connection dies, or it leaves the topology: its replica was
 * promoted), the writer also replays the records acknowledged in the last
 * [active] replay_ms (at most replay_records per writer), merged in order
 * with the unacknowledged ones, so that what the dead master had not yet
 * replicated reaches its successor.
 */
#ifndef NSA_ACTIVE_H
#define NSA_ACTIVE_H

#include "nsa_active_health.h"
#include "nsa_config.h"
#include "nsdp_lane.h"

struct nsa_active;

struct nsa_active *nsa_active_create(const struct nsa_config *conf,
				     struct nsdp_lane **lanes,
				     unsigned int n_lanes);

/* The EAL lcores of this process that poll (the synthetic source's, the
 * gateway's forwarding lcore):
 * [active] writer_cpus = auto keeps the writers off their CPUs. Before
 * nsa_active_start; none by default. */
void nsa_active_polling_lcores(struct nsa_active *a, const unsigned int *lcores,
			       unsigned int n);

/* Start the writers. Each connects on its own thread, retrying with backoff
 * until stopped, so this does not wait for the store to be reachable. */
int nsa_active_start(struct nsa_active *a);

/* Wait until every lane is empty and every record acknowledged (replayed
 * ones included), at most timeout_ms; 0 when drained, -ETIMEDOUT
 * otherwise. */
int nsa_active_drain(struct nsa_active *a, int timeout_ms);

/* Stop the writers (unacknowledged records are counted as dropped). */
void nsa_active_stop(struct nsa_active *a);
void nsa_active_free(struct nsa_active *a);

#endif
