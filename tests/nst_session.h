/*
 * nst_session.h - test support: the session records the tests feed to
 * lanes, tables and stores, built in one place so that every suite fills
 * the header fields alike and only states what its records differ in.
 */
#ifndef NST_SESSION_H
#define NST_SESSION_H

#include <stdint.h>

#include "ns_record.h"

/* A zeroed IPv4 record with its header set; the caller fills the tuples. */
struct ns_session nst_session(uint8_t proto, uint8_t event, uint32_t gateway_id,
			      uint32_t epoch, uint32_t timeout_ms,
			      uint64_t timestamp_ns);

/* The tuples of a source-NAT flow: saddr:sport -> daddr:dport, sent as
 * xaddr:xport to the same destination. */
void nst_session_snat(struct ns_session *s, uint32_t saddr, uint16_t sport,
		      uint32_t daddr, uint16_t dport, uint32_t xaddr,
		      uint16_t xport);

/* Flow i of the table-sized tests (bench/nsb_flow.h): 10.0.0.0+i:
 * 1000+i%50000 to 203.0.113.0+i%200:443, translated to
 * 198.51.100.1+i/60000:1024+i%60000, so that up to a few million flows
 * have distinct keys both ways. */
void nst_session_flow(struct ns_session *s, uint32_t i);

#endif
