/*
 * nst_agents.c - run the real agent programs for the end-to-end and fault
 * suites, the way an operator does: configuration files, processes in the
 * background, their logs as the only channel back. The suites own what
 * they start (and kill it); nothing here kills a process.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ns_record.h"
#include "nsdp_time.h"
#include "nst_agents.h"
#include "nst_store.h"

/* [store] layout of the agents and natsync-verify (nst_agents_layout). */
static const char *agents_layout = "keys";

void nst_agents_layout(const char *layout)
{
	agents_layout = layout;
}

int nst_agent_ini(char *text, size_t size, const char *role,
		  unsigned int gateway_id, unsigned int progress_ms,
		  unsigned int mb, const char *lcores, const char *seeds)
{
	int n = snprintf(text, size,
			 "[agent]\nrole = %s\ngateway_id = %u\n"
			 "progress_ms = %u\n"
			 "eal_args = --no-huge --no-shconf -m %u --no-pci "
			 "--no-telemetry -l %s\n"
			 "[store]\nseeds = %s\n",
			 role, gateway_id, progress_ms, mb, lcores, seeds);

	cr_assert(n > 0 && (size_t)n < size, "%s.ini does not fit", role);
	return n;
}

size_t nst_layouts(struct nst_layout *p)
{
	const char *only = getenv("NATSYNC_TEST_LAYOUT");
	size_t n = 0;

	if (!only || !*only || strcmp(only, "log") != 0)
		snprintf(p[n++].name, sizeof(p->name), "keys");
	if (!only || !*only || strcmp(only, "keys") != 0)
		snprintf(p[n++].name, sizeof(p->name), "log");
	return n;
}

const char *nst_layout_one(void)
{
	const char *only = getenv("NATSYNC_TEST_LAYOUT");

	return only && strcmp(only, "keys") == 0 ? "keys" : "log";
}

void nst_agents_configure(const char *seeds, const struct nst_source_plan *p,
			  unsigned int progress_ms)
{
	char text[2048];
	int n;

	n = nst_agent_ini(text, sizeof(text), "standby", 2, progress_ms, 512,
			  "0", seeds);
	snprintf(text + n, sizeof(text) - n,
		 "layout = %s\n"
		 "[standby]\ntable_capacity = %lu\ndump = %s\n",
		 agents_layout, p->flows * 2, nst_run_path("standby.tbl"));
	nst_write_file(nst_run_path("standby.ini"), text);
	n = nst_agent_ini(text, sizeof(text), "active", 1, progress_ms, 256,
			  "0-1", seeds);
	snprintf(text + n, sizeof(text) - n,
		 "layout = %s\n"
		 "[rings]\nlanes = 1\n"
		 "[source]\ntype = synth\nflows = %lu\nevents = %lu\n"
		 "rate = %lu\nseed = 7\nrefresh_pct = 50\n"
		 "wait_when_full = %s\ndump = %s\n",
		 agents_layout, p->flows, p->events, p->rate,
		 p->drop_when_full ? "no" : "yes", nst_run_path("source.tbl"));
	nst_write_file(nst_run_path("active.ini"), text);
}

int nst_read_pid(const char *path)
{
	char line[64] = "";
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "no pid file %s", path);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	return atoi(line);
}

int nst_spawn(const char *program, const char *name, const char *args,
	      int append)
{
	char ini[64], out[64], log[64], pidf[64];

	snprintf(ini, sizeof(ini), "%s.ini", name);
	snprintf(out, sizeof(out), "%s.out", name);
	snprintf(log, sizeof(log), "%s.log", name);
	snprintf(pidf, sizeof(pidf), "%s.pid", name);
	/* Emptied here, not by the background shell's redirection: that one
	 * may run after the caller already looks for the new program's lines
	 * and finds the last one's. */
	if (!append)
		nst_sh(": >%s; : >%s", nst_run_path(out), nst_run_path(log));
	nst_sh("%s -c %s %s >>%s 2>>%s & echo $! >%s", program,
	       nst_run_path(ini), args, nst_run_path(out), nst_run_path(log),
	       nst_run_path(pidf));
	return nst_read_pid(nst_run_path(pidf));
}

int nst_agent_spawn(const char *name, const char *args)
{
	return nst_spawn(nst_build("tools/natsync-agent"), name, args, 0);
}

/* Threads of process pid still listed in /proc (a zombie leader stays
 * listed until it is reaped). */
static int task_count(int pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int nst_running(int pid)
{
	char path[64], buf[512];
	const char *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')'. */
	end = strrchr(buf, ')');
	if (end == NULL || end[1] != ' ')
		return 0;
	if (end[2] != 'Z' && end[2] != 'X')
		return 1;
	/* A zombie leader whose other threads still exit: they hold its
	 * files (sockets, queues) until the last one is gone. */
	return task_count(pid) > 1;
}

void nst_wait_synced(int standby_pid)
{
	for (int i = 0; i < 300; i++) {
		if (nst_sh("grep -q 'standby: synced' %s",
			   nst_run_path("standby.log")) == 0)
			return;
		cr_assert(nst_running(standby_pid), "the standby died; see %s",
			  nst_run_path("standby.log"));
		nsdp_sleep_ms(100);
	}
	cr_assert_fail("the standby did not sync within 30 s");
}

int nst_wait_report(int secs)
{
	return nst_sh("for i in $(seq %d); do grep -q '^REPORT' %s && "
		      "exit 0; sleep 0.1; done; exit 1",
		      secs * 10, nst_run_path("active.out"));
}

int nst_run_file_has(const char *file, const char *pattern)
{
	return nst_sh("grep -q '%s' %s", pattern, nst_run_path(file)) == 0;
}

unsigned long nst_report_field(const char *path, const char *name)
{
	char line[4096], key[64];
	unsigned long v = ~0UL;
	FILE *f = fopen(path, "r");
	char *at;

	cr_assert_not_null(f, "%s", path);
	snprintf(key, sizeof(key), " %s=", name);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "REPORT", 6) && (at = strstr(line, key)))
			v = strtoul(at + strlen(key), NULL, 10);
	fclose(f);
	cr_assert_neq(v, ~0UL, "no %s in a REPORT line of %s", name, path);
	return v;
}

void nst_verify_counts(unsigned long *store, unsigned long *source,
		       unsigned long *standby)
{
	char line[256];
	int found = 0;
	FILE *f = fopen(nst_run_path("verify.out"), "r");

	cr_assert_not_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line,
			       "RESULT verify store=%lu source=%lu standby=%lu",
			       store, source, standby) == 3;
	fclose(f);
	cr_assert(found, "natsync-verify printed no RESULT; see %s",
		  nst_run_path("verify.out"));
}

void nst_verify_exact(const char *seeds, int standby_pid,
		      unsigned long min_sessions)
{
	unsigned long store = 0, source = 0, standby = 0;
	int rc = nst_sh("%s -S %s -L %s -s %s -b %s -p %d -t 30 >%s 2>&1",
			nst_build("tools/natsync-verify"), seeds, agents_layout,
			nst_run_path("source.tbl"), nst_run_path("standby.tbl"),
			standby_pid, nst_run_path("verify.out"));

	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	cr_assert_eq(rc, 0, "store or standby differ from the source; see %s",
		     nst_run_path("verify.out"));
	cr_assert(nst_run_file_has("verify.out", "match=yes"));
	/* Empty tables are equal too: a run that replicated nothing (or a
	 * source that dumped nothing) must not pass. */
	cr_assert_gt(min_sessions, 0);
	nst_verify_counts(&store, &source, &standby);
	cr_assert_geq(source, min_sessions,
		      "the source's table holds %lu sessions, fewer than %lu",
		      source, min_sessions);
	cr_assert_eq(store, source);
	cr_assert_eq(standby, source);
}

/* The first line of a file of the run directory into line (newline cut). */
static void first_line(const char *file, char *line, size_t cap)
{
	FILE *f = fopen(nst_run_path(file), "r");

	cr_assert_not_null(f, "no %s", nst_run_path(file));
	if (fgets(line, (int)cap, f) == NULL)
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
}

static int verify_get(const char *seeds, const char *tuple)
{
	return nst_sh("%s -S %s -L %s --get %s >%s 2>&1",
		      nst_build("tools/natsync-verify"), seeds, agents_layout,
		      tuple, nst_run_path("get.out"));
}

static void tuple_text(const struct ns_session *s, char *buf, size_t cap)
{
	const struct ns_tuple *t = &s->orig;

	snprintf(buf, cap, "%u:%u.%u.%u.%u:%u-%u.%u.%u.%u:%u", s->proto,
		 t->saddr >> 24, (t->saddr >> 16) & 0xff,
		 (t->saddr >> 8) & 0xff, t->saddr & 0xff, t->sport,
		 t->daddr >> 24, (t->daddr >> 16) & 0xff,
		 (t->daddr >> 8) & 0xff, t->daddr & 0xff, t->dport);
}

void nst_verify_get(const char *seeds, unsigned int n)
{
	const size_t len = ns_record_wire_len(NS_FAMILY_IPV4);
	FILE *f = fopen(nst_run_path("source.tbl"), "rb");
	uint8_t buf[NS_RECORD_MAX_LEN];
	char tuple[96], want[512], got[512];
	struct ns_session s;
	long records;

	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	records = ftell(f) / (long)len;
	cr_assert_geq(records, (long)n);
	for (unsigned int i = 0; i < n; i++) {
		long at = records / (long)n * (long)i;

		cr_assert_eq(fseek(f, at * (long)len, SEEK_SET), 0);
		cr_assert_eq(fread(buf, 1, len, f), len);
		cr_assert_gt(ns_record_decode(buf, len, &s), 0);
		tuple_text(&s, tuple, sizeof(tuple));
		cr_assert_eq(verify_get(seeds, tuple), 0, "--get %s; see %s",
			     tuple, nst_run_path("get.out"));
		cr_assert_gt(ns_record_to_json(&s, want, sizeof(want)), 0);
		first_line("get.out", got, sizeof(got));
		cr_assert_str_eq(got, want, "--get %s", tuple);
	}
	fclose(f);
	/* TEST-NET-1 and port 1: no source flow has it. */
	cr_assert_eq(verify_get(seeds, "udp:192.0.2.1:1-192.0.2.2:1"), 1);
	first_line("get.out", got, sizeof(got));
	cr_assert(strstr(got, "not in the store"), "%s", got);
	cr_assert_eq(verify_get(seeds, "tcp:192.0.2.1:1"), 2);
}
