/*
 * nsb_gw_traffic.h - natsync-gwbench's traffic generator: the inside hosts
 * sending, the servers answering, the next hop and the hosts answering
 * ARP, all in the gateway lcore's thread between two iterations.
 */
#ifndef NSB_GW_TRAFFIC_H
#define NSB_GW_TRAFFIC_H

#include <stdint.h>

#include "nsb_gw.h"

struct nsb_gw_gen {
	const struct nsb_gw_opts *o;
	struct nsb_gw_ports *ports;
	uint8_t udp_tmpl[NSB_GW_FRAME], tcp_tmpl[NSB_GW_FRAME];
	uint8_t udp6_tmpl[NSB_GW_FRAME6]; /* --nat64-pct */
	uint32_t per_host; /* flow slots per inside host */
	/* Per TCP slot: the source port of the flow whose SYN was sent, 0
	 * when the next packet must be a SYN. NULL without TCP. */
	uint16_t *tcp_state;
	uint32_t cursor; /* next slot to send from */
	uint32_t live_slots; /* slots in use: all but while ramping up */
	uint64_t ramp_cycles; /* after promotion, to bring every slot in */
	/* Flows replaced so far, in slot order from slot 0: slot i is in
	 * generation ret_q + (i < ret_r). */
	uint64_t retired, ret_q;
	uint32_t ret_r;
	uint64_t churn_start; /* TSC; 0: churn not started */
	double new_per_cycle;
	unsigned int reply_acc;
	uint64_t arp_answered, bad_out, bad_in;
};

/* 0 or -ENOMEM. */
int nsb_gw_gen_init(struct nsb_gw_gen *g, const struct nsb_gw_opts *o,
		    struct nsb_gw_ports *ports);
void nsb_gw_gen_free(struct nsb_gw_gen *g);

/* The same traffic again, from the start, for a new round. */
void nsb_gw_gen_reset(struct nsb_gw_gen *g);

/* The gateway took its promotion in the iteration that ended at tsc: the
 * flows start again, ramping up, then churning at --new-pct. */
void nsb_gw_gen_promoted(struct nsb_gw_gen *g, uint64_t tsc);

/* Between two gateway iterations: churn, take what the gateway sent
 * (answer, reflect, verify, free) and keep the inside port fed. */
void nsb_gw_gen_step(struct nsb_gw_gen *g, uint64_t tsc);

#endif
