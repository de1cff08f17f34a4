/*
 * ngw_gw.h - natsync-gateway's state, shared by its main loop and control
 * socket (natsync_gateway.c) and its promotion, demotion and fence
 * (ngw_promote.c). Private to the program.
 */
#ifndef NGW_GW_H
#define NGW_GW_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "ngw_config.h"
#include "ngw_fwd.h"
#include "ngw_storecall.h"
#include "nsa_fence.h"

/* How long a gateway configured active waits for its cold load. */
#define GW_START_WAIT_MS 3000
#define GW_MODE_TIMEOUT_MS 2000
#define GW_DRAIN_MS 2000
#define GW_REPLY_MAX 4096
/* A gateway configured active that cannot promote (no epoch from the
 * store) tries again this often. So does a fence not raised everywhere. */
#define GW_RETRY_MS 1000
/* Each connect and reply of the active's own store calls (the fence,
 * its watch, a provisional epoch made known: on their own thread,
 * ngw_storecall.h) and of the start's cold-load check, ms. */
#define GW_STORE_LOOP_MS 200
/* How long a promotion waits for the subscriber to apply what the old
 * active published before the fence. */
#define GW_BARRIER_MS 1000
/* How long a promotion waits for the subscriber to read every master
 * again after the fence (about a cold load: 0.2 s for 200 000 sessions). */
#define GW_PROMOTE_RESYNC_MS 1000

struct gw {
	struct ngw_config conf;
	uint16_t port_in, port_out;
	struct rte_mempool *pool;
	struct nsdp_lane *lane;
	/* The fast path's session table: ours, lent to the subscriber while
	 * standby, written by the fast path alone while active. */
	struct nsdp_table *table;
	struct nsa_standby *sb;
	struct nsa_active *active; /* agent = threads, while active */
	struct nsdp_nat *nat;
	unsigned int fwd_lcore;
	int listen_fd;
	struct ngw_fwd fwd; /* the forwarding lcore's */
	uint64_t promotions, demotions;
	/* Demotions because the store's epoch passed ours: another gateway
	 * was promoted. */
	uint64_t fenced;
	/* Demoted by the fence and not told demote since: keepalived may
	 * still hold this gateway MASTER while another forwards. Health says
	 * not ready (unfit for MASTER), so that the track script's weight
	 * lets the other win the election once VRRP sees both. The epoch
	 * that fenced us, else 0. */
	uint64_t unfit_epoch;
	/* The active's own store calls (gw_store_step), and the count of
	 * promotions and demotions, which an answer must match. */
	struct ngw_caller caller;
	uint64_t mode_gen;
	double next_fence_check, next_fence_raise;
	int fence_raised; /* every master closed the old writers */
	int fence_read_failing;
	/* The store as a promotion's first try and the control loop ask it:
	 * each connect and reply bounded by promote_wait_ms (the first try)
	 * or GW_STORE_LOOP_MS (the loop's own reads and writes). */
	struct nsa_store_conf store_quick, store_loop;
	/* Active on a provisional epoch (nsa_fence.h) not yet made known to
	 * the store: the epoch, else 0; the next try to make it known. */
	uint32_t provisional;
	double next_register;
	int register_refused_said; /* the store refused it: said once */
	/* The read-back of the store after a provisional epoch was made
	 * known (ngw_readback.h): its epoch and when, while due; the thread
	 * while it runs; how many ended. */
	uint32_t readback_epoch;
	double readback_from;
	struct gw_readback *readback;
	uint64_t readbacks;
	/* Promote at the next retry: [agent] role = active, or a promote
	 * that failed (until a demote); when. */
	int want_active;
	double next_promote;
	/* A promotion was tried (the next goes without waiting for the
	 * cold load); [agent] role = active and the cold load still running
	 * while the store answers: said once. */
	int promote_tried, load_wait_said;
	/* A promotion failed and the lcore has not confirmed that it is a
	 * standby: it may still write the table, so the subscriber must not
	 * (gw_unstick). */
	int stuck;
	struct nsa_metrics *metrics; /* [metrics] listen; NULL = off */
};

/* When stuck: take the table back for the subscriber once the lcore has
 * confirmed that it is a standby. */
void gw_unstick(struct gw *g);
/* promote/demote: the reply for the control socket in reply; 0 or a
 * negative errno (-EAGAIN: no epoch from the store, try again). */
int gw_promote(struct gw *g, char *reply, size_t len);
int gw_demote(struct gw *g, char *reply, size_t len);
/* Whether a promotion that returned rc is tried again (every GW_RETRY_MS,
 * until it forwards or a demote comes): every failure but epochs used up,
 * so that a gateway that fenced the old active always ends up forwarding. */
static inline int gw_promote_retried(int rc)
{
	return rc < 0 && rc != -ERANGE;
}
const char *gw_mode_name(const struct gw *g);
/* While active, at every loop, never waiting on the store: demote when
 * a newer epoch took over (the writers' or the store's, read every
 * fence_check_ms), retry a fence not raised everywhere, and on a
 * provisional epoch make it known to the store every GW_RETRY_MS, then
 * fence (demote when a newer epoch is there). */
void gw_store_step(struct gw *g, double t);

/* ngw_metrics.c: [metrics] listen served from the main loop (0, or -1
 * said), and the health /readyz and the control socket's "health" tell:
 * 1 ready, or 0 with the reason in why. */
struct nsa_metrics;
int ngw_metrics_start(struct gw *g);
int ngw_health(struct gw *g, char *why, size_t whylen);
/* ngw_metrics.c: the control socket's "stats" reply, "ok" then one
 * name=value a line (the fast path's, the table's, the writers' and the
 * gateway's counters, defer's hold time). */
int gw_stats(struct gw *g, char *reply, size_t len);

#endif
