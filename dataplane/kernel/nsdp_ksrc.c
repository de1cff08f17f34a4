/*
 * nsdp_ksrc.c - the kernel session source (nsdp_ksrc.h) at work: one thread
 * moves ring buffer events, ctnetlink
 * dumps and destroy events into the lane.
 *
 * Invariants: the thread is the lane's only producer (dumps included), and
 * it reads the ring buffer before the destroy events of the same round, so
 * an entry's DELETE never precedes its CREATE. An entry recorded from a
 * dump is entered in the BPF "seen" map, so its next packet is not a second
 * CREATE; a destroyed entry leaves it, so a new entry with the same tuples
 * is.
 *
 * Ends: a DELETE for every NAT'd entry the kernel destroys (TCP after its
 * close timers, UDP and ICMP when their timeout expires, conntrack -D, a
 * flush), because ctnetlink tells us and the standby then frees the
 * session at once.
 *
 * Lost events and the dump-diff. Events are lost in two places: the BPF
 * ring buffer refuses CREATEs and REFRESHes when full (counted per CPU,
 * ringbuf_drops), and the destroy events' socket drops what its receive
 * buffer cannot hold (ENOBUFS, end_overruns). The dump socket cannot
 * overflow: a dump is sent as it is read. A round that finds either loss
 * dumps the namespace's NAT'd table (redumps) and diffs it against the
 * live set (nsdp_klive.h): every entry whose last record was a CREATE or
 * a REFRESH. The dump enters what it returns with a new generation; after
 * a complete dump, every entry of an older generation has ended unseen,
 * and gets a DELETE (reconciled) and leaves the set and "seen". After
 * ring buffer drops every dumped entry is sent again as a CREATE (its
 * last state may be what was lost); after lost ends only, only what the
 * set lacked is. A dump that fails is not diffed (what it did not return
 * may be alive) and is run again the next round.
 *
 * Why the result is exact although the kernel keeps going during the dump
 * (its events wait in the ring buffer and the socket and are read after
 * the diff, in that order):
 * - an entry alive throughout the dump is returned by it, so not deleted;
 * - an entry created during the dump is not in the set unless the dump
 *   returned it: its NEW event follows the diff and enters it;
 * - an entry that ended before the dump reached it is deleted by the
 *   diff; its destroy event, if it was not lost, is a second DELETE,
 *   which the store, the table and conntrack take as a no-op;
 * - an entry that ended after the dump returned it is deleted by its
 *   destroy event after the diff, or, if that event was lost, by the
 *   next round's dump, which the loss causes; the same holds for a
 *   REFRESH that was in the ring buffer before such an entry ended.
 * So once events stop being lost, the dump after the last loss leaves the
 * store equal to conntrack. One case is not exact, in the live path as in
 * this one: an entry destroyed and created again with the same tuples
 * within one round (50 ms); the new one's first packets find the old one
 * in "seen" (no CREATE), and the old one's DELETE may come after them;
 * its next packet after that sends a CREATE.
 *
 * The live set exists only with ends on (without them nothing is
 * deleted); at its bound (twice nf_conntrack_max, nsdp_klive.h) an entry
 * is not tracked (untracked) and its end, if lost, is left to its timeout.
 *
 * Not here: opening the source (nsdp_ksrc_open.c, which calls into this
 * file and never the reverse: the BPF program loaded, the ctnetlink
 * sockets in the namespace, the live set), a ctnetlink entry's key and
 * whether the source keeps it (nsdp_ksrc_ct.c), the BPF program
 * (nsdp_kern.bpf.c), the live set (nsdp_klive.c), the configuration and
 * the REPORT line (agent/, tools/).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <libmnl/libmnl.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/types.h>
#include <netinet/in.h>

#include "ns_record.h"
#include "nsdp_kdefer.h"
#include "nsdp_kern.h"
#include "nsdp_kern.skel.h"
#include "nsdp_klive.h"
#include "nsdp_ksrc.h"
#include "nsdp_netns.h"

#include "nsdp_ksrc_state.h"

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* An IPv6 entry's addresses: NAT66, orig as is, xlat the reply tuple
 * inverted. */
static void key_to_v6(const struct nsdp_kern_key *key, struct ns_session_v6 *v6)
{
	memcpy(v6->orig_saddr, key->orig.src6, 16);
	memcpy(v6->orig_daddr, key->orig.dst6, 16);
	memcpy(v6->xlat_saddr, key->reply.dst6, 16);
	memcpy(v6->xlat_daddr, key->reply.src6, 16);
}

/* The record of an entry: orig as is, xlat the reply tuple inverted. */
static void key_to_session(const struct nsdp_ksrc *k,
			   const struct nsdp_kern_key *key, uint8_t event,
			   uint32_t timeout_ms, struct ns_rec *r)
{
	struct ns_session *s = &r->s;

	memset(r, 0, sizeof(*r));
	s->version = NS_RECORD_VERSION;
	s->family = NS_FAMILY_IPV4;
	if (key->family == AF_INET6) {
		s->family = NS_FAMILY_NAT66;
		key_to_v6(key, &r->v6);
	}
	s->proto = key->proto;
	s->event = event;
	s->gateway_id = k->conf.gateway_id;
	s->epoch = k->conf.epoch;
	s->timeout_ms = timeout_ms;
	if (key->family != AF_INET6) {
		s->orig.saddr = ntohl(key->orig.src);
		s->orig.daddr = ntohl(key->orig.dst);
		s->xlat.saddr = ntohl(key->reply.dst);
		s->xlat.daddr = ntohl(key->reply.src);
	}
	if (key->proto == IPPROTO_ICMP || key->proto == IPPROTO_ICMPV6) {
		/* The echo identifier, as the DPDK gateway keys it. */
		s->orig.sport = ntohs(key->orig.sport);
		s->xlat.sport = ntohs(key->reply.sport);
	} else {
		s->orig.sport = ntohs(key->orig.sport);
		s->orig.dport = ntohs(key->orig.dport);
		s->xlat.sport = ntohs(key->reply.dport);
		s->xlat.dport = ntohs(key->reply.sport);
	}
}

/* Into the lane; a full lane is waited on (the BPF ring buffer holds what
 * comes meanwhile, and counts what it cannot). */
static void emit(struct nsdp_ksrc *k, struct ns_rec *r)
{
	struct ns_session *s = &r->s;

	s->timestamp_ns =
		nsdp_stamp_next(&k->last_stamp, now_ns(CLOCK_REALTIME));
	while (rte_ring_free_count(k->lane->ring) == 0 &&
	       !__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
		ST_ADD(k, lane_waits, 1);
		usleep(100);
	}
	if (ns_session_lines(s) == 2)
		nsdp_record_v6(k->lane, s);
	else
		nsdp_record(k->lane, s);
}

/* key was sent as live: 1 when the live set had it already. */
static int live_add(struct nsdp_ksrc *k, const struct nsdp_kern_key *key)
{
	int rc;

	if (!k->live)
		return 0;
	rc = nsdp_klive_add(k->live, key);
	if (rc == -ENOSPC) {
		/* Ghosts may fill it: a dump diffs them out. */
		ST_ADD(k, untracked, 1);
		k->lost |= LOST_ROOM;
		return 0;
	}
	return rc;
}

int nsdp_ksrc_on_dumped(const struct nlmsghdr *nlh,
			enum nf_conntrack_msg_type type,
			struct nf_conntrack *ct, void *arg)
{
	struct nsdp_ksrc *k = arg;
	struct nsdp_kern_key key;
	struct nsdp_kern_seen seen = {0};
	struct ns_rec r;
	uint32_t timeout_ms;

	(void)type;
	if (!nsdp_ksrc_ct_key(k, nlh, ct, &key))
		return NFCT_CB_CONTINUE;
	if (live_add(k, &key) == 1 && !k->dump_all)
		return NFCT_CB_CONTINUE; /* its last state was sent */
	timeout_ms = nfct_get_attr_u32(ct, ATTR_TIMEOUT) * 1000;
	key_to_session(k, &key, NS_EV_CREATE, timeout_ms, &r);
	emit(k, &r);
	ST_ADD(k, dumped, 1);
	seen.sent_ns = now_ns(CLOCK_MONOTONIC);
	seen.half_timeout_ns = (uint64_t)timeout_ms * 500000ULL;
	if (key.proto == IPPROTO_TCP)
		seen.tcp_state = nfct_get_attr_u8(ct, ATTR_TCP_STATE);
	bpf_map__update_elem(k->skel->maps.seen, &key, sizeof(key), &seen,
			     sizeof(seen), BPF_ANY);
	return NFCT_CB_CONTINUE;
}

/* An entry ended: out of "seen" (a new entry with its tuples is new), its
 * DELETE into the lane. */
static void send_end(struct nsdp_ksrc *k, const struct nsdp_kern_key *key)
{
	struct ns_rec r;

	bpf_map__delete_elem(k->skel->maps.seen, key, sizeof(*key), 0);
	key_to_session(k, key, NS_EV_DELETE, 0, &r);
	emit(k, &r);
}

int nsdp_ksrc_on_destroyed(const struct nlmsghdr *nlh,
			   enum nf_conntrack_msg_type type,
			   struct nf_conntrack *ct, void *arg)
{
	struct nsdp_ksrc *k = arg;
	struct nsdp_kern_key key;

	(void)type;
	if (!nsdp_ksrc_ct_key(k, nlh, ct, &key))
		return NFCT_CB_CONTINUE;
	if (k->live)
		nsdp_klive_remove(k->live, &key);
	send_end(k, &key);
	ST_ADD(k, deletes, 1);
	return NFCT_CB_CONTINUE;
}

/* A live entry the dump did not return: it ended unseen. */
static void on_ended_unseen(const struct nsdp_kern_key *key, void *arg)
{
	struct nsdp_ksrc *k = arg;
	struct nsdp_kern_key full = *key;

	full.netns = k->netns_ino;
	send_end(k, &full);
	ST_ADD(k, reconciled, 1);
}

int nsdp_ksrc_on_event(void *ctx, void *data, size_t len)
{
	struct nsdp_ksrc *k = ctx;
	const struct nsdp_kern_event *ev = data;
	struct ns_rec r;
	int create;

	if (len < sizeof(*ev))
		return 0;
	create = ev->kind != NSDP_KERN_REFRESH;
	key_to_session(k, &ev->key, create ? NS_EV_CREATE : NS_EV_REFRESH,
		       ev->timeout_ms, &r);
	emit(k, &r);
	/* Its first packet is on its way to defer's queue. */
	if (ev->kind == NSDP_KERN_HELD && k->defer)
		nsdp_kdefer_expect(k->defer, ev->key.proto, &ev->key.reply,
				   nsdp_lane_last(k->lane));
	live_add(k, &ev->key);
	ST_ADD(k, captured, 1);
	if (create)
		ST_ADD(k, creates, 1);
	else
		ST_ADD(k, refreshes, 1);
	return 0;
}

static void read_counters(const struct nsdp_ksrc *k,
			  struct nsdp_kern_counters *sum)
{
	struct nsdp_kern_counters per[k->ncpus];
	uint32_t zero = 0;

	memset(sum, 0, sizeof(*sum));
	if (bpf_map__lookup_elem(k->skel->maps.counters, &zero, sizeof(zero),
				 per, sizeof(per), 0) != 0)
		return;
	for (int i = 0; i < k->ncpus; i++) {
		sum->sent += per[i].sent;
		sum->ringbuf_drops += per[i].ringbuf_drops;
		sum->filtered += per[i].filtered;
	}
}

/* Dump the table into the lane (every entry when all, else what the live
 * set lacks) and, once the dump is complete, DELETE what it did not
 * return. 0, or -errno of a dump that failed (nothing diffed). */
static int dump_diff(struct nsdp_ksrc *k, int all, uint64_t *ended)
{
	uint32_t family = AF_UNSPEC; /* IPv4 and IPv6 */
	int rc;

	*ended = 0;
	k->dump_all = all;
	if (k->live)
		nsdp_klive_begin(k->live);
	rc = nfct_query(k->dump_h, NFCT_Q_DUMP, &family);
	if (rc != 0)
		return errno ? -errno : -EIO;
	if (k->live)
		*ended = nsdp_klive_sweep(k->live, on_ended_unseen, k);
	return 0;
}

/* A re-dump's outcome on stderr, at most once a second (redumps counts
 * them all). */
static void log_redump(struct nsdp_ksrc *k, unsigned int why, int rc,
		       uint64_t t0, uint64_t sent, uint64_t ended)
{
	uint64_t t1 = now_ns(CLOCK_MONOTONIC);

	if (t1 - k->redump_logged_ns < REDUMP_LOG_NS)
		return;
	k->redump_logged_ns = t1;
	if (rc != 0) {
		fprintf(stderr,
			"natsync: kernel source: re-dump failed (%s), tried "
			"again next round\n",
			strerror(-rc));
		return;
	}
	fprintf(stderr,
		"natsync: kernel source: table dumped again (lost: ring "
		"buffer events %s, destroy events %s; live set full %s) in "
		"%.1f ms: %" PRIu64 " entries sent, %" PRIu64
		" ended unseen (deleted)\n",
		why & LOST_EVENTS ? "yes" : "no",
		why & LOST_ENDS ? "yes" : "no", why & LOST_ROOM ? "yes" : "no",
		(t1 - t0) / 1e6, sent, ended);
}

/* Lost events: drain what the ring buffer holds, then dump and diff. */
static void redump(struct nsdp_ksrc *k)
{
	unsigned int why = k->lost;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC), dumped0, ended;
	int rc;

	if (why & LOST_ROOM)
		nsdp_klive_set_bound(
			k->live,
			nsdp_klive_bound_for(nsdp_ksrc_conntrack_max()));
	ring_buffer__consume(k->rb);
	dumped0 = __atomic_load_n(&k->st.dumped, __ATOMIC_RELAXED);
	k->lost = 0;
	rc = dump_diff(k, why & LOST_EVENTS, &ended);
	/* A full set stays full until the next dump: not a reason for one. */
	k->lost &= ~(unsigned int)LOST_ROOM;
	if (rc != 0)
		k->lost |= why; /* the next round tries again */
	else
		ST_ADD(k, redumps, 1);
	log_redump(k, why, rc, t0,
		   __atomic_load_n(&k->st.dumped, __ATOMIC_RELAXED) - dumped0,
		   ended);
}

/* Destroy events until the socket is empty; the ENOBUFS of a full one
 * (events lost) is counted and marks a loss. */
static void read_ends(struct nsdp_ksrc *k)
{
	while (k->ends_h && nfct_catch(k->ends_h) < 0 && errno == ENOBUFS) {
		ST_ADD(k, end_overruns, 1);
		k->lost |= LOST_ENDS;
	}
}

/* Events first, then ends, then the losses' check. */
static void ksrc_round(struct nsdp_ksrc *k)
{
	struct nsdp_kern_counters c;

	ring_buffer__consume(k->rb);
	read_ends(k);
	read_counters(k, &c);
	__atomic_store_n(&k->st.filtered, c.filtered, __ATOMIC_RELAXED);
	if (c.ringbuf_drops > k->drops_seen) {
		k->drops_seen = c.ringbuf_drops;
		__atomic_store_n(&k->st.ringbuf_drops, c.ringbuf_drops,
				 __ATOMIC_RELAXED);
		k->lost |= LOST_EVENTS;
	}
	if (k->lost)
		redump(k);
	if (k->live)
		__atomic_store_n(&k->st.tracked, nsdp_klive_count(k->live),
				 __ATOMIC_RELAXED);
}

/* ---- defer (nsdp_kdefer.h) ---------------------------------------------- */

/* Packets queued since the last round: the events before them are read
 * first (their entries' HELD events, and a destroyed entry's DELETE before
 * the CREATE of a new entry with its tuples), then each waits for its
 * entry's record, or the newest record when none came for it; then every
 * held packet whose record settled, or whose time is up, goes. */
static void defer_round(struct nsdp_ksrc *k)
{
	int n = nsdp_kdefer_recv(k->defer);
	uint64_t now = now_ns(CLOCK_MONOTONIC);

	if (n > 0) {
		ring_buffer__consume(k->rb);
		read_ends(k);
		for (int i = 0; i < n; i++) {
			struct nsdp_kern_tuple reply;
			uint8_t proto;
			uint64_t seq = 0;

			if (nsdp_kdefer_reply(k->defer, i, &proto, &reply))
				seq = nsdp_kdefer_match(k->defer, proto,
							&reply);
			nsdp_kdefer_decide(k->defer, i,
					   seq ? seq : nsdp_lane_last(k->lane),
					   seq != 0, now);
		}
		nsdp_lane_hold(k->lane, nsdp_lane_last(k->lane));
	}
	nsdp_kdefer_release(k->defer, nsdp_lane_settled(k->lane), now);
}

/* The stop: no packet is queued any more (the table deleted), what was
 * queued is recorded and held as before, and the thread stays until every
 * held packet went (defer_max_us at most: the writers still run). */
static void defer_finish(struct nsdp_ksrc *k)
{
	if (k->conf.defer_rule)
		nsdp_kdefer_rule_del(k->netns_fd);
	defer_round(k);
	while (nsdp_kdefer_release(k->defer, nsdp_lane_settled(k->lane),
				   now_ns(CLOCK_MONOTONIC)) > 0)
		usleep(NSDP_KDEFER_POLL_NS / 1000);
}

/* How long the thread may sleep: POLL_MS, or while packets are held
 * NSDP_KDEFER_POLL_NS (their records may settle any moment) and no longer
 * than the oldest one's time. */
static struct timespec round_wait(const struct nsdp_ksrc *k)
{
	uint64_t ns = (uint64_t)POLL_MS * 1000000ULL;

	if (k->defer) {
		uint64_t due =
			nsdp_kdefer_next_ns(k->defer, now_ns(CLOCK_MONOTONIC));

		if (due != UINT64_MAX)
			ns = due < NSDP_KDEFER_POLL_NS ? due
						       : NSDP_KDEFER_POLL_NS;
	}
	return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ULL),
				 .tv_nsec = (long)(ns % 1000000000ULL)};
}

static void *ksrc_main(void *arg)
{
	struct nsdp_ksrc *k = arg;
	uint64_t ended, last_round = now_ns(CLOCK_MONOTONIC);
	int rc = dump_diff(k, 1, &ended);

	if (rc != 0) {
		fprintf(stderr, "natsync: kernel source: initial dump: %s\n",
			strerror(-rc));
		k->lost |= LOST_EVENTS; /* the first round dumps again */
	}
	/* Queued only now: no packet waits for the initial dump. */
	if (k->defer && k->conf.defer_rule) {
		char err[256];

		if (nsdp_kdefer_rule_add(k->netns_fd, k->conf.defer_queue, err,
					 sizeof(err)) != 0)
			fprintf(stderr, "natsync: kernel source: %s\n", err);
	}
	while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
		struct epoll_event evs[3];
		struct timespec wait = round_wait(k);
		int n = epoll_pwait2(k->epfd, evs, 3, &wait, NULL), other = 0;
		uint64_t now;

		for (int i = 0; i < n; i++)
			other |= evs[i].data.u32 != EV_QUEUE;
		if (k->defer)
			defer_round(k);
		/* The ring buffer and the ends on their events, and every
		 * POLL_MS (the counters, the losses' check). */
		now = now_ns(CLOCK_MONOTONIC);
		if (other || now - last_round >= (uint64_t)POLL_MS * 1000000) {
			ksrc_round(k);
			last_round = now;
		}
	}
	/* What happened before the stop is still ours to record. */
	ksrc_round(k);
	if (k->defer)
		defer_finish(k);
	return NULL;
}

/* Open a ctnetlink handle in the namespace netns_fd (-1: ours); a socket
 * stays in the namespace it was made in. */

int nsdp_ksrc_start(struct nsdp_ksrc *k)
{
	int rc = pthread_create(&k->thread, NULL, ksrc_main, k);

	if (rc != 0)
		return -rc;
	k->running = 1;
	return 0;
}

void nsdp_ksrc_stop(struct nsdp_ksrc *k)
{
	if (!k->running)
		return;
	__atomic_store_n(&k->stop, 1, __ATOMIC_RELEASE);
	pthread_join(k->thread, NULL);
	k->running = 0;
}

void nsdp_ksrc_defer_stats(const struct nsdp_ksrc *k,
			   struct nsdp_ksrc_defer_stats *st)
{
	struct nsdp_kdefer_stats d;

	memset(st, 0, sizeof(*st));
	if (!k->defer)
		return;
	nsdp_kdefer_stats(k->defer, &d);
	st->queued = d.queued;
	st->held = d.held;
	st->settled = d.settled;
	st->timeouts = d.timeouts;
	st->overflow = d.overflow;
	st->skipped = d.skipped;
	st->unmatched = d.unmatched;
	st->missed = d.missed;
	st->p50_us = nsdp_kdefer_pct_us(&d, 0.50);
	st->p99_us = nsdp_kdefer_pct_us(&d, 0.99);
	st->p999_us = nsdp_kdefer_pct_us(&d, 0.999);
}

void nsdp_ksrc_stats(const struct nsdp_ksrc *k, struct nsdp_ksrc_stats *st)
{
	const uint64_t *from = (const uint64_t *)&k->st;
	uint64_t *to = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

struct table_file {
	const struct nsdp_ksrc *k;
	FILE *f;
	int64_t n; /* records written, or a negative errno */
	uint64_t stamp;
};

static int on_table_entry(const struct nlmsghdr *nlh,
			  enum nf_conntrack_msg_type type,
			  struct nf_conntrack *ct, void *arg)
{
	struct table_file *t = arg;
	struct nsdp_kern_key key;
	uint8_t buf[NS_RECORD_MAX_LEN];
	struct ns_rec r;
	int n;

	(void)type;
	if (t->n < 0 || !nsdp_ksrc_ct_key(t->k, nlh, ct, &key))
		return NFCT_CB_CONTINUE;
	key_to_session(t->k, &key, NS_EV_CREATE,
		       nfct_get_attr_u32(ct, ATTR_TIMEOUT) * 1000, &r);
	r.s.timestamp_ns = nsdp_stamp_next(&t->stamp, now_ns(CLOCK_REALTIME));
	n = ns_record_encode(&r.s, buf, sizeof(buf));
	if (n > 0 && fwrite(buf, 1, (size_t)n, t->f) == (size_t)n)
		t->n++;
	else
		t->n = -EIO;
	return NFCT_CB_CONTINUE;
}

/* A handle of its own: safe beside the thread, which it does not touch. */
int64_t nsdp_ksrc_dump_table(const struct nsdp_ksrc *k, const char *path)
{
	struct table_file t = {.k = k};
	struct nfct_handle *h = nsdp_ksrc_nfct_open_in(k->netns_fd, 0);
	uint32_t family = AF_UNSPEC; /* IPv4 and IPv6, as the capture */

	if (!h)
		return -errno;
	t.f = fopen(path, "wb");
	if (!t.f) {
		t.n = -errno;
		nfct_close(h);
		return t.n;
	}
	nfct_callback_register2(h, NFCT_T_ALL, on_table_entry, &t);
	if (nfct_query(h, NFCT_Q_DUMP, &family) != 0 && t.n >= 0)
		t.n = -errno;
	if (fclose(t.f) != 0 && t.n >= 0)
		t.n = -errno;
	nfct_close(h);
	return t.n;
}
