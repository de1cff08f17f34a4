/*
 * fuzz_record.c - libFuzzer target: the session record decoder, its JSON
 * form and the encoder, against the rules of schema/FORMAT.md.
 *
 * Properties, for every input:
 * - ns_record_decode_rec returns what FORMAT.md's refusal tables say (the
 *   IPv4 one and the IPv6 families'), in their documented order (version
 *   before length), and writes *out only on success; a success consumes
 *   exactly the family's wire length. ns_record_decode (one line) agrees,
 *   except that it refuses an IPv6 record with -EAFNOSUPPORT.
 * - encode(decode(x)) == x for the bytes consumed, and decoding that again
 *   gives the same session; the reserved bytes come back zeroed.
 * - every truncation of a record that decodes is -EMSGSIZE.
 * - ns_record_to_json of a decoded session is one NUL-terminated JSON
 *   object whose fields read back to the session, and it refuses a
 *   buffer one byte too short with -ENOSPC.
 * - the first 128 bytes taken as a struct ns_rec: its JSON form is the
 *   documented one whatever the field values; encode either refuses
 *   it for a reason FORMAT.md names or writes a record that decodes back
 *   to the same state and event (encode never writes what decode
 *   refuses); with too small a buffer it writes nothing.
 *
 * Not here: batches (fuzz_batch.c), keys (fuzz_key.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ns_record.h"
#include "nst_fuzz.h"

#define JSON_CAP 512

static int reserved_zero(const struct ns_session *s)
{
	for (size_t i = 0; i < sizeof(s->reserved); i++)
		if (s->reserved[i])
			return 0;
	return 1;
}

static void format_ipv4(uint32_t a, char out[16])
{
	snprintf(out, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
		 (a >> 8) & 0xff, a & 0xff);
}

/* One member of the documented JSON form: a number, or a string when str
 * is set. */
struct json_member {
	const char *name;
	uint64_t num;
	const char *str;
};

static void format_ipv6(const uint8_t a[16], char out[INET6_ADDRSTRLEN])
{
	NST_FUZZ_CHECK(inet_ntop(AF_INET6, a, out, INET6_ADDRSTRLEN) != NULL,
		       "inet_ntop");
}

/* The JSON of s, field by field, as FORMAT.md lists them: an independent
 * rendering, not the encoder's format string. */
static void check_json(const struct ns_rec *r)
{
	const struct ns_session *s = &r->s;
	char json[JSON_CAP], small[JSON_CAP], want[JSON_CAP];
	char os[INET6_ADDRSTRLEN], od[INET6_ADDRSTRLEN];
	char xs[INET6_ADDRSTRLEN], xd[INET6_ADDRSTRLEN];
	char prefix[INET6_ADDRSTRLEN + 8] = "";
	const char *name = ns_event_name(s->event);
	int v6 = s->family == NS_FAMILY_NAT66 || s->family == NS_FAMILY_NAT64;
	size_t w = 0;
	int n;

	n = ns_record_to_json(s, json, sizeof(json));
	NST_FUZZ_CHECK(n > 0 && (size_t)n < sizeof(json), "to_json: %d", n);
	NST_FUZZ_CHECK(strlen(json) == (size_t)n, "length %d, strlen %zu", n,
		       strlen(json));

	/* An event outside 1..3 has no name and is shown as its number. */
	NST_FUZZ_CHECK((name != NULL) == (s->event >= 1 && s->event <= 3),
		       "event %u: name %s", s->event, name ? name : "none");
	format_ipv4(s->orig.saddr, os);
	format_ipv4(s->orig.daddr, od);
	format_ipv4(s->xlat.saddr, xs);
	format_ipv4(s->xlat.daddr, xd);
	if (v6) {
		format_ipv6(r->v6.orig_saddr, os);
		format_ipv6(r->v6.orig_daddr, od);
	}
	if (s->family == NS_FAMILY_NAT66) {
		format_ipv6(r->v6.xlat_saddr, xs);
		format_ipv6(r->v6.xlat_daddr, xd);
	}
	if (s->family == NS_FAMILY_NAT64) {
		uint8_t pre[16] = {0};
		unsigned int bytes = r->v6.prefix_len / 8u;

		memcpy(pre, r->v6.orig_daddr, bytes < 16 ? bytes : 16);
		format_ipv6(pre, prefix);
		snprintf(prefix + strlen(prefix),
			 sizeof(prefix) - strlen(prefix), "/%u",
			 r->v6.prefix_len);
	}
	const struct json_member m[] = {
		{"version", s->version, NULL},
		{"family", s->family, NULL},
		{"event", s->event, name},
		{"proto", s->proto, NULL},
		{"gateway_id", s->gateway_id, NULL},
		{"epoch", s->epoch, NULL},
		{"timeout_ms", s->timeout_ms, NULL},
		{"timestamp_ns", s->timestamp_ns, NULL},
		{"orig_saddr", 0, os},
		{"orig_daddr", 0, od},
		{"orig_sport", s->orig.sport, NULL},
		{"orig_dport", s->orig.dport, NULL},
		{"new_saddr", 0, xs},
		{"new_daddr", 0, xd},
		{"new_sport", s->xlat.sport, NULL},
		{"new_dport", s->xlat.dport, NULL},
		{"prefix", 0, prefix},
	};
	const size_t members = sizeof(m) / sizeof(m[0]) -
			       (s->family == NS_FAMILY_NAT64 ? 0 : 1);

	for (size_t i = 0; i < members; i++) {
		w += (size_t)snprintf(want + w, sizeof(want) - w,
				      "%s\"%s\":", i ? "," : "{", m[i].name);
		if (m[i].str)
			w += (size_t)snprintf(want + w, sizeof(want) - w,
					      "\"%s\"", m[i].str);
		else
			w += (size_t)snprintf(want + w, sizeof(want) - w,
					      "%" PRIu64, m[i].num);
	}
	w += (size_t)snprintf(want + w, sizeof(want) - w, "}");
	NST_FUZZ_CHECK(w == (size_t)n && strcmp(json, want) == 0,
		       "JSON differs from FORMAT.md:\n  got  %s\n  want %s",
		       json, want);

	/* Exactly enough room works; one byte less is -ENOSPC. */
	NST_FUZZ_CHECK(ns_record_to_json(s, small, (size_t)n + 1) == n,
		       "to_json with %d + 1 bytes", n);
	NST_FUZZ_CHECK(ns_record_to_json(s, small, (size_t)n) == -ENOSPC,
		       "to_json with %d bytes did not refuse", n);
}

static void check_decoded(const uint8_t *data, int rc, const struct ns_rec *r)
{
	const struct ns_session *s = &r->s;
	uint8_t again[NS_RECORD_MAX_LEN + 8];
	struct ns_rec r2;
	struct ns_session *s2 = &r2.s;
	int enc;

	NST_FUZZ_CHECK((size_t)rc == ns_record_wire_len(s->family),
		       "consumed %d, family %u has length %zu", rc, s->family,
		       ns_record_wire_len(s->family));
	NST_FUZZ_CHECK(reserved_zero(s), "reserved bytes not zeroed");

	/* encode(decode(x)) == x for the bytes consumed. */
	memset(again, 0xee, sizeof(again));
	enc = ns_record_encode(s, again, sizeof(again));
	NST_FUZZ_CHECK(enc == rc, "re-encode returned %d, decode %d", enc, rc);
	if (memcmp(again, data, (size_t)rc) != 0) {
		nst_fuzz_hexdump("input", data, (size_t)rc);
		nst_fuzz_hexdump("re-encoded", again, (size_t)rc);
		NST_FUZZ_CHECK(0, "encode(decode(x)) != x");
	}
	NST_FUZZ_CHECK(again[rc] == 0xee, "encode wrote past its record");

	NST_FUZZ_CHECK(ns_record_decode_rec(again, (size_t)enc, &r2) == rc,
		       "re-encoded record does not decode");
	NST_FUZZ_CHECK(ns_session_equal_state(s, s2) && s->event == s2->event,
		       "decode(encode(s)) != s");
	NST_FUZZ_CHECK(memcmp(r, &r2, sizeof(r2)) == 0,
		       "decode(encode(s)) differs in a byte");
	NST_FUZZ_CHECK(ns_session_same_flow(s, s2), "same_flow(s, s) is 0");

	/* Every truncation is -EMSGSIZE (version and family are valid). */
	for (size_t cut = 0; cut < (size_t)rc; cut++)
		NST_FUZZ_CHECK(ns_record_decode_rec(data, cut, &r2) ==
				       -EMSGSIZE,
			       "truncated to %zu bytes: not -EMSGSIZE", cut);

	check_json(r);
}

/* The input's first bytes as an in-memory session, through the encoder. */
static void check_encode(const uint8_t *data, size_t size)
{
	uint8_t wire[NS_RECORD_MAX_LEN], untouched[NS_RECORD_MAX_LEN];
	uint8_t model[NS_RECORD_MAX_LEN];
	struct ns_rec r, d;
	size_t len = 0;
	int rc, valid;

	if (size < sizeof(r))
		return;
	memcpy(&r, data, sizeof(r));
	len = ns_record_wire_len(r.s.family);
	valid = r.s.version == 1 && len > 0 && r.s.event >= 1 &&
		r.s.event <= 3 && r.s.proto != 0;
	if (valid && r.s.family == NS_FAMILY_NAT64) {
		/* the NAT64 rules, on the bytes the record would have */
		static const uint8_t zero[sizeof(r.v6.zero)];

		memset(model, 0, sizeof(model));
		memcpy(model + 40, r.v6.orig_daddr, 16);
		model[64] = (uint8_t)(r.s.xlat.daddr >> 24);
		model[65] = (uint8_t)(r.s.xlat.daddr >> 16);
		model[66] = (uint8_t)(r.s.xlat.daddr >> 8);
		model[67] = (uint8_t)r.s.xlat.daddr;
		model[72] = r.v6.prefix_len;
		valid = nst_fuzz_model_nat64(model) &&
			memcmp(r.v6.zero, zero, sizeof(zero)) == 0;
	}
	check_json(&r); /* any field values, as a tool may print them */

	memset(wire, 0x5a, sizeof(wire));
	memset(untouched, 0x5a, sizeof(untouched));
	rc = ns_record_encode(&r.s, wire, len ? len - 1 : 0);
	NST_FUZZ_CHECK(rc == (valid ? -ENOSPC : -EINVAL),
		       "encode into %zu bytes returned %d (valid %d)",
		       len ? len - 1 : 0, rc, valid);
	NST_FUZZ_CHECK(memcmp(wire, untouched, sizeof(wire)) == 0,
		       "a refused encode wrote to the buffer");

	rc = ns_record_encode(&r.s, wire, sizeof(wire));
	if (!valid) {
		NST_FUZZ_CHECK(rc == -EINVAL,
			       "encode of an invalid session "
			       "returned %d",
			       rc);
		return;
	}
	NST_FUZZ_CHECK(rc == (int)len, "encode returned %d", rc);
	NST_FUZZ_CHECK(ns_record_decode_rec(wire, (size_t)rc, &d) == rc,
		       "encode wrote a record decode refuses");
	NST_FUZZ_CHECK(ns_session_equal_state(&r.s, &d.s) &&
			       r.s.event == d.s.event,
		       "decode(encode(s)) != s");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ns_rec r, sentinel;
	struct ns_session one;
	int rc, rc1, want;

	memset(&r, 0xa5, sizeof(r));
	memset(&sentinel, 0xa5, sizeof(sentinel));
	rc = ns_record_decode_rec(data, size, &r);
	want = nst_fuzz_model_record(data, size);
	if (rc != want) {
		nst_fuzz_hexdump("input", data, size);
		NST_FUZZ_CHECK(0, "decode returned %d, FORMAT.md says %d", rc,
			       want);
	}
	/* The one-line reader: the same, IPv6 refused. */
	memset(&one, 0xa5, sizeof(one));
	rc1 = ns_record_decode(data, size, &one);
	NST_FUZZ_CHECK(rc1 == (rc > 0 && data[1] != 4 ? -EAFNOSUPPORT : rc),
		       "one-line decode returned %d, the reader %d", rc1, rc);
	NST_FUZZ_CHECK(rc1 < 0 || memcmp(&one, &r.s, sizeof(one)) == 0,
		       "one-line decode differs");
	NST_FUZZ_CHECK(rc1 >= 0 || memcmp(&one, &sentinel.s, sizeof(one)) == 0,
		       "a refused one-line decode wrote *out");
	if (rc < 0)
		NST_FUZZ_CHECK(memcmp(&r, &sentinel, sizeof(r)) == 0,
			       "a refused decode (%d) wrote *out", rc);
	else
		check_decoded(data, rc, &r);

	check_encode(data, size);
	return 0;
}
