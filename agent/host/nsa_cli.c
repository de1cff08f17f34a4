/*
 * nsa_cli.c - the start-up natsync's programs share (see nsa_cli.h). The
 * options are applied in a fixed order (file, --role, --set in the order
 * given, checks), so that every program gives the same option the same
 * meaning and the same messages, "PROG: reason", and exits 2 on bad
 * configuration.
 *
 * Invariant: the signal handlers only store to a flag.
 * Not here: what a program runs once started.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "nsa_cli.h"
#include "nsa_host.h"
#include "nsa_log.h"

int nsa_cli_stop;
int nsa_cli_dump;
int nsa_cli_handover;

const struct option nsa_cli_longopts[] = {
	NSA_CLI_LONGOPTS,
	NSA_CLI_HELP_LONGOPTS,
};

int nsa_cli_help_option(const struct nsa_cli *cli, int opt)
{
	switch (opt) {
	case 'h':
		cli->usage(stdout);
		return 0;
	case 'V':
		printf("%s %s\n", cli->prog, NATSYNC_VERSION);
		return 0;
	default:
		cli->usage(stderr);
		return 2;
	}
}

int nsa_cli_option(struct nsa_cli *cli, int opt, const char *arg)
{
	char *end;

	switch (opt) {
	case 'c':
		cli->config_path = arg;
		return NSA_CLI_RUN;
	case 'r':
		cli->role = arg;
		return NSA_CLI_RUN;
	case 's':
		if (cli->n_sets == NSA_CLI_MAX_SETS) {
			fprintf(stderr, "%s: more than %d --set\n", cli->prog,
				NSA_CLI_MAX_SETS);
			return 2;
		}
		cli->sets[cli->n_sets++] = arg;
		return NSA_CLI_RUN;
	case 't':
		cli->duration = strtod(arg, &end);
		if (*arg == '\0' || *end || cli->duration < 0) {
			fprintf(stderr,
				"%s: --duration: '%s' is not a number of "
				"seconds\n",
				cli->prog, arg);
			return 2;
		}
		return NSA_CLI_RUN;
	case 'p':
		cli->print_config = 1;
		return NSA_CLI_RUN;
	case NSA_CLI_OPT_REFERENCE:
		cli->print_reference = 1;
		return NSA_CLI_RUN;
	default:
		return nsa_cli_help_option(cli, opt);
	}
}

/* 0 when rc is, else 2 with "PROG: err" printed. */
static int nsa_cli_status(const struct nsa_cli *cli, int rc, const char *err)
{
	if (rc == 0)
		return 0;
	fprintf(stderr, "%s: %s\n", cli->prog, err);
	return 2;
}

int nsa_cli_load(const struct nsa_cli *cli, struct nsa_config *conf,
		 const char *path)
{
	char err[1024];
	int rc = nsa_config_load(conf, path, err, sizeof(err));

	return nsa_cli_status(cli, rc, err);
}

int nsa_cli_set(const struct nsa_cli *cli, struct nsa_config *conf,
		const char *assignment)
{
	char err[1024];
	int rc = nsa_config_set(conf, assignment, err, sizeof(err));

	return nsa_cli_status(cli, rc, err);
}

int nsa_cli_finish(const struct nsa_cli *cli, struct nsa_config *conf)
{
	char err[1024];
	int rc = nsa_config_finish(conf, err, sizeof(err));

	if (rc == 0 && cli->check)
		rc = cli->check(conf, err, sizeof(err));
	return nsa_cli_status(cli, rc, err);
}

int nsa_cli_config(const struct nsa_cli *cli, struct nsa_config *conf)
{
	if (cli->print_reference) {
		nsa_config_reference(cli->keys, stdout);
		return 0;
	}
	nsa_config_defaults_ext(conf, cli->keys);
	if (cli->config_path && nsa_cli_load(cli, conf, cli->config_path))
		return 2;
	if (cli->role) {
		char assignment[64], err[1024];

		snprintf(assignment, sizeof(assignment), "agent.role=%s",
			 cli->role);
		if (nsa_config_set(conf, assignment, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s: --role: %s\n", cli->prog, err);
			return 2;
		}
	}
	for (unsigned int i = 0; i < cli->n_sets; i++)
		if (nsa_cli_set(cli, conf, cli->sets[i]))
			return 2;
	if (nsa_cli_finish(cli, conf))
		return 2;
	nsa_log_verbosity = conf->verbosity;
	if (cli->print_config) {
		nsa_config_print(conf, stdout);
		return 0;
	}
	return NSA_CLI_RUN;
}

static void nsa_cli_on_stop(int sig)
{
	(void)sig;
	__atomic_store_n(&nsa_cli_stop, 1, __ATOMIC_RELAXED);
}

static void nsa_cli_on_dump(int sig)
{
	(void)sig;
	__atomic_store_n(&nsa_cli_dump, 1, __ATOMIC_RELAXED);
}

static void nsa_cli_on_handover(int sig)
{
	(void)sig;
	__atomic_store_n(&nsa_cli_handover, 1, __ATOMIC_RELAXED);
}

int nsa_cli_start(const struct nsa_cli *cli, const struct nsa_config *conf,
		  int extra_argc, char **extra_argv, const char *default_lcores,
		  int catch)
{
	char err[1024];
	int rc;

	rc = nsa_eal_start(cli->prog, conf->eal_args, extra_argc, extra_argv,
			   default_lcores, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", cli->prog, err);
		return rc;
	}
	if (catch & NSA_CLI_CATCH_STOP) {
		signal(SIGINT, nsa_cli_on_stop);
		signal(SIGTERM, nsa_cli_on_stop);
	}
	if (catch & NSA_CLI_CATCH_DUMP)
		signal(SIGUSR1, nsa_cli_on_dump);
	if (catch & NSA_CLI_CATCH_HANDOVER)
		signal(SIGUSR2, nsa_cli_on_handover);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}
