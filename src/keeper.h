/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * keeper: the process that mounts, and holds what must outlive the process
 * that serves (issue 11).  It keeps the /dev/fuse open file (the same open
 * file the workers serve, never a FUSE_DEV_IOC_CLONE, whose requests die
 * with it), the unmount helper's pipe and the shared memory (shm.h), and
 * starts workers (worker.h) by fork + exec of the binary on disk, with those
 * descriptors inherited, the backing file's too (the keeper opened it, and
 * holds its flock; only the keeper's end truncates it: main.c).  It never
 * reads or polls /dev/fuse (a poller is woken by every request), allocates
 * nothing once started, and waits on the worker's pidfd and on a signalfd:
 *   - a worker that exits 0 saw the kernel end the connection: so does the
 *     keeper;
 *   - SIGTERM, SIGINT, SIGHUP go to the worker, whose rules decide (a stop
 *     waits while `swap` is open: fs.h); one that comes while no worker
 *     serves waits for the next;
 *   - `restart` (control.h): the worker answers what it has read and exits
 *     RESTART_EXIT_AGAIN; a new one starts from the binary on disk;
 *   - a worker that dies otherwise is replaced at once, when restart-safe
 *     (worker_restart = true, and a kernel with FUSE_NOTIFY_RESEND);
 *     otherwise the keeper exits and the connection ends, as it did when
 *     the daemon died.  KEEPER_BURST deaths in a row
 *     within KEEPER_BURST_NS of workers that served less than
 *     KEEPER_SHORT_LIFE_NS (or never): a crash loop; the next start waits,
 *     from 1 s doubling up to 16 s, and the log says so.  A worker killed
 *     after it served a while (an admin's kill -9, the OOM killer, a test
 *     that kills every second) is replaced at once, however often;
 *   - `restart keeper` (the worker sends SIGUSR1): the keeper executes the
 *     binary on disk in its own place (keeper_reexec), the worker serving
 *     all along; see keeper_resume();
 *   - a worker that refuses the connection (RESTART_EXIT_REFUSED: another
 *     layout or INIT reply) is replaced by the keeper's own binary
 *     (/proc/self/exe); if that refuses too, the keeper ends the connection.
 */
#ifndef ZSWAPFS_KEEPER_H
#define ZSWAPFS_KEEPER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm.h"

#define KEEPER_BURST		5
#define KEEPER_BURST_NS		(10ull * 1000000000ull)
#define KEEPER_SHORT_LIFE_NS	(1000000000ull)
#define KEEPER_BACKOFF_MIN_MS	1000
#define KEEPER_BACKOFF_MAX_MS	16000

struct keeper {
	struct shm_region *shm;		/* state filled by the caller */
	int *ready_fd;			/* the start-up parent's pipe, or -1 */
	bool foreground;
	/* private */
	pid_t worker;
	int pidfd;
	int sigfd;
	int ready_rd;			/* the worker's "serving" pipe */
	bool worker_ready;
	uint64_t ready_ns;		/* when it began to serve */
	bool worker_ready_before;	/* the worker that just ended had served */
	bool served;			/* a worker has served */
	bool from_self;			/* next worker: the keeper's own binary */
	bool reexec_wanted;		/* `restart keeper` came (SIGUSR1) */
	int pending_sig;
	unsigned int backoff_ms;
	uint64_t deaths[KEEPER_BURST];	/* CLOCK_MONOTONIC ns, a ring */
	unsigned int nr_deaths;
};

/*
 * Block the stop signals into a signalfd.  Before anything else in the
 * keeper's process can take them.  0 or -errno.
 */
int keeper_signals(struct keeper *k);

/*
 * Start the first worker and supervise.  Returns the keeper's exit status
 * (0: the connection ended); *unmount says the mount must be taken down
 * (the first worker never served: a failed start-up).
 */
int keeper_run(struct keeper *k, bool *unmount);

/*
 * Upgrading the keeper itself.  On `restart keeper`, while a worker serves,
 * the keeper executes the binary on disk as
 *	zswapfs --keeper STATE_FD WORKER_PID HOLDER_PID HOLDER_FD OLD_EXE_FD
 * keeping the descriptors that matter (/dev/fuse, the state memfd, the
 * unmount helper's pipe).  An exec detaches the SysV segments, which are
 * marked for removal: if the worker died in that window they would go with
 * it, and every page with them.  So a holder, a child forked just before,
 * keeps them attached until the new image has attached them again and
 * closed HOLDER_FD.  The new image finds its worker (still its child: the
 * pid does not change) and the unmount helper through the state, and
 * supervises as before.  If it cannot take the state over (another layout),
 * it executes the old binary again through OLD_EXE_FD (an open file of the
 * old /proc/self/exe; -1 in that second exec).
 *
 * keeper_resume_main() is the new image's main(): argv holds the five
 * numbers.  Returns the keeper's exit status, as main() does.
 */
int keeper_resume_main(char **argv);
/* Whether the kernel has ended the connection on /dev/fuse descriptor
 * fuse_fd (umount, abort): the mount is gone then, and nothing is left to
 * unmount. */
bool keeper_connection_ended(int fuse_fd);
/* The new image's supervision of the worker it found serving. */
int keeper_supervise(struct keeper *k, pid_t worker, bool *unmount);

#endif
