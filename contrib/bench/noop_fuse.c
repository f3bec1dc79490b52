/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * noop_fuse - the benchmark's floor: a FUSE server presenting one file, `swap`, whose pages
 * live uncompressed in one flat buffer.  It does what zswapfs does minus compression and the
 * page store, with the request loop zswapfs should use, so that
 *
 *	time(zswapfs) / time(noop_fuse)
 *
 * measures what compression, the store and our request handling cost beside the transport
 * (kernel -> loop worker -> /dev/fuse -> us and back), which no server can avoid.
 *
 *	noop_fuse MOUNTPOINT [-f] -o size=BYTES[,loopmode=poll|st|mt][,busy_poll_us=N]
 *
 * loopmode=poll (default): one thread, non-blocking /dev/fuse, poll() when it is empty;
 * and, where the kernel allows it, FUSE over io_uring as zswapfs uses it (its transport,
 * src/uring.c, is linked in: it holds no zswapfs code beyond the transport).
 * loopmode=st / mt: libfuse's own single- and multi-threaded loops, for comparison.
 */
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uring.h"

#define NOOP_INO_SWAP	2
#define NOOP_NAME	"swap"
/* libfuse 3.14 caps its receive buffer at 256 pages; asking for more is clipped anyway */
#define NOOP_MAX_IO	(1U << 20)

enum noop_loop { NOOP_LOOP_POLL, NOOP_LOOP_ST, NOOP_LOOP_MT };

struct noop {
	char *buf;		/* the file's contents, size bytes, locked */
	uint64_t size;
	enum noop_loop loop;
};

struct noop_opts {
	char *size;
	char *loopmode;
	unsigned int busy_poll_us;
};

static const struct fuse_opt noop_opt_spec[] = {
	{ "size=%s", offsetof(struct noop_opts, size), 0 },
	{ "loopmode=%s", offsetof(struct noop_opts, loopmode), 0 },
	{ "busy_poll_us=%u", offsetof(struct noop_opts, busy_poll_us), 0 },
	FUSE_OPT_END
};

static struct noop *noop_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void noop_stat(const struct noop *n, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_size = n->size;
		st->st_blksize = 4096;
		st->st_blocks = n->size / 512;
	}
}

static void noop_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = NOOP_MAX_IO;
	/* splice costs more than it saves for 4 KiB requests out of a flat buffer */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
}

static void noop_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID || strcmp(name, NOOP_NAME) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = NOOP_INO_SWAP;
	e.attr_timeout = 3600.0;
	e.entry_timeout = 3600.0;
	noop_stat(noop_of(req), e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void noop_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID && ino != NOOP_INO_SWAP) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	noop_stat(noop_of(req), ino, &st);
	fuse_reply_attr(req, &st, 3600.0);
}

/* The size is fixed: accept chmod/utimes-style calls and a truncate to the current size. */
static void noop_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	struct noop *n = noop_of(req);

	if (ino != NOOP_INO_SWAP) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != n->size) {
		fuse_reply_err(req, EPERM);
		return;
	}
	noop_getattr(req, ino, fi);
}

static void noop_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	static const struct { const char *name; fuse_ino_t ino; mode_t mode; } ents[] = {
		{ ".", FUSE_ROOT_ID, S_IFDIR },
		{ "..", FUSE_ROOT_ID, S_IFDIR },
		{ NOOP_NAME, NOOP_INO_SWAP, S_IFREG },
	};
	char buf[512];
	size_t used = 0;

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (size_t i = off; i < sizeof(ents) / sizeof(ents[0]); i++) {
		struct stat st = { .st_ino = ents[i].ino, .st_mode = ents[i].mode };
		size_t len = fuse_add_direntry(req, buf + used, size - used, ents[i].name, &st,
					       i + 1);

		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
}

static void noop_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != NOOP_INO_SWAP) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* no page cache copy of swap: that would double the memory, as in zswapfs */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

static void noop_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct noop *n = noop_of(req);

	(void)ino;
	(void)fi;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= n->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > n->size - off)
		size = n->size - off;
	fuse_reply_buf(req, n->buf + off, size);
}

static void noop_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	struct noop *n = noop_of(req);

	(void)ino;
	(void)fi;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= n->size) {
		fuse_reply_err(req, size ? EFBIG : 0);
		return;
	}
	if (size > n->size - off)
		size = n->size - off;
	memcpy(n->buf + off, data, size);
	fuse_reply_write(req, size);
}

/*
 * Discard.  The buffer is mlock'ed, so MADV_DONTNEED would fail with EINVAL; zeroing keeps the
 * floor honest (reads of a discarded range see zeros) at the price of a memset.
 */
static void noop_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			   struct fuse_file_info *fi)
{
	struct noop *n = noop_of(req);

	(void)ino;
	(void)fi;
	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
		/* plain allocation inside the fixed size is a no-op, anything else is not ours */
		if (mode == 0 && off >= 0 && len >= 0 && (uint64_t)off + len <= n->size)
			fuse_reply_err(req, 0);
		else
			fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off < 0 || len < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off < n->size) {
		if ((uint64_t)len > n->size - off)
			len = n->size - off;
		memset(n->buf + off, 0, len);
	}
	fuse_reply_err(req, 0);
}

static void noop_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void noop_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops noop_ops = {
	.init = noop_init,
	.lookup = noop_lookup,
	.getattr = noop_getattr,
	.setattr = noop_setattr,
	.readdir = noop_readdir,
	.open = noop_open,
	.read = noop_read,
	.write = noop_write,
	.flush = noop_flush,
	.fsync = noop_fsync,
	.fallocate = noop_fallocate,
};

/*
 * One thread, no wake-ups between threads: read requests until /dev/fuse is empty, then sleep
 * in poll().  A signal (libfuse's handlers call fuse_session_exit) interrupts poll with EINTR.
 */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * With busy_poll_us, an empty /dev/fuse is read again for that long before
 * sleeping, as zswapfs does (its busy_poll_us setting, same default), so that
 * the floor has the same request loop as the daemon it is compared with.
 */
static int noop_loop_poll(struct fuse_session *se, unsigned int busy_poll_us)
{
	uint64_t spin_ns = (uint64_t)busy_poll_us * 1000u, idle_since = 0;
	struct fuse_buf fbuf = { .mem = NULL };
	int fd = fuse_session_fd(se);
	int flags = fcntl(fd, F_GETFL);
	int ret = 0;

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		perror("noop_fuse: O_NONBLOCK on /dev/fuse");
		return -1;
	}
	while (!fuse_session_exited(se)) {
		int res = fuse_session_receive_buf(se, &fbuf);

		if (res == -EAGAIN && spin_ns) {
			uint64_t now = mono_ns();

			if (!idle_since)
				idle_since = now;
			if (now - idle_since < spin_ns)
				continue;
		}
		idle_since = 0;
		if (res == -EAGAIN) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };

			if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
				perror("noop_fuse: poll");
				ret = -1;
				break;
			}
			continue;
		}
		if (res == -EINTR)
			continue;
		if (res <= 0) {
			if (res < 0)
				ret = -1;
			break;
		}
		fuse_session_process_buf(se, &fbuf);
		uring_session_poll();	/* the rings start right after FUSE_INIT */
	}
	uring_session_stop();
	free(fbuf.mem);
	fuse_session_reset(se);
	return ret;
}

static int noop_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end || v == 0 || v % 4096)
		return -EINVAL;
	*out = v;
	return 0;
}

static void noop_usage(const char *prog)
{
	fprintf(stderr, "usage: %s MOUNTPOINT [-f] -o size=BYTES[K|M|G][,loopmode=poll|st|mt]\n",
		prog);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cl;
	/* busy_poll_us: the same default as zswapfs */
	struct noop_opts o = { NULL, NULL, 0 };
	struct noop n = { .loop = NOOP_LOOP_POLL };
	struct fuse_session *se;
	int ret = 1;

	if (fuse_parse_cmdline(&args, &cl) != 0)
		return 1;
	if (cl.show_help || !cl.mountpoint) {
		noop_usage(argv[0]);
		goto out_args;
	}
	if (fuse_opt_parse(&args, &o, noop_opt_spec, NULL) == -1)
		goto out_args;
	if (!o.size || noop_parse_size(o.size, &n.size)) {
		fprintf(stderr, "noop_fuse: size= missing or invalid (multiple of 4096 needed)\n");
		goto out_opts;
	}
	if (o.loopmode) {
		if (!strcmp(o.loopmode, "poll")) {
			n.loop = NOOP_LOOP_POLL;
		} else if (!strcmp(o.loopmode, "st")) {
			n.loop = NOOP_LOOP_ST;
		} else if (!strcmp(o.loopmode, "mt")) {
			n.loop = NOOP_LOOP_MT;
		} else {
			fprintf(stderr, "noop_fuse: loopmode=%s: want poll, st or mt\n",
				o.loopmode);
			goto out_opts;
		}
	}

	n.buf = mmap(NULL, n.size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (n.buf == MAP_FAILED) {
		perror("noop_fuse: mmap");
		goto out_opts;
	}
	/*
	 * Like zswapfs: we serve the kernel's swap, so no page of ours may need to be paged in.
	 * This populates the whole buffer now, which also keeps page faults out of the I/O path.
	 */
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		perror("noop_fuse: mlockall (continuing)");

	se = fuse_session_new(&args, &noop_ops, sizeof(noop_ops), &n);
	if (!se)
		goto out_unmap;
	if (fuse_set_signal_handlers(se))
		goto out_destroy;
	if (fuse_session_mount(se, cl.mountpoint))
		goto out_handlers;
	if (fuse_daemonize(cl.foreground))
		goto out_unmount;

	switch (n.loop) {
	case NOOP_LOOP_POLL:
		uring_session_want(se, NULL);
		ret = noop_loop_poll(se, o.busy_poll_us) ? 1 : 0;
		break;
	case NOOP_LOOP_ST:
		ret = fuse_session_loop(se) ? 1 : 0;
		break;
	case NOOP_LOOP_MT: {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();

		if (!lc)
			break;
		fuse_loop_cfg_set_clone_fd(lc, cl.clone_fd);
		fuse_loop_cfg_set_max_threads(lc, cl.max_threads);
		ret = fuse_session_loop_mt(se, lc) ? 1 : 0;
		fuse_loop_cfg_destroy(lc);
		break;
	}
	}

out_unmount:
	fuse_session_unmount(se);
out_handlers:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
out_unmap:
	munmap(n.buf, n.size);
out_opts:
	free(o.size);
	free(o.loopmode);
out_args:
	free(cl.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
