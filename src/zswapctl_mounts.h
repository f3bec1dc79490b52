/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl_mounts: the mounts (/proc/self/mountinfo) and the loop devices
 * and swap areas on a mount's swap file (/sys/block, /proc/swaps).
 */
#ifndef ZSWAPFS_ZSWAPCTL_MOUNTS_H
#define ZSWAPFS_ZSWAPCTL_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#include "zswapctl_common.h"

struct ctl_mounts {
	char **path;
	bool *zswapfs;
	size_t n;
};

/* Every mount in /proc/self/mountinfo, in order, with whether it is ours. */
int ctl_mounts_read(struct ctl_mounts *m);
void ctl_mounts_free(struct ctl_mounts *m);
/*
 * Resolve ARG to the mount point it names and check that a zswapfs mount is
 * what sits there (the last mount on a path is the one visible).  On error
 * the message is printed.  Returns 0 or -errno.
 */
int ctl_mount_resolve(const char *arg, char *mnt, size_t len);
/*
 * The loop devices whose backing file is FILE, as /dev/loopN, from sysfs
 * (the attribute exists only while a device is bound).  Returns how many.
 */
int ctl_loops_for(const char *file, char devs[][CTL_DEV_LEN], int max);
/* Whether DEV is in /proc/swaps. */
bool ctl_swap_active(const char *dev);

#endif
