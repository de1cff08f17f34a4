/*
 * nsdp_lane.c - creation, lookup and release of lanes.
 *
 * A lane is two DPDK objects with names derived from its index: the memzone
 * "natsync_lane_<idx>" holding struct nsdp_lane (counters and the ring
 * pointer), and the ring "natsync_ring_<idx>". Both live in shared DPDK
 * memory, so a secondary process that maps the primary's memory finds the
 * lane by name and uses the same ring pointer.
 *
 * Invariants: a lane exists exactly when its memzone exists; the ring is
 * created with RING_F_EXACT_SZ so that it holds ring_size records, not
 * ring_size - 1; the ring is single-producer, single-consumer.
 *
 * Not here: the per-record calls, which are inline in nsdp_lane.h, and any
 * locking - creation and release are control-path operations of the primary.
 */
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_memzone.h>

#include "nsdp_lane.h"

#define NSDP_RING_NAME_FMT "natsync_ring_%u"

static void nsdp_lane_name(char *buf, size_t cap, unsigned int idx)
{
	snprintf(buf, cap, NSDP_LANE_NAME_FMT, idx);
}

struct nsdp_lane *nsdp_lane_create(unsigned int idx, unsigned int ring_size,
				   int socket)
{
	char name[RTE_MEMZONE_NAMESIZE];
	char ring_name[RTE_RING_NAMESIZE];
	const struct rte_memzone *mz;
	struct nsdp_lane *lane;
	struct rte_ring *ring;

	if (idx >= NSDP_MAX_LANES || ring_size == 0 ||
	    !rte_is_power_of_2(ring_size)) {
		rte_errno = EINVAL;
		return NULL;
	}
	nsdp_lane_name(name, sizeof(name), idx);
	mz = rte_memzone_reserve(name, sizeof(*lane), socket, 0);
	if (mz == NULL)
		return NULL; /* rte_errno set: EEXIST, ENOMEM, ... */
	lane = mz->addr;
	memset(lane, 0, sizeof(*lane));
	lane->idx = idx;

	snprintf(ring_name, sizeof(ring_name), NSDP_RING_NAME_FMT, idx);
	ring = rte_ring_create_elem(
		ring_name, sizeof(struct ns_session), ring_size, socket,
		RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
	if (ring == NULL) {
		int err = rte_errno;

		rte_memzone_free(mz);
		rte_errno = err;
		return NULL;
	}
	lane->ring = ring;
	return lane;
}

struct nsdp_lane *nsdp_lane_lookup(unsigned int idx)
{
	char name[RTE_MEMZONE_NAMESIZE];
	const struct rte_memzone *mz;

	nsdp_lane_name(name, sizeof(name), idx);
	mz = rte_memzone_lookup(name);
	return mz != NULL ? mz->addr : NULL;
}

void nsdp_lane_free(struct nsdp_lane *lane)
{
	char name[RTE_MEMZONE_NAMESIZE];
	const struct rte_memzone *mz;

	if (lane == NULL)
		return;
	nsdp_lane_name(name, sizeof(name), lane->idx);
	mz = rte_memzone_lookup(name);
	rte_ring_free(lane->ring);
	if (mz != NULL)
		rte_memzone_free(mz);
}
