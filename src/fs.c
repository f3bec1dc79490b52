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
	[INO_STATS] = { "stats", S_IFREG | 0444 },
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
	stbuf->st_uid = getuid();
	stbuf->st_gid = getgid();
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

struct stats_handle {
	char *text;
	size_t len;
};

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	int acc = fi->flags & O_ACCMODE;
	struct stats_handle *sh;

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
		sh = malloc(sizeof(*sh));
		if (sh)
			sh->text = stats_snapshot(fs->store, fs->policy, &fs->io, &sh->len);
		if (!sh || !sh->text) {
			free(sh);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->fh = (uintptr_t)sh;
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
		struct stats_handle *sh = (struct stats_handle *)(uintptr_t)fi->fh;

		free(sh->text);
		free(sh);
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
		struct stats_handle *sh = (struct stats_handle *)(uintptr_t)fi->fh;

		if ((size_t)off >= sh->len)
			size = 0;
		else if (size > sh->len - (size_t)off)
			size = sh->len - (size_t)off;
		fuse_reply_buf(req, sh->text + (off < 0 ? 0 : off), size);
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
	while (!fuse_session_exited(t->se)) {
		res = fuse_session_receive_buf(t->se, &buf);
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
		if (res == -EAGAIN || res == -EINTR) {
			if (poll(pfd, 2, -1) < 0 && errno != EINTR) {
				t->err = -errno;
				break;
			}
			if ((pfd[1].revents & POLLIN) && atomic_load(&t->fs->stop_requested) &&
			    stop_allowed(t->fs))
				break;
			continue;
		}
		if (res <= 0) {		/* 0: unmounted */
			if (res < 0)
				t->err = res;
			break;
		}
		fuse_session_process_buf(t->se, &buf);
		uring_session_poll();	/* the rings start right after FUSE_INIT */
	}
	/* Wake the other threads: their poll sees stop_fd readable. */
	fuse_session_exit(t->se);
	wake_loop(t->fs);
	free(buf.mem);
	return NULL;
}

int fs_init(struct fs *fs, struct store *st, unsigned int threads, unsigned int busy_poll_us)
{
	memset(fs, 0, sizeof(*fs));
	fs->store = st;
	fs->threads = threads ? threads : 1;
	fs->busy_poll_ns = (uint64_t)busy_poll_us * 1000u;
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	fs->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return fs->stop_fd < 0 ? -errno : 0;
}

void fs_fini(struct fs *fs)
{
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
		.thread_start = ring_thread_start, .thread_stop = ring_thread_stop, .arg = fs,
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
