/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * keeper_resume: the keeper after `restart keeper`, a new image of the
 * same process (keeper.h has the protocol).  It takes over what the old
 * image held (the state memfd and the segments it names, /dev/fuse, the
 * unmount helper and its pipe, the worker), lets the holder go, and
 * supervises; at the end it does what main() does after keeper_run().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "harden.h"
#include "keeper.h"
#include "log.h"
#include "memcg.h"
#include "shm.h"
#include "unmounter.h"

/* A number from argv that must be at least min. */
static int arg_int(const char *text, int min, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || *end || end == text || v < min || v > 0x7fffffff)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* This image cannot take the state over: run the old binary again. */
static void back_to_old(char **argv, int old_exe)
{
	char none[] = "-1";

	if (old_exe < 0)
		return;		/* the old binary's own second try failed too */
	argv[4] = none;		/* OLD_EXE_FD: no third try */
	fexecve(old_exe, argv - 2, environ);
	log_err("restart keeper: cannot execute the old binary again: %s", strerror(errno));
}

int keeper_resume_main(char **argv)
{
	struct unmounter um = { .pid = -1, .fd = -1 };
	struct shm_region shm = { .state_fd = -1 };
	struct keeper k = { .sigfd = -1 };
	struct shm_state *s;
	struct zs_config cfg;
	int state_fd, worker, holder, holder_fd, old_exe, ret, status, fuse_fd, no_ready = -1;
	bool background = false, unmount = false;
	char err[512];

	if (arg_int(argv[0], 3, &state_fd) || arg_int(argv[1], 2, &worker) ||
	    arg_int(argv[2], 2, &holder) || arg_int(argv[3], 3, &holder_fd) ||
	    arg_int(argv[4], -1, &old_exe)) {
		fprintf(stderr, "zswapfs: --keeper: bad arguments\n");
		return 1;
	}
	ret = shm_peek_config(state_fd, &cfg, &background);
	if (background && log_to_syslog())
		fprintf(stderr, "zswapfs: no syslog (/dev/log)\n");
	if (ret) {
		log_err("restart keeper: the state has another layout (%s): back to the old "
			"binary", strerror(-ret));
		back_to_old(argv, old_exe);
		goto hold_on;
	}
	if (harden_memory(cfg.lock_memory == ZS_LOCK_REQUIRED) ||
	    shm_attach(&shm, state_fd, harden_state()->memory_locked, err, sizeof(err))) {
		log_err("restart keeper: %s: back to the old binary", err);
		back_to_old(argv, old_exe);
		goto hold_on;
	}
	/* Attached: the holder may go. */
	close(holder_fd);
	while (waitpid(holder, &status, 0) < 0 && errno == EINTR)
		;
	if (old_exe >= 0)
		close(old_exe);
	s = shm.state;
	um.fd = s->unmount_fd;
	um.pid = s->unmount_pid;
	um.dev = (dev_t)s->mount_dev;
	um.armed = true;
	memcg_set_return(s->memcg_cgroup, s->memcg_origin, s->memcg_root);
	/* Exec made us dumpable again, and may have given back what the
	 * bounding set still allows: drop it all as the first image did. */
	harden_keep_for_exec();
	if (harden_drop_privileges())
		log_warn("restart keeper: privileges could not all be dropped");
	if (keeper_signals(&k)) {
		log_err("restart keeper: signalfd: %s", strerror(errno));
		goto hold_on;
	}
	k.shm = &shm;
	k.ready_fd = &no_ready;
	k.foreground = s->foreground;
	atomic_fetch_add(&s->keeper_upgrades, 1);
	log_info("restart keeper: now running %s; worker %u serves", s->exe,
		 atomic_load(&s->generation));
	ret = keeper_supervise(&k, worker, &unmount);
	fuse_fd = s->fuse_fd;
	shm_destroy(&shm);
	if (ret) {
		/* As main(): the connection ends with this process. */
		memcg_return();
		unmounter_stop(&um, false);
		log_stop();
		_exit(ret);
	}
	if (!keeper_connection_ended(fuse_fd))
		unmounter_stop(&um, true);
	memcg_return();
	unmounter_stop(&um, false);
	log_stop();
	return 0;

hold_on:
	/*
	 * Nothing to supervise with: the worker serves on, and the holder
	 * keeps the segments while we wait for it.  Its end is the mount's.
	 */
	while (waitpid(worker, &status, 0) < 0 && errno == EINTR)
		;
	log_err("restart keeper: the worker ended; so does the connection");
	_exit(1);
}
