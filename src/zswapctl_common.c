/* SPDX-License-Identifier: GPL-2.0-or-later */
/* zswapctl_common: messages.  See zswapctl_common.h. */
#include <stdarg.h>
#include <stdio.h>

#include "zswapctl_common.h"

const char ctl_progname[] = "zswapctl";

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", ctl_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int ctl_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", ctl_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", ctl_progname);
	return CTL_EXIT_USAGE;
}
