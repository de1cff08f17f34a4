/*
 * nsb_sweep.c - natsync-bench --sweep: the natsync mode for each value
 * of the writers' batch size, pipeline depth and worker count, each varied
 * alone with the others as configured, and --plot: throughput and standby
 * lag p99 against each parameter, drawn by gnuplot.
 *
 * A point is measured --repeat times. Flat out with a standby (the usual
 * case) one measurement is a --half-load pair: the flat-out run gives the
 * throughput, a run at half of that rate gives the lag p99 (at flat out
 * the lag is only the backlog the source piled up). With --rate, or
 * without a standby, one measurement is one run. Every run prints its
 * RESULT line with sweep=<parameter> and its CSV row; each point then
 * prints one POINT line with the medians of its measurements, which is
 * also what the plot shows (a point none of whose measurements succeeded
 * is left out of both).
 *
 * A worker count of w means w writer threads, w lanes and w source lcores
 * (main starts EAL with enough lcores for the largest w). The points reach
 * gnuplot through its standard input as data blocks, so no file beside the
 * PNG is written.
 *
 * Not here: the choice of defaults (nsa_config.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "nsb_bench.h"
#include "nsb_num.h"
#include "nsa_log.h"

#define SWEEP_MAX_POINTS 16
#define SWEEP_MAX_REPEAT 15

struct sweep_param {
	unsigned int mask;
	const char *name; /* in RESULT and CSV: sweep=<name> */
	const char *title, *xlabel;
	int log2_x;
	unsigned int n;
	unsigned int values[SWEEP_MAX_POINTS];
};

static const struct sweep_param sweep_params[] = {
	{NSB_SWEEP_BATCH,
	 "batch",
	 "batch size ([active] batch_size)",
	 "records per batch (log scale)",
	 1,
	 7,
	 {16, 32, 64, 128, 256, 512, 1024}},
	{NSB_SWEEP_INFLIGHT,
	 "inflight",
	 "pipeline depth ([active] max_inflight)",
	 "batches in flight per connection (log scale)",
	 1,
	 6,
	 {1, 2, 4, 8, 16, 32}},
	{NSB_SWEEP_WORKERS,
	 "workers",
	 "writers ([active] workers = lanes)",
	 "writer threads (one connection per master each)",
	 0,
	 4,
	 {1, 2, 3, 4}},
};

#define SWEEP_N_PARAMS (sizeof(sweep_params) / sizeof(sweep_params[0]))

struct sweep_point {
	unsigned int x;
	unsigned int ok; /* measurements that succeeded */
	double rate[SWEEP_MAX_REPEAT];
	double lag_p99_ms[SWEEP_MAX_REPEAT];
};

unsigned int nsb_sweep_max_workers(unsigned int mask)
{
	unsigned int most = 0;

	for (unsigned int i = 0; i < SWEEP_N_PARAMS; i++) {
		const struct sweep_param *p = &sweep_params[i];

		if (p->mask == NSB_SWEEP_WORKERS && (mask & p->mask))
			most = p->values[p->n - 1];
	}
	return most;
}

static void apply_value(struct nsa_config *conf, unsigned int mask,
			unsigned int v)
{
	switch (mask) {
	case NSB_SWEEP_BATCH:
		conf->batch_size = v;
		break;
	case NSB_SWEEP_INFLIGHT:
		conf->max_inflight = v;
		break;
	default:
		conf->workers = v;
		conf->lanes = v;
		break;
	}
}

static void plot_panel(FILE *gp, const struct sweep_param *p,
		       struct sweep_point *pts, const char *lag_title)
{
	fprintf(gp, "$%s << EOD\n", p->name);
	for (unsigned int i = 0; i < p->n; i++)
		if (pts[i].ok)
			fprintf(gp, "%u %.0f %.3f\n", pts[i].x,
				nsb_median(pts[i].rate, pts[i].ok),
				nsb_median(pts[i].lag_p99_ms, pts[i].ok));
	fprintf(gp, "EOD\n");
	fprintf(gp, "set title \"%s\"\nset xlabel \"%s\"\n", p->title,
		p->xlabel);
	fprintf(gp, p->log2_x ? "set logscale x 2\n" : "unset logscale x\n");
	fprintf(gp, "set xtics (");
	for (unsigned int i = 0; i < p->n; i++)
		fprintf(gp, "%s%u", i ? ", " : "", p->values[i]);
	fprintf(gp, ")\nset xrange [%g:%g]\n",
		p->log2_x ? p->values[0] / 1.4 : p->values[0] - 0.3,
		p->log2_x ? p->values[p->n - 1] * 1.4
			  : p->values[p->n - 1] + 0.3);
	fprintf(gp,
		"plot $%s using 1:2 axes x1y1 with linespoints pt 7 lw 2 "
		"title \"throughput (sessions/s)\"",
		p->name);
	if (lag_title)
		fprintf(gp,
			", $%s using 1:3 axes x1y2 with linespoints pt 5 lw 2 "
			"dt 2 title \"%s\"",
			p->name, lag_title);
	fprintf(gp, "\n");
}

/* Draw one panel per swept parameter into o->plot; 0 or -1 (logged). */
static int plot(const struct nsa_config *conf, const struct nsb_opts *o,
		struct sweep_point pts[][SWEEP_MAX_POINTS], int pairs)
{
	char lag_title[128], load[64];
	unsigned int panels = 0;
	FILE *gp;
	int status;

	if (strpbrk(o->plot, "'\"\\\n")) {
		NSA_ERR("plot: the file name may not contain quotes, "
			"backslashes or newlines");
		return -1;
	}
	for (unsigned int i = 0; i < SWEEP_N_PARAMS; i++)
		panels += (o->sweep & sweep_params[i].mask) != 0;
	if (pairs) {
		snprintf(load, sizeof(load), "flat out");
		snprintf(lag_title, sizeof(lag_title),
			 "lag p99 at half that load (ms)");
	} else {
		if (conf->synth_conf.rate)
			snprintf(load, sizeof(load), "at %" PRIu64 " events/s",
				 conf->synth_conf.rate);
		else
			snprintf(load, sizeof(load), "flat out");
		snprintf(lag_title, sizeof(lag_title), "lag p99 (ms)");
	}
	gp = popen("gnuplot", "w");
	if (!gp) {
		NSA_ERR("plot: cannot run gnuplot: %s", strerror(errno));
		return -1;
	}
	fprintf(gp,
		"set terminal pngcairo noenhanced size %u,600 font "
		"\"sans,10\"\n"
		"set output '%s'\n"
		"set grid\nset key below horizontal\n"
		"set ylabel \"throughput (sessions/s)\"\n"
		"set format y \"%%.0s%%c\"\nset yrange [0:*]\n"
		"set ytics nomirror\n",
		panels > 1 ? panels * 560 + 40 : 1000, o->plot);
	if (o->standby)
		fprintf(gp,
			"set y2label \"record -> standby table %s\"\n"
			"set y2tics\nset y2range [0:*]\n",
			lag_title);
	fprintf(gp,
		"set multiplot layout 1,%u title \"natsync-bench sweep: "
		"%" PRIu64 " events over %" PRIu64 " flows, %s, %s, store %s:%u"
		"\\n(median of %" PRIu64 " measurement(s) per point; the other "
		"parameters: batch %u, inflight %u, workers %u)\"\n",
		panels, conf->synth_conf.events, conf->synth_conf.flows,
		o->standby ? "standby attached" : "no standby", load,
		conf->store.seeds[0].host, conf->store.seeds[0].port, o->repeat,
		conf->batch_size, conf->max_inflight, conf->workers);
	for (unsigned int i = 0; i < SWEEP_N_PARAMS; i++)
		if (o->sweep & sweep_params[i].mask)
			plot_panel(gp, &sweep_params[i], pts[i],
				   o->standby ? lag_title : NULL);
	fprintf(gp, "unset multiplot\n");
	status = pclose(gp);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		NSA_ERR("plot: gnuplot failed (status %d); is gnuplot "
			"installed (gnuplot-nox)?",
			status);
		return -1;
	}
	fprintf(stderr, "natsync-bench: plot written to %s\n", o->plot);
	return 0;
}

/* One measurement of a point: its throughput and lag p99; 0 or 1. */
static int measure(const struct nsa_config *point, const struct nsb_opts *o,
		   const char *sweep, int pair, double *rate,
		   double *lag_p99_ms)
{
	struct nsb_result max, half;
	int rc;

	if (pair) {
		rc = nsb_natsync_half_load(point, o, sweep, &max, &half);
		*rate = nsb_rate(&max);
		*lag_p99_ms = (double)half.lag_p99_us / 1000.0;
		return rc;
	}
	rc = nsb_natsync_run(point, o, &max);
	max.sweep = sweep;
	rc = nsb_natsync_report(point, o, &max, rc);
	*rate = nsb_rate(&max);
	*lag_p99_ms = (double)max.lag_p99_us / 1000.0;
	return rc;
}

int nsb_sweep(const struct nsa_config *conf, const struct nsb_opts *o)
{
	static struct nsa_config point;
	static struct sweep_point pts[SWEEP_N_PARAMS][SWEEP_MAX_POINTS];
	int pair = o->standby && conf->synth_conf.rate == 0;
	int rc = 0;

	if (o->repeat < 1 || o->repeat > SWEEP_MAX_REPEAT) {
		NSA_ERR("sweep: --repeat from 1 to %d", SWEEP_MAX_REPEAT);
		return 1;
	}
	for (unsigned int i = 0; i < SWEEP_N_PARAMS; i++) {
		const struct sweep_param *p = &sweep_params[i];

		if (!(o->sweep & p->mask))
			continue;
		for (unsigned int k = 0; k < p->n; k++) {
			struct sweep_point *pt = &pts[i][k];

			pt->x = p->values[k];
			point = *conf;
			apply_value(&point, p->mask, p->values[k]);
			for (uint64_t m = 0; m < o->repeat; m++) {
				fprintf(stderr,
					"natsync-bench: sweep %s = %u (%" PRIu64
					" of %" PRIu64 ")\n",
					p->name, p->values[k], m + 1,
					o->repeat);
				if (measure(&point, o, p->name, pair,
					    &pt->rate[pt->ok],
					    &pt->lag_p99_ms[pt->ok]) == 0)
					pt->ok++;
				else
					rc = 1;
			}
			if (pt->ok)
				printf("POINT sweep=%s value=%u measurements=%u"
				       " rate=%.0f lag_p99_us=%.0f\n",
				       p->name, pt->x, pt->ok,
				       nsb_median(pt->rate, pt->ok),
				       nsb_median(pt->lag_p99_ms, pt->ok) *
					       1000);
		}
	}
	if (o->plot && plot(conf, o, pts, pair) != 0)
		rc = 1;
	return rc;
}
