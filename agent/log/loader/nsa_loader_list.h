/*
 * nsa_loader_list.h - the loader's key listings and value reads
 * (nsa_loader_list.c), on its non-blocking connection.
 */
#ifndef NSA_LOADER_LIST_H
#define NSA_LOADER_LIST_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "nsa_loader_state.h"

/* Queue a SCAN from cursor (MATCH the layout's pattern): 0 or -ENOMEM. */
int nsa_loader_send_scan(struct nsa_loader *ld, const char *cursor);

/* Keep the window of GETKEYSINSLOT in flight over the slots of the master
 * being loaded, each followed by its probe: 0 or -ENOMEM. */
int nsa_loader_send_slots(struct nsa_loader *ld);

/* A SCAN or GETKEYSINSLOT reply (taken): queue what comes next and the
 * MGETs of its keys. 0, or a negative errno. */
int nsa_loader_on_scan(struct nsa_loader *ld, redisReply *r);
int nsa_loader_on_slot(struct nsa_loader *ld, redisReply *r);

/* An MGET reply (not taken) to expectation e: the values to the layout's
 * reader; drops e's hold on its keys. */
void nsa_loader_on_mget(struct nsa_loader *ld, const struct nsa_exp *e,
			const redisReply *r);

/* Whether reply r answers the probe at the head of what is due. */
int nsa_loader_is_probe_reply(const struct nsa_loader *ld, const redisReply *r);

/* The answer r to the probe of slot: the slot was read from its holder
 * (the target of a migrating one read too), or not. */
void nsa_loader_on_probe(struct nsa_loader *ld, uint32_t slot,
			 const redisReply *r);

/* Release what expectation e holds (the loader closes). */
void nsa_loader_exp_drop(const struct nsa_exp *e);

/* Release the listings whose MGETs wait for room (the loader closes). */
void nsa_loader_mget_wait_drop(struct nsa_loader *ld);

#endif
