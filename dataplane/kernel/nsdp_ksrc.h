/*
 * nsdp_ksrc.h - the kernel session source: NAT sessions of a Linux kernel
 * gateway (nftables/iptables NAT over conntrack) as natsync records.
 *
 * A BPF program (nsdp_kern.bpf.c) sends every NAT'd conntrack entry of one
 * network namespace when it is new, when its TCP state changes and when
 * half of its timeout has passed since it was last sent; one thread turns
 * these into CREATE and REFRESH records with the kernel's remaining
 * timeout, and ctnetlink destroy events into DELETE records, all into one
 * lane, whose only producer it is. At start, and whenever events were lost
 * (the BPF ring buffer refused one, the destroy events' socket overflowed),
 * it dumps the namespace's NAT'd entries over ctnetlink into the lane, and
 * sends a DELETE for every entry it had sent as live that the dump no
 * longer returns, so that nothing is lost silently and no ended session
 * stays behind.
 *
 * Records: orig is the entry's original tuple (the inside flow as the
 * gateway received it), xlat the inverse of its reply tuple (for source
 * NAT: the outside address and port, the same destination), as the DPDK
 * gateway writes them. IPv4 TCP, UDP and ICMP echo (the identifier in the
 * source port, destination port 0).
 */
#ifndef NSDP_KSRC_H
#define NSDP_KSRC_H

#include <stddef.h>
#include <stdint.h>

#include "nsdp_lane.h"

struct nsdp_ksrc_conf {
	/* The gateway's network namespace, a name under /run/netns; empty:
	 * the namespace of the calling process. */
	char netns[64];
	uint32_t ringbuf_bytes; /* BPF ring buffer, a power of two */
	/* Only entries of this conntrack zone (zone_filter set) and with
	 * (mark & mark_mask) == mark (mark_mask != 0). */
	int zone_filter;
	uint16_t zone;
	uint32_t mark, mark_mask;
	/* Entries with this mark are left out (the mark a standby's
	 * conntrack commit sets on what it writes); 0: none. */
	uint32_t ignore_mark;
	int ends; /* 1: ctnetlink destroy events become DELETE records */
	/* Receive buffer of the destroy events' socket, bytes (the kernel
	 * doubles it); 0: 8 MiB. */
	uint32_t ends_rcvbuf;
	uint32_t gateway_id, epoch;
	/* Defer: the first packet of every new NAT'd connection is held in
	 * NFQUEUE defer_queue until its record settles (the store acknowledged
	 * it), defer_max_us at most; 0: off. defer_rule: the source adds the
	 * nftables table that queues those packets (nsdp_kdefer.h) and deletes
	 * it when it stops; 0: the operator's own rule queues them. */
	uint32_t defer_max_us;
	uint16_t defer_queue;
	int defer_rule;
};

struct nsdp_ksrc_stats {
	uint64_t captured; /* ring buffer events read */
	uint64_t creates, refreshes, deletes; /* records from events */
	uint64_t dumped; /* records from ctnetlink dumps (CREATE) */
	uint64_t redumps; /* dumps after lost events */
	uint64_t ringbuf_drops; /* events the full ring buffer refused */
	uint64_t filtered; /* NAT'd entries left out by zone or mark */
	uint64_t end_overruns; /* times destroy events were lost (ENOBUFS) */
	uint64_t lane_waits; /* times the thread waited on a full lane */
	/* DELETE records for entries sent as live that a re-dump no longer
	 * found (their destroy events were lost) */
	uint64_t reconciled;
	uint64_t untracked; /* entries the full live set could not take */
	uint64_t tracked; /* entries in the live set now */
};

/* Defer's counters (all 0 when it is off). */
struct nsdp_ksrc_defer_stats {
	uint64_t queued; /* packets the queue handed over */
	uint64_t held; /* held for a record */
	uint64_t settled; /* let go once the record settled */
	uint64_t timeouts; /* let go after defer_max_us */
	uint64_t overflow; /* accepted unheld: too many held already */
	uint64_t skipped; /* accepted unheld: headers not IPv4 TCP, UDP, echo */
	/* held for the newest record: no event of their own (a later packet
	 * of a held flow, an entry filtered out or whose event was lost) */
	uint64_t unmatched;
	uint64_t missed; /* the kernel let them pass unheld (socket full) */
	uint64_t p50_us, p99_us, p999_us; /* hold times of those let go */
};

struct nsdp_ksrc;

/* Check the host, load and attach the BPF program and open the ctnetlink
 * sockets in the namespace. NULL with the reason in err on failure and
 * *why set: -ENOENT no BTF (/sys/kernel/btf/vmlinux) or no such
 * namespace, -EPERM privileges missing, other negative errno else. */
struct nsdp_ksrc *nsdp_ksrc_create(const struct nsdp_ksrc_conf *conf,
				   struct nsdp_lane *lane, int *why, char *err,
				   size_t errlen);

/* Start the thread: the initial dump, then (with defer and defer_rule)
 * the nftables table added, then events until stopped; stopping deletes
 * the table, then lets go of what it holds. */
int nsdp_ksrc_start(struct nsdp_ksrc *k);
void nsdp_ksrc_stop(struct nsdp_ksrc *k);
void nsdp_ksrc_stats(const struct nsdp_ksrc *k, struct nsdp_ksrc_stats *st);
void nsdp_ksrc_defer_stats(const struct nsdp_ksrc *k,
			   struct nsdp_ksrc_defer_stats *st);

/* Write the namespace's NAT'd entries as they are now, as CREATE records,
 * to a table file (the format natsync-verify reads); the count or a
 * negative errno. Any time, from any thread. */
int64_t nsdp_ksrc_dump_table(const struct nsdp_ksrc *k, const char *path);

void nsdp_ksrc_free(struct nsdp_ksrc *k);

#endif
