/*
 * ngw_storecall.h - the active gateway's own store calls (the fence's
 * periodic read, the fence raised again, a provisional epoch made known)
 * on a thread of their own, one at a time, so that the main loop and its
 * control socket never wait on a store that hangs. The main loop asks and
 * later takes the answer; it acts on it (ngw_promote.c). Private to
 * natsync-gateway.
 */
#ifndef NGW_STORECALL_H
#define NGW_STORECALL_H

#include <pthread.h>
#include <stdint.h>

#include "nsa_fence.h"

enum ngw_call_op {
	NGW_CALL_READ, /* nsa_fence_watch_read */
	NGW_CALL_RAISE, /* nsa_fence_raise */
	NGW_CALL_REGISTER, /* nsa_epoch_register */
};

struct ngw_call {
	/* The asker's: what, for which promotion (answers to an earlier
	 * one are left alone), the store as it asks it, the provisional
	 * epoch to make known. */
	enum ngw_call_op op;
	uint64_t gen;
	struct nsa_store_conf conf;
	uint32_t epoch;
	/* The answer: READ 0 or a negative errno, with the counter in
	 * value; RAISE 0 or a negative errno, the connections closed in
	 * killed; REGISTER the counter after, or a negative errno. */
	int64_t rc;
	uint64_t value;
	unsigned int killed;
	char err[512];
};

struct ngw_caller {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int started, stop;
	/* asked and not answered; answered and not taken */
	int asked, answered;
	struct ngw_call call;
	/* the fence read's kept connection, the thread's alone */
	struct nsa_fence_watch watch;
};

/* Start the thread; 0 or a negative errno. */
int ngw_caller_start(struct ngw_caller *c);
/* Stop it (waits for a call under way: GW_STORE_LOOP_MS bounds each of its
 * connects and replies). */
void ngw_caller_stop(struct ngw_caller *c);
/* Ask for call; -EBUSY while one is asked or its answer not taken. */
int ngw_caller_ask(struct ngw_caller *c, const struct ngw_call *call);
/* Take the answer: 1 with it in out, 0 when none is there. */
int ngw_caller_take(struct ngw_caller *c, struct ngw_call *out);

#endif
