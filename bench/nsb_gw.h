/*
 * nsb_gw.h - what the parts of natsync-gwbench share: its options, the
 * simulated network (addresses, MAC addresses, frame size), the two
 * ring-backed ports of a gateway and the lane consumer standing in for the
 * agent.
 *
 * natsync_gwbench.c parses the options, sets up and reports;
 * nsb_gw_traffic.c generates the traffic (answering ARP with nsb_gw_arp.c,
 * checking with nsb_gw_check.c); nsb_gw_sched.c runs the gateway loop
 * (gateway/ngw_fwd.h) in rounds or slices; nsb_gw_report.c prints what a
 * round measured.
 */
#ifndef NSB_GW_H
#define NSB_GW_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "nsdp_lane.h"

#define NSB_GW_ACTIVATE_MS 5000
/* A gateway iteration longer than 1/NSB_GW_STALL_DIV s (some 50 times the
 * usual) was preempted, not slow: it is left out of the gateway figure
 * and counted. */
#define NSB_GW_STALL_DIV 1000
#define NSB_GW_PORTS_PER_ADDR (65535u - 1024u + 1u)

/* Addresses (host byte order): RFC 2544's benchmarking range outside. */
#define NSB_GW_INSIDE_NET 0x0a000000u /* 10.0.0.0/8: host h is .0.0.1 + h */
#define NSB_GW_INSIDE_MASK 0xff000000u
#define NSB_GW_GW_INSIDE 0x0afffffeu /* 10.255.255.254 */
#define NSB_GW_NEXT_HOP 0xc6120001u /* 198.18.0.1 */
#define NSB_GW_POOL_FIRST 0xc6120101u /* 198.18.1.1 */
#define NSB_GW_REMOTE_NET 0xc6130000u /* 198.19.0.0/16: the servers */
#define NSB_GW_REMOTES 4093u
#define NSB_GW_DPORT 443

/* A 60-byte frame (64 on the wire): Ethernet, IPv4, L4 header, payload. */
#define NSB_GW_FRAME 60
#define NSB_GW_L3 RTE_ETHER_HDR_LEN
#define NSB_GW_L4 (NSB_GW_L3 + (int)sizeof(struct rte_ipv4_hdr))
/* A NAT64 flow's frame: the same L4 part behind an IPv6 header (80
 * bytes; 60 once translated). */
#define NSB_GW_FRAME6 (NSB_GW_FRAME + 20)
#define NSB_GW_L4_6 (NSB_GW_L3 + 40)

extern const struct rte_ether_addr nsb_gw_inside_mac, nsb_gw_outside_mac,
	nsb_gw_host_mac, nsb_gw_next_hop_mac;

/* Set by SIGINT/SIGTERM: a run in progress stops, and says so. */
extern volatile sig_atomic_t nsb_gw_signalled;

struct nsb_gw_opts {
	uint32_t flows;
	uint32_t hosts; /* inside hosts the flows come from */
	double new_pct; /* of the flows, replaced per second */
	unsigned int tcp_pct; /* of the flows, TCP rather than UDP */
	/* of the flows, UDP from inside IPv6 hosts through NAT64 (its
	 * prefix 64:ff9b::/96), taking these slots from TCP */
	unsigned int nat64_pct;
	unsigned int reply_pct; /* of translated packets, reflected back */
	unsigned int timeout_s, seconds, warmup_s, rounds, burst;
	unsigned int ring_size; /* the lane's */
	unsigned int slice_ms; /* 0: rounds; else both gateways in slices */
	/* The recording gateway's defer_max_us (0: defer off); the
	 * consumer settles every record it drains. */
	unsigned int defer_us;
	int verify;
	const char *csv;
	const char *eal_args; /* replaces the default EAL arguments */
};

/* The two ring-backed ports and the rings behind them: the gateway
 * receives from *_rx and transmits into *_tx; the generator does the
 * opposite. */
struct nsb_gw_ports {
	uint16_t inside, outside;
	int inside_up, outside_up; /* started, to stop and close */
	struct rte_ring *in_rx, *in_tx, *out_rx, *out_tx;
	struct rte_mempool *pool;
};

/* The inside and outside ports of gateway idx, over mbufs from pool; 0 or
 * a negative errno (said on stderr). */
int nsb_gw_ports_create(struct nsb_gw_ports *p, unsigned int idx,
			struct rte_mempool *pool);

/* Free every mbuf waiting in the four rings. */
void nsb_gw_ports_drain(struct nsb_gw_ports *p);

void nsb_gw_ports_close(struct nsb_gw_ports *p);

/* Drains the lane into nothing, on the main lcore's CPU, as the agent's
 * writers would (without the store). */
struct nsb_gw_consumer {
	struct nsdp_lane *lane;
	pthread_t thread;
	int stop;
	uint64_t drained; /* NSDP_STAT */
};

/* 0 or a negative errno. */
int nsb_gw_consumer_start(struct nsb_gw_consumer *c);
void nsb_gw_consumer_stop(struct nsb_gw_consumer *c);

#endif
