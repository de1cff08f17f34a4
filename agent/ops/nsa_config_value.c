/*
 * nsa_config_value.c - one configuration value: parse and validate it for
 * its key's kind, store it, print it back, describe what the kind accepts.
 *
 * Invariants: a value is stored only after it was fully validated (a
 * rejected value leaves its field untouched). Numbers are plain decimal
 * without a sign, every character consumed, range checked. Addresses are
 * kept in host byte order and 0 means "not set", so an unset address
 * prints as an empty value and loads back as 0; 0.0.0.0 itself is refused.
 * Every value stored prints in a form that loads back to the same bytes.
 *
 * Not here: which keys exist (nsa_config_keys.c), files, lines, sections
 * and duplicates (nsa_config.c).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "nsa_store_conf.h"
#include "nsa_config_key.h"

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

static int host_char_ok(char ch)
{
	return isalnum((unsigned char)ch) || ch == '.' || ch == '-' ||
	       ch == '_';
}

int nsa_addr_parse(const char *s, struct nsa_addr *addr)
{
	const char *colon;
	size_t host_len;
	unsigned long port;
	char *end;

	if (!s || !addr)
		return -EINVAL;
	colon = strchr(s, ':');
	/* One colon only: IPv6 literals are not supported. */
	if (!colon || strchr(colon + 1, ':'))
		return -EINVAL;
	host_len = (size_t)(colon - s);
	if (host_len == 0 || host_len >= NSA_HOST_MAX)
		return -EINVAL;
	for (size_t i = 0; i < host_len; i++)
		if (!host_char_ok(s[i]))
			return -EINVAL;
	/* strtoul accepts signs and blanks; a port is digits only. */
	if (!isdigit((unsigned char)colon[1]))
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port == 0 || port > 65535)
		return -EINVAL;
	memcpy(addr->host, s, host_len);
	addr->host[host_len] = '\0';
	addr->port = (uint16_t)port;
	return 0;
}

void nsa_format_ipv4(uint32_t addr, char *buf, size_t len)
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

int nsa_key_parse(const struct nsa_key *k, void *base, const char *v, char *why,
		  size_t whylen)
{
	char *field = (char *)base + k->offset;
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
		return nsa_parse_seeds((struct nsa_store_conf *)field, v, why,
				       whylen);
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

void nsa_key_print(const struct nsa_key *k, const void *base, FILE *out)
{
	const char *field = (const char *)base + k->offset;
	const struct nsa_store_conf *store = (const void *)field;
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
		for (unsigned int i = 0; i < store->n_seeds; i++)
			fprintf(out, "%s%s:%u", i ? "," : "",
				store->seeds[i].host, store->seeds[i].port);
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
int nsa_key_is_empty(const struct nsa_key *k, const void *base)
{
	const char *field = (const char *)base + k->offset;
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

void nsa_key_describe(const struct nsa_key *k, char *buf, size_t len)
{
	unsigned long long lo = k->min, hi = k->max;
	size_t n = 0;

	switch (k->kind) {
	case NSA_KEY_NUM:
		snprintf(buf, len, "%llu..%llu", lo, hi);
		return;
	case NSA_KEY_POW2:
		snprintf(buf, len, "a power of two, %llu..%llu", lo, hi);
		return;
	case NSA_KEY_BOOL:
		snprintf(buf, len, "`yes` or `no` (`true`/`false`, `1`/`0`)");
		return;
	case NSA_KEY_ENUM:
		buf[0] = '\0';
		for (size_t i = 0; k->names[i] && n < len; i++)
			n += (size_t)snprintf(buf + n, len - n, "%s`%s`",
					      i ? ", " : "", k->names[i]);
		return;
	case NSA_KEY_STR:
		snprintf(buf, len, "text, at most %zu bytes", k->size - 1);
		return;
	case NSA_KEY_SEEDS:
		snprintf(buf, len,
			 "`host:port` list, comma separated, at most %d",
			 NSA_MAX_SEEDS);
		return;
	case NSA_KEY_IPV4:
		snprintf(buf, len, "IPv4 address; empty = not set");
		return;
	case NSA_KEY_IPV4_RANGE:
		snprintf(
			buf, len,
			"`A.B.C.D` or `A.B.C.D-E.F.G.H`, at most %llu addresses; empty = not set",
			hi);
		return;
	case NSA_KEY_PORT_RANGE:
		snprintf(buf, len, "`LO-HI`, %llu ≤ LO ≤ HI ≤ %llu", lo, hi);
		return;
	}
	snprintf(buf, len, "?");
}

/* A CPU list: numbers and ranges A-B separated by commas, every CPU online
 * (its number below the count of configured CPUs and online now). */
int nsa_cpu_list_parse(const char *text, cpu_set_t *set, char *why,
		       size_t whylen)
{
	const long n_cpus = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t online;
	const char *p = text;

	CPU_ZERO(set);
	if (sched_getaffinity(0, sizeof(online), &online) != 0)
		CPU_ZERO(&online);
	do {
		char *end;
		unsigned long lo, hi;

		if (!isdigit((unsigned char)*p))
			goto bad;
		lo = hi = strtoul(p, &end, 10);
		p = end;
		if (*p == '-') {
			if (!isdigit((unsigned char)p[1]))
				goto bad;
			hi = strtoul(p + 1, &end, 10);
			p = end;
		}
		if (hi < lo) {
			snprintf(why, whylen, "range %lu-%lu is backwards", lo,
				 hi);
			return -1;
		}
		for (unsigned long c = lo; c <= hi; c++) {
			/* The agent's process may run on every online CPU
			 * (its main thread is unpinned after EAL); a CPU
			 * outside that set cannot take a thread. */
			if (c >= (unsigned long)n_cpus || c >= CPU_SETSIZE ||
			    (CPU_COUNT(&online) && !CPU_ISSET(c, &online))) {
				snprintf(why, whylen,
					 "CPU %lu is not one this process may "
					 "run on (%ld CPUs configured)",
					 c, n_cpus);
				return -1;
			}
			CPU_SET(c, set);
		}
	} while (*p++ == ',');
	if (p[-1] == '\0')
		return 0;
bad:
	snprintf(why, whylen,
		 "'%s' is not a CPU list (numbers and ranges such as 0,2-3)",
		 text);
	return -1;
}

void nsa_cpu_list_format(const cpu_set_t *set, char *buf, size_t len)
{
	size_t at = 0;
	int c = 0;

	buf[0] = '\0';
	while (c < CPU_SETSIZE) {
		int lo;

		if (!CPU_ISSET(c, set)) {
			c++;
			continue;
		}
		lo = c;
		while (c + 1 < CPU_SETSIZE && CPU_ISSET(c + 1, set))
			c++;
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at,
					       lo == c ? "%s%d" : "%s%d-%d",
					       at ? "," : "", lo, c);
		c++;
	}
	if (at == 0)
		snprintf(buf, len, "none");
}
