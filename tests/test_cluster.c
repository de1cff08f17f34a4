/*
 * test_cluster.c - the store as nsa_cluster sees it, checked against real
 * redis-server processes: a 3-master cluster on 7500..7502 and a plain server
 * on 7510. 7518 and 7519 are never listened on: they are the dead seeds.
 * The promotion epoch's durability runs on 3 masters with a replica each,
 * 7520..7525.
 * Every fixture stops the stores it started, also when a test fails.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "nsa_cluster.h"
#include "nsa_fence.h"
#include "nsdp_time.h"
#include "ns_slot.h"
#include "nst_store.h"

#define CLUSTER_PORT 7500
#define CLUSTER_MASTERS 3
#define PLAIN_PORT 7510
#define DEAD_PORT 7519
#define DEAD_PORT2 7518
#define REPLICATED_PORT 7520 /* 3 masters, 1 replica each: 7520-7525 */

/* The topology is 33 KB: keep it off the test's stack. */
static struct nsa_topology topo;
static struct nsa_store_conf conf;
static char err[512];

static void conf_seeds(const int *ports, unsigned int n)
{
	memset(&conf, 0, sizeof(conf));
	conf.connect_timeout_ms = 1000;
	conf.publish = NSA_PUBLISH_AUTO;
	for (unsigned int i = 0; i < n; i++) {
		snprintf(conf.seeds[i].host, sizeof(conf.seeds[i].host),
			 "127.0.0.1");
		conf.seeds[i].port = (uint16_t)ports[i];
	}
	conf.n_seeds = n;
}

static redisContext *raw_connect(int port)
{
	struct timeval tv = {.tv_sec = 2};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	cr_assert(c && !c->err, "connect to %d: %s", port,
		  c ? c->errstr : "oom");
	return c;
}

/* Run a command that must succeed (no error reply). */
static void raw_ok(int port, const char *cmd)
{
	redisContext *c = raw_connect(port);
	redisReply *r = redisCommand(c, cmd);

	cr_assert(r, "%s: %s", cmd, c->errstr);
	cr_assert(r->type != REDIS_REPLY_ERROR, "%s: %s", cmd, r->str);
	freeReplyObject(r);
	redisFree(c);
}

/* CLUSTER DELSLOTSRANGE of every range port's node still maps (to any
 * node), as CLUSTER SLOTS lists them: DELSLOTSRANGE refuses a range that
 * holds an unassigned slot. */
static void raw_forget_slots(int port)
{
	redisContext *c = raw_connect(port);
	redisReply *r = redisCommand(c, "CLUSTER SLOTS");

	cr_assert(r && r->type == REDIS_REPLY_ARRAY, "CLUSTER SLOTS on %d",
		  port);
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *d =
			redisCommand(c, "CLUSTER DELSLOTSRANGE %lld %lld",
				     r->element[i]->element[0]->integer,
				     r->element[i]->element[1]->integer);

		freeReplyObject(d);
	}
	freeReplyObject(r);
	redisFree(c);
}

static int server_keyslot(redisContext *c, const char *key, size_t len)
{
	redisReply *r = redisCommand(c, "CLUSTER KEYSLOT %b", key, len);
	int slot;

	cr_assert(r && r->type == REDIS_REPLY_INTEGER, "CLUSTER KEYSLOT");
	slot = (int)r->integer;
	freeReplyObject(r);
	return slot;
}

/* Port of the master the server's own CLUSTER SLOTS gives for slot. */
static int server_slot_master_port(redisContext *c, int slot)
{
	redisReply *r = redisCommand(c, "CLUSTER SLOTS");
	int port = -1;

	cr_assert(r && r->type == REDIS_REPLY_ARRAY, "CLUSTER SLOTS");
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *e = r->element[i];

		if (slot >= e->element[0]->integer &&
		    slot <= e->element[1]->integer)
			port = (int)e->element[2]->element[1]->integer;
	}
	freeReplyObject(r);
	return port;
}

static void store_wipe(int port)
{
	nst_sh("rm -rf '%s/%d'", nst_build("tests/run"), port);
}

static void store_up(int port, int masters)
{
	if (nst_store_start_fresh(port, masters, 0))
		cr_assert_fail("store on port %d did not start", port);
}

static void store_down(int port)
{
	nst_store_stop(port);
	store_wipe(port);
}

static void cluster_up(void)
{
	store_up(CLUSTER_PORT, CLUSTER_MASTERS);
}

static void cluster_down(void)
{
	store_down(CLUSTER_PORT);
}

static void plain_up(void)
{
	store_up(PLAIN_PORT, 0);
}

static void plain_down(void)
{
	store_down(PLAIN_PORT);
}

/* ---- addresses, no server ---- */

Test(cluster_addr, parse_accepts_ipv4_and_names)
{
	struct nsa_addr a;

	cr_assert_eq(nsa_addr_parse("127.0.0.1:7000", &a), 0);
	cr_assert_str_eq(a.host, "127.0.0.1");
	cr_assert_eq(a.port, 7000);
	cr_assert_eq(nsa_addr_parse("redis-0.store.local:1", &a), 0);
	cr_assert_str_eq(a.host, "redis-0.store.local");
	cr_assert_eq(a.port, 1);
	cr_assert_eq(nsa_addr_parse("localhost:65535", &a), 0);
	cr_assert_eq(a.port, 65535);
}

Test(cluster_addr, parse_rejects_bad_ports)
{
	static const char *const bad[] = {
		"127.0.0.1:0",	 "127.0.0.1:65536",
		"127.0.0.1:",	 "127.0.0.1",
		"127.0.0.1:-1",	 "127.0.0.1:+80",
		"127.0.0.1: 80", "127.0.0.1:80 ",
		"127.0.0.1:80x", "127.0.0.1:99999999999999999999",
	};
	struct nsa_addr a;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(nsa_addr_parse(bad[i], &a), -EINVAL, "%s", bad[i]);
}

Test(cluster_addr, parse_rejects_bad_hosts)
{
	char long_host[NSA_HOST_MAX + 8];
	struct nsa_addr a;

	cr_expect_eq(nsa_addr_parse(":7000", &a), -EINVAL);
	cr_expect_eq(nsa_addr_parse("::1:7000", &a), -EINVAL);
	cr_expect_eq(nsa_addr_parse("a b:7000", &a), -EINVAL);
	cr_expect_eq(nsa_addr_parse("", &a), -EINVAL);
	cr_expect_eq(nsa_addr_parse(NULL, &a), -EINVAL);
	memset(long_host, 'h', NSA_HOST_MAX);
	snprintf(long_host + NSA_HOST_MAX, 8, ":7000");
	cr_expect_eq(nsa_addr_parse(long_host, &a), -EINVAL);
	/* The longest host that fits is accepted. */
	memset(long_host, 'h', NSA_HOST_MAX - 1);
	snprintf(long_host + NSA_HOST_MAX - 1, 8, ":7000");
	cr_expect_eq(nsa_addr_parse(long_host, &a), 0);
	cr_expect_eq(strlen(a.host), NSA_HOST_MAX - 1);
}

/* ---- dead seeds, no server ---- */

Test(cluster_seeds, fetch_fails_naming_every_dead_seed)
{
	const int ports[] = {DEAD_PORT, DEAD_PORT2};

	conf_seeds(ports, 2);
	cr_assert_lt(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0);
	cr_expect(strstr(err, "127.0.0.1:7519"), "err: %s", err);
	cr_expect(strstr(err, "127.0.0.1:7518"), "err: %s", err);
}

Test(cluster_seeds, connect_to_dead_port_names_the_address)
{
	const int ports[] = {DEAD_PORT};

	conf_seeds(ports, 1);
	cr_assert_null(
		nsa_store_connect(&conf, &conf.seeds[0], err, sizeof(err)));
	cr_expect(strstr(err, "127.0.0.1:7519: "), "err: %s", err);
}

Test(cluster_seeds, fetch_without_seeds_is_invalid)
{
	conf_seeds(NULL, 0);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)),
		     -EINVAL);
}

/* ---- a 3-master cluster ---- */

TestSuite(cluster_live, .init = cluster_up, .fini = cluster_down,
	  .timeout = 60);

Test(cluster_live, fetch_finds_three_masters_covering_every_slot)
{
	const int ports[] = {CLUSTER_PORT};

	conf_seeds(ports, 1);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(topo.cluster, 1);
	cr_assert_eq(topo.n_nodes, CLUSTER_MASTERS);
	for (int s = 0; s < NS_SLOTS; s++) {
		cr_assert(topo.slot_covered[s], "slot %d", s);
		cr_assert_lt(topo.slot_node[s], CLUSTER_MASTERS);
	}
	/* Redis 7 has sharded pub/sub: AUTO takes it. */
	cr_expect_eq(topo.sharded_pubsub, 1);
	for (unsigned int i = 0; i < topo.n_nodes; i++) {
		cr_expect_str_eq(topo.nodes[i].addr.host, "127.0.0.1");
		cr_expect_geq(topo.nodes[i].addr.port, CLUSTER_PORT);
		cr_expect_lt(topo.nodes[i].addr.port,
			     CLUSTER_PORT + CLUSTER_MASTERS);
		cr_expect_eq(nsa_topology_find(&topo, &topo.nodes[i].addr),
			     (int)i);
	}
}

/* deploy/redis-cluster.sh lets a subscriber's backlog reach 256 MiB (64 MiB
 * for a minute) on every master, not Redis's 32 MiB (8 MiB): a standby
 * behind in a burst is not cut off and made to resync. */
Test(cluster_live, every_master_lets_a_subscribers_backlog_reach_256_MiB)
{
	for (int i = 0; i < CLUSTER_MASTERS; i++) {
		redisContext *c = raw_connect(CLUSTER_PORT + i);
		redisReply *r = redisCommand(
			c, "CONFIG GET client-output-buffer-limit");

		cr_assert(r && r->type == REDIS_REPLY_ARRAY &&
				  r->elements == 2 &&
				  r->element[1]->type == REDIS_REPLY_STRING,
			  "CONFIG GET on %d", CLUSTER_PORT + i);
		cr_expect(strstr(r->element[1]->str,
				 "pubsub 268435456 67108864 60") != NULL,
			  "master %d: %s", CLUSTER_PORT + i,
			  r->element[1]->str);
		freeReplyObject(r);
		redisFree(c);
	}
}

Test(cluster_live, masters_are_numbered_by_their_lowest_slot)
{
	const int ports[] = {CLUSTER_PORT + 2};
	struct nsa_addr unknown = {.host = "127.0.0.1", .port = DEAD_PORT};

	conf_seeds(ports, 1);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(topo.nodes[0].channel_slot, 0);
	cr_expect_eq(topo.slot_node[0], 0);
	for (unsigned int i = 1; i < topo.n_nodes; i++)
		cr_expect_gt(topo.nodes[i].channel_slot,
			     topo.nodes[i - 1].channel_slot);
	for (unsigned int i = 0; i < topo.n_nodes; i++) {
		uint16_t low = topo.nodes[i].channel_slot;

		cr_expect_eq(topo.slot_node[low], i);
		for (unsigned int s = 0; s < low; s++)
			cr_assert_neq(topo.slot_node[s], i, "slot %u", s);
	}
	cr_expect_eq(nsa_topology_find(&topo, &unknown), -1);
}

Test(cluster_live, slot_map_agrees_with_the_server_for_sample_keys)
{
	const int ports[] = {CLUSTER_PORT};
	redisContext *c;

	conf_seeds(ports, 1);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	c = raw_connect(CLUSTER_PORT);
	for (int k = 0; k < 200; k++) {
		char key[32];
		int len = snprintf(key, sizeof(key), "ns:sample:%d", k * 7919);
		int slot = server_keyslot(c, key, (size_t)len);
		const struct nsa_node *n = &topo.nodes[topo.slot_node[slot]];
		redisContext *owner;
		redisReply *r;

		cr_assert_eq(n->addr.port, server_slot_master_port(c, slot),
			     "key %s slot %d", key, slot);
		/* The node we route to takes the write without MOVED. */
		owner = nsa_store_connect(&conf, &n->addr, err, sizeof(err));
		cr_assert(owner, "%s", err);
		r = redisCommand(owner, "SET %b 1", key, (size_t)len);
		cr_assert(r && r->type == REDIS_REPLY_STATUS, "SET %s: %s", key,
			  r ? r->str : owner->errstr);
		freeReplyObject(r);
		redisFree(owner);
	}
	redisFree(c);
}

Test(cluster_live, master_channels_hash_to_slots_the_master_owns)
{
	const int ports[] = {CLUSTER_PORT + 1};
	redisContext *c;

	conf_seeds(ports, 1);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	c = raw_connect(CLUSTER_PORT);
	for (unsigned int i = 0; i < topo.n_nodes; i++) {
		char ch[NS_CHANNEL_MAX];
		redisContext *owner;
		redisReply *r;
		int slot;

		nsa_topology_channel(&topo, i, ch);
		cr_assert_gt(strlen(ch), 0);
		slot = server_keyslot(c, ch, strlen(ch));
		cr_expect_eq(slot, topo.nodes[i].channel_slot, "%s", ch);
		cr_expect_eq(topo.slot_node[slot], i, "%s", ch);
		cr_expect_eq(server_slot_master_port(c, slot),
			     topo.nodes[i].addr.port, "%s", ch);
		/* The owner accepts SPUBLISH on it without redirection. */
		owner = nsa_store_connect(&conf, &topo.nodes[i].addr, err,
					  sizeof(err));
		cr_assert(owner, "%s", err);
		r = redisCommand(owner, "SPUBLISH %s x", ch);
		cr_assert(r && r->type == REDIS_REPLY_INTEGER,
			  "SPUBLISH %s: %s", ch, r ? r->str : owner->errstr);
		freeReplyObject(r);
		redisFree(owner);
	}
	redisFree(c);
}

Test(cluster_live, fetch_skips_a_dead_first_seed)
{
	const int ports[] = {DEAD_PORT, CLUSTER_PORT + 1};

	conf_seeds(ports, 2);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(topo.cluster, 1);
	cr_expect_eq(topo.n_nodes, CLUSTER_MASTERS);
}

Test(cluster_live, both_sides_number_masters_alike_from_any_seed)
{
	static struct nsa_topology other;
	int ports[1];

	ports[0] = CLUSTER_PORT;
	conf_seeds(ports, 1);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	for (int p = 1; p < CLUSTER_MASTERS; p++) {
		ports[0] = CLUSTER_PORT + p;
		conf_seeds(ports, 1);
		cr_assert_eq(
			nsa_topology_fetch(&conf, &other, err, sizeof(err)), 0,
			"%s", err);
		cr_expect_eq(memcmp(topo.nodes, other.nodes,
				    sizeof(topo.nodes[0]) * topo.n_nodes),
			     0);
		cr_expect_eq(memcmp(topo.slot_node, other.slot_node,
				    sizeof(topo.slot_node)),
			     0);
	}
}

Test(cluster_live, unknown_endpoint_means_the_seed_host)
{
	const int ports[] = {CLUSTER_PORT};

	/* Redis 7 then answers NULL for the host: connect where we asked. */
	for (int p = 0; p < CLUSTER_MASTERS; p++)
		raw_ok(CLUSTER_PORT + p,
		       "CONFIG SET cluster-preferred-endpoint-type "
		       "unknown-endpoint");
	conf_seeds(ports, 1);
	snprintf(conf.seeds[0].host, NSA_HOST_MAX, "localhost");
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(topo.n_nodes, CLUSTER_MASTERS);
	for (unsigned int i = 0; i < topo.n_nodes; i++)
		cr_expect_str_eq(topo.nodes[i].addr.host, "localhost");
}

Test(cluster_live, classic_publish_mode_turns_sharding_off)
{
	const int ports[] = {CLUSTER_PORT};

	conf_seeds(ports, 1);
	conf.publish = NSA_PUBLISH_CLASSIC;
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(topo.sharded_pubsub, 0);
	conf.publish = NSA_PUBLISH_SHARDED;
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(topo.sharded_pubsub, 1);
}

Test(cluster_live, cluster_without_slots_is_an_error)
{
	const int ports[] = {CLUSTER_PORT};
	int rc = 0;

	/* A node's heartbeat sent before its DELSLOTSRANGE can reach the
	 * seed after the seed's own and teach it the slots again: delete
	 * again until the seed knows none (at most 20 times, 2 s). */
	conf_seeds(ports, 1);
	for (int i = 0; i < 20 && rc >= 0; i++) {
		for (int p = 0; p < CLUSTER_MASTERS; p++)
			if (i == 0)
				raw_ok(CLUSTER_PORT + p,
				       "CLUSTER DELSLOTSRANGE 0 16383");
			else
				raw_forget_slots(CLUSTER_PORT + p);
		rc = nsa_topology_fetch(&conf, &topo, err, sizeof(err));
		if (rc >= 0)
			nsdp_sleep_ms(100);
	}
	cr_assert_lt(rc, 0);
	cr_expect(strstr(err, "no slots assigned"), "err: %s", err);
	cr_expect(strstr(err, "127.0.0.1:7500"), "err: %s", err);
}

/* ---- a plain server ---- */

TestSuite(cluster_plain, .init = plain_up, .fini = plain_down, .timeout = 60);

/* The plain server as the only seed, with user (NULL: none) and password
 * (NULL: none) after cmd, an administrative command, has run on it. */
static void plain_seed_as(const char *cmd, const char *user,
			  const char *password)
{
	const int ports[] = {PLAIN_PORT};

	if (cmd)
		raw_ok(PLAIN_PORT, cmd);
	conf_seeds(ports, 1);
	if (user)
		snprintf(conf.user, sizeof(conf.user), "%s", user);
	if (password)
		snprintf(conf.password, sizeof(conf.password), "%s", password);
}

/* A connection to the plain server as configured; the caller frees it. */
static redisContext *plain_connect(void)
{
	redisContext *c =
		nsa_store_connect(&conf, &conf.seeds[0], err, sizeof(err));

	cr_assert(c, "%s", err);
	return c;
}

Test(cluster_plain, plain_server_is_one_node_owning_every_slot)
{
	char ch[NS_CHANNEL_MAX];

	plain_seed_as(NULL, NULL, NULL);
	cr_assert_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(topo.cluster, 0);
	cr_assert_eq(topo.n_nodes, 1);
	cr_expect_eq(topo.nodes[0].addr.port, PLAIN_PORT);
	cr_expect_eq(topo.nodes[0].channel_slot, 0);
	for (int s = 0; s < NS_SLOTS; s++) {
		cr_assert(topo.slot_covered[s], "slot %d", s);
		cr_assert_eq(topo.slot_node[s], 0, "slot %d", s);
	}
	nsa_topology_channel(&topo, 0, ch);
	cr_expect_eq(ns_key_slot(ch, strlen(ch)), 0, "%s", ch);
}

Test(cluster_plain, acl_user_with_right_password_connects)
{
	redisContext *c;
	redisReply *r;

	plain_seed_as("ACL SETUSER natsync_test on >secret ~ns:* +@all",
		      "natsync_test", "secret");
	c = plain_connect();
	r = redisCommand(c, "ACL WHOAMI");
	cr_assert(r && r->type == REDIS_REPLY_STRING);
	cr_expect_str_eq(r->str, "natsync_test");
	freeReplyObject(r);
	redisFree(c);
	cr_expect_eq(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0,
		     "%s", err);
}

Test(cluster_plain, wrong_password_fails_naming_auth)
{
	plain_seed_as("ACL SETUSER natsync_test on >secret ~ns:* +@all",
		      "natsync_test", "wrong");
	cr_assert_null(
		nsa_store_connect(&conf, &conf.seeds[0], err, sizeof(err)));
	cr_expect(strstr(err, "AUTH"), "err: %s", err);
	cr_expect(strstr(err, "127.0.0.1:7510"), "err: %s", err);
	/* The seeds loop reports the same reason. */
	cr_assert_lt(nsa_topology_fetch(&conf, &topo, err, sizeof(err)), 0);
	cr_expect(strstr(err, "AUTH"), "err: %s", err);
}

Test(cluster_plain, password_alone_authenticates_the_default_user)
{
	redisContext *c;
	redisReply *r;

	plain_seed_as("CONFIG SET requirepass natsync-pw", NULL, "natsync-pw");
	c = plain_connect();
	r = redisCommand(c, "PING");
	cr_expect(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	/* Put the server back as the other tests expect it. */
	r = redisCommand(c, "CONFIG SET requirepass %s", "");
	cr_expect(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	redisFree(c);
}

/* ---- the promotion epoch on masters with replicas ---- */

static void replicated_up(void)
{
	if (nst_store_start_fresh(REPLICATED_PORT, CLUSTER_MASTERS, 1))
		cr_assert_fail("store on port %d did not start",
			       REPLICATED_PORT);
}

static void replicated_down(void)
{
	store_down(REPLICATED_PORT);
	/* The plain replica of a_replica_the_cluster_does_not_list_*, left
	 * running when that test failed: the next cluster on these ports
	 * would have it as one more replica. */
	nst_sh("redis-cli -p %d SHUTDOWN NOSAVE >/dev/null 2>&1; true",
	       REPLICATED_PORT + 6);
}

TestSuite(cluster_epoch, .init = replicated_up, .fini = replicated_down,
	  .timeout = 120);

/* The port of the master that owns natsync:epoch, as the first node that
 * answers sees it. */
static int epoch_master_port(void)
{
	struct timeval tv = {.tv_sec = 2};
	int port = -1;

	for (int p = REPLICATED_PORT; p < REPLICATED_PORT + 6 && port < 0;
	     p++) {
		redisContext *c = redisConnectWithTimeout("127.0.0.1", p, tv);

		if (c && !c->err)
			port = server_slot_master_port(
				c, server_keyslot(c, NSA_EPOCH_KEY,
						  strlen(NSA_EPOCH_KEY)));
		if (c)
			redisFree(c);
	}
	cr_assert_gt(port, 0);
	return port;
}

/* The pid of the replica of the master on port (ROLE names its master). */
static int replica_pid_of(int master_port)
{
	char path[512];
	FILE *f;
	int pid = 0;

	snprintf(path, sizeof(path), "%s/replica-pid", nst_build("tests/run"));
	cr_assert_eq(nst_sh("for p in $(seq %d %d); do "
			    "[ \"$(redis-cli -p $p ROLE | sed -n 3p)\" = %d ] "
			    "&& redis-cli -p $p INFO server | "
			    "sed -n 's/^process_id:\\([0-9]*\\).*/\\1/p'; "
			    "done >%s; true",
			    REPLICATED_PORT, REPLICATED_PORT + 5, master_port,
			    path),
		     0);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%d", &pid), 1, "no replica of %d", master_port);
	fclose(f);
	return pid;
}

/* A first epoch, asked until a replica acknowledges one (at most 5 s):
 * right after the cluster started, a replica that has synced may still
 * take more than epoch_wait_ms to acknowledge (1 of 4 runs here). */
static int64_t first_epoch(void)
{
	int64_t e = -ETIMEDOUT;

	for (int i = 0; i < 50 && e == -ETIMEDOUT; i++) {
		e = nsa_epoch_take(&conf, 0, err, sizeof(err));
		if (e == -ETIMEDOUT)
			nsdp_sleep_ms(100);
	}
	return e;
}

/* An epoch no replica acknowledged is never handed out: with the epoch
 * master's replica stopped (SIGSTOP), INCRBY succeeds on the master but
 * WAIT 1 gets no acknowledgement, and nsa_epoch_take refuses that value
 * rather than return one that a failover to that replica would issue
 * again. Once the replica runs, the next call returns the value after the
 * one left unused. */
Test(cluster_epoch, an_epoch_no_replica_acknowledged_is_never_handed_out)
{
	const int ports[] = {REPLICATED_PORT};
	int64_t e0, e, unused;
	int pid;

	conf_seeds(ports, 1);
	conf.epoch_wait_ms = 300;
	e0 = first_epoch();
	cr_assert_gt(e0, 0, "%s", err);
	pid = replica_pid_of(epoch_master_port());
	cr_assert_eq(kill(pid, SIGSTOP), 0);
	e = nsa_epoch_take(&conf, 0, err, sizeof(err));
	kill(pid, SIGCONT);
	cr_assert_eq(e, -ETIMEDOUT, "epoch %lld handed out, no replica had it",
		     (long long)e);
	cr_expect(strstr(err, "no replica acknowledged within 300 ms"), "%s",
		  err);
	cr_expect(strstr(err, "left unused"), "%s", err);
	/* The replica, resumed, may take more than 300 ms to acknowledge
	 * again (1 of 5 runs here): each ask until then leaves one more
	 * epoch unused, and the first acknowledged is the one after them. */
	unused = 1;
	for (int i = 0; i < 50; i++) {
		e = nsa_epoch_take(&conf, 0, err, sizeof(err));
		if (e != -ETIMEDOUT)
			break;
		unused++;
		nsdp_sleep_ms(100);
	}
	cr_assert_eq(e, e0 + (1 + unused) * NSA_EPOCH_STEP,
		     "%s (%lld epochs left unused)", err, (long long)unused);
}

/* The epoch key's master dies (SIGKILL) right after an epoch was handed
 * out; its replica takes over, and the next epoch is above the one
 * handed out. */
Test(cluster_epoch, the_next_epoch_after_the_masters_failover_is_above)
{
	const int ports[] = {REPLICATED_PORT,	  REPLICATED_PORT + 1,
			     REPLICATED_PORT + 2, REPLICATED_PORT + 3,
			     REPLICATED_PORT + 4, REPLICATED_PORT + 5};
	int64_t e1, e2 = -1;
	int master, tries;

	conf_seeds(ports, 6);
	conf.epoch_wait_ms = 1000;
	e1 = nsa_epoch_take(&conf, 0, err, sizeof(err));
	cr_assert_gt(e1, 0, "%s", err);
	master = epoch_master_port();
	cr_assert_eq(nst_sh("kill -9 $(redis-cli -p %d INFO server | sed -n "
			    "'s/^process_id:\\([0-9]*\\).*/\\1/p')",
			    master),
		     0);
	/* The replica is promoted after the node timeout (2 s). */
	for (tries = 0; tries < 150 && e2 < 0; tries++) {
		e2 = nsa_epoch_take(&conf, 0, err, sizeof(err));
		if (e2 < 0)
			nsdp_sleep_ms(100);
	}
	cr_assert_gt(e2, e1, "epoch after the failover: %lld (%s)",
		     (long long)e2, err);
	cr_expect_neq(epoch_master_port(), master);
}

/* Whether the shell command cmd (a format over one port) succeeds
 * within 10 s, tried every 100 ms. */
static int sh_within_10s(const char *cmd, int port)
{
	for (int i = 0; i < 100; i++) {
		if (nst_sh(cmd, port) == 0)
			return 1;
		nsdp_sleep_ms(100);
	}
	return 0;
}

/* A replica that the master's CLUSTER NODES does not list as its live
 * replica (the cluster's gossip not yet caught up with a replica that
 * just attached; here a plain server replicating from the epoch key's
 * master while the cluster's own replica is dead and flagged fail) is
 * connected and could hold the counter; an epoch it has not acknowledged
 * is not handed out. */
Test(cluster_epoch, a_replica_the_cluster_does_not_list_is_still_waited_for)
{
	const int ports[] = {REPLICATED_PORT};
	const char *dir = nst_run_dir_make("cluster-epoch-extra");
	int master, pid, extra = REPLICATED_PORT + 6, up;
	int64_t e0, e;

	conf_seeds(ports, 1);
	conf.epoch_wait_ms = 300;
	master = epoch_master_port();
	cr_assert_eq(nst_sh("redis-server --port %d --save '' --appendonly no "
			    "--daemonize yes --dir %s --pidfile %s/extra.pid "
			    "--logfile %s/extra.log --replicaof 127.0.0.1 %d",
			    extra, dir, dir, dir, master),
		     0);
	up = sh_within_10s("redis-cli -p %d INFO replication | "
			   "grep -q '^master_link_status:up'",
			   extra);
	cr_assert(up, "the extra replica of %d never synced", master);
	e0 = first_epoch();
	cr_assert_gt(e0, 0, "%s", err);

	/* The cluster's own replica dies; the master flags it fail (listed
	 * as "slave,fail", or in 2 of 6 runs here "master,fail": a dead
	 * node's role as the master last heard it; either way the master
	 * lists no live replica). */
	pid = replica_pid_of(master);
	cr_assert_gt(pid, 0);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	up = sh_within_10s("redis-cli -p %d CLUSTER NODES | "
			   "grep -qE ' (slave|master),fail '",
			   master);
	cr_assert(up, "%d never flagged its dead replica fail", master);

	pid = nst_sh("kill -STOP $(cat %s/extra.pid)", dir);
	cr_assert_eq(pid, 0);
	e = nsa_epoch_take(&conf, 0, err, sizeof(err));
	nst_sh("kill -CONT $(cat %s/extra.pid)", dir);
	cr_expect_eq(e, -ETIMEDOUT,
		     "epoch %lld handed out, no replica had it (%s)",
		     (long long)e, err);
	e = nsa_epoch_take(&conf, 0, err, sizeof(err));
	nst_sh("kill -KILL $(cat %s/extra.pid)", dir);
	cr_assert_gt(e, e0, "%s", err);
}

/* ---- gateway pairs: a counter and a fence each ---- */

/* A connection to the master on port, named name (CLIENT SETNAME). */
static redisContext *named_connect(int port, const char *name)
{
	redisContext *c = raw_connect(port);
	redisReply *r = redisCommand(c, "CLIENT SETNAME %s", name);

	cr_assert(r && r->type == REDIS_REPLY_STATUS, "SETNAME %s", name);
	freeReplyObject(r);
	return c;
}

/* Whether c's connection is still open on the server. */
static int still_open(redisContext *c)
{
	redisReply *r = redisCommand(c, "PING");
	int open = r != NULL && r->type == REDIS_REPLY_STATUS;

	if (r)
		freeReplyObject(r);
	return open;
}

/* Pairs 0, 1 and 12 take epochs from counters of their own (natsync:epoch,
 * natsync:epoch:1, natsync:epoch:12), each starting at the first
 * generation; pair 1's fence closes the connections named
 * natsync-writer:1 on every master and no other pair's (not
 * natsync-writer, nor natsync-writer:12, nor a name that only starts
 * like one). */
Test(cluster_live, each_gateway_pair_has_its_own_counter_and_fence)
{
	static const char *const names[] = {
		"natsync-writer", "natsync-writer:1", "natsync-writer:12",
		"natsync-writer:1x", "natsync-writer:1"};
	const int ports[] = {CLUSTER_PORT};
	redisContext *c[CLUSTER_MASTERS][5];
	char key[NSA_PAIR_NAME_MAX];
	unsigned int killed = 0;
	uint64_t e;

	raw_ok(CLUSTER_PORT, "FLUSHALL");
	for (int m = 1; m < CLUSTER_MASTERS; m++) {
		char cmd[32];

		snprintf(cmd, sizeof(cmd), "FLUSHALL");
		raw_ok(CLUSTER_PORT + m, cmd);
	}
	conf_seeds(ports, 1);
	cr_assert_str_eq(nsa_epoch_key(0, key), "natsync:epoch");
	cr_assert_str_eq(nsa_epoch_key(12, key), "natsync:epoch:12");
	cr_assert_str_eq(nsa_writer_name(0, key), "natsync-writer");
	cr_assert_str_eq(nsa_writer_name(12, key), "natsync-writer:12");

	cr_assert_eq(nsa_epoch_take(&conf, 0, err, sizeof(err)), 256, "%s",
		     err);
	conf.pair = 1;
	cr_assert_eq(nsa_epoch_take(&conf, 0, err, sizeof(err)), 256, "%s",
		     err);
	cr_assert_eq(nsa_epoch_take(&conf, 0, err, sizeof(err)), 512, "%s",
		     err);
	cr_assert_eq(nsa_epoch_register(&conf, 770, err, sizeof(err)), 770,
		     "%s", err);
	conf.pair = 12;
	cr_assert_eq(nsa_epoch_take(&conf, 0, err, sizeof(err)), 256, "%s",
		     err);
	cr_assert_eq(nsa_fence_read(&conf, NULL, &e, err, sizeof(err)), 0);
	cr_assert_eq(e, 256);
	conf.pair = 0;
	cr_assert_eq(nsa_fence_read(&conf, NULL, &e, err, sizeof(err)), 0);
	cr_assert_eq(e, 256);
	conf.pair = 1;
	cr_assert_eq(nsa_fence_read(&conf, NULL, &e, err, sizeof(err)), 0);
	cr_assert_eq(e, 770);
	cr_assert_eq(nsa_fence_check(&conf, NULL, 512, err, sizeof(err)),
		     -ESTALE);
	conf.pair = 12;
	cr_assert_eq(nsa_fence_check(&conf, NULL, 256, err, sizeof(err)), 0,
		     "%s", err);

	for (int m = 0; m < CLUSTER_MASTERS; m++)
		for (int i = 0; i < 5; i++)
			c[m][i] = named_connect(CLUSTER_PORT + m, names[i]);
	conf.pair = 1;
	cr_assert_eq(nsa_fence_raise(&conf, &killed, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(killed, 2 * CLUSTER_MASTERS);
	for (int m = 0; m < CLUSTER_MASTERS; m++) {
		for (int i = 0; i < 5; i++) {
			int closed = i == 1 || i == 4;

			cr_expect_eq(still_open(c[m][i]), !closed,
				     "master %d: %s is %s", m, names[i],
				     closed ? "open" : "closed");
			redisFree(c[m][i]);
		}
	}
	conf.pair = 0;
	for (int m = 0; m < CLUSTER_MASTERS; m++)
		c[m][0] = named_connect(CLUSTER_PORT + m, names[2]);
	cr_assert_eq(nsa_fence_raise(&conf, &killed, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(killed, 0, "pair 0's fence closed pair 12's writers");
	for (int m = 0; m < CLUSTER_MASTERS; m++) {
		cr_expect(still_open(c[m][0]));
		redisFree(c[m][0]);
	}
}

/* ---- a first ask for an epoch that gave up, and ran later ---- */

/* The pid of the redis-server on port. */
static int server_pid(int port)
{
	redisContext *c = raw_connect(port);
	redisReply *r = redisCommand(c, "INFO server");
	const char *at = r && r->type == REDIS_REPLY_STRING
				 ? strstr(r->str, "process_id:")
				 : NULL;
	int pid = at ? atoi(at + strlen("process_id:")) : 0;

	freeReplyObject(r);
	redisFree(c);
	cr_assert_gt(pid, 0, "no process_id from %d", port);
	return pid;
}

/* The pair's counter, or -1. */
static int64_t counter_of(uint32_t pair)
{
	struct nsa_store_conf q = conf;
	uint64_t e;

	q.pair = pair;
	if (nsa_fence_read(&q, NULL, &e, err, sizeof(err)) < 0)
		return -1;
	return (int64_t)e;
}

/* A first ask of q for an epoch above floor, made while the counter's
 * master is stopped (SIGSTOP) past q's bound: the ask gives up, the
 * master continues, and the ask's EVAL, already sent, runs late. The
 * counter it leaves. */
static int64_t late_ask(const struct nsa_store_conf *q, uint64_t floor,
			int master_pid, int64_t before)
{
	int64_t e, now = before;

	cr_assert_eq(kill(master_pid, SIGSTOP), 0);
	e = nsa_epoch_take(q, floor, err, sizeof(err));
	kill(master_pid, SIGCONT);
	cr_assert_lt(e, 0, "the ask did not give up: epoch %lld", (long long)e);
	for (int i = 0; i < 50 && now == before; i++) {
		nsdp_sleep_ms(100);
		now = counter_of(q->pair);
	}
	cr_assert_gt(now, before, "the late ask never ran (counter %lld)",
		     (long long)now);
	return now;
}

/* A gateway whose first ask for an epoch gave up (its store hung past
 * [agent] promote_wait_ms) forwards on a provisional epoch; the ask it
 * gave up may still run once the store continues, and leaves the
 * counter one generation up, at an epoch nobody uses. Making the
 * provisional epoch known then registers it as if that late ask had never
 * run: before, the provisional active found the counter above its epoch
 * and fenced itself, and the counter fenced the active it replaced too. */
Test(cluster_live, a_late_first_ask_does_not_fence_its_own_provisional_epoch)
{
	const uint32_t pair = 40;
	char key[NSA_PAIR_NAME_MAX];
	struct nsa_store_conf q;
	int seeds[CLUSTER_MASTERS - 1], n = 0, master, pid;
	int64_t e;

	/* Seed the topology from the other masters, so that the ask reads
	 * it and hangs on the counter's EVAL alone. */
	conf_seeds((const int[]){CLUSTER_PORT}, 1);
	{
		redisContext *c = raw_connect(CLUSTER_PORT);

		nsa_epoch_key(pair, key);
		master = server_slot_master_port(
			c, server_keyslot(c, key, strlen(key)));
		redisFree(c);
	}
	cr_assert_gt(master, 0);
	for (int m = 0; m < CLUSTER_MASTERS; m++)
		if (CLUSTER_PORT + m != master)
			seeds[n++] = CLUSTER_PORT + m;
	conf_seeds(seeds, (unsigned int)n);
	conf.pair = pair;
	pid = server_pid(master);

	/* The active being replaced took 256. */
	e = nsa_epoch_take(&conf, 0, err, sizeof(err));
	cr_assert_eq(e, 256, "%s", err);

	/* Its successor (node 1 of the pair) asks with floor 0, gives up
	 * and forwards on 257, above 256; its ask runs late: 512. */
	q = nsa_store_conf_quick(&conf, 200);
	q.epoch_token = 0xb1;
	cr_assert_eq(nsa_epoch_provisional(0, pair << 8 | 1), 257);
	cr_assert_eq(late_ask(&q, 0, pid, 256), 512);
	e = nsa_epoch_register(&q, 257, err, sizeof(err));
	cr_assert_eq(e, 257,
		     "the provisional epoch 257 was fenced by its own late "
		     "ask: the store's counter is %lld (%s)",
		     (long long)e, err);
	cr_assert_eq(counter_of(pair), 257);

	/* Node 2 takes over from 257 with floor 0 (provisional 258); its
	 * ask runs late (512), then a newer active (another token) takes
	 * 768: the newer one stands, and 258 is fenced. */
	conf.epoch_token = 0xa1;
	q.epoch_token = 0xb2;
	cr_assert_eq(nsa_epoch_provisional(0, pair << 8 | 2), 258);
	cr_assert_eq(late_ask(&q, 0, pid, 257), 512);
	e = nsa_epoch_take(&conf, 0, err, sizeof(err));
	cr_assert_eq(e, 768, "%s", err);
	e = nsa_epoch_register(&q, 258, err, sizeof(err));
	cr_assert_eq(e, 768, "a newer active's epoch was undone: %lld (%s)",
		     (long long)e, err);
	cr_assert_eq(counter_of(pair), 768);

	/* A successor with a stale floor (0: provisional 258, below 768)
	 * is fenced, as it would be without its late ask (1024), and the
	 * counter goes back to 768, so the active on 768 is not fenced by
	 * an epoch nobody uses. */
	cr_assert_eq(late_ask(&q, 0, pid, 768), 1024);
	e = nsa_epoch_register(&q, 258, err, sizeof(err));
	cr_assert_eq(e, 768, "%s", err);
	cr_assert_eq(counter_of(pair), 768);
	cr_assert_eq(nsa_fence_check(&conf, NULL, 768, err, sizeof(err)), 0,
		     "%s", err);

	/* With the floor at the counter (what the notify script gives),
	 * the late ask stays below the provisional epoch (1024 < 1026),
	 * which is registered, and again on a second call. */
	cr_assert_eq(late_ask(&q, 768, pid, 768), 1024);
	cr_assert_eq(nsa_epoch_register(&q, 1026, err, sizeof(err)), 1026);
	cr_assert_eq(nsa_epoch_register(&q, 1026, err, sizeof(err)), 1026);
	cr_assert_eq(counter_of(pair), 1026);
}
