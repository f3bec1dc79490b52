/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing: the backing file that cold compressed pages are written back to.
 *
 * The file is cut into segments of BACKING_SEG_SIZE.  Objects (a compressed
 * page and a 32-byte header) are packed back to back, 16-byte aligned, into
 * one in-memory segment buffer, which backing_flush() writes with O_DIRECT
 * pwrites of what was appended since the last flush: the SSD sees few large
 * writes, and the page cache does not grow under the very memory pressure
 * writeback relieves.  A segment is filled once (only the block where one
 * flush ended is written again by the next); it becomes free again when its
 * last object is freed, and
 * then a hole is punched over it (TRIM on an SSD) and it is reused, lowest
 * first, so the file stays as small as the live data allows.  Rewriting the
 * live objects of sparse segments (compaction) is the caller's business:
 * read them back, append them again, free the old locations.
 *
 * The file's first block (BACKING_FILE_HDR_SIZE bytes, at the start of
 * segment 0) is a header that says what the file is: zswapfs's magic and
 * the format version.  backing_open() reuses an existing file only if it is
 * empty or has that header, and leaves any other file exactly as it was;
 * at close the file is truncated to the header, so that the next start
 * still knows it for ours.  The file never outlives the daemon otherwise:
 * backing_open() discards whatever an earlier run left in it (swap does not
 * survive a restart), and all its data is in native byte order.
 *
 * Where the file may be: see backing_open().
 *
 * Sealing (seal.h), on unless the cipher is SEAL_NONE: every object's data
 * is encrypted and authenticated with a key drawn at open (or kept for the
 * file: Restart, below), which exists only in locked memory.  The nonce is
 * the sequence number the object's segment got when it was opened for
 * filling (a counter, new at every opening, kept across processes) with the
 * object's offset in the segment: each opening
 * writes an offset once, so no nonce repeats, and the copy of a segment
 * from an earlier opening (replayed) fails its tag.  The header's fields
 * (magic, slot, len, codec, flags) stay readable for the segment walk and
 * are authenticated with the object's location, so an object changed,
 * moved, swapped with another or replayed fails too.  Without sealing, a
 * CRC-32C of the data, those fields and the location catches what a disk
 * or a stray write may do, not what an attacker may.  A read that does not
 * find exactly what was written returns -EIO, never wrong data.
 *
 * Threads.  backing_append(), backing_flush(), backing_abort() and
 * backing_reap() are the writer's: one thread at a time (the writeback
 * thread).  backing_read(), backing_free() and backing_get_stats() may be
 * called from any thread, concurrently with everything, including a flush
 * in progress; each reading thread has a backing_reader of its own.  The
 * caller must keep an object from being freed while it reads it (for the
 * store: the slot lock), or read with backing_read_try() and check after.  No function allocates memory after backing_open()
 * but backing_reader_create().
 */
#ifndef ZSWAPFS_BACKING_H
#define ZSWAPFS_BACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing_file.h"	/* BACKING_SEG_SIZE, BACKING_ALIGN, the file header */
#include "page.h"
#include "seal.h"

#define BACKING_HDR_SIZE	32u		/* an object's header, the tag included */
#define BACKING_MAX_DATA	ZS_PAGE_SIZE	/* largest object: a raw page (page.h) */

struct backing;
struct backing_reader;

/*
 * Open (or create) the backing file at path, usable up to max_size bytes
 * (rounded down to whole segments; the file grows as segments are
 * written), sealing objects with cipher (SEAL_NONE: a CRC only; SEAL_AUTO:
 * the faster cipher here).
 *
 * The file is created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, in a
 * directory that belongs to the daemon's euid and is not writable by group
 * or others (checked on the directory's descriptor, which the create then
 * goes through: a rename of the path meanwhile changes nothing).  An
 * existing file is used only if it is a regular file of ours, with one
 * link, no access for group or others, not locked by another process (an
 * flock is held while open), and empty or carrying zswapfs's header;
 * otherwise it is refused and left untouched.  Refused too: a filesystem
 * whose pages may themselves be swapped out or that is served from user
 * space (tmpfs, ramfs, FUSE), or one on a loop device whose file is on one
 * (checked down the chain of loop devices), a filesystem without O_DIRECT,
 * and max_size below one segment.  The old contents are discarded.  Returns
 * NULL with errno set and a message for the user in err.
 */
struct backing *backing_open(const char *path, uint64_t max_size, enum seal_cipher cipher,
			     char *err, size_t errlen);
/*
 * Truncate the file to its header and close it; wipe the key.  A backing of
 * backing_attach() only closes its descriptor and leaves the file as it is
 * (the next process goes on with it).
 */
void backing_close(struct backing *b);

/*
 * Restart (issue 11).  A process that serves may die at any instruction
 * and the next one go on with the same file: the file's descriptor (and its
 * flock) and what is needed to read every object the slots name live in
 * the caller's memory that outlives both (shm.h): the cipher chosen at the
 * first start, the key, the file's geometry, every segment's sequence and
 * the last sequence given, and the counters that carry over.  The rest
 * (which segments are in use, their live bytes, the open segment) is
 * rebuilt from the caller's own truth (store.h: the slot table) with
 * backing_adopt() for each object a slot names, then backing_adopt_done():
 * a segment no object is adopted from is dead, and the writer punches it
 * (backing_reap); none is open, so the segment a dead process was filling
 * is never filled again under its sequence.  A sequence is taken (next_seq
 * advanced, in that memory) before any object is sealed under it, so one
 * given before a death is never given again.  What makes it right: a
 * caller names an object (a slot) only once backing_flush() has put it on
 * disk, and frees it only after it no longer names it.
 *
 * backing_shared_bytes(): the size of that memory for a file of max_size.
 * backing_shared_init(): fill it (zeroed, locked, left out of core dumps:
 * it holds the key), choosing the cipher (SEAL_AUTO: the faster here) and
 * drawing the key; 0 or -errno with a message.  backing_shared_wipe():
 * wipe the key, at the end of the file's use (backing_file_close()).
 * backing_attach(): a backing over fd (from backing_file_open(), inherited)
 * and that memory; NULL with errno and a message.  backing_adopt(): 0, or
 * -EINVAL for an object that cannot be one (bad place or length, a segment
 * never opened, more live bytes than a segment holds).
 */
size_t backing_shared_bytes(uint64_t max_size);
int backing_shared_init(void *mem, size_t bytes, uint64_t max_size, enum seal_cipher cipher,
			char *err, size_t errlen);
void backing_shared_wipe(void *mem);
struct backing *backing_attach(int fd, void *shared, size_t bytes, char *err, size_t errlen);
int backing_adopt(struct backing *b, uint64_t loc, uint16_t len);
void backing_adopt_done(struct backing *b);
/* The cipher in force (never SEAL_AUTO). */
enum seal_cipher backing_cipher(const struct backing *b);

/*
 * A reading thread's state: an aligned buffer for O_DIRECT reads and a
 * cipher context.  Create one per thread that reads, at its start (this
 * allocates); destroy them all before backing_close().  NULL with errno set.
 */
struct backing_reader *backing_reader_create(struct backing *b);
void backing_reader_destroy(struct backing_reader *r);

/*
 * Add an object of len bytes (1..BACKING_MAX_DATA) for slot to the open
 * segment.  codec is the caller's byte that says how the data is coded (the
 * store: the codec id and, in bits 4..6, the dictionary generation), kept
 * in the header and covered by the checksum or tag like the rest of it.  Returns 0 and its location in *loc: its offset in the file, a
 * multiple of 16 (the low 4 bits are free for the caller's flags), never 0
 * (the file's header is there).  The location may be read and freed at
 * once, but it only survives a successful backing_flush(): after a failed
 * one it is gone.  Returns -ENOSPC when the open segment has no room (or
 * none is open, or an abort closed it): flush, then append again; -ENOSPC
 * again means the file is full.
 * -EINVAL for a bad len, -EBUSY when called during a flush.
 */
int backing_append(struct backing *b, uint32_t slot, uint8_t codec, const void *data,
		   uint16_t len, uint64_t *loc);
/*
 * Write what was appended to the open segment since the last flush.  The
 * segment stays open for more appends until one found no room (or no raw
 * page would fit any more); then the flush closes it and opens the next free
 * one.  So flush when an append says -ENOSPC and when a batch of writeback
 * ends; small batches still share segments.  Returns 0 when
 * the objects appended since the last flush are on disk (also when no free
 * segment is left to open: the next append says -ENOSPC); -ENOSPC when there
 * was nothing to write and still no free segment; or the write's error
 * (-EIO, -ENOSPC, -EFBIG...), counted in write_errors.  On an error the
 * segment's objects are not on disk: the caller keeps its pages in RAM and
 * calls backing_abort(), or flushes again later.
 */
int backing_flush(struct backing *b);
/*
 * Drop the objects appended since the last flush; their locations are
 * invalid.  Their places are not filled again under the same nonces: a
 * segment that has objects on disk already takes no more appends (the next
 * flush closes it); one that has none starts again under a new sequence.
 */
void backing_abort(struct backing *b);

/*
 * Read the object at loc, which must belong to slot, with the reader r of
 * the calling thread.  Returns 0 and points *data (inside r's buffer, valid
 * until r's next use) at its *len bytes, stored with *codec; or -EIO when it
 * cannot be read, or what is there is not an object of this slot that
 * passes its checksum or tag (all counted in read_errors; failed tags also
 * in auth_failures).
 */
int backing_read(struct backing_reader *r, uint64_t loc, uint32_t slot, const void **data,
		 uint16_t *len, uint8_t *codec);
/*
 * The same, for an object the caller knows to be want bytes long (the
 * slot's size): only the blocks it covers are read.  An object of any other
 * length is -EIO, as above (0: any length, the blocks of the largest).
 */
int backing_read_len(struct backing_reader *r, uint64_t loc, uint32_t slot, uint16_t want,
		     const void **data, uint16_t *len, uint8_t *codec);
/*
 * The same for a caller that does not hold the object's slot lock across
 * the read, so that the object may be freed, its segment punched or even
 * opened again meanwhile: what it returns is only good if, back under the
 * slot lock, the slot still points at loc and backing_read_current(r, loc)
 * says the segment is still in the opening that was read.  Failures are
 * not counted: the caller looks again under its lock (backing_read_len).
 */
int backing_read_try(struct backing_reader *r, uint64_t loc, uint32_t slot, uint16_t want,
		     const void **data, uint16_t *len, uint8_t *codec);
/* Whether loc's segment is still written or open in the opening r's last
 * read found (its sequence): the object r read is the one at loc now. */
bool backing_read_current(const struct backing_reader *r, uint64_t loc);
/* How long the last backing_read() of r waited for its pread, in ns; 0
 * when it read nothing from the disk (the open segment's buffer, or a
 * location refused before any I/O). */
uint64_t backing_reader_io_ns(const struct backing_reader *r);
/* The object at loc, of len bytes, is dead. */
void backing_free(struct backing *b, uint64_t loc, uint16_t len);
/*
 * From now on a segment whose last object dies in backing_free() is not
 * punched there (fallocate takes the inode lock and journal memory, which a
 * thread serving swap must not wait for) but by the writer: backing_reap(),
 * which backing_flush() also does first.  Call before threads use b.
 */
void backing_defer_punch(struct backing *b);
/* The writer's: punch the segments that died since, making them free. */
void backing_reap(struct backing *b);

/*
 * Segment compaction: objects of a sparse segment are read back and staged
 * again (by the writer), and the segment is freed when its last object has
 * moved.  backing_pick_sparse() finds the written segment with the fewest
 * live bytes, if that is below pct % of a segment: 0 and *seg, or -ENOENT.
 * backing_read_segment() reads a whole segment into buf (BACKING_SEG_SIZE
 * bytes, BACKING_ALIGN-aligned).  backing_next_object() walks what it read,
 * with the reader r of the calling thread: from *pos (start at 0), the next
 * object whose header and checksum or tag are good, opened in place in buf;
 * false at the end.  Objects that fail are skipped (and not counted: their
 * slots get EIO on read whatever happens, and are counted then), and they
 * keep the segment alive.  buf is trusted in nothing: any bytes at all end
 * in objects that passed their check, or in false.
 *
 * The last free segment is kept for compaction: only between
 * backing_set_compacting(b, true) and (b, false) may a flush open it, so
 * that a file full of sparse segments can still be compacted.  After
 * moving a segment's objects, backing_segment_emptied() says whether it is
 * free now; if not (damaged objects stay live), it is marked so that
 * backing_pick_sparse() passes it over until it does empty.
 */
struct backing_object {
	uint64_t loc;
	uint32_t slot;
	uint16_t len;
	uint8_t codec;
	const void *data;
};

int backing_pick_sparse(struct backing *b, unsigned int pct, uint32_t *seg);
int backing_read_segment(struct backing *b, uint32_t seg, void *buf);
void backing_set_compacting(struct backing *b, bool on);
bool backing_segment_emptied(struct backing *b, uint32_t seg);
bool backing_next_object(struct backing_reader *r, void *buf, uint32_t seg, uint32_t *pos,
			 struct backing_object *obj);

struct backing_stats {
	uint64_t bytes_max;		/* max_size, in whole segments */
	uint64_t bytes_used;		/* segments not free (the open one too), in bytes */
	uint64_t bytes_live;		/* live objects, headers and alignment included */
	uint64_t objects;		/* live objects */
	uint64_t segments;		/* segments not free */
	uint64_t bytes_written;		/* to the file, for the SSD's write budget */
	uint64_t writes;		/* segment writes that succeeded */
	uint64_t reads;			/* objects read back */
	uint64_t bytes_read;		/* by their preads (blocks, not objects) */
	uint64_t write_errors;
	uint64_t read_errors;		/* I/O errors, checksum/header/tag mismatches */
	uint64_t auth_failures;		/* of those, objects whose tag did not match */
	uint64_t holes_punched;		/* segments freed and given back to the fs */
	uint64_t sequence;		/* the last sequence given (Restart) */
};

void backing_get_stats(struct backing *b, struct backing_stats *s);
/* The sequence of seg's last opening (0: never opened), for tests. */
uint64_t backing_segment_seq(struct backing *b, uint32_t seg);

#endif
