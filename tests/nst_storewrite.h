/*
 * nst_storewrite.h - test support: a session record written into a real
 * store behind the agents' backs, announced to nobody, in either layout:
 * what an active leaves behind when the fence cuts its connection between
 * a batch's writes and its SPUBLISH.
 */
#ifndef NST_STOREWRITE_H
#define NST_STOREWRITE_H

#include "ns_record.h"

/* Write r (of any family) into the store whose seed is 127.0.0.1:port, on
 * the master of its key's slot: in the keys layout its key (SET PX its
 * timeout), in the log layout a segment of one record (under a publisher
 * id of the tests' own, never an agent's). With del, end the session
 * instead: DEL of its key, or a segment of its delete record stamped after
 * r (r's gateway and epoch), which a reader of the log merges as the
 * key's absence. Asserts on failure. */
void nst_store_record(int port, const char *layout, const struct ns_rec *r,
		      int del);

#endif
