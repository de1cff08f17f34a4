/*
 * nsa_config.h - the agent's configuration: one INI file for both roles
 * (parsed with inih), defaults, validation, and the few command-line
 * overrides. Every key is documented in README.md, section Configuration.
 */
#ifndef NSA_CONFIG_H
#define NSA_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nsa_cluster.h"
#include "nsdp_nat.h"
#include "nsdp_synth.h"

enum nsa_role { NSA_ROLE_ACTIVE, NSA_ROLE_STANDBY };

/* Where natsync-gateway's replication agent runs. */
enum nsa_gw_agent {
	NSA_GW_AGENT_THREADS, /* writer and subscriber threads in the gateway */
	NSA_GW_AGENT_EXTERNAL, /* a natsync-agent secondary process drains the
				  rings; the subscriber stays in the gateway */
};

/* [gateway]: natsync-gateway only. */
struct nsa_gateway_conf {
	char inside_port
		[128]; /* DPDK device name: net_af_packet0, 0000:3b:00.0 */
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
	enum nsa_gw_agent agent;
	unsigned int
		idle_sleep_us; /* sleep when a poll finds nothing; 0 = busy */
	unsigned int rx_descriptors, tx_descriptors;
	unsigned int mbufs; /* mbuf pool size */
};

struct nsa_config {
	enum nsa_role role;
	uint32_t gateway_id;
	uint32_t epoch;

	struct nsa_store_conf store;
	char password_file[PATH_MAX];
	/* The key that authenticates every batch (HMAC-SHA256), read from
	 * batch_key_file by nsa_config_finish; none when batch_key_len is 0. */
	char batch_key_file[PATH_MAX];
	char batch_key[256];
	size_t batch_key_len;

	/* [active] */
	unsigned int workers; /* writer threads */
	unsigned int batch_size; /* records per batch per node */
	unsigned int flush_us; /* a partial batch waits at most this long */
	unsigned int max_inflight; /* unacknowledged batches per connection */
	/* Acknowledged records kept for replay after a master failure: those
	 * of the last replay_ms (0 = none), at most replay_records per
	 * writer. */
	unsigned int replay_ms;
	unsigned int replay_records;

	/* [rings] */
	unsigned int lanes; /* rings, one per producer lcore */
	unsigned int ring_size; /* records per ring, a power of two */
	int attach; /* 1: find the gateway's rings by name (secondary
				   process); 0: create them (in-process) */

	/* [source] */
	int synth; /* run the synthetic source in this process */
	struct nsdp_synth_conf synth_conf;
	char source_dump[PATH_MAX]; /* write the source's final table here */

	/* [standby] */
	unsigned int table_capacity; /* sessions the table holds */
	char table_dump[PATH_MAX]; /* where SIGUSR1 / exit dump the table */
	/* How often the standby asks the store whether its topology changed
	 * under a subscription that still works; 0 = never. */
	unsigned int topology_check_ms;
	/* A subscription silent this long gets a PING; the PING unanswered
	 * for twice as long, it is dead; a resync without a reply for three
	 * times as long is retried; 0 = never. */
	unsigned int ping_ms;

	struct nsa_gateway_conf gw;

	/* [agent] */
	unsigned int progress_ms; /* progress line period, 0 = none */
	char eal_args[1024]; /* EAL arguments, space separated */
	int verbosity;
};

/* Fill c with the defaults. */
void nsa_config_defaults(struct nsa_config *c);

/* Load an INI file over c. 0 on success; otherwise -1 with a message naming
 * the file, line and key in err. */
int nsa_config_load(struct nsa_config *c, const char *path, char *err,
		    size_t errlen);

/* Apply one "section.key=value" override (command line --set). */
int nsa_config_set(struct nsa_config *c, const char *assignment, char *err,
		   size_t errlen);

/* Check consistency and read the password file; 0 or -1 with err. */
int nsa_config_finish(struct nsa_config *c, char *err, size_t errlen);

/* What natsync-gateway needs beyond nsa_config_finish (call it after): both
 * ports, the inside address and the pool set, one lane. 0, or -1 with the
 * first problem in err, naming its key. */
int nsa_config_gateway_check(const struct nsa_config *c, char *err,
			     size_t errlen);

/* Print the effective configuration in INI form. */
void nsa_config_print(const struct nsa_config *c, FILE *out);

#endif
