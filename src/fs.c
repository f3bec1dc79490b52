/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "fs.h"
#include "harden.h"
#include "log.h"
#include "policy.h"
#include "reserve.h"
#include "store.h"
#include "uring.h"

/* The largest request we accept: fewer, larger requests mean fewer round
 * trips through the loop worker and /dev/fuse (DESIGN.md, "Speed"). */
#define FS_MAX_IO	(1024u * 1024u)

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

/* Per request thread: codec contexts and the buffer reads decompress into.
 * Made once when the thread starts; requests never allocate. */
struct fs_thread {
	struct fs *fs;
	struct fuse_session *se;
	struct store_worker worker;
	unsigned char *rbuf;		/* FS_MAX_IO bytes */
	pthread_t tid;
	int err;
	int read_err;			/* set by fs_dev_read: the last read's error */
	int backoff_ms;			/* pause after the last failure */
};

static __thread struct fs_thread *current_thread;

static void wake_loop(struct fs *fs);

static struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
		atomic_fetch_add(&fs->swap_opens, 1);
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
		slot->len = stats_snapshot(fs->store, fs->policy, &fs->io, slot->text,
					   FS_STATS_CAP);
		fi->fh = (uintptr_t)slot;
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

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);

	if (ino == INO_SWAP) {
		if (atomic_fetch_sub(&fs->swap_opens, 1) == 1 && atomic_load(&fs->stop_requested))
			wake_loop(fs);
	} else if (ino == INO_STATS) {
		struct fs_stats_slot *slot = (struct fs_stats_slot *)(uintptr_t)fi->fh;

		atomic_store(&slot->busy, false);
	}
	fuse_reply_err(req, 0);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_thread *t = current_thread;
	struct fs *fs = t->fs;
	struct uring_req *ring;
	unsigned char *dst;
	uint64_t start;
	ssize_t n;

	if (ino == INO_STATS) {
		struct fs_stats_slot *slot = (struct fs_stats_slot *)(uintptr_t)fi->fh;

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
	if (size > FS_MAX_IO)
		size = FS_MAX_IO;
	/* From a ring, pages go straight into the reply's payload buffer. */
	ring = uring_current();
	dst = ring ? ring->payload : t->rbuf;
	start = now_ns();
	n = store_read(fs->store, &t->worker, (uint64_t)off, dst, size);
	stats_io_account(&fs->io, STATS_REQ_READ, n > 0 ? (uint64_t)n : 0, now_ns() - start,
			 n < 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, (const char *)dst, (size_t)n);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fs_thread *t = current_thread;
	struct fs *fs = t->fs;
	uint64_t start;
	int err;

	if (ino == INO_CONTROL) {
		err = control_run(fs->policy, buf, size);
		goto out;
	}
	if (ino != INO_SWAP || off < 0) {
		err = -EINVAL;
		goto out;
	}
	start = now_ns();
	err = store_write(fs->store, &t->worker, (uint64_t)off, buf, size);
	stats_io_account(&fs->io, STATS_REQ_WRITE, err ? 0 : size, now_ns() - start, err);
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
	struct fs_thread *t = current_thread;
	struct fs *fs = t->fs;
	uint64_t start;
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
	start = now_ns();
	err = store_discard(fs->store, &t->worker, (uint64_t)off, (uint64_t)len);
	stats_io_account(&fs->io, STATS_REQ_DISCARD, (uint64_t)len, now_ns() - start, err);
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

	conn->max_write = FS_MAX_IO;
	/* Each ring entry must hold the largest request: on many CPUs the
	 * rings' locked buffers would grow past their budget otherwise. */
	if (fs->uring_wanted && uring_max_request() < conn->max_write)
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

/* ---- the request loop ------------------------------------------------- */

static struct fs *signal_fs;

static void on_stop_signal(int sig)
{
	uint64_t one = 1;
	ssize_t r;

	atomic_store(&signal_fs->stop_requested, sig);
	r = write(signal_fs->stop_fd, &one, sizeof(one));
	(void)r;
}

int fs_install_signal_handlers(struct fs *fs)
{
	struct sigaction sa;

	signal_fs = fs;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) ||
	    sigaction(SIGHUP, &sa, NULL))
		return -errno;
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	return 0;
}

/*
 * A stop was asked for.  While `swap` is open, a loop device (and maybe
 * swap) sits on us: exiting would take swapped-out memory with us, so the
 * stop waits until the last handle is released (fs_release wakes us then).
 * Returns true when the loop should end.
 */
static bool stop_allowed(struct fs *fs)
{
	static _Atomic bool said;
	uint64_t v;
	ssize_t r;

	if (atomic_load(&fs->swap_opens) == 0)
		return true;
	if (!atomic_exchange(&said, true))
		log_warn("the swap file is still open: stopping once it is closed "
			 "(swapoff and detach its loop device)");
	r = read(fs->stop_fd, &v, sizeof(v));	/* rearm */
	(void)r;
	return false;
}

static void wake_loop(struct fs *fs)
{
	uint64_t one = 1;
	ssize_t r = write(fs->stop_fd, &one, sizeof(one));

	(void)r;
}

/* Consecutive failures pause up to this long, so that a lasting error
 * costs a few wake-ups a second, not a CPU. */
#define FS_BACKOFF_MAX_MS	100

/*
 * Reading or polling /dev/fuse failed (ENOMEM, EIO, ...): the kernel has not
 * ended the connection (that is ENODEV, a clean end), so swap may still sit
 * on us.  Log now and then, count, pause a little (a stop request ends the
 * pause), and let the loop try again.
 */
static void loop_error(struct fs_thread *t, const char *what, int err)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5);
	struct pollfd pfd = { .fd = t->fs->stop_fd, .events = POLLIN };
	uint64_t held;

	atomic_fetch_add_explicit(&t->fs->io.loop_errors, 1, memory_order_relaxed);
	if (log_ratelimit(&rl, &held))
		log_err("request loop: %s: %s; serving goes on (%llu more since the last "
			"message)", what, strerror(-err), (unsigned long long)held);
	t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : 1;
	if (t->backoff_ms > FS_BACKOFF_MAX_MS)
		t->backoff_ms = FS_BACKOFF_MAX_MS;
	poll(&pfd, 1, t->backoff_ms);
}

/* A stop signal, and the swap file closed: have the mount unmounted (the
 * loop ends when the kernel ends the connection), or end now.  Returns
 * whether the loop should end. */
static bool stop_now(struct fs *fs)
{
	uint64_t v;
	ssize_t r;

	if (!fs->request_unmount)
		return true;
	r = read(fs->stop_fd, &v, sizeof(v));	/* rearm: serving goes on */
	(void)r;
	if (!atomic_exchange(&fs->unmount_requested, true))
		fs->request_unmount(fs->unmount_arg);
	return false;
}

static void *loop_thread(void *arg)
{
	struct fs_thread *t = arg;
	struct fuse_buf buf = { .mem = NULL };
	struct pollfd pfd[2] = {
		{ .fd = fuse_session_fd(t->se), .events = POLLIN },
		{ .fd = t->fs->stop_fd, .events = POLLIN },
	};
	uint64_t idle_since = 0;
	int res;

	current_thread = t;
	reserve_prepare_thread();	/* serving must not fault: reserve.h */
	while (!fuse_session_exited(t->se) && !atomic_load(&t->fs->leave_loop)) {
		t->read_err = 0;
		res = fuse_session_receive_buf(t->se, &buf);
		if (res > 0) {
			t->backoff_ms = 0;
			fuse_session_process_buf(t->se, &buf);
			uring_session_poll();	/* the rings start right after FUSE_INIT */
			continue;
		}
		/* 0: ENODEV, the kernel ended the connection (umount, abort),
		 * or another thread ended the session. */
		if (res == 0)
			break;
		/* fs_dev_read turned a failed read into EAGAIN */
		if (res == -EAGAIN && t->read_err) {
			loop_error(t, "reading /dev/fuse", t->read_err);
			continue;
		}
		/*
		 * Optional busy polling: looking for the next request a few
		 * microseconds saves the wake-up of a sleeping thread (4 KiB
		 * QD1 reads through loop: 40 -> 26 us) but takes a CPU from
		 * the faulting task and the loop worker (see busy_poll_us in
		 * config.c for why it is off by default).
		 */
		if (res == -EAGAIN && t->fs->busy_poll_ns) {
			uint64_t now = now_ns();

			if (!idle_since)
				idle_since = now;
			if (now - idle_since < t->fs->busy_poll_ns)
				continue;
		}
		idle_since = 0;
		if (res != -EAGAIN && res != -EINTR) {
			loop_error(t, "reading /dev/fuse", res);
			continue;
		}
		if (poll(pfd, 2, -1) < 0) {
			if (errno != EINTR)
				loop_error(t, "waiting on /dev/fuse", -errno);
			continue;
		}
		if ((pfd[1].revents & POLLIN) && atomic_load(&t->fs->stop_requested) &&
		    stop_allowed(t->fs) && stop_now(t->fs))
			break;
	}
	/* Wake the other threads: their poll sees stop_fd readable. */
	fuse_session_exit(t->se);
	wake_loop(t->fs);
	free(buf.mem);
	return NULL;
}

/* /dev/fuse through our hands: see fs_install_io. */
static void dev_read_error(void *arg, int err)
{
	(void)arg;
	if (current_thread)
		current_thread->read_err = err;
}

static ssize_t fs_dev_read(int fd, void *buf, size_t len, void *userdata)
{
	const struct fs_dev_hooks *hooks = ((struct fs *)userdata)->dev_hooks;
	ssize_t n = read(fd, buf, len);

	if (n > 0 && hooks)
		hooks->on_read(hooks->arg, buf, (size_t)n);
	/* The errors of normal operation go to libfuse as they are. */
	if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ENOENT && errno != ENODEV) {
		dev_read_error(NULL, -errno);
		errno = EAGAIN;
	}
	return n;
}

static ssize_t fs_dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fs_dev_hooks *hooks = ((struct fs *)userdata)->dev_hooks;

	if (hooks && hooks->on_reply(hooks->arg, iov, count)) {
		size_t len = 0;

		for (int i = 0; i < count; i++)
			len += iov[i].iov_len;
		return (ssize_t)len;
	}
	return writev(fd, iov, count);
}

void fs_leave_loop(struct fs *fs)
{
	atomic_store(&fs->leave_loop, true);
	wake_loop(fs);
}

int fs_install_io(struct fs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = fs_dev_read, .writev = fs_dev_writev };

	if (fs->uring_wanted)	/* the rings' session reads for us already */
		return 0;
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) ? -EIO : 0;
}

int fs_init(struct fs *fs, struct store *st, unsigned int threads, unsigned int busy_poll_us)
{
	unsigned int i;
	char *text;

	memset(fs, 0, sizeof(*fs));
	fs->store = st;
	fs->threads = threads ? threads : 1;
	fs->busy_poll_ns = (uint64_t)busy_poll_us * 1000u;
	fs->owner = getuid();
	fs->stats_gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	fs->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fs->stop_fd < 0)
		return -errno;
	text = malloc((size_t)FS_STATS_SLOTS * FS_STATS_CAP);
	if (!text) {
		close(fs->stop_fd);
		fs->stop_fd = -1;
		return -ENOMEM;
	}
	for (i = 0; i < FS_STATS_SLOTS; i++)
		fs->stats_slot[i].text = text + (size_t)i * FS_STATS_CAP;
	return 0;
}

void fs_fini(struct fs *fs)
{
	free(fs->stats_slot[0].text);
	if (fs->stop_fd >= 0)
		close(fs->stop_fd);
}

static void thread_fini(struct fs_thread *t)
{
	store_worker_fini(&t->worker);
	free(t->rbuf);
}

/* Ring threads read into the ring's payload buffers: no rbuf. */
static int thread_init(struct fs_thread *t, struct fs *fs, struct fuse_session *se,
		       bool with_rbuf)
{
	int err;

	t->fs = fs;
	t->se = se;
	t->rbuf = with_rbuf ? malloc(FS_MAX_IO) : NULL;
	if (with_rbuf && !t->rbuf)
		return -ENOMEM;
	err = store_worker_init(&t->worker, fs->store);
	if (err)
		free(t->rbuf);
	return err;
}

/* ---- FUSE over io_uring ------------------------------------------------ */

/* Each queue thread (uring.h) gets the state a request thread has. */
static int ring_thread_start(void *arg, unsigned int qid)
{
	struct fs_thread *t = calloc(1, sizeof(*t));
	int err;

	(void)qid;
	if (!t)
		return -ENOMEM;
	err = thread_init(t, arg, NULL, false);
	if (err) {
		free(t);
		return err;
	}
	current_thread = t;
	reserve_prepare_thread();
	return 0;
}

static void ring_thread_stop(void *arg, unsigned int qid)
{
	(void)arg;
	(void)qid;
	thread_fini(current_thread);
	free(current_thread);
	current_thread = NULL;
}

bool fs_want_uring(struct fs *fs, struct fuse_session *se)
{
	struct uring_session_hooks hooks = {
		.thread_start = ring_thread_start, .thread_stop = ring_thread_stop,
		.read_error = dev_read_error, .arg = fs,
	};

	fs->uring_wanted = uring_session_want(se, &hooks);
	return fs->uring_wanted;
}

int fs_loop(struct fs *fs, struct fuse_session *se)
{
	int fd = fuse_session_fd(se);
	struct fs_thread *threads;
	pthread_attr_t attr;
	unsigned int i, started = 0;
	int err = 0;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return -errno;
	threads = calloc(fs->threads, sizeof(*threads));
	if (!threads)
		return -ENOMEM;
	for (i = 0; i < fs->threads; i++) {
		err = thread_init(&threads[i], fs, se, true);
		if (err)
			goto out_fini;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	/* Thread 0 is this thread; the others are started. */
	for (started = 1; started < fs->threads; started++) {
		err = -pthread_create(&threads[started].tid, &attr, loop_thread,
				      &threads[started]);
		if (err)
			break;
	}
	pthread_attr_destroy(&attr);
	if (!err)
		loop_thread(&threads[0]);
	else
		fuse_session_exit(se);
	for (i = 1; i < started; i++)
		pthread_join(threads[i].tid, NULL);
	uring_session_stop();
	for (i = 0; i < fs->threads; i++)
		if (!err)
			err = threads[i].err;
out_fini:
	while (i--)
		thread_fini(&threads[i]);
	free(threads);
	return err;
}
