/*
 * nsb_gw_ports.c - natsync-gwbench's stand-ins for what a gateway talks
 * to: two net_ring ports per gateway (rings on both sides, so that the
 * generator in the same thread plays the wire), and the lane consumer
 * playing the agent.
 *
 * Invariants: the rings are single-producer, single-consumer; the lcore
 * owns both ends while a round runs and empties them before it ends.
 *
 * Not here: real NICs (net_ring moves pointers, not bytes), the store.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>

#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "nsb_gw.h"
#include "nsdp_stat.h"
#include "nsdp_time.h"

#define PORT_RING 1024 /* each port ring, in mbufs */
#define RING_DRAIN 256 /* mbufs taken off a ring at once */
#define CONSUME 512 /* records the lane consumer takes at once */

static int port_create(const char *name, struct rte_ring **rx,
		       struct rte_ring **tx, struct rte_mempool *pool,
		       uint16_t *port, int *up)
{
	static const struct rte_eth_conf eth_conf;
	char rname[RTE_RING_NAMESIZE];
	int socket = (int)rte_socket_id(), id;

	snprintf(rname, sizeof(rname), "%s_rx", name);
	*rx = rte_ring_create(rname, PORT_RING, socket,
			      RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(rname, sizeof(rname), "%s_tx", name);
	*tx = rte_ring_create(rname, PORT_RING, socket,
			      RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!*rx || !*tx) {
		fprintf(stderr, "natsync-gwbench: %s: rings: %s\n", name,
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	id = rte_eth_from_rings(name, rx, 1, tx, 1, (unsigned int)socket);
	if (id < 0) {
		fprintf(stderr, "natsync-gwbench: %s: net_ring port: %s\n",
			name, rte_strerror(rte_errno));
		return -ENODEV;
	}
	*port = (uint16_t)id;
	if (rte_eth_dev_configure(*port, 1, 1, &eth_conf) != 0 ||
	    rte_eth_rx_queue_setup(*port, 0, PORT_RING, (unsigned)socket, NULL,
				   pool) != 0 ||
	    rte_eth_tx_queue_setup(*port, 0, PORT_RING, (unsigned)socket,
				   NULL) != 0 ||
	    rte_eth_dev_start(*port) != 0) {
		fprintf(stderr, "natsync-gwbench: %s: cannot start the port\n",
			name);
		rte_eth_dev_close(*port);
		return -EIO;
	}
	*up = 1;
	return 0;
}

int nsb_gw_ports_create(struct nsb_gw_ports *p, unsigned int idx,
			struct rte_mempool *pool)
{
	char in[16], out[16];

	p->pool = pool;
	snprintf(in, sizeof(in), "gwb_in%u", idx);
	snprintf(out, sizeof(out), "gwb_out%u", idx);
	if (port_create(in, &p->in_rx, &p->in_tx, pool, &p->inside,
			&p->inside_up) != 0 ||
	    port_create(out, &p->out_rx, &p->out_tx, pool, &p->outside,
			&p->outside_up) != 0)
		return -ENODEV;
	return 0;
}

static void ring_free_all(struct rte_ring *r)
{
	struct rte_mbuf *m[RING_DRAIN];
	unsigned int n;

	while ((n = rte_ring_sc_dequeue_burst(r, (void **)m, RING_DRAIN,
					      NULL)) > 0)
		rte_pktmbuf_free_bulk(m, n);
}

void nsb_gw_ports_drain(struct nsb_gw_ports *p)
{
	ring_free_all(p->in_rx);
	ring_free_all(p->in_tx);
	ring_free_all(p->out_rx);
	ring_free_all(p->out_tx);
}

void nsb_gw_ports_close(struct nsb_gw_ports *p)
{
	if (p->inside_up) {
		rte_eth_dev_stop(p->inside);
		rte_eth_dev_close(p->inside);
	}
	if (p->outside_up) {
		rte_eth_dev_stop(p->outside);
		rte_eth_dev_close(p->outside);
	}
	rte_ring_free(p->in_rx);
	rte_ring_free(p->in_tx);
	rte_ring_free(p->out_rx);
	rte_ring_free(p->out_tx);
}

static void *consumer_main(void *arg)
{
	struct nsb_gw_consumer *c = arg;
	static struct ns_session buf[CONSUME];

	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		unsigned int n = nsdp_lane_drain(c->lane, buf, CONSUME);

		NSDP_STAT_ADD(c->drained, n);
		/* Drained is acknowledged here: a deferring gateway lets its
		 * first packets go. */
		if (n)
			nsdp_lane_settle(c->lane, c->lane->drained);
		if (n == 0)
			nsdp_sleep_us(50);
	}
	return NULL;
}

/* On the main lcore's CPU, off the gateway's. */
int nsb_gw_consumer_start(struct nsb_gw_consumer *c)
{
	pthread_attr_t attr;
	cpu_set_t cpus;
	int rc;

	CPU_ZERO(&cpus);
	CPU_SET(rte_lcore_to_cpu_id((int)rte_get_main_lcore()), &cpus);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
	rc = pthread_create(&c->thread, &attr, consumer_main, c);
	pthread_attr_destroy(&attr);
	return -rc;
}

void nsb_gw_consumer_stop(struct nsb_gw_consumer *c)
{
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELAXED);
	pthread_join(c->thread, NULL);
}
