/*
 * nsa_live.h - the standby's live batches (nsa_live.c), as its loop
 * (nsa_standby.c) hands them over. Private to the standby.
 */
#ifndef NSA_LIVE_H
#define NSA_LIVE_H

#include "nsa_standby_state.h"

/* Apply every batch node's subscription has read, then write what the
 * table took to conntrack; a subscription in trouble sets sb->reset. */
void nsa_sb_live_drain(struct nsa_standby *sb, unsigned int node);

#endif
