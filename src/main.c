/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapfs: start-up and shutdown.
 *
 *   zswapfs [SOURCE] MOUNTPOINT [-f] [-d] [-c CONFIG] [-o opt[,opt...]]
 *
 * SOURCE is what fstab's first field passes: a config file path, or a word
 * such as "zswapfs".  Settings come from the built-in defaults, then the
 * config file (-c, or SOURCE when it is a path), then -o options; -o options
 * that are not settings go to FUSE (fsname, allow_other, ...).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "backing.h"
#include "codec.h"
#include "config.h"
#include "fs.h"
#include "harden.h"
#include "log.h"
#include "memcg.h"
#include "policy.h"
#include "reserve.h"
#include "stats.h"
#include "store.h"

struct cmdline {
	const char *source;
	char *mountpoint;		/* malloc'ed by realpath */
	const char *config_file;
	bool foreground;
	bool debug;
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

/* The store's make-room hook: writeback, done by the policy thread. */
static int make_room(void *policy)
{
	return policy_make_room(policy);
}

/*
 * Out from under a memory cgroup limit, or refuse, as the memcg setting
 * says (memcg.h).  Before anything big is allocated, so that it is charged
 * where we end up, and before any thread exists.  -1 after a message.
 */
static int leave_memcg(const struct zs_config *cfg)
{
	enum memcg_mode mode = MEMCG_MOVE;
	struct sysinfo si;
	char err[1024];

	memcg_mode_parse(cfg->memcg, &mode);	/* the setting's table checked the word */
	if (sysinfo(&si))
		si.totalram = 0, si.mem_unit = 1;
	if (memcg_apply(NULL, mode, (uint64_t)si.totalram * si.mem_unit, err, sizeof(err))) {
		fprintf(stderr, "zswapfs: %s\n", err);
		return -1;
	}
	return 0;
}

/* Open the backing file, or NULL with nothing to open; -1 after a message. */
static int open_backing(const struct zs_config *cfg, struct backing **out)
{
	uint64_t max = cfg->writeback_max_size ? cfg->writeback_max_size : cfg->size;
	char err[512];

	*out = NULL;
	if (!cfg->writeback_backing_file[0])
		return 0;
	if (max < BACKING_SEG_SIZE)
		max = BACKING_SEG_SIZE;
	*out = backing_open(cfg->writeback_backing_file, max, err, sizeof(err));
	if (!*out) {
		fprintf(stderr, "zswapfs: %s\n", err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct reserve_config rcfg;
	struct policy_config pcfg;
	struct reserve *reserve;
	struct backing *backing;
	struct store_params sp;
	struct fuse_session *se;
	struct zs_config cfg;
	struct cmdline cl;
	struct store *st;
	struct fs fs;
	char fsname[300];
	int err, i, ret = 1;

	/* Before anything is allocated: the heap the request path takes from. */
	reserve_setup_malloc();
	if (parse_cmdline(&cl, argc, argv) || load_settings(&cfg, &cl) || leave_memcg(&cfg))
		goto out_args;

	snprintf(fsname, sizeof(fsname), "-ofsname=%s,subtype=zswapfs",
		 cl.source ? cl.source : "zswapfs");
	fuse_opt_add_arg(&cl.fuse_args, fsname);

	sp.size = cfg.size;
	sp.codec = codec_find(cfg.algorithm);
	sp.level = (int)cfg.level;
	sp.mem_limit = cfg.mem_limit;
	sp.recomp_codec = codec_find(cfg.recompress_algorithm);
	sp.recomp_level = (int)cfg.recompress_level;
	if (open_backing(&cfg, &backing))
		goto out_args;
	/* A discard on a request thread must not punch the file (backing.h). */
	if (backing)
		backing_defer_punch(backing);
	sp.backing = backing;
	sp.promote = cfg.writeback_promote;
	st = store_create(&sp);
	if (!st) {
		fprintf(stderr, "zswapfs: cannot create the page store: %s\n", strerror(errno));
		goto out_backing;
	}
	err = fs_init(&fs, st, (unsigned int)cfg.threads, (unsigned int)cfg.busy_poll_us);
	if (err) {
		fprintf(stderr, "zswapfs: %s\n", strerror(-err));
		goto out_store;
	}
	se = fuse_session_new(&cl.fuse_args, &fs_ops, sizeof(fs_ops), &fs);
	if (!se)	/* libfuse has said which option it did not know */
		goto out_fs;
	if (fs_install_signal_handlers(&fs))
		goto out_session;
	if (fuse_session_mount(se, cl.mountpoint))
		goto out_session;
	if (cfg.fuse_uring)
		fs_want_uring(&fs, se);
	if (fuse_daemonize(cl.foreground))
		goto out_unmount;
	if (!cl.foreground)
		log_to_syslog(1);

	/* Before any thread exists: threads inherit the flag. */
	harden_io_flusher();
	harden_memory();
	stats_init();
	log_info("serving %s: %llu MiB, %s, mem_limit %llu MiB, %u thread(s)%s", cl.mountpoint,
		 (unsigned long long)(cfg.size >> 20), cfg.algorithm,
		 (unsigned long long)(cfg.mem_limit >> 20), fs.threads,
		 fs.uring_wanted ? ", FUSE over io_uring" : "");

	/* After fork and mlockall: threads do not survive fuse_daemonize's
	 * fork, and their stacks must be locked.  The reserve first: every
	 * thread that allocates from the arena must find it in reserve mode. */
	rcfg.fixed_bytes = cfg.reserve;
	reserve = reserve_start(store_arena(st), &rcfg);
	if (!reserve) {
		log_err("cannot fill the reserve of locked memory: %s", strerror(errno));
		goto out_unmount;
	}
	pcfg.recompress = cfg.recompress_enabled;
	pcfg.idle_age = (uint32_t)cfg.recompress_idle_age;
	pcfg.threshold = (size_t)cfg.recompress_threshold;
	pcfg.rate = (uint32_t)cfg.recompress_rate;
	pcfg.compact_threshold = (unsigned int)cfg.compact_threshold;
	pcfg.wb_auto = cfg.writeback_enabled;
	pcfg.wb_idle_age = (uint32_t)cfg.writeback_idle_age;
	pcfg.wb_high = (unsigned int)cfg.writeback_high_watermark;
	pcfg.wb_low = (unsigned int)cfg.writeback_low_watermark;
	pcfg.wb.daily_limit = cfg.writeback_daily_limit;
	pcfg.wb.compact_threshold = (unsigned int)cfg.writeback_compact_threshold;
	fs.policy = policy_start(st, &pcfg);
	if (!fs.policy) {
		log_err("cannot start the policy thread: %s", strerror(errno));
		goto out_reserve;
	}
	if (backing) {
		log_info("writing back to %s (%s)", cfg.writeback_backing_file,
			 cfg.writeback_enabled ? "automatic" : "on command only");
		store_set_make_room(st, make_room, fs.policy);
	}

	err = fs_loop(&fs, se);
	if (err)
		log_err("request loop: %s", strerror(-err));
	else
		ret = 0;
	store_set_make_room(st, NULL, NULL);
	policy_stop(fs.policy);
out_reserve:
	reserve_stop(reserve);
out_unmount:
	fuse_session_unmount(se);
out_session:
	fuse_session_destroy(se);
out_fs:
	fs_fini(&fs);
out_store:
	store_destroy(st);
out_backing:
	backing_close(backing);
out_args:
	memcg_restore();
	for (i = 0; i < cl.nr_settings; i++)
		free(cl.settings[i]);
	free(cl.mountpoint);
	fuse_opt_free_args(&cl.fuse_args);
	return ret;
}
