/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "fs.h"
#include "policy.h"
#include "store.h"
#include "transport.h"
#include "uring.h"

enum fs_ino {
	INO_ROOT = FUSE_ROOT_ID,
	INO_SWAP,
	INO_STATS,
	INO_CONTROL,
	INO_END
};

static const struct fs_file {
	const char *name;
	mode_t mode;
} fs_files[INO_END] = {
	[INO_ROOT] = { ".", S_IFDIR | 0755 },
	[INO_SWAP] = { "swap", S_IFREG | 0600 },
	[INO_STATS] = { "stats", S_IFREG | 0440 },	/* root:stats_group */
	[INO_CONTROL] = { "control", S_IFREG | 0200 },
};

static struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_stat(struct fs *fs, fuse_ino_t ino, struct stat *stbuf)
{
	memset(stbuf, 0, sizeof(*stbuf));
	stbuf->st_ino = ino;
	stbuf->st_mode = fs_files[ino].mode;
	stbuf->st_nlink = S_ISDIR(stbuf->st_mode) ? 2 : 1;
	stbuf->st_uid = fs->owner;
	stbuf->st_gid = ino == INO_STATS ? fs->stats_gid : getgid();
	stbuf->st_blksize = STORE_PAGE_SIZE;
	stbuf->st_atim = stbuf->st_mtim = stbuf->st_ctim = fs->mount_time;
	if (ino == INO_SWAP) {
		struct store_counters c;

		store_get_counters(fs->store, &c);
		stbuf->st_size = (off_t)store_size(fs->store);
		/* Stored pages, as for a sparse file: `du` shows what is in it. */
		stbuf->st_blocks = (blkcnt_t)(c.pages_stored * (STORE_PAGE_SIZE / 512));
	}
}

static bool valid_ino(fuse_ino_t ino)
{
	return ino >= INO_ROOT && ino < INO_END;
}

/*
 * The second check after the kernel's (default_permissions): root, or the
 * daemon's own user, and nobody else, opens `swap` and `control` or changes
 * an attribute.  The caller's uid is the one the kernel puts in the request.
 * Reads, writes and fallocate go through a handle that open gave out (the
 * kernel's own model), so they are not checked again: the loop device's
 * worker, which sends them, need not carry the opener's credentials.
 */
static bool caller_is_owner(fuse_req_t req, const struct fs *fs)
{
	uid_t uid = fuse_req_ctx(req)->uid;

	return uid == 0 || uid == fs->owner;
}

static void deny(fuse_req_t req, struct fs *fs, int err)
{
	atomic_fetch_add_explicit(&fs->io.access_denied, 1, memory_order_relaxed);
	fuse_reply_err(req, err);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	fuse_ino_t ino;

	if (parent != INO_ROOT) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (ino = INO_SWAP; ino < INO_END; ino++) {
		if (strcmp(name, fs_files[ino].name))
			continue;
		memset(&e, 0, sizeof(e));
		e.ino = ino;
		/* Attributes change (st_blocks) but nothing else can rename or
		 * remove these files: cache the entry for long. */
		e.attr_timeout = 1.0;
		e.entry_timeout = 3600.0;
		fill_stat(req_fs(req), ino, &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}
	fuse_reply_err(req, ENOENT);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat stbuf;

	if (!valid_ino(ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(req_fs(req), ino, &stbuf);
	fuse_reply_attr(req, &stbuf, 1.0);
}

/* The files have fixed sizes and owners: a size change is refused, since
 * truncating the swap file would throw its pages away; other attributes
 * (times from touch, O_TRUNC on control and stats) are accepted and ignored. */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct stat stbuf;

	if (!valid_ino(ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!caller_is_owner(req, fs)) {
		deny(req, fs, EPERM);
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && ino == INO_SWAP &&
	    (uint64_t)attr->st_size != store_size(fs->store)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fill_stat(fs, ino, &stbuf);
	fuse_reply_attr(req, &stbuf, 1.0);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	char buf[512];
	size_t used = 0;
	fuse_ino_t i;

	if (ino != INO_ROOT) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof(buf))
		size = sizeof(buf);
	/* Entry i lives at offset i; "." and ".." first. */
	for (i = (fuse_ino_t)off; i < INO_END + 1; i++) {
		struct stat st = { .st_ino = i == 0 ? INO_ROOT : i, .st_mode = S_IFDIR };
		const char *name;
		size_t n;

		if (i == 0)
			name = ".";
		else if (i == INO_ROOT)
			name = "..";
		else if (i < INO_END)
			name = fs_files[i].name, st.st_mode = fs_files[i].mode;
		else
			break;
		n = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

/*
 * A snapshot buffer for an open of `stats`.  They are made at start, so an
 * open never allocates (the request thread also serves swap, and a malloc
 * under memory pressure could wait on reclaim, which may wait on swap).  The
 * last free one is kept for the owner, so that other readers cannot keep
 * root from its own figures.  NULL when none is free.
 */
static struct fs_stats_slot *stats_slot_get(struct fs *fs, bool owner)
{
	unsigned int i, free_left = 0;

	for (i = 0; i < FS_STATS_SLOTS; i++)
		free_left += !atomic_load(&fs->stats_slot[i].busy);
	if (free_left <= 1 && !owner)
		return NULL;
	for (i = 0; i < FS_STATS_SLOTS; i++) {
		bool busy = false;

		if (atomic_compare_exchange_strong(&fs->stats_slot[i].busy, &busy, true))
			return &fs->stats_slot[i];
	}
	return NULL;
}


static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	int acc = fi->flags & O_ACCMODE;
	bool owner = caller_is_owner(req, fs);
	struct fs_stats_slot *slot;

	if ((ino == INO_SWAP || ino == INO_CONTROL) && !owner) {
		deny(req, fs, EACCES);
		return;
	}
	switch (ino) {
	case INO_SWAP:
		fi->direct_io = 1;
		fi->keep_cache = 0;
		transport_hold(&fs->tp);
		break;
	case INO_STATS:
		if (acc != O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		/* Others reach the mount only with allow_other; the kernel has
		 * checked that they are in the file's group. */
		if (!owner && !fs->others_allowed) {
			deny(req, fs, EACCES);
			return;
		}
		slot = stats_slot_get(fs, owner);
		if (!slot) {
			fuse_reply_err(req, EBUSY);
			return;
		}
		slot->len = stats_snapshot(fs->store, fs->policy, fs->dicttrain, &fs->io,
					   slot->text, FS_STATS_CAP);
		fi->fh = (uint64_t)fs->fh_tag << 32 | (uint64_t)(slot - fs->stats_slot);
		fi->direct_io = 1;	/* the size is not known ahead */
		break;
	case INO_CONTROL:
		if (acc != O_WRONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		fi->direct_io = 1;
		break;
	default:
		fuse_reply_err(req, ino == INO_ROOT ? EISDIR : ENOENT);
		return;
	}
	fuse_reply_open(req, fi);
}

/* The slot of a `stats` handle, or NULL: one of a dead worker's (fs.h). */
static struct fs_stats_slot *stats_slot_of(struct fs *fs, uint64_t fh)
{
	uint64_t i = fh & UINT32_MAX;

	if (fh >> 32 != fs->fh_tag || i >= FS_STATS_SLOTS)
		return NULL;
	return &fs->stats_slot[i];
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);

	if (ino == INO_SWAP) {
		transport_release(&fs->tp);
	} else if (ino == INO_STATS) {
		struct fs_stats_slot *slot = stats_slot_of(fs, fi->fh);

		if (slot)
			atomic_store(&slot->busy, false);
	}
	fuse_reply_err(req, 0);
}

/* Before a request on the swap file: the worker's path counters start
 * from zero, and its disk reads go into the stats. */
static void fs_io_begin(struct fs *fs, struct store_worker *w)
{
	w->pages_arena = 0;
	w->pages_backing = 0;
	w->room_wait_ns = 0;
	w->pread_lat = &fs->io.lat[STATS_PATH_BACKING_PREAD];
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct transport_thread *t = transport_current();
	struct fs *fs = req_fs(req);
	struct uring_req *ring;
	unsigned char *dst;
	uint64_t start, ns;
	ssize_t n;

	if (ino == INO_STATS) {
		struct fs_stats_slot *slot = stats_slot_of(fs, fi->fh);

		/* Its snapshot died with the worker that took it: open again. */
		if (!slot) {
			fuse_reply_err(req, ESTALE);
			return;
		}
		if (off < 0 || (size_t)off >= slot->len)
			size = 0;
		else if (size > slot->len - (size_t)off)
			size = slot->len - (size_t)off;
		fuse_reply_buf(req, slot->text + (off < 0 ? 0 : off), size);
		return;
	}
	if (ino != INO_SWAP || off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size > TRANSPORT_MAX_IO)
		size = TRANSPORT_MAX_IO;
	/* From a ring, pages go straight into the reply's payload buffer. */
	ring = uring_current();
	dst = ring ? ring->payload : t->rbuf;
	fs_io_begin(fs, &t->worker);
	start = transport_now_ns();
	n = store_read(fs->store, &t->worker, (uint64_t)off, dst, size);
	ns = transport_now_ns() - start;
	stats_io_account(&fs->io, STATS_REQ_READ, n > 0 ? (uint64_t)n : 0, ns, n < 0);
	stats_io_path(&fs->io, STATS_REQ_READ, &t->worker, ns);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, (const char *)dst, (size_t)n);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct transport_thread *t = transport_current();
	struct fs *fs = req_fs(req);
	uint64_t start, ns;
	int err;

	if (ino == INO_CONTROL) {
		err = control_run(fs->policy, fs->dicttrain, buf, size);
		goto out;
	}
	if (ino != INO_SWAP || off < 0) {
		err = -EINVAL;
		goto out;
	}
	fs_io_begin(fs, &t->worker);
	start = transport_now_ns();
	err = store_write(fs->store, &t->worker, (uint64_t)off, buf, size);
	ns = transport_now_ns() - start;
	stats_io_account(&fs->io, STATS_REQ_WRITE, err ? 0 : size, ns, err);
	stats_io_path(&fs->io, STATS_REQ_WRITE, &t->worker, ns);
	/* Past the high watermark, writeback starts now, not at the next tick. */
	if (fs->policy)
		policy_note_write(fs->policy);
out:
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_write(req, size);
}

static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct transport_thread *t = transport_current();
	struct fs *fs = req_fs(req);
	uint64_t start, ns;
	int err;

	if (ino != INO_SWAP || off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off + (uint64_t)len > store_size(fs->store) &&
	    !(mode & FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EFBIG);	/* the file cannot grow */
		return;
	}
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		/* Plain allocation: every page of the file already "exists". */
		fuse_reply_err(req, 0);
		return;
	}
	/* Punching past the end is a no-op for a regular file: clamp. */
	if ((uint64_t)off >= store_size(fs->store)) {
		fuse_reply_err(req, 0);
		return;
	}
	if ((uint64_t)len > store_size(fs->store) - (uint64_t)off)
		len = (off_t)(store_size(fs->store) - (uint64_t)off);
	fs_io_begin(fs, &t->worker);
	start = transport_now_ns();
	err = store_discard(fs->store, &t->worker, (uint64_t)off, (uint64_t)len);
	ns = transport_now_ns() - start;
	stats_io_account(&fs->io, STATS_REQ_DISCARD, (uint64_t)len, ns, err);
	stats_io_path(&fs->io, STATS_REQ_DISCARD, &t->worker, ns);
	fuse_reply_err(req, -err);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	struct store_counters c;
	struct statvfs sv;
	uint64_t pages = store_size(fs->store) / STORE_PAGE_SIZE;

	store_get_counters(fs->store, &c);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = STORE_PAGE_SIZE;
	sv.f_blocks = pages;
	sv.f_bfree = sv.f_bavail = pages - c.pages_stored;
	sv.f_files = sv.f_ffree = 0;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static void fs_init_conn(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	conn->max_write = TRANSPORT_MAX_IO;
	/* Each ring entry must hold the largest request: on many CPUs the
	 * rings' locked buffers would grow past their budget otherwise. */
	if (fs->tp.uring_wanted && uring_max_request() < conn->max_write)
		conn->max_write = (unsigned int)uring_max_request();
	conn->max_readahead = 0;
	/* Splice would move pages through a pipe for every request: for
	 * data we compress anyway a copy is cheaper. */
	conn->want &= ~(unsigned int)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
				      FUSE_CAP_SPLICE_MOVE);
	/* Reads of `swap` must reach us in parallel, not one at a time. */
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init_conn,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.release = fs_release,
	.read = fs_read,
	.write = fs_write,
	.fallocate = fs_fallocate,
	.statfs = fs_statfs,
};

int fs_init(struct fs *fs, struct store *st, unsigned int threads, unsigned int busy_poll_us)
{
	unsigned int i;
	char *text;
	int err;

	memset(fs, 0, sizeof(*fs));
	fs->fh_tag = (uint32_t)getpid();
	fs->store = st;
	fs->owner = getuid();
	fs->stats_gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	err = transport_init(&fs->tp, st, &fs->io, threads, busy_poll_us);
	if (err)
		return err;
	text = malloc((size_t)FS_STATS_SLOTS * FS_STATS_CAP);
	if (!text) {
		transport_fini(&fs->tp);
		return -ENOMEM;
	}
	for (i = 0; i < FS_STATS_SLOTS; i++)
		fs->stats_slot[i].text = text + (size_t)i * FS_STATS_CAP;
	return 0;
}

void fs_fini(struct fs *fs)
{
	free(fs->stats_slot[0].text);
	transport_fini(&fs->tp);
}
