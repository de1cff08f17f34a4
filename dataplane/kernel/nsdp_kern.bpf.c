// SPDX-License-Identifier: (BSD-3-Clause OR GPL-2.0)
/*
 * nsdp_kern.bpf.c - the kernel session source's BPF side: every packet a
 * device queues for transmission (tp_btf/net_dev_queue) carries its
 * conntrack entry in skb->_nfct; a confirmed IPv4 or IPv6 entry with source or
 * destination NAT is sent to user space through a ring buffer when it is
 * new to us, and again once half of its timeout has passed since we last
 * sent it, or its TCP state changed. A NAT'd packet leaves through a device after POSTROUTING, where
 * the entry is confirmed and its translation set, so every NAT'd flow is
 * seen with its first packet. (There are no conntrack tracepoints, and
 * fentry/kprobes are not available everywhere; this hook loads wherever
 * tp_btf does.)
 *
 * Invariant: an event the ring buffer refused is counted and its entry is
 * not remembered, so the next packet of the flow tries again; user space
 * re-dumps the table when the count rises.
 *
 * With defer (nsdp_kdefer.h) a second program, of type netfilter, sees a
 * new NAT'd entry in postrouting before it is confirmed, while its first
 * packet is on its way to defer's queue, and sends it then (kind HELD):
 * the user side records it from that event and holds the packet until the
 * record settles; "seen" then keeps the first program from sending the
 * entry again once confirmed.
 *
 * Not here: ends of entries (ctnetlink destroy events in nsdp_ksrc.c), the
 * records (nsdp_ksrc.c).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "nsdp_kern.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_ICMP 1
#define IPPROTO_ICMPV6 58
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define NFCT_PTRMASK (~7UL)
#define NAT_BITS (IPS_SRC_NAT | IPS_DST_NAT)

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern int CONFIG_HZ __kconfig;

const volatile __u32 filter_flags;
const volatile __u32 filter_netns;
const volatile __u16 filter_zone;
const volatile __u32 filter_mark;
const volatile __u32 filter_mark_mask;
const volatile __u32 filter_ignore_mark;

/* Sized by the loader ([source] ringbuf_size). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* Entries sent and when; LRU: an entry evicted is sent again as new. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 18);
	__type(key, struct nsdp_kern_key);
	__type(value, struct nsdp_kern_seen);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nsdp_kern_counters);
} counters SEC(".maps");

static __always_inline void read_tuple(struct nf_conn *ct, int dir, int v6,
				       struct nsdp_kern_tuple *t)
{
	struct nf_conntrack_tuple *tu = &ct->tuplehash[dir].tuple;

	if (v6) {
		bpf_core_read(t->src6, sizeof(t->src6), &tu->src.u3.all);
		bpf_core_read(t->dst6, sizeof(t->dst6), &tu->dst.u3.all);
	} else {
		t->src = BPF_CORE_READ(tu, src.u3.ip);
		t->dst = BPF_CORE_READ(tu, dst.u3.ip);
	}
	t->sport = BPF_CORE_READ(tu, src.u.all);
	t->dport = BPF_CORE_READ(tu, dst.u.all);
}

static __always_inline int passes_filters(__u32 netns, __u16 zone, __u32 mark)
{
	if ((filter_flags & NSDP_KERN_F_NETNS) && netns != filter_netns)
		return 0;
	if ((filter_flags & NSDP_KERN_F_ZONE) && zone != filter_zone)
		return 0;
	if ((filter_flags & NSDP_KERN_F_MARK) &&
	    (mark & filter_mark_mask) != filter_mark)
		return 0;
	if ((filter_flags & NSDP_KERN_F_IGNORE_MARK) &&
	    mark == filter_ignore_mark)
		return 0;
	return 1;
}

/* Send ct's event when it is new to us, or half its timeout passed since
 * we sent it, or its TCP state changed. held: ct is not confirmed yet (its
 * first packet is about to be queued for defer, nsdp_ksrc.h): its timeout
 * is relative, and its event says so. */
static __always_inline int capture(struct nf_conn *ct, int held)
{
	struct nsdp_kern_counters *cnt;
	struct nsdp_kern_event ev = {};
	struct nsdp_kern_seen *last, now_seen = {};
	unsigned long status;
	__u32 zero = 0, left;
	__u64 now;
	__u8 proto;
	__u16 l3;

	status = BPF_CORE_READ(ct, status);
	if (!!(status & IPS_CONFIRMED) == held || !(status & NAT_BITS))
		return 0;
	l3 = BPF_CORE_READ(ct, tuplehash[0].tuple.src.l3num);
	if (l3 != AF_INET && l3 != AF_INET6)
		return 0;
	proto = BPF_CORE_READ(ct, tuplehash[0].tuple.dst.protonum);
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP &&
	    proto != (l3 == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6))
		return 0;

	ev.key.family = (__u8)l3;

	ev.key.proto = proto;
	ev.key.netns = BPF_CORE_READ(ct, ct_net.net, ns.inum);
	if (bpf_core_field_exists(ct->zone))
		ev.key.zone = BPF_CORE_READ(ct, zone.id);
	if (bpf_core_field_exists(ct->mark))
		ev.mark = BPF_CORE_READ(ct, mark);
	cnt = bpf_map_lookup_elem(&counters, &zero);
	if (!cnt)
		return 0;
	if (!passes_filters(ev.key.netns, ev.key.zone, ev.mark)) {
		cnt->filtered++;
		return 0;
	}
	read_tuple(ct, 0, l3 == AF_INET6, &ev.key.orig);
	read_tuple(ct, 1, l3 == AF_INET6, &ev.key.reply);

	if (proto == IPPROTO_TCP)
		ev.tcp_state = BPF_CORE_READ(ct, proto.tcp.state);
	now = bpf_ktime_get_ns();
	last = bpf_map_lookup_elem(&seen, &ev.key);
	if (last && now - last->sent_ns < last->half_timeout_ns &&
	    last->tcp_state == ev.tcp_state)
		return 0;

	/* ct->timeout is in jiffies, compared as u32 by the kernel too; an
	 * entry not yet confirmed holds it relative to its confirmation. */
	left = BPF_CORE_READ(ct, timeout);
	if (!held)
		left -= (__u32)bpf_jiffies64();
	if ((__s32)left < 0)
		left = 0;
	ev.timeout_ms = (__u32)((__u64)left * 1000 / CONFIG_HZ);
	ev.status = (__u32)status;
	ev.kind = held ? NSDP_KERN_HELD
		       : (last ? NSDP_KERN_REFRESH : NSDP_KERN_NEW);

	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), 0) != 0) {
		cnt->ringbuf_drops++;
		return 0;
	}
	cnt->sent++;
	now_seen.sent_ns = now;
	now_seen.half_timeout_ns = (__u64)ev.timeout_ms * 500000ULL;
	now_seen.tcp_state = ev.tcp_state;
	bpf_map_update_elem(&seen, &ev.key, &now_seen, BPF_ANY);
	return 0;
}

static __always_inline struct nf_conn *skb_ct(struct sk_buff *skb)
{
	return (struct nf_conn *)(BPF_CORE_READ(skb, _nfct) & NFCT_PTRMASK);
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(nsdp_ct_capture, struct sk_buff *skb)
{
	struct nf_conn *ct = skb_ct(skb);

	if (ct)
		capture(ct, 0);
	return 0;
}

/* Defer: in postrouting after NAT and just before the queue's rule
 * (nsdp_kdefer.h), a new entry's first packet; loaded and attached only
 * with defer on. Always NF_ACCEPT. */
SEC("netfilter")
int nsdp_ct_defer(struct bpf_nf_ctx *ctx)
{
	struct nf_conn *ct = skb_ct(ctx->skb);

	if (ct)
		capture(ct, 1);
	return 1;
}
