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

#include "stats.h"

struct store;
struct policy;
struct stats_handle;

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
	 * Open stats snapshots.  The kernel drops the RELEASE of a file
	 * closed just before an unmount (the connection is aborted with the
	 * request still queued): fs_fini frees what is left here.  The lock
	 * is a leaf: nothing is taken under it.
	 */
	pthread_mutex_t stats_lock;
	struct stats_handle *stats_open;	/* protected by stats_lock */

	bool uring_wanted;		/* FUSE over io_uring asked for (uring.h) */
};

extern const struct fuse_lowlevel_ops fs_ops;

int fs_init(struct fs *fs, struct store *st, unsigned int threads, unsigned int busy_poll_us);
void fs_fini(struct fs *fs);

/* Use FUSE over io_uring if the kernel lets us (uring.h).  Call once the
 * session is mounted, before fuse_daemonize (no thread starts until the
 * loop runs).  Returns whether it will be tried. */
bool fs_want_uring(struct fs *fs, struct fuse_session *se);

/* Install SIGTERM/SIGINT/SIGHUP handlers that ask the loop to stop.  While
 * `swap` is open (a loop device is attached, swap may be on it) a stop is
 * deferred until the
 * file is closed: ending the daemon would lose swapped-out memory. */
int fs_install_signal_handlers(struct fs *fs);

/* Serve requests until unmounted or stopped.  0 or -errno. */
int fs_loop(struct fs *fs, struct fuse_session *se);

#endif
