/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * worker: the process that serves the mount's requests, started by the
 * keeper (keeper.h) as `zswapfs --worker STATE_FD`; see worker.c.
 */
#ifndef ZSWAPFS_WORKER_H
#define ZSWAPFS_WORKER_H

/* The worker's main(): returns its exit status (restart.h lists them). */
int worker_main(const char *state_fd);

#endif
