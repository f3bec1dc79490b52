/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unmounter: a small helper process that keeps the one privilege the daemon
 * gives up but needs at the very end: unmounting its own mount (umount2
 * needs CAP_SYS_ADMIN), when a stop signal asks the daemon to go.
 *
 * It is forked at start, before anything secret exists in memory (no
 * backing-file key, no stored page), holds no descriptor but a pipe from the
 * daemon, keeps CAP_SYS_ADMIN and nothing else, and waits.  The daemon asks
 * by writing a message with the device number of its mount: the helper
 * unmounts the mount point only while that mount is still the one there (a
 * mount stacked over it later is left alone).  It ends when the pipe closes,
 * that is when the daemon ends, whatever way; a daemon that dies leaves its
 * mount as it was before this helper existed.
 *
 * It also removes the daemon's own memory cgroup, if memcg_apply() made one
 * before the fork (memcg.h says why the daemon cannot): it moves back out
 * of it at once, keeps CAP_DAC_OVERRIDE too, and removes it when the pipe
 * closes, once it is empty (a daemon that exits moves out first).
 *
 * An umount(8) or `fusermount3 -u` by an administrator needs no helper: the
 * kernel ends the connection and the daemon leaves by itself.
 */
#ifndef ZSWAPFS_UNMOUNTER_H
#define ZSWAPFS_UNMOUNTER_H

#include <stdbool.h>
#include <sys/types.h>

struct unmounter {
	pid_t pid;
	int fd;			/* write end of the pipe; -1 when none */
	dev_t dev;		/* the mount's device, once mounted */
	bool armed;
};

/*
 * Fork the helper for `mountpoint` (absolute).  `quiet`: it sends its own
 * messages to syslog and closes stdout and stderr (the daemon is going to
 * the background, and a pipe held open by the helper would keep its
 * reader waiting).  0 or -errno.
 */
int unmounter_start(struct unmounter *u, const char *mountpoint, bool quiet);

/* Record the mount's device: call right after mounting. */
int unmounter_arm(struct unmounter *u, const char *mountpoint);

/* Ask for the unmount; returns at once (one write on a pipe, also safe from
 * a request thread).  A mount that is busy is detached lazily, and goes
 * when its last user lets go. */
void unmounter_request(struct unmounter *u);

/* Close the pipe and wait for the helper; with `unmount`, have it unmount
 * first, unless the mount is busy, and wait for that (the daemon must no
 * longer need the mount). */
void unmounter_stop(struct unmounter *u, bool unmount);

#endif
