/*
 * nsa_loader_log.h - the log layout's reader of the loader
 * (nsa_loader_log.c).
 */
#ifndef NSA_LOADER_LOG_H
#define NSA_LOADER_LOG_H

#include "nsa_loader_layout.h"

extern const struct nsa_loader_layout nsa_loader_log;

#endif
