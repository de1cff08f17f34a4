/*
 * ngw_config.c - the [gateway] section of natsync-gateway's configuration:
 * its keys (with help, for the generated reference), how the NAT's
 * configuration follows from them and from [agent] and [standby], and the
 * check the gateway makes before it starts.
 *
 * The agent's parser does the parsing, the printing and the error
 * messages; this file only adds a key table whose offsets count from the
 * start of struct ngw_config. natsync-agent registers the same table, so
 * that one file can serve a gateway and its agents (it accepts and
 * ignores [gateway]).
 *
 * Not here: opening ports or creating the NAT (natsync_gateway.c).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ngw_config.h"
#include "nsa_config_key.h"

static const char *const ngw_agent_names[] = {"threads", "external", NULL};

_Static_assert(sizeof(enum ngw_agent) == sizeof(uint32_t), "enum size");
_Static_assert(NGW_AGENT_EXTERNAL == 1, "names follow the enum");
_Static_assert(offsetof(struct ngw_config, agent) == 0,
	       "the agent's configuration comes first");
_Static_assert(NSA_ADJACENT(struct nsdp_nat_conf, pool_first, pool_last),
	       "pool_last follows pool_first");
_Static_assert(NSA_ADJACENT(struct nsdp_nat_conf, port_min, port_max),
	       "port_max follows port_min");

/* Idle timeouts, seconds: up to a week. */
#define NGW_TIMEOUT_MAX 604800

#define NSA_KEY_STRUCT struct ngw_config

static const struct
	nsa_key
		ngw_keys
			[] =
				{
					NSA_STR("gateway", "inside_port",
						gw.inside_port, "",
						"DPDK device of the inside port: an ethdev name such as `net_af_packet0` (made by `--vdev=net_af_packet0,iface=veth0` in `eal_args`) or a PCI address such as `0000:3b:00.0`."),
					NSA_STR("gateway", "outside_port",
						gw.outside_port, "",
						"DPDK device of the outside port, named as `inside_port`, and a different one."),
					NSA_IPV4(
						"gateway", "inside_address",
						gw.nat.inside_addr, "",
						"The gateway's own IPv4 address on the inside."),
					NSA_IPV4_RANGE(
						"gateway", "pool",
						gw.nat.pool_first,
						gw.nat.pool_last,
						NSDP_NAT_MAX_POOL, "",
						"The outside addresses inside sources are translated to."),
					NSA_IPV4(
						"gateway", "next_hop",
						gw.nat.next_hop, "",
						"IPv4 address of the outside router; empty = destinations are on-link."),
					NSA_PORT_RANGE(
						"gateway", "ports",
						gw.nat.port_min,
						gw.nat.port_max, 1, 65535,
						"1024-65535",
						"Translated source ports and ICMP echo ids."),
					NSA_NUM("gateway", "tcp_syn_timeout",
						gw.tcp_syn_timeout, 1,
						NGW_TIMEOUT_MAX, "20",
						"Idle timeout of a TCP session whose SYN has no answer yet, s."),
					NSA_NUM("gateway",
						"tcp_established_timeout",
						gw.tcp_established_timeout, 1,
						NGW_TIMEOUT_MAX, "7440",
						"Idle timeout of an established TCP session, s; RFC 5382 asks for at least 2 h 4 min."),
					NSA_NUM("gateway",
						"tcp_closing_timeout",
						gw.tcp_closing_timeout, 1,
						NGW_TIMEOUT_MAX, "10",
						"Idle timeout of a TCP session after a FIN, s."),
					NSA_NUM("gateway", "udp_timeout",
						gw.udp_timeout, 1,
						NGW_TIMEOUT_MAX, "300",
						"Idle timeout of a UDP session, s; RFC 4787 asks for at least 2 min and recommends 5."),
					NSA_NUM("gateway", "icmp_timeout",
						gw.icmp_timeout, 1,
						NGW_TIMEOUT_MAX, "30",
						"Idle timeout of an ICMP echo session, s."),
					NSA_STR("gateway", "control_socket",
						gw.control_socket,
						"/run/natsync/gateway.sock",
						"The Unix socket the gateway takes control commands on."),
					NSA_ENUM(
						"gateway", "agent", gw.agent,
						ngw_agent_names, "threads",
						"`threads` runs the replication writers and the standby subscriber inside the gateway; `external` leaves the rings to a natsync-agent secondary process (`[rings] attach = yes`) and keeps only the subscriber. `external` needs hugepages and `eal_args` without `--no-huge` and `--no-shconf`."),
					NSA_NUM("gateway", "idle_sleep_us",
						gw.idle_sleep_us, 0, 100000,
						"0",
						"Sleep after a poll that found nothing, µs; `0` = busy poll."),
					NSA_NUM("gateway", "fence_check_ms",
						gw.fence_check_ms, 10, 60000,
						"200",
						"While active, how often the store's promotion epoch (`natsync:epoch`, its gateway pair's counter) is read, ms: a newer epoch means another gateway was promoted, and this one demotes itself. The bound on how long a partitioned old active forwards (its store writes stop at the promotion; see docs/failure-modes.md)."),
					NSA_NUM("gateway", "promote_wait_ms", gw.promote_wait_ms, 1, 60000, "50", "A promotion asks the store for its epoch and waits at most this long, ms (for the topology over all seeds together, then each connect and each reply). Without an answer by then it forwards at once on a provisional epoch made from the highest epoch it saw and the low byte of `[agent] gateway_id` (which must then be nonzero and differ between the gateways of a store), and makes it known to the store once the store answers (see docs/gateway-and-failover.md). With a `gateway_id` whose low byte is 0 the promotion is refused instead."),
					NSA_BOOL(
						"gateway", "defer", gw.defer,
						"no",
						"Hold the first packet of every new session until the store has acknowledged its record (and so every standby can have it), as OpenBSD pfsync's defer: then no session whose first packet left the gateway is lost at failover. Costs that packet the time to the store and back (see docs/gateway-and-failover.md); later packets are not held, but for one whose refresh renews a copy the store let expire (counted in `nat.revived`) or that ends within 5 s, which waits for that refresh."),
					NSA_NUM("gateway", "defer_max_us",
						gw.defer_max_us, 10, 500000,
						"2000",
						"With `defer`: the longest a first packet waits, µs; then it goes without the acknowledgement (counted in `defer_timeouts`)."),
					NSA_STR("gateway", "inside_address6",
						gw.inside_address6, "",
						"The gateway's own IPv6 address on the inside (it answers neighbour solicitations for it); setting it turns NAT64 on: inside IPv6 hosts reach IPv4 servers through `nat64_prefix`, translated to the pool (TCP, UDP, ICMPv6 echo, and the ICMP errors about them; see docs/gateway-and-failover.md). Needs `[standby] table_capacity_v6`, where the NAT64 sessions live."),
					NSA_STR("gateway", "nat64_prefix",
						gw.nat64_prefix, "64:ff9b::/96",
						"The NAT64 prefix (RFC 6052): an IPv4 server's address is the destination's low 32 bits. Only a /96."),
					NSA_STR("gateway", "outside_address6",
						gw.outside_address6, "",
						"The gateway's own IPv6 address on the outside (it answers neighbour solicitations for it there); setting it turns NAT66 on: inside IPv6 traffic to destinations outside `nat64_prefix` leaves from this address with a port (TCP, UDP) or ICMPv6 echo id from `ports` (this address's own: no NAT44 or NAT64 session shares it), and the replies come back (see docs/gateway-and-failover.md). Empty = NAT66 off (such traffic is dropped as `not_ours`). Needs `inside_address6`."),
					NSA_STR("gateway", "next_hop6",
						gw.next_hop6, "",
						"With `outside_address6`: IPv6 address of the outside router (it is solicited until it answers); empty = IPv6 destinations are on-link."),
					NSA_NUM("gateway", "rx_descriptors",
						gw.rx_descriptors, 64, 16384,
						"1024",
						"Receive descriptors per port."),
					NSA_NUM("gateway", "tx_descriptors",
						gw.tx_descriptors, 64, 16384,
						"1024",
						"Transmit descriptors per port."),
					NSA_NUM("gateway", "mbufs", gw.mbufs,
						1023, 1048575, "8191",
						"Mbufs in the gateway's packet pool."),
};

/* The address and length of an IPv6 prefix "addr/len" into addr; the
 * length, or -1 when text is not one. */
static int ngw_prefix6(const char *text, uint8_t addr[16])
{
	char buf[64];
	char *slash, *end;
	long len;

	memset(addr, 0, 16);
	if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
		return -1;
	slash = strchr(buf, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	len = strtol(slash + 1, &end, 10);
	if (*end || end == slash + 1 || len < 0 || len > 128 ||
	    inet_pton(AF_INET6, buf, addr) != 1) {
		memset(addr, 0, 16);
		return -1;
	}
	return (int)len;
}

/* text as an IPv6 address into addr; all zeroes when empty or not one
 * (ngw_config_check reports what does not parse). */
static void ngw_addr6(const char *text, uint8_t addr[16])
{
	if (!text[0] || inet_pton(AF_INET6, text, addr) != 1)
		memset(addr, 0, 16);
}

/* The NAT's configuration from [gateway], [agent] gateway_id and [standby]
 * table_capacity. */
static void ngw_config_derive(struct nsa_config *agent)
{
	struct ngw_config *c = (struct ngw_config *)agent;
	struct nsdp_nat_conf *nat = &c->gw.nat;

	nat->gateway_id = agent->gateway_id;
	nat->max_sessions = agent->table_capacity;
	/* At most 604800 s: the products fit in 32 bits. */
	nat->tcp_syn_ms = c->gw.tcp_syn_timeout * 1000u;
	nat->tcp_established_ms = c->gw.tcp_established_timeout * 1000u;
	nat->tcp_closing_ms = c->gw.tcp_closing_timeout * 1000u;
	nat->udp_ms = c->gw.udp_timeout * 1000u;
	nat->icmp_ms = c->gw.icmp_timeout * 1000u;
	nat->defer_max_us = c->gw.defer ? c->gw.defer_max_us : 0;
	/* ngw_config_check reports what does not parse */
	if (!c->gw.inside_address6[0] ||
	    inet_pton(AF_INET6, c->gw.inside_address6, nat->inside_addr6) != 1)
		memset(nat->inside_addr6, 0, sizeof(nat->inside_addr6));
	nat->nat64_prefix_len =
		(uint8_t)ngw_prefix6(c->gw.nat64_prefix, nat->nat64_prefix);
	ngw_addr6(c->gw.outside_address6, nat->outside_addr6);
	ngw_addr6(c->gw.next_hop6, nat->next_hop6);
}

const struct nsa_key_table ngw_config_keys = {
	.keys = ngw_keys,
	.n_keys = sizeof(ngw_keys) / sizeof(ngw_keys[0]),
	.size = sizeof(struct ngw_config),
	.derive = ngw_config_derive,
};

void ngw_config_defaults(struct ngw_config *c)
{
	nsa_config_defaults_ext(&c->agent, &ngw_config_keys);
}

/* -1 with the reason in err when addr, the value of key, is in the pool. */
static int ngw_in_pool(const struct nsdp_nat_conf *nat, uint32_t addr,
		       const char *key, char *err, size_t errlen)
{
	char a[INET_ADDRSTRLEN], first[INET_ADDRSTRLEN], last[INET_ADDRSTRLEN];

	if (addr < nat->pool_first || addr > nat->pool_last)
		return 0;
	nsa_format_ipv4(addr, a, sizeof(a));
	nsa_format_ipv4(nat->pool_first, first, sizeof(first));
	nsa_format_ipv4(nat->pool_last, last, sizeof(last));
	snprintf(err, errlen, "[gateway] %s: %s is in the pool %s-%s", key, a,
		 first, last);
	return -1;
}

/* NAT64 (when inside_address6 is set): an IPv6 address outside the
 * prefix, a /96 prefix, and an IPv6 table for its sessions. */
static int ngw_check_nat64(const struct ngw_config *c, char *err,
			   size_t errlen)
{
	const struct ngw_gateway_conf *gw = &c->gw;
	uint8_t a[16], p[16];

	if (!gw->inside_address6[0])
		return 0;
	if (inet_pton(AF_INET6, gw->inside_address6, a) != 1 || a[0] == 0xff) {
		snprintf(err, errlen,
			 "[gateway] inside_address6: %s is not a unicast "
			 "IPv6 address",
			 gw->inside_address6);
		return -1;
	}
	if (ngw_prefix6(gw->nat64_prefix, p) != 96) {
		snprintf(err, errlen,
			 "[gateway] nat64_prefix: %s is not an IPv6 /96 "
			 "prefix (the only length supported)",
			 gw->nat64_prefix);
		return -1;
	}
	if (memcmp(a, p, 12) == 0) {
		snprintf(err, errlen,
			 "[gateway] inside_address6: %s is in the NAT64 "
			 "prefix %s",
			 gw->inside_address6, gw->nat64_prefix);
		return -1;
	}
	if (c->agent.table_capacity_v6 == 0) {
		snprintf(err, errlen,
			 "[standby] table_capacity_v6: NAT64 "
			 "(inside_address6) needs an IPv6 table; set it");
		return -1;
	}
	return 0;
}

/* NAT66 (when outside_address6 is set): a global unicast address other
 * than inside_address6 and outside the prefix, NAT64 on, a next hop that
 * parses. */
static int ngw_check_nat66(const struct ngw_config *c, char *err, size_t errlen)
{
	const struct ngw_gateway_conf *gw = &c->gw;
	char why[128];
	uint8_t a[16];

	if (gw->next_hop6[0] && inet_pton(AF_INET6, gw->next_hop6, a) != 1) {
		snprintf(err, errlen,
			 "[gateway] next_hop6: %s is not an IPv6 address",
			 gw->next_hop6);
		return -1;
	}
	if (!gw->outside_address6[0])
		return 0;
	if (inet_pton(AF_INET6, gw->outside_address6, a) != 1) {
		snprintf(err, errlen,
			 "[gateway] outside_address6: %s is not an IPv6 "
			 "address",
			 gw->outside_address6);
		return -1;
	}
	if (!gw->inside_address6[0]) {
		snprintf(err, errlen,
			 "[gateway] outside_address6: NAT66 needs "
			 "inside_address6 (the inside hosts' IPv6 router); "
			 "set it");
		return -1;
	}
	if (nsdp_nat_conf_check(&gw->nat, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "[gateway] outside_address6: %s", why);
		return -1;
	}
	return 0;
}

/* What natsync-gateway needs on top of nsa_config_finish: two distinct
 * ports, its inside address outside a non-empty pool, a non-empty port
 * range and one lane (one forwarding lcore). The first problem found is
 * reported, naming its key. */
int ngw_config_check(const struct ngw_config *c, char *err, size_t errlen)
{
	const struct ngw_gateway_conf *gw = &c->gw;
	const struct nsdp_nat_conf *nat = &gw->nat;
	char first[INET_ADDRSTRLEN], last[INET_ADDRSTRLEN];

	nsa_format_ipv4(nat->pool_first, first, sizeof(first));
	nsa_format_ipv4(nat->pool_last, last, sizeof(last));
	if (!gw->inside_port[0]) {
		snprintf(err, errlen, "[gateway] inside_port: not set");
		return -1;
	}
	if (!gw->outside_port[0]) {
		snprintf(err, errlen, "[gateway] outside_port: not set");
		return -1;
	}
	if (strcmp(gw->inside_port, gw->outside_port) == 0) {
		snprintf(err, errlen,
			 "[gateway] outside_port: %s is also inside_port",
			 gw->outside_port);
		return -1;
	}
	if (nat->inside_addr == 0) {
		snprintf(err, errlen, "[gateway] inside_address: not set");
		return -1;
	}
	if (nat->pool_first == 0 || nat->pool_last == 0) {
		snprintf(err, errlen, "[gateway] pool: not set");
		return -1;
	}
	if (nat->pool_first > nat->pool_last) {
		snprintf(err, errlen,
			 "[gateway] pool: range is empty (%s after %s)", first,
			 last);
		return -1;
	}
	if (nat->pool_last - nat->pool_first >= NSDP_NAT_MAX_POOL) {
		snprintf(err, errlen,
			 "[gateway] pool: %s-%s holds more than %d addresses",
			 first, last, NSDP_NAT_MAX_POOL);
		return -1;
	}
	if (ngw_in_pool(nat, nat->inside_addr, "inside_address", err, errlen) ||
	    ngw_in_pool(nat, nat->next_hop, "next_hop", err, errlen))
		return -1;
	if (nat->port_min == 0 || nat->port_min > nat->port_max) {
		snprintf(err, errlen,
			 "[gateway] ports: range %u-%u is empty or starts at 0",
			 nat->port_min, nat->port_max);
		return -1;
	}
	if (ngw_check_nat64(c, err, errlen) || ngw_check_nat66(c, err, errlen))
		return -1;
	if (c->agent.lanes != 1) {
		snprintf(err, errlen,
			 "[rings] lanes: natsync-gateway forwards on one lcore "
			 "into one lane; set lanes = 1 (not %u)",
			 c->agent.lanes);
		return -1;
	}
	return 0;
}
