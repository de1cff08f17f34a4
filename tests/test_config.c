/*
 * test_config.c - the agent's configuration as a specification: the
 * documented defaults, every key of a full file, the error for each kind of
 * bad input (naming file, line, section and key), --set, the password file
 * rules, a print/load round trip, the [gateway] section (gateway/
 * ngw_config.c) with the check natsync-gateway makes of it, and the
 * generated reference docs/configuration.md.
 *
 * Files are written to a mkdtemp directory that the fixture removes; no
 * servers, no EAL.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ns_batch.h"
#include "ngw_config.h"
#include "nsa_config.h"
#include "nsa_config_key.h"
#include "nsa_log.h"
#include "nst_store.h"

static char tmpdir[PATH_MAX];

static void nst_config_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/natsync-config-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void nst_config_teardown(void)
{
	char path[PATH_MAX + 256];
	struct dirent *e;
	DIR *d = opendir(tmpdir);

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		if (unlink(path) != 0)
			rmdir(path);
	}
	closedir(d);
	rmdir(tmpdir);
}

TestSuite(config, .init = nst_config_setup, .fini = nst_config_teardown);

static const char *nst_tmp(const char *name)
{
	static char path[4][PATH_MAX + 256];
	static int n;
	char *p = path[n++ & 3];

	snprintf(p, sizeof(path[0]), "%s/%s", tmpdir, name);
	return p;
}

static const char *nst_write(const char *name, const char *text, mode_t mode)
{
	const char *path = nst_tmp(name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert(fd >= 0, "create %s", path);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0); /* exact mode, whatever the umask */
	close(fd);
	return path;
}

/* Defaults, then agent.ini holding text. */
static int nst_load(struct nsa_config *c, const char *text, char *err,
		    size_t errlen)
{
	nsa_config_defaults(c);
	err[0] = '\0';
	return nsa_config_load(c, nst_write("agent.ini", text, 0644), err,
			       errlen);
}

/* Defaults with the [gateway] keys, then agent.ini holding text. */
static int nst_gw_load(struct ngw_config *c, const char *text, char *err,
		       size_t errlen)
{
	ngw_config_defaults(c);
	err[0] = '\0';
	return nsa_config_load(&c->agent, nst_write("agent.ini", text, 0644),
			       err, errlen);
}

/* nst_gw_load() of text, which must load. */
static void nst_gw_load_ok(struct ngw_config *c, const char *text)
{
	char err[512];

	cr_assert_eq(nst_gw_load(c, text, err, sizeof(err)), 0, "%s", err);
}

/* Load text as natsync-agent and natsync-gateway do, with the [gateway]
 * keys; expect failure with an err containing want. */
static void nst_expect_error(const char *text, const char *want)
{
	static struct ngw_config c;
	char err[1024];

	cr_assert_eq(nst_gw_load(&c, text, err, sizeof(err)), -1,
		     "accepted: %s", text);
	cr_assert_not_null(strstr(err, want), "err \"%s\" lacks \"%s\"", err,
			   want);
	cr_assert_not_null(strstr(err, tmpdir), "err \"%s\" lacks the path",
			   err);
}

/*
 * The keys full_ini sets, one row each: the kind of check, the field, its
 * documented default and the value full_ini gives it. The defaults and
 * the full file's tests both walk these rows.
 */
/* clang-format off */
#define NST_AGENT_KEYS(X) \
	X(num, role, NSA_ROLE_ACTIVE, NSA_ROLE_STANDBY) \
	X(num, gateway_id, 1, 7) \
	X(num, epoch, 1, 42) \
	X(num, progress_ms, 1000, 0) \
	X(str, eal_args, "--no-huge --no-shconf -m 512 --no-pci --no-telemetry", "--no-huge -m 256") \
	X(num, verbosity, NSA_LOG_INFO, NSA_LOG_DEBUG) \
	X(str, store.seeds[0].host, "127.0.0.1", "10.0.0.1") \
	X(num, store.seeds[0].port, 7000, 7001) \
	X(str, store.user, "", "natsync") \
	X(str, password_file, "", "/etc/natsync/password") \
	X(num, store.connect_timeout_ms, 1000, 2500) \
	X(num, store.publish, NSA_PUBLISH_AUTO, NSA_PUBLISH_CLASSIC) \
	X(num, workers, 1, 4) \
	X(num, batch_size, 256, NS_BATCH_MAX_RECORDS) \
	X(num, flush_us, 200, 0) \
	X(num, max_inflight, 8, 1024) \
	X(num, replay_ms, 2000, 0) \
	X(num, replay_records, 131072, 16777216) \
	X(str, writer_cpus, "auto", "0,2-3") \
	X(num, lanes, 1, 4) \
	X(num, ring_size, 65536, 1024) \
	X(num, attach, 0, 1) \
	X(num, source_type, NSA_SOURCE_NONE, NSA_SOURCE_SYNTH) \
	X(num, synth_conf.flows, 100000, 5000) \
	X(num, synth_conf.events, 1000000, UINT64_MAX) \
	X(num, synth_conf.rate, 0, 200000) \
	X(num, synth_conf.seed, 1, 99) \
	X(num, synth_conf.refresh_pct, 60, 0) \
	X(num, synth_conf.timeout_ms, 300000, 86400000) \
	X(num, synth_conf.wait_when_full, 1, 0) \
	X(str, source_dump, "", "/tmp/source.tbl") \
	X(num, table_capacity, 2000000, 1024) \
	X(str, table_dump, "", "/tmp/standby.tbl") \
	X(num, topology_check_ms, 1000, 0) \
	X(num, ping_ms, 1000, 250)

#define NST_GATEWAY_KEYS(X) \
	X(str, inside_port, "", "net_af_packet0") \
	X(str, outside_port, "", "0000:3b:00.1") \
	X(num, nat.inside_addr, 0, 0xc0a80101) \
	X(num, nat.pool_first, 0, 0xc6336401) \
	X(num, nat.pool_last, 0, 0xc63364fe) \
	X(num, nat.next_hop, 0, 0xcb0071fe) \
	X(num, nat.port_min, 1024, 1) \
	X(num, nat.port_max, 65535, 65535) \
	X(num, tcp_syn_timeout, 20, 1) \
	X(num, tcp_established_timeout, 7440, 604800) \
	X(num, tcp_closing_timeout, 10, 4) \
	X(num, udp_timeout, 300, 120) \
	X(num, icmp_timeout, 30, 60) \
	X(str, control_socket, "/run/natsync/gateway.sock", "/tmp/gw test.sock") \
	X(num, agent, NGW_AGENT_THREADS, NGW_AGENT_EXTERNAL) \
	X(num, idle_sleep_us, 0, 100000) \
	X(num, rx_descriptors, 1024, 64) \
	X(num, tx_descriptors, 1024, 16384) \
	X(num, mbufs, 8191, 1048575)
/* clang-format on */

#define NST_EXPECT_num(got, want) cr_assert_eq(got, want, "%s", #got)
#define NST_EXPECT_str(got, want) cr_assert_str_eq(got, want, "%s", #got)
#define NST_EXPECT_DEFAULT(kind, f, def, full) NST_EXPECT_##kind(c->f, def);
#define NST_EXPECT_FULL(kind, f, def, full) NST_EXPECT_##kind(c->f, full);

static void nst_expect_agent_defaults(const struct nsa_config *c)
{
	NST_AGENT_KEYS(NST_EXPECT_DEFAULT)
}

static void nst_expect_agent_full(const struct nsa_config *c)
{
	NST_AGENT_KEYS(NST_EXPECT_FULL)
}

static void nst_expect_gateway_defaults(const struct ngw_gateway_conf *c)
{
	NST_GATEWAY_KEYS(NST_EXPECT_DEFAULT)
}

static void nst_expect_gateway_full(const struct ngw_gateway_conf *c)
{
	NST_GATEWAY_KEYS(NST_EXPECT_FULL)
}

/* The NAT's fields that follow from other keys: the timeouts in ms, the
 * gateway's id and the table's size. */
struct nst_nat_derived {
	uint64_t tcp_syn_ms, tcp_established_ms, tcp_closing_ms, udp_ms,
		icmp_ms, gateway_id, max_sessions;
};

static void nst_expect_nat_derived(const struct ngw_config *c,
				   struct nst_nat_derived want)
{
	cr_assert_eq(c->gw.nat.tcp_syn_ms, want.tcp_syn_ms);
	cr_assert_eq(c->gw.nat.tcp_established_ms, want.tcp_established_ms);
	cr_assert_eq(c->gw.nat.tcp_closing_ms, want.tcp_closing_ms);
	cr_assert_eq(c->gw.nat.udp_ms, want.udp_ms);
	cr_assert_eq(c->gw.nat.icmp_ms, want.icmp_ms);
	cr_assert_eq(c->gw.nat.gateway_id, want.gateway_id);
	cr_assert_eq(c->gw.nat.max_sessions, want.max_sessions);
}

Test(config, defaults_are_as_documented)
{
	struct nsa_config c;

	nsa_config_defaults(&c);
	nst_expect_agent_defaults(&c);
	cr_assert_eq(c.store.n_seeds, 1);
	cr_assert_str_eq(c.store.password, "");
	cr_assert_eq(c.synth_conf.gateway_id, 1);
	cr_assert_eq(c.synth_conf.epoch, 1);
}

Test(config, gateway_defaults_are_as_documented)
{
	struct ngw_config c;

	ngw_config_defaults(&c);
	nst_expect_gateway_defaults(&c.gw);

	/* What follows from other keys is filled in from the start. */
	nst_expect_nat_derived(&c, (struct nst_nat_derived){20000, 7440000,
							    10000, 300000,
							    30000, 1, 2000000});
}

/* [gateway] key = value alone in agent.ini is refused with
 * "agent.ini:2: [gateway] key: " and then want. */
static void nst_expect_gateway_value_error(const char *key, const char *value,
					   const char *want)
{
	char ini[256], err[256];

	snprintf(ini, sizeof(ini), "[gateway]\n%s = %s\n", key, value);
	snprintf(err, sizeof(err), "agent.ini:2: [gateway] %s: %s", key, want);
	nst_expect_error(ini, err);
}

Test(config, defaults_pass_finish)
{
	struct nsa_config c;
	char err[512] = "";

	nsa_config_defaults(&c);
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), 0, "%s", err);
}

static const char full_ini[] =
	"; every key, none at its default\n"
	"[agent]\n"
	"role = standby\n"
	"gateway_id = 7\n"
	"epoch = 42\n"
	"progress_ms = 0\n"
	"eal_args = \"--no-huge -m 256\"\n"
	"log_level = debug\n"
	"\n"
	"[store]\n"
	"seeds = 10.0.0.1:7001, redis-b:7002,localhost:6379\n"
	"user = natsync\n"
	"password_file = /etc/natsync/password\n"
	"connect_timeout_ms = 2500\n"
	"publish = classic\n"
	"\n"
	"[active]\n"
	"  workers = 4   ; indented keys are fine\n"
	"  batch_size = 4096\n"
	"  flush_us = 0\n"
	"  max_inflight = 1024\n"
	"  replay_ms = 0\n"
	"  replay_records = 16777216\n"
	"writer_cpus = 0,2-3\n"
	"\n"
	"[rings]\n"
	"lanes = 4\n"
	"ring_size = 1024\n"
	"attach = true\n"
	"\n"
	"[source]\n"
	"type = synth\n"
	"flows = 5000\n"
	"events = 18446744073709551615\n"
	"rate = 200000\n"
	"seed = 99\n"
	"refresh_pct = 0\n"
	"timeout_ms = 86400000\n"
	"wait_when_full = no\n"
	"dump = /tmp/source.tbl\n"
	"\n"
	"# hash comments too\n"
	"[standby]\n"
	"table_capacity = 1024\n"
	"dump = /tmp/standby.tbl\n"
	"topology_check_ms = 0\n"
	"ping_ms = 250\n"
	"\n"
	"[gateway]\n"
	"inside_port = net_af_packet0\n"
	"outside_port = 0000:3b:00.1\n"
	"inside_address = 192.168.1.1\n"
	"pool = 198.51.100.1 - 198.51.100.254\n"
	"next_hop = 203.0.113.254\n"
	"ports = 1-65535\n"
	"tcp_syn_timeout = 1\n"
	"tcp_established_timeout = 604800\n"
	"tcp_closing_timeout = 4\n"
	"udp_timeout = 120\n"
	"icmp_timeout = 60\n"
	"control_socket = \"/tmp/gw test.sock\"\n"
	"agent = external\n"
	"idle_sleep_us = 100000\n"
	"rx_descriptors = 64\n"
	"tx_descriptors = 16384\n"
	"mbufs = 1048575\n";

Test(config, full_file_loads_every_key)
{
	struct ngw_config c;
	char err[512];

	cr_assert_eq(nst_gw_load(&c, full_ini, err, sizeof(err)), 0, "%s", err);
	nst_expect_agent_full(&c.agent);
	cr_assert_eq(c.agent.store.n_seeds, 3);
	cr_assert_str_eq(c.agent.store.seeds[1].host, "redis-b");
	cr_assert_eq(c.agent.store.seeds[1].port, 7002);
	cr_assert_str_eq(c.agent.store.seeds[2].host, "localhost");
	cr_assert_eq(c.agent.store.seeds[2].port, 6379);
	cr_assert_str_eq(c.agent.store.password, "",
			 "the file is not read yet");
	nst_expect_gateway_full(&c.gw);
}

Test(config, load_keeps_values_the_file_does_not_set)
{
	struct nsa_config c;
	char err[512];

	cr_assert_eq(
		nst_load(&c, "[active]\nbatch_size = 32\n", err, sizeof(err)),
		0, "%s", err);
	cr_assert_eq(c.batch_size, 32);
	cr_assert_eq(c.max_inflight, 8);
	cr_assert_eq(c.ring_size, 65536);
}

Test(config, unknown_key_is_rejected_with_file_line_section_key)
{
	nst_expect_error("[active]\nworkers = 1\nbogus = 3\n",
			 "agent.ini:3: [active] bogus: unknown key (known: "
			 "workers, batch_size, flush_us, max_inflight, "
			 "replay_ms, replay_records, writer_cpus)");
}

Test(config, unknown_section_is_rejected)
{
	nst_expect_error("[agent]\nrole = active\n\n[nat]\nworkers = 1\n",
			 "agent.ini:5: [nat] workers: unknown section");
}

Test(config, key_outside_any_section_is_rejected)
{
	nst_expect_error("role = active\n",
			 "agent.ini:1: [] role: unknown section");
}

Test(config, non_number_is_rejected_with_allowed_range)
{
	nst_expect_error("[active]\nbatch_size = 12abc\n",
			 "agent.ini:2: [active] batch_size: '12abc' is not a "
			 "number (allowed 1..4096)");
	nst_expect_error(
		"[active]\nbatch_size =\n",
		"agent.ini:2: [active] batch_size: '' is not a number");
	nst_expect_error("[rings]\nlanes = 0x4\n",
			 "agent.ini:2: [rings] lanes: '0x4' is not a number");
}

Test(config, signed_number_is_rejected)
{
	nst_expect_error(
		"[active]\nflush_us = -1\n",
		"agent.ini:2: [active] flush_us: '-1' is not a number");
	nst_expect_error(
		"[active]\nflush_us = +1\n",
		"agent.ini:2: [active] flush_us: '+1' is not a number");
}

Test(config, out_of_range_number_is_rejected_with_allowed_range)
{
	nst_expect_error("[agent]\nrole = active\n\n\n\n[active]\n"
			 "batch_size = 0\n",
			 "agent.ini:7: [active] batch_size: 0 is out of range "
			 "1..4096");
	nst_expect_error("[source]\nrefresh_pct = 101\n",
			 "agent.ini:2: [source] refresh_pct: 101 is out of "
			 "range 0..100");
	nst_expect_error("[source]\nseed = 18446744073709551616\n",
			 "agent.ini:2: [source] seed: 18446744073709551616 is "
			 "out of range 0..18446744073709551615");
	nst_expect_error("[agent]\nepoch = 4294967296\n",
			 "agent.ini:2: [agent] epoch: 4294967296 is out of "
			 "range 0..4294967295");
}

Test(config, bad_boolean_is_rejected)
{
	nst_expect_error("[rings]\nattach = maybe\n",
			 "agent.ini:2: [rings] attach: 'maybe' is not a "
			 "boolean (yes|no|true|false|1|0)");
}

Test(config, bad_enum_is_rejected_with_the_choices)
{
	nst_expect_error("[agent]\nrole = primary\n",
			 "agent.ini:2: [agent] role: 'primary' is not one of "
			 "active|standby");
	nst_expect_error("[store]\npublish = both\n",
			 "agent.ini:2: [store] publish: 'both' is not one of "
			 "auto|sharded|classic");
	nst_expect_error("[agent]\nlog_level = trace\n",
			 "agent.ini:2: [agent] log_level: 'trace' is not one "
			 "of error|warn|info|debug");
	nst_expect_error("[source]\ntype = pcap\n",
			 "agent.ini:2: [source] type: 'pcap' is not one of "
			 "none|synth");
}

Test(config, bad_seed_address_is_rejected)
{
	nst_expect_error("[store]\nseeds = 127.0.0.1:7000,127.0.0.1\n",
			 "agent.ini:2: [store] seeds: '127.0.0.1' is not "
			 "host:port");
	nst_expect_error("[store]\nseeds = 127.0.0.1:99999\n",
			 "agent.ini:2: [store] seeds: '127.0.0.1:99999' is not "
			 "host:port");
	nst_expect_error("[store]\nseeds = 127.0.0.1:7000,,127.0.0.1:7001\n",
			 "agent.ini:2: [store] seeds: empty address");
}

Test(config, ring_size_not_a_power_of_two_is_rejected)
{
	nst_expect_error("[rings]\nring_size = 1000\n",
			 "agent.ini:2: [rings] ring_size: 1000 is not a power "
			 "of two");
	nst_expect_error("[rings]\nring_size = 32\n",
			 "agent.ini:2: [rings] ring_size: 32 is out of range "
			 "64..16777216");
}

Test(config, malformed_line_is_rejected_with_its_line)
{
	nst_expect_error("[agent]\nrole = active\njust some words\n",
			 "agent.ini:3: malformed line");
	nst_expect_error("[agent\nrole = active\n",
			 "agent.ini:1: malformed line");
}

Test(config, malformed_line_before_a_bad_value_is_the_one_reported)
{
	nst_expect_error("[agent]\nnonsense\nrole = primary\n",
			 "agent.ini:2: malformed line");
}

Test(config, key_given_twice_is_rejected)
{
	nst_expect_error("[active]\nworkers = 2\nbatch_size = 8\nworkers = 3\n",
			 "agent.ini:4: [active] workers: given twice (first on "
			 "line 2)");
}

Test(config, too_long_string_is_rejected)
{
	char text[512];

	snprintf(text, sizeof(text), "[store]\nuser = %0100d\n", 0);
	nst_expect_error(text, "agent.ini:2: [store] user: value is longer "
			       "than 63 bytes");
}

Test(config, too_long_line_is_rejected)
{
	char text[4096];
	size_t n = (size_t)snprintf(text, sizeof(text), "[agent]\neal_args = ");

	memset(text + n, 'x', 2000);
	strcpy(text + n + 2000, "\n");
	nst_expect_error(text, "agent.ini:2: line is longer than");
}

Test(config, first_error_is_the_one_reported)
{
	nst_expect_error("[active]\nworkers = 0\nbatch_size = 0\n",
			 "agent.ini:2: [active] workers:");
}

Test(config, missing_file_says_cannot_open)
{
	struct nsa_config c;
	char err[512];
	const char *path = nst_tmp("absent.ini");
	char want[PATH_MAX + 300];

	nsa_config_defaults(&c);
	cr_assert_eq(nsa_config_load(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "%s: cannot open: No such file or directory", path);
	cr_assert_str_eq(err, want);
}

Test(config, set_overrides_the_file)
{
	struct nsa_config c;
	char err[512];

	cr_assert_eq(
		nst_load(&c, "[active]\nbatch_size = 32\n", err, sizeof(err)),
		0, "%s", err);
	cr_assert_eq(
		nsa_config_set(&c, "active.batch_size=64", err, sizeof(err)), 0,
		"%s", err);
	cr_assert_eq(c.batch_size, 64);
	cr_assert_eq(
		nsa_config_set(&c, "store.seeds = a:1,b:2", err, sizeof(err)),
		0, "%s", err);
	cr_assert_eq(c.store.n_seeds, 2);
	cr_assert_str_eq(c.store.seeds[1].host, "b");
	cr_assert_eq(nsa_config_set(&c, "agent.role=standby", err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.role, NSA_ROLE_STANDBY);
	cr_assert_eq(nsa_config_set(&c, "agent.eal_args=--no-huge -m 64", err,
				    sizeof(err)),
		     0, "%s", err);
	cr_assert_str_eq(c.eal_args, "--no-huge -m 64");
}

Test(config, set_errors_name_the_key)
{
	struct nsa_config c;
	char err[512];

	nsa_config_defaults(&c);
	cr_assert_eq(
		nsa_config_set(&c, "active.batch_size=0", err, sizeof(err)),
		-1);
	cr_assert_str_eq(err,
			 "--set active.batch_size: 0 is out of range 1..4096");
	cr_assert_eq(c.batch_size, 256, "a rejected value is not stored");
	cr_assert_eq(nsa_config_set(&c, "active.bogus=1", err, sizeof(err)),
		     -1);
	cr_assert_not_null(strstr(err, "--set active.bogus: unknown key"), "%s",
			   err);
	cr_assert_eq(nsa_config_set(&c, "batch_size=1", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "--set batch_size=1: expected section.key=value");
	cr_assert_eq(nsa_config_set(&c, "active.batch_size", err, sizeof(err)),
		     -1);
}

/* writer_cpus: auto and all as they are, a list of CPUs this process may
 * run on; anything else refused at finish, naming the key and why. */
Test(config, writer_cpus_takes_auto_all_or_a_list_of_cpus_this_host_has)
{
	static const struct {
		const char *value, *err;
	} cases[] = {
		{"auto", NULL},
		{"all", NULL},
		{"0", NULL},
		{"0-0,0", NULL},
		{"1-0", "[active] writer_cpus: range 1-0 is backwards"},
		{"4096", "[active] writer_cpus: CPU 4096 is not one this "
			 "process may run on"},
		{"0,", "[active] writer_cpus: '0,' is not a CPU list"},
		{"", "[active] writer_cpus: '' is not a CPU list"},
		{"any", "[active] writer_cpus: 'any' is not a CPU list"},
		{"0-", "[active] writer_cpus: '0-' is not a CPU list"},
	};
	cpu_set_t set;
	char err[512], buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nsa_config c;
		int rc;

		nsa_config_defaults(&c);
		snprintf(c.writer_cpus, sizeof(c.writer_cpus), "%s",
			 cases[i].value);
		err[0] = '\0';
		rc = nsa_config_finish(&c, err, sizeof(err));
		if (!cases[i].err) {
			cr_expect_eq(rc, 0, "'%s': %s", cases[i].value, err);
			continue;
		}
		cr_expect_eq(rc, -1, "'%s' was taken", cases[i].value);
		cr_expect_eq(strncmp(err, cases[i].err, strlen(cases[i].err)),
			     0, "'%s': %s", cases[i].value, err);
	}
	cr_assert_eq(nsa_cpu_list_parse("0,0", &set, err, sizeof(err)), 0);
	nsa_cpu_list_format(&set, buf, sizeof(buf));
	cr_assert_str_eq(buf, "0");
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CPU_SET(2, &set);
	CPU_SET(3, &set);
	CPU_SET(5, &set);
	nsa_cpu_list_format(&set, buf, sizeof(buf));
	cr_assert_str_eq(buf, "0,2-3,5");
	CPU_ZERO(&set);
	nsa_cpu_list_format(&set, buf, sizeof(buf));
	cr_assert_str_eq(buf, "none");
}

/* Defaults, password_file = path, then finish. */
static int nst_finish_with_password(struct nsa_config *c, const char *path,
				    char *err, size_t errlen)
{
	nsa_config_defaults(c);
	snprintf(c->password_file, sizeof(c->password_file), "%s", path);
	err[0] = '\0';
	return nsa_config_finish(c, err, errlen);
}

Test(config, password_file_readable_by_others_is_refused)
{
	struct nsa_config c;
	char err[PATH_MAX + 300], want[PATH_MAX + 300];
	const char *path = nst_write("pw", "secret\n", 0644);

	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "password_file %s: permissions 0644 let others read it; "
		 "chmod 600",
		 path);
	cr_assert_str_eq(err, want);
	cr_assert_str_eq(c.store.password, "");

	path = nst_write("pw", "secret\n", 0640);
	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "permissions 0640"), "%s", err);
}

Test(config, password_file_0600_is_read_and_one_newline_stripped)
{
	struct nsa_config c;
	char err[512];
	const char *path = nst_write("pw", "s3cret pass\n", 0600);

	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_str_eq(c.store.password, "s3cret pass");

	path = nst_write("pw2", "nonewline", 0400);
	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_str_eq(c.store.password, "nonewline");
}

Test(config, batch_key_file_is_read_like_a_password_and_refused_if_shared)
{
	struct nsa_config c;
	char err[PATH_MAX + 300], want[PATH_MAX + 300];
	const char *path = nst_write("bk", "0123456789abcdef\n", 0600);

	nsa_config_defaults(&c);
	cr_assert_eq(c.batch_key_len, 0, "no batch key by default");
	cr_assert_eq(
		nsa_config_set(&c, "store.batch_key_file=x", err, sizeof(err)),
		0);
	snprintf(c.batch_key_file, sizeof(c.batch_key_file), "%s", path);
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.batch_key_len, 16);
	cr_assert_eq(memcmp(c.batch_key, "0123456789abcdef", 16), 0);

	path = nst_write("bk", "0123456789abcdef\n", 0604);
	nsa_config_defaults(&c);
	snprintf(c.batch_key_file, sizeof(c.batch_key_file), "%s", path);
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "batch_key_file %s: permissions 0604 let others read it; "
		 "chmod 600",
		 path);
	cr_assert_str_eq(err, want);
	cr_assert_eq(c.batch_key_len, 0);
}

Test(config, missing_password_file_says_cannot_open)
{
	struct nsa_config c;
	char err[PATH_MAX + 300], want[PATH_MAX + 300];
	const char *path = nst_tmp("no-such-password");

	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "password_file %s: cannot open: No such file or directory",
		 path);
	cr_assert_str_eq(err, want);
}

Test(config, empty_password_file_is_refused)
{
	struct nsa_config c;
	char err[512];

	cr_assert_eq(nst_finish_with_password(&c, nst_write("pw", "", 0600),
					      err, sizeof(err)),
		     -1);
	cr_assert_not_null(strstr(err, ": empty"), "%s", err);
	cr_assert_eq(nst_finish_with_password(&c, nst_write("pw", "\n", 0600),
					      err, sizeof(err)),
		     -1);
	cr_assert_not_null(strstr(err, ": empty"), "%s", err);
}

Test(config, password_file_that_is_not_a_regular_file_is_refused)
{
	struct nsa_config c;
	char err[512];
	const char *path = nst_tmp("pwdir");

	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "not a regular file"), "%s", err);
}

Test(config, finish_refuses_more_workers_than_lanes_when_active)
{
	struct nsa_config c;
	char err[512];

	nsa_config_defaults(&c);
	c.workers = 3;
	c.lanes = 2;
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "[active] workers (3) exceeds [rings] lanes (2)");

	c.role = NSA_ROLE_STANDBY;
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), 0, "%s", err);
}

Test(config, finish_copies_gateway_and_epoch_to_the_synth)
{
	struct nsa_config c;
	char err[512];

	cr_assert_eq(nst_load(&c,
			      "[agent]\ngateway_id = 9\nepoch = 12\n"
			      "[source]\ntype = synth\n",
			      err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.synth_conf.gateway_id, 9);
	cr_assert_eq(c.synth_conf.epoch, 12);
}

Test(config, finish_needs_a_seed)
{
	struct nsa_config c;
	char err[512];

	nsa_config_defaults(&c);
	c.store.n_seeds = 0;
	cr_assert_eq(nsa_config_finish(&c, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "[store] seeds: no seed address given");
}

Test(config, print_output_loads_back_to_the_same_config)
{
	struct ngw_config a, b;
	char err[512];
	const char *path = nst_tmp("printed.ini");
	FILE *f;

	cr_assert_eq(nst_gw_load(&a, full_ini, err, sizeof(err)), 0, "%s", err);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	nsa_config_print(&a.agent, f);
	fclose(f);

	ngw_config_defaults(&b);
	cr_assert_eq(nsa_config_load(&b.agent, path, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(b.agent.batch_size, a.agent.batch_size);
	cr_assert_eq(b.agent.store.n_seeds, 3);
	cr_assert_str_eq(b.agent.eal_args, a.agent.eal_args);
	cr_assert_eq(b.gw.nat.pool_last, a.gw.nat.pool_last);
	cr_assert_str_eq(b.gw.control_socket, a.gw.control_socket);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0,
		     "printed configuration did not load back identically");

	/* The defaults round-trip too. */
	ngw_config_defaults(&a);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	nsa_config_print(&a.agent, f);
	fclose(f);
	memset(&b, 0xa5, sizeof(b));
	ngw_config_defaults(&b);
	b.agent.batch_size = 1;
	cr_assert_eq(nsa_config_load(&b.agent, path, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
}

Test(config, print_never_shows_the_password)
{
	struct nsa_config c;
	char err[512], *buf = NULL;
	size_t len = 0;
	const char *path = nst_write("pw", "hunter2\n", 0600);
	FILE *f;

	cr_assert_eq(nst_finish_with_password(&c, path, err, sizeof(err)), 0,
		     "%s", err);
	f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	nsa_config_print(&c, f);
	fclose(f);
	cr_assert_null(strstr(buf, "hunter2"), "%s", buf);
	cr_assert_not_null(strstr(buf, path), "password_file path is shown");
	cr_assert_not_null(strstr(buf, "[standby]\ntable_capacity = 2000000\n"),
			   "%s", buf);
	free(buf);
}

Test(config, ipv4_address_is_stored_in_host_byte_order)
{
	struct ngw_config c;

	nst_gw_load_ok(&c, "[gateway]\ninside_address = 10.1.2.3\n"
			   "next_hop = 255.255.255.254\n");
	cr_assert_eq(c.gw.nat.inside_addr, 0x0a010203);
	cr_assert_eq(c.gw.nat.next_hop, 0xfffffffe);
}

Test(config, empty_ipv4_value_means_not_set)
{
	struct ngw_config c;
	char err[512];

	ngw_config_defaults(&c);
	cr_assert_eq(nsa_config_set(&c.agent, "gateway.next_hop=10.0.0.1", err,
				    sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.gw.nat.next_hop, 0x0a000001);
	cr_assert_eq(
		nsa_config_set(&c.agent, "gateway.next_hop=", err, sizeof(err)),
		0, "%s", err);
	cr_assert_eq(c.gw.nat.next_hop, 0);
	nst_gw_load_ok(&c, "[gateway]\ninside_address =\npool =\n");
	cr_assert_eq(c.gw.nat.inside_addr, 0);
	cr_assert_eq(c.gw.nat.pool_first, 0);
	cr_assert_eq(c.gw.nat.pool_last, 0);
}

Test(config, bad_ipv4_address_is_rejected)
{
	nst_expect_gateway_value_error("inside_address", "10.0.0",
				       "'10.0.0' is not an IPv4 address");
	nst_expect_gateway_value_error("inside_address", "10.0.0.256",
				       "'10.0.0.256' is not an IPv4 address");
	nst_expect_gateway_value_error("next_hop", "010.0.0.1",
				       "'010.0.0.1' is not an IPv4 address");
	nst_expect_gateway_value_error(
		"next_hop", "gateway.example",
		"'gateway.example' is not an IPv4 address");
	nst_expect_gateway_value_error("next_hop", "10.0.0.1.5",
				       "'10.0.0.1.5' is not an IPv4 address");
	nst_expect_gateway_value_error("inside_address", "0.0.0.0",
				       "0.0.0.0 is not a usable address");
}

Test(config, pool_is_one_address_or_an_inclusive_range)
{
	struct ngw_config c;

	nst_gw_load_ok(&c, "[gateway]\npool = 198.51.100.7\n");
	cr_assert_eq(c.gw.nat.pool_first, 0xc6336407);
	cr_assert_eq(c.gw.nat.pool_last, 0xc6336407);

	nst_gw_load_ok(&c, "[gateway]\npool = 10.0.0.255-10.0.1.2\n");
	cr_assert_eq(c.gw.nat.pool_first, 0x0a0000ff);
	cr_assert_eq(c.gw.nat.pool_last, 0x0a000102);

	/* Exactly NSDP_NAT_MAX_POOL addresses. */
	nst_gw_load_ok(&c, "[gateway]\npool = 10.0.0.0-10.0.0.255\n");
	cr_assert_eq(c.gw.nat.pool_last - c.gw.nat.pool_first + 1,
		     NSDP_NAT_MAX_POOL);
}

Test(config, bad_pool_is_rejected)
{
	nst_expect_gateway_value_error("pool", "10.0.0.9-10.0.0.1",
				       "'10.0.0.9-10.0.0.1': range is empty");
	nst_expect_gateway_value_error(
		"pool", "10.0.0.0-10.0.1.0",
		"'10.0.0.0-10.0.1.0' holds 257 addresses, more than 256");
	nst_expect_gateway_value_error(
		"pool", "10.0.0.1-",
		"'10.0.0.1-' is not an IPv4 address or range");
	nst_expect_gateway_value_error("pool", "10.0.0.1-10.0.0.x",
				       "'10.0.0.x' is not an IPv4 address");
	nst_expect_gateway_value_error("pool", "10.0.0.1/24",
				       "'10.0.0.1/24' is not an IPv4 address");
}

Test(config, ports_is_a_range_lo_hi)
{
	struct ngw_config c;

	nst_gw_load_ok(&c, "[gateway]\nports = 40000 - 40009\n");
	cr_assert_eq(c.gw.nat.port_min, 40000);
	cr_assert_eq(c.gw.nat.port_max, 40009);
	nst_gw_load_ok(&c, "[gateway]\nports = 7-7\n");
	cr_assert_eq(c.gw.nat.port_min, 7);
	cr_assert_eq(c.gw.nat.port_max, 7);
}

Test(config, bad_ports_are_rejected)
{
	nst_expect_gateway_value_error(
		"ports", "1024", "'1024' is not a range LO-HI (1..65535)");
	nst_expect_gateway_value_error("ports", "2000-1000",
				       "'2000-1000': range is empty");
	nst_expect_gateway_value_error("ports", "0-1000",
				       "0 is out of range 1..65535");
	nst_expect_gateway_value_error("ports", "1000-65536",
				       "65536 is out of range 1..65535");
	nst_expect_gateway_value_error("ports", "low-high",
				       "'low' is not a number");
	nst_expect_gateway_value_error("ports", "1-2-3",
				       "'2-3' is not a number");
}

Test(config, gateway_numbers_are_range_checked)
{
	nst_expect_gateway_value_error("tcp_syn_timeout", "0",
				       "0 is out of range 1..604800");
	nst_expect_gateway_value_error("tcp_established_timeout", "604801",
				       "604801 is out of range 1..604800");
	nst_expect_gateway_value_error("tcp_closing_timeout", "0",
				       "0 is out of range");
	nst_expect_gateway_value_error("udp_timeout", "0", "0 is out of range");
	nst_expect_gateway_value_error("icmp_timeout", "604801",
				       "604801 is out of range");
	nst_expect_gateway_value_error("idle_sleep_us", "100001",
				       "100001 is out of range 0..100000");
	nst_expect_gateway_value_error("rx_descriptors", "63",
				       "63 is out of range 64..16384");
	nst_expect_gateway_value_error("tx_descriptors", "16385",
				       "16385 is out of range 64..16384");
	nst_expect_gateway_value_error("mbufs", "1022",
				       "1022 is out of range 1023..1048575");
	nst_expect_gateway_value_error("mbufs", "1048576",
				       "1048576 is out of range");
}

Test(config, gateway_agent_is_threads_or_external)
{
	struct ngw_config c;

	nst_gw_load_ok(&c, "[gateway]\nagent = threads\n");
	cr_assert_eq(c.gw.agent, NGW_AGENT_THREADS);
	nst_expect_gateway_value_error(
		"agent", "process", "'process' is not one of threads|external");
}

Test(config, gateway_port_name_longer_than_the_field_is_rejected)
{
	char text[512];

	snprintf(text, sizeof(text), "[gateway]\ninside_port = %0130d\n", 0);
	nst_expect_error(text, "agent.ini:2: [gateway] inside_port: value is "
			       "longer than 127 bytes");
}

Test(config, set_reaches_gateway_keys_and_keeps_a_rejected_value_out)
{
	struct ngw_config c;
	char err[512];

	ngw_config_defaults(&c);
	cr_assert_eq(nsa_config_set(&c.agent,
				    "gateway.pool = 10.9.0.1 - 10.9.0.4", err,
				    sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.gw.nat.pool_first, 0x0a090001);
	cr_assert_eq(c.gw.nat.pool_last, 0x0a090004);
	cr_assert_eq(nsa_config_set(&c.agent, "gateway.pool=10.9.0.4-10.9.0.1",
				    err, sizeof(err)),
		     -1);
	cr_assert_str_eq(err, "--set gateway.pool: '10.9.0.4-10.9.0.1': range "
			      "is empty (first after last)");
	cr_assert_eq(c.gw.nat.pool_first, 0x0a090001, "pool left untouched");
	cr_assert_eq(c.gw.nat.pool_last, 0x0a090004, "pool left untouched");
	cr_assert_eq(nsa_config_set(&c.agent, "gateway.ports=5000-4000", err,
				    sizeof(err)),
		     -1);
	cr_assert_eq(c.gw.nat.port_min, 1024, "ports left untouched");
	cr_assert_eq(c.gw.nat.port_max, 65535, "ports left untouched");
	cr_assert_eq(nsa_config_set(&c.agent, "gateway.inside_address=1.2.3",
				    err, sizeof(err)),
		     -1);
	cr_assert_str_eq(err, "--set gateway.inside_address: '1.2.3' is not "
			      "an IPv4 address");
	cr_assert_eq(c.gw.nat.inside_addr, 0);
}

Test(config, unknown_gateway_key_lists_the_known_ones)
{
	nst_expect_gateway_value_error(
		"pool_size", "4",
		"unknown key (known: inside_port, outside_port, inside_address, pool, next_hop, ports, tcp_syn_timeout, tcp_established_timeout, tcp_closing_timeout, udp_timeout, icmp_timeout, control_socket, agent, idle_sleep_us, fence_check_ms, rx_descriptors, tx_descriptors, mbufs)");
}

Test(config, finish_fills_the_nat_conf_from_other_keys)
{
	struct ngw_config c;
	char err[512];

	nst_gw_load_ok(&c, "[agent]\ngateway_id = 77\n"
			   "[standby]\ntable_capacity = 4096\n"
			   "[gateway]\ntcp_syn_timeout = 3\n"
			   "tcp_established_timeout = 604800\n"
			   "tcp_closing_timeout = 5\nudp_timeout = 6\n"
			   "icmp_timeout = 7\n");
	cr_assert_eq(nsa_config_finish(&c.agent, err, sizeof(err)), 0, "%s",
		     err);
	nst_expect_nat_derived(&c,
			       (struct nst_nat_derived){3000, 604800000u, 5000,
							6000, 7000, 77, 4096});
}

Test(config, finish_does_not_require_gateway_keys)
{
	struct ngw_config c;
	char err[512] = "";

	ngw_config_defaults(&c);
	c.agent.lanes = 4;
	c.agent.workers = 2;
	cr_assert_eq(nsa_config_finish(&c.agent, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(ngw_config_check(&c, err, sizeof(err)), -1);
}

static const char gateway_ini[] = "[gateway]\n"
				  "inside_port = net_af_packet0\n"
				  "outside_port = net_af_packet1\n"
				  "inside_address = 192.168.1.1\n"
				  "pool = 198.51.100.10-198.51.100.13\n"
				  "next_hop = 198.51.100.1\n";

/* gateway_ini, finished; the gateway check is the caller's. */
static void nst_gateway_config(struct ngw_config *c)
{
	char err[512];

	cr_assert_eq(nst_gw_load(c, gateway_ini, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(nsa_config_finish(&c->agent, err, sizeof(err)), 0, "%s",
		     err);
}

/* Expect nsa_config_gateway_check to refuse c with exactly want. */
static void nst_expect_gateway_error(const struct ngw_config *c,
				     const char *want)
{
	char err[512] = "";

	cr_assert_eq(ngw_config_check(c, err, sizeof(err)), -1,
		     "accepted, expected \"%s\"", want);
	cr_assert_str_eq(err, want);
}

/* gateway_ini with --set assignment, refused by the check with exactly
 * want. */
static void nst_expect_set_gateway_error(const char *assignment,
					 const char *want)
{
	struct ngw_config c;
	char err[512];

	nst_gateway_config(&c);
	cr_assert_eq(nsa_config_set(&c.agent, assignment, err, sizeof(err)), 0,
		     "%s", err);
	nst_expect_gateway_error(&c, want);
}

/* gateway_ini with the pool and the port range set in code, refused by
 * the check with exactly want. */
static void nst_expect_nat_gateway_error(uint32_t pool_first,
					 uint32_t pool_last, uint16_t port_min,
					 uint16_t port_max, const char *want)
{
	struct ngw_config c;

	nst_gateway_config(&c);
	c.gw.nat.pool_first = pool_first;
	c.gw.nat.pool_last = pool_last;
	c.gw.nat.port_min = port_min;
	c.gw.nat.port_max = port_max;
	nst_expect_gateway_error(&c, want);
}

Test(config, gateway_check_accepts_a_complete_gateway)
{
	struct ngw_config c;
	char err[512] = "";

	nst_gateway_config(&c);
	cr_assert_eq(ngw_config_check(&c, err, sizeof(err)), 0, "%s", err);

	/* next_hop is optional: destinations on-link. */
	c.gw.nat.next_hop = 0;
	cr_assert_eq(ngw_config_check(&c, err, sizeof(err)), 0, "%s", err);
}

Test(config, gateway_check_needs_both_ports_and_different_ones)
{
	struct ngw_config c;

	nst_gateway_config(&c);
	c.gw.inside_port[0] = '\0';
	nst_expect_gateway_error(&c, "[gateway] inside_port: not set");

	nst_gateway_config(&c);
	c.gw.outside_port[0] = '\0';
	nst_expect_gateway_error(&c, "[gateway] outside_port: not set");

	nst_gateway_config(&c);
	strcpy(c.gw.outside_port, c.gw.inside_port);
	nst_expect_gateway_error(&c, "[gateway] outside_port: net_af_packet0 "
				     "is also inside_port");
}

Test(config, gateway_check_needs_inside_address_and_pool)
{
	struct ngw_config c;

	nst_gateway_config(&c);
	c.gw.nat.inside_addr = 0;
	nst_expect_gateway_error(&c, "[gateway] inside_address: not set");

	nst_gateway_config(&c);
	c.gw.nat.pool_first = c.gw.nat.pool_last = 0;
	nst_expect_gateway_error(&c, "[gateway] pool: not set");
}

Test(config, gateway_check_refuses_a_bad_pool_set_in_code)
{
	nst_expect_nat_gateway_error(
		0x0a000009, 0x0a000001, 1024, 65535,
		"[gateway] pool: range is empty (10.0.0.9 after 10.0.0.1)");
	nst_expect_nat_gateway_error(0x0a000000, 0x0a000100, 1024, 65535,
				     "[gateway] pool: 10.0.0.0-10.0.1.0 holds "
				     "more than 256 addresses");
}

Test(config, gateway_check_refuses_an_inside_address_in_the_pool)
{
	nst_expect_set_gateway_error("gateway.inside_address=198.51.100.13",
				     "[gateway] inside_address: 198.51.100.13 "
				     "is in the pool "
				     "198.51.100.10-198.51.100.13");
}

Test(config, gateway_check_refuses_a_next_hop_in_the_pool)
{
	nst_expect_set_gateway_error("gateway.next_hop=198.51.100.10",
				     "[gateway] next_hop: 198.51.100.10 is in "
				     "the pool 198.51.100.10-198.51.100.13");
}

Test(config, gateway_check_refuses_an_empty_port_range_set_in_code)
{
	const uint32_t first = 0xc633640a, last = 0xc633640d; /* gateway_ini */

	nst_expect_nat_gateway_error(
		first, last, 2000, 1999,
		"[gateway] ports: range 2000-1999 is empty or starts at 0");
	nst_expect_nat_gateway_error(
		first, last, 0, 65535,
		"[gateway] ports: range 0-65535 is empty or starts at 0");
}

Test(config, gateway_check_needs_one_lane)
{
	nst_expect_set_gateway_error("rings.lanes=2",
				     "[rings] lanes: natsync-gateway forwards "
				     "on one lcore into one lane; set lanes = "
				     "1 (not 2)");
}

Test(config, gateway_example_file_loads_and_passes_the_gateway_check)
{
	struct ngw_config c;
	char err[1024] = "";
	/* Relative to NATSYNC_SOURCE_ROOT (meson test), else to ".". */
	const char *path = nst_src("deploy/gateway.example.ini");

	ngw_config_defaults(&c);
	cr_assert_eq(nsa_config_load(&c.agent, path, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(nsa_config_finish(&c.agent, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(ngw_config_check(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.gw.agent, NGW_AGENT_THREADS);
	cr_assert_not_null(strstr(c.agent.eal_args, "--no-huge --no-shconf"),
			   "in-memory run as docs/programs.md says: %s",
			   c.agent.eal_args);
}

/* Print c, then load the printout over fresh defaults into out; *text
 * gets the printout (free it). */
static void nst_print_and_reload(const struct ngw_config *c,
				 struct ngw_config *out, char **text)
{
	char err[512];
	const char *path = nst_tmp("printed.ini");
	size_t len = 0;
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	nsa_config_print(&c->agent, f);
	fclose(f);
	f = open_memstream(text, &len);
	cr_assert_not_null(f);
	nsa_config_print(&c->agent, f);
	fclose(f);
	ngw_config_defaults(out);
	cr_assert_eq(nsa_config_load(&out->agent, path, err, sizeof(err)), 0,
		     "%s\n%s", err, *text);
}

Test(config, print_writes_gateway_addresses_back_in_loadable_form)
{
	struct ngw_config a, b;
	char err[512], *text = NULL;

	/* One-address pool, no next hop. */
	cr_assert_eq(nst_gw_load(&a,
				 "[gateway]\ninside_address = 10.0.0.1\n"
				 "pool = 10.0.1.5\nports = 30000-30000\n",
				 err, sizeof(err)),
		     0, "%s", err);
	nst_print_and_reload(&a, &b, &text);
	cr_assert_not_null(strstr(text, "\ninside_address = 10.0.0.1\n"
					"pool = 10.0.1.5\n"
					"next_hop =\n"
					"ports = 30000-30000\n"),
			   "%s", text);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "%s", text);
	free(text);

	/* Defaults: every address unset prints as an empty value. */
	ngw_config_defaults(&a);
	nst_print_and_reload(&a, &b, &text);
	cr_assert_not_null(strstr(text, "\n[gateway]\n"
					"inside_port =\n"
					"outside_port =\n"
					"inside_address =\n"
					"pool =\n"
					"next_hop =\n"
					"ports = 1024-65535\n"),
			   "%s", text);
	cr_assert_not_null(strstr(text, "\nagent = threads\n"), "%s", text);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "%s", text);
	free(text);

	/* A range prints as first-last. */
	cr_assert_eq(nst_gw_load(&a, gateway_ini, err, sizeof(err)), 0, "%s",
		     err);
	nst_print_and_reload(&a, &b, &text);
	cr_assert_not_null(
		strstr(text, "\npool = 198.51.100.10-198.51.100.13\n"), "%s",
		text);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "%s", text);
	free(text);
}

Test(config, configuration_doc_is_what_the_key_tables_generate)
{
	const char *path = nst_src("docs/configuration.md");
	char *doc = NULL, *want = NULL, *from;
	size_t doc_len = 0, want_len = 0;
	FILE *f = fopen(path, "r");
	FILE *out = open_memstream(&want, &want_len);

	cr_assert_not_null(f, "%s", path);
	cr_assert_not_null(out);
	cr_assert_eq(getdelim(&doc, &doc_len, '\0', f) > 0, 1, "%s", path);
	fclose(f);
	nsa_config_reference(&ngw_config_keys, out);
	fclose(out);
	from = strstr(doc, NSA_CONFIG_REFERENCE_MARKER);
	cr_assert_not_null(from, "%s has no marker line", path);
	cr_assert_str_eq(from, want,
			 "%s differs from natsync-agent --config-reference: "
			 "regenerate it (see the file)",
			 path);
	free(doc);
	free(want);
}

Test(config, every_key_has_help)
{
	const struct nsa_key_table *tables[] = {&nsa_config_keys,
						&ngw_config_keys};

	for (size_t j = 0; j < 2; j++)
		for (size_t i = 0; i < tables[j]->n_keys; i++) {
			const struct nsa_key *k = &tables[j]->keys[i];

			cr_assert(k->help && k->help[0] &&
					  !strchr(k->help, '|'),
				  "[%s] %s: help missing or holds '|'",
				  k->section, k->key);
		}
}

/* The kernel gateway pair's examples (deploy/kernel-*.example.ini), as
 * keepalived-kernel-notify.sh starts them: both roles load and pass the
 * checks, the active takes its epoch from the store and captures from
 * the kernel into one lane, the standby commits into conntrack, and both
 * are the same gateway pair. */
static void nst_load_example(struct nsa_config *c, const char *rel)
{
	char err[1024] = "";

	nsa_config_defaults(c);
	cr_assert_eq(nsa_config_load(c, nst_src(rel), err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(nsa_config_finish(c, err, sizeof(err)), 0, "%s", err);
}

Test(config, kernel_pair_example_files_load_and_pass_the_checks)
{
	static struct nsa_config a, s;

	nst_load_example(&a, "deploy/kernel-active.example.ini");
	nst_load_example(&s, "deploy/kernel-standby.example.ini");
	cr_assert_eq(a.role, NSA_ROLE_ACTIVE);
	cr_assert_eq(a.source_type, NSA_SOURCE_KERNEL);
	cr_assert_eq(a.epoch, 0, "a new epoch from the store at every start");
	cr_assert_eq(a.lanes, 1);
	cr_assert_eq(a.ksrc_conf.ignore_mark, 0,
		     "committed entries are captured again after a takeover");
	cr_assert_eq(s.role, NSA_ROLE_STANDBY);
	cr_assert_eq(s.commit, NSA_COMMIT_CONNTRACK);
	cr_assert_eq(a.gateway_id, s.gateway_id);
}

/* gateway_ini with IPv6 lines (NAT64's IPv6 table included), finished:
 * the gateway check's error, or "" when it accepts. */
static const char *nst_gateway6_check(struct ngw_config *c, const char *lines,
				      char *err, size_t errlen)
{
	char text[1024];

	snprintf(text, sizeof(text), "[standby]\ntable_capacity_v6 = 64\n%s%s",
		 gateway_ini, lines);
	cr_assert_eq(nst_gw_load(c, text, err, errlen), 0, "%s", err);
	cr_assert_eq(nsa_config_finish(&c->agent, err, errlen), 0, "%s", err);
	err[0] = '\0';
	ngw_config_check(c, err, errlen);
	return err;
}

Test(config, gateway_check_takes_nat66_only_beside_nat64_with_good_addresses)
{
	static const uint8_t out6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10};
	static const uint8_t hop6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
	static const struct {
		const char *lines, *want;
	} cases[] = {
		{"outside_address6 = 2001:db8::10\n",
		 "[gateway] outside_address6: NAT66 needs inside_address6 (the "
		 "inside hosts' IPv6 router); set it"},
		{"inside_address6 = fd00::1\noutside_address6 = 2001:db8::zz\n",
		 "[gateway] outside_address6: 2001:db8::zz is not an IPv6 "
		 "address"},
		{"inside_address6 = fd00::1\noutside_address6 = fd00::1\n",
		 "[gateway] outside_address6: outside_addr6 is inside_addr6"},
		{"inside_address6 = fd00::1\noutside_address6 = ff02::1\n",
		 "[gateway] outside_address6: outside_addr6 is not a global "
		 "unicast address"},
		{"inside_address6 = fd00::1\noutside_address6 = 2001:db8::10\n"
		 "next_hop6 = router\n",
		 "[gateway] next_hop6: router is not an IPv6 address"},
	};
	struct ngw_config c;
	char err[512];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_str_eq(nst_gateway6_check(&c, cases[i].lines, err,
						    sizeof(err)),
				 cases[i].want);
	/* both set: accepted, and the NAT's addresses follow */
	cr_assert_str_eq(nst_gateway6_check(&c,
					    "inside_address6 = fd00::1\n"
					    "outside_address6 = 2001:db8::10\n"
					    "next_hop6 = 2001:db8::1\n",
					    err, sizeof(err)),
			 "");
	cr_assert(memcmp(c.gw.nat.outside_addr6, out6, 16) == 0);
	cr_assert(memcmp(c.gw.nat.next_hop6, hop6, 16) == 0);
	/* unset: NAT66 off */
	cr_assert_str_eq(nst_gateway6_check(&c, "inside_address6 = fd00::1\n",
					    err, sizeof(err)),
			 "");
	cr_assert(c.gw.nat.outside_addr6[0] == 0 &&
		  c.gw.nat.outside_addr6[15] == 0);
}
