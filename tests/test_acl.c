/*
 * test_acl.c - least privilege: a 3-master cluster whose users come from
 * deploy/redis-users.acl.example (passwords filled in). The real active
 * writers log in as natsync-active-keys (the keys layout) and the real
 * standby as natsync-standby,
 * with passwords read from 0600 files; replication works end to end, and
 * each user is refused what it must not do: the standby's user cannot write
 * or publish, the active's user cannot read or subscribe. natsync-gateway
 * does what natsync-gateway does (writers, subscriber, the promotion
 * epoch) and no more. In the log layout (the default) the active logs in
 * as natsync-active: it replicates, and compacts the log (SCAN, MGET,
 * SET of checkpoints, PEXPIRE), and still cannot subscribe.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_active.h"
#include "nsa_cluster.h"
#include "nsa_compact.h"
#include "nsa_fence.h"
#include "nsa_config.h"
#include "nsa_standby.h"
#include "nsdp_lane.h"
#include "nsdp_table.h"
#include "nsdp_time.h"
#include "nst_session.h"
#include "nst_store.h"

#define ACL_PORT 7850
#define SESSIONS 3000

static void write_secret(const char *name, const char *text)
{
	FILE *f = fopen(nst_run_path(name), "w");

	cr_assert_not_null(f);
	fprintf(f, "%s\n", text);
	fclose(f);
	chmod(nst_run_path(name), 0600);
}

static void acl_up(void)
{
	int rc;

	cr_assert_eq(nst_eal_init(512), 0);
	nst_run_dir_make("acl");
	/* The shipped file with its placeholders replaced; the test keeps a
	 * default user to create the cluster. */
	rc = nst_sh("{ echo 'user default on nopass ~* &* +@all'; sed "
		    "-e 's/CHANGE-ME-ACTIVE/active-pw-1/' "
		    "-e 's/CHANGE-ME-STANDBY/standby-pw-2/' "
		    "-e 's/CHANGE-ME-GATEWAY/gateway-pw-3/' %s; } >%s",
		    nst_src("deploy/redis-users.acl.example"),
		    nst_run_path("users.acl"));
	cr_assert_eq(rc, 0);
	nst_sh("%s stop --port %d --dir %s/redis >/dev/null 2>&1",
	       nst_src("deploy/redis-cluster.sh"), ACL_PORT, nst_run_dir());
	rc = nst_sh("%s start --masters 3 --port %d --dir %s/redis --acl %s "
		    ">&2",
		    nst_src("deploy/redis-cluster.sh"), ACL_PORT, nst_run_dir(),
		    nst_run_path("users.acl"));
	cr_assert_eq(rc, 0, "cannot start the cluster with ACLs");
	write_secret("active.pw", "active-pw-1");
	/* CHANGE-ME-ACTIVE-KEYS, after the substitution above */
	write_secret("active-keys.pw", "active-pw-1-KEYS");
	write_secret("standby.pw", "standby-pw-2");
	write_secret("gateway.pw", "gateway-pw-3");
}

static void acl_down(void)
{
	nst_sh("%s stop --port %d --dir %s/redis >&2",
	       nst_src("deploy/redis-cluster.sh"), ACL_PORT, nst_run_dir());
}

TestSuite(acl, .init = acl_up, .fini = acl_down, .timeout = 120);

/* [store] layout of the configurations config_as makes. */
static const char *acl_layout = "keys";

/* A finished configuration logging in as user with the password file. */
static void config_as(struct nsa_config *c, const char *user,
		      const char *pwfile)
{
	char err[1024], set[256];

	nsa_config_defaults(c);
	snprintf(set, sizeof(set), "store.layout=%s", acl_layout);
	cr_assert_eq(nsa_config_set(c, set, err, sizeof(err)), 0, "%s", err);
	snprintf(set, sizeof(set), "store.seeds=127.0.0.1:%d", ACL_PORT);
	cr_assert_eq(nsa_config_set(c, set, err, sizeof(err)), 0, "%s", err);
	snprintf(set, sizeof(set), "store.user=%s", user);
	cr_assert_eq(nsa_config_set(c, set, err, sizeof(err)), 0, "%s", err);
	snprintf(c->password_file, sizeof(c->password_file), "%s",
		 nst_run_path(pwfile));
	cr_assert_eq(nsa_config_finish(c, err, sizeof(err)), 0, "%s", err);
}

static redisContext *login(const char *user, const char *password)
{
	redisContext *c = redisConnect("127.0.0.1", ACL_PORT);
	redisReply *r;

	cr_assert(c && !c->err);
	r = redisCommand(c, "AUTH %s %s", user, password);
	cr_assert(r && r->type == REDIS_REPLY_STATUS, "AUTH %s", user);
	freeReplyObject(r);
	return c;
}

/* The reply to a command (redirections followed by hand are not needed:
 * ACL checks come before key ownership). 1 when refused with NOPERM. */
static int refused(redisContext *c, const char *cmd)
{
	redisReply *r = redisCommand(c, cmd);
	int no;

	cr_assert_not_null(r, "%s: %s", cmd, c->errstr);
	no = r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6);
	freeReplyObject(r);
	return no;
}

static struct ns_session session(uint32_t i)
{
	struct ns_session s =
		nst_session(17, NS_EV_CREATE, 1, 1, 60000, nsdp_realtime_ns());

	nst_session_snat(&s, 0x0a000000u + i, (uint16_t)(1024 + i % 60000),
			 0xcb007101u, 53, 0xc6336401u,
			 (uint16_t)(2000 + i % 60000));
	return s;
}

/* The real standby logged in as suser, then the real writers as auser:
 * SESSIONS sessions replicate exactly. */
static void replicate_as(const char *suser, const char *spw, const char *auser,
			 const char *apw)
{
	static struct nsa_config aconf, sconf;
	struct nsdp_lane *lane = nsdp_lane_create(0, 8192, SOCKET_ID_ANY);
	struct nsa_standby_stats st;
	struct nsdp_table_stats ts;
	struct nsa_active_stats as;
	struct nsa_standby *sb;
	struct nsa_active *writer;
	double until;
	uint32_t i;

	cr_assert_not_null(lane);
	config_as(&sconf, suser, spw);
	sconf.table_capacity = 10000;
	sb = nsa_standby_create(&sconf);
	cr_assert_not_null(sb);
	cr_assert_eq(nsa_standby_start(sb), 0);
	until = nsdp_now_s() + 10;
	do {
		nsa_standby_stats(sb, &st);
		nsdp_sleep_ms(10);
	} while (!st.synced && nsdp_now_s() < until);
	cr_assert(st.synced, "the standby's user cannot load the table");

	config_as(&aconf, auser, apw);
	writer = nsa_active_create(&aconf, &lane, 1);
	cr_assert_not_null(writer);
	cr_assert_eq(nsa_active_start(writer), 0);
	for (i = 0; i < SESSIONS; i++) {
		struct ns_session s = session(i);

		cr_assert_eq(nsdp_record(lane, &s), 0);
	}
	cr_assert_eq(nsa_active_drain(writer, 20000), 0,
		     "the active's user cannot replicate");
	nsa_active_stats(writer, &as);
	cr_assert_eq(as.acked, SESSIONS);
	cr_assert_eq(as.other_errors, 0);
	until = nsdp_now_s() + 10;
	do {
		nsdp_table_stats(nsa_standby_table(sb), &ts);
		nsdp_sleep_ms(10);
	} while (ts.live < SESSIONS && nsdp_now_s() < until);
	cr_assert_eq(ts.live, SESSIONS);
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.gaps, 0);
	cr_assert_eq(st.bad_values, 0);

	nsa_active_stop(writer);
	nsa_active_free(writer);
	nsa_standby_free(sb);
	nsdp_lane_free(lane);
}

Test(acl, active_and_standby_users_replicate_with_least_privilege)
{
	replicate_as("natsync-standby", "standby.pw", "natsync-active-keys",
		     "active-keys.pw");
}

/* Commands and whether the user's ACL refuses them (NOPERM). */
struct acl_case {
	const char *cmd;
	int refused;
};

static void assert_acl(const char *user, const char *password,
		       const struct acl_case *cases, size_t n)
{
	redisContext *c = login(user, password);

	for (size_t i = 0; i < n; i++)
		cr_assert_eq(refused(c, cases[i].cmd), cases[i].refused,
			     "%s: %s", user, cases[i].cmd);
	redisFree(c);
}

Test(acl, the_standby_user_cannot_write_or_publish)
{
	static const struct acl_case cases[] = {
		{"SET ns:forged x", 1},
		{"DEL ns:forged", 1},
		{"SPUBLISH ns:b:{0} x", 1},
		{"PUBLISH ns:b:{0} x", 1},
		{"INCRBY natsync:epoch 1", 1},
		{"FLUSHALL", 1},
		{"CONFIG SET maxmemory 1", 1},
		{"SET natsync:epoch 1", 1},
		/* what it needs stays allowed: it reads its pair's epoch
		 * counter when it synced and when a pair's epoch falls */
		{"SCAN 0 MATCH ns:* COUNT 10", 0},
		{"CLUSTER SLOTS", 0},
		{"GET natsync:epoch", 0},
		{"GET natsync:epoch:2", 0},
	};

	assert_acl("natsync-standby", "standby-pw-2", cases,
		   sizeof(cases) / sizeof(cases[0]));
}

Test(acl, the_active_user_cannot_scan_or_subscribe)
{
	static const struct acl_case cases[] = {
		{"MGET ns:x ns:y", 1},
		{"SCAN 0", 1},
		{"KEYS *", 1},
		{"SET other:key x", 1}, /* keys outside ns:* */
		{"GET other:key", 1},
		{"FLUSHALL", 1},
		{"SET natsync:epoch 9", 1}, /* nor rewind the epoch */
		{"INCRBY natsync:epoch 1", 1},
		/* a key whose write was refused is read back; the epoch is
		 * read at every connection (agent/fence/nsa_fence.h) */
		{"GET ns:x", 0},
		{"GET natsync:epoch", 0},
		/* another gateway pair's counter: read, never written */
		{"GET natsync:epoch:2", 0},
		{"SET natsync:epoch:2 9", 1},
		{"INCRBY natsync:epoch:2 1", 1},
		{"GET natsync:epochs", 1},
	};
	static const struct acl_case subscribe[] = {
		{"SSUBSCRIBE ns:b:{0}", 1},
	};

	assert_acl("natsync-active-keys", "active-pw-1-KEYS", cases,
		   sizeof(cases) / sizeof(cases[0]));
	assert_acl("natsync-active-keys", "active-pw-1-KEYS", subscribe, 1);
}

/* A gateway is a standby (subscriber and loads), then an active (writers),
 * takes each promotion's epoch with INCRBY natsync:epoch (natsync:epoch:P
 * in gateway pair P), reads it, and closes older writers' connections
 * (agent/fence/nsa_fence.h). It may do that,
 * and may not rewind or drop the epoch counter, nor INCRBY a session
 * key. */
Test(acl, the_gateway_user_replicates_takes_epochs_and_nothing_more)
{
	static const struct acl_case cases[] = {
		{"SET natsync:epoch 0", 1},
		{"DEL natsync:epoch", 1},
		{"INCRBY ns:forged 1", 1},
		{"INCRBY other:key 1", 1},
		{"SET other:key x", 1},
		{"KEYS *", 1},
		{"FLUSHALL", 1},
		{"CONFIG SET maxmemory 1", 1},
		/* what it needs stays allowed; as an active it reads back a
		 * key whose write was refused */
		{"GET ns:x", 0},
		{"MGET ns:x", 0},
		{"SCAN 0 MATCH ns:* COUNT 10", 0},
		{"CLUSTER SLOTS", 0},
		{"GET natsync:epoch", 0},
		{"CLIENT LIST TYPE normal", 0},
		/* gateway pair 2's counter, as pair 0's */
		{"SET natsync:epoch:2 0", 1},
		{"DEL natsync:epoch:2", 1},
		{"GET natsync:epoch:2", 0},
		{"INCRBY natsync:epochs 1", 1},
		/* the taker key beside each counter, and no other */
		{"SET {natsync:epoch}:other x", 1},
		{"SET {natsync:epoch:2}:other x", 1},
		{"GET {natsync:epoch}:taker", 0},
	};
	static struct nsa_config conf;
	unsigned int killed = 0;
	uint64_t epoch = 0;
	redisContext *c;
	char err[512];
	size_t i;

	replicate_as("natsync-gateway", "gateway.pw", "natsync-gateway",
		     "gateway.pw");

	/* Two promotions, the second asking for an epoch above 300, and a
	 * provisional epoch made known (natsync:epoch raised to it). */
	config_as(&conf, "natsync-gateway", "gateway.pw");
	cr_assert_eq(nsa_epoch_take(&conf.store, 0, err, sizeof(err)), 256,
		     "%s", err);
	cr_assert_eq(nsa_epoch_take(&conf.store, 300, err, sizeof(err)), 512,
		     "%s", err);
	cr_assert_eq(nsa_epoch_register(&conf.store, 770, err, sizeof(err)),
		     770, "%s", err);
	cr_assert_eq(
		nsa_fence_read(&conf.store, NULL, &epoch, err, sizeof(err)), 0,
		"%s", err);
	cr_assert_eq(epoch, 770);
	/* The fence: the replication above left no writer connected. */
	cr_assert_eq(nsa_fence_raise(&conf.store, &killed, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(killed, 0);
	/* A gateway of pair 2 (gateway_id 2 << 8 | 1): its own counter,
	 * its own fence. */
	conf.store.pair = 2;
	cr_assert_eq(nsa_epoch_take(&conf.store, 0, err, sizeof(err)), 256,
		     "%s", err);
	cr_assert_eq(nsa_epoch_register(&conf.store, 513, err, sizeof(err)),
		     513, "%s", err);
	cr_assert_eq(
		nsa_fence_read(&conf.store, NULL, &epoch, err, sizeof(err)), 0,
		"%s", err);
	cr_assert_eq(epoch, 513);
	cr_assert_eq(nsa_fence_raise(&conf.store, &killed, err, sizeof(err)), 0,
		     "%s", err);
	conf.store.pair = 0;

	c = login("natsync-gateway", "gateway-pw-3");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_eq(refused(c, cases[i].cmd), cases[i].refused,
			     "natsync-gateway: %s: %s", cases[i].cmd,
			     cases[i].refused ? "allowed" : "refused");
	redisFree(c);
}

/* The log layout's active user: the writers store segments, the
 * compactor takes the store's compaction lease, lists, reads,
 * checkpoints and expires them on every master, and the user still
 * may not subscribe, read outside ns:* or touch the epoch. */
Test(acl, the_active_log_user_replicates_and_compacts_the_log)
{
	static const struct acl_case cases[] = {
		{"SSUBSCRIBE ns:b:{0}", 1},
		{"GET other:key", 1},
		{"SET natsync:epoch 9", 1},
		{"FLUSHALL", 1},
		{"SCAN 0 MATCH ns:l:* COUNT 10", 0},
		{"PEXPIRE ns:l:{0}:x 5000", 0},
		{"GETRANGE ns:l:{0}:x 0 47", 0},
		{"CLUSTER NODES", 0},
		/* the compaction lease, and no other key outside ns:* */
		{"PEXPIRE natsync:compact-lease 1000", 0},
		{"SET natsync:compact-lease2 x", 1},
		{"INCRBY natsync:compact-lease 1", 1},
	};
	static struct nsa_config conf;
	static struct nsa_topology topo;
	struct nsa_compact_result res;
	uint64_t records = 0, live = 0, epoch;
	char err[512];

	acl_layout = "log";
	replicate_as("natsync-standby", "standby.pw", "natsync-active",
		     "active.pw");
	config_as(&conf, "natsync-active", "active.pw");
	acl_layout = "keys";
	cr_assert_eq(nsa_topology_fetch(&conf.store, &topo, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(topo.n_nodes, 3);
	/* The round compacts as an active of the store's epoch. */
	cr_assert_eq(
		nsa_fence_read(&conf.store, &topo, &epoch, err, sizeof(err)), 0,
		"%s", err);
	for (unsigned int i = 0; i < topo.n_nodes; i++) {
		const struct nsa_compact_round rd = {
			.id = 1, .gen = 1, .epoch = (uint32_t)epoch};

		cr_assert_eq(nsa_compact_node(&conf.store, &topo, i, &rd, &res,
					      err, sizeof(err)),
			     0, "compaction as natsync-active: %s", err);
		records += res.records;
		live += res.live;
	}
	/* Every session written once, all alive. */
	cr_assert_eq(records, SESSIONS);
	cr_assert_eq(live, SESSIONS);
	assert_acl("natsync-active", "active-pw-1", cases,
		   sizeof(cases) / sizeof(cases[0]));
}
