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
 *
 * Dictionaries: a template stream, as kernel zram does since "zram: Optimize
 * LZ4 dictionary compression performance".  LZ4_loadDict hashes every third
 * position of the dictionary (64 KiB: ~22,000 positions), which costs more
 * than compressing the page itself; it is done once, into a stream that is
 * never written again, and each page starts from a 16 KiB memcpy of it
 * (LZ4_attach_dictionary would avoid even that, but Debian's liblz4 1.9.4
 * does not export it).  The copy then compresses exactly as a freshly
 * loaded stream would: tests/check_codec.c checks byte for byte.  The
 * stream keeps 32-bit positions relative to the dictionary's end, so the
 * template only points at the dictionary bytes, which it shares read-only.
 * LZ4 looks back at most 64 KiB: of a longer dictionary only the end is used.
 * Speed (contrib/bench/dictbench.c, real process memory, 64 KiB trained
 * dictionary): 0.71-0.75x of compressing without one, 2.8x LZ4_loadDict
 * per page.  The copy is 2 % of that time (perf); the rest is LZ4's
 * dictionary mode itself, whose hash table starts full of dictionary
 * positions (32-bit entries, where a lone page gets an empty 16-bit table);
 * LZ4F's attached dictionary (LZ4F_compressFrame_usingCDict) was no faster.
 * Nor is any other entry point of 1.9.4 (contrib/bench/README, Dictionaries):
 * LZ4_attach_dictionary 0.64-0.74x, acceleration 2-3 loses half the gain;
 * the best is the dictionary laid right before the page (prefix mode,
 * 0.78-0.81x, and decompression as fast as without a dictionary), which
 * needs a copy of the dictionary per context.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "codec.h"

/* Beyond this LZ4 silently clamps; refuse instead so the level we report is real. */
#define CODEC_LZ4_ACCEL_MAX	65537
/* LZ4's window: matches reach at most this far back. */
#define CODEC_LZ4_DICT_MAX	(64 << 10)

struct codec_lz4_dict {
	LZ4_stream_t tmpl;	/* loaded once; only ever copied from */
	const char *start;	/* the part of dict->bytes that tmpl uses */
	int size;
};

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

static int codec_lz4_dict_prepare(struct codec_dict *dict)
{
	const char *end = (const char *)dict->bytes + dict->len;
	struct codec_lz4_dict *ld;
	size_t size = dict->len;

	if (size > CODEC_LZ4_DICT_MAX)
		size = CODEC_LZ4_DICT_MAX;
	ld = malloc(sizeof(*ld));
	if (!ld)
		return -ENOMEM;
	ld->start = end - size;
	ld->size = (int)size;
	/* LZ4_initStream does not allocate; LZ4_loadDict starts with a reset. */
	if (!LZ4_initStream(&ld->tmpl, sizeof(ld->tmpl)) ||
	    LZ4_loadDict(&ld->tmpl, ld->start, ld->size) != ld->size) {
		/* Fewer than 8 bytes: LZ4 cannot hash them (dict.h refuses those). */
		free(ld);
		return -EINVAL;
	}
	dict->cstate = ld;
	dict->dstate = ld;
	/* The acceleration is the context's: one template serves every level. */
	dict->level = 0;
	return 0;
}

static void codec_lz4_dict_release(struct codec_dict *dict)
{
	free(dict->cstate);
	dict->cstate = NULL;
	dict->dstate = NULL;
}

static int codec_lz4_compress(struct codec_ctx *ctx, const struct codec_dict *dict,
			      const void *src, size_t src_len, void *dst, size_t dst_cap)
{
	int cap = dst_cap > INT_MAX ? INT_MAX : (int)dst_cap;
	const struct codec_lz4_dict *ld;
	int ret;

	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -EINVAL;
	if (!dict) {
		ret = LZ4_compress_fast_extState(ctx->cstate, src, dst, (int)src_len, cap,
						 ctx->level);
	} else {
		ld = dict->cstate;
		memcpy(ctx->cstate, &ld->tmpl, sizeof(ld->tmpl));
		ret = LZ4_compress_fast_continue(ctx->cstate, src, dst, (int)src_len, cap,
						 ctx->level);
	}
	/* 0 is LZ4's only failure: the output did not fit. */
	return ret > 0 ? ret : -E2BIG;
}

static int codec_lz4_decompress(struct codec_ctx *ctx, const struct codec_dict *dict,
				const void *src, size_t src_len, void *dst, size_t dst_len)
{
	const struct codec_lz4_dict *ld;
	int ret;

	(void)ctx;
	if (src_len > INT_MAX || dst_len > INT_MAX)
		return -EINVAL;
	/*
	 * LZ4's _safe decoders never read or write outside the buffers (nor
	 * before the dictionary's start); a block that expands to fewer bytes
	 * than a page is as corrupt as one that fails to decode.
	 */
	if (!dict) {
		ret = LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);
	} else {
		ld = dict->dstate;
		ret = LZ4_decompress_safe_usingDict(src, dst, (int)src_len, (int)dst_len,
						    ld->start, ld->size);
	}
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
	.dict_prepare = codec_lz4_dict_prepare,
	.dict_release = codec_lz4_dict_release,
};
