/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing: segments of the backing file.
 *
 * File layout: segment s is the file's bytes [s * SEG, (s + 1) * SEG); the
 * first block of segment 0 holds the file header (struct file_hdr), so
 * segment 0's objects start at BACKING_FILE_HDR_SIZE.  A location is an
 * object's offset in the file.
 *
 * Object layout in a segment, every object 16-byte aligned:
 *
 *	0       4     8      12    14      15      16    32             32+len
 *	| magic | crc | slot | len | codec | flags | tag | data ...     | pad to 16 |
 *
 * Sealed (flags OBJ_SEALED): data is encrypted; tag is the AEAD tag over the
 * data and, as authenticated data, the location and header bytes 0..3 and
 * 8..15; the nonce is (the segment's sequence, the offset in the segment);
 * crc is 0.  Plain (flags 0): crc is the CRC-32C of the data, header bytes
 * 8..15 and the location, so a flipped len or codec or a moved object is
 * caught too; tag is zeros.  An object costs round_up(32 + len, 16) bytes of
 * its segment; that is what live bytes count.
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
 * An OPEN segment whose objects all die stays OPEN (its flush then starts
 * it again, under a new sequence, and writes nothing); a FULL one becomes
 * PUNCHING (or DEAD, then PUNCHING), then FREE.
 *
 * Sequences.  b->seq[seg] is the number the segment got when it was last
 * opened or started again (b->next_seq counts them; 64 bits never wrap).
 * Each offset of a segment is filled at most once per sequence: appends
 * only move forward, a restart takes a new sequence, and an abort that
 * cannot take one (objects of this sequence are on disk already) closes the
 * segment instead of filling the dropped places again.  So (sequence,
 * offset), the nonce, never repeats under the key.
 *
 * Locking.  b->lock guards the segment table, the sequences, the open
 * segment's fill level and the byte counts.  It is never held across I/O
 * or sealing: an append seals into b->buf past b->used and only then takes
 * the lock to publish it, and a flush marks the segment as flushing and
 * writes b->buf unlocked; both are safe because the writer (the only one
 * who changes b->buf or moves b->used) is the thread doing them, while
 * readers only copy bytes below b->used.  Reads of written segments take
 * the lock only to learn the sequence and that the object is not in b->buf.
 * Callers hold a slot lock around backing_read() and backing_append(), or
 * read with backing_read_try() and check backing_read_current() under it
 * afterwards: the daemon's lock order is in store.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "backing.h"
#include "backing_file.h"
#include "crc32c.h"
#include "seal.h"

#define BACKING_MAGIC	0x4b42575au	/* "ZWBK" in a little-endian dump */
#define OBJ_SEALED	0x01		/* flags: data encrypted, tag set */
#define NO_SEG		UINT32_MAX
/* A reader's buffer: header and data (at most 32 + 4096 bytes) of an object
 * starting at most 4080 bytes into a block end within the third block. */
#define READER_BUF	(3 * BACKING_ALIGN)

enum seg_state { SEG_FREE, SEG_OPEN, SEG_FULL, SEG_PUNCHING, SEG_DEAD };

struct backing_hdr {
	uint32_t magic;
	uint32_t crc;
	uint32_t slot;
	uint16_t len;
	uint8_t codec;
	uint8_t flags;
	uint8_t tag[SEAL_TAG_SIZE];
};
_Static_assert(sizeof(struct backing_hdr) == BACKING_HDR_SIZE, "header size");
_Static_assert(READER_BUF >= BACKING_ALIGN - 16 + BACKING_HDR_SIZE + BACKING_MAX_DATA,
	       "a reader's buffer covers the worst-placed object");
_Static_assert(BACKING_SEG_SIZE % BACKING_ALIGN == 0, "segments are whole blocks");

/*
 * What outlives a process (backing.h, Restart): in the caller's memory with
 * backing_attach(), in memory of our own with backing_open().  The key and
 * the cipher are written once, before any process seals; next_seq and seq[]
 * only under b->lock (a new process starts after the last one died).
 */
struct backing_shared {
	uint64_t magic;			/* BACKING_SHARED_MAGIC */
	uint32_t version;		/* BACKING_SHARED_VERSION */
	uint32_t nr_segs;
	uint32_t seg_size;		/* BACKING_SEG_SIZE */
	uint32_t cipher;		/* enum seal_cipher, never SEAL_AUTO */
	uint64_t next_seq;		/* the last sequence given */
	unsigned char key[SEAL_KEY_SIZE];	/* with a cipher: the sealing key */
	/* Counters that carry over from one process to the next. */
	atomic_uint_fast64_t bytes_written;
	atomic_uint_fast64_t writes;
	atomic_uint_fast64_t reads;
	atomic_uint_fast64_t bytes_read;	/* by backing_read's preads */
	atomic_uint_fast64_t write_errors;
	atomic_uint_fast64_t read_errors;
	atomic_uint_fast64_t auth_failures;
	atomic_uint_fast64_t holes_punched;
	uint64_t seq[];			/* per segment: its sequence (see above) */
};
#define BACKING_SHARED_MAGIC	UINT64_C(0x7a73776170626b31)	/* "zswapbk1" */
#define BACKING_SHARED_VERSION	1u

struct backing {
	int fd;
	uint32_t nr_segs;
	struct backing_shared *sh;
	size_t sh_bytes;
	bool attached;			/* sh is the caller's: backing_attach() */
	unsigned char *buf;		/* the open segment, BACKING_SEG_SIZE */
	struct seal_key *key;		/* NULL: plain, CRC-32C only */
	struct seal_ctx *wctx;		/* the writer's */

	pthread_mutex_t lock;
	/* protected by lock */
	uint8_t *state;			/* enum seg_state, per segment */
	uint32_t *live;			/* live bytes, per segment */
	uint8_t *stuck;			/* compaction could not empty it: skip it */
	uint64_t *seq;			/* per segment: its sequence (see above), sh->seq */
	uint32_t reserve;		/* free segments only compaction may open */
	bool compacting;		/* the writer is compacting: it may use them */
	uint32_t open_seg;		/* NO_SEG when none is open */
	uint32_t used;			/* bytes of the open segment filled (from its start) */
	uint32_t flushed;		/* of those, bytes on disk */
	uint32_t pend_objs;		/* live objects appended since the last flush */
	uint32_t pend_live;		/* and their bytes */
	bool close_wanted;		/* no more appends: close at the next flush */
	bool flushing;
	bool defer_punch;		/* dead segments wait for backing_reap() */
	uint32_t nr_dead;		/* segments DEAD */
	uint64_t segs_used;		/* not FREE */
	uint64_t bytes_live;
	uint64_t objects;
};

struct backing_reader {
	struct backing *b;
	unsigned char *buf;		/* READER_BUF bytes, BACKING_ALIGN-aligned */
	struct seal_ctx *ctx;		/* NULL: plain */
	uint64_t io_ns;			/* the last backing_read's pread (0: none) */
	uint64_t seq;			/* the sequence of its segment then */
};

static const uint8_t zero_tag[SEAL_TAG_SIZE];

static inline uint32_t obj_size(uint32_t len)
{
	return (BACKING_HDR_SIZE + len + 15) & ~15u;
}

/* Where a segment's objects start: after the file header in segment 0. */
static inline uint32_t seg_start(uint32_t seg)
{
	return seg ? 0 : BACKING_FILE_HDR_SIZE;
}

static uint32_t obj_crc(const struct backing_hdr *h, const void *data, uint64_t loc)
{
	uint32_t crc = crc32c(0, data, h->len);

	crc = crc32c(crc, &h->slot, offsetof(struct backing_hdr, tag) -
				    offsetof(struct backing_hdr, slot));
	return crc32c(crc, &loc, sizeof(loc));
}

/* Nonce: the segment's sequence, then the offset in the segment. */
static void obj_nonce(uint8_t nonce[SEAL_NONCE_SIZE], uint64_t seq, uint64_t loc)
{
	uint32_t off = (uint32_t)(loc % BACKING_SEG_SIZE);

	_Static_assert(sizeof(seq) + sizeof(off) == SEAL_NONCE_SIZE, "nonce size");
	memcpy(nonce, &seq, sizeof(seq));
	memcpy(nonce + sizeof(seq), &off, sizeof(off));
}

#define OBJ_AD_SIZE	20
/* Authenticated data: the location, the magic, slot, len, codec and flags. */
static void obj_ad(uint8_t ad[OBJ_AD_SIZE], const struct backing_hdr *h, uint64_t loc)
{
	memcpy(ad, &loc, sizeof(loc));
	memcpy(ad + 8, &h->magic, sizeof(h->magic));
	memcpy(ad + 12, &h->slot, offsetof(struct backing_hdr, tag) -
				  offsetof(struct backing_hdr, slot));
}

/*
 * Make the object of slot at h (its place in the segment buffer, loc in the
 * file): header, data sealed or copied, padding.  Returns 0 or -EIO.
 */
static int obj_make(struct backing *b, struct backing_hdr *h, uint64_t loc, uint64_t seq,
		    uint32_t slot, uint8_t codec, const void *data, uint16_t len)
{
	unsigned char *out = (unsigned char *)(h + 1);
	uint8_t nonce[SEAL_NONCE_SIZE], ad[OBJ_AD_SIZE];

	h->magic = BACKING_MAGIC;
	h->slot = slot;
	h->len = len;
	h->codec = codec;
	memset(h->tag, 0, sizeof(h->tag));
	/* Padding too: nothing of an older segment's bytes goes to disk again. */
	memset(out + len, 0, obj_size(len) - BACKING_HDR_SIZE - len);
	if (!b->wctx) {
		h->flags = 0;
		memcpy(out, data, len);
		h->crc = obj_crc(h, out, loc);
		return 0;
	}
	h->flags = OBJ_SEALED;
	h->crc = 0;
	obj_nonce(nonce, seq, loc);
	obj_ad(ad, h, loc);
	return seal_encrypt(b->wctx, nonce, ad, sizeof(ad), data, out, len, h->tag);
}

/*
 * Check the object at h, at loc in the file, of the segment opening seq,
 * with avail bytes of it at hand, and open it in place (decrypt, or check
 * its CRC).  Returns 0, -EIO (not a whole good object), or -EBADMSG (sealed,
 * and the tag does not match).
 */
static int obj_open(struct backing_reader *r, struct backing_hdr *h, uint64_t loc,
		    uint64_t seq, size_t avail)
{
	uint8_t nonce[SEAL_NONCE_SIZE], ad[OBJ_AD_SIZE];
	unsigned char *data = (unsigned char *)(h + 1);

	if (h->magic != BACKING_MAGIC || h->len == 0 || h->len > BACKING_MAX_DATA ||
	    BACKING_HDR_SIZE + (size_t)h->len > avail)
		return -EIO;
	if (!r->ctx) {
		/* A sealed object in a plain file is not one of ours either. */
		if (h->flags != 0 || memcmp(h->tag, zero_tag, sizeof(zero_tag)) ||
		    obj_crc(h, data, loc) != h->crc)
			return -EIO;
		return 0;
	}
	if (h->flags != OBJ_SEALED || h->crc != 0)
		return -EIO;
	obj_nonce(nonce, seq, loc);
	obj_ad(ad, h, loc);
	return seal_decrypt(r->ctx, nonce, ad, sizeof(ad), data, data, h->len, h->tag);
}

static bool loc_valid(const struct backing *b, uint64_t loc);

static void backing_free_mem(struct backing *b)
{
	seal_ctx_destroy(b->wctx);
	seal_key_destroy(b->key);
	free(b->buf);
	if (b->sh && !b->attached)
		munmap(b->sh, b->sh_bytes);
	free(b->stuck);
	free(b->live);
	free(b->state);
	free(b);
}

size_t backing_shared_bytes(uint64_t max_size)
{
	uint64_t nr = max_size / BACKING_SEG_SIZE;

	return sizeof(struct backing_shared) + (size_t)nr * sizeof(uint64_t);
}

static int check_max_size(uint64_t max_size, char *err, size_t errlen)
{
	uint64_t nr = max_size / BACKING_SEG_SIZE;

	if (nr == 0 || nr >= NO_SEG) {
		backing_set_err(err, errlen, "backing file size %llu: must be from 1 MiB to 4 PiB",
				(unsigned long long)max_size);
		return -EINVAL;
	}
	return 0;
}

int backing_shared_init(void *mem, size_t bytes, uint64_t max_size, enum seal_cipher cipher,
			char *err, size_t errlen)
{
	struct backing_shared *sh = mem;
	struct seal_key *k;
	int e;

	e = check_max_size(max_size, err, errlen);
	if (e)
		return e;
	if (bytes < backing_shared_bytes(max_size)) {
		backing_set_err(err, errlen, "backing file: %zu bytes of state, %zu needed", bytes,
				backing_shared_bytes(max_size));
		return -EINVAL;
	}
	memset(sh, 0, backing_shared_bytes(max_size));
	sh->magic = BACKING_SHARED_MAGIC;
	sh->version = BACKING_SHARED_VERSION;
	sh->nr_segs = (uint32_t)(max_size / BACKING_SEG_SIZE);
	sh->seg_size = BACKING_SEG_SIZE;
	sh->cipher = SEAL_NONE;
	if (cipher == SEAL_NONE)
		return 0;
	if (cipher == SEAL_AUTO)
		cipher = seal_fastest();
	e = seal_key_draw(sh->key);
	/* A key made of it now: this libcrypto has the cipher. */
	k = e ? NULL : seal_key_import(cipher, sh->key);
	if (!k) {
		e = e ? -e : errno;
		seal_wipe(sh->key, sizeof(sh->key));
		backing_set_err(err, errlen, "backing file: cannot make a key to seal it with "
				"(%s): %s", seal_cipher_name(cipher), strerror(e));
		return -e;
	}
	seal_key_destroy(k);
	sh->cipher = cipher;
	return 0;
}

void backing_shared_wipe(void *mem)
{
	struct backing_shared *sh = mem;

	seal_wipe(sh->key, sizeof(sh->key));
}

/* The private part of a backing over sh: every segment free, none open. */
static struct backing *backing_new(struct backing_shared *sh, size_t sh_bytes, bool attached,
				   char *err, size_t errlen)
{
	uint32_t nr = sh->nr_segs;
	struct backing *b;
	void *buf;
	int e;

	b = calloc(1, sizeof(*b));
	if (!b)
		goto out_nomem;
	b->sh = sh;
	b->sh_bytes = sh_bytes;
	b->attached = attached;
	b->fd = -1;
	b->seq = sh->seq;
	b->state = calloc(nr, sizeof(*b->state));
	b->live = calloc(nr, sizeof(*b->live));
	b->stuck = calloc(nr, sizeof(*b->stuck));
	e = posix_memalign(&buf, BACKING_ALIGN, BACKING_SEG_SIZE);
	if (e)
		buf = NULL;
	b->buf = buf;
	if (!b->state || !b->live || !b->stuck || !b->buf)
		goto out_free;
	if (sh->cipher != SEAL_NONE) {
		b->key = seal_key_import((enum seal_cipher)sh->cipher, sh->key);
		b->wctx = b->key ? seal_ctx_create(b->key) : NULL;
		if (!b->wctx) {
			e = errno;
			backing_set_err(err, errlen, "backing file: cannot key the cipher (%s): %s",
					seal_cipher_name((enum seal_cipher)sh->cipher),
					strerror(e));
			if (!attached)
				b->sh = NULL;	/* the caller's to unmap */
			backing_free_mem(b);
			errno = e;
			return NULL;
		}
	}
	e = pthread_mutex_init(&b->lock, NULL);
	if (e)
		goto out_free;
	b->nr_segs = nr;
	/* Too small a file for a reserve just fills up and stays full. */
	b->reserve = nr >= 4 ? 1 : 0;
	b->open_seg = NO_SEG;
	return b;

out_free:
	if (!attached)
		b->sh = NULL;
	backing_free_mem(b);
out_nomem:
	backing_set_err(err, errlen, "backing file: out of memory");
	errno = ENOMEM;
	return NULL;
}

struct backing *backing_open(const char *path, uint64_t max_size, enum seal_cipher cipher,
			     char *err, size_t errlen)
{
	size_t bytes = backing_shared_bytes(max_size);
	struct backing_shared *sh;
	struct backing *b;
	int fd, e;

	e = check_max_size(max_size, err, errlen);
	if (e) {
		errno = -e;
		return NULL;
	}
	/* The key is kept in the seal_key's page; drawn here first, so this
	 * page is locked and left out of core dumps too, and wiped below. */
	sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		backing_set_err(err, errlen, "backing file %s: out of memory", path);
		errno = ENOMEM;
		return NULL;
	}
	if ((cipher != SEAL_NONE && mlock(sh, sizeof(*sh))) ||
	    madvise(sh, bytes, MADV_DONTDUMP)) {
		e = errno;
		backing_set_err(err, errlen, "backing file %s: cannot lock memory for its key: %s",
				path, strerror(e));
		munmap(sh, bytes);
		errno = e;
		return NULL;
	}
	e = backing_shared_init(sh, bytes, max_size, cipher, err, errlen);
	b = e ? NULL : backing_new(sh, bytes, false, err, errlen);
	if (!b) {
		e = e ? -e : errno;
		munmap(sh, bytes);
		errno = e;
		return NULL;
	}
	seal_wipe(sh->key, sizeof(sh->key));
	fd = backing_file_open(path, err, errlen);
	if (fd < 0) {
		pthread_mutex_destroy(&b->lock);
		backing_free_mem(b);
		errno = -fd;
		return NULL;
	}
	b->fd = fd;
	b->open_seg = 0;
	b->state[0] = SEG_OPEN;
	b->seq[0] = ++b->sh->next_seq;
	b->used = b->flushed = seg_start(0);
	b->segs_used = 1;
	return b;
}

struct backing *backing_attach(int fd, void *shared, size_t bytes, char *err, size_t errlen)
{
	struct backing_shared *sh = shared;
	struct backing *b;

	if (bytes < sizeof(*sh) || sh->magic != BACKING_SHARED_MAGIC ||
	    sh->version != BACKING_SHARED_VERSION || sh->seg_size != BACKING_SEG_SIZE ||
	    sh->nr_segs == 0 || sh->nr_segs >= NO_SEG ||
	    bytes < backing_shared_bytes((uint64_t)sh->nr_segs * BACKING_SEG_SIZE) ||
	    (sh->cipher != SEAL_NONE && sh->cipher != SEAL_AES_256_GCM &&
	     sh->cipher != SEAL_CHACHA20_POLY1305)) {
		backing_set_err(err, errlen, "backing file: the state kept for it is not of "
				"this version (or damaged)");
		errno = EPROTO;
		return NULL;
	}
	b = backing_new(sh, bytes, true, err, errlen);
	if (!b)
		return NULL;
	b->fd = fd;
	return b;
}

int backing_adopt(struct backing *b, uint64_t loc, uint16_t len)
{
	uint32_t seg = (uint32_t)(loc / BACKING_SEG_SIZE), size = obj_size(len);
	int ret = -EINVAL;

	if (!loc_valid(b, loc) || len == 0 || len > BACKING_MAX_DATA ||
	    loc % BACKING_SEG_SIZE + size > BACKING_SEG_SIZE)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	/* Only a segment that was opened once holds objects; never more than it holds. */
	if (b->seq[seg] && b->seq[seg] <= b->sh->next_seq &&
	    (b->state[seg] == SEG_FREE || b->state[seg] == SEG_FULL) &&
	    b->live[seg] + size <= BACKING_SEG_SIZE - seg_start(seg)) {
		if (b->state[seg] == SEG_FREE) {
			b->state[seg] = SEG_FULL;
			b->segs_used++;
		}
		b->live[seg] += size;
		b->bytes_live += size;
		b->objects++;
		ret = 0;
	}
	pthread_mutex_unlock(&b->lock);
	return ret;
}

void backing_adopt_done(struct backing *b)
{
	uint64_t extent = 0;
	struct stat st;
	uint32_t i;

	/* Past the file's end nothing was ever written: free as it is. */
	if (fstat(b->fd, &st) == 0 && st.st_size > 0)
		extent = ((uint64_t)st.st_size + BACKING_SEG_SIZE - 1) / BACKING_SEG_SIZE;
	else
		extent = b->nr_segs;	/* cannot tell: punch them all */
	pthread_mutex_lock(&b->lock);
	for (i = 0; i < b->nr_segs && i < extent; i++) {
		if (b->state[i] != SEG_FREE)
			continue;
		/*
		 * No slot names an object of it: whatever is there (the dead
		 * process's open segment, a segment it was emptying or
		 * punching) is dead.  The writer punches it (backing_reap).
		 */
		b->state[i] = SEG_DEAD;
		b->nr_dead++;
		b->segs_used++;
	}
	pthread_mutex_unlock(&b->lock);
}

void backing_close(struct backing *b)
{
	if (!b)
		return;
	/*
	 * Down to the header, so that the next start knows the file for ours.
	 * Swapped memory may hold secrets: do not leave it on the disk (sealed,
	 * it is noise once the key is gone, but a plain file is not).  Not a
	 * worker's (attached): the file outlives it, and the keeper truncates
	 * it at its own end.
	 */
	if (b->attached)
		close(b->fd);
	else
		backing_file_close(b->fd);
	pthread_mutex_destroy(&b->lock);
	backing_free_mem(b);
}

enum seal_cipher backing_cipher(const struct backing *b)
{
	return b->key ? seal_key_cipher(b->key) : SEAL_NONE;
}

struct backing_reader *backing_reader_create(struct backing *b)
{
	struct backing_reader *r = calloc(1, sizeof(*r));
	void *buf;

	if (!r)
		return NULL;
	r->b = b;
	if (posix_memalign(&buf, BACKING_ALIGN, READER_BUF)) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->buf = buf;
	if (b->key) {
		r->ctx = seal_ctx_create(b->key);
		if (!r->ctx) {
			free(r->buf);
			free(r);
			errno = ENOMEM;
			return NULL;
		}
	}
	return r;
}

void backing_reader_destroy(struct backing_reader *r)
{
	if (!r)
		return;
	seal_ctx_destroy(r->ctx);
	free(r->buf);
	free(r);
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

/* Caller holds b->lock.  Fill the open segment from its start, under a new sequence. */
static void restart_open(struct backing *b)
{
	b->seq[b->open_seg] = ++b->sh->next_seq;
	b->used = seg_start(b->open_seg);
	b->flushed = b->used;
	b->pend_objs = 0;
	b->pend_live = 0;
	b->close_wanted = false;
}

/* Caller holds b->lock. */
static void open_next(struct backing *b)
{
	b->open_seg = pick_free(b);
	if (b->open_seg != NO_SEG) {
		b->state[b->open_seg] = SEG_OPEN;
		b->segs_used++;
		restart_open(b);
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
		      (off_t)seg * BACKING_SEG_SIZE + seg_start(seg),
		      BACKING_SEG_SIZE - seg_start(seg)) == 0)
		atomic_fetch_add_explicit(&b->sh->holes_punched, 1, memory_order_relaxed);
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
	uint32_t size = obj_size(len), seg = NO_SEG, off = 0;
	uint64_t seq = 0, at;
	int ret = 0;

	if (len == 0 || len > BACKING_MAX_DATA)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	if (b->flushing) {
		ret = -EBUSY;
	} else if (b->open_seg == NO_SEG) {
		ret = -ENOSPC;
	} else if (b->close_wanted || BACKING_SEG_SIZE - b->used < size) {
		b->close_wanted = true;
		ret = -ENOSPC;
	} else {
		seg = b->open_seg;
		off = b->used;
		seq = b->seq[seg];
	}
	pthread_mutex_unlock(&b->lock);
	if (ret)
		return ret;

	/* Sealed outside the lock, past b->used: readers of the open segment
	 * do not wait on it, and do not look there (see Locking). */
	at = (uint64_t)seg * BACKING_SEG_SIZE + off;
	ret = obj_make(b, (struct backing_hdr *)(b->buf + off), at, seq, slot, codec, data, len);
	if (ret)
		return ret;

	pthread_mutex_lock(&b->lock);
	assert(b->open_seg == seg && b->used == off);
	b->used += size;
	b->live[seg] += size;
	b->bytes_live += size;
	b->objects++;
	b->pend_objs++;
	b->pend_live += size;
	pthread_mutex_unlock(&b->lock);
	*loc = at;
	return 0;
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
		restart_open(b);
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
			atomic_fetch_add_explicit(&b->sh->write_errors, 1, memory_order_relaxed);
			return ret;
		}
		atomic_fetch_add_explicit(&b->sh->writes, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->sh->bytes_written, end - start, memory_order_relaxed);
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
		if (b->flushed == seg_start(seg)) {
			/* Nothing of this sequence is on disk: start again under a new one. */
			restart_open(b);
		} else {
			/* The dropped places were sealed under this sequence: never
			 * again.  The next append says -ENOSPC, the flush closes it. */
			b->pend_objs = 0;
			b->pend_live = 0;
			b->used = b->flushed;
			b->close_wanted = true;
		}
	}
	pthread_mutex_unlock(&b->lock);
}

/* ---- read / free ---------------------------------------------------------- */

/* Locations are 16-aligned offsets of a header inside a segment's object area. */
static bool loc_valid(const struct backing *b, uint64_t loc)
{
	uint64_t seg = loc / BACKING_SEG_SIZE, off = loc % BACKING_SEG_SIZE;

	return !(loc & 15) && seg < b->nr_segs && off >= seg_start((uint32_t)seg) &&
	       off <= BACKING_SEG_SIZE - BACKING_HDR_SIZE;
}

static int read_object(struct backing_reader *r, uint64_t loc, uint32_t slot, uint16_t want,
		       const void **data, uint16_t *len, uint8_t *codec, bool count);

int backing_read(struct backing_reader *r, uint64_t loc, uint32_t slot, const void **data,
		 uint16_t *len, uint8_t *codec)
{
	return backing_read_len(r, loc, slot, 0, data, len, codec);
}

int backing_read_len(struct backing_reader *r, uint64_t loc, uint32_t slot, uint16_t want,
		     const void **data, uint16_t *len, uint8_t *codec)
{
	return read_object(r, loc, slot, want, data, len, codec, true);
}

int backing_read_try(struct backing_reader *r, uint64_t loc, uint32_t slot, uint16_t want,
		     const void **data, uint16_t *len, uint8_t *codec)
{
	return read_object(r, loc, slot, want, data, len, codec, false);
}

bool backing_read_current(const struct backing_reader *r, uint64_t loc)
{
	struct backing *b = r->b;
	uint32_t seg = (uint32_t)(loc / BACKING_SEG_SIZE);
	bool same;

	if (!loc_valid(b, loc))
		return false;
	pthread_mutex_lock(&b->lock);
	same = b->seq[seg] == r->seq &&
	       (b->state[seg] == SEG_OPEN || b->state[seg] == SEG_FULL);
	pthread_mutex_unlock(&b->lock);
	return same;
}

/* backing_read_len(), counting failures (count) or not (a caller that
 * will look again under its lock: backing_read_try). */
static int read_object(struct backing_reader *r, uint64_t loc, uint32_t slot, uint16_t want,
		       const void **data, uint16_t *len, uint8_t *codec, bool count)
{
	struct backing *b = r->b;
	struct backing_hdr *h;
	struct timespec t0, t1;
	uint32_t seg, off, soff, delta, n;
	uint64_t seq;
	ssize_t got;
	size_t avail;
	int ret;

	r->io_ns = 0;
	if (!loc_valid(b, loc))
		goto out_err;
	seg = (uint32_t)(loc / BACKING_SEG_SIZE);
	off = (uint32_t)(loc % BACKING_SEG_SIZE);

	pthread_mutex_lock(&b->lock);
	/* Stable while the object lives: its segment cannot be opened again. */
	seq = b->seq[seg];
	r->seq = seq;
	if (seg == b->open_seg) {
		const struct backing_hdr *bh = (const void *)(b->buf + off);

		/* Not on disk yet (or being written): copy from the buffer. */
		if (off + BACKING_HDR_SIZE > b->used) {
			pthread_mutex_unlock(&b->lock);
			goto out_err;
		}
		n = bh->len <= BACKING_MAX_DATA ? obj_size(bh->len) : 0;
		if (n == 0 || off + n > b->used) {
			pthread_mutex_unlock(&b->lock);
			goto out_err;
		}
		memcpy(r->buf, bh, n);
		pthread_mutex_unlock(&b->lock);
		h = (void *)r->buf;
		avail = n;
	} else {
		pthread_mutex_unlock(&b->lock);
		/*
		 * One read of the blocks the object covers: with the length the
		 * caller expects (want), only those (a 1.5 KiB object: one block
		 * two times in three); without, those the largest object
		 * starting here would cover (two, three for the last 32 bytes
		 * of a block).  A wrong want reads too little for the object
		 * the header describes, or a header that is not what the caller
		 * expects: obj_open's length check, or the one below, fails it
		 * (-EIO), never data of another size.  An object never crosses
		 * a segment's end, so neither does the read.  Measured on the
		 * issue 13 benchmark: disk bytes read 1.75x -> 1.22x the plain
		 * swap file's.
		 */
		soff = off & ~(BACKING_ALIGN - 1);
		delta = off - soff;
		n = (delta + BACKING_HDR_SIZE +
		     (want && want <= BACKING_MAX_DATA ? want : BACKING_MAX_DATA) +
		     BACKING_ALIGN - 1) & ~(BACKING_ALIGN - 1);
		if (n > BACKING_SEG_SIZE - soff)
			n = BACKING_SEG_SIZE - soff;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			got = pread(b->fd, r->buf, n, (off_t)(loc - delta));
		while (got < 0 && errno == EINTR);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		r->io_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
			   (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
		if (got > 0)
			atomic_fetch_add_explicit(&b->sh->bytes_read, (uint64_t)got,
						  memory_order_relaxed);
		if (got < 0 || (size_t)got < delta + BACKING_HDR_SIZE)
			goto out_err;
		h = (void *)(r->buf + delta);
		avail = (size_t)got - delta;
	}
	if (h->slot != slot || (want && h->len != want))
		goto out_err;
	ret = obj_open(r, h, loc, seq, avail);
	if (ret == -EBADMSG && count)
		atomic_fetch_add_explicit(&b->sh->auth_failures, 1, memory_order_relaxed);
	if (ret)
		goto out_err;
	*data = h + 1;
	*len = h->len;
	*codec = h->codec;
	atomic_fetch_add_explicit(&b->sh->reads, 1, memory_order_relaxed);
	return 0;

out_err:
	if (count)
		atomic_fetch_add_explicit(&b->sh->read_errors, 1, memory_order_relaxed);
	return -EIO;
}

uint64_t backing_reader_io_ns(const struct backing_reader *r)
{
	return r->io_ns;
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
	s->sequence = b->sh->next_seq;
	pthread_mutex_unlock(&b->lock);
	s->bytes_written = atomic_load_explicit(&b->sh->bytes_written, memory_order_relaxed);
	s->writes = atomic_load_explicit(&b->sh->writes, memory_order_relaxed);
	s->reads = atomic_load_explicit(&b->sh->reads, memory_order_relaxed);
	s->bytes_read = atomic_load_explicit(&b->sh->bytes_read, memory_order_relaxed);
	s->write_errors = atomic_load_explicit(&b->sh->write_errors, memory_order_relaxed);
	s->read_errors = atomic_load_explicit(&b->sh->read_errors, memory_order_relaxed);
	s->auth_failures = atomic_load_explicit(&b->sh->auth_failures, memory_order_relaxed);
	s->holes_punched = atomic_load_explicit(&b->sh->holes_punched, memory_order_relaxed);
}

uint64_t backing_segment_seq(struct backing *b, uint32_t seg)
{
	uint64_t seq = 0;

	pthread_mutex_lock(&b->lock);
	if (seg < b->nr_segs)
		seq = b->seq[seg];
	pthread_mutex_unlock(&b->lock);
	return seq;
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
			atomic_fetch_add_explicit(&b->sh->read_errors, 1, memory_order_relaxed);
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

bool backing_next_object(struct backing_reader *r, void *buf, uint32_t seg, uint32_t *pos,
			 struct backing_object *obj)
{
	struct backing *b = r->b;
	unsigned char *base = buf;
	uint64_t seq;

	if (seg >= b->nr_segs || (*pos & 15))
		return false;
	/*
	 * The sequence of the segment's last opening: if it was opened again
	 * since buf was read (all its objects died meanwhile), buf's objects
	 * fail their tags, as dead objects may.
	 */
	pthread_mutex_lock(&b->lock);
	seq = b->seq[seg];
	pthread_mutex_unlock(&b->lock);
	if (*pos < seg_start(seg))
		*pos = seg_start(seg);
	while (*pos <= BACKING_SEG_SIZE - BACKING_HDR_SIZE) {
		struct backing_hdr *h = (void *)(base + *pos);
		uint32_t at = *pos;
		uint64_t loc = (uint64_t)seg * BACKING_SEG_SIZE + at;

		/* Objects are packed from the start: the first non-object ends them. */
		if (h->magic != BACKING_MAGIC || h->len == 0 || h->len > BACKING_MAX_DATA ||
		    at + obj_size(h->len) > BACKING_SEG_SIZE)
			return false;
		*pos = at + obj_size(h->len);
		if (obj_open(r, h, loc, seq, BACKING_SEG_SIZE - at))
			continue;
		obj->loc = loc;
		obj->slot = h->slot;
		obj->len = h->len;
		obj->codec = h->codec;
		obj->data = h + 1;
		return true;
	}
	return false;
}
