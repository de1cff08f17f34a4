/*
 * test_secondary.c - natsync-agent as a separate DPDK secondary process.
 *
 * The test process plays the gateway: it is the DPDK primary process
 * (hugepages, --file-prefix natsync_sectest), creates lane 0 and records
 * sessions into it with nsdp_record(). deploy/agent-secondary.sh starts
 * natsync-agent, which finds the lane by name in the primary's shared memory
 * and replicates it to a plain redis-server. The store must end with exactly
 * the last record of every flow; killing the agent must never block or slow
 * the producer (a full ring drops and counts); a new agent resumes with what
 * the ring kept; an agent whose gateway dies replicates what is left and
 * exits; and the agent refuses configurations that cannot work.
 *
 * Criterion runs each test in its own forked process, one after another
 * (--jobs 1): each test process initialises EAL at most once, as the
 * primary (the test of a dying gateway forks a child to be the primary
 * instead), and the suite's fini kills every process the test started and
 * releases EAL and the hugepage files of the prefix. The hugepages come
 * from deploy/hugepages.sh; without root the tests are skipped, saying so.
 *
 * Not here: natsync-gateway itself; the test records with the lane API its
 * fast path uses.
 *
 * Ports: 7030-7032, plain servers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_host.h"
#include "nsdp_lane.h"
#include "nst_session.h"
#include "nst_skip.h"
#include "nst_store.h"
#include "nsdp_time.h"

#define PREFIX "natsync_sectest"
#define HUGEPAGES "128"
#define PORT_REPLICATE 7030
#define PORT_RESUME 7031
#define PORT_GONE 7032

#define N_FLOWS 20000u
#define SESSION_TIMEOUT_MS 300000u
#define MAX_CHILDREN 8

static char huge_dir[512];
static int eal_up;
static pid_t children[MAX_CHILDREN];
static int used_ports[4];
static unsigned int n_used_ports;

/* ---- processes -------------------------------------------------------- */

static void child_add(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == 0) {
			children[i] = pid;
			return;
		}
	cr_assert_fail("too many child processes");
}

static void child_forget(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid)
			children[i] = 0;
}

/* Wait at most timeout_ms for pid to end; 1 with its wait status, or 0. */
static int child_wait(pid_t pid, unsigned int timeout_ms, int *status)
{
	double deadline = nsdp_now_s() + timeout_ms / 1000.0;

	do {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid) {
			child_forget(pid);
			return 1;
		}
		cr_assert_geq(r, 0, "waitpid %d: %s", (int)pid,
			      strerror(errno));
		nsdp_sleep_ms(20);
	} while (nsdp_now_s() < deadline);
	return 0;
}

static int child_alive(pid_t pid)
{
	int status;

	return waitpid(pid, &status, WNOHANG) == 0;
}

static void children_kill(void)
{
	int status;

	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (children[i] <= 0)
			continue;
		kill(children[i], SIGKILL);
		waitpid(children[i], &status, 0);
		children[i] = 0;
	}
}

static void setup_run(const char *name)
{
	char dir[256];

	snprintf(dir, sizeof(dir), "secondary-%s", name);
	nst_run_dir_make(dir);
}

/* Start argv[0] with stdout and stderr in files of the run directory and
 * none of this process's other descriptors (EAL's hugepage files hold
 * locks that must end with their owner). */
static pid_t spawn(char *const argv[], const char *name)
{
	char out[2300], err[2300];
	int fin, fout, ferr;
	pid_t pid;

	snprintf(out, sizeof(out), "%s/%s.out", nst_run_dir(), name);
	snprintf(err, sizeof(err), "%s/%s.log", nst_run_dir(), name);
	fin = open("/dev/null", O_RDONLY | O_CLOEXEC);
	fout = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ferr = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert(fin >= 0 && fout >= 0 && ferr >= 0, "cannot open %s", out);
	pid = fork();
	if (pid == 0) {
		dup2(fin, 0);
		dup2(fout, 1);
		dup2(ferr, 2);
		close_range(3, ~0u, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fin);
	close(fout);
	close(ferr);
	cr_assert_gt(pid, 0, "fork: %s", strerror(errno));
	child_add(pid);
	return pid;
}

static int file_has(const char *path, const char *needle)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* ---- the gateway side: EAL primary and hugepages ---------------------- */

static void hugepages_ready(void)
{
	char cmd[1024];
	FILE *p;

	nst_need_root("needs root: the DPDK primary process needs hugepages "
		      "(deploy/hugepages.sh)");
	snprintf(cmd, sizeof(cmd), "%s -n %s --print-dir",
		 nst_src("deploy/hugepages.sh"), HUGEPAGES);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	huge_dir[0] = '\0';
	if (!fgets(huge_dir, sizeof(huge_dir), p))
		huge_dir[0] = '\0';
	huge_dir[strcspn(huge_dir, "\n")] = '\0';
	cr_assert_eq(pclose(p), 0, "deploy/hugepages.sh failed (see above)");
	cr_assert_neq(huge_dir[0], '\0');
}

static int primary_eal_init(void)
{
	char *argv[] = {"natsync-sectest",
			"--proc-type=primary",
			"--file-prefix",
			PREFIX,
			"-m",
			"64",
			"-l",
			"0",
			"--no-pci",
			"--no-telemetry",
			"--base-virtaddr=" NSA_BASE_VIRTADDR,
			"--huge-dir",
			huge_dir,
			"--log-level=error",
			NULL};

	return rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv);
}

static struct nsdp_lane *gateway_up(unsigned int ring_size)
{
	struct nsdp_lane *lane;

	hugepages_ready();
	cr_assert_geq(primary_eal_init(), 0,
		      "EAL as primary process (hugepages in %s): %s", huge_dir,
		      rte_strerror(rte_errno));
	eal_up = 1;
	lane = nsdp_lane_create(0, ring_size, SOCKET_ID_ANY);
	cr_assert_not_null(lane, "lane 0: %s", rte_strerror(rte_errno));
	return lane;
}

static void store_up(int port)
{
	used_ports[n_used_ports++] = port;
	cr_assert_eq(nst_store_start(port, 0, 0), 0, "store on %d", port);
}

static void suite_fini(void)
{
	children_kill();
	for (unsigned int i = 0; i < n_used_ports; i++)
		nst_store_stop(used_ports[i]);
	n_used_ports = 0;
	if (eal_up) {
		rte_eal_cleanup();
		eal_up = 0;
	}
	/* Every process of the prefix has ended: give its pages back. */
	if (huge_dir[0])
		nst_sh("rm -f %s/" PREFIX "map_*", huge_dir);
}

TestSuite(secondary, .fini = suite_fini, .timeout = 120);

/* ---- the agent -------------------------------------------------------- */

static void write_agent_config(int port, unsigned int lanes)
{
	FILE *f = fopen(nst_run_path("agent.ini"), "w");

	cr_assert_not_null(f);
	fprintf(f,
		"[agent]\nrole = active\ngateway_id = 9\nprogress_ms = 1000\n"
		"[store]\nseeds = 127.0.0.1:%d\nlayout = keys\n"
		"[active]\nflush_us = 500\n"
		"[rings]\nlanes = %u\n",
		port, lanes);
	fclose(f);
}

/* deploy/agent-secondary.sh with the test's prefix and agent; the script
 * execs natsync-agent, so the pid is the agent's. */
static pid_t agent_start(const char *name, const char *extra_opt,
			 const char *extra_val)
{
	char script[1024], agent[1024], ini[2300];
	char *argv[16];
	int n = 0;

	snprintf(script, sizeof(script), "%s",
		 nst_src("deploy/agent-secondary.sh"));
	snprintf(agent, sizeof(agent), "%s", nst_build("tools/natsync-agent"));
	snprintf(ini, sizeof(ini), "%s", nst_run_path("agent.ini"));
	argv[n++] = "/bin/bash";
	argv[n++] = script;
	argv[n++] = "-c";
	argv[n++] = ini;
	argv[n++] = "--prefix";
	argv[n++] =
		(char *)(extra_opt && !strcmp(extra_opt, "--prefix") ? extra_val
								     : PREFIX);
	argv[n++] = "--pages";
	argv[n++] = HUGEPAGES;
	argv[n++] = "--agent";
	argv[n++] = agent;
	if (extra_opt && strcmp(extra_opt, "--prefix") != 0) {
		argv[n++] = "--";
		argv[n++] = (char *)extra_opt;
		argv[n++] = (char *)extra_val;
	}
	argv[n] = NULL;
	return spawn(argv, name);
}

/* Wait until the agent says it found the lanes. */
static void agent_attached(pid_t pid, const char *name)
{
	char log[2300];

	snprintf(log, sizeof(log), "%s/%s.log", nst_run_dir(), name);
	for (int i = 0; i < 300; i++) {
		if (file_has(log, "attached to"))
			return;
		cr_assert(child_alive(pid), "the agent %s died; see %s", name,
			  log);
		nsdp_sleep_ms(100);
	}
	cr_assert_fail("the agent %s did not attach within 30 s; see %s", name,
		       log);
}

static void agent_stop(pid_t pid, const char *name)
{
	int status = 0;

	kill(pid, SIGTERM);
	cr_assert(child_wait(pid, 15000, &status),
		  "the agent %s ignored SIGTERM", name);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the agent %s ended with status 0x%x; see %s/%s.log", name,
		  status, nst_run_dir(), name);
}

/* A number from the agent's REPORT line. */
static uint64_t report_value(const char *name, const char *field)
{
	char path[2300], line[1024], key[64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.out", nst_run_dir(), name);
	snprintf(key, sizeof(key), " %s=", field);
	f = fopen(path, "r");
	cr_assert_not_null(f, "no %s", path);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, key);

		if (!strncmp(line, "REPORT ", 7) && p) {
			fclose(f);
			return strtoull(p + strlen(key), NULL, 10);
		}
	}
	fclose(f);
	cr_assert_fail("no REPORT %s= in %s", field, path);
	return 0;
}

/* ---- the gateway's flows and what the store must hold ---------------- */

struct world {
	uint64_t rng;
	uint64_t ts;
	uint64_t n_events; /* produced, recorded or dropped */
	uint64_t n_accepted; /* recorded: the lane's order */
	uint8_t live[N_FLOWS]; /* the gateway's own table */
	struct ns_session last[N_FLOWS]; /* last record the lane accepted */
	uint64_t last_at[N_FLOWS]; /* its n_accepted, 0 = none */
};

static struct world world;

static void world_init(struct world *w, uint64_t seed)
{
	memset(w, 0, sizeof(*w));
	w->rng = seed;
}

static uint64_t rng_next(struct world *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

/* The next event of flow f as the gateway's table sees it: a dead flow is
 * created, a live one refreshed or, one time in four, deleted. */
static struct ns_session flow_event(struct world *w, uint32_t f)
{
	struct ns_session s;
	uint8_t ev = NS_EV_CREATE;

	if (w->live[f])
		ev = rng_next(w) % 4 == 0 ? NS_EV_DELETE : NS_EV_REFRESH;
	w->live[f] = ev != NS_EV_DELETE;
	s = nst_session(17, ev, 9, 1, SESSION_TIMEOUT_MS, ++w->ts);
	nst_session_snat(&s, 0x0a000000u | f, (uint16_t)(1024 + f % 50000),
			 0x08080808u, 53, 0x64400001u,
			 (uint16_t)(1024 + (w->ts * 7919) % 60000));
	w->n_events++;
	return s;
}

static void world_accepted(struct world *w, uint32_t f,
			   const struct ns_session *s)
{
	w->last[f] = *s;
	w->last_at[f] = ++w->n_accepted;
}

/* The producer waits for room here (a test of replication, not of drops);
 * nsdp_record() itself never waits. */
static void record_wait(struct nsdp_lane *lane, struct world *w, uint32_t f)
{
	struct ns_session s = flow_event(w, f);
	double deadline = nsdp_now_s() + 30;

	while (rte_ring_free_count(lane->ring) == 0) {
		cr_assert_lt(nsdp_now_s(), deadline,
			     "the lane stayed full for 30 s");
		nsdp_sleep_us(100);
	}
	cr_assert_eq(nsdp_record(lane, &s), 0);
	world_accepted(w, f, &s);
}

struct store_diff {
	uint64_t checked, wrong, missing, extra;
	uint64_t expected_live;
	long long dbsize;
};

/* Compare the store with the last accepted record of every flow whose last
 * record came after the first `after` the lane accepted (all flows when
 * after is 0). */
static void store_compare(int port, const struct world *w, uint64_t after,
			  struct store_diff *d)
{
	struct timeval tv = {2, 0};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	redisReply *r;
	uint8_t key[NS_KEY_LEN];

	memset(d, 0, sizeof(*d));
	cr_assert(c && !c->err, "connect to %d", port);
	for (uint32_t base = 0; base < N_FLOWS; base += 2000) {
		uint32_t end = base + 2000 < N_FLOWS ? base + 2000 : N_FLOWS;
		uint32_t f;

		for (f = base; f < end; f++) {
			if (after && w->last_at[f] <= after)
				continue;
			ns_key_build(
				17,
				&(struct ns_tuple){
					.saddr = 0x0a000000u | f,
					.daddr = 0x08080808u,
					.sport = (uint16_t)(1024 + f % 50000),
					.dport = 53},
				key);
			redisAppendCommand(c, "GET %b", key,
					   (size_t)NS_KEY_LEN);
		}
		for (f = base; f < end; f++) {
			const struct ns_session *last = &w->last[f];
			int want = w->last_at[f] && last->event != NS_EV_DELETE;
			uint8_t wire[NS_RECORD_MAX_LEN];
			int len = 0;

			if (after && w->last_at[f] <= after)
				continue;
			cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
			d->checked++;
			d->expected_live += want;
			if (want)
				len = ns_record_encode(last, wire,
						       sizeof(wire));
			if (r->type == REDIS_REPLY_NIL) {
				d->missing += want;
			} else if (!want) {
				d->extra++;
			} else if (r->type != REDIS_REPLY_STRING ||
				   r->len != (size_t)len ||
				   memcmp(r->str, wire, (size_t)len) != 0) {
				d->wrong++;
			}
			freeReplyObject(r);
		}
	}
	r = redisCommand(c, "DBSIZE");
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	d->dbsize = r->integer;
	freeReplyObject(r);
	redisFree(c);
}

/* Wait until the store holds what store_compare() wants, and with after
 * == 0 nothing else; returns the seconds it took. The agent must stay up. */
static double store_converges(int port, const struct world *w, uint64_t after,
			      pid_t agent, double timeout_s)
{
	double t0 = nsdp_now_s();
	struct store_diff d;

	for (;;) {
		store_compare(port, w, after, &d);
		if (d.wrong + d.missing + d.extra == 0 &&
		    (after || d.dbsize == (long long)d.expected_live))
			return nsdp_now_s() - t0;
		cr_assert(child_alive(agent), "the agent died; see %s",
			  nst_run_dir());
		if (nsdp_now_s() - t0 > timeout_s)
			break;
		nsdp_sleep_ms(50);
	}
	cr_assert_fail("the store did not converge in %.0f s: %" PRIu64
		       " flows checked, %" PRIu64 " wrong, %" PRIu64
		       " missing, %" PRIu64 " extra, dbsize %lld for %" PRIu64
		       " live",
		       timeout_s, d.checked, d.wrong, d.missing, d.extra,
		       d.dbsize, d.expected_live);
	return 0;
}

/* A run named run with its store on port and one agent, named name,
 * attached to the gateway's single lane; the world starts from seed. */
static pid_t run_with_agent(const char *run, int port, const char *name,
			    uint64_t seed)
{
	pid_t agent;

	setup_run(run);
	store_up(port);
	write_agent_config(port, 1);
	agent = agent_start(name, NULL, NULL);
	agent_attached(agent, name);
	world_init(&world, seed);
	return agent;
}

/* n events of flows picked at random, each recorded once there is room. */
static void record_random(struct nsdp_lane *lane, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		record_wait(lane, &world,
			    (uint32_t)(rng_next(&world) % N_FLOWS));
}

/* ---- the tests -------------------------------------------------------- */

Test(secondary, agent_attached_by_name_replicates_the_last_record_of_each_flow)
{
	struct nsdp_lane *lane = gateway_up(65536);
	const uint64_t n = 50000;
	double t0, t_recorded, t_match;
	pid_t agent;

	agent = run_with_agent("replicate", PORT_REPLICATE, "agent", 42);
	t0 = nsdp_now_s();
	record_random(lane, n);
	t_recorded = nsdp_now_s() - t0;
	t_match = store_converges(PORT_REPLICATE, &world, 0, agent, 60) +
		  t_recorded;
	fprintf(stderr,
		"secondary: %" PRIu64 " records over %u flows recorded in "
		"%.3f s, store exact after %.3f s (%.0f records/s through the "
		"secondary agent)\n",
		n, N_FLOWS, t_recorded, t_match, (double)n / t_match);
	cr_assert_eq(lane->recorded, n);
	cr_assert_eq(lane->dropped, 0);
	nsdp_sleep_ms(1500); /* a liveness check of the gateway has run */
	cr_assert(child_alive(agent), "the agent stopped; see %s",
		  nst_run_dir());

	agent_stop(agent, "agent");
	cr_assert_eq(report_value("agent", "records"), n);
	cr_assert_eq(report_value("agent", "acked"), n);
	cr_assert_eq(report_value("agent", "drops"), 0);
}

struct killer {
	pid_t pid;
	unsigned int after_ms;
	int dead; /* set by the killer thread */
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;
	int status;

	nsdp_sleep_ms(k->after_ms);
	kill(k->pid, SIGKILL);
	waitpid(k->pid, &status, 0);
	__atomic_store_n(&k->dead, 1, __ATOMIC_RELEASE);
	return NULL;
}

Test(secondary, killed_agent_never_blocks_the_gateway_and_a_new_agent_resumes)
{
	const unsigned int ring = 16384;
	const uint64_t after_death = 100000, rate = 100000;
	struct nsdp_lane *lane = gateway_up(ring);
	struct killer k = {0};
	pthread_t killer;
	uint64_t dead_at = 0, ok_after = 0, nobufs = 0, ok = 0, i;
	uint64_t worst = 0, hz = rte_get_tsc_hz(), dropped0, kept, claimed;
	double t0, resume_s;
	pid_t agent;

	agent = run_with_agent("resume", PORT_RESUME, "agent1", 7);
	record_random(lane, 20000);
	store_converges(PORT_RESUME, &world, 0, agent, 60);

	/* SIGKILL the agent while the gateway records 100 000 events/s. */
	k.pid = agent;
	k.after_ms = 300;
	cr_assert_eq(pthread_create(&killer, NULL, killer_main, &k), 0);
	dropped0 = lane->dropped;
	t0 = nsdp_now_s();
	for (i = 0; i < 2000000; i++) {
		uint32_t f = (uint32_t)(rng_next(&world) % N_FLOWS);
		struct ns_session s;
		uint64_t c0;
		int rc;

		if (!dead_at && __atomic_load_n(&k.dead, __ATOMIC_ACQUIRE))
			dead_at = world.n_events;
		if (dead_at && world.n_events - dead_at >= after_death)
			break;
		if (i % 1000 == 0) {
			double ahead =
				(double)i / (double)rate - (nsdp_now_s() - t0);

			if (ahead > 0)
				nsdp_sleep_us((uint64_t)(ahead * 1e6));
		}
		s = flow_event(&world, f);
		c0 = rte_rdtsc();
		rc = nsdp_record(lane, &s);
		c0 = rte_rdtsc() - c0;
		if (c0 > worst)
			worst = c0;
		if (rc == 0) {
			world_accepted(&world, f, &s);
			ok++;
			ok_after += dead_at != 0;
		} else if (rc == -ENOBUFS) {
			nobufs++;
		} else {
			cr_assert_fail("nsdp_record returned %d", rc);
		}
	}
	pthread_join(killer, NULL);
	child_forget(agent);
	cr_assert_neq(dead_at, 0,
		      "the agent was not dead after %" PRIu64 " records", i);
	fprintf(stderr,
		"secondary: agent killed; the gateway recorded %" PRIu64
		" events in %.2f s: %" PRIu64 " taken by the ring (%" PRIu64
		" after the agent's death), %" PRIu64 " dropped and counted; "
		"slowest nsdp_record() %.1f us\n",
		i, nsdp_now_s() - t0, ok, ok_after, nobufs,
		(double)worst * 1e6 / (double)hz);
	cr_assert_eq(lane->dropped - dropped0, nobufs,
		     "every -ENOBUFS is counted in the lane");
	cr_assert_gt(nobufs, 0, "the ring never filled without its agent");
	cr_assert_leq(ok_after, ring);
	cr_assert_eq(rte_ring_count(lane->ring), ring);
	cr_assert_lt((double)worst / (double)hz, 0.1,
		     "nsdp_record() took %.3f s once",
		     (double)worst / (double)hz);

	/* The ring keeps its last `kept` records; a consumer killed inside a
	 * dequeue leaves the records it claimed (head moved, tail not) to
	 * nobody. */
	claimed = lane->ring->cons.head - lane->ring->cons.tail;
	kept = lane->ring->prod.tail - lane->ring->cons.head;
	cr_assert_eq(kept + claimed, ring);

	/* A new agent drains what the ring kept. */
	t0 = nsdp_now_s();
	agent = agent_start("agent2", NULL, NULL);
	agent_attached(agent, "agent2");
	for (int j = 0; j < 300 && rte_ring_count(lane->ring) > 0; j++)
		nsdp_sleep_ms(100);
	cr_assert_eq(rte_ring_count(lane->ring), 0,
		     "the new agent did not drain the ring in 30 s");
	store_converges(PORT_RESUME, &world, world.n_accepted - kept, agent,
			60);
	resume_s = nsdp_now_s() - t0;
	fprintf(stderr,
		"secondary: the new agent replicated the %" PRIu64
		" records the ring kept in %.3f s from its start (%" PRIu64
		" claimed by the killed agent were lost)\n",
		kept, resume_s, claimed);

	/* Every flow moves once more: the store must equal the table. */
	for (uint32_t f = 0; f < N_FLOWS; f++)
		record_wait(lane, &world, f);
	store_converges(PORT_RESUME, &world, 0, agent, 60);
	agent_stop(agent, "agent2");
	cr_assert_eq(report_value("agent2", "records"), kept + N_FLOWS);
	cr_assert_eq(report_value("agent2", "acked"), kept + N_FLOWS);
	/* The agent reports the lane's drop counter, read in shared memory. */
	cr_assert_eq(report_value("agent2", "drops"), lane->dropped);
}

/* The gateway of this test is a child process, so that it can die. */
static void gateway_child(int ready_fd, int go_fd, const struct ns_session *ev,
			  unsigned int n)
{
	struct nsdp_lane *lane;
	char c = 'E';

	if (primary_eal_init() < 0 ||
	    !(lane = nsdp_lane_create(0, 16384, SOCKET_ID_ANY))) {
		(void)!write(ready_fd, &c, 1);
		_exit(1);
	}
	c = 'R';
	(void)!write(ready_fd, &c, 1);
	if (read(go_fd, &c, 1) != 1)
		_exit(1);
	c = 'D';
	for (unsigned int i = 0; i < n; i++)
		if (nsdp_record(lane, &ev[i]) != 0)
			c = 'E';
	(void)!write(ready_fd, &c, 1);
	for (;;)
		pause();
}

static char read_byte(int fd, unsigned int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c = 0;

	if (poll(&p, 1, (int)timeout_ms) == 1 && read(fd, &c, 1) == 1)
		return c;
	return 0;
}

Test(secondary, agent_replicates_what_is_left_and_exits_when_the_gateway_dies)
{
	enum { N = 5000 };
	static struct ns_session ev[N];
	int up[2], down[2], status = 0;
	pid_t gw, agent, restart;
	char c = 'G';

	hugepages_ready();
	setup_run("gone");
	store_up(PORT_GONE);
	write_agent_config(PORT_GONE, 1);
	world_init(&world, 3);
	for (uint32_t f = 0; f < N; f++) {
		ev[f] = flow_event(&world, f);
		world_accepted(&world, f, &ev[f]);
	}
	cr_assert_eq(pipe(up), 0);
	cr_assert_eq(pipe(down), 0);
	gw = fork();
	cr_assert_geq(gw, 0);
	if (gw == 0) {
		close(up[0]);
		close(down[1]);
		gateway_child(up[1], down[0], ev, N);
	}
	child_add(gw);
	close(up[1]);
	close(down[0]);
	cr_assert_eq(read_byte(up[0], 30000), 'R', "the gateway did not start");

	agent = agent_start("agent", NULL, NULL);
	agent_attached(agent, "agent");
	/* The records must still be in the ring when the gateway dies. */
	cr_assert_eq(kill(agent, SIGSTOP), 0);
	cr_assert_eq(write(down[1], &c, 1), 1);
	cr_assert_eq(read_byte(up[0], 30000), 'D',
		     "the gateway did not record");
	kill(gw, SIGKILL);
	cr_assert(child_wait(gw, 10000, &status));

	/* A gateway restarted now finds the old agent still mapping the old
	 * memory; whatever EAL makes of it, the old agent must not crash. */
	restart = fork();
	cr_assert_geq(restart, 0);
	if (restart == 0)
		_exit(primary_eal_init() < 0 ? 3 : 0);
	child_add(restart);
	cr_assert(child_wait(restart, 30000, &status));
	fprintf(stderr,
		"secondary: a gateway restarted before the old agent exited "
		"was %s\n",
		WIFEXITED(status) && WEXITSTATUS(status) == 0
			? "started"
			: "refused by EAL (expected)");
	cr_assert_eq(kill(agent, SIGCONT), 0);

	cr_assert(child_wait(agent, 30000, &status),
		  "the agent did not stop after its gateway died");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		  "the agent ended with status 0x%x, not 1", status);
	cr_assert(file_has(nst_run_path("agent.log"), "is gone"),
		  "the agent did not say why it stopped");
	cr_assert_eq(report_value("agent", "acked"), N);
	cr_assert_eq(report_value("agent", "drops"), 0);
	{
		struct store_diff d;

		store_compare(PORT_GONE, &world, 0, &d);
		cr_assert(d.wrong + d.missing + d.extra == 0 &&
				  d.dbsize == (long long)d.expected_live,
			  "store: %" PRIu64 " wrong, %" PRIu64
			  " missing, %" PRIu64 " extra",
			  d.wrong, d.missing, d.extra);
	}
	close(up[0]);
	close(down[1]);
}

/* The agent started as `name` must stop with status `code` and a log line
 * holding `says`. */
static void refused(pid_t pid, const char *name, int code, const char *says)
{
	char log[2300];
	int status = 0;

	snprintf(log, sizeof(log), "%s/%s.log", nst_run_dir(), name);
	cr_assert(child_wait(pid, 30000, &status), "%s: still running", name);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == code,
		  "%s: status 0x%x, wanted exit %d; see %s", name, status, code,
		  log);
	cr_assert(file_has(log, says), "%s: the log does not say '%s'; see %s",
		  name, says, log);
}

Test(secondary, agent_refuses_what_cannot_work_with_a_message)
{
	char agent[1024], ini[2300];

	gateway_up(1024);
	setup_run("refuse");
	write_agent_config(PORT_REPLICATE, 1);
	snprintf(agent, sizeof(agent), "%s", nst_build("tools/natsync-agent"));
	snprintf(ini, sizeof(ini), "%s", nst_run_path("agent.ini"));

	/* attach = yes in a process of its own (the default eal_args). */
	refused(spawn((char *const[]){agent, "-c", ini, "--set",
				      "rings.attach=yes", NULL},
		      "primary-attach"),
		"primary-attach", 2, "--proc-type=secondary");
	/* A secondary process that would create lanes. */
	refused(agent_start("secondary-create", "--set", "rings.attach=no"),
		"secondary-create", 2, "set [rings] attach = yes");
	/* A second producer on the gateway's single-producer lane. */
	refused(agent_start("secondary-synth", "--set", "source.type=synth"),
		"secondary-synth", 2, "set [source] type = none");
	/* More lanes than the gateway has. */
	refused(agent_start("secondary-lanes", "--set", "rings.lanes=2"),
		"secondary-lanes", 1, "natsync_lane_1");
	/* No gateway with this prefix. */
	refused(agent_start("no-gateway", "--prefix", "natsync_sectest_none"),
		"no-gateway", 1, "start the gateway first");
	/* What a crashed gateway leaves: its runtime files, with no lock.
	 * Refused before EAL, which would recreate its hugepage files. */
	nst_sh("mkdir -p /var/run/dpdk/" PREFIX "_stale && "
	       ": >/var/run/dpdk/" PREFIX "_stale/config");
	refused(agent_start("dead-gateway", "--prefix", PREFIX "_stale"),
		"dead-gateway", 1, "is not locked");
	nst_sh("rm -rf /var/run/dpdk/" PREFIX "_stale");
	cr_assert_eq(nst_sh("ls %s | grep -q " PREFIX "_stale", huge_dir), 1,
		     "hugepage files were created for a dead gateway");
}
