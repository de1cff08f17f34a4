/*
 * nsdp_ctcommit.h - writing sessions into a Linux kernel's conntrack table
 * over ctnetlink, so that a kernel NAT gateway that takes the addresses
 * over translates its peer's flows as its peer did.
 *
 * One writer thread owns a committer: it adds records (nsdp_ctcommit_add)
 * and flushes them (nsdp_ctcommit_flush), many ctnetlink messages per
 * sendmsg. A create or refresh becomes a conntrack entry with the inverse
 * reply tuple and a source NAT to the record's translated address and port
 * (the kernel then sets IPS_SRC_NAT and rewrites the reply tuple), TCP
 * ESTABLISHED with BE_LIBERAL both ways, SEEN_REPLY|ASSURED, and the
 * record's remaining timeout; an entry that exists already is updated
 * (timeout, TCP state); an entry of another flow that holds the
 * translated address and port is evicted; a delete removes the entry
 * (absent is fine). What
 * the kernel refuses is retried a bounded number of times, then counted
 * in errors; nothing is dropped without a count. Other threads read the
 * counters.
 */
#ifndef NSDP_CTCOMMIT_H
#define NSDP_CTCOMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"

/* Default and bounds of batch_bytes (0 = one message per sendmsg, waited
 * for: the synchronous way, for comparison). */
#define NSDP_CTCOMMIT_BATCH_DEFAULT 65536u
#define NSDP_CTCOMMIT_BATCH_MAX (1u << 20)
/* Failed attempts of one record before it is counted in errors. */
#define NSDP_CTCOMMIT_ATTEMPTS 4u

struct nsdp_ctcommit_conf {
	/* Network namespace (a name under /run/netns) whose conntrack table
	 * is written; empty = the calling thread's. */
	char netns[64];
	/* Bytes of ctnetlink messages per sendmsg; 0 = one at a time. */
	uint32_t batch_bytes;
	/* CTA_MARK of the entries written; 0 = none set. */
	uint32_t mark;
	/* Conntrack zone the entries are written into (CTA_ZONE); 0 = the
	 * default zone. */
	uint16_t zone;
	/* 1: a create the kernel refuses as existing (EEXIST: the flow's own
	 * entry, or another flow's holding the translated address and port)
	 * is left as the kernel has it, counted in kept: no update, no
	 * eviction. A read-back of what a live gateway may hold newer. */
	int keep_existing;
};

struct nsdp_ctcommit_stats {
	uint64_t committed; /* entries created */
	uint64_t updated; /* existing entries refreshed */
	uint64_t deleted; /* entries removed, or absent already */
	uint64_t errors; /* records given up after NSDP_CTCOMMIT_ATTEMPTS */
	uint64_t retried; /* messages sent again after a failure */
	/* bad input, not sent: the sum of the three below */
	uint64_t refused;
	uint64_t refused_proto; /* not TCP, UDP or ICMP, or not IPv4 v1 */
	uint64_t refused_expired; /* no time left (timeout 0 or past) */
	/* the same flow again before a flush, not newer than the one queued */
	uint64_t refused_duplicate;
	/* records superseded by a newer one of the flow before a flush */
	uint64_t coalesced;
	/* entries of other flows deleted because they held the translated
	 * address and port a newer record gives to its flow */
	uint64_t evicted;
	/* creates left out as the kernel had an entry (keep_existing) */
	uint64_t kept;
	uint64_t messages; /* ctnetlink messages sent */
	uint64_t sends; /* sendmsg calls */
	int last_error; /* errno of the last error counted, 0 = none */
};

struct nsdp_ctcommit;

/* A committer writing into conf's namespace: the netlink socket is opened
 * there (the calling thread enters the namespace and comes back). NULL
 * with the reason in err (no such namespace, no CAP_NET_ADMIN, ...). */
struct nsdp_ctcommit *nsdp_ctcommit_open(const struct nsdp_ctcommit_conf *conf,
					 char *err, size_t errlen);
void nsdp_ctcommit_close(struct nsdp_ctcommit *c);

/* Queue s (IPv4, or NAT66 with its second line after it; NAT64 is
 * refused: the kernel has no such entry); flushes first when the queue is
 * full. 0 when queued (or merged into the queued record of its flow), 1
 * when refused as bad input (counted), or what a flush returned. */
int nsdp_ctcommit_add(struct nsdp_ctcommit *c, const struct ns_session *s);

/* Write everything queued and wait for the kernel's answers, retrying what
 * failed up to NSDP_CTCOMMIT_ATTEMPTS times. Returns how many records were
 * given up (counted in errors), 0 when all went in. */
int nsdp_ctcommit_flush(struct nsdp_ctcommit *c);

/* Records queued and not yet flushed. */
unsigned int nsdp_ctcommit_pending(const struct nsdp_ctcommit *c);

/* The counters (any thread). */
void nsdp_ctcommit_stats(const struct nsdp_ctcommit *c,
			 struct nsdp_ctcommit_stats *out);

/* Seconds of conntrack timeout that s has left at realtime now_ns: its
 * timeout after its timestamp, rounded up; the whole timeout when the
 * timestamp is ahead of now (another host's clock); 0 when none is left. */
uint32_t nsdp_ctcommit_timeout_s(const struct ns_session *s, uint64_t now_ns);

#endif
