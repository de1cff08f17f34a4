/*
 * nsa_config.h - the agent's configuration: one INI file for both roles
 * (parsed with inih), defaults, validation, the --set overrides, the
 * printout and the generated reference (docs/configuration.md). A program
 * adds sections of its own with a key table (nsa_config_key.h) over a
 * struct that begins with a struct nsa_config.
 */
#ifndef NSA_CONFIG_H
#define NSA_CONFIG_H

#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nsa_store_conf.h"
#include "nsdp_ksrc.h"
#include "nsdp_synth.h"

enum nsa_role { NSA_ROLE_ACTIVE, NSA_ROLE_STANDBY };
enum nsa_commit { NSA_COMMIT_NONE, NSA_COMMIT_CONNTRACK };

/* [standby] priority: the subscriber thread's (high: nice
 * NSA_STANDBY_NICE_HIGH, as conntrackd's Nice; realtime: SCHED_FIFO at
 * NSA_STANDBY_RTPRIO, as conntrackd's Scheduler; agent/standby/nsa_prio.h
 * lowers either while the thread is busy). */
enum nsa_priority {
	NSA_PRIORITY_NORMAL,
	NSA_PRIORITY_HIGH,
	NSA_PRIORITY_REALTIME
};
#define NSA_STANDBY_NICE_HIGH (-10)
#define NSA_STANDBY_RTPRIO 1

/* [source] type: where an active's records come from. */
enum nsa_source_type {
	NSA_SOURCE_NONE, /* a gateway's lanes */
	NSA_SOURCE_SYNTH, /* the synthetic source on EAL lcores */
	NSA_SOURCE_KERNEL, /* the Linux kernel's conntrack (nsdp_ksrc.h) */
};

struct nsa_key_table;

struct nsa_config {
	enum nsa_role role;
	uint32_t gateway_id;
	uint32_t epoch;
	/* An active with epoch 0 takes one above this (the highest epoch the
	 * node's standby applied: keepalived-kernel-notify.sh passes it). */
	uint32_t epoch_floor;
	/* An active's first ask for an epoch (epoch 0) and a standby's
	 * handover wait at most this long for each connect and reply, ms. */
	unsigned int promote_wait_ms;

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
	/* The CPUs the writer threads run on: "auto", "all" or a list
	 * (nsa_cpu_list_parse). */
	char writer_cpus[256];

	/* [rings] */
	unsigned int lanes; /* rings, one per producer lcore */
	unsigned int ring_size; /* records per ring, a power of two */
	int attach; /* 1: find the gateway's rings by name (secondary
				   process); 0: create them (in-process) */

	/* [source] */
	enum nsa_source_type source_type;
	struct nsdp_synth_conf synth_conf;
	char source_dump[PATH_MAX]; /* write the source's final table here */

	/* [source] type = kernel */
	struct nsdp_ksrc_conf ksrc_conf;
	uint32_t ksrc_zone; /* 65536: every zone */
	int ksrc_defer; /* [source] defer: ksrc_conf.defer_max_us set */
	uint32_t ksrc_defer_max_us, ksrc_defer_queue;

	/* [standby] */
	unsigned int table_capacity; /* sessions the table holds */
	/* IPv6 sessions its IPv6 table holds; 0: no IPv6 table */
	unsigned int table_capacity_v6;
	char table_dump[PATH_MAX]; /* where SIGUSR1 / exit dump the table */
	/* How often the standby asks the store whether its topology changed
	 * under a subscription that still works; 0 = never. */
	unsigned int topology_check_ms;
	/* A subscription silent this long gets a PING; the PING unanswered
	 * for twice as long, it is dead; a resync without a reply for three
	 * times as long is retried; 0 = never. */
	unsigned int ping_ms;
	/* A batch sent (by its writer's clock) more than this before the
	 * standby subscribed to its channel is refused as a replay: the
	 * hosts' clock difference plus a batch's wait in a writer. */
	unsigned int clock_slack_ms;
	/* Log layout: a sequence gap of at most this many batches is mended
	 * by reading their segments back; a longer one (or 0) resyncs. */
	unsigned int repair_max_segments;

	/* [standby] kernel conntrack commit: every record the subscriber
	 * applies is also written into this host's conntrack table
	 * (dataplane/kernel/nsdp_ctcommit.h). */
	int commit; /* enum nsa_commit */
	char commit_netns[64]; /* a name under /run/netns; empty = ours */
	unsigned int commit_batch_bytes; /* per sendmsg; 0 = one at a time */
	unsigned int commit_mark; /* CTA_MARK of committed entries, 0 = none */
	unsigned int
		commit_zone; /* CTA_ZONE of committed entries, 0 = default */
	int priority; /* enum nsa_priority of the subscriber thread */

	/* [agent] */
	unsigned int progress_ms; /* progress line period, 0 = none */
	char eal_args[1024]; /* EAL arguments, space separated */
	int verbosity;

	/* [metrics] (agent/ops/nsa_metrics.h) */
	char metrics_listen[80]; /* ADDR:PORT or [IPv6]:PORT; empty = off */
	/* An active is not ready while a writer retries longer than this. */
	unsigned int metrics_ready_retry_ms;
	/* [store] layout = log: compaction (schema/FORMAT.md). A round starts
	 * once the segments written since the last one exceed
	 * log_compact_pct % of the bytes that one wrote back, and at least
	 * log_compact_min_kb KiB; 0 % = never. The segments read expire
	 * log_compact_grace_ms after the checkpoint. */
	unsigned int log_compact_pct;
	unsigned int log_compact_min_kb;
	unsigned int log_compact_grace_ms;
	/* A round's merge within this many MiB (passes over slot ranges);
	 * its checkpoint and mark WAIT this long for a replica. */
	unsigned int log_compact_budget_mb;
	unsigned int log_compact_wait_ms;

	/* A program's own sections, set by nsa_config_defaults_ext: their
	 * fields follow this struct in the program's. */
	const struct nsa_key_table *extra;
};

/* Fill c with the defaults of the agent's keys. */
void nsa_config_defaults(struct nsa_config *c);

/* Fill the extra->size bytes at c with the defaults of the agent's keys and
 * of extra's, which every nsa_config_* call on c then knows too. c must
 * begin a struct of extra->size bytes (gateway/ngw_config.h); a copy of
 * the struct nsa_config alone must not be handed back to these calls. */
void nsa_config_defaults_ext(struct nsa_config *c,
			     const struct nsa_key_table *extra);

/* Load an INI file over c. 0 on success; otherwise -1 with a message naming
 * the file, line and key in err. */
int nsa_config_load(struct nsa_config *c, const char *path, char *err,
		    size_t errlen);

/* Apply one "section.key=value" override (command line --set). */
int nsa_config_set(struct nsa_config *c, const char *assignment, char *err,
		   size_t errlen);

/* Check consistency and read the password file; 0 or -1 with err. */
int nsa_config_finish(struct nsa_config *c, char *err, size_t errlen);

/* Print the effective configuration in INI form. */
void nsa_config_print(const struct nsa_config *c, FILE *out);

/* The first line of the reference: docs/configuration.md holds a
 * hand-written introduction above it and the generated text from it on. */
#define NSA_CONFIG_REFERENCE_MARKER                                        \
	"<!-- Generated by natsync-agent --config-reference from the key " \
	"tables; edit those, not the text below. -->"

/* Print the Markdown reference of every key, the agent's and extra's (may
 * be NULL): docs/configuration.md below its marker line. */
void nsa_config_reference(const struct nsa_key_table *extra, FILE *out);

/* Parse a CPU list such as "0,2-3" into set: 0, or -1 with why (a CPU
 * that is not online, a range backwards, text that is not a list). */
int nsa_cpu_list_parse(const char *text, cpu_set_t *set, char *why,
		       size_t whylen);

/* Print set as a CPU list ("0,2-3"; "none" when empty) into buf. */
void nsa_cpu_list_format(const cpu_set_t *set, char *buf, size_t len);

/* Set [agent] epoch and what follows from it (the sources' records). */
void nsa_config_set_epoch(struct nsa_config *c, uint32_t epoch);

#endif
