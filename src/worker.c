/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worker: the process that serves requests (keeper.h starts it).
 *
 *   zswapfs --worker STATE_FD
 *
 * Everything comes from the keeper's state (shm.h): settings, descriptors,
 * the shared memory.  Start-up, in order: hardening of memory (mlockall)
 * before anything big exists; the shared memory attached outside MCL_FUTURE;
 * the store, adopting what a dead worker left; the FUSE session on the
 * inherited /dev/fuse descriptor ("/dev/fd/N": libfuse takes it and mounts
 * nothing); FUSE_NOTIFY_RESEND when a worker was here before (restart.h);
 * the drop of privileges; the threads, the reserve's first.  Exit status:
 * 0 when the kernel ended the connection, RESTART_EXIT_AGAIN after
 * `restart`, RESTART_EXIT_REFUSED when it cannot serve this connection, 1
 * on any other failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "arena.h"
#include "backing.h"
#include "codec.h"
#include "control.h"
#include "fs.h"
#include "harden.h"
#include "log.h"
#include "memcg.h"
#include "policy.h"
#include "reserve.h"
#include "restart.h"
#include "shm.h"
#include "stats.h"
#include "store.h"
#include "unmounter.h"
#include "worker.h"

/* The store's make-room hook: writeback, done by the policy thread. */
static int make_room(void *policy)
{
	return policy_make_room(policy);
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
	*out = backing_open(cfg->writeback_backing_file, max,
			    cfg->writeback_encrypt ? SEAL_AUTO : SEAL_NONE, err, sizeof(err));
	if (!*out) {
		log_err("%s", err);
		return -1;
	}
	return 0;
}

/* fs.h's request_unmount: the keeper's unmount helper, through its pipe. */
static void request_unmount(void *arg)
{
	log_info("stopping: unmounting");
	unmounter_request(arg);
}

static _Atomic bool restart_asked;

/* control's `restart`: leave the loop once what was read is answered. */
static void on_restart(void *arg)
{
	atomic_store(&restart_asked, true);
	fs_leave_loop(arg);
}

/* Map the adopted pages ahead of the requests (arena.h), in the background. */
static void *populate_thread(void *arena)
{
	arena_populate_adopted(arena);
	return NULL;
}

/* The first worker, once it serves: the start-up parent may exit 0, and
 * standard streams go to /dev/null (stderr stays when it is the journal). */
static void tell_ready(struct shm_state *s)
{
	unsigned char ok = 0;
	ssize_t n;
	int fd;

	if (s->ready_fd >= 0) {
		if (!s->journal)
			log_quiet_stderr();
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			if (!s->journal)
				dup2(fd, STDERR_FILENO);
			close(fd);
		}
		do
			n = write(s->ready_fd, &ok, 1);
		while (n < 0 && errno == EINTR);
		close(s->ready_fd);
	}
	do
		n = write(s->keeper_ready_fd, &ok, 1);
	while (n < 0 && errno == EINTR);
	close(s->keeper_ready_fd);
}

/* The settings, read from the state before it is mapped (mlockall first). */
static int read_settings(int fd, struct zs_config *cfg, bool *background)
{
	struct shm_state head;

	if (pread(fd, &head, offsetof(struct shm_state, init_req_len), 0) !=
	    (ssize_t)offsetof(struct shm_state, init_req_len))
		return -EIO;
	if (head.magic != SHM_MAGIC || head.version != SHM_VERSION ||
	    head.state_bytes != sizeof(struct shm_state))
		return -EPROTO;
	*cfg = head.cfg;
	*background = !head.foreground && !head.journal;
	return 0;
}

int worker_main(const char *fd_text)
{
	struct unmounter um = { .pid = -1, .fd = -1 };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct reserve *reserve = NULL;
	struct backing *backing = NULL;
	struct store_params sp = { 0 };
	struct fuse_session *se = NULL;
	struct reserve_config rcfg;
	struct policy_config pcfg;
	struct shm_region shm;
	struct shm_state *state;
	struct zs_config cfg;
	struct store *st;
	struct fs fs;
	char err[512], devfd[32];
	bool background, populating = false;
	pthread_t populator;
	uint64_t bad;
	int fd, ret = 1, e;
	char *end;

	errno = 0;
	fd = (int)strtol(fd_text, &end, 10);
	if (errno || *end || fd < 3) {
		fprintf(stderr, "zswapfs: --worker: not a descriptor: %s\n", fd_text);
		return 1;
	}
	e = read_settings(fd, &cfg, &background);
	if (e) {
		fprintf(stderr, "zswapfs: worker: the keeper's state: %s%s\n", strerror(-e),
			e == -EPROTO ? " (another layout: a binary of another version?)" : "");
		return RESTART_EXIT_REFUSED;
	}
	/* Later workers inherit the keeper's /dev/null streams. */
	if (background && log_to_syslog())
		fprintf(stderr, "zswapfs: no syslog (/dev/log)\n");

	/* Before any thread and before the segments: threads inherit the flag. */
	harden_io_flusher();
	if (harden_memory(cfg.lock_memory == ZS_LOCK_REQUIRED))
		return 1;
	if (shm_attach(&shm, fd, harden_state()->memory_locked, err, sizeof(err))) {
		log_err("worker: %s", err);
		return RESTART_EXIT_REFUSED;
	}
	state = shm.state;
	um.fd = state->unmount_fd;
	{
		struct memcg_report mr = { .state = state->memcg_state,
					   .limit = state->memcg_limit };

		snprintf(mr.cgroup, sizeof(mr.cgroup), "%s", state->memcg_cgroup);
		memcg_set_report(&mr);
	}
	um.dev = (dev_t)state->mount_dev;
	um.armed = true;	/* the keeper armed it */

	sp.size = cfg.size;
	sp.codec = codec_find(cfg.algorithm);
	sp.level = (int)cfg.level;
	sp.mem_limit = cfg.mem_limit;
	sp.recomp_codec = codec_find(cfg.recompress_algorithm);
	sp.recomp_level = (int)cfg.recompress_level;
	if (open_backing(&cfg, &backing))
		return 1;
	/* A discard on a request thread must not punch the file (backing.h). */
	if (backing)
		backing_defer_punch(backing);
	sp.backing = backing;
	sp.promote = cfg.writeback_promote;
	sp.shared_slots = shm.slots;
	sp.shared_slots_bytes = state->slots_bytes;
	sp.shared_arena = shm.arena;
	sp.shared_arena_bytes = state->arena_bytes;
	sp.counters = &state->counters;
	sp.epoch = &state->epoch;
	st = store_create(&sp);
	if (!st) {
		log_err("cannot create the page store: %s", strerror(errno));
		goto out_backing;
	}
	e = store_adopt(st, &bad);
	if (e) {
		log_err("worker: cannot adopt the pages a previous worker left (slot %llu: %s): "
			"refusing to serve them", (unsigned long long)bad, strerror(-e));
		ret = RESTART_EXIT_REFUSED;
		goto out_store;
	}
	e = fs_init(&fs, st, (unsigned int)cfg.threads, (unsigned int)cfg.busy_poll_us);
	if (e) {
		log_err("%s", strerror(-e));
		goto out_store;
	}
	fs.others_allowed = state->allow_other;
	if (cfg.stats_group.gid >= 0)
		fs.stats_gid = (gid_t)cfg.stats_group.gid;
	if (fuse_opt_add_arg(&args, "zswapfs") ||
	    (state->debug && fuse_opt_add_arg(&args, "-odebug")))
		goto out_fs;
	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs);
	if (!se)
		goto out_fs;
	if (fs_install_signal_handlers(&fs))
		goto out_session;
	/* libfuse takes "/dev/fd/N" as an open /dev/fuse and mounts nothing. */
	snprintf(devfd, sizeof(devfd), "/dev/fd/%d", state->fuse_fd);
	if (fuse_session_mount(se, devfd))
		goto out_session;
	if (state->restart_safe)
		fs.dev_hooks = restart_hooks(state, se);
	else if (cfg.fuse_uring)
		fs_want_uring(&fs, se);
	e = fs_install_io(&fs, se);
	if (e) {
		log_err("cannot take over reading /dev/fuse: %s", strerror(-e));
		goto out_session;
	}
	/* Before any thread reads a request (restart.h). */
	if (atomic_load(&state->generation) > 1) {
		e = restart_resend(state->fuse_fd);
		if (e)
			log_err("restart: FUSE_NOTIFY_RESEND: %s: requests the last worker "
				"had taken wait for ever", strerror(-e));
	}
	stats_init();
	stats_set_worker(state);
	if (harden_drop_privileges())
		goto out_session;
	e = log_start();
	if (e)
		log_warn("no log thread (%s): messages are written at once", strerror(-e));
	rcfg.fixed_bytes = cfg.reserve;
	reserve = reserve_start(store_arena(st), &rcfg);
	if (!reserve) {
		log_err("cannot fill the reserve of locked memory: %s", strerror(errno));
		goto out_session;
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
	if (backing)
		store_set_make_room(st, make_room, fs.policy);
	control_set_restart_hook(on_restart, &fs);
	if (atomic_load(&state->generation) == 1) {
		log_info("serving %s: %llu MiB, %s, mem_limit %llu MiB, %u thread(s)%s%s",
			 state->mountpoint, (unsigned long long)(cfg.size >> 20), cfg.algorithm,
			 (unsigned long long)(cfg.mem_limit >> 20), fs.threads,
			 fs.uring_wanted ? ", FUSE over io_uring" : "",
			 state->restart_safe ? ", restart-safe" : "");
		if (backing)
			log_info("writing back to %s (%s, %s)", cfg.writeback_backing_file,
				 cfg.writeback_enabled ? "automatic" : "on command only",
				 backing_cipher(backing) == SEAL_NONE ? "not encrypted" :
				 seal_cipher_name(backing_cipher(backing)));
	} else {
		struct store_counters c;

		store_get_counters(st, &c);
		log_info("worker %u serving %s: %llu pages adopted", atomic_load(&state->generation),
			 state->mountpoint, (unsigned long long)c.pages_stored);
	}
	tell_ready(state);
	if (atomic_load(&state->generation) > 1) {
		pthread_attr_t attr;

		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
		populating = !pthread_create(&populator, &attr, populate_thread, store_arena(st));
		pthread_attr_destroy(&attr);
	}

	fs.request_unmount = request_unmount;
	fs.unmount_arg = &um;
	e = fs_loop(&fs, se);
	if (e)
		log_err("request loop: %s", strerror(-e));
	else
		ret = atomic_load(&restart_asked) ? RESTART_EXIT_AGAIN : 0;
	control_set_restart_hook(NULL, NULL);
	if (populating)
		pthread_join(populator, NULL);
	store_set_make_room(st, NULL, NULL);
	policy_stop(fs.policy);
out_reserve:
	reserve_stop(reserve);
out_session:
	/* Closes this process's descriptor only: the keeper holds the open file. */
	fuse_session_destroy(se);
out_fs:
	fuse_opt_free_args(&args);
	fs_fini(&fs);
out_store:
	store_destroy(st);
out_backing:
	backing_close(backing);
	log_stop();
	return ret;
}
