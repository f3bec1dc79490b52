/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * slowdisk_shim.so - for wbbench -L only: lets zswapfs put its backing file on the ext4 of a
 * loop device over slowdisk's file.  zswapfs refuses a backing file whose device stack
 * reaches a FUSE filesystem (a FUSE server that needs memory or swap could deadlock it:
 * src/backing_file.c); slowdisk is that, but it locks all its memory, runs outside the
 * benchmark's memory cgroup on a machine with free RAM, and serves only the benchmark.
 *
 *	LD_PRELOAD=slowdisk_shim.so SLOWDISK_DEV=MAJ:MIN zswapfs ...
 *
 * fstatfs() of a file on the device MAJ:MIN (slowdisk's FUSE mount, stat -c %d as
 * major:minor) reports ext4's magic instead of FUSE's; every other call is the real one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#define SHIM_FUSE_MAGIC	0x65735546L
#define SHIM_EXT4_MAGIC	0xef53L

int fstatfs(int fd, struct statfs *buf)
{
	static int (*real)(int, struct statfs *);
	const char *dev = getenv("SLOWDISK_DEV");
	unsigned int maj, min;
	struct stat st;
	int ret;

	if (!real)
		real = (int (*)(int, struct statfs *))dlsym(RTLD_NEXT, "fstatfs");
	if (!real)
		return -1;
	ret = real(fd, buf);
	if (ret || buf->f_type != SHIM_FUSE_MAGIC || !dev ||
	    sscanf(dev, "%u:%u", &maj, &min) != 2 || fstat(fd, &st))
		return ret;
	if (major(st.st_dev) == maj && minor(st.st_dev) == min)
		buf->f_type = SHIM_EXT4_MAGIC;
	return ret;
}
