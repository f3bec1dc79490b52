/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for the codec module: registry, context life cycle, round trips
 * of varied data, output that does not fit, and corrupt input (fuzzed: run
 * this under ASan/UBSan too, since "no crash" is half of what it checks).
 *
 * Loop tests run once per codec id (_i).  The fuzz seed is fixed so that a
 * failure reproduces; CODEC_FUZZ_SEED and CODEC_FUZZ_ITERS override it.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <lz4.h>
#include <zstd.h>

#include "codec.h"
#include "dict.h"

#define PAGE		CODEC_PAGE_SIZE
#define GUARD		64
#define GUARD_BYTE	0xa5
/* Room for any codec's worst case on the largest input used here. */
#define BIG_CAP(n)	((n) * 2 + 1024)

/* ---- deterministic data ------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: quality is irrelevant, reproducibility is not. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void rng_seed(uint64_t seed)
{
	rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

static unsigned int rng_below(unsigned int n)
{
	return (unsigned int)(rng() % n);
}

enum fill {
	FILL_ZERO,
	FILL_SAME,	/* one repeated word, like a same-filled page */
	FILL_TEXT,
	FILL_RANDOM,
	FILL_MIXED,	/* heap-like records: small ints, pointers, zeros, text */
	FILL_HALF,	/* half random, half zeros */
	FILL_COUNT
};

static const char *const fill_name[FILL_COUNT] = {
	"zero", "same", "text", "random", "mixed", "half",
};

static const char *const words[] = {
	"the", "of", "and", "page", "memory", "swap", "compress", "kernel", "zswapfs",
	"slot", "arena", "return", "struct", "int", "static", "const", "void", "=",
	"{", "}", "if", "else", "for", "while", "(ctx)", "->", "NULL", "0", "errno",
	"The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "daemon",
};

static void fill_text(unsigned char *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		const char *w = words[rng_below(sizeof(words) / sizeof(words[0]))];
		char num[24];
		size_t n;

		/* Real text repeats itself (identifiers, phrases, indentation). */
		if (i > 64 && rng_below(4) == 0) {
			size_t from = rng_below((unsigned int)(i - 48));

			n = 8 + rng_below(40);
			if (n > len - i)
				n = len - i;
			memmove(p + i, p + from, n);
			i += n;
			continue;
		}
		if (rng_below(10) == 0) {
			snprintf(num, sizeof(num), "%u", (unsigned int)rng_below(100000));
			w = num;
		}
		n = strlen(w);
		if (n > len - i)
			n = len - i;
		memcpy(p + i, w, n);
		i += n;
		if (i < len)
			p[i++] = rng_below(12) == 0 ? '\n' : ' ';
	}
}

static void fill_page(unsigned char *p, size_t len, enum fill kind)
{
	size_t i;

	switch (kind) {
	case FILL_ZERO:
		memset(p, 0, len);
		break;
	case FILL_SAME:
		for (i = 0; i < len; i++)
			p[i] = (unsigned char)(0xdeadbeefu >> (8 * (i % 4)));
		break;
	case FILL_TEXT:
		fill_text(p, len);
		break;
	case FILL_RANDOM:
		for (i = 0; i < len; i++)
			p[i] = (unsigned char)rng();
		break;
	case FILL_MIXED:
		for (i = 0; i < len; i++) {
			size_t f = i % 64;

			if (f < 8)		/* pointer-ish */
				p[i] = f < 2 ? (unsigned char)rng() : (f < 6 ? 0x7f : 0);
			else if (f < 16)	/* small counter */
				p[i] = f == 8 ? (unsigned char)(i / 64) : 0;
			else if (f < 40)
				p[i] = 0;
			else
				p[i] = (unsigned char)('a' + rng_below(4));
		}
		break;
	case FILL_HALF:
		for (i = 0; i < len; i++)
			p[i] = i < len / 2 ? (unsigned char)rng() : 0;
		break;
	default:
		ck_abort_msg("bad fill");
	}
}

/* ---- helpers ------------------------------------------------------------ */

static const struct codec_ops *ops_of(int i)
{
	const struct codec_ops *ops = codec_by_id((unsigned int)i);

	ck_assert_ptr_nonnull(ops);
	return ops;
}

static void ctx_setup(struct codec_ctx *ctx, int i, int level)
{
	int ret = codec_ctx_init(ctx, ops_of(i), level);

	ck_assert_msg(ret == 0, "%s level %d: init %d", ops_of(i)->name, level, ret);
}

static void guard_set(unsigned char *p, size_t len)
{
	memset(p + len, GUARD_BYTE, GUARD);
}

static void guard_check(const unsigned char *p, size_t len, const char *what)
{
	size_t i;

	for (i = 0; i < GUARD; i++)
		ck_assert_msg(p[len + i] == GUARD_BYTE, "%s: wrote past the end (+%zu)", what, i);
}

/*
 * The libraries are not built with ASan, which therefore cannot see them
 * read or write past a buffer.  A fence ends the buffer right before a
 * PROT_NONE page, so that any access past its end faults at once.
 */
struct fence {
	unsigned char *map;
	size_t usable;		/* bytes before the guard page */
};

static void fence_init(struct fence *f, size_t cap)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	f->usable = (cap + pg - 1) / pg * pg;
	if (!f->usable)
		f->usable = pg;
	f->map = mmap(NULL, f->usable + pg, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(f->map, MAP_FAILED);
	ck_assert_int_eq(mprotect(f->map + f->usable, pg, PROT_NONE), 0);
}

/* A buffer of len bytes whose last byte touches the guard page. */
static unsigned char *fence_at(struct fence *f, size_t len)
{
	ck_assert_uint_le(len, f->usable);
	return f->map + f->usable - len;
}

static void fence_fini(struct fence *f)
{
	munmap(f->map, f->usable + (size_t)sysconf(_SC_PAGESIZE));
}

/*
 * Round trip one buffer and return the compressed length.  Every buffer a
 * codec reads or writes ends at a fence; compress output, whose capacity is
 * larger than what is written, is checked with guard bytes as well.
 */
static int round_trip_dict(struct codec_ctx *ctx, const struct codec_dict *dict,
			   const unsigned char *src, size_t len)
{
	size_t cap = BIG_CAP(len);
	unsigned char *c = malloc(cap + GUARD);
	struct fence fs, fc, fd;
	unsigned char *s, *exact, *d;
	int clen, ret;

	ck_assert_ptr_nonnull(c);
	fence_init(&fs, len);
	fence_init(&fd, len);
	s = fence_at(&fs, len);
	memcpy(s, src, len);
	guard_set(c, cap);
	clen = codec_compress_dict(ctx, dict, s, len, c, cap);
	ck_assert_msg(clen > 0, "%s: compress of %zu bytes: %d", ctx->ops->name, len, clen);
	ck_assert_int_le(clen, cap);
	guard_check(c, cap, "compress");

	fence_init(&fc, (size_t)clen);
	exact = fence_at(&fc, (size_t)clen);
	memcpy(exact, c, (size_t)clen);
	d = fence_at(&fd, len);
	ret = codec_decompress_dict(ctx, dict, exact, (size_t)clen, d, len);
	ck_assert_msg(ret == 0, "%s: decompress of %zu bytes: %d", ctx->ops->name, len, ret);
	ck_assert_msg(memcmp(src, d, len) == 0, "%s: %zu bytes differ after round trip",
		      ctx->ops->name, len);
	fence_fini(&fc);
	fence_fini(&fd);
	fence_fini(&fs);
	free(c);
	return clen;
}

static int round_trip(struct codec_ctx *ctx, const unsigned char *src, size_t len)
{
	return round_trip_dict(ctx, NULL, src, len);
}

static uint64_t fuzz_seed(void)
{
	const char *s = getenv("CODEC_FUZZ_SEED");

	return s ? strtoull(s, NULL, 0) : 0x5eed2024ull;
}

static unsigned int fuzz_iters(void)
{
	const char *s = getenv("CODEC_FUZZ_ITERS");

	return s ? (unsigned int)strtoul(s, NULL, 0) : 4000;
}

/* ---- registry ----------------------------------------------------------- */

START_TEST(test_registry_find)
{
	ck_assert_ptr_eq(codec_find("lz4"), &codec_lz4);
	ck_assert_ptr_eq(codec_find("zstd"), &codec_zstd);
	ck_assert_ptr_eq(codec_find("lzo"), &codec_lzo);
	ck_assert_ptr_null(codec_find("LZ4"));
	ck_assert_ptr_null(codec_find("lz"));
	ck_assert_ptr_null(codec_find("lz4hc"));
	ck_assert_ptr_null(codec_find(""));
	ck_assert_ptr_null(codec_find(NULL));
}
END_TEST

START_TEST(test_registry_by_id)
{
	unsigned int id;

	/* Slots store these numbers: they must never move. */
	ck_assert_int_eq(CODEC_LZ4, 0);
	ck_assert_int_eq(CODEC_ZSTD, 1);
	ck_assert_int_eq(CODEC_LZO, 2);
	for (id = 0; id < CODEC_COUNT; id++) {
		const struct codec_ops *ops = codec_by_id(id);

		ck_assert_ptr_nonnull(ops);
		ck_assert_uint_eq(ops->id, id);
		ck_assert_ptr_eq(codec_find(ops->name), ops);
		ck_assert_int_le(ops->min_level, ops->default_level);
		ck_assert_int_le(ops->default_level, ops->max_level);
		ck_assert_ptr_nonnull(ops->create_ctx);
		ck_assert_ptr_nonnull(ops->destroy_ctx);
		ck_assert_ptr_nonnull(ops->compress);
		ck_assert_ptr_nonnull(ops->decompress);
	}
	/* The ops carry the names of codec.h's list, which tools that link
	 * no codec (zswapctl) read the stats keys by. */
	{
		static const char *const listed[] = {
#define LISTED(ID, name) [CODEC_##ID] = #name,
			CODEC_LIST(LISTED)
#undef LISTED
		};

		for (id = 0; id < CODEC_COUNT; id++)
			ck_assert_str_eq(codec_by_id(id)->name, listed[id]);
	}
	ck_assert_ptr_null(codec_by_id(CODEC_COUNT));
	ck_assert_ptr_null(codec_by_id(255));
	ck_assert_ptr_null(codec_by_id((unsigned int)-1));
}
END_TEST

START_TEST(test_registry_names)
{
	ck_assert_str_eq(codec_names(), "lz4, zstd, lzo");
	/* Same buffer every time: callers may keep the pointer. */
	ck_assert_ptr_eq(codec_names(), codec_names());
}
END_TEST

/* ---- context life cycle and levels --------------------------------------- */

START_TEST(test_levels)
{
	const struct codec_ops *ops = ops_of(_i);
	unsigned char page[PAGE];
	struct codec_ctx ctx;

	rng_seed(1);
	fill_page(page, PAGE, FILL_TEXT);

	ck_assert_int_eq(codec_ctx_init(&ctx, ops, 0), 0);
	ck_assert_int_eq(ctx.level, ops->default_level);
	ck_assert_ptr_eq(ctx.ops, ops);
	round_trip(&ctx, page, PAGE);
	codec_ctx_fini(&ctx);
	ck_assert_ptr_null(ctx.ops);
	ck_assert_ptr_null(ctx.cstate);
	codec_ctx_fini(&ctx);	/* twice is harmless */

	/* Both ends of the range work, and are kept as given. */
	ctx_setup(&ctx, _i, ops->min_level);
	ck_assert_int_eq(ctx.level, ops->min_level ? ops->min_level : ops->default_level);
	round_trip(&ctx, page, PAGE);
	codec_ctx_fini(&ctx);
	ctx_setup(&ctx, _i, ops->max_level);
	ck_assert_int_eq(ctx.level, ops->max_level ? ops->max_level : ops->default_level);
	round_trip(&ctx, page, PAGE);
	codec_ctx_fini(&ctx);

	/* Out of range: -EINVAL, and the ctx is left safe to fini. */
	ck_assert_int_eq(codec_ctx_init(&ctx, ops, ops->max_level + 1), -EINVAL);
	ck_assert_ptr_null(ctx.ops);
	codec_ctx_fini(&ctx);
	ck_assert_int_eq(codec_ctx_init(&ctx, ops, -1), -EINVAL);
	codec_ctx_fini(&ctx);
	ck_assert_int_eq(codec_ctx_init(&ctx, ops, -1000000), -EINVAL);
	ck_assert_int_eq(codec_ctx_init(&ctx, ops, 1000000), -EINVAL);
	ck_assert_int_eq(codec_ctx_init(&ctx, NULL, 0), -EINVAL);
	codec_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_level_table)
{
	/* The documented ranges, which config validation relies on. */
	ck_assert_int_eq(codec_lz4.default_level, 1);
	ck_assert_int_eq(codec_lz4.min_level, 1);
	ck_assert_int_eq(codec_zstd.default_level, 3);
	ck_assert_int_eq(codec_zstd.min_level, 1);
	ck_assert_int_eq(codec_zstd.max_level, 22);
	ck_assert_int_eq(codec_lzo.min_level, codec_lzo.max_level);
	ck_assert_int_eq(codec_ctx_init(&(struct codec_ctx){ 0 }, &codec_lzo, 1), -EINVAL);
}
END_TEST

START_TEST(test_lz4_acceleration)
{
	unsigned char page[PAGE];
	struct codec_ctx slow, fast;
	int a, b;

	rng_seed(2);
	fill_page(page, PAGE, FILL_TEXT);
	ctx_setup(&slow, CODEC_LZ4, 1);
	ctx_setup(&fast, CODEC_LZ4, 1000);
	a = round_trip(&slow, page, PAGE);
	b = round_trip(&fast, page, PAGE);
	/* The level really reaches LZ4: acceleration trades ratio for speed. */
	ck_assert_int_lt(a, b);
	codec_ctx_fini(&slow);
	codec_ctx_fini(&fast);
}
END_TEST

/* ---- round trips ---------------------------------------------------------- */

static const size_t sizes[] = {
	0, 1, 2, 3, 4, 5, 7, 8, 12, 13, 15, 16, 17, 31, 63, 64, 100, 255, 256, 511,
	512, 1000, 1024, 2048, 3000, 4095, 4096, 4097, 8192, 65536, 200000,
};

START_TEST(test_round_trip)
{
	size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	unsigned char *buf = malloc(max);
	struct codec_ctx ctx;
	size_t s;
	int f;

	ck_assert_ptr_nonnull(buf);
	ctx_setup(&ctx, _i, 0);
	rng_seed(3);
	for (f = 0; f < FILL_COUNT; f++) {
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			fill_page(buf, sizes[s], f);
			round_trip(&ctx, buf, sizes[s]);
		}
	}
	/* Larger inputs may have grown buffers: pages must still work after. */
	fill_page(buf, PAGE, FILL_TEXT);
	round_trip(&ctx, buf, PAGE);
	codec_ctx_fini(&ctx);
	free(buf);
}
END_TEST

START_TEST(test_ratio)
{
	unsigned char page[PAGE];
	struct codec_ctx ctx;
	int n;

	ctx_setup(&ctx, _i, 0);
	rng_seed(4);
	fill_page(page, PAGE, FILL_ZERO);
	n = round_trip(&ctx, page, PAGE);
	ck_assert_msg(n < 64, "%s: zero page took %d bytes", ctx.ops->name, n);
	fill_page(page, PAGE, FILL_TEXT);
	n = round_trip(&ctx, page, PAGE);
	/* Well below the store's 3/4-page "huge" threshold. */
	ck_assert_msg(n < (int)PAGE / 2, "%s: text page took %d bytes", ctx.ops->name, n);
	fill_page(page, PAGE, FILL_MIXED);
	n = round_trip(&ctx, page, PAGE);
	ck_assert_msg(n < (int)PAGE / 2, "%s: mixed page took %d bytes", ctx.ops->name, n);
	codec_ctx_fini(&ctx);
}
END_TEST

/* A page compressed by one context decodes in any other (any thread's). */
START_TEST(test_cross_ctx)
{
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE];
	struct codec_ctx a, b;
	int f, n;

	ctx_setup(&a, _i, 0);
	ctx_setup(&b, _i, 0);
	rng_seed(5);
	for (f = 0; f < FILL_COUNT; f++) {
		fill_page(page, PAGE, f);
		n = codec_compress(&a, page, PAGE, c, sizeof(c));
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(codec_decompress(&b, c, (size_t)n, d, PAGE), 0);
		ck_assert_mem_eq(page, d, PAGE);
	}
	codec_ctx_fini(&a);
	codec_ctx_fini(&b);
}
END_TEST

/* ---- output that does not fit ----------------------------------------------- */

START_TEST(test_e2big)
{
	unsigned char page[PAGE], c[BIG_CAP(PAGE) + GUARD], d[PAGE];
	struct codec_ctx ctx;
	size_t cap;
	int f, n, m;

	ctx_setup(&ctx, _i, 0);
	rng_seed(6);

	/* Incompressible data never fits in its own size (the store's raw case). */
	fill_page(page, PAGE, FILL_RANDOM);
	guard_set(c, PAGE);
	ck_assert_int_eq(codec_compress(&ctx, page, PAGE, c, PAGE), -E2BIG);
	guard_check(c, PAGE, "compress random");
	guard_set(c, PAGE * 3 / 4);
	ck_assert_int_eq(codec_compress(&ctx, page, PAGE, c, PAGE * 3 / 4), -E2BIG);
	guard_check(c, PAGE * 3 / 4, "compress random 3/4");

	for (f = 0; f < FILL_COUNT; f++) {
		fill_page(page, PAGE, f);
		n = codec_compress(&ctx, page, PAGE, c, BIG_CAP(PAGE));
		ck_assert_int_gt(n, 0);
		/* Tiny buffers: refused, and nothing written past them. */
		for (cap = 0; cap < (size_t)n && cap <= 16; cap++) {
			guard_set(c, cap);
			ck_assert_int_eq(codec_compress(&ctx, page, PAGE, c, cap), -E2BIG);
			guard_check(c, cap, "compress tiny");
		}
		/* Exactly the compressed size fits; one byte less does not. */
		guard_set(c, (size_t)n);
		m = codec_compress(&ctx, page, PAGE, c, (size_t)n);
		ck_assert_msg(m == n, "%s/%s: cap %d gave %d", ctx.ops->name, fill_name[f], n, m);
		guard_check(c, (size_t)n, "compress exact");
		ck_assert_int_eq(codec_decompress(&ctx, c, (size_t)n, d, PAGE), 0);
		ck_assert_mem_eq(page, d, PAGE);
		guard_set(c, (size_t)n - 1);
		ck_assert_int_eq(codec_compress(&ctx, page, PAGE, c, (size_t)n - 1), -E2BIG);
		guard_check(c, (size_t)n - 1, "compress exact-1");
	}

	/*
	 * The store relies on -E2BIG meaning "does not fit", not "the library
	 * wanted slack": many pages, each at exactly its size.
	 */
	for (f = 0; f < 300; f++) {
		fill_page(page, PAGE, (enum fill)rng_below(FILL_COUNT));
		/* Overwrite a random stretch so that sizes cover many values. */
		cap = 1 + rng_below(64);
		fill_text(page + PAGE - cap - rng_below(PAGE / 2), cap);
		n = codec_compress(&ctx, page, PAGE, c, BIG_CAP(PAGE));
		ck_assert_int_gt(n, 0);
		m = codec_compress(&ctx, page, PAGE, c, (size_t)n);
		ck_assert_msg(m == n, "%s: page %d: cap %d gave %d", ctx.ops->name, f, n, m);
		ck_assert_int_eq(codec_compress(&ctx, page, PAGE, c, (size_t)n - 1), -E2BIG);
	}
	/* A refused compression leaves the context usable. */
	fill_page(page, PAGE, FILL_TEXT);
	round_trip(&ctx, page, PAGE);
	codec_ctx_fini(&ctx);
}
END_TEST

/* The page must expand to exactly dst_len: shorter or longer is corrupt. */
START_TEST(test_wrong_length)
{
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE + 1 + GUARD];
	struct codec_ctx ctx;
	int f, n;

	ctx_setup(&ctx, _i, 0);
	rng_seed(7);
	for (f = 0; f < FILL_COUNT; f++) {
		fill_page(page, PAGE, f);
		n = codec_compress(&ctx, page, PAGE, c, sizeof(c));
		ck_assert_int_gt(n, 0);
		guard_set(d, PAGE - 1);
		ck_assert_int_eq(codec_decompress(&ctx, c, (size_t)n, d, PAGE - 1), -EINVAL);
		guard_check(d, PAGE - 1, "decompress short dst");
		guard_set(d, PAGE + 1);
		ck_assert_int_eq(codec_decompress(&ctx, c, (size_t)n, d, PAGE + 1), -EINVAL);
		guard_check(d, PAGE + 1, "decompress long dst");
		ck_assert_int_eq(codec_decompress(&ctx, c, (size_t)n, d, 0), -EINVAL);
		ck_assert_int_eq(codec_decompress(&ctx, c, 0, d, PAGE), -EINVAL);
	}
	codec_ctx_fini(&ctx);
}
END_TEST

/* ---- corrupt input ---------------------------------------------------------- */

enum mutation { MUT_FLIP, MUT_TRUNCATE, MUT_GARBAGE, MUT_SPLICE, MUT_COUNT };

/*
 * Decode bad from a fenced copy into d, a fenced page with guard bytes in
 * front.  Returns the decoder's result after checking the rules that hold
 * for any input: only 0 or -EINVAL, and nothing touched outside the buffers.
 */
static int decode_bad(struct codec_ctx *ctx, const unsigned char *bad, size_t bad_len,
		      struct fence *sf, unsigned char *d)
{
	unsigned char *exact = fence_at(sf, bad_len);
	int ret;

	memcpy(exact, bad, bad_len);
	guard_set(d - GUARD, 0);
	ret = codec_decompress(ctx, exact, bad_len, d, PAGE);
	ck_assert_msg(ret == 0 || ret == -EINVAL, "%s: corrupt input gave %d",
		      ctx->ops->name, ret);
	guard_check(d - GUARD, 0, "decompress corrupt (before dst)");
	return ret;
}

START_TEST(test_corrupt)
{
	unsigned char page[PAGE], good[BIG_CAP(PAGE)], bad[BIG_CAP(PAGE)];
	unsigned int it, iters = fuzz_iters();
	unsigned int rejected[MUT_COUNT] = { 0 }, tried[MUT_COUNT] = { 0 };
	unsigned int wrong_ok = 0;
	struct fence sf, df;
	struct codec_ctx ctx;
	unsigned char *d;
	size_t bad_len;
	int n = 0, ret;

	fence_init(&sf, sizeof(bad));
	fence_init(&df, PAGE + GUARD);
	d = fence_at(&df, PAGE);
	ctx_setup(&ctx, _i, 0);
	rng_seed(fuzz_seed() + (uint64_t)_i);
	fill_page(page, PAGE, FILL_TEXT);
	n = codec_compress(&ctx, page, PAGE, good, sizeof(good));
	ck_assert_int_gt(n, 0);
	for (it = 0; it < iters; it++) {
		enum mutation mut = (enum mutation)rng_below(MUT_COUNT);
		size_t k, flips;

		if (it % 64 == 63) {
			fill_page(page, PAGE, (enum fill)rng_below(FILL_COUNT));
			n = codec_compress(&ctx, page, PAGE, good, sizeof(good));
			ck_assert_int_gt(n, 0);
		}
		memcpy(bad, good, (size_t)n);
		bad_len = (size_t)n;

		switch (mut) {
		case MUT_FLIP:
			flips = 1 + rng_below(8);
			for (k = 0; k < flips; k++) {
				size_t at = rng_below((unsigned int)n);

				bad[at] ^= (unsigned char)(1u << rng_below(8));
			}
			break;
		case MUT_TRUNCATE:
			bad_len = rng_below((unsigned int)n);
			break;
		case MUT_GARBAGE:
			bad_len = rng_below(sizeof(bad));
			for (k = 0; k < bad_len; k++)
				bad[k] = (unsigned char)rng();
			/* Keep the header sometimes, to get past the first checks. */
			if (rng_below(2))
				memcpy(bad, good, bad_len < 8 ? bad_len : 8);
			break;
		case MUT_SPLICE:
			/* A valid head glued to random bytes, at the original length. */
			k = rng_below((unsigned int)n);
			while (k < bad_len)
				bad[k++] = (unsigned char)rng();
			break;
		default:
			ck_abort();
		}

		tried[mut]++;
		ret = decode_bad(&ctx, bad, bad_len, &sf, d);
		if (ret == -EINVAL) {
			rejected[mut]++;
		} else if (memcmp(d, page, PAGE) != 0) {
			/* Decoded to exactly a page of other bytes: no checksum. */
			wrong_ok++;
		}
		/* A stream cut short can never expand to a whole page. */
		if (mut == MUT_TRUNCATE)
			ck_assert_msg(ret == -EINVAL, "%s: truncation to %zu of %d accepted",
				      ctx.ops->name, bad_len, n);

		/* The context must survive anything: a good page still decodes. */
		if (it % 97 == 0) {
			ck_assert_int_eq(codec_decompress(&ctx, good, (size_t)n, d, PAGE), 0);
			ck_assert_mem_eq(d, page, PAGE);
		}
	}
	/*
	 * Tiny inputs, where a decoder's header reads can run off the end:
	 * random bytes, or (first) a truncated good stream.  Even a zero page
	 * takes more than 9 bytes in every codec, so none may decode.
	 */
	for (bad_len = 0; bad_len <= 24; bad_len++) {
		for (it = 0; it < 256; it++) {
			int prefix = it == 0 && bad_len < (size_t)n;
			size_t k;

			for (k = 0; k < bad_len; k++)
				bad[k] = prefix ? good[k] : (unsigned char)rng();
			ret = decode_bad(&ctx, bad, bad_len, &sf, d);
			ck_assert_msg(ret == -EINVAL, "%s: %zu-byte input gave %d", ctx.ops->name,
				      bad_len, ret);
		}
	}

	/* Garbage without any valid header is essentially never a page. */
	ck_assert_uint_ge(rejected[MUT_GARBAGE] * 10, tried[MUT_GARBAGE] * 9);
	printf("%-5s fuzz %u iters: rejected flip %u/%u trunc %u/%u garbage %u/%u "
	       "splice %u/%u; decoded to other bytes %u\n", ctx.ops->name, iters,
	       rejected[MUT_FLIP], tried[MUT_FLIP], rejected[MUT_TRUNCATE], tried[MUT_TRUNCATE],
	       rejected[MUT_GARBAGE], tried[MUT_GARBAGE], rejected[MUT_SPLICE],
	       tried[MUT_SPLICE], wrong_ok);
	codec_ctx_fini(&ctx);
	fence_fini(&df);
	fence_fini(&sf);
}
END_TEST

/* ---- threads ------------------------------------------------------------------- */

struct thread_arg {
	int id;
	uint64_t seed;
	int failures;
};

static void *thread_main(void *p)
{
	struct thread_arg *arg = p;
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE];
	struct codec_ctx ctx;
	uint64_t s = arg->seed;
	int it, n;
	size_t k;

	/* Contexts are per thread: nothing global may be shared unsafely. */
	if (codec_ctx_init(&ctx, codec_by_id((unsigned int)arg->id), 0)) {
		arg->failures++;
		return NULL;
	}
	for (it = 0; it < 300; it++) {
		for (k = 0; k < PAGE; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			/* Alternate compressible and random stretches. */
			page[k] = (unsigned char)(s >> ((k / 512) % 2 ? 60 : 56));
		}
		n = codec_compress(&ctx, page, PAGE, c, sizeof(c));
		if (n <= 0 || codec_decompress(&ctx, c, (size_t)n, d, PAGE) ||
		    memcmp(page, d, PAGE))
			arg->failures++;
	}
	codec_ctx_fini(&ctx);
	return NULL;
}

START_TEST(test_threads)
{
	struct thread_arg args[4];
	pthread_t th[4];
	int t;

	for (t = 0; t < 4; t++) {
		args[t] = (struct thread_arg){ .id = _i, .seed = (uint64_t)t + 1 };
		ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &args[t]), 0);
	}
	for (t = 0; t < 4; t++) {
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
		ck_assert_int_eq(args[t].failures, 0);
	}
}
END_TEST

/* ---- no allocation in the I/O path ---------------------------------------------- */

#ifndef __SANITIZE_ADDRESS__
/*
 * Count the allocations of the whole process (the libraries' included) by
 * interposing the allocator; ASan brings its own, hence the guard.
 */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);

static _Atomic long alloc_count;

void *malloc(size_t size)
{
	alloc_count++;
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	alloc_count++;
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	alloc_count++;
	return __libc_realloc(p, size);
}

/* The kernel swaps to us because memory is short: a page must not allocate. */
START_TEST(test_no_alloc)
{
	const struct codec_ops *ops = ops_of(_i);
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE];
	int levels[2] = { 0, ops->max_level };
	struct codec_ctx ctx;
	long before, allocs;
	int l, r, n, f, bad;

	if (_i == CODEC_LZ4)
		levels[1] = 1000;
	rng_seed(9);
	for (l = 0; l < 2; l++) {
		ctx_setup(&ctx, _i, levels[l]);
		bad = 0;
		/* No ck_assert in the loop: check allocates to record each one. */
		before = alloc_count;
		for (r = 0; r < 100; r++) {
			f = r % FILL_COUNT;
			fill_page(page, PAGE, f);
			/* Small caps take the codecs' bounce paths. */
			n = codec_compress(&ctx, page, PAGE, c, r % 2 ? sizeof(c) : PAGE * 3 / 4);
			if (n < 0) {
				bad += n != -E2BIG;
				continue;
			}
			bad += codec_decompress(&ctx, c, (size_t)n, d, PAGE) != 0;
			bad += memcmp(page, d, PAGE) != 0;
			bad += codec_decompress(&ctx, c, (size_t)n / 2, d, PAGE) != -EINVAL;
		}
		allocs = alloc_count - before;
		ck_assert_int_eq(bad, 0);
		ck_assert_msg(allocs == 0, "%s level %d: %ld allocations for 100 pages",
			      ops->name, ctx.level, allocs);
		codec_ctx_fini(&ctx);
	}
}
END_TEST
#endif

/* ---- dictionaries ------------------------------------------------------------------- */

/*
 * Dictionaries made once in main(), before check forks the tests (which
 * inherit them): raw content; one trained by zstd on pages like those the
 * tests compress; and a second trained one, from other pages of the same
 * kind, of the same size: the hardest "wrong dictionary" there is.
 */
enum dict_kind { DK_RAW, DK_TRAINED, DK_OTHER, DK_COUNT };

static const char *const dk_name[DK_COUNT] = { "raw", "trained", "other" };
static unsigned char *dk_bytes[DK_COUNT];
static size_t dk_len[DK_COUNT];

/* Pages like the dictionaries': text and heap-like records, the kinds that repeat. */
static void fill_dictish(unsigned char *p, unsigned int i)
{
	fill_page(p, PAGE, i % 3 ? FILL_TEXT : FILL_MIXED);
}

static void dicts_make(void)
{
	enum { NSAMPLES = 1200 };
	unsigned char *samples = malloc((size_t)NSAMPLES * PAGE);
	size_t *lens = malloc(NSAMPLES * sizeof(*lens));
	char err[256];
	unsigned int i, k;
	long n;

	if (!samples || !lens)
		abort();
	dk_len[DK_RAW] = 32 << 10;
	dk_bytes[DK_RAW] = malloc(dk_len[DK_RAW]);
	if (!dk_bytes[DK_RAW])
		abort();
	rng_seed(100);
	fill_text(dk_bytes[DK_RAW], dk_len[DK_RAW]);
	for (k = DK_TRAINED; k <= DK_OTHER; k++) {
		rng_seed(101 + k);
		for (i = 0; i < NSAMPLES; i++) {
			fill_dictish(samples + (size_t)i * PAGE, i);
			lens[i] = PAGE;
		}
		dk_bytes[k] = malloc(DICT_TRAIN_SIZE);
		if (!dk_bytes[k])
			abort();
		n = dict_train(dk_bytes[k], DICT_TRAIN_SIZE, samples, lens, NSAMPLES, NULL, err,
			       sizeof(err));
		if (n <= 0) {
			fprintf(stderr, "training the test dictionary: %s\n", err);
			abort();
		}
		dk_len[k] = (size_t)n;
	}
	free(lens);
	free(samples);
}

static struct codec_dict *dict_setup(int i, enum dict_kind k, int level)
{
	struct codec_dict *d = NULL;
	int ret = codec_dict_create(&d, ops_of(i), level, dk_bytes[k], dk_len[k]);

	ck_assert_msg(ret == 0, "%s: %s dictionary: %d", ops_of(i)->name, dk_name[k], ret);
	ck_assert_ptr_nonnull(d);
	return d;
}

static unsigned int dict_refs(struct codec_dict *d)
{
	return atomic_load(&d->refs);
}

START_TEST(test_dict_support)
{
	struct codec_dict *d = (struct codec_dict *)0x1;	/* must stay untouched */
	unsigned char page[PAGE], c[BIG_CAP(PAGE)];
	struct codec_ctx ctx;

	/* lz4 and zstd take dictionaries; lzo has none and says so. */
	ck_assert(codec_has_dict(&codec_lz4));
	ck_assert(codec_has_dict(&codec_zstd));
	ck_assert(!codec_has_dict(&codec_lzo));
	ck_assert(!codec_has_dict(NULL));
	ck_assert_int_eq(codec_dict_create(&d, &codec_lzo, 0, dk_bytes[DK_RAW], dk_len[DK_RAW]),
			 -EOPNOTSUPP);
	ck_assert_int_eq(codec_dict_create(&d, NULL, 0, dk_bytes[DK_RAW], dk_len[DK_RAW]),
			 -EINVAL);
	ck_assert_int_eq(codec_dict_create(&d, &codec_lz4, 0, dk_bytes[DK_RAW], 0), -EINVAL);
	ck_assert_int_eq(codec_dict_create(&d, &codec_lz4, 0, NULL, 10), -EINVAL);
	/* lz4 cannot hash fewer than 8 bytes: refused rather than silently unused. */
	ck_assert_int_eq(codec_dict_create(&d, &codec_lz4, 0, dk_bytes[DK_RAW], 7), -EINVAL);
	ck_assert_int_eq(codec_dict_create(&d, &codec_zstd, 23, dk_bytes[DK_RAW],
					   dk_len[DK_RAW]), -EINVAL);
	ck_assert_int_eq(codec_dict_create(&d, &codec_zstd, -1, dk_bytes[DK_RAW],
					   dk_len[DK_RAW]), -EINVAL);
	ck_assert_ptr_eq(d, (struct codec_dict *)0x1);

	/* A dictionary of one codec is refused by a context of another. */
	d = dict_setup(CODEC_LZ4, DK_RAW, 0);
	rng_seed(20);
	fill_page(page, PAGE, FILL_TEXT);
	ctx_setup(&ctx, CODEC_LZO, 0);
	ck_assert_int_eq(codec_compress_dict(&ctx, d, page, PAGE, c, sizeof(c)), -EINVAL);
	ck_assert_int_eq(codec_decompress_dict(&ctx, d, c, 100, page, PAGE), -EINVAL);
	codec_ctx_fini(&ctx);
	ctx_setup(&ctx, CODEC_ZSTD, 0);
	ck_assert_int_eq(codec_compress_dict(&ctx, d, page, PAGE, c, sizeof(c)), -EINVAL);
	ck_assert_int_eq(codec_decompress_dict(&ctx, d, c, 100, page, PAGE), -EINVAL);
	codec_ctx_fini(&ctx);
	codec_dict_put(d);
	codec_dict_put(NULL);
}
END_TEST

/* Round trips of every data kind and size, with each dictionary and without. */
START_TEST(test_dict_round_trip)
{
	size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	unsigned char *buf = malloc(max);
	struct codec_dict *d[DK_COUNT];
	struct codec_ctx ctx;
	size_t s;
	int f, k;

	ck_assert_ptr_nonnull(buf);
	ctx_setup(&ctx, _i, 0);
	for (k = 0; k < DK_COUNT; k++)
		d[k] = dict_setup(_i, (enum dict_kind)k, 0);
	rng_seed(21);
	for (f = 0; f < FILL_COUNT; f++) {
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			fill_page(buf, sizes[s], f);
			for (k = 0; k < DK_COUNT; k++)
				round_trip_dict(&ctx, d[k], buf, sizes[s]);
			/* and without, on the same context, in between */
			round_trip(&ctx, buf, sizes[s]);
		}
	}
	/* A page that is the dictionary's own end compresses to almost nothing. */
	memcpy(buf, dk_bytes[DK_TRAINED] + dk_len[DK_TRAINED] - PAGE, PAGE);
	ck_assert_int_lt(round_trip_dict(&ctx, d[DK_TRAINED], buf, PAGE), 64);
	ck_assert_int_gt(round_trip(&ctx, buf, PAGE), 64);
	for (k = 0; k < DK_COUNT; k++)
		codec_dict_put(d[k]);
	codec_ctx_fini(&ctx);
	free(buf);
}
END_TEST

/* The dictionary really reaches the library: pages like its samples shrink. */
START_TEST(test_dict_ratio)
{
	enum { N = 64 };
	unsigned char page[PAGE];
	struct codec_dict *d = dict_setup(_i, DK_TRAINED, 0);
	struct codec_ctx ctx;
	long with = 0, without = 0;
	unsigned int i;

	ctx_setup(&ctx, _i, 0);
	rng_seed(22);	/* not a seed the dictionaries were trained on */
	for (i = 0; i < N; i++) {
		fill_dictish(page, i);
		with += round_trip_dict(&ctx, d, page, PAGE);
		without += round_trip(&ctx, page, PAGE);
	}
	printf("%-5s dictionary on %d held-out pages: %ld -> %ld bytes (%.1f %%)\n",
	       ctx.ops->name, N, without, with, 100.0 * (double)(without - with) / (double)without);
	/* Measured: lz4 -9 %, zstd -7.5 %; 3 % says it was used, not how well. */
	ck_assert_msg(with * 100 < without * 97, "%s: %ld bytes with the dictionary, %ld without",
		      ctx.ops->name, with, without);
	codec_dict_put(d);
	codec_ctx_fini(&ctx);
}
END_TEST

/*
 * A page compressed with dictionary A decodes with A.  With no dictionary,
 * or another one, it must fail cleanly or decode to some page (no codec can
 * tell which dictionary wrote a page without storing its id), never write
 * outside the page, and never pass off the original as decoded when it is
 * not.  Without one, a page that uses its dictionary fails.
 */
START_TEST(test_dict_wrong)
{
	enum { N = 60 };
	unsigned char page[PAGE], c[BIG_CAP(PAGE)];
	struct codec_dict *a = dict_setup(_i, DK_TRAINED, 0);
	struct codec_dict *b = dict_setup(_i, DK_OTHER, 0);
	struct codec_dict *r = dict_setup(_i, DK_RAW, 0);
	struct codec_dict *other[2] = { b, r };
	unsigned int i, none_failed = 0, none_ok = 0, wrong_failed = 0, wrong_garbled = 0;
	struct fence df;
	struct codec_ctx ctx;
	unsigned char *d;
	int n, ret, o;

	ck_assert_uint_eq(dk_len[DK_TRAINED], dk_len[DK_OTHER]);
	fence_init(&df, PAGE + GUARD);
	d = fence_at(&df, PAGE);
	ctx_setup(&ctx, _i, 0);
	rng_seed(23);
	for (i = 0; i < N; i++) {
		fill_dictish(page, i);
		n = codec_compress_dict(&ctx, a, page, PAGE, c, sizeof(c));
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(codec_decompress_dict(&ctx, a, c, (size_t)n, d, PAGE), 0);
		ck_assert_mem_eq(d, page, PAGE);

		guard_set(d - GUARD, 0);
		ret = codec_decompress_dict(&ctx, NULL, c, (size_t)n, d, PAGE);
		ck_assert_msg(ret == 0 || ret == -EINVAL, "%s: no dictionary gave %d",
			      ctx.ops->name, ret);
		guard_check(d - GUARD, 0, "decode without the dictionary");
		if (ret) {
			none_failed++;
		} else if (!memcmp(d, page, PAGE)) {
			none_ok++;
		} else {
			/*
			 * LZ4 without a dictionary refuses every match into
			 * it: only a page that used none decodes, correctly.
			 */
			ck_assert_msg(_i != CODEC_LZ4, "lz4: page %u decoded wrongly without "
				      "its dictionary", i);
		}
		for (o = 0; o < 2; o++) {
			guard_set(d - GUARD, 0);
			ret = codec_decompress_dict(&ctx, other[o], c, (size_t)n, d, PAGE);
			ck_assert_msg(ret == 0 || ret == -EINVAL, "%s: wrong dictionary gave %d",
				      ctx.ops->name, ret);
			guard_check(d - GUARD, 0, "decode with the wrong dictionary");
			if (ret)
				wrong_failed++;
			else if (memcmp(d, page, PAGE))
				wrong_garbled++;
		}
		/* The context is unharmed: A still decodes it. */
		ck_assert_int_eq(codec_decompress_dict(&ctx, a, c, (size_t)n, d, PAGE), 0);
		ck_assert_mem_eq(d, page, PAGE);
	}
	printf("%-5s %u pages compressed with dictionary A: without one %u failed, %u decoded "
	       "(used none of it); with B or a raw one %u failed, %u decoded to other bytes\n",
	       ctx.ops->name, N, none_failed, none_ok, wrong_failed, wrong_garbled);
	/* Pages like the dictionary's samples all use it. */
	ck_assert_uint_ge(none_failed * 10, N * 9);
	codec_dict_put(a);
	codec_dict_put(b);
	codec_dict_put(r);
	codec_ctx_fini(&ctx);
	fence_fini(&df);
}
END_TEST

/* Corrupt input decoded with a dictionary: 0 or -EINVAL, nothing written outside. */
START_TEST(test_dict_corrupt)
{
	unsigned char page[PAGE], good[BIG_CAP(PAGE)], bad[BIG_CAP(PAGE)];
	unsigned int it, iters = fuzz_iters() / 2, rejected = 0;
	struct codec_dict *dict = dict_setup(_i, DK_TRAINED, 0);
	struct fence sf, df;
	struct codec_ctx ctx;
	unsigned char *d, *exact;
	size_t bad_len, k;
	int n = 0, ret;

	fence_init(&sf, sizeof(bad));
	fence_init(&df, PAGE + GUARD);
	d = fence_at(&df, PAGE);
	ctx_setup(&ctx, _i, 0);
	rng_seed(fuzz_seed() + 24 + (uint64_t)_i);
	for (it = 0; it < iters; it++) {
		if (it % 64 == 0) {
			fill_dictish(page, it / 64);
			n = codec_compress_dict(&ctx, dict, page, PAGE, good, sizeof(good));
			ck_assert_int_gt(n, 0);
		}
		memcpy(bad, good, (size_t)n);
		bad_len = (size_t)n;
		switch (rng_below(3)) {
		case 0:
			for (k = 1 + rng_below(8); k > 0; k--)
				bad[rng_below((unsigned int)n)] ^= (unsigned char)(1u << rng_below(8));
			break;
		case 1:
			bad_len = rng_below((unsigned int)n);
			break;
		default:
			for (k = rng_below((unsigned int)n); k < bad_len; k++)
				bad[k] = (unsigned char)rng();
		}
		exact = fence_at(&sf, bad_len);
		memcpy(exact, bad, bad_len);
		guard_set(d - GUARD, 0);
		ret = codec_decompress_dict(&ctx, dict, exact, bad_len, d, PAGE);
		ck_assert_msg(ret == 0 || ret == -EINVAL, "%s: corrupt input gave %d",
			      ctx.ops->name, ret);
		guard_check(d - GUARD, 0, "decompress corrupt with a dictionary");
		rejected += ret != 0;
	}
	ck_assert_int_eq(codec_decompress_dict(&ctx, dict, good, (size_t)n, d, PAGE), 0);
	ck_assert_mem_eq(d, page, PAGE);
	/* Most damage is caught (truncation always is). */
	ck_assert_uint_ge(rejected * 3, iters);
	codec_dict_put(dict);
	codec_ctx_fini(&ctx);
	fence_fini(&df);
	fence_fini(&sf);
}
END_TEST

/* As test_e2big, with a dictionary: -E2BIG means exactly "does not fit". */
START_TEST(test_dict_e2big)
{
	unsigned char page[PAGE], c[BIG_CAP(PAGE) + GUARD], d[PAGE];
	struct codec_dict *dict = dict_setup(_i, DK_TRAINED, 0);
	struct codec_ctx ctx;
	int i, n, m;

	ctx_setup(&ctx, _i, 0);
	rng_seed(25);
	fill_page(page, PAGE, FILL_RANDOM);
	guard_set(c, PAGE * 3 / 4);
	ck_assert_int_eq(codec_compress_dict(&ctx, dict, page, PAGE, c, PAGE * 3 / 4), -E2BIG);
	guard_check(c, PAGE * 3 / 4, "compress random with a dictionary");
	for (i = 0; i < 200; i++) {
		fill_page(page, PAGE, (enum fill)rng_below(FILL_COUNT));
		fill_text(page + rng_below(PAGE / 2), 1 + rng_below(64));
		n = codec_compress_dict(&ctx, dict, page, PAGE, c, BIG_CAP(PAGE));
		ck_assert_int_gt(n, 0);
		guard_set(c, (size_t)n);
		m = codec_compress_dict(&ctx, dict, page, PAGE, c, (size_t)n);
		ck_assert_msg(m == n, "%s: page %d: cap %d gave %d", ctx.ops->name, i, n, m);
		guard_check(c, (size_t)n, "compress exact with a dictionary");
		ck_assert_int_eq(codec_decompress_dict(&ctx, dict, c, (size_t)n, d, PAGE), 0);
		ck_assert_mem_eq(page, d, PAGE);
		guard_set(c, (size_t)n - 1);
		ck_assert_int_eq(codec_compress_dict(&ctx, dict, page, PAGE, c, (size_t)n - 1),
				 -E2BIG);
		guard_check(c, (size_t)n - 1, "compress exact-1 with a dictionary");
	}
	codec_dict_put(dict);
	codec_ctx_fini(&ctx);
}
END_TEST

/*
 * Levels: zstd's dictionary is built for one level and refused at another
 * (the level a context reports is the one it compresses at), but decodes
 * at any.  lz4's serves every acceleration, which still takes effect.
 */
START_TEST(test_dict_levels)
{
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE];
	struct codec_ctx l3, l9, fast;
	struct codec_dict *dict;
	int n, a, b;

	rng_seed(26);
	fill_dictish(page, 1);
	dict = dict_setup(CODEC_ZSTD, DK_TRAINED, 0);
	ck_assert_int_eq(dict->level, 3);
	codec_dict_put(dict);
	dict = dict_setup(CODEC_ZSTD, DK_TRAINED, 9);
	ck_assert_int_eq(dict->level, 9);
	ctx_setup(&l3, CODEC_ZSTD, 3);
	ctx_setup(&l9, CODEC_ZSTD, 9);
	ck_assert_int_eq(codec_compress_dict(&l3, dict, page, PAGE, c, sizeof(c)), -EINVAL);
	round_trip_dict(&l9, dict, page, PAGE);
	n = codec_compress_dict(&l9, dict, page, PAGE, c, sizeof(c));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(codec_decompress_dict(&l3, dict, c, (size_t)n, d, PAGE), 0);
	ck_assert_mem_eq(page, d, PAGE);
	codec_dict_put(dict);
	codec_ctx_fini(&l3);
	codec_ctx_fini(&l9);

	dict = dict_setup(CODEC_LZ4, DK_TRAINED, 1000);
	ck_assert_int_eq(dict->level, 0);
	ctx_setup(&l3, CODEC_LZ4, 1);
	ctx_setup(&fast, CODEC_LZ4, 1000);
	fill_page(page, PAGE, FILL_TEXT);
	a = round_trip_dict(&l3, dict, page, PAGE);
	b = round_trip_dict(&fast, dict, page, PAGE);
	ck_assert_int_lt(a, b);
	n = codec_compress_dict(&fast, dict, page, PAGE, c, sizeof(c));
	ck_assert_int_eq(codec_decompress_dict(&l3, dict, c, (size_t)n, d, PAGE), 0);
	ck_assert_mem_eq(page, d, PAGE);
	codec_dict_put(dict);
	codec_ctx_fini(&l3);
	codec_ctx_fini(&fast);
}
END_TEST

/*
 * lz4's template stream: a copy of a stream loaded once compresses exactly
 * as a stream loaded with LZ4_loadDict for this very page, byte for byte, at
 * any acceleration, also when the dictionary is longer than LZ4's 64 KiB
 * window (only its end is used) and when the fresh stream's copy of the
 * dictionary lies elsewhere in memory.
 */
static void lz4_fresh(LZ4_stream_t *st, const unsigned char *dict, size_t len,
		      const unsigned char *page, char *out, int *n, int accel)
{
	size_t use = len > 65536 ? 65536 : len;

	/* A used stream, as a per-page LZ4_loadDict would find it. */
	ck_assert_int_eq(LZ4_loadDict(st, (const char *)dict + len - use, (int)use), (int)use);
	*n = LZ4_compress_fast_continue(st, (const char *)page, out, PAGE,
					LZ4_COMPRESSBOUND(PAGE), accel);
}

START_TEST(test_dict_lz4_template)
{
	enum { N = 200 };
	static const size_t lens[] = { 8, 100, 4096, 32768, 65535, 65536, 65537, 200000 };
	char fresh[LZ4_COMPRESSBOUND(PAGE)], tmpl[LZ4_COMPRESSBOUND(PAGE)];
	unsigned char page[PAGE], *bytes, *elsewhere;
	LZ4_stream_t *st = LZ4_createStream();
	struct codec_dict *dict;
	struct codec_ctx ctx;
	size_t l;
	int i, a, b, accel;

	ck_assert_ptr_nonnull(st);
	bytes = malloc(lens[sizeof(lens) / sizeof(lens[0]) - 1]);
	elsewhere = malloc(lens[sizeof(lens) / sizeof(lens[0]) - 1]);
	ck_assert_ptr_nonnull(bytes);
	ck_assert_ptr_nonnull(elsewhere);
	rng_seed(27);
	for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		fill_text(bytes, lens[l]);
		memcpy(elsewhere, bytes, lens[l]);
		dict = NULL;
		ck_assert_int_eq(codec_dict_create(&dict, &codec_lz4, 0, bytes, lens[l]), 0);
		for (accel = 1; accel <= 17; accel += 16) {
			ctx_setup(&ctx, CODEC_LZ4, accel);
			for (i = 0; i < N; i++) {
				/* mostly text like the dictionary, some of every kind */
				fill_page(page, PAGE, i % 4 ? FILL_TEXT : (enum fill)(i / 4 % FILL_COUNT));
				a = codec_compress_dict(&ctx, dict, page, PAGE, tmpl, sizeof(tmpl));
				lz4_fresh(st, i % 2 ? elsewhere : dict->bytes, lens[l], page, fresh,
					  &b, accel);
				ck_assert_int_gt(a, 0);
				ck_assert_msg(a == b && !memcmp(tmpl, fresh, (size_t)a),
					      "dictionary of %zu bytes, accel %d, page %d: template "
					      "stream gave %d bytes, a fresh one %d%s", lens[l], accel,
					      i, a, b, a == b ? " (different bytes)" : "");
			}
			codec_ctx_fini(&ctx);
		}
		codec_dict_put(dict);
	}
	free(elsewhere);
	free(bytes);
	LZ4_freeStream(st);
}
END_TEST

/* zstd's page frames carry no dictionary id: the store records the dictionary. */
START_TEST(test_dict_zstd_frame)
{
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], plain[BIG_CAP(PAGE)];
	struct codec_dict *dict = dict_setup(CODEC_ZSTD, DK_TRAINED, 0);
	struct codec_ctx ctx;
	int n, m;

	ck_assert_uint_ne(ZSTD_getDictID_fromDict(dk_bytes[DK_TRAINED], dk_len[DK_TRAINED]), 0);
	ctx_setup(&ctx, CODEC_ZSTD, 0);
	rng_seed(28);
	fill_dictish(page, 1);
	n = codec_compress_dict(&ctx, dict, page, PAGE, c, sizeof(c));
	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(ZSTD_getDictID_fromFrame(c, (size_t)n), 0);
	/* and no content size, as without a dictionary */
	ck_assert(ZSTD_getFrameContentSize(c, (size_t)n) == ZSTD_CONTENTSIZE_UNKNOWN);
	/* The dictionary was used. */
	m = codec_compress(&ctx, page, PAGE, plain, sizeof(plain));
	ck_assert_int_gt(m, n);
	codec_dict_put(dict);
	codec_ctx_fini(&ctx);
}
END_TEST

/* One dictionary, shared read-only by threads with their own contexts. */
struct dict_thread_arg {
	int id;
	struct codec_dict *dict;	/* a reference of the thread's own */
	uint64_t seed;
	int failures;
};

static void *dict_thread_main(void *p)
{
	struct dict_thread_arg *arg = p;
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE];
	struct codec_ctx ctx;
	int it, n;

	if (codec_ctx_init(&ctx, codec_by_id((unsigned int)arg->id), 0)) {
		arg->failures++;
		goto out_put;
	}
	for (it = 0; it < 300; it++) {
		struct codec_dict *ref = codec_dict_get(arg->dict);
		unsigned int k;

		/* text from the shared vocabulary, without the shared rng */
		for (k = 0; k < PAGE; k++) {
			arg->seed = arg->seed * 6364136223846793005ull + 1442695040888963407ull;
			page[k] = (unsigned char)("page swap kernel zswapfs \n"[(arg->seed >> 59) %
										26]);
		}
		n = codec_compress_dict(&ctx, ref, page, PAGE, c, sizeof(c));
		if (n <= 0 || codec_decompress_dict(&ctx, ref, c, (size_t)n, d, PAGE) ||
		    memcmp(page, d, PAGE))
			arg->failures++;
		codec_dict_put(ref);
	}
	codec_ctx_fini(&ctx);
out_put:
	/* The last thread to finish frees the dictionary. */
	codec_dict_put(arg->dict);
	return NULL;
}

START_TEST(test_dict_threads)
{
	struct dict_thread_arg args[4];
	struct codec_dict *dict = dict_setup(_i, DK_TRAINED, 0);
	pthread_t th[4];
	int t;

	for (t = 0; t < 4; t++) {
		args[t] = (struct dict_thread_arg){ .id = _i, .seed = (uint64_t)t + 1,
						    .dict = codec_dict_get(dict) };
		ck_assert_int_eq(pthread_create(&th[t], NULL, dict_thread_main, &args[t]), 0);
	}
	/* The creator lets go while they work. */
	ck_assert_uint_ge(dict_refs(dict), 2);
	codec_dict_put(dict);
	for (t = 0; t < 4; t++) {
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
		ck_assert_int_eq(args[t].failures, 0);
	}
}
END_TEST

START_TEST(test_dict_refs)
{
	struct codec_dict *dict = dict_setup(_i, DK_RAW, 0);
	unsigned char page[PAGE];
	struct codec_ctx ctx;

	ck_assert_uint_eq(dict_refs(dict), 1);
	ck_assert_ptr_eq(codec_dict_get(dict), dict);
	ck_assert_uint_eq(dict_refs(dict), 2);
	codec_dict_put(dict);
	ck_assert_uint_eq(dict_refs(dict), 1);
	/* Still whole after the put of another holder. */
	ctx_setup(&ctx, _i, 0);
	rng_seed(29);
	fill_page(page, PAGE, FILL_TEXT);
	round_trip_dict(&ctx, dict, page, PAGE);
	codec_ctx_fini(&ctx);
	/* The last put frees it (the sanitizer build would report a leak otherwise). */
	codec_dict_put(dict);
}
END_TEST

#ifndef __SANITIZE_ADDRESS__
/*
 * No allocation with dictionaries either, in the pattern the store will
 * have: contexts made long before the dictionary, pages with it, without
 * it (long enough for zstd to consider shrinking its work space), with
 * another, then alternating; output that does not fit; decoding each.
 */
START_TEST(test_dict_no_alloc)
{
	const struct codec_ops *ops = ops_of(_i);
	unsigned char page[PAGE], c[BIG_CAP(PAGE)], d[PAGE];
	int levels[2] = { 0, ops->max_level };
	struct codec_dict *a, *b, *use;
	struct codec_ctx ctx;
	long before, allocs;
	int l, r, n, bad;

	if (_i == CODEC_LZ4)
		levels[1] = 1000;
	rng_seed(30);
	for (l = 0; l < 2; l++) {
		ctx_setup(&ctx, _i, levels[l]);
		a = dict_setup(_i, DK_TRAINED, ctx.level);
		b = dict_setup(_i, DK_OTHER, ctx.level);
		bad = 0;
		/* No ck_assert in the loop: check allocates to record each one. */
		before = alloc_count;
		for (r = 0; r < 700; r++) {
			if (r < 150)
				use = a;
			else if (r < 450)
				use = NULL;
			else if (r < 600)
				use = b;
			else
				use = r % 3 == 0 ? a : r % 3 == 1 ? NULL : b;
			if (r % 5 == 0)
				fill_page(page, PAGE, (enum fill)(r / 5 % FILL_COUNT));
			else
				fill_dictish(page, (unsigned int)r);
			n = codec_compress_dict(&ctx, use, page, PAGE, c,
						r % 2 ? sizeof(c) : PAGE * 3 / 4);
			if (n < 0) {
				bad += n != -E2BIG;
				continue;
			}
			bad += codec_decompress_dict(&ctx, use, c, (size_t)n, d, PAGE) != 0;
			bad += memcmp(page, d, PAGE) != 0;
			bad += codec_decompress_dict(&ctx, use, c, (size_t)n / 2, d, PAGE) != -EINVAL;
		}
		allocs = alloc_count - before;
		ck_assert_int_eq(bad, 0);
		ck_assert_msg(allocs == 0, "%s level %d: %ld allocations for 700 pages with "
			      "dictionaries", ops->name, ctx.level, allocs);
		codec_dict_put(a);
		codec_dict_put(b);
		codec_ctx_fini(&ctx);
	}
}
END_TEST
#endif

/* ---- timing (printed, not asserted) -------------------------------------------- */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

START_TEST(test_timing)
{
	enum { NPAGES = 256, ROUNDS = 8 };
	unsigned char *pages = malloc((size_t)NPAGES * PAGE);
	unsigned char *comp = malloc((size_t)NPAGES * BIG_CAP(PAGE));
	unsigned char d[PAGE];
	int len[NPAGES];
	struct codec_ctx ctx;
	double t0, tc, td;
	size_t total = 0;
	int p, r;

	ck_assert_ptr_nonnull(pages);
	ck_assert_ptr_nonnull(comp);
	ctx_setup(&ctx, _i, 0);
	rng_seed(8);
	for (p = 0; p < NPAGES; p++)
		fill_page(pages + (size_t)p * PAGE, PAGE, p % 4 ? FILL_TEXT : FILL_MIXED);

	t0 = now_ns();
	for (r = 0; r < ROUNDS; r++) {
		for (p = 0; p < NPAGES; p++)
			len[p] = codec_compress(&ctx, pages + (size_t)p * PAGE, PAGE,
						comp + (size_t)p * BIG_CAP(PAGE), BIG_CAP(PAGE));
	}
	tc = (now_ns() - t0) / (NPAGES * ROUNDS);
	t0 = now_ns();
	for (r = 0; r < ROUNDS; r++) {
		for (p = 0; p < NPAGES; p++)
			codec_decompress(&ctx, comp + (size_t)p * BIG_CAP(PAGE), (size_t)len[p],
					 d, PAGE);
	}
	td = (now_ns() - t0) / (NPAGES * ROUNDS);
	for (p = 0; p < NPAGES; p++) {
		ck_assert_int_gt(len[p], 0);
		total += (size_t)len[p];
	}
	printf("%-5s level %-2d per 4 KiB page (text-like): compress %6.2f us, "
	       "decompress %5.2f us, ratio %.2f\n", ctx.ops->name, ctx.level, tc / 1000,
	       td / 1000, (double)NPAGES * PAGE / (double)total);
	codec_ctx_fini(&ctx);
	free(comp);
	free(pages);
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc;

	tc = tcase_create("registry");
	tcase_add_test(tc, test_registry_find);
	tcase_add_test(tc, test_registry_by_id);
	tcase_add_test(tc, test_registry_names);
	tcase_add_test(tc, test_level_table);
	tcase_add_test(tc, test_lz4_acceleration);
	suite_add_tcase(s, tc);

	tc = tcase_create("codecs");
	/* Sanitizer builds are several times slower than the default 4 s. */
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_levels, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_round_trip, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_ratio, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_cross_ctx, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_e2big, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_wrong_length, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_corrupt, 0, CODEC_COUNT);
	tcase_add_loop_test(tc, test_threads, 0, CODEC_COUNT);
#ifndef __SANITIZE_ADDRESS__
	tcase_add_loop_test(tc, test_no_alloc, 0, CODEC_COUNT);
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("dict");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_dict_support);
	tcase_add_test(tc, test_dict_levels);
	tcase_add_test(tc, test_dict_lz4_template);
	tcase_add_test(tc, test_dict_zstd_frame);
	/* lz4 and zstd: the codecs that have dictionaries */
	tcase_add_loop_test(tc, test_dict_round_trip, 0, 2);
	tcase_add_loop_test(tc, test_dict_ratio, 0, 2);
	tcase_add_loop_test(tc, test_dict_wrong, 0, 2);
	tcase_add_loop_test(tc, test_dict_corrupt, 0, 2);
	tcase_add_loop_test(tc, test_dict_e2big, 0, 2);
	tcase_add_loop_test(tc, test_dict_threads, 0, 2);
	tcase_add_loop_test(tc, test_dict_refs, 0, 2);
#ifndef __SANITIZE_ADDRESS__
	tcase_add_loop_test(tc, test_dict_no_alloc, 0, 2);
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("timing");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_timing, 0, CODEC_COUNT);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	dicts_make();
	sr = srunner_create(codec_suite());

	/* Unbuffered so that the figures printed by forked tests are not lost. */
	setvbuf(stdout, NULL, _IONBF, 0);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (int k = 0; k < DK_COUNT; k++)
		free(dk_bytes[k]);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
