/*
 * nsa_dumpreq.c - the dump handshake between a table's owner thread and
 * the threads that want a copy of the table on disk.
 *
 * Invariants: one request at a time; a request not yet taken when its
 * caller times out is withdrawn; a request taken is done even if its caller
 * gave up (the caller does not wait for the lock meanwhile).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nsa_dumpreq.h"

void nsa_dumpreq_init(struct nsa_dumpreq *d)
{
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
}

void nsa_dumpreq_fini(struct nsa_dumpreq *d)
{
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
}

void nsa_dumpreq_serve(struct nsa_dumpreq *d, struct nsdp_table *t)
{
	char path[sizeof(d->path)];
	int64_t rc;

	if (!__atomic_load_n(&d->requested, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&d->lock);
	if (!d->requested) { /* withdrawn meanwhile */
		pthread_mutex_unlock(&d->lock);
		return;
	}
	memcpy(path, d->path, sizeof(path));
	d->requested = 0;
	pthread_mutex_unlock(&d->lock);

	rc = nsdp_table_dump(t, path);

	pthread_mutex_lock(&d->lock);
	d->result = rc;
	d->serial++;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

int64_t nsa_dumpreq_ask(struct nsa_dumpreq *d, const char *path, int timeout_ms,
			void (*wake)(void *arg), void *arg)
{
	struct timespec deadline;
	uint64_t serial;
	int64_t rc;

	if (strlen(path) >= sizeof(d->path))
		return -ENAMETOOLONG;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&d->lock);
	while (d->requested) /* another caller's dump */
		if (pthread_cond_timedwait(&d->cond, &d->lock, &deadline) ==
		    ETIMEDOUT) {
			pthread_mutex_unlock(&d->lock);
			return -ETIMEDOUT;
		}
	snprintf(d->path, sizeof(d->path), "%s", path);
	__atomic_store_n(&d->requested, 1, __ATOMIC_RELEASE);
	serial = d->serial;
	wake(arg);
	while (d->serial == serial) {
		if (pthread_cond_timedwait(&d->cond, &d->lock, &deadline) ==
			    ETIMEDOUT &&
		    d->serial == serial) {
			d->requested = 0; /* not taken yet: withdraw */
			pthread_mutex_unlock(&d->lock);
			return -ETIMEDOUT;
		}
	}
	rc = d->result;
	pthread_mutex_unlock(&d->lock);
	return rc;
}
