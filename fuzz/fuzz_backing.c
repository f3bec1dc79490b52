/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz the backing file, plain (CRC-32C) and sealed (AES-256-GCM,
 * ChaCha20-Poly1305): its readers, backing_read() and backing_next_object()
 * (segment compaction's walk), on forged, damaged, moved, replayed and
 * truncated objects; and the check of an existing file's header at open.
 *
 * Every input gets a backing file of its own, FILE_SEGS segments in a new
 * 0700 directory under /var/tmp (O_DIRECT wants a disk filesystem), unlinked
 * as soon as it is open, so that nothing is left behind and an input means
 * the same whatever ran before it.  The key is new for every input too: no
 * input can hold a sealed object, and none but those the harness appended
 * through the API exist.  The input format is in fuzz_backing.h; byte 0
 * picks the mode and the cipher.
 *
 * FB_WALK: the input's bytes as a segment read back, walked from a start
 * of the input's choosing (or counted back from the segment's end, where
 * objects must not cross it).  FB_READ: the input's bytes written to the
 * file at an offset, then one object read, at that offset or at any
 * location.  Invariants:
 *   - the walk moves forward in whole 16-byte steps and stays inside the
 *     segment; each object it returns lies inside the buffer, between the
 *     position it started from and the one it left, and is 1..4096 bytes;
 *     the buffer ends at a guard page;
 *   - a read returns 0 or -EIO, counted once in reads or read_errors (and
 *     auth_failures never counted when plain; at most once, and only on a
 *     failure, when sealed);
 *   - plain: what a read or the walk returns is the bytes after a header in
 *     the file or buffer (a forged object that passes the CRC may be read:
 *     the CRC is no defence against forgery);
 *   - sealed: nothing is returned, ever.
 *
 * FB_OPS: the harness appends real objects through the API (data from the
 * input), flushes, aborts, and lets the input forge, flip, copy, swap,
 * snapshot and replay, and truncate bytes of the file; segments are walked
 * as compaction reads them (backing_read_segment), and objects read back.
 * FB_ROUND frees every object and flushes: the open segment starts again
 * under a new sequence, the others are punched and do when next opened, so
 * that snapshots taken before are replays after.  The harness keeps the
 * truth: every object appended, its location, slot, codec and data, whether
 * it is live, dropped by an abort, flushed since; per segment, a generation
 * that an append at the segment's start begins (a new sequence: each place
 * is filled once per sequence, from the start); and which 16-byte units of
 * the file any forgery wrote since they were (dirty).  An object is valid
 * while its generation is its segment's: its tag may pass, live or not (a
 * dead object is still our own, at its place; callers check liveness).
 * Invariants:
 *   - an append hands out a location in the file's object area that
 *     overlaps no live object and no valid one; the stats count the live;
 *   - sealed: a read or walk that succeeds returns exactly a valid object,
 *     at its location, with its slot, codec and data; a dropped one never
 *     reads;
 *   - plain: it returns that, or the bytes after the header at that
 *     location in the file (zeros past its end), or bytes the open segment
 *     holds there (the data and padding of the valid objects, headers
 *     aside);
 *   - both: a live object not yet flushed (read from memory) or whose bytes
 *     in the file are as written reads back exactly, for its slot (and never
 *     for another slot when sealed); a walk from a segment's start, or from
 *     a valid object's, returns every live flushed object after it when no
 *     byte up to that object's end was touched; a walk counts nothing.
 * The generations miss a sequence that begins without an append (a flush
 * or abort that starts a segment without live objects again): until the
 * next append there, the harness also takes the older sequence's objects,
 * so a bug that kept the old sequence would go unseen until then.
 *
 * FB_HEADER: the input is an existing file's contents, and backing_open()
 * (with the input's cipher) must refuse it, with EEXIST and a message that
 * names the file, unless it is empty or carries our header; refused, the
 * file is exactly as it was (bytes, size, mode, times).  "Our header" is
 * what backing_open() writes (read at start-up from a file it made): it
 * must accept a file whose first 32 bytes (struct file_hdr in backing.c)
 * are that header's, and must refuse one whose first 20 (the magic line and
 * the version) are not; once open, the file is that header block alone,
 * also after backing_close().
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
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "fuzz.h"
#include "fuzz_backing.h"

#define SEG		BACKING_SEG_SIZE
#define HDR		BACKING_HDR_SIZE
#define FILE_SEGS	4u
#define FILE_BYTES	((uint64_t)FILE_SEGS * SEG)
#define MAX_OBJS	128u
#define NSNAP		4u
#define SNAP_MAX	8192u
/* A walk reads a whole segment from the disk: a few per input are enough. */
#define MAX_WALKS	8u
/* Of the file header: the magic line and the version identify it (at least),
 * struct file_hdr is all there is to it (at most). */
#define FILE_ID_LEN	20u
#define FILE_HDR_LEN	32u

struct obj {
	uint64_t loc;
	uint32_t slot;
	uint16_t len;
	uint8_t codec;
	bool flushed;			/* a flush since: not read from memory only */
	bool live;			/* not freed */
	bool dropped;			/* by an abort: as if never appended */
	uint32_t gen;			/* its segment's generation (t.gen) */
	unsigned char data[BACKING_MAX_DATA];
};

struct snap {
	uint64_t off;
	size_t len;
	unsigned char bytes[SNAP_MAX];
};

/* The input's backing file and what the harness knows of it. */
static struct {
	struct backing *b;
	struct backing_reader *r;
	int wfd;			/* the same file, to forge its contents */
	bool sealed;
	struct obj objs[MAX_OBJS];	/* every object appended, in that order */
	unsigned int nobjs;
	uint32_t gen[FILE_SEGS];	/* appends that began a segment again */
	unsigned int walks;
	struct snap snap[NSNAP];
	/* Per 16-byte unit of the file: 1 if forged since written, or never
	 * written (a byte each, so that libc's memset and memchr do the work:
	 * the fuzzer's instrumentation makes loops of our own slow). */
	uint8_t dirty[FILE_BYTES / 16];
} t;

static struct fuzz_guarded gseg;
static size_t seg_dirty;			/* bytes of the walk buffer not zero */
static unsigned char orig[SEG];			/* FB_WALK: the segment as given */
static size_t orig_dirty;
static unsigned char tmp[BACKING_MAX_DATA];
static unsigned char got[BACKING_MAX_DATA];	/* a copy of what a read returned */
static unsigned char ref_hdr[BACKING_FILE_HDR_SIZE];	/* the header backing_open writes */

static inline uint32_t obj_size(uint32_t len)
{
	return (HDR + len + 15) & ~15u;
}

static inline uint32_t seg_start(uint64_t seg)
{
	return seg ? 0 : BACKING_FILE_HDR_SIZE;
}

/* ---- set-up ------------------------------------------------------------------ */

/* A new directory for one backing file: 0700, as backing_open wants it. */
static void temp_path(char *dir, char *path, size_t len)
{
	strcpy(dir, "/var/tmp/zswapfs-fuzz.XXXXXX");
	fuzz_require(mkdtemp(dir));
	snprintf(path, len, "%s/backing", dir);
}

static void open_backing(enum seal_cipher c)
{
	char dir[64], path[80], err[512];

	temp_path(dir, path, sizeof(path));
	t.b = backing_open(path, FILE_BYTES, c, err, sizeof(err));
	if (!t.b) {
		fprintf(stderr, "fuzz_backing: %s\n", err);
		abort();
	}
	fuzz_require(backing_cipher(t.b) == c);
	t.wfd = open(path, O_RDWR | O_CLOEXEC);
	fuzz_require(t.wfd >= 0);
	fuzz_require(unlink(path) == 0 && rmdir(dir) == 0);
	t.r = backing_reader_create(t.b);
	fuzz_require(t.r);
	t.sealed = c != SEAL_NONE;
	t.nobjs = 0;
	memset(t.gen, 0, sizeof(t.gen));
	t.walks = 0;
	memset(t.snap, 0, sizeof(t.snap));
	memset(t.dirty, 1, sizeof(t.dirty));
}

static void close_backing(void)
{
	backing_reader_destroy(t.r);
	backing_close(t.b);
	close(t.wfd);
	t.r = NULL;
	t.b = NULL;
	t.wfd = -1;
}

int LLVMFuzzerInitialize(int *argc, char **argv[])
{
	char dir[64], path[80], err[512];
	struct backing *b;
	int fd;

	(void)argc;
	(void)argv;
	fuzz_guarded_init(&gseg, SEG);
	memset(fuzz_guarded_at(&gseg, SEG), 0, SEG);
	t.wfd = -1;

	/* Our header, as backing_open writes it and backing_close leaves it. */
	temp_path(dir, path, sizeof(path));
	b = backing_open(path, SEG, SEAL_NONE, err, sizeof(err));
	if (!b) {
		fprintf(stderr, "fuzz_backing: %s\n", err);
		abort();
	}
	backing_close(b);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	fuzz_require(fd >= 0);
	fuzz_require(pread(fd, ref_hdr, sizeof(ref_hdr), 0) == (ssize_t)sizeof(ref_hdr));
	fuzz_require(pread(fd, tmp, 1, sizeof(ref_hdr)) == 0);
	close(fd);
	fuzz_require(unlink(path) == 0 && rmdir(dir) == 0);
	return 0;
}

/* ---- checks shared by the modes --------------------------------------------------- */

/* The file holds these bytes at off (zeros past its end, as a walk reads them). */
static bool file_holds(uint64_t off, const void *p, size_t len)
{
	ssize_t n = pread(t.wfd, tmp, len, (off_t)off);

	if (n < 0)
		return false;
	memset(tmp + n, 0, len - (size_t)n);
	return !memcmp(tmp, p, len);
}

/*
 * backing_read, with what any read must do: 0 or -EIO, counted once; on 0
 * 1..BACKING_MAX_DATA bytes (read to the end: ASan watches the reader's
 * buffer).
 */
static int read_counted(uint64_t loc, uint32_t slot, const unsigned char **data, uint16_t *len,
			uint8_t *codec)
{
	struct backing_stats before, after;
	int ret;

	backing_get_stats(t.b, &before);
	ret = backing_read(t.r, loc, slot, (const void **)data, len, codec);
	backing_get_stats(t.b, &after);
	fuzz_require(ret == 0 || ret == -EIO);
	if (ret) {
		fuzz_require(after.read_errors == before.read_errors + 1 &&
			     after.reads == before.reads);
		fuzz_require(after.auth_failures == before.auth_failures ||
			     (t.sealed && after.auth_failures == before.auth_failures + 1));
		return ret;
	}
	fuzz_require(after.reads == before.reads + 1 && after.read_errors == before.read_errors &&
		     after.auth_failures == before.auth_failures);
	fuzz_require(*len >= 1 && *len <= BACKING_MAX_DATA);
	memcpy(got, *data, *len);
	return 0;
}

/* ---- FB_WALK: a segment of the input's bytes -------------------------------------- */

static void fuzz_walk(struct fuzz_in *in, bool from_end)
{
	unsigned char *buf = fuzz_guarded_at(&gseg, SEG);
	uint16_t units = fuzz_u16(in);
	uint32_t start = from_end ? SEG - 16u * (1 + units % 1024) : 16u * (units % (SEG / 16));
	uint32_t seg = fuzz_u32(in) % (FILE_SEGS + 1), pos, steps;
	size_t n = in->left < SEG - start ? in->left : SEG - start;
	struct backing_stats before, after;
	struct backing_object obj;

	memset(buf, 0, seg_dirty);
	memcpy(buf + start, in->p, n);
	memset(orig, 0, orig_dirty);
	memcpy(orig + start, in->p, n);
	seg_dirty = orig_dirty = start + n;

	backing_get_stats(t.b, &before);
	pos = start;
	for (steps = 0; steps <= SEG / 32; steps++) {
		uint32_t from = pos;
		uint64_t at;

		if (!backing_next_object(t.r, buf, seg, &pos, &obj)) {
			fuzz_require(pos >= from && pos <= SEG && pos % 16 == 0);
			backing_get_stats(t.b, &after);
			fuzz_require(after.reads == before.reads &&
				     after.read_errors == before.read_errors &&
				     after.auth_failures == before.auth_failures);
			return;
		}
		/* A sealed file that sealed nothing knows no object. */
		fuzz_require(!t.sealed);
		fuzz_require(pos > from && pos <= SEG && pos % 16 == 0);
		fuzz_require(obj.loc / SEG == seg && obj.loc % 16 == 0);
		at = obj.loc % SEG;
		fuzz_require(at >= from && at >= seg_start(seg) && at + HDR + obj.len <= pos);
		fuzz_require(obj.len >= 1 && obj.len <= BACKING_MAX_DATA);
		fuzz_require((const unsigned char *)obj.data == buf + at + HDR);
		/* Plain: the bytes given, untouched. */
		fuzz_require(!memcmp(obj.data, orig + at + HDR, obj.len));
	}
	fuzz_require(!"the walk did not end");
}

/* ---- FB_READ: one object of the input's bytes --------------------------------------- */

static void fuzz_read(struct fuzz_in *in, bool at_offset)
{
	uint64_t off = SEG + fuzz_u32(in) % ((FILE_SEGS - 1) * SEG), loc;
	uint32_t where = fuzz_u32(in), slot = fuzz_u32(in);
	const unsigned char *data;
	uint16_t len;
	uint8_t codec;

	/* Segment 0 is the open one: it reads from memory, where nothing is. */
	loc = at_offset ? off : where % ((FILE_SEGS + 1) * SEG);
	if (in->left)
		fuzz_require(pwrite(t.wfd, in->p, in->left, (off_t)off) == (ssize_t)in->left);
	if (read_counted(loc, slot, &data, &len, &codec))
		return;
	fuzz_require(!t.sealed);
	/* Found where it was written: the bytes after the header at loc. */
	fuzz_require(loc >= off && loc + HDR + len <= off + in->left);
	fuzz_require(!memcmp(data, in->p + (loc - off) + HDR, len));
}

/* ---- FB_OPS: real objects, forged files ------------------------------------------------ */

/* The units [off, off + len) touch; inside the file. */
static void mark(uint64_t off, uint64_t len, bool dirty)
{
	uint64_t end = (off + len + 15) / 16;

	if (end > FILE_BYTES / 16)
		end = FILE_BYTES / 16;
	if (off / 16 < end)
		memset(t.dirty + off / 16, dirty, end - off / 16);
}

static bool clean(uint64_t off, uint64_t end)
{
	return !memchr(t.dirty + off / 16, 1, (end + 15) / 16 - off / 16);
}

/*
 * Objects of their segment's generation: appended since an append began the
 * segment again (at its start), so under the sequence it has now, or under
 * one the harness did not see begin (a restart with no append yet, which
 * only a segment without live objects takes).  Their tags may pass, live or
 * not: a dead object is still our own at its place.
 */
static bool valid(const struct obj *o)
{
	return !o->dropped && o->gen == t.gen[o->loc / SEG];
}

/* The object of this generation at loc: at most one (checked at append). */
static struct obj *find(uint64_t loc)
{
	unsigned int i;

	for (i = 0; i < t.nobjs; i++)
		if (t.objs[i].loc == loc && valid(&t.objs[i]))
			return &t.objs[i];
	return NULL;
}

static bool is_obj(const struct obj *o, uint32_t slot, const unsigned char *data, uint16_t len,
		   uint8_t codec)
{
	return o && o->slot == slot && o->len == len && o->codec == codec &&
	       !memcmp(o->data, data, len);
}

static bool overlaps(const struct obj *o, uint64_t loc, uint64_t end)
{
	return loc < o->loc + obj_size(o->len) && end > o->loc;
}

/*
 * Plain: data was read from the open segment, at loc, and lies in the
 * objects there: their data and padding as appended.  Their headers (the
 * CRC) the harness does not know: any bytes.
 */
static bool in_open_segment(uint64_t loc, const unsigned char *data, uint16_t len)
{
	uint64_t x;
	size_t i = 0;

	for (x = loc; x < loc + HDR + len; x++) {
		const struct obj *o = NULL;
		unsigned int k;
		uint64_t at;

		for (k = 0; k < t.nobjs && !o; k++)
			if (valid(&t.objs[k]) && overlaps(&t.objs[k], x, x + 1))
				o = &t.objs[k];
		if (!o)
			return false;
		if (x < loc + HDR)
			continue;
		at = x - o->loc;
		if (at >= HDR && data[i] != (at - HDR < o->len ? o->data[at - HDR] : 0))
			return false;
		i++;
	}
	return true;
}

/* A read of loc for slot. */
static void check_read(uint64_t loc, uint32_t slot)
{
	const unsigned char *data;
	struct obj *o = find(loc);
	/* Read from memory before a flush, else from the file as written. */
	bool must = o && o->live && o->slot == slot &&
		    (!o->flushed || clean(loc, loc + obj_size(o->len)));
	uint16_t len;
	uint8_t codec;

	if (read_counted(loc, slot, &data, &len, &codec)) {
		if (must) {
			fprintf(stderr, "object of slot %u at %llu, as written, does not read\n",
				slot, (unsigned long long)loc);
			abort();
		}
		return;
	}
	if (is_obj(o, slot, data, len, codec))
		return;
	if (must || t.sealed) {
		fprintf(stderr, "read of slot %u at %llu returns %u bytes that were not written "
			"there\n", slot, (unsigned long long)loc, len);
		abort();
	}
	fuzz_require(file_holds(loc + HDR, data, len) || in_open_segment(loc, data, len));
}

static uint64_t target(struct fuzz_in *in)
{
	uint8_t sel = fuzz_u8(in);
	uint16_t d = fuzz_u16(in);
	int64_t at;

	if (!(sel & 0x80) && t.nobjs) {
		at = (int64_t)t.objs[sel % t.nobjs].loc + (int16_t)d;
		return at < 0 ? 0 : (uint64_t)at % FILE_BYTES;
	}
	return ((uint64_t)(sel & 0x7f) << 16 | d) % FILE_BYTES;
}

static size_t clamp_len(uint64_t off, size_t len)
{
	return off + len > FILE_BYTES ? (size_t)(FILE_BYTES - off) : len;
}

static void forge(uint64_t off, const void *p, size_t len)
{
	len = clamp_len(off, len);
	if (!len)
		return;
	fuzz_require(pwrite(t.wfd, p, len, (off_t)off) == (ssize_t)len);
	mark(off, len, true);
}

/* Bytes of the file; past its end, as many as there are. */
static size_t file_read(uint64_t off, void *p, size_t len)
{
	ssize_t n = pread(t.wfd, p, clamp_len(off, len), (off_t)off);

	fuzz_require(n >= 0);
	return (size_t)n;
}

static void check_count(void)
{
	struct backing_stats s;
	unsigned int i, live = 0;

	for (i = 0; i < t.nobjs; i++)
		live += t.objs[i].live;
	backing_get_stats(t.b, &s);
	fuzz_require(s.objects == live);
}

static int flush(void)
{
	unsigned int i;
	int ret = backing_flush(t.b);

	/* -ENOSPC: no segment left to open, and so nothing appended to write. */
	fuzz_require(ret == 0 || ret == -ENOSPC);
	for (i = 0; i < t.nobjs; i++) {
		struct obj *o = &t.objs[i];

		if (o->flushed || o->dropped)
			continue;
		fuzz_require(!ret);
		o->flushed = true;
		/* A dead one may not have been written: its segment may have
		 * started again instead. */
		if (o->live)
			mark(o->loc, obj_size(o->len), false);
	}
	return ret;
}

static void op_append(struct fuzz_in *in)
{
	uint32_t slot = FB_SLOT(fuzz_u8(in));
	uint8_t codec = fuzz_u8(in);
	uint16_t len = (uint16_t)(1 + fuzz_u16(in) % BACKING_MAX_DATA);
	uint8_t fill = fuzz_u8(in), n = fuzz_u8(in);
	struct obj *o = &t.objs[t.nobjs];
	uint64_t loc, end, seg;
	unsigned int i;
	int ret;

	if (t.nobjs == MAX_OBJS)
		return;
	n = (uint8_t)(n < len ? n : len);
	n = (uint8_t)(n < in->left ? n : in->left);
	memcpy(o->data, in->p, n);
	in->p += n;
	in->left -= n;
	for (i = n; i < len; i++)
		o->data[i] = (uint8_t)(fill + i * (fill | 1u) + (i >> 8));
	ret = backing_append(t.b, slot, codec, o->data, len, &loc);
	if (ret == -ENOSPC && !flush())
		ret = backing_append(t.b, slot, codec, o->data, len, &loc);
	if (ret == -ENOSPC)
		return;
	fuzz_require(ret == 0);

	/* In an object area, where no live object is, nor one of this
	 * generation: each place is filled once per sequence. */
	seg = loc / SEG;
	end = loc + obj_size(len);
	fuzz_require(loc % 16 == 0 && seg < FILE_SEGS && loc % SEG >= seg_start(seg));
	fuzz_require((end - 1) / SEG == seg);
	if (loc % SEG == seg_start(seg))
		t.gen[seg]++;
	for (i = 0; i < t.nobjs; i++)
		fuzz_require(!overlaps(&t.objs[i], loc, end) ||
			     (!t.objs[i].live && !valid(&t.objs[i])));
	o->loc = loc;
	o->slot = slot;
	o->len = len;
	o->codec = codec;
	o->flushed = false;
	o->live = true;
	o->dropped = false;
	o->gen = t.gen[seg];
	t.nobjs++;
}

/* The objects appended since the last flush are gone. */
static void op_abort(void)
{
	const void *data;
	unsigned int i;
	uint16_t len;
	uint8_t codec;

	backing_abort(t.b);
	for (i = 0; i < t.nobjs; i++) {
		struct obj *o = &t.objs[i];

		if (o->flushed || o->dropped)
			continue;
		fuzz_require(backing_read(t.r, o->loc, o->slot, &data, &len, &codec) == -EIO);
		o->dropped = true;
		o->live = false;
	}
}

/* Every object freed: segments are punched, the open one starts again. */
static void op_round(void)
{
	unsigned int i;

	for (i = 0; i < t.nobjs; i++)
		if (t.objs[i].live) {
			backing_free(t.b, t.objs[i].loc, t.objs[i].len);
			t.objs[i].live = false;
		}
	check_count();
	flush();
}

static void op_walk(struct fuzz_in *in)
{
	unsigned char *buf = fuzz_guarded_at(&gseg, SEG);
	uint8_t sel = fuzz_u8(in), arg = fuzz_u8(in);
	bool found[MAX_OBJS] = { false }, sure = true;
	struct backing_stats before, after;
	struct backing_object obj;
	uint32_t seg, pos, steps;
	uint64_t from;
	unsigned int i;
	int ret;

	if (sel >> 6 == 0) {
		if (!t.nobjs)
			return;
		seg = (uint32_t)(t.objs[arg % t.nobjs].loc / SEG);
		pos = (uint32_t)(t.objs[arg % t.nobjs].loc % SEG);
		/* Where an object of the segment's sequence begins, or anywhere. */
		sure = valid(&t.objs[arg % t.nobjs]);
	} else {
		seg = arg % (FILE_SEGS + 1);
		pos = 0;
		if (sel >> 6 == 2) {
			pos = 16u * (fuzz_u16(in) % (SEG / 16));
			sure = pos <= seg_start(seg);
		}
	}
	if (t.walks++ >= MAX_WALKS)
		return;

	/* Holds stale bytes when seg is out of range: they must not matter. */
	ret = backing_read_segment(t.b, seg, buf);
	fuzz_require(ret == (seg < FILE_SEGS ? 0 : -EINVAL));
	seg_dirty = SEG;
	from = (uint64_t)seg * SEG + (pos > seg_start(seg) ? pos : seg_start(seg));

	backing_get_stats(t.b, &before);
	for (steps = 0; steps <= SEG / 32; steps++) {
		uint32_t at_pos = pos;
		struct obj *o;
		uint64_t at;

		if (!backing_next_object(t.r, buf, seg, &pos, &obj))
			break;
		fuzz_require(seg < FILE_SEGS);
		fuzz_require(pos > at_pos && pos <= SEG && pos % 16 == 0);
		fuzz_require(obj.loc / SEG == seg && obj.loc % 16 == 0);
		at = obj.loc % SEG;
		fuzz_require(at >= at_pos && at + HDR + obj.len <= pos);
		fuzz_require(obj.len >= 1 && obj.len <= BACKING_MAX_DATA);
		fuzz_require((const unsigned char *)obj.data == buf + at + HDR);
		o = find(obj.loc);
		if (is_obj(o, obj.slot, obj.data, obj.len, obj.codec)) {
			found[o - t.objs] = true;
			continue;
		}
		if (t.sealed) {
			fprintf(stderr, "walk of segment %u returns %u bytes at %llu that were not "
				"written there\n", seg, obj.len, (unsigned long long)obj.loc);
			abort();
		}
		/* Plain: the file's bytes (the walk does not change them). */
		fuzz_require(file_holds(obj.loc + HDR, obj.data, obj.len));
	}
	fuzz_require(steps <= SEG / 32);
	backing_get_stats(t.b, &after);
	fuzz_require(after.reads == before.reads && after.read_errors == before.read_errors &&
		     after.auth_failures == before.auth_failures);

	/* Objects packed from where the walk began, as written: all found. */
	for (i = 0; sure && i < t.nobjs; i++) {
		const struct obj *o = &t.objs[i];

		if (!o->live || !o->flushed || o->loc / SEG != seg || o->loc < from ||
		    !clean(from, o->loc + obj_size(o->len)))
			continue;
		if (!found[i]) {
			fprintf(stderr, "walk of segment %u from %llu misses the object at %llu\n",
				seg, (unsigned long long)from, (unsigned long long)o->loc);
			abort();
		}
	}
}

static void op_copy(struct fuzz_in *in, bool swap)
{
	static unsigned char a[SNAP_MAX], b[SNAP_MAX];
	uint64_t from = target(in), to = target(in);
	size_t len = 1 + fuzz_u16(in) % SNAP_MAX, na, nb;

	na = file_read(from, a, len);
	if (!swap) {
		forge(to, a, na);
		return;
	}
	nb = file_read(to, b, len);
	/* Both read first: the ranges may overlap. */
	forge(to, a, na);
	forge(from, b, nb);
}

static void fuzz_ops(struct fuzz_in *in)
{
	while (in->left) {
		uint8_t op = fuzz_u8(in) % FB_OP_COUNT, k, s;
		struct snap *sn;
		uint64_t at;

		switch (op) {
		case FB_APPEND:
			op_append(in);
			break;
		case FB_FLUSH:
			flush();
			break;
		case FB_ABORT:
			op_abort();
			break;
		case FB_READ_OBJ:
			k = fuzz_u8(in);
			s = fuzz_u8(in);
			if (t.nobjs)
				check_read(t.objs[k % t.nobjs].loc,
					   s ? FB_SLOT(s) : t.objs[k % t.nobjs].slot);
			break;
		case FB_READ_AT:
			at = target(in);
			check_read(at, FB_SLOT(fuzz_u8(in)));
			break;
		case FB_WALK_SEG:
			op_walk(in);
			break;
		case FB_FORGE:
			at = target(in);
			k = fuzz_u8(in);
			k = (uint8_t)(k < in->left ? k : in->left);
			forge(at, in->p, k);
			in->p += k;
			in->left -= k;
			break;
		case FB_FLIP:
			at = target(in);
			k = fuzz_u8(in);
			s = 0;
			file_read(at, &s, 1);
			s ^= (uint8_t)(1u << (k % 8));
			forge(at, &s, 1);
			break;
		case FB_COPY:
		case FB_SWAP:
			op_copy(in, op == FB_SWAP);
			break;
		case FB_SNAPSHOT:
			sn = &t.snap[fuzz_u8(in) % NSNAP];
			sn->off = target(in);
			sn->len = file_read(sn->off, sn->bytes, 1 + fuzz_u16(in) % SNAP_MAX);
			break;
		case FB_REPLAY:
			sn = &t.snap[fuzz_u8(in) % NSNAP];
			at = fuzz_u8(in) & 1 ? target(in) : sn->off;
			forge(at, sn->bytes, sn->len);
			break;
		case FB_TRUNCATE:
			at = target(in);
			fuzz_require(ftruncate(t.wfd, (off_t)at) == 0);
			mark(at, FILE_BYTES - at, true);
			break;
		case FB_ROUND:
			op_round();
			break;
		}
		check_count();
	}
	op_round();
}

/* ---- FB_HEADER: an existing file at open ----------------------------------------------- */

static void read_whole(const char *path, unsigned char *buf, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	fuzz_require(fd >= 0);
	n = read(fd, buf, max);
	fuzz_require(n >= 0 && read(fd, tmp, 1) == 0);
	close(fd);
	*len = (size_t)n;
}

static void fuzz_header(struct fuzz_in *in, enum seal_cipher c)
{
	static unsigned char after[SEG];
	char dir[64], path[80], err[512] = "";
	struct stat st0, st1;
	struct backing *b;
	bool ours_id, ours_whole;
	size_t len;
	int fd, e;

	temp_path(dir, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	fuzz_require(fd >= 0);
	fuzz_require(write(fd, in->p, in->left) == (ssize_t)in->left);
	fuzz_require(fstat(fd, &st0) == 0);
	close(fd);

	b = backing_open(path, SEG, c, err, sizeof(err));
	e = errno;
	ours_id = in->left == 0 ||
		  (in->left >= FILE_ID_LEN && !memcmp(in->p, ref_hdr, FILE_ID_LEN));
	ours_whole = in->left == 0 ||
		     (in->left >= FILE_HDR_LEN && !memcmp(in->p, ref_hdr, FILE_HDR_LEN));
	if (!b) {
		if (ours_whole)
			fprintf(stderr, "fuzz_backing: our own header refused: %s\n", err);
		fuzz_require(!ours_whole);
		fuzz_require(e == EEXIST && strstr(err, path));
		read_whole(path, after, sizeof(after), &len);
		fuzz_require(len == in->left && !memcmp(after, in->p, len));
		fuzz_require(stat(path, &st1) == 0);
		fuzz_require(st1.st_ino == st0.st_ino && st1.st_mode == st0.st_mode &&
			     st1.st_size == st0.st_size && st1.st_nlink == 1 &&
			     st1.st_mtim.tv_sec == st0.st_mtim.tv_sec &&
			     st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec &&
			     st1.st_ctim.tv_sec == st0.st_ctim.tv_sec &&
			     st1.st_ctim.tv_nsec == st0.st_ctim.tv_nsec);
	} else {
		if (!ours_id)
			fprintf(stderr, "fuzz_backing: a file without our header was taken\n");
		fuzz_require(ours_id);
		/* What an earlier run left is gone: our header, nothing else. */
		read_whole(path, after, sizeof(after), &len);
		fuzz_require(len == sizeof(ref_hdr) && !memcmp(after, ref_hdr, len));
		backing_close(b);
		read_whole(path, after, sizeof(after), &len);
		fuzz_require(len == sizeof(ref_hdr) && !memcmp(after, ref_hdr, len));
	}
	fuzz_require(unlink(path) == 0 && rmdir(dir) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	uint8_t how = fuzz_u8(&in);
	enum seal_cipher c = fb_cipher(how);

	if (!ref_hdr[0])
		LLVMFuzzerInitialize(NULL, NULL);
	if ((how & 3) == FB_HEADER) {
		fuzz_header(&in, c);
		return 0;
	}
	open_backing(c);
	switch (how & 3) {
	case FB_WALK:
		fuzz_walk(&in, how & 0x10);
		break;
	case FB_READ:
		fuzz_read(&in, how & 0x10);
		break;
	default:
		fuzz_ops(&in);
		break;
	}
	close_backing();
	return 0;
}
