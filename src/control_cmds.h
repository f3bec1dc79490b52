/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * control_cmds: the commands users write to a mount's `control` file, one
 * table.  control.c parses with it (each command's parse_<name> handler and
 * its word counts), zswapctl dispatches and prints its help from it, and
 * tests/docs.sh checks that zswapfs(8)'s CONTROL section describes each.
 * Header only: zswapctl links none of the daemon's modules.
 *
 * X(ID, name, min_args, max_args, args)
 *   ID        CONTROL_<ID>, the op of a parsed command (control.h);
 *   name      the first word;
 *   min_args, max_args  how many words may follow it;
 *   args      their grammar, as help and usage lines print it.
 */
#ifndef ZSWAPFS_CONTROL_CMDS_H
#define ZSWAPFS_CONTROL_CMDS_H

#define CONTROL_CMDS(X) \
	X(COMPACT, compact, 0, 0, "") \
	X(IDLE, idle, 1, 1, "all|SECONDS") \
	X(RECOMPRESS, recompress, 0, 4, \
	  "[type=idle|huge|huge_idle] [threshold=BYTES] [max_pages=N] [rate=RATE]") \
	X(WRITEBACK, writeback, 1, 2, "idle|huge|huge_idle|all [max_pages=N]") \
	X(TRAIN, train, 0, 0, "") \
	X(DICT, dict, 2, 2, "save PATH") \
	X(RESTART, restart, 0, 1, "[keeper]")

enum control_op {
#define CONTROL_CMD_ENUM(ID, name, min_args, max_args, args) CONTROL_##ID,
	CONTROL_CMDS(CONTROL_CMD_ENUM)
#undef CONTROL_CMD_ENUM
	CONTROL_OP_COUNT
};

struct control_cmd_info {
	const char *name;
	int min_args, max_args;
	const char *args;
};

/* The command of op `op` (< CONTROL_OP_COUNT). */
static inline const struct control_cmd_info *control_cmd_info(enum control_op op)
{
	static const struct control_cmd_info cmds[CONTROL_OP_COUNT] = {
#define CONTROL_CMD_ENTRY(ID, name, min_args, max_args, args) \
		[CONTROL_##ID] = { #name, min_args, max_args, args },
		CONTROL_CMDS(CONTROL_CMD_ENTRY)
#undef CONTROL_CMD_ENTRY
	};

	return &cmds[op];
}

#endif
