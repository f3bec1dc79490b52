/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl: what its files share.  zswapctl.c holds the command table,
 * main() and the control commands; zswapctl_status.c the commands that
 * read the stats file (status, stats, top); zswapctl_mounts.c finds mounts
 * and the loop devices on them; zswapctl_swap.c runs losetup, mkswap and
 * swapon/swapoff.  The files depend on this header and on the daemon's
 * header-only tables (stats_keys.h, control_cmds.h, codec.h's CODEC_LIST),
 * never on the daemon's code.
 */
#ifndef ZSWAPFS_ZSWAPCTL_H
#define ZSWAPFS_ZSWAPCTL_H

#include <stdbool.h>
#include <stddef.h>

#define CTL_FSTYPE	"fuse.zswapfs"
#define CTL_EXIT_ERR	1
#define CTL_EXIT_USAGE	2
#define CTL_LOOPS_MAX	16
#define CTL_DEV_LEN	64

/* Messages: "zswapctl: ..." on stderr; a usage error adds the --help hint
 * and returns CTL_EXIT_USAGE. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The help text, made from the command table. */
void ctl_help(void);

/* ---- zswapctl_mounts.c ---- */
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

/* ---- the commands: argv[0] is the command's name ---- */
int ctl_cmd_status(int argc, char **argv);
int ctl_cmd_stats(int argc, char **argv);
int ctl_cmd_top(int argc, char **argv);
int ctl_cmd_swapon(int argc, char **argv);
int ctl_cmd_swapoff(int argc, char **argv);

#endif
