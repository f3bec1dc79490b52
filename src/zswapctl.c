/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl: the admin tool for zswapfs mounts, as zramctl is for zram.
 *
 * It stands alone on purpose: it talks to a mount only through the files the
 * daemon serves (MOUNT/stats, MOUNT/control) and to the system through
 * /proc, /sys and the usual tools (losetup, mkswap, swapon, swapoff), so it
 * works against any daemon version that keeps the user-facing contract.
 *
 * Exit codes: 0 success, 1 error, 2 usage.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "control_cmds.h"
#include "zswapctl_common.h"
#include "zswapctl_mounts.h"
#include "zswapctl_status.h"
#include "zswapctl_swap.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* The control command called NAME, or NULL. */
static const struct control_cmd_info *control_find(const char *name)
{
	int op;

	for (op = 0; op < CONTROL_OP_COUNT; op++)
		if (!strcmp(control_cmd_info(op)->name, name))
			return control_cmd_info(op);
	return NULL;
}

/* ---- control ------------------------------------------------------------- */

/* CMD ARG... written as one write, the daemon's unit of a command */
static int cmd_control(int argc, char **argv)
{
	const struct control_cmd_info *info = control_find(argv[0]);
	const char *cmd = info->name;
	int min_args = info->min_args, max_args = info->max_args;
	char mnt[PATH_MAX], path[PATH_MAX + 16], text[4096];
	size_t len;
	ssize_t n;
	int i, fd;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return CTL_SHOW_HELP;
	if (argc < 2)
		return ctl_usage_error("%s: MOUNT expected", cmd);
	if (argc - 2 < min_args || argc - 2 > max_args)
		return ctl_usage_error("%s: wrong number of arguments", cmd);
	len = (size_t)snprintf(text, sizeof(text), "%s", cmd);
	for (i = 2; i < argc && len < sizeof(text); i++) {
		char cwd[PATH_MAX];

		/* `dict save PATH`: the daemon's directory is /, not ours. */
		if (!strcmp(cmd, "dict") && i == 3 && argv[i][0] != '/') {
			if (!getcwd(cwd, sizeof(cwd))) {
				ctl_err("%s: cannot tell the current directory: %s", cmd,
					strerror(errno));
				return CTL_EXIT_ERR;
			}
			len += (size_t)snprintf(text + len, sizeof(text) - len, " %s/%s", cwd,
						argv[i]);
			continue;
		}
		len += (size_t)snprintf(text + len, sizeof(text) - len, " %s", argv[i]);
	}
	if (len >= sizeof(text))
		return ctl_usage_error("%s: command too long", cmd);
	if (ctl_mount_resolve(argv[1], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	snprintf(path, sizeof(path), "%s/control", mnt);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		ctl_err("%s: %s", path, strerror(errno));
		return CTL_EXIT_ERR;
	}
	do {
		n = write(fd, text, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		ctl_err("%s: '%s': %s", argv[1], text, strerror(errno));
		close(fd);
		return CTL_EXIT_ERR;
	}
	if ((size_t)n != len) {
		ctl_err("%s: '%s': short write", argv[1], text);
		close(fd);
		return CTL_EXIT_ERR;
	}
	if (close(fd)) {
		ctl_err("%s: '%s': %s", argv[1], text, strerror(errno));
		return CTL_EXIT_ERR;
	}
	return 0;
}

/*
 * restart MOUNT keeper: the daemon's keeper executes the binary on disk in
 * its place while the worker serves; wait (10 s at most) until it says so.
 */
static int restart_keeper(int argc, char **argv, const char *mnt)
{
	uint64_t before, now;
	int err, i, rc;

	err = ctl_keeper_upgrades(mnt, &before);
	if (err) {
		ctl_err("%s: %s", argv[1], err == -EOPNOTSUPP ? "this daemon cannot re-execute "
			"its keeper (a version before `restart keeper`)" : strerror(-err));
		return CTL_EXIT_ERR;
	}
	rc = cmd_control(argc, argv);
	if (rc)
		return rc;
	for (i = 0; i < 100; i++) {
		if (!ctl_keeper_upgrades(mnt, &now) && now > before) {
			printf("%s: the keeper runs the binary on disk\n", argv[1]);
			return 0;
		}
		usleep(100000);
	}
	ctl_err("%s: the keeper did not say it took over within 10 s (the daemon's log "
		"says why)", argv[1]);
	return CTL_EXIT_ERR;
}

/*
 * restart MOUNT: the daemon's worker answers what it has read and exits, and
 * its keeper starts a new one from the binary on disk; wait (30 s at most)
 * until a new worker serves, and say whether it was that one.
 */
static int cmd_restart(int argc, char **argv)
{
	uint64_t gen, up, re, gen2, up2, re2;
	char mnt[PATH_MAX];
	int err, i, rc;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return CTL_SHOW_HELP;
	if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "keeper")))
		return ctl_usage_error("restart: MOUNT [keeper] expected");
	if (ctl_mount_resolve(argv[1], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	if (argc == 3)
		return restart_keeper(argc, argv, mnt);
	err = ctl_worker_counts(mnt, &gen, &up, &re);
	if (err) {
		ctl_err("%s: %s", argv[1], err == -EOPNOTSUPP ? "this daemon cannot restart its "
			"worker (a version before zswapfs had a keeper)" : strerror(-err));
		return CTL_EXIT_ERR;
	}
	rc = cmd_control(argc, argv);
	if (rc)
		return rc;
	/* The stats are served by whichever worker serves: the next one. */
	for (i = 0; i < 300; i++) {
		if (!ctl_worker_counts(mnt, &gen2, &up2, &re2) && gen2 > gen) {
			if (up2 > up && re2 == re) {
				printf("%s: worker %llu serves (from the binary on disk)\n", argv[1],
				       (unsigned long long)gen2);
				return 0;
			}
			ctl_err("%s: the new worker did not take over (worker %llu serves; the "
				"daemon's log says why)", argv[1], (unsigned long long)gen2);
			return CTL_EXIT_ERR;
		}
		usleep(100000);
	}
	ctl_err("%s: no new worker serves after 30 s", argv[1]);
	return CTL_EXIT_ERR;
}

/*
 * The commands besides the control file's (control_cmds.h), in the order
 * help lists them: the name, what follows it in the usage line, and the
 * help (continuation lines indented as printed).
 */
static const struct ctl_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
	const char *help;
} ctl_cmds[] = {
	{ "status", ctl_cmd_status, "[-b] [-n] [MOUNT...]",
	  "a table of every zswapfs mount (the default)" },
	{ "swapon", ctl_cmd_swapon, "MOUNT [-p PRIORITY]",
	  "attach MOUNT/swap to a loop device (direct I/O),\n"
	  "                 mkswap it and turn it on as swap with --discard" },
	{ "swapoff", ctl_cmd_swapoff, "MOUNT", "turn that swap off and detach the loop device" },
	{ "stats", ctl_cmd_stats, "MOUNT [--json]", "print MOUNT/stats, or one JSON object" },
	{ "top", ctl_cmd_top, "MOUNT [-n COUNT] [-d SECONDS]",
	  "the key figures, refreshed every second" },
};

#define CTL_NCMDS (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

static void ctl_help(void)
{
	size_t i;
	int op;

	printf("Usage:\n");
	for (i = 0; i < CTL_NCMDS; i++)
		/* status is the default: its name may be left out */
		printf(i ? " %s %s %s\n" : " %s [%s] %s\n", ctl_progname, ctl_cmds[i].name,
		       ctl_cmds[i].usage);
	for (op = 0; op < CONTROL_OP_COUNT; op++) {
		const struct control_cmd_info *c = control_cmd_info(op);

		printf(" %s %s MOUNT%s%s\n", ctl_progname, c->name, *c->args ? " " : "", c->args);
	}
	printf("\n"
	       "Show and manage zswapfs mounts (compressed swap in RAM over FUSE).\n"
	       "\n"
	       "Commands:\n");
	for (i = 0; i < CTL_NCMDS; i++)
		printf(" %-15s %s\n", ctl_cmds[i].name, ctl_cmds[i].help);
	for (op = 0; op < CONTROL_OP_COUNT; op++)
		printf("%s%s", op ? ", " : " ", control_cmd_info(op)->name);
	printf("\n"
	       "                 write the command to MOUNT/control\n"
	       "\n"
	       "Options:\n"
	       " -b, --bytes         status: sizes in bytes\n"
	       " -n, --noheadings    status: no header line\n"
	       " -p, --priority N    swapon: swap priority (-1..32767)\n"
	       " -j, --json          stats: one JSON object\n"
	       " -n, --count N       top: stop after N refreshes\n"
	       " -d, --delay SECONDS top: time between refreshes (default 1)\n"
	       " -h, --help          this help\n"
	       " -V, --version       the version\n"
	       "\n"
	       "See zswapctl(8) and zswapfs(8).\n");
}

/* The command argv[0] of the table; a usage error when there is none. */
static int ctl_dispatch(int argc, char **argv)
{
	size_t i;

	for (i = 0; i < CTL_NCMDS; i++)
		if (!strcmp(argv[0], ctl_cmds[i].name))
			return ctl_cmds[i].run(argc, argv);
	return ctl_usage_error("unknown command '%s'", argv[0]);
}

int main(int argc, char **argv)
{
	int rc;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		ctl_help();
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("zswapctl %s\n", PACKAGE_VERSION);
		return 0;
	}
	/* no command, or options first: status, as zramctl */
	if (argc < 2 || argv[1][0] == '-')
		rc = ctl_cmd_status(argc, argv);
	else if (!strcmp(argv[1], "restart"))
		rc = cmd_restart(argc - 1, argv + 1);
	else if (control_find(argv[1]))
		rc = cmd_control(argc - 1, argv + 1);
	else
		rc = ctl_dispatch(argc - 1, argv + 1);
	if (rc == CTL_SHOW_HELP) {
		ctl_help();
		rc = 0;
	}
	return rc;
}
