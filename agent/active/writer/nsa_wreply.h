/*
 * nsa_wreply.h - nsa_wreply.c: reading a link's replies, and losing them
 * all with the link. Above nsa_wreadback.h in the writer's stack
 * (nsa_writer.h).
 */
#ifndef NSA_WREPLY_H
#define NSA_WREPLY_H

#include <stddef.h>

#include "nsa_writer.h"

/* Read what the socket has and account every complete reply. Returns the
 * number of bytes read (0 if none); the connection may die meanwhile. */
size_t nsa_link_read(struct nsa_writer *w, struct nsa_link *c);
/* Close c (why: for the log) and settle every reply it owed as lost: the
 * writer resends after a reconnect. */
void nsa_link_kill(struct nsa_writer *w, struct nsa_link *c, const char *why);

#endif
