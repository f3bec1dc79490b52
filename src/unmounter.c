/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "memcg.h"
#include "mountinfo.h"
#include "unmounter.h"

/*
 * How long the helper waits for the daemon's memory cgroup to empty once the
 * pipe has closed: a daemon that was killed closes its files before its
 * threads leave the cgroup, microseconds apart; one that exits moves out
 * first.
 */
#define HELPER_CGROUP_WAIT_MS	5000u

/* One message on the pipe; a pipe write this small is atomic. */
struct unmounter_msg {
	uint64_t dev;
	char op;		/* 'U': unmount, lazily if busy; 'u': only if not busy */
	char pad[7];
};

/*
 * The device of the topmost mount on `mnt`, from /proc/self/mountinfo.  Not
 * stat(): that would ask our own file system, which may not be serving.
 * 0, or -ENOENT when nothing is mounted there.
 */
static int mount_dev(const char *mnt, dev_t *dev)
{
	char *line = NULL;
	size_t cap = 0;
	int err = -ENOENT;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned int maj, min;
		char path[4096];

		/* id parent maj:min root mountpoint ... */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, path) != 3)
			continue;
		mountinfo_unescape(path);
		if (!strcmp(path, mnt)) {
			*dev = makedev(maj, min);
			err = 0;	/* the last one is the top */
		}
	}
	free(line);
	fclose(f);
	return err;
}

static void do_unmount(const char *mnt, dev_t want, bool lazy)
{
	dev_t dev;

	if (mount_dev(mnt, &dev) || dev != want) {
		log_info("%s is no longer our mount: nothing unmounted", mnt);
		return;
	}
	if (!umount2(mnt, UMOUNT_NOFOLLOW))
		return;
	if (errno != EBUSY || !lazy) {
		log_err("cannot unmount %s: %s", mnt, strerror(errno));
		return;
	}
	log_warn("%s is busy (a process has a file or its working directory there): "
		 "detached now, the daemon ends when the last user lets go", mnt);
	if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW))
		log_err("cannot detach %s: %s", mnt, strerror(errno));
}

/*
 * Keep CAP_SYS_ADMIN (umount2) and nothing else; and CAP_DAC_OVERRIDE when
 * there is a memory cgroup to remove (its parent may be the hierarchy's
 * root, mode 0555: memcg.h).  Only what we have: asking for more would make
 * the whole drop fail.
 */
static void helper_drop(bool cgroup)
{
	bool admin, dac;

	capng_get_caps_process();
	admin = capng_have_capability(CAPNG_PERMITTED, CAP_SYS_ADMIN);
	dac = cgroup && capng_have_capability(CAPNG_PERMITTED, CAP_DAC_OVERRIDE);
	capng_clear(CAPNG_SELECT_ALL);
	if (admin)
		capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
			     CAP_SYS_ADMIN);
	if (dac)
		capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
			     CAP_DAC_OVERRIDE);
	capng_apply(CAPNG_SELECT_ALL);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static void __attribute__((noreturn)) helper_main(int rfd, const char *mnt, bool quiet)
{
	struct sigaction sa;
	bool cgroup;
	int fd, sig;

	prctl(PR_SET_NAME, "zswapfs-umount", 0, 0, 0);
	/* A stop signal is for the daemon, which asks us; systemd and a
	 * terminal's ^C signal every process of the group. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	for (sig = 1; sig < NSIG; sig++)
		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGPIPE)
			sigaction(sig, &sa, NULL);
	/* Nothing of the daemon's but the pipe (3) and standard streams. */
	fd = fcntl(rfd, F_DUPFD, 3);
	if (fd < 0)
		_exit(1);
	if (fd != 3) {
		if (dup2(fd, 3) < 0)
			_exit(1);
	}
	close_range(4, ~0u, 0);
	if (quiet) {
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			if (fd > 3)
				close(fd);
		}
		log_quiet_stderr();
		log_to_syslog();
	}
	/* The daemon's own memory cgroup (memcg.h) is ours to remove once the
	 * daemon has ended: we must not be in it then. */
	cgroup = memcg_made() && !memcg_return();
	helper_drop(cgroup);
	for (;;) {
		struct unmounter_msg m;
		ssize_t n = read(3, &m, sizeof(m));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(m)) {
			/* the daemon is gone: so are we */
			if (cgroup)
				memcg_remove(HELPER_CGROUP_WAIT_MS);
			_exit(0);
		}
		if (m.op == 'U' || m.op == 'u')
			do_unmount(mnt, (dev_t)m.dev, m.op == 'U');
	}
}

int unmounter_start(struct unmounter *u, const char *mountpoint, bool quiet)
{
	int p[2], err;
	pid_t pid;

	u->pid = -1;
	u->fd = -1;
	u->armed = false;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid == 0) {
		close(p[1]);
		helper_main(p[0], mountpoint, quiet);
	}
	close(p[0]);
	u->pid = pid;
	u->fd = p[1];
	return 0;
}

int unmounter_arm(struct unmounter *u, const char *mountpoint)
{
	int err = mount_dev(mountpoint, &u->dev);

	u->armed = !err;
	return err;
}

static void send_msg(struct unmounter *u, char op)
{
	struct unmounter_msg m = { .dev = (uint64_t)u->dev, .op = op };
	ssize_t n;

	if (u->fd < 0 || !u->armed)
		return;
	do
		n = write(u->fd, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
}

void unmounter_request(struct unmounter *u)
{
	send_msg(u, 'U');
}

void unmounter_stop(struct unmounter *u, bool unmount)
{
	int status;

	if (u->fd < 0)
		return;
	/* Not lazily: a mount still busy here may be under a loop device,
	 * and must not vanish from sight. */
	if (unmount)
		send_msg(u, 'u');
	/* The helper reads the request before it sees the end of the pipe. */
	close(u->fd);
	u->fd = -1;
	while (waitpid(u->pid, &status, 0) < 0 && errno == EINTR)
		;
	u->pid = -1;
}
