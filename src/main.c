/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapfs: start-up and shutdown.
 *
 *   zswapfs [SOURCE] MOUNTPOINT [-f] [-d] [-c CONFIG] [-o opt[,opt...]]
 *
 * SOURCE is what fstab's first field passes: a config file path, or a word
 * such as "zswapfs"; it names the mount and is never read as options.
 * Settings come from the built-in defaults, then the config file (-c, or
 * SOURCE when it is a path), then -o options; -o options that are not
 * settings go to FUSE (allow_other only with stats_group, see ACCESS in
 * zswapfs(8)).
 *
 * Start-up, in order: malloc's set-up for the request path (reserve.h);
 * options and settings; the fork to the background (the parent waits for
 * the child to be ready and exits with its status); privileged_startup()
 * (out from under a memory cgroup limit: before anything big is allocated);
 * the unmount helper (unmounter.h), forked while nothing secret exists;
 * FUSE session, mount; hardening (mlockall); the memory that outlives a
 * worker (shm.h) and the backing file (opened here, while the privileges its
 * checks need are ours); the drop of every privilege left; then this process
 * is the keeper (keeper.h), which starts the worker that serves (worker.h:
 * the page store, the threads).  `zswapfs --worker FD` is how
 * the keeper starts a worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "backing_file.h"
#include "codec.h"
#include "config.h"
#include "fs.h"
#include "harden.h"
#include "keeper.h"
#include "log.h"
#include "memcg.h"
#include "reserve.h"
#include "shm.h"
#include "transport.h"
#include "unmounter.h"
#include "worker.h"

struct cmdline {
	const char *source;
	char *mountpoint;		/* malloc'ed by realpath */
	const char *config_file;
	bool foreground;
	bool debug;
	bool allow_other;		/* -o allow_other: needs stats_group */
	/* -o key=value pairs that are settings, applied after the file. */
	char *settings[64];
	int nr_settings;
	/* everything else, for FUSE */
	struct fuse_args fuse_args;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: zswapfs [SOURCE] MOUNTPOINT [-f] [-d] [-c CONFIG] [-o opt[,opt...]]\n"
		"\n"
		"Presents MOUNTPOINT/swap, a swap file whose pages are kept compressed in\n"
		"RAM, with MOUNTPOINT/stats and MOUNTPOINT/control.\n"
		"\n"
		"    -f              stay in the foreground\n"
		"    -d              foreground, with FUSE debug output\n"
		"    -c CONFIG       read settings from CONFIG (libconfig syntax)\n"
		"    -o key=value    a setting (overrides the config file), or a FUSE option\n"
		"    -h, --help      this text\n"
		"    -V, --version   the version\n\n");
	config_print_help(out);
	fprintf(out, "\nAlgorithms: %s\n", codec_names());
}

/* Split one -o argument on commas; settings are kept for later, the rest
 * is passed to FUSE.  Returns 0 or -EINVAL with a message. */
static int take_options(struct cmdline *cl, const char *arg)
{
	char *copy = strdup(arg), *save, *opt;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (opt = strtok_r(copy, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		size_t keylen = eq ? (size_t)(eq - opt) : strlen(opt);
		char key[128];

		if (keylen >= sizeof(key))
			keylen = sizeof(key) - 1;
		memcpy(key, opt, keylen);
		key[keylen] = '\0';
		if (config_has_key(key)) {
			if (!eq) {
				fprintf(stderr, "zswapfs: mount option: %s needs a value "
					"(%s=VALUE)\n", key, key);
				err = -EINVAL;
				break;
			}
			if (cl->nr_settings == (int)(sizeof(cl->settings) / sizeof(cl->settings[0]))) {
				fprintf(stderr, "zswapfs: too many options\n");
				err = -EINVAL;
				break;
			}
			cl->settings[cl->nr_settings++] = strdup(opt);
		} else if (!strcmp(key, "defaults") || !strcmp(key, "auto") ||
			   !strcmp(key, "noauto") || !strcmp(key, "nofail") ||
			   !strncmp(key, "x-", 2) || !strncmp(key, "comment=", 8)) {
			/* fstab words that mount.fuse3 may leave in place. */
		} else if (!strcmp(opt, "allow_other")) {
			/* added once stats_group is known (check_access) */
			cl->allow_other = true;
		} else if (!strcmp(opt, "allow_root")) {
			fprintf(stderr, "zswapfs: allow_root: the mount is root's already, and "
				"nobody else may read its swap or control; to let a group "
				"read stats, use allow_other,stats_group=GROUP\n");
			err = -EINVAL;
			break;
		} else if (!strcmp(opt, "default_permissions")) {
			/* always on: build_fuse_args */
		} else {
			char buf[256];

			snprintf(buf, sizeof(buf), "-o%s", opt);
			fuse_opt_add_arg(&cl->fuse_args, buf);
		}
	}
	free(copy);
	return err;
}

static int parse_cmdline(struct cmdline *cl, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *nonopt[2];
	int nr_nonopt = 0, c;

	memset(cl, 0, sizeof(*cl));
	fuse_opt_add_arg(&cl->fuse_args, argv[0]);
	/* GNU getopt permutes: options may stand before or after the
	 * operands, as mount.fuse3 puts them last and users anywhere. */
	while ((c = getopt_long(argc, argv, "fdc:o:hVs", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			cl->foreground = true;
			break;
		case 'd':
			cl->foreground = cl->debug = true;
			fuse_opt_add_arg(&cl->fuse_args, "-odebug");
			break;
		case 's':
			/* fusermount's single-thread flag: ours is the threads setting */
			break;
		case 'c':
			cl->config_file = optarg;
			break;
		case 'o':
			if (take_options(cl, optarg))
				return -EINVAL;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("zswapfs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	for (; optind < argc; optind++) {
		if (nr_nonopt == 2) {
			fprintf(stderr, "zswapfs: unexpected argument '%s'\n", argv[optind]);
			return -EINVAL;
		}
		nonopt[nr_nonopt++] = argv[optind];
	}
	if (nr_nonopt == 0) {
		fprintf(stderr, "zswapfs: no mount point given\n");
		usage(stderr);
		return -EINVAL;
	}
	/* Absolute: libfuse's daemonize changes to / before we unmount. */
	cl->mountpoint = realpath(nonopt[nr_nonopt - 1], NULL);
	if (!cl->mountpoint) {
		fprintf(stderr, "zswapfs: mount point %s: %s\n", nonopt[nr_nonopt - 1],
			strerror(errno));
		return -EINVAL;
	}
	if (nr_nonopt == 2)
		cl->source = nonopt[0];
	/* A SOURCE that is a path, or names an existing file, is the config
	 * file (fstab's first field); a plain word such as "zswapfs" is not. */
	if (!cl->config_file && cl->source &&
	    (strchr(cl->source, '/') || access(cl->source, F_OK) == 0))
		cl->config_file = cl->source;
	return 0;
}

/*
 * Others may reach the mount only through allow_other, and then only
 * `stats`, only for one group: without a group named, allow_other is
 * refused rather than left to mean more than it says.
 */
static int check_access(const struct cmdline *cl, const struct zs_config *cfg)
{
	if (cl->allow_other && cfg->stats_group.gid < 0) {
		fprintf(stderr, "zswapfs: allow_other lets other users into the mount; of its "
			"files only stats is ever shown to them, and only to one group: "
			"name it with stats_group=GROUP (a group name or number, as a mount "
			"option or in the configuration file), or leave allow_other out\n");
		return -EINVAL;
	}
	if (!cl->allow_other && cfg->stats_group.gid >= 0)
		fprintf(stderr, "zswapfs: warning: stats_group=%s has no effect without "
			"allow_other: only root reaches the mount\n", cfg->stats_group.name);
	return 0;
}

/*
 * FUSE's own options: the mount's name, default_permissions always (the
 * kernel then checks the files' modes: swap 0600 and control 0200, root's),
 * and allow_other when check_access let it through.
 *
 * SOURCE names the mount (fsname).  libfuse splits an -o argument at commas
 * and reads a backslash as an escape, so `zswapfs 'z,allow_other' MNT` would
 * turn into an option: commas and backslashes are escaped, so that SOURCE
 * stays one name, whatever path or word it is (a config file's path may
 * hold a comma; refusing it would refuse a file the user can read).  Control
 * characters are refused: no path or word needs them, and the name shows in
 * mount tables and logs.
 */
static int build_fuse_args(struct cmdline *cl)
{
	const char *src = cl->source ? cl->source : "zswapfs", *p;
	char *arg, *d;
	int err = 0;

	for (p = src; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			fprintf(stderr, "zswapfs: SOURCE holds a control character: give a "
				"configuration file's path or a plain word\n");
			return -EINVAL;
		}
	}
	arg = malloc(2 * strlen(src) + sizeof("-ofsname=,subtype=zswapfs"));
	if (!arg)
		return -ENOMEM;
	d = arg + sprintf(arg, "-ofsname=");
	for (p = src; *p; p++) {
		if (*p == ',' || *p == '\\')
			*d++ = '\\';
		*d++ = *p;
	}
	strcpy(d, ",subtype=zswapfs");
	if (fuse_opt_add_arg(&cl->fuse_args, arg) ||
	    fuse_opt_add_arg(&cl->fuse_args, "-odefault_permissions") ||
	    (cl->allow_other && fuse_opt_add_arg(&cl->fuse_args, "-oallow_other")))
		err = -ENOMEM;
	free(arg);
	return err;
}

static int load_settings(struct zs_config *cfg, const struct cmdline *cl)
{
	char err[512];
	int i;

	config_defaults(cfg);
	if (cl->config_file && config_load_file(cfg, cl->config_file, err, sizeof(err)))
		goto out_err;
	for (i = 0; i < cl->nr_settings; i++) {
		char *opt = cl->settings[i], *eq = strchr(opt, '=');

		*eq = '\0';
		if (config_set(cfg, opt, eq + 1, "mount option", err, sizeof(err)))
			goto out_err;
		*eq = '=';
	}
	if (config_validate(cfg, err, sizeof(err)))
		goto out_err;
	return 0;
out_err:
	fprintf(stderr, "zswapfs: %s\n", err);
	return -EINVAL;
}

/*
 * Make sure descriptors 0, 1 and 2 are open (on /dev/null if they were
 * closed), so that no file we open later is taken for one of them.
 */
static void sanitize_stdio(void)
{
	int fd;

	while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= STDERR_FILENO)
		fcntl(fd, F_SETFD, 0);
	if (fd > STDERR_FILENO)
		close(fd);
}

/*
 * Go to the background.  The parent waits until the child is ready (mounted,
 * hardened, serving) and exits with its status, so that mount(8), systemd
 * and scripts learn of a refusal that comes after the fork, such as
 * lock_memory=required; libfuse's fuse_daemonize lets the parent exit 0 as
 * soon as it has forked.  The child gets a session of its own.
 */
static int daemon_fork(int *ready_fd)
{
	int p[2], err;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid > 0) {
		unsigned char status;
		ssize_t n;

		close(p[1]);
		do
			n = read(p[0], &status, 1);
		while (n < 0 && errno == EINTR);
		/* _exit: the child owns everything the parent allocated */
		_exit(n == 1 ? status : 1);
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}

/* Whether stderr is the journal (systemd sets JOURNAL_STREAM to its
 * device:inode): a detached daemon then keeps logging there. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && !fstat(STDERR_FILENO, &st) &&
	       (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/*
 * Out from under a memory cgroup limit, or refuse, as the memcg setting
 * says (memcg.h).  -1 after a message.
 */
static int leave_memcg(const struct zs_params *p)
{
	struct sysinfo si;
	char err[1024];

	if (sysinfo(&si))
		si.totalram = 0, si.mem_unit = 1;
	if (memcg_apply(NULL, p->memcg, (uint64_t)si.totalram * si.mem_unit, err,
			sizeof(err))) {
		fprintf(stderr, "zswapfs: %s\n", err);
		return -1;
	}
	return 0;
}

/*
 * Start-up steps that need privilege go here.  They run in the daemon's
 * own process (after the fork to the background), before anything big is
 * allocated or locked: what is charged to a memory cgroup stays charged
 * there when we move out of it, and the memory cgroup move is one of them.
 * Hence also before the unmount helper is forked (it removes the cgroup
 * made here once the daemon has ended, which the daemon, without
 * privileges by then, may not: memcg.h) and before the mount, so that a
 * refusal leaves nothing mounted.  Still long before
 * harden_drop_privileges() takes every capability away, and before any
 * thread exists.  Return 0, or -1 after a message: start-up then fails.
 */
static int privileged_startup(const struct zs_params *p)
{
	return leave_memcg(p);
}

/* The binary on disk that workers run: this one's path, read now (an
 * upgrade replaces the file; /proc/self/exe would stay the old one). */
static int own_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n <= 0 || (size_t)n >= len - 1)
		return -1;
	buf[n] = '\0';
	return 0;
}

/*
 * The keeper's end is the backing file's: truncated to its header (no
 * swapped memory stays on the disk) and closed, its key wiped by
 * shm_destroy().  A worker's end, killed or for `restart`, leaves both.
 */
static void end_backing(struct shm_region *r)
{
	if (!r->state || r->state->backing_fd < 0)
		return;
	backing_file_close(r->state->backing_fd);
	r->state->backing_fd = -1;
}

/* The keeper's state, for the workers (shm.h). */
static void fill_state(struct shm_state *s, const struct cmdline *cl, const struct zs_config *cfg,
		       struct fuse_session *se, const struct unmounter *um, int ready_fd,
		       bool journal)
{
	struct memcg_report mr;

	snprintf(s->mountpoint, sizeof(s->mountpoint), "%s", cl->mountpoint);
	s->allow_other = cl->allow_other;
	s->debug = cl->debug;
	s->foreground = cl->foreground;
	s->journal = journal;
	s->restart_safe = cfg->worker_restart;
	s->fuse_fd = fuse_session_fd(se);
	s->unmount_fd = um->fd;
	s->unmount_pid = um->pid;
	s->keeper_pid = getpid();
	s->mount_dev = (uint64_t)um->dev;
	s->ready_fd = ready_fd;
	memcg_get_report(&mr);
	snprintf(s->memcg_state, sizeof(s->memcg_state), "%s", mr.state);
	s->memcg_limit = mr.limit;
	snprintf(s->memcg_cgroup, sizeof(s->memcg_cgroup), "%s", mr.cgroup);
	memcg_get_return(s->memcg_origin, s->memcg_root);
}

int main(int argc, char **argv)
{
	struct unmounter um = { .pid = -1, .fd = -1 };
	struct keeper k = { .sigfd = -1 };
	struct shm_region shm = { .state_fd = -1 };
	struct zs_params par;
	struct fuse_session *se;
	struct zs_config cfg;
	struct cmdline cl;
	bool journal = false, privileged = true, unmount = true;
	char err[512];
	int i, ret = 1, ready_fd = -1;

	/* Before anything is allocated: the heap the request path takes from. */
	reserve_setup_malloc();
	sanitize_stdio();
	if (argc == 3 && !strcmp(argv[1], "--worker"))
		return worker_main(argv[2]);
	if (argc == 7 && !strcmp(argv[1], "--keeper"))
		return keeper_resume_main(argv + 2);
	if (argc == 2 && !strcmp(argv[1], "--layout")) {
		/* What a keeper asks before it executes this binary (keeper.h). */
		printf("%u %zu\n", SHM_VERSION, sizeof(struct shm_state));
		return 0;
	}
	if (parse_cmdline(&cl, argc, argv) || load_settings(&cfg, &cl) ||
	    check_access(&cl, &cfg) || build_fuse_args(&cl))
		goto out_args;
	if (cfg.worker_restart && cfg.fuse_uring)
		cfg.fuse_uring = false;	/* not restart-safe: keeper.h */
	config_params(&cfg, &par);
	/* Settings are read: nothing is looked up by a relative path from
	 * here on (the mount point and the backing file are absolute). */
	if (chdir("/")) {
		fprintf(stderr, "zswapfs: chdir /: %s\n", strerror(errno));
		goto out_args;
	}
	if (!cl.foreground) {
		int e = daemon_fork(&ready_fd);

		if (e) {
			fprintf(stderr, "zswapfs: fork: %s\n", strerror(-e));
			goto out_args;
		}
		journal = stderr_is_journal();
	}
	if (privileged_startup(&par))
		goto out_args;
	i = unmounter_start(&um, cl.mountpoint, !cl.foreground && !journal);
	if (i) {
		fprintf(stderr, "zswapfs: cannot start the unmount helper: %s\n", strerror(-i));
		goto out_args;
	}

	/* The keeper: it mounts, holds, and starts workers (keeper.h). */
	se = fuse_session_new(&cl.fuse_args, &fs_ops, sizeof(fs_ops), NULL);
	if (!se)	/* libfuse has said which option it did not know */
		goto out_helper;
	if (keeper_signals(&k))
		goto out_session;
	if (fuse_session_mount(se, cl.mountpoint))
		goto out_session;
	i = unmounter_arm(&um, cl.mountpoint);
	if (i) {
		log_err("cannot find the new mount in /proc/self/mountinfo: %s", strerror(-i));
		goto out_unmount;
	}
	if (harden_memory(par.lock_memory_required))
		goto out_unmount;
	/* Locked segments need CAP_IPC_LOCK: before the privileges go. */
	if (shm_create(&shm, &cfg, cfg.lock_memory == ZS_LOCK_REQUIRED,
		       harden_state()->memory_locked, err, sizeof(err))) {
		log_err("%s", err);
		goto out_unmount;
	}
	fill_state(shm.state, &cl, &cfg, se, &um, ready_fd, journal);
	/* With the privileges its checks may need; held for every worker. */
	if (par.backing_path) {
		i = backing_file_open(par.backing_path, err, sizeof(err));
		if (i < 0) {
			log_err("%s", err);
			goto out_shm;
		}
		shm.state->backing_fd = i;
	}
	if (own_path(shm.state->exe, sizeof(shm.state->exe))) {
		log_err("cannot read /proc/self/exe: %s", strerror(errno));
		goto out_shm;
	}
	/* Still privileged (a negative value needs CAP_SYS_NICE): every
	 * worker inherits it from here, and so do its request threads. */
	i = transport_set_nice(par.request_nice);
	if (i)
		log_warn("request_nice %d: %s: requests run at nice %d", par.request_nice,
			 strerror(-i), getpriority(PRIO_PROCESS, 0));
	privileged = false;
	harden_keep_for_exec();
	if (harden_drop_privileges())
		goto out_shm;
	log_info("privileges dropped: capabilities kept: %s", harden_state()->caps_text);
	k.shm = &shm;
	k.ready_fd = &ready_fd;
	k.foreground = cl.foreground;
	ret = keeper_run(&k, &unmount);
	if (ret && !unmount) {
		/* A worker died and could not be replaced: end as the daemon's
		 * death did.  The exit closes /dev/fuse, which ends the
		 * connection; the mount stays until an umount (libfuse's clean-up
		 * would try one, and fail without privileges); the helper,
		 * once its pipe closes, removes our memory cgroup. */
		end_backing(&shm);
		shm_destroy(&shm);
		memcg_return();
		unmounter_stop(&um, false);
		log_stop();
		_exit(ret);
	}
out_shm:
	end_backing(&shm);
	shm_destroy(&shm);
out_unmount:
	/* Without privileges the helper unmounts (nothing serves the mount
	 * now, and a fuse mount's unmount asks nothing of the daemon); then
	 * libfuse finds the connection ended and only closes its descriptor. */
	if (!privileged && !keeper_connection_ended(fuse_session_fd(se)))
		unmounter_stop(&um, true);
	fuse_session_unmount(se);
out_session:
	fuse_session_destroy(se);
out_helper:
	/* Out of our own memory cgroup, if we made one, so that the helper
	 * can remove it once we close its pipe. */
	memcg_return();
	unmounter_stop(&um, false);
out_args:
	/* Without the helper (it failed to start, or died), or with privileges
	 * still, remove it ourselves if we may. */
	memcg_restore();
	log_stop();
	for (i = 0; i < cl.nr_settings; i++)
		free(cl.settings[i]);
	free(cl.mountpoint);
	fuse_opt_free_args(&cl.fuse_args);
	return ret;
}
