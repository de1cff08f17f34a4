/*
 * nsb_opt.h - the rows of the getopt_long() tables of natsync-ctbench and
 * natsync-kflows: an option that takes a value, and the -h and -V rows
 * with the end of the table.
 */
#ifndef NSB_OPT_H
#define NSB_OPT_H

#include <getopt.h>
#include <stddef.h>

/* clang-format off */
#define NSB_OPT(name, letter) {name, required_argument, NULL, letter}
#define NSB_OPT_HELP_END \
	{"help", no_argument, NULL, 'h'}, \
	{"version", no_argument, NULL, 'V'}, \
	{NULL, 0, NULL, 0}
/* clang-format on */

#endif
