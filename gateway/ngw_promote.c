/*
 * ngw_promote.c - natsync-gateway's promotion and demotion, and the fence
 * that keeps an old active out of the store (agent/fence/nsa_fence.h).
 *
 * A promotion takes its epoch from the store, closes older writers'
 * connections on every master, lets the subscriber apply what the old
 * active published before that (the barrier) and read every master again
 * (what it wrote without publishing it), and only then hands the table to
 * the fast path. A store that does not answer within
 * promote_wait_ms does not hold it up: the gateway forwards on a
 * provisional epoch (nsa_fence.h) and makes it known to the store, then
 * fences, once the store answers. An active that finds a newer epoch
 * demotes itself. The table has one writer at any time: a promotion the
 * forwarding lcore did not confirm leaves the gateway stuck until it does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ngw_gw.h"
#include "ngw_readback.h"
#include "nsa_active.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsdp_nat.h"
#include "nsdp_table.h"
#include "nsdp_time.h"

/* ---- promotion and demotion ------------------------------------------- */

/* The subscriber takes the table back (after a failed promotion or a
 * demotion). */
static void gw_standby_restart(struct gw *g, const char *why)
{
	int rc = nsa_standby_start(g->sb);

	if (rc != 0)
		NSA_ERR("%s: the subscriber does not restart: %s; the table is "
			"not kept up to date",
			why, strerror(-rc));
}

/* A fence raised (rc 0) or not everywhere (rc < 0, why in err), killed
 * writer connections closed, at t: noted, and said. */
static void gw_fence_done(struct gw *g, int64_t rc, unsigned int killed,
			  const char *err, double t)
{
	g->fence_raised = rc == 0;
	g->next_fence_raise = t + GW_RETRY_MS / 1000.0;
	if (rc == 0)
		NSA_INFO("fence: %u writer connection(s) of older epochs "
			 "closed on every master",
			 killed);
	else
		NSA_ERR("fence: not raised everywhere (%s); %u writer "
			"connection(s) closed; trying again every %d ms: "
			"until then an old active may still write there",
			err, killed, GW_RETRY_MS);
}

/* Close the writers of older epochs on every master (nsa_fence.h), now:
 * a promotion's. A master that cannot be reached keeps its old writers
 * until a later try (gw_store_step) reaches it. */
static void gw_fence(struct gw *g)
{
	unsigned int killed = 0;
	char err[512];
	int rc = nsa_fence_raise(&g->store_loop, &killed, err, sizeof(err));

	gw_fence_done(g, rc, killed, err, nsdp_now_s());
}

/* When stuck: has the lcore confirmed that it is a standby since? Then the
 * fast path has given the table back and the subscriber takes it. */
void gw_unstick(struct gw *g)
{
	if (!g->stuck || nsdp_nat_deactivate(g->nat, 0) != 0)
		return;
	g->stuck = 0;
	NSA_WARN("the forwarding lcore confirmed that it is a standby: the "
		 "subscriber takes the table back and resyncs it");
	gw_standby_restart(g, "unstuck");
}

/* Whether the gateway is stuck (the lcore has not confirmed its last mode
 * change: no mode change until it does), with the reply to op saying so. */
static int gw_stuck(struct gw *g, const char *op, char *reply, size_t len)
{
	gw_unstick(g);
	if (!g->stuck)
		return 0;
	snprintf(reply, len,
		 "error %s: stuck, the forwarding lcore has not confirmed the "
		 "last mode change\n",
		 op);
	return 1;
}

/* A new epoch above floor from the store (asked through conf), and the
 * fence raised for it; a negative errno with err when the store gives
 * none. */
static int64_t gw_take_epoch(struct gw *g, const struct nsa_store_conf *conf,
			     uint32_t floor, char *err, size_t errlen)
{
	int64_t e = nsa_epoch_take(conf, floor, err, errlen);

	if (e >= 0)
		gw_fence(g);
	return e;
}

/* No store epoch within promote_wait_ms (why): the subscriber stopped
 * once it answered the barrier asked before the ask (ticket, at t0 ns),
 * waited for at most what is left of promote_wait_ms since t0, so that
 * the two waits overlap; and a provisional epoch above every epoch the
 * table holds and floor. The epoch, or -EAGAIN with the reply when this
 * gateway may make none (the subscriber then runs). */
static int64_t gw_provisional_epoch(struct gw *g, uint32_t floor,
				    const char *why, uint64_t ticket,
				    uint64_t t0, char *reply, size_t len)
{
	uint64_t spent_ms = (nsdp_mono_ns() - t0) / 1000000u;
	unsigned int wait_ms = g->conf.gw.promote_wait_ms;
	uint32_t table_max = 0, e;

	if (nsa_epoch_provisional(0, g->conf.agent.gateway_id) == 0) {
		NSA_ERR("promote: refused: no epoch from the store (%s), and "
			"gateway_id %u makes no provisional one (its low byte "
			"is 0); staying a standby",
			why, g->conf.agent.gateway_id);
		snprintf(reply, len,
			 "error promote: no epoch from the store: %s\n", why);
		return -EAGAIN;
	}
	if (nsa_standby_barrier_wait(
		    g->sb, ticket,
		    spent_ms >= wait_ms ? 0 : (int)(wait_ms - spent_ms)) != 0)
		NSA_WARN("promote: the subscriber did not confirm within %u "
			 "ms that it applied every batch published before the "
			 "promotion",
			 wait_ms);
	nsa_standby_stop(g->sb);
	table_max = nsa_standby_epoch_known(g->sb);
	e = nsa_epoch_provisional(table_max > floor ? table_max : floor,
				  g->conf.agent.gateway_id);
	if (e == 0) {
		gw_standby_restart(g, "promote");
		snprintf(reply, len, "error promote: epochs used up\n");
		return -ERANGE;
	}
	NSA_WARN("promote: no epoch from the store within %u ms (%s): "
		 "forwarding at once on provisional epoch %u (above %u, the "
		 "highest epoch the table and the subscriber know); it is "
		 "made known to the store, and the fence raised, once the "
		 "store answers",
		 g->conf.gw.promote_wait_ms, why, e, table_max);
	g->provisional = e;
	g->next_register = 0;
	return e;
}

/* The promotion's epoch, taken with the subscriber still running, and the
 * subscriber stopped once it applied what the old active published before
 * the fence. The epoch (provisional when the store did not answer within
 * promote_wait_ms), or -EAGAIN with the reply when there is none (the
 * subscriber then runs). */
static int64_t gw_promote_epoch(struct gw *g, char *reply, size_t len)
{
	uint64_t t0 = nsdp_mono_ns(), ticket;
	uint32_t table_max = 0, floor;
	char err[512];
	int64_t e;

	/* The epoch and the fence first, the subscriber still running: so
	 * that it applies every batch the old active published before the
	 * fence (the barrier), and the table misses none of them. */
	floor = g->conf.agent.epoch > 0 ? g->conf.agent.epoch - 1 : 0;
	/* An ask that gives up may still run later: its token lets the
	 * provisional epoch's registration undo it. */
	g->store_quick.epoch_token = nsa_epoch_token_new();
	/* A barrier asked now is answered while the epoch is asked for:
	 * what a provisional epoch waits for (a store epoch waits for one
	 * after its fence, below). */
	ticket = nsa_standby_barrier_ask(g->sb);
	e = gw_take_epoch(g, &g->store_quick, floor, err, sizeof(err));
	if (e < 0)
		return gw_provisional_epoch(g, floor, err, ticket, t0, reply,
					    len);
	if (nsa_standby_barrier(g->sb, GW_BARRIER_MS) != 0)
		NSA_WARN("promote: the subscriber did not confirm within %d ms "
			 "that it applied what the old active published "
			 "before the fence; the table may miss its last "
			 "sessions",
			 GW_BARRIER_MS);
	/* The fence may have closed the old active's connection between a
	 * batch's writes and its SPUBLISH: those writes are in the store,
	 * never announced. Read every master again (the store answered the
	 * epoch: it is up), bounded so that a slow store does not hold the
	 * promotion long. */
	if (nsa_standby_resync_all(g->sb, GW_PROMOTE_RESYNC_MS) != 0)
		NSA_WARN("promote: the resync of every master after the fence "
			 "did not end within %d ms; the table may miss what "
			 "the old active wrote without publishing it",
			 GW_PROMOTE_RESYNC_MS);
	/* From here the fast path is the table's only writer. */
	nsa_standby_stop(g->sb);
	table_max = nsa_standby_epoch_known(g->sb);
	if (table_max < e)
		return e;
	/* The counter is behind the table (a store that lost it): above
	 * every epoch the table and the subscriber know, and fence
	 * again. */
	e = gw_take_epoch(g, &g->store_loop, table_max, err, sizeof(err));
	if (e < 0) {
		NSA_ERR("promote: refused: no epoch above the table's %u from "
			"the store (%s); staying a standby",
			table_max, err);
		gw_standby_restart(g, "promote");
		snprintf(reply, len,
			 "error promote: no epoch from the store: %s\n", err);
		return -EAGAIN;
	}
	return e;
}

/* The fast path takes the table over with epoch: 0, or a negative errno
 * with the reply (-EINPROGRESS: the gateway is stuck). */
static int gw_take_over(struct gw *g, uint32_t epoch, char *reply, size_t len)
{
	int rc = nsdp_nat_activate(g->nat, epoch, GW_MODE_TIMEOUT_MS);

	if (rc == -EINPROGRESS) {
		/* The lcore may yet take the promotion and write the table:
		 * restarting the subscriber would make two writers. */
		g->stuck = 1;
		NSA_ERR("promote: the forwarding lcore neither took over nor "
			"confirmed that it is a standby within %d ms; the "
			"gateway is stuck: the subscriber stays stopped (the "
			"table is not kept up to date) until the lcore "
			"confirms",
			2 * GW_MODE_TIMEOUT_MS);
		snprintf(reply, len,
			 "error promote: stuck, the forwarding lcore did not "
			 "confirm\n");
		return rc;
	}
	if (rc < 0) {
		NSA_ERR("promote: the fast path did not take over: %s",
			strerror(-rc));
		gw_standby_restart(g, "promote");
		snprintf(reply, len, "error promote: %s\n", strerror(-rc));
		return rc;
	}
	return 0;
}

/* [gateway] agent = threads: the replication writers of the new epoch. */
static void gw_writers_start(struct gw *g, uint32_t epoch)
{
	struct nsa_config c = g->conf.agent;

	c.epoch = epoch;
	g->active = nsa_active_create(&c, &g->lane, 1);
	if (g->active)
		nsa_active_polling_lcores(g->active, &g->fwd_lcore, 1);
	if (!g->active || nsa_active_start(g->active) != 0)
		NSA_ERR("promote: cannot start the replication writers; "
			"the gateway forwards but does not replicate");
}

int gw_promote(struct gw *g, char *reply, size_t len)
{
	struct nsdp_table_stats ts;
	uint32_t epoch;
	int64_t e;
	int rc;

	g->promote_tried = 1;
	if (gw_stuck(g, "promote", reply, len))
		return -EINPROGRESS;
	if (nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE) {
		snprintf(reply, len, "ok already active epoch=%u\n",
			 nsdp_nat_epoch(g->nat));
		return 0;
	}
	e = gw_promote_epoch(g, reply, len);
	if (e < 0)
		return (int)e;
	epoch = (uint32_t)e;
	rc = gw_take_over(g, epoch, reply, len);
	if (rc < 0) {
		g->provisional = 0;
		return rc;
	}
	if (g->conf.gw.agent == NGW_AGENT_THREADS)
		gw_writers_start(g, epoch);
	g->unfit_epoch = 0;
	g->promotions++;
	g->mode_gen++;
	g->next_fence_check = 0;
	g->fence_read_failing = 0;
	nsdp_table_stats(g->table, &ts);
	NSA_INFO("promoted: active with %sepoch %u, %" PRIu64
		 " replicated sessions, %" PRIu64 " ports in use",
		 g->provisional ? "provisional " : "", epoch, ts.live,
		 nsdp_nat_ports_in_use(g->nat));
	snprintf(reply, len, "ok active epoch=%u%s\n", epoch,
		 g->provisional ? " provisional" : "");
	return 0;
}

int gw_demote(struct gw *g, char *reply, size_t len)
{
	int rc;

	if (gw_stuck(g, "demote", reply, len))
		return -EINPROGRESS;
	if (nsdp_nat_mode(g->nat) == NSDP_NAT_STANDBY) {
		snprintf(reply, len, "ok already standby\n");
		return 0;
	}
	gw_readback_stop(g);
	rc = nsdp_nat_deactivate(g->nat, GW_MODE_TIMEOUT_MS);
	if (rc < 0) {
		snprintf(reply, len, "error demote: %s\n", strerror(-rc));
		return rc;
	}
	if (g->active) {
		if (nsa_active_drain(g->active, GW_DRAIN_MS) != 0)
			NSA_WARN("demote: not every record reached the store "
				 "in %d ms; the resync will read what did",
				 GW_DRAIN_MS);
		nsa_active_stop(g->active);
		nsa_active_free(g->active);
		g->active = NULL;
	}
	g->provisional = 0;
	g->mode_gen++;
	/* The subscriber takes the table back and resyncs it. */
	gw_standby_restart(g, "demote");
	g->demotions++;
	NSA_INFO("demoted: standby, resyncing from the store");
	snprintf(reply, len, "ok standby\n");
	return 0;
}

const char *gw_mode_name(const struct gw *g)
{
	if (g->stuck)
		return "stuck";
	return nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE ? "active" : "standby";
}

/* A newer epoch than ours took over: demote. */
static void gw_fenced(struct gw *g, uint64_t epoch, const char *how)
{
	char reply[GW_REPLY_MAX];

	NSA_ERR("fenced: %s epoch %" PRIu64 ", above ours (%u): another "
		"gateway was promoted; demoting to standby",
		how, epoch, nsdp_nat_epoch(g->nat));
	if (gw_demote(g, reply, sizeof(reply)) == 0) {
		g->fenced++;
		g->unfit_epoch = epoch;
		NSA_WARN("fenced: unfit for MASTER (health says not ready) "
			 "until told demote: keepalived may still hold this "
			 "gateway MASTER while epoch %" PRIu64 " forwards",
			 epoch);
	}
}

/* The answer to a fence read: demote when a newer epoch took over. */
static void gw_read_answered(struct gw *g, const struct ngw_call *k, double t)
{
	if (k->rc < 0) {
		/* Not again before a retry period. */
		g->next_fence_check = t + GW_RETRY_MS / 1000.0;
		if (!g->fence_read_failing)
			NSA_WARN("fence: cannot read the store's epoch (%s); "
				 "a newer active goes unnoticed until it can",
				 k->err);
		g->fence_read_failing = 1;
		return;
	}
	g->fence_read_failing = 0;
	if (k->value > nsdp_nat_epoch(g->nat))
		gw_fenced(g, k->value, "the store holds");
}

/* The answer to a fence raised again (gw_fence's, on the thread). */
static void gw_raise_answered(struct gw *g, const struct ngw_call *k, double t)
{
	gw_fence_done(g, k->rc, k->killed, k->err, t);
}

/* The answer to a provisional epoch's registration: then fence, or
 * demote when a newer epoch is there. */
static void gw_register_answered(struct gw *g, const struct ngw_call *k,
				 double t)
{
	uint32_t ours = g->provisional;

	if (ours == 0 || k->epoch != ours)
		return;
	if (k->rc == -EPROTO && !g->register_refused_said) {
		/* An answer, not a timeout: e.g. an ACL without the taker
		 * key (deploy/redis-users.acl.example). Tried again. */
		NSA_ERR("provisional epoch %u: the store refused to take it "
			"(%s); trying again every %d ms",
			ours, k->err, GW_RETRY_MS);
		g->register_refused_said = 1;
	}
	if (k->rc < 0) {
		NSA_DEBUG("provisional epoch %u: the store does not answer "
			  "yet (%s)",
			  ours, k->err);
		return;
	}
	g->provisional = 0;
	if (k->rc > ours) {
		gw_fenced(g, (uint64_t)k->rc, "the store holds");
		return;
	}
	NSA_INFO("provisional epoch %u made known to the store; raising the "
		 "fence",
		 ours);
	/* The next step asks for the fence at once. */
	g->fence_raised = 0;
	g->next_fence_raise = 0;
	gw_readback_due(g, ours, t);
}

/* While active: has another gateway been promoted since? The writers
 * learn it when the fence closes their connections; the periodic read
 * learns it whatever the writers do (agent = external). The store calls
 * (that read, a fence raised again, a provisional epoch made known) run
 * on the store-call thread, one at a time: this takes the last one's
 * answer and asks for the next one due, and never waits. */
void gw_store_step(struct gw *g, double t)
{
	uint32_t ours = nsdp_nat_epoch(g->nat);
	double *next, period;
	struct ngw_call k;
	uint64_t epoch;

	if (ngw_caller_take(&g->caller, &k) && k.gen == g->mode_gen &&
	    !g->stuck && nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE) {
		if (k.op == NGW_CALL_READ)
			gw_read_answered(g, &k, t);
		else if (k.op == NGW_CALL_RAISE)
			gw_raise_answered(g, &k, t);
		else
			gw_register_answered(g, &k, t);
	}
	if (g->stuck || nsdp_nat_mode(g->nat) != NSDP_NAT_ACTIVE)
		return;
	if (g->active && (epoch = nsa_active_fence(g->active)) > ours) {
		gw_fenced(g, epoch, "the writers read");
		return;
	}
	memset(&k, 0, sizeof(k));
	k.gen = g->mode_gen;
	k.conf = g->store_loop;
	if (g->provisional && t >= g->next_register) {
		/* With the first ask's token: if that ask ran late, the
		 * counter above ours is its epoch, which nobody uses. */
		k.op = NGW_CALL_REGISTER;
		k.conf.epoch_token = g->store_quick.epoch_token;
		k.epoch = g->provisional;
		next = &g->next_register;
		period = GW_RETRY_MS / 1000.0;
	} else if (!g->provisional && !g->fence_raised &&
		   t >= g->next_fence_raise) {
		/* A provisional epoch is fenced for once the store knows
		 * it. */
		k.op = NGW_CALL_RAISE;
		next = &g->next_fence_raise;
		period = GW_RETRY_MS / 1000.0;
	} else if (t >= g->next_fence_check) {
		k.op = NGW_CALL_READ;
		next = &g->next_fence_check;
		period = g->conf.gw.fence_check_ms / 1000.0;
	} else {
		return;
	}
	/* Due again a period on, once asked (not while a call runs). */
	if (ngw_caller_ask(&g->caller, &k) == 0)
		*next = t + period;
}
