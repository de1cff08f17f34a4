/*
 * nsb_coldload.c - natsync-bench's coldload mode: how long a fresh
 * standby takes to load a full store.
 *
 * First the store is filled with --sessions distinct sessions through the
 * real path: this thread records one create per session into the lanes
 * (waiting, never dropping, when a ring is full) and the active writers
 * replicate them; the fill ends when every record is acknowledged. Then a
 * fresh standby is created and started; the clock runs from its creation
 * (create_seconds: allocating the table) until it reports synced (its cold
 * load by SCAN + MGET finished). The standby's table holds the store's
 * keys + 25 %.
 *
 * The store's memory is probed before the fill and after it (with the
 * writers gone), which gives the store bytes per session, and the table's
 * memory per slot and per loaded session comes from nsdp_table_stats.
 *
 * Session i has inside source 10.0.0.0 + i, port 40000, to 198.18.0.1:443
 * over TCP, translated to 203.0.113.(i % 256), port 1024 + i / 256, so
 * every key and every reply tuple is distinct.
 *
 * In the log layout the store holds segments, not one key per session:
 * the standby must hold --sessions sessions (the store must be empty
 * first: --flush), and the bytes per session divide by them. With --settle
 * the writers stay up after the fill until their compactor has written a
 * checkpoint covering it (a round that began a grace period after the
 * fill) and the segments it covered have expired (another grace period,
 * and until the store's key count stops falling); the store's memory is
 * sampled every 100 ms meanwhile, its growth over the empty store at the
 * end and at the peak give settled_ and peak_store_bytes_per_session.
 *
 * Not here: live traffic during the load (test_standby covers it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>

#include "nsa_active.h"
#include "nsb_bench.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsdp_table.h"
#include "nsdp_time.h"

#define COLD_BURST 32
#define COLD_DRAIN_TIMEOUT_MS 600000
#define COLD_SYNC_TIMEOUT_S 120.0
#define COLD_FULL_WAIT_US 20
/* Distinct translated tuples: 256 pool addresses x 64512 ports. */
#define COLD_MAX_SESSIONS (256ull * 64512ull)

static void make_session(const struct nsa_config *conf, uint64_t i,
			 uint64_t now, struct ns_session *s)
{
	memset(s, 0, sizeof(*s));
	s->version = NS_RECORD_VERSION;
	s->family = NS_FAMILY_IPV4;
	s->proto = IPPROTO_TCP;
	s->event = NS_EV_CREATE;
	s->gateway_id = conf->gateway_id;
	s->epoch = conf->epoch;
	s->timeout_ms = conf->synth_conf.timeout_ms;
	s->timestamp_ns = now;
	s->orig = (struct ns_tuple){0x0a000000u + (uint32_t)i, 0xc6120001u,
				    40000, 443};
	s->xlat =
		(struct ns_tuple){0xcb007100u + (uint32_t)(i % 256),
				  0xc6120001u, (uint16_t)(1024 + i / 256), 443};
}

/* Record n sessions into the lanes, a burst at a time, waiting while the
 * lane's ring has no room; returns the seconds until all are acked. */
static int fill(const struct nsa_config *conf, struct nsa_source *src,
		struct nsa_active *active, uint64_t n, double *seconds)
{
	struct ns_session burst[COLD_BURST];
	struct timespec nap = {0, COLD_FULL_WAIT_US * 1000L};
	double t0 = nsdp_now_s(), last = t0;
	uint64_t i = 0;
	unsigned int lane = 0;

	while (i < n) {
		unsigned int k =
			n - i < COLD_BURST ? (unsigned int)(n - i) : COLD_BURST;
		struct nsdp_lane *l = src->lanes[lane];
		uint64_t now = nsdp_realtime_ns();

		if (rte_ring_free_count(l->ring) < k) {
			nanosleep(&nap, NULL);
			continue;
		}
		for (unsigned int j = 0; j < k; j++)
			make_session(conf, i + j, now, &burst[j]);
		/* The only producer, and the room is there: all go in. */
		nsdp_record_burst(l, burst, k);
		i += k;
		lane = (lane + 1) % src->n_lanes;
		if (nsdp_now_s() - last >= 1.0) {
			struct nsa_active_stats st;

			last = nsdp_now_s();
			nsa_active_stats(active, &st);
			fprintf(stderr,
				"progress: coldload fill %.1fs recorded "
				"%" PRIu64 " acked %" PRIu64 "\n",
				last - t0, i, st.acked);
		}
	}
	if (nsa_active_drain(active, COLD_DRAIN_TIMEOUT_MS) != 0) {
		NSA_ERR("coldload: the store did not acknowledge every record");
		return -1;
	}
	*seconds = nsdp_now_s() - t0;
	return 0;
}

/* What --settle measured. */
struct settle {
	double seconds;
	uint64_t used_end, used_peak, keys_end, compactions;
	uint64_t compact_peak; /* the largest round's peak memory */
};

/* Keep active (its compactor) running until the log settles: three grace
 * periods at least (a round merges only segments a grace period old, and
 * the segments it covered expire two grace periods after it), then until
 * neither the compactor's rounds nor the store's key count changed for two
 * grace periods and 2 s (at most COLD_SETTLE_MAX_S in all). With one grace
 * period, a run could end before the covered segments expired (101.9 B a
 * session "settled" once, 48.1 B in the other runs). The store's memory is
 * sampled every 100 ms. What the compactor leaves is its own rule's: the
 * last checkpoint and the segments written since, below
 * log_compact_pct % of it (schema/FORMAT.md, Compaction). */
#define COLD_SETTLE_MAX_S 120.0
static int settle_log(const struct nsa_config *conf, struct nsa_active *active,
		      struct settle *s)
{
	const double grace = conf->log_compact_grace_ms / 1000.0;
	const double t0 = nsdp_now_s();
	struct nsa_active_stats st;
	struct nsa_storemem m;
	uint64_t rounds0, rounds = UINT64_MAX, keys = UINT64_MAX;
	double changed = t0;

	nsa_active_stats(active, &st);
	rounds0 = st.compactions;
	memset(s, 0, sizeof(*s));
	while (nsdp_now_s() - t0 < COLD_SETTLE_MAX_S) {
		double now;

		nsdp_sleep_ms(100);
		now = nsdp_now_s();
		if (nsa_storemem_probe(&conf->store, &m) != 0)
			return -1;
		if (m.used_memory > s->used_peak)
			s->used_peak = m.used_memory;
		nsa_active_stats(active, &st);
		if (st.compact_peak > s->compact_peak)
			s->compact_peak = st.compact_peak;
		if (st.compactions != rounds || m.keys != keys) {
			rounds = st.compactions;
			keys = m.keys;
			changed = now;
			continue;
		}
		if (now - t0 >= 3 * grace + 1 &&
		    now - changed >= 2 * grace + 2) {
			s->seconds = now - t0;
			s->used_end = m.used_memory;
			s->keys_end = m.keys;
			s->compactions = st.compactions - rounds0;
			return 0;
		}
	}
	NSA_ERR("coldload: the log did not settle in %.0f s",
		COLD_SETTLE_MAX_S);
	return -1;
}

/* Fill the store; the store's memory before and after in *before, *after
 * (and, with --settle, what settling measured in *s). */
static int fill_store(const struct nsa_config *conf, const struct nsb_opts *o,
		      struct nsa_storemem *before, struct nsa_storemem *after,
		      double *seconds, struct settle *s)
{
	static struct nsa_config fconf;
	struct nsa_source src = {0};
	struct nsa_active *active = NULL;
	struct nsa_active_stats st;
	int rc = -1;

	fconf = *conf;
	fconf.source_type = NSA_SOURCE_NONE;
	if (o->flush && nsa_storemem_flush(&conf->store) != 0)
		return -1;
	if (nsa_storemem_probe(&conf->store, before) != 0)
		return -1;
	if (before->keys)
		NSA_WARN("coldload: the store holds %" PRIu64 " keys already "
			 "(--flush empties it): the standby loads them too",
			 before->keys);
	if (nsa_source_open(&src, &fconf) != 0)
		goto out;
	active = nsb_writers_start(&fconf, &src, "coldload");
	if (!active)
		goto out;
	if (fill(&fconf, &src, active, o->sessions, seconds) != 0)
		goto out;
	nsa_active_stats(active, &st);
	if (st.dropped || st.lane_drops) {
		NSA_ERR("coldload: %" PRIu64 " records dropped",
			st.dropped + st.lane_drops);
		goto out;
	}
	if (o->settle && settle_log(conf, active, s) != 0)
		goto out;
	rc = 0;
out:
	nsb_writers_stop(active);
	nsa_source_close(&src);
	if (rc == 0) {
		nsdp_sleep_ms(NSB_CLIENTS_GONE_MS);
		rc = nsa_storemem_probe(&conf->store, after);
	}
	return rc;
}

int nsb_coldload(const struct nsa_config *conf, const struct nsb_opts *o)
{
	static struct nsa_config sconf;
	struct nsa_storemem before, after;
	const int log = conf->store.layout == NSA_LAYOUT_LOG;
	struct settle settled = {0};
	uint64_t want;
	struct nsb_result r;
	struct nsa_standby *sb = NULL;
	struct nsa_standby_stats st = {0};
	struct nsdp_table_stats ts = {0};
	double fill_s = 0, t0 = 0, t_created = 0, t_synced = 0;
	uint64_t capacity;
	int rc = 1;

	nsb_result_init(&r, "coldload", conf);
	r.value_bytes = (double)ns_record_wire_len(NS_FAMILY_IPV4);
	if (o->sessions > COLD_MAX_SESSIONS) {
		NSA_ERR("coldload: at most %llu sessions", COLD_MAX_SESSIONS);
		return 1;
	}
	if (o->settle && !log) {
		NSA_ERR("coldload: --settle is for --layout log");
		return 1;
	}
	if (fill_store(conf, o, &before, &after, &fill_s, &settled) != 0)
		goto print;
	/* The log layout's keys are segments: per session, not per key. */
	want = log ? o->sessions : after.keys;
	r.store_bytes_per_session =
		log ? (after.used_memory > before.used_memory && !before.keys
			       ? (double)(after.used_memory -
					  before.used_memory) /
					 (double)o->sessions
			       : -1)
		    : nsa_storemem_per_key(&before, &after);
	fprintf(stderr,
		"natsync-bench: coldload: %" PRIu64 " sessions written in "
		"%.3f s; starting a fresh standby\n",
		o->sessions, fill_s);

	capacity = want + want / 4;
	sconf = *conf;
	sconf.role = NSA_ROLE_STANDBY;
	sconf.table_capacity = capacity < 1024 ? 1024 : (unsigned int)capacity;
	t0 = nsdp_now_s();
	sb = nsa_standby_create(&sconf);
	t_created = nsdp_now_s();
	if (!sb || nsa_standby_start(sb) != 0) {
		NSA_ERR("coldload: cannot start the standby");
		goto print;
	}
	if (nsb_standby_wait_synced(sb, t0, COLD_SYNC_TIMEOUT_S, 1, &st,
				    "coldload") != 0)
		goto print;
	t_synced = nsdp_now_s();
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	r.events = st.loaded;
	r.live = ts.live;
	r.seconds = t_synced - t0;
	r.table_bytes_per_slot =
		(double)ts.memory_bytes / (double)sconf.table_capacity;
	if (ts.live)
		r.table_bytes_per_session =
			(double)ts.memory_bytes / (double)ts.live;
	rc = ts.live == want ? 0 : 1;
	if (rc)
		NSA_ERR("coldload: the standby holds %" PRIu64
			" sessions, the store %" PRIu64 " %s",
			ts.live, want, log ? "sessions" : "keys");
print:
	if (sb) {
		nsa_standby_stop(sb);
		nsa_standby_free(sb);
	}
	printf("RESULT mode=coldload sessions=%" PRIu64
	       " seconds=%.3f rate=%.0f loaded=%" PRIu64
	       " create_seconds=%.3f fill_seconds=%.3f fill_rate=%.0f"
	       " workers=%u batch=%u inflight=%u table_capacity=%u"
	       " load_values=%" PRIu64 " load_bytes=%" PRIu64,
	       o->sessions, r.seconds, nsb_rate(&r), r.events,
	       t_created > 0 ? t_created - t0 : 0.0, fill_s,
	       fill_s > 0 ? (double)o->sessions / fill_s : 0.0, r.workers,
	       r.batch, r.inflight, sconf.table_capacity, st.load_values,
	       st.load_bytes);
	if (r.store_bytes_per_session >= 0)
		printf(" store_bytes_per_session=%.1f",
		       r.store_bytes_per_session);
	else
		printf(" store_bytes_per_session=n/a");
	if (r.table_bytes_per_session >= 0)
		printf(" table_bytes_per_slot=%.1f "
		       "table_bytes_per_session=%.1f",
		       r.table_bytes_per_slot, r.table_bytes_per_session);
	else
		printf(" table_bytes_per_slot=n/a table_bytes_per_session=n/a");
	if (o->settle && settled.used_end && !before.keys)
		printf(" settled_store_bytes_per_session=%.1f "
		       "peak_store_bytes_per_session=%.1f settle_seconds=%.1f "
		       "settled_keys=%" PRIu64 " compactions=%" PRIu64
		       " compact_peak_bytes=%" PRIu64,
		       (double)(settled.used_end - before.used_memory) /
			       (double)o->sessions,
		       (double)(settled.used_peak - before.used_memory) /
			       (double)o->sessions,
		       settled.seconds, settled.keys_end, settled.compactions,
		       settled.compact_peak);
	printf("\n");
	fflush(stdout);
	if (o->csv)
		nsb_csv_append(o->csv, &r, o->sessions);
	return rc;
}
