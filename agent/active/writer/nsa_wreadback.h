/*
 * nsa_wreadback.h - nsa_wreadback.c: the read-back of refused keys, and
 * the entry for every record a writer appends. Above nsa_wpipe.h in the
 * writer's stack (nsa_writer.h).
 */
#ifndef NSA_WREADBACK_H
#define NSA_WREADBACK_H

#include <stdint.h>

#include "nsa_writer.h"

/* Append one record: rflag NSA_REC_REPLAY, NSA_REC_STORE (a correction:
 * no command) or 0. A fenced record is counted and goes nowhere; -ENOMEM
 * (the caller counts the record lost). */
int nsa_append_record(struct nsa_writer *w, const struct ns_session *s,
		      uint8_t rflag);

/* The store refused s for good: read its key back. */
void nsa_readback_queue(struct nsa_writer *w, const struct ns_session *s);
/* Send GET for every queued read-back whose master is connected. */
void nsa_readback_send(struct nsa_writer *w);
/* The store's answer to the GET of e (NSA_EXP_READBACK): type '$' with
 * the value (text NULL for nil), or a line's type and text. */
void nsa_readback_reply(struct nsa_writer *w, const struct nsa_exp *e,
			char type, const char *text, long len);
/* The GET of e was lost with its connection: it is sent again. */
void nsa_readback_lost(struct nsa_writer *w, const struct nsa_exp *e);

#endif
