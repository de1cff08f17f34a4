/*
 * nsdp_nat_session.h - the NAT44's outside ports and the life of its
 * sessions (nsdp_nat_session.c): create, refresh, close, each stored in
 * the table and recorded into the lane. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT_SESSION_H
#define NSDP_NAT_SESSION_H

#include <stdint.h>

#include "nsdp_nat_state.h"

/* Every port free again (and the unusable tail bits set). */
void nsdp_nat_maps_clear(struct nsdp_nat *nat);

/* Mark the port a replicated session holds. */
void nsdp_nat_port_mark(struct nsdp_nat *nat, uint8_t proto, uint32_t addr,
			uint16_t port);

/* Side state for a session this lcore did not create (replicated, or a
 * position it finds reused): its idle timer restarts at now. */
void nsdp_nat_side_adopt(const struct nsdp_nat *nat, struct side *sd,
			 const struct ns_session *s, uint64_t now);

/* Take s (an earlier active's session read back from the store) into the
 * table at now: 0; -EEXIST when the table holds its flow (or a newer
 * end of it); -EADDRINUSE when its port is another session's (its end is
 * recorded); -ENOSPC when the table is full. A port outside the pool is
 * taken as the standby takes it, unmarked. */
int nsdp_nat_session_adopt(struct nsdp_nat *nat, const struct ns_session *s,
			   uint64_t now);
/* The same for an IPv6 session (NAT64 or NAT66: the caller checked that
 * this gateway translates its family). */
int nsdp_nat6_session_adopt(struct nsdp_nat *nat, const struct ns_rec *r,
			    uint64_t now);

/* Create the session of p's outbound flow into *s; its position, or -1
 * with *why the counter of the reason. */
int32_t nsdp_nat_session_create(struct nsdp_nat *nat, const struct pkt *p,
				uint64_t now, struct ns_session *s,
				uint64_t **why);

/* Store s again with sd's timeout and now, and record it. */
void nsdp_nat_session_refresh(struct nsdp_nat *nat, struct side *sd,
			      struct ns_session *s, uint64_t now);

/* Remove the session s at pos, free its port and record its end. */
void nsdp_nat_session_close(struct nsdp_nat *nat, int32_t pos,
			    struct ns_session *s, uint64_t now);

/* Mark the port a replicated IPv6 session holds: in the pool's maps for
 * NAT64, in outside_addr6's for NAT66. */
void nsdp_nat6_port_mark(struct nsdp_nat *nat, const struct ns_rec *r);

/* The same for NAT64 sessions (family 64, in the IPv6 table; positions
 * are the IPv6 table's, side state in side6). Adopt, refresh and close
 * take a NAT66 session as well. */
void nsdp_nat64_side_adopt(const struct nsdp_nat *nat, struct side6 *sd6,
			   const struct ns_rec *r, uint64_t now);
int32_t nsdp_nat64_session_create(struct nsdp_nat *nat, const struct pkt6 *p,
				  uint64_t now, struct ns_rec *r,
				  uint64_t **why);
void nsdp_nat64_session_refresh(struct nsdp_nat *nat, struct side *sd,
				struct ns_rec *r, uint64_t now);
void nsdp_nat64_session_close(struct nsdp_nat *nat, int32_t pos,
			      struct ns_rec *r, uint64_t now);

/* Create the NAT66 session of p's outbound flow (family 6, from
 * outside_addr6 and a port of its maps) into *r: its position in the IPv6
 * table, or -1 with *why the counter of the reason. */
int32_t nsdp_nat66_session_create(struct nsdp_nat *nat, const struct pkt6 *p,
				  uint64_t now, struct ns_rec *r,
				  uint64_t **why);

/* The port maps of outside_addr6 (NAT66 on): 0 or -ENOMEM; freed with
 * rte_free(nat->map6_bits). */
int nsdp_nat66_maps_init(struct nsdp_nat *nat);

#endif
