/*
 * natsync_hiccup.c - the natsync-hiccup program: what the machine takes
 * from a thread that never sleeps, the floor under any latency figure
 * measured on it (scripts/bench-lag.sh prints it beside replication lag).
 *
 *   natsync-hiccup [--seconds S] [--gap-us U]
 *
 * One thread per online CPU, each bound to its CPU, reads CLOCK_MONOTONIC
 * in a loop for S seconds (default 5); a step between two reads longer
 * than U microseconds (default 50) is a gap: time the thread did not run
 * (the host running another virtual machine on that CPU, an interrupt,
 * another thread of this machine). Run it on an otherwise idle machine:
 * then the gaps are what the host and the kernel take. Prints one line
 * per CPU:
 *   RESULT hiccup cpu=C seconds=S gaps=G lost_ms=L lost_pct=P
 *     over_1ms=A over_2ms=B over_5ms=D max_ms=M
 * lost_ms being the gaps' sum. A record that crosses such a gap on its
 * way (writer, store, subscriber) arrives that much later: with 1 % of a
 * CPU lost in gaps of a millisecond or more, a p99 of replication lag
 * cannot be under a millisecond.
 *
 * Exit status: 0, 2 on a bad argument, 1 when a thread cannot start.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 256

struct spinner {
	pthread_t thread;
	int cpu;
	uint64_t run_ns, gap_ns;
	uint64_t gaps, lost_ns, over_1ms, over_2ms, over_5ms, max_ns;
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *spin(void *arg)
{
	struct spinner *s = arg;
	cpu_set_t set;
	uint64_t start, last, now, g;

	CPU_ZERO(&set);
	CPU_SET(s->cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	start = last = mono_ns();
	while (last - start < s->run_ns) {
		now = mono_ns();
		g = now - last;
		last = now;
		if (g <= s->gap_ns)
			continue;
		s->gaps++;
		s->lost_ns += g;
		s->over_1ms += g > 1000000;
		s->over_2ms += g > 2000000;
		s->over_5ms += g > 5000000;
		if (g > s->max_ns)
			s->max_ns = g;
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: natsync-hiccup [--seconds S] [--gap-us U]\n"
		   "  one thread per CPU reads the clock for S seconds "
		   "(default 5)\n"
		   "  and counts the steps longer than U us (default 50): "
		   "time\n"
		   "  the machine took from a thread that never sleeps\n");
}

/* A whole number in [min, max] from s, or -1. */
static long number(const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	static struct spinner sp[MAX_CPUS];
	long seconds = 5, gap_us = 50, n;
	cpu_set_t online;
	int cpus = 0, i, rc = 0;

	/* Options come in pairs but --help. */
	for (i = 1; i < argc; i += 2) {
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			usage(stderr);
			return 2;
		}
		if (strcmp(argv[i], "--seconds") == 0) {
			seconds = n = number(argv[i + 1], 1, 3600);
		} else if (strcmp(argv[i], "--gap-us") == 0) {
			gap_us = n = number(argv[i + 1], 1, 1000000);
		} else {
			fprintf(stderr, "natsync-hiccup: unknown option %s\n",
				argv[i]);
			usage(stderr);
			return 2;
		}
		if (n < 0) {
			fprintf(stderr,
				"natsync-hiccup: %s %s: not a whole number in "
				"range (--seconds 1-3600, --gap-us "
				"1-1000000)\n",
				argv[i], argv[i + 1]);
			return 2;
		}
	}
	if (sched_getaffinity(0, sizeof(online), &online) != 0)
		return 1;
	for (i = 0; i < MAX_CPUS && i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &online))
			continue;
		sp[cpus].cpu = i;
		sp[cpus].run_ns = (uint64_t)seconds * 1000000000ull;
		sp[cpus].gap_ns = (uint64_t)gap_us * 1000ull;
		if (pthread_create(&sp[cpus].thread, NULL, spin, &sp[cpus]) !=
		    0) {
			fprintf(stderr,
				"natsync-hiccup: cannot start a thread "
				"for CPU %d\n",
				i);
			rc = 1;
			break;
		}
		cpus++;
	}
	for (i = 0; i < cpus; i++) {
		const struct spinner *s = &sp[i];

		pthread_join(s->thread, NULL);
		printf("RESULT hiccup cpu=%d seconds=%ld gaps=%lu lost_ms=%.1f "
		       "lost_pct=%.2f over_1ms=%lu over_2ms=%lu over_5ms=%lu "
		       "max_ms=%.2f\n",
		       s->cpu, seconds, (unsigned long)s->gaps,
		       (double)s->lost_ns / 1e6,
		       (double)s->lost_ns / (double)s->run_ns * 100.0,
		       (unsigned long)s->over_1ms, (unsigned long)s->over_2ms,
		       (unsigned long)s->over_5ms, (double)s->max_ns / 1e6);
	}
	return rc;
}
