/*
 * test_config.c - the agent's configuration as a specification: the
 * documented defaults, every key of a full file, the error for each kind of
 * bad input (naming file, line, section and key), --set, the password file
 * rules and a print/load round trip.
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
#include "nsa_config.h"
#include "nsa_log.h"

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

/* Load text, expect failure with an err containing want. */
static void nst_expect_error(const char *text, const char *want)
{
	struct nsa_config c;
	char err[1024];

	cr_assert_eq(nst_load(&c, text, err, sizeof(err)), -1, "accepted: %s",
		     text);
	cr_assert_not_null(strstr(err, want), "err \"%s\" lacks \"%s\"", err,
			   want);
	cr_assert_not_null(strstr(err, tmpdir), "err \"%s\" lacks the path",
			   err);
}

Test(config, defaults_are_as_documented)
{
	struct nsa_config c;

	nsa_config_defaults(&c);
	cr_assert_eq(c.role, NSA_ROLE_ACTIVE);
	cr_assert_eq(c.gateway_id, 1);
	cr_assert_eq(c.epoch, 1);
	cr_assert_eq(c.progress_ms, 1000);
	cr_assert_str_eq(
		c.eal_args,
		"--no-huge --no-shconf -m 512 --no-pci --no-telemetry");
	cr_assert_eq(c.verbosity, NSA_LOG_INFO);

	cr_assert_eq(c.store.n_seeds, 1);
	cr_assert_str_eq(c.store.seeds[0].host, "127.0.0.1");
	cr_assert_eq(c.store.seeds[0].port, 7000);
	cr_assert_str_eq(c.store.user, "");
	cr_assert_str_eq(c.store.password, "");
	cr_assert_str_eq(c.password_file, "");
	cr_assert_eq(c.store.connect_timeout_ms, 1000);
	cr_assert_eq(c.store.publish, NSA_PUBLISH_AUTO);

	cr_assert_eq(c.workers, 1);
	cr_assert_eq(c.batch_size, 256);
	cr_assert_eq(c.flush_us, 200);
	cr_assert_eq(c.max_inflight, 8);

	cr_assert_eq(c.lanes, 1);
	cr_assert_eq(c.ring_size, 65536);
	cr_assert_eq(c.attach, 0);

	cr_assert_eq(c.synth, 0);
	cr_assert_eq(c.synth_conf.flows, 100000);
	cr_assert_eq(c.synth_conf.events, 1000000);
	cr_assert_eq(c.synth_conf.rate, 0);
	cr_assert_eq(c.synth_conf.seed, 1);
	cr_assert_eq(c.synth_conf.refresh_pct, 60);
	cr_assert_eq(c.synth_conf.timeout_ms, 300000);
	cr_assert_eq(c.synth_conf.wait_when_full, 1);
	cr_assert_eq(c.synth_conf.gateway_id, 1);
	cr_assert_eq(c.synth_conf.epoch, 1);
	cr_assert_str_eq(c.source_dump, "");

	cr_assert_eq(c.table_capacity, 2000000);
	cr_assert_str_eq(c.table_dump, "");
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
	"dump = /tmp/standby.tbl\n";

Test(config, full_file_loads_every_key)
{
	struct nsa_config c;
	char err[512];

	cr_assert_eq(nst_load(&c, full_ini, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.role, NSA_ROLE_STANDBY);
	cr_assert_eq(c.gateway_id, 7);
	cr_assert_eq(c.epoch, 42);
	cr_assert_eq(c.progress_ms, 0);
	cr_assert_str_eq(c.eal_args, "--no-huge -m 256");
	cr_assert_eq(c.verbosity, NSA_LOG_DEBUG);

	cr_assert_eq(c.store.n_seeds, 3);
	cr_assert_str_eq(c.store.seeds[0].host, "10.0.0.1");
	cr_assert_eq(c.store.seeds[0].port, 7001);
	cr_assert_str_eq(c.store.seeds[1].host, "redis-b");
	cr_assert_eq(c.store.seeds[1].port, 7002);
	cr_assert_str_eq(c.store.seeds[2].host, "localhost");
	cr_assert_eq(c.store.seeds[2].port, 6379);
	cr_assert_str_eq(c.store.user, "natsync");
	cr_assert_str_eq(c.password_file, "/etc/natsync/password");
	cr_assert_str_eq(c.store.password, "", "the file is not read yet");
	cr_assert_eq(c.store.connect_timeout_ms, 2500);
	cr_assert_eq(c.store.publish, NSA_PUBLISH_CLASSIC);

	cr_assert_eq(c.workers, 4);
	cr_assert_eq(c.batch_size, NS_BATCH_MAX_RECORDS);
	cr_assert_eq(c.flush_us, 0);
	cr_assert_eq(c.max_inflight, 1024);

	cr_assert_eq(c.lanes, 4);
	cr_assert_eq(c.ring_size, 1024);
	cr_assert_eq(c.attach, 1);

	cr_assert_eq(c.synth, 1);
	cr_assert_eq(c.synth_conf.flows, 5000);
	cr_assert_eq(c.synth_conf.events, UINT64_MAX);
	cr_assert_eq(c.synth_conf.rate, 200000);
	cr_assert_eq(c.synth_conf.seed, 99);
	cr_assert_eq(c.synth_conf.refresh_pct, 0);
	cr_assert_eq(c.synth_conf.timeout_ms, 86400000);
	cr_assert_eq(c.synth_conf.wait_when_full, 0);
	cr_assert_str_eq(c.source_dump, "/tmp/source.tbl");

	cr_assert_eq(c.table_capacity, 1024);
	cr_assert_str_eq(c.table_dump, "/tmp/standby.tbl");
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
			 "workers, batch_size, flush_us, max_inflight)");
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
	struct nsa_config a, b;
	char err[512];
	const char *path = nst_tmp("printed.ini");
	FILE *f;

	cr_assert_eq(nst_load(&a, full_ini, err, sizeof(err)), 0, "%s", err);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	nsa_config_print(&a, f);
	fclose(f);

	nsa_config_defaults(&b);
	cr_assert_eq(nsa_config_load(&b, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(b.batch_size, a.batch_size);
	cr_assert_eq(b.store.n_seeds, 3);
	cr_assert_str_eq(b.eal_args, a.eal_args);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0,
		     "printed configuration did not load back identically");

	/* The defaults round-trip too. */
	nsa_config_defaults(&a);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	nsa_config_print(&a, f);
	fclose(f);
	memset(&b, 0xa5, sizeof(b));
	nsa_config_defaults(&b);
	b.batch_size = 1;
	cr_assert_eq(nsa_config_load(&b, path, err, sizeof(err)), 0, "%s", err);
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
