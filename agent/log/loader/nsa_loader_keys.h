/*
 * nsa_loader_keys.h - the keys layout's reader of the loader
 * (nsa_loader_keys.c).
 */
#ifndef NSA_LOADER_KEYS_H
#define NSA_LOADER_KEYS_H

#include "nsa_loader_layout.h"

extern const struct nsa_loader_layout nsa_loader_keys;

#endif
