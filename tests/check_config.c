/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the settings: size parsing, range checks, the config file
 * and its error messages (which must name the file, the line and the key),
 * and that a failed parse leaves the settings as they were.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "harden.h"
#include "testutil.h"

static char err[512];

START_TEST(test_sizes)
{
	uint64_t v;

	ck_assert_int_eq(config_parse_size("4096", false, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(config_parse_size("512K", false, &v), 0);
	ck_assert_uint_eq(v, 512u << 10);
	ck_assert_int_eq(config_parse_size("64M", false, &v), 0);
	ck_assert_uint_eq(v, 64u << 20);
	ck_assert_int_eq(config_parse_size("4g", false, &v), 0);
	ck_assert_uint_eq(v, UINT64_C(4) << 30);
	ck_assert_int_eq(config_parse_size("2GB", false, &v), 0);
	ck_assert_uint_eq(v, UINT64_C(2) << 30);
	ck_assert_int_eq(config_parse_size("25%", true, &v), 0);
	ck_assert_uint_gt(v, 0);
	ck_assert_uint_eq(v % 4096, 0);

	ck_assert_int_eq(config_parse_size("25%", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("0%", true, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("101%", true, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("abc", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("-5", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("12Q", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("1M junk", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("99999999999999999999", false, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("99999999999G", false, &v), -EINVAL);
}
END_TEST

START_TEST(test_set_and_errors)
{
	struct zs_config cfg, before;

	config_defaults(&cfg);
	ck_assert_uint_gt(cfg.size, 0);
	ck_assert_str_eq(cfg.algorithm, "lz4");
	ck_assert_int_eq(cfg.threads, 1);

	ck_assert_int_eq(config_set(&cfg, "size", "1G", "mount option", err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg.size, UINT64_C(1) << 30);
	ck_assert_int_eq(config_set(&cfg, "algorithm", "zstd", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_str_eq(cfg.algorithm, "zstd");
	ck_assert_int_eq(config_set(&cfg, "level", "9", "mount option", err, sizeof(err)), 0);
	ck_assert_int_eq(config_validate(&cfg, err, sizeof(err)), 0);

	before = cfg;
	ck_assert_int_eq(config_set(&cfg, "algorithm", "bogus", "mount option", err,
				    sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "algorithm"));
	ck_assert_ptr_nonnull(strstr(err, "bogus"));
	ck_assert_int_eq(config_set(&cfg, "size", "0", "mount option", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "size"));
	ck_assert_int_eq(config_set(&cfg, "threads", "0", "mount option", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(config_set(&cfg, "level", "1x", "mount option", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(config_set(&cfg, "nosuch", "1", "mount option", err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "nosuch"));
	ck_assert_mem_eq(&cfg, &before, sizeof(cfg));

	/* A level the algorithm does not have is caught across settings. */
	ck_assert_int_eq(config_set(&cfg, "level", "22", "mount option", err, sizeof(err)), 0);
	ck_assert_int_eq(config_set(&cfg, "algorithm", "lzo", "mount option", err, sizeof(err)), 0);
	ck_assert_int_eq(config_validate(&cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "level"));
}
END_TEST

static char *write_file(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/check_config.XXXXXX");
	ck_assert_int_ge(mkstemp(path), 0);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

START_TEST(test_file)
{
	struct zs_config cfg, before;
	char *path;

	config_defaults(&cfg);
	path = write_file("# comment\nsize = \"2G\";\nalgorithm = \"lzo\";\nmem_limit = \"512M\";\n"
			  "threads = 2;\n");
	ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg.size, UINT64_C(2) << 30);
	ck_assert_str_eq(cfg.algorithm, "lzo");
	ck_assert_uint_eq(cfg.mem_limit, UINT64_C(512) << 20);
	ck_assert_int_eq(cfg.threads, 2);
	unlink(path);

	/* A bad value names file, line and key, and changes nothing. */
	before = cfg;
	path = write_file("size = \"1G\";\n\nalgorithm = \"brotli\";\n");
	ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, ":3:"));
	ck_assert_ptr_nonnull(strstr(err, "algorithm"));
	ck_assert_mem_eq(&cfg, &before, sizeof(cfg));
	unlink(path);

	/* An unknown key is an error too, and changes nothing either. */
	path = write_file("size = \"1G\";\nsizee = \"1G\";\n");
	ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, ":2:"));
	ck_assert_ptr_nonnull(strstr(err, "sizee"));
	ck_assert_mem_eq(&cfg, &before, sizeof(cfg));
	unlink(path);

	/* A syntax error names the file and the line (libconfig's `;` is
	 * optional: the error is on line 2), and changes nothing. */
	path = write_file("size = \"1G\"\nalgorithm = ;\n");
	ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, path) && strstr(err, ":2:"), "no file:2: in '%s'", err);
	ck_assert_mem_eq(&cfg, &before, sizeof(cfg));
	unlink(path);

	ck_assert_int_eq(config_load_file(&cfg, "/nonexistent/zswapfs.conf", err, sizeof(err)),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/zswapfs.conf"));
}
END_TEST

/* stats_group: a name (looked up), a number (any), or "" for none; a name
 * that is no group is an error that names the key, and changes nothing. */
START_TEST(test_group)
{
	struct zs_config cfg;

	config_defaults(&cfg);
	ck_assert_int_eq(cfg.stats_group.gid, -1);
	ck_assert_int_eq(config_set(&cfg, "stats_group", "4242", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_int_eq(cfg.stats_group.gid, 4242);
	ck_assert_int_eq(config_set(&cfg, "stats_group", "root", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_int_eq(cfg.stats_group.gid, 0);
	ck_assert_str_eq(cfg.stats_group.name, "root");
	ck_assert_int_eq(config_set(&cfg, "stats_group", "no-such-group-zs", "x.conf:3", err,
				    sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "x.conf:3"));
	ck_assert_ptr_nonnull(strstr(err, "stats_group"));
	ck_assert_ptr_nonnull(strstr(err, "no-such-group-zs"));
	ck_assert_int_eq(cfg.stats_group.gid, 0);	/* unchanged */
	/* (gid_t)-1 is chown's "no change", not a group */
	ck_assert_int_eq(config_set(&cfg, "stats_group", "4294967295", "mount option", err,
				    sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_set(&cfg, "stats_group", "12x", "mount option", err,
				    sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_set(&cfg, "stats_group", "", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_int_eq(cfg.stats_group.gid, -1);
}
END_TEST

/* lock_memory: one of its words; anything else names the key and the words. */
START_TEST(test_choice)
{
	struct zs_config cfg;

	config_defaults(&cfg);
#if HARDEN_CAN_MLOCK
	ck_assert_int_eq(cfg.lock_memory, ZS_LOCK_REQUIRED);
#else
	ck_assert_int_eq(cfg.lock_memory, ZS_LOCK_TRY);	/* a sanitizer build */
#endif
	ck_assert_int_eq(config_set(&cfg, "lock_memory", "try", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_int_eq(cfg.lock_memory, ZS_LOCK_TRY);
	ck_assert_int_eq(config_set(&cfg, "lock_memory", "required", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_int_eq(cfg.lock_memory, ZS_LOCK_REQUIRED);
	ck_assert_int_eq(config_set(&cfg, "lock_memory", "maybe", "mount option", err,
				    sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "lock_memory"));
	ck_assert_ptr_nonnull(strstr(err, "required, try"));
	ck_assert_int_eq(cfg.lock_memory, ZS_LOCK_REQUIRED);
}
END_TEST

/* memcg: the same kind of setting; each word is its own value, in the
 * order main.c maps to memcg.h's modes. */
START_TEST(test_memcg_choice)
{
	static const struct {
		const char *word;
		int value;
	} words[] = {
		{ "refuse", ZS_MEMCG_REFUSE },
		{ "ignore", ZS_MEMCG_IGNORE },
		{ "move", ZS_MEMCG_MOVE },
	};
	struct zs_config cfg;
	unsigned int i;

	config_defaults(&cfg);
	ck_assert_int_eq(cfg.memcg, ZS_MEMCG_MOVE);
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		ck_assert_int_eq(config_set(&cfg, "memcg", words[i].word, "mount option", err,
					    sizeof(err)), 0);
		ck_assert_int_eq(cfg.memcg, words[i].value);
	}
	ck_assert_int_eq(config_set(&cfg, "memcg", "ignore", "mount option", err,
				    sizeof(err)), 0);
	ck_assert_int_eq(config_set(&cfg, "memcg", "Move", "x.conf:4", err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "x.conf:4"));
	ck_assert_ptr_nonnull(strstr(err, "memcg"));
	ck_assert_ptr_nonnull(strstr(err, "move, refuse, ignore"));
	ck_assert_int_eq(cfg.memcg, ZS_MEMCG_IGNORE);	/* unchanged */
	ck_assert_int_eq(config_set(&cfg, "memcg", "", "mount option", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(cfg.memcg, ZS_MEMCG_IGNORE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_set_and_errors);
	tcase_add_test(tc, test_file);
	tcase_add_test(tc, test_group);
	tcase_add_test(tc, test_choice);
	tcase_add_test(tc, test_memcg_choice);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
