/*
 * nsdp_kern.h - what the kernel session source's BPF program
 * (nsdp_kern.bpf.c) and its loader (nsdp_ksrc.c) agree on: the event one
 * NAT'd conntrack entry sends through the ring buffer, the key of the
 * "last sent" map, and the counters. Kept to fixed-size types both sides
 * see alike; tuples stay in network byte order, as the kernel holds them.
 */
#ifndef NSDP_KERN_H
#define NSDP_KERN_H

enum nsdp_kern_kind {
	NSDP_KERN_NEW = 1, /* first time this entry is seen */
	/* seen, and half its timeout has passed or its TCP state changed */
	NSDP_KERN_REFRESH = 2,
	/* first time seen, before it is confirmed: its first packet goes to
	 * defer's queue next (timeout_ms: the timeout it starts with) */
	NSDP_KERN_HELD = 3,
};

/* One direction of a conntrack entry, network byte order. IPv4: src and
 * dst, the rest of src6 and dst6 zero; IPv6: src6 and dst6. */
struct nsdp_kern_tuple {
	union {
		__u32 src;
		__u32 src6[4];
	};
	union {
		__u32 dst;
		__u32 dst6[4];
	};
	__u16 sport; /* ICMP: the id */
	__u16 dport; /* ICMP: type << 8 | code */
};

/* The key of the "last sent" map: an entry's identity and translation. */
struct nsdp_kern_key {
	struct nsdp_kern_tuple orig;
	struct nsdp_kern_tuple reply;
	__u32 netns; /* inode of the entry's network namespace */
	__u16 zone;
	__u8 proto;
	__u8 family; /* AF_INET or AF_INET6 */
};

struct nsdp_kern_seen {
	__u64 sent_ns; /* CLOCK_MONOTONIC of the last event sent */
	__u64 half_timeout_ns; /* half the remaining timeout then */
	__u8 tcp_state; /* a change of TCP state is sent at once */
	__u8 pad[7];
};

struct nsdp_kern_event {
	struct nsdp_kern_key key;
	__u32 status; /* IPS_* bits */
	__u32 timeout_ms; /* remaining timeout when sent */
	__u32 mark;
	__u8 kind; /* enum nsdp_kern_kind */
	__u8 tcp_state; /* enum tcp_conntrack, 0 for other protocols */
	__u16 pad;
};

/* Per-CPU counters, summed by the loader. */
struct nsdp_kern_counters {
	__u64 sent; /* events in the ring buffer */
	__u64 ringbuf_drops; /* events the full ring buffer refused */
	__u64 filtered; /* NAT'd entries the filters left out */
};

/* Filters, set in .rodata before load; 0 = no filter. */
#define NSDP_KERN_F_NETNS 1
#define NSDP_KERN_F_ZONE 2
#define NSDP_KERN_F_MARK 4
#define NSDP_KERN_F_IGNORE_MARK 8

#endif
