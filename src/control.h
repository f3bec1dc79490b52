/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * control: the commands written to the `control` file: zram-like words,
 * named with their arguments in control_cmds.h's table.  A command that does not parse is refused with -EINVAL
 * before anything is changed.  Slow work (recompress, compact) is handed to
 * the policy thread: the write returns at once and never holds up swap.
 */
#ifndef ZSWAPFS_CONTROL_H
#define ZSWAPFS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control_cmds.h"
#include "policy.h"

/* A parsed command: op, and the fields of that op (the others are 0). */
struct control_req {
	enum control_op op;
	bool idle_all;				/* CONTROL_IDLE: `idle all` */
	uint32_t idle_secs;			/* CONTROL_IDLE: `idle SECONDS` */
	struct policy_request recomp;		/* CONTROL_RECOMPRESS */
	struct policy_request wb;		/* CONTROL_WRITEBACK */
};

/*
 * Parse one command line (a trailing newline is allowed) of len bytes, not
 * NUL-terminated.  Pure: no state is read or changed but *req.  0 and *req
 * filled, or -EINVAL with *req untouched.
 */
int control_parse(const char *text, size_t len, struct control_req *req);
/* Hand a parsed command to the policy thread.  0 or -errno (-EBUSY, ...). */
int control_exec(struct policy *pol, const struct control_req *req);
/* control_parse, then control_exec when it parsed. */
int control_run(struct policy *pol, const char *text, size_t len);

#endif
