/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec_lzo: LZO1X-1, the same compressor as kernel zram's "lzo".  No levels.
 *
 * lzo1x_1_compress has no output bound: on incompressible input it writes up
 * to LZO_WORST(src_len) bytes, more than the input.  When the caller's buffer
 * is smaller than that, compress into a per-context bounce buffer and copy
 * only when the result fits.
 *
 * No dictionaries: liblzo2's LZO1X-1 has no dictionary variant (lzo1x_999
 * has one, but is a slow high-ratio compressor), and zram has none for lzo
 * either.  dict_prepare stays NULL, so codec_dict_create refuses lzo.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lzo/lzo1x.h>

#include "codec.h"

/* lzo1x-1's documented worst case. */
#define CODEC_LZO_WORST(n)	((n) + (n) / 16 + 64 + 3)

struct codec_lzo_state {
	void *wrkmem;		/* LZO1X_1_MEM_COMPRESS bytes */
	unsigned char *bounce;
	size_t bounce_cap;
};

static pthread_once_t codec_lzo_once = PTHREAD_ONCE_INIT;
static int codec_lzo_init_ret;

static void codec_lzo_init_once(void)
{
	/* lzo_init checks that the library matches the header's ABI. */
	codec_lzo_init_ret = lzo_init();
}

static void codec_lzo_destroy(struct codec_ctx *ctx)
{
	struct codec_lzo_state *st = ctx->cstate;

	if (st) {
		free(st->wrkmem);
		free(st->bounce);
		free(st);
	}
	ctx->cstate = NULL;
}

static int codec_lzo_create(struct codec_ctx *ctx)
{
	struct codec_lzo_state *st;

	pthread_once(&codec_lzo_once, codec_lzo_init_once);
	if (codec_lzo_init_ret != LZO_E_OK)
		return -EINVAL;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	ctx->cstate = st;
	ctx->dstate = NULL;
	st->wrkmem = malloc(LZO1X_1_MEM_COMPRESS);
	st->bounce_cap = CODEC_LZO_WORST(CODEC_PAGE_SIZE);
	st->bounce = malloc(st->bounce_cap);
	if (!st->wrkmem || !st->bounce) {
		codec_lzo_destroy(ctx);
		return -ENOMEM;
	}
	return 0;
}

static int codec_lzo_compress(struct codec_ctx *ctx, const struct codec_dict *dict,
			      const void *src, size_t src_len, void *dst, size_t dst_cap)
{
	struct codec_lzo_state *st = ctx->cstate;
	size_t worst = CODEC_LZO_WORST(src_len);
	unsigned char *out = dst;
	lzo_uint out_len = 0;
	int ret;

	if (dict || src_len > INT_MAX / 2)
		return -EINVAL;
	if (dst_cap < worst) {
		if (worst > st->bounce_cap) {
			/* Only inputs larger than a page get here. */
			unsigned char *nb = realloc(st->bounce, worst);

			if (!nb)
				return -ENOMEM;
			st->bounce = nb;
			st->bounce_cap = worst;
		}
		out = st->bounce;
	}

	ret = lzo1x_1_compress(src, src_len, out, &out_len, st->wrkmem);
	if (ret != LZO_E_OK)
		return -EINVAL;
	if (out_len > dst_cap)
		return -E2BIG;
	if (out != dst)
		memcpy(dst, out, out_len);
	return (int)out_len;
}

static int codec_lzo_decompress(struct codec_ctx *ctx, const struct codec_dict *dict,
				const void *src, size_t src_len, void *dst, size_t dst_len)
{
	lzo_uint out_len = dst_len;
	int ret;

	(void)ctx;
	if (dict)
		return -EINVAL;
	/*
	 * Only the _safe decoder checks input, output and look-behind bounds.
	 * Trailing input (LZO_E_INPUT_NOT_CONSUMED) or a short result is
	 * corruption too: a stored page always decodes to exactly dst_len.
	 */
	ret = lzo1x_decompress_safe(src, src_len, dst, &out_len, NULL);
	if (ret != LZO_E_OK || out_len != dst_len)
		return -EINVAL;
	return 0;
}

const struct codec_ops codec_lzo = {
	.name = "lzo",
	.id = CODEC_LZO,
	.default_level = 0,
	.min_level = 0,
	.max_level = 0,
	.create_ctx = codec_lzo_create,
	.destroy_ctx = codec_lzo_destroy,
	.compress = codec_lzo_compress,
	.decompress = codec_lzo_decompress,
};
