/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for the backing file, its checksum and its sealing: CRC-32C
 * check values, the refusals of backing_open() (each leaving the file as it
 * was), the file header, round trips across segments (read from the buffer
 * before the flush and from the disk after it), corruption, moved, replayed
 * and truncated objects caught as -EIO and counted, nonces that change when
 * a segment starts again, segments freed, punched (st_blocks falls) and
 * reused, the size limit, a failing write (RLIMIT_FSIZE) and
 * backing_abort(), reads racing the writer, the key in locked memory, and
 * no allocation by libcrypto per object.  The data tests run three times:
 * AES-256-GCM, ChaCha20-Poly1305 and plain (CRC-32C only).
 *
 * Files live in a temporary directory under /var/tmp, a disk filesystem
 * (tmpfs is refused), made 0700 by mkdtemp as the rules for the backing
 * file's directory want.  Object data is derived from (slot, generation),
 * so any mix-up shows as a mismatch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
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
#include "seal.h"

#define SEG BACKING_SEG_SIZE
#define MIB (1024u * 1024u)
#define HDR BACKING_HDR_SIZE
/* Where segment 0's objects start: after the file header. */
#define SEG0 BACKING_FILE_HDR_SIZE

/* Like ck_assert, without a checkpoint syscall per check in long loops. */
#define require(expr)								\
	do {									\
		if (!(expr))							\
			ck_abort_msg("Assertion '%s' failed", #expr);		\
	} while (0)

static char topdir[256];		/* made and removed by the runner process */
static char tmpdir[300];		/* one per test, inside it */
static char path[320];
static char err[1024];

/* The loop tests run once per mode; `cipher` is the one of this run. */
static const enum seal_cipher ciphers[] = {
	SEAL_AES_256_GCM, SEAL_CHACHA20_POLY1305, SEAL_NONE,
};
#define NMODES (int)(sizeof(ciphers) / sizeof(ciphers[0]))
static enum seal_cipher cipher = SEAL_AES_256_GCM;

/* Heap allocations libcrypto made (CRYPTO_set_mem_functions, in main). */
static _Atomic unsigned long crypto_allocs;

static void *count_malloc(size_t n, const char *file, int line)
{
	crypto_allocs++;
	return malloc(n);
}

static void *count_realloc(void *p, size_t n, const char *file, int line)
{
	crypto_allocs++;
	return realloc(p, n);
}

static void count_free(void *p, const char *file, int line)
{
	free(p);
}

static struct backing *open_b(uint64_t size)
{
	struct backing *b = backing_open(path, size, cipher, err, sizeof(err));

	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_int_eq(backing_cipher(b), cipher);
	return b;
}

static struct backing_reader *reader(struct backing *b)
{
	struct backing_reader *r = backing_reader_create(b);

	ck_assert_ptr_nonnull(r);
	return r;
}

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

static void check_obj(struct backing_reader *rd, uint32_t slot, const struct obj *o)
{
	unsigned char want[BACKING_MAX_DATA];
	const void *data;
	uint16_t len;
	uint8_t codec;
	int r;

	r = backing_read(rd, o->loc, slot, &data, &len, &codec);
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

/* What a file is, to tell that a refused open left it as it was. */
struct snap {
	struct stat st;
	unsigned char *data;
	ssize_t len;
};

static void snap_take(const char *p, struct snap *s)
{
	int fd;

	ck_assert_int_eq(lstat(p, &s->st), 0);
	s->data = malloc((size_t)s->st.st_size + 1);
	ck_assert_ptr_nonnull(s->data);
	s->len = 0;
	if (!S_ISREG(s->st.st_mode))
		return;
	fd = open(p, O_RDONLY | O_NOFOLLOW);
	ck_assert_int_ge(fd, 0);
	s->len = pread(fd, s->data, (size_t)s->st.st_size + 1, 0);
	ck_assert_int_eq(s->len, s->st.st_size);
	close(fd);
}

/* p is still exactly what s saw: same inode, mode, owner, size, times, bytes. */
static void snap_check(const char *p, struct snap *s)
{
	struct snap now;

	snap_take(p, &now);
	ck_assert_uint_eq(now.st.st_ino, s->st.st_ino);
	ck_assert_uint_eq(now.st.st_mode, s->st.st_mode);
	ck_assert_uint_eq(now.st.st_uid, s->st.st_uid);
	ck_assert_int_eq(now.st.st_size, s->st.st_size);
	ck_assert_int_eq(now.st.st_mtim.tv_sec, s->st.st_mtim.tv_sec);
	ck_assert_int_eq(now.st.st_mtim.tv_nsec, s->st.st_mtim.tv_nsec);
	ck_assert_int_eq(now.len, s->len);
	ck_assert(memcmp(now.data, s->data, (size_t)s->len) == 0);
	free(now.data);
	free(s->data);
	s->data = NULL;
}

/* backing_open(p) must fail with errno e, a message holding msg, p untouched. */
static void refused(const char *p, int e, const char *msg)
{
	struct backing *b;
	struct snap s;
	bool existed = lstat(p, &s.st) == 0;

	if (existed)
		snap_take(p, &s);
	errno = 0;
	b = backing_open(p, 8 * MIB, cipher, err, sizeof(err));
	ck_assert_msg(b == NULL, "%s was accepted", p);
	ck_assert_msg(errno == e, "%s: errno %d, not %d (%s)", p, errno, e, err);
	ck_assert_msg(strstr(err, msg) != NULL, "%s: '%s' does not say '%s'", p, err, msg);
	if (existed)
		snap_check(p, &s);
	else
		ck_assert_msg(access(p, F_OK) != 0, "%s was left behind", p);
}

static void make_file(const char *p, mode_t mode, const void *data, size_t len)
{
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, mode);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* The file's size, and whether it starts with our header. */
static bool has_header(const char *p, off_t *size)
{
	char head[BACKING_FILE_HDR_SIZE];
	uint32_t version;
	struct stat st;
	int fd = open(p, O_RDONLY);
	bool ok;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	*size = st.st_size;
	ok = pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
	     !memcmp(head, "zswapfs backing\n", 16);
	memcpy(&version, head + 16, sizeof(version));
	close(fd);
	return ok && version == BACKING_FILE_VERSION;
}

START_TEST(test_open_creates_0600)
{
	struct backing *b;
	struct stat st;
	mode_t old = umask(0);
	off_t size;

	b = open_b(8 * MIB);
	umask(old);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_nlink, 1);
	/* the header is written at once... */
	ck_assert(has_header(path, &size));
	ck_assert_int_eq(size, BACKING_FILE_HDR_SIZE);
	backing_close(b);
	/* ...and kept at exit, the rest truncated */
	ck_assert(has_header(path, &size));
	ck_assert_int_eq(size, BACKING_FILE_HDR_SIZE);
}
END_TEST

START_TEST(test_open_refuses)
{
	char lnk[320], other[320];
	struct backing *b;
	int fd;

	/* a file of ours (an empty one) to point at and to change */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	/* symlink, even to a good file */
	snprintf(lnk, sizeof(lnk), "%s/link", tmpdir);
	ck_assert_int_eq(symlink(path, lnk), 0);
	refused(lnk, ELOOP, "symlink");

	/* directory, FIFO */
	snprintf(other, sizeof(other), "%s/dir", tmpdir);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	refused(other, EINVAL, "not a regular file");
	snprintf(other, sizeof(other), "%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(other, 0600), 0);
	refused(other, EINVAL, "not a regular file");

	/* writable or readable by others or the group */
	ck_assert_int_eq(chmod(path, 0602), 0);
	refused(path, EPERM, "writable by others");
	ck_assert_int_eq(chmod(path, 0620), 0);
	refused(path, EPERM, "writable by its group");
	ck_assert_int_eq(chmod(path, 0604), 0);
	refused(path, EPERM, "readable by others");
	ck_assert_int_eq(chmod(path, 0640), 0);
	refused(path, EPERM, "readable by its group");
	ck_assert_int_eq(chmod(path, 0600), 0);

	/* a second name for it */
	snprintf(other, sizeof(other), "%s/hardlink", tmpdir);
	ck_assert_int_eq(link(path, other), 0);
	refused(path, EPERM, "2 hard links");
	refused(other, EPERM, "2 hard links");
	ck_assert_int_eq(unlink(other), 0);

	/* owned by someone else (only root can give a file away) */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(path, 1, 1), 0);
		refused(path, EPERM, "owned by");
		ck_assert_int_eq(chown(path, 0, 0), 0);
	}

	/* not a file name */
	snprintf(other, sizeof(other), "%s/", tmpdir);
	refused(other, EINVAL, "not a file name");

	/* smaller than one segment */
	b = backing_open(path, SEG - 1, cipher, err, sizeof(err));
	ck_assert_ptr_null(b);
	ck_assert_int_eq(errno, EINVAL);

	/* and after all that, the file itself is fine */
	b = open_b(8 * MIB);
	backing_close(b);
}
END_TEST

/* The directory must be ours and closed to others; nothing is created in one that is not. */
START_TEST(test_open_refuses_directory)
{
	static const struct {
		mode_t mode;
		const char *msg;
	} bad[] = {
		{ 0770, "writable by its group" },
		{ 0730, "writable by its group" },
		{ 0703, "writable by others" },
		{ 01777, "writable by others" },
	};
	struct backing *b;
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(chmod(tmpdir, bad[i].mode), 0);
		refused(path, EPERM, bad[i].msg);
	}
	/* /var/tmp, like /tmp, is everyone's */
	refused("/var/tmp/zswapfs-backing-never-made", EPERM, "writable by others");
	if (geteuid() == 0) {
		ck_assert_int_eq(chmod(tmpdir, 0700), 0);
		ck_assert_int_eq(chown(tmpdir, 1, 1), 0);
		refused(path, EPERM, "belongs to uid 1");
		ck_assert_int_eq(chown(tmpdir, 0, 0), 0);
	}
	/* a missing directory */
	snprintf(path, sizeof(path), "%s/nodir/backing", tmpdir);
	refused(path, ENOENT, "nodir");
	snprintf(path, sizeof(path), "%s/backing", tmpdir);
	/* 0755 is fine: nobody else may add or rename names in it */
	ck_assert_int_eq(chmod(tmpdir, 0755), 0);
	b = open_b(8 * MIB);
	backing_close(b);
}
END_TEST

/* A file that is not empty and not ours is refused and left exactly as it was. */
START_TEST(test_open_refuses_foreign_file)
{
	char text[4096], hdr[64];
	uint32_t version = BACKING_FILE_VERSION + 1;
	struct backing *b;
	ssize_t n = 0;
	off_t size;
	int fd;

	/* what a typo would name: a copy of a system file */
	fd = open("/etc/os-release", O_RDONLY);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text));
		close(fd);
	}
	if (n <= 0)
		n = snprintf(text, sizeof(text), "NAME=\"Some system\"\nID=some\n");
	make_file(path, 0600, text, (size_t)n);
	refused(path, EEXIST, "not a zswapfs backing file");

	/* one byte, or a whole block of zeros, is not ours either */
	ck_assert_int_eq(unlink(path), 0);
	make_file(path, 0600, "x", 1);
	refused(path, EEXIST, "not a zswapfs backing file");
	ck_assert_int_eq(unlink(path), 0);
	memset(text, 0, sizeof(text));
	make_file(path, 0600, text, sizeof(text));
	refused(path, EEXIST, "not a zswapfs backing file");

	/* our magic, another format version */
	ck_assert_int_eq(unlink(path), 0);
	b = open_b(8 * MIB);
	backing_close(b);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, &version, sizeof(version), 16), (ssize_t)sizeof(version));
	close(fd);
	refused(path, EEXIST, "another zswapfs format");
	/* and a wrong magic with the right version */
	version = BACKING_FILE_VERSION;
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, &version, sizeof(version), 16), (ssize_t)sizeof(version));
	ck_assert_int_eq(pread(fd, hdr, 16, 0), 16);
	hdr[0] ^= 1;
	ck_assert_int_eq(pwrite(fd, hdr, 16, 0), 16);
	close(fd);
	refused(path, EEXIST, "not a zswapfs backing file");
	/* put right, it is ours again */
	hdr[0] ^= 1;
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, hdr, 16, 0), 16);
	close(fd);
	b = open_b(8 * MIB);
	backing_close(b);
	ck_assert(has_header(path, &size));
}
END_TEST

/* Ours (header first, then what a killed daemon left): reused, emptied to the header. */
START_TEST(test_open_locked_and_discards)
{
	struct backing *b, *b2;
	char junk[65536];
	off_t size;
	int fd;

	b = open_b(8 * MIB);
	backing_close(b);
	fd = open(path, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	memset(junk, 'x', sizeof(junk));
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);

	b = open_b(8 * MIB);
	ck_assert(has_header(path, &size));
	ck_assert_int_eq(size, BACKING_FILE_HDR_SIZE);	/* the last run's swap is gone */

	b2 = backing_open(path, 8 * MIB, cipher, err, sizeof(err));
	ck_assert_ptr_null(b2);
	ck_assert_ptr_nonnull(strstr(err, "in use"));
	backing_close(b);
}
END_TEST

/* tmpfs pages may be swapped out themselves: no backing file there. */
START_TEST(test_open_refuses_tmpfs)
{
	char dir[64] = "/dev/shm/check_backing.XXXXXX", p[128];

	if (!mkdtemp(dir)) {
		/* no /dev/shm: nothing to try here (backing_trust.sh mounts one) */
		return;
	}
	snprintf(p, sizeof(p), "%s/backing", dir);
	refused(p, EINVAL, "is on tmpfs");
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- data --------------------------------------------------------------------- */

#define NOBJ 3000

START_TEST(test_round_trip)
{
	struct obj *o = calloc(NOBJ, sizeof(*o));
	struct backing_stats s;
	struct backing *b;
	struct backing_reader *rd;
	uint64_t live = 0, seed = 12345;
	uint32_t i;

	cipher = ciphers[_i];

	b = open_b(16 * MIB);
	rd = reader(b);
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
		live += (HDR + o[i].len + 15) & ~15u;
		/* readable at once, from the buffer */
		check_obj(rd, i, &o[i]);
		/* and an earlier one, maybe already on disk */
		check_obj(rd, i / 2, &o[i / 2]);
	}
	ck_assert_int_eq(backing_flush(b), 0);
	for (i = 0; i < NOBJ; i++)
		check_obj(rd, i, &o[i]);

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
	backing_reader_destroy(rd);
	backing_close(b);
	free(o);
}
END_TEST

/*
 * The worst-placed object: header 16 bytes before a block's end, 4096 bytes
 * of data, three blocks.  a fills segment 0 from the end of the file header
 * up to there: 32 + 4048 bytes.
 */
START_TEST(test_straddle)
{
	struct backing *b;
	struct backing_reader *rd;
	struct obj a = { .len = 4048 }, c = { .len = BACKING_MAX_DATA };

	cipher = ciphers[_i];

	b = open_b(4 * MIB);
	rd = reader(b);
	ck_assert_int_eq(put(b, 1, a.len, &a.loc), 0);
	ck_assert_uint_eq(a.loc, SEG0);
	ck_assert_int_eq(put(b, 2, c.len, &c.loc), 0);
	ck_assert_uint_eq(c.loc, SEG0 + 4080);
	/* from the open segment's buffer, then from the disk */
	check_obj(rd, 1, &a);
	check_obj(rd, 2, &c);
	ck_assert_int_eq(backing_flush(b), 0);
	check_obj(rd, 1, &a);
	check_obj(rd, 2, &c);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/*
 * With the length the slot knows, a read takes only the blocks the object
 * covers; a wrong length is -EIO (counted), never the data: shorter or
 * longer by a byte, and one that would read too few blocks for the object.
 */
static int read_len(struct backing_reader *rd, const struct obj *o, uint32_t slot,
		    uint16_t want)
{
	unsigned char expect[BACKING_MAX_DATA];
	const void *data;
	uint16_t len;
	uint8_t codec;
	int r = backing_read_len(rd, o->loc, slot, want, &data, &len, &codec);

	if (r)
		return r;
	ck_assert_uint_eq(len, o->len);
	make_data(expect, len, slot, 0);
	ck_assert(!memcmp(data, expect, len));
	return 0;
}

static uint64_t bytes_read(struct backing *b)
{
	struct backing_stats s;

	backing_get_stats(b, &s);
	return s.bytes_read;
}

START_TEST(test_read_len)
{
	struct backing *b;
	struct backing_reader *rd;
	/* a: one block from SEG0; c: 32 bytes before a block's end, three */
	struct obj a = { .len = 1000 }, f = { .len = 4080 - 1040 - 32 },
		   c = { .len = BACKING_MAX_DATA }, d = { .len = 5000 - 4096 };
	static struct obj rest[1024];
	struct backing_stats s0, s1;
	uint64_t r0;

	cipher = ciphers[_i];

	b = open_b(4 * MIB);
	rd = reader(b);
	ck_assert_int_eq(put(b, 1, a.len, &a.loc), 0);
	ck_assert_int_eq(put(b, 2, f.len, &f.loc), 0);
	ck_assert_int_eq(put(b, 3, c.len, &c.loc), 0);
	ck_assert_uint_eq(c.loc, SEG0 + 4080);
	ck_assert_int_eq(put(b, 4, d.len, &d.loc), 0);
	/* a full segment behind them: theirs is written and closed */
	ck_assert_uint_gt(fill_segment(b, 100, rest), 0);
	ck_assert_int_eq(backing_flush(b), 0);

	r0 = bytes_read(b);
	ck_assert_int_eq(read_len(rd, &a, 1, a.len), 0);
	ck_assert_uint_eq(bytes_read(b) - r0, 4096);
	r0 = bytes_read(b);
	ck_assert_int_eq(read_len(rd, &c, 3, c.len), 0);
	ck_assert_uint_eq(bytes_read(b) - r0, 3 * 4096);
	/* without a length: the blocks of the largest object */
	r0 = bytes_read(b);
	ck_assert_int_eq(read_len(rd, &a, 1, 0), 0);
	ck_assert_uint_eq(bytes_read(b) - r0, 2 * 4096);

	backing_get_stats(b, &s0);
	ck_assert_int_eq(read_len(rd, &a, 1, a.len - 1), -EIO);
	ck_assert_int_eq(read_len(rd, &a, 1, a.len + 1), -EIO);
	/* c needs three blocks; a length that fits in one reads one */
	ck_assert_int_eq(read_len(rd, &c, 3, 16), -EIO);
	ck_assert_int_eq(read_len(rd, &d, 4, 1), -EIO);
	ck_assert_int_eq(read_len(rd, &c, 3, BACKING_MAX_DATA + 1), -EIO);
	backing_get_stats(b, &s1);
	ck_assert_uint_eq(s1.read_errors, s0.read_errors + 5);
	/* and the right lengths still read */
	ck_assert_int_eq(read_len(rd, &f, 2, f.len), 0);
	ck_assert_int_eq(read_len(rd, &d, 4, d.len), 0);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

START_TEST(test_bad_args)
{
	struct backing *b;
	unsigned char d[16] = { 0 };
	uint64_t loc;

	cipher = ciphers[_i];

	b = open_b(4 * MIB);
	ck_assert_int_eq(backing_append(b, 1, 0, d, 0, &loc), -EINVAL);
	ck_assert_int_eq(backing_append(b, 1, 0, d, BACKING_MAX_DATA + 1, &loc), -EINVAL);
	backing_close(b);
}
END_TEST

/* Flip the bits of mask in the byte at off of the file, behind the module's back. */
static void flip(off_t off, unsigned char mask)
{
	unsigned char byte;
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &byte, 1, off), 1);
	byte ^= mask;
	ck_assert_int_eq(pwrite(fd, &byte, 1, off), 1);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* Copy len bytes of the file from one offset to another. */
static void copy_bytes(off_t from, off_t to, size_t len)
{
	unsigned char buf[BACKING_HDR_SIZE + BACKING_MAX_DATA];
	int fd = open(path, O_RDWR);

	ck_assert_uint_le(len, sizeof(buf));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, from), (ssize_t)len);
	ck_assert_int_eq(pwrite(fd, buf, len, to), (ssize_t)len);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

static int read_obj(struct backing_reader *rd, uint64_t loc, uint32_t slot)
{
	const void *data;
	uint16_t len;
	uint8_t codec;

	return backing_read(rd, loc, slot, &data, &len, &codec);
}

/* Every field of the header, the data and the tag: one bit wrong is -EIO, counted. */
START_TEST(test_tamper)
{
	/* byte of the object, and whether a sealed file finds it by the tag */
	static const struct {
		unsigned int off;
		unsigned char mask;
		bool by_tag;
		const char *what;
	} hit[] = {
		{ 0, 0x01, false, "magic" },
		{ 4, 0x80, false, "crc" },
		{ 8, 0x01, false, "slot" },
		{ 12, 0x01, true, "len (1000 -> 1001)" },
		{ 13, 0x01, true, "len (1000 -> 744)" },
		{ 14, 0x04, true, "codec" },
		{ 15, 0x02, false, "flags" },
		{ 16, 0x01, true, "tag, first byte" },
		{ 31, 0x80, true, "tag, last byte" },
		{ HDR, 0x01, true, "data, first byte" },
		{ HDR + 500, 0x10, true, "data, a middle byte" },
		{ HDR + 999, 0x80, true, "data, last byte" },
	};
	enum { N = sizeof(hit) / sizeof(hit[0]) };
	static struct obj filler[600];
	struct backing_stats s0, s;
	struct backing_reader *rd;
	struct backing *b;
	struct obj o[N + 1];
	unsigned int i, by_tag = 0;
	bool sealed;

	cipher = ciphers[_i];
	sealed = cipher != SEAL_NONE;
	b = open_b(4 * MIB);
	rd = reader(b);
	for (i = 0; i <= N; i++) {
		o[i].len = 1000;
		ck_assert_int_eq(put(b, i, o[i].len, &o[i].loc), 0);
	}
	/* wrong slot, misaligned and out-of-range locations, unflushed */
	ck_assert_int_eq(read_obj(rd, o[0].loc, 99), -EIO);
	ck_assert_int_eq(read_obj(rd, o[1].loc + 16, 1), -EIO);
	ck_assert_int_eq(read_obj(rd, 8, 0), -EIO);		/* the file header */
	ck_assert_int_eq(read_obj(rd, 0, 0), -EIO);
	ck_assert_int_eq(read_obj(rd, 4 * MIB, 0), -EIO);
	ck_assert_int_eq(read_obj(rd, 3 * MIB, 0), -EIO);
	/* fill the segment so that the flush closes it: reads then go to the disk */
	fill_segment(b, 100, filler);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(read_obj(rd, o[0].loc, 99), -EIO);
	ck_assert_int_eq(read_obj(rd, o[1].loc + 16, 1), -EIO);
	for (i = 0; i <= N; i++)
		check_obj(rd, i, &o[i]);

	backing_get_stats(b, &s0);
	for (i = 0; i < N; i++) {
		/* in plain files the tag is zeros, and must stay so */
		flip((off_t)o[i].loc + hit[i].off, hit[i].mask);
		ck_assert_msg(read_obj(rd, o[i].loc, i) == -EIO, "%s: %s flipped, not noticed",
			      seal_cipher_name(cipher), hit[i].what);
		by_tag += sealed && hit[i].by_tag;
	}
	check_obj(rd, N, &o[N]);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.read_errors, s0.read_errors + N);
	ck_assert_uint_eq(s.auth_failures, s0.auth_failures + by_tag);
	ck_assert_uint_eq(s.reads, s0.reads + 1);
	if (!sealed)
		ck_assert_uint_eq(s.auth_failures, 0);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/*
 * The store keeps a page's dictionary generation in bits 4..6 of the codec
 * byte (store.c, slot_coding): every value comes back as written, and a
 * flipped generation bit is caught (by the tag when sealed, by the CRC
 * otherwise): read with another dictionary, a page could decode to wrong
 * bytes rather than fail.
 */
START_TEST(test_generation_in_header)
{
	enum { N = 3 * 8 };
	unsigned char data[1000], want[1000];
	struct backing_stats s0, s;
	struct backing_reader *rd;
	struct backing *b;
	static struct obj filler[600];
	uint64_t loc[N];
	const void *got;
	uint16_t len;
	uint8_t coding;
	unsigned int i;

	cipher = ciphers[_i];
	b = open_b(4 * MIB);
	rd = reader(b);
	for (i = 0; i < N; i++) {
		make_data(data, sizeof(data), i, 0);
		ck_assert_int_eq(backing_append(b, i, (uint8_t)(i % 3 | (i / 3) << 4), data,
						sizeof(data), &loc[i]), 0);
	}
	fill_segment(b, 100, filler);
	ck_assert_int_eq(backing_flush(b), 0);
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(backing_read(rd, loc[i], i, &got, &len, &coding), 0);
		ck_assert_uint_eq(coding, i % 3 | (i / 3) << 4);
		make_data(want, sizeof(want), i, 0);
		ck_assert(len == sizeof(want) && !memcmp(got, want, sizeof(want)));
	}
	backing_get_stats(b, &s0);
	for (i = 0; i < 3; i++) {
		flip((off_t)loc[i + 3] + 14, (unsigned char)(0x10 << i));
		ck_assert_msg(backing_read(rd, loc[i + 3], i + 3, &got, &len, &coding) == -EIO,
			      "%s: generation bit %u flipped, not noticed",
			      seal_cipher_name(cipher), 4 + i);
	}
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.read_errors, s0.read_errors + 3);
	ck_assert_uint_eq(s.auth_failures, s0.auth_failures + (cipher != SEAL_NONE ? 3 : 0));
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/*
 * Objects moved on disk: a slot's object copied over another object of the
 * same slot and size elsewhere in its segment, and an object copied to the
 * same offset of another segment, over an object of the same slot, size and
 * data.  Whole, well-formed, of the right slot: only the place tells them
 * apart.
 */
START_TEST(test_moved)
{
	static struct obj a[600], c[600], d[600];
	unsigned char ca[HDR + 2000], cc[HDR + 2000];
	struct backing_stats s0, s;
	struct backing_reader *rd;
	struct backing *b;
	struct obj x, y;
	uint32_t na, nc, k = 7;
	int fd;

	cipher = ciphers[_i];
	b = open_b(8 * MIB);
	rd = reader(b);
	fill_segment(b, 0, d);			/* segment 0 starts after the header */
	ck_assert_int_eq(backing_flush(b), 0);
	/* the same slots, sizes and data in segments 1 and 2: the same offsets */
	na = fill_segment(b, 100, a);
	ck_assert_int_eq(backing_flush(b), 0);
	nc = fill_segment(b, 100, c);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_uint_eq(nc, na);
	ck_assert_uint_eq(a[k].loc / SEG, 1);
	ck_assert_uint_eq(c[k].loc / SEG, 2);
	ck_assert_uint_eq(a[k].loc % SEG, c[k].loc % SEG);
	/* sealed, the same page at the same offset of two segments differs */
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, ca, sizeof(ca), (off_t)a[k].loc), (ssize_t)sizeof(ca));
	ck_assert_int_eq(pread(fd, cc, sizeof(cc), (off_t)c[k].loc), (ssize_t)sizeof(cc));
	close(fd);
	ck_assert(memcmp(ca, cc, 4) == 0 && memcmp(ca + 8, cc + 8, 8) == 0);
	ck_assert_int_eq(memcmp(ca + 16, cc + 16, sizeof(ca) - 16) != 0, cipher != SEAL_NONE);
	/* slot 5000 twice in segment 3, closed: reads go to the disk */
	x.len = y.len = 1500;
	ck_assert_int_eq(put(b, 5000, x.len, &x.loc), 0);
	ck_assert_int_eq(put(b, 5000, y.len, &y.loc), 0);
	fill_segment(b, 6000, d);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_uint_eq(y.loc / SEG, 3);
	check_obj(rd, 5000, &x);
	check_obj(rd, 5000, &y);
	check_obj(rd, 100 + k, &c[k]);

	backing_get_stats(b, &s0);
	copy_bytes((off_t)x.loc, (off_t)y.loc, HDR + 1500);
	ck_assert_int_eq(read_obj(rd, y.loc, 5000), -EIO);
	check_obj(rd, 5000, &x);
	copy_bytes((off_t)a[k].loc, (off_t)c[k].loc, HDR + 2000);
	ck_assert_int_eq(read_obj(rd, c[k].loc, 100 + k), -EIO);
	check_obj(rd, 100 + k, &a[k]);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.read_errors, s0.read_errors + 2);
	ck_assert_uint_eq(s.auth_failures, s0.auth_failures + (cipher != SEAL_NONE ? 2 : 0));
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/*
 * A segment put back as it was in an earlier opening (written, freed,
 * opened and written again, then the old bytes restored): every object is
 * well-formed, of its slot and at its place, and fails its tag.  A CRC
 * cannot see this (a plain file takes the old data): only the sealed modes
 * run it.
 */
START_TEST(test_replay)
{
	static struct obj a[600], c[600], d[600];
	struct backing_stats s0, s;
	struct backing_reader *rd;
	struct backing *b;
	unsigned char *old;
	uint32_t na, nc, i;
	int fd;

	cipher = ciphers[_i];
	if (cipher == SEAL_NONE)
		return;
	b = open_b(8 * MIB);
	rd = reader(b);
	fill_segment(b, 0, d);			/* segment 0: not the one */
	ck_assert_int_eq(backing_flush(b), 0);
	na = fill_segment(b, 100, a);		/* segment 1, first opening */
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_uint_eq(a[0].loc, SEG);
	old = malloc(SEG);
	ck_assert_ptr_nonnull(old);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, old, SEG, SEG), SEG);
	/* it dies, is punched, and is the lowest free one again */
	for (i = 0; i < na; i++)
		backing_free(b, a[i].loc, a[i].len);
	fill_segment(b, 3000, d);		/* segment 2, open: close it */
	ck_assert_int_eq(backing_flush(b), 0);
	nc = fill_segment(b, 100, c);		/* segment 1 again: same slots, places */
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_uint_eq(nc, na);
	for (i = 0; i < nc; i++) {
		ck_assert_uint_eq(c[i].loc, a[i].loc);
		check_obj(rd, 100 + i, &c[i]);
	}
	/* the old bytes back; the new ones were the same data and headers */
	ck_assert_int_eq(pwrite(fd, old, SEG, SEG), SEG);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	free(old);
	backing_get_stats(b, &s0);
	for (i = 0; i < nc; i++)
		require(read_obj(rd, c[i].loc, 100 + i) == -EIO);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.auth_failures, s0.auth_failures + nc);
	ck_assert_uint_eq(s.read_errors, s0.read_errors + nc);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/*
 * Nonces do not repeat: an open segment whose objects all died starts again
 * at the same offsets, under a new sequence, so the same data at the same
 * place is sealed differently (in a plain file it is the same bytes: the
 * test can tell).  And two segments' objects at the same offset differ too.
 */
START_TEST(test_nonce_changes)
{
	unsigned char first[HDR + 1000], second[HDR + 1000];
	struct backing_reader *rd;
	struct backing *b;
	struct obj x = { .len = 1000 }, y = { .len = 1000 };
	bool sealed;
	int fd;

	cipher = ciphers[_i];
	sealed = cipher != SEAL_NONE;
	b = open_b(8 * MIB);
	rd = reader(b);
	ck_assert_int_eq(put(b, 42, x.len, &x.loc), 0);
	ck_assert_int_eq(backing_flush(b), 0);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, first, sizeof(first), (off_t)x.loc), (ssize_t)sizeof(first));
	backing_free(b, x.loc, x.len);
	ck_assert_int_eq(backing_flush(b), 0);		/* all dead: starts again */
	ck_assert_int_eq(put(b, 42, y.len, &y.loc), 0);
	ck_assert_uint_eq(y.loc, x.loc);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(pread(fd, second, sizeof(second), (off_t)y.loc),
			 (ssize_t)sizeof(second));
	check_obj(rd, 42, &y);
	/* the header's plain fields are the same; tag and data are not */
	ck_assert(memcmp(first, second, 16) == 0);
	ck_assert_int_eq(memcmp(first + 16, second + 16, sizeof(first) - 16) != 0, sealed);
	close(fd);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/* A file cut short: the objects past the cut are -EIO, the others fine. */
START_TEST(test_truncated)
{
	static struct obj a[600], c[600];
	struct backing_stats s0, s;
	struct backing_reader *rd;
	struct backing *b;
	uint32_t na, nc, i, cut;
	int fd;

	cipher = ciphers[_i];
	b = open_b(8 * MIB);
	rd = reader(b);
	na = fill_segment(b, 0, a);
	ck_assert_int_eq(backing_flush(b), 0);
	nc = fill_segment(b, 1000, c);
	ck_assert_int_eq(backing_flush(b), 0);
	/* through the middle of segment 1's object 100 */
	cut = 100;
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)c[cut].loc + HDR + 1000), 0);
	backing_get_stats(b, &s0);
	for (i = 0; i < na; i++)
		check_obj(rd, i, &a[i]);
	for (i = 0; i < cut; i++)
		check_obj(rd, 1000 + i, &c[i]);
	for (i = cut; i < nc; i++)
		require(read_obj(rd, c[i].loc, 1000 + i) == -EIO);
	/* down to the header: nothing is left */
	ck_assert_int_eq(ftruncate(fd, BACKING_FILE_HDR_SIZE), 0);
	close(fd);
	for (i = 0; i < na; i++)
		require(read_obj(rd, a[i].loc, i) == -EIO);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.read_errors, s0.read_errors + (nc - cut) + na);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/* kB of locked memory (VmLck in /proc/self/status). */
static unsigned long vm_locked_kb(void)
{
	char line[256];
	unsigned long kb = ~0ul;
	FILE *f = fopen("/proc/self/status", "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %lu kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_uint_ne(kb, ~0ul);
	return kb;
}

/* AddressSanitizer makes mlock() a no-op that succeeds (as harden.c notes). */
#if defined(__SANITIZE_ADDRESS__)
#define MLOCK_WORKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLOCK_WORKS 0
#endif
#endif
#ifndef MLOCK_WORKS
#define MLOCK_WORKS 1
#endif

/* The key sits in a locked page of its own, which goes at close. */
START_TEST(test_key_locked)
{
	unsigned long before, during, after;
	struct backing *b;

	cipher = ciphers[_i];
	if (!MLOCK_WORKS)
		return;
	before = vm_locked_kb();
	b = open_b(4 * MIB);
	during = vm_locked_kb();
	backing_close(b);
	after = vm_locked_kb();
	if (cipher == SEAL_NONE)
		ck_assert_uint_eq(during, before);
	else
		ck_assert_uint_ge(during, before + 4);
	ck_assert_uint_eq(after, before);
}
END_TEST

/* Appends, flushes, reads and walks allocate nothing in libcrypto. */
START_TEST(test_no_alloc)
{
	static struct obj o[3000];
	struct backing_reader *rd;
	struct backing_object bo;
	struct backing *b;
	unsigned long a0;
	uint32_t i, pos, seen = 0;
	void *buf;

	cipher = ciphers[_i];
	ck_assert_int_eq(posix_memalign(&buf, BACKING_ALIGN, SEG), 0);
	b = open_b(8 * MIB);
	rd = reader(b);
	/* a first round trip, for anything made on first use */
	o[0].len = 100;
	ck_assert_int_eq(put(b, 0, o[0].len, &o[0].loc), 0);
	check_obj(rd, 0, &o[0]);
	a0 = crypto_allocs;
	for (i = 1; i < 3000; i++) {
		o[i].len = (uint16_t)(1 + i % BACKING_MAX_DATA);
		require(put(b, i, o[i].len, &o[i].loc) == 0);
		check_obj(rd, i, &o[i]);
	}
	ck_assert_int_eq(backing_flush(b), 0);
	for (i = 0; i < 3000; i++)
		check_obj(rd, i, &o[i]);
	ck_assert_int_eq(backing_read_segment(b, 1, buf), 0);
	pos = 0;
	while (backing_next_object(rd, buf, 1, &pos, &bo))
		seen++;
	ck_assert_uint_gt(seen, 100);
	ck_assert_uint_eq(crypto_allocs, a0);
	backing_reader_destroy(rd);
	backing_close(b);
	free(buf);
}
END_TEST

/* The seal module on its own: round trip in place and not, and what must fail. */
START_TEST(test_seal_api)
{
	enum seal_cipher c = ciphers[_i];
	uint8_t nonce[SEAL_NONCE_SIZE] = { 1, 2, 3 }, tag[SEAL_TAG_SIZE], ad[20] = { 9 };
	unsigned char plain[4096], sealed[4096], back[4096];
	struct seal_key *k, *k2;
	struct seal_ctx *ctx, *ctx2;

	if (c == SEAL_NONE)
		return;
	make_data(plain, sizeof(plain), 1, 2);
	k = seal_key_create(c);
	k2 = seal_key_create(c);
	ck_assert(k && k2);
	ck_assert_int_eq(seal_key_cipher(k), c);
	ctx = seal_ctx_create(k);
	ctx2 = seal_ctx_create(k2);
	ck_assert(ctx && ctx2);
	ck_assert_int_eq(seal_encrypt(ctx, nonce, ad, sizeof(ad), plain, sealed, 4096, tag), 0);
	ck_assert(memcmp(plain, sealed, 4096) != 0);
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), sealed, back, 4096, tag), 0);
	ck_assert(memcmp(plain, back, 4096) == 0);
	/* in place */
	memcpy(back, sealed, 4096);
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), back, back, 4096, tag), 0);
	ck_assert(memcmp(plain, back, 4096) == 0);
	/* a shorter message, another length */
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), sealed, back, 4095, tag),
			 -EBADMSG);
	/* another nonce, other authenticated data, another key, a flipped tag */
	nonce[11] ^= 1;
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), sealed, back, 4096, tag),
			 -EBADMSG);
	nonce[11] ^= 1;
	ad[19] ^= 1;
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), sealed, back, 4096, tag),
			 -EBADMSG);
	ad[19] ^= 1;
	ck_assert_int_eq(seal_decrypt(ctx2, nonce, ad, sizeof(ad), sealed, back, 4096, tag),
			 -EBADMSG);
	tag[0] ^= 1;
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), sealed, back, 4096, tag),
			 -EBADMSG);
	tag[0] ^= 1;
	/* and still fine after all those failures */
	ck_assert_int_eq(seal_decrypt(ctx, nonce, ad, sizeof(ad), sealed, back, 4096, tag), 0);
	ck_assert(memcmp(plain, back, 4096) == 0);
	ck_assert_str_eq(seal_cipher_name(c), c == SEAL_AES_256_GCM ? "aes-256-gcm" :
					      "chacha20-poly1305");
	seal_ctx_destroy(ctx2);
	seal_ctx_destroy(ctx);
	seal_key_destroy(k2);
	seal_key_destroy(k);
	/* the automatic choice is one of the two */
	c = seal_fastest();
	ck_assert(c == SEAL_AES_256_GCM || c == SEAL_CHACHA20_POLY1305);
}
END_TEST

/*
 * A read without the slot lock (backing_read_try) is only good while the
 * object's segment stays in the opening it read: backing_read_current says
 * so, and says no once the segment was punched, and again once it is
 * opened anew with an object of the same slot at the same place.  A failed
 * try is not counted.
 */
START_TEST(test_read_current)
{
	static struct obj a[600], c[600];
	struct backing_stats s0, s1;
	struct backing *b;
	struct backing_reader *rd, *old;
	struct obj first, again = { .len = 100 };
	const void *data;
	uint16_t len;
	uint8_t codec;
	uint32_t na, i;

	cipher = ciphers[_i];

	b = open_b(8 * MIB);
	rd = reader(b);
	old = reader(b);
	na = fill_segment(b, 0, a);
	ck_assert_int_eq(backing_flush(b), 0);
	fill_segment(b, 10000, c);
	ck_assert_int_eq(backing_flush(b), 0);
	first = a[0];
	/* the object as it is: read, and current */
	ck_assert_int_eq(backing_read_try(rd, first.loc, 0, first.len, &data, &len, &codec), 0);
	ck_assert(backing_read_current(rd, first.loc));
	ck_assert_int_eq(backing_read_try(old, first.loc, 0, first.len, &data, &len, &codec), 0);
	/* its segment dies and is punched: no longer */
	for (i = 0; i < na; i++)
		backing_free(b, a[i].loc, a[i].len);
	ck_assert(!backing_read_current(rd, first.loc));
	backing_get_stats(b, &s0);
	ck_assert_int_eq(backing_read_try(rd, first.loc, 0, first.len, &data, &len, &codec),
			 -EIO);
	backing_get_stats(b, &s1);
	ck_assert_uint_eq(s1.read_errors, s0.read_errors);
	ck_assert_uint_eq(s1.auth_failures, s0.auth_failures);
	/* opened again (lowest free first) with slot 0 at the same place */
	fill_segment(b, 20000, c);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(put(b, 0, again.len, &again.loc), 0);
	ck_assert_uint_eq(again.loc, first.loc);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(backing_read_try(rd, again.loc, 0, again.len, &data, &len, &codec), 0);
	ck_assert(backing_read_current(rd, again.loc));
	/* a reader whose last read was of the first opening does not take
	 * the second, though slot and place are the same */
	ck_assert(!backing_read_current(old, first.loc));
	backing_reader_destroy(old);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

START_TEST(test_free_punch_reuse)
{
	static struct obj a[600], c[600], d[600];
	struct backing_stats s;
	struct backing *b;
	struct backing_reader *rd;
	uint64_t blocks_full, blocks_punched;
	uint32_t na, nc, nd, i;

	cipher = ciphers[_i];

	b = open_b(8 * MIB);
	rd = reader(b);
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
	check_obj(rd, 0, &a[0]);
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
		check_obj(rd, 10000 + i, &c[i]);

	/* segment 2 is open; the next one after it is segment 0 again, lowest first */
	nd = fill_segment(b, 20000, d);
	ck_assert_uint_eq(d[0].loc / SEG, 2);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(put(b, 30000, 100, &a[0].loc), 0);
	ck_assert_uint_eq(a[0].loc, SEG0);
	a[0].len = 100;
	ck_assert_int_eq(backing_flush(b), 0);
	check_obj(rd, 30000, &a[0]);
	for (i = 0; i < nd; i++)
		check_obj(rd, 20000 + i, &d[i]);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

START_TEST(test_free_before_flush)
{
	static struct obj a[600];
	struct backing_stats s, s2;
	struct backing *b;
	uint32_t n, i;

	cipher = ciphers[_i];

	b = open_b(4 * MIB);
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
	ck_assert_uint_eq(file_blocks() * 512, BACKING_FILE_HDR_SIZE);	/* the header only */
	ck_assert_int_eq(put(b, 5, 10, &a[0].loc), 0);
	ck_assert_uint_eq(a[0].loc, SEG0);
	backing_close(b);
}
END_TEST

START_TEST(test_full)
{
	static struct obj a[3][600];
	struct backing_stats s;
	struct backing *b;
	struct backing_reader *rd;
	struct obj x = { .len = 50 };
	uint32_t n[3], i;

	cipher = ciphers[_i];

	b = open_b(3 * MIB + 12345);	/* 3 segments */
	rd = reader(b);
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
	check_obj(rd, 7777, &x);
	for (i = 0; i < n[2]; i++)
		check_obj(rd, 2000 + i, &a[2][i]);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.write_errors, 0);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

START_TEST(test_flush_error_abort)
{
	static struct obj a[600], c[600];
	struct rlimit rl = { .rlim_cur = SEG + SEG / 2, .rlim_max = RLIM_INFINITY };
	struct backing_stats s0, s;
	struct backing *b;
	struct backing_reader *rd;
	uint32_t na, nc, i;

	cipher = ciphers[_i];

	/* check runs each test in its own process: the limit dies with it */
	signal(SIGXFSZ, SIG_IGN);
	b = open_b(4 * MIB);
	rd = reader(b);
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
	check_obj(rd, 5000 + nc - 1, &c[nc - 1]);
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

		ck_assert_int_eq(backing_read(rd, c[0].loc, 5000, &data, &len, &codec),
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
		check_obj(rd, 5000 + i, &c[i]);
	for (i = 0; i < na; i++)
		check_obj(rd, i, &a[i]);
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
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/*
 * With backing_defer_punch() a thread serving swap never punches: the
 * segment its free emptied waits, counted as used, until the writer reaps
 * it (backing_reap(), or its next flush).  A reaped segment is reused under
 * a new sequence like any punched one.
 */
START_TEST(test_deferred_punch)
{
	static struct obj a[600], c[600], d[600];
	struct backing_stats s;
	struct backing *b;
	struct backing_reader *rd;
	uint64_t blocks_full;
	uint32_t na, nc, nd, i;

	cipher = ciphers[_i];

	b = open_b(8 * MIB);
	rd = reader(b);
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
	for (i = 0; i < nc; i++)
		check_obj(rd, 10000 + i, &c[i]);

	/* segment 1 dies too; the next flush reaps it before it opens one */
	for (i = 0; i < nc; i++)
		backing_free(b, c[i].loc, c[i].len);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 1);
	ck_assert_int_eq(backing_flush(b), 0);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.holes_punched, 2);

	/* segment 2 was open; the reaped segment 0 comes next and reads back */
	nd = fill_segment(b, 20000, d);
	ck_assert_uint_eq(d[0].loc / SEG, 2);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(put(b, 30000, 100, &a[0].loc), 0);
	ck_assert_uint_eq(a[0].loc, SEG0);
	a[0].len = 100;
	ck_assert_int_eq(backing_flush(b), 0);
	check_obj(rd, 30000, &a[0]);
	for (i = 0; i < nd; i++)
		check_obj(rd, 20000 + i, &d[i]);
	backing_reader_destroy(rd);
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
	struct backing_reader *rd = reader(conc_b);
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
		check_obj(rd, i, &conc[i]);
		n++;
	}
	backing_reader_destroy(rd);
	return (void *)n;
}

/* Small batches share a segment: each flush writes from where the last ended. */
START_TEST(test_partial_flushes_pack)
{
	static struct obj o[64], filler[600];
	struct backing_stats s;
	struct backing *b;
	struct backing_reader *rd;
	uint32_t i;

	cipher = ciphers[_i];

	b = open_b(4 * MIB);
	rd = reader(b);
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
	/* 64 x 736 bytes = 46 KiB; each flush rewrites at most one block again */
	ck_assert_uint_le(s.bytes_written, 64 * ((HDR + 700 + 15) & ~15u) + 8 * BACKING_ALIGN);
	/* an abort drops only what came after the last flush... */
	ck_assert_int_eq(put(b, 500, 700, &filler[0].loc), 0);
	backing_abort(b);
	backing_get_stats(b, &s);
	ck_assert_uint_eq(s.objects, 64);
	/* ...and, objects of the segment being on disk, closes it: its dropped
	 * places are not filled again under the same nonces */
	ck_assert_uint_eq(fill_segment(b, 1000, filler), 0);
	ck_assert_int_eq(backing_flush(b), 0);
	ck_assert_int_eq(put(b, 500, 700, &filler[0].loc), 0);
	ck_assert_uint_eq(filler[0].loc / SEG, 1);
	for (i = 0; i < 64; i++)
		check_obj(rd, i, &o[i]);
	backing_reader_destroy(rd);
	backing_close(b);
}
END_TEST

/* The pieces of segment compaction: the sparsest segment, and its live objects. */
START_TEST(test_sparse_segments)
{
	static struct obj a[600], c[600];
	struct backing_object bo;
	struct backing_reader *rd;
	struct backing *b;
	void *buf;
	uint32_t na, nc, i, seg, pos, seen;

	cipher = ciphers[_i];

	ck_assert_int_eq(posix_memalign(&buf, BACKING_ALIGN, SEG), 0);
	b = open_b(4 * MIB);
	rd = reader(b);
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
	while (backing_next_object(rd, buf, 0, &pos, &bo)) {
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
	/* a damaged object is skipped, the walk goes on (the walk opened the
	 * objects in place: read the segment again) */
	ck_assert_int_eq(backing_read_segment(b, 0, buf), 0);
	((unsigned char *)buf)[a[1].loc + HDR + 7] ^= 1;
	pos = 0;
	seen = 0;
	while (backing_next_object(rd, buf, 0, &pos, &bo)) {
		ck_assert_uint_ne(bo.slot, 1);
		seen++;
	}
	ck_assert_uint_eq(seen, na - 1);
	ck_assert_int_eq(backing_read_segment(b, 1, buf), 0);
	pos = 0;
	seen = 0;
	while (backing_next_object(rd, buf, 1, &pos, &bo))
		seen++;
	ck_assert_uint_eq(seen, nc);
	ck_assert_int_eq(backing_read_segment(b, 99, buf), -EINVAL);
	backing_reader_destroy(rd);
	backing_close(b);
	free(buf);
}
END_TEST

START_TEST(test_concurrent_reads)
{
	pthread_t t[3];
	void *n;
	uint32_t i;

	cipher = ciphers[_i];

	conc_b = open_b(16 * MIB);
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
	tcase_add_test(tc, test_open_refuses_directory);
	tcase_add_test(tc, test_open_refuses_foreign_file);
	tcase_add_test(tc, test_open_locked_and_discards);
	tcase_add_test(tc, test_open_refuses_tmpfs);
	/* the rest once per mode: ciphers[_i] */
	tcase_add_loop_test(tc, test_seal_api, 0, NMODES);
	tcase_add_loop_test(tc, test_round_trip, 0, NMODES);
	tcase_add_loop_test(tc, test_generation_in_header, 0, NMODES);
	tcase_add_loop_test(tc, test_straddle, 0, NMODES);
	tcase_add_loop_test(tc, test_read_len, 0, NMODES);
	tcase_add_loop_test(tc, test_read_current, 0, NMODES);
	tcase_add_loop_test(tc, test_bad_args, 0, NMODES);
	tcase_add_loop_test(tc, test_tamper, 0, NMODES);
	tcase_add_loop_test(tc, test_moved, 0, NMODES);
	tcase_add_loop_test(tc, test_replay, 0, NMODES);
	tcase_add_loop_test(tc, test_nonce_changes, 0, NMODES);
	tcase_add_loop_test(tc, test_truncated, 0, NMODES);
	tcase_add_loop_test(tc, test_key_locked, 0, NMODES);
	tcase_add_loop_test(tc, test_no_alloc, 0, NMODES);
	tcase_add_loop_test(tc, test_free_punch_reuse, 0, NMODES);
	tcase_add_loop_test(tc, test_deferred_punch, 0, NMODES);
	tcase_add_loop_test(tc, test_free_before_flush, 0, NMODES);
	tcase_add_loop_test(tc, test_full, 0, NMODES);
	tcase_add_loop_test(tc, test_flush_error_abort, 0, NMODES);
	tcase_add_loop_test(tc, test_concurrent_reads, 0, NMODES);
	tcase_add_loop_test(tc, test_partial_flushes_pack, 0, NMODES);
	tcase_add_loop_test(tc, test_sparse_segments, 0, NMODES);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	/* Before libcrypto allocates anything (test_no_alloc counts). */
	if (!CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free)) {
		fprintf(stderr, "CRYPTO_set_mem_functions failed\n");
		return EXIT_FAILURE;
	}
	sr = srunner_create(backing_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
