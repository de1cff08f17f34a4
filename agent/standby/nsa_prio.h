/*
 * nsa_prio.h - the subscriber thread's priority ([standby] priority) and
 * the governor that keeps it from taking a busy host's CPU.
 *
 * A batch that reaches the standby while every core is taken waits for a
 * scheduler slice (HZ 250: up to 4 ms) unless the subscriber may preempt
 * what runs: `realtime` runs it under SCHED_FIFO (priority
 * NSA_STANDBY_RTPRIO), `high` at nice NSA_STANDBY_NICE_HIGH. Either is
 * only safe while the subscriber needs little CPU, and only useful while
 * the stream is not flat out: a standby sharing its cores with an active
 * would take that active's CPU, and a record that waited tens of ms on
 * the active gains nothing from a preemption. So the thread measures,
 * over windows of NSA_PRIO_WINDOW_NS, its own CPU time and how long the
 * records it applied waited on the active before their batch was sent
 * (both times the active's clock, so the hosts' clocks need not agree).
 * A window above half a core, or whose records waited
 * NSA_PRIO_BEHIND_US on average, lowers it to the process's priority for
 * a hold that doubles while it keeps coming back busy
 * (NSA_PRIO_HOLD_MIN_NS to NSA_PRIO_HOLD_MAX_NS); it is raised again
 * after a window under a quarter of a core whose records waited under
 * NSA_PRIO_CALM_US, once the hold is over. Loads and resyncs that run
 * flat out are thus lowered within one window.
 *
 * Raising needs CAP_SYS_NICE (and, for realtime under a cgroup with
 * RT_GROUP_SCHED, an RT budget): refused, realtime falls back to high,
 * high to the process's priority, logged once.
 */
#ifndef NSA_PRIO_H
#define NSA_PRIO_H

#include <stdint.h>

#include "nsa_config.h"

#define NSA_PRIO_WINDOW_NS (100ull * 1000ull * 1000ull)
#define NSA_PRIO_HOLD_MIN_NS (1000ull * 1000ull * 1000ull)
#define NSA_PRIO_HOLD_MAX_NS (64ull * NSA_PRIO_HOLD_MIN_NS)
/* Raised this long without coming back busy: the next hold is short. */
#define NSA_PRIO_CALM_NS (10ull * NSA_PRIO_HOLD_MIN_NS)
/* The mean wait of a window's records on the active (record made ->
 * batch sent) that lowers it, and the one under which it may rise: 100
 * and 25 times the default flush_us. */
#define NSA_PRIO_BEHIND_US 20000ull
#define NSA_PRIO_CALM_US 5000ull

struct nsa_prio {
	enum nsa_priority want; /* what raising asks for (after fallback) */
	int raised;
	int base_nice; /* the process's: what lowering returns to */
	uint64_t win_start_ns, win_cpu_ns;
	uint64_t win_sent, win_sent_wait_us; /* the counters at its start */
	uint64_t hold_ns, held_until_ns, raised_at_ns;
	/* what the thread runs at now, and how often it was lowered */
	int nice, rtprio;
	uint64_t lowered;
};

/* On the thread it governs: lowered to begin with (the first window
 * decides), base priority remembered. */
void nsa_prio_init(struct nsa_prio *p, enum nsa_priority want, uint64_t now_ns);
/* Each turn of the thread's loop, with the number of records applied
 * whose send time was known and the sum of their waits on the active so
 * far (both only rise): closes a window when one is over and raises or
 * lowers the thread; 1 when a window closed (what the thread runs at may
 * have changed), else 0 at the cost of a comparison. */
int nsa_prio_govern(struct nsa_prio *p, uint64_t now_ns, uint64_t sent,
		    uint64_t sent_wait_us);
/* Back to the process's priority (before work known to be heavy); not
 * counted as lowered. */
void nsa_prio_lower(struct nsa_prio *p);

#endif
