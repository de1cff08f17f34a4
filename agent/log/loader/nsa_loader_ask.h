/*
 * nsa_loader_ask.h - the loader's read of a migrating slot on its target
 * (nsa_loader_ask.c): the one part of a load that blocks.
 */
#ifndef NSA_LOADER_ASK_H
#define NSA_LOADER_ASK_H

#include <stdint.h>

#include "nsa_loader_state.h"

/* The keys of slot that its target at (importing it) holds: listed, then
 * read with ASKING, blocking, their values to the layout's reader. 0, or
 * a negative value when the target could not be read or the reader ran
 * out of memory. */
int nsa_loader_read_importing(struct nsa_loader *ld, uint32_t slot,
			      const struct nsa_addr *at);

/* Close the connection to the last target read (the loader closes). */
void nsa_loader_importer_close(struct nsa_loader *ld);

#endif
