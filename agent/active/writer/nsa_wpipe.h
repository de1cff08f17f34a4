/*
 * nsa_wpipe.h - nsa_wpipe.c: a writer's pipeline of commands and batches,
 * and what the store's error replies mean. Above nsa_wbatch.h in the
 * writer's stack (nsa_writer.h).
 */
#ifndef NSA_WPIPE_H
#define NSA_WPIPE_H

#include <stddef.h>
#include <stdint.h>

#include "nsa_writer.h"

/* Which master's batch a key belongs to (its index in w->conns), and
 * which connection its command goes to (another one, with *asking set,
 * while its slot is being migrated). */
unsigned int nsa_writer_route(const struct nsa_writer *w, const uint8_t *key,
			      size_t key_len, unsigned int *cmd_conn,
			      int *asking);

/* Whether s (of kind rflag, NSA_REC_*) is below the store's epoch: then it
 * is counted as fenced and goes nowhere. */
int nsa_record_fenced(struct nsa_writer *w, const struct ns_session *s,
		      uint8_t rflag);
/* Append s, not fenced and no correction (rflag NSA_REC_REPLAY or 0), to
 * the pipeline. Every record enters through nsa_append_record
 * (nsa_wreadback.h), which supersedes the read-back of its flow first.
 * -ENOMEM. */
int nsa_pipe_append(struct nsa_writer *w, const struct ns_session *s,
		    uint8_t rflag);
/* Count s, just encoded (len bytes) at the end of c's open batch, into it,
 * and close the batch once it is full. -ENOMEM, -EINVAL. */
int nsa_batch_push(struct nsa_writer *w, struct nsa_link *c,
		   const struct ns_session *s, uint8_t rflag, size_t len);
/* Close c's open batch: its segment (log layout) and notification go into
 * the pipeline. -ENOMEM, -EINVAL. */
int nsa_batch_close(struct nsa_writer *w, struct nsa_link *c);
/* Log layout: ask the standbys of every master that refused a segment for
 * good to read it again (not in retry mode). */
void nsa_log_resync_send(struct nsa_writer *w);

/* An error reply: 1 when it is worth a resend (a redirection or a passing
 * state, noted in w), 0 when the store refused for good (logged once per
 * kind). */
int nsa_writer_error_retry(struct nsa_writer *w, const char *t, size_t len);

#endif
