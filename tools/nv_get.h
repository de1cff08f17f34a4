/*
 * nv_get.h - natsync-verify --get (nv_get.c): one session as the store
 * holds it. Private to the program.
 */
#ifndef NV_GET_H
#define NV_GET_H

#include <stdint.h>

#include "nsa_config.h"

/* The session of tuple ("PROTO:SADDR:SPORT-DADDR:DPORT", IPv6 addresses
 * in brackets) printed as JSON: 0 printed, 1 not in the store, 2 an
 * error (printed). Of gateway pair only_pair only, or of any (-1). */
int nv_get_session(const struct nsa_config *conf, const char *tuple,
		   int64_t only_pair);

#endif
