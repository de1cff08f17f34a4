/*
 * nsa_dumpreq.h - asking the thread that owns a table to dump it between
 * two of its steps, and waiting for the result (the standby's SIGUSR1 and
 * CLI dumps).
 */
#ifndef NSA_DUMPREQ_H
#define NSA_DUMPREQ_H

#include <pthread.h>
#include <stdint.h>

#include "nsdp_table.h"

struct nsa_dumpreq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int requested; /* also read with __atomic, without the lock */
	char path[4096];
	int64_t result;
	uint64_t serial; /* dumps served */
};

void nsa_dumpreq_init(struct nsa_dumpreq *d);
void nsa_dumpreq_fini(struct nsa_dumpreq *d);

/* On the owner's thread: do the dump asked for, if any. */
void nsa_dumpreq_serve(struct nsa_dumpreq *d, struct nsdp_table *t);

/* From another thread: ask, wake the owner, wait at most timeout_ms. The
 * count, or a negative errno. */
int64_t nsa_dumpreq_ask(struct nsa_dumpreq *d, const char *path, int timeout_ms,
			void (*wake)(void *arg), void *arg);

#endif
