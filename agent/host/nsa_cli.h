/*
 * nsa_cli.h - the start-up natsync's programs share: the command-line
 * options common to natsync-agent and natsync-gateway (the configuration
 * file, --role, --set, --duration, --print-config, --config-reference),
 * -h/-V, turning the options into one checked configuration, and starting
 * EAL with the signals caught.
 */
#ifndef NSA_CLI_H
#define NSA_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "nsa_config.h"

#define NSA_CLI_MAX_SETS 64
/* getopt letters nsa_cli_option() handles, each but p with an argument,
 * then -h and -V. */
#define NSA_CLI_OPTSTRING "c:r:s:t:phV"
#define NSA_CLI_OPT_REFERENCE 0x100
/* clang-format off */
#define NSA_CLI_LONGOPTS \
	{"config", required_argument, NULL, 'c'}, \
	{"role", required_argument, NULL, 'r'}, \
	{"set", required_argument, NULL, 's'}, \
	{"duration", required_argument, NULL, 't'}, \
	{"print-config", no_argument, NULL, 'p'}, \
	{"config-reference", no_argument, NULL, NSA_CLI_OPT_REFERENCE}
/* -h, -V and the end of a struct option array. */
#define NSA_CLI_HELP_LONGOPTS \
	{"help", no_argument, NULL, 'h'}, \
	{"version", no_argument, NULL, 'V'}, \
	{NULL, 0, NULL, 0}
/* clang-format on */

/* NSA_CLI_LONGOPTS and NSA_CLI_HELP_LONGOPTS, for a program that has no
 * options of its own. */
extern const struct option nsa_cli_longopts[];

/* Returned by nsa_cli_option and nsa_cli_config when the program goes on;
 * anything else is the exit status. */
#define NSA_CLI_RUN (-1)

struct nsa_cli {
	const char *prog; /* for messages and -V */
	void (*usage)(FILE *out);
	/* The program's own sections (NULL: the agent's alone). */
	const struct nsa_key_table *keys;
	/* What the program needs beyond nsa_config_finish; 0 or -1 with the
	 * reason in err. May be NULL. */
	int (*check)(const struct nsa_config *conf, char *err, size_t errlen);

	const char *config_path;
	const char *role;
	const char *sets[NSA_CLI_MAX_SETS];
	unsigned int n_sets;
	double duration; /* 0: none */
	int print_config;
	int print_reference;
};

/* Take one getopt result of NSA_CLI_OPTSTRING / NSA_CLI_LONGOPTS:
 * NSA_CLI_RUN, or the exit status (-h, -V, a bad value or an unknown
 * option, with the message printed). */
int nsa_cli_option(struct nsa_cli *cli, int opt, const char *arg);

/* -h, -V or an option nobody took: the usage or version printed, 0 for -h
 * and -V, 2 otherwise. */
int nsa_cli_help_option(const struct nsa_cli *cli, int opt);

/* Load path over conf; 0, or 2 with "PROG: reason" printed. */
int nsa_cli_load(const struct nsa_cli *cli, struct nsa_config *conf,
		 const char *path);

/* Apply one section.key=value; 0, or 2 with "PROG: reason" printed. */
int nsa_cli_set(const struct nsa_cli *cli, struct nsa_config *conf,
		const char *assignment);

/* nsa_config_finish, then cli->check; 0, or 2 with "PROG: reason". */
int nsa_cli_finish(const struct nsa_cli *cli, struct nsa_config *conf);

/* Defaults (with cli->keys: conf begins the program's struct), the file,
 * --role, every --set in order, the checks, the log level; then
 * --print-config or --config-reference print and end. NSA_CLI_RUN, or the
 * exit status: 0 after printing, 2 for bad configuration. */
int nsa_cli_config(const struct nsa_cli *cli, struct nsa_config *conf);

/* Signals nsa_cli_start catches. */
#define NSA_CLI_CATCH_STOP 1 /* SIGINT, SIGTERM: nsa_cli_stopping() */
#define NSA_CLI_CATCH_DUMP 2 /* SIGUSR1: nsa_cli_dump_requested() */
#define NSA_CLI_CATCH_HANDOVER 4 /* SIGUSR2: nsa_cli_handover_requested() */

/* Start EAL with conf's eal_args, the extra arguments and default_lcores
 * (see nsa_eal_start), then catch the signals asked for and ignore
 * SIGPIPE. 0, or nsa_eal_start's error with "PROG: reason" printed. */
int nsa_cli_start(const struct nsa_cli *cli, const struct nsa_config *conf,
		  int extra_argc, char **extra_argv, const char *default_lcores,
		  int catch);

extern int nsa_cli_stop; /* set by SIGINT/SIGTERM */
extern int nsa_cli_dump; /* set by SIGUSR1 */
extern int nsa_cli_handover; /* set by SIGUSR2 */

static inline int nsa_cli_stopping(void)
{
	return __atomic_load_n(&nsa_cli_stop, __ATOMIC_RELAXED);
}

/* 1 once per SIGUSR1. */
static inline int nsa_cli_dump_requested(void)
{
	return __atomic_exchange_n(&nsa_cli_dump, 0, __ATOMIC_RELAXED);
}

/* 1 once per SIGUSR2. */
static inline int nsa_cli_handover_requested(void)
{
	return __atomic_exchange_n(&nsa_cli_handover, 0, __ATOMIC_RELAXED);
}

#endif
