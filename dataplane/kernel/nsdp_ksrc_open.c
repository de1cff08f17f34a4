/*
 * nsdp_ksrc_open.c - opening and freeing the kernel session source
 * (nsdp_ksrc.h): the BPF program loaded and attached with libbpf, its ring
 * buffer, the ctnetlink sockets for dumps and destroy events opened in the
 * gateway's namespace, and the live set sized from nf_conntrack_max.
 *
 * Invariants: a source that nsdp_ksrc_create returns has everything open
 * or is not returned (why and err say what failed); nsdp_ksrc_free closes
 * what is open, after stopping the thread.
 *
 * Calls down only: into nsdp_ksrc.c (the callbacks it registers, the
 * ctnetlink opener, the thread's stop), never the other way.
 *
 * Not here: the thread, the events and the dump-diff (nsdp_ksrc.c), the
 * BPF program (nsdp_kern.bpf.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <netinet/in.h>
#include <linux/netfilter.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nsdp_ksrc_state.h"

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (level == LIBBPF_WARN)
		return vfprintf(stderr, fmt, ap);
	return 0;
}

static int fail(int *why, int rc, char *err, size_t errlen, const char *fmt,
		const char *what)
{
	*why = rc;
	snprintf(err, errlen, fmt, what);
	return rc;
}

static int load_bpf(struct nsdp_ksrc *k, int *why, char *err, size_t errlen)
{
	struct nsdp_kern *skel;
	int rc;

	libbpf_set_print(libbpf_quiet);
	skel = nsdp_kern__open();
	if (!skel)
		return fail(why, -errno, err, errlen,
			    "kernel source: cannot open the BPF object: %s",
			    strerror(errno));
	k->skel = skel;
	skel->rodata->filter_flags = NSDP_KERN_F_NETNS;
	skel->rodata->filter_netns = k->netns_ino;
	if (k->conf.zone_filter) {
		skel->rodata->filter_flags |= NSDP_KERN_F_ZONE;
		skel->rodata->filter_zone = k->conf.zone;
	}
	if (k->conf.mark_mask) {
		skel->rodata->filter_flags |= NSDP_KERN_F_MARK;
		skel->rodata->filter_mark = k->conf.mark;
		skel->rodata->filter_mark_mask = k->conf.mark_mask;
	}
	if (k->conf.ignore_mark) {
		skel->rodata->filter_flags |= NSDP_KERN_F_IGNORE_MARK;
		skel->rodata->filter_ignore_mark = k->conf.ignore_mark;
	}
	bpf_map__set_max_entries(skel->maps.events, k->conf.ringbuf_bytes);
	/* The defer program only with defer on; a netfilter program, which
	 * this libbpf may not know by its section name. */
	if (k->conf.defer_max_us) {
		bpf_program__set_type(skel->progs.nsdp_ct_defer,
				      NSDP_BPF_PROG_TYPE_NETFILTER);
		bpf_program__set_expected_attach_type(skel->progs.nsdp_ct_defer,
						      NSDP_BPF_NETFILTER);
		bpf_program__set_autoattach(skel->progs.nsdp_ct_defer, false);
	} else {
		bpf_program__set_autoload(skel->progs.nsdp_ct_defer, false);
	}
	rc = nsdp_kern__load(skel);
	if (rc == -EPERM || rc == -EACCES)
		return fail(why, -EPERM, err, errlen,
			    "kernel source: loading the BPF program was "
			    "refused (%s): privileges missing; run as root "
			    "(CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN)",
			    strerror(-rc));
	if (rc != 0)
		return fail(why, rc, err, errlen,
			    "kernel source: cannot load the BPF program: %s "
			    "(libbpf said why above)",
			    strerror(-rc));
	rc = nsdp_kern__attach(skel);
	if (rc != 0)
		return fail(why, rc == -EPERM ? -EPERM : rc, err, errlen,
			    "kernel source: cannot attach to "
			    "tp_btf/net_dev_queue: %s",
			    strerror(-rc));
	k->rb = ring_buffer__new(bpf_map__fd(skel->maps.events),
				 nsdp_ksrc_on_event, k, NULL);
	if (!k->rb)
		return fail(why, -errno, err, errlen,
			    "kernel source: ring buffer: %s", strerror(errno));
	return 0;
}

static int open_netlink(struct nsdp_ksrc *k, int netns_fd, int *why, char *err,
			size_t errlen)
{
	int rcvbuf =
		k->conf.ends_rcvbuf ? (int)k->conf.ends_rcvbuf : EVENT_RCVBUF;

	k->dump_h = nsdp_ksrc_nfct_open_in(netns_fd, 0);
	if (!k->dump_h)
		return fail(why, errno == EPERM ? -EPERM : -errno, err, errlen,
			    "kernel source: ctnetlink: %s (needs "
			    "CAP_NET_ADMIN and nf_conntrack_netlink)",
			    strerror(errno));
	nfct_callback_register2(k->dump_h, NFCT_T_ALL, nsdp_ksrc_on_dumped, k);
	if (!k->conf.ends)
		return 0;
	k->ends_h =
		nsdp_ksrc_nfct_open_in(netns_fd, NF_NETLINK_CONNTRACK_DESTROY);
	if (!k->ends_h)
		return fail(why, -errno, err, errlen,
			    "kernel source: ctnetlink destroy events: %s",
			    strerror(errno));
	nfct_callback_register2(k->ends_h, NFCT_T_DESTROY,
				nsdp_ksrc_on_destroyed, k);
	fcntl(nfct_fd(k->ends_h), F_SETFL, O_NONBLOCK);
	if (setsockopt(nfct_fd(k->ends_h), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)) != 0)
		setsockopt(nfct_fd(k->ends_h), SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			   sizeof(rcvbuf));
	return 0;
}

/* The defer program attached to postrouting of family pf (NFPROTO_IPV4
 * or NFPROTO_IPV6) in the gateway's namespace (a netfilter link is made
 * in the namespace of the thread that makes it), as BPF_LINK_CREATE with
 * the netfilter attributes, which this libbpf may not have. The link's
 * fd, or -errno. */
static int attach_defer_prog(struct nsdp_ksrc *k, __u32 pf)
{
	struct {
		__u32 prog_fd, target_fd, attach_type, flags;
		__u32 pf, hooknum;
		__s32 priority;
		__u32 nf_flags;
		__u8 pad[64];
	} attr = {
		.prog_fd = (__u32)bpf_program__fd(k->skel->progs.nsdp_ct_defer),
		.attach_type = NSDP_BPF_NETFILTER,
		.pf = pf,
		.hooknum = NF_INET_POST_ROUTING,
		.priority = NSDP_KDEFER_PRIORITY - 1,
	};
	int own = -1, fd, saved;

	if (k->netns_fd >= 0) {
		own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (own < 0 || setns(k->netns_fd, CLONE_NEWNET) != 0) {
			saved = -errno;
			if (own >= 0)
				close(own);
			return saved;
		}
	}
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	saved = fd < 0 ? -errno : fd;
	if (own >= 0) {
		if (setns(own, CLONE_NEWNET) != 0)
			abort(); /* would run on in the wrong namespace */
		close(own);
	}
	return saved;
}

/* Defer: the queue bound, the nftables table tried once (added and
 * deleted: the thread adds it after its initial dump, so that no packet
 * waits for that), the lane told that its producer holds packets. */
static int open_defer(struct nsdp_ksrc *k, int *why, char *err, size_t errlen)
{
	int rc;

	if (!k->conf.defer_max_us)
		return 0;
	/* A table a killed agent left would queue packets as soon as the
	 * queue is bound: gone first. */
	if (k->conf.defer_rule)
		nsdp_kdefer_rule_del(k->netns_fd);
	for (int i = 0; i < 2; i++) {
		k->defer_link[i] = attach_defer_prog(k, i == 0 ? NFPROTO_IPV4
							       : NFPROTO_IPV6);
		if (k->defer_link[i] < 0)
			return fail(why, k->defer_link[i], err, errlen,
				    i == 0 ? "defer: cannot attach the BPF "
					     "netfilter program to IPv4 "
					     "postrouting: %s (needs "
					     "CONFIG_NETFILTER_BPF_LINK, Linux "
					     "6.4 or later)"
					   : "defer: cannot attach the BPF "
					     "netfilter program to IPv6 "
					     "postrouting: %s",
				    strerror(-k->defer_link[i]));
	}
	k->defer = nsdp_kdefer_open(k->netns_fd, k->conf.defer_queue,
				    k->conf.defer_max_us, why, err, errlen);
	if (!k->defer)
		return *why;
	if (k->conf.defer_rule) {
		rc = nsdp_kdefer_rule_add(k->netns_fd, k->conf.defer_queue, err,
					  errlen);
		if (rc != 0) {
			*why = rc;
			return rc;
		}
		nsdp_kdefer_rule_del(k->netns_fd);
	}
	__atomic_store_n(&k->lane->deferring, 1, __ATOMIC_RELEASE);
	return 0;
}

/* The live set, bounded by conntrack's limit (read after open_netlink:
 * the conntrack module is loaded then); only with ends. */
static int open_live_set(struct nsdp_ksrc *k, int *why, char *err,
			 size_t errlen)
{
	if (!k->conf.ends)
		return 0;
	k->live = nsdp_klive_create(
		nsdp_klive_bound_for(nsdp_ksrc_conntrack_max()));
	if (!k->live)
		return fail(why, -ENOMEM, err, errlen, "kernel source: %s",
			    "out of memory");
	return 0;
}

struct nsdp_ksrc *nsdp_ksrc_create(const struct nsdp_ksrc_conf *conf,
				   struct nsdp_lane *lane, int *why, char *err,
				   size_t errlen)
{
	struct nsdp_ksrc *k;
	struct epoll_event ev = {.events = EPOLLIN};
	struct epoll_event qev = {.events = EPOLLIN, .data.u32 = EV_QUEUE};
	char path[128];
	struct stat st;
	int netns_fd = -1;

	*why = 0;
	if (access(BTF_PATH, R_OK) != 0) {
		*why = -ENOENT;
		snprintf(err, errlen,
			 "kernel source: no kernel BTF (%s: %s); the kernel "
			 "needs CONFIG_DEBUG_INFO_BTF=y",
			 BTF_PATH, strerror(errno));
		return NULL;
	}
	if (conf->netns[0])
		snprintf(path, sizeof(path), "/run/netns/%s", conf->netns);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/net");
	netns_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (netns_fd < 0 || fstat(netns_fd, &st) != 0) {
		*why = -ENOENT;
		snprintf(err, errlen, "kernel source: network namespace %s: %s",
			 path, strerror(errno));
		if (netns_fd >= 0)
			close(netns_fd);
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		*why = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		close(netns_fd);
		return NULL;
	}
	k->conf = *conf;
	k->lane = lane;
	k->epfd = -1;
	k->netns_fd = -1;
	k->defer_link[0] = k->defer_link[1] = -1;
	k->netns_ino = (uint32_t)st.st_ino;
	if (conf->netns[0])
		k->netns_fd = netns_fd;
	else
		close(netns_fd);
	netns_fd = -1;
	k->ncpus = libbpf_num_possible_cpus();
	if (k->ncpus <= 0 || load_bpf(k, why, err, errlen) != 0 ||
	    open_netlink(k, k->netns_fd, why, err, errlen) != 0 ||
	    open_live_set(k, why, err, errlen) != 0 ||
	    open_defer(k, why, err, errlen) != 0)
		goto fail;
	k->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (k->epfd < 0 ||
	    epoll_ctl(k->epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(k->rb),
		      &ev) != 0 ||
	    (k->ends_h &&
	     epoll_ctl(k->epfd, EPOLL_CTL_ADD, nfct_fd(k->ends_h), &ev) != 0) ||
	    (k->defer && epoll_ctl(k->epfd, EPOLL_CTL_ADD,
				   nsdp_kdefer_fd(k->defer), &qev) != 0)) {
		fail(why, -errno, err, errlen, "kernel source: epoll: %s",
		     strerror(errno));
		goto fail;
	}
	return k;
fail:
	if (!*why)
		fail(why, -EINVAL, err, errlen, "kernel source: %s",
		     "no possible CPUs");
	if (netns_fd >= 0)
		close(netns_fd);
	nsdp_ksrc_free(k);
	return NULL;
}
void nsdp_ksrc_free(struct nsdp_ksrc *k)
{
	if (!k)
		return;
	nsdp_ksrc_stop(k);
	if (k->defer && k->conf.defer_rule)
		nsdp_kdefer_rule_del(k->netns_fd);
	nsdp_kdefer_free(k->defer);
	for (int i = 0; i < 2; i++)
		if (k->defer_link[i] >= 0)
			close(k->defer_link[i]);
	if (k->epfd >= 0)
		close(k->epfd);
	if (k->netns_fd >= 0)
		close(k->netns_fd);
	if (k->ends_h)
		nfct_close(k->ends_h);
	if (k->dump_h)
		nfct_close(k->dump_h);
	ring_buffer__free(k->rb);
	nsdp_kern__destroy(k->skel);
	nsdp_klive_free(k->live);
	free(k);
}
