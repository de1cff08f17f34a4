/*
 * nsa_resync.h - the subscriber's resyncs (nsa_resync.c), as its loop
 * (nsa_standby.c) starts, steps and ends them, and the slot map it adopts
 * when slots move between the same masters. Private to the standby; all
 * on the subscriber thread.
 */
#ifndef NSA_RESYNC_H
#define NSA_RESYNC_H

#include "nsa_cluster.h"
#include "nsa_standby_state.h"

/* Start (or restart) the resync of one master; while the load of every
 * master runs (load_all), that load starts over. */
void nsa_sb_resync_start(struct nsa_standby *sb, unsigned int node);

/* The cold load: every master's sessions read, in the log layout on a
 * cluster by one load of every master (each segment read once, where a
 * resync of each master would read every segment once per master). */
void nsa_sb_resync_start_all(struct nsa_standby *sb);

/* Read node's master again: now, or after the resync under way, which
 * began before what asks for this one. */
void nsa_sb_resync_after(struct nsa_standby *sb, unsigned int node);

/* Whether a load that reads node's sessions runs now. */
int nsa_sb_resync_running(const struct nsa_standby *sb, unsigned int node);

/* What a loader call returned: finish, fail, or fall back to SCAN. */
void nsa_sb_resync_step(struct nsa_standby *sb, unsigned int node, int rc);

/* Give the resync up, and try again after half the longest backoff. */
void nsa_sb_resync_fail(struct nsa_standby *sb, unsigned int node,
			const char *why);

/* Close nd's loader and abort the table's resync for it, if one runs. */
void nsa_sb_resync_close(struct nsa_standby *sb, struct sb_node *nd);

/* Follow slots that moved between the same masters: the map changes in
 * place and the masters that gave or took slots are resynced with it;
 * other masters' resyncs (their slots unchanged) go on. Other masters
 * reset everything. */
void nsa_sb_topo_adopt(struct nsa_standby *sb, const struct nsa_topology *t);

#endif
