/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for the backing file and its checksum: CRC-32C check values,
 * the refusals of backing_open(), round trips across segments (read from
 * the buffer before the flush and from the disk after it), corruption
 * caught as -EIO, segments freed, punched (st_blocks falls) and reused,
 * the size limit, a failing write (RLIMIT_FSIZE) and backing_abort(), and
 * reads racing the writer.
 *
 * Files live in a temporary directory under /var/tmp, a disk filesystem:
 * /tmp may be tmpfs, which lacks O_DIRECT on older kernels.  Object data is
 * derived from (slot, generation), so any mix-up shows as a mismatch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "crc32c.h"

#define SEG BACKING_SEG_SIZE
#define MIB (1024u * 1024u)

/* Like ck_assert, without a checkpoint syscall per check in long loops. */
#define require(expr)								\
	do {									\
		if (!(expr))							\
			ck_abort_msg("Assertion '%s' failed", #expr);		\
	} while (0)

static char topdir[256];		/* made and removed by the runner process */
static char tmpdir[300];		/* one per test, inside it */
static char path[320];
static char err[256];

/* In the runner: a failing test ends its own process before any clean-up
 * of its own, so the runner removes everything once all tests have run. */
static void make_topdir(void)
{
	strcpy(topdir, "/var/tmp/check_backing.XXXXXX");
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

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/t.XXXXXX", topdir);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/backing", tmpdir);
	err[0] = 0;
}

static void *scratch_alloc(void)
{
	void *p = NULL;

	ck_assert_int_eq(posix_memalign(&p, BACKING_ALIGN, BACKING_SCRATCH_SIZE), 0);
	return p;
}

static void make_data(unsigned char *p, size_t len, uint32_t slot, uint32_t gen)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t)slot << 32 | gen);
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

struct obj {
	uint64_t loc;
	uint16_t len;
	bool live;
};

/* Append, flushing when the open segment is full.  Returns what append said last. */
static int put(struct backing *b, uint32_t slot, uint16_t len, uint64_t *loc)
{
	unsigned char data[BACKING_MAX_DATA];
	int r;

	make_data(data, len, slot, 0);
	r = backing_append(b, slot, (uint8_t)(slot % 3), data, len, loc);
	if (r == -ENOSPC) {
		r = backing_flush(b);
		if (r)
			return r;
		r = backing_append(b, slot, (uint8_t)(slot % 3), data, len, loc);
	}
	return r;
}

/* Fill whole segments with objects of slot base.., return how many. */
static uint32_t fill_segment(struct backing *b, uint32_t base, struct obj *o)
{
	unsigned char data[2000];
	uint32_t n = 0;
	int r;

	for (;;) {
		o[n].len = 2000;
		make_data(data, o[n].len, base + n, 0);
		r = backing_append(b, base + n, (uint8_t)((base + n) % 3), data, o[n].len,
				   &o[n].loc);
		if (r == -ENOSPC)
			break;
		ck_assert_int_eq(r, 0);
		o[n].live = true;
		n++;
	}
	return n;
}

static void check_obj(struct backing *b, void *scratch, uint32_t slot, const struct obj *o)
{
	unsigned char want[BACKING_MAX_DATA];
	const void *data;
	uint16_t len;
	uint8_t codec;
	int r;

	r = backing_read(b, o->loc, slot, scratch, &data, &len, &codec);
	if (r)
		ck_abort_msg("slot %u at %llu: read %d", slot, (unsigned long long)o->loc, r);
	require(len == o->len);
	require(codec == slot % 3);
	make_data(want, len, slot, 0);
	require(memcmp(data, want, len) == 0);
}

static uint64_t file_blocks(void)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_blocks;
}

/* ---- crc32c ---------------------------------------------------------------- */

/* The definition, one bit at a time, to check the tables against. */
static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t len)
{
	int k;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & -(crc & 1));
	}
	return ~crc;
}

START_TEST(test_crc_check_values)
{
	unsigned char buf[32];

	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(crc32c(0, "", 0), 0);
	/* RFC 3720 (iSCSI) B.4 */
	memset(buf, 0, sizeof(buf));
	ck_assert_uint_eq(crc32c(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_uint_eq(crc32c(0, buf, 32), 0x62A8AB43u);
}
END_TEST

START_TEST(test_crc_matches_bitwise)
{
	unsigned char buf[1000];
	size_t start, len, cut;

	make_data(buf, sizeof(buf), 7, 7);
	/* Every alignment and tail length of the 8-byte loop, and chaining. */
	for (start = 0; start < 16; start++)
		for (len = 0; len < 300; len++) {
			uint32_t want = crc_bitwise(0, buf + start, len);

			require(crc32c(0, buf + start, len) == want);
			cut = len / 3;
			require(crc32c(crc32c(0, buf + start, cut), buf + start + cut,
				       len - cut) == want);
		}
}
END_TEST

/* ---- open ------------------------------------------------------------------- */

START_TEST(test_open_creates_0600)
{
	struct backing *b;
	struct stat st;
	mode_t old = umask(0);

	b = backing_open(path, 8 * MIB, err, sizeof(err));
	umask(old);
	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	backing_close(b);
}
END_TEST

START_TEST(test_open_refuses)
{
	char link[320], dir[320];
	struct backing *b;
	int fd;

	/* symlink, even to a good file */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(link, sizeof(link), "%s/link", tmpdir);
	ck_assert_int_eq(symlink(path, link), 0);
	b = backing_open(link, 8 * MIB, err, sizeof(err));
	ck_assert_ptr_null(b);
	ck_assert_ptr_nonnull(strstr(err, "symlink"));

	/* directory */
	snprintf(dir, sizeof(dir), "%s/dir", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	b = backing_open(dir, 8 * MIB, err, sizeof(err));
	ck_assert_ptr_null(b);
	ck_assert_ptr_nonnull(strstr(err, "not a regular file"));

	/* FIFO */
	snprintf(dir, sizeof(dir), "%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(dir, 0600), 0);
	b = backing_open(dir, 8 * MIB, err, sizeof(err));
	ck_assert_ptr_null(b);
	ck_assert_ptr_nonnull(strstr(err, "not a regular file"));

	/* writable by others */
	ck_assert_int_eq(chmod(path, 0602), 0);
	b = backing_open(path, 8 * MIB, err, sizeof(err));
	ck_assert_ptr_null(b);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_ptr_nonnull(strstr(err, "writable by others"));
	ck_assert_int_eq(chmod(path, 0600), 0);

	/* owned by someone else (only root can give a file away) */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(path, 1, 1), 0);
		b = backing_open(path, 8 * MIB, err, sizeof(err));
		ck_assert_ptr_null(b);
		ck_assert_ptr_nonnull(strstr(err, "owned by"));
		ck_assert_int_eq(chown(path, 0, 0), 0);
	}

	/* smaller than one segment */
	b = backing_open(path, SEG - 1, err, sizeof(err));
	ck_assert_ptr_null(b);
	ck_assert_int_eq(errno, EINVAL);

	/* and after all that, the file itself is fine */
	b = backing_open(path, 8 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	backing_close(b);
}
END_TEST

START_TEST(test_open_locked_and_discards)
{
	struct backing *b, *b2;
	char junk[65536];
	struct stat st;
	int fd;

	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	memset(junk, 'x', sizeof(junk));
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);

	b = backing_open(path, 8 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 0);	/* the last run's swap is gone */

	b2 = backing_open(path, 8 * MIB, err, sizeof(err));
	ck_assert_ptr_null(b2);
	ck_assert_ptr_nonnull(strstr(err, "in use"));
	backing_close(b);
}
END_TEST

/* ---- data --------------------------------------------------------------------- */

#define NOBJ 3000

START_TEST(test_round_trip)
{
	struct obj *o = calloc(NOBJ, sizeof(*o));
	struct backing_stats s;
	struct backing *b;
	void *scratch = scratch_alloc();
	uint64_t live = 0, seed = 12345;
	uint32_t i;

	b = backing_open(path, 16 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	for (i = 0; i < NOBJ; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		/* all sizes, with the extremes often */
		switch (i % 5) {
		case 0:
			o[i].len = BACKING_MAX_DATA;
			break;
		case 1:
			o[i].len = 1 + (seed >> 33) % 64;
			break;
		default:
			o[i].len = 1 + (seed >> 33) % BACKING_MAX_DATA;
		}
		require(put(b, i, o[i].len, &o[i].loc) == 0);
		require(o[i].loc % 16 == 0);
		live += (16 + o[i].len + 15) & ~15u;
		/* readable at once, from the buffer */
		check_obj(b, scratch, i, &o[i]);
		/* and an earlier one, maybe already on disk */
		check_obj(b, scratch, i / 2, &o[i / 2]);
	}
	ck_assert_int_eq(backing_flush(b), 0);
	for (i = 0; i < NOBJ; i++)
		check_obj(b, scratch, i, &o[i]);

	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.objects, NOBJ);
	ck_assert_uint_eq(s.bytes_live, live);
	ck_assert_uint_ge(s.writes, 5);		/* ~6.3 MiB of objects */
	/* each full one written once, and the open one by the last flush */
	ck_assert_uint_eq(s.segments, s.writes);
	ck_assert_uint_eq(s.bytes_used, s.segments * SEG);
	ck_assert_uint_eq(s.read_errors, 0);
	ck_assert_uint_eq(s.write_errors, 0);
	ck_assert_uint_ge(s.reads, 2 * NOBJ);
	ck_assert_uint_eq(s.bytes_written % BACKING_ALIGN, 0);
	backing_close(b);
	free(scratch);
	free(o);
}
END_TEST

/* The worst-placed object: header 16 bytes before a block's end, 4096 bytes of data. */
START_TEST(test_straddle)
{
	struct backing *b;
	void *scratch = scratch_alloc();
	struct obj a = { .len = 4064 }, c = { .len = BACKING_MAX_DATA };

	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_int_eq(put(b, 1, a.len, &a.loc), 0);
	ck_assert_int_eq(put(b, 2, c.len, &c.loc), 0);
	ck_assert_uint_eq(c.loc, 4080);
	ck_assert_int_eq(backing_flush(b), 0);
	check_obj(b, scratch, 1, &a);
	check_obj(b, scratch, 2, &c);
	backing_close(b);
	free(scratch);
}
END_TEST

START_TEST(test_bad_args)
{
	struct backing *b;
	unsigned char d[16] = { 0 };
	uint64_t loc;

	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_int_eq(backing_append(b, 1, 0, d, 0, &loc), -EINVAL);
	ck_assert_int_eq(backing_append(b, 1, 0, d, BACKING_MAX_DATA + 1, &loc), -EINVAL);
	backing_close(b);
}
END_TEST

START_TEST(test_corruption)
{
	struct backing_stats s;
	struct backing *b;
	void *scratch = scratch_alloc();
	const void *data;
	uint16_t len;
	uint8_t codec;
	static struct obj filler[600];
	struct obj o[4];
	unsigned char byte;
	uint32_t i;
	int fd;

	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	for (i = 0; i < 4; i++) {
		o[i].len = 1000;
		ck_assert_int_eq(put(b, i, o[i].len, &o[i].loc), 0);
	}
	/* wrong slot, misaligned and out-of-range locations, unflushed */
	ck_assert_int_eq(backing_read(b, o[0].loc, 99, scratch, &data, &len, &codec), -EIO);
	ck_assert_int_eq(backing_read(b, o[1].loc + 16, 1, scratch, &data, &len, &codec), -EIO);
	ck_assert_int_eq(backing_read(b, 8, 0, scratch, &data, &len, &codec), -EIO);
	ck_assert_int_eq(backing_read(b, 4 * MIB, 0, scratch, &data, &len, &codec), -EIO);
	ck_assert_int_eq(backing_read(b, 3 * MIB, 0, scratch, &data, &len, &codec), -EIO);
	/* fill the segment so that the flush closes it: reads then go to the disk */
	fill_segment(b, 100, filler);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(backing_read(b, o[0].loc, 99, scratch, &data, &len, &codec), -EIO);
	ck_assert_int_eq(backing_read(b, o[1].loc + 16, 1, scratch, &data, &len, &codec), -EIO);

	/* flip one data byte of o[1], the len of o[2], the codec of o[3], behind its back */
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &byte, 1, o[1].loc + 16 + 500), 1);
	byte ^= 0x10;
	ck_assert_int_eq(pwrite(fd, &byte, 1, o[1].loc + 16 + 500), 1);
	byte = 0xe7;				/* low byte of len: 1000 -> 999 */
	ck_assert_int_eq(pwrite(fd, &byte, 1, o[2].loc + 12), 1);
	byte = 9;
	ck_assert_int_eq(pwrite(fd, &byte, 1, o[3].loc + 14), 1);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);

	check_obj(b, scratch, 0, &o[0]);
	for (i = 1; i < 4; i++)
		ck_assert_int_eq(backing_read(b, o[i].loc, i, scratch, &data, &len, &codec), -EIO);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.read_errors, 10);
	ck_assert_uint_eq(s.reads, 1);
	backing_close(b);
	free(scratch);
}
END_TEST

START_TEST(test_free_punch_reuse)
{
	static struct obj a[600], c[600], d[600];
	struct backing_stats s;
	struct backing *b;
	void *scratch = scratch_alloc();
	uint64_t blocks_full, blocks_punched;
	uint32_t na, nc, nd, i;

	b = backing_open(path, 8 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	na = fill_segment(b, 0, a);
	ck_assert_int_eq(backing_flush(b), 0);
	nc = fill_segment(b, 10000, c);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_uint_eq(a[0].loc / SEG, 0);
	ck_assert_uint_eq(c[0].loc / SEG, 1);
	blocks_full = file_blocks();
	ck_assert_uint_ge(blocks_full * 512, 2 * SEG - 2 * 4096);

	/* all but one of segment 0 die: nothing happens to the file */
	for (i = 1; i < na; i++)
		backing_free(b, a[i].loc, a[i].len);
	ck_assert_uint_eq(file_blocks(), blocks_full);
	check_obj(b, scratch, 0, &a[0]);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.segments, 3);
	ck_assert_uint_eq(s.objects, 1 + nc);
	ck_assert_uint_eq(s.holes_punched, 0);

	/* the last one: the segment is punched and free */
	backing_free(b, a[0].loc, a[0].len);
	blocks_punched = file_blocks();
	ck_assert_uint_le(blocks_punched * 512 + SEG - 4096, blocks_full * 512);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.segments, 2);
	ck_assert_uint_eq(s.holes_punched, 1);
	ck_assert_uint_eq(s.objects, nc);
	for (i = 0; i < nc; i++)
		check_obj(b, scratch, 10000 + i, &c[i]);

	/* segment 2 is open; the next one after it is segment 0 again, lowest first */
	nd = fill_segment(b, 20000, d);
	ck_assert_uint_eq(d[0].loc / SEG, 2);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(put(b, 30000, 100, &a[0].loc), 0);
	ck_assert_uint_eq(a[0].loc, 0);
	a[0].len = 100;
	ck_assert_int_eq(backing_flush(b), 0);
	check_obj(b, scratch, 30000, &a[0]);
	for (i = 0; i < nd; i++)
		check_obj(b, scratch, 20000 + i, &d[i]);
	backing_close(b);
	free(scratch);
}
END_TEST

START_TEST(test_free_before_flush)
{
	static struct obj a[600];
	struct backing_stats s, s2;
	struct backing *b;
	uint32_t n, i;

	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	n = fill_segment(b, 0, a);
	for (i = 0; i < n; i++)
		backing_free(b, a[i].loc, a[i].len);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.objects, 0);
	ck_assert_uint_eq(s.bytes_live, 0);
	/* nothing live: nothing is written, and the segment is filled again */
	ck_assert_int_eq(backing_flush(b), 0);
	backing_get_stats(b, &s2);
	ck_assert_uint_eq(s2.writes, 0);
	ck_assert_uint_eq(s2.bytes_written, 0);
	ck_assert_uint_eq(file_blocks(), 0);
	ck_assert_int_eq(put(b, 5, 10, &a[0].loc), 0);
	ck_assert_uint_eq(a[0].loc, 0);
	backing_close(b);
}
END_TEST

START_TEST(test_full)
{
	static struct obj a[3][600];
	struct backing_stats s;
	struct backing *b;
	void *scratch = scratch_alloc();
	struct obj x = { .len = 50 };
	uint32_t n[3], i;

	b = backing_open(path, 3 * MIB + 12345, err, sizeof(err));	/* 3 segments */
	ck_assert_msg(b != NULL, "%s", err);
	for (i = 0; i < 3; i++) {
		n[i] = fill_segment(b, i * 1000, a[i]);
		ck_assert_int_eq(backing_flush(b), 0);	/* written, even the last */
	}
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.bytes_max, 3 * SEG);
	ck_assert_uint_eq(s.segments, 3);
	ck_assert_uint_eq(s.writes, 3);
	ck_assert_int_eq(put(b, 7777, x.len, &x.loc), -ENOSPC);
	ck_assert_int_eq(backing_flush(b), -ENOSPC);
	ck_assert_int_eq(backing_flush(b), -ENOSPC);
	backing_abort(b);			/* harmless */

	/* segment 1 dies: room again */
	for (i = 0; i < n[1]; i++)
		backing_free(b, a[1][i].loc, a[1][i].len);
	ck_assert_int_eq(put(b, 7777, x.len, &x.loc), 0);
	ck_assert_uint_eq(x.loc, SEG);
	ck_assert_int_eq(backing_flush(b), 0);
	check_obj(b, scratch, 7777, &x);
	for (i = 0; i < n[2]; i++)
		check_obj(b, scratch, 2000 + i, &a[2][i]);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.write_errors, 0);
	backing_close(b);
	free(scratch);
}
END_TEST

START_TEST(test_flush_error_abort)
{
	static struct obj a[600], c[600];
	struct rlimit rl = { .rlim_cur = SEG + SEG / 2, .rlim_max = RLIM_INFINITY };
	struct backing_stats s0, s;
	struct backing *b;
	void *scratch = scratch_alloc();
	uint32_t na, nc, i;

	/* check runs each test in its own process: the limit dies with it */
	signal(SIGXFSZ, SIG_IGN);
	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	na = fill_segment(b, 0, a);
	ck_assert_int_eq(backing_flush(b), 0);
	backing_get_stats(b, &s0);

	/* segment 1 would pass 1.5 MiB: the write fails */
	nc = fill_segment(b, 5000, c);
	ck_assert_int_eq(backing_flush(b), -EFBIG);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.write_errors, 1);
	ck_assert_uint_eq(s.writes, s0.writes);
	/* the objects are still readable from the buffer until the abort */
	check_obj(b, scratch, 5000 + nc - 1, &c[nc - 1]);
	/* a second try fails the same way and changes nothing */
	ck_assert_int_eq(backing_flush(b), -EFBIG);
	backing_abort(b);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.objects, na);
	ck_assert_uint_eq(s.bytes_live, s0.bytes_live);
	ck_assert_uint_eq(s.segments, s0.segments);
	ck_assert_uint_eq(s.write_errors, 2);
	{
		const void *data;
		uint16_t len;
		uint8_t codec;

		ck_assert_int_eq(backing_read(b, c[0].loc, 5000, scratch, &data, &len, &codec),
				 -EIO);
	}

	/* the same segment takes what fits under the limit */
	for (i = 0; i < 100; i++) {
		c[i].len = 2000;
		ck_assert_int_eq(put(b, 5000 + i, c[i].len, &c[i].loc), 0);
		ck_assert_uint_eq(c[i].loc / SEG, 1);
	}
	ck_assert_int_eq(backing_flush(b), 0);
	for (i = 0; i < 100; i++)
		check_obj(b, scratch, 5000 + i, &c[i]);
	for (i = 0; i < na; i++)
		check_obj(b, scratch, i, &a[i]);
	/* and frees still balance: everything dies, both segments are punched */
	for (i = 0; i < na; i++)
		backing_free(b, a[i].loc, a[i].len);
	for (i = 0; i < 100; i++)
		backing_free(b, c[i].loc, c[i].len);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.objects, 0);
	ck_assert_uint_eq(s.bytes_live, 0);
	/* segment 0 is punched; segment 1 is still the open one, empty again */
	ck_assert_uint_eq(s.holes_punched, 1);
	ck_assert_uint_eq(s.segments, 1);
	backing_close(b);
	free(scratch);
}
END_TEST

/*
 * With backing_defer_punch() a thread serving swap never punches: the
 * segment its free emptied waits, counted as used, until the writer reaps
 * it (backing_reap(), or its next flush).
 */
START_TEST(test_deferred_punch)
{
	static struct obj a[600], c[600];
	struct backing_stats s;
	struct backing *b;
	uint64_t blocks_full;
	uint32_t na, nc, i;

	b = backing_open(path, 8 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	backing_defer_punch(b);
	na = fill_segment(b, 0, a);
	ck_assert_int_eq(backing_flush(b), 0);
	nc = fill_segment(b, 10000, c);
	ck_assert_int_eq(backing_flush(b), 0);
	blocks_full = file_blocks();
	for (i = 0; i < na; i++)
		backing_free(b, a[i].loc, a[i].len);
	/* nothing punched yet, the segment not free */
	ck_assert_uint_eq(file_blocks(), blocks_full);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 0);
	ck_assert_uint_eq(s.segments, 3);
	backing_reap(b);
	ck_assert_uint_le(file_blocks() * 512 + SEG - 4096, blocks_full * 512);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 1);
	ck_assert_uint_eq(s.segments, 2);
	backing_reap(b);	/* nothing left to do */
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 1);

	/* segment 1 dies too; the next flush reaps it before it opens one */
	for (i = 0; i < nc; i++)
		backing_free(b, c[i].loc, c[i].len);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 1);
	ck_assert_int_eq(backing_flush(b), 0);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 2);
	backing_close(b);
}
END_TEST

/* ---- concurrency ------------------------------------------------------------- */

#define CONC_OBJ 4000

static struct obj conc[CONC_OBJ];
static _Atomic uint32_t conc_published;
static struct backing *conc_b;

static void *conc_reader(void *arg)
{
	void *scratch = scratch_alloc();
	uint64_t x = (uintptr_t)arg + 1;
	unsigned long n = 0;

	for (;;) {
		uint32_t pub = conc_published, i;

		if (pub == CONC_OBJ)
			break;
		if (pub == 0)
			continue;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (uint32_t)(x % pub);
		check_obj(conc_b, scratch, i, &conc[i]);
		n++;
	}
	free(scratch);
	return (void *)n;
}

/* Small batches share a segment: each flush writes from where the last ended. */
START_TEST(test_partial_flushes_pack)
{
	static struct obj o[64], filler[600];
	struct backing_stats s;
	struct backing *b;
	void *scratch = scratch_alloc();
	uint32_t i;

	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	for (i = 0; i < 64; i++) {
		o[i].len = 700;
		ck_assert_int_eq(put(b, i, o[i].len, &o[i].loc), 0);
		if (i % 8 == 7)
			ck_assert_int_eq(backing_flush(b), 0);	/* a batch of 8 ends */
	}
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.segments, 1);		/* all in segment 0 */
	ck_assert_uint_eq(o[63].loc / SEG, 0);
	ck_assert_uint_eq(s.writes, 8);
	/* 64 x 720 bytes = 45 KiB; each flush rewrites at most one block again */
	ck_assert_uint_le(s.bytes_written, 64 * 720 + 8 * BACKING_ALIGN);
	/* an abort drops only what came after the last flush */
	ck_assert_int_eq(put(b, 500, 700, &filler[0].loc), 0);
	backing_abort(b);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.objects, 64);
	/* close it, then every object reads back from the disk */
	fill_segment(b, 1000, filler);
	ck_assert_int_eq(backing_flush(b), 0);
	for (i = 0; i < 64; i++)
		check_obj(b, scratch, i, &o[i]);
	backing_close(b);
	free(scratch);
}
END_TEST

/* The pieces of segment compaction: the sparsest segment, and its live objects. */
START_TEST(test_sparse_segments)
{
	static struct obj a[600], c[600];
	struct backing_object bo;
	struct backing *b;
	void *buf;
	uint32_t na, nc, i, seg, pos, seen;

	ck_assert_int_eq(posix_memalign(&buf, BACKING_ALIGN, SEG), 0);
	b = backing_open(path, 4 * MIB, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	na = fill_segment(b, 0, a);
	ck_assert_int_eq(backing_flush(b), 0);
	nc = fill_segment(b, 5000, c);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(backing_pick_sparse(b, 50, &seg), -ENOENT);	/* both full */
	/* segment 0 down to a quarter, segment 1 to a half */
	for (i = 0; i < na; i++)
		if (i % 4) {
			backing_free(b, a[i].loc, a[i].len);
			a[i].live = false;
		}
	for (i = 0; i < nc; i++)
		if (i % 2) {
			backing_free(b, c[i].loc, c[i].len);
			c[i].live = false;
		}
	ck_assert_int_eq(backing_pick_sparse(b, 60, &seg), 0);
	ck_assert_uint_eq(seg, 0);
	ck_assert_int_eq(backing_pick_sparse(b, 20, &seg), -ENOENT);

	/* the walk finds every object written, dead ones too (the caller asks the
	 * slot table which are live), with the right slot, length and data */
	ck_assert_int_eq(backing_read_segment(b, 0, buf), 0);
	pos = 0;
	seen = 0;
	while (backing_next_object(buf, 0, &pos, &bo)) {
		unsigned char want[2000];

		ck_assert_uint_lt(bo.slot, na);
		ck_assert_uint_eq(bo.loc, a[bo.slot].loc);
		ck_assert_uint_eq(bo.len, 2000);
		ck_assert_uint_eq(bo.codec, bo.slot % 3);
		make_data(want, bo.len, bo.slot, 0);
		ck_assert(memcmp(bo.data, want, bo.len) == 0);
		seen++;
	}
	ck_assert_uint_eq(seen, na);
	/* a damaged object is skipped, the walk goes on */
	((unsigned char *)buf)[a[1].loc + 16 + 7] ^= 1;
	pos = 0;
	seen = 0;
	while (backing_next_object(buf, 0, &pos, &bo)) {
		ck_assert_uint_ne(bo.slot, 1);
		seen++;
	}
	ck_assert_uint_eq(seen, na - 1);
	ck_assert_int_eq(backing_read_segment(b, 99, buf), -EINVAL);
	backing_close(b);
	free(buf);
}
END_TEST

START_TEST(test_concurrent_reads)
{
	pthread_t t[3];
	void *n;
	uint32_t i;

	conc_b = backing_open(path, 16 * MIB, err, sizeof(err));
	ck_assert_msg(conc_b != NULL, "%s", err);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, conc_reader,
						(void *)(uintptr_t)i), 0);
	for (i = 0; i < CONC_OBJ; i++) {
		conc[i].len = 1 + (i * 2654435761u) % BACKING_MAX_DATA;
		require(put(conc_b, i, conc[i].len, &conc[i].loc) == 0);
		conc_published = i + 1;
	}
	for (i = 0; i < 3; i++) {
		pthread_join(t[i], &n);
		ck_assert_uint_gt((uintptr_t)n, 0);
	}
	backing_close(conc_b);
}
END_TEST

static Suite *backing_suite(void)
{
	Suite *s = suite_create("backing");
	TCase *tc;

	tc = tcase_create("crc32c");
	tcase_add_test(tc, test_crc_check_values);
	tcase_add_test(tc, test_crc_matches_bitwise);
	suite_add_tcase(s, tc);

	tc = tcase_create("backing");
	tcase_add_unchecked_fixture(tc, make_topdir, remove_topdir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_open_creates_0600);
	tcase_add_test(tc, test_open_refuses);
	tcase_add_test(tc, test_open_locked_and_discards);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_straddle);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_corruption);
	tcase_add_test(tc, test_free_punch_reuse);
	tcase_add_test(tc, test_deferred_punch);
	tcase_add_test(tc, test_free_before_flush);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_flush_error_abort);
	tcase_add_test(tc, test_concurrent_reads);
	tcase_add_test(tc, test_partial_flushes_pack);
	tcase_add_test(tc, test_sparse_segments);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(backing_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
