/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * control: the commands written to the `control` file, one table of
 * zram-like words.  A command that does not parse is refused with -EINVAL
 * before anything is changed.  Slow work (recompress, compact) is handed to
 * the policy thread: the write returns at once and never holds up swap.
 */
#ifndef ZSWAPFS_CONTROL_H
#define ZSWAPFS_CONTROL_H

#include <stddef.h>

struct policy;

/* Run one command line (a trailing newline is allowed).  0 or -errno. */
int control_run(struct policy *pol, const char *text, size_t len);

#endif
