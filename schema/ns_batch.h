/*
 * ns_batch.h - the batch a notification carries.
 *
 * A batch is a 48-byte header followed by count records in wire form (see
 * ns_record.h; any mix of families, each record's length its family's) and, when the header's flags say NS_BATCH_F_HMAC, a 32-byte
 * HMAC-SHA256 trailer over header and records, keyed by a secret the
 * publishers and subscribers of a deployment share. The header
 * says who published it (publisher id, epoch), its place in that
 * publisher's sequence on its channel, so that a subscriber can tell a gap,
 * and the channel and time it was sent for, so that a signed batch cannot
 * be replayed on another channel or long after. Version 1 (a 32-byte header
 * without channel and time) is still decoded.
 * A writer builds a batch in place: reserve the header, append records,
 * then finish the header once the count is known.
 */
#ifndef NS_BATCH_H
#define NS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"

#define NS_BATCH_MAGIC 0x4e534231u /* "NSB1" */
#define NS_BATCH_VERSION 2 /* what writers write */
#define NS_BATCH_HDR_LEN 48
#define NS_BATCH_V1 1 /* no channel, no send time */
#define NS_BATCH_V1_HDR_LEN 32
/* A batch carries at most this many records. */
#define NS_BATCH_MAX_RECORDS 4096
/* flags: the batch ends with an HMAC-SHA256 trailer. */
#define NS_BATCH_F_HMAC 0x01u
/* flags: the records state what the store holds for their keys after it
 * refused a write for good; a subscriber applies them whatever the
 * timestamps of what it holds. */
#define NS_BATCH_F_STORE 0x02u
/* flags: no records; the store refused a segment of this channel for good
 * (log layout) after its notification went out: a subscriber reads the
 * sessions of the channel's master again from the store. */
#define NS_BATCH_F_RESYNC 0x04u
/* flags: the records of an earlier batch of this publisher and channel
 * whose segment the store refused for good (log layout), published again
 * with their segment written again under this batch's seq: a subscriber
 * reads that segment back, and resyncs the channel's master when the store
 * does not hold it. */
#define NS_BATCH_F_REWRITE 0x08u
#define NS_BATCH_MAC_LEN 32
#define NS_BATCH_MAX_LEN                                               \
	(NS_BATCH_HDR_LEN + NS_BATCH_MAX_RECORDS * NS_RECORD_MAX_LEN + \
	 NS_BATCH_MAC_LEN)
/* The largest batch of IPv4 records only (what a reader that holds IPv4
 * sessions only, such as the log's compactor, ever writes). */
#define NS_BATCH_MAX_LEN_IPV4                                              \
	(NS_BATCH_HDR_LEN + NS_BATCH_MAX_RECORDS * NS_RECORD_V1_IPV4_LEN + \
	 NS_BATCH_MAC_LEN)

struct ns_batch_hdr {
	uint32_t publisher_id; /* unique per publishing agent worker */
	uint32_t gateway_id;
	uint32_t epoch;
	uint16_t count; /* records in the batch */
	uint8_t flags; /* NS_BATCH_F_* */
	uint8_t version; /* NS_BATCH_VERSION or NS_BATCH_V1; 0 = the former */
	uint64_t seq; /* 1, 2, 3... per publisher and channel */
	uint32_t body_len; /* bytes of records after the header */
	/* Version 2 only (0 in version 1): */
	uint16_t channel_slot; /* the channel it is published on, by slot */
	uint64_t sent_ns; /* when it was signed, writer's CLOCK_REALTIME */
};

/* Bytes of a header of version v (0: NS_BATCH_VERSION). */
static inline size_t ns_batch_hdr_len(uint8_t v)
{
	return v == NS_BATCH_V1 ? NS_BATCH_V1_HDR_LEN : NS_BATCH_HDR_LEN;
}

/* Write the header of version h->version into buf; returns its length
 * (ns_batch_hdr_len). */
size_t ns_batch_hdr_encode(const struct ns_batch_hdr *h, uint8_t *buf);

/* Validate a whole batch: header fields, body length equal to the sum of
 * the records' lengths, every record decodable, the trailer present when
 * the flags announce it. On success fills *h, sets *body to the first
 * record and returns 0; otherwise a negative errno (-EMSGSIZE truncated or
 * oversized, -EBADMSG wrong magic, -EPROTO unknown version or flags, or
 * reserved bytes not 0,
 * -EINVAL inconsistent: trailing bytes, a bad record, records that do not
 * fill body_len or do not number count). It does not check the MAC: see
 * ns_batch_verify(). */
int ns_batch_decode(const uint8_t *buf, size_t len, struct ns_batch_hdr *h,
		    const uint8_t **body);

/* The send time of a version 2 batch from its first len bytes, at least
 * its header (a GETRANGE of the header): 0 with *sent_ns set, -EMSGSIZE
 * when len is shorter than a header, -EBADMSG wrong magic, -EPROTO not
 * version 2. Nothing else is checked. */
int ns_batch_peek_sent(const uint8_t *buf, size_t len, uint64_t *sent_ns);

/* HMAC-SHA256 of the first len bytes of buf (header and records) under
 * key, into mac. 0, or -EINVAL for an empty key. */
int ns_batch_mac(const uint8_t *key, size_t key_len, const uint8_t *buf,
		 size_t len, uint8_t mac[NS_BATCH_MAC_LEN]);

/* Check the trailer of a batch ns_batch_decode() accepted (len is the
 * whole batch, trailer included): 0 when it carries NS_BATCH_F_HMAC and the
 * MAC matches, -EACCES otherwise (no trailer, or a wrong one). */
int ns_batch_verify(const uint8_t *buf, size_t len, const uint8_t *key,
		    size_t key_len);

/* Iterate over the records of a batch ns_batch_decode() accepted. */
struct ns_batch_iter {
	const uint8_t *pos;
	const uint8_t *end;
};

void ns_batch_iter_init(struct ns_batch_iter *it, const uint8_t *body,
			uint32_t body_len);
/* Returns 1 and fills *r (a record of any family), 0 at the end, negative
 * errno on a bad record. */
int ns_batch_iter_next_rec(struct ns_batch_iter *it, struct ns_rec *r);
/* The same into one line, for readers of IPv4 sessions only: an IPv6
 * record stops the iteration with -EAFNOSUPPORT (ns_record_decode). */
int ns_batch_iter_next(struct ns_batch_iter *it, struct ns_session *s);

#endif
