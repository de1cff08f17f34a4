/*
 * fuzz_batch.c - libFuzzer target: the batch decoder, its iterator and the
 * batch MAC, as a subscriber meets them: any bytes another client
 * publishes on a notification channel.
 *
 * Properties, for every input:
 * - ns_batch_decode accepts exactly the batches schema/FORMAT.md's table
 *   accepts and returns the error it names otherwise, judged by a model
 *   written here from that table (records judged by the record table, not
 *   by ns_record_decode); on refusal it writes neither *h nor *body.
 * - an accepted batch: the header fields (version 1 or 2) are the
 *   documented bytes and re-encode to them; the iterator yields exactly
 *   count records of any family mix (IPv4, NAT66, NAT64), each the record
 *   at its offset, moving by its family's length and re-encoding to its
 *   bytes, then 0 for ever.
 * - every truncation of an accepted batch is -EMSGSIZE; one byte more, a
 *   wrong magic, version, flags or reserved byte, the HMAC, RESYNC or
 *   REWRITE flag flipped or the other version's number, is refused as the
 *   model says.
 * - ns_batch_verify accepts a batch only with the HMAC flag and a trailer
 *   that is ns_batch_mac of the rest under the key: signing an accepted
 *   batch makes it verify, and any one flipped bit, or another key, makes
 *   it fail; it never accepts a batch without the flag, and reads nothing
 *   outside the input whatever its length. ns_batch_mac is checked
 *   against RFC 4231's test vector once at start-up.
 * - the iterator run over arbitrary bytes (the input, and the input after
 *   a header) stays within them: it moves one record length per record,
 *   stops at the end and reports the record decoder's refusal otherwise.
 * AddressSanitizer turns any read past the input into a crash.
 *
 * Not here: sequence numbers and what a standby does with a batch.
 */
#include <errno.h>
#include <string.h>

#include "ns_batch.h"
#include "nst_fuzz.h"

/* Every truncation is checked for batches up to this size, a sample of
 * cuts above it. */
#define ALL_CUTS_MAX 4096

static uint8_t copy[NS_BATCH_MAX_LEN + 1];

static const uint8_t key[] = "natsync fuzz batch key";
static const uint8_t other_key[] = "natsync fuzz batch kez";

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* The header length of the version byte v (1 or 2). */
static size_t hdr_len_of(uint8_t v)
{
	return v == 1 ? 32 : 48;
}

/* FORMAT.md's batch table, in its order. */
static int model_batch(const uint8_t *b, size_t len)
{
	size_t body_len, pos, n = 0, count, trailer, hdr;

	if (len < 32 || len > 48 + 4096 * 96 + 32)
		return -EMSGSIZE;
	if (be32(b) != 0x4e534231u)
		return -EBADMSG;
	if ((b[4] != 1 && b[4] != 2) || (b[5] & ~0x0f) != 0)
		return -EPROTO;
	hdr = hdr_len_of(b[4]);
	trailer = b[5] & 0x01 ? 32 : 0;
	if (len < hdr + trailer || len > hdr + 4096 * 96 + 32)
		return -EMSGSIZE;
	for (pos = 42; pos < hdr; pos++)
		if (b[pos] != 0)
			return -EPROTO;
	count = (size_t)b[6] << 8 | b[7];
	body_len = be32(b + 28);
	/* RESYNC (0x04): no records, and not a store value. */
	if ((b[5] & 0x04) && (count != 0 || (b[5] & 0x02)))
		return -EPROTO;
	/* REWRITE (0x08): records, neither a store value nor a resync. */
	if ((b[5] & 0x08) && (b[5] & 0x06))
		return -EPROTO;
	if (count > 4096)
		return -EMSGSIZE;
	if (body_len > len - hdr - trailer)
		return -EMSGSIZE;
	if (body_len < len - hdr - trailer)
		return -EINVAL;
	for (pos = hdr; pos < hdr + body_len; n++) {
		int rc = nst_fuzz_model_record(b + pos, hdr + body_len - pos);

		if (rc < 0)
			return -EINVAL;
		pos += (size_t)rc;
	}
	return n == count ? 0 : -EINVAL;
}

/* decode must say what the model says. */
static void check_against_model(const uint8_t *b, size_t len, const char *what)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	int rc = ns_batch_decode(b, len, &h, &body), want = model_batch(b, len);

	if (rc != want) {
		nst_fuzz_hexdump(what, b, len);
		NST_FUZZ_CHECK(0, "%s: decode returned %d, FORMAT.md says %d",
			       what, rc, want);
	}
}

static void check_header(const uint8_t *data, const struct ns_batch_hdr *h)
{
	uint8_t hdr[NS_BATCH_HDR_LEN];
	const size_t len = hdr_len_of(data[4]);
	uint64_t seq = (uint64_t)be32(data + 20) << 32 | be32(data + 24);
	uint64_t sent =
		len == 32 ? 0
			  : (uint64_t)be32(data + 32) << 32 | be32(data + 36);
	uint16_t channel = len == 32 ? 0 : (uint16_t)(data[40] << 8 | data[41]);

	NST_FUZZ_CHECK(h->count == ((uint16_t)data[6] << 8 | data[7]) &&
			       h->version == data[4] && h->flags == data[5] &&
			       h->publisher_id == be32(data + 8) &&
			       h->gateway_id == be32(data + 12) &&
			       h->epoch == be32(data + 16) && h->seq == seq &&
			       h->body_len == be32(data + 28) &&
			       h->sent_ns == sent && h->channel_slot == channel,
		       "header fields differ from their bytes");
	NST_FUZZ_CHECK(ns_batch_hdr_encode(h, hdr) == len &&
			       memcmp(hdr, data, len) == 0,
		       "header does not re-encode to its bytes");
}

static void check_records(const struct ns_batch_hdr *h, const uint8_t *body)
{
	uint8_t wire[NS_RECORD_MAX_LEN];
	struct ns_batch_iter it;
	struct ns_rec r;
	size_t off = 0;
	uint32_t n = 0;
	int rc;

	ns_batch_iter_init(&it, body, h->body_len);
	while ((rc = ns_batch_iter_next_rec(&it, &r)) == 1) {
		size_t len = ns_record_wire_len(r.s.family);

		NST_FUZZ_CHECK(n < h->count, "iterator yields more than count");
		NST_FUZZ_CHECK(len > 0 && it.pos == body + off + len,
			       "iterator moved by %td, not one record",
			       it.pos - (body + off));
		NST_FUZZ_CHECK(ns_record_encode(&r.s, wire, sizeof(wire)) ==
					       (int)len &&
				       memcmp(wire, body + off, len) == 0,
			       "record %u does not re-encode to its bytes", n);
		off += len;
		n++;
	}
	NST_FUZZ_CHECK(rc == 0, "iterator failed (%d) on an accepted batch",
		       rc);
	NST_FUZZ_CHECK(n == h->count && off == h->body_len,
		       "iterated %u records, %zu bytes; header says %u, %u", n,
		       off, h->count, h->body_len);
	NST_FUZZ_CHECK(ns_batch_iter_next_rec(&it, &r) == 0,
		       "iterator did not stay at its end");
}

/* Truncations, one byte more, and a bad magic, version or flags byte. */
static void check_neighbours(const uint8_t *data, size_t size)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t step = size <= ALL_CUTS_MAX ? 1 : size / 64;
	int rc;

	for (size_t cut = 0; cut < size; cut += step) {
		rc = ns_batch_decode(data, cut, &h, &body);
		NST_FUZZ_CHECK(rc == -EMSGSIZE,
			       "truncated to %zu of %zu bytes: %d", cut, size,
			       rc);
	}
	NST_FUZZ_CHECK(ns_batch_decode(data, size - 1, &h, &body) == -EMSGSIZE,
		       "one byte short is not -EMSGSIZE");

	memcpy(copy, data, size);
	copy[size] = 0;
	rc = ns_batch_decode(copy, size + 1, &h, &body);
	NST_FUZZ_CHECK(
		rc == (size == hdr_len_of(data[4]) +
					       NS_BATCH_MAX_RECORDS *
						       NS_RECORD_MAX_LEN +
					       NS_BATCH_MAC_LEN
			       ? -EMSGSIZE
			       : -EINVAL),
		"a trailing byte gave %d", rc);

	copy[0] ^= 0x01;
	NST_FUZZ_CHECK(ns_batch_decode(copy, size, &h, &body) == -EBADMSG,
		       "a wrong magic was not -EBADMSG");
	copy[0] ^= 0x01;
	copy[4] = 3;
	NST_FUZZ_CHECK(ns_batch_decode(copy, size, &h, &body) == -EPROTO,
		       "version 3 was not -EPROTO");
	copy[4] = (uint8_t)(3 - data[4]);
	check_against_model(copy, size, "the other version");
	copy[4] = data[4];
	if (data[4] == 2) {
		copy[47] = 1;
		NST_FUZZ_CHECK(ns_batch_decode(copy, size, &h, &body) ==
				       -EPROTO,
			       "a reserved byte was not -EPROTO");
		copy[47] = 0;
	}
	copy[5] = (uint8_t)(data[5] | 0x10);
	NST_FUZZ_CHECK(ns_batch_decode(copy, size, &h, &body) == -EPROTO,
		       "an unknown flag was not -EPROTO");
	copy[5] = (uint8_t)(data[5] ^ NS_BATCH_F_RESYNC);
	check_against_model(copy, size, "RESYNC flag flipped");
	copy[5] = (uint8_t)(data[5] ^ NS_BATCH_F_HMAC);
	check_against_model(copy, size, "HMAC flag flipped");
	copy[5] = (uint8_t)(data[5] ^ NS_BATCH_F_REWRITE);
	check_against_model(copy, size, "REWRITE flag flipped");
}

/* The trailer of an accepted batch, under the MAC. */
static void check_mac(const uint8_t *data, size_t size)
{
	uint8_t mac[NS_BATCH_MAC_LEN];
	size_t signed_len, bit;
	int rc;

	rc = ns_batch_verify(data, size, key, sizeof(key) - 1);
	if (!(data[5] & NS_BATCH_F_HMAC)) {
		NST_FUZZ_CHECK(rc == -EACCES,
			       "a batch without the HMAC flag verified (%d)",
			       rc);
		return;
	}
	signed_len = size - NS_BATCH_MAC_LEN;
	NST_FUZZ_CHECK(
		ns_batch_mac(key, sizeof(key) - 1, data, signed_len, mac) == 0,
		"ns_batch_mac failed");
	NST_FUZZ_CHECK(rc == (memcmp(mac, data + signed_len, sizeof(mac)) == 0
				      ? 0
				      : -EACCES),
		       "verify returned %d for a trailer that %s the MAC", rc,
		       rc ? "is" : "is not");

	/* Signed, it verifies under its key only, and no bit can change. */
	memcpy(copy, data, signed_len);
	memcpy(copy + signed_len, mac, sizeof(mac));
	NST_FUZZ_CHECK(ns_batch_verify(copy, size, key, sizeof(key) - 1) == 0,
		       "a signed batch does not verify");
	NST_FUZZ_CHECK(ns_batch_verify(copy, size, other_key,
				       sizeof(other_key) - 1) == -EACCES,
		       "a batch verified under another key");
	bit = ((size_t)data[size - 1] << 8 | data[size - 2]) % (size * 8);
	copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	rc = ns_batch_verify(copy, size, key, sizeof(key) - 1);
	NST_FUZZ_CHECK(rc == -EACCES,
		       "flipping bit %zu kept the MAC valid (%d)", bit, rc);
}

/* The iterator over bytes no decoder vetted. */
static void check_raw_iter(const uint8_t *p, size_t len)
{
	struct ns_batch_iter it;
	struct ns_rec r;
	size_t steps = 0, off = 0;
	int rc;

	ns_batch_iter_init(&it, p, (uint32_t)len);
	for (;;) {
		const uint8_t *before = it.pos;
		int want = off < len ? nst_fuzz_model_record(p + off, len - off)
				     : 0;

		rc = ns_batch_iter_next_rec(&it, &r);
		NST_FUZZ_CHECK(rc == (want > 0 ? 1 : want),
			       "iterator at %zu returned %d, expected %d", off,
			       rc, want);
		if (rc != 1) {
			NST_FUZZ_CHECK(it.pos == before,
				       "iterator moved on a refusal");
			break;
		}
		off += (size_t)want;
		NST_FUZZ_CHECK(it.pos == p + off && it.pos <= it.end,
			       "iterator left the bytes");
		NST_FUZZ_CHECK(++steps <= len / NS_RECORD_V1_IPV4_LEN,
			       "more records than bytes allow");
	}
}

/* RFC 4231, test case 2. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char data[] = "what do ya want for nothing?";
	static const uint8_t want[NS_BATCH_MAC_LEN] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
		0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
		0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83,
		0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
	uint8_t mac[NS_BATCH_MAC_LEN];

	(void)argc;
	(void)argv;
	NST_FUZZ_CHECK(ns_batch_mac((const uint8_t *)"Jefe", 4,
				    (const uint8_t *)data, sizeof(data) - 1,
				    mac) == 0 &&
			       memcmp(mac, want, sizeof(mac)) == 0,
		       "ns_batch_mac is not HMAC-SHA256 (RFC 4231 case 2)");
	NST_FUZZ_CHECK(ns_batch_mac(key, 0, (const uint8_t *)data, 1, mac) ==
			       -EINVAL,
		       "ns_batch_mac accepted an empty key");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ns_batch_hdr h, h_sentinel;
	const uint8_t *body = (const uint8_t *)&h_sentinel;
	int rc, want;

	if (size > NS_BATCH_MAX_LEN + 64)
		return -1; /* not added to the corpus */

	memset(&h, 0xa5, sizeof(h));
	memset(&h_sentinel, 0xa5, sizeof(h_sentinel));
	rc = ns_batch_decode(data, size, &h, &body);
	want = model_batch(data, size);
	if (rc != want) {
		nst_fuzz_hexdump("input", data, size);
		NST_FUZZ_CHECK(0, "decode returned %d, FORMAT.md says %d", rc,
			       want);
	}
	if (rc == 0) {
		NST_FUZZ_CHECK(body == data + hdr_len_of(data[4]),
			       "body is not after the header");
		check_header(data, &h);
		check_records(&h, body);
		check_neighbours(data, size);
		check_mac(data, size);
	} else {
		NST_FUZZ_CHECK(memcmp(&h, &h_sentinel, sizeof(h)) == 0 &&
				       body == (const uint8_t *)&h_sentinel,
			       "a refused decode (%d) wrote its outputs", rc);
	}

	rc = ns_batch_verify(data, size, key, sizeof(key) - 1);
	NST_FUZZ_CHECK(rc == 0 || rc == -EACCES, "verify returned %d", rc);
	check_raw_iter(data, size);
	if (size >= NS_BATCH_HDR_LEN)
		check_raw_iter(data + NS_BATCH_HDR_LEN,
			       size - NS_BATCH_HDR_LEN);
	return 0;
}
