/*
 * natsync_ctbench.c - the natsync-ctbench program: how fast the standby's
 * conntrack commit (dataplane/kernel/nsdp_ctcommit.h) writes sessions into a
 * kernel's conntrack table, batched ctnetlink beside one synchronous
 * create at a time (what conntrackd's commit does), in one run.
 *
 * Each mode writes N source NAT sessions (half TCP, half UDP) into the
 * table of a fresh network namespace it creates (natsync-ctb-PID) and
 * removes afterwards, then refreshes them (updates) and deletes them.
 * Root only. One RESULT line per mode on stdout, then a summary.
 * Exit status: 0 done, 1 runtime failure, 2 bad options.
 *
 * Not here: the standby around the commit (the store, the subscriber).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nsb_flow.h"
#include "nsb_opt.h"
#include "nsdp_ctcommit.h"
#include "nsdp_time.h"

/* Session i: distinct both ways for up to a few million sessions. */
static void session(struct ns_session *s, uint32_t i, uint8_t event,
		    uint64_t ts)
{
	memset(s, 0, sizeof(*s));
	s->version = NS_RECORD_VERSION;
	s->family = NS_FAMILY_IPV4;
	s->proto = i % 2 ? IPPROTO_UDP : IPPROTO_TCP;
	s->event = event;
	s->gateway_id = 1;
	s->epoch = 1;
	s->timeout_ms = 600000;
	s->timestamp_ns = ts;
	nsb_flow(s, i);
}

struct phase {
	double rate;
	uint64_t done;
};

/* Write n records of event into c; the records/s and how many went in. */
static struct phase run_phase(struct nsdp_ctcommit *c, uint32_t n,
			      uint8_t event)
{
	struct nsdp_ctcommit_stats a, b;
	struct ns_session s;
	uint64_t ts = nsdp_realtime_ns();
	double t0 = nsdp_now_s(), t;
	uint32_t i;

	nsdp_ctcommit_stats(c, &a);
	for (i = 0; i < n; i++) {
		session(&s, i, event, ts);
		nsdp_ctcommit_add(c, &s);
	}
	nsdp_ctcommit_flush(c);
	t = nsdp_now_s() - t0;
	nsdp_ctcommit_stats(c, &b);
	return (struct phase){.rate = n / t,
			      .done = (b.committed - a.committed) +
				      (b.updated - a.updated) +
				      (b.deleted - a.deleted)};
}

static int run_mode(const char *name, uint32_t batch_bytes, uint32_t n,
		    double *create_rate)
{
	struct nsdp_ctcommit_conf cc = {.batch_bytes = batch_bytes};
	struct nsdp_ctcommit_stats st;
	struct phase cr, up, del;
	struct nsdp_ctcommit *c;
	char cmd[128], err[256] = "";

	snprintf(cc.netns, sizeof(cc.netns), "natsync-ctb-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "ip netns add %s", cc.netns);
	if (system(cmd) != 0) {
		fprintf(stderr, "natsync-ctbench: %s failed\n", cmd);
		return 1;
	}
	c = nsdp_ctcommit_open(&cc, err, sizeof(err));
	if (c) {
		cr = run_phase(c, n, NS_EV_CREATE);
		up = run_phase(c, n, NS_EV_REFRESH);
		del = run_phase(c, n, NS_EV_DELETE);
		nsdp_ctcommit_stats(c, &st);
		printf("RESULT ctbench mode=%s batch_bytes=%u records=%u "
		       "create_rate=%.0f update_rate=%.0f delete_rate=%.0f "
		       "created=%" PRIu64 " updated=%" PRIu64
		       " deleted=%" PRIu64 " errors=%" PRIu64 " sends=%" PRIu64
		       "\n",
		       name, batch_bytes, n, cr.rate, up.rate, del.rate,
		       cr.done, up.done, del.done, st.errors, st.sends);
		fflush(stdout);
		*create_rate = cr.rate;
		nsdp_ctcommit_close(c);
	} else {
		fprintf(stderr, "natsync-ctbench: %s\n", err);
	}
	snprintf(cmd, sizeof(cmd), "ip netns del %s", cc.netns);
	if (system(cmd) != 0)
		fprintf(stderr, "natsync-ctbench: %s failed\n", cmd);
	return c ? 0 : 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: natsync-ctbench [-n RECORDS] [-b BATCH_BYTES]\n"
		"       natsync-ctbench -h | -V\n"
		"  -n, --records N      sessions per mode (default 200000; "
		"the kernel's nf_conntrack_max bounds it)\n"
		"  -b, --batch-bytes B  ctnetlink bytes per sendmsg in the "
		"batched mode (default %u)\n"
		"Writes N sessions into a fresh namespace's conntrack, "
		"batched and one at a time, then\nupdates and deletes them; "
		"prints a RESULT line per mode. Root only.\n",
		NSDP_CTCOMMIT_BATCH_DEFAULT);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {NSB_OPT("records", 'n'),
						 NSB_OPT("batch-bytes", 'b'),
						 NSB_OPT_HELP_END};
	uint32_t n = 200000, batch = NSDP_CTCOMMIT_BATCH_DEFAULT;
	double batched = 0, sync = 0;
	int opt;

	while ((opt = getopt_long(argc, argv, "n:b:hV", longopts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'n':
			n = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			batch = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("natsync-ctbench %s\n", NATSYNC_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (n == 0 || batch == 0 || batch > NSDP_CTCOMMIT_BATCH_MAX) {
		usage(stderr);
		return 2;
	}
	if (run_mode("batched", batch, n, &batched) != 0 ||
	    run_mode("sync", 0, n, &sync) != 0)
		return 1;
	printf("RESULT ctbench-summary records=%u batched_create_rate=%.0f "
	       "sync_create_rate=%.0f speedup=%.2f\n",
	       n, batched, sync, sync > 0 ? batched / sync : 0.0);
	return 0;
}
