/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec_zstd: one zstd frame per page, a ZSTD_CCtx and a ZSTD_DCtx per context.
 *
 * Levels are 1..22.  zstd's negative ("fast") levels are refused: level 0
 * means "default" in our API, and for fast hot pages lz4 is the better tool.
 *
 * A page frame drops what only helps a file format (pages never leave this
 * process, and the store keeps length and codec itself): no content size,
 * checksum or dictionary id.  Measured on 16 MB of 4 KiB text pages at
 * level 3: ratio 3.6515 with zstd's default frame, 3.6548 without them (one
 * byte a page; the checksum is off by default already).
 *
 * The magicless format would save 4 more bytes a page (3.6679), but it is an
 * experimental parameter, and libzstd 1.5.4 (Debian 12) reads up to 3 bytes
 * past the input when decoding some invalid magicless frames: our fuzz test
 * faulted on a 1-byte input at a guard page (fixed upstream after 1.5.4
 * by facebook/zstd#3592).  Decoding must be safe on any input, so we keep the
 * standard frame.
 *
 * Dictionaries: a ZSTD_CDict (tables hashed once, at the level of the
 * contexts that use it) and a ZSTD_DDict (entropy tables decoded once),
 * both read-only after creation and shared by every thread.  A context
 * references the CDict for one page (ZSTD_CCtx_refCDict, which only stores
 * the pointer) and zstd attaches its tables instead of copying them (a
 * 4 KiB page is far below the size where zstd copies them); the frame
 * keeps the context's parameters, so it carries no dictionary id either:
 * the store records which dictionary wrote a page.  Neither direction
 * allocates: the check test counts.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "codec.h"

#define CODEC_ZSTD_MAX_LEVEL	22

struct codec_zstd_cstate {
	ZSTD_CCtx *cctx;	/* references no dictionary between calls */
	/*
	 * zstd fails with dstSize_tooSmall whenever its working output does
	 * not fit, even if the final frame would have (a zero page is a 10-byte
	 * RLE frame, yet needs more room on the way).  Compressing into a
	 * buffer of ZSTD_compressBound() makes -E2BIG mean what it says, and
	 * is zstd's fast path as well.
	 */
	unsigned char *bounce;
	size_t bounce_cap;
};

static int codec_zstd_err(size_t ret)
{
	switch (ZSTD_getErrorCode(ret)) {
	case ZSTD_error_dstSize_tooSmall:
		return -E2BIG;
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	default:
		return -EINVAL;
	}
}

static void codec_zstd_destroy(struct codec_ctx *ctx)
{
	struct codec_zstd_cstate *cs = ctx->cstate;

	if (cs) {
		ZSTD_freeCCtx(cs->cctx);
		free(cs->bounce);
		free(cs);
	}
	ZSTD_freeDCtx(ctx->dstate);
	ctx->cstate = NULL;
	ctx->dstate = NULL;
}

static int codec_zstd_setup(ZSTD_CCtx *cctx, int level)
{
	size_t r = 0;

	r |= ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level));
	r |= ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0));
	r |= ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0));
	r |= ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0));
	return r ? -EINVAL : 0;
}

/*
 * zstd sizes its work space on the first call, from the parameters it picks
 * for that source size.  Doing one page here moves that allocation out of
 * the I/O path, where memory may be what the kernel is short of.
 */
static int codec_zstd_warm(struct codec_ctx *ctx)
{
	struct codec_zstd_cstate *cs = ctx->cstate;
	unsigned char *page = calloc(1, CODEC_PAGE_SIZE);
	size_t clen, dlen;
	int ret = -ENOMEM;

	if (!page)
		return -ENOMEM;
	clen = ZSTD_compress2(cs->cctx, cs->bounce, cs->bounce_cap, page, CODEC_PAGE_SIZE);
	if (ZSTD_isError(clen)) {
		ret = codec_zstd_err(clen);
		goto out_free;
	}
	dlen = ZSTD_decompressDCtx(ctx->dstate, page, CODEC_PAGE_SIZE, cs->bounce, clen);
	if (ZSTD_isError(dlen)) {
		ret = codec_zstd_err(dlen);
		goto out_free;
	}
	ret = dlen == CODEC_PAGE_SIZE ? 0 : -EINVAL;
out_free:
	free(page);
	return ret;
}

static int codec_zstd_create(struct codec_ctx *ctx)
{
	struct codec_zstd_cstate *cs;
	int ret;

	if (ctx->level > ZSTD_maxCLevel())
		return -EINVAL;
	cs = calloc(1, sizeof(*cs));
	ctx->cstate = cs;
	ctx->dstate = ZSTD_createDCtx();
	if (!cs || !ctx->dstate) {
		ret = -ENOMEM;
		goto out_destroy;
	}
	cs->cctx = ZSTD_createCCtx();
	cs->bounce_cap = ZSTD_compressBound(CODEC_PAGE_SIZE);
	cs->bounce = malloc(cs->bounce_cap);
	if (!cs->cctx || !cs->bounce) {
		ret = -ENOMEM;
		goto out_destroy;
	}
	ret = codec_zstd_setup(cs->cctx, ctx->level);
	if (ret)
		goto out_destroy;
	ret = codec_zstd_warm(ctx);
	if (ret)
		goto out_destroy;
	return 0;

out_destroy:
	codec_zstd_destroy(ctx);
	return ret;
}

static int codec_zstd_dict_prepare(struct codec_dict *dict)
{
	/*
	 * ZSTD_dct_auto (what these use): a buffer with the dictionary magic
	 * must have valid tables, anything else is raw content.
	 */
	dict->cstate = ZSTD_createCDict(dict->bytes, dict->len, dict->level);
	dict->dstate = ZSTD_createDDict(dict->bytes, dict->len);
	if (!dict->cstate || !dict->dstate) {
		ZSTD_freeCDict(dict->cstate);
		ZSTD_freeDDict(dict->dstate);
		dict->cstate = NULL;
		dict->dstate = NULL;
		/* NULL means either; dict_check tells the user which. */
		return -EINVAL;
	}
	return 0;
}

static void codec_zstd_dict_release(struct codec_dict *dict)
{
	ZSTD_freeCDict(dict->cstate);
	ZSTD_freeDDict(dict->dstate);
	dict->cstate = NULL;
	dict->dstate = NULL;
}

/*
 * Point the context at the page's dictionary, or at none.  A dictionary can
 * only be referenced between frames: the session reset ends one that a
 * failed call left open.  Neither call allocates.
 */
static int codec_zstd_ref(ZSTD_CCtx *cctx, const struct codec_dict *dict)
{
	if (ZSTD_isError(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_CCtx_refCDict(cctx, dict ? dict->cstate : NULL)))
		return -EINVAL;
	return 0;
}

static int codec_zstd_compress(struct codec_ctx *ctx, const struct codec_dict *dict,
			       const void *src, size_t src_len, void *dst, size_t dst_cap)
{
	struct codec_zstd_cstate *cs = ctx->cstate;
	size_t bound = ZSTD_compressBound(src_len);
	unsigned char *out = dst;
	size_t ret;

	if (dst_cap < bound) {
		if (bound > cs->bounce_cap) {
			/* Only inputs larger than a page get here. */
			unsigned char *nb = realloc(cs->bounce, bound);

			if (!nb)
				return -ENOMEM;
			cs->bounce = nb;
			cs->bounce_cap = bound;
		}
		out = cs->bounce;
	}
	if (dict && codec_zstd_ref(cs->cctx, dict))
		return -EINVAL;
	ret = ZSTD_compress2(cs->cctx, out, bound, src, src_len);
	/* Leave no reference behind: the dictionary may be freed after this. */
	if (dict && codec_zstd_ref(cs->cctx, NULL))
		return -EINVAL;
	if (ZSTD_isError(ret))
		return codec_zstd_err(ret);
	if (ret > dst_cap || ret > INT_MAX)
		return -E2BIG;
	if (out != (unsigned char *)dst)
		memcpy(dst, out, ret);
	return (int)ret;
}

static int codec_zstd_decompress(struct codec_ctx *ctx, const struct codec_dict *dict,
				 const void *src, size_t src_len, void *dst, size_t dst_len)
{
	/* The DCtx never references a DDict: each call names its own, or none. */
	size_t ret = ZSTD_decompress_usingDDict(ctx->dstate, dst, dst_len, src, src_len,
						dict ? dict->dstate : NULL);

	/* Too big for dst_len is an error from zstd; too small is one for us. */
	if (ZSTD_isError(ret) || ret != dst_len)
		return -EINVAL;
	return 0;
}

const struct codec_ops codec_zstd = {
	.name = "zstd",
	.id = CODEC_ZSTD,
	.default_level = 3,
	.min_level = 1,
	.max_level = CODEC_ZSTD_MAX_LEVEL,
	.create_ctx = codec_zstd_create,
	.destroy_ctx = codec_zstd_destroy,
	.compress = codec_zstd_compress,
	.decompress = codec_zstd_decompress,
	.dict_prepare = codec_zstd_dict_prepare,
	.dict_release = codec_zstd_dict_release,
};
