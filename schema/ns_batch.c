/*
 * ns_batch.c - the batch a notification carries: a 48-byte header (32 in
 * version 1) and the records in wire form.
 *
 * A subscriber applies a batch without asking the store for anything, so
 * the batch must be self-describing and must be checked whole before any
 * of it is applied: ns_batch_decode() accepts a batch only if the header is
 * known, the length is exact and every record decodes, and the records
 * fill the body exactly. After that, iterating cannot fail on a batch it
 * accepted.
 *
 * Four flags are known. NS_BATCH_F_HMAC: the body is followed by an
 * HMAC-SHA256 trailer (OpenSSL's one-shot HMAC, compared in constant time).
 * NS_BATCH_F_STORE only tells the subscriber how to apply the records.
 * NS_BATCH_F_RESYNC asks it to read a master again; such a batch has no
 * records (and is no STORE batch). NS_BATCH_F_REWRITE marks records
 * published again, their segment written again (neither STORE nor RESYNC).
 * Unknown flags, non-zero reserved bytes, or bytes after the body (and
 * trailer), are rejected rather than skipped, so that a later format is
 * never half-understood. The MAC covers the whole header, so version 2's
 * channel and send time are signed with the records.
 *
 * Not here: sequence numbers and gap detection (the standby), building
 * batches into connection buffers (the agent; it calls
 * ns_batch_hdr_encode() once the count is known).
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ns_batch.h"
#include "ns_wire.h"

/* Header field offsets, each field after the previous one's size. */
enum {
	OFF_MAGIC = 0,
	OFF_VERSION = OFF_MAGIC + 4,
	OFF_FLAGS = OFF_VERSION + 1,
	OFF_COUNT = OFF_FLAGS + 1,
	OFF_PUBLISHER_ID = OFF_COUNT + 2,
	OFF_GATEWAY_ID = OFF_PUBLISHER_ID + 4,
	OFF_EPOCH = OFF_GATEWAY_ID + 4,
	OFF_SEQ = OFF_EPOCH + 4,
	OFF_BODY_LEN = OFF_SEQ + 8,
	/* version 2 */
	OFF_SENT = OFF_BODY_LEN + 4,
	OFF_CHANNEL = OFF_SENT + 8,
	OFF_RESERVED = OFF_CHANNEL + 2,
	RESERVED_LEN = 6,
};

_Static_assert(OFF_BODY_LEN + 4 == NS_BATCH_V1_HDR_LEN, "v1 header layout");
_Static_assert(OFF_RESERVED + RESERVED_LEN == NS_BATCH_HDR_LEN,
	       "batch header layout");
_Static_assert(NS_BATCH_MAX_RECORDS <= UINT16_MAX, "count is a u16");

size_t ns_batch_hdr_encode(const struct ns_batch_hdr *h, uint8_t *buf)
{
	const uint8_t version = h->version ? h->version : NS_BATCH_VERSION;

	put32(buf + OFF_MAGIC, NS_BATCH_MAGIC);
	buf[OFF_VERSION] = version;
	buf[OFF_FLAGS] = h->flags;
	put16(buf + OFF_COUNT, h->count);
	put32(buf + OFF_PUBLISHER_ID, h->publisher_id);
	put32(buf + OFF_GATEWAY_ID, h->gateway_id);
	put32(buf + OFF_EPOCH, h->epoch);
	put64(buf + OFF_SEQ, h->seq);
	put32(buf + OFF_BODY_LEN, h->body_len);
	if (version == NS_BATCH_V1)
		return NS_BATCH_V1_HDR_LEN;
	put64(buf + OFF_SENT, h->sent_ns);
	put16(buf + OFF_CHANNEL, h->channel_slot);
	memset(buf + OFF_RESERVED, 0, RESERVED_LEN);
	return NS_BATCH_HDR_LEN;
}

int ns_batch_peek_sent(const uint8_t *buf, size_t len, uint64_t *sent_ns)
{
	if (len < NS_BATCH_HDR_LEN)
		return -EMSGSIZE;
	if (get32(buf + OFF_MAGIC) != NS_BATCH_MAGIC)
		return -EBADMSG;
	if (buf[OFF_VERSION] != NS_BATCH_VERSION)
		return -EPROTO;
	*sent_ns = get64(buf + OFF_SENT);
	return 0;
}

int ns_batch_decode(const uint8_t *buf, size_t len, struct ns_batch_hdr *h,
		    const uint8_t **body)
{
	struct ns_batch_hdr hdr;
	struct ns_rec r;
	const uint8_t *pos, *end;
	uint32_t n = 0;
	size_t trailer, hdr_len, i;

	if (len < NS_BATCH_V1_HDR_LEN || len > NS_BATCH_MAX_LEN)
		return -EMSGSIZE;
	if (get32(buf + OFF_MAGIC) != NS_BATCH_MAGIC)
		return -EBADMSG;
	if ((buf[OFF_VERSION] != NS_BATCH_VERSION &&
	     buf[OFF_VERSION] != NS_BATCH_V1) ||
	    (buf[OFF_FLAGS] & ~(NS_BATCH_F_HMAC | NS_BATCH_F_STORE |
				NS_BATCH_F_RESYNC | NS_BATCH_F_REWRITE)) != 0)
		return -EPROTO;
	hdr_len = ns_batch_hdr_len(buf[OFF_VERSION]);
	trailer = buf[OFF_FLAGS] & NS_BATCH_F_HMAC ? NS_BATCH_MAC_LEN : 0;
	if (len < hdr_len + trailer ||
	    len > hdr_len + NS_BATCH_MAX_RECORDS * NS_RECORD_MAX_LEN +
			    NS_BATCH_MAC_LEN)
		return -EMSGSIZE;

	memset(&hdr, 0, sizeof(hdr));
	if (hdr_len == NS_BATCH_HDR_LEN) {
		for (i = 0; i < RESERVED_LEN; i++)
			if (buf[OFF_RESERVED + i] != 0)
				return -EPROTO;
		hdr.sent_ns = get64(buf + OFF_SENT);
		hdr.channel_slot = get16(buf + OFF_CHANNEL);
	}
	hdr.version = buf[OFF_VERSION];
	hdr.flags = buf[OFF_FLAGS];
	hdr.count = get16(buf + OFF_COUNT);
	hdr.publisher_id = get32(buf + OFF_PUBLISHER_ID);
	hdr.gateway_id = get32(buf + OFF_GATEWAY_ID);
	hdr.epoch = get32(buf + OFF_EPOCH);
	hdr.seq = get64(buf + OFF_SEQ);
	hdr.body_len = get32(buf + OFF_BODY_LEN);

	/* A resync request carries no records. */
	if (hdr.flags & NS_BATCH_F_RESYNC &&
	    (hdr.count != 0 || hdr.flags & NS_BATCH_F_STORE))
		return -EPROTO;
	/* A rewrite is a segment's batch again: records, nothing else. */
	if (hdr.flags & NS_BATCH_F_REWRITE &&
	    hdr.flags & (NS_BATCH_F_STORE | NS_BATCH_F_RESYNC))
		return -EPROTO;
	if (hdr.count > NS_BATCH_MAX_RECORDS)
		return -EMSGSIZE;
	if (hdr.body_len > len - hdr_len - trailer)
		return -EMSGSIZE; /* truncated */
	if (hdr.body_len < len - hdr_len - trailer)
		return -EINVAL; /* trailing bytes */

	pos = buf + hdr_len;
	end = pos + hdr.body_len;
	while (pos < end) {
		int rc = ns_record_decode_rec(pos, (size_t)(end - pos), &r);

		/* A record cut by the body's end means body_len and the
		 * records disagree; a bad record is a bad batch. */
		if (rc < 0 || ++n > hdr.count)
			return -EINVAL;
		pos += rc;
	}
	if (n != hdr.count)
		return -EINVAL;

	*h = hdr;
	*body = buf + hdr_len;
	return 0;
}

int ns_batch_mac(const uint8_t *key, size_t key_len, const uint8_t *buf,
		 size_t len, uint8_t mac[NS_BATCH_MAC_LEN])
{
	unsigned int out_len = NS_BATCH_MAC_LEN;

	if (!key || key_len == 0 || key_len > INT32_MAX)
		return -EINVAL;
	if (!HMAC(EVP_sha256(), key, (int)key_len, buf, len, mac, &out_len) ||
	    out_len != NS_BATCH_MAC_LEN)
		return -EINVAL;
	return 0;
}

int ns_batch_verify(const uint8_t *buf, size_t len, const uint8_t *key,
		    size_t key_len)
{
	uint8_t mac[NS_BATCH_MAC_LEN];

	if (len < NS_BATCH_V1_HDR_LEN + NS_BATCH_MAC_LEN ||
	    !(buf[OFF_FLAGS] & NS_BATCH_F_HMAC))
		return -EACCES;
	if (ns_batch_mac(key, key_len, buf, len - NS_BATCH_MAC_LEN, mac) != 0)
		return -EACCES;
	if (CRYPTO_memcmp(mac, buf + len - NS_BATCH_MAC_LEN,
			  NS_BATCH_MAC_LEN) != 0)
		return -EACCES;
	return 0;
}

void ns_batch_iter_init(struct ns_batch_iter *it, const uint8_t *body,
			uint32_t body_len)
{
	it->pos = body;
	it->end = body + body_len;
}

int ns_batch_iter_next_rec(struct ns_batch_iter *it, struct ns_rec *r)
{
	int rc;

	if (it->pos >= it->end)
		return 0;
	rc = ns_record_decode_rec(it->pos, (size_t)(it->end - it->pos), r);
	if (rc < 0)
		return rc;
	it->pos += rc;
	return 1;
}

int ns_batch_iter_next(struct ns_batch_iter *it, struct ns_session *s)
{
	int rc;

	if (it->pos >= it->end)
		return 0;
	rc = ns_record_decode(it->pos, (size_t)(it->end - it->pos), s);
	if (rc < 0)
		return rc;
	it->pos += rc;
	return 1;
}
