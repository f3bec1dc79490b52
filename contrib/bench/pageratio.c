/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pageratio - what the arena costs on top of the codec, page by page, without a mount.
 *
 *	pageratio -c CORPUS [-z LEVEL] [-T THRESHOLD,...] [-j]
 *
 * Compresses every page of CORPUS (see mkcorpus) with the daemon's own lz4 (level 1) and
 * zstd (LEVEL, default 3) by the store's rules: a same-filled page costs nothing, a page
 * that does not compress below STORE_HUGE_SIZE is stored raw (4096 bytes).  Then stores
 * the objects, in corpus order, in a fresh arena (the daemon's src/arena.c, so a changed
 * class layout shows here), compacts it as the daemon's `compact` command does, and reads
 * back what the arena holds.  One row per configuration:
 *
 *   lz4, zstd        every page with that codec
 *   lz4+zstd/T       what idle recompression of an lz4 store keeps by the store's rules
 *                    with recompress.threshold T: a page is tried when its lz4 object is
 *                    larger than T bytes, and takes the zstd result when that fits below
 *                    STORE_HUGE_SIZE and saves at least T bytes
 *
 * Columns: orig/compr (orig / sum of object sizes: the codec alone), orig/arena
 * (orig / pages the arena holds after compaction: what mem_used_total would be; `fresh`:
 * its bytes before compaction), and the arena's bytes beyond the objects after
 * compaction, split in three:
 *   round   sum over objects of (class size - object size): size-class rounding
 *   tail    bytes at the end of each span that no place covers (span length vs class size)
 *   free    free places in spans (part-used spans compaction could not empty)
 * so that arena = compr + round + tail + free exactly.  For lz4+zstd/T, the pages left in
 * lz4 by reason (lz4 object <= T: not tried; zstd saved less than T; zstd over the huge
 * size), and the bytes they cost beyond their zstd size, the `behind` column.
 *
 * -j: also one JSON line.  The arena locks its memory: run as root (or with a large
 * RLIMIT_MEMLOCK).  Compare a daemon's figures after `idle all` + `recompress` +
 * `compact` with the lz4+zstd row of its threshold (ratio.sh -B prints both).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "codec.h"
#include "store.h"

#define PG		STORE_PAGE_SIZE
#define MAX_T		16

struct row {
	char name[32];
	uint64_t pages, same, huge;
	uint64_t compr;			/* object bytes (huge: PG each) */
	uint64_t fresh;			/* pages the arena holds when filled, in bytes */
	uint64_t arena;			/* and after arena_compact() */
	uint64_t round, tail, free;	/* arena = compr + round + tail + free */
	/* lz4+zstd only: pages left in lz4, by reason, and their bytes beyond zstd */
	uint64_t small, skipped, incompressible, behind;
};

static void die(const char *what)
{
	fprintf(stderr, "pageratio: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: pageratio -c CORPUS [-z LEVEL] [-T THRESHOLD,...] [-j]\n");
	exit(2);
}

static int same_filled(const unsigned char *p)
{
	uint64_t v, w;
	size_t i;

	memcpy(&v, p, 8);
	for (i = 8; i < PG; i += 8) {
		memcpy(&w, p + i, 8);
		if (w != v)
			return 0;
	}
	return 1;
}

/* Object size by the store's rules: 0 same-filled, PG raw, else compressed. */
static uint16_t store_size_of(struct codec_ctx *ctx, const unsigned char *p, unsigned char *c,
			      unsigned char *d)
{
	int n = codec_compress(ctx, p, PG, c, STORE_HUGE_SIZE);

	if (n == -E2BIG)
		return PG;
	if (n <= 0)
		die("compression failed");
	if (codec_decompress(ctx, c, (size_t)n, d, PG) || memcmp(d, p, PG))
		die("a page did not come back");
	return (uint16_t)n;
}

/* arena_compact's callback: the owner is the page's index in handles[]. */
static int migrate(void *cookie, uint32_t owner, uint64_t old_handle, const void *old,
		   uint64_t new_handle, void *new, size_t size)
{
	uint64_t *handles = cookie;

	if (handles[owner] != old_handle)
		return -EAGAIN;
	memcpy(new, old, size);
	handles[owner] = new_handle;
	return 0;
}

/*
 * Store sizes[0..n) (0: same-filled, nothing stored) in a fresh arena, then
 * compact it as the daemon's `compact` does, and fill r.
 */
static void fill_arena(const uint16_t *sizes, size_t n, struct row *r)
{
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	struct arena_stats as;
	struct arena *a = arena_create(0);
	uint64_t *handles = calloc(n, sizeof(*handles));
	uint64_t classed = 0, placed = 0;
	size_t i;
	unsigned int ci;

	if (!a || !handles)
		die("arena_create");
	for (i = 0; i < n; i++) {
		r->pages++;
		if (!sizes[i]) {
			r->same++;
			continue;
		}
		if (sizes[i] == PG)
			r->huge++;
		r->compr += sizes[i];
		errno = 0;
		if (arena_alloc(a, sizes[i], (uint32_t)i, &handles[i]))
			die("arena_alloc (run as root: the arena locks its memory)");
	}
	arena_get_stats(a, &as);
	r->fresh = as.pages_used * ARENA_PAGE_SIZE;
	arena_compact(a, migrate, handles);
	arena_get_stats(a, &as);
	arena_get_class_stats(a, cls);
	for (ci = 0; ci < ARENA_NR_CLASSES; ci++) {
		classed += cls[ci].objs_used * cls[ci].size;
		placed += cls[ci].objs_capacity * cls[ci].size;
	}
	r->arena = as.pages_used * ARENA_PAGE_SIZE;
	r->round = classed - r->compr;
	r->free = arena_unused_bytes(cls);
	r->tail = r->arena - placed;
	arena_destroy(a);
	free(handles);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static void print_row(const struct row *r)
{
	uint64_t orig = r->pages * PG;

	printf("%-14s %8.4f %8.4f %11llu %11llu %11llu %9llu %9llu %9llu %6llu", r->name,
	       ratio(orig, r->compr), ratio(orig, r->arena), (unsigned long long)r->compr,
	       (unsigned long long)r->fresh, (unsigned long long)r->arena, (unsigned long long)r->round,
	       (unsigned long long)r->tail, (unsigned long long)r->free,
	       (unsigned long long)r->huge);
	if (r->small + r->skipped + r->incompressible)
		printf("  left_in_lz4=%llu (small=%llu skipped=%llu incompressible=%llu) "
		       "behind=%llu", (unsigned long long)(r->small + r->skipped +
						     r->incompressible),
		       (unsigned long long)r->small, (unsigned long long)r->skipped,
		       (unsigned long long)r->incompressible, (unsigned long long)r->behind);
	printf("\n");
}

static void json_row(const struct row *r, int first)
{
	printf("%s{\"config\":\"%s\",\"pages\":%llu,\"same\":%llu,\"huge\":%llu,\"compr\":%llu,"
	       "\"fresh\":%llu,\"arena\":%llu,\"round\":%llu,\"tail\":%llu,\"free\":%llu,\"ratio_compr\":%.4f,"
	       "\"ratio_arena\":%.4f,\"left_small\":%llu,\"left_skipped\":%llu,"
	       "\"left_incompressible\":%llu,\"behind\":%llu}", first ? "" : ",", r->name,
	       (unsigned long long)r->pages, (unsigned long long)r->same,
	       (unsigned long long)r->huge, (unsigned long long)r->compr,
	       (unsigned long long)r->fresh, (unsigned long long)r->arena,
	       (unsigned long long)r->round,
	       (unsigned long long)r->tail, (unsigned long long)r->free,
	       ratio(r->pages * PG, r->compr), ratio(r->pages * PG, r->arena),
	       (unsigned long long)r->small, (unsigned long long)r->skipped,
	       (unsigned long long)r->incompressible, (unsigned long long)r->behind);
}

int main(int argc, char *argv[])
{
	const char *path = NULL;
	char *tlist = NULL, *tok, *save;
	unsigned int thresholds[MAX_T], nt = 0, t;
	int level = 3, opt, fd, json = 0;
	unsigned char c[PG], d[PG];
	struct codec_ctx lz4, zstd;
	struct row rows[2 + MAX_T];
	const unsigned char *corpus;
	uint16_t *sl, *sz, *mix;
	struct stat sb;
	size_t npages, i;

	while ((opt = getopt(argc, argv, "c:z:T:jh")) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'z': level = atoi(optarg); break;
		case 'T': tlist = optarg; break;
		case 'j': json = 1; break;
		default: usage();
		}
	}
	if (!path)
		usage();
	if (tlist) {
		for (tok = strtok_r(tlist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (nt == MAX_T || atoi(tok) < 0 || atoi(tok) > (int)PG)
				usage();
			thresholds[nt++] = (unsigned int)atoi(tok);
		}
	} else {
		thresholds[nt++] = 128;	/* recompress.threshold's default */
	}

	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &sb))
		die("cannot open the corpus");
	npages = (size_t)sb.st_size / PG;
	corpus = mmap(NULL, npages * PG, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (!npages || corpus == MAP_FAILED)
		die("cannot map the corpus");
	close(fd);
	sl = calloc(npages, sizeof(*sl));
	sz = calloc(npages, sizeof(*sz));
	mix = calloc(npages, sizeof(*mix));
	if (!sl || !sz || !mix)
		die("out of memory");
	if (codec_ctx_init(&lz4, &codec_lz4, 0) || codec_ctx_init(&zstd, &codec_zstd, level))
		die("codec contexts");

	for (i = 0; i < npages; i++) {
		const unsigned char *p = corpus + i * PG;

		if (same_filled(p))
			continue;
		sl[i] = store_size_of(&lz4, p, c, d);
		sz[i] = store_size_of(&zstd, p, c, d);
	}

	memset(rows, 0, sizeof(rows));
	snprintf(rows[0].name, sizeof(rows[0].name), "lz4");
	fill_arena(sl, npages, &rows[0]);
	snprintf(rows[1].name, sizeof(rows[1].name), "zstd");
	fill_arena(sz, npages, &rows[1]);
	for (t = 0; t < nt; t++) {
		struct row *r = &rows[2 + t];
		unsigned int th = thresholds[t];

		snprintf(r->name, sizeof(r->name), "lz4+zstd/%u", th);
		for (i = 0; i < npages; i++) {
			mix[i] = sl[i];
			if (!sl[i])
				continue;
			/* store_recompress()'s tests, in its order */
			if (sl[i] <= th)
				r->small++;
			else if (sz[i] == PG)
				r->incompressible++;
			else if ((unsigned int)sz[i] + th > sl[i])
				r->skipped++;
			else
				mix[i] = sz[i];
			r->behind += (uint64_t)(mix[i] - sz[i]);
		}
		fill_arena(mix, npages, r);
	}

	printf("# pageratio: corpus=%s pages=%zu zstd_level=%d huge_size=%u classes=%u "
	       "(%u..%u by %u)\n", path, npages, level, STORE_HUGE_SIZE, ARENA_NR_CLASSES,
	       ARENA_MIN_OBJ, ARENA_MAX_OBJ, ARENA_CLASS_DELTA);
	printf("%-14s %8s %8s %11s %11s %11s %9s %9s %9s %6s\n", "config", "o/compr", "o/arena",
	       "compr", "fresh", "arena", "round", "tail", "free", "huge");
	for (t = 0; t < 2 + nt; t++)
		print_row(&rows[t]);
	if (json) {
		printf("{\"bench\":\"pageratio\",\"pages\":%zu,\"zstd_level\":%d,\"rows\":[",
		       npages, level);
		for (t = 0; t < 2 + nt; t++)
			json_row(&rows[t], t == 0);
		printf("]}\n");
	}
	codec_ctx_fini(&lz4);
	codec_ctx_fini(&zstd);
	free(sl);
	free(sz);
	free(mix);
	return 0;
}
