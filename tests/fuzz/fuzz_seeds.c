/*
 * fuzz_seeds.c - writes the seed corpus of one fuzz target, made with the
 * real encoders, so that the fuzzers start from inputs natsync accepts
 * instead of having to discover the formats byte by byte.
 *
 *   fuzz_seeds record|batch|key|config OUTDIR [CONFIG-FILE...]
 *
 * Every seed is checked before it is written (a record or batch decodes, a
 * key parses, a configuration loads): a seed the decoders refuse means the
 * encoders and decoders disagree, and the program fails. The config seeds
 * are the defaults' printout, the files demo.sh writes, a file using every
 * section, some --set lines, and copies of the CONFIG-FILEs given (the
 * examples in deploy/). Nothing here is committed: the corpus is rebuilt
 * each run under the build directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "ngw_config.h"
#include "nsa_config.h"
#include "nsa_log.h"

#define IP(a, b, c, d) \
	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static const char *outdir;
static unsigned int n_seeds;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_seeds: %s\n", what);
	exit(1);
}

static void write_seed(const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	f = fopen(path, "wb");
	if (!f || (len && fwrite(buf, 1, len, f) != len) || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	n_seeds++;
}

static struct ns_session session(unsigned int i)
{
	static const uint8_t protos[] = {6, 17, 1};
	struct ns_session s;

	memset(&s, 0, sizeof(s));
	s.version = NS_RECORD_VERSION;
	s.family = NS_FAMILY_IPV4;
	s.proto = protos[i % 3];
	s.event = (uint8_t)(NS_EV_CREATE + i % 3);
	s.gateway_id = 7;
	s.epoch = 3 + i / 7;
	s.timeout_ms = 30000 + i;
	s.timestamp_ns = 1700000000123456789ull + i;
	s.orig = (struct ns_tuple){IP(10, 0, (i >> 8) & 0xff, i & 0xff),
				   IP(93, 184, 216, 34), (uint16_t)(40000 + i),
				   s.proto == 1 ? 0 : 443};
	s.xlat = (struct ns_tuple){IP(198, 51, 100, 7), s.orig.daddr,
				   (uint16_t)(1025 + i), s.orig.dport};
	return s;
}

/* Session i as IPv4 (i % 3 == 0), NAT66 (1) or NAT64 (2, the prefix
 * length cycling through those RFC 6052 allows). */
static struct ns_rec session_rec(unsigned int i)
{
	static const uint8_t lens[] = {96, 32, 40, 48, 56, 64};
	struct ns_rec r;
	unsigned int at;

	memset(&r, 0, sizeof(r));
	r.s = session(i);
	if (i % 3 == 0)
		return r;
	r.s.family = i % 3 == 1 ? NS_FAMILY_NAT66 : NS_FAMILY_NAT64;
	r.s.orig.saddr = r.s.orig.daddr = 0;
	r.v6.orig_saddr[0] = 0x20;
	r.v6.orig_saddr[1] = 0x01;
	r.v6.orig_saddr[15] = (uint8_t)i;
	if (r.s.family == NS_FAMILY_NAT66) {
		r.s.xlat.saddr = r.s.xlat.daddr = 0;
		r.v6.orig_daddr[0] = 0x26;
		r.v6.orig_daddr[15] = 0x22;
		memcpy(r.v6.xlat_daddr, r.v6.orig_daddr, 16);
		r.v6.xlat_saddr[0] = 0x20;
		r.v6.xlat_saddr[15] = 7;
		return r;
	}
	r.v6.prefix_len = lens[(i / 3) % 6];
	r.v6.orig_daddr[0] = 0x00;
	r.v6.orig_daddr[1] = 0x64;
	r.v6.orig_daddr[2] = 0xff;
	r.v6.orig_daddr[3] = 0x9b;
	for (unsigned int b = 0; b < 4; b++) {
		at = r.v6.prefix_len / 8u + b;
		if (r.v6.prefix_len < 96 && at >= 8)
			at++;
		r.v6.orig_daddr[at] = (uint8_t)(r.s.xlat.daddr >> (24 - 8 * b));
	}
	return r;
}

/* Extremes: every field at 0 or at its largest value. */
static struct ns_session extreme(int high)
{
	struct ns_session s;

	memset(&s, high ? 0xff : 0, sizeof(s));
	memset(s.reserved, 0, sizeof(s.reserved));
	s.version = NS_RECORD_VERSION;
	s.family = NS_FAMILY_IPV4;
	s.proto = high ? 255 : 1;
	s.event = high ? NS_EV_DELETE : NS_EV_CREATE;
	return s;
}

static int encode(const struct ns_session *s, uint8_t *buf)
{
	struct ns_rec back;
	int n = ns_record_encode(s, buf, NS_RECORD_MAX_LEN);

	if (n <= 0 || ns_record_decode_rec(buf, (size_t)n, &back) != n ||
	    !ns_session_equal_state(s, &back.s))
		die("a record does not round-trip");
	return n;
}

static void record_seeds(void)
{
	uint8_t wire[NS_RECORD_MAX_LEN];
	struct ns_session s;
	char name[32];

	for (unsigned int i = 0; i < 6; i++) {
		s = session(i);
		snprintf(name, sizeof(name), "record-%u", i);
		write_seed(name, wire, (size_t)encode(&s, wire));
	}
	s = extreme(0);
	write_seed("record-low", wire, (size_t)encode(&s, wire));
	s = extreme(1);
	write_seed("record-high", wire, (size_t)encode(&s, wire));
	for (unsigned int i = 1; i < 18; i += i % 3 == 1 ? 1 : 2) {
		struct ns_rec r = session_rec(i);

		snprintf(name, sizeof(name), "record-%s-%u",
			 i % 3 == 1 ? "nat66" : "nat64", i);
		write_seed(name, wire, (size_t)encode(&r.s, wire));
	}
	/* The in-memory form, for the target's encoder path (two lines:
	 * the target reads a struct ns_rec). */
	for (unsigned int i = 0; i < 3; i++) {
		struct ns_rec r = session_rec(i + 3);

		snprintf(name, sizeof(name), "session-struct-%u", i);
		write_seed(name, &r, sizeof(r));
	}
}

/* Whether batch seeds mix IPv4, NAT66 and NAT64 records. */
static int batch_mixed;

/* The key fuzz_batch signs and verifies with. */
#define FUZZ_BATCH_KEY "natsync fuzz batch key"

static void batch_seed_v(const char *name, unsigned int count, uint64_t seq,
			 int sign, uint8_t version)
{
	size_t len = NS_BATCH_HDR_LEN + (size_t)count * NS_RECORD_MAX_LEN +
		     NS_BATCH_MAC_LEN;
	uint8_t *buf = malloc(len);
	struct ns_batch_hdr h = {.publisher_id = 0x01020304,
				 .gateway_id = 7,
				 .epoch = 3,
				 .count = (uint16_t)count,
				 .flags = sign ? NS_BATCH_F_HMAC : 0,
				 .version = version,
				 .seq = seq};
	const size_t hdr_len = ns_batch_hdr_len(version);
	struct ns_batch_hdr back;
	const uint8_t *body;
	size_t off = hdr_len;

	if (!buf)
		die("out of memory");
	for (unsigned int i = 0; i < count; i++) {
		struct ns_rec r = session_rec(batch_mixed ? i : 3 * i);

		off += (size_t)encode(&r.s, buf + off);
	}
	h.body_len = (uint32_t)(off - hdr_len);
	if (version != NS_BATCH_V1) {
		h.channel_slot = (uint16_t)(seq % 16384);
		h.sent_ns = 1700000000123456789ull + seq;
	}
	ns_batch_hdr_encode(&h, buf);
	if (sign) {
		if (ns_batch_mac((const uint8_t *)FUZZ_BATCH_KEY,
				 strlen(FUZZ_BATCH_KEY), buf, off,
				 buf + off) != 0)
			die("cannot sign a batch");
		off += NS_BATCH_MAC_LEN;
		if (ns_batch_verify(buf, off, (const uint8_t *)FUZZ_BATCH_KEY,
				    strlen(FUZZ_BATCH_KEY)) != 0)
			die("a signed batch does not verify");
	}
	if (ns_batch_decode(buf, off, &back, &body) != 0 ||
	    back.count != count || back.seq != seq)
		die("a batch does not decode");
	write_seed(name, buf, off);
	free(buf);
}

static void batch_seed(const char *name, unsigned int count, uint64_t seq,
		       int sign)
{
	batch_seed_v(name, count, seq, sign, NS_BATCH_VERSION);
}

static void batch_seeds(void)
{
	batch_seed_v("batch-v1-3", 3, 7, 0, NS_BATCH_V1);
	batch_seed_v("batch-v1-signed-2", 2, 8, 1, NS_BATCH_V1);
	batch_seed("batch-empty", 0, 1, 0);
	batch_seed("batch-1", 1, 2, 0);
	batch_seed("batch-3", 3, UINT64_MAX, 0);
	batch_seed("batch-64", 64, 1ull << 32, 0);
	batch_seed("batch-signed-empty", 0, 1, 1);
	batch_seed("batch-signed-5", 5, 9, 1);
	/* The largest batch of IPv4 records. */
	batch_seed("batch-max-signed", NS_BATCH_MAX_RECORDS, 5, 1);
	batch_mixed = 1;
	batch_seed("batch-mixed-7", 7, 11, 0);
	batch_seed("batch-mixed-signed-30", 30, 12, 1);
	batch_seed_v("batch-v1-mixed-4", 4, 13, 0, NS_BATCH_V1);
	batch_mixed = 0;
}

static void key_seeds(void)
{
	uint8_t key[NS_KEY_LEN], proto;
	char channel[NS_CHANNEL_MAX], name[32];
	struct ns_tuple t;
	static const uint16_t slots[] = {0, 1, 5474, 12182, 16383};

	for (unsigned int i = 0; i < 4; i++) {
		struct ns_session s = session(i);

		ns_key_build(s.proto, &s.orig, key);
		if (ns_key_parse(key, sizeof(key), &proto, &t) != 0)
			die("a key does not parse");
		snprintf(name, sizeof(name), "key-%u", i);
		write_seed(name, key, sizeof(key));
	}
	/* A key whose bytes hold a hash tag: '{' is 0x7b, '}' is 0x7d. */
	t = (struct ns_tuple){IP(10, 0x7b, 1, 0x7d), IP(0x7b, 0x7d, 0, 1),
			      0x7b7d, 0x7d7b};
	ns_key_build(17, &t, key);
	write_seed("key-braces", key, sizeof(key));
	for (unsigned int i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		int n = ns_channel_for_slot(slots[i], channel);

		if (n <= 0 || ns_key_slot(channel, (size_t)n) != slots[i])
			die("a channel is not in its slot");
		snprintf(name, sizeof(name), "channel-%u", slots[i]);
		write_seed(name, channel, (size_t)n);
	}
	write_seed("tag-user", "{user1000}.following", 20);
	for (unsigned int i = 1; i < 3; i++) {
		struct ns_rec r = session_rec(i);
		uint8_t k6[NS_KEY_MAX];

		if (ns_key_of(&r.s, k6) != NS_KEY_V6_LEN)
			die("an IPv6 key is not 40 bytes");
		snprintf(name, sizeof(name), "key-v6-%u", i);
		write_seed(name, k6, NS_KEY_V6_LEN);
	}
}

static void config_seed(const char *name, const char *text)
{
	struct ngw_config c;
	char path[4096], err[1024];

	write_seed(name, text, strlen(text));
	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	/* With the [gateway] keys, as the config target loads them. */
	ngw_config_defaults(&c);
	if (nsa_config_load(&c.agent, path, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_seeds: %s\n", err);
		die("a config seed does not load");
	}
}

static void config_seeds(int nfiles, char **files)
{
	struct ngw_config c;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	ngw_config_defaults(&c);
	f = open_memstream(&text, &len);
	if (!f)
		die("open_memstream");
	nsa_config_print(&c.agent, f);
	fclose(f);
	config_seed("config-defaults", text);
	free(text);

	config_seed("config-standby",
		    "[agent]\nrole = standby\ngateway_id = 2\n"
		    "eal_args = --no-huge --no-shconf -m 1024 --no-pci "
		    "--no-telemetry -l 0\n"
		    "[store]\nseeds = 127.0.0.1:7000,127.0.0.1:7001,"
		    "127.0.0.1:7002\n"
		    "[standby]\ntable_capacity = 200000\n"
		    "dump = /tmp/standby.tbl\n");
	config_seed("config-active",
		    "; the active side of deploy/demo.sh\n"
		    "[agent]\nrole = active\ngateway_id = 1\n"
		    "eal_args = \"--no-huge --no-shconf -m 256 -l 0-2\"\n"
		    "[store]\nseeds = localhost:7000\npublish = sharded\n"
		    "user = natsync-active\n"
		    "password_file = /etc/natsync/active.password\n"
		    "[active]\nworkers = 2\nbatch_size = 4096\nflush_us = 0\n"
		    "max_inflight = 1024\n"
		    "[rings]\nlanes = 2\nring_size = 1024\nattach = no\n"
		    "[source]\ntype = synth\nflows = 100000\n"
		    "events = 18446744073709551615\nrate = 0\nseed = 42\n"
		    "refresh_pct = 100\ntimeout_ms = 1\n"
		    "wait_when_full = false\ndump = /tmp/source.tbl\n");
	config_seed("config-gateway",
		    "[gateway]\ninside_port = net_af_packet0\n"
		    "outside_port = 0000:3b:00.0\ninside_address = "
		    "192.168.1.1\npool = 198.51.100.10 - 198.51.100.13\n"
		    "next_hop =\nports = 1 - 65535\nagent = external\n"
		    "tcp_syn_timeout = 604800\nidle_sleep_us = 100000\n"
		    "mbufs = 1048575\n");
	/* Lines for the target's --set pass. */
	const char *set_lines = "agent.role=standby\n"
				"store.seeds = 10.0.0.1:7000, 10.0.0.2:7001\n"
				"gateway.pool=203.0.113.0-203.0.113.255\n"
				"rings.ring_size=65536\n"
				"standby.dump=\"/var/lib/natsync/t.tbl\"\n";
	write_seed("set-lines", set_lines, strlen(set_lines));
	write_seed("password", "s3cret-password\n", 16);

	for (int i = 0; i < nfiles; i++) {
		char name[64], buf[65536];
		size_t n;
		FILE *in = fopen(files[i], "rb");

		if (!in) {
			perror(files[i]);
			exit(1);
		}
		n = fread(buf, 1, sizeof(buf) - 1, in);
		fclose(in);
		buf[n] = '\0';
		snprintf(name, sizeof(name), "config-file-%d", i);
		config_seed(name, buf);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fuzz_seeds record|batch|key|config "
				"OUTDIR [CONFIG-FILE...]\n");
		return 2;
	}
	outdir = argv[2];
	nsa_log_verbosity = NSA_LOG_ERR;
	if (strcmp(argv[1], "record") == 0)
		record_seeds();
	else if (strcmp(argv[1], "batch") == 0)
		batch_seeds();
	else if (strcmp(argv[1], "key") == 0)
		key_seeds();
	else if (strcmp(argv[1], "config") == 0)
		config_seeds(argc - 3, argv + 3);
	else
		die("unknown target");
	printf("fuzz_seeds: %u %s seeds in %s\n", n_seeds, argv[1], outdir);
	return 0;
}
