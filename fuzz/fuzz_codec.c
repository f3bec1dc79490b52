/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz the codecs through their ops table: decompression of corrupt input,
 * and compression into buffers of every size.
 *
 * The first byte: bits 0-1 pick the codec (lz4, zstd, lzo; 3 is lz4
 * again), bit 2 a second level, bits 3-4 the mode:
 *	0	the rest is a compressed page: decompress it into one page;
 *	1	two bytes of output capacity, then the page (repeated to fill
 *		4 KiB): compress it;
 *	2	damage a valid one: a count of edits, each a position (2 bytes)
 *		and a byte to XOR there, a length to cut it to (2 bytes, 0: no
 *		cut), then the page (repeated to fill 4 KiB) that is
 *		compressed, damaged so and decompressed;
 *	3	as 0.
 * The libraries are Debian's, built without the fuzzer's coverage: the
 * fuzzer sees only this side of them, hence mode 2, which starts from
 * valid compressed data and so reaches deeper into the decoders than
 * random bytes do.
 *
 * Invariants (codec.h):
 *   - decompress returns 0 or -EINVAL, and 0 only for exactly a page: it
 *     gives the same bytes whatever the page held before;
 *   - neither reads nor writes outside its buffers: input and output end
 *     at a guard page (and ASan watches the codecs' own memory);
 *   - compress returns a length within the capacity, or -E2BIG exactly
 *     when the result would not fit: the same page with room to spare
 *     compresses to more than that capacity;
 *   - what compresses decompresses to the same page.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "codec.h"
#include "fuzz.h"

#define PAGE		CODEC_PAGE_SIZE
/* Far more than any page compresses to (lzo's worst case is ~4.4 KiB). */
#define INPUT_MAX	(64 * 1024)
#define OUT_MAX		(2 * PAGE)

static struct codec_ctx ctx[CODEC_COUNT][2];
static struct fuzz_guarded gin, gpage, gout;
static bool ready;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* A second level where the codec has levels: another code path. */
	static const int alt[CODEC_COUNT] = { [CODEC_LZ4] = 9, [CODEC_ZSTD] = 19 };
	unsigned int id;

	for (id = 0; id < CODEC_COUNT; id++) {
		fuzz_require(codec_ctx_init(&ctx[id][0], codec_by_id(id), 0) == 0);
		fuzz_require(codec_ctx_init(&ctx[id][1], codec_by_id(id), alt[id]) == 0);
	}
	fuzz_guarded_init(&gin, INPUT_MAX);
	fuzz_guarded_init(&gpage, PAGE);
	fuzz_guarded_init(&gout, OUT_MAX);
	ready = true;
	return 0;
}

/* Decompress into the guarded page twice, over different old contents. */
static int decompress_checked(struct codec_ctx *c, const void *src, size_t len,
			      unsigned char *page)
{
	unsigned char *dst = fuzz_guarded_at(&gpage, PAGE);
	int ret, again;

	memset(dst, 0x00, PAGE);
	ret = codec_decompress(c, src, len, dst, PAGE);
	fuzz_require(ret == 0 || ret == -EINVAL);
	memcpy(page, dst, PAGE);
	memset(dst, 0xff, PAGE);
	again = codec_decompress(c, src, len, dst, PAGE);
	fuzz_require(again == ret);
	if (!ret)
		fuzz_require(!memcmp(page, dst, PAGE));
	return ret;
}

/* Compress page with capacity cap; check against a compression with room. */
static void compress_checked(struct codec_ctx *c, const unsigned char *page, size_t cap)
{
	static unsigned char roomy[OUT_MAX], back[PAGE];
	unsigned char *dst = fuzz_guarded_at(&gout, cap);
	int ret, full;

	full = codec_compress(c, page, PAGE, roomy, sizeof(roomy));
	fuzz_require(full > 0 && (size_t)full <= sizeof(roomy));
	ret = codec_compress(c, page, PAGE, dst, cap);
	if (ret == -E2BIG) {
		fuzz_require((size_t)full > cap);
		return;
	}
	fuzz_require(ret == full && !memcmp(dst, roomy, (size_t)ret));
	fuzz_require(decompress_checked(c, dst, (size_t)ret, back) == 0);
	fuzz_require(!memcmp(back, page, PAGE));
}

/* The page from what is left of the input, repeated; zeros if nothing is. */
static void page_from(struct fuzz_in *in, unsigned char *page)
{
	size_t i;

	if (!in->left) {
		memset(page, 0, PAGE);
		return;
	}
	for (i = 0; i < PAGE; i++)
		page[i] = in->p[i % in->left];
}

static void damage(struct codec_ctx *c, struct fuzz_in *in)
{
	static unsigned char page[PAGE], comp[OUT_MAX], back[PAGE];
	uint8_t edits = fuzz_u8(in) % 16, i;
	uint16_t pos[16], cut;
	uint8_t val[16];
	unsigned char *src;
	int len;

	for (i = 0; i < edits; i++) {
		pos[i] = fuzz_u16(in);
		val[i] = fuzz_u8(in);
	}
	cut = fuzz_u16(in);
	page_from(in, page);
	len = codec_compress(c, page, PAGE, comp, sizeof(comp));
	fuzz_require(len > 0);
	for (i = 0; i < edits; i++)
		comp[pos[i] % len] ^= val[i];
	if (cut)
		len = cut % len;
	src = fuzz_guarded_at(&gin, (size_t)len);
	memcpy(src, comp, (size_t)len);
	decompress_checked(c, src, (size_t)len, back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char page[PAGE];
	struct codec_ctx *c;
	struct fuzz_in in = { data, size };
	uint8_t how = fuzz_u8(&in);
	unsigned char *src;
	size_t cap;

	if (!ready)
		LLVMFuzzerInitialize(NULL, NULL);
	c = &ctx[(how & 3) % CODEC_COUNT][(how >> 2) & 1];
	switch (how >> 3 & 3) {
	case 1:
		cap = 1 + fuzz_u16(&in) % OUT_MAX;
		page_from(&in, page);
		compress_checked(c, page, cap);
		break;
	case 2:
		damage(c, &in);
		break;
	default:
		if (in.left > INPUT_MAX)
			return 0;
		src = fuzz_guarded_at(&gin, in.left);
		memcpy(src, in.p, in.left);
		if (decompress_checked(c, src, in.left, page) == 0)
			compress_checked(c, page, PAGE);	/* and back */
		break;
	}
	return 0;
}
