/*
 * nsb_gw_arp.c - natsync-gwbench's ARP responder, for the next hop on the
 * outside and the inside hosts: what the gateway asks for (its neighbour
 * cache, nsdp_nat's) is answered so that it forwards.
 *
 * Not here: requests the bench's hosts would send (the gateway learns
 * them from the replies), gratuitous ARP.
 */
#include <rte_arp.h>
#include <rte_byteorder.h>

#include "nsb_gw_arp.h"

int nsb_gw_arp_answer(struct rte_mbuf *m, uint32_t lo, uint32_t hi,
		      uint32_t except, const struct rte_ether_addr *mac)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp;
	uint32_t tip, sip;

	if (m->data_len < RTE_ETHER_HDR_LEN + sizeof(*arp))
		return 0;
	arp = (struct rte_arp_hdr *)(eth + 1);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST))
		return 0;
	tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
	sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
	if (tip < lo || tip > hi || tip == except || tip == sip)
		return 0;
	eth->dst_addr = eth->src_addr;
	eth->src_addr = *mac;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	arp->arp_data.arp_tha = arp->arp_data.arp_sha;
	arp->arp_data.arp_tip = arp->arp_data.arp_sip;
	arp->arp_data.arp_sha = *mac;
	arp->arp_data.arp_sip = rte_cpu_to_be_32(tip);
	return 1;
}
