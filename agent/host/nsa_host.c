/*
 * nsa_host.c - EAL start-up, the lanes, and the in-process session source.
 *
 * The EAL argument vector points into a copy of the configured string that
 * lives as long as the process, since EAL keeps pointers into it.
 *
 * Lanes either belong to this process (created here, freed at close) or to
 * a gateway: with [rings] attach = yes this process must be a DPDK secondary
 * process of the gateway, finds lane 0..lanes-1 by name in the gateway's
 * shared memory, and never frees them. The two are not mixed: a primary
 * cannot attach (there is nothing to find), a secondary does not create
 * lanes (the gateway's producers would never see them), and the synthetic
 * source does not produce into a gateway's single-producer lanes.
 *
 * The kernel source (nsdp_ksrc.h) runs on a thread of its own and
 * produces into lane 0.
 *
 * Not here: watching the gateway's liveness (tools/nag_active.c), the
 * writers themselves (nsa_active.c; nsa_source_replicate only starts
 * them).
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "nsa_active.h"
#include "nsa_host.h"
#include "nsa_log.h"

#define EAL_MAX_ARGS 64

static int is_lcore_option(const char *arg)
{
	return !strcmp(arg, "-l") || !strcmp(arg, "-c") ||
	       !strncmp(arg, "--lcores", 8);
}

/* --proc-type=secondary or --proc-type secondary among the arguments. */
static int asks_for_secondary(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--proc-type=secondary"))
			return 1;
		if (!strcmp(argv[i], "--proc-type") && i + 1 < argc &&
		    !strcmp(argv[i + 1], "secondary"))
			return 1;
	}
	return 0;
}

/* The value of --file-prefix among the arguments, or EAL's default. */
static const char *file_prefix(int argc, char **argv)
{
	const char *prefix = "rte";

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--file-prefix=", 14))
			prefix = argv[i] + 14;
		else if (!strcmp(argv[i], "--file-prefix") && i + 1 < argc)
			prefix = argv[i + 1];
	}
	return prefix;
}

/* Whether the primary process of prefix runs: it holds a lock on its
 * runtime config file, which lives where EAL puts it (eal_get_runtime_dir:
 * /var/run/dpdk/<prefix> for root, else under $XDG_RUNTIME_DIR or /tmp). */
static int primary_running(const char *prefix, char *path, size_t cap)
{
	const char *dir = "/var/run";

	if (getuid() != 0)
		dir = getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR")
						: "/tmp";
	snprintf(path, cap, "%s/dpdk/%s/config", dir, prefix);
	return rte_eal_primary_proc_alive(path);
}

static void unpin_calling_thread(void)
{
	cpu_set_t all;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&all);
	for (long i = 0; i < n && i < CPU_SETSIZE; i++)
		CPU_SET((int)i, &all);
	sched_setaffinity(0, sizeof(all), &all);
}

int nsa_eal_start(const char *prog, const char *eal_args, int extra_argc,
		  char **extra_argv, const char *default_lcores, char *err,
		  size_t errlen)
{
	static char *argv[EAL_MAX_ARGS];
	char *copy = strdup(eal_args), *save = NULL;
	int argc = 0, has_lcores = 0;

	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	argv[argc++] = (char *)prog;
	for (char *tok = strtok_r(copy, " \t", &save);
	     tok && argc < EAL_MAX_ARGS - 3;
	     tok = strtok_r(NULL, " \t", &save)) {
		has_lcores |= is_lcore_option(tok);
		argv[argc++] = tok;
	}
	for (int i = 0; i < extra_argc; i++)
		has_lcores |= is_lcore_option(extra_argv[i]);
	if (default_lcores && !has_lcores) {
		argv[argc++] = "-l";
		argv[argc++] = (char *)default_lcores;
	}
	for (int i = 0; i < extra_argc && argc < EAL_MAX_ARGS - 1; i++)
		argv[argc++] = extra_argv[i];
	argv[argc] = NULL;
	/* Checked before EAL, because a secondary process started on the
	 * leftovers of a dead primary recreates its hugepage files. */
	if (asks_for_secondary(argc, argv)) {
		char path[PATH_MAX];
		const char *prefix = file_prefix(argc, argv);

		if (!primary_running(prefix, path, sizeof(path))) {
			snprintf(
				err, errlen,
				"no DPDK primary process with --file-prefix=%s "
				"is running (%s is not locked); start the "
				"gateway first",
				prefix, path);
			return -ENOENT;
		}
	}
	if (rte_eal_init(argc, argv) < 0) {
		snprintf(err, errlen, "EAL initialisation failed: %s%s",
			 rte_strerror(rte_errno),
			 asks_for_secondary(argc, argv)
				 ? " (a secondary process needs its primary "
				   "running, with hugepages, and the same "
				   "--file-prefix; when EAL cannot reserve "
				   "the primary's memory at its address, start "
				   "the gateway with "
				   "--base-virtaddr=" NSA_BASE_VIRTADDR ")"
				 : "");
		return -1;
	}
	unpin_calling_thread();
	return 0;
}

static int source_lcore_main(void *arg)
{
	struct nsa_source_launch *l = arg;

	return nsdp_synth_run(l->synth, l->worker);
}

/* Refuse the combinations that cannot work, before touching any lane. */
static int check_lane_ownership(const struct nsa_config *conf)
{
	int secondary = rte_eal_process_type() == RTE_PROC_SECONDARY;

	if (conf->attach && !secondary) {
		NSA_ERR("[rings] attach = yes: this is not a DPDK secondary "
			"process, so there are no gateway lanes to find; add "
			"--proc-type=secondary --file-prefix=<the gateway's "
			"prefix> to [agent] eal_args (and drop --no-huge "
			"--no-shconf)");
		return -EINVAL;
	}
	if (!conf->attach && secondary) {
		NSA_ERR("this is a DPDK secondary process: set [rings] attach "
			"= yes to drain the primary's lanes (a secondary does "
			"not create lanes)");
		return -EINVAL;
	}
	if (conf->attach && conf->source_type != NSA_SOURCE_NONE) {
		NSA_ERR("[source] type = synth or kernel with [rings] attach "
			"= yes: the gateway is the only producer of its lanes; "
			"set [source] type = none");
		return -EINVAL;
	}
	return 0;
}

static int attach_lanes(struct nsa_source *src, const struct nsa_config *conf)
{
	/* EAL attaches to a dead primary's leftover files too. */
	if (!rte_eal_primary_proc_alive(NULL)) {
		NSA_ERR("the primary process (the gateway) of this "
			"--file-prefix is not running");
		return -ENOENT;
	}
	for (unsigned int i = 0; i < conf->lanes; i++) {
		src->lanes[i] = nsdp_lane_lookup(i);
		if (!src->lanes[i]) {
			NSA_ERR("lane %u (natsync_lane_%u): not found in the "
				"primary process; does the gateway run %u "
				"lane(s)? ([rings] lanes)",
				i, i, conf->lanes);
			return -ENOENT;
		}
	}
	if (conf->lanes < NSDP_MAX_LANES && nsdp_lane_lookup(conf->lanes))
		NSA_WARN("the primary process has more than %u lane(s); "
			 "lanes %u and up are not drained ([rings] lanes)",
			 conf->lanes, conf->lanes);
	NSA_INFO("attached to %u lane(s) of the primary process (ring of %u "
		 "records, %u waiting)",
		 conf->lanes, rte_ring_get_capacity(src->lanes[0]->ring),
		 rte_ring_count(src->lanes[0]->ring));
	return 0;
}

/* The kernel source writes into lane 0 from one thread of its own. A host
 * that cannot run it (no BTF, no privileges, no such namespace) is a
 * configuration that does not fit: -EINVAL. */
static int open_kernel_source(struct nsa_source *src,
			      const struct nsa_config *conf)
{
	char err[512];
	int why;

	if (conf->lanes != 1) {
		NSA_ERR("[source] type = kernel produces into one lane; set "
			"[rings] lanes = 1 (and [active] workers = 1)");
		return -EINVAL;
	}
	src->ksrc = nsdp_ksrc_create(&conf->ksrc_conf, src->lanes[0], &why, err,
				     sizeof(err));
	if (!src->ksrc) {
		NSA_ERR("%s", err);
		return -EINVAL;
	}
	NSA_INFO("kernel source: tp_btf/net_dev_queue attached, ring buffer "
		 "%u bytes, namespace %s",
		 conf->ksrc_conf.ringbuf_bytes,
		 conf->ksrc_conf.netns[0] ? conf->ksrc_conf.netns : "(own)");
	return 0;
}

int nsa_source_open(struct nsa_source *src, const struct nsa_config *conf)
{
	unsigned int lcore, n_lcores = 0;
	int rc;

	memset(src, 0, sizeof(*src));
	rc = check_lane_ownership(conf);
	if (rc != 0)
		return rc;
	src->attached = conf->attach;
	if (conf->attach) {
		rc = attach_lanes(src, conf);
		if (rc != 0)
			return rc;
		src->n_lanes = conf->lanes;
		return 0;
	}
	for (unsigned int i = 0; i < conf->lanes; i++) {
		src->lanes[i] = nsdp_lane_create(i, conf->ring_size,
						 (int)rte_socket_id());
		if (!src->lanes[i]) {
			NSA_ERR("lane %u: cannot create: %s", i,
				rte_strerror(rte_errno));
			return -ENOENT;
		}
		src->n_lanes = i + 1;
	}
	if (conf->source_type == NSA_SOURCE_KERNEL)
		return open_kernel_source(src, conf);
	if (conf->source_type != NSA_SOURCE_SYNTH)
		return 0;
	RTE_LCORE_FOREACH_WORKER(lcore)
	{
		if (n_lcores < conf->lanes)
			src->lcores[n_lcores++] = lcore;
	}
	if (n_lcores < conf->lanes) {
		NSA_ERR("source: %u lanes need %u EAL worker lcores, EAL has "
			"%u (add e.g. -l 0-%u to eal_args)",
			conf->lanes, conf->lanes, n_lcores, conf->lanes);
		return -EINVAL;
	}
	src->synth =
		nsdp_synth_create(&conf->synth_conf, src->lanes, conf->lanes);
	if (!src->synth) {
		NSA_ERR("source: cannot create the synthetic source");
		return -ENOMEM;
	}
	return 0;
}

void nsa_source_start(struct nsa_source *src)
{
	if (src->ksrc) {
		src->running = nsdp_ksrc_start(src->ksrc) == 0;
		if (!src->running)
			NSA_ERR("kernel source: cannot start its thread");
		return;
	}
	if (!src->synth)
		return;
	for (unsigned int i = 0; i < src->n_lanes; i++) {
		src->launch[i] = (struct nsa_source_launch){src->synth, i};
		rte_eal_remote_launch(source_lcore_main, &src->launch[i],
				      src->lcores[i]);
	}
	src->running = 1;
}

void nsa_source_stop(struct nsa_source *src)
{
	if (!src->running)
		return;
	if (src->ksrc) {
		nsdp_ksrc_stop(src->ksrc);
		src->running = 0;
		return;
	}
	nsdp_synth_stop(src->synth);
	rte_eal_mp_wait_lcore();
	src->running = 0;
}

void nsa_source_close(struct nsa_source *src)
{
	nsa_source_stop(src);
	if (src->synth)
		nsdp_synth_free(src->synth);
	src->synth = NULL;
	nsdp_ksrc_free(src->ksrc);
	src->ksrc = NULL;
	if (!src->attached)
		for (unsigned int i = 0; i < src->n_lanes; i++)
			if (src->lanes[i])
				nsdp_lane_free(src->lanes[i]);
	src->n_lanes = 0;
}

struct nsa_active *nsa_source_replicate(struct nsa_source *src,
					const struct nsa_config *conf)
{
	struct nsa_active *a =
		nsa_active_create(conf, src->lanes, src->n_lanes);

	if (a && src->synth)
		nsa_active_polling_lcores(a, src->lcores, src->n_lanes);
	if (a && nsa_active_start(a) == 0)
		return a;
	NSA_ERR("active: cannot start the writers");
	if (a) {
		nsa_active_stop(a);
		nsa_active_free(a);
	}
	return NULL;
}
