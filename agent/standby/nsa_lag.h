/*
 * nsa_lag.h - timing the records of one batch as the subscriber applies
 * them, for the lag histogram (nsa_standby_lag_record()).
 */
#ifndef NSA_LAG_H
#define NSA_LAG_H

#include <stdint.h>

#include <rte_cycles.h>

#include "ns_batch.h"
#include "nsa_standby.h"

/* Each record's timestamp and the TSC when it was in the table. */
struct nsa_lag_batch {
	uint64_t ts[NS_BATCH_MAX_RECORDS];
	uint64_t tsc[NS_BATCH_MAX_RECORDS];
	uint32_t n;
	double ns_per_tsc; /* 0: count every record at the batch's end */
};

void nsa_lag_batch_init(struct nsa_lag_batch *lb);

/* A record with timestamp ts_ns is in the table now. */
static inline void nsa_lag_batch_mark(struct nsa_lag_batch *lb, uint64_t ts_ns)
{
	if (lb->n < NS_BATCH_MAX_RECORDS) {
		lb->ts[lb->n] = ts_ns;
		lb->tsc[lb->n++] = rte_rdtsc();
	}
}

/* Record the lags of the batch's records in s, and start over. */
void nsa_lag_batch_end(struct nsa_lag_batch *lb, struct nsa_standby_stats *s);

#endif
