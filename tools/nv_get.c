/*
 * nv_get.c - natsync-verify --get (nv_get.h): the tuple parsed, the
 * master that owns its key loaded as a standby loads it (nv_table.c), the
 * session of that flow printed as JSON.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ns_slot.h"
#include "nv_get.h"
#include "nv_table.h"

/* proto's name (tcp, udp, icmp, icmpv6 or a number) into *proto. */
static int proto_parse(const char *p, uint8_t *proto)
{
	unsigned int n;
	int used = 0;

	if (strcasecmp(p, "tcp") == 0)
		*proto = IPPROTO_TCP;
	else if (strcasecmp(p, "udp") == 0)
		*proto = IPPROTO_UDP;
	else if (strcasecmp(p, "icmp") == 0)
		*proto = IPPROTO_ICMP;
	else if (strcasecmp(p, "icmpv6") == 0)
		*proto = IPPROTO_ICMPV6;
	else if (sscanf(p, "%u%n", &n, &used) == 1 && p[used] == '\0' &&
		 n > 0 && n < 256)
		*proto = (uint8_t)n;
	else
		return -EINVAL;
	return 0;
}

/* "PROTO:SADDR:SPORT-DADDR:DPORT", or with IPv6 addresses in brackets
 * ("tcp:[2001:db8::1]:40000-[64:ff9b::5db8:d822]:443"), into r: an IPv4
 * tuple into r->s.orig, an IPv6 one's addresses into r->v6 (r->s.family
 * NS_FAMILY_NAT66: the key and the flow are the same for NAT64). For
 * ICMP the ports are the echo identifier and 0. */
static int tuple_parse(const char *text, struct ns_rec *r)
{
	char p[16], sa[64], da[64];
	unsigned int sp, dp;
	struct in_addr a;
	int used = 0, v6 = strchr(text, '[') != NULL;

	if ((v6 ? sscanf(text, "%15[^:]:[%63[^]]]:%u-[%63[^]]]:%u%n", p, sa,
			 &sp, da, &dp, &used)
		: sscanf(text, "%15[^:]:%63[^:]:%u-%63[^:]:%u%n", p, sa, &sp,
			 da, &dp, &used)) != 5 ||
	    text[used] != '\0' || sp > 65535 || dp > 65535 ||
	    proto_parse(p, &r->s.proto) < 0)
		return -EINVAL;
	r->s.orig.sport = (uint16_t)sp;
	r->s.orig.dport = (uint16_t)dp;
	if (v6) {
		r->s.family = NS_FAMILY_NAT66;
		return inet_pton(AF_INET6, sa, r->v6.orig_saddr) == 1 &&
				       inet_pton(AF_INET6, da,
						 r->v6.orig_daddr) == 1
			       ? 0
			       : -EINVAL;
	}
	if (inet_pton(AF_INET, sa, &a) != 1)
		return -EINVAL;
	r->s.orig.saddr = ntohl(a.s_addr);
	if (inet_pton(AF_INET, da, &a) != 1)
		return -EINVAL;
	r->s.orig.daddr = ntohl(a.s_addr);
	return 0;
}

/* --get: the session of tuple as the store holds it. 0 printed, 1 not in
 * the store, 2 an error (printed). */
int nv_get_session(const struct nsa_config *conf, const char *tuple,
		   int64_t only_pair)
{
	struct nv_table t = {.name = "store", .only_pair = only_pair};
	struct ns_rec want;
	uint8_t key[NS_KEY_MAX];
	char js[512];
	int found = -1;

	memset(&want, 0, sizeof(want));
	want.s.family = NS_FAMILY_IPV4;
	if (tuple_parse(tuple, &want) < 0) {
		fprintf(stderr,
			"natsync-verify: --get: '%s' is not "
			"PROTO:SADDR:SPORT-DADDR:DPORT (e.g. "
			"tcp:10.0.0.1:40000-198.51.100.7:443, or "
			"tcp:[2001:db8::1]:40000-[64:ff9b::5db8:d822]:443)\n",
			tuple);
		return 2;
	}
	if (nv_table_read_store(
		    &t, conf, ns_key_slot(key, ns_key_of(&want.s, key))) < 0) {
		free(t.s);
		return 2;
	}
	for (size_t i = 0; i < t.n && found < 0; i++)
		if (ns_session_same_flow(&t.s[i].s, &want.s))
			found = (int)i;
	if (found >= 0) {
		ns_record_to_json(&t.s[found].s, js, sizeof(js));
		printf("%s\n", js);
	} else {
		fprintf(stderr, "natsync-verify: %s: not in the store\n",
			tuple);
	}
	free(t.s);
	return found >= 0 ? 0 : 1;
}
