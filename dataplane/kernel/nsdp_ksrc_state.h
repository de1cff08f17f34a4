/*
 * nsdp_ksrc_state.h - the kernel session source's state, shared by its
 * three files only: nsdp_ksrc_open.c opens it (BPF program, ctnetlink
 * sockets, live set) and registers the callbacks of nsdp_ksrc.c, whose
 * thread moves events into the lane; nsdp_ksrc_ct.c reads ctnetlink's
 * entries for both. Nothing outside dataplane/kernel/ includes it.
 */
#ifndef NSDP_KSRC_STATE_H
#define NSDP_KSRC_STATE_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include <libnetfilter_conntrack/libnetfilter_conntrack.h>

#include "nsdp_kdefer.h"
#include "nsdp_kern.h"
#include "nsdp_kern.skel.h"
#include "nsdp_klive.h"
#include "nsdp_ksrc.h"

#define BTF_PATH "/sys/kernel/btf/vmlinux"
#define POLL_MS 50
/* Destroy events come in bursts (a flush, a timeout wave). */
#define EVENT_RCVBUF (8 << 20)
#define CT_MAX_PATH "/proc/sys/net/netfilter/nf_conntrack_max"
/* Newer than the uapi headers this may build with (Linux 6.4). */
#define NSDP_BPF_PROG_TYPE_NETFILTER 32
#define NSDP_BPF_NETFILTER 45
/* epoll data of the defer queue's socket (the others carry 0). */
#define EV_QUEUE 1
/* When nf_conntrack_max cannot be read. */
#define CT_MAX_DEFAULT 262144
/* Re-dumps logged at most this often (each one is counted). */
#define REDUMP_LOG_NS 1000000000ULL

/* Why the next round dumps: events of the ring buffer lost (every entry is
 * sent again), destroy events lost or the live set full (the set is
 * diffed, only what it lacks is sent). */
enum ksrc_loss {
	LOST_EVENTS = 1,
	LOST_ENDS = 2,
	LOST_ROOM = 4,
};

struct nsdp_ksrc {
	struct nsdp_ksrc_conf conf;
	struct nsdp_lane *lane;
	struct nsdp_kern *skel;
	struct ring_buffer *rb;
	struct nfct_handle *dump_h; /* queries, in the namespace */
	struct nfct_handle *ends_h; /* destroy events, in the namespace */
	uint32_t netns_ino;
	int epfd;
	int ncpus;
	uint64_t last_stamp;
	uint64_t drops_seen; /* ring buffer drops already answered */
	struct nsdp_klive *live; /* sent as live; NULL without ends */
	unsigned int lost; /* enum ksrc_loss bits not yet answered */
	int dump_all; /* the running dump sends every entry */
	uint64_t redump_logged_ns;
	int netns_fd; /* the namespace, for nsdp_ksrc_dump_table */
	pthread_t thread;
	int running, stop;
	struct nsdp_kdefer *defer; /* NULL with defer off */
	/* the defer program's netfilter links (IPv4, IPv6), or -1 */
	int defer_link[2];
	struct nsdp_ksrc_stats st; /* written by the thread */
};

#define ST_ADD(k, f, v) __atomic_add_fetch(&(k)->st.f, (v), __ATOMIC_RELAXED)

/* nsdp_ksrc.c: the ring buffer's and ctnetlink's callbacks (arg/data: the
 * struct nsdp_ksrc). */
int nsdp_ksrc_on_event(void *ctx, void *data, size_t len);
int nsdp_ksrc_on_dumped(const struct nlmsghdr *nlh,
			enum nf_conntrack_msg_type type,
			struct nf_conntrack *ct, void *arg);
int nsdp_ksrc_on_destroyed(const struct nlmsghdr *nlh,
			   enum nf_conntrack_msg_type type,
			   struct nf_conntrack *ct, void *arg);

/* nsdp_ksrc_ct.c: a ctnetlink handle opened in namespace netns_fd (-1:
 * this thread's), subscribed to groups; NULL with errno. */
struct nfct_handle *nsdp_ksrc_nfct_open_in(int netns_fd, unsigned int groups);
/* nsdp_ksrc_ct.c: nf_conntrack_max, how many entries the namespace's
 * table holds at most. */
uint64_t nsdp_ksrc_conntrack_max(void);
/* nsdp_ksrc_ct.c: an entry as ctnetlink gives it (nlh its message): 1 and
 * its key, the BPF program's for the same entry, when it is one k keeps;
 * else 0. */
int nsdp_ksrc_ct_key(const struct nsdp_ksrc *k, const struct nlmsghdr *nlh,
		     const struct nf_conntrack *ct, struct nsdp_kern_key *key);

#endif
