/*
 * ngw_fwd.h - the forwarding lcore of natsync-gateway, also run by
 * natsync-gwbench: receive a burst on the inside port, translate it,
 * receive a burst on the outside port, translate it, housekeep, transmit
 * both tx lists.
 *
 * One struct ngw_fwd belongs to one lcore, which alone writes it while
 * it runs (other threads only set stop and read tx_drops). The NAT is the
 * caller's: the loop neither creates nor promotes it.
 */
#ifndef NGW_FWD_H
#define NGW_FWD_H

#include <stdint.h>

#include <rte_common.h>

#include "nsdp_nat.h"

/* Empty polls in a row before ngw_fwd_main() sleeps idle_sleep_us. */
#define NGW_FWD_IDLE_POLLS 64

struct ngw_fwd {
	struct nsdp_nat *nat;
	uint16_t port_in, port_out;
	uint16_t queue; /* the rx and tx queue of both ports */
	uint16_t burst; /* rx burst, 1..NSDP_NAT_BURST */
	unsigned int idle_sleep_us; /* ngw_fwd_main; 0: never sleep */
	int stop; /* ngw_fwd_main returns once set (relaxed) */
	uint64_t tx_drops; /* NSDP_STAT: what the ports did not take */
	struct nsdp_nat_tx tx;
} __rte_cache_aligned;

/* A loop over nat and the two ports, queue 0, full bursts, no sleep. */
void ngw_fwd_init(struct ngw_fwd *f, struct nsdp_nat *nat, uint16_t port_in,
		  uint16_t port_out);

/* One iteration with the NAT's clock at now_ns; the packets received. */
unsigned int ngw_fwd_poll(struct ngw_fwd *f, uint64_t now_ns);

/* The lcore function (arg: the struct ngw_fwd): poll on the wall clock
 * until stop is set, sleeping when idle; returns 0. */
int ngw_fwd_main(void *arg);

/* Ask ngw_fwd_main() to return; the caller then waits for the lcore. */
void ngw_fwd_stop(struct ngw_fwd *f);

#endif
