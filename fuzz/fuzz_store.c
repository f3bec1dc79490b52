/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz the page store as a whole: a sequence of writes, reads, discards,
 * idle marks, recompression and writeback passes and compactions over a
 * small store, every read checked against a plain model of the file.
 *
 * The model is what a swap file must be: a byte reads as it was last
 * written, and as zero once discarded or never written, whatever the store
 * did with the page meanwhile (compressed it with any codec, stored it raw
 * or same-filled, recompressed it, wrote it back to the backing file,
 * moved it in the arena or in the file, read it back).  A failed write or
 * discard (ENOSPC: mem_limit reached) changes a leading run of its pages,
 * never more: each page is either its old self or its new one, and every
 * page after the first old one is old.
 *
 * The first two bytes set up the store:
 *	byte 0	codec (lz4, zstd, lzo) = b % 3; recompression codec
 *		(lz4, zstd, lzo, none) = b / 3 % 4; the backing file's
 *		sealing (none: CRC-32C only, AES-256-GCM, ChaCha20-Poly1305)
 *		= b / 12 % 3
 *	byte 1	bits 0-1: mem_limit 0 (none), 8, 16 or 32 arena pages;
 *		bits 2-3: backing file of 0 (none), 1, 2 or 4 segments;
 *		bit 4: promote; bit 5: a full arena makes room by writing
 *		back (as the policy thread does); bit 6: a daily writeback
 *		budget of 64 KiB; bit 7: segment compaction at 99 % live
 *		instead of 50 %.
 * Then operations, each a byte and its arguments, until the input ends;
 * at the end every page is read back.  The store has 64 pages.
 *
 * Dictionaries: an operation installs a new generation (dictgen.h) from
 * bytes of the model or of the input, for both codecs, as training does;
 * another reaps the generations no page needs.  So pages written under one
 * generation are read, recompressed, written back and read back from the
 * backing file after the dictionary changed, up to a full ring.  At the
 * end every page is discarded and the generations reaped: no older
 * generation may be left, nor a reference to the current one (a pin or a
 * slot count that was never given back).
 *
 * Besides the data, the counters must add up: pages_stored is the number
 * of pages written and not discarded since, and bd_count the number of
 * live objects on the backing file; and the backing file, which nothing
 * forges here, never fails a read or a tag.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backing.h"
#include "dict.h"
#include "dictgen.h"
#include "fuzz.h"
#include "recompress.h"
#include "store.h"
#include "writeback.h"

#define PG		STORE_PAGE_SIZE
#define NR_PAGES	64u
#define SIZE		((uint64_t)NR_PAGES * PG)
/* Ranges of up to three pages: the first and the last may be partial. */
#define RANGE_MAX	(3 * PG)

enum op {
	OP_WRITE_PAGE,		/* page, content */
	OP_WRITE,		/* offset, length, content */
	OP_READ_PAGE,		/* page */
	OP_READ,		/* offset, length */
	OP_DISCARD,		/* offset, length */
	OP_IDLE,		/* how */
	OP_RECOMPRESS,		/* threshold, flags, max_pages */
	OP_WRITEBACK,		/* goal, flags, max_pages */
	OP_COMPACT,		/* segments */
	OP_CHECK_ALL,
	OP_DICT,		/* how, source page, length[, content] */
	OP_REAP,
	OP_COUNT
};

struct run {
	struct store *st;
	struct store_worker *w;
	struct backing *b;
	struct writeback *wb;
	bool recomp;
	uint32_t idle_before;		/* the last idle mark */
	bool stored_known;		/* stored[] is exact (see fail_prefix) */
	unsigned char model[SIZE];
	bool stored[NR_PAGES];		/* written, not discarded since */
	unsigned char buf[RANGE_MAX + PG];
	unsigned char newer[RANGE_MAX + 2 * PG];	/* what a range op makes of its pages */
	unsigned char dict[4 * PG];		/* a dictionary's bytes */
};

static struct run run;

/* ---- content -------------------------------------------------------------- */

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Data of the kinds the store treats differently, from a few input bytes. */
static void gen(struct fuzz_in *in, unsigned char *p, size_t len)
{
	static const char *const words[] = { "swap ", "page ", "0x7f3a ", "struct ",
					     "\0\0\0\0\0\0\0\0" };
	uint8_t kind = fuzz_u8(in) % 5;
	uint64_t x = (uint64_t)fuzz_u16(in) * 0x9e3779b97f4a7c15ull + 1, v;
	size_t i, n, noise;

	if (!len)
		return;
	switch (kind) {
	case 0:		/* zeros */
		memset(p, 0, len);
		break;
	case 1:		/* one word repeated: same-filled */
		v = xorshift(&x);
		for (i = 0; i < len; i++)
			p[i] = (unsigned char)(v >> (8 * (i % 8)));
		break;
	case 2:		/* text, after some noise: any compressed size */
		noise = x % (len < 3000 ? len : 3000);
		for (i = 0; i < len; i++) {
			const char *w;

			if (i < noise) {
				p[i] = (unsigned char)xorshift(&x);
				continue;
			}
			w = words[xorshift(&x) % 5];
			n = w[0] ? strlen(w) : 8;
			n = n < len - i ? n : len - i;
			memcpy(p + i, w, n);
			i += n - 1;
		}
		break;
	case 3:		/* noise: stored raw */
		for (i = 0; i < len; i++)
			p[i] = (unsigned char)xorshift(&x);
		break;
	default:	/* the input's own bytes, repeated */
		n = x % 64 + 1;
		n = n < in->left ? n : in->left;
		for (i = 0; i < len; i++)
			p[i] = n ? in->p[i % n] : 0;
		in->p += n;
		in->left -= n;
		break;
	}
}

/* ---- checks --------------------------------------------------------------- */

static bool all_zero(const unsigned char *p, size_t len)
{
	return !len || (!p[0] && !memcmp(p, p + 1, len - 1));
}

static void check_range(uint64_t off, size_t len)
{
	ssize_t got = store_read(run.st, run.w, off, run.buf, len);
	size_t want = off >= SIZE ? 0 : (len < SIZE - off ? len : (size_t)(SIZE - off));

	if (got != (ssize_t)want) {
		fprintf(stderr, "read %zu at %llu: %zd\n", len, (unsigned long long)off, got);
		abort();
	}
	if (want && memcmp(run.buf, run.model + off, want)) {
		size_t i = 0;

		while (i < want && run.buf[i] == run.model[off + i])
			i++;
		fprintf(stderr, "byte %llu (page %llu) reads %#x, was written %#x\n",
			(unsigned long long)(off + i), (unsigned long long)((off + i) / PG),
			run.buf[i], run.model[off + i]);
		abort();
	}
}

static void check_all(void)
{
	uint64_t off;

	for (off = 0; off < SIZE; off += RANGE_MAX)
		check_range(off, SIZE - off < RANGE_MAX ? (size_t)(SIZE - off) : RANGE_MAX);
}

static void check_counters(void)
{
	struct store_counters c;
	struct backing_stats bs;
	uint64_t n = 0;
	unsigned int i;

	store_get_counters(run.st, &c);
	for (i = 0; i < NR_PAGES; i++)
		n += run.stored[i];
	if (run.stored_known)
		fuzz_require(c.pages_stored == n);
	fuzz_require(c.pages_stored <= NR_PAGES);
	if (run.b) {
		backing_get_stats(run.b, &bs);
		fuzz_require(bs.objects == c.bd_count);
		/* Nobody forges this file: every object reads, every tag matches. */
		fuzz_require(bs.read_errors == 0 && bs.auth_failures == 0 && bs.write_errors == 0);
		fuzz_require(c.bd_count <= c.pages_stored);
	} else {
		fuzz_require(c.bd_count == 0);
	}
}

/* ---- range operations ------------------------------------------------------ */

/*
 * A write or discard of [off, off + len) (inside the file) returned err.
 * newer holds the pages it touches as they would be after it, from page
 * first on.  Success: the model takes them.  ENOSPC: read them back; a
 * leading run must be new, the rest old; the model takes what is there.
 */
static void range_done(uint64_t off, size_t len, int err, bool discard)
{
	uint64_t first = off / PG, last = (off + len - 1) / PG, i;
	bool old_seen = false;

	if (!len)
		return;
	if (!err) {
		for (i = first; i <= last; i++) {
			const unsigned char *p = run.newer + (i - first) * PG;

			memcpy(run.model + i * PG, p, PG);
			/* A discard that zeroes a page frees it; a write stores it. */
			run.stored[i] = discard ? !all_zero(p, PG) && run.stored[i] : true;
		}
		return;
	}
	if (err != -ENOSPC) {
		fprintf(stderr, "%s %zu at %llu: %s\n", discard ? "discard" : "write", len,
			(unsigned long long)off, strerror(-err));
		abort();
	}
	for (i = first; i <= last; i++) {
		const unsigned char *p = run.newer + (i - first) * PG;
		bool is_old, is_new;

		fuzz_require(store_read(run.st, run.w, i * PG, run.buf, PG) == PG);
		is_old = !memcmp(run.buf, run.model + i * PG, PG);
		is_new = !memcmp(run.buf, p, PG);
		if (!is_old && !is_new) {
			fprintf(stderr, "page %llu is neither old nor new after a failed %s\n",
				(unsigned long long)i, discard ? "discard" : "write");
			abort();
		}
		if (is_new && !is_old) {
			fuzz_require(!old_seen);
			memcpy(run.model + i * PG, p, PG);
			run.stored[i] = discard ? !all_zero(p, PG) && run.stored[i] : true;
		} else if (is_new) {
			/* Either way: whether its slot changed is not known. */
			run.stored_known = false;
		} else {
			old_seen = true;
		}
	}
}

static bool outside(uint64_t off, uint64_t len)
{
	return off > SIZE || len > SIZE - off;
}

/* The pages [off, off + len) touch, from the model, with data (or zeros) put in. */
static void prepare_newer(uint64_t off, size_t len, const unsigned char *data)
{
	uint64_t first = off / PG, last = (off + len - 1) / PG;

	memcpy(run.newer, run.model + first * PG, (last - first + 1) * PG);
	if (data)
		memcpy(run.newer + off % PG, data, len);
	else
		memset(run.newer + off % PG, 0, len);
}

static void op_write(uint64_t off, size_t len, struct fuzz_in *in)
{
	int err;

	gen(in, run.buf, len);
	err = store_write(run.st, run.w, off, run.buf, len);
	if (outside(off, len)) {
		fuzz_require(err == -EFBIG);
		return;
	}
	if (len)
		prepare_newer(off, len, run.buf);
	range_done(off, len, err, false);
}

static void op_discard(uint64_t off, size_t len)
{
	int err = store_discard(run.st, run.w, off, len);

	if (outside(off, len)) {
		fuzz_require(err == -EFBIG);
		return;
	}
	if (!len) {
		fuzz_require(err == 0);
		return;
	}
	prepare_newer(off, len, NULL);
	/* Whole pages are freed; only a partial one is written (and can fail). */
	range_done(off, len, err, true);
	if (!err) {
		uint64_t i;

		for (i = (off + PG - 1) / PG; (i + 1) * PG <= off + len; i++)
			run.stored[i] = false;
	}
}

/* ---- passes ------------------------------------------------------------------ */

/* As the policy thread answers a request that found the arena full. */
static int make_room(void *arg)
{
	struct writeback_pass p = { .sel.idle_before = UINT32_MAX, .goal_bytes = 8 * PG };
	struct writeback_result r;

	fuzz_require(writeback_run(run.wb, &p, &r) == 0);
	if (!r.pages)
		return -ENOSPC;
	store_compact(run.st);
	return 0;
}

static void op_recompress(struct fuzz_in *in)
{
	uint16_t threshold = fuzz_u16(in);
	uint8_t flags = fuzz_u8(in);
	struct recompress_pass p = {
		.sel = { .idle_before = run.idle_before, .huge_only = flags & 1 },
		.threshold = 16 + threshold % (PG - 16),
		.max_pages = (flags >> 1) % 8,
	};
	struct recompress_result r;

	if (!run.recomp)
		return;
	fuzz_require(recompress_run(run.st, run.w, &p, &r) == 0);
	fuzz_require(!r.yielded && r.recompressed + r.skipped <= r.tried);
}

static void op_writeback(struct fuzz_in *in)
{
	uint16_t goal = fuzz_u16(in);
	uint8_t flags = fuzz_u8(in);
	struct writeback_pass p = {
		.sel = { .idle_before = run.idle_before, .huge_only = flags & 1 },
		.goal_bytes = flags & 2 ? (uint64_t)goal * 16 : 0,
		.max_pages = (flags >> 2) % 8,
	};
	struct writeback_result r;

	if (!run.wb)
		return;
	fuzz_require(writeback_run(run.wb, &p, &r) == 0);
	/* A disk that works: full, or out of budget, but no I/O error. */
	fuzz_require(r.error == 0 || r.error == -ENOSPC || r.error == -EDQUOT);
	fuzz_require(r.kept_in_ram == 0 && !r.yielded);
}

static void op_compact(struct fuzz_in *in)
{
	uint8_t segs = fuzz_u8(in);

	store_compact(run.st);
	if (run.wb)
		writeback_compact(run.wb, 1 + segs % 4, NULL);
}

static void op_idle(struct fuzz_in *in)
{
	uint8_t how = fuzz_u8(in);
	uint32_t now = store_now(run.st);

	/* `idle all`, pages untouched since now (all, but for the clock), or none. */
	if (how % 3 == 0)
		run.idle_before = UINT32_MAX;
	else if (how % 3 == 1)
		run.idle_before = now;
	else
		run.idle_before = now ? now - 1 : 0;
}

/* A new generation, as training makes one: from the model's bytes (what
 * the store holds) or the input's. */
static void op_dict(struct fuzz_in *in)
{
	uint8_t how = fuzz_u8(in), page = fuzz_u8(in);
	size_t len = DICT_MIN_SIZE + fuzz_u16(in) % (sizeof(run.dict) - DICT_MIN_SIZE + 1);
	struct dictgen *g = store_dicts(run.st);
	const struct codec_ops *main_ops = g->ops[DICTGEN_MAIN], *rec = g->ops[DICTGEN_RECOMP];
	unsigned int before = atomic_load(&g->current);
	int ret;

	if (how & 1)
		gen(in, run.dict, len);
	else
		memcpy(run.dict, run.model + (size_t)(page % (NR_PAGES - 3)) * PG, len);
	ret = dictgen_install(g, run.dict, len, run.dict, len);
	if (ret > 0) {
		fuzz_require(ret <= (int)DICTGEN_MAX && atomic_load(&g->current) == (unsigned)ret);
		fuzz_require(dictgen_dict(g, (unsigned int)ret, DICTGEN_MAIN) ||
			     dictgen_dict(g, (unsigned int)ret, DICTGEN_RECOMP));
		return;
	}
	/* a failed install changes nothing */
	fuzz_require(atomic_load(&g->current) == before);
	if (ret == -EBUSY)
		return;
	fuzz_require(ret == -EINVAL);
	/* refused: no codec with dictionaries, or a zstd-format header zstd refuses */
	fuzz_require((!codec_has_dict(main_ops) && !codec_has_dict(rec)) ||
		     dict_is_zstd_format(run.dict, len));
}

static void op_reap(void)
{
	struct dictgen *g = store_dicts(run.st);
	struct dictgen_stats ds;

	dictgen_reap(g);
	dictgen_get_stats(g, &ds);
	fuzz_require(ds.generations <= DICTGEN_MAX);
	/* only the current one may be left without pages */
	fuzz_require(ds.generations <= 1 || ds.refs_older > 0);
}

/* Every page discarded, the generations reaped: nothing may hold one. */
static void check_dicts_freed(void)
{
	struct dictgen *g = store_dicts(run.st);
	struct dictgen_stats ds;
	struct store_counters c;

	fuzz_require(store_discard(run.st, run.w, 0, SIZE) == 0);
	store_get_counters(run.st, &c);
	fuzz_require(c.pages_stored == 0 && c.bd_count == 0);
	dictgen_reap(g);
	dictgen_get_stats(g, &ds);
	fuzz_require(ds.generations == (atomic_load(&g->current) ? 1u : 0u));
	fuzz_require(ds.refs_current == 0 && ds.refs_older == 0);
}

/* ---- one input ---------------------------------------------------------------- */

static void setup(struct fuzz_in *in)
{
	static const struct codec_ops *const codecs[] = { &codec_lz4, &codec_zstd, &codec_lzo,
							  NULL };
	static const enum seal_cipher ciphers[] = { SEAL_NONE, SEAL_AES_256_GCM,
						    SEAL_CHACHA20_POLY1305 };
	uint8_t c = fuzz_u8(in), f = fuzz_u8(in);
	unsigned int segs = (unsigned int[]){ 0, 1, 2, 4 }[(f >> 2) & 3];
	struct store_params sp = {
		.size = SIZE,
		.codec = codecs[c % 3],
		.recomp_codec = codecs[c / 3 % 4],
		.mem_limit = (uint64_t)(unsigned int[]){ 0, 8, 16, 32 }[f & 3] * PG,
		.promote = f & 0x10,
	};
	char err[256];

	memset(run.model, 0, sizeof(run.model));
	memset(run.stored, 0, sizeof(run.stored));
	run.stored_known = true;
	run.idle_before = UINT32_MAX;
	run.recomp = sp.recomp_codec != NULL;
	if (segs) {
		char dir[] = "/var/tmp/zswapfs-fuzz.XXXXXX", path[64];

		/* O_DIRECT needs a disk filesystem; the directory is 0700, and
		 * both are gone once the file is open. */
		fuzz_require(mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/backing", dir);
		run.b = backing_open(path, (uint64_t)segs * BACKING_SEG_SIZE, ciphers[c / 12 % 3],
				     err, sizeof(err));
		if (!run.b)
			fprintf(stderr, "fuzz_store: %s\n", err);
		fuzz_require(run.b && backing_cipher(run.b) == ciphers[c / 12 % 3]);
		fuzz_require(unlink(path) == 0 && rmdir(dir) == 0);
		sp.backing = run.b;
	}
	run.st = store_create(&sp);
	fuzz_require(run.st);
	if (run.b) {
		struct writeback_config wc = {
			.daily_limit = f & 0x40 ? 64 * 1024 : 0,
			.compact_threshold = f & 0x80 ? 99 : 50,
		};

		run.wb = writeback_create(run.st, &wc);
		fuzz_require(run.wb);
		if (f & 0x20)
			store_set_make_room(run.st, make_room, NULL);
	}
	run.w = malloc(sizeof(*run.w));
	fuzz_require(run.w && store_worker_init(run.w, run.st) == 0);
}

static void teardown(void)
{
	store_worker_fini(run.w);
	free(run.w);
	writeback_destroy(run.wb);
	store_destroy(run.st);
	backing_close(run.b);
	run.w = NULL;
	run.wb = NULL;
	run.st = NULL;
	run.b = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };

	setup(&in);
	while (in.left) {
		uint8_t op = fuzz_u8(&in) % OP_COUNT;
		uint64_t off;
		size_t len;

		switch (op) {
		case OP_WRITE_PAGE:
			op_write((uint64_t)(fuzz_u8(&in) % NR_PAGES) * PG, PG, &in);
			break;
		case OP_WRITE:
			off = fuzz_u32(&in) % (SIZE + 2 * PG);
			len = fuzz_u16(&in) % (RANGE_MAX + 1);
			op_write(off, len, &in);
			break;
		case OP_READ_PAGE:
			check_range((uint64_t)(fuzz_u8(&in) % NR_PAGES) * PG, PG);
			break;
		case OP_READ:
			off = fuzz_u32(&in) % (SIZE + 2 * PG);
			len = fuzz_u16(&in) % (RANGE_MAX + 1);
			check_range(off, len);
			break;
		case OP_DISCARD:
			off = fuzz_u32(&in) % (SIZE + 2 * PG);
			len = fuzz_u16(&in) % (RANGE_MAX + 1);
			op_discard(off, len);
			break;
		case OP_IDLE:
			op_idle(&in);
			break;
		case OP_RECOMPRESS:
			op_recompress(&in);
			break;
		case OP_WRITEBACK:
			op_writeback(&in);
			break;
		case OP_COMPACT:
			op_compact(&in);
			break;
		case OP_CHECK_ALL:
			check_all();
			break;
		case OP_DICT:
			op_dict(&in);
			break;
		case OP_REAP:
			op_reap();
			break;
		}
		check_counters();
	}
	check_all();
	check_counters();
	check_dicts_freed();
	teardown();
	return 0;
}
