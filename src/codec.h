/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec: one front end for the page compressors.
 *
 * Each algorithm lives in codec_<name>.c and exports one `struct codec_ops`.
 * The ops are found by name (codec_find) or by a small numeric id
 * (codec_by_id) that the page store keeps in every slot, so that a page is
 * always decompressed with the codec that compressed it.
 *
 * Contexts are per thread: a `struct codec_ctx` is never shared between
 * threads, so compress/decompress need no locking.  Library errors become
 * -EINVAL (corrupt input) or -E2BIG (output does not fit) at this border.
 */
#ifndef ZSWAPFS_CODEC_H
#define ZSWAPFS_CODEC_H

#include <stddef.h>
#include <stdint.h>

/*
 * The unit the codecs are tuned for.  Contexts pre-size their buffers and
 * library work spaces for it at creation, so that compressing or
 * decompressing a page of this size never allocates (the I/O path must not
 * wait for memory).  Other sizes work, but the first larger one may allocate.
 */
#define CODEC_PAGE_SIZE		4096u

/* Codec ids are stored in slots: never renumber, only append. */
enum codec_id {
	CODEC_LZ4 = 0,
	CODEC_ZSTD = 1,
	CODEC_LZO = 2,
	CODEC_COUNT
};

struct codec_ctx {
	const struct codec_ops *ops;
	int level;		/* as given to codec_ctx_init, after defaulting */
	void *cstate;		/* compression state, owned by the codec */
	void *dstate;		/* decompression state, NULL where none needed */
};

struct codec_ops {
	const char *name;
	enum codec_id id;
	int default_level;
	int min_level, max_level;	/* equal when the codec has no levels */
	/* Allocate cstate/dstate for ctx->level.  0 or -ENOMEM. */
	int (*create_ctx)(struct codec_ctx *ctx);
	void (*destroy_ctx)(struct codec_ctx *ctx);
	/*
	 * Compress src_len bytes into dst (capacity dst_cap).  Returns the
	 * compressed length (> 0), or -E2BIG exactly when the result would not
	 * fit in dst_cap (the caller then stores the page raw); nothing is
	 * written past dst_cap.  Inputs larger than CODEC_PAGE_SIZE may also
	 * fail with -ENOMEM.
	 */
	int (*compress)(struct codec_ctx *ctx, const void *src, size_t src_len,
			void *dst, size_t dst_cap);
	/*
	 * Decompress src_len bytes into exactly dst_len bytes.  Returns 0, or
	 * -EINVAL if the input is corrupt or does not expand to dst_len.  Must
	 * never read or write outside the given buffers, whatever the input.
	 */
	int (*decompress)(struct codec_ctx *ctx, const void *src, size_t src_len,
			  void *dst, size_t dst_len);
};

/* NULL when no codec has that name / id. */
const struct codec_ops *codec_find(const char *name);
const struct codec_ops *codec_by_id(unsigned int id);
/* The names of all codecs, "lz4, zstd, lzo", for messages and --help. */
const char *codec_names(void);

/*
 * Prepare ctx for ops at level (0 means the codec's default).  Returns 0,
 * -EINVAL for a level out of range (or a library that refuses to start), or
 * -ENOMEM.  On failure ctx is zeroed, so codec_ctx_fini on it is harmless;
 * codec_ctx_fini may also be called twice.
 */
int codec_ctx_init(struct codec_ctx *ctx, const struct codec_ops *ops, int level);
void codec_ctx_fini(struct codec_ctx *ctx);

static inline int codec_compress(struct codec_ctx *ctx, const void *src, size_t src_len,
				 void *dst, size_t dst_cap)
{
	return ctx->ops->compress(ctx, src, src_len, dst, dst_cap);
}

static inline int codec_decompress(struct codec_ctx *ctx, const void *src, size_t src_len,
				   void *dst, size_t dst_len)
{
	return ctx->ops->decompress(ctx, src, src_len, dst, dst_len);
}

extern const struct codec_ops codec_lz4;
extern const struct codec_ops codec_zstd;
extern const struct codec_ops codec_lzo;

#endif
