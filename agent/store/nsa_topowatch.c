/*
 * nsa_topowatch.c - the standby's topology watcher.
 *
 * A master cut off from its cluster keeps answering: its subscription
 * stays up while its replica takes over its slots and the active publishes
 * there. So this thread fetches the topology every period and flags the
 * subscriber when the masters it follows changed. Slots moving between the
 * same masters are flagged apart, with the new map: the subscriptions stay,
 * but the masters that gave or took slots are resynced with it (a resync
 * reads a master's slots by the map; the old map points at slots the
 * master no longer holds). It has its own thread so that a slow seed
 * never stalls the subscriber.
 *
 * Not here: any reaction (the subscriber resubscribes and resyncs). A fetch
 * that fails changes nothing: a store the subscriber cannot reach breaks
 * its subscriptions, which it notices itself.
 */
#include <stdlib.h>
#include <string.h>

#include "nsa_log.h"
#include "nsa_topowatch.h"
#include "nsdp_time.h"

void nsa_topowatch_init(struct nsa_topowatch *tw,
			const struct nsa_store_conf *store,
			unsigned int period_ms, const int *stop,
			void (*wake)(void *arg), void *wake_arg)
{
	memset(tw, 0, sizeof(*tw));
	tw->store = store;
	tw->period_ms = period_ms;
	tw->stop = stop;
	tw->wake = wake;
	tw->wake_arg = wake_arg;
	pthread_mutex_init(&tw->lock, NULL);
}

void nsa_topowatch_fini(struct nsa_topowatch *tw)
{
	pthread_mutex_destroy(&tw->lock);
}

void nsa_topowatch_follow(struct nsa_topowatch *tw,
			  const struct nsa_topology *t)
{
	pthread_mutex_lock(&tw->lock);
	tw->ref = *t;
	tw->gen++;
	tw->valid = 1;
	__atomic_store_n(&tw->changed, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&tw->moved, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&tw->lock);
}

void nsa_topowatch_pause(struct nsa_topowatch *tw)
{
	pthread_mutex_lock(&tw->lock);
	tw->valid = 0;
	pthread_mutex_unlock(&tw->lock);
}

int nsa_topowatch_changed(struct nsa_topowatch *tw)
{
	return __atomic_exchange_n(&tw->changed, 0, __ATOMIC_ACQ_REL);
}

int nsa_topowatch_slots_moved(struct nsa_topowatch *tw, struct nsa_topology *t)
{
	int moved;

	if (!__atomic_load_n(&tw->moved, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&tw->lock);
	moved = __atomic_exchange_n(&tw->moved, 0, __ATOMIC_ACQ_REL);
	if (moved)
		*t = tw->latest;
	pthread_mutex_unlock(&tw->lock);
	return moved;
}

int nsa_topowatch_same_masters(const struct nsa_topology *a,
			       const struct nsa_topology *b)
{
	unsigned int i;

	if (a->cluster != b->cluster || a->n_nodes != b->n_nodes)
		return 0;
	for (i = 0; i < a->n_nodes; i++) {
		const struct nsa_node *x = &a->nodes[i], *y = &b->nodes[i];

		if (x->channel_slot != y->channel_slot ||
		    !nsa_addr_equal(&x->addr, &y->addr))
			return 0;
	}
	return 1;
}

static int same_slots(const struct nsa_topology *a,
		      const struct nsa_topology *b)
{
	return memcmp(a->slot_node, b->slot_node, sizeof(a->slot_node)) == 0 &&
	       memcmp(a->slot_covered, b->slot_covered,
		      sizeof(a->slot_covered)) == 0;
}

static int stopping(const struct nsa_topowatch *tw)
{
	return __atomic_load_n(tw->stop, __ATOMIC_ACQUIRE);
}

static void *topowatch_main(void *arg)
{
	struct nsa_topowatch *tw = arg;
	struct nsa_topology *t = malloc(sizeof(*t));
	char err[256];

	if (!t) {
		NSA_ERR("standby: out of memory: topology checks off");
		return NULL;
	}
	while (!nsdp_sleep_ms_unless(tw->stop, tw->period_ms)) {
		uint64_t gen;
		int valid, changed, moved = 0;

		pthread_mutex_lock(&tw->lock);
		valid = tw->valid;
		gen = tw->gen;
		pthread_mutex_unlock(&tw->lock);
		if (!valid || stopping(tw) ||
		    nsa_topology_fetch(tw->store, t, err, sizeof(err)))
			continue;
		pthread_mutex_lock(&tw->lock);
		changed = tw->valid && tw->gen == gen &&
			  !nsa_topowatch_same_masters(t, &tw->ref);
		if (tw->valid && tw->gen == gen && !changed &&
		    !same_slots(t, &tw->ref)) {
			tw->latest = *t;
			moved = 1;
		}
		pthread_mutex_unlock(&tw->lock);
		if (changed)
			__atomic_store_n(&tw->changed, 1, __ATOMIC_RELEASE);
		if (moved)
			__atomic_store_n(&tw->moved, 1, __ATOMIC_RELEASE);
		if (changed || moved)
			tw->wake(tw->wake_arg);
	}
	free(t);
	return NULL;
}

int nsa_topowatch_start(struct nsa_topowatch *tw)
{
	int rc = pthread_create(&tw->thread, NULL, topowatch_main, tw);

	tw->running = rc == 0;
	return rc;
}

void nsa_topowatch_join(struct nsa_topowatch *tw)
{
	if (tw->running)
		pthread_join(tw->thread, NULL);
	tw->running = 0;
}
