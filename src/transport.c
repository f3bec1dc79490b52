/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * transport: the request loop on /dev/fuse, the serving threads, stop
 * signals, and FUSE over io_uring's queue threads (uring.c moves their
 * bytes).  See transport.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harden.h"
#include "log.h"
#include "reserve.h"
#include "transport.h"
#include "uring.h"

static __thread struct transport_thread *current_thread;

struct transport_thread *transport_current(void)
{
	return current_thread;
}

int transport_init(struct transport *tp, struct store *st, struct stats_io *io,
		   unsigned int threads, unsigned int busy_poll_us)
{
	memset(tp, 0, sizeof(*tp));
	tp->store = st;
	tp->io = io;
	tp->threads = threads ? threads : 1;
	tp->busy_poll_ns = (uint64_t)busy_poll_us * 1000u;
	tp->holds = &tp->own_holds;
	tp->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return tp->stop_fd < 0 ? -errno : 0;
}

int transport_set_nice(int nice)
{
	/* PRIO_PROCESS with who 0 is the calling thread on Linux, and a new
	 * thread starts with its creator's nice value. */
	if (getpriority(PRIO_PROCESS, 0) == nice)
		return 0;
	return setpriority(PRIO_PROCESS, 0, nice) ? -errno : 0;
}

/* The kernel's bounds on a custom slice (kernel/sched/syscalls.c). */
#define TRANSPORT_SLICE_MIN_NS	100000u
#define TRANSPORT_SLICE_MAX_NS	100000000u

int transport_set_slice(struct transport *tp, unsigned int us)
{
	uint64_t ns = (uint64_t)us * 1000u;

	if (ns && (ns < TRANSPORT_SLICE_MIN_NS || ns > TRANSPORT_SLICE_MAX_NS))
		return -EINVAL;
	tp->slice_ns = ns;
	return 0;
}

/* struct sched_attr of <linux/sched/types.h>, which glibc 2.36 lacks. */
struct transport_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;		/* SCHED_OTHER: the custom slice (6.12+) */
	uint64_t sched_deadline;
	uint64_t sched_period;
};

/* Give the calling thread tp->slice_ns, keeping its policy and nice value. */
static void thread_apply_slice(const struct transport *tp)
{
	static _Atomic bool said;
	struct transport_sched_attr a;
	int policy = sched_getscheduler(0);

	if (!tp->slice_ns)
		return;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.sched_policy = policy < 0 ? SCHED_OTHER : (uint32_t)policy;
	a.sched_nice = getpriority(PRIO_PROCESS, 0);
	a.sched_runtime = tp->slice_ns;
	/* Only a fair-class thread has a slice to set; anything else is left as it is. */
	if (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH)
		return;
	if (syscall(SYS_sched_setattr, 0, &a, 0) && !atomic_exchange(&said, true))
		log_warn("request_slice_us %llu: %s: request threads keep the kernel's slice",
			 (unsigned long long)(tp->slice_ns / 1000u), strerror(errno));
}

void transport_fini(struct transport *tp)
{
	if (tp->stop_fd >= 0)
		close(tp->stop_fd);
	tp->stop_fd = -1;
}

static void wake_loop(struct transport *tp);

void transport_share_holds(struct transport *tp, _Atomic int *shared)
{
	tp->holds = shared;
}

void transport_hold(struct transport *tp)
{
	atomic_fetch_add(tp->holds, 1);
}

void transport_release(struct transport *tp)
{
	int before = atomic_fetch_sub(tp->holds, 1);

	/* A RELEASE the dead worker had counted, sent again to us, finds
	 * nothing to release: the count never goes below 0. */
	if (before <= 0) {
		atomic_fetch_add(tp->holds, 1);
		return;
	}
	if (before == 1 && atomic_load(&tp->stop_requested))
		wake_loop(tp);
}

static struct transport *signal_tp;

static void on_stop_signal(int sig)
{
	uint64_t one = 1;
	ssize_t r;

	atomic_store(&signal_tp->stop_requested, sig);
	r = write(signal_tp->stop_fd, &one, sizeof(one));
	(void)r;
}

int transport_install_signal_handlers(struct transport *tp)
{
	struct sigaction sa;

	signal_tp = tp;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) ||
	    sigaction(SIGHUP, &sa, NULL))
		return -errno;
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	return 0;
}

/*
 * A stop was asked for.  While a hold is taken (`swap` is open: a loop
 * device, and maybe swap, sits on us) exiting would take swapped-out memory
 * with us, so the stop waits until the last hold is released
 * (transport_release wakes us then).
 * Returns true when the loop should end.
 */
static bool stop_allowed(struct transport *tp)
{
	static _Atomic bool said;
	uint64_t v;
	ssize_t r;

	if (atomic_load(tp->holds) == 0)
		return true;
	if (!atomic_exchange(&said, true))
		log_warn("the swap file is still open: stopping once it is closed "
			 "(swapoff and detach its loop device)");
	r = read(tp->stop_fd, &v, sizeof(v));	/* rearm */
	(void)r;
	return false;
}

static void wake_loop(struct transport *tp)
{
	uint64_t one = 1;
	ssize_t r = write(tp->stop_fd, &one, sizeof(one));

	(void)r;
}

/* Consecutive failures pause up to this long, so that a lasting error
 * costs a few wake-ups a second, not a CPU. */
#define TRANSPORT_BACKOFF_MAX_MS	100

/*
 * Reading or polling /dev/fuse failed (ENOMEM, EIO, ...): the kernel has not
 * ended the connection (that is ENODEV, a clean end), so swap may still sit
 * on us.  Log now and then, count, pause a little (a stop request ends the
 * pause), and let the loop try again.
 */
static void loop_error(struct transport_thread *t, const char *what, int err)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5);
	struct pollfd pfd = { .fd = t->tp->stop_fd, .events = POLLIN };
	uint64_t held;

	atomic_fetch_add_explicit(&t->tp->io->loop_errors, 1, memory_order_relaxed);
	if (log_ratelimit(&rl, &held))
		log_err("request loop: %s: %s; serving goes on (%llu more since the last "
			"message)", what, strerror(-err), (unsigned long long)held);
	t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : 1;
	if (t->backoff_ms > TRANSPORT_BACKOFF_MAX_MS)
		t->backoff_ms = TRANSPORT_BACKOFF_MAX_MS;
	poll(&pfd, 1, t->backoff_ms);
}

/* A stop signal, and the swap file closed: have the mount unmounted (the
 * loop ends when the kernel ends the connection), or end now.  Returns
 * whether the loop should end. */
static bool stop_now(struct transport *tp)
{
	uint64_t v;
	ssize_t r;

	if (!tp->request_unmount)
		return true;
	r = read(tp->stop_fd, &v, sizeof(v));	/* rearm: serving goes on */
	(void)r;
	if (!atomic_exchange(&tp->unmount_requested, true))
		tp->request_unmount(tp->unmount_arg);
	return false;
}

static void *loop_thread(void *arg)
{
	struct transport_thread *t = arg;
	struct fuse_buf buf = { .mem = NULL };
	struct pollfd pfd[2] = {
		{ .fd = fuse_session_fd(t->se), .events = POLLIN },
		{ .fd = t->tp->stop_fd, .events = POLLIN },
	};
	uint64_t idle_since = 0;
	int res;

	current_thread = t;
	thread_apply_slice(t->tp);
	reserve_prepare_thread();	/* serving must not fault: reserve.h */
	while (!fuse_session_exited(t->se) && !atomic_load(&t->tp->leave_loop)) {
		t->read_err = 0;
		res = fuse_session_receive_buf(t->se, &buf);
		if (res > 0) {
			t->backoff_ms = 0;
			fuse_session_process_buf(t->se, &buf);
			uring_session_poll();	/* the rings start right after FUSE_INIT */
			continue;
		}
		/* 0: ENODEV, the kernel ended the connection (umount, abort),
		 * or another thread ended the session. */
		if (res == 0)
			break;
		/* dev_read turned a failed read into EAGAIN */
		if (res == -EAGAIN && t->read_err) {
			loop_error(t, "reading /dev/fuse", t->read_err);
			continue;
		}
		/*
		 * Optional busy polling: looking for the next request a few
		 * microseconds saves the wake-up of a sleeping thread (4 KiB
		 * QD1 reads through loop: 40 -> 26 us) but takes a CPU from
		 * the faulting task and the loop worker (see busy_poll_us in
		 * config.c for why it is off by default).
		 */
		if (res == -EAGAIN && t->tp->busy_poll_ns) {
			uint64_t now = transport_now_ns();

			if (!idle_since)
				idle_since = now;
			if (now - idle_since < t->tp->busy_poll_ns)
				continue;
		}
		idle_since = 0;
		if (res != -EAGAIN && res != -EINTR) {
			loop_error(t, "reading /dev/fuse", res);
			continue;
		}
		if (poll(pfd, 2, -1) < 0) {
			if (errno != EINTR)
				loop_error(t, "waiting on /dev/fuse", -errno);
			continue;
		}
		if ((pfd[1].revents & POLLIN) && atomic_load(&t->tp->stop_requested) &&
		    stop_allowed(t->tp) && stop_now(t->tp))
			break;
	}
	/* Wake the other threads: their poll sees stop_fd readable. */
	fuse_session_exit(t->se);
	wake_loop(t->tp);
	free(buf.mem);
	return NULL;
}

/* /dev/fuse through our hands: see transport_install_io. */
static void dev_read_error(void *arg, int err)
{
	(void)arg;
	if (current_thread)
		current_thread->read_err = err;
}

/* The session's userdata is the file system's: the hooks are found here. */
static const struct transport_dev_hooks *dev_hooks;

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	const struct transport_dev_hooks *hooks = dev_hooks;
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	if (n > 0 && hooks)
		hooks->on_read(hooks->arg, buf, (size_t)n);
	/* The errors of normal operation go to libfuse as they are. */
	if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ENOENT && errno != ENODEV) {
		dev_read_error(NULL, -errno);
		errno = EAGAIN;
	}
	return n;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct transport_dev_hooks *hooks = dev_hooks;

	(void)userdata;
	if (hooks && hooks->on_reply(hooks->arg, iov, count)) {
		size_t len = 0;

		for (int i = 0; i < count; i++)
			len += iov[i].iov_len;
		return (ssize_t)len;
	}
	return writev(fd, iov, count);
}

void transport_leave_loop(struct transport *tp)
{
	atomic_store(&tp->leave_loop, true);
	wake_loop(tp);
}

int transport_install_io(struct transport *tp, struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = dev_read, .writev = dev_writev };

	dev_hooks = tp->dev_hooks;
	if (tp->uring_wanted)	/* the rings' session reads for us already */
		return 0;
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) ? -EIO : 0;
}

static void thread_fini(struct transport_thread *t)
{
	store_worker_fini(&t->worker);
	free(t->rbuf);
}

/* Ring threads read into the ring's payload buffers: no rbuf. */
static int thread_init(struct transport_thread *t, struct transport *tp, struct fuse_session *se,
		       bool with_rbuf)
{
	int err;

	t->tp = tp;
	t->se = se;
	t->rbuf = with_rbuf ? malloc(TRANSPORT_MAX_IO) : NULL;
	if (with_rbuf && !t->rbuf)
		return -ENOMEM;
	err = store_worker_init(&t->worker, tp->store);
	if (err)
		free(t->rbuf);
	return err;
}

/* ---- FUSE over io_uring ------------------------------------------------ */

/* Each queue thread (uring.h) gets the state a request thread has. */
static int ring_thread_start(void *arg, unsigned int qid)
{
	struct transport_thread *t = calloc(1, sizeof(*t));
	int err;

	(void)qid;
	if (!t)
		return -ENOMEM;
	err = thread_init(t, arg, NULL, false);
	if (err) {
		free(t);
		return err;
	}
	current_thread = t;
	thread_apply_slice(t->tp);
	reserve_prepare_thread();
	return 0;
}

static void ring_thread_stop(void *arg, unsigned int qid)
{
	(void)arg;
	(void)qid;
	thread_fini(current_thread);
	free(current_thread);
	current_thread = NULL;
}

bool transport_want_uring(struct transport *tp, struct fuse_session *se)
{
	struct uring_session_hooks hooks = {
		.thread_start = ring_thread_start, .thread_stop = ring_thread_stop,
		.read_error = dev_read_error, .arg = tp,
	};

	tp->uring_wanted = uring_session_want(se, &hooks);
	return tp->uring_wanted;
}

int transport_loop(struct transport *tp, struct fuse_session *se)
{
	int fd = fuse_session_fd(se);
	struct transport_thread *threads;
	pthread_attr_t attr;
	unsigned int i, started = 0;
	int err = 0;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return -errno;
	threads = calloc(tp->threads, sizeof(*threads));
	if (!threads)
		return -ENOMEM;
	for (i = 0; i < tp->threads; i++) {
		err = thread_init(&threads[i], tp, se, true);
		if (err)
			goto out_fini;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	/* Thread 0 is this thread; the others are started. */
	for (started = 1; started < tp->threads; started++) {
		err = -pthread_create(&threads[started].tid, &attr, loop_thread,
				      &threads[started]);
		if (err)
			break;
	}
	pthread_attr_destroy(&attr);
	if (!err)
		loop_thread(&threads[0]);
	else
		fuse_session_exit(se);
	for (i = 1; i < started; i++)
		pthread_join(threads[i].tid, NULL);
	uring_session_stop();
	for (i = 0; i < tp->threads; i++)
		if (!err)
			err = threads[i].err;
out_fini:
	while (i--)
		thread_fini(&threads[i]);
	free(threads);
	return err;
}
