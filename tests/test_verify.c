/*
 * test_verify.c - natsync-verify, the judge of the end-to-end and fault
 * suites, fed tables that differ: it must say match=no and exit 1 for every
 * difference of state (a session missing, an extra one, each field of the
 * record), exit 2 without a verdict for input it cannot read whole (a
 * trailing partial record, a directory, a missing file, memory it cannot
 * get), and say match=yes only when the tables are equal.
 *
 * The store is a real 3-master cluster on ports 7940-7942, written with a
 * plain hiredis client; the table files are written here record by record
 * as the synthetic source and the standby write them.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <hiredis/hiredis.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nst_session.h"
#include "nst_skip.h"
#include "nst_store.h"

#define STORE_PORT 7940
#define SEEDS "127.0.0.1:7940"
#define SESSIONS 1000
/* The session the tests change, remove or add beside. */
#define VICTIM 500

static struct ns_session sessions[SESSIONS];

static struct ns_session session_of(uint32_t i)
{
	struct ns_session s = nst_session(i % 3 ? 6 : 17, NS_EV_CREATE, 1, 3,
					  60000, 1700000000000000000ull + i);

	nst_session_flow(&s, i);
	return s;
}

/* A running cluster, emptied; the run directory name made current, and
 * sessions[] the table every side starts from. */
static void fresh(const char *name)
{
	nst_run_dir_make(name);
	if (nst_sh("redis-cli -p %d cluster info 2>/dev/null | "
		   "grep -q cluster_state:ok",
		   STORE_PORT) != 0)
		cr_assert_eq(nst_store_start_fresh(STORE_PORT, 3, 0), 0,
			     "the store did not start");
	for (int p = STORE_PORT; p < STORE_PORT + 3; p++)
		cr_assert_eq(nst_sh("redis-cli -p %d flushall >/dev/null", p),
			     0);
	for (uint32_t i = 0; i < SESSIONS; i++)
		sessions[i] = session_of(i);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	(void)stats;
	nst_store_stop(STORE_PORT);
}

/* Write n records to file in the run directory, then extra raw bytes. */
static void table_write(const char *file, const struct ns_session *s, size_t n,
			const void *extra, size_t extra_len)
{
	FILE *f = fopen(nst_run_path(file), "wb");
	uint8_t buf[NS_RECORD_MAX_LEN];

	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++) {
		int len = ns_record_encode(&s[i], buf, sizeof(buf));

		cr_assert_gt(len, 0);
		cr_assert_eq(fwrite(buf, 1, (size_t)len, f), (size_t)len);
	}
	if (extra_len)
		cr_assert_eq(fwrite(extra, 1, extra_len, f), extra_len);
	cr_assert_eq(fclose(f), 0);
}

/* Read the replies queued[] counts on c[0..n), each an OK. */
static void store_replies(redisContext **c, unsigned int *queued,
			  unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		for (; queued[i] > 0; queued[i]--) {
			redisReply *r = NULL;

			cr_assert_eq(redisGetReply(c[i], (void **)&r),
				     REDIS_OK);
			cr_assert(r && r->type == REDIS_REPLY_STATUS, "SET: %s",
				  r ? r->str : "no reply");
			freeReplyObject(r);
		}
	}
}

/* SET every key at the master that owns its slot, pipelined in chunks;
 * value_len 0: the session's record, else the raw value given. An IPv6
 * session goes alone (n = 1), its second line after it. */
static void store_put(const struct ns_session *s, size_t n, const void *value,
		      size_t value_len)
{
	struct nsa_store_conf sc = {.n_seeds = 1, .connect_timeout_ms = 1000};
	struct nsa_topology *topo = calloc(1, sizeof(*topo));
	redisContext *c[NSA_MAX_NODES] = {0};
	unsigned int queued[NSA_MAX_NODES] = {0}, node;
	char err[256];

	cr_assert_not_null(topo);
	snprintf(sc.seeds[0].host, sizeof(sc.seeds[0].host), "127.0.0.1");
	sc.seeds[0].port = STORE_PORT;
	cr_assert_eq(nsa_topology_fetch(&sc, topo, err, sizeof(err)), 0,
		     "topology: %s", err);
	for (unsigned int i = 0; i < topo->n_nodes; i++) {
		c[i] = redisConnect(topo->nodes[i].addr.host,
				    topo->nodes[i].addr.port);
		cr_assert(c[i] && !c[i]->err);
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t key[NS_KEY_MAX], buf[NS_RECORD_MAX_LEN];
		const void *v = value;
		size_t len = value_len, klen = ns_key_of(&s[i], key);

		if (!len) {
			int l = ns_record_encode(&s[i], buf, sizeof(buf));

			cr_assert_gt(l, 0);
			v = buf;
			len = (size_t)l;
		}
		node = topo->slot_node[ns_key_slot(key, klen)];
		redisAppendCommand(c[node], "SET %b %b", key, klen, v, len);
		queued[node]++;
		if (i % 1024 == 1023 || i == n - 1)
			store_replies(c, queued, topo->n_nodes);
	}
	for (unsigned int i = 0; i < topo->n_nodes; i++)
		redisFree(c[i]);
	free(topo);
}

/* Every side holds sessions[]: the store, source.tbl and standby.tbl. */
static void all_equal(void)
{
	store_put(sessions, SESSIONS, NULL, 0);
	table_write("source.tbl", sessions, SESSIONS, NULL, 0);
	table_write("standby.tbl", sessions, SESSIONS, NULL, 0);
}

/* Run natsync-verify on the store, source.tbl and standby.tbl with a
 * command prefix (e.g. a ulimit); its exit status, output in verify.out. */
static int verify_with(const char *prefix, const char *source,
		       const char *standby)
{
	int rc = nst_sh("%s %s -S %s -L keys -s %s -b %s >%s 2>&1", prefix,
			nst_build("tools/natsync-verify"), SEEDS, source,
			standby, nst_run_path("verify.out"));

	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	return rc;
}

static int verify(void)
{
	return verify_with("", nst_run_path("source.tbl"),
			   nst_run_path("standby.tbl"));
}

static int verify_says(const char *text)
{
	return nst_sh("grep -qF -- '%s' %s", text,
		      nst_run_path("verify.out")) == 0;
}

/* A difference: exit 1, match=no, and the summary line want. */
static void assert_different(int rc, const char *want)
{
	cr_assert_eq(rc, 1, "natsync-verify exited %d, not 1 (different)", rc);
	cr_assert(verify_says("match=no"), "no match=no in verify.out");
	cr_assert(!verify_says("match=yes"));
	if (want)
		cr_assert(verify_says(want), "verify.out lacks '%s'", want);
}

/* Input it cannot judge: exit 2, no verdict, and the message why. */
static void assert_refused(int rc, const char *why)
{
	cr_assert_eq(rc, 2, "natsync-verify exited %d, not 2 (bad input)", rc);
	cr_assert(!verify_says("match=yes"), "match=yes on bad input");
	cr_assert(verify_says(why), "verify.out lacks '%s'", why);
}

TestSuite(verify, .timeout = 120);

Test(verify, equal_tables_match_and_exit_0)
{
	fresh("verify-equal");
	all_equal();
	cr_assert_eq(verify(), 0);
	cr_assert(verify_says("RESULT verify store=1000 source=1000 "
			      "standby=1000 match=yes"));
	cr_assert(verify_says("source (1000) vs store (1000): equal"));
	cr_assert(verify_says("source (1000) vs standby (1000): equal"));
}

Test(verify, session_missing_from_the_standby_is_a_difference)
{
	fresh("verify-missing-standby");
	all_equal();
	sessions[VICTIM] = sessions[SESSIONS - 1];
	table_write("standby.tbl", sessions, SESSIONS - 1, NULL, 0);
	assert_different(verify(), "source (1000) vs standby (999): DIFFERENT, "
				   "1 only in source, 0 only in standby, 0 "
				   "differ");
	cr_assert(verify_says("source (1000) vs store (1000): equal"));
}

Test(verify, session_missing_from_the_store_is_a_difference)
{
	fresh("verify-missing-store");
	table_write("source.tbl", sessions, SESSIONS, NULL, 0);
	table_write("standby.tbl", sessions, SESSIONS, NULL, 0);
	sessions[VICTIM] = sessions[SESSIONS - 1];
	store_put(sessions, SESSIONS - 1, NULL, 0);
	assert_different(verify(), "source (1000) vs store (999): DIFFERENT, "
				   "1 only in source, 0 only in store, 0 "
				   "differ");
}

Test(verify, extra_session_in_the_standby_is_a_difference)
{
	struct ns_session more[SESSIONS + 1];

	fresh("verify-extra-standby");
	all_equal();
	memcpy(more, sessions, sizeof(sessions));
	more[SESSIONS] = session_of(SESSIONS + 7);
	table_write("standby.tbl", more, SESSIONS + 1, NULL, 0);
	assert_different(verify(), "source (1000) vs standby (1001): "
				   "DIFFERENT, 0 only in source, 1 only in "
				   "standby, 0 differ");
}

Test(verify, extra_session_in_the_store_is_a_difference)
{
	struct ns_session extra = session_of(SESSIONS + 7);

	fresh("verify-extra-store");
	all_equal();
	store_put(&extra, 1, NULL, 0);
	assert_different(verify(), "source (1000) vs store (1001): DIFFERENT, "
				   "0 only in source, 1 only in store, 0 "
				   "differ");
}

/* One field of the record changed; key: the field names the flow, so the
 * changed session is another entry (one only on each side). */
struct field_change {
	const char *name;
	void (*change)(struct ns_session *s);
	int key;
};

static void ch_proto(struct ns_session *s)
{
	s->proto = s->proto == 6 ? 17 : 6;
}
static void ch_gateway(struct ns_session *s)
{
	s->gateway_id++;
}
static void ch_epoch(struct ns_session *s)
{
	s->epoch--;
}
static void ch_timeout(struct ns_session *s)
{
	s->timeout_ms++;
}
static void ch_timestamp(struct ns_session *s)
{
	s->timestamp_ns++;
}
static void ch_orig_saddr(struct ns_session *s)
{
	s->orig.saddr ^= 0x00800000u;
}
static void ch_orig_daddr(struct ns_session *s)
{
	s->orig.daddr++;
}
static void ch_orig_sport(struct ns_session *s)
{
	s->orig.sport = (uint16_t)(s->orig.sport + 60000);
}
static void ch_orig_dport(struct ns_session *s)
{
	s->orig.dport++;
}
static void ch_xlat_saddr(struct ns_session *s)
{
	s->xlat.saddr++;
}
static void ch_xlat_daddr(struct ns_session *s)
{
	s->xlat.daddr++;
}
static void ch_xlat_sport(struct ns_session *s)
{
	s->xlat.sport++;
}
static void ch_xlat_dport(struct ns_session *s)
{
	s->xlat.dport++;
}

/* Every field struct ns_session carries on the wire but version and family
 * (a record of another version or family is not a record: see
 * record_of_another_version_is_refused) and event (see
 * event_alone_is_history_not_state). */
static const struct field_change field_changes[] = {
	{"proto", ch_proto, 1},
	{"gateway_id", ch_gateway, 0},
	{"epoch", ch_epoch, 0},
	{"timeout_ms", ch_timeout, 0},
	{"timestamp_ns", ch_timestamp, 0},
	{"orig.saddr", ch_orig_saddr, 1},
	{"orig.daddr", ch_orig_daddr, 1},
	{"orig.sport", ch_orig_sport, 1},
	{"orig.dport", ch_orig_dport, 1},
	{"xlat.saddr", ch_xlat_saddr, 0},
	{"xlat.daddr", ch_xlat_daddr, 0},
	{"xlat.sport", ch_xlat_sport, 0},
	{"xlat.dport", ch_xlat_dport, 0},
};

/* Each field changed in one session of the standby's table, then of the
 * store (where a changed key field is a second key beside the first). */
Test(verify, every_field_of_the_record_that_differs_is_a_difference)
{
	const size_t n = sizeof(field_changes) / sizeof(field_changes[0]);
	char want[256];

	fresh("verify-fields");
	all_equal();
	for (size_t f = 0; f < n; f++) {
		const struct field_change *fc = &field_changes[f];
		struct ns_session changed = sessions[VICTIM], *copy;

		fc->change(&changed);
		copy = malloc(sizeof(sessions));
		cr_assert_not_null(copy);
		memcpy(copy, sessions, sizeof(sessions));
		copy[VICTIM] = changed;
		table_write("standby.tbl", copy, SESSIONS, NULL, 0);
		free(copy);
		snprintf(want, sizeof(want),
			 "source (1000) vs standby (1000): DIFFERENT, %s",
			 fc->key ? "1 only in source, 1 only in standby, 0 "
				   "differ"
				 : "0 only in source, 0 only in standby, 1 "
				   "differ");
		fprintf(stderr, "verify: standby's %s changed\n", fc->name);
		assert_different(verify(), want);
		cr_assert(verify_says("source (1000) vs store (1000): equal"),
			  "%s", fc->name);
	}
	table_write("standby.tbl", sessions, SESSIONS, NULL, 0);
	for (size_t f = 0; f < n; f++) {
		const struct field_change *fc = &field_changes[f];
		struct ns_session changed = sessions[VICTIM];

		fc->change(&changed);
		store_put(&changed, 1, NULL, 0);
		snprintf(want, sizeof(want),
			 "source (1000) vs store (%d): DIFFERENT, %s",
			 fc->key ? 1001 : 1000,
			 fc->key ? "0 only in source, 1 only in store, 0 "
				   "differ"
				 : "0 only in source, 0 only in store, 1 "
				   "differ");
		fprintf(stderr, "verify: store's %s changed\n", fc->name);
		assert_different(verify(), want);
		/* Back to the source's: the changed key of a key field goes. */
		cr_assert_eq(nst_sh("for p in 7940 7941 7942; do redis-cli -p "
				    "$p flushall >/dev/null; done"),
			     0);
		store_put(sessions, SESSIONS, NULL, 0);
	}
}

/* A standby or store that holds a session of an older epoch (a fenced
 * writer's late record) is not the source's table. */
Test(verify, stale_epoch_in_the_store_is_a_difference)
{
	struct ns_session stale;

	fresh("verify-stale-epoch");
	all_equal();
	stale = sessions[VICTIM];
	stale.epoch = 2;
	store_put(&stale, 1, NULL, 0);
	assert_different(verify(), "source (1000) vs store (1000): DIFFERENT, "
				   "0 only in source, 0 only in store, 1 "
				   "differ");
	cr_assert(verify_says("\"epoch\":2"), "the stale record is not shown");
}

/* The event says how an entry came to be (create or refresh), not what it
 * is: a standby that cold-loaded a refreshed session holds the same entry
 * as one that saw its create and refresh. Only the event differs: equal. */
Test(verify, event_alone_is_history_not_state)
{
	fresh("verify-event");
	all_equal();
	sessions[VICTIM].event = NS_EV_REFRESH;
	table_write("standby.tbl", sessions, SESSIONS, NULL, 0);
	cr_assert_eq(verify(), 0);
	cr_assert(verify_says("match=yes"));
}

/* A store value that is not a session record (natsync writes none) is a
 * difference even where the other tables have nothing to miss. */
Test(verify, store_value_that_is_not_a_record_is_a_difference)
{
	struct ns_session junk = session_of(SESSIONS + 9);

	fresh("verify-junk-value");
	all_equal();
	store_put(&junk, 1, "not a record", 12);
	assert_different(verify(), "1 values are not valid session records");
}

/* A table file cut in a record (a dump interrupted, a disk full) is not a
 * table of fewer sessions. */
Test(verify, trailing_partial_record_in_a_table_file_is_refused)
{
	uint8_t part[NS_RECORD_V1_IPV4_LEN];

	fresh("verify-partial");
	all_equal();
	cr_assert_gt(
		ns_record_encode(&sessions[SESSIONS - 1], part, sizeof(part)),
		0);
	/* The last session twice: once whole, once its first 20 bytes. */
	table_write("source.tbl", sessions, SESSIONS, part, 20);
	assert_refused(verify(), "partial record");
	table_write("source.tbl", sessions, SESSIONS, NULL, 0);
	table_write("standby.tbl", sessions, SESSIONS, part, 47);
	assert_refused(verify(), "partial record");
}

Test(verify, record_of_another_version_is_refused)
{
	uint8_t rec[NS_RECORD_V1_IPV4_LEN];

	fresh("verify-version");
	all_equal();
	cr_assert_gt(ns_record_encode(&sessions[0], rec, sizeof(rec)), 0);
	rec[0] = NS_RECORD_VERSION + 1;
	table_write("standby.tbl", sessions, SESSIONS, rec, sizeof(rec));
	assert_refused(verify(), "not a valid session record");
}

Test(verify, missing_or_unreadable_table_file_is_refused)
{
	fresh("verify-unreadable");
	all_equal();
	assert_refused(verify_with("", nst_run_path("no-such.tbl"),
				   nst_run_path("standby.tbl")),
		       "No such file or directory");
	/* A directory opens as a file but does not read as one. */
	assert_refused(
		verify_with("", nst_run_path("source.tbl"), nst_run_dir()),
		"Is a directory");
}

/*
 * Out of memory: natsync-verify under an address-space limit (RLIMIT_AS)
 * that lets it start and read the store's 1000 sessions but not hold a
 * table of 2 million (128 MiB in memory). It must say so and give no
 * verdict, not compare what it could hold.
 */
/* AddressSanitizer cannot start under an address-space limit (its shadow
 * memory is reserved up front): in sanitizer builds its allocator is given
 * the limit instead, and returns NULL past it as malloc would. Its warning
 * about the refused allocation goes to the program's stderr (the sanitizer
 * runtimes read log_path from UBSAN_OPTIONS last), not to the reports a
 * sanitizer run counts; a real report still fails the test (exit
 * status 1, not 2). */
#if NST_ASAN
#define MEMORY_LIMIT                                                \
	"ASAN_OPTIONS=\"$ASAN_OPTIONS:allocator_may_return_null=1:" \
	"max_allocation_size_mb=64:log_path=stderr\" "              \
	"UBSAN_OPTIONS=\"$UBSAN_OPTIONS:log_path=stderr\""
#else
#define MEMORY_LIMIT "ulimit -v 120000;"
#endif

Test(verify, table_larger_than_its_memory_is_refused, .timeout = 300)
{
	const uint32_t big = 2000000;
	FILE *f;

	fresh("verify-oom");
	all_equal();
	f = fopen(nst_run_path("big.tbl"), "wb");
	cr_assert_not_null(f);
	for (uint32_t i = 0; i < big; i++) {
		struct ns_session s = session_of(i);
		uint8_t buf[NS_RECORD_MAX_LEN];
		int len = ns_record_encode(&s, buf, sizeof(buf));

		cr_assert_eq(fwrite(buf, 1, (size_t)len, f), (size_t)len);
	}
	cr_assert_eq(fclose(f), 0);
	/* The limit lets it compare the small tables. */
	cr_assert_eq(verify_with(MEMORY_LIMIT, nst_run_path("source.tbl"),
				 nst_run_path("standby.tbl")),
		     0, "natsync-verify does not run within the limit");
	assert_refused(verify_with(MEMORY_LIMIT, nst_run_path("big.tbl"),
				   nst_run_path("big.tbl")),
		       "out of memory");
	unlink(nst_run_path("big.tbl"));
}

/* The store side of the same limit: a store larger than the memory
 * natsync-verify may use is refused, never compared in part. */
Test(verify, store_larger_than_its_memory_is_refused, .timeout = 300)
{
	const uint32_t big = 2000000;
	struct ns_session *s = malloc(big * sizeof(*s));

	cr_assert_not_null(s);
	fresh("verify-store-oom");
	all_equal();
	cr_assert_eq(verify_with(MEMORY_LIMIT, nst_run_path("source.tbl"),
				 nst_run_path("standby.tbl")),
		     0, "natsync-verify does not run within the limit");
	for (uint32_t i = 0; i < big; i++)
		s[i] = session_of(SESSIONS + i);
	store_put(s, big, NULL, 0);
	free(s);
	assert_refused(verify_with(MEMORY_LIMIT, nst_run_path("source.tbl"),
				   nst_run_path("standby.tbl")),
		       "store: out of memory");
	for (int p = STORE_PORT; p < STORE_PORT + 3; p++)
		nst_sh("redis-cli -p %d flushall >/dev/null", p);
}

/* Session i of a mixed table: IPv4 (i % 3 == 0), NAT66 (1), NAT64 (2). */
static struct ns_rec mixed_of(uint32_t i)
{
	struct ns_rec r;

	memset(&r, 0, sizeof(r));
	r.s = session_of(i);
	if (i % 3 == 0)
		return r;
	r.s.family = i % 3 == 1 ? NS_FAMILY_NAT66 : NS_FAMILY_NAT64;
	r.s.orig.saddr = r.s.orig.daddr = 0;
	r.v6.orig_saddr[0] = 0x20;
	r.v6.orig_saddr[14] = (uint8_t)(i >> 8);
	r.v6.orig_saddr[15] = (uint8_t)i;
	if (r.s.family == NS_FAMILY_NAT66) {
		r.s.xlat.saddr = r.s.xlat.daddr = 0;
		r.v6.orig_daddr[0] = 0x26;
		r.v6.orig_daddr[15] = 1;
		memcpy(r.v6.xlat_daddr, r.v6.orig_daddr, 16);
		r.v6.xlat_saddr[0] = 0x20;
		r.v6.xlat_saddr[15] = 7;
		return r;
	}
	r.v6.orig_daddr[1] = 0x64;
	r.v6.orig_daddr[2] = 0xff;
	r.v6.orig_daddr[3] = 0x9b;
	for (int b = 0; b < 4; b++)
		r.v6.orig_daddr[12 + b] =
			(uint8_t)(r.s.xlat.daddr >> (24 - 8 * b));
	r.v6.prefix_len = 96;
	return r;
}

/* Write the n sessions of r to file, in reverse when backwards. */
static void mixed_write(const char *file, const struct ns_rec *r, size_t n,
			int backwards)
{
	FILE *f = fopen(nst_run_path(file), "wb");
	uint8_t buf[NS_RECORD_MAX_LEN];

	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++) {
		int len = ns_record_encode(&r[backwards ? n - 1 - i : i].s, buf,
					   sizeof(buf));

		cr_assert_gt(len, 0);
		cr_assert_eq(fwrite(buf, 1, (size_t)len, f), (size_t)len);
	}
	cr_assert_eq(fclose(f), 0);
}

static int verify_files(void)
{
	int rc = nst_sh("%s -n -s %s -b %s >%s 2>&1",
			nst_build("tools/natsync-verify"),
			nst_run_path("source.tbl"), nst_run_path("standby.tbl"),
			nst_run_path("verify.out"));

	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	return rc;
}

Test(verify, mixed_ipv4_and_ipv6_table_files_compare_exactly)
{
	static struct ns_rec r[300], changed[300];
	uint8_t bad[NS_RECORD_MAX_LEN];

	nst_run_dir_make("verify-mixed");
	for (uint32_t i = 0; i < 300; i++)
		r[i] = mixed_of(i);
	mixed_write("source.tbl", r, 300, 0);
	mixed_write("standby.tbl", r, 300, 1);
	cr_assert_eq(verify_files(), 0);
	cr_assert(verify_says("source (300) vs standby (300): equal"));

	/* a translated IPv6 address differs */
	memcpy(changed, r, sizeof(r));
	changed[4].v6.xlat_saddr[15] = 8;
	mixed_write("standby.tbl", changed, 300, 1);
	cr_assert_eq(verify_files(), 1);
	cr_assert(verify_says("0 only in source, 0 only in standby, 1 differ"));
	/* an inside IPv6 address differs: another flow */
	memcpy(changed, r, sizeof(r));
	changed[2].v6.orig_saddr[7] = 1;
	mixed_write("standby.tbl", changed, 300, 1);
	cr_assert_eq(verify_files(), 1);
	cr_assert(verify_says("1 only in source, 1 only in standby, 0 differ"));
	/* a NAT64 record whose prefix length RFC 6052 does not know */
	mixed_write("standby.tbl", r, 300, 1);
	cr_assert_eq(ns_record_encode(&r[2].s, bad, sizeof(bad)), 76);
	bad[72] = 80;
	{
		FILE *f = fopen(nst_run_path("standby.tbl"), "ab");

		cr_assert_not_null(f);
		cr_assert_eq(fwrite(bad, 1, 76, f), 76);
		fclose(f);
	}
	assert_refused(verify_files(), "not a valid session record");
	/* cut in the middle of a NAT66 record */
	mixed_write("standby.tbl", r, 299, 0);
	{
		FILE *f = fopen(nst_run_path("standby.tbl"), "ab");
		uint8_t rec[NS_RECORD_MAX_LEN];

		cr_assert_eq(ns_record_encode(&r[1].s, rec, sizeof(rec)), 96);
		cr_assert_not_null(f);
		cr_assert_eq(fwrite(rec, 1, 60, f), 60);
		fclose(f);
	}
	assert_refused(verify_files(), "partial record");
}

/* The store side reads IPv6 sessions as a standby loads them: a mixed
 * store and table file compare equal, and --get finds an IPv6 tuple. */
Test(verify, mixed_ipv4_and_ipv6_store_compares_and_gets_exactly)
{
	static struct ns_rec r[300];
	char sa[INET6_ADDRSTRLEN], da[INET6_ADDRSTRLEN];
	int rc;

	fresh("verify-mixed-store");
	for (uint32_t i = 0; i < 300; i++) {
		r[i] = mixed_of(i);
		store_put(&r[i].s, 1, NULL, 0);
	}
	mixed_write("source.tbl", r, 300, 0);
	mixed_write("standby.tbl", r, 300, 1);
	cr_assert_eq(verify(), 0);
	cr_assert(verify_says("store (300)"));

	/* r[2]: NAT64, its inside destination in 64:ff9b::/96 */
	cr_assert_not_null(
		inet_ntop(AF_INET6, r[2].v6.orig_saddr, sa, sizeof(sa)));
	cr_assert_not_null(
		inet_ntop(AF_INET6, r[2].v6.orig_daddr, da, sizeof(da)));
	rc = nst_sh("%s -S %s -L keys --get '%u:[%s]:%u-[%s]:%u' >%s 2>&1",
		    nst_build("tools/natsync-verify"), SEEDS, r[2].s.proto, sa,
		    r[2].s.orig.sport, da, r[2].s.orig.dport,
		    nst_run_path("verify.out"));
	nst_sh("cat %s >&2", nst_run_path("verify.out"));
	cr_assert_eq(rc, 0);
	cr_assert(verify_says(sa));
	for (int p = STORE_PORT; p < STORE_PORT + 3; p++)
		nst_sh("redis-cli -p %d flushall >/dev/null", p);
}

/* --get of a flow the store does not hold, on a master that holds
 * nothing: exit 1, said. (With no session read it sorted a null array: an
 * UndefinedBehaviorSanitizer report under the sanitizer build.) */
Test(verify, get_of_a_flow_an_empty_store_lacks_exits_1)
{
	static const char *const layouts[] = {"keys", "log"};

	fresh("verify-get-empty");
	for (unsigned int i = 0; i < 2; i++) {
		int rc = nst_sh("%s -S %s -L %s --get "
				"udp:10.0.0.1:40000-198.51.100.7:53 >%s 2>&1",
				nst_build("tools/natsync-verify"), SEEDS,
				layouts[i], nst_run_path("verify.out"));

		nst_sh("cat %s >&2", nst_run_path("verify.out"));
		cr_assert_eq(rc, 1, "%s layout: exit %d", layouts[i], rc);
		cr_assert(verify_says("not in the store"));
	}
}
