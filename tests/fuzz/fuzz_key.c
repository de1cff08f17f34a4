/*
 * fuzz_key.c - libFuzzer target: the store key parser, slots and channel
 * names, as a standby meets them when it resynchronises from keys another
 * client may have written (CLUSTER GETKEYSINSLOT returns any key).
 *
 * Properties, for every input:
 * - ns_key_parse accepts exactly the 16-byte keys that start with "ns:"
 *   and have a non-zero protocol, ns_key_build of what it parsed gives the
 *   key back, and a refusal writes nothing; ns_key_parse_v6 the same for
 *   the 40-byte keys of IPv6 inside tuples, with ns_key_build_v6.
 * - ns_crc16 equals a bit-by-bit CRC16-CCITT/XMODEM written here, and
 *   ns_key_slot equals the cluster specification's hash-tag rule written
 *   here, for any bytes.
 * - ns_channel_for_slot, for the slot the input's first two bytes name,
 *   gives "ns:b:{N}" with the smallest such N (table computed here from
 *   the reference CRC at start-up), whose slot is that slot; a slot out of
 *   range is -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ns_slot.h"
#include "../nst_crc16.h"
#include "nst_fuzz.h"

static uint32_t ref_channel_n[NS_SLOTS];

/* keyHashSlot() of the cluster specification. */
static uint16_t ref_slot(const uint8_t *k, size_t len)
{
	size_t s, e;

	for (s = 0; s < len; s++)
		if (k[s] == '{')
			break;
	if (s == len)
		return nst_crc16_bitwise(k, len) & 16383;
	for (e = s + 1; e < len; e++)
		if (k[e] == '}')
			break;
	if (e == len || e == s + 1)
		return nst_crc16_bitwise(k, len) & 16383;
	return nst_crc16_bitwise(k + s + 1, e - s - 1) & 16383;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	uint32_t left = NS_SLOTS;
	static uint8_t seen[NS_SLOTS];
	char num[16];

	(void)argc;
	(void)argv;
	for (uint32_t n = 0; left > 0; n++) {
		int len = snprintf(num, sizeof(num), "%u", n);
		uint16_t slot =
			nst_crc16_bitwise((const uint8_t *)num, (size_t)len) &
			16383;

		if (!seen[slot]) {
			seen[slot] = 1;
			ref_channel_n[slot] = n;
			left--;
		}
	}
	return 0;
}

static void check_parse(const uint8_t *data, size_t size)
{
	struct ns_tuple t, t_sentinel;
	uint8_t proto = 0xa5, key[NS_KEY_LEN];
	int valid = size == NS_KEY_LEN && memcmp(data, "ns:", 3) == 0 &&
		    data[3] != 0;
	int rc;

	memset(&t, 0xa5, sizeof(t));
	memset(&t_sentinel, 0xa5, sizeof(t_sentinel));
	rc = ns_key_parse(data, size, &proto, &t);
	NST_FUZZ_CHECK(rc == (valid ? 0 : -EINVAL),
		       "parse returned %d for a %s key", rc,
		       valid ? "valid" : "invalid");
	if (!valid) {
		NST_FUZZ_CHECK(proto == 0xa5 &&
				       memcmp(&t, &t_sentinel, sizeof(t)) == 0,
			       "a refused parse wrote its outputs");
		return;
	}
	ns_key_build(proto, &t, key);
	if (memcmp(key, data, NS_KEY_LEN) != 0) {
		nst_fuzz_hexdump("input", data, size);
		nst_fuzz_hexdump("rebuilt", key, sizeof(key));
		NST_FUZZ_CHECK(0, "build(parse(key)) != key");
	}
}

static void check_parse_v6(const uint8_t *data, size_t size)
{
	uint8_t proto = 0xa5, saddr[16], daddr[16], key[NS_KEY_V6_LEN];
	uint8_t untouched[16];
	uint16_t sport = 0xa5a5, dport = 0xa5a5;
	int valid = size == NS_KEY_V6_LEN && memcmp(data, "ns:", 3) == 0 &&
		    data[3] != 0;
	int rc;

	memset(saddr, 0xa5, sizeof(saddr));
	memset(daddr, 0xa5, sizeof(daddr));
	memset(untouched, 0xa5, sizeof(untouched));
	rc = ns_key_parse_v6(data, size, &proto, saddr, &sport, daddr, &dport);
	NST_FUZZ_CHECK(rc == (valid ? 0 : -EINVAL),
		       "parse_v6 returned %d for a %s key", rc,
		       valid ? "valid" : "invalid");
	if (!valid) {
		NST_FUZZ_CHECK(proto == 0xa5 && sport == 0xa5a5 &&
				       dport == 0xa5a5 &&
				       memcmp(saddr, untouched, 16) == 0 &&
				       memcmp(daddr, untouched, 16) == 0,
			       "a refused parse_v6 wrote its outputs");
		return;
	}
	ns_key_build_v6(proto, saddr, sport, daddr, dport, key);
	if (memcmp(key, data, NS_KEY_V6_LEN) != 0) {
		nst_fuzz_hexdump("input", data, size);
		nst_fuzz_hexdump("rebuilt", key, sizeof(key));
		NST_FUZZ_CHECK(0, "build_v6(parse_v6(key)) != key");
	}
}

static void check_channel(const uint8_t *data, size_t size)
{
	char buf[NS_CHANNEL_MAX], want[NS_CHANNEL_MAX];
	uint16_t slot;
	int rc;

	if (size < 2)
		return;
	slot = (uint16_t)(data[0] << 8 | data[1]);
	memset(buf, 0x7f, sizeof(buf));
	rc = ns_channel_for_slot(slot, buf);
	if (slot >= NS_SLOTS) {
		NST_FUZZ_CHECK(rc == -EINVAL, "slot %u gave %d", slot, rc);
		return;
	}
	snprintf(want, sizeof(want), "ns:b:{%u}", ref_channel_n[slot]);
	NST_FUZZ_CHECK(rc > 0 && (size_t)rc == strlen(want) &&
			       strcmp(buf, want) == 0,
		       "slot %u: channel '%.*s' (%d), expected '%s'", slot,
		       NS_CHANNEL_MAX, buf, rc, want);
	NST_FUZZ_CHECK(ns_key_slot(buf, (size_t)rc) == slot,
		       "channel %s is not in slot %u", buf, slot);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint16_t crc = ns_crc16(data, size), slot = ns_key_slot(data, size);

	NST_FUZZ_CHECK(crc == nst_crc16_bitwise(data, size),
		       "crc16 %04x, reference %04x", crc,
		       nst_crc16_bitwise(data, size));
	NST_FUZZ_CHECK(slot == ref_slot(data, size), "slot %u, reference %u",
		       slot, ref_slot(data, size));
	check_parse(data, size);
	check_parse_v6(data, size);
	check_channel(data, size);
	return 0;
}
