/*
 * ngw_fwd.c - the forwarding lcore: the gateway's only packet loop, in the
 * shape of DPDK's l3fwd (receive a burst, process, transmit, account).
 *
 * Invariants: every mbuf received is either on a tx list or freed by the
 * NAT; whatever a port does not take is freed here and counted in
 * tx_drops, so nothing is held between iterations. The clock is read once
 * per iteration and passed down.
 *
 * Not here: port set-up, promotion, statistics beyond tx_drops (the NAT
 * keeps its own), more than one lcore (the table has one writer).
 */
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "ngw_fwd.h"
#include "nsdp_stat.h"
#include "nsdp_time.h"

void ngw_fwd_init(struct ngw_fwd *f, struct nsdp_nat *nat, uint16_t port_in,
		  uint16_t port_out)
{
	f->nat = nat;
	f->port_in = port_in;
	f->port_out = port_out;
	f->queue = 0;
	f->burst = NSDP_NAT_BURST;
	f->idle_sleep_us = 0;
	f->stop = 0;
	f->tx_drops = 0;
	f->tx.n_inside = f->tx.n_outside = 0;
}

/* Transmit in bursts until the port takes no more, then free the rest. */
static void fwd_send(struct ngw_fwd *f, uint16_t port, struct rte_mbuf **pkts,
		     unsigned int n)
{
	unsigned int sent = 0;

	while (sent < n) {
		uint16_t k = rte_eth_tx_burst(
			port, f->queue, pkts + sent,
			(uint16_t)RTE_MIN(n - sent,
					  (unsigned int)NSDP_NAT_BURST));

		if (k == 0)
			break;
		sent += k;
	}
	if (sent < n) {
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
		NSDP_STAT_ADD(f->tx_drops, n - sent);
	}
}

unsigned int ngw_fwd_poll(struct ngw_fwd *f, uint64_t now_ns)
{
	struct rte_mbuf *pkts[NSDP_NAT_BURST];
	struct nsdp_nat_tx *tx = &f->tx;
	uint16_t n_in, n_out;

	tx->n_inside = tx->n_outside = 0;
	n_in = rte_eth_rx_burst(f->port_in, f->queue, pkts, f->burst);
	if (n_in)
		nsdp_nat_inside(f->nat, pkts, n_in, now_ns, tx);
	n_out = rte_eth_rx_burst(f->port_out, f->queue, pkts, f->burst);
	if (n_out)
		nsdp_nat_outside(f->nat, pkts, n_out, now_ns, tx);
	nsdp_nat_housekeep(f->nat, now_ns, tx);
	if (tx->n_outside)
		fwd_send(f, f->port_out, tx->outside, tx->n_outside);
	if (tx->n_inside)
		fwd_send(f, f->port_in, tx->inside, tx->n_inside);
	return (unsigned int)n_in + n_out;
}

int ngw_fwd_main(void *arg)
{
	struct ngw_fwd *f = arg;
	unsigned int idle = 0;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		/* Held first packets (defer) are let go by the polls. */
		if (ngw_fwd_poll(f, nsdp_realtime_ns()) ||
		    nsdp_nat_deferred(f->nat))
			idle = 0;
		else if (f->idle_sleep_us && ++idle >= NGW_FWD_IDLE_POLLS)
			nsdp_sleep_us(f->idle_sleep_us);
	}
	return 0;
}

void ngw_fwd_stop(struct ngw_fwd *f)
{
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
}
