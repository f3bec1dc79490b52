/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for the dict module: what a dictionary file may be (checked,
 * loaded, saved) and training one from sample pages.  What codecs do with a
 * dictionary is tested in check_codec.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zdict.h>
#include <zstd.h>

#include "codec.h"
#include "dict.h"
#include "dicttrain.h"
#include "testutil.h"

#define NSAMPLES	800

/* ---- fixtures ------------------------------------------------------------------------ */

static char topdir[256];		/* made and removed by the runner process */
static char tmpdir[300];		/* one per test, inside it */
static char errbuf[512];

/* In the runner: a failing test ends its own process before any clean-up
 * of its own, so the runner removes everything once all tests have run. */
static void make_topdir(void)
{
	strcpy(topdir, "/tmp/check_dict.XXXXXX");
	if (!mkdtemp(topdir)) {
		perror("mkdtemp");
		exit(1);
	}
}

static void remove_topdir(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", topdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", topdir);
}

static void tmpdir_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/t.XXXXXX", topdir);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static const char *tmp_path(const char *name)
{
	static char p[512];

	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	return p;
}

static void write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static unsigned int dir_entries(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	unsigned int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Pages of heap-like records: a shared vocabulary, numbers, zero runs. */
static void fill_samples(unsigned char *buf, size_t *sizes, unsigned int n, uint64_t seed)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		fill_words(buf + (size_t)i * PG, PG, seed + i);
		/* a few page-specific bytes, as pointers and counters are */
		memcpy(buf + (size_t)i * PG + ((seed + i) * 2654435761u % (PG - 8)), &seed, 8);
		sizes[i] = PG;
	}
}

/* A trained dictionary, made once per test (check forks every test). */
static unsigned char *trained;
static size_t trained_len;

static void train_once(void)
{
	unsigned char *samples = malloc((size_t)NSAMPLES * PG);
	size_t *sizes = malloc(NSAMPLES * sizeof(*sizes));
	long n;

	ck_assert_ptr_nonnull(samples);
	ck_assert_ptr_nonnull(sizes);
	trained = malloc(DICT_TRAIN_SIZE);
	ck_assert_ptr_nonnull(trained);
	fill_samples(samples, sizes, NSAMPLES, 1);
	n = dict_train(trained, DICT_TRAIN_SIZE, samples, sizes, NSAMPLES, NULL, errbuf,
		       sizeof(errbuf));
	ck_assert_msg(n > 0, "training: %ld: %s", n, errbuf);
	trained_len = (size_t)n;
	free(sizes);
	free(samples);
}

static void setup(void)
{
	tmpdir_setup();
	train_once();
}

static void teardown(void)
{
	free(trained);
	trained = NULL;
}

/* err must name what is wrong, and (for files) which file. */
static void assert_err(int ret, int want, const char *must_contain, const char *path)
{
	ck_assert_msg(ret == want, "got %d (%s), wanted %d; message: %s", ret, strerror(-ret),
		      want, errbuf);
	ck_assert_msg(strstr(errbuf, must_contain), "message '%s' lacks '%s'", errbuf,
		      must_contain);
	if (path)
		ck_assert_msg(strstr(errbuf, path), "message '%s' does not name %s", errbuf, path);
}

/* ---- dict_check --------------------------------------------------------------------- */

START_TEST(test_check_sizes)
{
	unsigned char *big = calloc(1, DICT_MAX_SIZE + 1);

	ck_assert_ptr_nonnull(big);
	memset(big, 'x', DICT_MAX_SIZE + 1);
	assert_err(dict_check(big, 0, errbuf, sizeof(errbuf)), -EINVAL, "empty", NULL);
	assert_err(dict_check(big, DICT_MIN_SIZE - 1, errbuf, sizeof(errbuf)), -EINVAL,
		   "fewer than", NULL);
	ck_assert_int_eq(dict_check(big, DICT_MIN_SIZE, errbuf, sizeof(errbuf)), 0);
	ck_assert_int_eq(dict_check(big, DICT_MAX_SIZE, errbuf, sizeof(errbuf)), 0);
	assert_err(dict_check(big, DICT_MAX_SIZE + 1, errbuf, sizeof(errbuf)), -EFBIG,
		   "more than", NULL);
	free(big);
}
END_TEST

START_TEST(test_check_formats)
{
	unsigned char frame[256], page[PG];
	size_t n;

	/* What training gives is a zstd-format dictionary zstd accepts. */
	ck_assert(dict_is_zstd_format(trained, trained_len));
	ck_assert_uint_ne(ZSTD_getDictID_fromDict(trained, trained_len), 0);
	ck_assert_int_eq(dict_check(trained, trained_len, errbuf, sizeof(errbuf)), 0);

	/* Raw content: anything that is not a zstd-format dictionary. */
	fill_words(page, PG, 7);
	ck_assert(!dict_is_zstd_format(page, PG));
	ck_assert_int_eq(dict_check(page, PG, errbuf, sizeof(errbuf)), 0);

	/* A compressed file given by mistake. */
	n = ZSTD_compress(frame, sizeof(frame), page, 64, 3);
	ck_assert(!ZSTD_isError(n));
	assert_err(dict_check(frame, n, errbuf, sizeof(errbuf)), -EINVAL, "zstd-compressed",
		   NULL);
	memcpy(frame, "\x04\x22\x4d\x18", 4);
	assert_err(dict_check(frame, n, errbuf, sizeof(errbuf)), -EINVAL, "lz4-compressed",
		   NULL);
}
END_TEST

/*
 * Corrupt zstd-format dictionaries: refused by dict_check, and by the zstd
 * codec (lz4 would take any bytes: dict_check is the gate).
 */
static void assert_corrupt(const unsigned char *d, size_t len, const char *what)
{
	struct codec_dict *cd = NULL;
	int ret = dict_check(d, len, errbuf, sizeof(errbuf));

	ck_assert_msg(ret == -EINVAL, "%s: dict_check gave %d", what, ret);
	ck_assert_msg(strstr(errbuf, "zstd-format"), "%s: message '%s'", what, errbuf);
	ck_assert_msg(codec_dict_create(&cd, &codec_zstd, 0, d, len) == -EINVAL,
		      "%s: the zstd codec took it", what);
	ck_assert_ptr_null(cd);
}

START_TEST(test_check_corrupt)
{
	unsigned char *d = malloc(trained_len);
	size_t hdr = ZDICT_getDictHeaderSize(trained, trained_len);
	size_t i;

	ck_assert_ptr_nonnull(d);
	ck_assert(!ZDICT_isError(hdr));
	/* magic, id, entropy tables (Huffman, 3 FSE), 3 repeat offsets, content */
	ck_assert_uint_gt(hdr, 8 + 12);

	memcpy(d, trained, trained_len);
	assert_corrupt(d, 12, "cut after the id");
	assert_corrupt(d, hdr / 2, "cut in the tables");

	for (i = 8; i < 8 + 32; i++)
		d[i] = 0xff;
	assert_corrupt(d, trained_len, "Huffman table overwritten");

	/* A repeat offset of 0, or beyond the content, is invalid. */
	memcpy(d, trained, trained_len);
	memset(d + hdr - 12, 0, 4);
	assert_corrupt(d, trained_len, "repeat offset 0");
	memcpy(d, trained, trained_len);
	memset(d + hdr - 8, 0x7f, 4);
	assert_corrupt(d, trained_len, "repeat offset past the content");

	/* Damaged content cannot be told from content: still a dictionary. */
	memcpy(d, trained, trained_len);
	for (i = hdr; i < trained_len; i += 7)
		d[i] ^= 0x5a;
	ck_assert_int_eq(dict_check(d, trained_len, errbuf, sizeof(errbuf)), 0);
	free(d);
}
END_TEST

/* ---- dict_load ---------------------------------------------------------------------- */

START_TEST(test_load_good)
{
	void *buf = NULL;
	size_t len = 0;
	const char *p = tmp_path("good.dict");

	write_file(p, trained, trained_len);
	ck_assert_int_eq(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(len, trained_len);
	ck_assert_mem_eq(buf, trained, len);
	free(buf);

	/* Exactly the cap is fine. */
	ck_assert_int_eq(truncate(p, DICT_MAX_SIZE), 0);
	ck_assert_int_eq(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(len, DICT_MAX_SIZE);
	ck_assert_mem_eq(buf, trained, trained_len);
	free(buf);
}
END_TEST

START_TEST(test_load_refused)
{
	void *buf = (void *)0x1;	/* must stay untouched */
	size_t len = 12345;
	unsigned char *d;
	const char *p;
	double t0;
	struct timespec ts;

	p = tmp_path("missing.dict");
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -ENOENT,
		   "No such file", p);

	p = tmp_path("empty.dict");
	write_file(p, "", 0);
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -EINVAL, "empty", p);

	p = tmp_path("short.dict");
	write_file(p, "abc", 3);
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -EINVAL, "fewer than", p);

	p = tmp_path("big.dict");
	write_file(p, trained, trained_len);
	ck_assert_int_eq(truncate(p, DICT_MAX_SIZE + 1), 0);
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -EFBIG, "more than", p);

	p = tmp_path("corrupt.dict");
	d = malloc(trained_len);
	ck_assert_ptr_nonnull(d);
	memcpy(d, trained, trained_len);
	memset(d + 8, 0xff, 32);
	write_file(p, d, trained_len);
	free(d);
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -EINVAL, "zstd-format", p);

	p = tmp_path("adir");
	ck_assert_int_eq(mkdir(p, 0700), 0);
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -EINVAL,
		   "not a regular file", p);

	/* A FIFO is refused at once, not waited on. */
	p = tmp_path("fifo");
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	assert_err(dict_load(p, &buf, &len, errbuf, sizeof(errbuf)), -EINVAL,
		   "not a regular file", p);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ck_assert_double_lt((double)ts.tv_sec + ts.tv_nsec / 1e9 - t0, 2.0);

	ck_assert_ptr_eq(buf, (void *)0x1);
	ck_assert_uint_eq(len, 12345);
}
END_TEST

/* ---- dict_save ---------------------------------------------------------------------- */

START_TEST(test_save)
{
	const char *p = tmp_path("saved.dict");
	char path[512];
	struct stat sb;
	void *buf;
	size_t len;
	mode_t old = umask(0);

	snprintf(path, sizeof(path), "%s", p);
	ck_assert_int_eq(dict_save(path, trained, trained_len, errbuf, sizeof(errbuf)), 0);
	umask(old);
	/* It holds swapped memory: readable by its owner only, whatever the umask. */
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
	ck_assert_int_eq(dict_load(path, &buf, &len, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(len, trained_len);
	ck_assert_mem_eq(buf, trained, len);
	free(buf);

	/* Replaced whole by a shorter one; no temporary file left behind. */
	ck_assert_int_eq(dict_save(path, trained + trained_len - 4096, 4096, errbuf,
				   sizeof(errbuf)), 0);
	ck_assert_int_eq(dict_load(path, &buf, &len, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(len, 4096);
	ck_assert_mem_eq(buf, trained + trained_len - 4096, 4096);
	free(buf);
	ck_assert_uint_eq(dir_entries(), 1);
}
END_TEST

START_TEST(test_save_refused)
{
	char path[512];
	void *buf;
	size_t len;

	/* Not a dictionary (cut zstd header): refused, the old file kept. */
	snprintf(path, sizeof(path), "%s", tmp_path("kept.dict"));
	ck_assert_int_eq(dict_save(path, trained, trained_len, errbuf, sizeof(errbuf)), 0);
	assert_err(dict_save(path, trained, 100, errbuf, sizeof(errbuf)), -EINVAL, "zstd-format",
		   path);
	assert_err(dict_save(path, trained, 0, errbuf, sizeof(errbuf)), -EINVAL, "empty", path);
	ck_assert_int_eq(dict_load(path, &buf, &len, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(len, trained_len);
	free(buf);

	/* A directory that does not exist; a directory in the way. */
	snprintf(path, sizeof(path), "%s", tmp_path("nodir/x.dict"));
	assert_err(dict_save(path, trained, trained_len, errbuf, sizeof(errbuf)), -ENOENT,
		   "No such file", path);
	snprintf(path, sizeof(path), "%s", tmp_path("adir"));
	ck_assert_int_eq(mkdir(path, 0700), 0);
	assert_err(dict_save(path, trained, trained_len, errbuf, sizeof(errbuf)), -EISDIR,
		   "writing", path);
	/* kept.dict and adir, no temporary files */
	ck_assert_uint_eq(dir_entries(), 2);
}
END_TEST

/* ---- dict_train --------------------------------------------------------------------- */

START_TEST(test_train)
{
	static const struct dict_train_params search = { 0, 0 }, bad = { 8, 16 };
	unsigned char *samples = malloc((size_t)NSAMPLES * PG), *d = malloc(DICT_TRAIN_SIZE);
	size_t *sizes = malloc(NSAMPLES * sizeof(*sizes));
	long n;

	ck_assert_ptr_nonnull(samples);
	ck_assert_ptr_nonnull(sizes);
	ck_assert_ptr_nonnull(d);
	/*
	 * The fixture trained on NSAMPLES pages: 64 KiB at most (these pages
	 * have a small vocabulary: zstd finds less worth keeping).
	 */
	ck_assert_uint_le(trained_len, DICT_TRAIN_SIZE);
	ck_assert_uint_gt(trained_len, 1024);

	/* Deterministic: the same samples give the same dictionary. */
	fill_samples(samples, sizes, NSAMPLES, 1);
	n = dict_train(d, DICT_TRAIN_SIZE, samples, sizes, NSAMPLES, NULL, errbuf,
		       sizeof(errbuf));
	ck_assert_int_eq(n, (long)trained_len);
	ck_assert_mem_eq(d, trained, trained_len);

	/* zstd's own parameter search works too, and gives a dictionary of its own. */
	n = dict_train(d, DICT_TRAIN_SIZE, samples, sizes, NSAMPLES, &search, errbuf,
		       sizeof(errbuf));
	ck_assert_msg(n > 0, "zstd's search: %ld %s", n, errbuf);
	ck_assert_int_eq(dict_check(d, (size_t)n, errbuf, sizeof(errbuf)), 0);
	/* d > k is no parameter set. */
	assert_err((int)dict_train(d, DICT_TRAIN_SIZE, samples, sizes, NSAMPLES, &bad, errbuf,
				   sizeof(errbuf)), -EINVAL, "training failed", NULL);

	/* Nothing, or next to nothing, to train on: a clean error. */
	assert_err((int)dict_train(d, DICT_TRAIN_SIZE, samples, sizes, 0, NULL, errbuf,
				   sizeof(errbuf)), -EINVAL, "nothing to train", NULL);
	assert_err((int)dict_train(d, 0, samples, sizes, NSAMPLES, NULL, errbuf, sizeof(errbuf)),
		   -EINVAL, "nothing to train", NULL);
	n = dict_train(d, DICT_TRAIN_SIZE, samples, sizes, 3, NULL, errbuf, sizeof(errbuf));
	ck_assert_msg(n == -EINVAL && strstr(errbuf, "training failed"), "3 samples: %ld %s",
		      n, errbuf);
	/* All-zero pages (a sampler should skip them): a clean error or a valid dictionary. */
	memset(samples, 0, (size_t)NSAMPLES * PG);
	n = dict_train(d, DICT_TRAIN_SIZE, samples, sizes, NSAMPLES, NULL, errbuf,
		       sizeof(errbuf));
	ck_assert_msg(n == -EINVAL || (n > 0 && dict_check(d, (size_t)n, errbuf,
							   sizeof(errbuf)) == 0),
		      "zero pages: %ld %s", n, errbuf);
	free(d);
	free(sizes);
	free(samples);
}
END_TEST

struct idle_arg {
	unsigned char *samples;
	size_t *sizes;
	unsigned char *dict;
	long n;
	int policy;
};

static void *idle_main(void *p)
{
	struct idle_arg *a = p;
	struct sched_param sp = { 0 };

	/* What the background thread will do before it trains. */
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0)
		a->policy = sched_getscheduler(0);
	a->n = dict_train(a->dict, DICT_TRAIN_SIZE, a->samples, a->sizes, NSAMPLES, NULL, errbuf,
			  sizeof(errbuf));
	return NULL;
}

/* Training works from a thread at idle priority, and gives the same result. */
/* Windows of `n` pages at ratio num/den fed to the drift watch: what it said for the last. */
static bool drift_feed(struct dicttrain_drift *d, uint64_t *pages, uint64_t *bytes,
		       unsigned int windows, uint64_t num, uint64_t den)
{
	bool said = false;
	unsigned int w;

	for (w = 0; w < windows; w++) {
		/* in steps, as the thread sees the totals every few seconds */
		uint64_t step, left = DICTTRAIN_WINDOW_PAGES;

		while (left) {
			step = left < 1000 ? left : 1000;
			*pages += step;
			*bytes += step * 4096 * den / num;
			left -= step;
			said = dicttrain_drift_check(d, *pages, *bytes);
			/* only the step that completes a window may say so */
			if (left)
				ck_assert(!said);
		}
	}
	return said;
}

START_TEST(test_drift)
{
	struct dicttrain_drift d;
	uint64_t pages = 123456, bytes = 987654321;

	dicttrain_drift_reset(&d, pages, bytes);
	/* the first window is the base: never a drift */
	ck_assert(!drift_feed(&d, &pages, &bytes, 1, 30, 10));
	ck_assert_uint_eq(d.base_milli, 3000);
	ck_assert(!drift_feed(&d, &pages, &bytes, 3, 30, 10));
	/* better, and a little worse (-6.7 %): no retraining */
	ck_assert(!drift_feed(&d, &pages, &bytes, 1, 40, 10));
	ck_assert(!drift_feed(&d, &pages, &bytes, 1, 28, 10));
	/* new pages compress DICTTRAIN_DRIFT_PCT % worse or more: retrain */
	ck_assert(!drift_feed(&d, &pages, &bytes, 1, 27, 10) ||
		  27 * 100 < 30 * (100 - DICTTRAIN_DRIFT_PCT));
	ck_assert(drift_feed(&d, &pages, &bytes, 1, 26, 10));
	/* a new dictionary: its first window is the new base */
	dicttrain_drift_reset(&d, pages, bytes);
	ck_assert_uint_eq(d.base_milli, 0);
	ck_assert(!drift_feed(&d, &pages, &bytes, 1, 20, 10));
	ck_assert_uint_eq(d.base_milli, 2000);
	ck_assert(!drift_feed(&d, &pages, &bytes, 1, 19, 10));
	ck_assert(drift_feed(&d, &pages, &bytes, 1, 17, 10));
	/* and it goes on saying so while the ratio stays down */
	ck_assert(drift_feed(&d, &pages, &bytes, 1, 17, 10));
	/* totals that moved without bytes make no window, whatever their number */
	dicttrain_drift_reset(&d, pages, bytes);
	ck_assert(!dicttrain_drift_check(&d, pages + 5 * DICTTRAIN_WINDOW_PAGES, bytes));
	ck_assert_uint_eq(d.win_pages, pages);
}
END_TEST

START_TEST(test_train_idle_thread)
{
	struct idle_arg a = { .policy = -1 };
	pthread_t th;

	a.samples = malloc((size_t)NSAMPLES * PG);
	a.sizes = malloc(NSAMPLES * sizeof(*a.sizes));
	a.dict = malloc(DICT_TRAIN_SIZE);
	ck_assert_ptr_nonnull(a.samples);
	ck_assert_ptr_nonnull(a.sizes);
	ck_assert_ptr_nonnull(a.dict);
	fill_samples(a.samples, a.sizes, NSAMPLES, 1);
	ck_assert_int_eq(pthread_create(&th, NULL, idle_main, &a), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(a.policy, SCHED_IDLE);
	ck_assert_int_eq(a.n, (long)trained_len);
	ck_assert_mem_eq(a.dict, trained, trained_len);
	free(a.dict);
	free(a.sizes);
	free(a.samples);
}
END_TEST

static Suite *dict_suite(void)
{
	Suite *s = suite_create("dict");
	TCase *tc = tcase_create("dict");

	/* Training takes about a second (several under the sanitizers). */
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, make_topdir, remove_topdir);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_check_sizes);
	tcase_add_test(tc, test_check_formats);
	tcase_add_test(tc, test_check_corrupt);
	tcase_add_test(tc, test_load_good);
	tcase_add_test(tc, test_load_refused);
	tcase_add_test(tc, test_save);
	tcase_add_test(tc, test_save_refused);
	tcase_add_test(tc, test_train);
	tcase_add_test(tc, test_train_idle_thread);
	tcase_add_test(tc, test_drift);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(dict_suite());
}
