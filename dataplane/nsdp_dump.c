/*
 * nsdp_dump.c - the table file (nsdp_dump.h): every session a walk gives,
 * encoded, through a temporary file that is synced and renamed.
 *
 * Not here: which sessions (the walks: nsdp_table_walk, the synthetic
 * source's nsdp_synth_final_table).
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "nsdp_dump.h"

struct nsdp_dump_ctx {
	FILE *f;
	int64_t n;
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
	ctx->n++;
}

int64_t nsdp_dump_write(const char *path, nsdp_dump_walk_fn walk,
			const void *src)
{
	struct nsdp_dump_ctx ctx = {0};
	char tmp[4096];

	if (src == NULL || path == NULL)
		return -EINVAL;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	ctx.f = fopen(tmp, "wb");
	if (ctx.f == NULL)
		return -errno;
	walk(src, nsdp_dump_one, &ctx);
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
	return ctx.n;
}
