/*
 * nsb_gw_arp.h - natsync-gwbench's ARP responder: the hosts on both sides
 * of the gateway answer its requests, in place in the request's mbuf.
 */
#ifndef NSB_GW_ARP_H
#define NSB_GW_ARP_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>

/* Turn an ARP request for an address in [lo, hi] other than except (and
 * other than the asker's own) into the reply of mac, in place; 1 if it
 * did, 0 if m is left as it was. */
int nsb_gw_arp_answer(struct rte_mbuf *m, uint32_t lo, uint32_t hi,
		      uint32_t except, const struct rte_ether_addr *mac);

#endif
