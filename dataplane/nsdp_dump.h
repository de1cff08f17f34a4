/*
 * nsdp_dump.h - a table file: sessions in their wire form one after the
 * other (what natsync-verify reads), written through a temporary file that
 * is synced and renamed into place, so that a reader never sees half of
 * one. The standby's table (nsdp_table_dump) and the synthetic source's
 * final table (nsdp_synth_dump) are both written so.
 */
#ifndef NSDP_DUMP_H
#define NSDP_DUMP_H

#include <stdint.h>

#include "ns_record.h"

/* Calls fn(session, arg) for each session of src; returns how many. */
typedef uint64_t (*nsdp_dump_walk_fn)(const void *src,
				      void (*fn)(const struct ns_session *,
						 void *),
				      void *arg);

/* Write the sessions walk(src, ...) gives to path: how many, or a
 * negative errno (nothing at path then). */
int64_t nsdp_dump_write(const char *path, nsdp_dump_walk_fn walk,
			const void *src);

#endif
