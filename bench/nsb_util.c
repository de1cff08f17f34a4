/*
 * nsb_util.c - natsync-bench's shared reporting: configuration
 * overrides, the RESULT line of a replication run and its CSV row.
 *
 * The RESULT line starts with the fields the issue tracker and scripts
 * rely on, in this order: mode, sessions, seconds, rate, lag_p50_us,
 * lag_p99_us, drops, standby_match; every further field comes after them,
 * so a reader that splits on blanks and looks fields up by name keeps
 * working. A figure that was not measured prints as "n/a" (RESULT) or as
 * an empty field (CSV).
 *
 * A CSV file is only ever appended to under the header this version
 * writes: a file that starts with another header is left alone (an error
 * is logged), so rows of different layouts never mix.
 *
 * Not here: measuring anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "nsa_active.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsb_bench.h"
#include "nsdp_time.h"

#define CSV_HEADER                                                       \
	"time,mode,load,sweep,events,flows,live,workers,batch,inflight," \
	"target_rate,seconds,rate,lag_p50_us,lag_p99_us,lag_p999_us,"    \
	"drops,standby_match,value_bytes,store_bytes_per_session,"       \
	"table_bytes_per_slot,table_bytes_per_session"

int nsb_conf_set(struct nsa_config *conf, const char *fmt, ...)
{
	char assignment[1200], err[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(assignment, sizeof(assignment), fmt, ap);
	va_end(ap);
	if (nsa_config_set(conf, assignment, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-bench: %s\n", err);
		return -1;
	}
	return 0;
}

struct nsa_active *nsb_writers_start(const struct nsa_config *conf,
				     struct nsa_source *src, const char *who)
{
	struct nsa_active *active = nsa_source_replicate(src, conf);

	if (!active)
		NSA_ERR("%s: the writers did not start", who);
	return active;
}

void nsb_writers_stop(struct nsa_active *active)
{
	if (active) {
		nsa_active_stop(active);
		nsa_active_free(active);
	}
}

int nsb_standby_wait_synced(struct nsa_standby *sb, double t0, double timeout_s,
			    unsigned int poll_ms, struct nsa_standby_stats *st,
			    const char *who)
{
	for (;;) {
		nsa_standby_stats(sb, st);
		if (st->synced)
			return 0;
		if (nsdp_now_s() - t0 > timeout_s) {
			NSA_ERR("%s: not synced after %.0f s", who, timeout_s);
			return -ETIMEDOUT;
		}
		nsdp_sleep_ms(poll_ms);
	}
}

void nsb_result_init(struct nsb_result *r, const char *mode,
		     const struct nsa_config *conf)
{
	memset(r, 0, sizeof(*r));
	r->mode = mode;
	r->standby_match = "n/a";
	r->target_rate = conf->synth_conf.rate;
	r->workers = conf->workers;
	r->batch = conf->batch_size;
	r->inflight = conf->max_inflight;
	r->store_bytes_per_session = -1;
	r->table_bytes_per_slot = -1;
	r->table_bytes_per_session = -1;
	r->store_bytes_v4 = -1;
	r->store_bytes_v6 = -1;
}

double nsb_rate(const struct nsb_result *r)
{
	return r->seconds > 0 ? (double)r->events / r->seconds : 0.0;
}

/* A figure, or what stands for "not measured" (na). */
static const char *figure(char *buf, size_t cap, double v, const char *na)
{
	if (v < 0)
		return na;
	snprintf(buf, cap, "%.1f", v);
	return buf;
}

void nsb_result_print(const struct nsb_result *r)
{
	char a[32], b[32], c[32];

	printf("RESULT mode=%s sessions=%" PRIu64
	       " seconds=%.3f rate=%.0f lag_p50_us=%" PRIu64
	       " lag_p99_us=%" PRIu64 " drops=%" PRIu64
	       " standby_match=%s lag_p999_us=%" PRIu64 " target_rate=%" PRIu64,
	       r->mode, r->events, r->seconds, nsb_rate(r), r->lag_p50_us,
	       r->lag_p99_us, r->drops, r->standby_match, r->lag_p999_us,
	       r->target_rate);
	if (r->load)
		printf(" load=%s", r->load);
	if (r->max_rate > 0)
		printf(" max_rate=%.0f", r->max_rate);
	if (r->sweep)
		printf(" sweep=%s", r->sweep);
	if (strcmp(r->mode, "natsync") == 0)
		printf(" workers=%u batch=%u inflight=%u", r->workers, r->batch,
		       r->inflight);
	if (r->send_p50_us || r->deliver_p50_us)
		printf(" send_p50_us=%" PRIu64 " send_p99_us=%" PRIu64
		       " send_p999_us=%" PRIu64 " deliver_p50_us=%" PRIu64
		       " deliver_p99_us=%" PRIu64 " deliver_p999_us=%" PRIu64,
		       r->send_p50_us, r->send_p99_us, r->send_p999_us,
		       r->deliver_p50_us, r->deliver_p99_us,
		       r->deliver_p999_us);
	if (r->send_p50_us || r->deliver_p50_us)
		printf(" subscriber_nice=%d subscriber_rtprio=%d"
		       " subscriber_lowered=%" PRIu64
		       " standby_resubscribes=%" PRIu64
		       " standby_resyncs=%" PRIu64,
		       r->subscriber_nice, r->subscriber_rtprio,
		       r->subscriber_lowered, r->standby_resubscribes,
		       r->standby_resyncs);
	printf(" live=%" PRIu64 " value_bytes=%.0f store_bytes_per_session=%s"
	       " table_bytes_per_slot=%s table_bytes_per_session=%s",
	       r->live, r->value_bytes,
	       figure(a, sizeof(a), r->store_bytes_per_session, "n/a"),
	       figure(b, sizeof(b), r->table_bytes_per_slot, "n/a"),
	       figure(c, sizeof(c), r->table_bytes_per_session, "n/a"));
	if (r->events_v6 > 0 && r->seconds > 0)
		printf(" v6_events=%" PRIu64 " rate_v4=%.0f rate_v6=%.0f"
		       " live_v6=%" PRIu64 " store_bytes_per_session_v4=%s"
		       " store_bytes_per_session_v6=%s",
		       r->events_v6,
		       (double)(r->events - r->events_v6) / r->seconds,
		       (double)r->events_v6 / r->seconds, r->live_v6,
		       figure(a, sizeof(a), r->store_bytes_v4, "n/a"),
		       figure(b, sizeof(b), r->store_bytes_v6, "n/a"));
	printf("\n");
	fflush(stdout);
}

/* 1 when path is missing or empty, 0 when it starts with our header, -1
 * when it starts with anything else. */
static int csv_state(const char *path)
{
	char line[512];
	struct stat sb;
	FILE *f;
	int ours;

	if (stat(path, &sb) != 0 || sb.st_size == 0)
		return 1;
	f = fopen(path, "r");
	if (!f)
		return -1;
	ours = fgets(line, sizeof(line), f) &&
	       strncmp(line, CSV_HEADER "\n", sizeof(CSV_HEADER)) == 0;
	fclose(f);
	return ours ? 0 : -1;
}

void nsb_csv_append(const char *path, const struct nsb_result *r,
		    uint64_t flows)
{
	char a[32], b[32], c[32], writers[48];
	int state = csv_state(path);
	FILE *f;

	if (state < 0) {
		NSA_ERR("csv: %s starts with another header than this version "
			"writes; not appending (use a new file)",
			path);
		return;
	}
	f = fopen(path, "a");
	if (!f) {
		NSA_ERR("csv: %s: %s", path, strerror(errno));
		return;
	}
	if (state == 1)
		fprintf(f, CSV_HEADER "\n");
	/* The naive loop has no writers: their settings stay empty. */
	if (strcmp(r->mode, "naive") == 0)
		snprintf(writers, sizeof(writers), ",,");
	else
		snprintf(writers, sizeof(writers), "%u,%u,%u", r->workers,
			 r->batch, r->inflight);
	fprintf(f,
		"%ld,%s,%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s,%" PRIu64
		",%.3f,%.0f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		",%s,%.0f,%s,%s,%s\n",
		(long)time(NULL), r->mode, r->load ? r->load : "",
		r->sweep ? r->sweep : "", r->events, flows, r->live, writers,
		r->target_rate, r->seconds, nsb_rate(r), r->lag_p50_us,
		r->lag_p99_us, r->lag_p999_us, r->drops, r->standby_match,
		r->value_bytes,
		figure(a, sizeof(a), r->store_bytes_per_session, ""),
		figure(b, sizeof(b), r->table_bytes_per_slot, ""),
		figure(c, sizeof(c), r->table_bytes_per_session, ""));
	fclose(f);
}
