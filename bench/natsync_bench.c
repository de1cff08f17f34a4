/*
 * natsync_bench.c - the natsync-bench program: how fast natsync replicates,
 * how that compares with the classic way, what a record call, a session in
 * the store and a cold standby load cost.
 *
 * This file parses the options, builds the configuration the agent would
 * use, starts EAL with enough lcores for the mode, and hands over to one
 * mode (nsb_bench.h):
 *   natsync   one replication run, or --half-load, or a --sweep
 *             (nsb_natsync.c, nsb_sweep.c)
 *   naive     one synchronous SET + PUBLISH per event (nsb_naive.c)
 *   record    the fast-path record call alone (nsb_record.c)
 *   coldload  fill the store, time a fresh standby (nsb_coldload.c)
 *
 * Every run ends with exactly one RESULT line on stdout; progress goes to
 * stderr. Exit status: 0 done, 1 runtime failure, 2 bad options.
 *
 * Not done here: any measuring.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>

#include "nsb_bench.h"
#include "nsb_num.h"
#include "nsa_cli.h"
#include "nsa_config.h"
#include "nsa_host.h"
#include "nsa_log.h"

#define BENCH_EAL_ARGS "--no-huge --no-shconf --no-pci --no-telemetry"
#define BENCH_EAL_MEM_MB 1024

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-bench [options] [-- EAL-ARGS...]\n"
		"\n"
		"Measures natsync's replication on a synthetic session stream\n"
		"against a store (one server or a cluster), and compares it\n"
		"with the classic SET+PUBLISH per event.\n"
		"\n"
		"  --store H:P[,H:P..]   store seeds (default 127.0.0.1:7000)\n"
		"  --layout keys|log     [store] layout (default log)\n"
		"  --mode M              natsync (default): replicate through "
		"the\n"
		"                        writers to an in-process standby;\n"
		"                        naive: one synchronous SET (JSON "
		"value)\n"
		"                        and one PUBLISH per event, one "
		"connection;\n"
		"                        record: ns per nsdp_record() call "
		"into "
		"a\n"
		"                        lane drained by another thread (no "
		"store);\n"
		"                        coldload: write --sessions sessions\n"
		"                        through the writers, then time a "
		"fresh\n"
		"                        standby until it is synced\n"
		"  --events N            events to produce (default 1000000)\n"
		"  --flows N             flow population (default 200000)\n"
		"  --rate R              events/s, 0 = flat out (default 0)\n"
		"  --standby             attach an in-process standby "
		"(default)\n"
		"  --no-standby          measure the active side alone (no "
		"lag,\n"
		"                        no table figures)\n"
		"  --workers N           [active] workers, also the lanes and\n"
		"                        source lcores\n"
		"  --batch N             [active] batch_size\n"
		"  --inflight N          [active] max_inflight\n"
		"  --flush               FLUSHALL every master before each "
		"run\n"
		"                        (store_bytes_per_session needs an\n"
		"                        empty store)\n"
		"  --half-load           natsync: a flat-out run of --events,\n"
		"                        then one of --events at half its "
		"rate\n"
		"  --sweep P             natsync: measure each value of\n"
		"                        P: batch (16..1024), inflight\n"
		"                        (1..32), workers (1..4), or all;\n"
		"                        the rest as configured. Flat out\n"
		"                        with a standby a measurement is a\n"
		"                        --half-load pair (throughput flat\n"
		"                        out, lag p99 at half of it); else\n"
		"                        it is one run\n"
		"  --repeat N            sweep: measurements per point\n"
		"                        (default 1); then one line POINT\n"
		"                        sweep=P value=V measurements=N\n"
		"                        rate=R lag_p99_us=N gives their\n"
		"                        medians, as plotted\n"
		"  --plot FILE.png       draw the sweep's throughput and\n"
		"                        lag p99 with gnuplot (implies\n"
		"                        --sweep all unless given; rows go\n"
		"                        to FILE.csv unless --csv)\n"
		"  --set SECTION.KEY=VALUE  a configuration key (repeatable);\n"
		"                        the options above win over it\n"
		"  --sessions N          coldload: sessions (default 1000000)\n"
		"  --settle              coldload, --layout log: before the\n"
		"                        load, let the compactor checkpoint\n"
		"                        the fill and the covered segments\n"
		"                        expire; adds settled_store_bytes_\n"
		"                        per_session=X peak_store_bytes_per_\n"
		"                        session=X settle_seconds=S\n"
		"  --runs N              record: timed runs, the median is\n"
		"                        reported (default 51)\n"
		"  --calls N             record: calls per run (default half "
		"the\n"
		"                        ring, 32768: the ring is never full)\n"
		"  --csv FILE            append one row per run (natsync, "
		"naive,\n"
		"                        coldload)\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"Each run ends with one line on stdout (--half-load makes two\n"
		"runs; a sweep one or two per measurement):\n"
		"RESULT mode=natsync|naive sessions=N seconds=S rate=R "
		"lag_p50_us=N\n"
		"  lag_p99_us=N drops=N standby_match=yes|no|n/a "
		"lag_p999_us=N\n"
		"  target_rate=R [load=max|half] [max_rate=R] [sweep=P]\n"
		"  [workers=N batch=N inflight=N]\n"
		"  [send_p50_us=N .. deliver_p999_us=N subscriber_nice=N\n"
		"  subscriber_rtprio=N subscriber_lowered=N\n"
		"  standby_resubscribes=N standby_resyncs=N] live=N "
		"value_bytes=N\n"
		"  store_bytes_per_session=X table_bytes_per_slot=X\n"
		"  table_bytes_per_session=X\n"
		"  [v6_events=N rate_v4=R rate_v6=R live_v6=N\n"
		"  store_bytes_per_session_v4=X store_bytes_per_session_v6=X]\n"
		"  (the bracket with [source] v6_pct > 0: each family's\n"
		"  events/s, and the store's growth split between the\n"
		"  families, keys layout by their keys' MEMORY USAGE, log\n"
		"  layout by their record lengths)\n"
		"RESULT mode=record ns_per_call=X ns_per_call_burst32=X\n"
		"  ns_per_record_burst32=X ns_per_call_min=X "
		"ns_per_call_max=X\n"
		"  backlog_median=N ns_per_call_spin=X\n"
		"  ns_per_record_burst32_spin=X backlog_median_spin=N runs=N\n"
		"  calls=N ring_size=N drops=N tsc_hz=N\n"
		"  (drained by a thread that encodes what it takes, as a\n"
		"  writer does; _spin: by one that takes each record at once;\n"
		"  backlog: records left in the ring as a run ends, near 0\n"
		"  when the drainer ran alongside)\n"
		"RESULT mode=coldload sessions=N seconds=S rate=R loaded=N\n"
		"  create_seconds=S fill_seconds=S fill_rate=R workers=N "
		"batch=N\n"
		"  inflight=N table_capacity=N load_values=N load_bytes=N\n"
		"  store_bytes_per_session=X\n"
		"  table_bytes_per_slot=X table_bytes_per_session=X\n"
		"Lags are the standby's: its clock when it applied a record\n"
		"minus the record's timestamp (0 without a standby).\n"
		"standby_resubscribes: subscriptions the standby lost after\n"
		"it synced (the store closes one whose backlog passes its\n"
		"client-output-buffer-limit pubsub), each followed by a\n"
		"resync of the master (standby_resyncs): a run with either\n"
		"above 0 did not apply the whole stream as it came. The\n"
		"standby's table has 2 x --flows slots (coldload: sessions\n"
		"+ 25 %%). store_bytes_per_session: the growth of INFO memory\n"
		"used_memory over all masters per key added, from an empty\n"
		"store (else n/a). table_bytes_per_slot: the standby table's\n"
		"memory / its slots; table_bytes_per_session: / the sessions\n"
		"it holds. X is n/a when not measured.\n"
		"Exit status: 0 done, 1 failure, 2 bad options.\n");
}

static int parse_mode(const char *v, enum nsb_mode *mode)
{
	static const char *const names[] = {"natsync", "naive", "record",
					    "coldload"};
	static const enum nsb_mode modes[] = {NSB_NATSYNC, NSB_NAIVE,
					      NSB_RECORD, NSB_COLDLOAD};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(v, names[i])) {
			*mode = modes[i];
			return 0;
		}
	}
	fprintf(stderr,
		"natsync-bench: --mode: '%s' is not natsync, naive, record or "
		"coldload\n",
		v);
	return -1;
}

static int parse_sweep(const char *v, unsigned int *mask)
{
	if (!strcmp(v, "batch"))
		*mask = NSB_SWEEP_BATCH;
	else if (!strcmp(v, "inflight"))
		*mask = NSB_SWEEP_INFLIGHT;
	else if (!strcmp(v, "workers"))
		*mask = NSB_SWEEP_WORKERS;
	else if (!strcmp(v, "all"))
		*mask = NSB_SWEEP_ALL;
	else {
		fprintf(stderr,
			"natsync-bench: --sweep: '%s' is not batch, inflight, "
			"workers or all\n",
			v);
		return -1;
	}
	return 0;
}

/* Options that only one mode reads are refused elsewhere. */
static int check_combination(const struct nsb_opts *o, int rate_given,
			     int sessions_given, int record_given)
{
	const char *why = NULL;

	if ((o->half_load || o->sweep || o->plot) && o->mode != NSB_NATSYNC)
		why = "--half-load, --sweep and --plot need --mode natsync";
	else if (o->half_load && (o->sweep || o->plot))
		why = "--half-load and --sweep/--plot are separate runs";
	else if (o->half_load && rate_given)
		why = "--half-load finds its rate itself: drop --rate";
	else if (o->half_load && !o->standby)
		why = "--half-load measures the standby's lag: drop "
		      "--no-standby";
	else if (sessions_given && o->mode != NSB_COLDLOAD)
		why = "--sessions needs --mode coldload";
	else if (record_given && o->mode != NSB_RECORD)
		why = "--runs and --calls need --mode record";
	if (why)
		fprintf(stderr, "natsync-bench: %s\n", why);
	return why ? -1 : 0;
}

/* Whether the EAL arguments after "--" choose the lcores themselves. */
static int has_lcore_option(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "-l") || !strcmp(argv[i], "-c") ||
		    !strncmp(argv[i], "--lcores", 8))
			return 1;
	return 0;
}

/* EAL lcores 0..n-1: "-l 0-(n-1)" where the machine has that many CPUs,
 * else lcore i on CPU i % cpus (a 2-CPU machine still runs 4 workers). */
static void lcore_args(unsigned int n, char *buf, size_t cap)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t len;

	if (cpus < 1)
		cpus = 1;
	if ((long)n <= cpus) {
		snprintf(buf, cap, "-l 0-%u", n - 1);
		return;
	}
	len = (size_t)snprintf(buf, cap, "--lcores=");
	for (unsigned int i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%u@%ld",
					i ? "," : "", i, (long)i % cpus);
}

#define DIM(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv)
{
	static struct nsa_config conf;
	struct nsa_cli cli = {.prog = "natsync-bench", .usage = usage};
	static char csv_path[4096];
	struct nsb_opts o = {
		.mode = NSB_NATSYNC,
		.standby = 1,
		.sessions = 1000000,
		.runs = 51,
		.repeat = 1,
	};
	const char *store = "127.0.0.1:7000";
	const char *layout = NULL; /* [store] layout's default */
	uint64_t events = 1000000, flows = 200000, rate = 0;
	uint64_t workers = 0, batch = 0, inflight = 0;
	int rate_given = 0, sessions_given = 0, record_given = 0;
	int repeat_given = 0;
	/* The options that take a count: its minimum, where it goes and what
	 * says it was given (for check_combination()). */
	const struct {
		const char *name;
		uint64_t min, *dst;
		int *given;
	} counts[] = {
		{"events", 1, &events, NULL},
		{"flows", 1, &flows, NULL},
		{"rate", 0, &rate, &rate_given},
		{"workers", 1, &workers, NULL},
		{"batch", 1, &batch, NULL},
		{"inflight", 1, &inflight, NULL},
		{"sessions", 1, &o.sessions, &sessions_given},
		{"runs", 1, &o.runs, &record_given},
		{"calls", 32, &o.calls, &record_given},
		{"repeat", 1, &o.repeat, &repeat_given},
	};
	/* The options whose value is kept as it is. */
	const struct {
		const char *name;
		const char **dst;
	} strings[] = {{"store", &store},
		       {"csv", &o.csv},
		       {"plot", &o.plot},
		       {"layout", &layout}};
	const struct option more[] = {
		{"standby", no_argument, &o.standby, 1},
		{"no-standby", no_argument, &o.standby, 0},
		{"flush", no_argument, &o.flush, 1},
		{"half-load", no_argument, &o.half_load, 1},
		{"settle", no_argument, &o.settle, 1},
		{"set", required_argument, NULL, 'S'},
		{"mode", required_argument, NULL, 'm'},
		{"sweep", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct option opts[DIM(counts) + DIM(strings) + DIM(more)];
	char lcores[512];
	unsigned int need_lcores, mem_mb = BENCH_EAL_MEM_MB;
	int opt, idx = 0, rc;

	for (size_t i = 0; i < DIM(counts); i++)
		opts[i] = (struct option){counts[i].name, required_argument,
					  NULL, 0};
	for (size_t i = 0; i < DIM(strings); i++)
		opts[DIM(counts) + i] = (struct option){
			strings[i].name, required_argument, NULL, 0};
	memcpy(opts + DIM(counts) + DIM(strings), more, sizeof(more));
	while ((opt = getopt_long(argc, argv, "hV", opts, &idx)) != -1) {
		size_t i = (size_t)idx;

		if (opt == 0 && i < DIM(counts)) {
			if (nsb_parse_u64("natsync-bench", counts[i].name,
					  optarg, counts[i].min, UINT64_MAX,
					  counts[i].dst))
				return 2;
			if (counts[i].given)
				*counts[i].given = 1;
			continue;
		}
		if (opt == 0 && i < DIM(counts) + DIM(strings)) {
			*strings[i - DIM(counts)].dst = optarg;
			continue;
		}
		switch (opt) {
		case 'm':
			if (parse_mode(optarg, &o.mode))
				return 2;
			break;
		case 's':
			if (parse_sweep(optarg, &o.sweep))
				return 2;
			break;
		case 'S': /* a configuration key, as natsync-agent --set */
			if (nsa_cli_option(&cli, 's', optarg) != NSA_CLI_RUN)
				return 2;
			break;
		case 0: /* a flag, set by getopt_long() */
			break;
		default:
			return nsa_cli_help_option(&cli, opt);
		}
	}
	if (check_combination(&o, rate_given, sessions_given, record_given))
		return 2;
	if (repeat_given && !o.sweep && !o.plot) {
		fprintf(stderr, "natsync-bench: --repeat needs --sweep\n");
		return 2;
	}
	if (o.plot && !o.sweep)
		o.sweep = NSB_SWEEP_ALL;
	if (o.plot && !o.csv) {
		const char *dot = strrchr(o.plot, '.');
		int stem = dot && strchr(dot, '/') == NULL
				   ? (int)(dot - o.plot)
				   : (int)strlen(o.plot);

		snprintf(csv_path, sizeof(csv_path), "%.*s.csv", stem, o.plot);
		o.csv = csv_path;
	}
	/* The standby table and the lanes live in EAL memory. */
	if (o.mode == NSB_COLDLOAD)
		mem_mb += (unsigned int)(o.sessions / 1000);

	nsa_config_defaults(&conf);
	if (nsb_conf_set(&conf, "store.seeds=%s", store) ||
	    (layout && nsb_conf_set(&conf, "store.layout=%s", layout)) ||
	    nsb_conf_set(&conf, "agent.eal_args=%s -m %u", BENCH_EAL_ARGS,
			 mem_mb) ||
	    nsb_conf_set(&conf, "source.type=synth") ||
	    nsb_conf_set(&conf, "source.events=%" PRIu64, events) ||
	    nsb_conf_set(&conf, "source.flows=%" PRIu64, flows) ||
	    nsb_conf_set(&conf, "source.rate=%" PRIu64, rate) ||
	    nsb_conf_set(&conf, "standby.table_capacity=%" PRIu64,
			 flows * 2 > 1024 ? flows * 2 : 1024))
		return 2;
	/* Naive mode drains one lane itself; natsync gives each writer a
	 * lane of its own so that the writers never share one. */
	if (o.mode != NSB_NAIVE && workers &&
	    (nsb_conf_set(&conf, "active.workers=%" PRIu64, workers) ||
	     nsb_conf_set(&conf, "rings.lanes=%" PRIu64, workers)))
		return 2;
	if (batch && nsb_conf_set(&conf, "active.batch_size=%" PRIu64, batch))
		return 2;
	if (inflight &&
	    nsb_conf_set(&conf, "active.max_inflight=%" PRIu64, inflight))
		return 2;
	/* --set last, over the options' values. */
	for (unsigned int i = 0; i < cli.n_sets; i++)
		if (nsb_conf_set(&conf, "%s", cli.sets[i]))
			return 2;
	if (nsa_cli_finish(&cli, &conf))
		return 2;
	nsa_log_verbosity = conf.verbosity;

	/* The main lcore, plus one per source worker (a sweep's largest). */
	need_lcores = 1 + conf.lanes;
	if (1 + nsb_sweep_max_workers(o.sweep) > need_lcores)
		need_lcores = 1 + nsb_sweep_max_workers(o.sweep);
	if (!has_lcore_option(argc - optind, argv + optind)) {
		lcore_args(need_lcores, lcores, sizeof(lcores));
		if (nsb_conf_set(&conf, "agent.eal_args=%s %s", conf.eal_args,
				 lcores))
			return 2;
	}
	if (nsa_cli_start(&cli, &conf, argc - optind, argv + optind, NULL, 0))
		return 2;

	switch (o.mode) {
	case NSB_NAIVE:
		rc = nsb_naive(&conf, &o);
		break;
	case NSB_RECORD:
		rc = nsb_record(&conf, &o);
		break;
	case NSB_COLDLOAD:
		rc = nsb_coldload(&conf, &o);
		break;
	default:
		rc = o.sweep ? nsb_sweep(&conf, &o) : nsb_natsync(&conf, &o);
		break;
	}
	rte_eal_cleanup();
	return rc;
}
