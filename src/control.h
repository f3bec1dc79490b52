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

struct dicttrain;

/* The longest command line, and so the longest PATH of `dict save`. */
#define CONTROL_MAX_LEN		256

/* A parsed command: op, and the fields of that op (the others are 0). */
struct control_req {
	enum control_op op;
	bool idle_all;				/* CONTROL_IDLE: `idle all` */
	uint32_t idle_secs;			/* CONTROL_IDLE: `idle SECONDS` */
	struct policy_request recomp;		/* CONTROL_RECOMPRESS */
	struct policy_request wb;		/* CONTROL_WRITEBACK */
	char dict_path[CONTROL_MAX_LEN];	/* CONTROL_DICT: `dict save PATH`, absolute */
	bool restart_keeper;			/* CONTROL_RESTART: `restart keeper` */
};

/*
 * Parse one command line (a trailing newline is allowed) of len bytes, not
 * NUL-terminated.  Pure: no state is read or changed but *req.  0 and *req
 * filled, or -EINVAL with *req untouched.
 */
int control_parse(const char *text, size_t len, struct control_req *req);
/*
 * Hand a parsed command to the policy thread, or the dictionary thread
 * (train, dict: -EOPNOTSUPP when dt is NULL).  0 or -errno (-EBUSY, ...).
 * `dict save` waits for the file to be written (dicttrain_save).
 */
int control_exec(struct policy *pol, struct dicttrain *dt, const struct control_req *req);
/* What `restart` calls, with keeper true for `restart keeper` (from a
 * request thread: it must only set a flag and wake, or send a signal); 0 or
 * -errno.  NULL: `restart` fails with EOPNOTSUPP. */
void control_set_restart_hook(int (*fn)(void *arg, bool keeper), void *arg);
/* control_parse, then control_exec when it parsed. */
int control_run(struct policy *pol, struct dicttrain *dt, const char *text, size_t len);

#endif
