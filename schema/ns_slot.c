/*
 * ns_slot.c - Redis Cluster hash slots and natsync's key and channel names.
 *
 * A cluster client must compute a key's slot exactly as the servers do, or
 * every command comes back MOVED; so CRC16 and the hash-tag rules here copy
 * the cluster specification (Redis src/crc16.c and keyHashSlot()) byte for
 * byte, and the integration test checks them against CLUSTER KEYSLOT.
 *
 * Keys are binary and fixed-size (NS_KEY_LEN): one key per session, derived
 * only from the inside tuple and protocol, so the active and the standby
 * name a session the same way without agreeing on anything else.
 *
 * Channels: one per slot, "ns:b:{N}" with N the smallest decimal number
 * whose CRC16 lands in that slot. The mapping is a pure function of the
 * slot, so publishers and subscribers need no shared configuration; it is
 * computed once per process (64 KiB table, a few milliseconds) and is
 * read-only afterwards.
 *
 * Not here: the slot-to-node map (the agent's router owns it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ns_slot.h"
#include "ns_wire.h"

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection,
 * no final xor; the variant Redis Cluster uses. */
static const uint16_t crc16_tab[256] = {
	0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108,
	0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210,
	0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6, 0x9339, 0x8318, 0xb37b,
	0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
	0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee,
	0xf5cf, 0xc5ac, 0xd58d, 0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6,
	0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d,
	0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
	0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5,
	0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc,
	0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a, 0x6ca6, 0x7c87, 0x4ce4,
	0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
	0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13,
	0x2e32, 0x1e51, 0x0e70, 0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a,
	0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e,
	0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
	0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1,
	0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb,
	0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d, 0x34e2, 0x24c3, 0x14a0,
	0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
	0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657,
	0x7676, 0x4615, 0x5634, 0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9,
	0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882,
	0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
	0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e,
	0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07,
	0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1, 0xef1f, 0xff3e, 0xcf5d,
	0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
	0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

/* Eight bytes at a time (slicing by 8): crc8_tab[k][b] is the CRC of byte b
 * followed by k zero bytes. The CRC is linear and not reflected, so the
 * register folds into the first two of the eight bytes and each byte's
 * share is one lookup, none waiting on another: a session key's slot
 * (16 B) is two steps instead of sixteen dependent ones (every key the
 * writers send, every entry a table creates, every record a resync of
 * one master keeps). */
static uint16_t crc8_tab[8][256];

/* At load time, before main and any thread: no check on each call (the
 * fast path computes a slot for every session it creates). */
__attribute__((constructor)) static void crc8_init(void)
{
	for (unsigned int b = 0; b < 256; b++) {
		crc8_tab[0][b] = crc16_tab[b];
		for (unsigned int k = 1; k < 8; k++) {
			uint16_t v = crc8_tab[k - 1][b];

			crc8_tab[k][b] = (uint16_t)(v << 8) ^ crc16_tab[v >> 8];
		}
	}
}

uint16_t ns_crc16(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint16_t crc = 0;

	for (; len >= 8; p += 8, len -= 8)
		crc = crc8_tab[7][(crc >> 8) ^ p[0]] ^
		      crc8_tab[6][(crc & 0xff) ^ p[1]] ^ crc8_tab[5][p[2]] ^
		      crc8_tab[4][p[3]] ^ crc8_tab[3][p[4]] ^
		      crc8_tab[2][p[5]] ^ crc8_tab[1][p[6]] ^ crc8_tab[0][p[7]];
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)(crc << 8) ^ crc16_tab[(crc >> 8) ^ p[i]];
	return crc;
}

/* The first c in p[0..len), or NULL: memchr, inline for the short keys
 * hashed here (the call cost as much as the CRC). */
static const uint8_t *find_byte(const uint8_t *p, size_t len, uint8_t c)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] == c)
			return p + i;
	return NULL;
}

uint16_t ns_key_slot(const void *key, size_t len)
{
	const uint8_t *k = key;
	const uint8_t *open, *close;

	/* Hash only what lies between the first '{' and the first '}' after
	 * it, and only when that is non-empty; otherwise the whole key. */
	open = find_byte(k, len, '{');
	if (open) {
		size_t after = len - (size_t)(open - k) - 1;

		close = find_byte(open + 1, after, '}');
		if (close && close > open + 1)
			return ns_crc16(open + 1, (size_t)(close - open - 1)) &
			       (NS_SLOTS - 1);
	}
	return ns_crc16(k, len) & (NS_SLOTS - 1);
}

void ns_key_build(uint8_t proto, const struct ns_tuple *orig,
		  uint8_t key[NS_KEY_LEN])
{
	/* "ns:", proto, then saddr, sport, daddr, dport in network order */
	memcpy(key, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN);
	key[3] = proto;
	put32(key + 4, orig->saddr);
	put16(key + 8, orig->sport);
	put32(key + 10, orig->daddr);
	put16(key + 14, orig->dport);
}

int ns_key_parse(const void *key, size_t len, uint8_t *proto,
		 struct ns_tuple *orig)
{
	const uint8_t *k = key;

	if (len != NS_KEY_LEN ||
	    memcmp(k, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN) != 0 || k[3] == 0)
		return -EINVAL;
	*proto = k[3];
	orig->saddr = get32(k + 4);
	orig->sport = get16(k + 8);
	orig->daddr = get32(k + 10);
	orig->dport = get16(k + 14);
	return 0;
}

void ns_key_build_v6(uint8_t proto, const uint8_t saddr[16], uint16_t sport,
		     const uint8_t daddr[16], uint16_t dport,
		     uint8_t key[NS_KEY_V6_LEN])
{
	memcpy(key, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN);
	key[3] = proto;
	memcpy(key + 4, saddr, 16);
	put16(key + 20, sport);
	memcpy(key + 22, daddr, 16);
	put16(key + 38, dport);
}

int ns_key_parse_v6(const void *key, size_t len, uint8_t *proto,
		    uint8_t saddr[16], uint16_t *sport, uint8_t daddr[16],
		    uint16_t *dport)
{
	const uint8_t *k = key;

	if (len != NS_KEY_V6_LEN ||
	    memcmp(k, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN) != 0 || k[3] == 0)
		return -EINVAL;
	*proto = k[3];
	memcpy(saddr, k + 4, 16);
	*sport = get16(k + 20);
	memcpy(daddr, k + 22, 16);
	*dport = get16(k + 38);
	return 0;
}

size_t ns_key_of(const struct ns_session *s, uint8_t key[NS_KEY_MAX])
{
	const struct ns_session_v6 *v6;

	if (!ns_family_is_v6(s->family)) {
		ns_key_build(s->proto, &s->orig, key);
		return NS_KEY_LEN;
	}
	v6 = ns_session_v6_of(s);
	ns_key_build_v6(s->proto, v6->orig_saddr, s->orig.sport, v6->orig_daddr,
			s->orig.dport, key);
	return NS_KEY_V6_LEN;
}

/* Every slot is reached well before this (the last one at N = 109757);
 * the bound only keeps the search finite. */
#define CHANNEL_SEARCH_MAX 10000000u

static uint32_t channel_n[NS_SLOTS];
static int channel_table_ok;
static pthread_once_t channel_once = PTHREAD_ONCE_INIT;

static void channel_table_build(void)
{
	static uint8_t filled[NS_SLOTS];
	uint32_t left = NS_SLOTS;
	char num[16];

	for (uint32_t n = 0; left > 0 && n < CHANNEL_SEARCH_MAX; n++) {
		int len = snprintf(num, sizeof(num), "%u", n);
		uint16_t slot = ns_crc16(num, (size_t)len) & (NS_SLOTS - 1);

		if (!filled[slot]) {
			filled[slot] = 1;
			channel_n[slot] = n;
			left--;
		}
	}
	channel_table_ok = left == 0;
}

int ns_channel_for_slot(uint16_t slot, char *buf)
{
	if (slot >= NS_SLOTS)
		return -EINVAL;
	pthread_once(&channel_once, channel_table_build);
	if (!channel_table_ok)
		return -EIO;
	return snprintf(buf, NS_CHANNEL_MAX, "ns:b:{%u}", channel_n[slot]);
}

int ns_segment_key(uint16_t slot, uint32_t publisher, uint64_t seq, char *buf)
{
	if (slot >= NS_SLOTS)
		return -EINVAL;
	pthread_once(&channel_once, channel_table_build);
	if (!channel_table_ok)
		return -EIO;
	return snprintf(buf, NS_SEGMENT_KEY_MAX,
			NS_SEGMENT_PREFIX "{%u}:%08x:%llx", channel_n[slot],
			publisher, (unsigned long long)seq);
}
