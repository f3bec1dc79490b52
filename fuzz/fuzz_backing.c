/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz the backing file's readers on forged and damaged segments:
 * backing_next_object() (segment compaction's walk) over a segment buffer,
 * and backing_read() of whatever a file holds at any location.
 *
 * The first byte picks the mode:
 *	even	walk: a start position (2 bytes, in 16-byte units: from the
 *		start of the segment, or with bit 1 of the first byte back
 *		from its end, where objects must not cross), then the
 *		segment's bytes from there on;
 *	odd	read: a file offset (4 bytes), a location (4 bytes), a slot
 *		(4 bytes), then the bytes written to the file at that offset.
 *		Bit 1 of the first byte reads at the offset itself;
 *	odd, bit 2: the open segment instead, which reads from memory:
 *		a count of objects, each a length (2 bytes), a codec and its
 *		data, appended; then a location (4 bytes) and a slot (4
 *		bytes) read; the objects are dropped again (backing_abort).
 *
 * Invariants (backing.h):
 *   - the walk moves forward in whole 16-byte steps and stays inside the
 *     segment; each object it returns lies inside the buffer, between the
 *     position it started from and the one it left;
 *   - a read returns 0 or -EIO (counted once in reads or read_errors); on
 *     0 the data lies inside the scratch buffer, is 1..BACKING_MAX_DATA
 *     bytes, and is what the file holds after the object's header;
 *   - every object appended reads back as it was, and only for its slot;
 *   - nothing is read or written outside the buffers: the segment buffer
 *     ends at a guard page, the scratch buffer is watched by ASan.
 *
 * Written against the format of today (header, CRC-32C, no encryption);
 * the check that the data is the file's bytes goes once objects are
 * sealed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backing.h"
#include "fuzz.h"

#define SEG		BACKING_SEG_SIZE
#define FILE_SEGS	4u

static struct fuzz_guarded gseg;
static struct backing *b;
static int wfd = -1;			/* the same file, to forge its contents */
static void *scratch;
static size_t seg_dirty;		/* bytes of the walk buffer not zero */

static void close_backing(void)
{
	backing_close(b);
	b = NULL;
	close(wfd);
	free(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/var/tmp/zswapfs-fuzz.XXXXXX", path[64], err[256];

	fuzz_guarded_init(&gseg, SEG);
	memset(fuzz_guarded_at(&gseg, SEG), 0, SEG);
	fuzz_require(posix_memalign(&scratch, BACKING_ALIGN, BACKING_SCRATCH_SIZE) == 0);

	/* O_DIRECT needs a disk filesystem (/tmp may be tmpfs).  The file and
	 * its directory (0700) are gone as soon as both are open: nothing is
	 * left behind, even after a crash. */
	fuzz_require(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/backing", dir);
	b = backing_open(path, (uint64_t)FILE_SEGS * SEG, err, sizeof(err));
	if (!b) {
		fprintf(stderr, "fuzz_backing: %s\n", err);
		abort();
	}
	wfd = open(path, O_RDWR | O_CLOEXEC);
	fuzz_require(wfd >= 0);
	fuzz_require(unlink(path) == 0 && rmdir(dir) == 0);
	atexit(close_backing);
	return 0;
}

static void fuzz_walk(struct fuzz_in *in, bool from_end)
{
	unsigned char *buf = fuzz_guarded_at(&gseg, SEG);
	uint16_t units = fuzz_u16(in);
	uint32_t start = from_end ? SEG - 16u * (1 + units % 1024) : 16u * (units % (SEG / 16));
	uint32_t seg = fuzz_u32(in), pos, steps;
	size_t n = in->left < SEG - start ? in->left : SEG - start;
	struct backing_object obj;

	memset(buf, 0, seg_dirty);
	memcpy(buf + start, in->p, n);
	seg_dirty = start + n;

	pos = start;
	for (steps = 0; steps <= SEG / 32; steps++) {
		uint32_t from = pos;
		uint64_t at;

		if (!backing_next_object(buf, seg, &pos, &obj)) {
			fuzz_require(pos >= from && pos <= SEG && pos % 16 == 0);
			return;
		}
		fuzz_require(pos > from && pos <= SEG && pos % 16 == 0);
		fuzz_require(obj.loc / SEG == seg && obj.loc % 16 == 0);
		at = obj.loc % SEG;
		fuzz_require(at >= from && at + BACKING_HDR_SIZE + obj.len <= pos);
		fuzz_require(obj.len >= 1 && obj.len <= BACKING_MAX_DATA);
		fuzz_require((const unsigned char *)obj.data == buf + at + BACKING_HDR_SIZE);
	}
	fuzz_require(!"the walk did not end");
}

static void fuzz_read(struct fuzz_in *in, bool at_offset)
{
	uint64_t off = SEG + fuzz_u32(in) % ((FILE_SEGS - 1) * SEG), loc;
	uint32_t where = fuzz_u32(in), slot = fuzz_u32(in);
	struct backing_stats before, after;
	const unsigned char *data;
	unsigned char *want;
	uint16_t len;
	uint8_t codec;
	int ret;

	/* Segment 0 is the open one: it reads from memory, not the file. */
	loc = at_offset ? off : where % ((FILE_SEGS + 1) * SEG);
	fuzz_require(ftruncate(wfd, 0) == 0);
	if (in->left)
		fuzz_require(pwrite(wfd, in->p, in->left, (off_t)off) == (ssize_t)in->left);

	backing_get_stats(b, &before);
	ret = backing_read(b, loc, slot, scratch, (const void **)&data, &len, &codec);
	backing_get_stats(b, &after);
	fuzz_require(ret == 0 || ret == -EIO);
	if (ret) {
		fuzz_require(after.read_errors == before.read_errors + 1 &&
			     after.reads == before.reads);
		return;
	}
	fuzz_require(after.reads == before.reads + 1 && after.read_errors == before.read_errors);
	fuzz_require(len >= 1 && len <= BACKING_MAX_DATA);
	fuzz_require(data >= (unsigned char *)scratch &&
		     data + len <= (unsigned char *)scratch + BACKING_SCRATCH_SIZE);
	/* Found where it was written: the bytes after the header at loc. */
	fuzz_require(loc >= off && loc + BACKING_HDR_SIZE + len <= off + in->left);
	want = (unsigned char *)in->p + (loc - off) + BACKING_HDR_SIZE;
	fuzz_require(!memcmp(data, want, len));
}

/* A read that succeeds stays inside scratch; returns backing_read's value. */
static int read_checked(uint64_t loc, uint32_t slot, const unsigned char **data,
			uint16_t *len, uint8_t *codec)
{
	int ret = backing_read(b, loc, slot, scratch, (const void **)data, len, codec);

	fuzz_require(ret == 0 || ret == -EIO);
	if (!ret) {
		fuzz_require(*len >= 1 && *len <= BACKING_MAX_DATA);
		fuzz_require(*data >= (unsigned char *)scratch &&
			     *data + *len <= (unsigned char *)scratch + BACKING_SCRATCH_SIZE);
	}
	return ret;
}

static void fuzz_open_segment(struct fuzz_in *in)
{
	static unsigned char obj[BACKING_MAX_DATA];
	uint8_t count = fuzz_u8(in) % 8, i, codec[8], got_codec;
	uint16_t len[8], got_len;
	uint64_t loc[8];
	const unsigned char *data, *src[8];
	size_t src_n[8];
	uint32_t where, slot;
	size_t n;

	for (i = 0; i < count; i++) {
		len[i] = (uint16_t)(1 + fuzz_u16(in) % BACKING_MAX_DATA);
		codec[i] = fuzz_u8(in);
		n = in->left < len[i] ? in->left : len[i];
		memset(obj, 0, len[i]);
		memcpy(obj, in->p, n);
		src[i] = in->p;
		src_n[i] = n;
		in->p += n;
		in->left -= n;
		fuzz_require(backing_append(b, 1000 + i, codec[i], obj, len[i], &loc[i]) == 0);
		fuzz_require(loc[i] % 16 == 0 && loc[i] < SEG);
	}
	where = fuzz_u32(in);
	slot = fuzz_u32(in);
	/* Each object: as appended, for its slot only. */
	for (i = 0; i < count; i++) {
		fuzz_require(read_checked(loc[i], 1000 + i, &data, &got_len, &got_codec) == 0);
		fuzz_require(got_len == len[i] && got_codec == codec[i]);
		fuzz_require(!memcmp(data, src[i], src_n[i]));
		memset(obj, 0, len[i]);
		fuzz_require(!memcmp(data + src_n[i], obj, len[i] - src_n[i]));
		fuzz_require(read_checked(loc[i], 2000 + i, &data, &got_len, &got_codec) == -EIO);
	}
	read_checked(where % (2 * SEG), slot, &data, &got_len, &got_codec);
	backing_abort(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	uint8_t how = fuzz_u8(&in);

	if (!b)
		LLVMFuzzerInitialize(NULL, NULL);
	if ((how & 5) == 5)
		fuzz_open_segment(&in);
	else if (how & 1)
		fuzz_read(&in, how & 2);
	else
		fuzz_walk(&in, how & 2);
	return 0;
}
