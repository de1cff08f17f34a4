/*
 * nsa_wlink.h - nsa_wlink.c: a writer's links to the masters, its
 * connection, its recovery and its health. The top of the writer's stack
 * (nsa_writer.h), called by the writer loop (nsa_active.c).
 */
#ifndef NSA_WLINK_H
#define NSA_WLINK_H

#include <stddef.h>

#include "nsa_writer.h"

/* Fetch the topology and connect every master, retrying with backoff;
 * -ECANCELED once the writer is stopped. */
int nsa_writer_connect(struct nsa_writer *w);
/* Out of retry mode, once no reply is due: reconnect what needs it, and
 * queue every unacknowledged record (and after a lost master the replay
 * window) for the resend. -ECANCELED, -ENOMEM. */
int nsa_writer_recover(struct nsa_writer *w);
/* Send what is queued on c; returns the number of bytes sent. */
size_t nsa_link_send(struct nsa_writer *w, struct nsa_link *c);
void nsa_link_free(struct nsa_link *c);

/* Health: retrying since now, unless it already was. */
void nsa_writer_health_retrying(struct nsa_writer *w);
/* Health: connected to every master of w->topo; publish them. */
void nsa_writer_health_connected(struct nsa_writer *w);

#endif
