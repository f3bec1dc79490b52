/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz the settings parsers: the config file (config_load_file, through
 * libconfig), the `key=value` mount options (config_set, split at commas
 * as main.c does) and sizes (config_parse_size).
 *
 * The first byte picks what the rest is:
 *	0	a config file, written to a memfd and read as /proc/self/fd/N;
 *	1	-o text: comma-separated key=value pairs, each set in turn;
 *	2	a size (bit 4 of the first byte: a % of RAM is allowed).
 *
 * Invariants:
 *   - errors are -EINVAL (or -ENOENT for a file libconfig could not read)
 *     with a message, and leave the config exactly as it was;
 *   - after a success every setting is in its documented range and the
 *     strings are terminated; config_validate either accepts the result or
 *     says why not; a string setting in a file is what libconfig reads
 *     there, whole (a path cut short names another file);
 *   - config_parse_size agrees with a second, plain reading of the grammar
 *     ("4096", "512M", "4GB", "25%"), and leaves *out alone on an error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "codec.h"
#include "config.h"
#include "fuzz.h"

/* A config file larger than this is not what the fuzzer is after. */
#define FUZZ_CONFIG_MAX		(64 * 1024)

static int memfd = -1;
static char memfd_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	memfd = memfd_create("zswapfs.conf", MFD_CLOEXEC);
	fuzz_require(memfd >= 0);
	snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	return 0;
}

static bool terminated(const char *field, size_t size)
{
	return memchr(field, '\0', size) != NULL;
}

/* What a config that parsed must look like (the ranges of config.c's table). */
static void check_config(const struct zs_config *c)
{
	fuzz_require(c->size >= 4096 && c->size <= (UINT64_C(1) << 44) && c->size % 4096 == 0);
	fuzz_require(terminated(c->algorithm, sizeof(c->algorithm)) && codec_find(c->algorithm));
	fuzz_require(c->level >= 0 && c->level <= 65537);
	fuzz_require(c->mem_limit <= (UINT64_C(1) << 44));
	fuzz_require(c->threads >= 1 && c->threads <= 64);
	fuzz_require(c->busy_poll_us >= 0 && c->busy_poll_us <= 100000);
	fuzz_require(terminated(c->recompress_algorithm, sizeof(c->recompress_algorithm)) &&
		     codec_find(c->recompress_algorithm));
	fuzz_require(c->recompress_level >= 0 && c->recompress_level <= 65537);
	fuzz_require(c->recompress_idle_age >= 1 && c->recompress_idle_age <= (INT64_C(1) << 31));
	fuzz_require(c->recompress_threshold >= 16 && c->recompress_threshold <= 4096);
	fuzz_require(c->recompress_rate >= 0 && c->recompress_rate <= 1000000);
	fuzz_require(c->compact_threshold >= 0 && c->compact_threshold <= 100);
	fuzz_require(terminated(c->writeback_backing_file, sizeof(c->writeback_backing_file)));
	fuzz_require(!c->writeback_backing_file[0] || c->writeback_backing_file[0] == '/');
	fuzz_require(c->writeback_max_size <= (UINT64_C(1) << 44));
	fuzz_require(c->writeback_idle_age >= 0 && c->writeback_idle_age <= (INT64_C(1) << 31));
	fuzz_require(c->writeback_high_watermark >= 1 && c->writeback_high_watermark <= 100);
	fuzz_require(c->writeback_low_watermark >= 0 && c->writeback_low_watermark <= 99);
	fuzz_require(c->writeback_daily_limit <= (UINT64_C(1) << 50));
	fuzz_require(c->writeback_compact_threshold >= 0 &&
		     c->writeback_compact_threshold <= 99);
	fuzz_require(terminated(c->level_origin, sizeof(c->level_origin)));
	fuzz_require(terminated(c->recompress_level_origin, sizeof(c->recompress_level_origin)));
}

/* A message was written, and it is a terminated string. */
static void check_message(const char *err, size_t size)
{
	fuzz_require(terminated(err, size) && err[0]);
}

static void check_validate(const struct zs_config *c)
{
	char err[512];

	memset(err, 0xff, sizeof(err));
	if (config_validate(c, err, sizeof(err)))
		check_message(err, sizeof(err));
}

/* The file's string settings, as libconfig reads them, are the config's. */
static void check_strings(const struct zs_config *c)
{
	static const struct {
		const char *key;
		size_t offset;
	} strings[] = {
		{ "algorithm", offsetof(struct zs_config, algorithm) },
		{ "recompress.algorithm", offsetof(struct zs_config, recompress_algorithm) },
		{ "writeback.backing_file", offsetof(struct zs_config, writeback_backing_file) },
	};
	const char *text;
	config_t lc;
	size_t i;

	config_init(&lc);
	fuzz_require(config_read_file(&lc, memfd_path));
	for (i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
		if (config_lookup_string(&lc, strings[i].key, &text))
			fuzz_require(!strcmp((const char *)c + strings[i].offset, text));
	config_destroy(&lc);
}

static void fuzz_file(const uint8_t *data, size_t size)
{
	struct zs_config cfg, before;
	char err[512];
	int ret;

	if (size > FUZZ_CONFIG_MAX)
		return;
	fuzz_require(ftruncate(memfd, 0) == 0);
	fuzz_require(pwrite(memfd, data, size, 0) == (ssize_t)size);

	config_defaults(&cfg);
	memcpy(&before, &cfg, sizeof(cfg));
	memset(err, 0xff, sizeof(err));
	ret = config_load_file(&cfg, memfd_path, err, sizeof(err));
	fuzz_require(ret == 0 || ret == -EINVAL || ret == -ENOENT);
	if (ret) {
		check_message(err, sizeof(err));
		fuzz_require(!memcmp(&cfg, &before, sizeof(cfg)));
		return;
	}
	check_config(&cfg);
	check_strings(&cfg);
	check_validate(&cfg);
}

static void fuzz_options(const uint8_t *data, size_t size)
{
	char *text = strndup((const char *)data, size), *save, *opt;
	struct zs_config cfg, before;
	char err[512];

	fuzz_require(text);
	config_defaults(&cfg);
	for (opt = strtok_r(text, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		int ret;

		/* main.c hands words without a value to FUSE, or refuses them. */
		if (!eq)
			continue;
		*eq = '\0';
		memcpy(&before, &cfg, sizeof(cfg));
		memset(err, 0xff, sizeof(err));
		ret = config_set(&cfg, opt, eq + 1, "mount option", err, sizeof(err));
		fuzz_require(ret == 0 || ret == -EINVAL);
		if (!config_has_key(opt))
			fuzz_require(ret == -EINVAL);
		if (ret) {
			check_message(err, sizeof(err));
			fuzz_require(!memcmp(&cfg, &before, sizeof(cfg)));
			continue;
		}
		check_config(&cfg);
	}
	check_validate(&cfg);
	free(text);
}

/*
 * The size grammar read a second way: optional blanks, decimal digits, then
 * nothing, or K/M/G/T (any case) with an optional B, or % (1 to 100, when
 * allowed).  Returns -EINVAL, 0 with *out, or 1 for a valid percentage.
 */
static int plain_size(const char *t, bool pct_ok, uint64_t *out)
{
	uint64_t v = 0;
	int shift = 0;

	while (isspace((unsigned char)*t))
		t++;
	if (!isdigit((unsigned char)*t))
		return -EINVAL;
	for (; isdigit((unsigned char)*t); t++) {
		unsigned int d = (unsigned int)(*t - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (*t == '%')
		return pct_ok && !t[1] && v >= 1 && v <= 100 ? 1 : -EINVAL;
	switch (toupper((unsigned char)*t)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	}
	if (shift) {
		t++;
		if (*t == 'B' || *t == 'b')
			t++;
	}
	if (*t || (shift && v > UINT64_MAX >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static void fuzz_size(const uint8_t *data, size_t size, bool pct_ok)
{
	char *text = strndup((const char *)data, size);
	const uint64_t untouched = 0xa5a5a5a5a5a5a5a5ull;
	uint64_t got = untouched, want = 0;
	struct sysinfo si;
	int ret, plain;

	fuzz_require(text);
	ret = config_parse_size(text, pct_ok, &got);
	plain = plain_size(text, pct_ok, &want);
	fuzz_require(ret == 0 || ret == -EINVAL);
	if (plain < 0) {
		fuzz_require(ret == -EINVAL && got == untouched);
	} else if (plain == 0) {
		fuzz_require(ret == 0 && got == want);
	} else {
		/* A share of RAM, in whole pages. */
		fuzz_require(ret == 0 && sysinfo(&si) == 0);
		fuzz_require(got % 4096 == 0 && got <= (uint64_t)si.totalram * si.mem_unit);
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (memfd < 0)
		LLVMFuzzerInitialize(NULL, NULL);
	switch (data[0] % 3) {
	case 0:
		fuzz_file(data + 1, size - 1);
		break;
	case 1:
		fuzz_options(data + 1, size - 1);
		break;
	case 2:
		fuzz_size(data + 1, size - 1, data[0] & 0x10);
		break;
	}
	return 0;
}
