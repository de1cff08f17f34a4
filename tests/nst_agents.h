/*
 * nst_agents.h - test support: the natsync-agent programs of a run (an
 * active with the synthetic source and a standby), in the run directory
 * of nst_run_dir_make(): their configurations, start, sync and the final
 * verification with natsync-verify. File names in the run directory:
 * <name>.ini, .out (stdout), .log (stderr), .pid; source.tbl and
 * standby.tbl are the tables the programs dump, verify.out the verdict.
 */
#ifndef NST_AGENTS_H
#define NST_AGENTS_H

#include <criterion/parameterized.h>
#include <stddef.h>

/* What the active's synthetic source produces. */
struct nst_source_plan {
	unsigned long flows, events, rate;
	int drop_when_full; /* [source] wait_when_full = no */
};

/* The [agent] and [store] sections of a test's agent into text (size
 * bytes, asserts they fit): role, gateway_id, progress lines every
 * progress_ms (0: only the final REPORT), DPDK without hugepages in mb MB
 * on lcores, the store's seeds. Returns their length: the caller writes
 * more [store] keys and its own sections after them. */
int nst_agent_ini(char *text, size_t size, const char *role,
		  unsigned int gateway_id, unsigned int progress_ms,
		  unsigned int mb, const char *lcores, const char *seeds);

/* Write standby.ini and active.ini for seeds; both print progress every
 * progress_ms (0: only the final REPORT). */
void nst_agents_configure(const char *seeds, const struct nst_source_plan *p,
			  unsigned int progress_ms);

/* [store] layout ("keys" or "log") of the files nst_agents_configure()
 * writes from now on and of nst_verify_exact()'s reading; "keys" until
 * set. */
void nst_agents_layout(const char *layout);

/* A store layout as a Criterion test parameter: the parameter is copied
 * into the test's own process, where a pointer to a string of the parent
 * is not valid, so the name itself. */
struct nst_layout {
	char name[8];
};

/* The layouts of an NST_LAYOUTS_TEST: both (keys then log) into p, or
 * the one NATSYNC_TEST_LAYOUT names (keys or log). Their count. */
size_t nst_layouts(struct nst_layout *p);

/* The store layout of a test that takes no layout parameter: the one
 * NATSYNC_TEST_LAYOUT names, log (the default) when it names none. The
 * plain suite runs such a test in log, the AddressSanitizer phase
 * (NATSYNC_TEST_LAYOUT=keys, scripts/sanitize.sh) in keys: CI runs it in
 * both. */
const char *nst_layout_one(void);

/* A test file's store layout, static const char *var: nst_layout_one()
 * when the program starts (a constructor), so in every test, unless the
 * test sets it (an NST_LAYOUTS_TEST's parameter, or a test bound to one
 * layout). */
#define NST_LAYOUT_VAR(var)                                           \
	static const char *var;                                       \
	__attribute__((constructor)) static void var##_from_env(void) \
	{                                                             \
		var = nst_layout_one();                               \
	}

/* A test run once in each store layout (nst_layouts): its body follows,
 * with the layout in l (a struct nst_layout *). */
#define NST_LAYOUTS_TEST(suite, name, ...)                           \
	ParameterizedTestParameters(suite, name)                     \
	{                                                            \
		static struct nst_layout p[2];                       \
		size_t n = nst_layouts(p);                           \
		return cr_make_param_array(struct nst_layout, p, n); \
	}                                                            \
	ParameterizedTest(struct nst_layout *l, suite, name, ##__VA_ARGS__)

/* The pid a background shell wrote to path (asserts it is there). */
int nst_read_pid(const char *path);

/* Start "PROGRAM -c <name>.ini ARGS" in the background, writing (or with
 * append, appending) its stdout to <name>.out and stderr to <name>.log;
 * its pid. */
int nst_spawn(const char *program, const char *name, const char *args,
	      int append);

/* nst_spawn() of natsync-agent, its output files written anew. */
int nst_agent_spawn(const char *name, const char *args);

/* Whether pid is still running: a spawned program is no child of the test
 * (the shell that started it is gone), so once it exits it is a zombie
 * until init reaps it, which kill(pid, 0) does not tell apart. A zombie
 * leader whose other threads still exit counts as running: they hold the
 * program's files (its NFQUEUE socket keeps taking packets) until the last
 * one is gone. */
int nst_running(int pid);

/* Wait (30 s at most) until the standby logs that it is synced; asserts
 * it did and did not die meanwhile. */
void nst_wait_synced(int standby_pid);

/* Wait (secs at most) for the active's REPORT line; 0 once it is there. */
int nst_wait_report(int secs);

/* 1 when a line of file (in the run directory) matches grep pattern. */
int nst_run_file_has(const char *file, const char *pattern);

/* The number after " name=" in the last REPORT line of the file at path
 * that has it; asserts there is one. */
unsigned long nst_report_field(const char *path, const char *name);

/* The counts of the RESULT line natsync-verify wrote to verify.out (in
 * the run directory); asserts there is one. */
void nst_verify_counts(unsigned long *store, unsigned long *source,
		       unsigned long *standby);

/* Assert that the store and the standby's table equal the source's final
 * table, with natsync-verify, and that it holds at least min_sessions
 * (> 0: equal empty tables prove nothing). */
void nst_verify_exact(const char *seeds, int standby_pid,
		      unsigned long min_sessions);

/* Assert that natsync-verify --get prints, for n sessions spread over the
 * source's final table (source.tbl), exactly the source's record, and
 * says "not in the store" (exit 1) for a tuple the table lacks and refuses
 * a malformed tuple (exit 2). */
void nst_verify_get(const char *seeds, unsigned int n);

#endif
