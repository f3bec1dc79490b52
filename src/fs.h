/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs: the FUSE side.  The mount holds three files:
 *   swap     the page store, served with FOPEN_DIRECT_IO (a page cache copy
 *            would double the memory we exist to save);
 *   stats    a text snapshot, made when the file is opened;
 *   control  write-only commands (control.h).
 * This is the only layer that turns -errno into FUSE replies.
 *
 * Requests are served by our own loop on a non-blocking /dev/fuse fd
 * (receive until EAGAIN, then poll): on this class of VM it answers several
 * times faster than libfuse's multi-threaded loop (DESIGN.md, "Speed").
 * Where the kernel allows it, requests then move to FUSE over io_uring
 * (uring.h), one thread per CPU; /dev/fuse stays for the rest.
 */
#ifndef ZSWAPFS_FS_H
#define ZSWAPFS_FS_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "stats.h"

struct store;
struct policy;

/* Snapshots of `stats` open at once; the text of each is made at open. */
#define FS_STATS_SLOTS		4
/* The stats text of a mount with every size class in use is ~25 KiB. */
#define FS_STATS_CAP		(64u * 1024u)

struct fs_stats_slot {
	_Atomic bool busy;
	size_t len;
	char *text;			/* FS_STATS_CAP bytes, made at fs_init */
};

struct fs {
	struct store *store;
	struct policy *policy;		/* background work; set before fs_loop */
	struct stats_io io;
	struct timespec mount_time;
	unsigned int threads;		/* request threads */
	uint64_t busy_poll_ns;		/* spin for the next request before poll() */
	_Atomic int swap_opens;		/* open handles on `swap` */
	int stop_fd;			/* eventfd: readable once a stop is requested */
	_Atomic int stop_requested;	/* a signal asked us to stop */

	/*
	 * Access.  `swap` and `control` are the owner's (root's) alone,
	 * whatever the mount options: the mount always has
	 * default_permissions (the kernel checks the modes below), and open
	 * and setattr check the caller's uid again.  Others reach the mount
	 * only with allow_other, and then may read `stats` when in its group.
	 */
	uid_t owner;			/* the daemon's uid (root) */
	gid_t stats_gid;		/* group of `stats` (mode 0440) */
	bool others_allowed;		/* mounted with allow_other */

	struct fs_stats_slot stats_slot[FS_STATS_SLOTS];

	/* Asked, once, when a stop signal is allowed to end the daemon: it
	 * has the mount unmounted, and the loop ends when the kernel ends
	 * the connection.  NULL: the loop ends at once. */
	void (*request_unmount)(void *arg);
	void *unmount_arg;
	_Atomic bool unmount_requested;

	bool uring_wanted;		/* FUSE over io_uring asked for (uring.h) */

	/* Restart (restart.h): seen after every read of /dev/fuse and before
	 * every reply written to it; NULL: none.  Set before fs_install_io. */
	const struct fs_dev_hooks *dev_hooks;
	_Atomic bool leave_loop;	/* fs_leave_loop() was called */
};

struct fs_dev_hooks {
	/* A request of len bytes was read into buf. */
	void (*on_read)(void *arg, const void *buf, size_t len);
	/* A reply is about to be written; true: do not write it (it counts as
	 * written). */
	bool (*on_reply)(void *arg, const struct iovec *iov, int count);
	void *arg;
};

extern const struct fuse_lowlevel_ops fs_ops;

int fs_init(struct fs *fs, struct store *st, unsigned int threads, unsigned int busy_poll_us);
void fs_fini(struct fs *fs);

/* Use FUSE over io_uring if the kernel lets us (uring.h).  Call once the
 * session is mounted, before any thread starts (none does until the loop
 * runs).  Returns whether it will be tried. */
bool fs_want_uring(struct fs *fs, struct fuse_session *se);

/* Read /dev/fuse through our own function, which hands read errors to the
 * loop (logged with a rate limit) instead of libfuse (which prints each).
 * Call after fs_want_uring (which does it for the rings' session).  0 or
 * -errno. */
int fs_install_io(struct fs *fs, struct fuse_session *se);

/* Install SIGTERM/SIGINT/SIGHUP handlers that ask the loop to stop.  While
 * `swap` is open (a loop device is attached, swap may be on it) a stop is
 * deferred until the
 * file is closed: ending the daemon would lose swapped-out memory. */
int fs_install_signal_handlers(struct fs *fs);

/* Serve requests until the kernel ends the connection (umount, abort), or
 * a stop signal does (see request_unmount).  An error reading or polling
 * /dev/fuse is logged, counted and retried (io.loop_errors): while swap
 * sits on us, exiting would take every swapped-out page with it.  0 or
 * -errno. */
int fs_loop(struct fs *fs, struct fuse_session *se);

/* Have fs_loop return 0 once every request read so far is answered; the
 * others stay queued in the kernel for the next worker.  From any thread. */
void fs_leave_loop(struct fs *fs);

#endif
