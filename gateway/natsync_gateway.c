/*
 * natsync_gateway.c - natsync-gateway, the reference NAT44, NAT64 and NAT66
 * gateway.
 *
 * One DPDK process with an inside and an outside port (any PMD), one
 * forwarding lcore running the NAT fast path (dataplane/nat/nsdp_nat.h) over
 * the gateway's session table, and a control thread (the main thread)
 * serving a unix socket: "promote", "demote", "status", "stats",
 * "health"; with [metrics] listen it also serves /metrics and /readyz
 * (ngw_metrics.c).
 *
 * The gateway always starts as a standby: the standby subscriber fills the
 * session table from the store (cold load, then live batches) and the fast
 * path forwards nothing. With [agent] role = active it promotes itself once
 * the cold load is done, or after GW_START_WAIT_MS when the store does not
 * answer (forwarding matters more than history; while the store answers
 * it waits for the load, so that no port the stored sessions hold is
 * handed out again). Promotion takes a new epoch from the store (or, when
 * the store does not answer within [gateway] promote_wait_ms, a
 * provisional one, agent/fence/nsa_fence.h), closes the writer connections
 * of older epochs on every master (the fence), stops the subscriber (the
 * fast path becomes the table's only writer: nsdp_table_take, never two
 * writers), rebuilds the port maps from the replicated sessions, and
 * starts replicating the gateway's own sessions: with [gateway] agent =
 * threads through writer threads in this process, with agent = external
 * through a natsync-agent secondary process that drains the same ring by
 * name. A promotion that fails is tried again every GW_RETRY_MS until it
 * forwards or a demote comes. Demotion reverses it and resyncs the table
 * from the store; an active that finds a newer epoch in the store (its
 * writers, or its own read every [gateway] fence_check_ms) demotes itself
 * and says it is unfit for MASTER (health) until told demote. A promotion
 * the forwarding lcore neither takes nor refuses in time (it did not
 * confirm that it is still a standby) leaves the gateway stuck: the table
 * stays the fast path's, the subscriber stays stopped, status says so,
 * until the lcore confirms.
 *
 * Here: the ports, the control socket, start-up and the main loop; the
 * promotion, the demotion and the fence are in ngw_promote.c.
 *
 * Not done here: more than one forwarding lcore (the table has one writer),
 * IP fragments reassembly, ICMP error translation for NAT44 and NAT66
 * sessions (NAT64 ones have it), NPTv6 (NAT64 and NAT66 only:
 * dataplane/nat/nsdp_nat64.h, nsdp_nat64_icmp.h, nsdp_nat66.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "ngw_fwd.h"
#include "ngw_config.h"
#include "ngw_gw.h"
#include "ngw_readback.h"
#include "nsa_active.h"
#include "nsa_cli.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsa_fence.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_metrics.h"
#include "nsa_sdnotify.h"
#include "nsa_standby.h"
#include "nsdp_lane.h"
#include "nsdp_nat.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"
#include "nsdp_time.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-gateway -c FILE [options] [-- EAL-ARGS...]\n"
		"       natsync-gateway --ctl COMMAND [-c FILE | -S SOCKET]\n"
		"\n"
		"The reference NAT44, NAT64 and NAT66 gateway of natsync: "
		"source NAT from the\n"
		"inside port to the outside pool (and stateful NAT64 of the "
		"inside's\n"
		"IPv6 hosts with [gateway] inside_address6; stateful NAT66 of "
		"their\n"
		"other IPv6 traffic with outside_address6 too, off while it is "
		"unset),\n"
		"with its session table replicated through the store so that a "
		"standby\n"
		"gateway can take over every flow.\n"
		"\n"
		"  -c, --config FILE     configuration file (INI; see\n"
		"                        docs/configuration.md)\n"
		"  -r, --role ROLE       active or standby (overrides [agent] "
		"role):\n"
		"                        the role taken once the table is "
		"loaded\n"
		"  -s, --set S.KEY=VAL   override one configuration key "
		"(repeatable)\n"
		"  -t, --duration SECS   stop after SECS seconds (default: run "
		"until\n"
		"                        SIGINT/SIGTERM)\n"
		"  -p, --print-config    print the effective configuration and "
		"exit\n"
		"      --config-reference  print every configuration key in "
		"Markdown\n"
		"  -C, --ctl COMMAND     send COMMAND to a running gateway's "
		"control\n"
		"                        socket, print the reply and exit: "
		"promote,\n"
		"                        demote, status, stats, health (exit 0\n"
		"                        when ready, 1 otherwise)\n"
		"  -S, --socket PATH     control socket for --ctl (default: "
		"[gateway]\n"
		"                        control_socket of -c FILE)\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"EAL arguments come from [agent] eal_args, then from after "
		"'--'; the\n"
		"ports are the devices named by [gateway] inside_port and "
		"outside_port\n"
		"(e.g. --vdev=net_af_packet0,iface=eth1). The gateway needs "
		"two "
		"lcores:\n"
		"the main one (control) and one forwarding lcore (default -l "
		"0,1).\n"
		"Exit status: 0 done, 1 failure, 2 bad configuration or "
		"options;\n"
		"with --ctl: 0 when the reply starts with \"ok\", 1 "
		"otherwise, 2 when\n"
		"the gateway cannot be reached.\n");
}

/* ---- ports ------------------------------------------------------------ */

static int port_open(struct gw *g, const char *name, uint16_t *id,
		     struct rte_ether_addr *mac)
{
	struct rte_eth_conf pc;
	uint16_t rxd = (uint16_t)g->conf.gw.rx_descriptors;
	uint16_t txd = (uint16_t)g->conf.gw.tx_descriptors;
	int rc, socket;

	if (rte_eth_dev_get_port_by_name(name, id) != 0) {
		NSA_ERR("port %s: no such DPDK device (give it with --vdev or "
			"a PCI address in [agent] eal_args)",
			name);
		return -ENODEV;
	}
	memset(&pc, 0, sizeof(pc));
	socket = rte_eth_dev_socket_id(*id);
	if (socket < 0)
		socket = (int)rte_socket_id();
	if ((rc = rte_eth_dev_configure(*id, 1, 1, &pc)) < 0 ||
	    (rc = rte_eth_dev_adjust_nb_rx_tx_desc(*id, &rxd, &txd)) < 0 ||
	    (rc = rte_eth_rx_queue_setup(*id, 0, rxd, (unsigned int)socket,
					 NULL, g->pool)) < 0 ||
	    (rc = rte_eth_tx_queue_setup(*id, 0, txd, (unsigned int)socket,
					 NULL)) < 0 ||
	    (rc = rte_eth_dev_start(*id)) < 0 ||
	    (rc = rte_eth_macaddr_get(*id, mac)) < 0) {
		NSA_ERR("port %s: cannot set up: %s", name, strerror(-rc));
		return rc;
	}
	NSA_INFO("port %s: id %u, MAC " RTE_ETHER_ADDR_PRT_FMT, name, *id,
		 RTE_ETHER_ADDR_BYTES(mac));
	return 0;
}

/* ---- control socket ---------------------------------------------------- */

static int gw_status(struct gw *g, char *reply, size_t len)
{
	struct nsdp_table_stats ts;
	struct nsa_standby_stats ss;
	struct nsdp_nat_stats ns;

	nsdp_table_stats(g->table, &ts);
	nsa_standby_stats(g->sb, &ss);
	nsdp_nat_stats(g->nat, &ns);
	gw_unstick(g);
	/* Stuck is an error: --ctl status exits 1. */
	snprintf(reply, len,
		 "%s mode=%s epoch=%u%s gateway_id=%u sessions=%" PRIu64
		 " synced=%s ports_in_use=%" PRIu64 " created=%" PRIu64
		 " recorded=%" PRIu64 " record_drops=%" PRIu64 "\n",
		 g->stuck ? "error" : "ok", gw_mode_name(g),
		 nsdp_nat_epoch(g->nat),
		 g->provisional ? " provisional=yes" : "",
		 g->conf.agent.gateway_id, ts.live, ss.synced ? "yes" : "no",
		 nsdp_nat_ports_in_use(g->nat), ns.created, ns.recorded,
		 ns.record_drops);
	return 0;
}

/* What /readyz says (ngw_metrics.c), for keepalived's track_script and
 * the watchdog: --ctl health exits 0 when ready. */
static void gw_health_reply(struct gw *g, char *reply, size_t len)
{
	char why[256] = "";

	if (ngw_health(g, why, sizeof(why)))
		snprintf(reply, len, "ok ready mode=%s epoch=%u\n",
			 gw_mode_name(g), nsdp_nat_epoch(g->nat));
	else
		snprintf(reply, len, "error not ready: %s\n", why);
}

static void control_serve(struct gw *g)
{
	char line[256], reply[GW_REPLY_MAX];
	ssize_t n;
	size_t got = 0;
	int fd = accept(g->listen_fd, NULL, NULL);
	struct timeval tv = {1, 0};

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(line) - 1 &&
	       (n = read(fd, line + got, sizeof(line) - 1 - got)) > 0) {
		got += (size_t)n;
		if (memchr(line, '\n', got))
			break;
	}
	line[got] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (!strcmp(line, "promote")) {
		/* keepalived asks once: a promotion that failed (no epoch
		 * from the store, the lcore did not take over) is tried
		 * again by the gateway itself (gw_run). */
		int rc = gw_promote(g, reply, sizeof(reply));

		if (gw_promote_retried(rc)) {
			g->want_active = 1;
			g->next_promote = nsdp_now_s() + GW_RETRY_MS / 1000.0;
			NSA_WARN("promote: trying again every %d ms until it "
				 "forwards or a demote comes",
				 GW_RETRY_MS);
		}
	} else if (!strcmp(line, "demote")) {
		g->want_active = 0;
		gw_demote(g, reply, sizeof(reply));
		/* keepalived knows that this gateway is not MASTER. */
		if (g->unfit_epoch)
			NSA_INFO("demote: fit for MASTER again (fenced by "
				 "epoch %" PRIu64 " before)",
				 g->unfit_epoch);
		g->unfit_epoch = 0;
	} else if (!strcmp(line, "status"))
		gw_status(g, reply, sizeof(reply));
	else if (!strcmp(line, "stats"))
		gw_stats(g, reply, sizeof(reply));
	else if (!strcmp(line, "health"))
		gw_health_reply(g, reply, sizeof(reply));
	else
		snprintf(reply, sizeof(reply),
			 "error unknown command '%.64s' (promote, demote, "
			 "status, stats, health)\n",
			 line);
	NSA_INFO("control: %s -> %.*s", line, (int)strcspn(reply, "\n"), reply);
	if (write(fd, reply, strlen(reply)) < 0)
		NSA_WARN("control: reply lost: %s", strerror(errno));
	close(fd);
}

static int mkdir_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(dir, 0755);
		*p = '/';
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int control_listen(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		NSA_ERR("[gateway] control_socket: path longer than %zu bytes",
			sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (mkdir_parent(path) < 0) {
		NSA_ERR("[gateway] control_socket: cannot create the folder "
			"of %s: %s",
			path, strerror(errno));
		return -errno;
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(path, 0600) != 0 || listen(fd, 8) != 0) {
		NSA_ERR("[gateway] control_socket: %s: %s", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	return fd;
}

/* The --ctl client: one command, one reply. */
static int ctl_main(const char *path, const char *cmd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[GW_REPLY_MAX];
	size_t got = 0;
	ssize_t n;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "natsync-gateway: socket path too long\n");
		return 2;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "natsync-gateway: %s: %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return 2;
	}
	dprintf(fd, "%s\n", cmd);
	shutdown(fd, SHUT_WR);
	while (got < sizeof(buf) - 1 &&
	       (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	fputs(buf, stdout);
	return strncmp(buf, "ok", 2) == 0 ? 0 : 1;
}

/* ---- start-up and the main loop ---------------------------------------- */

static int gw_setup(struct gw *g)
{
	struct nsdp_nat_conf nc = g->conf.gw.nat;
	unsigned int lcore;

	g->store_quick = nsa_store_conf_quick(&g->conf.agent.store,
					      g->conf.gw.promote_wait_ms);
	g->want_active = g->conf.agent.role == NSA_ROLE_ACTIVE;
	g->store_loop = g->conf.agent.store;
	g->store_loop.connect_timeout_ms = GW_STORE_LOOP_MS;
	g->store_loop.io_timeout_ms = GW_STORE_LOOP_MS;

	lcore = rte_get_next_lcore(-1, 1, 0);
	if (lcore >= RTE_MAX_LCORE) {
		NSA_ERR("the gateway needs a forwarding lcore besides the "
			"main one (e.g. -l 0,1 in [agent] eal_args)");
		return -EINVAL;
	}
	g->fwd_lcore = lcore;
	g->pool = rte_pktmbuf_pool_create("natsync_gw_mbufs", g->conf.gw.mbufs,
					  256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
					  (int)rte_socket_id());
	if (!g->pool) {
		NSA_ERR("cannot create %u mbufs: %s", g->conf.gw.mbufs,
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	if (port_open(g, g->conf.gw.inside_port, &g->port_in, &nc.inside_mac) <
		    0 ||
	    port_open(g, g->conf.gw.outside_port, &g->port_out,
		      &nc.outside_mac) < 0)
		return -ENODEV;
	g->lane = nsdp_lane_create(0, g->conf.agent.ring_size,
				   (int)rte_socket_id());
	if (!g->lane) {
		NSA_ERR("cannot create the ring %s: %s", "natsync_lane_0",
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	g->table = nsdp_table_create("ngw_table", g->conf.agent.table_capacity);
	if (!g->table) {
		NSA_ERR("cannot create the table of %u sessions",
			g->conf.agent.table_capacity);
		return -ENOMEM;
	}
	/* [standby] table_capacity_v6: NAT64 sessions, and the IPv6
	 * sessions the subscriber applies */
	if (g->conf.agent.table_capacity_v6 > 0 &&
	    nsdp_table_add_v6(g->table, g->conf.agent.table_capacity_v6) != 0) {
		NSA_ERR("cannot create the IPv6 table of %u sessions",
			g->conf.agent.table_capacity_v6);
		return -ENOMEM;
	}
	g->sb = nsa_standby_create_on(&g->conf.agent, g->table);
	if (!g->sb)
		return -ENOMEM;
	nc.mbuf_pool = g->pool;
	g->nat = nsdp_nat_create(&nc, g->table, g->lane);
	if (!g->nat) {
		NSA_ERR("cannot create the NAT: %s", strerror(errno));
		return -ENOMEM;
	}
	g->listen_fd = control_listen(g->conf.gw.control_socket);
	if (g->listen_fd < 0)
		return g->listen_fd;
	if (ngw_metrics_start(g) != 0)
		return -EADDRINUSE;
	if (ngw_caller_start(&g->caller) != 0) {
		NSA_ERR("cannot start the store-call thread");
		return -ENOMEM;
	}
	if (nsa_standby_start(g->sb) != 0)
		return -EIO;
	ngw_fwd_init(&g->fwd, g->nat, g->port_in, g->port_out);
	g->fwd.idle_sleep_us = g->conf.gw.idle_sleep_us;
	rte_eal_remote_launch(ngw_fwd_main, &g->fwd, g->fwd_lcore);
	NSA_INFO("gateway %u: forwarding on lcore %u, standby until "
		 "promoted, control socket %s",
		 g->conf.agent.gateway_id, g->fwd_lcore,
		 g->conf.gw.control_socket);
	if (g->conf.gw.nat.defer_max_us)
		NSA_INFO("defer: a new session's first packet waits for its "
			 "record's acknowledgement, at most %u us",
			 g->conf.gw.nat.defer_max_us);
	return 0;
}

static void gw_progress(struct gw *g, double t)
{
	struct nsdp_nat_stats ns;
	struct nsdp_table_stats ts;

	nsdp_nat_stats(g->nat, &ns);
	nsdp_table_stats(g->table, &ts);
	fprintf(stderr,
		"progress: gateway %.1fs mode %s sessions %" PRIu64
		" rx %" PRIu64 "/%" PRIu64 " tx %" PRIu64 "/%" PRIu64
		" created %" PRIu64 " recorded %" PRIu64 " drops %" PRIu64 "\n",
		t, gw_mode_name(g), ts.live, ns.rx_inside, ns.rx_outside,
		ns.tx_inside, ns.tx_outside, ns.created, ns.recorded,
		ns.record_drops);
}

/* [agent] role = active: whether the promotion may go, after up (s) of
 * running. Not before the cold load ended while the store answers (a
 * table without the stored sessions would hand out ports they hold);
 * after GW_START_WAIT_MS without a store to load from, it goes, on a
 * provisional epoch. A promotion retried after a failure goes at once. */
static int gw_load_done(struct gw *g, double up)
{
	struct nsa_standby_stats ss;
	uint64_t epoch;
	char err[512];

	if (g->promote_tried)
		return 1;
	nsa_standby_stats(g->sb, &ss);
	if (ss.synced)
		return 1;
	if (up * 1000 < GW_START_WAIT_MS)
		return 0;
	g->next_promote = nsdp_now_s() + GW_RETRY_MS / 1000.0;
	if (nsa_fence_read(&g->store_loop, NULL, &epoch, err, sizeof(err)) ==
	    0) {
		if (!g->load_wait_said)
			NSA_WARN("start: cold load not done after %d ms, the "
				 "store answers: promoting when it ends",
				 GW_START_WAIT_MS);
		g->load_wait_said = 1;
		return 0;
	}
	NSA_WARN("start: cold load not done after %d ms and the store does "
		 "not answer (%s): promoting on what the table holds",
		 GW_START_WAIT_MS, err);
	return 1;
}

static int gw_run(struct gw *g, double duration)
{
	double t0 = nsdp_now_s(), last_progress = t0;
	char reply[GW_REPLY_MAX];

	nsa_sd_ready("standby until promoted");
	while (!nsa_cli_stopping()) {
		double t = nsdp_now_s();

		nsa_sd_watchdog();
		/* Also serves [metrics] (nsa_metrics.h), on this thread. */
		if (nsa_metrics_wait(g->metrics, 50, g->listen_fd))
			control_serve(g);
		gw_unstick(g);
		gw_readback_poll(g, t);
		gw_store_step(g, t);
		if (g->want_active && t >= g->next_promote &&
		    gw_load_done(g, t - t0)) {
			int rc = gw_promote(g, reply, sizeof(reply));

			g->want_active = gw_promote_retried(rc);
			g->next_promote = t + GW_RETRY_MS / 1000.0;
		}
		if (duration > 0 && t - t0 >= duration)
			break;
		if (g->conf.agent.progress_ms &&
		    (t - last_progress) * 1000 >= g->conf.agent.progress_ms) {
			gw_progress(g, t - t0);
			last_progress = t;
		}
	}
	return 0;
}

static void gw_teardown(struct gw *g)
{
	struct nsdp_nat_stats ns = {0};
	struct nsdp_table_stats ts = {0};
	struct nsa_active_stats as = {0};

	gw_readback_stop(g);
	if (g->nat && nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE)
		nsdp_nat_deactivate(g->nat, GW_MODE_TIMEOUT_MS);
	if (g->active) {
		nsa_active_drain(g->active, GW_DRAIN_MS);
		nsa_active_stats(g->active, &as);
		nsa_active_stop(g->active);
		nsa_active_free(g->active);
	}
	ngw_fwd_stop(&g->fwd);
	rte_eal_mp_wait_lcore();
	if (g->nat)
		nsdp_nat_stats(g->nat, &ns);
	if (g->sb) {
		nsa_standby_stop(g->sb);
		nsdp_table_stats(g->table, &ts);
	}
	printf("REPORT role=gateway sessions=%" PRIu64 " created=%" PRIu64
	       " closed=%" PRIu64 " expired=%" PRIu64 " recorded=%" PRIu64
	       " record_drops=%" PRIu64 " acked=%" PRIu64 " promotions=%" PRIu64
	       " rx_inside=%" PRIu64 " rx_outside=%" PRIu64 "\n",
	       ts.live, ns.created, ns.closed, ns.expired, ns.recorded,
	       ns.record_drops, as.acked, g->promotions, ns.rx_inside,
	       ns.rx_outside);
	fflush(stdout);
	nsa_metrics_stop(g->metrics);
	if (g->listen_fd > 0) {
		close(g->listen_fd);
		unlink(g->conf.gw.control_socket);
	}
	ngw_caller_stop(&g->caller);
	nsdp_nat_free(g->nat);
	nsa_standby_free(g->sb);
	nsdp_table_free(g->table);
	/* With agent = external a natsync-agent may still be draining the
	 * lane through its own mapping of our memory until it notices we are
	 * gone: freeing the lane would free and zero its ring under the
	 * agent's writer threads (DPDK clears freed heap memory). The memory
	 * goes when the last process using it detaches. */
	if (g->lane && g->conf.gw.agent != NGW_AGENT_EXTERNAL)
		nsdp_lane_free(g->lane);
}

/* natsync-gateway's own check: [gateway] and the NAT's configuration. */
static int gw_config_check(const struct nsa_config *agent, char *err,
			   size_t errlen)
{
	const struct ngw_config *c = (const struct ngw_config *)agent;

	if (ngw_config_check(c, err, errlen) != 0)
		return -1;
	return nsdp_nat_conf_check(&c->gw.nat, err, errlen);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		NSA_CLI_LONGOPTS,
		{"ctl", required_argument, NULL, 'C'},
		{"socket", required_argument, NULL, 'S'},
		NSA_CLI_HELP_LONGOPTS,
	};
	static struct gw g;
	struct nsa_cli cli = {
		.prog = "natsync-gateway",
		.usage = usage,
		.keys = &ngw_config_keys,
		.check = gw_config_check,
	};
	const char *ctl = NULL, *socket_path = NULL;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, NSA_CLI_OPTSTRING "C:S:", opts,
				  NULL)) != -1) {
		if (opt == 'C')
			ctl = optarg;
		else if (opt == 'S')
			socket_path = optarg;
		else if ((rc = nsa_cli_option(&cli, opt, optarg)) !=
			 NSA_CLI_RUN)
			return rc;
	}
	if (ctl && socket_path)
		return ctl_main(socket_path, ctl);
	if (ctl) {
		ngw_config_defaults(&g.conf);
		if (cli.config_path &&
		    nsa_cli_load(&cli, &g.conf.agent, cli.config_path))
			return 2;
		return ctl_main(g.conf.gw.control_socket, ctl);
	}
	if ((rc = nsa_cli_config(&cli, &g.conf.agent)) != NSA_CLI_RUN)
		return rc;
	if (nsa_cli_start(&cli, &g.conf.agent, argc - optind, argv + optind,
			  "0,1", NSA_CLI_CATCH_STOP) != 0)
		return 2;

	rc = gw_setup(&g) == 0 ? gw_run(&g, cli.duration) : 1;
	nsa_sd_stopping();
	gw_teardown(&g);
	rte_eal_cleanup();
	return rc;
}
