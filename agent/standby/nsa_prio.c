/*
 * nsa_prio.c - the subscriber thread's priority and its governor
 * (nsa_prio.h says why and how).
 */
#include "nsa_prio.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nsa_log.h"

static const char *const prio_names[] = {"normal", "high", "realtime"};

static pid_t prio_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void prio_read(struct nsa_prio *p)
{
	struct sched_param sp;
	int nice, policy;

	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)prio_tid());
	if (errno == 0)
		p->nice = nice;
	policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
	p->rtprio = policy == SCHED_FIFO && sched_getparam(0, &sp) == 0
			    ? sp.sched_priority
			    : 0;
}

/* The thread at level; 0 or an errno. */
static int prio_set(enum nsa_priority level, int base_nice)
{
	struct sched_param sp = {0};
	int err = 0;

	if (level == NSA_PRIORITY_REALTIME) {
		sp.sched_priority = NSA_STANDBY_RTPRIO;
		/* A child of this thread (none is made today) would not
		 * inherit it. */
		if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK,
				       &sp) != 0)
			return errno;
		return 0;
	}
	if (sched_setscheduler(0, SCHED_OTHER, &sp) != 0)
		err = errno;
	if (setpriority(PRIO_PROCESS, (id_t)prio_tid(),
			level == NSA_PRIORITY_HIGH ? NSA_STANDBY_NICE_HIGH
						   : base_nice) != 0 &&
	    err == 0)
		err = errno;
	return err;
}

static void prio_raise(struct nsa_prio *p, uint64_t now_ns)
{
	enum nsa_priority asked = p->want;
	int err, first_err = 0;

	/* Refused: the level below, down to the process's; one line says
	 * what was asked, why it was refused and what the thread got. */
	while (p->want != NSA_PRIORITY_NORMAL &&
	       (err = prio_set(p->want, p->base_nice)) != 0) {
		if (!first_err)
			first_err = err;
		p->want = p->want - 1;
	}
	if (first_err)
		NSA_WARN("standby: the subscriber cannot run at [standby] "
			 "priority = %s (%s: it needs CAP_SYS_NICE%s); it "
			 "runs at %s",
			 prio_names[asked], strerror(first_err),
			 asked == NSA_PRIORITY_REALTIME
				 ? ", and a real-time budget in its cgroup"
				 : "",
			 p->want == NSA_PRIORITY_NORMAL
				 ? "the process's priority"
				 : prio_names[p->want]);
	if (p->want != NSA_PRIORITY_NORMAL) {
		p->raised = 1;
		p->raised_at_ns = now_ns;
	}
	prio_read(p);
}

void nsa_prio_init(struct nsa_prio *p, enum nsa_priority want, uint64_t now_ns)
{
	memset(p, 0, sizeof(*p));
	p->want = want;
	errno = 0;
	p->base_nice = getpriority(PRIO_PROCESS, 0);
	if (errno != 0)
		p->base_nice = 0;
	p->hold_ns = NSA_PRIO_HOLD_MIN_NS;
	p->win_start_ns = now_ns;
	p->win_cpu_ns = thread_cpu_ns();
	prio_read(p);
}

void nsa_prio_lower(struct nsa_prio *p)
{
	if (!p->raised)
		return;
	(void)prio_set(NSA_PRIORITY_NORMAL, p->base_nice);
	p->raised = 0;
	prio_read(p);
}

/* The mean wait on the active of the records of the window closing. */
static uint64_t window_wait_us(struct nsa_prio *p, uint64_t sent,
			       uint64_t sent_wait_us)
{
	uint64_t n = sent - p->win_sent;

	return n ? (sent_wait_us - p->win_sent_wait_us) / n : 0;
}

int nsa_prio_govern(struct nsa_prio *p, uint64_t now_ns, uint64_t sent,
		    uint64_t sent_wait_us)
{
	uint64_t cpu_now, cpu, wall, wait_us;

	if (p->want == NSA_PRIORITY_NORMAL ||
	    now_ns - p->win_start_ns < NSA_PRIO_WINDOW_NS)
		return 0;
	cpu_now = thread_cpu_ns();
	cpu = cpu_now - p->win_cpu_ns;
	wall = now_ns - p->win_start_ns;
	wait_us = window_wait_us(p, sent, sent_wait_us);
	p->win_start_ns = now_ns;
	p->win_cpu_ns = cpu_now;
	p->win_sent = sent;
	p->win_sent_wait_us = sent_wait_us;
	if (p->raised && (2 * cpu > wall || wait_us >= NSA_PRIO_BEHIND_US)) {
		/* Over half a core, or a stream flat out: lowered, for
		 * longer each time it comes back so soon after being
		 * raised. */
		if (now_ns - p->raised_at_ns >= NSA_PRIO_CALM_NS)
			p->hold_ns = NSA_PRIO_HOLD_MIN_NS;
		nsa_prio_lower(p);
		p->lowered++;
		p->held_until_ns = now_ns + p->hold_ns;
		if (p->hold_ns < NSA_PRIO_HOLD_MAX_NS)
			p->hold_ns *= 2;
	} else if (!p->raised && now_ns >= p->held_until_ns &&
		   4 * cpu <= wall && wait_us < NSA_PRIO_CALM_US) {
		prio_raise(p, now_ns);
	}
	return 1;
}
