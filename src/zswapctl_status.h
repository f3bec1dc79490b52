/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl_status: the commands that read a mount's stats file.  Each
 * takes its argv from the command's name on, and returns the exit code or
 * CTL_SHOW_HELP.
 */
#ifndef ZSWAPFS_ZSWAPCTL_STATUS_H
#define ZSWAPFS_ZSWAPCTL_STATUS_H

int ctl_cmd_status(int argc, char **argv);
int ctl_cmd_stats(int argc, char **argv);
int ctl_cmd_top(int argc, char **argv);

#endif
