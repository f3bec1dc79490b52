/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worker: the process that serves requests (keeper.h starts it).
 *
 *   zswapfs --worker STATE_FD
 *
 * Everything comes from the keeper's state (shm.h): settings, descriptors,
 * the shared memory.  Start-up, in order: hardening of memory (mlockall)
 * before anything big exists; the shared memory attached outside MCL_FUTURE;
 * the backing file the keeper holds; the store, adopting what a dead worker
 * left (written-back pages too); the FUSE session on the
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
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "arena.h"
#include "backing.h"
#include "codec.h"
#include "config.h"
#include "control.h"
#include "dict.h"
#include "dictgen.h"
#include "dicttrain.h"
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

/*
 * The backing file the keeper opened, over the state it keeps (backing.h,
 * Restart), or NULL without one; -1 after a message.
 */
static int attach_backing(const struct shm_region *shm, struct backing **out)
{
	const struct shm_state *s = shm->state;
	char err[512];

	*out = NULL;
	if (!s->backing_bytes)
		return 0;
	if (s->backing_fd < 0 || !shm->backing) {
		log_err("worker: the keeper holds no backing file");
		return -1;
	}
	*out = backing_attach(s->backing_fd, shm->backing, s->backing_bytes, err, sizeof(err));
	if (!*out) {
		log_err("worker: %s", err);
		return -1;
	}
	return 0;
}

/*
 * The dictionary files of `dict` and `recompress.dict`, made generation 1
 * of the store's ring (the first worker only: later ones find every
 * generation in the keeper's memory, store_adopt).  A codec used by both
 * (same algorithm) takes `dict` for both.  -1 after a message naming the
 * file.
 */
static int load_dicts(const struct zs_config *cfg, struct store *st)
{
	const char *path[2] = { cfg->dict, cfg->recompress_dict };
	void *buf[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	char err[1536];
	int i, ret = -1, gen;

	for (i = 0; i < 2; i++) {
		if (!path[i][0])
			continue;
		gen = dict_load(path[i], &buf[i], &len[i], err, sizeof(err));
		if (gen) {
			log_err("%s: %s", i ? "recompress.dict" : "dict", err);
			goto out_free;
		}
	}
	if (!buf[0] && !buf[1])
		return 0;
	if (!buf[1] && !strcmp(cfg->algorithm, cfg->recompress_algorithm))
		buf[1] = buf[0], len[1] = len[0];
	gen = dictgen_install(store_dicts(st), buf[0], len[0], buf[1], len[1]);
	if (gen < 0) {
		log_err("dict: %s%s%s: %s", path[0], path[0][0] && path[1][0] ? ", " : "",
			path[1], gen == -EINVAL ? "the compressor refuses the dictionary" :
			strerror(-gen));
		goto out_free;
	}
	ret = 0;
out_free:
	if (buf[1] != buf[0])
		free(buf[1]);
	free(buf[0]);
	return ret;
}

/* transport.h's request_unmount: the keeper's unmount helper, through its pipe. */
static void request_unmount(void *arg)
{
	log_info("stopping: unmounting");
	unmounter_request(arg);
}

static _Atomic bool restart_asked;

static pid_t keeper_pid;

/* control's `restart`: leave the loop once what was read is answered;
 * `restart keeper`: tell the keeper (keeper.h), which execs in its place. */
static int on_restart(void *arg, bool keeper)
{
	if (keeper)
		return kill(keeper_pid, SIGUSR1) ? -errno : 0;
	atomic_store(&restart_asked, true);
	transport_leave_loop(arg);
	return 0;
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

	if (s->ready_fd >= 0) {
		log_detach_stdio(s->journal);
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

int worker_main(const char *fd_text)
{
	struct unmounter um = { .pid = -1, .fd = -1 };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct reserve *reserve = NULL;
	struct backing *backing = NULL;
	struct fuse_session *se = NULL;
	struct zs_params par;
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
	e = shm_peek_config(fd, &cfg, &background);
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
	config_params(&cfg, &par);
	if (harden_memory(par.lock_memory_required))
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

	if (attach_backing(&shm, &backing))
		return RESTART_EXIT_REFUSED;
	/* A discard on a request thread must not punch the file (backing.h). */
	if (backing)
		backing_defer_punch(backing);
	par.store.backing = backing;
	par.store.shared_slots = shm.slots;
	par.store.shared_slots_bytes = state->slots_bytes;
	par.store.shared_arena = shm.arena;
	par.store.shared_arena_bytes = state->arena_bytes;
	par.store.shared_dicts = shm.dicts;
	par.store.counters = &state->counters;
	par.store.epoch = &state->epoch;
	st = store_create(&par.store);
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
	if (atomic_load(&state->generation) == 1 && load_dicts(&cfg, st))
		goto out_store;
	e = fs_init(&fs, st, par.threads, par.busy_poll_us);
	if (e) {
		log_err("%s", strerror(-e));
		goto out_store;
	}
	/* config_validate has checked the range */
	transport_set_slice(&fs.tp, par.request_slice_us);
	if (state->restart_safe)
		transport_share_holds(&fs.tp, &state->swap_holds);
	fs.others_allowed = state->allow_other;
	if (par.stats_gid >= 0)
		fs.stats_gid = (gid_t)par.stats_gid;
	if (fuse_opt_add_arg(&args, "zswapfs") ||
	    (state->debug && fuse_opt_add_arg(&args, "-odebug")))
		goto out_fs;
	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs);
	if (!se)
		goto out_fs;
	if (transport_install_signal_handlers(&fs.tp))
		goto out_session;
	/* libfuse takes "/dev/fd/N" as an open /dev/fuse and mounts nothing. */
	snprintf(devfd, sizeof(devfd), "/dev/fd/%d", state->fuse_fd);
	if (fuse_session_mount(se, devfd))
		goto out_session;
	if (state->restart_safe)
		fs.tp.dev_hooks = restart_hooks(state, se);
	else if (par.fuse_uring)
		transport_want_uring(&fs.tp, se);
	e = transport_install_io(&fs.tp, se);
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
	reserve = reserve_start(store_arena(st), &par.reserve);
	if (!reserve) {
		log_err("cannot fill the reserve of locked memory: %s", strerror(errno));
		goto out_session;
	}
	fs.policy = policy_start(st, &par.policy);
	if (!fs.policy) {
		log_err("cannot start the policy thread: %s", strerror(errno));
		goto out_reserve;
	}
	fs.dicttrain = dicttrain_start(st, &par.dicttrain);
	if (!fs.dicttrain) {
		log_err("cannot start the dictionary thread: %s", strerror(errno));
		goto out_policy;
	}
	if (backing)
		store_set_make_room(st, make_room, fs.policy);
	keeper_pid = (pid_t)state->keeper_pid;
	control_set_restart_hook(on_restart, &fs.tp);
	if (atomic_load(&state->generation) == 1) {
		log_info("serving %s: %llu MiB, %s, mem_limit %llu MiB, %u thread(s)%s%s",
			 state->mountpoint, (unsigned long long)(cfg.size >> 20), cfg.algorithm,
			 (unsigned long long)(cfg.mem_limit >> 20), fs.tp.threads,
			 fs.tp.uring_wanted ? ", FUSE over io_uring" : "",
			 state->restart_safe ? ", restart-safe" : "");
		if (backing)
			log_info("writing back to %s (%s, %s)", cfg.writeback_backing_file,
				 cfg.writeback_enabled ? "automatic" : "on command only",
				 backing_cipher(backing) == SEAL_NONE ? "not encrypted" :
				 seal_cipher_name(backing_cipher(backing)));
	} else {
		struct store_counters c;

		store_get_counters(st, &c);
		log_info("worker %u serving %s: %llu pages adopted (%llu on the backing file)",
			 atomic_load(&state->generation), state->mountpoint,
			 (unsigned long long)c.pages_stored, (unsigned long long)c.bd_count);
	}
	tell_ready(state);
	if (atomic_load(&state->generation) > 1) {
		pthread_attr_t attr;

		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
		populating = !pthread_create(&populator, &attr, populate_thread, store_arena(st));
		pthread_attr_destroy(&attr);
	}

	fs.tp.request_unmount = request_unmount;
	fs.tp.unmount_arg = &um;
	e = transport_loop(&fs.tp, se);
	if (e)
		log_err("request loop: %s", strerror(-e));
	else
		ret = atomic_load(&restart_asked) ? RESTART_EXIT_AGAIN : 0;
	control_set_restart_hook(NULL, NULL);
	if (populating)
		pthread_join(populator, NULL);
	store_set_make_room(st, NULL, NULL);
	dicttrain_stop(fs.dicttrain);
out_policy:
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
