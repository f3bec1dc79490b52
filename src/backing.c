/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing: segments of the backing file.
 *
 * Object layout in a segment, every object 16-byte aligned:
 *
 *	0      4      8      12     14      15      16              16+len
 *	| magic | crc | slot | len  | codec | flags | data ...      | pad to 16 |
 *
 * The crc covers the data and then bytes 8..15 of the header, so a flipped
 * len or codec is caught too, not only damaged data.  An object costs
 * round_up(16 + len, 16) bytes of its segment; that is what live bytes
 * count.
 *
 * Segment states:
 *	FREE	  a hole in the file (or past its end); may be opened.
 *	OPEN	  the one segment being filled in b->buf (at most one).  A flush
 *		  writes what was appended since the last one (from the block
 *		  where that ended) and keeps the segment open while it has room,
 *		  so small batches of writeback still pack into full segments.
 *	FULL	  written; holds live objects.
 *	DEAD	  written, all objects dead, its hole not punched yet (with
 *		  backing_defer_punch(): the writer punches it).
 *	PUNCHING  written, all objects dead, hole being punched: not reusable
 *		  until that is done, so a punch never lands on new data.
 * An OPEN segment whose objects all die stays OPEN (its flush then writes
 * nothing); a FULL one becomes PUNCHING (or DEAD, then PUNCHING), then FREE.
 *
 * Locking.  b->lock guards the segment table, the open segment's fill level
 * and the byte counts.  It is never held across I/O: a flush marks the
 * segment as flushing and writes b->buf unlocked, which is safe because the
 * writer (the only one who changes b->buf) is the thread doing the flush,
 * while readers only copy bytes already appended.  Reads of written
 * segments take the lock only to learn that the object is not in b->buf.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "crc32c.h"

#define BACKING_MAGIC	0x4b42575au	/* "ZWBK" in a little-endian dump */
#define NO_SEG		UINT32_MAX

enum seg_state { SEG_FREE, SEG_OPEN, SEG_FULL, SEG_PUNCHING, SEG_DEAD };

struct backing_hdr {
	uint32_t magic;
	uint32_t crc;
	uint32_t slot;
	uint16_t len;
	uint8_t codec;
	uint8_t flags;		/* 0; room for later use */
};
_Static_assert(sizeof(struct backing_hdr) == BACKING_HDR_SIZE, "header size");
_Static_assert(BACKING_SCRATCH_SIZE >= BACKING_ALIGN - 16 + BACKING_HDR_SIZE + BACKING_MAX_DATA,
	       "scratch covers the worst-placed object");
_Static_assert(BACKING_SEG_SIZE % BACKING_ALIGN == 0, "segments are whole blocks");

struct backing {
	int fd;
	uint32_t nr_segs;
	unsigned char *buf;		/* the open segment, BACKING_SEG_SIZE */

	pthread_mutex_t lock;
	/* protected by lock */
	uint8_t *state;			/* enum seg_state, per segment */
	uint32_t *live;			/* live bytes, per segment */
	uint8_t *stuck;			/* compaction could not empty it: skip it */
	uint32_t reserve;		/* free segments only compaction may open */
	bool compacting;		/* the writer is compacting: it may use them */
	uint32_t open_seg;		/* NO_SEG when none is open */
	uint32_t used;			/* bytes appended to the open segment */
	uint32_t flushed;		/* of those, bytes on disk */
	uint32_t pend_objs;		/* live objects appended since the last flush */
	uint32_t pend_live;		/* and their bytes */
	bool close_wanted;		/* an append found no room: close at the next flush */
	bool flushing;
	bool defer_punch;		/* dead segments wait for backing_reap() */
	uint32_t nr_dead;		/* segments DEAD */
	uint64_t segs_used;		/* not FREE */
	uint64_t bytes_live;
	uint64_t objects;

	atomic_uint_fast64_t bytes_written;
	atomic_uint_fast64_t writes;
	atomic_uint_fast64_t reads;
	atomic_uint_fast64_t write_errors;
	atomic_uint_fast64_t read_errors;
	atomic_uint_fast64_t holes_punched;
};

static inline uint32_t obj_size(uint32_t len)
{
	return (BACKING_HDR_SIZE + len + 15) & ~15u;
}

static uint32_t obj_crc(const struct backing_hdr *h, const void *data)
{
	uint32_t crc = crc32c(0, data, h->len);

	return crc32c(crc, &h->slot, BACKING_HDR_SIZE - offsetof(struct backing_hdr, slot));
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- open / close ------------------------------------------------------- */

/* Open path as a backing file: the checks that keep us from clobbering. */
static int open_file(const char *path, char *err, size_t errlen)
{
	struct stat st;
	bool created = false;
	int fd, flags, e;

	/* lstat first for a clear message; fstat below closes the race. */
	if (lstat(path, &st) == 0) {
		if (S_ISLNK(st.st_mode)) {
			set_err(err, errlen, "backing file %s is a symlink: refused", path);
			return -ELOOP;
		}
		if (!S_ISREG(st.st_mode)) {
			set_err(err, errlen, "backing file %s is not a regular file", path);
			return -EINVAL;
		}
	} else if (errno != ENOENT) {
		e = errno;
		set_err(err, errlen, "backing file %s: %s", path, strerror(e));
		return -e;
	}

	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		created = true;
	else if (errno == EEXIST)
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ELOOP)
			set_err(err, errlen, "backing file %s is a symlink: refused", path);
		else
			set_err(err, errlen, "cannot open backing file %s: %s", path, strerror(e));
		return -e;
	}

	if (fstat(fd, &st) < 0) {
		e = errno;
		set_err(err, errlen, "backing file %s: fstat: %s", path, strerror(e));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		e = EINVAL;
		set_err(err, errlen, "backing file %s is not a regular file", path);
		goto out_close;
	}
	if (st.st_uid != geteuid()) {
		e = EPERM;
		set_err(err, errlen, "backing file %s is owned by uid %u, not by us (uid %u)",
			path, (unsigned int)st.st_uid, (unsigned int)geteuid());
		goto out_close;
	}
	if (st.st_mode & S_IWOTH) {
		e = EPERM;
		set_err(err, errlen, "backing file %s is writable by others (mode %04o): refused",
			path, (unsigned int)(st.st_mode & 07777));
		goto out_close;
	}
	/* Two daemons on one file would overwrite each other's swap. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		e = errno;
		if (e == EWOULDBLOCK)
			set_err(err, errlen, "backing file %s is in use by another process", path);
		else
			set_err(err, errlen, "backing file %s: flock: %s", path, strerror(e));
		goto out_close;
	}
	/*
	 * O_DIRECT is set after the open so that a filesystem without it
	 * (tmpfs before Linux 6.6) does not leave a file behind: open() would
	 * create the file and only then fail.
	 */
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_DIRECT) < 0) {
		e = errno;
		set_err(err, errlen, "backing file %s: the filesystem does not support O_DIRECT (%s)",
			path, strerror(e));
		goto out_close;
	}
	/* Swap does not survive a restart: free whatever the last run left. */
	if (ftruncate(fd, 0) < 0) {
		e = errno;
		set_err(err, errlen, "backing file %s: truncate: %s", path, strerror(e));
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	if (created)
		unlink(path);
	return -e;
}

struct backing *backing_open(const char *path, uint64_t max_size, char *err, size_t errlen)
{
	uint64_t nr = max_size / BACKING_SEG_SIZE;
	struct backing *b;
	void *buf;
	int fd, e;

	if (nr == 0 || nr >= NO_SEG) {
		set_err(err, errlen, "backing file size %llu: must be from 1 MiB to 4 PiB",
			(unsigned long long)max_size);
		errno = EINVAL;
		return NULL;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		goto out_nomem;
	b->state = calloc(nr, sizeof(*b->state));
	b->live = calloc(nr, sizeof(*b->live));
	b->stuck = calloc(nr, sizeof(*b->stuck));
	e = posix_memalign(&buf, BACKING_ALIGN, BACKING_SEG_SIZE);
	if (!b->state || !b->live || !b->stuck || e)
		goto out_free;
	b->buf = buf;
	e = pthread_mutex_init(&b->lock, NULL);
	if (e)
		goto out_free;

	fd = open_file(path, err, errlen);
	if (fd < 0) {
		pthread_mutex_destroy(&b->lock);
		free(b->buf);
		free(b->stuck);
		free(b->live);
		free(b->state);
		free(b);
		errno = -fd;
		return NULL;
	}
	b->fd = fd;
	b->nr_segs = (uint32_t)nr;
	/* Too small a file for a reserve just fills up and stays full. */
	b->reserve = nr >= 4 ? 1 : 0;
	b->open_seg = 0;
	b->state[0] = SEG_OPEN;
	b->segs_used = 1;
	return b;

out_free:
	free(b->buf);
	free(b->stuck);
	free(b->live);
	free(b->state);
	free(b);
out_nomem:
	set_err(err, errlen, "backing file %s: out of memory", path);
	errno = ENOMEM;
	return NULL;
}

void backing_close(struct backing *b)
{
	if (!b)
		return;
	/* Swapped memory may hold secrets: do not leave it on the disk. */
	if (ftruncate(b->fd, 0) < 0) {
		/* nothing better to do; the next open truncates again */
	}
	close(b->fd);
	pthread_mutex_destroy(&b->lock);
	free(b->buf);
	free(b->stuck);
	free(b->live);
	free(b->state);
	free(b);
}

/* ---- segments ------------------------------------------------------------ */

/*
 * Caller holds b->lock.  Lowest first, so the file stays short.  The last
 * b->reserve free segments are kept for compaction: a file full of sparse
 * segments could otherwise never be compacted, having nowhere to move
 * their objects to.
 */
static uint32_t pick_free(struct backing *b)
{
	uint32_t i;

	if (!b->compacting && b->nr_segs - b->segs_used <= b->reserve)
		return NO_SEG;
	for (i = 0; i < b->nr_segs; i++)
		if (b->state[i] == SEG_FREE)
			return i;
	return NO_SEG;
}

/* Caller holds b->lock. */
static void open_next(struct backing *b)
{
	b->open_seg = pick_free(b);
	b->used = 0;
	b->flushed = 0;
	b->pend_objs = 0;
	b->pend_live = 0;
	b->close_wanted = false;
	if (b->open_seg != NO_SEG) {
		b->state[b->open_seg] = SEG_OPEN;
		b->segs_used++;
	}
}

/*
 * Give a dead segment's blocks back (the filesystem passes the TRIM on when
 * mounted with discard, or fstrim does later), then make it reusable.  Called
 * without the lock; the segment is PUNCHING so nobody else touches it.
 */
static void punch_segment(struct backing *b, uint32_t seg)
{
	if (fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)seg * BACKING_SEG_SIZE, BACKING_SEG_SIZE) == 0)
		atomic_fetch_add_explicit(&b->holes_punched, 1, memory_order_relaxed);
	/* On failure (EOPNOTSUPP...) the blocks stay allocated; reuse overwrites them. */
	pthread_mutex_lock(&b->lock);
	b->state[seg] = SEG_FREE;
	b->stuck[seg] = 0;
	b->segs_used--;
	pthread_mutex_unlock(&b->lock);
}

int backing_append(struct backing *b, uint32_t slot, uint8_t codec, const void *data,
		   uint16_t len, uint64_t *loc)
{
	struct backing_hdr h;
	uint32_t size = obj_size(len);
	unsigned char *p;
	int ret = 0;

	if (len == 0 || len > BACKING_MAX_DATA)
		return -EINVAL;
	h.magic = BACKING_MAGIC;
	h.slot = slot;
	h.len = len;
	h.codec = codec;
	h.flags = 0;
	/* Checksum outside the lock: readers of the open segment wait on it. */
	h.crc = obj_crc(&h, data);

	pthread_mutex_lock(&b->lock);
	if (b->flushing) {
		ret = -EBUSY;
		goto out;
	}
	if (b->open_seg == NO_SEG) {
		ret = -ENOSPC;
		goto out;
	}
	if (BACKING_SEG_SIZE - b->used < size) {
		b->close_wanted = true;
		ret = -ENOSPC;
		goto out;
	}
	p = b->buf + b->used;
	memcpy(p, &h, sizeof(h));
	memcpy(p + sizeof(h), data, len);
	/* Padding too: nothing of an older segment's bytes goes to disk again. */
	memset(p + sizeof(h) + len, 0, size - sizeof(h) - len);
	*loc = (uint64_t)b->open_seg * BACKING_SEG_SIZE + b->used;
	b->used += size;
	b->live[b->open_seg] += size;
	b->bytes_live += size;
	b->objects++;
	b->pend_objs++;
	b->pend_live += size;
out:
	pthread_mutex_unlock(&b->lock);
	return ret;
}

static int write_all(int fd, const unsigned char *buf, size_t len, off_t off)
{
	ssize_t n;

	while (len) {
		n = pwrite(fd, buf, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* A short O_DIRECT write that is not whole blocks cannot be resumed. */
		if (n == 0 || n % BACKING_ALIGN)
			return -EIO;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

int backing_flush(struct backing *b)
{
	uint32_t seg, start, end;
	bool dead = false;
	int ret;

	/* Dead segments first: free ones for open_next() below. */
	backing_reap(b);
	pthread_mutex_lock(&b->lock);
	if (b->flushing) {
		pthread_mutex_unlock(&b->lock);
		return -EBUSY;
	}
	if (b->open_seg == NO_SEG) {
		open_next(b);
		ret = b->open_seg == NO_SEG ? -ENOSPC : 0;
		pthread_mutex_unlock(&b->lock);
		return ret;
	}
	seg = b->open_seg;
	if (b->live[seg] == 0) {
		/* Empty, or every object died: start it again, write nothing. */
		b->used = b->flushed = b->pend_objs = b->pend_live = 0;
		b->close_wanted = false;
		pthread_mutex_unlock(&b->lock);
		return 0;
	}
	if (b->used > b->flushed) {
		/* From the block where the last flush ended: its tail is new. */
		start = b->flushed & ~(BACKING_ALIGN - 1);
		end = (b->used + BACKING_ALIGN - 1) & ~(BACKING_ALIGN - 1);
		memset(b->buf + b->used, 0, end - b->used);
		b->flushing = true;
		pthread_mutex_unlock(&b->lock);

		ret = write_all(b->fd, b->buf + start, end - start,
				(off_t)seg * BACKING_SEG_SIZE + start);

		pthread_mutex_lock(&b->lock);
		b->flushing = false;
		if (ret) {
			pthread_mutex_unlock(&b->lock);
			atomic_fetch_add_explicit(&b->write_errors, 1, memory_order_relaxed);
			return ret;
		}
		atomic_fetch_add_explicit(&b->writes, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->bytes_written, end - start, memory_order_relaxed);
		b->flushed = b->used;
		b->pend_objs = 0;
		b->pend_live = 0;
	}
	/* Closed when an append found no room, or no raw page would fit. */
	if (b->close_wanted || BACKING_SEG_SIZE - b->used < obj_size(BACKING_MAX_DATA)) {
		/* Objects freed while the write ran may have emptied it already. */
		dead = b->live[seg] == 0;
		b->state[seg] = dead ? SEG_PUNCHING : SEG_FULL;
		open_next(b);
	}
	pthread_mutex_unlock(&b->lock);
	if (dead)
		punch_segment(b, seg);
	return 0;
}

void backing_abort(struct backing *b)
{
	uint32_t seg;

	pthread_mutex_lock(&b->lock);
	seg = b->open_seg;
	if (seg != NO_SEG && !b->flushing) {
		/* Objects freed since they were appended have left the counts already. */
		b->objects -= b->pend_objs;
		b->bytes_live -= b->pend_live;
		b->live[seg] -= b->pend_live;
		b->pend_objs = 0;
		b->pend_live = 0;
		b->used = b->flushed;
		b->close_wanted = false;
	}
	pthread_mutex_unlock(&b->lock);
}

/* ---- read / free ---------------------------------------------------------- */

static int check_obj(const struct backing_hdr *h, uint32_t slot, size_t avail)
{
	if (h->magic != BACKING_MAGIC || h->slot != slot || h->len == 0 ||
	    h->len > BACKING_MAX_DATA || BACKING_HDR_SIZE + (size_t)h->len > avail)
		return -EIO;
	if (obj_crc(h, h + 1) != h->crc)
		return -EIO;
	return 0;
}

/* Locations are 16-aligned offsets of a header inside a segment. */
static bool loc_valid(const struct backing *b, uint64_t loc)
{
	return !(loc & 15) && loc / BACKING_SEG_SIZE < b->nr_segs &&
	       loc % BACKING_SEG_SIZE <= BACKING_SEG_SIZE - BACKING_HDR_SIZE;
}

int backing_read(struct backing *b, uint64_t loc, uint32_t slot, void *scratch,
		 const void **data, uint16_t *len, uint8_t *codec)
{
	const struct backing_hdr *h;
	uint32_t seg, off, soff, delta, n;
	ssize_t got;
	size_t avail;
	int ret;

	if (!loc_valid(b, loc))
		goto out_err;
	seg = (uint32_t)(loc / BACKING_SEG_SIZE);
	off = (uint32_t)(loc % BACKING_SEG_SIZE);

	pthread_mutex_lock(&b->lock);
	if (seg == b->open_seg) {
		/* Not on disk yet (or being written): copy from the buffer. */
		if (off + BACKING_HDR_SIZE > b->used) {
			pthread_mutex_unlock(&b->lock);
			goto out_err;
		}
		h = (const void *)(b->buf + off);
		n = h->len <= BACKING_MAX_DATA ? obj_size(h->len) : 0;
		if (n == 0 || off + n > b->used) {
			pthread_mutex_unlock(&b->lock);
			goto out_err;
		}
		memcpy(scratch, h, n);
		pthread_mutex_unlock(&b->lock);
		h = scratch;
		avail = n;
	} else {
		pthread_mutex_unlock(&b->lock);
		/*
		 * One read of two blocks covers any object (see
		 * BACKING_SCRATCH_SIZE); an object never crosses a segment's end,
		 * so neither does the read.
		 */
		soff = off & ~(BACKING_ALIGN - 1);
		delta = off - soff;
		n = BACKING_SEG_SIZE - soff < BACKING_SCRATCH_SIZE ? BACKING_SEG_SIZE - soff :
								     BACKING_SCRATCH_SIZE;
		do
			got = pread(b->fd, scratch, n, (off_t)(loc - delta));
		while (got < 0 && errno == EINTR);
		if (got < 0 || (size_t)got < delta + BACKING_HDR_SIZE)
			goto out_err;
		h = (const void *)((unsigned char *)scratch + delta);
		avail = (size_t)got - delta;
	}
	ret = check_obj(h, slot, avail);
	if (ret)
		goto out_err;
	*data = h + 1;
	*len = h->len;
	*codec = h->codec;
	atomic_fetch_add_explicit(&b->reads, 1, memory_order_relaxed);
	return 0;

out_err:
	atomic_fetch_add_explicit(&b->read_errors, 1, memory_order_relaxed);
	return -EIO;
}

void backing_free(struct backing *b, uint64_t loc, uint16_t len)
{
	uint32_t seg = (uint32_t)(loc / BACKING_SEG_SIZE);
	uint32_t size = obj_size(len);
	bool punch;

	assert(loc_valid(b, loc));
	pthread_mutex_lock(&b->lock);
	assert(b->state[seg] == SEG_OPEN || b->state[seg] == SEG_FULL);
	assert(b->live[seg] >= size);
	b->live[seg] -= size;
	b->bytes_live -= size;
	b->objects--;
	if (seg == b->open_seg && loc % BACKING_SEG_SIZE >= b->flushed) {
		b->pend_objs--;
		b->pend_live -= size;
	}
	punch = b->live[seg] == 0 && b->state[seg] == SEG_FULL;
	if (punch && b->defer_punch) {
		b->state[seg] = SEG_DEAD;
		b->nr_dead++;
		punch = false;
	} else if (punch) {
		b->state[seg] = SEG_PUNCHING;
	}
	pthread_mutex_unlock(&b->lock);
	if (punch)
		punch_segment(b, seg);
}

void backing_defer_punch(struct backing *b)
{
	pthread_mutex_lock(&b->lock);
	b->defer_punch = true;
	pthread_mutex_unlock(&b->lock);
}

void backing_reap(struct backing *b)
{
	for (;;) {
		uint32_t seg = NO_SEG, i;

		pthread_mutex_lock(&b->lock);
		for (i = 0; b->nr_dead && i < b->nr_segs; i++) {
			if (b->state[i] == SEG_DEAD) {
				b->state[i] = SEG_PUNCHING;
				b->nr_dead--;
				seg = i;
				break;
			}
		}
		pthread_mutex_unlock(&b->lock);
		if (seg == NO_SEG)
			return;
		punch_segment(b, seg);
	}
}

void backing_get_stats(struct backing *b, struct backing_stats *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&b->lock);
	s->bytes_max = (uint64_t)b->nr_segs * BACKING_SEG_SIZE;
	s->segments = b->segs_used;
	s->bytes_used = b->segs_used * BACKING_SEG_SIZE;
	s->bytes_live = b->bytes_live;
	s->objects = b->objects;
	pthread_mutex_unlock(&b->lock);
	s->bytes_written = atomic_load_explicit(&b->bytes_written, memory_order_relaxed);
	s->writes = atomic_load_explicit(&b->writes, memory_order_relaxed);
	s->reads = atomic_load_explicit(&b->reads, memory_order_relaxed);
	s->write_errors = atomic_load_explicit(&b->write_errors, memory_order_relaxed);
	s->read_errors = atomic_load_explicit(&b->read_errors, memory_order_relaxed);
	s->holes_punched = atomic_load_explicit(&b->holes_punched, memory_order_relaxed);
}

/* ---- segment compaction ----------------------------------------------------- */

int backing_pick_sparse(struct backing *b, unsigned int pct, uint32_t *seg)
{
	uint32_t i, best = NO_SEG, best_live = (uint32_t)((uint64_t)BACKING_SEG_SIZE * pct / 100);

	pthread_mutex_lock(&b->lock);
	for (i = 0; i < b->nr_segs; i++)
		if (b->state[i] == SEG_FULL && !b->stuck[i] && b->live[i] < best_live) {
			best = i;
			best_live = b->live[i];
		}
	pthread_mutex_unlock(&b->lock);
	if (best == NO_SEG)
		return -ENOENT;
	*seg = best;
	return 0;
}

void backing_set_compacting(struct backing *b, bool on)
{
	pthread_mutex_lock(&b->lock);
	b->compacting = on;
	pthread_mutex_unlock(&b->lock);
}

bool backing_segment_emptied(struct backing *b, uint32_t seg)
{
	bool emptied;

	pthread_mutex_lock(&b->lock);
	emptied = b->state[seg] != SEG_FULL;
	if (!emptied)
		b->stuck[seg] = 1;
	pthread_mutex_unlock(&b->lock);
	return emptied;
}

int backing_read_segment(struct backing *b, uint32_t seg, void *buf)
{
	size_t done = 0;
	ssize_t n;

	if (seg >= b->nr_segs)
		return -EINVAL;
	while (done < BACKING_SEG_SIZE) {
		n = pread(b->fd, (unsigned char *)buf + done, BACKING_SEG_SIZE - done,
			  (off_t)seg * BACKING_SEG_SIZE + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			atomic_fetch_add_explicit(&b->read_errors, 1, memory_order_relaxed);
			return -errno;
		}
		if (n == 0)
			break;	/* a segment written short (its tail was never used) */
		done += (size_t)n;
	}
	/* Past what was written reads as no object. */
	memset((unsigned char *)buf + done, 0, BACKING_SEG_SIZE - done);
	return 0;
}

bool backing_next_object(const void *buf, uint32_t seg, uint32_t *pos,
			 struct backing_object *obj)
{
	const unsigned char *base = buf;

	while (*pos + BACKING_HDR_SIZE <= BACKING_SEG_SIZE) {
		const struct backing_hdr *h = (const void *)(base + *pos);
		uint32_t at = *pos;

		/* Objects are packed from the start: the first non-object ends them. */
		if (h->magic != BACKING_MAGIC || h->len == 0 || h->len > BACKING_MAX_DATA ||
		    at + obj_size(h->len) > BACKING_SEG_SIZE)
			return false;
		*pos = at + obj_size(h->len);
		if (obj_crc(h, h + 1) != h->crc)
			continue;
		obj->loc = (uint64_t)seg * BACKING_SEG_SIZE + at;
		obj->slot = h->slot;
		obj->len = h->len;
		obj->codec = h->codec;
		obj->data = h + 1;
		return true;
	}
	return false;
}
