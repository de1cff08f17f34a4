/*
 * nsb_flow.h - flow i of the table-sized benchmarks and tests:
 * 10.0.0.0+i:1000+i%50000 to 203.0.113.0+i%200:443, translated to
 * 198.51.100.1+i/60000:1024+i%60000, so that up to a few million flows
 * have distinct keys both ways (natsync-ctbench's sessions, and the
 * tests' through nst_session_flow()).
 *
 * Not here: the record's other fields (the caller's).
 */
#ifndef NSB_FLOW_H
#define NSB_FLOW_H

#include <stdint.h>

#include "ns_record.h"

static inline void nsb_flow(struct ns_session *s, uint32_t i)
{
	s->orig.saddr = 0x0a000000u + i;
	s->orig.daddr = 0xcb007100u + (i % 200);
	s->orig.sport = (uint16_t)(1000 + i % 50000);
	s->orig.dport = 443;
	s->xlat.saddr = 0xc6336401u + i / 60000;
	s->xlat.sport = (uint16_t)(1024 + i % 60000);
	s->xlat.daddr = s->orig.daddr;
	s->xlat.dport = s->orig.dport;
}

#endif
