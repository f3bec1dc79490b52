/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl_common: what every file of zswapctl shares, at the bottom: exit
 * codes and messages.  zswapctl.c holds the command table and main();
 * zswapctl_status.c the commands that read the stats file (status, stats,
 * top); zswapctl_swap.c swapon/swapoff; zswapctl_mounts.c finds mounts and
 * the loop devices on them.  They depend on the files below them and on the
 * daemon's header-only tables (stats_keys.h, control_cmds.h, codec.h's
 * CODEC_LIST), never on the daemon's code.
 */
#ifndef ZSWAPFS_ZSWAPCTL_COMMON_H
#define ZSWAPFS_ZSWAPCTL_COMMON_H

#define CTL_FSTYPE	"fuse.zswapfs"
#define CTL_EXIT_ERR	1
#define CTL_EXIT_USAGE	2
/* A command's answer to -h/--help: main() prints the help (from the command
 * table, above the commands) and exits 0. */
#define CTL_SHOW_HELP	(-1)
#define CTL_LOOPS_MAX	16
#define CTL_DEV_LEN	64

/* The program's name, as messages and the help print it. */
extern const char ctl_progname[];

/* Messages: "zswapctl: ..." on stderr; a usage error adds the --help hint
 * and returns CTL_EXIT_USAGE. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
