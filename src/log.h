/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log: messages from the daemon.  Before the daemon detaches they go to
 * stderr; after, to syslog as well, since stderr is then /dev/null.
 */
#ifndef ZSWAPFS_LOG_H
#define ZSWAPFS_LOG_H

#include <stdarg.h>

void log_to_syslog(int on);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
