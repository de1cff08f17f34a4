/*
 * ns_slot.h - Redis Cluster hash slots, and natsync's key and channel names.
 *
 * Slots follow the cluster specification exactly: CRC16 (XMODEM) of the key,
 * or of the first non-empty {hash tag}, modulo 16384. Keys are binary:
 * "ns:" followed by the protocol and the inside tuple in network byte order,
 * so that every session has one key and the key costs 16 bytes. Channels are
 * "ns:b:{N}" where N is the smallest number whose slot is the wanted slot, so
 * both sides of a replication derive the same channel for a slot.
 */
#ifndef NS_SLOT_H
#define NS_SLOT_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"

#define NS_SLOTS 16384
#define NS_KEY_PREFIX "ns:"
#define NS_KEY_PREFIX_LEN 3
/* prefix + proto(1) + saddr(4) + sport(2) + daddr(4) + dport(2) */
#define NS_KEY_LEN 16
/* An IPv6 inside tuple's: prefix + proto(1) + saddr(16) + sport(2) +
 * daddr(16) + dport(2). */
#define NS_KEY_V6_LEN 40
#define NS_KEY_MAX NS_KEY_V6_LEN
#define NS_CHANNEL_MAX 24

uint16_t ns_crc16(const void *buf, size_t len);

/* The cluster slot of a key, hash tags honoured (as CLUSTER KEYSLOT). */
uint16_t ns_key_slot(const void *key, size_t len);

/* Write the store key of a session (NS_KEY_LEN bytes) into key. */
void ns_key_build(uint8_t proto, const struct ns_tuple *orig,
		  uint8_t key[NS_KEY_LEN]);

/* Parse a store key back; returns 0 or -EINVAL when it is not a natsync
 * session key. */
int ns_key_parse(const void *key, size_t len, uint8_t *proto,
		 struct ns_tuple *orig);

/* The same for an IPv6 inside tuple (NAT66 and NAT64): NS_KEY_V6_LEN
 * bytes, addresses in network byte order. */
void ns_key_build_v6(uint8_t proto, const uint8_t saddr[16], uint16_t sport,
		     const uint8_t daddr[16], uint16_t dport,
		     uint8_t key[NS_KEY_V6_LEN]);
int ns_key_parse_v6(const void *key, size_t len, uint8_t *proto,
		    uint8_t saddr[16], uint16_t *sport, uint8_t daddr[16],
		    uint16_t *dport);

/* The key of session s of any family (an IPv6 one's second line follows
 * it) into key; returns its length, NS_KEY_LEN or NS_KEY_V6_LEN. */
size_t ns_key_of(const struct ns_session *s, uint8_t key[NS_KEY_MAX]);

/* Write the NUL-terminated notification channel whose slot is slot;
 * returns its length, or -EINVAL for slot >= NS_SLOTS (-EIO if the table
 * could not be built, which cannot happen with CRC16). buf holds at least
 * NS_CHANNEL_MAX bytes. Thread-safe; the first call builds the table. */
int ns_channel_for_slot(uint16_t slot, char *buf);

/* Log layout (schema/FORMAT.md): "ns:l:{N}:P:S", in the slot of channel
 * "ns:b:{N}"; P the publisher id (8 hex digits), S the batch seq (hex). */
#define NS_SEGMENT_PREFIX "ns:l:"
#define NS_SEGMENT_PREFIX_LEN 5
#define NS_SEGMENT_KEY_MAX 48

/* Write the NUL-terminated segment key of the batch publisher published
 * as seq on the channel of slot; its length, or as ns_channel_for_slot.
 * buf holds at least NS_SEGMENT_KEY_MAX bytes. */
int ns_segment_key(uint16_t slot, uint32_t publisher, uint64_t seq, char *buf);

#endif
