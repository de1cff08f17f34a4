/*
 * nsdp_kdefer.h - defer for a Linux kernel gateway: the first packet of a
 * new NAT'd connection held in an NFQUEUE until the record of its session
 * is settled (acknowledged by the store), or defer_max_us at most. Private
 * to dataplane/kernel/: the kernel session source (nsdp_ksrc.c) owns one
 * and drives it from its thread.
 *
 * The kernel hands the packet over from an nftables rule in postrouting
 * after NAT (nsdp_kdefer_rule_add), before its conntrack entry is
 * confirmed, with its first bytes: the translated headers, which give the
 * entry's reply tuple (nsdp_kdefer_reply). The source, which has recorded
 * the entry from the BPF program's event just before (nsdp_kern.bpf.c),
 * decides per packet for which record of its lane it waits
 * (nsdp_kdefer_decide); the packet is accepted (NF_ACCEPT) once that
 * record is settled or its time is up (nsdp_kdefer_release). Nothing is
 * ever dropped here.
 *
 * The queue is bound with NFQA_CFG_F_FAIL_OPEN and the rule carries the
 * bypass flag: a queue nobody is bound to, or that is full, lets packets
 * pass unheld instead of dropping them.
 */
#ifndef NSDP_KDEFER_H
#define NSDP_KDEFER_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "nsdp_kern.h"

/* Packets held at once; more are accepted at once (overflow). Also the
 * kernel queue's length. */
#define NSDP_KDEFER_HELD_MAX 4096
/* Hold times: buckets of NSDP_KDEFER_BUCKET_US, the last one open. */
#define NSDP_KDEFER_BUCKET_US 10
#define NSDP_KDEFER_BUCKETS 10000
/* While packets are held, the thread looks at the lane this often. */
#define NSDP_KDEFER_POLL_NS 20000ULL

struct nsdp_kdefer_stats {
	uint64_t queued; /* packets the queue handed over */
	uint64_t held; /* held for a record */
	uint64_t settled; /* let go: the record settled */
	uint64_t timeouts; /* let go: defer_max_us passed */
	uint64_t overflow; /* accepted at once: the held list was full */
	uint64_t skipped; /* accepted at once: not IPv4/6 TCP, UDP or echo */
	/* held for the newest record, not one of their own: no HELD event
	 * came for their entry (a later packet of a flow whose first one is
	 * held, an entry the filters leave out or whose event was lost) */
	uint64_t unmatched;
	/* packets the kernel let pass unheld because our socket was full
	 * (gaps in the packet ids) */
	uint64_t missed;
	uint64_t hist[NSDP_KDEFER_BUCKETS];
};

struct nsdp_kdefer;

/* Bind queue `queue` (NFQUEUE) in the network namespace netns_fd (-1:
 * the calling thread's), copying the headers, fail open; held
 * packets go after max_us. NULL with the reason in err and -errno in
 * *why (-EBUSY: another program holds the queue). */
struct nsdp_kdefer *nsdp_kdefer_open(int netns_fd, uint16_t queue,
				     uint32_t max_us, int *why, char *err,
				     size_t errlen);
/* Accept every packet still held, unbind and free. */
void nsdp_kdefer_free(struct nsdp_kdefer *d);
/* The socket to poll for queued packets. */
int nsdp_kdefer_fd(const struct nsdp_kdefer *d);

/* Read the packets queued so far (without blocking), at most a round's
 * worth: how many wait for nsdp_kdefer_decide, or -errno. */
int nsdp_kdefer_recv(struct nsdp_kdefer *d);
/* The protocol and the conntrack reply tuple of pending packet i (< what
 * nsdp_kdefer_recv returned): 1, or 0 when its headers are not those of
 * an IPv4 or IPv6 TCP, UDP or ICMP echo packet. */
int nsdp_kdefer_reply(const struct nsdp_kdefer *d, int i, uint8_t *proto,
		      struct nsdp_kern_tuple *reply);
/* Pending packet i: hold it until record seq of the lane settles (own:
 * the record of its entry; else the newest, counted unmatched), or accept
 * it now when its headers could not be read (skipped). Decide every
 * pending packet, in order, before the next nsdp_kdefer_recv. */
void nsdp_kdefer_decide(struct nsdp_kdefer *d, int i, uint64_t seq, int own,
			uint64_t now_ns);

/* The entry of reply tuple `reply` was recorded as record seq of the lane
 * from its HELD event: its packet, when it is read, waits for that one.
 * Kept for NSDP_KDEFER_EXPECT_SLOTS entries at most (a newer one in its
 * slot replaces the oldest). */
#define NSDP_KDEFER_EXPECT_SLOTS 16384
void nsdp_kdefer_expect(struct nsdp_kdefer *d, uint8_t proto,
			const struct nsdp_kern_tuple *reply, uint64_t seq);
/* The record a packet with this reply tuple waits for (forgotten then),
 * or 0 when none was expected. */
uint64_t nsdp_kdefer_match(struct nsdp_kdefer *d, uint8_t proto,
			   const struct nsdp_kern_tuple *reply);

/* Accept the held packets whose record is settled (numbered up to
 * settled) or whose time is up, oldest first; send the verdicts. The
 * number still held. */
unsigned int nsdp_kdefer_release(struct nsdp_kdefer *d, uint64_t settled,
				 uint64_t now_ns);
/* ns until the oldest held packet's time is up (0: now); UINT64_MAX when
 * none is held. */
uint64_t nsdp_kdefer_next_ns(const struct nsdp_kdefer *d, uint64_t now_ns);
/* Accept every held packet now, counted as timeouts. */
void nsdp_kdefer_release_all(struct nsdp_kdefer *d);

/* Counters, any thread (relaxed reads of the thread's counts). */
void nsdp_kdefer_stats(const struct nsdp_kdefer *d,
		       struct nsdp_kdefer_stats *st);
/* The hold time under which fraction p of the held packets left, µs (the
 * upper end of its bucket); 0 with none. */
uint64_t nsdp_kdefer_pct_us(const struct nsdp_kdefer_stats *st, double p);

/* The nftables table "natsync_defer" (family ip) in namespace netns_fd,
 * made anew: a filter chain in postrouting at priority
 * NSDP_KDEFER_PRIORITY (after source NAT, before conntrack confirms) with
 * one rule: new connections with source or destination NAT go to queue
 * `queue`, bypassed when nobody listens (nft: ct state new ct status &
 * (snat|dnat) != 0 queue num N bypass; where the kernel lacks nft_queue,
 * the xtables NFQUEUE target through nft_compat, as iptables-nft adds
 * it). 0, or -errno with err set. */
#define NSDP_KDEFER_TABLE "natsync_defer"
#define NSDP_KDEFER_PRIORITY 300
int nsdp_kdefer_rule_add(int netns_fd, uint16_t queue, char *err,
			 size_t errlen);
/* Delete that table (nothing when it is not there). */
void nsdp_kdefer_rule_del(int netns_fd);

/* A netfilter netlink socket (libmnl) opened in namespace netns_fd (-1:
 * the calling thread's) and bound; NULL with errno. */
struct mnl_socket *nsdp_kdefer_nl_open_in(int netns_fd);

#endif
