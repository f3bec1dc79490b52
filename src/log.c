/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "log.h"

static int use_syslog;

void log_to_syslog(int on)
{
	if (on && !use_syslog)
		openlog("zswapfs", LOG_PID, LOG_DAEMON);
	use_syslog = on;
}

static void log_msg(int prio, const char *prefix, const char *fmt, va_list ap)
{
	va_list copy;

	va_copy(copy, ap);
	if (use_syslog)
		vsyslog(prio, fmt, copy);
	va_end(copy);
	fprintf(stderr, "zswapfs: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

#define LOG_FN(fn, prio, prefix)			\
	void fn(const char *fmt, ...)			\
	{						\
		va_list ap;				\
		va_start(ap, fmt);			\
		log_msg(prio, prefix, fmt, ap);		\
		va_end(ap);				\
	}

LOG_FN(log_info, LOG_INFO, "")
LOG_FN(log_warn, LOG_WARNING, "warning: ")
LOG_FN(log_err, LOG_ERR, "error: ")
