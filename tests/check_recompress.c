/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of idle recompression: which pages a pass takes and in what
 * order, the threshold and the marks on pages that do not improve, idle
 * ages, and that pages read, rewritten and discarded during passes are
 * never lost nor returned stale.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recompress.h"
#include "store.h"
#include "testutil.h"

/* Every page, whatever its age or size. */
static const struct store_filter every_page = { .idle_before = UINT32_MAX };

/* `noise` random bytes, then text that zstd packs better than lz4: the
 * noise sets the compressed size, the text the saving. */
static void fill_page(unsigned char *p, size_t noise, uint64_t seed)
{
	static const char *words[] = { "alpha ", "beta ", "gamma ", "delta ", "epsilon ",
				       "zeta ", "eta ", "theta ", "iota ", "kappa ", "lambda " };
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i < noise; i++)
		p[i] = (unsigned char)rnd();
	while (i < PG) {
		const char *w;
		size_t n;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		w = words[(s >> 33) % 11];
		n = strlen(w) < PG - i ? strlen(w) : PG - i;
		memcpy(p + i, w, n);
		i += n;
	}
}

static struct store *make_store(uint64_t pages)
{
	return make_store_with(pages, "lz4", 0, "zstd");
}

static uint16_t slot_size(struct store *st, uint64_t idx)
{
	struct store_slot_info info;

	store_slot_info(st, idx, &info);
	return info.size;
}

static void check_page(struct store *st, struct store_worker *w, uint64_t idx,
		       const unsigned char *expect)
{
	unsigned char got[PG];

	ck_assert_int_eq(store_read(st, w, idx * PG, got, PG), PG);
	ck_assert_msg(!memcmp(got, expect, PG), "page %llu differs", (unsigned long long)idx);
}

/* Every page reads back as `ref` holds it; then everything is freed. */
static void check_all_and_free(struct store *st, struct store_worker *w, unsigned char *ref,
			       uint64_t pages)
{
	uint64_t i;

	for (i = 0; i < pages; i++)
		check_page(st, w, i, ref + i * PG);
	free(ref);
	free_worker(w);
	store_destroy(st);
}

/* Three groups of pages far apart in size; a pass limited to the size of
 * the largest group takes exactly that group. */
START_TEST(test_largest_first)
{
	static const size_t noise[3] = { 200, 1200, 2400 };
	const uint64_t per = 40, pages = 3 * per;
	struct store *st = make_store(pages);
	struct store_worker *w = make_worker(st);
	unsigned char *ref = malloc(pages * PG);
	uint16_t before[3 * 40];
	struct recompress_pass p = { .sel = every_page, .threshold = 16, .max_pages = per };
	struct recompress_result r;
	uint64_t i;

	/* interleaved, so that slot order says nothing about size */
	for (i = 0; i < pages; i++) {
		fill_page(ref + i * PG, noise[i % 3], i);
		ck_assert_int_eq(store_write(st, w, i * PG, ref + i * PG, PG), 0);
		before[i] = slot_size(st, i);
	}
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.tried, per);
	ck_assert_uint_eq(r.recompressed, per);
	for (i = 0; i < pages; i++) {
		bool smaller = slot_size(st, i) < before[i];

		ck_assert_msg(smaller == (i % 3 == 2), "page %llu (noise %zu): %u -> %u",
			      (unsigned long long)i, noise[i % 3], before[i], slot_size(st, i));
		check_page(st, w, i, ref + i * PG);
	}
	/* Without a limit the rest follows, and all still read back. */
	p.max_pages = 0;
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.recompressed, 2 * per);
	check_all_and_free(st, w, ref, pages);
}
END_TEST

/* A pass ends at once when more urgent work waits (the yield flag), says
 * so, and leaves the pages for the next pass. */
START_TEST(test_yield)
{
	const uint64_t pages = 20;
	struct store *st = make_store(pages);
	struct store_worker *w = make_worker(st);
	unsigned char *ref = malloc(pages * PG);
	_Atomic bool urgent = true;
	struct recompress_pass p = { .sel = every_page, .threshold = 16,
				     .yield = &urgent };
	struct recompress_result r;
	uint64_t i;

	for (i = 0; i < pages; i++) {
		fill_page(ref + i * PG, 1200, i);
		ck_assert_int_eq(store_write(st, w, i * PG, ref + i * PG, PG), 0);
	}
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert(r.yielded);
	ck_assert_uint_eq(r.tried, 0);
	urgent = false;
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert(!r.yielded);
	ck_assert_uint_eq(r.recompressed, pages);
	check_all_and_free(st, w, ref, pages);
}
END_TEST

/* A page that saves less than the threshold is marked and not retried; a
 * rewrite clears the mark.  A raw page zstd cannot shrink is marked too. */
START_TEST(test_threshold_and_marks)
{
	struct store *st = make_store(8);
	struct store_worker *w = make_worker(st);
	struct recompress_pass p = { .sel = every_page, .threshold = 2000 };
	struct recompress_result r;
	struct store_counters c;
	unsigned char page[PG], noise[PG];

	fill_page(page, 1000, 1);
	fill_random(noise, PG);
	ck_assert_int_eq(store_write(st, w, 0, page, PG), 0);
	ck_assert_int_eq(store_write(st, w, PG, noise, PG), 0);
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.tried, 2);
	ck_assert_uint_eq(r.skipped, 2);
	ck_assert_uint_eq(r.recompressed, 0);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.recompress_skipped, 1);
	ck_assert_uint_eq(c.recompress_incompressible, 1);
	ck_assert_uint_eq(c.codec_pages[CODEC_LZ4], 2);

	/* Marked: even a lower threshold does not try them again. */
	p.threshold = 16;
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.tried, 0);

	/* Rewritten: a new page, tried again, and now it pays. */
	fill_page(page, 1000, 2);
	ck_assert_int_eq(store_write(st, w, 0, page, PG), 0);
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.recompressed, 1);
	store_get_counters(st, &c);
	ck_assert_uint_eq(c.codec_pages[CODEC_ZSTD], 1);
	ck_assert_uint_eq(c.recompressed, 1);
	ck_assert_uint_lt(c.codec_bytes[CODEC_ZSTD], 1000 + 2000);
	check_page(st, w, 0, page);
	check_page(st, w, 1, noise);
	free_worker(w);
	store_destroy(st);
}
END_TEST

/* Only pages idle long enough; huge_only takes only raw pages. */
START_TEST(test_idle_and_huge)
{
	struct store *st = make_store(8);
	struct store_worker *w = make_worker(st);
	struct recompress_pass p = { .threshold = 16 };
	struct recompress_result r;
	unsigned char old[PG], young[PG], raw[PG];
	uint32_t t_old;

	fill_page(old, 500, 1);
	fill_page(young, 500, 2);
	ck_assert_int_eq(store_write(st, w, 0, old, PG), 0);
	t_old = store_now(st);
	sleep(1);
	sleep(1);
	ck_assert_int_eq(store_write(st, w, PG, young, PG), 0);
	ck_assert_uint_gt(store_now(st), t_old);

	p.sel.idle_before = t_old;
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.recompressed, 1);
	ck_assert_uint_lt(slot_size(st, 0), 4096);
	/* A read makes a page young again: page 1, written at t_young, would
	 * be idle for a cut-off after t_young, but not once it was read. */
	{
		uint32_t t_young = store_now(st);

		sleep(1);
		sleep(1);
		check_page(st, w, 1, young);
		p.sel.idle_before = t_young + 1;
		ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
		ck_assert_uint_eq(r.tried, 0);
	}

	/* A raw page (random bytes): only huge_only passes take it, and it
	 * is marked when zstd cannot shrink it either. */
	fill_random(raw, PG);
	ck_assert_int_eq(store_write(st, w, 2 * PG, raw, PG), 0);
	p.sel.idle_before = UINT32_MAX;
	p.sel.huge_only = true;
	ck_assert_int_eq(recompress_run(st, w, &p, &r), 0);
	ck_assert_uint_eq(r.tried, 1);		/* only the raw page */
	ck_assert_uint_eq(r.skipped, 1);	/* random: incompressible, marked */
	check_page(st, w, 0, old);
	check_page(st, w, 1, young);
	check_page(st, w, 2, raw);
	free_worker(w);
	store_destroy(st);
}
END_TEST

/* ---- concurrency ----------------------------------------------------- */

#define CONC_PAGES	256
#define CONC_THREADS	2

struct conc {
	struct store *st;
	unsigned int id;
	int failures;
	_Atomic bool *stop;
};

/* Each thread owns pages and rewrites, discards and reads them while
 * passes and compaction run over everything. */
static void *conc_io(void *arg)
{
	struct conc *c = arg;
	struct store_worker *w = make_worker(c->st);
	unsigned char *ref = calloc(CONC_PAGES, PG), page[PG];
	uint64_t base = (uint64_t)c->id * CONC_PAGES, seed = c->id + 7;
	int i;

	for (i = 0; i < CONC_PAGES; i++) {
		fill_page(ref + (size_t)i * PG, (size_t)(i % 7) * 300, (uint64_t)i);
		store_write(c->st, w, (base + (uint64_t)i) * PG, ref + (size_t)i * PG, PG);
	}
	for (i = 0; i < 30000; i++) {
		uint64_t x = (seed = seed * 6364136223846793005ull + 1) >> 33;
		uint64_t idx = x % CONC_PAGES;
		unsigned char *r = ref + idx * PG;

		switch ((x >> 10) % 8) {
		case 0:
			fill_page(r, (size_t)((x >> 14) % 9) * 300, x);
			if (store_write(c->st, w, (base + idx) * PG, r, PG))
				c->failures++;
			break;
		case 1:
			memset(r, 0, PG);
			store_discard(c->st, w, (base + idx) * PG, PG);
			break;
		default:
			if (store_read(c->st, w, (base + idx) * PG, page, PG) != PG ||
			    memcmp(page, r, PG))
				c->failures++;
		}
	}
	free(ref);
	free_worker(w);
	return NULL;
}

static void *conc_recompress(void *arg)
{
	struct conc *c = arg;
	struct store_worker *w = make_worker(c->st);
	struct recompress_pass p = { .sel = every_page, .threshold = 16,
				     .stop = c->stop };
	struct recompress_result r;

	while (!atomic_load(c->stop)) {
		recompress_run(c->st, w, &p, &r);
		store_compact(c->st);
	}
	free_worker(w);
	return NULL;
}

/*
 * Pages rewritten over and over with pages of the same compressed size,
 * while another thread recompresses them over and over.  A rewrite frees
 * the old object and the arena hands its handle to the new one at once: a
 * recompression that only compared handles would then put the old data
 * back.  Every read must see the last write.  The writes go on, at least
 * ABA_MIN_WRITES of them, until both outcomes have been seen: a
 * recompression that replaced a page and one that found it rewritten
 * meanwhile (the race under test), within ABA_MAX_SECONDS.
 *
 * ABA_PAGES of them, both threads going round, the writer writing each
 * page twice in a row: its second write gets the handle that the first
 * freed, the one a recompression begun before them saw (with one write,
 * another page's next write would take it).  On a single CPU the threads
 * take turns, and only a recompression cut short by the end of its turn
 * can find its page rewritten.  With one page the recompressor spends
 * nearly all its turn finding the page already done (under taskset -c 0
 * the race came once in 750000 writes, or not in 60 s); with many, its
 * turn is spent recompressing pages the writer has just rewritten, and the
 * writer's next turn may rewrite the one cut short (some 20 races in
 * 200000 writes on one CPU, thousands on two).
 */
#define ABA_PAGES	256
#define ABA_MIN_WRITES	200000
#define ABA_MAX_SECONDS	60	/* to see both outcomes; the test's timeout is 120 */
#define ABA_SEEN	1	/* of each outcome */

struct aba {
	struct store *st;
	_Atomic bool stop;
	uint64_t attempts;
	_Atomic uint64_t done, raced;
};

static void *aba_recompress(void *arg)
{
	struct aba *a = arg;
	struct store_worker *w = make_worker(a->st);
	uint64_t idx = 0;

	for (; !atomic_load(&a->stop); idx = (idx + 1) % ABA_PAGES) {
		switch (store_recompress(a->st, w, idx, &every_page, 16)) {
		case STORE_RECOMP_DONE:
			atomic_fetch_add(&a->done, 1);
			break;
		case STORE_RECOMP_RACED:
			atomic_fetch_add(&a->raced, 1);
			break;
		default:
			break;
		}
		a->attempts++;
	}
	free_worker(w);
	return NULL;
}

START_TEST(test_rewrite_during_recompress)
{
	struct aba a = { .st = make_store(ABA_PAGES) };
	struct store_worker *w = make_worker(a.st);
	unsigned char page[PG], got[PG];
	struct timespec t0, t;
	pthread_t tid;
	uint64_t i, idx, wrong = 0;
	/* each page's last write (fill_page's noise is not its seed's) */
	unsigned char *last = calloc(ABA_PAGES, PG);
	bool written[ABA_PAGES] = { false };

	ck_assert_ptr_nonnull(last);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&tid, NULL, aba_recompress, &a);
	for (i = 0; !wrong; i++) {
		idx = i / 2 % ABA_PAGES;
		if (i >= ABA_MIN_WRITES && atomic_load(&a.done) >= ABA_SEEN &&
		    atomic_load(&a.raced) >= ABA_SEEN)
			break;
		if (i % 4096 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec >= ABA_MAX_SECONDS)
				break;
		}
		/* A visit first reads what the last one left: a recompression
		 * that put old data back once the writer had moved on shows
		 * here, not in the read after the write. */
		if (i % 2 == 0 && written[idx]) {
			ck_assert_int_eq(store_read(a.st, w, idx * PG, got, PG), PG);
			wrong += memcmp(got, last + idx * PG, PG) != 0;
		}
		fill_page(page, 1200, i);
		ck_assert_int_eq(store_write(a.st, w, idx * PG, page, PG), 0);
		ck_assert_int_eq(store_read(a.st, w, idx * PG, got, PG), PG);
		wrong += memcmp(got, page, PG) != 0;
		memcpy(last + idx * PG, page, PG);
		written[idx] = true;
	}
	atomic_store(&a.stop, true);
	pthread_join(tid, NULL);
	/* and what the last passes left */
	for (idx = 0; idx < ABA_PAGES; idx++) {
		if (!written[idx])
			continue;
		ck_assert_int_eq(store_read(a.st, w, idx * PG, got, PG), PG);
		wrong += memcmp(got, last + idx * PG, PG) != 0;
	}
	free(last);
	ck_assert_msg(wrong == 0, "%llu of %llu reads returned older data (%llu attempts)",
		      (unsigned long long)wrong, (unsigned long long)i,
		      (unsigned long long)a.attempts);
	ck_assert_msg(atomic_load(&a.done) >= ABA_SEEN && atomic_load(&a.raced) >= ABA_SEEN,
		      "in %llu writes (%d s), %llu recompressions replaced the page and %llu found "
		      "it rewritten: the race was not shown to happen",
		      (unsigned long long)i, ABA_MAX_SECONDS, (unsigned long long)atomic_load(&a.done),
		      (unsigned long long)atomic_load(&a.raced));
	fprintf(stderr, "test_rewrite_during_recompress: %llu writes, %llu recompressions "
		"replaced the page, %llu found it rewritten\n", (unsigned long long)i,
		(unsigned long long)atomic_load(&a.done), (unsigned long long)atomic_load(&a.raced));
	free_worker(w);
	store_destroy(a.st);
}
END_TEST

START_TEST(test_concurrent_io_during_passes)
{
	struct store *st = make_store(CONC_THREADS * CONC_PAGES);
	struct conc c[CONC_THREADS + 1];
	pthread_t tid[CONC_THREADS + 1];
	_Atomic bool stop = false;
	struct store_counters sc;
	unsigned int i;

	for (i = 0; i <= CONC_THREADS; i++) {
		c[i] = (struct conc){ .st = st, .id = i, .stop = &stop };
		pthread_create(&tid[i], NULL, i < CONC_THREADS ? conc_io : conc_recompress, &c[i]);
	}
	for (i = 0; i < CONC_THREADS; i++)
		pthread_join(tid[i], NULL);
	atomic_store(&stop, true);
	pthread_join(tid[CONC_THREADS], NULL);
	for (i = 0; i < CONC_THREADS; i++)
		ck_assert_int_eq(c[i].failures, 0);
	store_get_counters(st, &sc);
	ck_assert_uint_gt(sc.recompressed, 0);
	store_destroy(st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("recompress");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_largest_first);
	tcase_add_test(tc, test_yield);
	tcase_add_test(tc, test_threshold_and_marks);
	tcase_add_test(tc, test_idle_and_huge);
	tcase_add_test(tc, test_concurrent_io_during_passes);
	tcase_add_test(tc, test_rewrite_during_recompress);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
