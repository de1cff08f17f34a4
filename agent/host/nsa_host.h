/*
 * nsa_host.h - what a natsync process needs from DPDK: EAL start-up, and the
 * lanes with, optionally, the synthetic session source on EAL worker lcores
 * or the kernel session source on a thread.
 * Shared by natsync-agent and natsync-bench.
 */
#ifndef NSA_HOST_H
#define NSA_HOST_H

#include <stddef.h>

#include "nsa_config.h"
#include "nsdp_ksrc.h"
#include "nsdp_lane.h"
#include "nsdp_synth.h"

/* Where a gateway whose rings a secondary process attaches to should map
 * its memory (--base-virtaddr): far from where libraries, heaps and
 * AddressSanitizer's shadow and allocator land, so that the secondary finds
 * the same addresses free. */
#define NSA_BASE_VIRTADDR "0x200000000000"

/* Start EAL with eal_args (space separated), then default_lcores as "-l"
 * when neither eal_args nor extra gives the lcores (NULL: never), then the
 * extra arguments. Unpins the calling thread afterwards: EAL pins it to the
 * main lcore, and the writer and subscriber threads it creates are not
 * lcores. 0, or with a reason in err: -ENOENT when the arguments ask for a
 * secondary process and no primary of that --file-prefix runs (checked
 * before EAL starts), -1 when EAL fails. */
int nsa_eal_start(const char *prog, const char *eal_args, int extra_argc,
		  char **extra_argv, const char *default_lcores, char *err,
		  size_t errlen);

struct nsa_source_launch {
	struct nsdp_synth *synth;
	unsigned int worker;
};

struct nsa_source {
	struct nsdp_lane *lanes[NSDP_MAX_LANES];
	unsigned int n_lanes;
	int attached; /* lanes found by name, not ours to free */
	struct nsdp_synth *synth; /* NULL without [source] type = synth */
	struct nsdp_ksrc *ksrc; /* NULL without [source] type = kernel */
	unsigned int lcores[NSDP_MAX_LANES];
	struct nsa_source_launch launch[NSDP_MAX_LANES];
	int running;
};

/* Create the lanes (or find them, [rings] attach = yes) and, with a
 * synthetic source configured, the source with one EAL worker lcore per
 * lane; with the kernel source, load it (-EINVAL, logged, when this host
 * cannot run it: no BTF, privileges or namespace). 0 or a negative errno (logged): -EINVAL when the configuration does
 * not fit this process (attach = yes needs a DPDK secondary process, a
 * secondary needs attach = yes, attach = yes excludes the synthetic source,
 * too few lcores), -ENOENT when a lane cannot be created or found. */
int nsa_source_open(struct nsa_source *src, const struct nsa_config *conf);
struct nsa_active;

/* Create and start the writers that replicate src's lanes; NULL (logged)
 * when they cannot start. */
struct nsa_active *nsa_source_replicate(struct nsa_source *src,
					const struct nsa_config *conf);
/* Launch the source's workers on their lcores. */
void nsa_source_start(struct nsa_source *src);
/* Stop the source's workers and wait for them. */
void nsa_source_stop(struct nsa_source *src);
void nsa_source_close(struct nsa_source *src);

#endif
