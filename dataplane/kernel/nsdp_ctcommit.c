/*
 * nsdp_ctcommit.c - the conntrack committer (see nsdp_ctcommit.h): records
 * queued, then written as ctnetlink messages, many per sendmsg.
 *
 * Each message is built by nsdp_ctmsg.c. How an entry must be made to
 * translate: the original tuple, the plain inverse reply tuple
 * (NFCT_SOPT_SETUP_REPLY) and CTA_NAT_SRC with the translated address and
 * port (ATTR_SNAT_IPV4/PORT) where the source is translated, CTA_NAT_DST
 * (ATTR_DNAT_IPV4/PORT) where the destination is (port forwarding). The
 * kernel's NAT then rewrites the reply tuple and sets IPS_SRC_NAT,
 * IPS_DST_NAT or both. An entry created with the already translated reply
 * tuple instead (what `conntrack -I -r/-q` does) looks right in
 * `conntrack -L` and never translates. TCP entries are ESTABLISHED with
 * BE_LIBERAL in both directions (the window was never seen here), all
 * entries SEEN_REPLY|ASSURED, so that the first packet after a takeover,
 * from either side, belongs to the flow. Every entry goes into the
 * committer's one zone (conf.zone).
 *
 * Invariants:
 * - One thread calls add and flush; the counters are single-writer
 *   (nsdp_stat.h) and read by any thread.
 * - A flow is queued at most once: a newer record of it replaces the
 *   queued one (by epoch, then timestamp, as the table orders them), an
 *   older or equal one is a duplicate. A queue is flushed whole before
 *   anything else is queued, so the kernel sees each flow's records in
 *   order.
 * - Every message of a sendmsg carries its own sequence number; only the
 *   last asks for an ACK, and the kernel answers every failing message
 *   with its error, so the ACK of the last one means every message
 *   without an error went in.
 * - A create record is sent as a create, a refresh as an update (the
 *   entry is most likely there): without NAT (the kernel refuses to change
 *   an entry's NAT) and without status (a confirmed entry's status cannot
 *   be restated). A create the kernel has already (EEXIST) is sent again
 *   as an update, an update of an entry that is not there (ENOENT) as a
 *   create. A create refused again after that is a clash of reply tuples:
 *   another flow's entry holds the translated address and port, which the
 *   active has given to this flow since (its delete was missed, or the
 *   entry outlived it), so that entry is deleted (by its reply tuple,
 *   evicted) and the create sent again. Three such turns are free, more
 *   count as failures (with keep_existing, a refused create is left as
 *   the kernel has it instead). Any other failure is retried; after
 *   NSDP_CTCOMMIT_ATTEMPTS failures the record is counted in errors.
 *
 * Not here: which records to commit (the standby's subscriber decides),
 * IPv6, a zone per record (the record carries none).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "nsdp_ctcommit.h"
#include "nsdp_ctmsg.h"
#include "nsdp_stat.h"

/* Records queued before a flush is forced. */
#define CT_QUEUE 1024u
/* The dedup index: a power of two, at least twice the queue. */
#define CT_INDEX 2048u
/* How long the kernel's answer to a sendmsg may take. */
#define CT_RECV_TIMEOUT_S 5
/* Receive buffer: room for an error for every message of a batch. */
#define CT_RCVBUF (4u << 20)

struct ct_item {
	struct ns_session s;
	struct ns_session_v6 v6; /* s's second line when NAT66 */
	uint8_t op;
	uint8_t fails;
	uint8_t turns; /* create <-> update <-> evict turns taken */
	uint8_t done;
	int result; /* errno of this round's answer, 0 = went in */
};

/* ns_session_v6_of(&it->s) reads v6. */
_Static_assert(offsetof(struct ct_item, v6) == sizeof(struct ns_session),
	       "the second line follows the first");

struct nsdp_ctcommit {
	struct nsdp_ctcommit_conf conf;
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;
	struct nsdp_ctmsg msg;
	char *sbuf;
	size_t sbuf_len;
	char rbuf[65536];
	struct ct_item q[CT_QUEUE];
	unsigned int n;
	uint16_t index[CT_INDEX]; /* queue position + 1, 0 = empty */
	unsigned int chunk[CT_QUEUE]; /* queue positions of a sendmsg */
	struct nsdp_ctcommit_stats st;
};

#define CT_STAT_ADD(c, f, v) NSDP_STAT_ADD((c)->st.f, v)

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t nsdp_ctcommit_timeout_s(const struct ns_session *s, uint64_t now_ns)
{
	uint64_t total = (uint64_t)s->timeout_ms * 1000000ull, left;

	if (now_ns <= s->timestamp_ns)
		left = total;
	else if (now_ns - s->timestamp_ns >= total)
		return 0;
	else
		left = total - (now_ns - s->timestamp_ns);
	return (uint32_t)((left + 999999999ull) / 1000000000ull);
}

/* ---- the socket, in the namespace ---------------------------------- */

static int open_socket(struct nsdp_ctcommit *c, char *err, size_t errlen)
{
	int self = -1, target = -1, rc = 0, one = 1, rcvbuf = CT_RCVBUF;
	struct timeval tv = {.tv_sec = CT_RECV_TIMEOUT_S};
	char path[128];

	if (c->conf.netns[0]) {
		snprintf(path, sizeof(path), "/run/netns/%s", c->conf.netns);
		self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		target = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || target < 0) {
			snprintf(err, errlen, "%s: %s",
				 self < 0 ? "/proc/thread-self/ns/net" : path,
				 strerror(errno));
			rc = -1;
			goto out;
		}
		if (setns(target, CLONE_NEWNET) != 0) {
			snprintf(err, errlen, "setns %s: %s", path,
				 strerror(errno));
			rc = -1;
			goto out;
		}
	}
	c->nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!c->nl || mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(err, errlen, "ctnetlink socket: %s", strerror(errno));
		rc = -1;
	}
	if (self >= 0 && setns(self, CLONE_NEWNET) != 0) {
		/* The thread would stay in the other namespace. */
		snprintf(err, errlen, "setns back: %s", strerror(errno));
		rc = -1;
	}
	if (rc == 0) {
		int fd = mnl_socket_get_fd(c->nl);

		c->portid = mnl_socket_get_portid(c->nl);
		mnl_socket_setsockopt(c->nl, NETLINK_CAP_ACK, &one,
				      sizeof(one));
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
			       sizeof(rcvbuf)) != 0)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
				   sizeof(rcvbuf));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
out:
	if (self >= 0)
		close(self);
	if (target >= 0)
		close(target);
	return rc;
}

struct nsdp_ctcommit *nsdp_ctcommit_open(const struct nsdp_ctcommit_conf *conf,
					 char *err, size_t errlen)
{
	struct nsdp_ctcommit *c = calloc(1, sizeof(*c));

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->conf = *conf;
	if (c->conf.batch_bytes > NSDP_CTCOMMIT_BATCH_MAX)
		c->conf.batch_bytes = NSDP_CTCOMMIT_BATCH_MAX;
	c->sbuf_len = c->conf.batch_bytes + CT_MSG_MAX;
	c->sbuf = malloc(c->sbuf_len);
	if (!c->sbuf || nsdp_ctmsg_init(&c->msg, conf->mark, conf->zone) != 0)
		goto nomem;
	c->seq = (uint32_t)time(NULL);
	if (open_socket(c, err, errlen) != 0) {
		nsdp_ctcommit_close(c);
		return NULL;
	}
	return c;
nomem:
	snprintf(err, errlen, "out of memory");
	nsdp_ctcommit_close(c);
	return NULL;
}

void nsdp_ctcommit_close(struct nsdp_ctcommit *c)
{
	if (!c)
		return;
	if (c->nl)
		mnl_socket_close(c->nl);
	nsdp_ctmsg_fini(&c->msg);
	free(c->sbuf);
	free(c);
}

/* ---- the queue ----------------------------------------------------- */

/* An IPv6 address folded into 64 bits, for the hash. */
static uint64_t fold6(const uint8_t a[16])
{
	uint64_t hi, lo;

	memcpy(&hi, a, 8);
	memcpy(&lo, a + 8, 8);
	return hi ^ (lo * 0x9e3779b97f4a7c15ull);
}

static uint32_t flow_hash(const struct ns_session *s)
{
	uint64_t h = ((uint64_t)s->orig.saddr << 32 | s->orig.daddr) ^
		     ((uint64_t)s->orig.sport << 24 |
		      (uint64_t)s->orig.dport << 8 | s->proto) *
			     0x9e3779b97f4a7c15ull;

	if (s->family == NS_FAMILY_NAT66)
		h ^= fold6(ns_session_v6_of(s)->orig_saddr) ^
		     (fold6(ns_session_v6_of(s)->orig_daddr) << 1);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (uint32_t)h;
}

static int same_flow(const struct ns_session *a, const struct ns_session *b)
{
	if (a->family != b->family)
		return 0;
	if (a->family == NS_FAMILY_NAT66 &&
	    memcmp(ns_session_v6_of(a)->orig_saddr,
		   ns_session_v6_of(b)->orig_saddr, 32) != 0)
		return 0;
	return a->proto == b->proto && a->orig.saddr == b->orig.saddr &&
	       a->orig.daddr == b->orig.daddr &&
	       a->orig.sport == b->orig.sport && a->orig.dport == b->orig.dport;
}

static int newer(const struct ns_session *a, const struct ns_session *b)
{
	if (a->epoch != b->epoch)
		return a->epoch > b->epoch;
	return a->timestamp_ns > b->timestamp_ns;
}

static void refuse(struct nsdp_ctcommit *c, uint64_t *why)
{
	NSDP_STAT_INC(*why);
	CT_STAT_ADD(c, refused, 1);
}

/* With keep_existing a refresh is a create too: an entry the kernel has
 * is left alone. */
static uint8_t first_op(const struct nsdp_ctcommit *c,
			const struct ns_session *s)
{
	return s->event == NS_EV_DELETE ? CT_DELETE
	       : s->event == NS_EV_REFRESH && !c->conf.keep_existing
		       ? CT_UPDATE
		       : CT_CREATE;
}

/* s, and its second line when it has one. */
static void set_item(struct ct_item *it, const struct ns_session *s)
{
	it->s = *s;
	if (ns_session_lines(s) == 2)
		it->v6 = *ns_session_v6_of(s);
}

int nsdp_ctcommit_add(struct nsdp_ctcommit *c, const struct ns_session *s)
{
	uint32_t h;
	struct ct_item *it;
	int rc;

	/* NAT64 is no conntrack entry: the kernel does not translate it. */
	if (s->version != NS_RECORD_VERSION ||
	    (s->family != NS_FAMILY_IPV4 && s->family != NS_FAMILY_NAT66) ||
	    s->event < NS_EV_CREATE || s->event > NS_EV_DELETE ||
	    nsdp_ctmsg_pclass(s->proto) < 0) {
		refuse(c, &c->st.refused_proto);
		return 1;
	}
	if (s->event != NS_EV_DELETE &&
	    nsdp_ctcommit_timeout_s(s, realtime_ns()) == 0) {
		refuse(c, &c->st.refused_expired);
		return 1;
	}
	if (c->n == CT_QUEUE) {
		rc = nsdp_ctcommit_flush(c);
		if (rc != 0)
			return rc;
	}
	for (h = flow_hash(s) & (CT_INDEX - 1); c->index[h];
	     h = (h + 1) & (CT_INDEX - 1)) {
		it = &c->q[c->index[h] - 1];
		if (!same_flow(&it->s, s))
			continue;
		if (!newer(s, &it->s)) {
			refuse(c, &c->st.refused_duplicate);
			return 1;
		}
		set_item(it, s);
		it->op = first_op(c, s);
		CT_STAT_ADD(c, coalesced, 1);
		return 0;
	}
	it = &c->q[c->n];
	*it = (struct ct_item){.op = first_op(c, s)};
	set_item(it, s);
	c->index[h] = (uint16_t)(++c->n);
	return 0;
}

unsigned int nsdp_ctcommit_pending(const struct nsdp_ctcommit *c)
{
	return c->n;
}

/* ---- messages ------------------------------------------------------ */

/* Build its message at buf (CT_MSG_MAX bytes of room); its length, or 0
 * when the record has no time left. */
static size_t build(struct nsdp_ctcommit *c, const struct ct_item *it,
		    char *buf, uint64_t now_ns)
{
	uint32_t timeout_s = 0;

	if (it->op != CT_DELETE && it->op != CT_EVICT) {
		timeout_s = nsdp_ctcommit_timeout_s(&it->s, now_ns);
		if (timeout_s == 0)
			return 0;
	}
	return nsdp_ctmsg_build(&c->msg, it->op, &it->s, ++c->seq, timeout_s,
				buf);
}

/* ---- a round: every item not done sent once ------------------------- */

/* Read the kernel's answers to the messages of seq first..last (the last
 * asked for an ACK) into the items of c->chunk. */
static void read_answers(struct nsdp_ctcommit *c, uint32_t first, uint32_t last,
			 unsigned int count)
{
	int lost = 0, seen_last = 0;
	unsigned int k;

	while (!seen_last) {
		ssize_t len =
			mnl_socket_recvfrom(c->nl, c->rbuf, sizeof(c->rbuf));
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)c->rbuf;
		int left = (int)len;

		if (len < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				lost = 1; /* errors were dropped */
				continue;
			}
			/* No answer at all: every message is in doubt. */
			for (k = 0; k < count; k++)
				c->q[c->chunk[k]].result = errno;
			return;
		}
		for (; mnl_nlmsg_ok(nlh, left);
		     nlh = mnl_nlmsg_next(nlh, &left)) {
			const struct nlmsgerr *e;
			uint32_t seq = nlh->nlmsg_seq;

			if (nlh->nlmsg_type != NLMSG_ERROR ||
			    seq - first > last - first)
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			c->q[c->chunk[seq - first]].result = -e->error;
			if (seq == last)
				seen_last = 1;
		}
	}
	if (lost) /* an error we did not read looks like a success */
		for (k = 0; k + 1 < count; k++)
			if (c->q[c->chunk[k]].result == 0)
				c->q[c->chunk[k]].result = ENOBUFS;
}

static void fail(struct nsdp_ctcommit *c, struct ct_item *it, int err)
{
	if (++it->fails < NSDP_CTCOMMIT_ATTEMPTS) {
		CT_STAT_ADD(c, retried, 1);
		return;
	}
	it->done = 1;
	CT_STAT_ADD(c, errors, 1);
	__atomic_store_n(&c->st.last_error, err, __ATOMIC_RELAXED);
}

static void settle(struct nsdp_ctcommit *c, struct ct_item *it)
{
	int err = it->result;

	if ((err == 0 || err == ENOENT) && it->op == CT_EVICT) {
		if (err == 0)
			CT_STAT_ADD(c, evicted, 1);
		it->op = CT_CREATE;
	} else if (err == 0) {
		it->done = 1;
		if (it->op == CT_CREATE)
			CT_STAT_ADD(c, committed, 1);
		else if (it->op == CT_UPDATE)
			CT_STAT_ADD(c, updated, 1);
		else
			CT_STAT_ADD(c, deleted, 1);
	} else if (err == ENOENT && it->op == CT_DELETE) {
		it->done = 1;
		CT_STAT_ADD(c, deleted, 1);
	} else if (err == EEXIST && it->op == CT_CREATE &&
		   c->conf.keep_existing) {
		it->done = 1;
		CT_STAT_ADD(c, kept, 1);
	} else if ((err == EEXIST && it->op == CT_CREATE) ||
		   (err == ENOENT && it->op == CT_UPDATE)) {
		/* EEXIST after a refused update: the reply tuple is taken. */
		it->op = it->op == CT_UPDATE ? CT_CREATE
			 : it->turns	     ? CT_EVICT
					     : CT_UPDATE;
		if (++it->turns > 3)
			fail(c, it, err);
	} else {
		fail(c, it, err);
	}
}

/* Send every item not done once, as many messages per sendmsg as
 * batch_bytes holds. Returns how many were sent. */
static unsigned int round_send(struct nsdp_ctcommit *c)
{
	uint64_t now = realtime_ns();
	unsigned int i = 0, sent = 0;

	while (i < c->n) {
		size_t off = 0;
		unsigned int count = 0, k;
		uint32_t first = c->seq + 1;
		struct nlmsghdr *last = NULL;

		for (; i < c->n; i++) {
			struct ct_item *it = &c->q[i];
			size_t len;

			if (it->done)
				continue;
			if (count && off + CT_MSG_MAX > c->conf.batch_bytes)
				break;
			len = build(c, it, c->sbuf + off, now);
			if (len == 0) {
				it->done = 1;
				refuse(c, &c->st.refused_expired);
				continue;
			}
			last = (struct nlmsghdr *)(c->sbuf + off);
			it->result = 0;
			c->chunk[count++] = i;
			off += len;
		}
		if (!count)
			break;
		last->nlmsg_flags |= NLM_F_ACK;
		CT_STAT_ADD(c, sends, 1);
		CT_STAT_ADD(c, messages, count);
		if (mnl_socket_sendto(c->nl, c->sbuf, off) < 0) {
			int err = errno;

			for (k = 0; k < count; k++)
				c->q[c->chunk[k]].result = err;
		} else {
			read_answers(c, first, c->seq, count);
		}
		for (k = 0; k < count; k++)
			settle(c, &c->q[c->chunk[k]]);
		sent += count;
	}
	return sent;
}

int nsdp_ctcommit_flush(struct nsdp_ctcommit *c)
{
	unsigned int round, i;
	uint64_t errors = c->st.errors;

	/* Each round ends an item, counts a failure of it, or turns it
	 * (create, update, evict; an evict turns back to a create): the
	 * bound is above what the turns and failures take. */
	for (round = 0; round < 3 * NSDP_CTCOMMIT_ATTEMPTS + 6; round++) {
		if (round_send(c) == 0)
			break;
		if (round >= 4) /* the kernel is short of something */
			usleep(1000u << (round < 10 ? round - 4 : 6));
	}
	for (i = 0; i < c->n; i++) {
		if (!c->q[i].done) {
			CT_STAT_ADD(c, errors, 1);
			__atomic_store_n(&c->st.last_error, ETIMEDOUT,
					 __ATOMIC_RELAXED);
		}
	}
	c->n = 0;
	memset(c->index, 0, sizeof(c->index));
	return (int)(c->st.errors - errors);
}

void nsdp_ctcommit_stats(const struct nsdp_ctcommit *c,
			 struct nsdp_ctcommit_stats *out)
{
	const struct nsdp_ctcommit_stats *st = &c->st;

#define LOAD(f) out->f = __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	LOAD(committed);
	LOAD(updated);
	LOAD(deleted);
	LOAD(errors);
	LOAD(retried);
	LOAD(refused);
	LOAD(refused_proto);
	LOAD(refused_expired);
	LOAD(refused_duplicate);
	LOAD(coalesced);
	LOAD(evicted);
	LOAD(kept);
	LOAD(messages);
	LOAD(sends);
	LOAD(last_error);
#undef LOAD
}
