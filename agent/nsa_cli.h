/*
 * nsa_cli.h - the command-line options natsync's programs share: the
 * configuration file, --role, --set overrides, --duration and
 * --print-config, and turning them into one checked configuration.
 */
#ifndef NSA_CLI_H
#define NSA_CLI_H

#include "nsa_config.h"

#define NSA_CLI_MAX_SETS 64
/* getopt letters nsa_cli_option() handles, each but p with an argument. */
#define NSA_CLI_OPTSTRING "c:r:s:t:p"
#define NSA_CLI_LONGOPTS                                    \
	{"config", required_argument, NULL, 'c'},           \
		{"role", required_argument, NULL, 'r'},     \
		{"set", required_argument, NULL, 's'},      \
		{"duration", required_argument, NULL, 't'}, \
	{                                                   \
		"print-config", no_argument, NULL, 'p'      \
	}

struct nsa_cli {
	const char *prog; /* for messages */
	const char *config_path;
	const char *role;
	const char *sets[NSA_CLI_MAX_SETS];
	unsigned int n_sets;
	double duration; /* 0: none */
	int print_config;
};

/* Take one getopt result: 1 when it was one of ours, 0 when it is not,
 * -1 for a bad value (the message is printed). */
int nsa_cli_option(struct nsa_cli *cli, int opt, const char *arg);

/* Defaults, the file, --role, then every --set, then the final checks:
 * 0, or 2 (the exit status for bad configuration) with the message
 * printed as "PROG: reason". */
int nsa_cli_config(const struct nsa_cli *cli, struct nsa_config *conf);

#endif
