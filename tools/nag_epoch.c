/*
 * nag_epoch.c - natsync-agent's epoch as an active with [agent] epoch = 0
 * (nag_epoch.h): the first ask bounded, the provisional epoch, its
 * registration, the fence.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nag_epoch.h"
#include "nsa_cli.h"
#include "nsa_fence.h"
#include "nsa_log.h"
#include "nsa_sdnotify.h"
#include "nsdp_time.h"

/* The store as a first or periodic ask for an epoch, bounded by [agent]
 * promote_wait_ms, so that a store that hangs (a master stopped) does
 * not hold the caller. */
static struct nsa_store_conf store_quick(const struct nsa_config *c)
{
	return nsa_store_conf_quick(&c->store, c->promote_wait_ms);
}

/* The fence raised, logged after what (the epoch and where it came
 * from). */
static void fence(const struct nsa_store_conf *store, const char *what)
{
	unsigned int killed = 0;
	char err[512];

	if (nsa_fence_raise(store, &killed, err, sizeof(err)) != 0)
		NSA_ERR("%s; fence not raised everywhere (%s): an older active "
			"may still write there",
			what, err);
	else
		NSA_INFO("%s; %u older writer connection(s) closed", what,
			 killed);
}

int nag_epoch_take(struct nsa_config *c, struct nag_epoch *pe)
{
	unsigned int delay = 100;
	char err[512], last[512] = "";
	uint32_t p;
	int64_t e;

	pe->quick = store_quick(c);
	/* An ask that gives up may still run later: its token lets the
	 * provisional epoch's registration (with pe->quick) undo it. */
	pe->quick.epoch_token = nsa_epoch_token_new();
	pe->store = &c->store;
	e = nsa_epoch_take(&pe->quick, c->epoch_floor, err, sizeof(err));
	p = nsa_epoch_provisional(c->epoch_floor, c->gateway_id);
	if (e < 0 && e != -ERANGE && p != 0) {
		NSA_WARN("epoch: no epoch from the store (%s): replicating at "
			 "once on provisional epoch %u (above %u); it is made "
			 "known to the store, and the fence raised, once the "
			 "store answers",
			 err, p, c->epoch_floor);
		nsa_config_set_epoch(c, p);
		pe->provisional = p;
		return 0;
	}
	while (e < 0) {
		if (e == -ERANGE) {
			NSA_ERR("epoch: %s", err);
			return 1;
		}
		if (strcmp(err, last) != 0)
			NSA_WARN("epoch: no epoch from the store yet (%s); "
				 "retrying with backoff",
				 err);
		snprintf(last, sizeof(last), "%s", err);
		if (nsa_cli_stopping())
			return 1;
		nsa_sd_watchdog();
		nsdp_sleep_ms(delay);
		delay = delay * 2 > 2000 ? 2000 : delay * 2;
		e = nsa_epoch_take(&c->store, c->epoch_floor, err, sizeof(err));
	}
	nsa_config_set_epoch(c, (uint32_t)e);
	snprintf(last, sizeof(last), "epoch %u from the store", c->epoch);
	fence(&c->store, last);
	return 0;
}

void nag_epoch_register(struct nag_epoch *pe, double t)
{
	uint32_t ours = pe->provisional;
	char err[512];
	int64_t e;

	if (ours == 0 || t < pe->next_register)
		return;
	pe->next_register = t + 1.0;
	e = nsa_epoch_register(&pe->quick, ours, err, sizeof(err));
	if (e == -EPROTO && !pe->refused_said) {
		/* An answer, not a timeout: e.g. an ACL without the taker
		 * key (deploy/redis-users.acl.example). Tried again. */
		NSA_ERR("provisional epoch %u: the store refused to take it "
			"(%s); trying again every second",
			ours, err);
		pe->refused_said = 1;
	}
	if (e < 0) {
		NSA_DEBUG("provisional epoch %u: the store does not answer "
			  "yet (%s)",
			  ours, err);
		return;
	}
	pe->provisional = 0;
	if (e > ours)
		NSA_ERR("provisional epoch %u: the store's counter is at %" PRId64
			": a newer active took over; this one's records are "
			"fenced",
			ours, e);
	else {
		snprintf(err, sizeof(err),
			 "provisional epoch %u made known to the store", ours);
		fence(pe->store, err);
		pe->made_known = ours;
	}
}

int64_t nag_epoch_handover(const struct nsa_config *c, uint32_t floor)
{
	struct nsa_store_conf q = store_quick(c);
	char err[512], what[64];
	int64_t e;

	e = nsa_epoch_take(&q, floor, err, sizeof(err));
	if (e < 0) {
		NSA_WARN("handover: no epoch from the store (%s); the active "
			 "takes its own",
			 err);
		return -1;
	}
	snprintf(what, sizeof(what),
		 "handover: epoch %" PRId64 " from the store", e);
	fence(&c->store, what);
	return e;
}
