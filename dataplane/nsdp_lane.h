/*
 * nsdp_lane.h - the producer side of natsync: what a fast path links.
 *
 * A lane is one lock-free single-producer/single-consumer rte_ring of
 * struct ns_session elements (64-byte lines) plus the lane's counters, living in a memzone
 * named "natsync_lane_<idx>" so that an agent in the same process or in a
 * DPDK secondary process finds it by name. Each fast-path lcore owns one lane
 * and calls nsdp_record() for every session it creates, refreshes or closes.
 * nsdp_record() never blocks: when the ring is full the record is dropped
 * and counted in the lane, and the agent reports the count.
 *
 * A standby orders the records of a session by epoch, then timestamp, and
 * ignores one older than what it holds. So within an epoch a session's
 * records must all come from one producer, stamped with
 * nsdp_stamp_next(): the wall clock, but always above the producer's
 * previous stamp, so that a step back of the clock cannot make a later
 * event look older than an earlier one.
 *
 * The consumer tells the producer how far the store has taken the lane
 * (defer, dataplane/nat/nsdp_nat.h): records are numbered from 1 in ring
 * order (the producer's recorded count after its enqueue is its record's
 * number); the consumer counts what it drained and publishes settled, the
 * number up to which every record was acknowledged by the store or given
 * up by the writer (dropped, fenced, or abandoned after a failure; the
 * agent counts each).
 */
#ifndef NSDP_LANE_H
#define NSDP_LANE_H

#include <errno.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "ns_record.h"
#include "nsdp_stat.h"

#define NSDP_MAX_LANES 64
#define NSDP_LANE_NAME_FMT "natsync_lane_%u"

struct nsdp_lane {
	struct rte_ring *ring;
	uint32_t idx;
	/* Written by the producer lcore only (NSDP_STAT_*); others read them
	 * with NSDP_STAT_READ. */
	uint64_t recorded __rte_cache_aligned;
	uint64_t dropped;
	/* Defer: the producer holds packets until their records settle
	 * (set once), and the number of the newest record a held packet
	 * waits for: its consumer sends it without waiting to fill a batch,
	 * and does not sleep long (nsdp_lane_hold). */
	uint32_t deferring;
	uint64_t waiting;
	/* Written by the lane's one consumer: records drained, and the
	 * number settled (release store, read with nsdp_lane_settled). */
	uint64_t drained __rte_cache_aligned;
	uint64_t settled;
	/* Set once by the producer at its first IPv6 record: from then on a
	 * drain looks for heads (a lane of IPv4 records never does). */
	uint32_t has_v6;
	/* The consumer's: a head whose second line did not fit in the
	 * previous drain, given first by the next one. */
	uint32_t carried;
	struct ns_session carry;
} __rte_cache_aligned;

/* Create lane idx with a ring of ring_size elements (a power of two) on the
 * given NUMA socket (SOCKET_ID_ANY for any). Returns NULL and sets rte_errno
 * on failure. Primary process only. */
struct nsdp_lane *nsdp_lane_create(unsigned int idx, unsigned int ring_size,
				   int socket);

/* Find lane idx created by this or the primary process; NULL if absent. */
struct nsdp_lane *nsdp_lane_lookup(unsigned int idx);

/* Free a lane created by nsdp_lane_create(). */
void nsdp_lane_free(struct nsdp_lane *lane);

/* The timestamp of a producer's next record at wall-clock time now_ns:
 * now_ns, or one past the producer's previous stamp *last when the clock
 * reads that or less (it was stepped back, or two records share a clock
 * reading). Stamps thus rise strictly per producer, and follow the clock
 * again once it has caught up. *last is the producer's own, 0 at start. */
static inline uint64_t nsdp_stamp_next(uint64_t *last, uint64_t now_ns)
{
	uint64_t ts = now_ns > *last ? now_ns : *last + 1;

	*last = ts;
	return ts;
}

/* Record one session event; 0, or -ENOBUFS when the ring was full and the
 * record was dropped (and counted). Call from the lane's producer only. */
static inline int nsdp_record(struct nsdp_lane *lane,
			      const struct ns_session *s)
{
	/* DPDK 22.11 declares the single-element enqueue's source non-const;
	 * it only reads it. */
	if (unlikely(rte_ring_sp_enqueue_elem(lane->ring, (void *)(uintptr_t)s,
					      sizeof(*s)) != 0)) {
		NSDP_STAT_INC(lane->dropped);
		return -ENOBUFS;
	}
	NSDP_STAT_INC(lane->recorded);
	return 0;
}

/* Record one IPv6 session event: s is the head of its two lines (a
 * struct ns_rec's s). 0, or -ENOBUFS when the ring had no room for both
 * lines (nothing recorded, the record counted as dropped). Producer only.
 * natsync-agent's writers store and publish IPv6 records, and its
 * standby's live path, cold load and resync read them back. */
static inline int nsdp_record_v6(struct nsdp_lane *lane,
				 const struct ns_session *s)
{
	if (unlikely(!__atomic_load_n(&lane->has_v6, __ATOMIC_RELAXED)))
		__atomic_store_n(&lane->has_v6, 1, __ATOMIC_RELAXED);
	if (unlikely(rte_ring_sp_enqueue_bulk_elem(lane->ring, s, sizeof(*s), 2,
						   NULL) != 2)) {
		NSDP_STAT_INC(lane->dropped);
		return -ENOBUFS;
	}
	NSDP_STAT_INC(lane->recorded);
	return 0;
}

/* Record up to n IPv4 events in one ring operation; returns how many were
 * recorded, the rest are dropped and counted. */
static inline unsigned int nsdp_record_burst(struct nsdp_lane *lane,
					     const struct ns_session *s,
					     unsigned int n)
{
	unsigned int done = rte_ring_sp_enqueue_burst_elem(lane->ring, s,
							   sizeof(*s), n, NULL);

	NSDP_STAT_ADD(lane->recorded, done);
	NSDP_STAT_ADD(lane->dropped, n - done);
	return done;
}

/* The number of the producer's last record that went into the ring
 * (producer only). */
static inline uint64_t nsdp_lane_last(const struct nsdp_lane *lane)
{
	return lane->recorded;
}

/* Producer: a packet waits for record seq to settle. */
static inline void nsdp_lane_hold(struct nsdp_lane *lane, uint64_t seq)
{
	__atomic_store_n(&lane->waiting, seq, __ATOMIC_RELEASE);
}

/* Every record numbered up to this one is settled (any thread). */
static inline uint64_t nsdp_lane_settled(const struct nsdp_lane *lane)
{
	return __atomic_load_n(&lane->settled, __ATOMIC_ACQUIRE);
}

/* Consumer side, a lane that has carried IPv6 records: fix up the got
 * lines just dequeued after the first from of out, so that they end on a
 * whole session (a lone head at the end is kept for the next drain), and
 * count the records. Returns the lines given. */
static inline unsigned int nsdp_lane_drain_v6(struct nsdp_lane *lane,
					      struct ns_session *out,
					      unsigned int got)
{
	unsigned int i = 0, records = 0;

	while (i < got) {
		unsigned int lines = ns_session_lines(&out[i]);

		if (i + lines > got) {
			/* its second line is in the ring (both went in
			 * together) but not in out */
			lane->carry = out[i];
			lane->carried = 1;
			got = i;
			break;
		}
		i += lines;
		records++;
	}
	NSDP_STAT_ADD(lane->drained, records);
	return got;
}

/* Consumer side: dequeue up to n lines (n >= 2), which hold whole records:
 * an IPv4 record is one line, an IPv6 one two (ns_session_lines). Returns
 * the lines written to out. */
static inline unsigned int
nsdp_lane_drain(struct nsdp_lane *lane, struct ns_session *out, unsigned int n)
{
	unsigned int from = 0, got;

	if (likely(!__atomic_load_n(&lane->has_v6, __ATOMIC_RELAXED))) {
		got = rte_ring_sc_dequeue_burst_elem(lane->ring, out,
						     sizeof(*out), n, NULL);
		NSDP_STAT_ADD(lane->drained, got);
		return got;
	}
	if (lane->carried) {
		out[0] = lane->carry;
		lane->carried = 0;
		from = 1;
	}
	got = from + rte_ring_sc_dequeue_burst_elem(lane->ring, out + from,
						    sizeof(*out), n - from,
						    NULL);
	return nsdp_lane_drain_v6(lane, out, got);
}

/* Consumer side: every record numbered up to upto is settled. */
static inline void nsdp_lane_settle(struct nsdp_lane *lane, uint64_t upto)
{
	__atomic_store_n(&lane->settled, upto, __ATOMIC_RELEASE);
}

#endif
