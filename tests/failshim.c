/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An LD_PRELOAD shim for tests/serve_errors.sh: it makes some reads and
 * polls of /dev/fuse fail, as a kernel short of memory or a faulty request
 * would, while everything else passes through untouched.
 *
 * $ZS_FAILSHIM names a control file of 4096 bytes, mapped shared:
 *	bytes 0..15	"R P" in ASCII: fail every R-th read and every P-th poll
 *			of /dev/fuse (0 or absent: never); the test rewrites it
 *			in place (dd conv=notrunc) to turn failures on and off
 *	bytes 64..71	reads failed so far (uint64, written by the shim)
 *	bytes 72..79	polls failed so far
 * A failed read returns -1 without reading, so the request stays queued in
 * the kernel for the next read: what is tested is the daemon's loop, which
 * must go on serving.  The errors cycle through EIO, ENOMEM and EINVAL for
 * reads (EINTR would be an error of normal operation) and ENOMEM and EINTR
 * for polls.
 *
 * Built without sanitizer flags: under AddressSanitizer the test sets
 * verify_asan_link_order=0, and the real functions are found with
 * dlsym(RTLD_NEXT), which is ASan's interceptor there.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* /dev/fuse is the misc device 10:229 (Documentation/admin-guide/devices.txt) */
#define FUSE_MAJOR	10
#define FUSE_MINOR	229

static unsigned char *ctl;	/* the mapped control file; NULL: none */
static _Atomic uint64_t reads, polls;

static void map_ctl(void)
{
	static _Atomic int done;
	const char *path;
	void *p;
	int fd;

	if (done)
		return;
	done = 1;
	path = getenv("ZS_FAILSHIM");
	if (!path)
		return;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		ctl = p;
}

static int is_fuse(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISCHR(st.st_mode) && major(st.st_rdev) == FUSE_MAJOR &&
	       minor(st.st_rdev) == FUSE_MINOR;
}

/* The period asked for in field `which` (0: reads, 1: polls); 0: never. */
static uint64_t period(int which)
{
	unsigned long long v[2] = { 0, 0 };
	char text[17];
	int i;

	map_ctl();
	if (!ctl)
		return 0;
	for (i = 0; i < 16; i++)
		text[i] = (char)ctl[i];
	text[16] = '\0';
	if (sscanf(text, "%llu %llu", &v[0], &v[1]) < 1)
		return 0;
	return v[which];
}

static void count(int which)
{
	__atomic_fetch_add((uint64_t *)(void *)(ctl + 64 + 8 * which), 1, __ATOMIC_RELAXED);
}

ssize_t read(int fd, void *buf, size_t len)
{
	static ssize_t (*real)(int, void *, size_t);
	static const int errs[] = { EIO, ENOMEM, EINVAL };
	uint64_t n, every;

	if (!real)
		real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	every = period(0);
	if (every && is_fuse(fd)) {
		n = ++reads;
		if (n % every == 0) {
			count(0);
			errno = errs[(n / every) % 3];
			return -1;
		}
	}
	return real(fd, buf, len);
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	static int (*real)(struct pollfd *, nfds_t, int);
	uint64_t n, every;
	nfds_t i;

	if (!real)
		real = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
	every = period(1);
	for (i = 0; every && i < nfds; i++) {
		if (!is_fuse(fds[i].fd))
			continue;
		n = ++polls;
		if (n % every == 0) {
			count(1);
			errno = (n / every) % 2 ? ENOMEM : EINTR;
			return -1;
		}
		break;
	}
	return real(fds, nfds, timeout);
}
