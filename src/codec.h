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
 *
 * Dictionaries (lz4 and zstd; lzo has none).  A `struct codec_dict` is made
 * once from dictionary bytes (see dict.h) for one codec, and then shared
 * read-only by every thread's context: compressing or decompressing a page
 * with it is as free of locks and allocations as without.  Dictionaries are
 * never implied: codec_compress_dict/codec_decompress_dict take the one to
 * use, so a page compressed with dictionary D decodes given D, whatever any
 * context did before, and the caller records which D that was: nothing in
 * the page says which dictionary wrote it, and decoded with another one it
 * may come out as wrong bytes rather than an error (lz4 does so whenever
 * the other dictionary is at least as long).
 */
#ifndef ZSWAPFS_CODEC_H
#define ZSWAPFS_CODEC_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "page.h"

/*
 * The unit the codecs are tuned for.  Contexts pre-size their buffers and
 * library work spaces for it at creation, so that compressing or
 * decompressing a page of this size never allocates (the I/O path must not
 * wait for memory).  Other sizes work, but the first larger one may allocate.
 */
#define CODEC_PAGE_SIZE		ZS_PAGE_SIZE	/* page.h */

/*
 * The codecs, in id order: X(ID, name) gives CODEC_<ID> and the name users
 * write (settings, stats keys, zswapctl).  The one list: the enum, codec.c's
 * table, the per-codec stats keys and zswapctl are made from it.  Ids are
 * stored in slots: never renumber, only append.
 */
#define CODEC_LIST(X)	\
	X(LZ4, lz4)	\
	X(ZSTD, zstd)	\
	X(LZO, lzo)

enum codec_id {
#define CODEC_ENUM(ID, name) CODEC_##ID,
	CODEC_LIST(CODEC_ENUM)
#undef CODEC_ENUM
	CODEC_COUNT
};
_Static_assert(CODEC_LZ4 == 0 && CODEC_ZSTD == 1 && CODEC_LZO == 2,
	       "codec ids are stored in slots: never renumber");

struct codec_ctx {
	const struct codec_ops *ops;
	int level;		/* as given to codec_ctx_init, after defaulting */
	void *cstate;		/* compression state, owned by the codec */
	void *dstate;		/* decompression state, NULL where none needed */
};

/*
 * A dictionary prepared for one codec.  Read-only once created, except for
 * the reference count; freed by the last codec_dict_put.
 */
struct codec_dict {
	const struct codec_ops *ops;
	int level;		/* zstd: the level it compresses at; lz4: 0 (any) */
	atomic_uint refs;
	const void *bytes;	/* a copy of the dictionary as given */
	size_t len;
	void *cstate;		/* owned by the codec: what compression starts from */
	void *dstate;		/* owned by the codec: what decompression needs */
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
	 * Compress src_len bytes into dst (capacity dst_cap), with dictionary
	 * dict (prepared for this codec, at ctx->level where that matters) or
	 * none when dict is NULL.  Returns the compressed length (> 0), or
	 * -E2BIG exactly when the result would not fit in dst_cap (the caller
	 * then stores the page raw); nothing is written past dst_cap.  Inputs
	 * larger than CODEC_PAGE_SIZE may also fail with -ENOMEM.
	 */
	int (*compress)(struct codec_ctx *ctx, const struct codec_dict *dict,
			const void *src, size_t src_len, void *dst, size_t dst_cap);
	/*
	 * Decompress src_len bytes into exactly dst_len bytes, with the
	 * dictionary that compressed them (NULL: none).  Returns 0, or -EINVAL
	 * if the input is corrupt or does not expand to dst_len.  Must never
	 * read or write outside the given buffers (the dictionary's included),
	 * whatever the input.
	 */
	int (*decompress)(struct codec_ctx *ctx, const struct codec_dict *dict,
			  const void *src, size_t src_len, void *dst, size_t dst_len);
	/*
	 * Fill dict->cstate/dstate from dict->bytes for dict->level.  0,
	 * -EINVAL (bytes the library refuses) or -ENOMEM.  NULL when the codec
	 * has no dictionaries.
	 */
	int (*dict_prepare)(struct codec_dict *dict);
	void (*dict_release)(struct codec_dict *dict);
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
	return ctx->ops->compress(ctx, NULL, src, src_len, dst, dst_cap);
}

static inline int codec_decompress(struct codec_ctx *ctx, const void *src, size_t src_len,
				   void *dst, size_t dst_len)
{
	return ctx->ops->decompress(ctx, NULL, src, src_len, dst, dst_len);
}

/* ---- dictionaries ---- */

/* Whether codec_dict_create can make dictionaries for ops (lz4, zstd). */
static inline bool codec_has_dict(const struct codec_ops *ops)
{
	return ops && ops->dict_prepare;
}

/*
 * Make a dictionary for ops from len bytes at bytes (copied; check them with
 * dict_check first for a message a user understands).  level: the level the
 * contexts that will compress with it have (0: the codec's default); zstd
 * builds its tables for that level, lz4's acceleration stays the context's.
 * Returns 0 and *dictp holding one reference, or -EOPNOTSUPP (lzo),
 * -EINVAL (level out of range, or bytes the library refuses), -ENOMEM.
 *
 * Cost, once (64 KiB, measured by contrib/bench/dictbench.c): lz4 hashes
 * the dictionary's last 64 KiB into a template stream, 0.07 ms, 80 KiB with
 * the copy; zstd-3 builds a CDict and a DDict, 0.55 ms, 617 KiB (CDict
 * 462 KiB, DDict 91 KiB, copy).  Allocates: not for the I/O path.
 */
int codec_dict_create(struct codec_dict **dictp, const struct codec_ops *ops, int level,
		      const void *bytes, size_t len);

/*
 * Another reference to dict.  The caller must already hold one (or hold the
 * lock that keeps the last one from being put): a reference is never taken
 * from a dictionary that may be dying.
 */
struct codec_dict *codec_dict_get(struct codec_dict *dict);
/* Drop a reference; the last one frees dict.  NULL is ignored. */
void codec_dict_put(struct codec_dict *dict);

/*
 * codec_compress / codec_decompress with a dictionary (NULL: none).  A
 * dictionary of another codec, or (zstd) made for another level than
 * ctx->level, is refused with -EINVAL: the level a context reports is the
 * one it compresses at.  Decompression takes the dictionary of the same
 * codec whatever its level.
 */
static inline int codec_compress_dict(struct codec_ctx *ctx, const struct codec_dict *dict,
				      const void *src, size_t src_len, void *dst,
				      size_t dst_cap)
{
	if (dict && (dict->ops != ctx->ops || (dict->level && dict->level != ctx->level)))
		return -EINVAL;
	return ctx->ops->compress(ctx, dict, src, src_len, dst, dst_cap);
}

static inline int codec_decompress_dict(struct codec_ctx *ctx, const struct codec_dict *dict,
					const void *src, size_t src_len, void *dst,
					size_t dst_len)
{
	if (dict && dict->ops != ctx->ops)
		return -EINVAL;
	return ctx->ops->decompress(ctx, dict, src, src_len, dst, dst_len);
}

#define CODEC_EXTERN(ID, name) extern const struct codec_ops codec_##name;
CODEC_LIST(CODEC_EXTERN)
#undef CODEC_EXTERN

#endif
