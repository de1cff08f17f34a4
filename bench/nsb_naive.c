/*
 * nsb_naive.c - natsync-bench's naive mode: the classic way a gateway
 * without natsync replicates, for comparison on the same stream.
 *
 * The same synthetic source fills one lane; this thread drains it and, per
 * event, sends one synchronous SET (or DEL) of the session as a JSON value
 * and one synchronous PUBLISH of that JSON, on one blocking connection to
 * the first seed. value_bytes in the RESULT line is the mean JSON length.
 *
 * Not here: a cluster client (a plain server is expected), a standby.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <hiredis/hiredis.h>
#include <rte_ring.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsb_bench.h"
#include "nsa_cluster.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsdp_synth.h"
#include "nsdp_time.h"

#define NAIVE_CHANNEL "ns:naive"
#define NAIVE_BURST 64

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

/* Replicate one event; returns the JSON length or a negative errno. */
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
	if (naive_command(c, "PUBLISH",
			  redisCommand(c, "PUBLISH " NAIVE_CHANNEL " %b", json,
				       (size_t)len)) != 0)
		return -EIO;
	return len;
}

static void no_op(const struct ns_session *s, void *arg)
{
	(void)s;
	(void)arg;
}

int nsb_naive(const struct nsa_config *conf, const struct nsb_opts *o)
{
	struct nsb_result res;
	struct nsa_source src = {0};
	struct nsdp_synth_stats ss = {0};
	struct ns_session burst[NAIVE_BURST];
	redisContext *c = NULL;
	char err[256];
	uint64_t done = 0, last_done = 0, json_bytes = 0, sets = 0;
	double t0, last;
	int rc = 1, failed = 0;

	nsb_result_init(&res, "naive", conf);
	c = nsa_store_connect(&conf->store, &conf->store.seeds[0], err,
			      sizeof(err));
	if (!c) {
		NSA_ERR("naive: %s:%u: %s", conf->store.seeds[0].host,
			conf->store.seeds[0].port, err);
		goto print;
	}
	if (o->flush && nsa_storemem_flush(&conf->store) != 0)
		goto out;
	if (nsa_source_open(&src, conf) != 0)
		goto out;
	t0 = nsdp_now_s();
	last = t0;
	nsa_source_start(&src);
	while (!failed) {
		unsigned int n =
			nsdp_lane_drain(src.lanes[0], burst, NAIVE_BURST);
		double t;

		for (unsigned int i = 0; i < n && !failed; i++) {
			int len = naive_replicate(c, &burst[i]);

			failed = len < 0;
			if (!failed && burst[i].event != NS_EV_DELETE) {
				json_bytes += (uint64_t)len;
				sets++;
			}
			done++;
		}
		if (n == 0) {
			nsdp_synth_stats(src.synth, &ss);
			/* done is set after the last event was enqueued. */
			if (ss.done && rte_ring_empty(src.lanes[0]->ring))
				break;
		}
		t = nsdp_now_s();
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
	res.seconds = nsdp_now_s() - t0;
	nsa_source_stop(&src);
	nsdp_synth_stats(src.synth, &ss);
	res.events = done;
	res.drops = ss.dropped + src.lanes[0]->dropped;
	res.live = nsdp_synth_final_table(src.synth, no_op, NULL);
	res.value_bytes = sets ? (double)json_bytes / (double)sets : 0.0;
	rc = failed ? 1 : 0;
out:
	nsa_source_close(&src);
	redisFree(c);
print:
	nsb_result_print(&res);
	if (o->csv)
		nsb_csv_append(o->csv, &res, conf->synth_conf.flows);
	return rc;
}
