/*
 * nsa_host.c - EAL start-up and the in-process session source.
 *
 * The EAL argument vector points into a copy of the configured string that
 * lives as long as the process, since EAL keeps pointers into it.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "nsa_host.h"
#include "nsa_log.h"

#define EAL_MAX_ARGS 64

static int is_lcore_option(const char *arg)
{
	return !strcmp(arg, "-l") || !strcmp(arg, "-c") ||
	       !strncmp(arg, "--lcores", 8);
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
	if (rte_eal_init(argc, argv) < 0) {
		snprintf(err, errlen, "EAL initialisation failed: %s",
			 rte_strerror(rte_errno));
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

int nsa_source_open(struct nsa_source *src, const struct nsa_config *conf)
{
	unsigned int lcore, n_lcores = 0;

	memset(src, 0, sizeof(*src));
	src->n_lanes = conf->lanes;
	src->attached = conf->attach;
	for (unsigned int i = 0; i < conf->lanes; i++) {
		src->lanes[i] =
			conf->attach ? nsdp_lane_lookup(i)
				     : nsdp_lane_create(i, conf->ring_size,
							(int)rte_socket_id());
		if (!src->lanes[i]) {
			NSA_ERR("lane %u: %s: %s", i,
				conf->attach ? "not found (is the gateway "
					       "running, and is this a "
					       "secondary process?)"
					     : "cannot create",
				rte_strerror(rte_errno));
			return -ENOENT;
		}
	}
	if (!conf->synth)
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
	if (!src->attached)
		for (unsigned int i = 0; i < src->n_lanes; i++)
			if (src->lanes[i])
				nsdp_lane_free(src->lanes[i]);
	src->n_lanes = 0;
}
