/*
 * natsync_kflows.c - the natsync-kflows program: the ends of the
 * kernel gateway benchmarks (scripts/bench-kernel-capture.sh,
 * scripts/bench-kernel-failover.sh), run inside a network namespace with
 * `ip netns exec`.
 *
 *   natsync-kflows send --dst ADDR [--src ADDR] [--flows N]
 *                       [--threads T] [--rate R] [--first-port P]
 *                       [--dport D]
 *     N new UDP flows as fast as the kernel takes them (or R flows/s in
 *     all): one datagram each, from a source port of its own (P, P+1, ...
 *     up to 65535, then the next destination port from D), built by hand
 *     on a raw socket and sent 64 at a time with sendmmsg, so that making
 *     a flow costs no socket, bind or close; T threads share the range.
 *     An IPv6 --dst makes IPv6 flows (the kernel writes the IPv6 header,
 *     its source address and the UDP checksum; --src is IPv4's only).
 *     Prints
 *       RESULT kflows sent=S errors=E seconds=X rate=R end_ns=NS
 *     end_ns being CLOCK_REALTIME when the last datagram left.
 *
 *   natsync-kflows events [--rcvbuf BYTES] [--ready FILE]
 *     Counts the ctnetlink NEW events of its namespace (the way conntrackd
 *     and `conntrack -E` learn of new entries) until SIGTERM or SIGINT;
 *     --rcvbuf sets the socket's receive buffer (SO_RCVBUFFORCE), else the
 *     default (net.core.rmem_default) stays. FILE is created once the
 *     socket is bound. Prints
 *       RESULT kevents rcvbuf=B events=N overruns=O
 *     overruns being the ENOBUFS the socket reported (events lost).
 *
 *   natsync-kflows count [--family 4|6]
 *     Dumps the conntrack table of its namespace (IPv4's, or IPv6's with
 *     --family 6) over ctnetlink and
 *     prints
 *       RESULT kct entries=N snat=S
 *     S being the entries whose status has IPS_SRC_NAT: the ones the
 *     kernel translates. An entry created with the translated reply tuple
 *     and no NAT attribute looks translated in `conntrack -L` but lacks
 *     the bit and translates nothing.
 *
 * Root only (raw sockets, netlink). Exit status: 0 done, 1 runtime
 * failure, 2 bad options.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nsb_opt.h"
#include "nsdp_time.h"

#define BURST 64
#define MAX_THREADS 16
#define PAYLOAD 8

static struct {
	struct in_addr src, dst;
	struct in6_addr dst6;
	int family; /* AF_INET, AF_INET6: of --dst, or --family for count */
	uint64_t flows;
	unsigned int threads;
	double rate;
	unsigned int first_port, dport;
} opt = {.family = AF_INET,
	 .flows = 100000,
	 .threads = 2,
	 .first_port = 1024,
	 .dport = 9000};

struct worker {
	pthread_t tid;
	uint64_t first, count;
	uint64_t sent, errors;
};

struct pkt {
	struct iphdr ip;
	struct udphdr udp;
	char payload[PAYLOAD];
} __attribute__((packed));

/* Flow i's ports: the source port walks the range above --first-port, so
 * that no two flows share a tuple (one datagram per flow). */
static void flow_ports(uint64_t i, uint16_t *sport, uint16_t *dport)
{
	uint64_t span = 65536 - opt.first_port;

	*sport = (uint16_t)(opt.first_port + i % span);
	*dport = (uint16_t)(opt.dport + i / span);
}

static void *send_main(void *arg)
{
	struct worker *w = arg;
	struct pkt pkts[BURST];
	struct iovec iov[BURST];
	struct mmsghdr msgs[BURST];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr = opt.dst};
	struct sockaddr_in6 to6 = {.sin6_family = AF_INET6,
				   .sin6_addr = opt.dst6};
	double t0 = nsdp_now_s(), per_s = opt.rate / opt.threads;
	int v6 = opt.family == AF_INET6;
	int fd = v6 ? socket(AF_INET6, SOCK_RAW, IPPROTO_UDP)
		    : socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	/* IPv6 needs the UDP checksum (conntrack marks a datagram without
	 * one invalid): the kernel computes it at this offset. */
	int csum_at = offsetof(struct udphdr, check);

	if (fd < 0 || (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_CHECKSUM,
					&csum_at, sizeof(csum_at)) != 0)) {
		perror("natsync-kflows: raw socket");
		w->errors = w->count;
		return NULL;
	}
	memset(pkts, 0, sizeof(pkts));
	for (int k = 0; k < BURST; k++) {
		/* The kernel fills the IP checksum (and the id, left 0);
		 * a UDP checksum of 0 means none over IPv4. */
		pkts[k].ip = (struct iphdr){.ihl = 5,
					    .version = 4,
					    .ttl = 64,
					    .protocol = IPPROTO_UDP,
					    .tot_len = htons(sizeof(pkts[k])),
					    .saddr = opt.src.s_addr,
					    .daddr = opt.dst.s_addr};
		pkts[k].udp.len = htons(sizeof(struct udphdr) + PAYLOAD);
		memcpy(pkts[k].payload, "natsync", PAYLOAD);
		iov[k] = v6 ? (struct iovec){&pkts[k].udp,
					     sizeof(pkts[k]) -
						     sizeof(pkts[k].ip)}
			    : (struct iovec){&pkts[k], sizeof(pkts[k])};
		msgs[k] = (struct mmsghdr){0};
		msgs[k].msg_hdr.msg_name = v6 ? (void *)&to6 : (void *)&to;
		msgs[k].msg_hdr.msg_namelen = v6 ? sizeof(to6) : sizeof(to);
		msgs[k].msg_hdr.msg_iov = &iov[k];
		msgs[k].msg_hdr.msg_iovlen = 1;
	}
	while (w->sent + w->errors < w->count) {
		uint64_t done = w->sent + w->errors;
		unsigned int n = w->count - done < BURST
					 ? (unsigned int)(w->count - done)
					 : BURST;
		int r;

		for (unsigned int k = 0; k < n; k++) {
			uint16_t sp, dp;

			flow_ports(w->first + done + k, &sp, &dp);
			pkts[k].udp.source = htons(sp);
			pkts[k].udp.dest = htons(dp);
		}
		r = sendmmsg(fd, msgs, n, 0);
		if (r <= 0) {
			/* A full queue (ENOBUFS) or another refusal: the
			 * datagram at the head is counted and skipped, so
			 * that the loop always ends. */
			w->errors++;
			continue;
		}
		w->sent += (uint64_t)r;
		if (per_s > 0) {
			double due = t0 + (double)w->sent / per_s;
			double wait = due - nsdp_now_s();

			if (wait > 0) {
				struct timespec ts = {
					(time_t)wait,
					(long)((wait - (time_t)wait) * 1e9)};

				nanosleep(&ts, NULL);
			}
		}
	}
	close(fd);
	return NULL;
}

static int run_send(void)
{
	struct worker w[MAX_THREADS] = {0};
	uint64_t sent = 0, errors = 0, each = opt.flows / opt.threads;
	double t0, secs;
	uint64_t end_ns;

	if (opt.dst.s_addr == 0 && opt.family == AF_INET) {
		fprintf(stderr, "natsync-kflows: send needs --dst\n");
		return 2;
	}
	if (opt.dport + opt.flows / (65536 - opt.first_port) > 65535) {
		fprintf(stderr, "natsync-kflows: too many flows for the "
				"port ranges\n");
		return 2;
	}
	t0 = nsdp_now_s();
	for (unsigned int t = 0; t < opt.threads; t++) {
		w[t].first = t * each;
		w[t].count = t + 1 == opt.threads ? opt.flows - t * each : each;
		if (pthread_create(&w[t].tid, NULL, send_main, &w[t]) != 0) {
			perror("natsync-kflows: pthread_create");
			return 1;
		}
	}
	for (unsigned int t = 0; t < opt.threads; t++) {
		pthread_join(w[t].tid, NULL);
		sent += w[t].sent;
		errors += w[t].errors;
	}
	end_ns = nsdp_realtime_ns();
	secs = nsdp_now_s() - t0;
	printf("RESULT kflows sent=%" PRIu64 " errors=%" PRIu64
	       " seconds=%.3f rate=%.0f end_ns=%" PRIu64 "\n",
	       sent, errors, secs, secs > 0 ? (double)sent / secs : 0.0,
	       end_ns);
	return errors == opt.flows ? 1 : 0;
}

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* The next whole netlink message of the n bytes in buf from *off, *off
 * moved past it; NULL at the end or at a message cut short. */
static const struct nlmsghdr *next_message(const char *buf, size_t n,
					   size_t *off)
{
	const struct nlmsghdr *h;

	if (*off + sizeof(*h) > n)
		return NULL;
	h = (const struct nlmsghdr *)(buf + *off);
	if (h->nlmsg_len < sizeof(*h) || *off + h->nlmsg_len > n)
		return NULL;
	*off += NLMSG_ALIGN(h->nlmsg_len);
	return h;
}

static int run_events(long rcvbuf, const char *ready)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
				 .nl_groups = NF_NETLINK_CONNTRACK_NEW};
	struct sigaction act = {.sa_handler = on_signal};
	uint64_t events = 0, overruns = 0;
	static char buf[1 << 16] __attribute__((aligned(8)));
	int fd, val = 0;
	socklen_t len = sizeof(val);

	/* No SA_RESTART: the signal ends the blocking recv. */
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0) {
		perror("natsync-kflows: netlink socket");
		return 1;
	}
	if (rcvbuf > 0) {
		int b = (int)rcvbuf;

		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &b, sizeof(b)) !=
		    0) {
			perror("natsync-kflows: SO_RCVBUFFORCE");
			return 1;
		}
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("natsync-kflows: bind ctnetlink NEW group");
		return 1;
	}
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &val, &len);
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (f)
			fclose(f);
	}
	while (!stopping) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h;
		size_t off = 0;

		if (n < 0) {
			if (errno == ENOBUFS)
				overruns++;
			else if (errno != EINTR)
				break;
			continue;
		}
		while ((h = next_message(buf, (size_t)n, &off)) != NULL)
			if (h->nlmsg_type ==
			    ((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW))
				events++;
	}
	close(fd);
	printf("RESULT kevents rcvbuf=%d events=%" PRIu64 " overruns=%" PRIu64
	       "\n",
	       val, events, overruns);
	return 0;
}

/* The status of one ctnetlink message carrying an entry (0 if absent). */
static uint32_t entry_status(const struct nlmsghdr *h)
{
	size_t off = NLMSG_LENGTH(sizeof(struct nfgenmsg));

	off = NLMSG_ALIGN(off);
	while (off + sizeof(struct nlattr) <= h->nlmsg_len) {
		const struct nlattr *a =
			(const struct nlattr *)((const char *)h + off);
		uint32_t v;

		if (a->nla_len < sizeof(*a) || off + a->nla_len > h->nlmsg_len)
			break;
		if ((a->nla_type & NLA_TYPE_MASK) == CTA_STATUS &&
		    a->nla_len >= NLA_HDRLEN + sizeof(v)) {
			memcpy(&v, (const char *)a + NLA_HDRLEN, sizeof(v));
			return ntohl(v);
		}
		off += NLA_ALIGN(a->nla_len);
	}
	return 0;
}

static int run_count(void)
{
	struct {
		struct nlmsghdr h;
		struct nfgenmsg g;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type =
			       (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1},
		 .g = {.nfgen_family = (uint8_t)opt.family,
		       .version = NFNETLINK_V0}};
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	static char buf[1 << 16] __attribute__((aligned(8)));
	uint64_t entries = 0, snat = 0;
	int fd, done = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    send(fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
		perror("natsync-kflows: ctnetlink dump");
		return 1;
	}
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h;
		size_t off = 0;

		if (n <= 0) {
			perror("natsync-kflows: ctnetlink dump");
			return 1;
		}
		while ((h = next_message(buf, (size_t)n, &off)) != NULL) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				fprintf(stderr, "natsync-kflows: ctnetlink "
						"dump refused\n");
				return 1;
			}
			entries++;
			if (entry_status(h) & IPS_SRC_NAT)
				snat++;
		}
	}
	close(fd);
	printf("RESULT kct entries=%" PRIu64 " snat=%" PRIu64 "\n", entries,
	       snat);
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: natsync-kflows send --dst ADDR [--src ADDR] "
	      "[--flows N] [--threads T]\n"
	      "                             [--rate R] [--first-port P] "
	      "[--dport D]\n"
	      "       natsync-kflows events [--rcvbuf BYTES] [--ready FILE]\n"
	      "       natsync-kflows count [--family 4|6]\n"
	      "       natsync-kflows -h | -V\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		NSB_OPT("dst", 'd'),   NSB_OPT("src", 's'),
		NSB_OPT("flows", 'n'), NSB_OPT("threads", 't'),
		NSB_OPT("rate", 'r'),  NSB_OPT("first-port", 'p'),
		NSB_OPT("dport", 'D'), NSB_OPT("rcvbuf", 'b'),
		NSB_OPT("ready", 'R'), NSB_OPT("family", 'f'),
		NSB_OPT_HELP_END};
	const char *mode, *ready = NULL;
	long rcvbuf = 0;
	int c;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	mode = argv[1];
	if (!strcmp(mode, "-h") || !strcmp(mode, "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(mode, "-V") || !strcmp(mode, "--version")) {
		printf("natsync-kflows %s\n", NATSYNC_VERSION);
		return 0;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (inet_pton(AF_INET6, optarg, &opt.dst6) == 1) {
				opt.family = AF_INET6;
				break;
			}
			/* fall through */
		case 's':
			if (inet_pton(AF_INET, optarg,
				      c == 'd' ? &opt.dst : &opt.src) != 1) {
				fprintf(stderr,
					"natsync-kflows: bad address "
					"%s\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			opt.flows = strtoull(optarg, NULL, 10);
			break;
		case 't':
			opt.threads = (unsigned int)atoi(optarg);
			break;
		case 'r':
			opt.rate = atof(optarg);
			break;
		case 'p':
			opt.first_port = (unsigned int)atoi(optarg);
			break;
		case 'D':
			opt.dport = (unsigned int)atoi(optarg);
			break;
		case 'b':
			rcvbuf = atol(optarg);
			break;
		case 'R':
			ready = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "4") && strcmp(optarg, "6")) {
				usage(stderr);
				return 2;
			}
			opt.family = optarg[0] == '6' ? AF_INET6 : AF_INET;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (opt.threads < 1 || opt.threads > MAX_THREADS ||
	    opt.first_port < 1 || opt.first_port > 65535 || opt.flows < 1 ||
	    opt.dport < 1 || opt.dport > 65535) {
		usage(stderr);
		return 2;
	}
	if (strcmp(mode, "send") == 0)
		return run_send();
	if (strcmp(mode, "events") == 0)
		return run_events(rcvbuf, ready);
	if (strcmp(mode, "count") == 0)
		return run_count();
	usage(stderr);
	return 2;
}
