/*
 * nsa_cluster.h - the store as a cluster client sees it.
 *
 * Connecting (with timeout, TCP_NODELAY and AUTH), finding out whether the
 * store is a Redis Cluster or one plain server, the slot map from
 * CLUSTER SLOTS, and each master's notification channel. Shared by the
 * active writer and the standby; holds no connection of its own.
 */
#ifndef NSA_CLUSTER_H
#define NSA_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "ns_slot.h"
#include "nsa_store_conf.h"

#define NSA_MAX_NODES 64

struct nsa_node {
	struct nsa_addr addr;
	/* The lowest slot the master owns: its channel is the one of this slot.
	 * 0 on a plain server. */
	uint16_t channel_slot;
};

struct nsa_topology {
	int cluster; /* 0: one plain (non-cluster) server */
	int sharded_pubsub; /* SPUBLISH/SSUBSCRIBE are used */
	unsigned int n_nodes; /* masters */
	struct nsa_node nodes[NSA_MAX_NODES];
	uint8_t slot_node[NS_SLOTS]; /* master index per slot */
	uint8_t slot_covered[NS_SLOTS]; /* 0 where no master serves the slot */
};

/* Blocking connect to host:port within the configured timeout, TCP_NODELAY
 * set, AUTH sent when a password is configured. Returns a context or NULL
 * with a reason in err. */
redisContext *nsa_store_connect(const struct nsa_store_conf *conf,
				const struct nsa_addr *addr, char *err,
				size_t errlen);

/* nsa_store_connect, then CLIENT SETNAME name, acknowledged before it
 * returns: a caller may rely on the server knowing the name (the fence,
 * nsa_fence.h). NULL with a reason in err; *rc (when not NULL) is -EACCES
 * for a refused name, otherwise -ECONNREFUSED or -EIO. */
redisContext *nsa_store_connect_named(const struct nsa_store_conf *conf,
				      const struct nsa_addr *addr,
				      const char *name, int *rc, char *err,
				      size_t errlen);

/* Ask the seeds, in order, for the topology: CLUSTER SLOTS on a cluster, a
 * single node covering every slot on a plain server. The first seed whose
 * node reports cluster_state:ok wins (a master cut off from its cluster
 * reports fail and keeps an old slot map); the first answer only when no
 * node reports ok. Decides sharded
 * pub/sub from conf->publish and the server version. 0 or negative errno
 * with a reason in err. */
int nsa_topology_fetch(const struct nsa_store_conf *conf,
		       struct nsa_topology *t, char *err, size_t errlen);

/* The notification channel of master node (NUL-terminated). */
void nsa_topology_channel(const struct nsa_topology *t, unsigned int node,
			  char buf[NS_CHANNEL_MAX]);

/* The slots some master serves: NS_SLOTS once a cluster is formed; fewer
 * while one is being formed or slots are left unassigned. */
unsigned int nsa_topology_slots_served(const struct nsa_topology *t);

/* Index of the master at addr, or -1. */
int nsa_topology_find(const struct nsa_topology *t,
		      const struct nsa_addr *addr);

/* The replicas of the master of c: the more of those CLUSTER NODES lists
 * and the cluster does not hold failed (a suspected one, "fail?", counts)
 * and those connected to it now (ROLE; a plain server has only these). */
int nsa_store_replicas(redisContext *c);

#define NSA_STORE_WAIT_MS_DEFAULT 1000
/* When the master of c has replicas: WAIT until one acknowledged what c
 * wrote, wait_ms at most (0: NSA_STORE_WAIT_MS_DEFAULT). 0, or -ETIMEDOUT
 * with the reason in err. */
int nsa_store_wait_replica(redisContext *c, unsigned int wait_ms, char *err,
			   size_t errlen);

/* Format a reason into err (errlen bytes; nothing when err is NULL). */
void nsa_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Whether x and y name the same node (same host string and port). */
int nsa_addr_equal(const struct nsa_addr *x, const struct nsa_addr *y);

#endif
