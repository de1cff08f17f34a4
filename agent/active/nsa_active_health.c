/*
 * nsa_active_health.c - the writers as other threads see them: the
 * counters summed, each writer's health (connected or since when
 * retrying, and its masters) and the store's epoch they read.
 *
 * Invariants:
 * - Read with relaxed atomics, never a lock: a reader never slows a
 *   writer.
 * - A writer's masters are rewritten under a seqlock (health_seq odd while
 *   written, nsa_wlink.c): a reader retries, and after eight tries
 *   reports none.
 *
 * Not here: the counting itself (writer/), the writer's side of its health
 * (nsa_wlink.c), the metrics and readiness built on this
 * (host/nsa_metrics_roles.c).
 */
#include <string.h>

#include "nsa_active_health.h"
#include "nsa_writer.h"
#include "nsdp_time.h"

void nsa_active_stats(const struct nsa_active *a, struct nsa_active_stats *s)
{
	const size_t nf = sizeof(*s) / sizeof(uint64_t);
	unsigned int i;
	size_t f;

	memset(s, 0, sizeof(*s));
	if (a == NULL)
		return;
	for (i = 0; i < a->n_writers; i++) {
		const uint64_t *src = (const uint64_t *)&a->w[i]->st;
		uint64_t *dst = (uint64_t *)s;

		for (f = 0; f < nf; f++)
			dst[f] += __atomic_load_n(&src[f], __ATOMIC_RELAXED);
	}
	for (i = 0; i < a->n_lanes; i++)
		s->lane_drops += __atomic_load_n(&a->lanes[i]->dropped,
						 __ATOMIC_RELAXED);
	s->compactions = __atomic_load_n(&a->compactions, __ATOMIC_RELAXED);
	s->compact_bytes = __atomic_load_n(&a->compact_bytes, __ATOMIC_RELAXED);
	s->compact_peak = __atomic_load_n(&a->compact_peak, __ATOMIC_RELAXED);
	s->compact_marks_refused =
		__atomic_load_n(&a->compact_marks_refused, __ATOMIC_RELAXED);
	s->compact_lease_skipped =
		__atomic_load_n(&a->compact_lease_skipped, __ATOMIC_RELAXED);
	s->inflight = s->records - s->acked - s->dropped;
}

unsigned int nsa_active_writers(const struct nsa_active *a)
{
	return a ? a->n_writers : 0;
}

void nsa_active_writer_health(const struct nsa_active *a, unsigned int i,
			      struct nsa_writer_health *h)
{
	const struct nsa_writer *w = a->w[i];
	uint64_t since, now = nsdp_mono_ns();
	unsigned int tries, m, k;

	memset(h, 0, sizeof(*h));
	since = __atomic_load_n(&w->retry_since_ns, __ATOMIC_RELAXED);
	h->connected = since == 0;
	h->retry_ms = since && now > since ? (now - since) / 1000000 : 0;
	h->acked = __atomic_load_n(&w->st.acked, __ATOMIC_RELAXED);
	for (tries = 0; tries < 8; tries++) {
		uint32_t seq =
			__atomic_load_n(&w->health_seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		h->n_masters =
			__atomic_load_n(&w->n_masters_pub, __ATOMIC_RELAXED);
		for (m = 0; m < h->n_masters; m++)
			for (k = 0; k < NSA_WRITER_MASTER_LEN / 8; k++) {
				uint64_t word =
					__atomic_load_n(&w->masters_pub[m][k],
							__ATOMIC_RELAXED);

				memcpy(h->masters[m] + 8 * k, &word, 8);
			}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&w->health_seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	/* Rewritten all along: the next scrape has them. */
	if (tries == 8)
		h->n_masters = 0;
	for (m = 0; m < h->n_masters; m++)
		h->masters[m][NSA_WRITER_MASTER_LEN - 1] = 0;
}

uint32_t nsa_active_fence(const struct nsa_active *a)
{
	uint32_t max = 0;

	for (unsigned int i = 0; a && i < a->n_writers; i++) {
		uint32_t f = __atomic_load_n(&a->w[i]->fence, __ATOMIC_RELAXED);

		if (f > max)
			max = f;
	}
	return max;
}
