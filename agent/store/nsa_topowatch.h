/*
 * nsa_topowatch.h - the standby's topology watcher: a thread that asks the
 * store for its topology every [standby] topology_check_ms and flags the
 * subscriber when the masters it follows are no longer the masters, or
 * when slots moved between them.
 */
#ifndef NSA_TOPOWATCH_H
#define NSA_TOPOWATCH_H

#include <pthread.h>
#include <stdint.h>

#include "nsa_cluster.h"

struct nsa_topowatch {
	const struct nsa_store_conf *store;
	unsigned int period_ms;
	const int *stop; /* the owner's stop flag */
	void (*wake)(void *arg); /* tell the owner to look at changed */
	void *wake_arg;
	pthread_t thread;
	int running;

	/* ref is what the subscriptions follow, gen counts subscriptions
	 * (both under lock); changed is read with __atomic. */
	pthread_mutex_t lock;
	struct nsa_topology ref;
	struct nsa_topology latest; /* the map slots moved to */
	uint64_t gen;
	int valid;
	int changed;
	int moved;
};

void nsa_topowatch_init(struct nsa_topowatch *tw,
			const struct nsa_store_conf *store,
			unsigned int period_ms, const int *stop,
			void (*wake)(void *arg), void *wake_arg);
/* Start the thread: 0 or a positive errno. */
int nsa_topowatch_start(struct nsa_topowatch *tw);
/* Join the thread (once *stop is set). */
void nsa_topowatch_join(struct nsa_topowatch *tw);
void nsa_topowatch_fini(struct nsa_topowatch *tw);

/* The subscriptions now follow t (and no change is pending). */
void nsa_topowatch_follow(struct nsa_topowatch *tw,
			  const struct nsa_topology *t);
/* No subscription to watch over until the next follow. */
void nsa_topowatch_pause(struct nsa_topowatch *tw);
/* Whether the masters changed since the last follow (and clear it). */
int nsa_topowatch_changed(struct nsa_topowatch *tw);
/* Whether slots moved between the same masters since the last follow:
 * then 1, with the new topology in t (and clears it). */
int nsa_topowatch_slots_moved(struct nsa_topowatch *tw, struct nsa_topology *t);

/* Whether a and b have the same masters with the same channels: what the
 * subscriptions depend on. */
int nsa_topowatch_same_masters(const struct nsa_topology *a,
			       const struct nsa_topology *b);

#endif
