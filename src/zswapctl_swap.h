/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl_swap: swapon and swapoff of a mount's swap file.  Each takes its
 * argv from the command's name on, and returns the exit code or
 * CTL_SHOW_HELP.
 */
#ifndef ZSWAPFS_ZSWAPCTL_SWAP_H
#define ZSWAPFS_ZSWAPCTL_SWAP_H

int ctl_cmd_swapon(int argc, char **argv);
int ctl_cmd_swapoff(int argc, char **argv);

#endif
