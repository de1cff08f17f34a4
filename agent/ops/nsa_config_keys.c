/*
 * nsa_config_keys.c - the agent's configuration keys: one row per key with
 * its section, kind, field in struct nsa_config, range, default and help.
 *
 * The defaults, the file loader, --set, the printout and the generated
 * reference (docs/configuration.md) all walk this table, so a key added
 * here is parsed, range-checked, defaulted, printed and documented without
 * touching anything else. Each help text says what the key does and the
 * meaning of 0 or empty where it has one; the reference adds the default
 * and the accepted values from the row itself.
 *
 * Not here: how values are parsed (nsa_config_value.c), the checks that
 * span several keys (nsa_config_finish), and the sections of a program
 * (natsync-gateway's [gateway] is in gateway/ngw_config.c).
 */
#include <stddef.h>
#include <stdint.h>

#include "ns_batch.h"
#include "nsa_config_key.h"
#include "nsa_log.h"
#include "nsdp_lane.h"

static const char *const nsa_role_names[] = {"active", "standby", NULL};
static const char *const nsa_publish_names[] = {"auto", "sharded", "classic",
						NULL};
static const char *const nsa_level_names[] = {"error", "warn", "info", "debug",
					      NULL};
static const char *const nsa_source_names[] = {"none", "synth", "kernel", NULL};
static const char *const nsa_commit_names[] = {"none", "conntrack", NULL};
_Static_assert(NSA_COMMIT_CONNTRACK == 1, "nsa_commit_names follow the enum");
static const char *const nsa_priority_names[] = {"normal", "high", "realtime",
						 NULL};
_Static_assert(NSA_PRIORITY_REALTIME == 2,
	       "nsa_priority_names follow the enum");

/* [store] layout */
static const char *const nsa_layout_names[] = {"keys", "log", NULL};
_Static_assert(NSA_LAYOUT_LOG == 1, "nsa_layout_names follow the enum");
_Static_assert(sizeof(enum nsa_layout) == sizeof(uint32_t), "enum size");

/* Enums are stored through 32-bit integers; the order of the names above
 * must match the enum values. */
_Static_assert(sizeof(enum nsa_role) == sizeof(uint32_t), "enum size");
_Static_assert(sizeof(enum nsa_publish_mode) == sizeof(uint32_t), "enum size");
_Static_assert(sizeof(enum nsa_source_type) == sizeof(uint32_t), "enum size");
_Static_assert(NSA_SOURCE_KERNEL == 2, "nsa_source_names follows the enum");
_Static_assert(NSA_ROLE_STANDBY == 1 && NSA_PUBLISH_CLASSIC == 2 &&
		       NSA_LOG_DEBUG == 3,
	       "name tables follow the enums");

#define NSA_DEFAULT_EAL_ARGS \
	"--no-huge --no-shconf -m 512 --no-pci --no-telemetry"

#define NSA_KEY_STRUCT struct nsa_config

/* clang-format off */
static const struct nsa_key nsa_agent_keys[] = {
	NSA_ENUM("agent", "role", role, nsa_role_names, "active", "`active` reads the rings and writes the store; `standby` subscribes and keeps the session table."),
	NSA_NUM("agent", "gateway_id", gateway_id, 0, UINT32_MAX, "1", "Id of this gateway, carried in every record: its gateway pair (`gateway_id >> 8`) and its node in the pair (the low byte, for provisional epochs). Pairs that share a store have their own epoch counter and fence, and a standby takes only its own pair's sessions; pair 0 uses `natsync:epoch` and `natsync-writer`, pair P `natsync:epoch:P` and `natsync-writer:P` (docs/gateway-and-failover.md, Gateway pairs)."),
	NSA_NUM("agent", "epoch", epoch, 0, UINT32_MAX, "1", "Fencing epoch of the records, raised at every promotion; records of a lower epoch do not overwrite. `0` (active): take a new one from the store at start (`INCRBY natsync:epoch`) and close older writers' connections, as a gateway's promotion does; what an active that follows another (a kernel gateway's) uses. An active whose epoch is below the store's counter writes nothing (docs/failure-modes.md)."),
	NSA_NUM("agent", "promote_wait_ms", promote_wait_ms, 1, 60000, "50", "An active with `epoch = 0` (a kernel gateway's, at start) and a standby handed over (`SIGUSR2`) ask the store for an epoch and wait at most this long for the store's topology over all seeds together, then for each connect and each reply, ms, as `[gateway] promote_wait_ms` bounds a DPDK gateway's promotion: with a hung store (masters stopped) the ask ends after about this long, whatever the number of seeds, and the active replicates at once on a provisional epoch (docs/kernel-gateways.md, The epoch). A `WAIT` for a replica (`[store] epoch_wait_ms`) is cut to it too."),
	NSA_NUM("agent", "epoch_floor", epoch_floor, 0, UINT32_MAX, "0", "An active with `epoch = 0` takes an epoch above this one, even from a store that lost its counter; when the store does not answer at start, it replicates on a provisional epoch in the generation after it (docs/kernel-gateways.md). `deploy/keepalived-kernel-notify.sh` sets it to the highest epoch the standby it stops applied (its REPORT's `epoch_max`)."),
	NSA_NUM("agent", "progress_ms", progress_ms, 0, 3600000, "1000", "Period of the progress line, ms; `0` = no progress line."),
	NSA_STR("agent", "eal_args", eal_args, NSA_DEFAULT_EAL_ARGS, "DPDK EAL arguments, space separated."),
	NSA_ENUM("agent", "log_level", verbosity, nsa_level_names, "info", "Log lines above this level are not printed."),
	NSA_SEEDS("store", "seeds", store, "127.0.0.1:7000", "Store nodes asked in order for the topology: a Redis Cluster or one plain server. The first node reporting `cluster_state:ok` with a master for every slot is believed; the first answer only when none does."),
	NSA_STR("store", "user", store.user, "", "ACL user for AUTH; empty = AUTH with the password alone."),
	NSA_STR("store", "password_file", password_file, "", "File holding the store password on one line (see Secret files); empty = no AUTH. The password is never printed."),
	NSA_STR("store", "batch_key_file", batch_key_file, "", "File holding the batch key on one line (see Secret files). With it an active signs every batch and a standby applies only batches signed with it; empty = unsigned batches."),
	NSA_NUM("store", "connect_timeout_ms", store.connect_timeout_ms, 1, 600000, "1000", "Timeout of each connect to a store node, ms."),
	NSA_NUM("store", "epoch_wait_ms", store.epoch_wait_ms, 0, 600000, "1000", "A promotion epoch taken from the store (`natsync:epoch` raised) is used only once a replica acknowledged it (`WAIT 1`) within this many ms, where the epoch key's master has replicas; otherwise it is left unused and the next one is asked for (a replica promoted before it got the increment could issue the same epoch again). A master without replicas is not waited for. `0` = no `WAIT`."),
	NSA_ENUM("store", "publish", store.publish, nsa_publish_names, "auto", "Notifications: `sharded` (SPUBLISH/SSUBSCRIBE, Redis 7), `classic` (PUBLISH/SUBSCRIBE), `auto` (SPUBLISH where the server has it, else PUBLISH)."),

	/* [store] layout (the log layout) */
	NSA_ENUM("store", "layout", store.layout, nsa_layout_names, "log", "How the store holds the sessions (schema/FORMAT.md): `log`, one segment key per batch holding the batch as published (one `SET` per batch), read back by merging the segments, compacted by the active (`log_compact_pct`); `keys`, one key per session (one `SET` or `DEL` per record), each readable with `redis-cli GET` (docs/performance.md weighs the two). Every active and standby of a deployment must use the same layout."),
	NSA_NUM("store", "log_compact_pct", log_compact_pct, 0, 100000, "100", "Log layout: the active compacts a master's log once the segments written since its last checkpoint exceed this % of that checkpoint's bytes (write amplification at most 1 + 100/this); `0` = never (segments then only expire with their records' timeouts)."),
	NSA_NUM("store", "log_compact_min_kb", log_compact_min_kb, 0, 16777216, "4096", "Log layout: no compaction before this many KiB of segments were written since the last one."),
	NSA_NUM("store", "log_compact_grace_ms", log_compact_grace_ms, 0, 600000, "5000", "Log layout: the segments a checkpoint covers expire this long after it, ms, so that a load that listed them before still reads them; longer than a load of one master."),
	NSA_NUM("store", "log_compact_budget_mb", log_compact_budget_mb, 1, 1048576, "256", "Log layout: a compaction round merges the sessions a range of slots at a time so that its merge holds at most this many MiB (about 100 to 200 B a session); each range reads the log again."),
	NSA_NUM("store", "log_compact_wait_ms", log_compact_wait_ms, 1, 600000, "1000", "Log layout: a compaction round's checkpoint, then its mark, must be acknowledged by a replica (`WAIT`) within this many ms on every master that has replicas, or the round stops before it expires anything."),
	NSA_NUM("active", "workers", workers, 1, NSDP_MAX_LANES, "1", "Writer threads; must not exceed `[rings] lanes` in the active role."),
	NSA_NUM("active", "batch_size", batch_size, 1, NS_BATCH_MAX_RECORDS, "256", "Records per batch per store node. A writer behind (a ring a quarter full or more as a batch reaches this size: flat out, or after a long stall) lets the batch grow to 4 times this (4096 at most), which costs the store and the standby less per record; one that keeps up closes every batch at this size."),
	NSA_NUM("active", "flush_us", flush_us, 0, 1000000, "200", "A partial batch waits at most this long before it is sent, µs."),
	NSA_NUM("active", "max_inflight", max_inflight, 1, 1024, "8", "Unacknowledged batches per connection."),
	NSA_NUM("active", "replay_ms", replay_ms, 0, 60000, "2000", "Replay window, ms: when a master is lost, the records acknowledged in its last `replay_ms` are sent again (see Replay); `0` = no replay."),
	NSA_NUM("active", "replay_records", replay_records, 0, 16777216, "131072", "Most records each writer keeps for the replay window (80 bytes each); beyond it the oldest leave early (logged once). `0` = no replay."),
	NSA_STR("active", "writer_cpus", writer_cpus, "auto", "The CPUs the writer threads run on: a list such as `0,2-3`; `auto`: every online CPU but those of the lcores that poll in the same process (the synthetic source's, natsync-gateway's forwarding lcore), so that a writer never waits behind one (any CPU when there are none or that leaves none, and with the keys layout when every store seed is a loopback address: that store, a command a session, needs a CPU more than the writers); `all`: any CPU. An agent attached to a gateway's rings does not know the gateway's lcores: list the CPUs its fast path leaves free."),
	NSA_NUM("rings", "lanes", lanes, 1, NSDP_MAX_LANES, "1", "Rings, one per producer lcore."),
	NSA_POW2("rings", "ring_size", ring_size, 64, 16777216, "65536", "Records per ring."),
	NSA_BOOL("rings", "attach", attach, "no", "`yes`: find the gateway's rings by name (agent as a DPDK secondary process); `no`: create them in this process."),
	NSA_ENUM("source", "type", source_type, nsa_source_names, "none", "`none`: records come from the gateway; `synth`: run the synthetic session source in this process; `kernel`: capture the NAT'd conntrack entries of a Linux kernel gateway (BPF, see kernel-gateways.md)."),
	NSA_NUM("source", "flows", synth_conf.flows, 1, 1000000000, "100000", "Synthetic source: distinct flows."),
	NSA_NUM("source", "events", synth_conf.events, 0, UINT64_MAX, "1000000", "Synthetic source: events to produce in all, then stop."),
	NSA_NUM("source", "rate", synth_conf.rate, 0, UINT64_MAX, "0", "Synthetic source: events per second over all workers; `0` = as fast as possible."),
	NSA_NUM("source", "seed", synth_conf.seed, 0, UINT64_MAX, "1", "Synthetic source: random seed; the same configuration yields the same events and final table."),
	NSA_NUM("source", "refresh_pct", synth_conf.refresh_pct, 0, 100, "60", "Synthetic source: of events on a live flow, the percentage that are refreshes."),
	NSA_NUM("source", "v6_pct", synth_conf.v6_pct, 0, 100, "0", "Synthetic source: the percentage of flows that are IPv6, half NAT64 (`64:ff9b::/96`), half NAT66; `0` = IPv4 only. A standby that takes them needs `[standby] table_capacity_v6`."),
	NSA_NUM("source", "timeout_ms", synth_conf.timeout_ms, 1, 86400000, "300000", "Synthetic source: idle timeout of its sessions, ms; the store key expires after it."),
	NSA_BOOL("source", "wait_when_full", synth_conf.wait_when_full, "yes", "Synthetic source: `yes` retries a full ring (test source, nothing lost); `no` drops and counts, as the fast path does."),
	NSA_NUM("source", "clock_step_back_ms", synth_conf.clock_step_back_ms, 0, 86400000, "0", "Synthetic source, for tests: halfway through its events the source's wall clock steps back by this much, ms; `0` = no step."),
	NSA_STR("source", "dump", source_dump, "", "Write the source's final table here (a table file for natsync-verify); empty = none."),

	/* [source] type = kernel */
	NSA_STR("source", "netns", ksrc_conf.netns, "", "Kernel source: the gateway's network namespace, a name under /run/netns; empty = the agent's own."),
	NSA_POW2("source", "ringbuf_size", ksrc_conf.ringbuf_bytes, 65536, 1073741824, "16777216", "Kernel source: bytes of the BPF ring buffer (56 bytes per event); an overflow is counted and answered with a full dump."),
	NSA_NUM("source", "zone", ksrc_zone, 0, 65536, "65536", "Kernel source: only entries of this conntrack zone; `65536` = every zone."),
	NSA_NUM("source", "mark", ksrc_conf.mark, 0, UINT32_MAX, "0", "Kernel source: only entries whose conntrack mark, masked with `mark_mask`, equals this."),
	NSA_NUM("source", "mark_mask", ksrc_conf.mark_mask, 0, UINT32_MAX, "0", "Kernel source: the mask of `mark`; `0` = every mark."),
	NSA_NUM("source", "ignore_mark", ksrc_conf.ignore_mark, 0, UINT32_MAX, "0", "Kernel source: entries with exactly this conntrack mark are not captured (set it to the standby's `commit_mark`, so that committed entries are not captured again); `0` = none."),
	NSA_BOOL("source", "ends", ksrc_conf.ends, "yes", "Kernel source: `yes` turns the kernel's destroy events (ctnetlink) into delete records; `no` leaves ends to the sessions' timeouts."),
	NSA_NUM("source", "ends_rcvbuf", ksrc_conf.ends_rcvbuf, 4096, 1073741824, "8388608", "Kernel source: bytes of the receive buffer of the ctnetlink socket that takes destroy events; the events of a burst of ends (a flush, a wave of timeouts) that do not fit are lost, counted (`end_overruns`) and found again by a re-dump, which deletes the sessions it no longer finds."),
	NSA_BOOL("source", "defer", ksrc_defer, "no", "Kernel source: hold the first packet of every new NAT'd connection until the store has acknowledged its record, as OpenBSD pfsync's defer (and the DPDK gateway's `[gateway] defer`): then no connection whose first packet left the gateway is lost at failover. The packet goes through NFQUEUE `defer_queue` (bypassed when the agent is not there); see kernel-gateways.md, \"Defer\"."),
	NSA_NUM("source", "defer_max_us", ksrc_defer_max_us, 10, 500000, "2000", "Kernel source, with `defer`: the longest a first packet waits, µs; then it goes without the acknowledgement (counted in `defer_timeouts`)."),
	NSA_NUM("source", "defer_queue", ksrc_defer_queue, 0, 65535, "0", "Kernel source, with `defer`: the NFQUEUE number the first packets go through; one no other program in the gateway's namespace binds."),
	NSA_BOOL("source", "defer_rule", ksrc_conf.defer_rule, "yes", "Kernel source, with `defer`: `yes` adds the nftables tables `ip natsync_defer` and `ip6 natsync_defer` in the gateway's namespace (postrouting, priority 300: the first packet of each entry with source or destination NAT goes to queue `defer_queue`, bypassed when nobody listens) once the agent runs, and deletes them when it stops; `no` leaves the rule to the operator (deploy/natsync-defer.nft)."),
	NSA_NUM("standby", "table_capacity", table_capacity, 1024, 100000000, "2000000", "Sessions the standby table holds. In the log layout a load of the whole store (the cold load, a resync of one server) merges the segments first: past 65 536 sessions that merge is sized for this many (8 388 608 at most, about 100 B a session, its pages faulted in by a thread of its own) and freed when the load ends."),
	NSA_NUM("standby", "table_capacity_v6", table_capacity_v6, 0, 100000000, "0", "IPv6 sessions (NAT66, NAT64) the standby table holds, in an IPv6 table beside the IPv4 one (148 B a session against 84 B for IPv4, made at start); `0` = no IPv6 table: IPv6 sessions from the store are refused and counted as `full_drops`. Set it where the gateways translate IPv6 (the synthetic source's `v6_pct`)."),
	NSA_STR("standby", "dump", table_dump, "", "Where SIGUSR1 and exit dump the standby table; empty = none."),
	NSA_NUM("standby", "topology_check_ms", topology_check_ms, 0, 60000, "1000", "How often the standby asks the store for its topology: it resubscribes and resyncs when the masters changed under a live subscription, and resyncs the masters concerned when slots moved between them, ms; `0` = never."),
	NSA_NUM("standby", "ping_ms", ping_ms, 0, 60000, "1000", "A subscription silent this long gets a `PING`; unanswered for twice as long it is dead (resubscribe, resync); a resync without a reply for three times as long is retried. ms; `0` = never."),
	NSA_NUM("standby", "clock_slack_ms", clock_slack_ms, 0, 3600000, "10000", "A batch sent (by its writer's clock) more than this before the standby subscribed to its channel is refused as a replay (`stale`, see security.md): the largest clock difference between the hosts plus the longest a batch waits in a writer, ms."),

	NSA_NUM("standby", "repair_max_segments", repair_max_segments, 0, 4096, "64", "Log layout: a sequence gap of at most this many batches of one publisher on one channel is mended by reading their segments back (`MGET` by name, verified as batches are) instead of resyncing the master; a longer gap, a segment no longer in the store (compacted, expired, never stored) or one that does not verify resyncs as before. Read on the subscriber thread, blocking, within the store's timeouts; `0` = always resync."),

	/* The kernel conntrack commit (Linux kernel NAT gateways). */
	NSA_ENUM("standby", "commit", commit, nsa_commit_names, "none", "`conntrack`: write every session the standby applies (cold load, resyncs, live batches, deletes) into the kernel's conntrack table over ctnetlink, so that a kernel NAT gateway taking the addresses over translates the flows as the active did (see kernel-gateways.md); `none`: keep the table only."),
	NSA_STR("standby", "commit_netns", commit_netns, "", "Network namespace (a name under /run/netns) whose conntrack table the commit writes; empty = the agent's own."),
	NSA_NUM("standby", "commit_batch_bytes", commit_batch_bytes, 0, 1048576, "65536", "Bytes of ctnetlink messages the commit sends per sendmsg; `0` = one message at a time, each awaited (slow, for comparison)."),
	NSA_NUM("standby", "commit_mark", commit_mark, 0, UINT32_MAX, "0", "Conntrack mark of the entries the commit writes, so that rules and a kernel session source can tell them apart; `0` = no mark set."),
	NSA_NUM("standby", "commit_zone", commit_zone, 0, 65535, "0", "Conntrack zone the commit writes its entries into (the zone the standby gateway's rules give the NAT'd traffic, `ct zone set`); `0` = the default zone. One zone per agent: run the active with `[source] zone` set to the same zone."),
	NSA_ENUM("standby", "priority", priority, nsa_priority_names, "realtime", "The subscriber thread's (it applies the batches, loads and resyncs): a batch that comes while every core is busy waits for a scheduler slice, milliseconds, unless the subscriber may preempt what runs. `realtime`: `SCHED_FIFO` priority 1, as conntrackd's `Scheduler`; `high`: nice -10, as conntrackd's `Nice`; `normal`: the process's. Either raised level holds only while the thread takes less than half a core and the records it applies waited less than 20 ms on the active before their batch was sent: a 100 ms window over either lowers it to the process's priority for 1 s, doubling up to 64 s while it keeps coming back busy (a flat-out load or resync, a standby that cannot keep up, a stream flat out, where a preemption gains nothing), so that it never takes a busy host's CPU for long; it rises again after a window under a quarter of a core whose records waited under 5 ms. On 2 cores beside an active and the store at 400 000 sessions/s, the lag's p99 was 4.0-7.7 ms `normal`, 1.9-3.8 ms `high`, 0.9-12 ms `realtime` (23 of 39 runs within 2 ms, median 1.6 ms), 0.59-1.09 ms in 36 of 36 runs since the writers keep off the source's CPU and the table's tombstones go in slices (docs/performance.md). Raising needs `CAP_SYS_NICE` (root has it; both systemd units keep it) and, for `realtime` in a cgroup with real-time group scheduling, a real-time budget: refused, `realtime` falls back to `high` and `high` to the process's priority, logged once. `subscriber_rtprio`, `subscriber_nice` and `subscriber_lowered` in REPORT and metrics say what it runs at."),

	/* Prometheus metrics and health (nsa_metrics.h). */
	NSA_STR("metrics", "listen", metrics_listen, "", "Where the program serves `/metrics` (Prometheus text format), `/healthz` and `/readyz` over HTTP: `ADDR:PORT` (IPv4) or `[ADDR]:PORT` (IPv6), e.g. `127.0.0.1:9464`; empty = off. A port in use stops the program at start (exit status 1)."),
	NSA_NUM("metrics", "ready_retry_ms", metrics_ready_retry_ms, 0, 3600000, "5000", "An active (or a gateway while active) is not ready (`/readyz` 503, control socket `health` an error) while a writer has been retrying its connections to the store for longer than this, ms; `0` = not ready as soon as one retries."),
};
/* clang-format on */

/* Fields that follow from other keys. */
static void nsa_config_derive(struct nsa_config *c)
{
	c->store.pair = c->gateway_id >> 8;
	c->synth_conf.gateway_id = c->gateway_id;
	c->synth_conf.epoch = c->epoch;
	c->ksrc_conf.gateway_id = c->gateway_id;
	c->ksrc_conf.epoch = c->epoch;
	c->ksrc_conf.zone_filter = c->ksrc_zone <= UINT16_MAX;
	c->ksrc_conf.zone = (uint16_t)c->ksrc_zone;
	c->ksrc_conf.defer_max_us = c->ksrc_defer ? c->ksrc_defer_max_us : 0;
	c->ksrc_conf.defer_queue = (uint16_t)c->ksrc_defer_queue;
}

void nsa_config_set_epoch(struct nsa_config *c, uint32_t epoch)
{
	c->epoch = epoch;
	nsa_config_derive(c);
}

const struct nsa_key_table nsa_config_keys = {
	.keys = nsa_agent_keys,
	.n_keys = sizeof(nsa_agent_keys) / sizeof(nsa_agent_keys[0]),
	.size = sizeof(struct nsa_config),
	.derive = nsa_config_derive,
};
