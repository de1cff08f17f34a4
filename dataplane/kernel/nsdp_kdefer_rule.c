/*
 * nsdp_kdefer_rule.c - the nftables rule that hands a kernel gateway's
 * new NAT'd connections to defer's queue (nsdp_kdefer.h), written over
 * nf_tables netlink with libmnl as one transaction:
 *
 *   table ip natsync_defer {
 *     chain postrouting {
 *       type filter hook postrouting priority 300;
 *       ct status & confirmed == 0 ct status & (snat | dnat) != 0 \
 *         queue num N bypass
 *     }
 *   }
 *
 * and the same table in family ip6, for IPv6 (one queue for both: the
 * queue's packets tell their family by their header). Two tables, not
 * one of family inet: nft_compat's NFQUEUE target (below) is for ip and
 * ip6 tables.
 *
 * An entry is unconfirmed only while its first packet has not left (a
 * later packet, even one that conntrack still calls new, as UDP's before
 * a reply, finds it confirmed), so the rule takes one packet per entry.
 * Priority 300 comes after every NAT chain of a standard priority (srcnat
 * is 100), so the entry's reply tuple holds its translation, and before
 * conntrack confirms the entry (the last hook, INT_MAX), so its event and
 * the BPF capture come only after the verdict. Where the kernel has no
 * nft_queue expression (CONFIG_NFT_QUEUE off) the rule ends in the
 * xtables NFQUEUE target through nft_compat instead, with the same
 * meaning (--queue-num N --queue-bypass), as iptables-nft writes it.
 *
 * Invariant: the table is ours alone; adding deletes it first, so a table
 * left by an agent that was killed is replaced, never doubled.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/xt_NFQUEUE.h>

#include "nsdp_kdefer.h"

#define CHAIN "postrouting"
#define NAT_STATUS (IPS_SRC_NAT | IPS_DST_NAT)

static struct nlmsghdr *nft_msg(struct mnl_nlmsg_batch *b, uint16_t type,
				uint16_t family, uint16_t flags, uint32_t seq,
				uint16_t res_id)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(mnl_nlmsg_batch_current(b));
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = (uint8_t)family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(res_id);
	return nlh;
}

static uint16_t nft_type(int msg)
{
	return (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | msg);
}

static void put_data(struct nlmsghdr *nlh, uint16_t type, uint32_t v)
{
	struct nlattr *nest = mnl_attr_nest_start(nlh, type);

	mnl_attr_put(nlh, NFTA_DATA_VALUE, sizeof(v), &v);
	mnl_attr_nest_end(nlh, nest);
}

static struct nlattr *expr_start(struct nlmsghdr *nlh, const char *name,
				 struct nlattr **elem)
{
	*elem = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
	mnl_attr_put_strz(nlh, NFTA_EXPR_NAME, name);
	return mnl_attr_nest_start(nlh, NFTA_EXPR_DATA);
}

static void expr_end(struct nlmsghdr *nlh, struct nlattr *data,
		     struct nlattr *elem)
{
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, elem);
}

/* ct KEY & mask OP 0 (the ct value is in host byte order). */
static void put_ct_test(struct nlmsghdr *nlh, uint32_t key, uint32_t mask,
			uint32_t op)
{
	struct nlattr *elem, *data;

	data = expr_start(nlh, "ct", &elem);
	mnl_attr_put_u32(nlh, NFTA_CT_KEY, htonl(key));
	mnl_attr_put_u32(nlh, NFTA_CT_DREG, htonl(NFT_REG_1));
	expr_end(nlh, data, elem);
	data = expr_start(nlh, "bitwise", &elem);
	mnl_attr_put_u32(nlh, NFTA_BITWISE_SREG, htonl(NFT_REG_1));
	mnl_attr_put_u32(nlh, NFTA_BITWISE_DREG, htonl(NFT_REG_1));
	mnl_attr_put_u32(nlh, NFTA_BITWISE_LEN, htonl(sizeof(uint32_t)));
	put_data(nlh, NFTA_BITWISE_MASK, mask);
	put_data(nlh, NFTA_BITWISE_XOR, 0);
	expr_end(nlh, data, elem);
	data = expr_start(nlh, "cmp", &elem);
	mnl_attr_put_u32(nlh, NFTA_CMP_SREG, htonl(NFT_REG_1));
	mnl_attr_put_u32(nlh, NFTA_CMP_OP, htonl(op));
	put_data(nlh, NFTA_CMP_DATA, 0);
	expr_end(nlh, data, elem);
}

static void put_queue(struct nlmsghdr *nlh, uint16_t queue, int compat)
{
	struct nlattr *elem, *data;

	if (!compat) {
		data = expr_start(nlh, "queue", &elem);
		mnl_attr_put_u16(nlh, NFTA_QUEUE_NUM, htons(queue));
		mnl_attr_put_u16(nlh, NFTA_QUEUE_TOTAL, htons(1));
		mnl_attr_put_u16(nlh, NFTA_QUEUE_FLAGS,
				 htons(NFT_QUEUE_FLAG_BYPASS));
	} else {
		/* XT_ALIGN(sizeof(struct xt_NFQ_info_v3)): 8 bytes. */
		uint8_t info[8] = {0};
		struct xt_NFQ_info_v3 v3 = {.queuenum = queue,
					    .queues_total = 1,
					    .flags = NFQ_FLAG_BYPASS};

		memcpy(info, &v3, sizeof(v3));
		data = expr_start(nlh, "target", &elem);
		mnl_attr_put_strz(nlh, NFTA_TARGET_NAME, "NFQUEUE");
		mnl_attr_put_u32(nlh, NFTA_TARGET_REV, htonl(3));
		mnl_attr_put(nlh, NFTA_TARGET_INFO, sizeof(info), info);
	}
	expr_end(nlh, data, elem);
}

/* The transaction's messages after BATCH_BEGIN: the table of family
 * (NFPROTO_IPV4 or NFPROTO_IPV6) deleted (del) or made with its chain and
 * rule. Returns how many ask for an ack. */
static int put_table(struct mnl_nlmsg_batch *b, uint32_t seq, int del,
		     uint16_t family, uint16_t queue, int compat)
{
	struct nlmsghdr *nlh;
	struct nlattr *hook, *exprs;

	if (del) {
		nlh = nft_msg(b, nft_type(NFT_MSG_DELTABLE), family, NLM_F_ACK,
			      seq, 0);
		mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, NSDP_KDEFER_TABLE);
		mnl_nlmsg_batch_next(b);
		return 1;
	}
	nlh = nft_msg(b, nft_type(NFT_MSG_NEWTABLE), family,
		      NLM_F_CREATE | NLM_F_ACK, seq, 0);
	mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, NSDP_KDEFER_TABLE);
	mnl_nlmsg_batch_next(b);

	nlh = nft_msg(b, nft_type(NFT_MSG_NEWCHAIN), family,
		      NLM_F_CREATE | NLM_F_ACK, seq + 1, 0);
	mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, NSDP_KDEFER_TABLE);
	mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, CHAIN);
	mnl_attr_put_strz(nlh, NFTA_CHAIN_TYPE, "filter");
	hook = mnl_attr_nest_start(nlh, NFTA_CHAIN_HOOK);
	mnl_attr_put_u32(nlh, NFTA_HOOK_HOOKNUM, htonl(NF_INET_POST_ROUTING));
	mnl_attr_put_u32(nlh, NFTA_HOOK_PRIORITY, htonl(NSDP_KDEFER_PRIORITY));
	mnl_attr_nest_end(nlh, hook);
	mnl_nlmsg_batch_next(b);

	nlh = nft_msg(b, nft_type(NFT_MSG_NEWRULE), family,
		      NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, seq + 2, 0);
	mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, NSDP_KDEFER_TABLE);
	mnl_attr_put_strz(nlh, NFTA_RULE_CHAIN, CHAIN);
	exprs = mnl_attr_nest_start(nlh, NFTA_RULE_EXPRESSIONS);
	put_ct_test(nlh, NFT_CT_STATUS, IPS_CONFIRMED, NFT_CMP_EQ);
	put_ct_test(nlh, NFT_CT_STATUS, NAT_STATUS, NFT_CMP_NEQ);
	put_queue(nlh, queue, compat);
	mnl_attr_nest_end(nlh, exprs);
	mnl_nlmsg_batch_next(b);
	return 3;
}

/* Read the acks of n messages: 0, or the first error (-errno). */
static int read_acks(struct mnl_socket *nl, int n)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	int first_err = 0;

	while (n > 0) {
		ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
		int len;

		if (got < 0)
			return first_err ? first_err : -errno;
		for (len = (int)got; mnl_nlmsg_ok(nlh, len);
		     nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *e;

			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			if (e->error != 0 && first_err == 0)
				first_err = e->error;
			n--;
		}
		/* After an error the kernel aborts the transaction and may
		 * not answer the rest. */
		if (first_err != 0)
			return first_err;
	}
	return 0;
}

/* One transaction: the tables of the families given deleted, or made
 * (with the native queue expression or the compat target). 0 or -errno. */
static int transact(int netns_fd, const uint16_t *families, int n, int del,
		    uint16_t queue, int compat)
{
	char buf[MNL_SOCKET_BUFFER_SIZE * 2];
	struct mnl_nlmsg_batch *b;
	struct mnl_socket *nl = nsdp_kdefer_nl_open_in(netns_fd);
	struct timeval tv = {.tv_sec = 2};
	uint32_t seq = (uint32_t)time(NULL);
	int acks = 0, rc;

	if (!nl)
		return -errno;
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
		   sizeof(tv));
	b = mnl_nlmsg_batch_start(buf, sizeof(buf));
	nft_msg(b, NFNL_MSG_BATCH_BEGIN, AF_UNSPEC, 0, seq++,
		NFNL_SUBSYS_NFTABLES);
	mnl_nlmsg_batch_next(b);
	for (int i = 0; i < n; i++) {
		acks += put_table(b, seq, del, families[i], queue, compat);
		seq += 3;
	}
	nft_msg(b, NFNL_MSG_BATCH_END, AF_UNSPEC, 0, seq, NFNL_SUBSYS_NFTABLES);
	mnl_nlmsg_batch_next(b);
	if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b),
			      mnl_nlmsg_batch_size(b)) < 0)
		rc = -errno;
	else
		rc = read_acks(nl, acks);
	mnl_nlmsg_batch_stop(b);
	mnl_socket_close(nl);
	return rc;
}

static const uint16_t families[] = {NFPROTO_IPV4, NFPROTO_IPV6};

/* One transaction per family: a table that is not there fails its
 * transaction (ENOENT), which must not keep the other from going. */
void nsdp_kdefer_rule_del(int netns_fd)
{
	for (int i = 0; i < 2; i++)
		transact(netns_fd, &families[i], 1, 1, 0, 0);
}

int nsdp_kdefer_rule_add(int netns_fd, uint16_t queue, char *err, size_t errlen)
{
	int rc;

	nsdp_kdefer_rule_del(netns_fd);
	rc = transact(netns_fd, families, 2, 0, queue, 0);
	if (rc == -ENOENT || rc == -EOPNOTSUPP)
		rc = transact(netns_fd, families, 2, 0, queue, 1);
	if (rc != 0)
		snprintf(err, errlen,
			 "defer: cannot add the nftables tables ip and ip6 %s "
			 "(queue %u): "
			 "%s (needs CAP_NET_ADMIN, nf_tables, and nft_queue "
			 "or the xtables NFQUEUE target)",
			 NSDP_KDEFER_TABLE, queue, strerror(-rc));
	return rc;
}
