/*
 * nsb_gw_report.h - what natsync-gwbench says about a measured round (or
 * one gateway's slices): its line on stdout, its warnings on stderr, its
 * CSV row, and the figures the summary takes from it.
 */
#ifndef NSB_GW_REPORT_H
#define NSB_GW_REPORT_H

#include "nsb_gw.h"
#include "nsb_gw_sched.h"
#include "nsb_gw_traffic.h"

/* Packets per second of the gateway's part of the loop (stalls left out),
 * of the whole loop, and cycles per packet of the gateway's part. */
double nsb_gw_round_gw_pps(const struct nsb_gw_round *r);
double nsb_gw_round_loop_pps(const struct nsb_gw_round *r);
double nsb_gw_round_cycles_per_pkt(const struct nsb_gw_round *r);

/* Print r's line and what went wrong; 0 if the round is usable, -1 if
 * the gateway forwarded nothing. */
int nsb_gw_round_report(const struct nsb_gw_round *r,
			const struct nsb_gw_gen *g);

/* Append r as one row to path, with the header when the file is new. */
void nsb_gw_csv_append(const char *path, const struct nsb_gw_opts *o,
		       const struct nsb_gw_round *r);

#endif
