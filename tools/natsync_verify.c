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
 * never writes to the store.
 *
 * --used-memory prints the store's used memory (INFO memory, summed over
 * the masters) and exits; --memory-base BYTES, that figure taken while the
 * store was empty, makes it print after the comparisons the store's bytes
 * per session, in all and for each family (nsa_storemem.c), the sessions
 * being those it read from the store: the demo's figures, measured as
 * natsync-bench measures its own.
 *
 * --get TUPLE prints one session as the store holds it, in either layout:
 * the master that owns its key is loaded as a standby loads it (the keys,
 * or the log's segments and checkpoints merged), and the session of that
 * tuple, if any, is printed as JSON. Exit status 0 found, 1 not in the
 * store, 2 bad options or a store it cannot read.
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
#include "nsa_storemem.h"
#include "nsdp_time.h"

/* A store that does not answer within this is an error. */
#define STORE_TIMEOUT_MS 5000
#define VERIFY_LOAD_TRIES 10

/* Sessions of every family, an IPv6 one with its second line. */
struct table {
	struct ns_rec *s;
	size_t n, cap;
	const char *name;
	uint64_t bad; /* store values that are not records */
	int oom; /* a session could not be kept: the table is incomplete */
};

/* --pair: only sessions of this gateway pair (gateway_id >> 8); -1 all. */
static int64_t only_pair = -1;

/* Keep s in t; a session of another pair than --pair's is passed over. */
static int table_push(struct table *t, const struct ns_session *s)
{
	if (only_pair >= 0 && s->gateway_id >> 8 != only_pair)
		return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct ns_rec *p = realloc(t->s, cap * sizeof(*p));

		if (!p) {
			t->oom = 1;
			return -ENOMEM;
		}
		t->s = p;
		t->cap = cap;
	}
	t->s[t->n].s = *s;
	if (ns_family_is_v6(s->family))
		t->s[t->n].v6 = *ns_session_v6_of(s);
	else
		memset(&t->s[t->n].v6, 0, sizeof(t->s[t->n].v6));
	t->n++;
	return 0;
}

/* Order by flow (the session key): IPv4 flows first, then IPv6 ones by
 * their inside addresses and ports. */
static int flow_cmp(const void *pa, const void *pb)
{
	const struct ns_rec *ra = pa, *rb = pb;
	const struct ns_session *a = &ra->s, *b = &rb->s;
	int v6a = ns_family_is_v6(a->family), v6b = ns_family_is_v6(b->family);

	if (v6a != v6b)
		return v6a - v6b;
	if (v6a) {
		int c = memcmp(ra->v6.orig_saddr, rb->v6.orig_saddr, 32);

		if (a->proto != b->proto)
			return a->proto < b->proto ? -1 : 1;
		if (c)
			return c;
	}
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

/* Read one record of a table file into r: 1, 0 at the end of the file,
 * or a negative errno (a message printed) for a partial or invalid
 * record. Its first two bytes give its length. */
static int table_read_record(FILE *f, const char *path, size_t at,
			     struct ns_rec *r)
{
	uint8_t buf[NS_RECORD_MAX_LEN];
	size_t got = fread(buf, 1, 2, f), len;

	if (got == 0)
		return 0;
	len = got == 2 && buf[0] == NS_RECORD_VERSION
		      ? ns_record_wire_len(buf[1])
		      : 0;
	if (got == 2 && len > 2)
		got += fread(buf + 2, 1, len - 2, f);
	if (len == 0 || ns_record_decode_rec(buf, got, r) < 0) {
		if (got < 2 || (len > 0 && got < len))
			fprintf(stderr,
				"natsync-verify: %s: ends in a partial record "
				"(%zu of %zu bytes) after %zu records\n",
				path, got, len ? len : 2, at);
		else
			fprintf(stderr,
				"natsync-verify: %s: record %zu is not a "
				"valid session record\n",
				path, at);
		return -EINVAL;
	}
	return 1;
}

static int table_read_file(struct table *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	struct ns_rec r;
	int rc = 0, got;

	if (!f) {
		fprintf(stderr, "natsync-verify: %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	t->n = 0;
	while (rc == 0 && (got = table_read_record(f, path, t->n, &r)) != 0) {
		if (got < 0) {
			rc = got;
		} else if (table_push(t, &r.s) < 0) {
			fprintf(stderr,
				"natsync-verify: %s: out of memory after %zu "
				"records\n",
				path, t->n);
			rc = -ENOMEM;
		}
	}
	if (rc == 0 && ferror(f)) {
		rc = errno ? -errno : -EIO;
		fprintf(stderr, "natsync-verify: %s: %s\n", path,
			strerror(-rc));
	}
	fclose(f);
	if (rc == 0)
		qsort(t->s, t->n, sizeof(*t->s), flow_cmp);
	return rc;
}

static unsigned int store_take(void *arg, unsigned int node,
			       const struct ns_session *s, unsigned int n)
{
	struct table *t = arg;
	unsigned int i;

	(void)node;
	for (i = 0; i < n && table_push(t, &s[i]) == 0; i++)
		;
	return i;
}

static void store_count_bad(void *arg, uint64_t n)
{
	struct table *t = arg;

	t->bad += n;
}

/* Load master node into sink as a standby does, or every master in one
 * load (every: log layout on a cluster, each segment read once): 0 or
 * -EIO, printed. */
static int node_read(const struct nsa_store_conf *sc,
		     const struct nsa_topology *topo, unsigned int node,
		     int every, const struct nsa_loader_sink *sink)
{
	char err[512];
	int lr = NSA_LOADER_FAILED;

	/* Log layout: a load that a compaction round overtook gave nothing;
	 * it is read again (a round per load at most, so a few tries
	 * suffice). */
	for (int try = 0; try < VERIFY_LOAD_TRIES; try++) {
		lr = every ? nsa_loader_run_every(sc, topo, 0, sink,
						  STORE_TIMEOUT_MS, err,
						  sizeof(err))
			   : nsa_loader_run(sc, topo, node, 0, sink,
					    STORE_TIMEOUT_MS, err, sizeof(err));
		if (lr != NSA_LOADER_RACED)
			break;
	}
	if (lr == NSA_LOADER_DONE)
		return 0;
	fprintf(stderr, "natsync-verify: store: %s\n", err);
	return -EIO;
}

/* The sessions of every master (only_slot < 0) or of the master that owns
 * only_slot, read as the standby loads them (GETKEYSINSLOT or SCAN, then
 * MGET; the log's segments and checkpoints merged); in the log layout only
 * segments signed with conf's batch key, if any. */
static int table_read_store(struct table *t, const struct nsa_config *conf,
			    int only_slot)
{
	const struct nsa_store_conf *sc = &conf->store;
	struct nsa_topology *topo = calloc(1, sizeof(*topo));
	const struct nsa_loader_sink sink = {.apply = store_take,
					     .bad = store_count_bad,
					     .arg = t,
					     .batch_key = conf->batch_key,
					     .batch_key_len =
						     conf->batch_key_len};
	char err[512];
	int rc = 0;

	t->n = 0;
	t->bad = 0;
	if (!topo || nsa_topology_fetch(sc, topo, err, sizeof(err)) != 0) {
		fprintf(stderr, "natsync-verify: store: %s\n",
			topo ? err : "out of memory");
		free(topo);
		return -EIO;
	}
	if (only_slot < 0 && sc->layout == NSA_LAYOUT_LOG && topo->cluster &&
	    topo->n_nodes > 1)
		rc = node_read(sc, topo, 0, 1, &sink);
	else
		for (unsigned int i = 0; i < topo->n_nodes && rc == 0; i++)
			if (only_slot < 0 || topo->slot_node[only_slot] == i)
				rc = node_read(sc, topo, i, 0, &sink);
	free(topo);
	if (rc == 0 && t->oom) {
		fprintf(stderr,
			"natsync-verify: store: out of memory after %zu "
			"sessions\n",
			t->n);
		rc = -ENOMEM;
	}
	if (t->bad)
		fprintf(stderr,
			"natsync-verify: store: %" PRIu64
			" values are not valid session records\n",
			t->bad);
	qsort(t->s, t->n, sizeof(*t->s), flow_cmp);
	return rc;
}

/* proto's name (tcp, udp, icmp, icmpv6 or a number) into *proto. */
static int proto_parse(const char *p, uint8_t *proto)
{
	unsigned int n;
	int used = 0;

	if (strcasecmp(p, "tcp") == 0)
		*proto = IPPROTO_TCP;
	else if (strcasecmp(p, "udp") == 0)
		*proto = IPPROTO_UDP;
	else if (strcasecmp(p, "icmp") == 0)
		*proto = IPPROTO_ICMP;
	else if (strcasecmp(p, "icmpv6") == 0)
		*proto = IPPROTO_ICMPV6;
	else if (sscanf(p, "%u%n", &n, &used) == 1 && p[used] == '\0' &&
		 n > 0 && n < 256)
		*proto = (uint8_t)n;
	else
		return -EINVAL;
	return 0;
}

/* "PROTO:SADDR:SPORT-DADDR:DPORT", or with IPv6 addresses in brackets
 * ("tcp:[2001:db8::1]:40000-[64:ff9b::5db8:d822]:443"), into r: an IPv4
 * tuple into r->s.orig, an IPv6 one's addresses into r->v6 (r->s.family
 * NS_FAMILY_NAT66: the key and the flow are the same for NAT64). For
 * ICMP the ports are the echo identifier and 0. */
static int tuple_parse(const char *text, struct ns_rec *r)
{
	char p[16], sa[64], da[64];
	unsigned int sp, dp;
	struct in_addr a;
	int used = 0, v6 = strchr(text, '[') != NULL;

	if ((v6 ? sscanf(text, "%15[^:]:[%63[^]]]:%u-[%63[^]]]:%u%n", p, sa,
			 &sp, da, &dp, &used)
		: sscanf(text, "%15[^:]:%63[^:]:%u-%63[^:]:%u%n", p, sa, &sp,
			 da, &dp, &used)) != 5 ||
	    text[used] != '\0' || sp > 65535 || dp > 65535 ||
	    proto_parse(p, &r->s.proto) < 0)
		return -EINVAL;
	r->s.orig.sport = (uint16_t)sp;
	r->s.orig.dport = (uint16_t)dp;
	if (v6) {
		r->s.family = NS_FAMILY_NAT66;
		return inet_pton(AF_INET6, sa, r->v6.orig_saddr) == 1 &&
				       inet_pton(AF_INET6, da,
						 r->v6.orig_daddr) == 1
			       ? 0
			       : -EINVAL;
	}
	if (inet_pton(AF_INET, sa, &a) != 1)
		return -EINVAL;
	r->s.orig.saddr = ntohl(a.s_addr);
	if (inet_pton(AF_INET, da, &a) != 1)
		return -EINVAL;
	r->s.orig.daddr = ntohl(a.s_addr);
	return 0;
}

/* --get: the session of tuple as the store holds it. 0 printed, 1 not in
 * the store, 2 an error (printed). */
static int get_session(const struct nsa_config *conf, const char *tuple)
{
	struct table t = {.name = "store"};
	struct ns_rec want;
	uint8_t key[NS_KEY_MAX];
	char js[512];
	int found = -1;

	memset(&want, 0, sizeof(want));
	want.s.family = NS_FAMILY_IPV4;
	if (tuple_parse(tuple, &want) < 0) {
		fprintf(stderr,
			"natsync-verify: --get: '%s' is not "
			"PROTO:SADDR:SPORT-DADDR:DPORT (e.g. "
			"tcp:10.0.0.1:40000-198.51.100.7:443, or "
			"tcp:[2001:db8::1]:40000-[64:ff9b::5db8:d822]:443)\n",
			tuple);
		return 2;
	}
	if (table_read_store(&t, conf,
			     ns_key_slot(key, ns_key_of(&want.s, key))) < 0) {
		free(t.s);
		return 2;
	}
	for (size_t i = 0; i < t.n && found < 0; i++)
		if (ns_session_same_flow(&t.s[i].s, &want.s))
			found = (int)i;
	if (found >= 0) {
		ns_record_to_json(&t.s[found].s, js, sizeof(js));
		printf("%s\n", js);
	} else {
		fprintf(stderr, "natsync-verify: %s: not in the store\n",
			tuple);
	}
	free(t.s);
	return found >= 0 ? 0 : 1;
}

static void show_only(const struct table *t, const struct ns_session *s)
{
	char js[512];

	ns_record_to_json(s, js, sizeof(js));
	fprintf(stderr, "  only in %s: %s\n", t->name, js);
}

/* --identity: a kernel gateway's entries are compared by what makes a
 * session (protocol, both tuples, gateway), not by their timeouts and
 * stamps, which a table dumped from the kernel later cannot reproduce. */
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

/* A figure, or n/a when it was not measured (negative). */
static const char *figure(char *buf, size_t cap, double v)
{
	if (v < 0)
		return "n/a";
	snprintf(buf, cap, "%.1f", v);
	return buf;
}

/* --memory-base: the store's growth since base per session of store (the
 * table read from it), in all and for each family. 0, or -EIO (logged). */
static int memory_report(const struct nsa_config *conf,
			 const struct table *store, uint64_t base)
{
	struct nsa_storemem before = {.used_memory = base}, after;
	struct nsa_storemem_live live = {0};
	struct nsa_storemem_bytes b;
	char all[32], v4[32], v6[32];

	if (nsa_storemem_probe(&conf->store, &after) != 0)
		return -EIO;
	for (size_t i = 0; i < store->n; i++)
		nsa_storemem_count(&live, &store->s[i].s);
	nsa_storemem_per_session(&conf->store, &before, &after, &live, &b);
	printf("memory: live=%" PRIu64 " live_v6=%" PRIu64
	       " used_memory=%" PRIu64 " keys=%" PRIu64
	       " store_bytes_per_session=%s store_bytes_per_session_v4=%s"
	       " store_bytes_per_session_v6=%s\n",
	       live.live, live.live_v6, after.used_memory, after.keys,
	       figure(all, sizeof(all), b.all), figure(v4, sizeof(v4), b.v4),
	       figure(v6, sizeof(v6), b.v6));
	return 0;
}

/* --used-memory: what the store uses now, summed over its masters. */
static int used_memory(const struct nsa_config *conf)
{
	struct nsa_storemem m;

	if (nsa_storemem_probe(&conf->store, &m) != 0)
		return 2;
	printf("used_memory=%" PRIu64 " keys=%" PRIu64 " masters=%u\n",
	       m.used_memory, m.keys, m.masters);
	return 0;
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
		"                          layout)\n"
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
static int compare_all(const struct verify_opts *o, const struct table *store,
		       const struct table *source, const struct table *standby,
		       int quiet)
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
			       struct table *store, struct table *source,
			       struct table *standby)
{
	double t0;

	if (o->source_path && table_read_file(source, o->source_path) < 0)
		return -1;
	t0 = nsdp_now_s();
	for (;;) {
		if (o->use_store && table_read_store(store, conf, -1) < 0)
			return -1;
		if (o->pid && request_dump(o->pid, o->standby_path) < 0)
			return -1;
		if (o->standby_path &&
		    table_read_file(standby, o->standby_path) < 0)
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
	struct table store = {.name = "store"}, source = {.name = "source"},
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
		return used_memory(conf);
	if (o.get != NULL)
		return get_session(conf, o.get);
	equal = compare_until_equal(&o, conf, &store, &source, &standby);
	if (equal >= 0 && o.memory_base >= 0 &&
	    memory_report(conf, &store, (uint64_t)o.memory_base) != 0)
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
