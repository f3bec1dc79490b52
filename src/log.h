/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log: messages from the daemon.  Before the daemon detaches they go to
 * stderr; after, to syslog (or to stderr still, when stderr is the journal).
 *
 * Logging never allocates and never blocks the caller once log_start() has
 * run: a message is formatted on the caller's stack into a fixed ring of
 * lines, and a thread of its own writes the ring out.  A request thread that
 * logs while the journal or syslog daemon is itself stalled (it may be
 * waiting for a page that is swapped out to us) goes on serving; when the
 * ring is full the message is dropped and counted (log_dropped()).  Before
 * log_start(), and after log_stop(), messages are written at once.
 */
#ifndef ZSWAPFS_LOG_H
#define ZSWAPFS_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Send messages to syslog too (a socket to /dev/log, opened now).  Returns
 * 0, or -errno when there is no syslog to reach (messages then go to
 * stderr only). */
int log_to_syslog(void);

/* Stop writing to stderr (it is about to become /dev/null). */
void log_quiet_stderr(void);

/* A daemon gone to the background: stdin, stdout and, unless keep_stderr
 * (it is the journal), stderr become /dev/null; messages stop going to
 * stderr then. */
void log_detach_stdio(bool keep_stderr);

/* Start the writer thread; from now on logging only queues.  0 or -errno
 * (then messages go on being written at once). */
int log_start(void);

/* Write what is queued and end the writer thread. */
void log_stop(void);

/* Messages dropped because the ring was full. */
uint64_t log_dropped(void);

/*
 * At most one message per `interval_s` seconds from one place, for errors
 * that may repeat for every request:
 *
 *	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5);
 *	uint64_t held;
 *
 *	if (log_ratelimit(&rl, &held))
 *		log_err("...: %llu more since the last message", held);
 */
struct log_ratelimit {
	_Atomic uint64_t next_ns;	/* CLOCK_MONOTONIC; 0 = never logged */
	_Atomic uint64_t held;		/* messages held back since the last one */
	uint32_t interval_s;
};

#define LOG_RATELIMIT_INIT(seconds) { .next_ns = 0, .held = 0, .interval_s = (seconds) }

/* True when the caller may log now; *held gets how many were held back
 * since the last message.  Lock-free, safe from any thread. */
bool log_ratelimit(struct log_ratelimit *rl, uint64_t *held);

#endif
