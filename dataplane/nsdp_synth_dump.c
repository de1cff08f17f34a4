/*
 * nsdp_synth_dump.c - the synthetic source's final table written to a
 * file: every live flow's last record in its wire form, one after the
 * other (a table file for natsync-verify), through a temporary file that
 * is synced and renamed into place, so that a reader never sees half of
 * one.
 *
 * Not here: which flows are live (nsdp_synth_final_table, nsdp_synth.c).
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "ns_record.h"
#include "nsdp_synth.h"

struct nsdp_dump_ctx {
	FILE *f;
	int err;
};

static void nsdp_dump_one(const struct ns_session *r, void *arg)
{
	struct nsdp_dump_ctx *ctx = arg;
	uint8_t buf[NS_RECORD_MAX_LEN];
	int len;

	if (ctx->err)
		return;
	len = ns_record_encode(r, buf, sizeof(buf));
	if (len < 0) {
		ctx->err = len;
		return;
	}
	if (fwrite(buf, 1, (size_t)len, ctx->f) != (size_t)len)
		ctx->err = -EIO;
}

int64_t nsdp_synth_dump(const struct nsdp_synth *s, const char *path)
{
	struct nsdp_dump_ctx ctx = {0};
	char tmp[4096];
	uint64_t n;

	if (s == NULL || path == NULL)
		return -EINVAL;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	ctx.f = fopen(tmp, "wb");
	if (ctx.f == NULL)
		return -errno;
	n = nsdp_synth_final_table(s, nsdp_dump_one, &ctx);
	if (fflush(ctx.f) != 0 && ctx.err == 0)
		ctx.err = -errno;
	if (ctx.err == 0 && fsync(fileno(ctx.f)) != 0)
		ctx.err = -errno;
	if (fclose(ctx.f) != 0 && ctx.err == 0)
		ctx.err = -errno;
	if (ctx.err == 0 && rename(tmp, path) != 0)
		ctx.err = -errno;
	if (ctx.err != 0) {
		unlink(tmp);
		return ctx.err;
	}
	return (int64_t)n;
}
