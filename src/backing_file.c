/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing_file: the backing file as a file: where it may be (not on tmpfs,
 * ramfs or FUSE, nor on a loop device over them), who may reach it, the
 * checks that keep an open from clobbering anything, and its header.
 * backing.c keeps the segments inside it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backing_file.h"

/* The file header's first bytes: `head -1` says what the file is. */
#define FILE_MAGIC	"zswapfs backing\n"
#define FILE_MAGIC_LEN	16

_Static_assert(sizeof(FILE_MAGIC) - 1 == FILE_MAGIC_LEN, "file magic");

/* The first bytes of the file header block; the rest is a note and zeros. */
struct file_hdr {
	char magic[FILE_MAGIC_LEN];
	uint32_t version;		/* BACKING_FILE_VERSION */
	uint32_t hdr_size;		/* BACKING_FILE_HDR_SIZE */
	uint32_t seg_size;		/* BACKING_SEG_SIZE */
	uint32_t reserved;
};
#define FILE_NOTE_OFF	64
static const char file_note[] =
	"This is the backing file of a zswapfs daemon: cold swapped-out pages,\n"
	"compressed and, by default, sealed with a key that only the running daemon\n"
	"knows.  It is emptied (down to this header) when the daemon stops.\n";
_Static_assert(FILE_NOTE_OFF + sizeof(file_note) <= BACKING_FILE_HDR_SIZE, "note fits");

/* The messages below call it by its short name. */
#define set_err		backing_set_err

void backing_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* snprintf that says whether it all fitted (and that the compiler does not
 * second-guess: paths are cut only where a message is). */
static bool fmt_fits(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool fmt_fits(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < len;
}

/* ---- where the file may be ------------------------------------------------ */

/*
 * Filesystems the file must not be on (statfs f_type, as in linux/magic.h).
 * The daemon serves swap: while it waits for a page of its backing file, the
 * kernel may be waiting for it.  A tmpfs page of the file may itself be
 * swapped out, possibly to us: reading it back would wait for us to serve
 * its swap-in, which waits for the read.  A FUSE filesystem is served by a
 * process (maybe this one) that may need the memory or the swap we are
 * there to give.  A ramfs page never leaves RAM: writing back to it frees
 * nothing.  A loop device over a file on any of them is the same, one level
 * down (and a loop over our own swap file is the first case exactly).
 */
static const struct {
	unsigned long magic;
	const char *name;
} refused_fs[] = {
	{ 0x01021994ul, "tmpfs" },
	{ 0x858458f6ul, "ramfs" },
	{ 0x65735546ul, "a FUSE filesystem" },
};

/* Loop devices over loop devices: no real set-up goes deeper than this. */
#define MAX_STACK	8

static int check_fs(int fd, unsigned int depth, char *why, size_t whylen);

/* Read a small sysfs file into buf, without the newline; -errno. */
static int read_sysfs(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return 0;
}

/*
 * The block device dev (a filesystem's st_dev): 0 when no device of the
 * chain under it is a loop device over a refused filesystem; otherwise
 * -EINVAL and why, "on loop device loop3, whose file F is on tmpfs".
 */
static int check_dev(dev_t dev, unsigned int depth, char *why, size_t whylen)
{
	char sys[64], dir[PATH_MAX], file[PATH_MAX], sub[PATH_MAX], path[PATH_MAX];
	const char *name;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, err;

	if (depth > MAX_STACK) {
		set_err(why, whylen, "on more than %d stacked devices", MAX_STACK);
		return -EINVAL;
	}
	fmt_fits(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	/* No block device (tmpfs, proc, btrfs's anonymous devices): done. */
	if (!realpath(sys, dir))
		return 0;
	/* A partition's loop or slaves are its disk's, one directory up. */
	if (fmt_fits(path, sizeof(path), "%s/partition", dir) && stat(path, &st) == 0)
		*strrchr(dir, '/') = 0;
	name = strrchr(dir, '/') + 1;

	if (fmt_fits(path, sizeof(path), "%s/loop/backing_file", dir) &&
	    read_sysfs(path, file, sizeof(file)) == 0) {
		/* Looked up in our mount namespace, as losetup shows it. */
		fd = open(file, O_PATH | O_CLOEXEC);
		if (fd < 0) {
			set_err(why, whylen, "on loop device %s, whose file %s cannot be checked (%s)",
				 name, file, strerror(errno));
			return -EINVAL;
		}
		err = check_fs(fd, depth + 1, sub, sizeof(sub));
		close(fd);
		if (err) {
			set_err(why, whylen, "on loop device %s, whose file %s is %s", name, file,
				 sub);
			return err;
		}
	}

	/* Devices it is made of (device-mapper, md). */
	d = fmt_fits(path, sizeof(path), "%s/slaves", dir) ? opendir(path) : NULL;
	if (!d)
		return 0;
	err = 0;
	while (!err && (de = readdir(d))) {
		unsigned int maj, min;
		char num[32];

		if (de->d_name[0] == '.')
			continue;
		if (!fmt_fits(path, sizeof(path), "%s/slaves/%s/dev", dir, de->d_name) ||
		    read_sysfs(path, num, sizeof(num)) || sscanf(num, "%u:%u", &maj, &min) != 2)
			continue;
		err = check_dev(makedev(maj, min), depth + 1, sub, sizeof(sub));
		if (err)
			set_err(why, whylen, "on %s, which is made of %s, %s", name, de->d_name,
				 sub);
	}
	closedir(d);
	return err;
}

/* The filesystem fd is on: 0, or -EINVAL and why ("on tmpfs"), -errno. */
static int check_fs(int fd, unsigned int depth, char *why, size_t whylen)
{
	struct statfs sf;
	struct stat st;
	size_t i;

	if (fstatfs(fd, &sf) || fstat(fd, &st)) {
		set_err(why, whylen, "not checkable (%s)", strerror(errno));
		return -EINVAL;
	}
	for (i = 0; i < sizeof(refused_fs) / sizeof(refused_fs[0]); i++)
		if ((unsigned long)sf.f_type == refused_fs[i].magic) {
			set_err(why, whylen, "on %s", refused_fs[i].name);
			return -EINVAL;
		}
	return check_dev(st.st_dev, depth, why, whylen);
}

/* ---- open / close ------------------------------------------------------- */

/* An existing file's first block: 0 if it is our header, or -EEXIST and a message. */
static int check_header(int fd, const char *path, char *err, size_t errlen)
{
	unsigned char block[BACKING_FILE_HDR_SIZE];
	struct file_hdr h;
	ssize_t n;

	do
		n = pread(fd, block, sizeof(block), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int e = errno;

		set_err(err, errlen, "backing file %s: read: %s", path, strerror(e));
		return -e;
	}
	if ((size_t)n < sizeof(h) || memcmp(block, FILE_MAGIC, FILE_MAGIC_LEN)) {
		set_err(err, errlen, "backing file %s is not empty and is not a zswapfs backing "
			"file (no zswapfs header): refused, left as it was; name a new file, "
			"or an empty one", path);
		return -EEXIST;
	}
	memcpy(&h, block, sizeof(h));
	if (h.version != BACKING_FILE_VERSION) {
		set_err(err, errlen, "backing file %s is of another zswapfs format (version %u; "
			"this one is %u): refused, left as it was; remove it if no zswapfs uses it",
			path, (unsigned int)h.version, BACKING_FILE_VERSION);
		return -EEXIST;
	}
	return 0;
}

/* Empty the file down to a fresh header (the file is O_DIRECT by now). */
static int write_header(int fd)
{
	struct file_hdr h = {
		.magic = FILE_MAGIC,
		.version = BACKING_FILE_VERSION,
		.hdr_size = BACKING_FILE_HDR_SIZE,
		.seg_size = BACKING_SEG_SIZE,
	};
	void *block;
	ssize_t n;
	int e = 0;

	if (ftruncate(fd, BACKING_FILE_HDR_SIZE) < 0)
		return -errno;
	if (posix_memalign(&block, BACKING_ALIGN, BACKING_FILE_HDR_SIZE))
		return -ENOMEM;
	memset(block, 0, BACKING_FILE_HDR_SIZE);
	memcpy(block, &h, sizeof(h));
	memcpy((char *)block + FILE_NOTE_OFF, file_note, sizeof(file_note));
	do
		n = pwrite(fd, block, BACKING_FILE_HDR_SIZE, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		e = -errno;
	else if (n != BACKING_FILE_HDR_SIZE)
		e = -EIO;
	free(block);
	return e;
}

static const char fs_refused_why[] =
	"it must be on a disk's filesystem: a page of it that is itself swapped out, "
	"or served by a FUSE daemon, could deadlock this daemon";

/*
 * The directory the file goes in: ours, not writable by group or others,
 * on an acceptable filesystem.  Returns its O_PATH descriptor, or -errno
 * with a message.
 */
static int open_dir(const char *path, const char *dir, char *err, size_t errlen)
{
	char why[2 * PATH_MAX];
	struct stat st;
	int dfd, e;

	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		e = errno;
		set_err(err, errlen, "backing file %s: directory %s: %s", path, dir, strerror(e));
		return -e;
	}
	if (fstat(dfd, &st) < 0) {
		e = errno;
		set_err(err, errlen, "backing file %s: directory %s: %s", path, dir, strerror(e));
		goto out_close;
	}
	/* Whoever may write the directory may swap the file for another. */
	if (st.st_uid != geteuid()) {
		e = EPERM;
		set_err(err, errlen, "backing file %s: its directory %s belongs to uid %u, not to "
			"us (uid %u): refused; use a directory of root's, e.g. "
			"mkdir -m 700 /var/lib/zswapfs", path, dir, (unsigned int)st.st_uid,
			(unsigned int)geteuid());
		goto out_close;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		e = EPERM;
		set_err(err, errlen, "backing file %s: its directory %s is writable by %s (mode "
			"%04o): refused; use a directory of its own, e.g. "
			"mkdir -m 700 /var/lib/zswapfs", path, dir,
			st.st_mode & S_IWOTH ? "others" : "its group",
			(unsigned int)(st.st_mode & 07777));
		goto out_close;
	}
	e = -check_fs(dfd, 0, why, sizeof(why));
	if (e) {
		set_err(err, errlen, "backing file %s: refused: %s is %s (%s)", path, dir, why,
			fs_refused_why);
		goto out_close;
	}
	return dfd;

out_close:
	close(dfd);
	return -e;
}

/*
 * Open path as a backing file: the checks that keep us from clobbering
 * anything and from leaking swap (see backing_open in backing.h).  Every
 * check comes before the first change to an existing file.
 */
int backing_file_open(const char *path, char *err, size_t errlen)
{
	char dir[PATH_MAX], why[2 * PATH_MAX];
	const char *base, *slash = strrchr(path, '/');
	bool created = false;
	struct stat st;
	int dfd, fd, flags, e;

	if (!slash) {
		strcpy(dir, ".");
		base = path;
	} else {
		size_t n = slash == path ? 1 : (size_t)(slash - path);

		if (n >= sizeof(dir)) {
			set_err(err, errlen, "backing file %s: path too long", path);
			return -ENAMETOOLONG;
		}
		memcpy(dir, path, n);
		dir[n] = 0;
		base = slash + 1;
	}
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		set_err(err, errlen, "backing file %s: not a file name", path);
		return -EINVAL;
	}
	dfd = open_dir(path, dir, err, errlen);
	if (dfd < 0)
		return dfd;

	/* fstatat first, for a clear message without opening a FIFO or a device. */
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			e = ELOOP;
			set_err(err, errlen, "backing file %s is a symlink: refused", path);
			goto out_dir;
		}
		if (!S_ISREG(st.st_mode)) {
			e = EINVAL;
			set_err(err, errlen, "backing file %s is not a regular file", path);
			goto out_dir;
		}
		/* O_NONBLOCK|O_NOCTTY: harmless if it was swapped for a FIFO or tty meanwhile. */
		fd = openat(dfd, base, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	} else if (errno == ENOENT) {
		fd = openat(dfd, base, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		created = fd >= 0;
	} else {
		fd = -1;
	}
	if (fd < 0) {
		e = errno;
		if (e == ELOOP)
			set_err(err, errlen, "backing file %s is a symlink: refused", path);
		else
			set_err(err, errlen, "cannot open backing file %s: %s", path, strerror(e));
		goto out_dir;
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
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		mode_t m = st.st_mode;

		e = EPERM;
		set_err(err, errlen, "backing file %s is %s by %s (mode %04o): refused; "
			"chmod 600 it", path,
			m & (S_IWGRP | S_IWOTH) ? "writable" : m & (S_IRGRP | S_IROTH) ?
			"readable" : "executable",
			m & (m & (S_IWGRP | S_IWOTH) ? S_IWOTH : m & (S_IRGRP | S_IROTH) ?
			     S_IROTH : S_IXOTH) ? "others" : "its group",
			(unsigned int)(m & 07777));
		goto out_close;
	}
	/* Another name for it, elsewhere, would outlive our checks and our truncation. */
	if (st.st_nlink != 1) {
		e = EPERM;
		set_err(err, errlen, "backing file %s has %lu hard links: refused",
			path, (unsigned long)st.st_nlink);
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
	/* The directory was checked; the file itself may be a mount of another. */
	e = -check_fs(fd, 0, why, sizeof(why));
	if (e) {
		set_err(err, errlen, "backing file %s: refused: it is %s (%s)", path, why,
			fs_refused_why);
		goto out_close;
	}
	if (!created && st.st_size > 0) {
		e = -check_header(fd, path, err, errlen);
		if (e)
			goto out_close;
	}
	/*
	 * O_DIRECT is set after the open so that a filesystem without it
	 * (tmpfs before Linux 6.6) does not leave a file behind: open() would
	 * create the file and only then fail.
	 */
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, (flags | O_DIRECT) & ~O_NONBLOCK) < 0) {
		e = errno;
		set_err(err, errlen, "backing file %s: the filesystem does not support O_DIRECT (%s)",
			path, strerror(e));
		goto out_close;
	}
	/* Swap does not survive a restart: free whatever the last run left. */
	e = -write_header(fd);
	if (e) {
		set_err(err, errlen, "backing file %s: writing its header: %s", path, strerror(e));
		goto out_close;
	}
	close(dfd);
	return fd;

out_close:
	close(fd);
	/* In a directory of ours only: the name is still the file we made. */
	if (created)
		unlinkat(dfd, base, 0);
out_dir:
	close(dfd);
	return -e;
}

void backing_file_close(int fd)
{
	if (fd < 0)
		return;
	if (ftruncate(fd, BACKING_FILE_HDR_SIZE) < 0) {
		/* nothing better to do; the next open truncates again */
	}
	close(fd);
}
