/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl_status: the commands that read a mount's stats file.  Each
 * takes its argv from the command's name on, and returns the exit code or
 * CTL_SHOW_HELP.
 */
#ifndef ZSWAPFS_ZSWAPCTL_STATUS_H
#define ZSWAPFS_ZSWAPCTL_STATUS_H

#include <stdint.h>

int ctl_cmd_status(int argc, char **argv);
int ctl_cmd_stats(int argc, char **argv);
int ctl_cmd_top(int argc, char **argv);
/* worker_generation, worker_upgrades and worker_restarts of MOUNT's stats;
 * -EOPNOTSUPP from a daemon without a keeper. */
int ctl_worker_counts(const char *mnt, uint64_t *gen, uint64_t *upgrades, uint64_t *restarts);
/* The keeper's re-executions (stats keeper_upgrades); -EOPNOTSUPP: none kept. */
int ctl_keeper_upgrades(const char *mnt, uint64_t *upgrades);

#endif
