/*
 * natsync_verify.c - the natsync-verify program: are the tables equal?
 *
 * Reads up to three session tables and compares them entry by entry: the
 * sessions in the store (SCAN + MGET on every master), a table file written
 * by the synthetic source (what the active produced), and a table file
 * dumped by a standby. With --standby-pid it asks the standby for a fresh
 * dump (SIGUSR1) and retries until the tables match or --timeout passes,
 * since a standby may still be applying the last batches.
 *
 * Exit status: 0 every compared pair is equal, 1 a difference, 2 bad
 * options or unreadable input. It never writes to the store.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "ngw_config.h"
#include "nsa_cli.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsdp_time.h"

#define SCAN_COUNT "1000"

struct table {
	struct ns_session *s;
	size_t n, cap;
	const char *name;
};

static int table_push(struct table *t, const struct ns_session *s)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct ns_session *p = realloc(t->s, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->s = p;
		t->cap = cap;
	}
	t->s[t->n++] = *s;
	return 0;
}

static int flow_cmp(const void *pa, const void *pb)
{
	const struct ns_session *a = pa, *b = pb;

	if (a->proto != b->proto)
		return a->proto < b->proto ? -1 : 1;
	if (a->orig.saddr != b->orig.saddr)
		return a->orig.saddr < b->orig.saddr ? -1 : 1;
	if (a->orig.daddr != b->orig.daddr)
		return a->orig.daddr < b->orig.daddr ? -1 : 1;
	if (a->orig.sport != b->orig.sport)
		return a->orig.sport < b->orig.sport ? -1 : 1;
	if (a->orig.dport != b->orig.dport)
		return a->orig.dport < b->orig.dport ? -1 : 1;
	return 0;
}

static int table_read_file(struct table *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t buf[NS_RECORD_MAX_LEN];
	struct ns_session s;
	size_t reclen = ns_record_wire_len(NS_FAMILY_IPV4);

	if (!f) {
		fprintf(stderr, "natsync-verify: %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	t->n = 0;
	while (fread(buf, 1, reclen, f) == reclen) {
		if (ns_record_decode(buf, reclen, &s) < 0) {
			fprintf(stderr,
				"natsync-verify: %s: record %zu is not a "
				"valid session record\n",
				path, t->n);
			fclose(f);
			return -EINVAL;
		}
		table_push(t, &s);
	}
	fclose(f);
	qsort(t->s, t->n, sizeof(*t->s), flow_cmp);
	return 0;
}

static int scan_master(redisContext *c, struct table *t, uint64_t *bad)
{
	char cursor[32] = "0";

	do {
		redisReply *r = redisCommand(c, "SCAN %s MATCH ns:* COUNT %s",
					     cursor, SCAN_COUNT);
		redisReply *keys, *vals;
		const char **argv;
		size_t *lens;

		if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
			fprintf(stderr, "natsync-verify: SCAN failed: %s\n",
				r && r->type == REDIS_REPLY_ERROR ? r->str
								  : c->errstr);
			if (r)
				freeReplyObject(r);
			return -EIO;
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		keys = r->element[1];
		if (keys->elements == 0) {
			freeReplyObject(r);
			continue;
		}
		argv = malloc((keys->elements + 1) * sizeof(*argv));
		lens = malloc((keys->elements + 1) * sizeof(*lens));
		argv[0] = "MGET";
		lens[0] = 4;
		for (size_t i = 0; i < keys->elements; i++) {
			argv[i + 1] = keys->element[i]->str;
			lens[i + 1] = keys->element[i]->len;
		}
		/* Keys SCAN returns on one master may sit in different slots:
		 * on a cluster MGET needs one slot, so fetch one by one there. */
		vals = redisCommandArgv(c, (int)keys->elements + 1, argv, lens);
		if (vals && vals->type == REDIS_REPLY_ERROR &&
		    strstr(vals->str, "CROSSSLOT")) {
			freeReplyObject(vals);
			vals = NULL;
			for (size_t i = 0; i < keys->elements; i++)
				redisAppendCommand(c, "GET %b", argv[i + 1],
						   lens[i + 1]);
			for (size_t i = 0; i < keys->elements; i++) {
				redisReply *v = NULL;
				struct ns_session s;

				if (redisGetReply(c, (void **)&v) != REDIS_OK) {
					free(argv);
					free(lens);
					freeReplyObject(r);
					return -EIO;
				}
				if (v->type == REDIS_REPLY_STRING &&
				    ns_record_decode((uint8_t *)v->str, v->len,
						     &s) > 0)
					table_push(t, &s);
				else if (v->type != REDIS_REPLY_NIL)
					(*bad)++;
				freeReplyObject(v);
			}
		} else if (vals && vals->type == REDIS_REPLY_ARRAY) {
			for (size_t i = 0; i < vals->elements; i++) {
				redisReply *v = vals->element[i];
				struct ns_session s;

				if (v->type == REDIS_REPLY_STRING &&
				    ns_record_decode((uint8_t *)v->str, v->len,
						     &s) > 0)
					table_push(t, &s);
				else if (v->type != REDIS_REPLY_NIL)
					(*bad)++;
			}
		} else {
			fprintf(stderr, "natsync-verify: MGET failed: %s\n",
				vals ? vals->str : c->errstr);
			free(argv);
			free(lens);
			if (vals)
				freeReplyObject(vals);
			freeReplyObject(r);
			return -EIO;
		}
		if (vals)
			freeReplyObject(vals);
		free(argv);
		free(lens);
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return 0;
}

static int table_read_store(struct table *t, const struct nsa_store_conf *sc)
{
	struct nsa_topology *topo = calloc(1, sizeof(*topo));
	char err[512];
	uint64_t bad = 0;
	int rc = 0;

	t->n = 0;
	if (nsa_topology_fetch(sc, topo, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-verify: store: %s\n", err);
		free(topo);
		return -EIO;
	}
	for (unsigned int i = 0; i < topo->n_nodes && rc == 0; i++) {
		redisContext *c = nsa_store_connect(sc, &topo->nodes[i].addr,
						    err, sizeof(err));

		if (!c) {
			fprintf(stderr, "natsync-verify: store: %s\n", err);
			rc = -EIO;
			break;
		}
		rc = scan_master(c, t, &bad);
		redisFree(c);
	}
	free(topo);
	if (bad)
		fprintf(stderr,
			"natsync-verify: store: %" PRIu64
			" values are not valid session records\n",
			bad);
	qsort(t->s, t->n, sizeof(*t->s), flow_cmp);
	return rc;
}

/* Compare two sorted tables; prints a summary line, returns 1 if equal. */
static int table_compare(const struct table *a, const struct table *b,
			 int quiet)
{
	size_t i = 0, j = 0, missing = 0, extra = 0, differ = 0, shown = 0;
	char ja[512], jb[512];

	while (i < a->n || j < b->n) {
		int c = i == a->n   ? 1
			: j == b->n ? -1
				    : flow_cmp(&a->s[i], &b->s[j]);

		if (c < 0) {
			missing++;
			if (!quiet && shown++ < 3) {
				ns_record_to_json(&a->s[i], ja, sizeof(ja));
				fprintf(stderr, "  only in %s: %s\n", a->name,
					ja);
			}
			i++;
		} else if (c > 0) {
			extra++;
			if (!quiet && shown++ < 3) {
				ns_record_to_json(&b->s[j], jb, sizeof(jb));
				fprintf(stderr, "  only in %s: %s\n", b->name,
					jb);
			}
			j++;
		} else {
			if (!ns_session_equal_state(&a->s[i], &b->s[j])) {
				differ++;
				if (!quiet && shown++ < 3) {
					ns_record_to_json(&a->s[i], ja,
							  sizeof(ja));
					ns_record_to_json(&b->s[j], jb,
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
		"  -P, --password-file F   file holding the store password\n"
		"  -s, --source FILE       table file the source wrote\n"
		"  -b, --standby FILE      table file the standby dumped\n"
		"  -p, --standby-pid PID   ask that standby for a fresh dump\n"
		"                          (SIGUSR1) before each comparison\n"
		"  -t, --timeout SECS      retry until equal for SECS (default "
		"0)\n"
		"  -n, --no-store          do not read the store\n"
		"  -h, --help, -V, --version\n"
		"\n"
		"Exit status: 0 equal, 1 different, 2 bad options or input.\n");
}

int main(int argc, char **argv)
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
		NSA_CLI_HELP_LONGOPTS,
	};
	/* A gateway's file, [gateway] included, is accepted as it is. */
	static struct ngw_config gconf;
	struct nsa_config *conf = &gconf.agent;
	struct nsa_cli cli = {.prog = "natsync-verify", .usage = usage};
	struct table store = {.name = "store"}, source = {.name = "source"},
		     standby = {.name = "standby"};
	const char *source_path = NULL, *standby_path = NULL;
	char set[1100];
	double timeout = 0, t0;
	pid_t pid = 0;
	int opt, use_store = 1, equal = 0;

	ngw_config_defaults(&gconf);
	while ((opt = getopt_long(argc, argv, "c:S:u:P:s:b:p:t:nhV", opts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (nsa_cli_load(&cli, conf, optarg))
				return 2;
			if (conf->table_dump[0] && !standby_path)
				standby_path = conf->table_dump;
			break;
		case 'S':
			snprintf(set, sizeof(set), "store.seeds=%s", optarg);
			goto apply;
		case 'u':
			snprintf(set, sizeof(set), "store.user=%s", optarg);
			goto apply;
		case 'P':
			snprintf(set, sizeof(set), "store.password_file=%s",
				 optarg);
		apply:
			if (nsa_cli_set(&cli, conf, set))
				return 2;
			break;
		case 's':
			source_path = optarg;
			break;
		case 'b':
			standby_path = optarg;
			break;
		case 'p':
			pid = (pid_t)atoi(optarg);
			if (pid <= 0) {
				fprintf(stderr,
					"natsync-verify: --standby-pid: '%s' "
					"is not a process id\n",
					optarg);
				return 2;
			}
			break;
		case 't':
			timeout = atof(optarg);
			break;
		case 'n':
			use_store = 0;
			break;
		default:
			return nsa_cli_help_option(&cli, opt);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "natsync-verify: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	if (pid && !standby_path) {
		fprintf(stderr, "natsync-verify: --standby-pid needs --standby "
				"FILE (where the standby dumps)\n");
		return 2;
	}
	/* Only the store settings matter here: do not apply role checks. */
	conf->role = NSA_ROLE_STANDBY;
	if (nsa_cli_finish(&cli, conf))
		return 2;
	if (source_path && table_read_file(&source, source_path) < 0)
		return 2;

	t0 = nsdp_now_s();
	for (;;) {
		int ok = 1;

		if (use_store && table_read_store(&store, &conf->store) < 0)
			return 2;
		if (pid && request_dump(pid, standby_path) < 0)
			return 2;
		if (standby_path && table_read_file(&standby, standby_path) < 0)
			return 2;
		int last = nsdp_now_s() - t0 >= timeout;
		int quiet = !last;

		if (use_store && source_path)
			ok &= table_compare(&source, &store, quiet);
		if (standby_path && source_path)
			ok &= table_compare(&source, &standby, quiet);
		if (standby_path && use_store && !source_path)
			ok &= table_compare(&store, &standby, quiet);
		if (ok || last) {
			if (ok && quiet) {
				/* Print the lines of the matching round. */
				if (use_store && source_path)
					table_compare(&source, &store, 0);
				if (standby_path && source_path)
					table_compare(&source, &standby, 0);
				if (standby_path && use_store && !source_path)
					table_compare(&store, &standby, 0);
			}
			equal = ok;
			break;
		}
		nsdp_sleep_ms(300);
	}
	printf("RESULT verify store=%zu source=%zu standby=%zu match=%s\n",
	       use_store ? store.n : 0, source_path ? source.n : 0,
	       standby_path ? standby.n : 0, equal ? "yes" : "no");
	free(store.s);
	free(source.s);
	free(standby.s);
	return equal ? 0 : 1;
}
