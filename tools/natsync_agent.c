/*
 * natsync_agent.c - the natsync-agent program: one binary, two roles.
 *
 * Active: creates the lanes (or, with [rings] attach = yes, finds the
 * gateway's lanes by name as a DPDK secondary process), optionally runs the
 * synthetic session source on EAL worker lcores, and replicates every
 * record with the writer threads until stopped or, with a synthetic source,
 * until every event is produced and acknowledged by the store.
 * Attached to a gateway, it checks once a second that the gateway (the
 * primary process) is alive; when it is gone, it replicates what is left in
 * the lanes, which stay mapped, and exits with status 1, so that a
 * supervisor restarts it against the next gateway. Stopped by a signal, it
 * first waits (at most ATTACHED_STOP_DRAIN_MS, nag_active.c) for the lanes
 * to empty and the store to acknowledge; whatever stays in the lanes is
 * left there for the next agent.
 * With the kernel source it captures a Linux kernel gateway's NAT'd
 * conntrack entries until stopped, then writes the kernel's table to
 * [source] dump (and on SIGUSR1).
 * Standby: rebuilds the table from the store and the notifications until
 * stopped; SIGUSR1 dumps the table to [standby] dump, SIGUSR2 hands it
 * over to the node's active (an epoch, the fence, every master read
 * again, then the stop).
 *
 * Both print a progress line every [agent] progress_ms and end with one
 * machine-readable REPORT line on stdout. Exit status: 0 done, 1 runtime
 * failure (no gateway to attach to included), 2 bad configuration or
 * options.
 *
 * Here: the options, the start-up and the role chosen. The active runs in
 * nag_active.c (its epoch at start in nag_epoch.c), the standby in
 * nag_standby.c, the [metrics] endpoint of either in nag_metrics.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include <rte_eal.h>

#include "nag_active.h"
#include "nag_epoch.h"
#include "nag_standby.h"
#include "ngw_config.h"
#include "nsa_cli.h"
#include "nsa_config.h"
#include "nsa_sdnotify.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-agent -c FILE [options] [-- EAL-ARGS...]\n"
		"\n"
		"Replicates a NAT gateway's session table through Redis.\n"
		"\n"
		"  -c, --config FILE     configuration file (INI; see\n"
		"                        docs/configuration.md)\n"
		"  -r, --role ROLE       active or standby (overrides [agent] "
		"role)\n"
		"  -s, --set S.KEY=VAL   override one configuration key, e.g.\n"
		"                        --set active.batch_size=512 "
		"(repeatable)\n"
		"  -t, --duration SECS   stop after SECS seconds (default: an "
		"active\n"
		"                        with a synthetic source stops when it "
		"is\n"
		"                        done, with -t it stays idle until SECS\n"
		"                        passed; otherwise run until "
		"SIGINT/SIGTERM)\n"
		"  -p, --print-config    print the effective configuration and "
		"exit\n"
		"      --config-reference  print every configuration key in "
		"Markdown\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"EAL arguments come from [agent] eal_args, then from after "
		"'--'.\n"
		"With [rings] attach = yes the agent drains a running "
		"gateway's lanes\n"
		"as a DPDK secondary process: eal_args must hold\n"
		"--proc-type=secondary and the gateway's --file-prefix, "
		"without\n"
		"--no-huge/--no-shconf (deploy/agent-secondary.sh does this). "
		"It exits\n"
		"with status 1 when the gateway is not running or goes "
		"away.\n"
		"With [source] type = kernel (root) it loads a BPF program "
		"that captures\n"
		"the NAT'd conntrack entries of [source] netns and replicates "
		"them until\n"
		"stopped; exit status 2 when kernel BTF, privileges or the "
		"namespace\n"
		"are missing (see docs/kernel-gateways.md). SIGUSR1 writes "
		"the kernel's\n"
		"NAT'd table to [source] dump.\n"
		"Signals: SIGINT/SIGTERM stop (an active first replicates what "
		"its source\n"
		"made, 10 s at most, 2 s for a gateway's lanes, and REPORTs "
		"drained=yes\n"
		"when all of it was acknowledged;\n"
		"a standby dumps its table first when [standby] dump is set); "
		"SIGUSR1\n"
		"makes a standby dump its table; SIGUSR2 makes it take an "
		"epoch, fence,\n"
		"read every master again and stop (REPORT handover_epoch=).\n"
		"With [standby] commit = conntrack a standby also writes "
		"every session\n"
		"into the kernel's conntrack table (root; [standby] "
		"commit_netns).\n"
		"Exit status: 0 done, 1 failure, 2 bad configuration or "
		"options.\n");
}

int main(int argc, char **argv)
{
	/* With the [gateway] keys: one file may serve a gateway and its
	 * agents, which accept and ignore that section. */
	static struct ngw_config conf;
	struct nsa_cli cli = {
		.prog = "natsync-agent",
		.usage = usage,
		.keys = &ngw_config_keys,
	};
	/* The gateway we attached to died: its shared EAL state is no longer
	 * ours to tidy (a new gateway may be rewriting it; rte_eal_cleanup()
	 * then crashes in the shared heap), so the process exits without it. */
	int gateway_gone = 0;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, NSA_CLI_OPTSTRING,
				  nsa_cli_longopts, NULL)) != -1)
		if ((rc = nsa_cli_option(&cli, opt, optarg)) != NSA_CLI_RUN)
			return rc;
	if ((rc = nsa_cli_config(&cli, &conf.agent)) != NSA_CLI_RUN)
		return rc;
	rc = nsa_cli_start(&cli, &conf.agent, argc - optind, argv + optind,
			   NULL,
			   NSA_CLI_CATCH_STOP | NSA_CLI_CATCH_DUMP |
				   NSA_CLI_CATCH_HANDOVER);
	if (rc != 0)
		return rc == -ENOENT ? 1 : 2; /* no gateway yet: retry later */
	nsa_sd_ready(conf.agent.role == NSA_ROLE_ACTIVE ? "active" : "standby");

	if (conf.agent.role == NSA_ROLE_ACTIVE) {
		struct nag_epoch epoch = {0};

		rc = conf.agent.epoch == 0 &&
				     nag_epoch_take(&conf.agent, &epoch)
			     ? 1
			     : nag_active_run(&conf.agent, cli.duration, &epoch,
					      &gateway_gone);
	} else {
		rc = nag_standby_run(&conf.agent, cli.duration);
	}
	nsa_sd_stopping();
	if (!gateway_gone)
		rte_eal_cleanup();
	return rc;
}
