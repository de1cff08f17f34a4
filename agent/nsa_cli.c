/*
 * nsa_cli.c - the command-line options natsync-agent and natsync-gateway
 * share (see nsa_cli.h). It only parses and applies them in a fixed order
 * (file, --role, --set in the order given, checks), so that every program
 * gives the same option the same meaning and the same messages.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "nsa_cli.h"

int nsa_cli_option(struct nsa_cli *cli, int opt, const char *arg)
{
	char *end;

	switch (opt) {
	case 'c':
		cli->config_path = arg;
		return 1;
	case 'r':
		cli->role = arg;
		return 1;
	case 's':
		if (cli->n_sets == NSA_CLI_MAX_SETS) {
			fprintf(stderr, "%s: more than %d --set\n", cli->prog,
				NSA_CLI_MAX_SETS);
			return -1;
		}
		cli->sets[cli->n_sets++] = arg;
		return 1;
	case 't':
		cli->duration = strtod(arg, &end);
		if (*arg == '\0' || *end || cli->duration < 0) {
			fprintf(stderr,
				"%s: --duration: '%s' is not a number of "
				"seconds\n",
				cli->prog, arg);
			return -1;
		}
		return 1;
	case 'p':
		cli->print_config = 1;
		return 1;
	default:
		return 0;
	}
}

int nsa_cli_config(const struct nsa_cli *cli, struct nsa_config *conf)
{
	char err[1024];

	nsa_config_defaults(conf);
	if (cli->config_path &&
	    nsa_config_load(conf, cli->config_path, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", cli->prog, err);
		return 2;
	}
	if (cli->role) {
		char assignment[64];

		snprintf(assignment, sizeof(assignment), "agent.role=%s",
			 cli->role);
		if (nsa_config_set(conf, assignment, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s: --role: %s\n", cli->prog, err);
			return 2;
		}
	}
	for (unsigned int i = 0; i < cli->n_sets; i++) {
		if (nsa_config_set(conf, cli->sets[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "%s: %s\n", cli->prog, err);
			return 2;
		}
	}
	if (nsa_config_finish(conf, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", cli->prog, err);
		return 2;
	}
	return 0;
}
