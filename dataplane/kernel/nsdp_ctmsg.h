/*
 * nsdp_ctmsg.h - one ctnetlink message of a session record, for the
 * conntrack committer (nsdp_ctcommit.c): the entry that translates as the
 * record says (original tuple, plain inverse reply tuple, the NAT of each
 * side the record translates), its refresh, its delete, or the eviction of
 * whatever entry holds its reply tuple. Internal to the committer's
 * library.
 */
#ifndef NSDP_CTMSG_H
#define NSDP_CTMSG_H

#include <stddef.h>
#include <stdint.h>

#include "ns_record.h"

struct nf_conntrack;

/* CT_EVICT: delete whatever entry holds the record's reply tuple. */
enum ct_op { CT_CREATE, CT_UPDATE, CT_DELETE, CT_EVICT, CT_OPS };
/* CT_ICMP: ICMP echo, and ICMPv6 echo in an IPv6 entry. */
enum ct_pclass { CT_TCP, CT_UDP, CT_ICMP, CT_PCLASSES };
/* IPv4 entries, IPv6 (NAT66) entries. */
enum ct_l3 { CT_L3_V4, CT_L3_V6, CT_L3S };

/* Room one message needs at most (about 240 bytes are used). */
#define CT_MSG_MAX 512u

struct nsdp_ctmsg {
	/* One object per operation and protocol class: every message sets
	 * the same attributes of its object, so none is left over. */
	struct nf_conntrack *ct[CT_OPS][CT_PCLASSES][CT_L3S];
	uint32_t mark; /* CTA_MARK of created and refreshed entries; 0 = none */
	uint16_t zone; /* CTA_ZONE of every message; 0 = the default zone */
};

/* 0, or -ENOMEM (nothing left to free). */
int nsdp_ctmsg_init(struct nsdp_ctmsg *m, uint32_t mark, uint16_t zone);
void nsdp_ctmsg_fini(struct nsdp_ctmsg *m);

/* The class of an IP protocol, -1 for one the committer does not write. */
int nsdp_ctmsg_pclass(uint8_t proto);

/* The message of op for s (a protocol of a class; family IPv4, or NAT66
 * with its second line after it), with sequence number
 * seq and, for a create or refresh, timeout_s, built at buf (CT_MSG_MAX
 * bytes of room); its length. */
size_t nsdp_ctmsg_build(struct nsdp_ctmsg *m, enum ct_op op,
			const struct ns_session *s, uint32_t seq,
			uint32_t timeout_s, char *buf);

#endif
