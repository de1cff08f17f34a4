/*
 * ngw_storecall.c - the active gateway's own store calls on a thread of
 * their own (ngw_storecall.h).
 *
 * Invariants:
 * - One call at a time: asked, run, answered, taken; a new one is asked
 *   only once the last answer was taken.
 * - The thread touches nothing of the gateway's: it runs the call on the
 *   copy it was given and writes the answer into it.
 */
#include <errno.h>
#include <string.h>

#include "ngw_storecall.h"

static void call_run(struct ngw_caller *c, struct ngw_call *k)
{
	k->err[0] = '\0';
	switch (k->op) {
	case NGW_CALL_READ:
		k->rc = nsa_fence_watch_read(&c->watch, &k->conf, &k->value,
					     k->err, sizeof(k->err));
		break;
	case NGW_CALL_RAISE:
		k->killed = 0;
		k->rc = nsa_fence_raise(&k->conf, &k->killed, k->err,
					sizeof(k->err));
		break;
	case NGW_CALL_REGISTER:
		k->rc = nsa_epoch_register(&k->conf, k->epoch, k->err,
					   sizeof(k->err));
		break;
	}
}

static void *caller_main(void *arg)
{
	struct ngw_caller *c = arg;
	struct ngw_call k;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->stop && !c->asked)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->stop)
			break;
		k = c->call;
		pthread_mutex_unlock(&c->mu);
		call_run(c, &k);
		pthread_mutex_lock(&c->mu);
		c->call = k;
		c->asked = 0;
		c->answered = 1;
	}
	pthread_mutex_unlock(&c->mu);
	nsa_fence_watch_close(&c->watch);
	return NULL;
}

int ngw_caller_start(struct ngw_caller *c)
{
	int rc;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	rc = pthread_create(&c->thread, NULL, caller_main, c);
	if (rc != 0)
		return -rc;
	pthread_setname_np(c->thread, "ngw-storecall");
	c->started = 1;
	return 0;
}

void ngw_caller_stop(struct ngw_caller *c)
{
	if (!c->started)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	c->started = 0;
}

int ngw_caller_ask(struct ngw_caller *c, const struct ngw_call *call)
{
	int rc = -EBUSY;

	pthread_mutex_lock(&c->mu);
	if (c->started && !c->asked && !c->answered) {
		c->call = *call;
		c->asked = 1;
		pthread_cond_signal(&c->cv);
		rc = 0;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int ngw_caller_take(struct ngw_caller *c, struct ngw_call *out)
{
	int got = 0;

	pthread_mutex_lock(&c->mu);
	if (c->answered) {
		*out = c->call;
		c->answered = 0;
		got = 1;
	}
	pthread_mutex_unlock(&c->mu);
	return got;
}
