/*
 * nsdp_ksrc_ct.c - the kernel session source's side of ctnetlink apart
 * from its thread: a handle opened in the gateway's namespace, the size of
 * its conntrack table, and an entry as ctnetlink gives it turned into the
 * key the BPF program gives the same entry, when the source keeps it (a
 * NAT'd TCP, UDP or ICMP entry of the zone and mark configured).
 *
 * Invariant: an entry's key from a dump or a destroy event equals the BPF
 * program's for that entry (nsdp_kern.bpf.c), ICMP's echo fields
 * included, so that the live set and "seen" match the two.
 *
 * Not here: the thread that reads the dumps and events (nsdp_ksrc.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>

#include "nsdp_kern.h"
#include "nsdp_netns.h"

#include "nsdp_ksrc_state.h"

struct nfct_handle *nsdp_ksrc_nfct_open_in(int netns_fd, unsigned int groups)
{
	int own = nsdp_netns_enter(netns_fd);
	struct nfct_handle *h;

	if (own == -2)
		return NULL;
	h = nfct_open(CONNTRACK, groups);
	nsdp_netns_leave(own);
	return h;
}

/* The global limit, which every namespace reads. */
uint64_t nsdp_ksrc_conntrack_max(void)
{
	unsigned long long max = 0;
	FILE *f = fopen(CT_MAX_PATH, "r");

	if (f) {
		if (fscanf(f, "%llu", &max) != 1)
			max = 0;
		fclose(f);
	}
	return max ? max : CT_MAX_DEFAULT;
}

static int supported_proto(uint8_t family, uint8_t proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP ||
	       proto == (family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
}

/* The echo fields of one tuple nest of an ICMP entry's message as the BPF
 * program reads them from the kernel's tuple: the identifier in sport,
 * the type and code in dport's two bytes. libnetfilter_conntrack parses
 * the reply tuple's identifier and type but has no attribute that reads
 * them (its ports' attributes stay unset for ICMP). */
static void icmp_tuple(const struct nlattr *tuple, struct nsdp_kern_tuple *t)
{
	const struct nlattr *a, *p;
	uint8_t type_code[2] = {0, 0};

	mnl_attr_for_each_nested(a, tuple) {
		if (mnl_attr_get_type(a) != CTA_TUPLE_PROTO)
			continue;
		mnl_attr_for_each_nested(p, a) {
			uint16_t at = mnl_attr_get_type(p);

			if (mnl_attr_get_payload_len(p) < 1)
				continue;
			if ((at == CTA_PROTO_ICMP_ID ||
			     at == CTA_PROTO_ICMPV6_ID) &&
			    mnl_attr_get_payload_len(p) >= 2)
				t->sport = mnl_attr_get_u16(p);
			else if (at == CTA_PROTO_ICMP_TYPE ||
				 at == CTA_PROTO_ICMPV6_TYPE)
				type_code[0] = mnl_attr_get_u8(p);
			else if (at == CTA_PROTO_ICMP_CODE ||
				 at == CTA_PROTO_ICMPV6_CODE)
				type_code[1] = mnl_attr_get_u8(p);
		}
	}
	memcpy(&t->dport, type_code, sizeof(type_code));
}

/* Both tuples' echo fields of an ICMP entry, from its message. */
static void icmp_tuples(const struct nlmsghdr *nlh, struct nsdp_kern_key *key)
{
	const struct nlattr *a;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
		if (mnl_attr_get_type(a) == CTA_TUPLE_ORIG)
			icmp_tuple(a, &key->orig);
		else if (mnl_attr_get_type(a) == CTA_TUPLE_REPLY)
			icmp_tuple(a, &key->reply);
	}
}

int nsdp_ksrc_ct_key(const struct nsdp_ksrc *k, const struct nlmsghdr *nlh,
		     const struct nf_conntrack *ct, struct nsdp_kern_key *key)
{
	uint32_t status = nfct_get_attr_u32(ct, ATTR_STATUS);

	uint8_t l3 = nfct_get_attr_u8(ct, ATTR_L3PROTO);

	if ((l3 != AF_INET && l3 != AF_INET6) ||
	    !(status & (IPS_SRC_NAT | IPS_DST_NAT)))
		return 0;
	memset(key, 0, sizeof(*key));
	key->family = l3;
	key->proto = nfct_get_attr_u8(ct, ATTR_L4PROTO);
	if (!supported_proto(l3, key->proto))
		return 0;
	if (nfct_attr_is_set(ct, ATTR_ZONE))
		key->zone = nfct_get_attr_u16(ct, ATTR_ZONE);
	if (k->conf.zone_filter && key->zone != k->conf.zone)
		return 0;
	if (k->conf.mark_mask && (nfct_get_attr_u32(ct, ATTR_MARK) &
				  k->conf.mark_mask) != k->conf.mark)
		return 0;
	if (k->conf.ignore_mark &&
	    nfct_get_attr_u32(ct, ATTR_MARK) == k->conf.ignore_mark)
		return 0;
	key->netns = k->netns_ino;
	if (l3 == AF_INET6) {
		memcpy(key->orig.src6, nfct_get_attr(ct, ATTR_ORIG_IPV6_SRC),
		       16);
		memcpy(key->orig.dst6, nfct_get_attr(ct, ATTR_ORIG_IPV6_DST),
		       16);
		memcpy(key->reply.src6, nfct_get_attr(ct, ATTR_REPL_IPV6_SRC),
		       16);
		memcpy(key->reply.dst6, nfct_get_attr(ct, ATTR_REPL_IPV6_DST),
		       16);
	} else {
		key->orig.src = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC);
		key->orig.dst = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST);
		key->reply.src = nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC);
		key->reply.dst = nfct_get_attr_u32(ct, ATTR_REPL_IPV4_DST);
	}
	if (key->proto == IPPROTO_ICMP || key->proto == IPPROTO_ICMPV6) {
		icmp_tuples(nlh, key);
		return 1;
	}
	key->orig.sport = nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC);
	key->orig.dport = nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST);
	key->reply.sport = nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC);
	key->reply.dport = nfct_get_attr_u16(ct, ATTR_REPL_PORT_DST);
	return 1;
}
