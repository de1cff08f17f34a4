/*
 * natsync_verify.c - the natsync-verify program: are the tables equal?
 *
 * Reads up to three session tables and compares them entry by entry: the
 * sessions in the store (read as a standby loads them, nsa_loader.c), a
 * table file written by the synthetic source (what the active produced),
 * and a table file dumped by a standby. With --standby-pid it asks the standby for a fresh
 * dump (SIGUSR1) and retries until the tables match or --timeout passes,
 * since a standby may still be applying the last batches.
 *
 * Exit status: 0 every compared pair is equal, 1 a difference, 2 bad
 * options or input it cannot read whole. A table it could only read in part
 * (a file cut in a record, a read error, a table larger than the memory it
 * may use) is never compared: what it could hold is not the table. A store
 * value under the session prefix that is not a record is a difference. It
 * never writes to the store. The tables are read in nv_table.c.
 *
 * --used-memory prints the store's used memory (INFO memory, summed over
 * the masters) and exits; --memory-base BYTES, that figure taken while the
 * store was empty, makes it print after the comparisons the store's bytes
 * per session, in all and for each family (nsa_storemem.c), the sessions
 * being those it read from the store: the demo's figures, measured as
 * natsync-bench measures its own (nv_memory.c).
 *
 * --get TUPLE prints one session as the store holds it, in either layout:
 * the master that owns its key is loaded as a standby loads it (the keys,
 * or the log's segments and checkpoints merged), and the session of that
 * tuple, if any, is printed as JSON (nv_get.c). Exit status 0 found, 1
 * not in the store, 2 bad options or a store it cannot read.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "ngw_config.h"
#include "nsa_cli.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsa_loader.h"
#include "nv_get.h"
#include "nv_memory.h"
#include "nv_table.h"
#include "nsdp_time.h"

static void show_only(const struct nv_table *t, const struct ns_session *s)
{
	char js[512];

	ns_record_to_json(s, js, sizeof(js));
	fprintf(stderr, "  only in %s: %s\n", t->name, js);
}

/* --identity: a kernel gateway's entries are compared by what makes a
 * session (protocol, both tuples, gateway), not by their timeouts and
 * stamps, which a table dumped from the kernel later cannot reproduce. */
/* --pair: only sessions of this gateway pair (gateway_id >> 8); -1 all. */
static int64_t only_pair = -1;

static int identity_only;

static int same_session(const struct ns_session *a, const struct ns_session *b)
{
	if (!identity_only)
		return ns_session_equal_state(a, b);
	return a->family == b->family && a->proto == b->proto &&
	       a->gateway_id == b->gateway_id &&
	       !memcmp(&a->orig, &b->orig, sizeof(a->orig)) &&
	       !memcmp(&a->xlat, &b->xlat, sizeof(a->xlat)) &&
	       (!ns_family_is_v6(a->family) ||
		!memcmp(ns_session_v6_of(a), ns_session_v6_of(b),
			sizeof(struct ns_session_v6)));
}

/* Compare two sorted tables; prints a summary line, returns 1 if equal. */
static int table_compare(const struct nv_table *a, const struct nv_table *b,
			 int quiet)
{
	size_t i = 0, j = 0, missing = 0, extra = 0, differ = 0, shown = 0;
	char ja[512], jb[512];

	while (i < a->n || j < b->n) {
		int c = i == a->n   ? 1
			: j == b->n ? -1
				    : nv_flow_cmp(&a->s[i], &b->s[j]);

		if (c < 0) {
			missing++;
			if (!quiet && shown++ < 3)
				show_only(a, &a->s[i].s);
			i++;
		} else if (c > 0) {
			extra++;
			if (!quiet && shown++ < 3)
				show_only(b, &b->s[j].s);
			j++;
		} else {
			if (!same_session(&a->s[i].s, &b->s[j].s)) {
				differ++;
				if (!quiet && shown++ < 3) {
					ns_record_to_json(&a->s[i].s, ja,
							  sizeof(ja));
					ns_record_to_json(&b->s[j].s, jb,
							  sizeof(jb));
					fprintf(stderr,
						"  differ: %s: %s\n  %s: %s\n",
						a->name, ja, b->name, jb);
				}
			}
			i++;
			j++;
		}
	}
	if (!quiet)
		printf("%s (%zu) vs %s (%zu): %s, %zu only in %s, %zu only in "
		       "%s, %zu differ\n",
		       a->name, a->n, b->name, b->n,
		       missing + extra + differ ? "DIFFERENT" : "equal",
		       missing, a->name, extra, b->name, differ);
	return missing + extra + differ == 0;
}

/* Ask the standby for a dump and wait for the file (at most 15 s). */
static int request_dump(pid_t pid, const char *path)
{
	unlink(path);
	if (kill(pid, SIGUSR1) != 0) {
		fprintf(stderr, "natsync-verify: standby pid %d: %s\n",
			(int)pid, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < 1500; i++) {
		struct stat st;

		if (stat(path, &st) == 0)
			return 0;
		usleep(10000);
	}
	fprintf(stderr, "natsync-verify: the standby wrote no dump to %s\n",
		path);
	return -ETIMEDOUT;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-verify [options]\n"
		"\n"
		"Compares the sessions in the store, the source's final table "
		"and\n"
		"a standby's table; prints one line per comparison and a "
		"RESULT\n"
		"line.\n"
		"\n"
		"  -c, --config FILE       take the store settings ([store]) "
		"and\n"
		"                          the standby's dump path from FILE\n"
		"  -S, --store H:P[,H:P]   store seeds (default from "
		"--config)\n"
		"  -u, --user USER         ACL user for the store\n"
		"  -L, --layout keys|log   how the store holds the sessions\n"
		"                          (default from --config: [store]\n"
		"                          layout, log when unset)\n"
		"  -P, --password-file F   file holding the store password\n"
		"  -s, --source FILE       table file the source wrote\n"
		"  -b, --standby FILE      table file the standby dumped\n"
		"  -p, --standby-pid PID   ask that standby for a fresh dump\n"
		"                          (SIGUSR1) before each comparison\n"
		"  -t, --timeout SECS      retry until equal for SECS (default "
		"0)\n"
		"  -n, --no-store          do not read the store\n"
		"  -g, --get TUPLE         print the session of TUPLE\n"
		"                          (PROTO:SADDR:SPORT-DADDR:DPORT, the\n"
		"                          inside tuple) as the store holds\n"
		"                          it, as JSON, in either layout;\n"
		"                          exit 0 found, 1 not in the store\n"
		"  -i, --identity          compare protocol, tuples and "
		"gateway\n"
		"                          only, not timeouts, stamps, epochs\n"
		"                          (a kernel gateway's table, dumped\n"
		"                          from conntrack)\n"
		"  -U, --used-memory       print the store's used memory\n"
		"                          (INFO memory, summed over the\n"
		"                          masters) and its keys, and exit\n"
		"  -m, --memory-base BYTES the store's used memory when it was\n"
		"                          empty (as --used-memory printed it):\n"
		"                          after the comparisons, print a\n"
		"                          'memory:' line with its growth per\n"
		"                          session of the store, in all and for\n"
		"                          each family (run it with no natsync\n"
		"                          client connected)\n"
		"  -r, --pair P            only the sessions of gateway pair P\n"
		"                          (gateway_id >> 8) in every table:\n"
		"                          one pair of several sharing a "
		"store\n"
		"  -h, --help, -V, --version\n"
		"\n"
		"Exit status: 0 equal, 1 different, 2 bad options or input\n"
		"that cannot be read whole (partial record, read error, out\n"
		"of memory).\n");
}

/* What the command line asks for. */
struct verify_opts {
	const char *source_path, *standby_path, *get;
	double timeout;
	pid_t pid;
	int use_store, standby_opt, show_used;
	int64_t memory_base; /* -1: no --memory-base */
};

/* A number option's value, or -1 (told) when it is not one up to max. */
static int64_t number_arg(const char *name, const char *arg, int64_t max,
			  const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || v < 0 || v > max) {
		fprintf(stderr, "natsync-verify: --%s: '%s' is not %s\n", name,
			arg, what);
		return -1;
	}
	return v;
}

/* The options into o and conf. Returns -1 to go on, or the exit status
 * (help, version, a bad option: told). */
static int parse_args(int argc, char **argv, struct nsa_cli *cli,
		      struct nsa_config *conf, struct verify_opts *o)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"store", required_argument, NULL, 'S'},
		{"user", required_argument, NULL, 'u'},
		{"password-file", required_argument, NULL, 'P'},
		{"source", required_argument, NULL, 's'},
		{"standby", required_argument, NULL, 'b'},
		{"standby-pid", required_argument, NULL, 'p'},
		{"timeout", required_argument, NULL, 't'},
		{"no-store", no_argument, NULL, 'n'},
		{"identity", no_argument, NULL, 'i'},
		{"layout", required_argument, NULL, 'L'},
		{"get", required_argument, NULL, 'g'},
		{"pair", required_argument, NULL, 'r'},
		{"used-memory", no_argument, NULL, 'U'},
		{"memory-base", required_argument, NULL, 'm'},
		NSA_CLI_HELP_LONGOPTS,
	};
	char set[1100];
	int opt;

	while ((opt = getopt_long(argc, argv, "c:S:u:P:s:b:p:t:niL:g:r:Um:hV",
				  opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (nsa_cli_load(cli, conf, optarg))
				return 2;
			if (conf->table_dump[0] && !o->standby_path)
				o->standby_path = conf->table_dump;
			break;
		case 'S':
			snprintf(set, sizeof(set), "store.seeds=%s", optarg);
			goto apply;
		case 'u':
			snprintf(set, sizeof(set), "store.user=%s", optarg);
			goto apply;
		case 'L':
			snprintf(set, sizeof(set), "store.layout=%s", optarg);
			goto apply;
		case 'P':
			snprintf(set, sizeof(set), "store.password_file=%s",
				 optarg);
		apply:
			if (nsa_cli_set(cli, conf, set))
				return 2;
			break;
		case 's':
			o->source_path = optarg;
			break;
		case 'b':
			o->standby_path = optarg;
			o->standby_opt = 1;
			break;
		case 'p':
			o->pid = (pid_t)atoi(optarg);
			if (o->pid <= 0) {
				fprintf(stderr,
					"natsync-verify: --standby-pid: '%s' "
					"is not a process id\n",
					optarg);
				return 2;
			}
			break;
		case 't':
			o->timeout = atof(optarg);
			break;
		case 'n':
			o->use_store = 0;
			break;
		case 'i':
			identity_only = 1;
			break;
		case 'g':
			o->get = optarg;
			break;
		case 'r':
			only_pair = number_arg("pair", optarg, UINT32_MAX >> 8,
					       "a gateway pair (0..16777215)");
			if (only_pair < 0)
				return 2;
			break;
		case 'U':
			o->show_used = 1;
			break;
		case 'm':
			o->memory_base = number_arg("memory-base", optarg,
						    INT64_MAX, "a byte count");
			if (o->memory_base < 0)
				return 2;
			break;
		default:
			return nsa_cli_help_option(cli, opt);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "natsync-verify: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	return -1;
}

/* The options that do not go together: told, 2; else 0. */
static int check_args(const struct verify_opts *o)
{
	if (o->pid && !o->standby_path) {
		fprintf(stderr, "natsync-verify: --standby-pid needs --standby "
				"FILE (where the standby dumps)\n");
		return 2;
	}
	/* The growth is the whole store's: per session of every pair. */
	if (o->memory_base >= 0 && (!o->use_store || only_pair >= 0)) {
		fprintf(stderr, "natsync-verify: --memory-base needs the whole "
				"store (no --no-store, no --pair)\n");
		return 2;
	}
	/* A dump path from the file is not asked for: ignored. */
	if (o->get != NULL &&
	    (o->source_path || o->pid || o->standby_opt || !o->use_store)) {
		fprintf(stderr,
			"natsync-verify: --get reads the store alone\n");
		return 2;
	}
	return 0;
}

/* Compare every pair of the tables asked for (quiet: no lines); 1 when
 * all are equal and the store held no bad value. */
static int compare_all(const struct verify_opts *o,
		       const struct nv_table *store,
		       const struct nv_table *source,
		       const struct nv_table *standby, int quiet)
{
	int ok = 1;

	/* A value natsync would not write is not in any table. */
	if (o->use_store && store->bad)
		ok = 0;
	if (o->use_store && o->source_path)
		ok &= table_compare(source, store, quiet);
	if (o->standby_path && o->source_path)
		ok &= table_compare(source, standby, quiet);
	if (o->standby_path && o->use_store && !o->source_path)
		ok &= table_compare(store, standby, quiet);
	return ok;
}

/* Read and compare the tables until they are equal or the timeout
 * passes (a standby may still be applying). Returns 1 equal, 0 not, -1
 * a table that could not be read whole (told). */
static int compare_until_equal(const struct verify_opts *o,
			       const struct nsa_config *conf,
			       struct nv_table *store, struct nv_table *source,
			       struct nv_table *standby)
{
	double t0;

	if (o->source_path && nv_table_read_file(source, o->source_path) < 0)
		return -1;
	t0 = nsdp_now_s();
	for (;;) {
		if (o->use_store && nv_table_read_store(store, conf, -1) < 0)
			return -1;
		if (o->pid && request_dump(o->pid, o->standby_path) < 0)
			return -1;
		if (o->standby_path &&
		    nv_table_read_file(standby, o->standby_path) < 0)
			return -1;
		int last = nsdp_now_s() - t0 >= o->timeout;
		int ok = compare_all(o, store, source, standby, !last);

		if (ok && !last) /* the lines of the matching round */
			compare_all(o, store, source, standby, 0);
		if (ok || last)
			return ok;
		nsdp_sleep_ms(300);
	}
}

int main(int argc, char **argv)
{
	/* A gateway's file, [gateway] included, is accepted as it is. */
	static struct ngw_config gconf;
	struct nsa_config *conf = &gconf.agent;
	struct nsa_cli cli = {.prog = "natsync-verify", .usage = usage};
	struct verify_opts o = {.use_store = 1, .memory_base = -1};
	struct nv_table store = {.name = "store"}, source = {.name = "source"},
			standby = {.name = "standby"};
	int rc, equal;

	ngw_config_defaults(&gconf);
	rc = parse_args(argc, argv, &cli, conf, &o);
	if (rc >= 0)
		return rc;
	if (check_args(&o))
		return 2;
	/* Only the store settings matter here: do not apply role checks. */
	conf->role = NSA_ROLE_STANDBY;
	if (nsa_cli_finish(&cli, conf))
		return 2;
	if (o.show_used)
		return nv_used_memory(conf);
	if (o.get != NULL)
		return nv_get_session(conf, o.get, only_pair);
	store.only_pair = source.only_pair = standby.only_pair = only_pair;
	equal = compare_until_equal(&o, conf, &store, &source, &standby);
	if (equal >= 0 && o.memory_base >= 0 &&
	    nv_memory_report(conf, &store, (uint64_t)o.memory_base) != 0)
		equal = -1;
	if (equal >= 0)
		printf("RESULT verify store=%zu source=%zu standby=%zu "
		       "match=%s\n",
		       o.use_store ? store.n : 0, o.source_path ? source.n : 0,
		       o.standby_path ? standby.n : 0, equal ? "yes" : "no");
	free(store.s);
	free(source.s);
	free(standby.s);
	return equal < 0 ? 2 : !equal;
}
