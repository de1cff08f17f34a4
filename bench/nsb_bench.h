/*
 * nsb_bench.h - what the natsync-bench modes share: the options, one run's
 * figures, the RESULT line and CSV row (the store probes are
 * nsa_storemem.h's).
 *
 * natsync_bench.c parses the options and starts EAL; each mode lives in its
 * own file (nsb_natsync.c, nsb_naive.c, nsb_record.c,
 * nsb_coldload.c, nsb_sweep.c) behind one entry point taking
 * the finished configuration and the options, and returning the exit
 * status (0 done, 1 failure).
 */
#ifndef NSB_H
#define NSB_H

#include <stdint.h>

#include "nsa_config.h"
#include "nsa_storemem.h"

enum nsb_mode {
	NSB_NATSYNC,
	NSB_NAIVE,
	NSB_RECORD,
	NSB_COLDLOAD,
};

/* Time for the store to close the connections of clients just gone, before
 * its memory is read. */
#define NSB_CLIENTS_GONE_MS 200

/* --sweep: which parameters a sweep varies (bit mask). */
#define NSB_SWEEP_BATCH 0x1u
#define NSB_SWEEP_INFLIGHT 0x2u
#define NSB_SWEEP_WORKERS 0x4u
#define NSB_SWEEP_ALL (NSB_SWEEP_BATCH | NSB_SWEEP_INFLIGHT | NSB_SWEEP_WORKERS)

struct nsb_opts {
	enum nsb_mode mode;
	int standby; /* attach an in-process standby (natsync mode) */
	int half_load; /* a flat-out run, then one at half its rate */
	int flush; /* FLUSHALL every master before each run */
	unsigned int sweep; /* NSB_SWEEP_* mask, 0 = no sweep */
	const char *csv; /* append one row per run, or NULL */
	const char *plot; /* PNG the sweep draws, or NULL */
	uint64_t sessions; /* coldload: sessions to load */
	uint64_t runs; /* record: timed runs (the median is reported) */
	uint64_t repeat; /* sweep: measurements per point (median plotted) */
	uint64_t calls; /* record: calls per run, 0 = half the ring */
	/* coldload, log layout: after the fill keep the writers' compactor
	 * running until its checkpoint covers the fill and the segments it
	 * covered expired; the store's memory then, and its peak meanwhile */
	int settle;
};

/* One replication run's figures (natsync, naive and coldload runs). */
struct nsb_result {
	const char *mode; /* "natsync", "naive", "coldload" */
	const char *load; /* "max", "half" or NULL */
	const char *sweep; /* the parameter a sweep varied, or NULL */
	uint64_t events; /* sessions replicated (events produced) */
	uint64_t live; /* live sessions at the end */
	double seconds;
	uint64_t target_rate; /* the source's fixed rate, 0 = flat out */
	double max_rate; /* load "half": the flat-out run's rate */
	uint64_t lag_p50_us, lag_p99_us, lag_p999_us;
	/* The lag's parts: until the batch was sent, and from then on. */
	uint64_t send_p50_us, send_p99_us, send_p999_us;
	uint64_t deliver_p50_us, deliver_p99_us, deliver_p999_us;
	/* the standby's subscriber thread at the end: [standby] priority */
	int subscriber_nice, subscriber_rtprio;
	uint64_t subscriber_lowered;
	/* After the standby synced: its subscriptions lost (the store
	 * closing one that fell too far behind: Redis's
	 * client-output-buffer-limit pubsub) and its resyncs. */
	uint64_t standby_resubscribes, standby_resyncs;
	uint64_t drops;
	const char *standby_match; /* "yes", "no" or "n/a" */
	unsigned int workers, batch, inflight;
	double value_bytes; /* mean size of a stored value */
	/* Negative when not measured. */
	double store_bytes_per_session;
	double table_bytes_per_slot; /* standby table memory / capacity */
	double table_bytes_per_session; /* standby table memory / live */
	/* A mix of families ([source] v6_pct): the IPv6 events and live
	 * sessions among the above, and the store bytes per session of
	 * each family (negative when not measured). */
	uint64_t events_v6, live_v6;
	double store_bytes_v4, store_bytes_v6;
};

struct nsa_active;
struct nsa_source;
struct nsa_standby;
struct nsa_standby_stats;

/* The writers of conf over src's lanes, started; NULL when they cannot
 * start (logged, as who). */
struct nsa_active *nsb_writers_start(const struct nsa_config *conf,
				     struct nsa_source *src, const char *who);

/* Stop and free the writers, if any. */
void nsb_writers_stop(struct nsa_active *active);

/* Poll sb every poll_ms until its cold load is done: 0, with *st its
 * figures then; -ETIMEDOUT (logged, as who) once timeout_s have passed
 * since t0 (nsdp_now_s()). */
int nsb_standby_wait_synced(struct nsa_standby *sb, double t0, double timeout_s,
			    unsigned int poll_ms, struct nsa_standby_stats *st,
			    const char *who);

/* Apply one "section.key=value" to conf; -1 (with a message) on error. */
int nsb_conf_set(struct nsa_config *conf, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A result with the run's configuration filled in and nothing measured. */
void nsb_result_init(struct nsb_result *r, const char *mode,
		     const struct nsa_config *conf);
double nsb_rate(const struct nsb_result *r);

/* Print the RESULT line of a replication run on stdout. */
void nsb_result_print(const struct nsb_result *r);

/* Append r as one row to path, with a header when the file is new. */
void nsb_csv_append(const char *path, const struct nsb_result *r,
		    uint64_t flows);

/* One natsync run with conf as given (rate included); fills r. 0 or 1. */
int nsb_natsync_run(const struct nsa_config *conf, const struct nsb_opts *o,
		    struct nsb_result *r);

/* Print r's RESULT line and append its CSV row; returns rc. */
int nsb_natsync_report(const struct nsa_config *conf, const struct nsb_opts *o,
		       struct nsb_result *r, int rc);

/* A flat-out run, then one at half its rate, each reported (with sweep, if
 * not NULL, in its RESULT line); 0 or 1. */
int nsb_natsync_half_load(const struct nsa_config *conf,
			  const struct nsb_opts *o, const char *sweep,
			  struct nsb_result *max, struct nsb_result *half);

/* The modes, each printing its RESULT line(s). */
int nsb_natsync(const struct nsa_config *conf, const struct nsb_opts *o);
int nsb_naive(const struct nsa_config *conf, const struct nsb_opts *o);
int nsb_record(const struct nsa_config *conf, const struct nsb_opts *o);
int nsb_coldload(const struct nsa_config *conf, const struct nsb_opts *o);
int nsb_sweep(const struct nsa_config *conf, const struct nsb_opts *o);

/* The largest worker count a sweep of mask runs (0: workers not swept). */
unsigned int nsb_sweep_max_workers(unsigned int mask);

#endif
