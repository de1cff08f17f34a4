/*
 * nst_store.c - start and stop the tests' Redis stores through the same
 * script operators use, so the tests exercise it too.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <rte_eal.h>

#include "nst_store.h"

/* rel under the root directory named by environment variable root (meson
 * sets both roots; "." outside meson), in one of eight rotating buffers per
 * thread. */
static const char *root_path(const char *root, const char *rel)
{
	static __thread char buf[8][4096];
	static __thread int n;
	const char *dir = getenv(root);
	char *b = buf[n++ & 7];

	snprintf(b, sizeof(buf[0]), "%s/%s", dir && *dir ? dir : ".", rel);
	return b;
}

const char *nst_src(const char *rel)
{
	return root_path("NATSYNC_SOURCE_ROOT", rel);
}

const char *nst_build(const char *rel)
{
	return root_path("NATSYNC_BUILD_ROOT", rel);
}

int nst_sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc == -1)
		return -1;
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

int nst_store_start(int port, int masters, int replicas)
{
	return nst_store_start_with(port, masters, replicas, "");
}

int nst_store_start_with(int port, int masters, int replicas,
			 const char *options)
{
	const char *run = nst_build("tests/run");
	char shape[64];

	nst_sh("%s stop --port %d --dir %s/%d >/dev/null 2>&1",
	       nst_src("deploy/redis-cluster.sh"), port, run, port);
	if (masters == 0)
		snprintf(shape, sizeof(shape), "--plain");
	else
		snprintf(shape, sizeof(shape), "--masters %d --replicas %d",
			 masters, replicas);
	return nst_sh("%s start %s %s --port %d --dir %s/%d >&2",
		      nst_src("deploy/redis-cluster.sh"), shape, options, port,
		      run, port) == 0
		       ? 0
		       : -1;
}

void nst_store_stop(int port)
{
	nst_sh("%s stop --port %d --dir %s/%d >&2",
	       nst_src("deploy/redis-cluster.sh"), port, nst_build("tests/run"),
	       port);
}

void nst_store_writers(int port, int masters, unsigned int pair,
		       const char *path)
{
	nst_sh("for p in $(seq %d %d); do redis-cli -p $p CLIENT LIST "
	       "TYPE normal | grep ' name=natsync-writer:%u ' | "
	       "cut -d' ' -f1 | sed \"s/^/$p:/\"; done | sort >%s",
	       port, port + masters - 1, pair, path);
}

int nst_store_start_fresh(int port, int masters, int replicas)
{
	nst_store_stop(port);
	nst_sh("rm -rf '%s/%d'", nst_build("tests/run"), port);
	if (nst_store_start(port, masters, replicas) == 0)
		return 0;
	nst_store_stop(port);
	return -1;
}

/* What port's nodes (a cluster of masters masters, or a plain server) say
 * of themselves and of each other, without their clocks: the nodes, their
 * roles, epochs, links and slots, a slot being moved included. Each
 * redis-cli waits 5 s at most (a stopped master answers nothing). */
#define NST_STORE_SHAPE                                                   \
	"for p in $(seq %d %d); do "                                      \
	"timeout 5 redis-cli -p $p info server | grep '^redis_mode:' || " \
	"exit 1; timeout 5 redis-cli -p $p cluster nodes | "              \
	"cut -d' ' -f1-4,7- | sort || exit 1; done"

int nst_store_reuse(int port, int masters)
{
	const char *run = nst_build("tests/run");
	int last = port + (masters ? masters : 1) - 1;

	if (nst_sh("test -s %s/%d/shape && { " NST_STORE_SHAPE "; } 2>/dev/null"
		   " | cmp -s - %s/%d/shape && "
		   "for p in $(seq %d %d); do timeout 5 redis-cli -p $p "
		   "flushall sync | grep -qx OK && timeout 5 redis-cli -p $p "
		   "script flush | grep -qx OK || exit 1; done",
		   run, port, port, last, run, port, port, last) == 0)
		return 0;
	if (nst_store_start_fresh(port, masters, 0) != 0)
		return -1;
	if (nst_sh("{ " NST_STORE_SHAPE "; } >%s/%d/shape", port, last, run,
		   port) == 0)
		return 0;
	nst_store_stop(port);
	return -1;
}

int nst_eal_init(unsigned int mem_mb)
{
	static int done;
	char mem[16];
	char *argv[] = {"natsync-test",
			"--no-huge",
			"--no-shconf",
			"--no-pci",
			"--no-telemetry",
			"-m",
			mem,
			"--log-level=error",
			NULL};

	if (done)
		return 0;
	snprintf(mem, sizeof(mem), "%u", mem_mb);
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0)
		return -1;
	done = 1;
	return 0;
}

static char nst_run[2048];

const char *nst_run_dir_make(const char *name)
{
	snprintf(nst_run, sizeof(nst_run), "%.1900s/%s", nst_build("tests/run"),
		 name);
	nst_sh("rm -rf '%s' && mkdir -p '%s'", nst_run, nst_run);
	return nst_run;
}

const char *nst_run_dir(void)
{
	return nst_run;
}

const char *nst_run_path(const char *file)
{
	static char buf[8][4200];
	static int n;
	char *b = buf[n++ & 7];

	snprintf(b, sizeof(buf[0]), "%s/%s", nst_run, file);
	return b;
}

void nst_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		abort();
	}
}
