/*
 * nsb_gw_report.c - natsync-gwbench's figures of a round: one line on
 * stdout per round (per gateway with --slice-ms), the drop reasons and
 * warnings on stderr, one CSV row.
 *
 * The line's and the row's layout are what scripts/bench-gateway.sh and
 * earlier CSV files expect: fields are only ever added at the end.
 *
 * Not here: the summary and RESULT line (natsync_gwbench.c), measuring.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <rte_common.h>
#include <rte_cycles.h>

#include "nsb_gw_report.h"

#define DELTA(field) (r->after.field - r->before.field)

/* The counters of packets the NAT dropped, and last arp_ignored, which
 * print_drops() shows too but which counts no dropped packet. */
static const struct {
	const char *name;
	size_t off;
} reasons[] = {
#define REASON(f)                                      \
	{                                              \
#f, offsetof(struct nsdp_nat_stats, f) \
	}
	REASON(standby_drops),	 REASON(not_ipv4),
	REASON(truncated),	 REASON(bad_ip_header),
	REASON(bad_ip_checksum), REASON(ip_options),
	REASON(fragments),	 REASON(ttl_expired),
	REASON(unknown_proto),	 REASON(icmp_unsupported),
	REASON(tcp_no_session),	 REASON(no_session),
	REASON(not_ours),	 REASON(to_gateway),
	REASON(ports_exhausted), REASON(table_full),
	REASON(neigh_miss),	 REASON(alloc_failures),
	REASON(ip6_ext_headers), REASON(udp6_zero_checksum),
	REASON(icmp_error_bad),	 REASON(icmp_error_no_session),
	REASON(arp_ignored),
#undef REASON
};

#define N_DROP_REASONS (RTE_DIM(reasons) - 1)

static uint64_t counter(const struct nsdp_nat_stats *s, size_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)s + reasons[i].off, sizeof(v));
	return v;
}

static uint64_t drops_of(const struct nsdp_nat_stats *s)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < N_DROP_REASONS; i++)
		sum += counter(s, i);
	return sum;
}

static void print_drops(const struct nsb_gw_round *r)
{
	char line[1024];
	size_t len = 0;

	for (size_t i = 0; i < RTE_DIM(reasons); i++) {
		uint64_t a = counter(&r->after, i), b = counter(&r->before, i);

		if (a != b && len < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len,
						" %s=%" PRIu64, reasons[i].name,
						a - b);
	}
	if (len)
		fprintf(stderr, "%s: dropped while measuring:%s\n", r->label,
			line);
}

double nsb_gw_round_gw_pps(const struct nsb_gw_round *r)
{
	return r->t.gw_cycles
		       ? (double)r->t.gw_packets * (double)rte_get_tsc_hz() /
				 (double)r->t.gw_cycles
		       : 0.0;
}

double nsb_gw_round_cycles_per_pkt(const struct nsb_gw_round *r)
{
	return r->t.gw_packets
		       ? (double)r->t.gw_cycles / (double)r->t.gw_packets
		       : 0.0;
}

double nsb_gw_round_loop_pps(const struct nsb_gw_round *r)
{
	return r->loop_cycles
		       ? (double)r->t.packets * (double)rte_get_tsc_hz() /
				 (double)r->loop_cycles
		       : 0.0;
}

/* Check a measured round and say what it measured; 0 if it is usable. */
int nsb_gw_round_report(const struct nsb_gw_round *r,
			const struct nsb_gw_gen *g)
{
	double secs = (double)r->loop_cycles / (double)rte_get_tsc_hz();
	uint64_t records = DELTA(recorded);
	int ok = 1;

	printf("%s recording=%-3s gw_mpps=%.3f loop_mpps=%.3f "
	       "cycles_per_pkt=%.1f packets=%" PRIu64 " stalls=%" PRIu64
	       " created=%" PRIu64 " refreshed=%" PRIu64 " closed=%" PRIu64
	       " expired=%" PRIu64 " records_per_s=%.0f record_drops=%" PRIu64
	       " drops=%" PRIu64 " sessions=%" PRIu64 "\n",
	       r->label, r->recording ? "on" : "off",
	       nsb_gw_round_gw_pps(r) / 1e6, nsb_gw_round_loop_pps(r) / 1e6,
	       nsb_gw_round_cycles_per_pkt(r), r->t.packets, r->t.stalls,
	       DELTA(created), DELTA(refreshed), DELTA(closed), DELTA(expired),
	       secs > 0 ? (double)records / secs : 0.0, DELTA(record_drops),
	       drops_of(&r->after) - drops_of(&r->before), r->sessions_end);
	if (r->recording && DELTA(defer_held))
		printf("%s defer held=%" PRIu64 " settled=%" PRIu64
		       " timeouts=%" PRIu64 " overflow=%" PRIu64 "\n",
		       r->label, DELTA(defer_held), DELTA(defer_settled),
		       DELTA(defer_timeouts), DELTA(defer_overflow));
	fflush(stdout);
	print_drops(r);
	if (r->t.packets == 0 || DELTA(tx_outside) == 0) {
		fprintf(stderr,
			"%s: the gateway forwarded nothing "
			"(tx_outside during warm-up %" PRIu64
			", ARP answered %" PRIu64 ")\n",
			r->label, r->warm_tx_outside, g->arp_answered);
		ok = 0;
	}
	if (r->t.stalls)
		fprintf(stderr,
			"%s: %" PRIu64 " gateway iterations over %.1f ms "
			"(%.3f s in all) left out of gw_mpps: the lcore was "
			"preempted\n",
			r->label, r->t.stalls, 1000.0 / NSB_GW_STALL_DIV,
			(double)r->t.stall_cycles / (double)rte_get_tsc_hz());
	if (DELTA(neigh_miss))
		fprintf(stderr,
			"%s: warning: neigh_miss grew by %" PRIu64
			" while measuring (next hop not resolved?)\n",
			r->label, DELTA(neigh_miss));
	if (r->recording && DELTA(record_drops))
		fprintf(stderr,
			"%s: warning: %" PRIu64
			" records dropped (lane full)\n",
			r->label, DELTA(record_drops));
	if (g->bad_out || g->bad_in)
		fprintf(stderr,
			"%s: --verify: %" PRIu64 " bad outside and %" PRIu64
			" bad inside packets (checksum or address)\n",
			r->label, g->bad_out, g->bad_in);
	return ok ? 0 : -1;
}

void nsb_gw_csv_append(const char *path, const struct nsb_gw_opts *o,
		       const struct nsb_gw_round *r)
{
	struct stat sb;
	int is_new = stat(path, &sb) != 0 || sb.st_size == 0;
	FILE *f = fopen(path, "a");

	if (!f) {
		fprintf(stderr, "natsync-gwbench: csv: %s: %s\n", path,
			strerror(errno));
		return;
	}
	if (is_new)
		fprintf(f, "time,round,recording,flows,hosts,new_pct,tcp_pct,"
			   "reply_pct,timeout_s,burst,slice_ms,seconds,packets,"
			   "gw_pps,loop_pps,cycles_per_pkt,stalls,created,"
			   "refreshed,closed,expired,recorded,record_drops,"
			   "drops,neigh_miss\n");
	fprintf(f,
		"%ld,%u,%s,%" PRIu32 ",%" PRIu32
		",%g,%u,%u,%u,%u,%u,%.3f,%" PRIu64 ",%.0f,%.0f,%.1f,%" PRIu64
		",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
		(long)time(NULL), r->index + 1, r->recording ? "on" : "off",
		o->flows, o->hosts, o->new_pct, o->tcp_pct, o->reply_pct,
		o->timeout_s, o->burst, o->slice_ms,
		(double)r->loop_cycles / (double)rte_get_tsc_hz(), r->t.packets,
		nsb_gw_round_gw_pps(r), nsb_gw_round_loop_pps(r),
		nsb_gw_round_cycles_per_pkt(r), r->t.stalls, DELTA(created),
		DELTA(refreshed), DELTA(closed), DELTA(expired),
		DELTA(recorded), DELTA(record_drops),
		drops_of(&r->after) - drops_of(&r->before), DELTA(neigh_miss));
	fclose(f);
}

#undef DELTA
