/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dictbench - what a trained dictionary gives lz4 and zstd on real process memory.
 *
 *	dictbench -c CORPUS [-t PERCENT] [-o OFFSET] [-b RUN] [-s DICT_BYTES] [-k K -d D]
 *		  [-z LEVEL] [-r ROUNDS] [-m PAGES] [-S N,N,...]
 *
 * CORPUS: 4 KiB pages (see mkcorpus).  Every page i with (i / RUN) % (100 / PERCENT) ==
 * OFFSET is a training page (default: 10 %, RUN 1, OFFSET 0: every tenth page from the
 * first; RUN 64 samples runs of 64 pages, as a sampler taking neighbouring pages would);
 * all the others are held out and measured.  Training takes the training pages that are
 * not same-filled (the store keeps those as a fill word; a sampler skips them) and makes a
 * DICT_BYTES (64 KiB) dictionary with dict_train() (fastCover, segments of K bytes scored
 * by D-byte substrings, default DICT_TRAIN_K and DICT_TRAIN_D; -k 0 -d 0: zstd's own
 * parameter search), timed, its peak memory measured with VmHWM.
 *
 * Memory ratio on the held-out pages, by the store's rules: a same-filled page costs 0
 * bytes, a page that does not compress below STORE_HUGE_SIZE costs a page; printed as
 * orig / sum of compressed sizes, and orig / sum of arena class sizes (16-byte classes
 * from 32 bytes: what the arena pays before fragmentation), for lz4 and zstd at LEVEL (3),
 * each without and with the dictionary.  Every page is decoded and compared.
 *
 * Speed: compression and decompression of the first PAGES (16384) held-out pages that are
 * not same-filled, per configuration, ROUNDS (7) rounds, the configurations interleaved in
 * a different order each round; the median of the rounds in MB/s of input (thread CPU
 * time, and wall clock).  The row "lz4+dict loadDict/page" is the naive way, LZ4_loadDict
 * into the stream before every page, which the template stream replaces.
 *
 * -S trains again on N of the training pages (spread evenly over them) and prints the
 * gains: a sampler holds N pages in memory while it trains, how many are worth it?
 *
 * Last line: one JSON object.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* LZ4_attach_dictionary, LZ4_compress_fast_extState_fastReset: only in liblz4.a (Makefile) */
#define LZ4_STATIC_LINKING_ONLY
#include <lz4.h>
#include <zstd.h>

#include "codec.h"
#include "dict.h"
#include "store.h"

#define PG		STORE_PAGE_SIZE
#define MAX_ROUNDS	31

static const unsigned char *corpus;
static size_t npages;
static struct dict_train_params train_params = { DICT_TRAIN_K, DICT_TRAIN_D };

/* ---- helpers -------------------------------------------------------------------------- */

static double now_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const unsigned char *page_at(size_t i)
{
	return corpus + i * PG;
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

/* What the arena pays for an object of len bytes (before fragmentation). */
static size_t class_size(size_t len)
{
	if (len < ARENA_MIN_OBJ)
		return ARENA_MIN_OBJ;
	return (len + ARENA_CLASS_DELTA - 1) / ARENA_CLASS_DELTA * ARENA_CLASS_DELTA;
}

static long status_kib(const char *key)
{
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Reset VmHWM to the current RSS (Linux: clear_refs 5). */
static int hwm_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what)
{
	fprintf(stderr, "dictbench: %s\n", what);
	exit(1);
}

/* ---- training --------------------------------------------------------------------------- */

struct trained {
	unsigned char *bytes;
	size_t len;
	unsigned int samples;
	double wall_s, cpu_s;
	long peak_kib;		/* VmHWM over the RSS before training */
};

static void train(const size_t *idx, unsigned int n, size_t dict_cap, struct trained *t)
{
	unsigned char *samples = malloc((size_t)n * PG);
	size_t *sizes = malloc(n * sizeof(*sizes));
	char err[256];
	double w0, c0;
	long rss0, r;
	unsigned int i;

	if (!samples || !sizes)
		die("out of memory");
	for (i = 0; i < n; i++) {
		memcpy(samples + (size_t)i * PG, page_at(idx[i]), PG);
		sizes[i] = PG;
	}
	t->bytes = malloc(dict_cap);
	if (!t->bytes)
		die("out of memory");
	/* The samples and the dictionary buffer are resident: only the trainer's own counts. */
	memset(t->bytes, 0, dict_cap);
	hwm_reset();
	rss0 = status_kib("VmRSS");
	w0 = now_s(CLOCK_MONOTONIC);
	c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	r = dict_train(t->bytes, dict_cap, samples, sizes, n, &train_params, err, sizeof(err));
	t->cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	t->wall_s = now_s(CLOCK_MONOTONIC) - w0;
	t->peak_kib = status_kib("VmHWM") - rss0;
	if (r <= 0) {
		fprintf(stderr, "dictbench: training on %u pages: %s\n", n, err);
		exit(1);
	}
	t->len = (size_t)r;
	t->samples = n;
	free(sizes);
	free(samples);
}

/* ---- ratio ------------------------------------------------------------------------------ */

struct ratio {
	uint64_t orig, compr, classed, huge, same;
};

static void measure_ratio(struct codec_ctx *ctx, const struct codec_dict *dict,
			  const size_t *held, size_t nheld, struct ratio *r)
{
	unsigned char c[PG * 2], d[PG];
	size_t i;
	int n;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < nheld; i++) {
		const unsigned char *p = page_at(held[i]);

		r->orig += PG;
		if (same_filled(p)) {
			r->same++;
			continue;
		}
		n = codec_compress_dict(ctx, dict, p, PG, c, STORE_HUGE_SIZE);
		if (n == -E2BIG) {
			r->huge++;
			r->compr += PG;
			r->classed += PG;
			continue;
		}
		if (n <= 0)
			die("compression failed");
		if (codec_decompress_dict(ctx, dict, c, (size_t)n, d, PG) || memcmp(d, p, PG))
			die("a page did not come back");
		r->compr += (uint64_t)n;
		r->classed += class_size((size_t)n);
	}
}

/* ---- speed ------------------------------------------------------------------------------ */

/*
 * The lz4 rows besides the daemon's own (lz4: LZ4_compress_fast_extState; lz4+dict: a
 * copy of the template stream, then LZ4_compress_fast_continue):
 *   lz4 fastReset       LZ4_compress_fast_extState_fastReset on a stream that is
 *                       never cleared by us (static-only in liblz4 1.9.4)
 *   lz4 resetFast+cont  LZ4_resetStream_fast, LZ4_compress_fast_continue, no dictionary
 *   lz4+dict attach     LZ4_resetStream_fast, LZ4_attach_dictionary(template): the
 *                       dictCtx mode, no 16 KiB copy (static-only in 1.9.4)
 *   lz4+dict prefix     the dictionary copied once into a buffer with room for a page
 *                       after it, a template loaded from that copy; per page: the page
 *                       copied behind the dictionary, the template copied, and
 *                       LZ4_compress_fast_continue, which then sees one contiguous
 *                       prefix instead of an external dictionary; decompression
 *                       decodes behind the same copy (LZ4's prefix decoder) and copies
 *                       the page out
 *   lz4+dict accelN     the template with acceleration N
 * All rows decode to the same pages (checked on every compressed page).
 */
enum cfg {
	C_LZ4, C_LZ4_DICT, C_LZ4_NAIVE, C_ZSTD, C_ZSTD_DICT,
	C_LZ4_FASTRESET, C_LZ4_RSF, C_LZ4_ATTACH, C_LZ4_PREFIX, C_LZ4_ACCEL2, C_LZ4_ACCEL3,
	C_COUNT
};

static const char *const cfg_name[C_COUNT] = {
	"lz4", "lz4+dict", "lz4+dict loadDict/page", "zstd", "zstd+dict",
	"lz4 fastReset", "lz4 resetFast+cont", "lz4+dict attach", "lz4+dict prefix",
	"lz4+dict accel2", "lz4+dict accel3",
};

static bool cfg_lz4(enum cfg c)
{
	return c != C_ZSTD && c != C_ZSTD_DICT;
}

static bool cfg_dict(enum cfg c)
{
	return c != C_LZ4 && c != C_ZSTD && c != C_LZ4_FASTRESET && c != C_LZ4_RSF;
}

struct speed_env {
	struct codec_ctx *lz4, *zstd;
	struct codec_dict *lz4_dict, *zstd_dict;
	const unsigned char *dict_bytes;
	size_t dict_len;
	LZ4_stream_t *naive;
	LZ4_stream_t *work;	/* the rows' own stream */
	LZ4_stream_t *tmpl;	/* loaded from the dictionary's last 64 KiB */
	LZ4_stream_t *ptmpl;	/* loaded from prefix_buf */
	char *prefix_buf;	/* the dictionary's last 64 KiB, then room for a page */
	int prefix_len;
	const size_t *pages;
	size_t n;
	unsigned char *out;	/* n * 2 pages */
	int *len;
};

/* Compress every page of env; returns thread CPU seconds, *wall the wall clock. */
static double run_compress(struct speed_env *e, enum cfg c, double *wall)
{
	double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	size_t i, dl = e->dict_len > 65536 ? 65536 : e->dict_len;
	const char *dstart = (const char *)e->dict_bytes + e->dict_len - dl;

	for (i = 0; i < e->n; i++) {
		const unsigned char *p = page_at(e->pages[i]);
		unsigned char *o = e->out + i * 2 * PG;
		int n;

		switch (c) {
		case C_LZ4:
			n = codec_compress(e->lz4, p, PG, o, 2 * PG);
			break;
		case C_LZ4_DICT:
			n = codec_compress_dict(e->lz4, e->lz4_dict, p, PG, o, 2 * PG);
			break;
		case C_LZ4_NAIVE:
			LZ4_loadDict(e->naive, dstart, (int)dl);
			n = LZ4_compress_fast_continue(e->naive, (const char *)p, (char *)o, PG,
						       2 * PG, 1);
			break;
		case C_ZSTD:
			n = codec_compress(e->zstd, p, PG, o, 2 * PG);
			break;
		case C_LZ4_FASTRESET:
			n = LZ4_compress_fast_extState_fastReset(e->work, (const char *)p,
								 (char *)o, PG, 2 * PG, 1);
			break;
		case C_LZ4_RSF:
			LZ4_resetStream_fast(e->work);
			n = LZ4_compress_fast_continue(e->work, (const char *)p, (char *)o, PG,
						       2 * PG, 1);
			break;
		case C_LZ4_ATTACH:
			LZ4_resetStream_fast(e->work);
			LZ4_attach_dictionary(e->work, e->tmpl);
			n = LZ4_compress_fast_continue(e->work, (const char *)p, (char *)o, PG,
						       2 * PG, 1);
			break;
		case C_LZ4_PREFIX:
			memcpy(e->prefix_buf + e->prefix_len, p, PG);
			memcpy(e->work, e->ptmpl, sizeof(*e->work));
			n = LZ4_compress_fast_continue(e->work, e->prefix_buf + e->prefix_len,
						       (char *)o, PG, 2 * PG, 1);
			break;
		case C_LZ4_ACCEL2:
		case C_LZ4_ACCEL3:
			memcpy(e->work, e->tmpl, sizeof(*e->work));
			n = LZ4_compress_fast_continue(e->work, (const char *)p, (char *)o, PG,
						       2 * PG, c == C_LZ4_ACCEL2 ? 2 : 3);
			break;
		default:
			n = codec_compress_dict(e->zstd, e->zstd_dict, p, PG, o, 2 * PG);
			break;
		}
		if (n <= 0)
			die("compression failed");
		e->len[i] = n;
	}
	*wall = now_s(CLOCK_MONOTONIC) - w0;
	return now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
}

static double run_decompress(struct speed_env *e, enum cfg c, double *wall)
{
	double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	unsigned char d[PG];
	struct codec_ctx *ctx = cfg_lz4(c) ? e->lz4 : e->zstd;
	const struct codec_dict *dict = !cfg_dict(c) ? NULL :
					c == C_ZSTD_DICT ? e->zstd_dict : e->lz4_dict;
	char *behind = e->prefix_buf + e->prefix_len;
	size_t i;

	for (i = 0; i < e->n; i++) {
		const char *src = (const char *)e->out + i * 2 * PG;

		if (c == C_LZ4_PREFIX) {
			/* dictionary and output contiguous: LZ4's prefix decoder */
			if (LZ4_decompress_safe_usingDict(src, behind, e->len[i], PG,
							  e->prefix_buf, e->prefix_len) != PG)
				die("decompression failed");
			memcpy(d, behind, PG);
		} else if (codec_decompress_dict(ctx, dict, src, (size_t)e->len[i], d, PG)) {
			die("decompression failed");
		}
		if (memcmp(d, page_at(e->pages[i]), PG))
			die("a page did not come back");
	}
	*wall = now_s(CLOCK_MONOTONIC) - w0;
	return now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
}

/* ---- main ------------------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: dictbench -c CORPUS [-t PERCENT] [-o OFFSET] [-b RUN] "
		"[-s DICT_BYTES] [-k K -d D] [-z LEVEL] [-r ROUNDS] [-m PAGES] [-S N,N,...]\n");
	exit(2);
}

static void print_ratio(const char *name, const struct ratio *r, const struct ratio *base)
{
	double rc = (double)r->orig / (double)r->compr, rk = (double)r->orig / (double)r->classed;

	printf("%-10s %10.4f %10.4f", name, rc, rk);
	if (base)
		printf(" %+9.2f%% %+9.2f%%", 100.0 * (rc / ((double)base->orig / base->compr) - 1),
		       100.0 * (rk / ((double)base->orig / base->classed) - 1));
	else
		printf(" %10s %10s", "", "");
	printf(" %8llu %8llu\n", (unsigned long long)r->huge, (unsigned long long)r->same);
}

int main(int argc, char *argv[])
{
	const char *path = NULL, *sweep = NULL;
	unsigned int percent = 10, offset = 0, run = 1, rounds = 7, speed_pages = 16384;
	size_t dict_cap = DICT_TRAIN_SIZE, *train_idx, *held, *speed_idx, ntrain = 0, nheld = 0;
	size_t nspeed = 0, i;
	int level = 3, opt, fd, c, r;
	struct codec_ctx lz4, zstd;
	struct codec_dict *lz4_dict = NULL, *zstd_dict = NULL;
	struct ratio rr[4];
	struct trained t;
	struct speed_env env;
	struct stat sb;
	double cpu[C_COUNT][2][MAX_ROUNDS], wall[C_COUNT][2][MAX_ROUNDS], med[C_COUNT][2][2];
	double t0, create_ms[2], best[C_COUNT];
	uint64_t speed_compr[C_COUNT];

	while ((opt = getopt(argc, argv, "c:t:o:b:s:k:d:z:r:m:S:h")) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 't': percent = (unsigned int)atoi(optarg); break;
		case 'o': offset = (unsigned int)atoi(optarg); break;
		case 'k': train_params.k = (unsigned int)atoi(optarg); break;
		case 'd': train_params.d = (unsigned int)atoi(optarg); break;
		case 'b': run = (unsigned int)atoi(optarg); break;
		case 's': dict_cap = (size_t)atol(optarg); break;
		case 'z': level = atoi(optarg); break;
		case 'r': rounds = (unsigned int)atoi(optarg); break;
		case 'm': speed_pages = (unsigned int)atoi(optarg); break;
		case 'S': sweep = optarg; break;
		default: usage();
		}
	}
	if (!path || !percent || percent > 50 || offset >= 100 / percent || !run || !rounds ||
	    rounds > MAX_ROUNDS ||
	    dict_cap < 1024 || dict_cap > DICT_MAX_SIZE)
		usage();

	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &sb))
		die("cannot open the corpus");
	npages = (size_t)sb.st_size / PG;
	corpus = mmap(NULL, npages * PG, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (!npages || corpus == MAP_FAILED)
		die("cannot map the corpus");
	close(fd);

	train_idx = malloc(npages * sizeof(*train_idx));
	held = malloc(npages * sizeof(*held));
	speed_idx = malloc(npages * sizeof(*speed_idx));
	if (!train_idx || !held || !speed_idx)
		die("out of memory");
	for (i = 0; i < npages; i++) {
		if ((i / run) % (100 / percent) == offset) {
			if (!same_filled(page_at(i)))
				train_idx[ntrain++] = i;
		} else {
			held[nheld++] = i;
			if (nspeed < speed_pages && !same_filled(page_at(i)))
				speed_idx[nspeed++] = i;
		}
	}
	printf("# dictbench: corpus=%s pages=%zu train=%zu (%u%%, offset %u, runs of %u, "
	       "same-filled left out) held_out=%zu dict=%zu bytes k=%u d=%u zstd_level=%d "
	       "lz4=%s zstd=%s\n", path, npages, ntrain, percent, offset, run, nheld, dict_cap,
	       train_params.k, train_params.d, level, LZ4_versionString(), ZSTD_versionString());

	train(train_idx, (unsigned int)ntrain, dict_cap, &t);
	printf("# training: %u pages -> %zu bytes in %.2f s wall, %.2f s CPU, peak %.1f MiB "
	       "beyond the samples (%.1f MiB)\n", t.samples, t.len, t.wall_s, t.cpu_s,
	       t.peak_kib / 1024.0, (double)ntrain * PG / (1 << 20));

	if (codec_ctx_init(&lz4, &codec_lz4, 1) || codec_ctx_init(&zstd, &codec_zstd, level))
		die("codec contexts");
	t0 = now_s(CLOCK_MONOTONIC);
	if (codec_dict_create(&lz4_dict, &codec_lz4, 1, t.bytes, t.len))
		die("lz4 dictionary");
	create_ms[0] = (now_s(CLOCK_MONOTONIC) - t0) * 1e3;
	t0 = now_s(CLOCK_MONOTONIC);
	if (codec_dict_create(&zstd_dict, &codec_zstd, level, t.bytes, t.len))
		die("zstd dictionary");
	create_ms[1] = (now_s(CLOCK_MONOTONIC) - t0) * 1e3;
	printf("# dictionary objects: lz4 %.2f ms, %zu bytes (template stream + copy); zstd-%d "
	       "%.2f ms, %zu bytes (CDict %zu + DDict %zu + copy)\n", create_ms[0],
	       sizeof(LZ4_stream_t) + t.len, level, create_ms[1],
	       ZSTD_sizeof_CDict(zstd_dict->cstate) + ZSTD_sizeof_DDict(zstd_dict->dstate) + t.len,
	       ZSTD_sizeof_CDict(zstd_dict->cstate), ZSTD_sizeof_DDict(zstd_dict->dstate));

	/* ---- ratio ---- */
	measure_ratio(&lz4, NULL, held, nheld, &rr[0]);
	measure_ratio(&lz4, lz4_dict, held, nheld, &rr[1]);
	measure_ratio(&zstd, NULL, held, nheld, &rr[2]);
	measure_ratio(&zstd, zstd_dict, held, nheld, &rr[3]);
	printf("\n%-10s %10s %10s %10s %10s %8s %8s\n", "codec", "orig/compr", "orig/class",
	       "gain", "gain cls", "huge", "same");
	print_ratio("lz4", &rr[0], NULL);
	print_ratio("lz4+dict", &rr[1], &rr[0]);
	print_ratio("zstd", &rr[2], NULL);
	print_ratio("zstd+dict", &rr[3], &rr[2]);

	/* ---- speed ---- */
	memset(&env, 0, sizeof(env));
	env.lz4 = &lz4;
	env.zstd = &zstd;
	env.lz4_dict = lz4_dict;
	env.zstd_dict = zstd_dict;
	env.dict_bytes = t.bytes;
	env.dict_len = t.len;
	env.naive = LZ4_createStream();
	env.work = LZ4_createStream();
	env.tmpl = LZ4_createStream();
	env.ptmpl = LZ4_createStream();
	env.prefix_len = t.len > 65536 ? 65536 : (int)t.len;
	env.prefix_buf = malloc((size_t)env.prefix_len + PG);
	if (!env.work || !env.tmpl || !env.ptmpl || !env.prefix_buf)
		die("out of memory");
	memcpy(env.prefix_buf, t.bytes + t.len - (size_t)env.prefix_len, (size_t)env.prefix_len);
	if (LZ4_loadDict(env.tmpl, (const char *)t.bytes + t.len - (size_t)env.prefix_len,
			 env.prefix_len) != env.prefix_len ||
	    LZ4_loadDict(env.ptmpl, env.prefix_buf, env.prefix_len) != env.prefix_len)
		die("LZ4_loadDict");
	env.pages = speed_idx;
	env.n = nspeed;
	env.out = malloc(nspeed * 2 * PG);
	env.len = malloc(nspeed * sizeof(*env.len));
	if (!env.naive || !env.out || !env.len)
		die("out of memory");
	for (r = 0; r < (int)rounds; r++) {
		for (c = 0; c < C_COUNT; c++) {
			/* a different order every round: no configuration always goes first */
			enum cfg k = (enum cfg)((c + r) % C_COUNT);

			cpu[k][0][r] = run_compress(&env, k, &wall[k][0][r]);
			if (r == 0) {
				/* the store's rules: a page that does not shrink below
				 * STORE_HUGE_SIZE costs a page */
				speed_compr[k] = 0;
				for (i = 0; i < nspeed; i++)
					speed_compr[k] += env.len[i] < (int)STORE_HUGE_SIZE ?
							  (uint64_t)env.len[i] : PG;
			}
			cpu[k][1][r] = run_decompress(&env, k, &wall[k][1][r]);
		}
	}
	for (c = 0; c < C_COUNT; c++) {
		for (i = 0; i < 2; i++) {
			med[c][i][0] = (double)nspeed * PG / 1e6 / median(cpu[c][i], (int)rounds);
			med[c][i][1] = (double)nspeed * PG / 1e6 / median(wall[c][i], (int)rounds);
		}
		/* median() sorted the times: the shortest round is the least disturbed */
		best[c] = (double)nspeed * PG / 1e6 / cpu[c][0][0];
	}
	printf("\nspeed, %zu pages (%.0f MiB), median of %u interleaved rounds, MB/s of "
	       "input (CPU time / wall clock)\n", nspeed, (double)nspeed * PG / (1 << 20),
	       rounds);
	printf("(ratio: orig/compr of these pages by the store's rules, and against the "
	       "row lz4 or zstd; x lz4: compression speed (CPU), median and fastest round, "
	       "against the row lz4's)\n");
	printf("%-24s %21s %21s %16s %15s\n", "", "compress", "decompress", "ratio",
	       "x lz4 med/best");
	for (c = 0; c < C_COUNT; c++) {
		enum cfg base = cfg_lz4((enum cfg)c) ? C_LZ4 : C_ZSTD;

		printf("%-24s %10.1f %10.1f %10.1f %10.1f %7.4f %+7.2f%% %7.3f %7.3f\n",
		       cfg_name[c], med[c][0][0], med[c][0][1], med[c][1][0], med[c][1][1],
		       (double)nspeed * PG / (double)speed_compr[c],
		       100.0 * ((double)speed_compr[base] / (double)speed_compr[c] - 1),
		       med[c][0][0] / med[C_LZ4][0][0], best[c] / best[C_LZ4]);
	}
	printf("lz4 compression with/without dictionary: %.3f (CPU), %.3f (wall)\n",
	       med[C_LZ4_DICT][0][0] / med[C_LZ4][0][0], med[C_LZ4_DICT][0][1] / med[C_LZ4][0][1]);

	/* ---- sample counts ---- */
	if (sweep) {
		char *list = strdup(sweep), *save = NULL, *tok;

		printf("\n%-8s %8s %8s %10s %10s %14s\n", "samples", "dict", "train_s",
		       "lz4 gain", "zstd gain", "(class sizes)");
		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			size_t n = (size_t)atol(tok);
			struct codec_dict *ld = NULL, *zd = NULL;
			struct trained ts;
			struct ratio a, b;

			if (!n || n > ntrain)
				continue;
			/* spread over the whole list, as a sampler over the whole store */
			for (i = 0; i < n; i++)
				speed_idx[i] = train_idx[i * ntrain / n];
			train(speed_idx, (unsigned int)n, dict_cap, &ts);
			if (codec_dict_create(&ld, &codec_lz4, 1, ts.bytes, ts.len) ||
			    codec_dict_create(&zd, &codec_zstd, level, ts.bytes, ts.len))
				die("dictionary");
			measure_ratio(&lz4, ld, held, nheld, &a);
			measure_ratio(&zstd, zd, held, nheld, &b);
			/* no peak: freed memory of the first training is reused */
			printf("%-8zu %8zu %8.2f %+9.2f%% %+9.2f%% %+6.2f/%+5.2f%%\n", n,
			       ts.len, ts.wall_s,
			       100.0 * ((double)rr[0].compr / a.compr - 1),
			       100.0 * ((double)rr[2].compr / b.compr - 1),
			       100.0 * ((double)rr[0].classed / a.classed - 1),
			       100.0 * ((double)rr[2].classed / b.classed - 1));
			codec_dict_put(ld);
			codec_dict_put(zd);
			free(ts.bytes);
		}
		free(list);
	}

	printf("{\"bench\":\"dict\",\"pages\":%zu,\"train_pages\":%u,\"dict_bytes\":%zu,"
	       "\"train_wall_s\":%.3f,\"train_cpu_s\":%.3f,\"train_peak_kib\":%ld,",
	       npages, t.samples, t.len, t.wall_s, t.cpu_s, t.peak_kib);
	printf("\"ratio\":{\"lz4\":%.4f,\"lz4_dict\":%.4f,\"zstd\":%.4f,\"zstd_dict\":%.4f},",
	       (double)rr[0].orig / rr[0].compr, (double)rr[1].orig / rr[1].compr,
	       (double)rr[2].orig / rr[2].compr, (double)rr[3].orig / rr[3].compr);
	printf("\"ratio_class\":{\"lz4\":%.4f,\"lz4_dict\":%.4f,\"zstd\":%.4f,\"zstd_dict\":%.4f},",
	       (double)rr[0].orig / rr[0].classed, (double)rr[1].orig / rr[1].classed,
	       (double)rr[2].orig / rr[2].classed, (double)rr[3].orig / rr[3].classed);
	printf("\"compress_mbs_cpu\":{\"lz4\":%.1f,\"lz4_dict\":%.1f,\"lz4_naive\":%.1f,"
	       "\"zstd\":%.1f,\"zstd_dict\":%.1f}}\n", med[C_LZ4][0][0], med[C_LZ4_DICT][0][0],
	       med[C_LZ4_NAIVE][0][0], med[C_ZSTD][0][0], med[C_ZSTD_DICT][0][0]);

	codec_dict_put(lz4_dict);
	codec_dict_put(zstd_dict);
	codec_ctx_fini(&lz4);
	codec_ctx_fini(&zstd);
	LZ4_freeStream(env.naive);
	LZ4_freeStream(env.work);
	LZ4_freeStream(env.tmpl);
	LZ4_freeStream(env.ptmpl);
	free(env.prefix_buf);
	free(env.out);
	free(env.len);
	free(t.bytes);
	free(train_idx);
	free(held);
	free(speed_idx);
	munmap((void *)corpus, npages * PG);
	return 0;
}
