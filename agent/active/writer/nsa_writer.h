/*
 * nsa_writer.h - the active role's writer: the state its files share (not
 * a public header; only active/ includes it). Each file declares its own
 * functions in a header of its name, and calls only the files below it:
 *
 *   nsa_active.c     the writer loop (active/)
 *   nsa_wlink.c      links to the masters: connect, send, resend; health
 *   nsa_wreply.c     replies read and charged, or lost with their link
 *   nsa_wreadback.c  refused keys read back; the entry for every record
 *   nsa_wpipe.c      commands and batches into the pipeline, error replies
 *   nsa_wbatch.c     the batch pool, segments in flight, a batch's end
 *   nsa_wsettle.c    how far each lane's records are acknowledged (defer)
 *
 * Beside the loop, nsa_active_health.c and nsa_compactor.c (active/) read
 * the writers' state from other threads. The role's public headers
 * (nsa_active.h, nsa_active_health.h) are above this one: it includes
 * only the types they share (nsa_active_stats.h).
 */
#ifndef NSA_WRITER_H
#define NSA_WRITER_H

#include <pthread.h>
#include <stdint.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_active_stats.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsa_conn.h"
#include "nsa_replay.h"
#include "nsdp_lane.h"
#include "nsdp_stat.h"

#define NSA_BURST 256
/* A batch at [active] batch_size grows up to this many times that
 * (NS_BATCH_MAX_RECORDS at most) when the writer is behind: a lane a
 * quarter full (nsa_batch_push). */
#define NSA_BATCH_GROW 4
#define NSA_MAX_CONNS (NSA_MAX_NODES + 8)
#define NSA_MAX_ASK 32
#define NSA_MAX_LOGGED_KINDS 16
#define NSA_ERR_BACKOFF_MIN_MS 10
/* Log layout: batches whose segment the store refused for good, kept for
 * their rewrite, and how long one waits for its master to take a segment
 * again before its standbys are told to read the master instead. */
#define NSA_MAX_LOST 32
#define NSA_LOST_HOLD_NS 2000000000ull
#define NSA_ERR_BACKOFF_MAX_MS 1000
/* The settle ledger (nsa_wsettle.c): bursts in flight at most, and how
 * long one waits for its acknowledgements before it is given up. */
#define NSA_SETTLE_LEDGER 4096u
#define NSA_SETTLE_ABANDON_NS 1000000000ull
/* An idle writer whose lane's producer defers polls it this often. */
#define NSA_SETTLE_POLL_NS 20000ull

#define NSA_REC_DROPPED 0x01
/* Replayed: acknowledged once already, so not counted again. */
#define NSA_REC_REPLAY 0x02
/* What the store holds after a refusal: published, no command. */
#define NSA_REC_STORE 0x04
/* Its last command was answered ASK: the key is not on the slot's
 * migrating master, so its resend goes to the ASK target (with ASKING).
 * Only such records: a key still on the migrating master must be written
 * there, or the target would hold a second copy that MIGRATE refuses
 * (BUSYKEY) and reads would miss. */
#define NSA_REC_ASKED 0x08
/* The second line of an IPv6 record (the line before is its head): not a
 * record of its own, every walk over a batch's lines skips it. */
#define NSA_REC_LINE2 NSA_RESEND_LINE2

/* What a reply due on a connection answers (nsa_exp.kind). */
enum nsa_exp_kind {
	NSA_EXP_ASKING,
	NSA_EXP_CMD,
	NSA_EXP_NOTIFY,
	NSA_EXP_READBACK, /* no batch: pos = the nsa_readback's index */
	NSA_EXP_SEGMENT /* the log layout's SET of the whole batch */
};

/* The records routed to one master between two notifications. */
struct nsa_batch {
	struct nsa_batch *next_free;
	uint64_t wseq; /* writer-wide opening order, merges resends */
	uint64_t open_ns;
	unsigned int count; /* records */
	/* Reached batch_size while the writer was behind: closes at
	 * nsa_batch_cap() instead. */
	int grows;
	/* Lines in sess, rflags and ticket: an IPv6 record takes two (its
	 * second line flagged NSA_REC_LINE2), so a record's entry is at its
	 * head's line. */
	unsigned int lines;
	/* The highest epoch among the records: a gateway promoted to a new
	 * epoch is not fenced by standbys because this agent was started
	 * with an older [agent] epoch (natsync-agent as a secondary). */
	uint32_t epoch;
	unsigned int pending; /* replies still due, over all connections */
	int closed;
	int retry;
	int store; /* NSA_REC_STORE records only (NS_BATCH_F_STORE) */
	/* No records: NS_BATCH_F_RESYNC on the channel of resync_slot */
	int resync;
	uint16_t resync_slot;
	/* Log layout: the channel slot it was published on (at its close);
	 * its segment refused for good (kept for a rewrite by finalize);
	 * its master took a segment since (the rewrite is due); a rewrite
	 * itself (NS_BATCH_F_REWRITE), never rewritten again. */
	uint16_t channel_slot;
	int lost, taken, rewrite;
	uint64_t lost_ns;
	struct ns_session *sess; /* [2 * nsa_batch_cap()] lines, to resend */
	uint8_t *rflags; /* [2 * nsa_batch_cap()] NSA_REC_* per line */
	uint64_t *ticket; /* [2 * nsa_batch_cap()] settle ledger ids, 0: none */
	uint8_t *body; /* ns_batch header + records in wire form */
	size_t body_len;
	/* Log layout: while its segment is sent and not yet answered, the
	 * batch is on its writer's list of such segments, oldest first
	 * (nsa_seg_track, for the compactor). */
	struct nsa_batch *seg_prev, *seg_next;
	uint64_t seg_sent_ns;
	int seg_listed;
};

/* A writer's connection to one master (or to an ASK target). */
struct nsa_link {
	struct nsa_conn conn; /* expectations: ptr a batch, pos a record */
	char channel[NS_CHANNEL_MAX];
	size_t channel_len;
	uint16_t channel_slot;
	struct nsa_batch *open;
	unsigned int inflight_batches;
	/* When the oldest reply due began to be awaited, or the last read. */
	uint64_t wait_since_ns;
};

/* A record the store refused for good, whose key is read back. */
struct nsa_readback {
	struct ns_session s; /* the refused record */
	struct ns_session_v6 v6; /* its second line (IPv6), right after s */
	uint8_t state; /* NSA_RB_* */
	/* A record of the same flow went out after the GET: it tells the
	 * standbys itself, or is refused and read back in turn. */
	uint8_t superseded;
};

enum { NSA_RB_QUEUED, NSA_RB_SENT, NSA_RB_DONE };

/* One burst drained from a lane, in the settle ledger (nsa_wsettle.c). */
struct nsa_settle_entry {
	uint64_t id; /* its ticket; 0 once it left */
	uint64_t end; /* the lane's drained count after the burst */
	uint64_t born_ns;
	uint32_t pending; /* records in batches, not yet acknowledged */
	uint8_t lane; /* index in the writer's lanes */
	uint8_t open; /* its records are still being pushed */
};

struct nsa_ask {
	uint16_t slot;
	unsigned int conn;
	struct nsa_addr addr;
};

struct nsa_writer {
	struct nsa_active *a;
	unsigned int idx;
	pthread_t thread;
	int started;
	uint32_t publisher_id;

	struct nsdp_lane *lanes[NSDP_MAX_LANES];
	unsigned int n_lanes, next_lane;

	struct nsa_topology topo;
	struct nsa_topology topo_new;
	struct nsa_link *conns[NSA_MAX_CONNS]; /* [0, n_nodes): the masters */
	unsigned int n_conns;
	int connected_once;
	char reason[256]; /* last reason the store was unreachable */

	uint64_t seq[NS_SLOTS]; /* per channel slot */
	uint64_t wseq;
	struct nsa_batch *free_batches;
	struct nsa_batch **held; /* finalized but to be resent */
	size_t n_held, cap_held;

	/* The store's epoch counter as last read (nsa_fence.h), written by
	 * this writer, read by others; records below it are fenced. */
	uint32_t fence;
	/* The highest epoch of the records this writer appended (or its
	 * configured one): whether its read-back corrections are stale. */
	uint32_t epoch_seen;
	int retry_mode;
	int need_refresh;
	/* TRYAGAIN, CLUSTERDOWN, LOADING, BUSY, NOREPLICAS, MASTERDOWN or
	 * READONLY since the last resend */
	int err_seen;
	unsigned int err_backoff_ms;

	/* The settle ledger (nsa_wsettle.c): ids settle_head..tail-1 live;
	 * ticket is the burst being pushed (0: none). */
	struct nsa_settle_entry *settle;
	uint64_t settle_head, settle_tail, ticket;
	/* Per lane: drained count when a held packet's record last made the
	 * open batches go (nsa_settle_urgent). */
	uint64_t settle_flushed[NSDP_MAX_LANES];

	struct nsa_resend resend;
	struct nsa_replay replay; /* frozen while in retry mode */
	int master_lost; /* replay the window with the next resend */

	struct nsa_ask ask[NSA_MAX_ASK]; /* in force: slot -> conn */
	unsigned int n_ask;
	struct nsa_ask ask_pending[NSA_MAX_ASK]; /* learnt, not yet resolved */
	unsigned int n_ask_pending;

	char logged[NSA_MAX_LOGGED_KINDS][32];
	unsigned int n_logged;

	struct nsa_readback *rb; /* emptied when none is left undone */
	size_t n_rb, cap_rb, rb_undone, rb_sent;
	uint8_t rb_slots[NS_SLOTS / 8]; /* slots of the keys read back */
	int rb_unreadable_logged;
	/* Log layout: channel slots whose master refused a segment for good
	 * and whose standbys are yet to be told to read it again
	 * (NS_BATCH_F_RESYNC). */
	uint64_t log_resync[NS_SLOTS / 64];
	/* Log layout: batches whose segment the store refused for good,
	 * oldest first, each written again under a new seq once its master
	 * takes a segment, or given up for a RESYNC after NSA_LOST_HOLD_NS
	 * (nsa_log_resync_send). */
	struct nsa_batch *lost[NSA_MAX_LOST];
	unsigned int n_lost;

	/* Health (nsa_active_writer_health), written by this writer, read
	 * by any thread with relaxed atomics: since when it has been
	 * retrying (monotonic ns, 0 = connected and not retrying), and its
	 * masters as "host:port" words, rewritten while health_seq is odd. */
	uint64_t retry_since_ns;
	uint32_t health_seq;
	uint32_t n_masters_pub;
	uint64_t masters_pub[NSA_MAX_NODES][NSA_WRITER_MASTER_LEN / 8];

	/* Log layout: the segments sent and not yet answered, in signing
	 * order, and the oldest one's CLOCK_MONOTONIC stamp (UINT64_MAX:
	 * none), written by this writer with seq_cst atomics, read by the
	 * compactor: every segment of ours signed before it has been
	 * answered (compact_settled, nsa_compactor.c). */
	struct nsa_batch *seg_head, *seg_tail;
	uint64_t seg_low_ns;

	uint64_t now_ns;
	/* When records were last taken from a lane (monotonic ns): while
	 * the stream is live, an idle wait is cut to flush_us (flush_due). */
	uint64_t took_ns;
	int in_burst; /* set while drained records are not yet counted */
	struct nsa_active_stats st; /* written by this writer only */
	struct ns_session burst[NSA_BURST];
};

struct nsa_active {
	struct nsa_config conf;
	uint64_t replay_ns;
	struct nsdp_lane *lanes[NSDP_MAX_LANES];
	unsigned int n_lanes;
	unsigned int n_writers;
	int stop;
	int running;
	/* [store] layout = log: the compactor thread and its counters
	 * (atomic: read by nsa_active_stats). */
	pthread_t compactor;
	int compactor_started;
	uint64_t compactions, compact_bytes;
	uint64_t compact_peak, compact_marks_refused;
	uint64_t compact_lease_skipped;
	/* [active] writer_cpus resolved at start (writer_pinned 0: any CPU),
	 * auto from the CPUs of the lcores that poll (nsa_active_polling_lcores). */
	cpu_set_t writer_set, polling;
	int writer_pinned;
	struct nsa_writer *w[];
};

#define W_STAT_ADD(w, f, n) NSDP_STAT_ADD((w)->st.f, n)
#define W_STAT_SUB(w, f, n) NSDP_STAT_SUB((w)->st.f, n)

static inline int nsa_writer_stopping(const struct nsa_writer *w)
{
	return __atomic_load_n(&w->a->stop, __ATOMIC_RELAXED);
}

#endif
