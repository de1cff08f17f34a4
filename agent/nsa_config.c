/*
 * nsa_config.c - the agent's configuration: defaults, the INI file, the
 * --set overrides, the final consistency checks and the printout.
 *
 * Every key lives in one table (nsa_keys[]) that names its section, its
 * kind, where it is stored in struct nsa_config, its range and its default.
 * The defaults, the file loader, --set and the printout all walk that table,
 * so a key added there is parsed, range-checked, defaulted and printed
 * without touching anything else, and the printout always loads back to the
 * same configuration.
 *
 * Invariants: a value is stored only after it was fully validated (a
 * rejected value leaves its field untouched); the first error stops the
 * load and is the one reported, as "FILE:LINE: [section] key: reason". Keys
 * are parsed strictly: numbers are plain decimal without a sign, every
 * character consumed, range checked; a key given twice in one file is an
 * error rather than a silent "last one wins".
 *
 * The [gateway] keys are natsync-gateway's alone: nsa_config_finish does
 * not require them (natsync-agent never reads them); the gateway calls
 * nsa_config_gateway_check for what it needs. Addresses are kept in host
 * byte order and 0 means "not set", so an unset address prints as an empty
 * value and loads back as 0; 0.0.0.0 itself is refused as a value.
 *
 * Not done here: nothing is connected, allocated or started; the password
 * itself never comes from the INI file (only from password_file, read in
 * nsa_config_finish) and is never printed. Not thread-safe; call it before
 * starting threads.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "ns_batch.h"
#include "nsa_config.h"
#include "nsa_log.h"
#include "nsdp_lane.h"

enum nsa_key_kind {
	NSA_KEY_NUM, /* unsigned decimal in [min, max] */
	NSA_KEY_POW2, /* NSA_KEY_NUM that must also be a power of two */
	NSA_KEY_BOOL, /* yes|no|true|false|1|0, stored as int 1/0 */
	NSA_KEY_ENUM, /* one of names[], stored as its index */
	NSA_KEY_STR, /* text, at most size - 1 bytes */
	NSA_KEY_SEEDS, /* comma separated host:port list (store.seeds) */
	NSA_KEY_IPV4, /* dotted quad as a host-order uint32_t; "" = 0 */
	NSA_KEY_IPV4_RANGE, /* A.B.C.D[-E.F.G.H] as two host-order uint32_t
			       (first, last), at most max addresses; "" = 0 */
	NSA_KEY_PORT_RANGE, /* LO-HI as two uint16_t, min <= LO <= HI <= max */
};

struct nsa_key {
	const char *section;
	const char *key;
	enum nsa_key_kind kind;
	size_t offset;
	size_t size;
	uint64_t min, max;
	const char *const *names; /* NSA_KEY_ENUM: NULL-terminated */
	const char *def; /* default, parsed like a file value */
};

static const char *const nsa_role_names[] = {"active", "standby", NULL};
static const char *const nsa_publish_names[] = {"auto", "sharded", "classic",
						NULL};
static const char *const nsa_level_names[] = {"error", "warn", "info", "debug",
					      NULL};
static const char *const nsa_source_names[] = {"none", "synth", NULL};
static const char *const nsa_gw_agent_names[] = {"threads", "external", NULL};

/* Enums and flags are stored through 32-bit integers; order of the names
 * above must match the enum values. */
_Static_assert(sizeof(enum nsa_role) == sizeof(uint32_t), "enum size");
_Static_assert(sizeof(enum nsa_publish_mode) == sizeof(uint32_t), "enum size");
_Static_assert(sizeof(enum nsa_gw_agent) == sizeof(uint32_t), "enum size");
_Static_assert(NSA_ROLE_STANDBY == 1 && NSA_PUBLISH_CLASSIC == 2 &&
		       NSA_LOG_DEBUG == 3 && NSA_GW_AGENT_EXTERNAL == 1,
	       "name tables follow the enums");

/* The range kinds store a pair of adjacent fields through one offset. */
#define NSA_ADJACENT(type, a, b) \
	(offsetof(type, b) == offsetof(type, a) + sizeof(((type *)0)->a))
_Static_assert(NSA_ADJACENT(struct nsdp_nat_conf, pool_first, pool_last),
	       "pool_last follows pool_first");
_Static_assert(NSA_ADJACENT(struct nsdp_nat_conf, port_min, port_max),
	       "port_max follows port_min");

/* One row per key; clang-format would spread each macro over four lines. */
/* clang-format off */
#define NSA_FIELD(f) \
	offsetof(struct nsa_config, f), sizeof(((struct nsa_config *)0)->f)
#define NSA_NUM(sec, name, f, lo, hi, def) \
	{ sec, name, NSA_KEY_NUM, NSA_FIELD(f), lo, hi, NULL, def }
#define NSA_POW2(sec, name, f, lo, hi, def) \
	{ sec, name, NSA_KEY_POW2, NSA_FIELD(f), lo, hi, NULL, def }
#define NSA_BOOL(sec, name, f, def) \
	{ sec, name, NSA_KEY_BOOL, NSA_FIELD(f), 0, 1, NULL, def }
#define NSA_ENUM(sec, name, f, names, def) \
	{ sec, name, NSA_KEY_ENUM, NSA_FIELD(f), 0, 0, names, def }
#define NSA_STR(sec, name, f, def) \
	{ sec, name, NSA_KEY_STR, NSA_FIELD(f), 0, 0, NULL, def }
#define NSA_IPV4(sec, name, f, def) \
	{ sec, name, NSA_KEY_IPV4, NSA_FIELD(f), 0, 0, NULL, def }
#define NSA_FIELD_PAIR(a, b) \
	offsetof(struct nsa_config, a), \
	offsetof(struct nsa_config, b) + sizeof(((struct nsa_config *)0)->b) - \
		offsetof(struct nsa_config, a)
#define NSA_IPV4_RANGE(sec, name, a, b, most, def) \
	{ sec, name, NSA_KEY_IPV4_RANGE, NSA_FIELD_PAIR(a, b), 1, most, NULL, def }
#define NSA_PORT_RANGE(sec, name, a, b, lo, hi, def) \
	{ sec, name, NSA_KEY_PORT_RANGE, NSA_FIELD_PAIR(a, b), lo, hi, NULL, def }
/* clang-format on */

/* Idle timeouts of [gateway], seconds: up to a week. */
#define NSA_GW_TIMEOUT_MAX 604800

#define NSA_DEFAULT_EAL_ARGS \
	"--no-huge --no-shconf -m 512 --no-pci --no-telemetry"

/* In print order: sections appear in the order of their first key. */
static const struct nsa_key nsa_keys[] = {
	NSA_ENUM("agent", "role", role, nsa_role_names, "active"),
	NSA_NUM("agent", "gateway_id", gateway_id, 0, UINT32_MAX, "1"),
	NSA_NUM("agent", "epoch", epoch, 0, UINT32_MAX, "1"),
	NSA_NUM("agent", "progress_ms", progress_ms, 0, 3600000, "1000"),
	NSA_STR("agent", "eal_args", eal_args, NSA_DEFAULT_EAL_ARGS),
	NSA_ENUM("agent", "log_level", verbosity, nsa_level_names, "info"),

	{"store", "seeds", NSA_KEY_SEEDS, NSA_FIELD(store.seeds), 0, 0, NULL,
	 "127.0.0.1:7000"},
	NSA_STR("store", "user", store.user, ""),
	NSA_STR("store", "password_file", password_file, ""),
	NSA_STR("store", "batch_key_file", batch_key_file, ""),
	NSA_NUM("store", "connect_timeout_ms", store.connect_timeout_ms, 1,
		600000, "1000"),
	NSA_ENUM("store", "publish", store.publish, nsa_publish_names, "auto"),

	NSA_NUM("active", "workers", workers, 1, NSDP_MAX_LANES, "1"),
	NSA_NUM("active", "batch_size", batch_size, 1, NS_BATCH_MAX_RECORDS,
		"256"),
	NSA_NUM("active", "flush_us", flush_us, 0, 1000000, "200"),
	NSA_NUM("active", "max_inflight", max_inflight, 1, 1024, "8"),
	NSA_NUM("active", "replay_ms", replay_ms, 0, 60000, "2000"),
	NSA_NUM("active", "replay_records", replay_records, 0, 16777216,
		"131072"),

	NSA_NUM("rings", "lanes", lanes, 1, NSDP_MAX_LANES, "1"),
	NSA_POW2("rings", "ring_size", ring_size, 64, 16777216, "65536"),
	NSA_BOOL("rings", "attach", attach, "no"),

	NSA_ENUM("source", "type", synth, nsa_source_names, "none"),
	NSA_NUM("source", "flows", synth_conf.flows, 1, 1000000000, "100000"),
	NSA_NUM("source", "events", synth_conf.events, 0, UINT64_MAX,
		"1000000"),
	NSA_NUM("source", "rate", synth_conf.rate, 0, UINT64_MAX, "0"),
	NSA_NUM("source", "seed", synth_conf.seed, 0, UINT64_MAX, "1"),
	NSA_NUM("source", "refresh_pct", synth_conf.refresh_pct, 0, 100, "60"),
	NSA_NUM("source", "timeout_ms", synth_conf.timeout_ms, 1, 86400000,
		"300000"),
	NSA_BOOL("source", "wait_when_full", synth_conf.wait_when_full, "yes"),
	NSA_STR("source", "dump", source_dump, ""),

	NSA_NUM("standby", "table_capacity", table_capacity, 1024, 100000000,
		"2000000"),
	NSA_STR("standby", "dump", table_dump, ""),
	NSA_NUM("standby", "topology_check_ms", topology_check_ms, 0, 60000,
		"1000"),
	NSA_NUM("standby", "ping_ms", ping_ms, 0, 60000, "1000"),

	NSA_STR("gateway", "inside_port", gw.inside_port, ""),
	NSA_STR("gateway", "outside_port", gw.outside_port, ""),
	NSA_IPV4("gateway", "inside_address", gw.nat.inside_addr, ""),
	NSA_IPV4_RANGE("gateway", "pool", gw.nat.pool_first, gw.nat.pool_last,
		       NSDP_NAT_MAX_POOL, ""),
	NSA_IPV4("gateway", "next_hop", gw.nat.next_hop, ""),
	NSA_PORT_RANGE("gateway", "ports", gw.nat.port_min, gw.nat.port_max, 1,
		       65535, "1024-65535"),
	NSA_NUM("gateway", "tcp_syn_timeout", gw.tcp_syn_timeout, 1,
		NSA_GW_TIMEOUT_MAX, "20"),
	NSA_NUM("gateway", "tcp_established_timeout",
		gw.tcp_established_timeout, 1, NSA_GW_TIMEOUT_MAX, "7440"),
	NSA_NUM("gateway", "tcp_closing_timeout", gw.tcp_closing_timeout, 1,
		NSA_GW_TIMEOUT_MAX, "10"),
	NSA_NUM("gateway", "udp_timeout", gw.udp_timeout, 1, NSA_GW_TIMEOUT_MAX,
		"300"),
	NSA_NUM("gateway", "icmp_timeout", gw.icmp_timeout, 1,
		NSA_GW_TIMEOUT_MAX, "30"),
	NSA_STR("gateway", "control_socket", gw.control_socket,
		"/run/natsync/gateway.sock"),
	NSA_ENUM("gateway", "agent", gw.agent, nsa_gw_agent_names, "threads"),
	NSA_NUM("gateway", "idle_sleep_us", gw.idle_sleep_us, 0, 100000, "0"),
	NSA_NUM("gateway", "rx_descriptors", gw.rx_descriptors, 64, 16384,
		"1024"),
	NSA_NUM("gateway", "tx_descriptors", gw.tx_descriptors, 64, 16384,
		"1024"),
	NSA_NUM("gateway", "mbufs", gw.mbufs, 1023, 1048575, "8191"),
};

#define NSA_N_KEYS (sizeof(nsa_keys) / sizeof(nsa_keys[0]))

static void nsa_store_u(void *field, size_t size, uint64_t v)
{
	if (size == sizeof(uint64_t)) {
		memcpy(field, &v, sizeof(v));
	} else {
		uint32_t v32 = (uint32_t)v;

		memcpy(field, &v32, sizeof(v32));
	}
}

static uint64_t nsa_load_u(const void *field, size_t size)
{
	if (size == sizeof(uint64_t)) {
		uint64_t v;

		memcpy(&v, field, sizeof(v));
		return v;
	}
	uint32_t v32;

	memcpy(&v32, field, sizeof(v32));
	return v32;
}

static int nsa_parse_num(const struct nsa_key *k, const char *v, uint64_t *out,
			 char *why, size_t whylen)
{
	unsigned long long n;
	char *end;

	if (*v < '0' || *v > '9') {
		/* strtoull would accept a sign or leading blanks. */
		snprintf(why, whylen,
			 "'%s' is not a number (allowed %llu..%llu)", v,
			 (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return -1;
	}
	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end != '\0') {
		snprintf(why, whylen,
			 "'%s' is not a number (allowed %llu..%llu)", v,
			 (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return -1;
	}
	if (errno == ERANGE || n < k->min || n > k->max) {
		snprintf(why, whylen, "%s is out of range %llu..%llu", v,
			 (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return -1;
	}
	if (k->kind == NSA_KEY_POW2 && (n & (n - 1)) != 0) {
		snprintf(why, whylen, "%s is not a power of two", v);
		return -1;
	}
	*out = n;
	return 0;
}

static int nsa_parse_bool(const char *v, uint64_t *out, char *why,
			  size_t whylen)
{
	static const char *const yes[] = {"yes", "true", "1"};
	static const char *const no[] = {"no", "false", "0"};

	for (size_t i = 0; i < 3; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	snprintf(why, whylen, "'%s' is not a boolean (yes|no|true|false|1|0)",
		 v);
	return -1;
}

static void nsa_join_names(const char *const *names, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; names[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "",
				      names[i]);
}

static int nsa_parse_enum(const struct nsa_key *k, const char *v, uint64_t *out,
			  char *why, size_t whylen)
{
	char allowed[128];

	for (uint64_t i = 0; k->names[i]; i++) {
		if (strcmp(v, k->names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	nsa_join_names(k->names, allowed, sizeof(allowed));
	snprintf(why, whylen, "'%s' is not one of %s", v, allowed);
	return -1;
}

/* Parse the whole list before storing any of it. */
static int nsa_parse_seeds(struct nsa_store_conf *store, const char *v,
			   char *why, size_t whylen)
{
	/* Zeroed so that equal lists compare equal byte for byte. */
	struct nsa_addr seeds[NSA_MAX_SEEDS] = {0};
	unsigned int n = 0;
	const char *p = v;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char one[NSA_HOST_MAX + 16];

		while (len && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == 0) {
			snprintf(why, whylen, "empty address in '%s'", v);
			return -1;
		}
		if (n == NSA_MAX_SEEDS) {
			snprintf(why, whylen, "more than %d seed addresses",
				 NSA_MAX_SEEDS);
			return -1;
		}
		if (len >= sizeof(one)) {
			snprintf(why, whylen, "'%.*s' is not host:port",
				 (int)len, p);
			return -1;
		}
		memcpy(one, p, len);
		one[len] = '\0';
		if (nsa_addr_parse(one, &seeds[n]) != 0) {
			snprintf(why, whylen, "'%s' is not host:port", one);
			return -1;
		}
		n++;
		if (!comma)
			break;
		p = comma + 1;
	}
	memcpy(store->seeds, seeds, sizeof(seeds));
	store->n_seeds = n;
	return 0;
}

/* Copy [p, end) without its surrounding blanks into out; -1 when that is
 * empty or does not fit in len bytes. */
static int nsa_copy_trimmed(const char *p, const char *end, char *out,
			    size_t len)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == p || (size_t)(end - p) >= len)
		return -1;
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
	return 0;
}

/* Split "A-B" at its first dash into the trimmed parts a and b. */
static int nsa_split_range(const char *v, char *a, char *b, size_t len)
{
	const char *dash = strchr(v, '-');

	if (!dash)
		return -1;
	return nsa_copy_trimmed(v, dash, a, len) ||
	       nsa_copy_trimmed(dash + 1, dash + strlen(dash), b, len);
}

/* A dotted quad (strict: four decimal parts, no leading zeros, as
 * inet_pton reads it) in host byte order. 0.0.0.0 is refused: 0 stands for
 * "not set", which is written as an empty value. */
static int nsa_parse_ipv4(const char *v, uint32_t *out, char *why,
			  size_t whylen)
{
	struct in_addr a;

	if (inet_pton(AF_INET, v, &a) != 1) {
		snprintf(why, whylen, "'%s' is not an IPv4 address", v);
		return -1;
	}
	if (a.s_addr == 0) {
		snprintf(why, whylen,
			 "0.0.0.0 is not a usable address (leave the value "
			 "empty for none)");
		return -1;
	}
	*out = ntohl(a.s_addr);
	return 0;
}

static void nsa_format_ipv4(uint32_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff,
		 (addr >> 8) & 0xff, addr & 0xff);
}

/* "A.B.C.D" or "A.B.C.D-E.F.G.H" (inclusive), at most k->max addresses;
 * "" leaves both 0 (not set). */
static int nsa_parse_ipv4_range(const struct nsa_key *k, const char *v,
				uint32_t range[2], char *why, size_t whylen)
{
	char first[INET_ADDRSTRLEN], last[INET_ADDRSTRLEN];
	uint64_t count;

	if (*v == '\0') {
		range[0] = range[1] = 0;
		return 0;
	}
	if (!strchr(v, '-')) {
		if (nsa_parse_ipv4(v, &range[0], why, whylen) != 0)
			return -1;
		range[1] = range[0];
		return 0;
	}
	if (nsa_split_range(v, first, last, sizeof(first)) != 0) {
		snprintf(why, whylen,
			 "'%s' is not an IPv4 address or range "
			 "(A.B.C.D-E.F.G.H)",
			 v);
		return -1;
	}
	if (nsa_parse_ipv4(first, &range[0], why, whylen) != 0 ||
	    nsa_parse_ipv4(last, &range[1], why, whylen) != 0)
		return -1;
	if (range[0] > range[1]) {
		snprintf(why, whylen, "'%s': range is empty (first after last)",
			 v);
		return -1;
	}
	count = (uint64_t)range[1] - range[0] + 1;
	if (count > k->max) {
		snprintf(why, whylen,
			 "'%s' holds %llu addresses, more than %llu", v,
			 (unsigned long long)count, (unsigned long long)k->max);
		return -1;
	}
	return 0;
}

/* "LO-HI" with k->min <= LO <= HI <= k->max. */
static int nsa_parse_port_range(const struct nsa_key *k, const char *v,
				uint16_t range[2], char *why, size_t whylen)
{
	const struct nsa_key part = {
		.kind = NSA_KEY_NUM, .min = k->min, .max = k->max};
	char lo_s[24], hi_s[24];
	uint64_t lo, hi;

	if (nsa_split_range(v, lo_s, hi_s, sizeof(lo_s)) != 0) {
		snprintf(why, whylen, "'%s' is not a range LO-HI (%llu..%llu)",
			 v, (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return -1;
	}
	if (nsa_parse_num(&part, lo_s, &lo, why, whylen) != 0 ||
	    nsa_parse_num(&part, hi_s, &hi, why, whylen) != 0)
		return -1;
	if (lo > hi) {
		snprintf(why, whylen, "'%s': range is empty (LO after HI)", v);
		return -1;
	}
	range[0] = (uint16_t)lo;
	range[1] = (uint16_t)hi;
	return 0;
}

/* Every value must load back from the printout unchanged ("key = value",
 * one line). The line must fit the INI reader's (INI_MAX_LINE bytes with
 * its newline and NUL); a value is never printed longer than it was given.
 * Text is printed as stored, so it must also survive the reader: inih
 * strips the blanks around a value and cuts it at a ';' that follows a
 * blank, the loader strips one pair of quotes, and a control character
 * could end the line. Without these checks --set, and a quoted value in a
 * file, could store what the file form cannot carry. */
static int nsa_value_fits(const struct nsa_key *k, const char *v, char *why,
			  size_t whylen)
{
	size_t room = INI_MAX_LINE - 2 - strlen(k->key) - strlen(" = ");

	if (strlen(v) > room) {
		snprintf(why, whylen,
			 "value is longer than a configuration line allows "
			 "(%zu bytes)",
			 room);
		return -1;
	}
	return 0;
}

static int nsa_str_printable(const char *v, size_t len, char *why,
			     size_t whylen)
{
	if (len > 0 && (isspace((unsigned char)v[0]) ||
			isspace((unsigned char)v[len - 1]))) {
		snprintf(why, whylen, "value begins or ends with a blank");
		return -1;
	}
	if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
		snprintf(why, whylen, "value is quoted twice");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (iscntrl((unsigned char)v[i]) && v[i] != '\t') {
			snprintf(why, whylen,
				 "value holds control character 0x%02x",
				 (unsigned char)v[i]);
			return -1;
		}
		if (v[i] == ';' &&
		    (i == 0 || isspace((unsigned char)v[i - 1]))) {
			snprintf(why, whylen,
				 "value holds ';' after a blank (a comment)");
			return -1;
		}
	}
	return 0;
}

/* Validate v for key k and store it in c; on error c is untouched. */
static int nsa_key_set(struct nsa_config *c, const struct nsa_key *k,
		       const char *v, char *why, size_t whylen)
{
	char *field = (char *)c + k->offset;
	uint64_t n = 0;
	uint32_t addrs[2] = {0, 0};
	uint16_t ports[2];
	size_t len;
	int rc;

	if (nsa_value_fits(k, v, why, whylen) != 0)
		return -1;
	switch (k->kind) {
	case NSA_KEY_NUM:
	case NSA_KEY_POW2:
		rc = nsa_parse_num(k, v, &n, why, whylen);
		break;
	case NSA_KEY_BOOL:
		rc = nsa_parse_bool(v, &n, why, whylen);
		break;
	case NSA_KEY_ENUM:
		rc = nsa_parse_enum(k, v, &n, why, whylen);
		break;
	case NSA_KEY_SEEDS:
		return nsa_parse_seeds(&c->store, v, why, whylen);
	case NSA_KEY_IPV4:
		if (*v && nsa_parse_ipv4(v, &addrs[0], why, whylen) != 0)
			return -1;
		memcpy(field, &addrs[0], sizeof(addrs[0]));
		return 0;
	case NSA_KEY_IPV4_RANGE:
		if (nsa_parse_ipv4_range(k, v, addrs, why, whylen) != 0)
			return -1;
		memcpy(field, addrs, sizeof(addrs));
		return 0;
	case NSA_KEY_PORT_RANGE:
		if (nsa_parse_port_range(k, v, ports, why, whylen) != 0)
			return -1;
		memcpy(field, ports, sizeof(ports));
		return 0;
	case NSA_KEY_STR:
		len = strlen(v);
		/* Allow "quoted values" as many INI dialects do. */
		if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
			v++;
			len -= 2;
		}
		if (len >= k->size) {
			snprintf(why, whylen, "value is longer than %zu bytes",
				 k->size - 1);
			return -1;
		}
		if (nsa_str_printable(v, len, why, whylen) != 0)
			return -1;
		memset(field, 0, k->size);
		memcpy(field, v, len);
		return 0;
	default:
		snprintf(why, whylen, "internal: unknown key kind");
		return -1;
	}
	if (rc == 0)
		nsa_store_u(field, k->size, n);
	return rc;
}

static void nsa_list_sections(char *buf, size_t len)
{
	const char *last = NULL;
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NSA_N_KEYS && n < len; i++) {
		if (last && strcmp(last, nsa_keys[i].section) == 0)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s[%s]",
				      last ? ", " : "", nsa_keys[i].section);
		last = nsa_keys[i].section;
	}
}

static void nsa_list_keys(const char *section, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NSA_N_KEYS && n < len; i++)
		if (strcmp(nsa_keys[i].section, section) == 0)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      n ? ", " : "", nsa_keys[i].key);
}

/* Index of section.key in nsa_keys[], or -1 with the reason in why. */
static int nsa_key_find(const char *section, const char *key, char *why,
			size_t whylen)
{
	char known[512];
	int section_known = 0;

	for (size_t i = 0; i < NSA_N_KEYS; i++) {
		if (strcmp(nsa_keys[i].section, section) != 0)
			continue;
		section_known = 1;
		if (strcmp(nsa_keys[i].key, key) == 0)
			return (int)i;
	}
	if (!section_known) {
		nsa_list_sections(known, sizeof(known));
		snprintf(why, whylen, "unknown section (known: %s)", known);
	} else {
		nsa_list_keys(section, known, sizeof(known));
		snprintf(why, whylen, "unknown key (known: %s)", known);
	}
	return -1;
}

/* Fields that follow from other keys. */
static void nsa_config_derive(struct nsa_config *c)
{
	struct nsdp_nat_conf *nat = &c->gw.nat;

	c->synth_conf.gateway_id = c->gateway_id;
	c->synth_conf.epoch = c->epoch;
	nat->gateway_id = c->gateway_id;
	nat->max_sessions = c->table_capacity;
	/* At most 604800 s: the products fit in 32 bits. */
	nat->tcp_syn_ms = c->gw.tcp_syn_timeout * 1000u;
	nat->tcp_established_ms = c->gw.tcp_established_timeout * 1000u;
	nat->tcp_closing_ms = c->gw.tcp_closing_timeout * 1000u;
	nat->udp_ms = c->gw.udp_timeout * 1000u;
	nat->icmp_ms = c->gw.icmp_timeout * 1000u;
}

void nsa_config_defaults(struct nsa_config *c)
{
	char why[256];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NSA_N_KEYS; i++) {
		/* The defaults are constants: test_config checks they parse. */
		if (nsa_key_set(c, &nsa_keys[i], nsa_keys[i].def, why,
				sizeof(why)) != 0)
			NSA_ERR("config default [%s] %s: %s",
				nsa_keys[i].section, nsa_keys[i].key, why);
	}
	nsa_config_derive(c);
}

/* State of one nsa_config_load: the file is read through nsa_load_line so
 * that the handler knows the line number (inih passes none unless built
 * with INI_HANDLER_LINENO) and so that an over-long line is an error rather
 * than silently split in two. */
struct nsa_load {
	struct nsa_config *c;
	const char *path;
	FILE *f;
	int line;
	int failed_line; /* 0 while no error */
	int seen[NSA_N_KEYS]; /* line a key was set on, 0 if not yet */
	char *err;
	size_t errlen;
};

static char *nsa_load_line(char *str, int num, void *stream)
{
	struct nsa_load *ld = stream;
	size_t n = 0, lead;
	int ch = EOF;

	if (ld->failed_line)
		return NULL;
	/* getc, not fgets: with fgets a NUL byte hides where the line ends,
	 * and a long line would be split in two after all. */
	while (n + 1 < (size_t)num && (ch = getc(ld->f)) != EOF) {
		if (ch == '\0') {
			ld->failed_line = ++ld->line;
			snprintf(ld->err, ld->errlen,
				 "%s:%d: line holds a NUL byte", ld->path,
				 ld->line);
			return NULL;
		}
		str[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (n == 0)
		return NULL;
	str[n] = '\0';
	ld->line++;
	if (str[n - 1] != '\n' && (ch = getc(ld->f)) != EOF) {
		ungetc(ch, ld->f);
		ld->failed_line = ld->line;
		snprintf(ld->err, ld->errlen,
			 "%s:%d: line is longer than %d characters", ld->path,
			 ld->line, num - 3);
		return NULL;
	}
	/* inih takes an indented line for the continuation of the previous
	 * value; here indentation is only layout, so keys may be indented. */
	lead = strspn(str, " \t");
	memmove(str, str + lead, n - lead + 1);
	return str;
}

static int nsa_load_entry(void *user, const char *section, const char *key,
			  const char *value)
{
	struct nsa_load *ld = user;
	char why[768];
	int i;

	if (ld->failed_line)
		return 0;
	i = nsa_key_find(section, key, why, sizeof(why));
	if (i >= 0 && ld->seen[i]) {
		snprintf(why, sizeof(why), "given twice (first on line %d)",
			 ld->seen[i]);
		i = -1;
	}
	if (i >= 0 &&
	    nsa_key_set(ld->c, &nsa_keys[i], value, why, sizeof(why)) != 0)
		i = -1;
	if (i < 0) {
		ld->failed_line = ld->line;
		snprintf(ld->err, ld->errlen, "%s:%d: [%s] %s: %s", ld->path,
			 ld->line, section, key, why);
		return 0;
	}
	ld->seen[i] = ld->line;
	return 1;
}

int nsa_config_load(struct nsa_config *c, const char *path, char *err,
		    size_t errlen)
{
	struct nsa_load ld = {
		.c = c, .path = path, .err = err, .errlen = errlen};
	int rc;

	ld.f = fopen(path, "r");
	if (!ld.f) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		return -1;
	}
	rc = ini_parse_stream(nsa_load_line, &ld, nsa_load_entry, &ld);
	fclose(ld.f);
	/* inih reports a malformed line only through its return value, the
	 * first bad line; it wins when it comes before the handler's error. */
	if (rc > 0 && (!ld.failed_line || rc < ld.failed_line)) {
		snprintf(err, errlen,
			 "%s:%d: malformed line (expected [section] or key = "
			 "value)",
			 path, rc);
		return -1;
	}
	if (rc < 0 && !ld.failed_line) {
		snprintf(err, errlen, "%s: cannot parse (inih error %d)", path,
			 rc);
		return -1;
	}
	return ld.failed_line ? -1 : 0;
}

static char *nsa_trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

int nsa_config_set(struct nsa_config *c, const char *assignment, char *err,
		   size_t errlen)
{
	char buf[2048], why[768];
	char *eq, *dot, *section, *key, *value;
	int i;

	if (strlen(assignment) >= sizeof(buf)) {
		snprintf(err, errlen, "--set: longer than %zu bytes",
			 sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, assignment);
	eq = strchr(buf, '=');
	dot = strchr(buf, '.');
	if (!eq || !dot || dot > eq) {
		snprintf(err, errlen, "--set %s: expected section.key=value",
			 assignment);
		return -1;
	}
	*eq = '\0';
	*dot = '\0';
	section = nsa_trim(buf);
	key = nsa_trim(dot + 1);
	value = nsa_trim(eq + 1);
	i = nsa_key_find(section, key, why, sizeof(why));
	if (i < 0 ||
	    nsa_key_set(c, &nsa_keys[i], value, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "--set %s.%s: %s", section, key, why);
		return -1;
	}
	return 0;
}

/* Read a secret (the store password, the batch key) from the file at path
 * into buf: refuse a file others may read, and keep only the one line it
 * must hold. name is the key for messages, e.g. "password_file". The
 * length goes to *len. */
static int nsa_read_secret(const char *name, const char *path, char *buf,
			   size_t cap, size_t *len, char *err, size_t errlen)
{
	size_t n = 0;
	struct stat st;
	ssize_t r;
	int fd;

	/* O_NONBLOCK: a FIFO must not hang the start; fstat refuses it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: cannot open: %s", name, path,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s %s: cannot stat: %s", name, path,
			 strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", name, path);
		goto fail;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen,
			 "%s %s: permissions %04o let others read it; chmod "
			 "600",
			 name, path, (unsigned int)(st.st_mode & 07777));
		goto fail;
	}
	memset(buf, 0, cap);
	while (n < cap && (r = read(fd, buf + n, cap - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s %s: cannot read: %s", name,
				 path, strerror(errno));
			goto fail;
		}
		n += (size_t)r;
	}
	if (n == cap) {
		snprintf(err, errlen, "%s %s: longer than %zu bytes", name,
			 path, cap - 1);
		goto fail;
	}
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (n == 0) {
		snprintf(err, errlen, "%s %s: empty", name, path);
		goto fail;
	}
	if (memchr(buf, '\0', n) || memchr(buf, '\n', n)) {
		snprintf(err, errlen, "%s %s: must hold one line of text", name,
			 path);
		goto fail;
	}
	close(fd);
	*len = n;
	return 0;
fail:
	memset(buf, 0, cap);
	close(fd);
	return -1;
}

int nsa_config_finish(struct nsa_config *c, char *err, size_t errlen)
{
	size_t len;

	if (c->store.n_seeds == 0) {
		snprintf(err, errlen, "[store] seeds: no seed address given");
		return -1;
	}
	if (c->role == NSA_ROLE_ACTIVE && c->workers > c->lanes) {
		snprintf(err, errlen,
			 "[active] workers (%u) exceeds [rings] lanes (%u)",
			 c->workers, c->lanes);
		return -1;
	}
	if (c->password_file[0] &&
	    nsa_read_secret("password_file", c->password_file,
			    c->store.password, sizeof(c->store.password), &len,
			    err, errlen) != 0)
		return -1;
	c->batch_key_len = 0;
	if (c->batch_key_file[0] &&
	    nsa_read_secret("batch_key_file", c->batch_key_file, c->batch_key,
			    sizeof(c->batch_key), &c->batch_key_len, err,
			    errlen) != 0)
		return -1;
	nsa_config_derive(c);
	return 0;
}

/* What natsync-gateway needs on top of nsa_config_finish: two distinct
 * ports, its inside address outside a non-empty pool, a non-empty port
 * range and one lane (one forwarding lcore). The first problem found is
 * reported, naming its key. */
int nsa_config_gateway_check(const struct nsa_config *c, char *err,
			     size_t errlen)
{
	const struct nsa_gateway_conf *gw = &c->gw;
	const struct nsdp_nat_conf *nat = &gw->nat;
	char a[INET_ADDRSTRLEN], first[INET_ADDRSTRLEN], last[INET_ADDRSTRLEN];

	nsa_format_ipv4(nat->pool_first, first, sizeof(first));
	nsa_format_ipv4(nat->pool_last, last, sizeof(last));
	if (!gw->inside_port[0]) {
		snprintf(err, errlen, "[gateway] inside_port: not set");
		return -1;
	}
	if (!gw->outside_port[0]) {
		snprintf(err, errlen, "[gateway] outside_port: not set");
		return -1;
	}
	if (strcmp(gw->inside_port, gw->outside_port) == 0) {
		snprintf(err, errlen,
			 "[gateway] outside_port: %s is also inside_port",
			 gw->outside_port);
		return -1;
	}
	if (nat->inside_addr == 0) {
		snprintf(err, errlen, "[gateway] inside_address: not set");
		return -1;
	}
	if (nat->pool_first == 0 || nat->pool_last == 0) {
		snprintf(err, errlen, "[gateway] pool: not set");
		return -1;
	}
	if (nat->pool_first > nat->pool_last) {
		snprintf(err, errlen,
			 "[gateway] pool: range is empty (%s after %s)", first,
			 last);
		return -1;
	}
	if (nat->pool_last - nat->pool_first >= NSDP_NAT_MAX_POOL) {
		snprintf(err, errlen,
			 "[gateway] pool: %s-%s holds more than %d addresses",
			 first, last, NSDP_NAT_MAX_POOL);
		return -1;
	}
	if (nat->inside_addr >= nat->pool_first &&
	    nat->inside_addr <= nat->pool_last) {
		nsa_format_ipv4(nat->inside_addr, a, sizeof(a));
		snprintf(err, errlen,
			 "[gateway] inside_address: %s is in the pool %s-%s", a,
			 first, last);
		return -1;
	}
	if (nat->next_hop >= nat->pool_first &&
	    nat->next_hop <= nat->pool_last) {
		nsa_format_ipv4(nat->next_hop, a, sizeof(a));
		snprintf(err, errlen,
			 "[gateway] next_hop: %s is in the pool %s-%s", a,
			 first, last);
		return -1;
	}
	if (nat->port_min == 0 || nat->port_min > nat->port_max) {
		snprintf(err, errlen,
			 "[gateway] ports: range %u-%u is empty or starts at 0",
			 nat->port_min, nat->port_max);
		return -1;
	}
	if (c->lanes != 1) {
		snprintf(err, errlen,
			 "[rings] lanes: natsync-gateway forwards on one lcore "
			 "into one lane; set lanes = 1 (not %u)",
			 c->lanes);
		return -1;
	}
	return 0;
}

static void nsa_print_value(const struct nsa_config *c, const struct nsa_key *k,
			    FILE *out)
{
	const char *field = (const char *)c + k->offset;
	char buf[INET_ADDRSTRLEN];
	uint32_t addrs[2];
	uint16_t ports[2];

	switch (k->kind) {
	case NSA_KEY_NUM:
	case NSA_KEY_POW2:
		fprintf(out, "%llu",
			(unsigned long long)nsa_load_u(field, k->size));
		break;
	case NSA_KEY_BOOL:
		fputs(nsa_load_u(field, k->size) ? "yes" : "no", out);
		break;
	case NSA_KEY_ENUM:
		fputs(k->names[nsa_load_u(field, k->size)], out);
		break;
	case NSA_KEY_STR:
		fputs(field, out);
		break;
	case NSA_KEY_SEEDS:
		for (unsigned int i = 0; i < c->store.n_seeds; i++)
			fprintf(out, "%s%s:%u", i ? "," : "",
				c->store.seeds[i].host, c->store.seeds[i].port);
		break;
	case NSA_KEY_IPV4:
		memcpy(&addrs[0], field, sizeof(addrs[0]));
		nsa_format_ipv4(addrs[0], buf, sizeof(buf));
		fputs(buf, out);
		break;
	case NSA_KEY_IPV4_RANGE:
		memcpy(addrs, field, sizeof(addrs));
		nsa_format_ipv4(addrs[0], buf, sizeof(buf));
		fputs(buf, out);
		if (addrs[1] != addrs[0]) {
			nsa_format_ipv4(addrs[1], buf, sizeof(buf));
			fprintf(out, "-%s", buf);
		}
		break;
	case NSA_KEY_PORT_RANGE:
		memcpy(ports, field, sizeof(ports));
		fprintf(out, "%u-%u", ports[0], ports[1]);
		break;
	}
}

/* Printed as "key =": an empty text or an address that is not set. */
static int nsa_value_is_empty(const struct nsa_config *c,
			      const struct nsa_key *k)
{
	const char *field = (const char *)c + k->offset;
	uint32_t addrs[2];

	switch (k->kind) {
	case NSA_KEY_STR:
		return field[0] == '\0';
	case NSA_KEY_IPV4:
		memcpy(&addrs[0], field, sizeof(addrs[0]));
		return addrs[0] == 0;
	case NSA_KEY_IPV4_RANGE:
		memcpy(addrs, field, sizeof(addrs));
		return addrs[0] == 0 && addrs[1] == 0;
	default:
		return 0;
	}
}

void nsa_config_print(const struct nsa_config *c, FILE *out)
{
	const char *section = NULL;

	fputs("; natsync effective configuration (password not shown)\n", out);
	for (size_t i = 0; i < NSA_N_KEYS; i++) {
		const struct nsa_key *k = &nsa_keys[i];

		if (!section || strcmp(section, k->section) != 0) {
			fprintf(out, "%s[%s]\n", section ? "\n" : "",
				k->section);
			section = k->section;
		}
		/* "key =" alone for an empty value, no trailing blank. */
		if (nsa_value_is_empty(c, k)) {
			fprintf(out, "%s =\n", k->key);
			continue;
		}
		fprintf(out, "%s = ", k->key);
		nsa_print_value(c, k, out);
		fputc('\n', out);
	}
}
