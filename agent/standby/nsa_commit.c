/*
 * nsa_commit.c - opening the standby's conntrack committer from its
 * configuration, and the deletes a resync hands it.
 *
 * Invariants: one thread (the subscriber) owns the committer; a delete is
 * stamped just after the session's last record, so that conntrack takes
 * it as newer than what was committed.
 *
 * Not here: the ctnetlink messages (dataplane/kernel/nsdp_ctcommit.c);
 * when to queue and flush (nsa_standby.c, nsa_resync.c).
 */
#include <stdio.h>

#include "nsa_commit.h"
#include "nsa_log.h"

struct nsdp_ctcommit *nsa_commit_open(const struct nsa_config *conf)
{
	struct nsdp_ctcommit_conf cc = {.batch_bytes = conf->commit_batch_bytes,
					.mark = conf->commit_mark,
					.zone = (uint16_t)conf->commit_zone};
	struct nsdp_ctcommit *ct;
	char err[256] = "";

	snprintf(cc.netns, sizeof(cc.netns), "%s", conf->commit_netns);
	ct = nsdp_ctcommit_open(&cc, err, sizeof(err));
	if (!ct) {
		NSA_ERR("standby: [standby] commit = conntrack: %s", err);
		return NULL;
	}
	NSA_INFO("standby: committing sessions to conntrack%s%s",
		 cc.netns[0] ? " in netns " : "", cc.netns);
	return ct;
}

void nsa_commit_remove(const struct ns_session *s, void *ct)
{
	struct ns_rec del = {.s = *s};

	if (ns_session_lines(s) == 2) /* NAT66: its addresses too */
		del.v6 = *ns_session_v6_of(s);
	del.s.event = NS_EV_DELETE;
	del.s.timestamp_ns++; /* newer than what was committed */
	nsdp_ctcommit_add(ct, &del.s);
}
