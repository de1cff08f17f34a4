/*
 * fuzz_record.c - libFuzzer target: the session record decoder, its JSON
 * form and the encoder, against the rules of schema/FORMAT.md.
 *
 * Properties, for every input:
 * - ns_record_decode returns what FORMAT.md's refusal table says, in its
 *   documented order (version before length), and writes *out only on
 *   success; a success consumes exactly the family's wire length.
 * - encode(decode(x)) == x for the bytes consumed, and decoding that again
 *   gives the same session; the reserved bytes come back zeroed.
 * - every truncation of a record that decodes is -EMSGSIZE.
 * - ns_record_to_json of a decoded session is one NUL-terminated JSON
 *   object whose fields read back to the session, and it refuses a
 *   buffer one byte too short with -ENOSPC.
 * - the first 64 bytes taken as a struct ns_session: its JSON form is the
 *   documented one whatever the field values; encode either refuses
 *   it for a reason FORMAT.md names or writes a record that decodes back
 *   to the same state and event (encode never writes what decode
 *   refuses); with too small a buffer it writes nothing.
 *
 * Not here: batches (fuzz_batch.c), keys (fuzz_key.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ns_record.h"
#include "nst_fuzz.h"

#define JSON_CAP 512

/* FORMAT.md, "A decoder refuses a record with", in its order. */
static int expected_decode(const uint8_t *buf, size_t len)
{
	if (len < 1)
		return -EMSGSIZE;
	if (buf[0] != 1)
		return -EPROTO;
	if (len < 2)
		return -EMSGSIZE;
	if (buf[1] != 4)
		return -EAFNOSUPPORT;
	if (len < 48)
		return -EMSGSIZE;
	if (buf[3] < 1 || buf[3] > 3 || buf[2] == 0)
		return -EINVAL;
	return 48;
}

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

/* The JSON of s, field by field, as FORMAT.md writes it. */
static void check_json(const struct ns_session *s)
{
	char json[JSON_CAP], small[JSON_CAP], want[JSON_CAP], ev[16];
	char os[16], od[16], xs[16], xd[16];
	const char *name = ns_event_name(s->event);
	int n, w;

	n = ns_record_to_json(s, json, sizeof(json));
	NST_FUZZ_CHECK(n > 0 && (size_t)n < sizeof(json), "to_json: %d", n);
	NST_FUZZ_CHECK(strlen(json) == (size_t)n, "length %d, strlen %zu", n,
		       strlen(json));

	/* An independent rendering of the documented form: an event outside
	 * 1..3 is shown as its number. */
	NST_FUZZ_CHECK((name != NULL) == (s->event >= 1 && s->event <= 3),
		       "event %u: name %s", s->event, name ? name : "none");
	if (name)
		snprintf(ev, sizeof(ev), "\"%s\"", name);
	else
		snprintf(ev, sizeof(ev), "%u", s->event);
	format_ipv4(s->orig.saddr, os);
	format_ipv4(s->orig.daddr, od);
	format_ipv4(s->xlat.saddr, xs);
	format_ipv4(s->xlat.daddr, xd);
	w = snprintf(want, sizeof(want),
		     "{\"version\":%u,\"family\":%u,\"event\":%s,\"proto\":%u,"
		     "\"gateway_id\":%" PRIu32 ",\"epoch\":%" PRIu32
		     ",\"timeout_ms\":%" PRIu32 ",\"timestamp_ns\":%" PRIu64
		     ",\"orig_saddr\":\"%s\",\"orig_daddr\":\"%s\","
		     "\"orig_sport\":%u,\"orig_dport\":%u,"
		     "\"new_saddr\":\"%s\",\"new_daddr\":\"%s\","
		     "\"new_sport\":%u,\"new_dport\":%u}",
		     s->version, s->family, ev, s->proto, s->gateway_id,
		     s->epoch, s->timeout_ms, s->timestamp_ns, os, od,
		     s->orig.sport, s->orig.dport, xs, xd, s->xlat.sport,
		     s->xlat.dport);
	NST_FUZZ_CHECK(w == n && strcmp(json, want) == 0,
		       "JSON differs from FORMAT.md:\n  got  %s\n  want %s",
		       json, want);

	/* Exactly enough room works; one byte less is -ENOSPC. */
	NST_FUZZ_CHECK(ns_record_to_json(s, small, (size_t)n + 1) == n,
		       "to_json with %d + 1 bytes", n);
	NST_FUZZ_CHECK(ns_record_to_json(s, small, (size_t)n) == -ENOSPC,
		       "to_json with %d bytes did not refuse", n);
}

static void check_decoded(const uint8_t *data, int rc,
			  const struct ns_session *s)
{
	uint8_t again[NS_RECORD_MAX_LEN + 8];
	struct ns_session s2;
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

	NST_FUZZ_CHECK(ns_record_decode(again, (size_t)enc, &s2) == rc,
		       "re-encoded record does not decode");
	NST_FUZZ_CHECK(ns_session_equal_state(s, &s2) && s->event == s2.event,
		       "decode(encode(s)) != s");
	NST_FUZZ_CHECK(ns_session_same_flow(s, &s2), "same_flow(s, s) is 0");

	/* Every truncation is -EMSGSIZE (version and family are valid). */
	for (size_t cut = 0; cut < (size_t)rc; cut++)
		NST_FUZZ_CHECK(ns_record_decode(data, cut, &s2) == -EMSGSIZE,
			       "truncated to %zu bytes: not -EMSGSIZE", cut);

	check_json(s);
}

/* The input's first bytes as an in-memory session, through the encoder. */
static void check_encode(const uint8_t *data, size_t size)
{
	uint8_t wire[NS_RECORD_MAX_LEN], untouched[NS_RECORD_MAX_LEN];
	struct ns_session s, d;
	int rc, valid;

	if (size < sizeof(s))
		return;
	memcpy(&s, data, sizeof(s));
	valid = s.version == 1 && s.family == 4 && s.event >= 1 &&
		s.event <= 3 && s.proto != 0;
	check_json(&s); /* any field values, as a tool may print them */

	memset(wire, 0x5a, sizeof(wire));
	memset(untouched, 0x5a, sizeof(untouched));
	rc = ns_record_encode(&s, wire, sizeof(wire) - 1);
	NST_FUZZ_CHECK(rc == (valid ? -ENOSPC : -EINVAL),
		       "encode into 47 bytes returned %d (valid %d)", rc,
		       valid);
	NST_FUZZ_CHECK(memcmp(wire, untouched, sizeof(wire)) == 0,
		       "a refused encode wrote to the buffer");

	rc = ns_record_encode(&s, wire, sizeof(wire));
	if (!valid) {
		NST_FUZZ_CHECK(rc == -EINVAL,
			       "encode of an invalid session "
			       "returned %d",
			       rc);
		return;
	}
	NST_FUZZ_CHECK(rc == NS_RECORD_V1_IPV4_LEN, "encode returned %d", rc);
	NST_FUZZ_CHECK(ns_record_decode(wire, (size_t)rc, &d) == rc,
		       "encode wrote a record decode refuses");
	NST_FUZZ_CHECK(ns_session_equal_state(&s, &d) && s.event == d.event,
		       "decode(encode(s)) != s");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ns_session s, sentinel;
	int rc, want;

	memset(&s, 0xa5, sizeof(s));
	memset(&sentinel, 0xa5, sizeof(sentinel));
	rc = ns_record_decode(data, size, &s);
	want = expected_decode(data, size);
	if (rc != want) {
		nst_fuzz_hexdump("input", data, size);
		NST_FUZZ_CHECK(0, "decode returned %d, FORMAT.md says %d", rc,
			       want);
	}
	if (rc < 0)
		NST_FUZZ_CHECK(memcmp(&s, &sentinel, sizeof(s)) == 0,
			       "a refused decode (%d) wrote *out", rc);
	else
		check_decoded(data, rc, &s);

	check_encode(data, size);
	return 0;
}
