/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * transport: how FUSE requests reach the handlers of fs.c, and the threads
 * that serve them.
 *
 * Requests are served by our own loop on a non-blocking /dev/fuse fd
 * (receive until EAGAIN, then poll): on this class of VM it answers several
 * times faster than libfuse's multi-threaded loop (DESIGN.md, "Speed").
 * Where the kernel allows it, requests then move to FUSE over io_uring
 * (uring.h), one thread per CPU; /dev/fuse stays for the rest.  Either way
 * each serving thread has its own store worker and read buffer
 * (transport_current), made when it starts: requests never allocate.
 *
 * Stop signals (SIGTERM, SIGINT, SIGHUP) end the loop, but never while a
 * hold is taken (transport_hold: fs.c takes one per open handle on `swap`,
 * where a loop device, and maybe swap, sits on us).
 */
#ifndef ZSWAPFS_TRANSPORT_H
#define ZSWAPFS_TRANSPORT_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "stats.h"
#include "store.h"

/* The largest request we accept: fewer, larger requests mean fewer round
 * trips through the loop worker and /dev/fuse (DESIGN.md, "Speed"). */
#define TRANSPORT_MAX_IO	(1024u * 1024u)

struct transport {
	struct store *store;		/* each thread has a worker on it */
	struct stats_io *io;		/* io->loop_errors counts failed reads */
	unsigned int threads;		/* request threads */
	uint64_t busy_poll_ns;		/* spin for the next request before poll() */
	uint64_t slice_ns;		/* each request thread's time slice; 0: the kernel's */
	_Atomic int own_holds;
	/* while > 0, a stop waits (transport_hold): own_holds, or a count in
	 * memory that outlives the worker (transport_share_holds) */
	_Atomic int *holds;
	int stop_fd;			/* eventfd: readable once a stop is requested */
	_Atomic int stop_requested;	/* a signal asked us to stop */

	/* Asked, once, when a stop signal is allowed to end the daemon: it
	 * has the mount unmounted, and the loop ends when the kernel ends
	 * the connection.  NULL: the loop ends at once. */
	void (*request_unmount)(void *arg);
	void *unmount_arg;
	_Atomic bool unmount_requested;

	bool uring_wanted;		/* FUSE over io_uring asked for (uring.h) */

	/* Restart (restart.h): seen after every read of /dev/fuse and before
	 * every reply written to it; NULL: none.  Set before
	 * transport_install_io. */
	const struct transport_dev_hooks *dev_hooks;
	_Atomic bool leave_loop;	/* transport_leave_loop() was called */
};

struct transport_dev_hooks {
	/* A request of len bytes was read into buf. */
	void (*on_read)(void *arg, const void *buf, size_t len);
	/* A reply is about to be written; true: do not write it (it counts as
	 * written). */
	bool (*on_reply)(void *arg, const struct iovec *iov, int count);
	void *arg;
};

/* What a serving thread has: made when it starts, used by every request it
 * serves. */
struct transport_thread {
	struct transport *tp;
	struct fuse_session *se;
	struct store_worker worker;
	unsigned char *rbuf;		/* TRANSPORT_MAX_IO bytes; NULL on ring threads */
	pthread_t tid;
	int err;
	int read_err;			/* set by the /dev/fuse read: its error */
	int backoff_ms;			/* pause after the last failure */
};

static inline uint64_t transport_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling request thread's state (NULL outside one). */
struct transport_thread *transport_current(void);

int transport_init(struct transport *tp, struct store *st, struct stats_io *io,
		   unsigned int threads, unsigned int busy_poll_us);
void transport_fini(struct transport *tp);

/* Give the calling thread, and so every thread it starts from now on (the
 * request threads; also the log and reserve threads, which serve them), the
 * nice value `nice` (the request_nice setting).  Call before privileges are
 * dropped (a negative value needs CAP_SYS_NICE) and before any thread
 * starts.  0 or -errno; the threads then keep the priority they have. */
int transport_set_nice(int nice);

/*
 * Give every request thread started from now on a time slice of `us`
 * microseconds (the request_slice_us setting; 0: the kernel's default).  On
 * Linux 6.12+ (EEVDF) a task's slice sets how soon after waking it runs: a
 * short one puts a woken request thread ahead of tasks that were given the
 * default (about 3 ms here), instead of behind them.  It needs no privilege
 * and takes no more CPU: a thread that runs past its slice goes back in line.
 * Each thread sets it for itself when it starts; a kernel that does not know
 * it leaves the default (warned once).  0 or -EINVAL (more than 100 ms, the
 * kernel's bound).
 */
int transport_set_slice(struct transport *tp, unsigned int us);

/* A stop waits while a hold is taken; the last release of a hold after a
 * stop signal wakes the loop to end it. */
void transport_hold(struct transport *tp);
void transport_release(struct transport *tp);
/*
 * Count holds in *shared, which outlives the worker (shm.h): a handle on
 * `swap` opened by a worker that died is released to the next one (its
 * RELEASE is sent again: restart.h), and the next one's stop must still
 * wait for it.  Before the loop starts.
 */
void transport_share_holds(struct transport *tp, _Atomic int *shared);

/* Use FUSE over io_uring if the kernel lets us (uring.h).  Call once the
 * session is mounted, before any thread starts (none does until the loop
 * runs).  Returns whether it will be tried. */
bool transport_want_uring(struct transport *tp, struct fuse_session *se);

/* Read /dev/fuse through our own function, which hands read errors to the
 * loop (logged with a rate limit) instead of libfuse (which prints each).
 * Call after transport_want_uring (which does it for the rings' session).
 * 0 or -errno. */
int transport_install_io(struct transport *tp, struct fuse_session *se);

/* Install SIGTERM/SIGINT/SIGHUP handlers that ask the loop to stop (see
 * transport_hold), and ignore SIGPIPE. */
int transport_install_signal_handlers(struct transport *tp);

/* Serve requests until the kernel ends the connection (umount, abort), or
 * a stop signal does (see request_unmount).  An error reading or polling
 * /dev/fuse is logged, counted and retried (io->loop_errors): while swap
 * sits on us, exiting would take every swapped-out page with it.  0 or
 * -errno. */
int transport_loop(struct transport *tp, struct fuse_session *se);

/* Have transport_loop return 0 once every request read so far is answered;
 * the others stay queued in the kernel for the next worker.  From any
 * thread. */
void transport_leave_loop(struct transport *tp);

#endif
