/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memcg: where the daemon stands in the memory cgroup tree, and what it
 * does about it at start.
 *
 * A memory limit on our cgroup, or on any cgroup above it, makes our own
 * page faults reclaim within that cgroup once it is full: reclaim then
 * swaps the other processes of the cgroup out, to the swap we serve, and
 * waits for I/O that only we can do (issue 14: daemon and program stood in
 * rq_qos_wait for good).  The reserve (reserve.h) keeps the request path
 * from faulting, but the kernel still allocates for us (O_DIRECT reads of
 * the backing file, /proc reads, io_uring), so the safe place for the
 * daemon is out from under any limit.  At start, with setting memcg:
 *   move    (default) if limited, make a cgroup of our own without a limit
 *           beside the highest limited cgroup on our path (for a cgroup
 *           limited at the top level: at the top of the hierarchy, e.g.
 *           /sys/fs/cgroup/memory/zswapfs-PID) and move there; removed
 *           once we have ended.  Needs the right to create it and to move
 *           us (root, or a delegated v2 subtree whose limited cgroup is not
 *           its root); when it cannot, refuse as below;
 *   refuse  if limited, refuse to start, saying where the limit is;
 *   ignore  go on under the limit (and say so in the log and the stats).
 * A limit of the machine's RAM or more counts as none.
 *
 * cgroup v1: /proc/self/cgroup's line for the memory controller, limits
 * in memory.limit_in_bytes (memory.memsw.limit_in_bytes is reported: a
 * memsw limit stops swapping, it does not reclaim into swap).  cgroup v2:
 * the 0:: line, when the v2 root lists the memory controller in
 * cgroup.controllers; limits in memory.max and memory.high (exceeding
 * memory.high makes the task reclaim on its own before it goes on).  The
 * hierarchies' mount points come from /proc/self/mountinfo.  Every path
 * may be pointed elsewhere (struct memcg_paths) so that the unit tests can
 * read a fake tree.
 */
#ifndef ZSWAPFS_MEMCG_H
#define ZSWAPFS_MEMCG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* NULL members take the system's: /proc/self/cgroup, /proc/self/mountinfo,
 * and the mount points found in it. */
struct memcg_paths {
	const char *proc_cgroup;
	const char *mountinfo;
	const char *v1_root;		/* the v1 memory hierarchy's mount point */
	const char *v2_root;		/* the cgroup2 mount point */
};

enum memcg_version { MEMCG_NONE, MEMCG_V1, MEMCG_V2 };

#define MEMCG_NO_LIMIT	UINT64_MAX

struct memcg_info {
	enum memcg_version version;
	char root[PATH_MAX];		/* the hierarchy's mount point */
	char path[PATH_MAX];		/* our cgroup under it: "/" or "/a/b" */
	uint64_t limit;			/* tightest on the way up; MEMCG_NO_LIMIT */
	char limit_file[PATH_MAX];	/* the file that sets it */
	/* The highest (nearest the root) cgroup with a limit below ram, under
	 * root: "/a"; "" when there is none. */
	char top_limited[PATH_MAX];
	uint64_t memsw_limit;		/* v1, tightest; MEMCG_NO_LIMIT */
};

/*
 * Read where we stand.  Limits of ram bytes or more count as none for
 * top_limited (pass UINT64_MAX to count every limit).  Returns 0, or
 * -EINVAL/-ENOENT/-errno with a message naming the file in err.
 */
int memcg_read(const struct memcg_paths *p, uint64_t ram, struct memcg_info *info, char *err,
	       size_t errlen);

enum memcg_mode { MEMCG_MOVE, MEMCG_REFUSE, MEMCG_IGNORE };

/* "move", "refuse", "ignore".  -EINVAL for anything else. */
int memcg_mode_parse(const char *word, enum memcg_mode *mode);

/*
 * At start, before the daemon allocates much and before any thread
 * exists: read where we stand and act per mode (see the top).  Returns 0
 * to go on, or -1 after writing a message for the user to err.  p may be
 * NULL (the system's paths); ram is the machine's RAM in bytes.
 */
int memcg_apply(const struct memcg_paths *p, enum memcg_mode mode, uint64_t ram, char *err,
		size_t errlen);

/*
 * Undoing a move.  Moving a process between cgroups needs no capability
 * (root's uid owns cgroup.procs, or the delegated subtree's user does), but
 * removing a cgroup needs write permission on the directory above it, and
 * the top of a hierarchy is mode 0555: without CAP_DAC_OVERRIDE, which the
 * daemon has dropped long before it exits (harden.h), the daemon cannot
 * remove a cgroup made there.  So the daemon only moves back at exit
 * (memcg_return()), and its unmount helper, forked after memcg_apply(),
 * moved back to where we came from at once and keeping CAP_DAC_OVERRIDE,
 * removes the cgroup once the daemon has ended, however it ended
 * (memcg_remove(), unmounter.h).
 */

/* The cgroup memcg_apply() made (its directory), or NULL. */
const char *memcg_made(void);

/* Move the calling process back to where the daemon came from (to the
 * hierarchy's root if that is gone), out of the cgroup memcg_apply() made.
 * 0 (also when it made none) or -errno. */
int memcg_return(void);

/*
 * Remove the cgroup memcg_apply() made, waiting up to wait_ms while it is
 * busy (a process that has just died may still count in it).  0 (also when
 * it is gone already, or none was made) or -errno after a warning.
 */
int memcg_remove(unsigned int wait_ms);

/* memcg_return() and memcg_remove(0): all of it, with the privilege. */
void memcg_restore(void);

/* What memcg_apply() found and did, for the stats. */
struct memcg_report {
	const char *state;	/* "none" (no limit), "moved", "ignored", "unknown" */
	uint64_t limit;		/* the limit found at start, bytes; 0: none */
	char cgroup[PATH_MAX];	/* the cgroup made by a move, else "" */
};

void memcg_get_report(struct memcg_report *r);
/* Report what another process (a worker's keeper: keeper.h) found and did,
 * for the stats; only the report changes, nothing is undone here. */
void memcg_set_report(const struct memcg_report *r);
/*
 * Where memcg_return() goes: the cgroup we came from and the hierarchy's
 * root (each PATH_MAX).  A keeper that re-executes itself (keeper.h) saves
 * them before and sets them again after, with the cgroup it had made.
 */
void memcg_get_return(char *origin, char *root);
void memcg_set_return(const char *created, const char *origin, const char *root);

#endif
