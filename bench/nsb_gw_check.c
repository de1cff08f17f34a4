/*
 * nsb_gw_check.c - natsync-gwbench --verify: checks a translated packet's
 * checksums from scratch (nsb_frame.h) and its translated address, in the
 * generator, outside the timed part of the loop.
 *
 * Not here: ports (the NAT's own tests check them, byte by byte), ICMP
 * (the bench sends none).
 */
#include <netinet/in.h>

#include <rte_byteorder.h>
#include <rte_ip.h>

#include "nsb_frame.h"
#include "nsb_gw.h"
#include "nsb_gw_check.h"

int nsb_gw_packet_ok(struct rte_mbuf *m, int outside, uint32_t lo, uint32_t hi)
{
	struct rte_ipv4_hdr *ip =
		rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, NSB_GW_L3);
	uint32_t addr;
	uint16_t got, want;

	if (m->data_len < NSB_GW_FRAME ||
	    rte_raw_cksum(ip, sizeof(*ip)) != 0xffff)
		return 0;
	addr = rte_be_to_cpu_32(outside ? ip->src_addr : ip->dst_addr);
	if (addr < lo || addr > hi)
		return 0;
	if (ip->next_proto_id != IPPROTO_UDP &&
	    ip->next_proto_id != IPPROTO_TCP)
		return 0;
	nsb_frame_l4_cksums(ip, &got, &want);
	return got == want;
}
