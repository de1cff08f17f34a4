/*
 * nst_session.c - session records for the tests. Every record is IPv4 with
 * the current record version and zeroed reserved bytes, as the wire format
 * requires; nothing here encodes or stores them.
 */
#include "nsb_flow.h"
#include "nst_session.h"

struct ns_session nst_session(uint8_t proto, uint8_t event, uint32_t gateway_id,
			      uint32_t epoch, uint32_t timeout_ms,
			      uint64_t timestamp_ns)
{
	return (struct ns_session){.version = NS_RECORD_VERSION,
				   .family = NS_FAMILY_IPV4,
				   .proto = proto,
				   .event = event,
				   .gateway_id = gateway_id,
				   .epoch = epoch,
				   .timeout_ms = timeout_ms,
				   .timestamp_ns = timestamp_ns};
}

void nst_session_snat(struct ns_session *s, uint32_t saddr, uint16_t sport,
		      uint32_t daddr, uint16_t dport, uint32_t xaddr,
		      uint16_t xport)
{
	s->orig = (struct ns_tuple){saddr, daddr, sport, dport};
	s->xlat = (struct ns_tuple){xaddr, daddr, xport, dport};
}

void nst_session_flow(struct ns_session *s, uint32_t i)
{
	nsb_flow(s, i);
}
