/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the check unit tests of the store and what sits on it:
 * a repeatable random source, store and worker set-up that asserts, and the
 * runner every test program ends with.
 */
#ifndef ZSWAPFS_TESTUTIL_H
#define ZSWAPFS_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define PG STORE_PAGE_SIZE

/* xorshift64: the same sequence on every run, so a failure repeats. */
static uint64_t testutil_rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t rnd(void)
{
	testutil_rng ^= testutil_rng << 13;
	testutil_rng ^= testutil_rng >> 7;
	testutil_rng ^= testutil_rng << 17;
	return testutil_rng;
}

static inline void fill_random(unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)rnd();
}

/*
 * Text that compresses like real memory: words from a small vocabulary,
 * small integers and runs of zeros; s seeds it (the same s, the same text).
 */
static inline void fill_words(unsigned char *p, size_t len, uint64_t s)
{
	static const char *words[] = { "swap ", "page ", "segment ", "backing ", "0x7f3a ",
				       "struct ", "return ", "\0\0\0\0\0\0\0\0", "crc " };
	size_t i = 0;

	while (i < len) {
		const char *w;
		size_t n;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		w = words[(s >> 33) % 9];
		n = (s >> 33) % 9 == 7 ? 8 : strlen(w);
		if (n > len - i)
			n = len - i;
		memcpy(p + i, w, n);
		i += n;
	}
}

/* A store of `pages` pages; recomp names the recompression codec or NULL. */
static inline struct store *make_store_with(uint64_t pages, const char *codec, uint64_t limit,
					    const char *recomp)
{
	struct store_params sp = {
		.size = pages * PG, .codec = codec_find(codec), .mem_limit = limit,
		.recomp_codec = recomp ? codec_find(recomp) : NULL,
	};
	struct store *st = store_create(&sp);

	ck_assert_ptr_nonnull(st);
	return st;
}

static inline struct store_worker *make_worker(struct store *st)
{
	struct store_worker *w = malloc(sizeof(*w));

	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(store_worker_init(w, st), 0);
	return w;
}

static inline void free_worker(struct store_worker *w)
{
	store_worker_fini(w);
	free(w);
}

/* Run a suite; the exit status of the test program. */
static inline int run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
