/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* pthread_setname_np; also built into the bench's noop_fuse */
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/*
 * A message longer than this is cut: the longest we write (a path and an
 * error) is well under it.  64 lines hold a burst of warnings; the ring is
 * 20 KiB of static memory, locked with the rest of the daemon.
 */
#define LOG_LINE_MAX	320
#define LOG_RING_LINES	64
/* The writer formats a line and calls write(), send() and localtime_r(). */
#define LOG_THREAD_STACK	(128u * 1024u)

static _Atomic bool to_stderr = true;
static int syslog_fd = -1;		/* AF_UNIX datagram socket to /dev/log */

struct log_line {
	int prio;
	char text[LOG_LINE_MAX];
};

static struct {
	pthread_mutex_t lock;		/* a leaf (lock order: store.h) */
	/* protected by lock */
	unsigned int head, count;
	struct log_line line[LOG_RING_LINES];

	_Atomic bool started;		/* producers queue instead of writing */
	_Atomic bool stopping;
	_Atomic uint64_t dropped;
	uint64_t dropped_told;		/* the writer's own */
	int wake_fd;			/* eventfd: lines queued */
	pthread_t tid;
} ring = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake_fd = -1 };

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static int syslog_connect(int fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };

	return connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
}

static void to_syslog(int prio, const char *text)
{
	static const char mon[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	char out[LOG_LINE_MAX + 64];
	struct tm tm;
	time_t now = time(NULL);
	int n;

	/* RFC 3164, as syslog(3) sends it: <PRI>Mmm dd hh:mm:ss TAG[PID]: text */
	localtime_r(&now, &tm);
	n = snprintf(out, sizeof(out), "<%d>%s %2d %02d:%02d:%02d zswapfs[%d]: %s",
		     LOG_DAEMON | prio, mon[tm.tm_mon % 12], tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, (int)getpid(), text);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(out))
		n = sizeof(out) - 1;
	if (send(syslog_fd, out, (size_t)n, MSG_NOSIGNAL) >= 0)
		return;
	/* syslogd or journald restarted: connect again, once */
	if ((errno == ECONNREFUSED || errno == ENOTCONN || errno == ENOENT) &&
	    !syslog_connect(syslog_fd))
		send(syslog_fd, out, (size_t)n, MSG_NOSIGNAL);
}

static void emit(int prio, const char *text)
{
	char out[LOG_LINE_MAX + 32];
	const char *prefix = prio == LOG_ERR ? "error: " : prio == LOG_WARNING ? "warning: " : "";
	int n;

	if (atomic_load_explicit(&to_stderr, memory_order_relaxed)) {
		n = snprintf(out, sizeof(out), "zswapfs: %s%s\n", prefix, text);
		if (n > 0)
			write_all(STDERR_FILENO, out,
				  (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1);
	}
	if (syslog_fd >= 0)
		to_syslog(prio, text);
}

/* Queue a line for the writer; false when the ring is full. */
static bool queue(int prio, const char *text)
{
	uint64_t one = 1;
	bool ok = false;
	ssize_t r;

	pthread_mutex_lock(&ring.lock);
	if (ring.count < LOG_RING_LINES) {
		struct log_line *l = &ring.line[(ring.head + ring.count) % LOG_RING_LINES];

		l->prio = prio;
		snprintf(l->text, sizeof(l->text), "%s", text);
		ring.count++;
		ok = true;
	}
	pthread_mutex_unlock(&ring.lock);
	if (ok) {
		r = write(ring.wake_fd, &one, sizeof(one));
		(void)r;
	}
	return ok;
}

static void log_msg(int prio, const char *fmt, va_list ap)
{
	char text[LOG_LINE_MAX];

	/* vsnprintf into the caller's stack: no allocation for %s, %d, %llu */
	vsnprintf(text, sizeof(text), fmt, ap);
	if (!atomic_load_explicit(&ring.started, memory_order_acquire))
		emit(prio, text);
	else if (!queue(prio, text))
		atomic_fetch_add_explicit(&ring.dropped, 1, memory_order_relaxed);
}

#define LOG_FN(fn, prio)				\
	void fn(const char *fmt, ...)			\
	{						\
		va_list ap;				\
		va_start(ap, fmt);			\
		log_msg(prio, fmt, ap);			\
		va_end(ap);				\
	}

LOG_FN(log_info, LOG_INFO)
LOG_FN(log_warn, LOG_WARNING)
LOG_FN(log_err, LOG_ERR)

int log_to_syslog(void)
{
	int fd, err;

	if (syslog_fd >= 0)
		return 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	err = syslog_connect(fd);
	if (err) {
		close(fd);
		return err;
	}
	syslog_fd = fd;
	return 0;
}

void log_quiet_stderr(void)
{
	atomic_store(&to_stderr, false);
}

void log_detach_stdio(bool keep_stderr)
{
	int fd;

	if (!keep_stderr)
		log_quiet_stderr();
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if (!keep_stderr)
		dup2(fd, STDERR_FILENO);
	close(fd);
}

static void *writer(void *arg)
{
	struct log_line l;
	uint64_t v;
	ssize_t r;

	(void)arg;
	for (;;) {
		uint64_t dropped;

		pthread_mutex_lock(&ring.lock);
		if (ring.count) {
			l = ring.line[ring.head];
			ring.head = (ring.head + 1) % LOG_RING_LINES;
			ring.count--;
			pthread_mutex_unlock(&ring.lock);
			emit(l.prio, l.text);
			continue;
		}
		pthread_mutex_unlock(&ring.lock);
		dropped = atomic_load(&ring.dropped);
		if (dropped != ring.dropped_told) {
			snprintf(l.text, sizeof(l.text), "%llu log messages dropped (too many at once)",
				 (unsigned long long)(dropped - ring.dropped_told));
			ring.dropped_told = dropped;
			emit(LOG_WARNING, l.text);
		}
		if (atomic_load(&ring.stopping))
			break;
		r = read(ring.wake_fd, &v, sizeof(v));
		(void)r;
	}
	return NULL;
}

int log_start(void)
{
	pthread_attr_t attr;
	int err;

	if (atomic_load(&ring.started))
		return 0;
	ring.wake_fd = eventfd(0, EFD_CLOEXEC);
	if (ring.wake_fd < 0)
		return -errno;
	atomic_store(&ring.stopping, false);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, LOG_THREAD_STACK);
	err = -pthread_create(&ring.tid, &attr, writer, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		close(ring.wake_fd);
		ring.wake_fd = -1;
		return err;
	}
	pthread_setname_np(ring.tid, "zswapfs-log");
	atomic_store_explicit(&ring.started, true, memory_order_release);
	return 0;
}

void log_stop(void)
{
	uint64_t one = 1;
	ssize_t r;

	if (!atomic_load(&ring.started))
		return;
	atomic_store(&ring.stopping, true);
	r = write(ring.wake_fd, &one, sizeof(one));
	(void)r;
	pthread_join(ring.tid, NULL);
	/* What was queued after the writer's last look goes out now. */
	atomic_store(&ring.started, false);
	while (ring.count) {
		emit(ring.line[ring.head].prio, ring.line[ring.head].text);
		ring.head = (ring.head + 1) % LOG_RING_LINES;
		ring.count--;
	}
	close(ring.wake_fd);
	ring.wake_fd = -1;
}

uint64_t log_dropped(void)
{
	return atomic_load_explicit(&ring.dropped, memory_order_relaxed);
}

bool log_ratelimit(struct log_ratelimit *rl, uint64_t *held)
{
	uint64_t next = atomic_load_explicit(&rl->next_ns, memory_order_relaxed);
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if ((next && now < next) ||
	    !atomic_compare_exchange_strong(&rl->next_ns, &next,
					    now + (uint64_t)rl->interval_s * 1000000000u)) {
		atomic_fetch_add_explicit(&rl->held, 1, memory_order_relaxed);
		return false;
	}
	*held = atomic_exchange(&rl->held, 0);
	return true;
}
