/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Write the binary part of the seed corpus: pages compressed by each codec
 * (fuzz/corpus/codec/) and segments of real objects (fuzz/corpus/backing/),
 * made by the code under test, so that the fuzzers start from valid input.
 *
 *	fuzz/mkseed SRCDIR/fuzz/corpus
 *
 * Run again (`make fuzz/mkseed`) when a format changes; the text seeds
 * (control, config, store) are written by hand.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backing.h"
#include "codec.h"

#define PAGE	CODEC_PAGE_SIZE

static const char *outdir;

static void put(const char *what, const char *name, const void *a, size_t alen,
		const void *b, size_t blen)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, what, name);
	f = fopen(path, "wb");
	if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) ||
	    fclose(f)) {
		fprintf(stderr, "mkseed: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* Text that compresses about as well as memory does. */
static void text_page(unsigned char *p, unsigned int seed)
{
	static const char *const words[] = { "swap ", "page ", "segment ", "0x7f3a ", "struct " };
	size_t i = 0, n;

	while (i < PAGE) {
		seed = seed * 1103515245u + 12345u;
		n = strlen(words[(seed >> 16) % 5]);
		n = n < PAGE - i ? n : PAGE - i;
		memcpy(p + i, words[(seed >> 16) % 5], n);
		i += n;
	}
}

static void codec_seeds(void)
{
	static unsigned char page[PAGE], out[2 * PAGE];
	unsigned int id, kind;

	for (id = 0; id < CODEC_COUNT; id++) {
		struct codec_ctx ctx;

		if (codec_ctx_init(&ctx, codec_by_id(id), 0))
			exit(1);
		for (kind = 0; kind < 3; kind++) {
			unsigned char how = (unsigned char)id;	/* decompress, level 0 */
			char name[64];
			int len;

			if (kind == 0)
				memset(page, 0, PAGE);
			else if (kind == 1)
				text_page(page, 1);
			else
				for (len = 0; len < (int)PAGE; len++)
					page[len] = (unsigned char)(len * 7 + len / 300);
			len = codec_compress(&ctx, page, PAGE, out, sizeof(out));
			if (len <= 0)
				exit(1);
			snprintf(name, sizeof(name), "%s-%s", ctx.ops->name,
				 (const char *[]){ "zero", "text", "pattern" }[kind]);
			put("codec", name, &how, 1, out, (size_t)len);
		}
		codec_ctx_fini(&ctx);
	}
}

static void backing_seeds(void)
{
	char dir[] = "/var/tmp/zswapfs-mkseed.XXXXXX", path[64], err[256];
	static unsigned char page[PAGE], seg[BACKING_SEG_SIZE];
	unsigned char head[16];
	struct backing *b;
	uint64_t loc[4];
	uint32_t v;
	int fd, i;

	if (!mkdtemp(dir))
		exit(1);
	snprintf(path, sizeof(path), "%s/backing", dir);
	b = backing_open(path, 4 * BACKING_SEG_SIZE, err, sizeof(err));
	if (!b) {
		fprintf(stderr, "mkseed: %s\n", err);
		exit(1);
	}
	/* Four objects of segment 0: small, text, odd length, a raw page. */
	for (i = 0; i < 4; i++) {
		uint16_t len = (uint16_t[]){ 1, 700, 1333, PAGE }[i];

		text_page(page, (unsigned int)i);
		if (backing_append(b, 100 + (uint32_t)i, (uint8_t)(i % 3), page, len, &loc[i]))
			exit(1);
	}
	if (backing_flush(b))
		exit(1);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, seg, sizeof(seg), 0) < (ssize_t)(loc[3] + 16 + PAGE))
		exit(1);
	close(fd);

	/* Walk: mode 0, start 0, segment 0, the objects. */
	memset(head, 0, sizeof(head));
	put("backing", "walk-4-objects", head, 7, seg, (size_t)loc[3] + 16 + PAGE);
	/* Read at the offset: mode 3, offset 0 (segment 1), location unused,
	 * the slot, then the object. */
	for (i = 0; i < 3; i++) {
		char name[32];
		uint64_t end = loc[i + 1];

		head[0] = 3;
		memset(head + 1, 0, 8);
		v = 100 + (uint32_t)i;
		memcpy(head + 9, &v, 4);
		snprintf(name, sizeof(name), "read-object-%d", i);
		put("backing", name, head, 13, seg + loc[i], (size_t)(end - loc[i]));
	}
	backing_close(b);
	unlink(path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mkseed CORPUS-DIR\n");
		return 2;
	}
	outdir = argv[1];
	codec_seeds();
	backing_seeds();
	return 0;
}
