/*
 * nst_store.h - test support: start and stop real Redis stores on loopback
 * with deploy/redis-cluster.sh, and run EAL for tests that need DPDK.
 * Each test picks its own port base so that suites can run side by side.
 */
#ifndef NST_STORE_H
#define NST_STORE_H

/* Start a store: masters > 0 makes a cluster, masters == 0 a plain server.
 * Files go to <build>/tests/run/<port>. Returns 0 or -1 (and prints why). */
int nst_store_start(int port, int masters, int replicas);
/* The same with more deploy/redis-cluster.sh start options (e.g.
 * "--addr-per-node"). */
int nst_store_start_with(int port, int masters, int replicas,
			 const char *options);
void nst_store_stop(int port);
/* Stop what runs on port, remove its directory (a cluster node that keeps
 * an old nodes.conf refuses to join a new cluster) and start anew; on
 * failure the store is stopped again (a suite's .fini does not run when
 * its .init fails). Returns 0 or -1. */
int nst_store_start_fresh(int port, int masters, int replicas);
/* A fresh store, or an emptied one: the store an earlier test of the
 * executable left on port (masters masters, no replicas; 0: a plain
 * server) when nothing changed its shape since nst_store_reuse() started
 * it (no node stopped or failed over, no slot moved), FLUSHALL and SCRIPT
 * FLUSH on every node; else nst_store_start_fresh() (a cluster's start
 * costs 3-5 s, most of it Redis's wait before a new master declares the
 * cluster up). The test executable stops it when all its tests ran.
 * Returns 0 or -1. */
int nst_store_reuse(int port, int masters);
/* The connections of gateway pair pair's writers (client name
 * natsync-writer:<pair>) on the masters port .. port + masters - 1, one
 * "port:id=N" a line, sorted, into the file at path: a client id is a
 * node's own, so the port names the connection. */
void nst_store_writers(int port, int masters, unsigned int pair,
		       const char *path);

/* Run a shell command; returns its exit status. */
int nst_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Path of a file in the source tree, or of a built program (eight
 * rotating buffers, shared by both). */
const char *nst_src(const char *rel);
const char *nst_build(const char *rel);

/* The run directory of the current test: nst_run_dir_make() removes and
 * makes <build>/tests/run/<name> and makes it current; nst_run_dir() is
 * its path, nst_run_path() a file in it (eight rotating buffers). */
const char *nst_run_dir_make(const char *name);
const char *nst_run_dir(void);
const char *nst_run_path(const char *file);

/* Write text to path; aborts (the test crashes, so fails) if it cannot. */
void nst_write_file(const char *path, const char *text);

/* Initialise EAL once per process with --no-huge --no-shconf -m mem_mb. */
int nst_eal_init(unsigned int mem_mb);

#endif
