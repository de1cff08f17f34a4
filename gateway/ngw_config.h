/*
 * ngw_config.h - natsync-gateway's configuration: the agent's (struct
 * nsa_config) plus the [gateway] section, parsed by the agent's parser
 * through the key table ngw_config_keys.
 */
#ifndef NGW_CONFIG_H
#define NGW_CONFIG_H

#include <limits.h>
#include <stddef.h>

#include "nsa_config.h"
#include "nsdp_nat.h"

/* Where natsync-gateway's replication agent runs. */
enum ngw_agent {
	NGW_AGENT_THREADS, /* writer and subscriber threads in the gateway */
	NGW_AGENT_EXTERNAL, /* a natsync-agent secondary process drains the
			       rings; the subscriber stays in the gateway */
};

/* [gateway] */
struct ngw_gateway_conf {
	/* DPDK device names: net_af_packet0, 0000:3b:00.0 */
	char inside_port[128];
	char outside_port[128];
	/* Addresses, pool, port range and timeouts. The MAC addresses and the
	 * mbuf pool are filled in by natsync-gateway once the ports are up;
	 * gateway_id and max_sessions come from [agent] gateway_id and
	 * [standby] table_capacity. */
	struct nsdp_nat_conf nat;
	/* Timeouts as configured, in seconds (copied into nat.*_ms). */
	unsigned int tcp_syn_timeout, tcp_established_timeout;
	unsigned int tcp_closing_timeout, udp_timeout, icmp_timeout;
	char control_socket[PATH_MAX];
	enum ngw_agent agent;
	unsigned int
		idle_sleep_us; /* sleep when a poll finds nothing; 0 = busy */
	unsigned int rx_descriptors, tx_descriptors;
	unsigned int mbufs; /* mbuf pool size */
	/* While active: how often the store's epoch is read (a newer one
	 * demotes the gateway), ms. */
	unsigned int fence_check_ms;
	/* A promotion's first try for a store epoch waits at most this long;
	 * then it forwards on a provisional epoch, ms. */
	unsigned int promote_wait_ms;
	/* Defer: a new session's first packet waits for its record's
	 * acknowledgement, at most defer_max_us (nat.defer_max_us). */
	int defer;
	unsigned int defer_max_us;
	/* NAT64, as written (parsed into nat.inside_addr6, nat.nat64_prefix
	 * and nat.nat64_prefix_len): on when inside_address6 is set. */
	char inside_address6[64];
	char nat64_prefix[64];
	/* NAT66, as written (nat.outside_addr6, nat.next_hop6): on when
	 * outside_address6 is set (and NAT64 is on). */
	char outside_address6[64];
	char next_hop6[64];
};

struct ngw_config {
	struct nsa_config agent; /* first: the key offsets count from it */
	struct ngw_gateway_conf gw;
};

/* The [gateway] keys, for nsa_config_defaults_ext and nsa_cli. */
extern const struct nsa_key_table ngw_config_keys;

/* Defaults of every key; then load, --set and finish go through
 * &c->agent. */
void ngw_config_defaults(struct ngw_config *c);

/* What natsync-gateway needs beyond nsa_config_finish (call it after): both
 * ports, the inside address and the pool set, one lane. 0, or -1 with the
 * first problem in err, naming its key. */
int ngw_config_check(const struct ngw_config *c, char *err, size_t errlen);

#endif
