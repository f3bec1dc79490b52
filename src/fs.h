/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs: the FUSE side.  The mount holds three files:
 *   swap     the page store, served with FOPEN_DIRECT_IO (a page cache copy
 *            would double the memory we exist to save);
 *   stats    a text snapshot, made when the file is opened;
 *   control  write-only commands (control.h).
 * This is the only layer that turns -errno into FUSE replies.  How requests
 * reach these handlers, and the threads that serve them, is transport.h's.
 */
#ifndef ZSWAPFS_FS_H
#define ZSWAPFS_FS_H

#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "stats.h"
#include "transport.h"

struct store;
struct policy;
struct dicttrain;

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
	struct policy *policy;		/* background work; set before the loop */
	struct dicttrain *dicttrain;	/* dictionaries; set before the loop */
	struct stats_io io;
	struct timespec mount_time;
	/* The request loop and its threads; an open handle on `swap` holds
	 * off a stop (transport_hold). */
	struct transport tp;

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
	/*
	 * A `stats` handle is this process's tag and a slot's index, never a
	 * pointer: a handle opened by a worker that died comes to the next
	 * one (its READ and RELEASE are sent again: restart.h), which must
	 * know it for none of its own.  The tag is the process id.
	 */
	uint32_t fh_tag;
};

extern const struct fuse_lowlevel_ops fs_ops;

int fs_init(struct fs *fs, struct store *st, unsigned int threads, unsigned int busy_poll_us);
void fs_fini(struct fs *fs);

#endif
