/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Write the binary part of the seed corpus: pages compressed by each codec
 * (fuzz/corpus/codec/); for fuzz/corpus/backing/ (in the format of
 * fuzz_backing.h), segments of real objects and the file header, made by a
 * plain backing file (the code under test, so that the fuzzers start from
 * valid input), and operation sequences under each cipher.  Sealed objects
 * cannot be seeds: the key is new at every open.
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
#include "fuzz_backing.h"

#define PAGE	CODEC_PAGE_SIZE

/* An object's bytes in a segment (backing.h: a 32-byte header, 16-aligned). */
static inline uint32_t obj_size(uint32_t len)
{
	return (BACKING_HDR_SIZE + len + 15) & ~15u;
}

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

/* ---- fuzz/corpus/backing: the format of fuzz_backing.h ---------------------------- */

struct seed {
	unsigned char b[16384];
	size_t n;
};

static void emit(struct seed *s, const void *p, size_t n)
{
	if (s->n + n > sizeof(s->b))
		exit(1);
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void e8(struct seed *s, unsigned int v)
{
	unsigned char c = (unsigned char)v;

	emit(s, &c, 1);
}

static void e16(struct seed *s, unsigned int v)
{
	e8(s, v & 0xff);
	e8(s, v >> 8 & 0xff);
}

static void e32(struct seed *s, uint32_t v)
{
	e16(s, v & 0xffff);
	e16(s, v >> 16);
}

static void put_seed(const char *name, const struct seed *s)
{
	put("backing", name, s->b, s->n, NULL, 0);
}

/* FB_OPS: an append of len bytes, a pattern from fill. */
static void o_append(struct seed *s, unsigned int slot, unsigned int codec, unsigned int len,
		     unsigned int fill)
{
	e8(s, FB_APPEND);
	e8(s, slot);
	e8(s, codec);
	e16(s, len - 1);
	e8(s, fill);
	e8(s, 0);
}

/* A target: the location of the place-th object appended, plus delta. */
static void o_target(struct seed *s, unsigned int place, int delta)
{
	e8(s, place);
	e16(s, (unsigned int)(uint16_t)(int16_t)delta);
}

static void o_read(struct seed *s, unsigned int k, unsigned int slot)
{
	e8(s, FB_READ_OBJ);
	e8(s, k);
	e8(s, slot);
}

static void o_read_all(struct seed *s, unsigned int n)
{
	unsigned int k;

	for (k = 0; k < n; k++)
		o_read(s, k, 0);
}

/* A walk of segment seg from its start, or from object k (seg < 0). */
static void o_walk(struct seed *s, int seg, unsigned int k)
{
	e8(s, FB_WALK_SEG);
	e8(s, seg < 0 ? 0 : 0x40);
	e8(s, seg < 0 ? k : (unsigned int)seg);
}

/* Segment 0 closed (an abort after objects are on disk), segment 1 open. */
static void o_next_segment(struct seed *s)
{
	o_append(s, 7, 0, 1, 0);
	e8(s, FB_ABORT);
	e8(s, FB_FLUSH);
}

/*
 * Operation sequences, each under every cipher: what a forger may do to a
 * file, on real objects.
 */
static void ops_seeds(void)
{
	static const char *const cname[] = { "plain", "aes", "chacha" };
	struct seed s;
	unsigned int c, k;
	char name[64];

	for (c = 0; c < 3; c++) {
		uint8_t how = FB_HOW(FB_OPS, c, 0);

		/* Read from memory, then from the disk; a walk from the start
		 * and from an object; a read for another slot. */
		s.n = 0;
		e8(&s, how);
		o_append(&s, 0, 0, 1, 1);
		o_append(&s, 1, 1, 700, 2);
		o_append(&s, 2, 2, 1333, 3);
		o_append(&s, 3, 0, BACKING_MAX_DATA, 4);
		o_read_all(&s, 4);
		o_read(&s, 1, 5);
		e8(&s, FB_FLUSH);
		o_next_segment(&s);
		o_read_all(&s, 4);
		o_walk(&s, 0, 0);
		o_walk(&s, -1, 2);
		snprintf(name, sizeof(name), "ops-%s-append-read-walk", cname[c]);
		put_seed(name, &s);

		/* Objects of a round replayed over the next round's, in place. */
		s.n = 0;
		e8(&s, how);
		for (k = 0; k < 3; k++)
			o_append(&s, k, k, 100 * (k + 1), 10 + k);
		e8(&s, FB_FLUSH);
		e8(&s, FB_SNAPSHOT);
		e8(&s, 0);
		o_target(&s, 0, 0);
		e16(&s, 1000 - 1);
		e8(&s, FB_ROUND);
		for (k = 0; k < 3; k++)
			o_append(&s, k, k, 100 * (k + 1), 20 + k);
		e8(&s, FB_FLUSH);
		o_next_segment(&s);
		e8(&s, FB_REPLAY);
		e8(&s, 0);
		e8(&s, 0);
		for (k = 3; k < 6; k++)
			o_read(&s, k, 0);
		o_walk(&s, 0, 0);
		snprintf(name, sizeof(name), "ops-%s-replay", cname[c]);
		put_seed(name, &s);

		/* Objects of a closed segment swapped, and one copied over another. */
		s.n = 0;
		e8(&s, how);
		for (k = 0; k < 4; k++)
			o_append(&s, k, 0, 64, 30 + k);
		e8(&s, FB_FLUSH);
		o_next_segment(&s);
		e8(&s, FB_SWAP);
		o_target(&s, 0, 0);
		o_target(&s, 1, 0);
		e16(&s, 96 - 1);
		e8(&s, FB_COPY);
		o_target(&s, 2, 0);
		o_target(&s, 3, 0);
		e16(&s, 96 - 1);
		o_read_all(&s, 4);
		o_read(&s, 0, 1);
		o_walk(&s, 0, 0);
		snprintf(name, sizeof(name), "ops-%s-move-swap", cname[c]);
		put_seed(name, &s);

		/* A flipped bit in an object's data; the file cut in the next. */
		s.n = 0;
		e8(&s, how);
		for (k = 0; k < 3; k++)
			o_append(&s, k, 1, 500 * (k + 1), 40 + k);
		e8(&s, FB_FLUSH);
		o_next_segment(&s);
		e8(&s, FB_FLIP);
		o_target(&s, 1, (int)BACKING_HDR_SIZE + 8);
		e8(&s, 3);
		e8(&s, FB_TRUNCATE);
		o_target(&s, 2, 100);
		o_read_all(&s, 3);
		o_walk(&s, 0, 0);
		snprintf(name, sizeof(name), "ops-%s-flip-truncate", cname[c]);
		put_seed(name, &s);

		/* The open segment: objects of the input's bytes, a read inside
		 * one, an abort, the same places filled again. */
		s.n = 0;
		e8(&s, how);
		for (k = 0; k < 3; k++) {
			static const char *const text[] = { "hello world hello world",
							    "this is a page", "aa" };
			size_t n = strlen(text[k]);

			e8(&s, FB_APPEND);
			e8(&s, k);
			e8(&s, k);
			e16(&s, (unsigned int)n - 1);
			e8(&s, 0);
			e8(&s, (unsigned int)n);
			emit(&s, text[k], n);
		}
		o_read_all(&s, 3);
		e8(&s, FB_READ_AT);
		o_target(&s, 1, 48);
		e8(&s, 1);
		e8(&s, FB_ABORT);
		for (k = 0; k < 3; k++)
			o_append(&s, k, k, 50, 50 + k);
		o_read_all(&s, 3);
		e8(&s, FB_FLUSH);
		o_walk(&s, 0, 0);
		snprintf(name, sizeof(name), "ops-%s-open-segment", cname[c]);
		put_seed(name, &s);

		/* Header fields changed (backing.c: the slot at byte 8, the
		 * codec at 14), the objects read for the slot and as they are. */
		s.n = 0;
		e8(&s, how);
		o_append(&s, 0, 0, 300, 70);
		o_append(&s, 1, 1, 300, 71);
		e8(&s, FB_FLUSH);
		o_next_segment(&s);
		e8(&s, FB_FLIP);
		o_target(&s, 0, 8);
		e8(&s, 0);
		o_read(&s, 0, 1);
		e8(&s, FB_FLIP);
		o_target(&s, 1, 14);
		e8(&s, 1);
		o_read(&s, 1, 0);
		o_walk(&s, 0, 0);
		snprintf(name, sizeof(name), "ops-%s-header-fields", cname[c]);
		put_seed(name, &s);

		/* Bytes of the input written over an object's header and data. */
		s.n = 0;
		e8(&s, how);
		o_append(&s, 0, 0, 200, 60);
		o_append(&s, 1, 0, 200, 61);
		e8(&s, FB_FLUSH);
		o_next_segment(&s);
		e8(&s, FB_FORGE);
		o_target(&s, 1, 0);
		e8(&s, 48);
		for (k = 0; k < 48; k++)
			e8(&s, k < 4 ? (unsigned int)"ZWBK"[k] : k);
		o_read_all(&s, 2);
		o_walk(&s, 0, 0);
		snprintf(name, sizeof(name), "ops-%s-forge", cname[c]);
		put_seed(name, &s);
	}
}

/* Objects written by a plain backing file, and its header. */
static void backing_seeds(void)
{
	char dir[] = "/var/tmp/zswapfs-mkseed.XXXXXX", path[64], err[256];
	static const uint16_t lens[4] = { 1, 700, 1333, PAGE };
	static const uint16_t lens_end[4] = { 1, 700, PAGE, 1333 };
	static unsigned char page[PAGE], seg[BACKING_SEG_SIZE], hdr[BACKING_FILE_HDR_SIZE];
	static const char text[] = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
				   "NAME=\"Debian GNU/Linux\"\n";
	uint64_t loc[4], at, next, tail;
	struct backing *b;
	struct seed s;
	uint32_t v;
	int fd, i;

	if (!mkdtemp(dir))
		exit(1);
	snprintf(path, sizeof(path), "%s/backing", dir);
	b = backing_open(path, 8 * BACKING_SEG_SIZE, SEAL_NONE, err, sizeof(err));
	if (!b) {
		fprintf(stderr, "mkseed: %s\n", err);
		exit(1);
	}
	fd = open(path, O_RDONLY);
	if (fd < 0)
		exit(1);

	/* Segment 0, after the file header: four objects, small, text, odd
	 * length, a raw page.  Walked from there, plain, then sealed. */
	for (i = 0; i < 4; i++) {
		text_page(page, (unsigned int)i);
		if (backing_append(b, 100 + (uint32_t)i, (uint8_t)(i % 3), page, lens[i], &loc[i]))
			exit(1);
	}
	next = loc[3] + obj_size(PAGE);
	if (backing_flush(b) || pread(fd, seg, BACKING_SEG_SIZE, 0) < (ssize_t)next)
		exit(1);
	s.n = 0;
	e8(&s, FB_HOW(FB_WALK, 0, 0));
	e16(&s, (unsigned int)(loc[0] / 16));
	e32(&s, 0);
	emit(&s, seg + loc[0], (size_t)(next - loc[0]));
	put_seed("walk-4-objects", &s);
	s.b[0] = FB_HOW(FB_WALK, 1, 0);
	put_seed("walk-4-plain-objects-sealed", &s);

	/*
	 * Segment 1: raw pages, one object to fill the gap, then the four
	 * objects, a 1333-byte one last, ending where the segment does: a
	 * longer len in that one's header crosses the end, the case of the
	 * walk's bounds check.  Walked from the four, counted back from the end.
	 */
	if (backing_append(b, 99, 0, page, 1, &at))
		exit(1);
	backing_abort(b);
	if (backing_flush(b))
		exit(1);
	tail = obj_size(lens_end[0]) + obj_size(lens_end[1]) + obj_size(lens_end[2]) +
	       obj_size(lens_end[3]);
	next = 0;
	for (i = 0; BACKING_SEG_SIZE - next - tail > obj_size(PAGE); i++)
		next += obj_size(PAGE);
	/* Whole pages leave 48..4128 bytes (here 2032), which one object fills. */
	if (BACKING_SEG_SIZE - next - tail < obj_size(1) ||
	    BACKING_SEG_SIZE - next - tail > obj_size(PAGE))
		exit(1);
	while (i--)
		if (backing_append(b, 200 + (uint32_t)i, 0, page, PAGE, &at) ||
		    at / BACKING_SEG_SIZE != 1)
			exit(1);
	if (backing_append(b, 199, 0, page,
			   (uint16_t)(BACKING_SEG_SIZE - next - tail - BACKING_HDR_SIZE), &at))
		exit(1);
	for (i = 0; i < 4; i++) {
		text_page(page, (unsigned int)i);
		if (backing_append(b, 100 + (uint32_t)i, (uint8_t)(i % 3), page, lens_end[i],
				   &loc[i]) || loc[i] / BACKING_SEG_SIZE != 1)
			exit(1);
	}
	if (loc[3] + obj_size(lens_end[3]) != 2 * BACKING_SEG_SIZE || backing_flush(b) ||
	    pread(fd, seg, BACKING_SEG_SIZE, BACKING_SEG_SIZE) != BACKING_SEG_SIZE)
		exit(1);
	at = loc[0] % BACKING_SEG_SIZE;
	s.n = 0;
	e8(&s, FB_HOW(FB_WALK, 0, 1));
	e16(&s, (unsigned int)((BACKING_SEG_SIZE - at) / 16 - 1));
	e32(&s, 1);
	emit(&s, seg + at, BACKING_SEG_SIZE - at);
	put_seed("walk-4-objects-at-end", &s);
	/* The last alone: a short input, whose len a mutation soon makes cross. */
	at = loc[3] % BACKING_SEG_SIZE;
	s.n = 0;
	e8(&s, FB_HOW(FB_WALK, 0, 1));
	e16(&s, (unsigned int)((BACKING_SEG_SIZE - at) / 16 - 1));
	e32(&s, 1);
	emit(&s, seg + at, BACKING_SEG_SIZE - at);
	put_seed("walk-last-object-at-end", &s);

	/* Segment 2 (the flush closed 1): three objects, each read at its
	 * offset, with the objects after it; plain, then sealed. */
	for (i = 0; i < 3; i++) {
		text_page(page, (unsigned int)i);
		if (backing_append(b, 100 + (uint32_t)i, (uint8_t)(i % 3), page, lens[i], &loc[i]) ||
		    loc[i] / BACKING_SEG_SIZE != 2)
			exit(1);
	}
	next = loc[2] + obj_size(lens[2]);
	memset(seg, 0, sizeof(seg));
	if (backing_flush(b) || pread(fd, seg, BACKING_SEG_SIZE, 2 * BACKING_SEG_SIZE) <
				    (ssize_t)(next % BACKING_SEG_SIZE))
		exit(1);
	for (i = 0; i < 3; i++) {
		char name[32];

		s.n = 0;
		e8(&s, FB_HOW(FB_READ, 0, 1));
		e32(&s, (uint32_t)(loc[i] - BACKING_SEG_SIZE));
		e32(&s, 0);
		v = 100 + (uint32_t)i;
		e32(&s, v);
		emit(&s, seg + loc[i] % BACKING_SEG_SIZE, (size_t)(next - loc[i]));
		snprintf(name, sizeof(name), "read-object-%d", i);
		put_seed(name, &s);
		if (i == 1) {
			s.b[0] = FB_HOW(FB_READ, 2, 1);
			put_seed("read-plain-object-sealed", &s);
		}
	}

	/* Closed, the file is its header: what backing_open takes again. */
	backing_close(b);
	if (pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		exit(1);
	close(fd);
	unlink(path);
	rmdir(dir);

	s.n = 0;
	e8(&s, FB_HOW(FB_HEADER, 0, 0));
	put_seed("header-empty", &s);
	emit(&s, hdr, sizeof(hdr));
	put_seed("header-ours", &s);
	/* With what an earlier run left after it, opened sealed. */
	s.b[0] = FB_HOW(FB_HEADER, 1, 0);
	emit(&s, seg, 2 * PAGE);
	put_seed("header-ours-and-old-objects", &s);
	/* Another version of the format. */
	s.n = 1 + sizeof(hdr);
	s.b[0] = FB_HOW(FB_HEADER, 0, 0);
	s.b[1 + 16]++;
	put_seed("header-other-version", &s);
	s.b[1 + 16]--;
	/* Our version, but not our magic line. */
	s.b[1 + 8]++;
	put_seed("header-other-magic", &s);
	s.b[1 + 8]--;
	/* Cut short: the magic line alone, then the header without its end. */
	s.n = 1 + 16;
	put_seed("header-magic-only", &s);
	s.n = 1 + 24;
	put_seed("header-cut", &s);
	/* A file of someone else's. */
	s.n = 1;
	emit(&s, text, strlen(text));
	put_seed("header-text-file", &s);
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
	ops_seeds();
	return 0;
}
