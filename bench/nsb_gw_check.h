/*
 * nsb_gw_check.h - natsync-gwbench --verify: is a packet the gateway sent
 * a correct translation?
 */
#ifndef NSB_GW_CHECK_H
#define NSB_GW_CHECK_H

#include <stdint.h>

#include <rte_mbuf.h>

/* A whole bench frame, IPv4 TCP or UDP with good checksums, whose source
 * (outside: from a pool address) or destination (inside: to an inside
 * host) is in [lo, hi]. */
int nsb_gw_packet_ok(struct rte_mbuf *m, int outside, uint32_t lo, uint32_t hi);

#endif
