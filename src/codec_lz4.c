/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec_lz4: LZ4 block format, one LZ4_stream_t per context.
 *
 * The level is LZ4's acceleration (1 = best ratio, what kernel zram's lz4
 * uses; higher = faster, worse ratio).
 *
 * Why LZ4_compress_fast_extState and not ..._extState_fastReset: the latter
 * is a static-only symbol that Debian's liblz4.so.1 (1.9.4) does not export,
 * and in 1.9.4 it clears the hash table anyway for inputs of 4 KiB or more,
 * so at our page size it costs the same as extState (measured: 6.1 vs
 * 6.1 us per 4 KiB text page; LZ4_compress_default, which puts the state on
 * the stack, 7.6 us).  The streaming reset (LZ4_resetStream_fast +
 * LZ4_compress_fast_continue) avoids the clear but was slower (7.7 us) and
 * compressed slightly worse, because it uses the 32-bit table type.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <lz4.h>

#include "codec.h"

/* Beyond this LZ4 silently clamps; refuse instead so the level we report is real. */
#define CODEC_LZ4_ACCEL_MAX	65537

static int codec_lz4_create(struct codec_ctx *ctx)
{
	/* LZ4_createStream returns memory that is already initialised. */
	ctx->cstate = LZ4_createStream();
	if (!ctx->cstate)
		return -ENOMEM;
	ctx->dstate = NULL;
	return 0;
}

static void codec_lz4_destroy(struct codec_ctx *ctx)
{
	LZ4_freeStream(ctx->cstate);
	ctx->cstate = NULL;
}

static int codec_lz4_compress(struct codec_ctx *ctx, const void *src, size_t src_len,
			      void *dst, size_t dst_cap)
{
	int cap = dst_cap > INT_MAX ? INT_MAX : (int)dst_cap;
	int ret;

	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -EINVAL;
	ret = LZ4_compress_fast_extState(ctx->cstate, src, dst, (int)src_len, cap, ctx->level);
	/* 0 is LZ4's only failure: the output did not fit. */
	return ret > 0 ? ret : -E2BIG;
}

static int codec_lz4_decompress(struct codec_ctx *ctx, const void *src, size_t src_len,
				void *dst, size_t dst_len)
{
	int ret;

	(void)ctx;
	if (src_len > INT_MAX || dst_len > INT_MAX)
		return -EINVAL;
	/*
	 * LZ4_decompress_safe never reads or writes outside the buffers; a
	 * block that expands to fewer bytes than a page is as corrupt as one
	 * that fails to decode.
	 */
	ret = LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);
	return ret == (int)dst_len ? 0 : -EINVAL;
}

const struct codec_ops codec_lz4 = {
	.name = "lz4",
	.id = CODEC_LZ4,
	.default_level = 1,
	.min_level = 1,
	.max_level = CODEC_LZ4_ACCEL_MAX,
	.create_ctx = codec_lz4_create,
	.destroy_ctx = codec_lz4_destroy,
	.compress = codec_lz4_compress,
	.decompress = codec_lz4_decompress,
};
