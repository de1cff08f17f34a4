/*
 * nsdp_kdefer.c - the NFQUEUE side of a kernel gateway's defer
 * (nsdp_kdefer.h): the queue bound over libmnl, the packets it hands over
 * read with their headers, the records they wait for, the held ones kept
 * in order, and the verdicts.
 *
 * The queue copies each packet's headers, not its conntrack entry:
 * NFQA_CT needs the kernel's ctnetlink glue (CONFIG_NETFILTER_NETLINK_GLUE_CT),
 * which not every kernel has; the entry comes to the source from the BPF
 * program instead (nsdp_kern.bpf.c) and is matched to the packet by the
 * reply tuple that the packet's translated headers give.
 *
 * Invariants
 * - Every packet read gets exactly one verdict, NF_ACCEPT: at once
 *   (skipped, overflow) or when released; nsdp_kdefer_free accepts what
 *   is still held before it unbinds (an unbound queue drops what it
 *   holds).
 * - Held packets are in the order they were read, which is the order of
 *   their records in the lane and of their deadlines: if the oldest may
 *   not go, no later one may, so release looks at the oldest only.
 * - One thread uses a queue; the counters are read with relaxed atomics.
 *
 * Not here: which packets are held and for which record (nsdp_ksrc.c),
 * the nftables rule that queues them (nsdp_kdefer_rule.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/types.h>
#include <netinet/in.h>

#include "nsdp_kdefer.h"
#include "nsdp_kern.h"
#include "nsdp_netns.h"

/* Packets read in one round at most: the round records them all before
 * it reads the next. */
#define PENDING_MAX 256
/* The packet's first bytes: its IPv4 header (60 bytes at most) or IPv6
 * header (40) and the ports or the ICMP header's first 8 bytes. */
#define COPY_RANGE 68
#define MSG_BUF 8192
#define VERDICT_BUF 16384
#define RCVBUF (8 << 20)

struct held {
	uint32_t id;
	uint64_t seq;
	uint64_t since_ns;
};

struct pending {
	uint32_t id;
	int parsed; /* proto and reply hold the packet's */
	uint8_t proto;
	struct nsdp_kern_tuple reply;
};

/* A record that waits for its packet (nsdp_kdefer_expect). */
struct expect {
	uint64_t seq; /* 0: free */
	uint8_t proto;
	struct nsdp_kern_tuple reply;
};
/* Slots a key may take, from its hash on. */
#define EXPECT_PROBE 8

struct nsdp_kdefer {
	struct mnl_socket *nl;
	uint16_t queue;
	uint64_t max_ns;
	uint32_t last_id;
	struct pending pending[PENDING_MAX];
	int n_pending;
	struct held *held; /* ring of NSDP_KDEFER_HELD_MAX */
	unsigned int head, n_held;
	char verdicts[VERDICT_BUF];
	size_t verdicts_len;
	char msg[MSG_BUF];
	struct expect *expect; /* NSDP_KDEFER_EXPECT_SLOTS */
	struct nsdp_kdefer_stats st;
};

#define KD_ADD(d, f, v) __atomic_add_fetch(&(d)->st.f, (v), __ATOMIC_RELAXED)

struct mnl_socket *nsdp_kdefer_nl_open_in(int netns_fd)
{
	int own = nsdp_netns_enter(netns_fd), saved;
	struct mnl_socket *nl;

	if (own == -2)
		return NULL;
	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) != 0) {
		saved = errno;
		mnl_socket_close(nl);
		nl = NULL;
		errno = saved;
	}
	nsdp_netns_leave(own);
	return nl;
}

static struct nlmsghdr *queue_msg(char *buf, uint16_t type, uint16_t queue)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(queue);
	return nlh;
}

struct packet_attrs {
	const struct nlattr *hdr, *payload;
};

static int on_attr(const struct nlattr *attr, void *data)
{
	struct packet_attrs *a = data;

	switch (mnl_attr_get_type(attr)) {
	case NFQA_PACKET_HDR:
		if (mnl_attr_validate2(attr, MNL_TYPE_UNSPEC,
				       sizeof(struct nfqnl_msg_packet_hdr)) ==
		    0)
			a->hdr = attr;
		break;
	case NFQA_PAYLOAD:
		a->payload = attr;
		break;
	}
	return MNL_CB_OK;
}

static void accept_packet(struct nsdp_kdefer *d, uint32_t id);
static void verdicts_flush(struct nsdp_kdefer *d);

/* A packet queued while the queue is being configured (a rule of the
 * operator's, or one a killed agent left, was there already): let go at
 * once, unheld, counted skipped. */
static int on_early_packet(const struct nlmsghdr *nlh, void *data)
{
	struct nsdp_kdefer *d = data;
	struct packet_attrs a = {0};
	const struct nfqnl_msg_packet_hdr *ph;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET) ||
	    mnl_attr_parse(nlh, sizeof(struct nfgenmsg), on_attr, &a) < 0 ||
	    !a.hdr)
		return MNL_CB_OK;
	ph = mnl_attr_get_payload(a.hdr);
	accept_packet(d, ntohl(ph->packet_id));
	verdicts_flush(d);
	KD_ADD(d, queued, 1);
	KD_ADD(d, skipped, 1);
	return MNL_CB_OK;
}

/* Send a configuration message and wait for its acknowledgement: 0 or
 * -errno. */
static int config_request(struct nsdp_kdefer *d, struct nlmsghdr *nlh)
{
	unsigned int portid = mnl_socket_get_portid(d->nl);
	uint32_t seq = (uint32_t)time(NULL);
	ssize_t n;

	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	if (mnl_socket_sendto(d->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		n = mnl_socket_recvfrom(d->nl, d->msg, sizeof(d->msg));
		if (n < 0)
			return -errno;
		/* An ack (MNL_CB_STOP), an error, or a queued packet. */
		n = mnl_cb_run(d->msg, (size_t)n, seq, portid, on_early_packet,
			       d);
		if (n < 0)
			return errno ? -errno : -EIO;
		if (n == MNL_CB_STOP)
			return 0;
	}
}

static int bind_queue(struct nsdp_kdefer *d)
{
	char buf[256];
	struct nlmsghdr *nlh;
	struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND,
					   .pf = htons(AF_INET)};
	struct nfqnl_msg_config_params params = {
		.copy_range = htonl(COPY_RANGE),
		.copy_mode = NFQNL_COPY_PACKET};
	uint32_t flags = htonl(NFQA_CFG_F_FAIL_OPEN);
	int rc;

	nlh = queue_msg(buf, NFQNL_MSG_CONFIG, d->queue);
	mnl_attr_put(nlh, NFQA_CFG_CMD, sizeof(cmd), &cmd);
	rc = config_request(d, nlh);
	if (rc != 0)
		return rc;
	nlh = queue_msg(buf, NFQNL_MSG_CONFIG, d->queue);
	mnl_attr_put(nlh, NFQA_CFG_PARAMS, sizeof(params), &params);
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, flags);
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK, flags);
	mnl_attr_put_u32(nlh, NFQA_CFG_QUEUE_MAXLEN,
			 htonl(NSDP_KDEFER_HELD_MAX));
	return config_request(d, nlh);
}

struct nsdp_kdefer *nsdp_kdefer_open(int netns_fd, uint16_t queue,
				     uint32_t max_us, int *why, char *err,
				     size_t errlen)
{
	struct nsdp_kdefer *d = calloc(1, sizeof(*d));
	int rcvbuf = RCVBUF, rc;

	*why = 0;
	if (!d || !(d->held = calloc(NSDP_KDEFER_HELD_MAX, sizeof(*d->held))) ||
	    !(d->expect = calloc(NSDP_KDEFER_EXPECT_SLOTS, sizeof(*d->expect))))
		goto nomem;
	d->queue = queue;
	d->max_ns = (uint64_t)max_us * 1000ULL;
	d->nl = nsdp_kdefer_nl_open_in(netns_fd);
	if (!d->nl) {
		*why = -errno;
		snprintf(err, errlen, "defer: netfilter netlink socket: %s",
			 strerror(errno));
		nsdp_kdefer_free(d);
		return NULL;
	}
	if (setsockopt(mnl_socket_get_fd(d->nl), SOL_SOCKET, SO_RCVBUFFORCE,
		       &rcvbuf, sizeof(rcvbuf)) != 0)
		setsockopt(mnl_socket_get_fd(d->nl), SOL_SOCKET, SO_RCVBUF,
			   &rcvbuf, sizeof(rcvbuf));
	rc = bind_queue(d);
	if (rc != 0) {
		*why = rc;
		snprintf(err, errlen, "defer: cannot bind NFQUEUE %u: %s%s",
			 queue, strerror(-rc),
			 rc == -EBUSY
				 ? " (another program holds that queue: "
				   "set [source] defer_queue)"
				 : " (needs CAP_NET_ADMIN and the kernel's "
				   "nfnetlink_queue)");
		nsdp_kdefer_free(d);
		return NULL;
	}
	return d;
nomem:
	*why = -ENOMEM;
	snprintf(err, errlen, "defer: out of memory");
	nsdp_kdefer_free(d);
	return NULL;
}

int nsdp_kdefer_fd(const struct nsdp_kdefer *d)
{
	return mnl_socket_get_fd(d->nl);
}

static void verdicts_flush(struct nsdp_kdefer *d)
{
	if (d->verdicts_len == 0)
		return;
	/* A verdict the kernel refuses (the packet is gone) is answered
	 * with an error message that nsdp_kdefer_recv skips. */
	mnl_socket_sendto(d->nl, d->verdicts, d->verdicts_len);
	d->verdicts_len = 0;
}

static void accept_packet(struct nsdp_kdefer *d, uint32_t id)
{
	struct nfqnl_msg_verdict_hdr vh = {.verdict = htonl(NF_ACCEPT),
					   .id = htonl(id)};
	struct nlmsghdr *nlh;

	if (d->verdicts_len + 64 > sizeof(d->verdicts))
		verdicts_flush(d);
	nlh = queue_msg(d->verdicts + d->verdicts_len, NFQNL_MSG_VERDICT,
			d->queue);
	mnl_attr_put(nlh, NFQA_VERDICT_HDR, sizeof(vh), &vh);
	d->verdicts_len += NLMSG_ALIGN(nlh->nlmsg_len);
}

void nsdp_kdefer_release_all(struct nsdp_kdefer *d)
{
	while (d->n_held > 0) {
		accept_packet(d, d->held[d->head].id);
		KD_ADD(d, timeouts, 1);
		d->head = (d->head + 1) % NSDP_KDEFER_HELD_MAX;
		d->n_held--;
	}
	verdicts_flush(d);
}

void nsdp_kdefer_free(struct nsdp_kdefer *d)
{
	if (!d)
		return;
	if (d->nl) {
		char buf[256];
		struct nfqnl_msg_config_cmd cmd = {
			.command = NFQNL_CFG_CMD_UNBIND, .pf = htons(AF_INET)};
		struct nlmsghdr *nlh;

		/* Read but undecided: accepted, like the held ones. */
		for (int i = 0; i < d->n_pending; i++)
			accept_packet(d, d->pending[i].id);
		d->n_pending = 0;
		nsdp_kdefer_release_all(d);
		nlh = queue_msg(buf, NFQNL_MSG_CONFIG, d->queue);
		mnl_attr_put(nlh, NFQA_CFG_CMD, sizeof(cmd), &cmd);
		mnl_socket_sendto(d->nl, nlh, nlh->nlmsg_len);
		mnl_socket_close(d->nl);
	}
	free(d->held);
	free(d->expect);
	free(d);
}

/* The reply tuple of the packet's conntrack entry, from its headers: the
 * packet left NAT as the reply direction's inverse (network byte order,
 * as nsdp_kern_tuple keeps it); ICMP echo: the identifier, and the echo
 * reply's type and code (0 for IPv4, 129 and 0 for ICMPv6). IPv6: the
 * transport header right after the fixed one (a first packet with
 * extension headers is not matched, and goes at once). 0, or -1 for what
 * is no such packet. */
static int parse_reply(const uint8_t *pkt, size_t len, struct pending *p)
{
	int v6 = len >= 40 && (pkt[0] >> 4) == 6;
	size_t l4;

	memset(&p->reply, 0, sizeof(p->reply));
	if (v6) {
		l4 = 40;
		p->proto = pkt[6];
		memcpy(p->reply.src6, pkt + 24, 16);
		memcpy(p->reply.dst6, pkt + 8, 16);
	} else if (len >= 20 && (pkt[0] >> 4) == 4) {
		l4 = (size_t)(pkt[0] & 0x0f) * 4;
		if (l4 < 20)
			return -1;
		p->proto = pkt[9];
		memcpy(&p->reply.src, pkt + 16, 4);
		memcpy(&p->reply.dst, pkt + 12, 4);
	} else {
		return -1;
	}
	if (len < l4 + 8)
		return -1;
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) {
		memcpy(&p->reply.sport, pkt + l4 + 2, 2);
		memcpy(&p->reply.dport, pkt + l4, 2);
	} else if (!v6 && p->proto == IPPROTO_ICMP && pkt[l4] == 8) {
		memcpy(&p->reply.sport, pkt + l4 + 4, 2);
	} else if (v6 && p->proto == IPPROTO_ICMPV6 && pkt[l4] == 128) {
		memcpy(&p->reply.sport, pkt + l4 + 4, 2);
		memset(&p->reply.dport, 129, 1); /* type 129, code 0 */
	} else {
		return -1;
	}
	return 0;
}

/* One message of the queue's socket into the pending list: 1 when it was
 * a packet. */
static int take_message(struct nsdp_kdefer *d, const struct nlmsghdr *nlh)
{
	struct packet_attrs a = {0};
	const struct nfqnl_msg_packet_hdr *ph;
	struct pending *p;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
		return 0; /* an error answering a verdict, an ack */
	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), on_attr, &a) < 0 ||
	    !a.hdr)
		return 0;
	ph = mnl_attr_get_payload(a.hdr);
	p = &d->pending[d->n_pending];
	p->id = ntohl(ph->packet_id);
	p->parsed = a.payload &&
		    parse_reply(mnl_attr_get_payload(a.payload),
				mnl_attr_get_payload_len(a.payload), p) == 0;
	if (p->id > d->last_id + 1 && d->last_id != 0)
		KD_ADD(d, missed, p->id - d->last_id - 1);
	if (p->id > d->last_id)
		d->last_id = p->id;
	d->n_pending++;
	KD_ADD(d, queued, 1);
	return 1;
}

int nsdp_kdefer_recv(struct nsdp_kdefer *d)
{
	d->n_pending = 0;
	while (d->n_pending < PENDING_MAX) {
		ssize_t n = recv(mnl_socket_get_fd(d->nl), d->msg,
				 sizeof(d->msg), MSG_DONTWAIT);
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)d->msg;
		int len;

		if (n < 0 && errno == ENOBUFS)
			continue; /* the id gap counts what was lost */
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n < 0)
			return -errno;
		for (len = (int)n;
		     mnl_nlmsg_ok(nlh, len) && d->n_pending < PENDING_MAX;
		     nlh = mnl_nlmsg_next(nlh, &len))
			take_message(d, nlh);
	}
	return d->n_pending;
}

int nsdp_kdefer_reply(const struct nsdp_kdefer *d, int i, uint8_t *proto,
		      struct nsdp_kern_tuple *reply)
{
	if (!d->pending[i].parsed)
		return 0;
	*proto = d->pending[i].proto;
	*reply = d->pending[i].reply;
	return 1;
}

void nsdp_kdefer_decide(struct nsdp_kdefer *d, int i, uint64_t seq, int own,
			uint64_t now_ns)
{
	struct held *h;

	if (!d->pending[i].parsed) {
		accept_packet(d, d->pending[i].id);
		KD_ADD(d, skipped, 1);
	} else if (d->n_held == NSDP_KDEFER_HELD_MAX) {
		accept_packet(d, d->pending[i].id);
		KD_ADD(d, overflow, 1);
	} else {
		h = &d->held[(d->head + d->n_held) % NSDP_KDEFER_HELD_MAX];
		h->id = d->pending[i].id;
		h->seq = seq;
		h->since_ns = now_ns;
		d->n_held++;
		KD_ADD(d, held, 1);
		if (!own)
			KD_ADD(d, unmatched, 1);
	}
	if (i == d->n_pending - 1)
		verdicts_flush(d);
}

unsigned int nsdp_kdefer_release(struct nsdp_kdefer *d, uint64_t settled,
				 uint64_t now_ns)
{
	while (d->n_held > 0) {
		struct held *h = &d->held[d->head];
		uint64_t waited =
			now_ns > h->since_ns ? now_ns - h->since_ns : 0;
		uint64_t bucket;

		if (h->seq <= settled)
			KD_ADD(d, settled, 1);
		else if (waited >= d->max_ns)
			KD_ADD(d, timeouts, 1);
		else
			break;
		bucket = waited / (NSDP_KDEFER_BUCKET_US * 1000ULL);
		if (bucket >= NSDP_KDEFER_BUCKETS)
			bucket = NSDP_KDEFER_BUCKETS - 1;
		KD_ADD(d, hist[bucket], 1);
		accept_packet(d, h->id);
		d->head = (d->head + 1) % NSDP_KDEFER_HELD_MAX;
		d->n_held--;
	}
	verdicts_flush(d);
	return d->n_held;
}

/* Over the whole tuple: an IPv4 one has the rest of src6 and dst6 zero. */
static uint32_t expect_hash(uint8_t proto, const struct nsdp_kern_tuple *t)
{
	uint64_t h =
		((uint64_t)t->sport << 24 | (uint64_t)t->dport << 8 | proto) *
		0xc2b2ae3d27d4eb4fULL;

	for (int i = 0; i < 4; i++)
		h = (h ^ ((uint64_t)t->src6[i] << 32 | t->dst6[i])) *
		    0x9e3779b97f4a7c15ULL;
	return (uint32_t)(h >> 32);
}

static int expect_same(const struct expect *e, uint8_t proto,
		       const struct nsdp_kern_tuple *t)
{
	return e->seq != 0 && e->proto == proto &&
	       memcmp(e->reply.src6, t->src6, sizeof(t->src6)) == 0 &&
	       memcmp(e->reply.dst6, t->dst6, sizeof(t->dst6)) == 0 &&
	       e->reply.sport == t->sport && e->reply.dport == t->dport;
}

void nsdp_kdefer_expect(struct nsdp_kdefer *d, uint8_t proto,
			const struct nsdp_kern_tuple *reply, uint64_t seq)
{
	uint32_t h = expect_hash(proto, reply);
	struct expect *slot = NULL;

	for (uint32_t i = 0; i < EXPECT_PROBE; i++) {
		struct expect *e =
			&d->expect[(h + i) % NSDP_KDEFER_EXPECT_SLOTS];

		if (e->seq == 0 || expect_same(e, proto, reply)) {
			slot = e;
			break;
		}
		if (!slot || e->seq < slot->seq)
			slot = e; /* the oldest, if none is free */
	}
	slot->seq = seq;
	slot->proto = proto;
	slot->reply = *reply;
}

uint64_t nsdp_kdefer_match(struct nsdp_kdefer *d, uint8_t proto,
			   const struct nsdp_kern_tuple *reply)
{
	uint32_t h = expect_hash(proto, reply);

	for (uint32_t i = 0; i < EXPECT_PROBE; i++) {
		struct expect *e =
			&d->expect[(h + i) % NSDP_KDEFER_EXPECT_SLOTS];

		if (expect_same(e, proto, reply)) {
			uint64_t seq = e->seq;

			e->seq = 0;
			return seq;
		}
	}
	return 0;
}

uint64_t nsdp_kdefer_next_ns(const struct nsdp_kdefer *d, uint64_t now_ns)
{
	uint64_t due;

	if (d->n_held == 0)
		return UINT64_MAX;
	due = d->held[d->head].since_ns + d->max_ns;
	return due > now_ns ? due - now_ns : 0;
}

void nsdp_kdefer_stats(const struct nsdp_kdefer *d,
		       struct nsdp_kdefer_stats *st)
{
	const uint64_t *from = (const uint64_t *)&d->st;
	uint64_t *to = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

uint64_t nsdp_kdefer_pct_us(const struct nsdp_kdefer_stats *st, double p)
{
	uint64_t total = 0, seen = 0;
	unsigned int i;

	for (i = 0; i < NSDP_KDEFER_BUCKETS; i++)
		total += st->hist[i];
	if (total == 0)
		return 0;
	for (i = 0; i < NSDP_KDEFER_BUCKETS - 1; i++) {
		seen += st->hist[i];
		if ((double)seen >= p * (double)total)
			break;
	}
	return (uint64_t)(i + 1) * NSDP_KDEFER_BUCKET_US;
}
