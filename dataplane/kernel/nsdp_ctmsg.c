/*
 * nsdp_ctmsg.c - one ctnetlink message of a session record (see
 * nsdp_ctmsg.h), built with libnetfilter_conntrack where it writes what
 * the kernel needs, and with libmnl where it does not (the NAT of an ICMP
 * echo, the eviction's bare reply tuple).
 */
#include <errno.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include "nsdp_ctmsg.h"

int nsdp_ctmsg_init(struct nsdp_ctmsg *m, uint32_t mark, uint16_t zone)
{
	memset(m, 0, sizeof(*m));
	m->mark = mark;
	m->zone = zone;
	for (int op = 0; op < CT_OPS; op++)
		for (int pc = 0; pc < CT_PCLASSES; pc++)
			for (int l3 = 0; l3 < CT_L3S; l3++)
				if (!(m->ct[op][pc][l3] = nfct_new())) {
					nsdp_ctmsg_fini(m);
					return -ENOMEM;
				}
	return 0;
}

void nsdp_ctmsg_fini(struct nsdp_ctmsg *m)
{
	for (int op = 0; op < CT_OPS; op++)
		for (int pc = 0; pc < CT_PCLASSES; pc++)
			for (int l3 = 0; l3 < CT_L3S; l3++)
				if (m->ct[op][pc][l3]) {
					nfct_destroy(m->ct[op][pc][l3]);
					m->ct[op][pc][l3] = NULL;
				}
}

int nsdp_ctmsg_pclass(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return CT_TCP;
	case IPPROTO_UDP:
		return CT_UDP;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return CT_ICMP;
	default:
		return -1;
	}
}

static int is_v6(const struct ns_session *s)
{
	return s->family == NS_FAMILY_NAT66;
}

static void set_tuple(const struct nsdp_ctmsg *m, struct nf_conntrack *ct,
		      const struct ns_session *s, int pclass)
{
	if (m->zone)
		nfct_set_attr_u16(ct, ATTR_ZONE, m->zone);
	if (is_v6(s)) {
		const struct ns_session_v6 *v6 = ns_session_v6_of(s);

		nfct_set_attr_u8(ct, ATTR_L3PROTO, AF_INET6);
		nfct_set_attr(ct, ATTR_IPV6_SRC, v6->orig_saddr);
		nfct_set_attr(ct, ATTR_IPV6_DST, v6->orig_daddr);
	} else {
		nfct_set_attr_u8(ct, ATTR_L3PROTO, AF_INET);
		nfct_set_attr_u32(ct, ATTR_IPV4_SRC, htonl(s->orig.saddr));
		nfct_set_attr_u32(ct, ATTR_IPV4_DST, htonl(s->orig.daddr));
	}
	nfct_set_attr_u8(ct, ATTR_L4PROTO, s->proto);
	if (pclass == CT_ICMP) {
		/* echo request */
		nfct_set_attr_u8(ct, ATTR_ICMP_TYPE, is_v6(s) ? 128 : 8);
		nfct_set_attr_u8(ct, ATTR_ICMP_CODE, 0);
		nfct_set_attr_u16(ct, ATTR_ICMP_ID, htons(s->orig.sport));
	} else {
		nfct_set_attr_u16(ct, ATTR_PORT_SRC, htons(s->orig.sport));
		nfct_set_attr_u16(ct, ATTR_PORT_DST, htons(s->orig.dport));
	}
}

static void set_state(const struct nsdp_ctmsg *m, struct nf_conntrack *ct,
		      int pclass, uint32_t timeout_s)
{
	nfct_set_attr_u32(ct, ATTR_TIMEOUT, timeout_s);
	if (pclass == CT_TCP) {
		nfct_set_attr_u8(ct, ATTR_TCP_STATE, TCP_CONNTRACK_ESTABLISHED);
		nfct_set_attr_u8(ct, ATTR_TCP_FLAGS_ORIG,
				 IP_CT_TCP_FLAG_BE_LIBERAL);
		nfct_set_attr_u8(ct, ATTR_TCP_MASK_ORIG,
				 IP_CT_TCP_FLAG_BE_LIBERAL);
		nfct_set_attr_u8(ct, ATTR_TCP_FLAGS_REPL,
				 IP_CT_TCP_FLAG_BE_LIBERAL);
		nfct_set_attr_u8(ct, ATTR_TCP_MASK_REPL,
				 IP_CT_TCP_FLAG_BE_LIBERAL);
	}
	if (m->mark)
		nfct_set_attr_u32(ct, ATTR_MARK, m->mark);
}

/* Which sides s translates: its source (source NAT: masquerade, snat)
 * and its destination (destination NAT: dnat, port forwarding). An entry
 * that changes neither is made a source NAT one to itself, as before. */
static int translates_dst(const struct ns_session *s)
{
	const struct ns_session_v6 *v6 = ns_session_v6_of(s);

	if (is_v6(s) && memcmp(v6->xlat_daddr, v6->orig_daddr, 16) != 0)
		return 1;
	return s->xlat.daddr != s->orig.daddr ||
	       (s->proto != IPPROTO_ICMP && s->xlat.dport != s->orig.dport);
}

static int translates_src(const struct ns_session *s)
{
	const struct ns_session_v6 *v6 = ns_session_v6_of(s);

	if (is_v6(s) && memcmp(v6->xlat_saddr, v6->orig_saddr, 16) != 0)
		return 1;
	return s->xlat.saddr != s->orig.saddr ||
	       s->xlat.sport != s->orig.sport || !translates_dst(s);
}

/* The translated source (src) or destination address of s as a NAT
 * range of one. */
static void put_nat_ip(struct nlmsghdr *nlh, const struct ns_session *s,
		       int src)
{
	const struct ns_session_v6 *v6 = ns_session_v6_of(s);
	uint32_t a4 = htonl(src ? s->xlat.saddr : s->xlat.daddr);

	if (is_v6(s)) {
		const uint8_t *a = src ? v6->xlat_saddr : v6->xlat_daddr;

		mnl_attr_put(nlh, CTA_NAT_V6_MINIP, 16, a);
		mnl_attr_put(nlh, CTA_NAT_V6_MAXIP, 16, a);
		return;
	}
	mnl_attr_put_u32(nlh, CTA_NAT_V4_MINIP, a4);
	mnl_attr_put_u32(nlh, CTA_NAT_V4_MAXIP, a4);
}

/* CTA_NAT_SRC of an ICMP echo: libnetfilter_conntrack writes the
 * translated port of TCP and UDP only, and the kernel takes the ICMP
 * identifier from the same attribute. Its destination NAT (CTA_NAT_DST)
 * has the address alone. */
static void put_icmp_nat(struct nlmsghdr *nlh, const struct ns_session *s)
{
	struct nlattr *nat, *proto;

	if (translates_src(s)) {
		nat = mnl_attr_nest_start(nlh, CTA_NAT_SRC);
		put_nat_ip(nlh, s, 1);
		proto = mnl_attr_nest_start(nlh, CTA_NAT_PROTO);
		mnl_attr_put_u16(nlh, CTA_PROTONAT_PORT_MIN,
				 htons(s->xlat.sport));
		mnl_attr_put_u16(nlh, CTA_PROTONAT_PORT_MAX,
				 htons(s->xlat.sport));
		mnl_attr_nest_end(nlh, proto);
		mnl_attr_nest_end(nlh, nat);
	}
	if (translates_dst(s)) {
		nat = mnl_attr_nest_start(nlh, CTA_NAT_DST);
		put_nat_ip(nlh, s, 0);
		mnl_attr_nest_end(nlh, nat);
	}
}

/* CTA_TUPLE_REPLY of s's entry once translated: from the translated
 * destination to the translated address and port (ICMP: the echo reply to
 * the translated identifier). */
static void put_reply_tuple(struct nlmsghdr *nlh, const struct ns_session *s,
			    int pclass)
{
	struct nlattr *tuple = mnl_attr_nest_start(nlh, CTA_TUPLE_REPLY);
	struct nlattr *n = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);

	if (is_v6(s)) {
		mnl_attr_put(nlh, CTA_IP_V6_SRC, 16,
			     ns_session_v6_of(s)->xlat_daddr);
		mnl_attr_put(nlh, CTA_IP_V6_DST, 16,
			     ns_session_v6_of(s)->xlat_saddr);
	} else {
		mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, htonl(s->xlat.daddr));
		mnl_attr_put_u32(nlh, CTA_IP_V4_DST, htonl(s->xlat.saddr));
	}
	mnl_attr_nest_end(nlh, n);
	n = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, s->proto);
	if (pclass == CT_ICMP) {
		if (is_v6(s)) {
			mnl_attr_put_u16(nlh, CTA_PROTO_ICMPV6_ID,
					 htons(s->xlat.sport));
			mnl_attr_put_u8(nlh, CTA_PROTO_ICMPV6_TYPE, 129);
			mnl_attr_put_u8(nlh, CTA_PROTO_ICMPV6_CODE, 0);
		} else {
			mnl_attr_put_u16(nlh, CTA_PROTO_ICMP_ID,
					 htons(s->xlat.sport));
			mnl_attr_put_u8(nlh, CTA_PROTO_ICMP_TYPE, 0);
			mnl_attr_put_u8(nlh, CTA_PROTO_ICMP_CODE, 0);
		}
	} else {
		mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(s->xlat.dport));
		mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(s->xlat.sport));
	}
	mnl_attr_nest_end(nlh, n);
	mnl_attr_nest_end(nlh, tuple);
}

/* A create's translation attributes: set for the sides it translates. */
static const enum nf_conntrack_attr nat_attrs[] = {
	ATTR_SNAT_IPV4, ATTR_SNAT_IPV6, ATTR_SNAT_PORT,
	ATTR_DNAT_IPV4, ATTR_DNAT_IPV6, ATTR_DNAT_PORT,
};

size_t nsdp_ctmsg_build(struct nsdp_ctmsg *m, enum ct_op op,
			const struct ns_session *s, uint32_t seq,
			uint32_t timeout_s, char *buf)
{
	int pclass = nsdp_ctmsg_pclass(s->proto);
	struct nf_conntrack *ct = m->ct[op][pclass][is_v6(s)];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfh;

	nlh->nlmsg_type =
		(NFNL_SUBSYS_CTNETLINK << 8) |
		(op == CT_DELETE || op == CT_EVICT ? IPCTNL_MSG_CT_DELETE
						   : IPCTNL_MSG_CT_NEW);
	nlh->nlmsg_flags = NLM_F_REQUEST;
	if (op == CT_CREATE)
		nlh->nlmsg_flags |= NLM_F_CREATE | NLM_F_EXCL;
	nlh->nlmsg_seq = seq;
	nfh = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfh));
	nfh->nfgen_family = is_v6(s) ? AF_INET6 : AF_INET;
	nfh->version = NFNETLINK_V0;
	nfh->res_id = 0;
	if (op == CT_EVICT) {
		put_reply_tuple(nlh, s, pclass);
		if (m->zone)
			mnl_attr_put_u16(nlh, CTA_ZONE, htons(m->zone));
		return nlh->nlmsg_len;
	}

	set_tuple(m, ct, s, pclass);
	if (op == CT_CREATE) {
		/* The object is reused: the last entry's translation goes. */
		for (size_t i = 0; i < sizeof(nat_attrs) / sizeof(nat_attrs[0]);
		     i++)
			nfct_attr_unset(ct, nat_attrs[i]);
		nfct_setobjopt(ct, NFCT_SOPT_SETUP_REPLY);
		if (pclass != CT_ICMP && translates_src(s)) {
			if (is_v6(s))
				nfct_set_attr(ct, ATTR_SNAT_IPV6,
					      ns_session_v6_of(s)->xlat_saddr);
			else
				nfct_set_attr_u32(ct, ATTR_SNAT_IPV4,
						  htonl(s->xlat.saddr));
			nfct_set_attr_u16(ct, ATTR_SNAT_PORT,
					  htons(s->xlat.sport));
		}
		if (pclass != CT_ICMP && translates_dst(s)) {
			if (is_v6(s))
				nfct_set_attr(ct, ATTR_DNAT_IPV6,
					      ns_session_v6_of(s)->xlat_daddr);
			else
				nfct_set_attr_u32(ct, ATTR_DNAT_IPV4,
						  htonl(s->xlat.daddr));
			nfct_set_attr_u16(ct, ATTR_DNAT_PORT,
					  htons(s->xlat.dport));
		}
		nfct_set_attr_u32(ct, ATTR_STATUS,
				  IPS_SEEN_REPLY | IPS_ASSURED);
	}
	if (op != CT_DELETE)
		set_state(m, ct, pclass, timeout_s);
	nfct_nlmsg_build(nlh, ct);
	if (op == CT_CREATE && pclass == CT_ICMP)
		put_icmp_nat(nlh, s);
	return nlh->nlmsg_len;
}
