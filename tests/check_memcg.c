/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of memcg: reading where we stand from fake cgroup trees (v1
 * and v2, limits up the tree, mount discovery through a fake mountinfo,
 * hostile files), and what memcg_apply() does in each mode: refuse, ignore,
 * and move (a cgroup of our own next to the highest limited one, our pid
 * written to it, and back again at memcg_restore()).
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memcg.h"
#include "testutil.h"

#define MIB		(1ull << 20)
#define RAM		(24ull << 30)
#define V1_UNLIMITED	"9223372036854771712"

static char tree[PATH_MAX];
static char err[1024];

/* A fresh directory for the fake tree of one test. */
static void tree_init(void)
{
	snprintf(tree, sizeof(tree), "%s/check_memcg.XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tree));
}

static void tree_fini(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tree);
	ck_assert_int_eq(system(cmd), 0);
}

/* tree/REL (a printf format) with its parent directories. */
static const char *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static const char *at(const char *fmt, ...)
{
	static char path[4][PATH_MAX];
	static unsigned int n;
	char rel[PATH_MAX];
	va_list ap;
	char *p;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	p = path[n++ % 4];
	ck_assert_int_lt(snprintf(p, PATH_MAX, "%s/%s", tree, rel), PATH_MAX);
	return p;
}

static void mkdirs(const char *rel)
{
	char path[PATH_MAX], *s;

	snprintf(path, sizeof(path), "%s", at("%s", rel));
	for (s = path + strlen(tree) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	mkdir(path, 0755);
}

/* Write text to tree/REL, making its directory. */
static void put(const char *rel, const char *text)
{
	char dir[PATH_MAX], *slash;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", rel);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		mkdirs(dir);
	}
	f = fopen(at("%s", rel), "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static char *slurp(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A v1 tree: we are in /a/b; /a is limited to 320 MiB (memsw 400 MiB). */
static struct memcg_paths v1_tree(void)
{
	struct memcg_paths p = { .proc_cgroup = strdup(at("proc_cgroup")),
				 .v1_root = strdup(at("v1")) };

	put("proc_cgroup", "12:pids:/\n4:memory:/a/b\n1:name=systemd:/x\n0::/\n");
	put("v1/memory.limit_in_bytes", V1_UNLIMITED "\n");
	put("v1/a/memory.limit_in_bytes", "335544320\n");
	put("v1/a/memory.memsw.limit_in_bytes", "419430400\n");
	put("v1/a/b/memory.limit_in_bytes", V1_UNLIMITED "\n");
	put("v1/a/b/memory.memsw.limit_in_bytes", V1_UNLIMITED "\n");
	return p;
}

static void paths_free(struct memcg_paths *p)
{
	free((char *)p->proc_cgroup);
	free((char *)p->mountinfo);
	free((char *)p->v1_root);
	free((char *)p->v2_root);
}

START_TEST(test_v1_limit_up_the_tree)
{
	struct memcg_paths p;
	struct memcg_info info;

	tree_init();
	p = v1_tree();
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_int_eq(info.version, MEMCG_V1);
	ck_assert_str_eq(info.path, "/a/b");
	ck_assert_uint_eq(info.limit, 320 * MIB);
	ck_assert_str_eq(info.limit_file, at("v1/a/memory.limit_in_bytes"));
	ck_assert_str_eq(info.top_limited, "/a");
	ck_assert_uint_eq(info.memsw_limit, 400 * MIB);

	/* A tighter limit below: the tightest is reported, the highest moved from. */
	put("v1/a/b/memory.limit_in_bytes", "104857600\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_uint_eq(info.limit, 100 * MIB);
	ck_assert_str_eq(info.limit_file, at("v1/a/b/memory.limit_in_bytes"));
	ck_assert_str_eq(info.top_limited, "/a");

	/* Limits of RAM or more limit nothing. */
	ck_assert_int_eq(memcg_read(&p, 64 * MIB, &info, err, sizeof(err)), 0);
	ck_assert_str_eq(info.top_limited, "");
	ck_assert_uint_eq(info.limit, 100 * MIB);
	paths_free(&p);
	tree_fini();
}
END_TEST

START_TEST(test_v1_unlimited)
{
	struct memcg_paths p;
	struct memcg_info info;

	tree_init();
	p = v1_tree();
	put("v1/a/memory.limit_in_bytes", V1_UNLIMITED "\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_int_eq(info.version, MEMCG_V1);
	ck_assert_str_eq(info.top_limited, "");
	ck_assert_uint_eq(info.limit, 9223372036854771712ull);

	/* At the root of the hierarchy. */
	put("proc_cgroup", "4:memory:/\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_str_eq(info.path, "/");
	ck_assert_str_eq(info.top_limited, "");
	paths_free(&p);
	tree_fini();
}
END_TEST

START_TEST(test_v2_max_and_high)
{
	struct memcg_paths p = { 0 };
	struct memcg_info info;

	tree_init();
	p.proc_cgroup = strdup(at("proc_cgroup"));
	p.v2_root = strdup(at("v2"));
	put("proc_cgroup", "0::/user.slice/x.scope\n");
	put("v2/cgroup.controllers", "cpuset cpu io memory pids\n");
	put("v2/user.slice/memory.max", "max\n");
	put("v2/user.slice/memory.high", "max\n");
	put("v2/user.slice/x.scope/memory.max", "1073741824\n");
	put("v2/user.slice/x.scope/memory.high", "536870912\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_int_eq(info.version, MEMCG_V2);
	ck_assert_str_eq(info.path, "/user.slice/x.scope");
	ck_assert_uint_eq(info.limit, 512 * MIB);
	ck_assert_str_eq(info.limit_file, at("v2/user.slice/x.scope/memory.high"));
	ck_assert_str_eq(info.top_limited, "/user.slice/x.scope");
	ck_assert_uint_eq(info.memsw_limit, MEMCG_NO_LIMIT);

	/* memory.high alone, higher up. */
	put("v2/user.slice/x.scope/memory.max", "max\n");
	put("v2/user.slice/x.scope/memory.high", "max\n");
	put("v2/user.slice/memory.high", "2147483648\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_uint_eq(info.limit, 2048 * MIB);
	ck_assert_str_eq(info.top_limited, "/user.slice");

	/* Without the memory controller in v2 (as on a v1 machine), no limit. */
	put("v2/cgroup.controllers", "cpu io pids\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_int_eq(info.version, MEMCG_NONE);
	ck_assert_str_eq(info.top_limited, "");
	paths_free(&p);
	tree_fini();
}
END_TEST

/* The mount points come from mountinfo: v1 "cgroup" with "memory" in its
 * super options, cgroup2; octal escapes; a mount that shows a subtree. */
START_TEST(test_mountinfo)
{
	struct memcg_paths p = { 0 };
	struct memcg_info info;
	char line[3 * PATH_MAX];

	tree_init();
	mkdirs("mnt dir/v1");
	p.proc_cgroup = strdup(at("proc_cgroup"));
	p.mountinfo = strdup(at("mountinfo"));
	put("proc_cgroup", "4:memory:/ns/c\n0::/\n");
	ck_assert_int_lt(snprintf(line, sizeof(line),
				  "24 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
				  "30 25 0:26 / %s/cpu rw shared:9 - cgroup cgroup rw,cpu\n"
				  "33 25 0:29 /ns %s/mnt\\040dir/v1 rw shared:12 - cgroup cgroup "
				  "rw,memory\n"
				  "38 25 0:34 / %s/v2 rw shared:17 - cgroup2 cgroup2 rw\n",
				  tree, tree, tree), (int)sizeof(line));
	put("mountinfo", line);
	put("mnt dir/v1/memory.limit_in_bytes", "335544320\n");
	put("mnt dir/v1/c/memory.limit_in_bytes", V1_UNLIMITED "\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_int_eq(info.version, MEMCG_V1);
	ck_assert_str_eq(info.root, at("mnt dir/v1"));
	ck_assert_str_eq(info.path, "/c");
	ck_assert_uint_eq(info.limit, 320 * MIB);
	/* Limited at the root of what we see: nowhere to move to. */
	ck_assert_str_eq(info.top_limited, "/");

	/* Our cgroup outside the mounted part. */
	put("proc_cgroup", "4:memory:/other\n");
	ck_assert_int_ne(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "/other"));

	/* v2 only, found through mountinfo. */
	put("proc_cgroup", "0::/s\n");
	put("v2/cgroup.controllers", "memory\n");
	put("v2/s/memory.max", "104857600\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), 0);
	ck_assert_int_eq(info.version, MEMCG_V2);
	ck_assert_str_eq(info.root, at("v2"));
	ck_assert_uint_eq(info.limit, 100 * MIB);

	/* The memory controller named in /proc but not mounted. */
	put("proc_cgroup", "4:memory:/x\n");
	put("mountinfo", "24 1 254:0 / / rw - ext4 /dev/vda rw\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "not mounted"));
	paths_free(&p);
	tree_fini();
}
END_TEST

/* Hostile files: an error that names the file, never a guess. */
START_TEST(test_bad_input)
{
	struct memcg_paths p;
	struct memcg_info info;

	tree_init();
	p = v1_tree();
	put("v1/a/memory.limit_in_bytes", "lots\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, at("v1/a/memory.limit_in_bytes")));
	ck_assert_ptr_nonnull(strstr(err, "lots"));
	put("v1/a/memory.limit_in_bytes", "-5\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	put("v1/a/memory.limit_in_bytes", "99999999999999999999999\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	put("v1/a/memory.limit_in_bytes", "");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	put("v1/a/memory.limit_in_bytes", "335544320\n");

	put("proc_cgroup", "4:memory:/a/../etc\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "proc_cgroup:1"));
	put("proc_cgroup", "0::/\nno colons here\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "proc_cgroup:2"));
	put("proc_cgroup", "4:memory:relative\n");
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -EINVAL);
	unlink(p.proc_cgroup);
	ck_assert_int_eq(memcg_read(&p, RAM, &info, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, p.proc_cgroup));
	paths_free(&p);
	tree_fini();
}
END_TEST

START_TEST(test_mode_words)
{
	enum memcg_mode m;

	ck_assert_int_eq(memcg_mode_parse("move", &m), 0);
	ck_assert_int_eq(m, MEMCG_MOVE);
	ck_assert_int_eq(memcg_mode_parse("refuse", &m), 0);
	ck_assert_int_eq(m, MEMCG_REFUSE);
	ck_assert_int_eq(memcg_mode_parse("ignore", &m), 0);
	ck_assert_int_eq(m, MEMCG_IGNORE);
	ck_assert_int_eq(memcg_mode_parse("Move", &m), -EINVAL);
	ck_assert_int_eq(memcg_mode_parse("", &m), -EINVAL);
}
END_TEST

START_TEST(test_refuse_and_ignore)
{
	struct memcg_paths p;
	struct memcg_report r;

	tree_init();
	p = v1_tree();
	ck_assert_int_eq(memcg_apply(&p, MEMCG_REFUSE, RAM, err, sizeof(err)), -1);
	/* The message says where the limit is and what to do. */
	ck_assert_ptr_nonnull(strstr(err, at("v1/a/memory.limit_in_bytes")));
	ck_assert_ptr_nonnull(strstr(err, "320 MiB"));
	ck_assert_ptr_nonnull(strstr(err, "memcg=ignore"));

	ck_assert_int_eq(memcg_apply(&p, MEMCG_IGNORE, RAM, err, sizeof(err)), 0);
	memcg_get_report(&r);
	ck_assert_str_eq(r.state, "ignored");
	ck_assert_uint_eq(r.limit, 320 * MIB);
	ck_assert_str_eq(r.cgroup, "");

	/* Unreadable: refuse unless ignoring. */
	put("v1/a/memory.limit_in_bytes", "garbage\n");
	ck_assert_int_eq(memcg_apply(&p, MEMCG_MOVE, RAM, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "garbage"));
	ck_assert_int_eq(memcg_apply(&p, MEMCG_IGNORE, RAM, err, sizeof(err)), 0);
	memcg_get_report(&r);
	ck_assert_str_eq(r.state, "unknown");

	/* No limit: nothing to do in any mode. */
	put("v1/a/memory.limit_in_bytes", V1_UNLIMITED "\n");
	ck_assert_int_eq(memcg_apply(&p, MEMCG_REFUSE, RAM, err, sizeof(err)), 0);
	memcg_get_report(&r);
	ck_assert_str_eq(r.state, "none");
	ck_assert_uint_eq(r.limit, 0);
	memcg_restore();		/* made nothing: does nothing */
	paths_free(&p);
	tree_fini();
}
END_TEST

/* move: a cgroup beside the highest limited one, our pid in it; restore
 * writes our pid back where we came from and removes it. */
START_TEST(test_move_and_restore)
{
	struct memcg_paths p;
	struct memcg_report r;
	char pid[32], made[PATH_MAX], procs[PATH_MAX + 16];
	struct stat sb;

	tree_init();
	p = v1_tree();
	/* /a/b limited too, /a above it the highest: the new one goes at the root. */
	put("v1/a/b/memory.limit_in_bytes", "104857600\n");
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	snprintf(made, sizeof(made), "%s", at("v1/zswapfs-%d", (int)getpid()));
	ck_assert_int_eq(memcg_apply(&p, MEMCG_MOVE, RAM, err, sizeof(err)), 0);
	ck_assert_int_eq(stat(made, &sb), 0);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", made);
	ck_assert_str_eq(slurp(procs), pid);
	memcg_get_report(&r);
	ck_assert_str_eq(r.state, "moved");
	ck_assert_str_eq(r.cgroup, made);
	ck_assert_uint_eq(r.limit, 100 * MIB);

	/* A real cgroup directory can be removed with its files: not this one. */
	unlink(procs);
	memcg_restore();
	ck_assert_int_ne(stat(made, &sb), 0);
	ck_assert_str_eq(slurp(at("v1/a/b/cgroup.procs")), pid);
	memcg_get_report(&r);
	ck_assert_str_eq(r.cgroup, "");

	/* Limited only below an unlimited /a: the new one goes in /a. */
	put("v1/a/memory.limit_in_bytes", V1_UNLIMITED "\n");
	snprintf(made, sizeof(made), "%s", at("v1/a/zswapfs-%d", (int)getpid()));
	ck_assert_int_eq(memcg_apply(&p, MEMCG_MOVE, RAM, err, sizeof(err)), 0);
	ck_assert_int_eq(stat(made, &sb), 0);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", made);
	unlink(procs);
	memcg_restore();
	ck_assert_int_ne(stat(made, &sb), 0);

	/* A name that cannot be made (a non-empty leftover): refused, nothing kept. */
	mkdirs(made + strlen(tree) + 1);
	put(at("v1/a/zswapfs-%d/busy", (int)getpid()) + strlen(tree) + 1, "x");
	ck_assert_int_eq(memcg_apply(&p, MEMCG_MOVE, RAM, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "cannot make"));
	ck_assert_ptr_nonnull(strstr(err, "memcg=ignore"));

	/* Limited at the root of what we see: cannot move out. */
	put("proc_cgroup", "4:memory:/\n");
	put("v1/memory.limit_in_bytes", "104857600\n");
	ck_assert_int_eq(memcg_apply(&p, MEMCG_MOVE, RAM, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "root of the hierarchy"));
	paths_free(&p);
	tree_fini();
}
END_TEST

static Suite *memcg_suite(void)
{
	Suite *s = suite_create("memcg");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_v1_limit_up_the_tree);
	tcase_add_test(tc, test_v1_unlimited);
	tcase_add_test(tc, test_v2_max_and_high);
	tcase_add_test(tc, test_mountinfo);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_mode_words);
	tcase_add_test(tc, test_refuse_and_ignore);
	tcase_add_test(tc, test_move_and_restore);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(memcg_suite());
}
