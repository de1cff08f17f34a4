/*
 * test_e2e.c - the whole replication path through the real programs:
 * natsync-agent as active (synthetic DPDK source, lanes, writers) and as
 * standby, real redis-server stores, and natsync-verify as the judge of the
 * source's final table against the store and the standby's table.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nst_store.h"

#define CLUSTER_PORT 7400
#define PLAIN_PORT 7410
#define LATE_PORT 7420

static void write_configs(const char *seeds, unsigned long flows,
			  unsigned long events, unsigned long rate)
{
	char text[2048];

	snprintf(text, sizeof(text),
		 "[agent]\nrole = standby\ngateway_id = 2\nprogress_ms = 0\n"
		 "eal_args = --no-huge --no-shconf -m 512 --no-pci "
		 "--no-telemetry -l 0\n"
		 "[store]\nseeds = %s\n"
		 "[standby]\ntable_capacity = %lu\ndump = %s\n",
		 seeds, flows * 2, nst_run_path("standby.tbl"));
	nst_write_file(nst_run_path("standby.ini"), text);
	snprintf(text, sizeof(text),
		 "[agent]\nrole = active\ngateway_id = 1\nprogress_ms = 0\n"
		 "eal_args = --no-huge --no-shconf -m 256 --no-pci "
		 "--no-telemetry -l 0-1\n"
		 "[store]\nseeds = %s\n"
		 "[rings]\nlanes = 1\n"
		 "[source]\ntype = synth\nflows = %lu\nevents = %lu\n"
		 "rate = %lu\nseed = 7\nrefresh_pct = 50\ndump = %s\n",
		 seeds, flows, events, rate, nst_run_path("source.tbl"));
	nst_write_file(nst_run_path("active.ini"), text);
}

static int start_standby(void)
{
	char line[64] = "";
	FILE *f;

	nst_sh("%s -c %s >%s 2>%s & echo $! >%s",
	       nst_build("tools/natsync-agent"), nst_run_path("standby.ini"),
	       nst_run_path("standby.out"), nst_run_path("standby.log"),
	       nst_run_path("standby.pid"));
	f = fopen(nst_run_path("standby.pid"), "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	return atoi(line);
}

static void wait_synced(int pid)
{
	for (int i = 0; i < 300; i++) {
		if (nst_sh("grep -q 'standby: synced' %s",
			   nst_run_path("standby.log")) == 0)
			return;
		cr_assert_eq(kill(pid, 0), 0, "the standby died; see %s",
			     nst_run_path("standby.log"));
		usleep(100000);
	}
	cr_assert_fail("the standby did not sync within 30 s");
}

static void stop_standby(int pid)
{
	kill(pid, SIGTERM);
	for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
		usleep(100000);
	kill(pid, SIGKILL);
}

static void verify_exact(const char *seeds, int standby_pid)
{
	int rc = nst_sh("%s -S %s -s %s -b %s -p %d -t 30 >%s 2>&1",
			nst_build("tools/natsync-verify"), seeds,
			nst_run_path("source.tbl"), nst_run_path("standby.tbl"),
			standby_pid, nst_run_path("verify.out"));

	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	cr_assert_eq(rc, 0, "store or standby differ from the source");
	cr_assert_eq(
		nst_sh("grep -q 'match=yes' %s", nst_run_path("verify.out")),
		0);
}

static void run_end_to_end(int port, int masters, const char *name)
{
	char seeds[256];
	int pid, rc;

	nst_run_dir_make(name);
	if (masters)
		snprintf(seeds, sizeof(seeds),
			 "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", port,
			 port + 1, port + 2);
	else
		snprintf(seeds, sizeof(seeds), "127.0.0.1:%d", port);
	cr_assert_eq(nst_store_start(port, masters, 0), 0);
	write_configs(seeds, 200000, 500000, 0);
	pid = start_standby();
	wait_synced(pid);
	rc = nst_sh("%s -c %s >%s 2>%s", nst_build("tools/natsync-agent"),
		    nst_run_path("active.ini"), nst_run_path("active.out"),
		    nst_run_path("active.log"));
	nst_sh("cat %s >&2", nst_run_path("active.out"));
	cr_assert_eq(rc, 0, "the active agent failed; see %s",
		     nst_run_path("active.log"));
	cr_assert_eq(
		nst_sh("grep -q 'drained=yes' %s", nst_run_path("active.out")),
		0);
	cr_assert_eq(
		nst_sh("grep -q ' drops=0 ' %s", nst_run_path("active.out")),
		0);
	verify_exact(seeds, pid);
	stop_standby(pid);
	cr_assert_eq(nst_sh("grep -q 'bad_messages=0' %s",
			    nst_run_path("standby.out")),
		     0);
}

static void stop_all(void)
{
	nst_store_stop(CLUSTER_PORT);
	nst_store_stop(PLAIN_PORT);
	nst_store_stop(LATE_PORT);
}

TestSuite(e2e, .fini = stop_all, .timeout = 240);

Test(e2e, cluster_standby_table_equals_source_after_200k_flows)
{
	run_end_to_end(CLUSTER_PORT, 3, "e2e-cluster");
}

Test(e2e, plain_server_standby_table_equals_source)
{
	run_end_to_end(PLAIN_PORT, 0, "e2e-plain");
}

Test(e2e, late_standby_converges_while_the_active_keeps_writing)
{
	const char *seeds = "127.0.0.1:7420,127.0.0.1:7421,127.0.0.1:7422";
	int pid, rc;

	nst_run_dir_make("e2e-late");
	cr_assert_eq(nst_store_start(LATE_PORT, 3, 0), 0);
	/* 100 000 events/s for 8 s: the standby starts once the store holds
	 * 100 000 sessions, and loads while the active goes on writing. */
	write_configs(seeds, 200000, 800000, 100000);
	nst_sh("%s -c %s >%s 2>%s & echo $! >%s",
	       nst_build("tools/natsync-agent"), nst_run_path("active.ini"),
	       nst_run_path("active.out"), nst_run_path("active.log"),
	       nst_run_path("active.pid"));
	rc = nst_sh("for i in $(seq 200); do n=0; for p in 7420 7421 7422; do "
		    "n=$((n + $(redis-cli -p $p dbsize))); done; "
		    "[ $n -ge 100000 ] && exit 0; sleep 0.1; done; exit 1");
	cr_assert_eq(rc, 0, "the store never held 100 000 sessions");
	pid = start_standby();
	wait_synced(pid);
	rc = nst_sh("for i in $(seq 600); do "
		    "grep -q '^REPORT' %s && exit 0; sleep 0.1; done; exit 1",
		    nst_run_path("active.out"));
	cr_assert_eq(rc, 0, "the active agent did not finish in 60 s");
	nst_sh("cat %s >&2", nst_run_path("active.out"));
	cr_assert_eq(
		nst_sh("grep -q 'drained=yes' %s", nst_run_path("active.out")),
		0);
	verify_exact(seeds, pid);
	stop_standby(pid);
}

Test(cli, bad_configuration_exits_2_with_a_message_naming_it)
{
	nst_run_dir_make("cli");
	nst_write_file(nst_run_path("bad.ini"),
		       "[active]\nbatch_size = zero\n");
	cr_assert_eq(nst_sh("%s -c %s 2>%s", nst_build("tools/natsync-agent"),
			    nst_run_path("bad.ini"), nst_run_path("err")),
		     2);
	cr_assert_eq(nst_sh("grep -q 'batch_size' %s", nst_run_path("err")), 0);
	cr_assert_eq(nst_sh("%s -c %s/nonexistent.ini 2>/dev/null",
			    nst_build("tools/natsync-agent"), nst_run_dir()),
		     2);
	cr_assert_eq(nst_sh("%s --set active.nosuchkey=1 2>/dev/null",
			    nst_build("tools/natsync-agent")),
		     2);
	cr_assert_eq(nst_sh("%s --bogus 2>/dev/null",
			    nst_build("tools/natsync-verify")),
		     2);
	cr_assert_eq(nst_sh("%s --help | grep -q -- --config",
			    nst_build("tools/natsync-agent")),
		     0);
	cr_assert_eq(nst_sh("%s --version | grep -q natsync-agent",
			    nst_build("tools/natsync-agent")),
		     0);
}

Test(cli, unreachable_store_is_retried_with_backoff_without_spinning)
{
	char text[512];

	nst_run_dir_make("cli-unreachable");
	/* Nothing listens on 7439. */
	snprintf(text, sizeof(text),
		 "[agent]\nrole = standby\nprogress_ms = 0\n"
		 "eal_args = --no-huge --no-shconf -m 128 --no-pci "
		 "--no-telemetry -l 0\n"
		 "[store]\nseeds = 127.0.0.1:7439\n"
		 "[standby]\ntable_capacity = 1024\n");
	nst_write_file(nst_run_path("sb.ini"), text);
	/* 3 s of retrying must cost well under a second of CPU. */
	cr_assert_eq(nst_sh("cd %s && /usr/bin/time -f '%%U %%S' -o cpu "
			    "%s -c sb.ini -t 3 >out 2>log",
			    nst_run_dir(), nst_build("tools/natsync-agent")),
		     0);
	cr_assert_eq(nst_sh("grep -qi 'refused' %s", nst_run_path("log")), 0,
		     "the log does not say why the store is unreachable");
	cr_assert_eq(nst_sh("awk '{ exit !($1 + $2 < 0.5) }' %s",
			    nst_run_path("cpu")),
		     0, "the agent spun while the store was unreachable");
}
