/*
 * test_mxformat.c - the Prometheus text exposition writer and the
 * [metrics] listen parser (agent/ops/nsa_metrics.h), without a server.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nsa_metrics_roles.h"
#include "nst_store.h"

Test(mxformat, label_values_are_escaped_and_base_labels_come_first)
{
	struct nsa_mx m = {0};

	nsa_mx_reset(&m, "standby", 7);
	nsa_mx_family(&m, "natsync_x_total", "counter",
		      "Help with \\ and\nnewline.");
	nsa_mx_sample(&m, "natsync_x_total", 42, "master", "a\"b\\c\nd", NULL);
	cr_assert_str_eq(
		m.buf, "# HELP natsync_x_total Help with \\\\ and\\nnewline.\n"
		       "# TYPE natsync_x_total counter\n"
		       "natsync_x_total{role=\"standby\",gateway_id=\"7\","
		       "master=\"a\\\"b\\\\c\\nd\"} 42\n");
	nsa_mx_free(&m);
}

/* A table's rows render as the calls they stand for: a counter of one
 * sample, then a family whose samples carry its label names. */
struct nst_mx_stats {
	uint64_t sent, lost_early, lost_late;
};

#define NSA_MX_STRUCT struct nst_mx_stats
static const struct nsa_mx_row nst_mx_rows[] = {
	NSA_MX_COUNTER(sent, "natsync_sent_total", "Sent."),
	NSA_MX_FAMILY2("natsync_lost_total", "counter", "when", "why", "Lost."),
	NSA_MX_SAMPLE2(lost_early, "early", "a"),
	NSA_MX_SAMPLE2(lost_late, "late", "b"),
};
#undef NSA_MX_STRUCT

Test(mxformat, a_table_renders_its_families_in_order_with_labelled_samples)
{
	const struct nst_mx_stats st = {7, 8, 9};
	struct nsa_mx m = {0};

	nsa_mx_reset(&m, "active", 2);
	nsa_mx_table(&m, nst_mx_rows, 4, &st);
	cr_assert_str_eq(
		m.buf,
		"# HELP natsync_sent_total Sent.\n"
		"# TYPE natsync_sent_total counter\n"
		"natsync_sent_total{role=\"active\",gateway_id=\"2\"} 7\n"
		"# HELP natsync_lost_total Lost.\n"
		"# TYPE natsync_lost_total counter\n"
		"natsync_lost_total{role=\"active\",gateway_id=\"2\","
		"when=\"early\",why=\"a\"} 8\n"
		"natsync_lost_total{role=\"active\",gateway_id=\"2\","
		"when=\"late\",why=\"b\"} 9\n");
	nsa_mx_free(&m);
}

Test(mxformat, histogram_buckets_are_cumulative_and_inf_equals_count)
{
	static const double le[] = {0.001, 0.01};
	static const uint64_t counts[] = {3, 4};
	struct nsa_mx m = {0};

	nsa_mx_reset(&m, "standby", 1);
	nsa_mx_histogram(&m, "natsync_lag_seconds", "Lag.", le, counts, 2, 5,
			 0.5);
	cr_assert(strstr(m.buf, "natsync_lag_seconds_bucket{role=\"standby\","
				"gateway_id=\"1\",le=\"0.001\"} 3\n"));
	cr_assert(strstr(m.buf, ",le=\"0.01\"} 7\n"));
	cr_assert(strstr(m.buf, ",le=\"+Inf\"} 12\n"));
	cr_assert(strstr(m.buf, "natsync_lag_seconds_sum{role=\"standby\","
				"gateway_id=\"1\"} 0.5\n"));
	cr_assert(strstr(m.buf, "natsync_lag_seconds_count{role=\"standby\","
				"gateway_id=\"1\"} 12\n"));
	nsa_mx_free(&m);
}

Test(mxformat, an_exposition_passes_promtool)
{
	static const double le[] = {0.0001, 0.001};
	static const uint64_t counts[] = {1, 2};
	struct nsa_mx m = {0};
	char path[] = "/tmp/nst-mxformat-XXXXXX";
	int fd = mkstemp(path);
	FILE *f;

	cr_assert_geq(fd, 0);
	nsa_mx_reset(&m, "active", 1);
	nsa_metrics_common(&m, 3, 1);
	nsa_metrics_active(&m, NULL);
	nsa_mx_histogram(&m, "natsync_replication_lag_seconds", "Lag.", le,
			 counts, 2, 0, 0.001);
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	fputs(m.buf, f);
	fclose(f);
	cr_assert_eq(nst_sh("promtool check metrics <%s >&2", path), 0);
	unlink(path);
	nsa_mx_free(&m);
}

Test(mxformat, listen_takes_ipv4_and_bracketed_ipv6_with_a_port)
{
	static const char *const good[] = {"127.0.0.1:9464", "0.0.0.0:1",
					   "[::1]:65535", "[::]:9464"};
	static const char *const bad[] = {
		"",
		"127.0.0.1",
		"127.0.0.1:",
		"127.0.0.1:0",
		"1.2.3.4:65536",
		":9464",
		"::1:9464",
		"[::1]9464",
		"[::1]:",
		"host:9464",
		"127.0.0.1:9x",
		"127.0.0.1:-1",
	};
	struct sockaddr_storage ss;
	char err[256];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_eq(nsa_metrics_parse_listen(good[i], &ss, err,
						      sizeof(err)),
			     0, "%s refused: %s", good[i], err);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		cr_assert_eq(
			nsa_metrics_parse_listen(bad[i], &ss, err, sizeof(err)),
			-1, "'%s' accepted", bad[i]);
		cr_assert(strstr(err, "[metrics] listen"), "%s", err);
	}
}

/* Every query of deploy/grafana/natsync-dashboard.json parses as PromQL:
 * promtool checks them as recording rules, Grafana's variables replaced.
 * (That each metric they name exists is checked on real scrapes, in the
 * metrics suite.) */
Test(mxformat, the_dashboards_queries_parse)
{
	const char *dash = nst_src("deploy/grafana/natsync-dashboard.json");
	char rules[] = "/tmp/nst-dashrules-XXXXXX";
	int fd = mkstemp(rules), n_expr, n_rules;

	cr_assert_geq(fd, 0);
	close(fd);
	n_expr = nst_sh("exit $(grep -c '\"expr\": ' %s)", dash);
	cr_assert_gt(n_expr, 20, "%d queries in %s", n_expr, dash);
	cr_assert_eq(
		nst_sh("{ printf 'groups:\\n- name: dashboard\\n  rules:\\n'; "
		       "i=0; sed -n 's/^ *\"expr\": \"\\(.*\\)\",\\{0,1\\}$/\\1/p' "
		       "%s | sed -e 's/\\\\\"/\"/g' "
		       "-e 's/\\$__rate_interval/1m/g' "
		       "-e 's/\\$gateway_id/.*/g' | "
		       "while IFS= read -r e; do i=$((i+1)); "
		       "printf '  - record: natsync:dashboard_%%d\\n' $i; "
		       "printf \"    expr: '%%s'\\n\" \"$e\"; done; } >%s",
		       dash, rules),
		0);
	n_rules = nst_sh("exit $(grep -c '^  - record: ' %s)", rules);
	cr_assert_eq(n_rules, n_expr, "%d of %d queries written as rules",
		     n_rules, n_expr);
	cr_assert_eq(nst_sh("promtool check rules %s >&2", rules), 0,
		     "promtool rejects a query of the dashboard (%s)", rules);
	unlink(rules);
}
