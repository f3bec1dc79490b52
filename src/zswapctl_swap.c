/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl swapon / swapoff: losetup (direct I/O), mkswap and swapon on a
 * mount's swap file, and back.  The tools are run, not reimplemented: they
 * explain their own failures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zswapctl_mounts.h"
#include "zswapctl_swap.h"

extern char **environ;

static int spawn_one(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		     char *const argv[])
{
	static const char *const dirs[] = { "/usr/sbin/", "/sbin/", NULL };
	char path[PATH_MAX];
	int i, r;

	r = posix_spawnp(pid, file, fa, NULL, argv, environ);
	/* root from su or cron may lack the sbin directories in PATH */
	for (i = 0; r == ENOENT && !strchr(file, '/') && dirs[i]; i++) {
		snprintf(path, sizeof(path), "%s%s", dirs[i], file);
		r = posix_spawn(pid, path, fa, NULL, argv, environ);
	}
	return r;
}

/*
 * Run ARGV and wait for it.  Its stdout goes to OUT (at most OUTLEN - 1
 * bytes, NUL-terminated) when OUT is set, to /dev/null when QUIET, else to
 * ours; stderr is always ours, so the tool explains its own failures.
 * Returns the exit status (128 + signal), or -1 if it could not be run.
 */
static int run(char *const argv[], char *out, size_t outlen, bool quiet)
{
	posix_spawn_file_actions_t fa;
	int pfd[2] = { -1, -1 };
	size_t got = 0;
	int r, status;
	pid_t pid;

	fflush(stdout);
	if (posix_spawn_file_actions_init(&fa)) {
		ctl_err("%s: %s", argv[0], strerror(ENOMEM));
		return -1;
	}
	if (out) {
		if (pipe2(pfd, O_CLOEXEC)) {
			ctl_err("pipe: %s", strerror(errno));
			posix_spawn_file_actions_destroy(&fa);
			return -1;
		}
		posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	} else if (quiet) {
		posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	}
	r = spawn_one(&pid, argv[0], &fa, argv);
	posix_spawn_file_actions_destroy(&fa);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (r) {
		ctl_err("cannot run %s: %s", argv[0], strerror(r));
		if (pfd[0] >= 0)
			close(pfd[0]);
		return -1;
	}
	if (out) {
		for (;;) {
			char sink[256];
			ssize_t n;

			if (got + 1 < outlen)
				n = read(pfd[0], out + got, outlen - 1 - got);
			else
				n = read(pfd[0], sink, sizeof(sink));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			if (got + 1 < outlen)
				got += (size_t)n;
		}
		out[got] = '\0';
		close(pfd[0]);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ctl_err("waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* run() and say which command failed; 0 or -1 */
static int run_checked(char *const argv[], char *out, size_t outlen, bool quiet)
{
	int r = run(argv, out, outlen, quiet);

	if (r < 0)
		return -1;
	if (r) {
		ctl_err("%s %s failed (exit status %d)", argv[0], argv[1] ? argv[1] : "", r);
		return -1;
	}
	return 0;
}

/*
 * Writeback throttling off on the new loop device (its queue's
 * wbt_lat_usec 0).  wbt limits the writes in flight to a device whose
 * writes are slower than a target (2 ms for a non-rotational one): through
 * loop and FUSE they are, and under whole-machine pressure every task in
 * direct reclaim, the daemon's reserve thread included, then waits in
 * wbt_wait (rq_qos_wait) for its turn to swap a page out to us, seconds
 * at a time (contrib/bench/squeeze.sh, thread states).  zram, a bio-based
 * device, has no such queue.  A kernel without wbt has no file: nothing to
 * do; any other failure is said and swapon goes on.
 */
static void loop_wbt_off(const char *dev)
{
	char path[CTL_DEV_LEN + 128];
	int fd;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/wbt_lat_usec", dev + 5);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			ctl_err("warning: %s: %s: writeback throttling stays on", path,
				strerror(errno));
		return;
	}
	if (write(fd, "0", 1) != 1)
		ctl_err("warning: %s: %s: writeback throttling stays on", path, strerror(errno));
	close(fd);
}

int ctl_cmd_swapon(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "priority", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char mnt[PATH_MAX], file[PATH_MAX + 8], dev[CTL_DEV_LEN + 64];
	char devs[CTL_LOOPS_MAX][CTL_DEV_LEN];
	const char *prio = NULL;
	int c, i, n;

	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < -1 || v > 32767)
				return ctl_usage_error("swapon: bad priority '%s' (-1..32767)",
						       optarg);
			prio = optarg;
			break;
		}
		case 'h':
			return CTL_SHOW_HELP;
		default:
			return ctl_usage_error("swapon: bad option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error("swapon: one MOUNT expected");
	if (geteuid() != 0) {
		ctl_err("swapon needs root");
		return CTL_EXIT_ERR;
	}
	if (ctl_mount_resolve(argv[optind], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	snprintf(file, sizeof(file), "%s/swap", mnt);
	n = ctl_loops_for(file, devs, CTL_LOOPS_MAX);
	for (i = 0; i < n; i++) {
		if (ctl_swap_active(devs[i])) {
			ctl_err("%s: already swapped on (%s)", argv[optind], devs[i]);
			return CTL_EXIT_ERR;
		}
	}

	/*
	 * Direct I/O: the loop driver then keeps no page cache copy of the pages
	 * swapped out (that would double the memory we exist to save), and it
	 * measured fastest.  512-byte sectors, the default.
	 */
	{
		char *const losetup[] = { "losetup", "--find", "--show", "--direct-io=on", file,
					  NULL };

		if (run_checked(losetup, dev, sizeof(dev), false))
			return CTL_EXIT_ERR;
	}
	dev[strcspn(dev, "\n")] = '\0';
	if (strncmp(dev, "/dev/", 5)) {
		ctl_err("losetup printed no device ('%s')", dev);
		return CTL_EXIT_ERR;
	}
	loop_wbt_off(dev);
	{
		char *const mkswap[] = { "mkswap", dev, NULL };

		if (run_checked(mkswap, NULL, 0, true))
			goto out_detach;
	}
	{
		/* --discard: freed swap slots then free the daemon's memory */
		char *const swapon[] = { "swapon", "--discard", dev, NULL };
		char *const swapon_p[] = { "swapon", "--discard", "--priority", (char *)prio, dev,
					   NULL };

		if (run_checked(prio ? swapon_p : swapon, NULL, 0, false))
			goto out_detach;
	}
	printf("%s\n", dev);
	return 0;

out_detach:
	{
		char *const detach[] = { "losetup", "-d", dev, NULL };

		run_checked(detach, NULL, 0, false);
	}
	return CTL_EXIT_ERR;
}

int ctl_cmd_swapoff(int argc, char **argv)
{
	char mnt[PATH_MAX], file[PATH_MAX + 8];
	char devs[CTL_LOOPS_MAX][CTL_DEV_LEN];
	int i, n, rc = 0;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		return CTL_SHOW_HELP;
	}
	if (argc != 2)
		return ctl_usage_error("swapoff: one MOUNT expected");
	if (geteuid() != 0) {
		ctl_err("swapoff needs root");
		return CTL_EXIT_ERR;
	}
	if (ctl_mount_resolve(argv[1], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	snprintf(file, sizeof(file), "%s/swap", mnt);
	n = ctl_loops_for(file, devs, CTL_LOOPS_MAX);
	if (!n) {
		ctl_err("%s: no loop device on %s", argv[1], file);
		return CTL_EXIT_ERR;
	}
	for (i = 0; i < n; i++) {
		char *const swapoff[] = { "swapoff", devs[i], NULL };
		char *const detach[] = { "losetup", "-d", devs[i], NULL };

		/* never detach a device the kernel still swaps to */
		if (ctl_swap_active(devs[i]) && run_checked(swapoff, NULL, 0, false)) {
			rc = CTL_EXIT_ERR;
			continue;
		}
		if (run_checked(detach, NULL, 0, false))
			rc = CTL_EXIT_ERR;
	}
	return rc;
}
