/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * slowdisk - a disk with a chosen latency, for wbbench -L: a FUSE server presenting one file,
 * `disk`, whose contents are an image file on a real disk, read and written with O_DIRECT;
 * every read or write is answered no sooner than lat_us after the server received it (the
 * image's own I/O happens inside that time).  Put a loop device with direct I/O on it and ext4
 * on that, and everything on that ext4 (a plain swap file, zswapfs's backing file) sees the
 * same slower disk: this kernel has no dm-delay, null_blk or ublk, and blkio throttling caps a
 * rate in 20-100 ms slices (a burst at full speed, then a wait), which is not a latency.
 *
 *	slowdisk MOUNTPOINT [-f] -o image=PATH,lat_us=N[,write_lat_us=N]
 *		[,max_threads=N]
 *
 * Requests are served by libfuse's multi-threaded loop, so that several in flight overlap as
 * on an SSD (queue depth up to max_threads, default 10).  What a reader of the block device
 * sees is the loop worker's hop and the FUSE round trip (~30 us on a 2-CPU VM) plus lat_us:
 * calibrate with fio at queue depth 1 on a file on that ext4 (wbbench does, and prints it).
 * The server serves swap I/O: mlockall, buffers made before the first request.
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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SD_INO_DISK	2
#define SD_NAME		"disk"
#define SD_MAX_IO	(1U << 20)
#define SD_ALIGN	4096u
#define SD_SECTOR	512u

struct sd {
	int dfd;		/* the image, O_DIRECT */
	int bfd;		/* the image, buffered: for requests not on 512-byte sectors */
	uint64_t size;
	uint64_t lat_ns, wlat_ns;
};

struct sd_opts {
	char *image;
	unsigned int lat_us;
	int write_lat_us;
};

static const struct fuse_opt sd_opt_spec[] = {
	{ "image=%s", offsetof(struct sd_opts, image), 0 },
	{ "lat_us=%u", offsetof(struct sd_opts, lat_us), 0 },
	{ "write_lat_us=%d", offsetof(struct sd_opts, write_lat_us), 0 },
	FUSE_OPT_END
};

/* Each serving thread's bounce buffer for O_DIRECT: made on its first request (the thread
 * was made with mlockall(MCL_FUTURE) in force, so it is locked and populated then). */
static __thread void *sd_buf;

static struct sd *sd_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep until t0 + lat: the request's latency, whatever the image's I/O took within it. */
static void sd_wait(uint64_t t0, uint64_t lat)
{
	uint64_t until = t0 + lat;
	struct timespec ts = { .tv_sec = (time_t)(until / 1000000000u),
			       .tv_nsec = (long)(until % 1000000000u) };

	if (!lat)
		return;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *sd_bounce(void)
{
	if (!sd_buf && posix_memalign(&sd_buf, SD_ALIGN, SD_MAX_IO))
		sd_buf = NULL;
	return sd_buf;
}

static void sd_stat(const struct sd *s, fuse_ino_t ino, struct stat *st)
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
		st->st_size = (off_t)s->size;
		st->st_blksize = 4096;
		st->st_blocks = (blkcnt_t)(s->size / 512);
	}
}

static void sd_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = SD_MAX_IO;
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
}

static void sd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID || strcmp(name, SD_NAME) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = SD_INO_DISK;
	e.attr_timeout = 3600.0;
	e.entry_timeout = 3600.0;
	sd_stat(sd_of(req), e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void sd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID && ino != SD_INO_DISK) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	sd_stat(sd_of(req), ino, &st);
	fuse_reply_attr(req, &st, 3600.0);
}

static void sd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	if (ino != SD_INO_DISK ||
	    ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != sd_of(req)->size)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	sd_getattr(req, ino, fi);
}

static void sd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != SD_INO_DISK) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->direct_io = 1;	/* no page cache of the disk's contents */
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

/* The request's range inside the image: size clipped; false (answered) when invalid. */
static bool sd_range(fuse_req_t req, off_t off, size_t *size)
{
	struct sd *s = sd_of(req);

	if (off < 0 || *size > SD_MAX_IO) {
		fuse_reply_err(req, EINVAL);
		return false;
	}
	if ((uint64_t)off >= s->size)
		*size = 0;
	else if (*size > s->size - (uint64_t)off)
		*size = (size_t)(s->size - (uint64_t)off);
	return true;
}

static bool sd_aligned(off_t off, size_t size)
{
	return !((uint64_t)off % SD_SECTOR) && !(size % SD_SECTOR);
}

static void sd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sd *s = sd_of(req);
	uint64_t t0 = mono_ns();
	void *buf = sd_bounce();
	ssize_t n;

	(void)ino;
	(void)fi;
	if (!sd_range(req, off, &size))
		return;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = size ? pread(sd_aligned(off, size) ? s->dfd : s->bfd, buf, size, off) : 0;
	sd_wait(t0, s->lat_ns);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void sd_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	struct sd *s = sd_of(req);
	uint64_t t0 = mono_ns();
	void *buf = sd_bounce();
	ssize_t n;

	(void)ino;
	(void)fi;
	if (!sd_range(req, off, &size))
		return;
	if (!size) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (sd_aligned(off, size)) {
		memcpy(buf, data, size);
		n = pwrite(s->dfd, buf, size, off);
	} else {
		n = pwrite(s->bfd, data, size, off);
	}
	sd_wait(t0, s->wlat_ns);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

/* Discards (the loop device turns them into punched holes) and allocation: the image's. */
static void sd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct sd *s = sd_of(req);

	(void)ino;
	(void)fi;
	if (off < 0 || len <= 0 || (uint64_t)off >= s->size) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)len > s->size - (uint64_t)off)
		len = (off_t)(s->size - (uint64_t)off);
	fuse_reply_err(req, fallocate(s->dfd, mode | FALLOC_FL_KEEP_SIZE, off, len) ? errno : 0);
}

static void sd_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void sd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct sd *s = sd_of(req);

	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, fdatasync(s->dfd) ? errno : 0);
}

static const struct fuse_lowlevel_ops sd_ops = {
	.init = sd_init,
	.lookup = sd_lookup,
	.getattr = sd_getattr,
	.setattr = sd_setattr,
	.open = sd_open,
	.read = sd_read,
	.write = sd_write,
	.flush = sd_flush,
	.fsync = sd_fsync,
	.fallocate = sd_fallocate,
};

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cl;
	struct sd_opts o = { NULL, 0, -1 };
	struct sd s = { .dfd = -1, .bfd = -1 };
	struct fuse_session *se;
	struct fuse_loop_config *lc;
	struct stat st;
	int ret = 1;

	if (fuse_parse_cmdline(&args, &cl) != 0)
		return 1;
	if (cl.show_help || !cl.mountpoint) {
		fprintf(stderr, "usage: %s MOUNTPOINT [-f] -o image=PATH,lat_us=N"
			"[,write_lat_us=N][,max_threads=N]\n", argv[0]);
		goto out_args;
	}
	if (fuse_opt_parse(&args, &o, sd_opt_spec, NULL) == -1)
		goto out_args;
	if (!o.image) {
		fprintf(stderr, "slowdisk: image= missing\n");
		goto out_opts;
	}
	s.dfd = open(o.image, O_RDWR | O_DIRECT | O_CLOEXEC);
	s.bfd = open(o.image, O_RDWR | O_CLOEXEC);
	if (s.dfd < 0 || s.bfd < 0 || fstat(s.dfd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size < 1 << 20 || st.st_size % SD_ALIGN) {
		fprintf(stderr, "slowdisk: %s: not a regular file of whole pages, 1 MiB or more, "
			"that opens with O_DIRECT\n", o.image);
		goto out_fds;
	}
	s.size = (uint64_t)st.st_size;
	s.lat_ns = (uint64_t)o.lat_us * 1000u;
	s.wlat_ns = o.write_lat_us < 0 ? s.lat_ns : (uint64_t)o.write_lat_us * 1000u;
	/* nanosleep's default slack is 50 us: more than the latencies asked for */
	prctl(PR_SET_TIMERSLACK, 1UL);
	/* swap I/O goes through us: none of our pages may have to be read in first */
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		perror("slowdisk: mlockall (continuing)");

	se = fuse_session_new(&args, &sd_ops, sizeof(sd_ops), &s);
	if (!se)
		goto out_fds;
	if (fuse_set_signal_handlers(se))
		goto out_destroy;
	if (fuse_session_mount(se, cl.mountpoint))
		goto out_handlers;
	if (fuse_daemonize(cl.foreground))
		goto out_unmount;
	lc = fuse_loop_cfg_create();
	if (lc) {
		fuse_loop_cfg_set_clone_fd(lc, cl.clone_fd);
		fuse_loop_cfg_set_max_threads(lc, cl.max_threads);
		/* threads kept, not made and ended as the queue depth changes */
		fuse_loop_cfg_set_idle_threads(lc, cl.max_threads);
		ret = fuse_session_loop_mt(se, lc) ? 1 : 0;
		fuse_loop_cfg_destroy(lc);
	}
out_unmount:
	fuse_session_unmount(se);
out_handlers:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
out_fds:
	if (s.dfd >= 0)
		close(s.dfd);
	if (s.bfd >= 0)
		close(s.bfd);
out_opts:
	free(o.image);
out_args:
	free(cl.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
