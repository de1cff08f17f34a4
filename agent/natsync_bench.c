/*
 * natsync_bench.c - the natsync-bench program: how fast natsync replicates,
 * and how that compares with the classic way.
 *
 * Mode natsync runs the real pieces in one process: the lanes, the
 * synthetic source on EAL worker lcores, the active writers and (unless
 * --no-standby) a standby with its own table, subscribed and synced before
 * the source starts. The clock runs from the source's start until every
 * record is acknowledged by the store (nsa_active_drain). Then the standby
 * gets a bounded time to catch up, and its table is compared with the
 * source's final table, flow by flow.
 * Mode naive replays the same synthetic stream the way a gateway without
 * natsync would: one blocking connection, and per event one synchronous
 * SET (or DEL) of a JSON value and one synchronous PUBLISH.
 *
 * Both end with exactly one RESULT line on stdout; progress goes to stderr
 * once a second. Exit status: 0 done, 1 runtime failure, 2 bad options.
 *
 * Not done here: no replication logic of its own (only the agent's public
 * APIs are used), no cluster client in naive mode (a plain server is
 * expected), and no statistics beyond one run.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_active.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsdp_table.h"
#include "nsdp_lane.h"
#include "nsdp_synth.h"

#define BENCH_EAL_ARGS "--no-huge --no-shconf -m 1024 --no-pci --no-telemetry"
#define SYNC_TIMEOUT_S 30.0
#define CATCHUP_TIMEOUT_S 10.0
#define DRAIN_TIMEOUT_MS 600000
#define NAIVE_CHANNEL "ns:naive"

enum bench_mode { BENCH_NATSYNC, BENCH_NAIVE };

struct bench_opts {
	enum bench_mode mode;
	int standby;
	const char *csv;
};

struct bench_result {
	uint64_t events;
	double seconds;
	uint64_t lag_p50_us, lag_p99_us;
	uint64_t drops;
	const char *standby_match; /* "yes", "no" or "n/a" */
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-bench [options] [-- EAL-ARGS...]\n"
		"\n"
		"Measures natsync's replication rate and lag, or the classic\n"
		"SET+PUBLISH per event, on the same synthetic session stream.\n"
		"\n"
		"  --store H:P[,H:P..]   store seeds (default 127.0.0.1:7000)\n"
		"  --mode natsync|naive  what to measure (default natsync)\n"
		"  --events N            events to produce (default 1000000)\n"
		"  --flows N             flow population (default 200000)\n"
		"  --rate R              events/s, 0 = flat out (default 0)\n"
		"  --standby             attach an in-process standby "
		"(default)\n"
		"  --no-standby          measure the active side alone\n"
		"  --workers N           [active] workers (also the lanes)\n"
		"  --batch N             [active] batch_size\n"
		"  --inflight N          [active] max_inflight\n"
		"  --csv FILE            append one line of figures per run\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"Ends with one line on stdout:\n"
		"RESULT mode=M sessions=N seconds=S rate=R lag_p50_us=N "
		"lag_p99_us=N drops=N standby_match=yes|no|n/a\n"
		"Exit status: 0 done, 1 failure, 2 bad options.\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int conf_set(struct nsa_config *conf, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int conf_set(struct nsa_config *conf, const char *fmt, ...)
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

struct table_check {
	const struct nsdp_table *table;
	uint64_t flows, mismatches;
};

static void check_flow(const struct ns_session *s, void *arg)
{
	struct table_check *c = arg;
	struct ns_session got;

	c->flows++;
	if (nsdp_table_lookup(c->table, s->proto, &s->orig, &got) != 0 ||
	    !ns_session_equal_state(s, &got))
		c->mismatches++;
}

/* Mismatching flows between the source's final table and the standby's,
 * counting sessions the standby has beyond the source's as mismatches. */
static uint64_t table_mismatches(const struct nsdp_synth *synth,
				 const struct nsdp_table *table)
{
	struct table_check c = {table, 0, 0};
	struct nsdp_table_stats ts;

	nsdp_synth_final_table(synth, check_flow, &c);
	nsdp_table_stats(table, &ts);
	if (ts.live > c.flows)
		c.mismatches += ts.live - c.flows;
	return c.mismatches;
}

static struct nsa_standby *standby_attach(const struct nsa_config *active_conf)
{
	static struct nsa_config conf;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	double t0 = now_s();

	conf = *active_conf;
	conf.role = NSA_ROLE_STANDBY;
	sb = nsa_standby_create(&conf);
	if (!sb || nsa_standby_start(sb) != 0) {
		NSA_ERR("standby: cannot start");
		if (sb)
			nsa_standby_free(sb);
		return NULL;
	}
	for (;;) {
		nsa_standby_stats(sb, &st);
		if (st.synced)
			break;
		if (now_s() - t0 > SYNC_TIMEOUT_S) {
			NSA_ERR("standby: not synced after %.0f s",
				SYNC_TIMEOUT_S);
			nsa_standby_stop(sb);
			nsa_standby_free(sb);
			return NULL;
		}
		sleep_ms(20);
	}
	NSA_INFO("standby: synced in %.3f s (%" PRIu64 " sessions loaded)",
		 now_s() - t0, st.loaded);
	return sb;
}

/* After the drain: give the standby at most CATCHUP_TIMEOUT_S to apply
 * every acknowledged record and to hold the source's final table. */
static const char *standby_verdict(struct nsa_standby *sb,
				   const struct nsdp_synth *synth,
				   uint64_t acked)
{
	struct nsa_standby_stats st;
	double t0 = now_s();
	uint64_t mismatches = 0;

	for (;;) {
		nsa_standby_stats(sb, &st);
		if (st.records + st.loaded >= acked) {
			mismatches =
				table_mismatches(synth, nsa_standby_table(sb));
			if (mismatches == 0)
				return "yes";
		}
		if (now_s() - t0 > CATCHUP_TIMEOUT_S)
			break;
		sleep_ms(50);
	}
	mismatches = table_mismatches(synth, nsa_standby_table(sb));
	NSA_WARN("standby: %" PRIu64 " of %" PRIu64 " records applied, %" PRIu64
		 " flows differ from the source",
		 st.records + st.loaded, acked, mismatches);
	return mismatches == 0 ? "yes" : "no";
}

static int run_natsync(const struct nsa_config *conf, int with_standby,
		       struct bench_result *res)
{
	struct nsa_source src;
	struct nsa_standby *sb = NULL;
	struct nsa_active *active = NULL;
	struct nsa_active_stats st;
	struct nsdp_synth_stats ss = {0};
	double t0, t_end, last = 0;
	uint64_t last_acked = 0;
	int rc = 1, drained;

	if (nsa_source_open(&src, conf) != 0)
		goto out;
	if (with_standby && !(sb = standby_attach(conf)))
		goto out;
	active = nsa_active_create(conf, src.lanes, src.n_lanes);
	if (!active || nsa_active_start(active) != 0) {
		NSA_ERR("active: cannot start the writers");
		goto out;
	}
	t0 = now_s();
	last = t0;
	nsa_source_start(&src);
	for (;;) {
		double t;

		sleep_ms(20);
		t = now_s();
		nsdp_synth_stats(src.synth, &ss);
		if (ss.done)
			break;
		if (t - last >= 1.0) {
			nsa_active_stats(active, &st);
			fprintf(stderr,
				"progress: natsync %.1fs produced %" PRIu64
				" acked %" PRIu64 " (%.0f/s) drops %" PRIu64
				"\n",
				t - t0, ss.produced, st.acked,
				(double)(st.acked - last_acked) / (t - last),
				st.lane_drops + st.dropped + ss.dropped);
			last_acked = st.acked;
			last = t;
		}
	}
	drained = nsa_active_drain(active, DRAIN_TIMEOUT_MS) == 0;
	t_end = now_s();
	if (!drained)
		NSA_ERR("active: not every record was acknowledged in time");
	nsa_source_stop(&src);
	nsdp_synth_stats(src.synth, &ss);
	nsa_active_stats(active, &st);
	res->events = ss.produced;
	res->seconds = t_end - t0;
	res->drops = st.lane_drops + st.dropped + ss.dropped;
	res->standby_match = "n/a";
	if (sb) {
		struct nsa_standby_stats sst;

		res->standby_match = standby_verdict(sb, src.synth, st.acked);
		nsa_standby_stats(sb, &sst);
		res->lag_p50_us = nsa_standby_lag_percentile_us(&sst, 50);
		res->lag_p99_us = nsa_standby_lag_percentile_us(&sst, 99);
	}
	rc = drained ? 0 : 1;
out:
	if (active) {
		nsa_active_stop(active);
		nsa_active_free(active);
	}
	if (sb) {
		nsa_standby_stop(sb);
		nsa_standby_free(sb);
	}
	nsa_source_close(&src);
	return rc;
}

/* One synchronous command; 0 when the server answered without an error. */
static int naive_command(redisContext *c, const char *what, redisReply *r)
{
	int ok = r && r->type != REDIS_REPLY_ERROR;

	if (!ok)
		NSA_ERR("naive: %s: %s", what,
			r ? r->str : (c->err ? c->errstr : "no reply"));
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -EIO;
}

static int naive_replicate(redisContext *c, const struct ns_session *s)
{
	uint8_t key[NS_KEY_LEN];
	char json[512];
	int len = ns_record_to_json(s, json, sizeof(json));

	if (len < 0)
		return len;
	ns_key_build(s->proto, &s->orig, key);
	if (s->event == NS_EV_DELETE) {
		if (naive_command(c, "DEL",
				  redisCommand(c, "DEL %b", key,
					       (size_t)NS_KEY_LEN)) != 0)
			return -EIO;
	} else if (naive_command(c, "SET",
				 redisCommand(c, "SET %b %b PX %u", key,
					      (size_t)NS_KEY_LEN, json,
					      (size_t)len, s->timeout_ms)) !=
		   0) {
		return -EIO;
	}
	return naive_command(c, "PUBLISH",
			     redisCommand(c, "PUBLISH " NAIVE_CHANNEL " %b",
					  json, (size_t)len));
}

static int run_naive(const struct nsa_config *conf, struct bench_result *res)
{
	struct nsa_source src;
	struct nsdp_synth_stats ss = {0};
	struct ns_session burst[64];
	redisContext *c = NULL;
	char err[256];
	uint64_t done = 0, last_done = 0;
	double t0, last;
	int rc = 1, failed = 0;

	c = nsa_store_connect(&conf->store, &conf->store.seeds[0], err,
			      sizeof(err));
	if (!c) {
		NSA_ERR("naive: %s:%u: %s", conf->store.seeds[0].host,
			conf->store.seeds[0].port, err);
		return 1;
	}
	if (nsa_source_open(&src, conf) != 0)
		goto out;
	t0 = now_s();
	last = t0;
	nsa_source_start(&src);
	while (!failed) {
		unsigned int n = nsdp_lane_drain(src.lanes[0], burst, 64);
		double t;

		for (unsigned int i = 0; i < n && !failed; i++) {
			failed = naive_replicate(c, &burst[i]) != 0;
			done++;
		}
		if (n == 0) {
			nsdp_synth_stats(src.synth, &ss);
			/* done is set after the last event was enqueued. */
			if (ss.done && rte_ring_empty(src.lanes[0]->ring))
				break;
		}
		t = now_s();
		if (t - last >= 1.0) {
			fprintf(stderr,
				"progress: naive %.1fs replicated %" PRIu64
				" (%.0f/s)\n",
				t - t0, done,
				(double)(done - last_done) / (t - last));
			last_done = done;
			last = t;
		}
	}
	res->seconds = now_s() - t0;
	nsa_source_stop(&src);
	nsdp_synth_stats(src.synth, &ss);
	res->events = done;
	res->drops = ss.dropped + src.lanes[0]->dropped;
	res->standby_match = "n/a";
	rc = failed ? 1 : 0;
out:
	nsa_source_close(&src);
	redisFree(c);
	return rc;
}

static void csv_append(const char *path, const char *mode,
		       const struct nsa_config *conf,
		       const struct bench_result *r, double rate)
{
	struct stat sb;
	int is_new = stat(path, &sb) != 0 || sb.st_size == 0;
	FILE *f = fopen(path, "a");

	if (!f) {
		NSA_ERR("csv: %s: %s", path, strerror(errno));
		return;
	}
	if (is_new)
		fprintf(f, "time,mode,events,flows,workers,batch,inflight,"
			   "seconds,rate,lag_p50_us,lag_p99_us,drops,"
			   "standby_match\n");
	fprintf(f,
		"%ld,%s,%" PRIu64 ",%" PRIu64 ",%u,%u,%u,%.3f,%.0f,%" PRIu64
		",%" PRIu64 ",%" PRIu64 ",%s\n",
		(long)time(NULL), mode, r->events, conf->synth_conf.flows,
		conf->workers, conf->batch_size, conf->max_inflight, r->seconds,
		rate, r->lag_p50_us, r->lag_p99_us, r->drops, r->standby_match);
	fclose(f);
}

static int parse_count(const char *opt, const char *v, uint64_t min,
		       uint64_t *out)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < min) {
		fprintf(stderr,
			"natsync-bench: --%s: '%s' is not a number >= %" PRIu64
			"\n",
			opt, v, min);
		return -1;
	}
	*out = n;
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		OPT_STORE = 256,
		OPT_MODE,
		OPT_EVENTS,
		OPT_FLOWS,
		OPT_RATE,
		OPT_STANDBY,
		OPT_NO_STANDBY,
		OPT_WORKERS,
		OPT_BATCH,
		OPT_INFLIGHT,
		OPT_CSV,
	};
	static const struct option opts[] = {
		{"store", required_argument, NULL, OPT_STORE},
		{"mode", required_argument, NULL, OPT_MODE},
		{"events", required_argument, NULL, OPT_EVENTS},
		{"flows", required_argument, NULL, OPT_FLOWS},
		{"rate", required_argument, NULL, OPT_RATE},
		{"standby", no_argument, NULL, OPT_STANDBY},
		{"no-standby", no_argument, NULL, OPT_NO_STANDBY},
		{"workers", required_argument, NULL, OPT_WORKERS},
		{"batch", required_argument, NULL, OPT_BATCH},
		{"inflight", required_argument, NULL, OPT_INFLIGHT},
		{"csv", required_argument, NULL, OPT_CSV},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	static struct nsa_config conf;
	struct bench_opts bo = {BENCH_NATSYNC, 1, NULL};
	struct bench_result res = {0};
	const char *store = "127.0.0.1:7000";
	uint64_t events = 1000000, flows = 200000, rate = 0;
	uint64_t workers = 0, batch = 0, inflight = 0;
	char err[1024], lcores[32];
	int opt, rc;
	double secs, ev_rate;

	while ((opt = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_STORE:
			store = optarg;
			break;
		case OPT_MODE:
			if (!strcmp(optarg, "natsync")) {
				bo.mode = BENCH_NATSYNC;
			} else if (!strcmp(optarg, "naive")) {
				bo.mode = BENCH_NAIVE;
			} else {
				fprintf(stderr,
					"natsync-bench: --mode: '%s' is not "
					"natsync or naive\n",
					optarg);
				return 2;
			}
			break;
		case OPT_EVENTS:
			if (parse_count("events", optarg, 1, &events))
				return 2;
			break;
		case OPT_FLOWS:
			if (parse_count("flows", optarg, 1, &flows))
				return 2;
			break;
		case OPT_RATE:
			if (parse_count("rate", optarg, 0, &rate))
				return 2;
			break;
		case OPT_STANDBY:
			bo.standby = 1;
			break;
		case OPT_NO_STANDBY:
			bo.standby = 0;
			break;
		case OPT_WORKERS:
			if (parse_count("workers", optarg, 1, &workers))
				return 2;
			break;
		case OPT_BATCH:
			if (parse_count("batch", optarg, 1, &batch))
				return 2;
			break;
		case OPT_INFLIGHT:
			if (parse_count("inflight", optarg, 1, &inflight))
				return 2;
			break;
		case OPT_CSV:
			bo.csv = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("natsync-bench %s\n", NATSYNC_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}

	nsa_config_defaults(&conf);
	if (conf_set(&conf, "store.seeds=%s", store) ||
	    conf_set(&conf, "agent.eal_args=%s", BENCH_EAL_ARGS) ||
	    conf_set(&conf, "source.type=synth") ||
	    conf_set(&conf, "source.events=%" PRIu64, events) ||
	    conf_set(&conf, "source.flows=%" PRIu64, flows) ||
	    conf_set(&conf, "source.rate=%" PRIu64, rate) ||
	    conf_set(&conf, "standby.table_capacity=%" PRIu64,
		     flows * 2 > 1024 ? flows * 2 : 1024))
		return 2;
	/* Naive mode drains one lane itself; natsync gives each writer a
	 * lane of its own so that the writers never share one. */
	if (bo.mode == BENCH_NATSYNC && workers &&
	    (conf_set(&conf, "active.workers=%" PRIu64, workers) ||
	     conf_set(&conf, "rings.lanes=%" PRIu64, workers)))
		return 2;
	if (batch && conf_set(&conf, "active.batch_size=%" PRIu64, batch))
		return 2;
	if (inflight &&
	    conf_set(&conf, "active.max_inflight=%" PRIu64, inflight))
		return 2;
	if (nsa_config_finish(&conf, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-bench: %s\n", err);
		return 2;
	}
	nsa_log_verbosity = conf.verbosity;

	snprintf(lcores, sizeof(lcores), "0-%u", conf.lanes);
	if (nsa_eal_start("natsync-bench", conf.eal_args, argc - optind,
			  argv + optind, lcores, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-bench: %s\n", err);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);

	if (bo.mode == BENCH_NATSYNC)
		rc = run_natsync(&conf, bo.standby, &res);
	else
		rc = run_naive(&conf, &res);

	secs = res.seconds;
	ev_rate = secs > 0 ? (double)res.events / secs : 0.0;
	if (!res.standby_match)
		res.standby_match =
			bo.standby && bo.mode == BENCH_NATSYNC ? "no" : "n/a";
	printf("RESULT mode=%s sessions=%" PRIu64
	       " seconds=%.3f rate=%.0f lag_p50_us=%" PRIu64
	       " lag_p99_us=%" PRIu64 " drops=%" PRIu64 " standby_match=%s\n",
	       bo.mode == BENCH_NATSYNC ? "natsync" : "naive", res.events, secs,
	       ev_rate, res.lag_p50_us, res.lag_p99_us, res.drops,
	       res.standby_match);
	fflush(stdout);
	if (bo.csv)
		csv_append(bo.csv,
			   bo.mode == BENCH_NATSYNC ? "natsync" : "naive",
			   &conf, &res, ev_rate);
	rte_eal_cleanup();
	return rc;
}
