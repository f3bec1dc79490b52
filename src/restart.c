/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "restart.h"

static struct shm_state *state;
static struct fuse_session *session;
static _Atomic bool decided;		/* the first request has been seen */
static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t init_unique;	/* of the INIT read; 0: none */
static _Atomic bool replied;		/* this worker has written a reply */

/* The reply of a replayed INIT: captured, not written (decide_lock held). */
static __thread bool replaying;
static unsigned char replay_reply[SHM_INIT_MAX];
static size_t replay_len;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t iov_copy(unsigned char *dst, size_t cap, const struct iovec *iov, int count)
{
	size_t len = 0;

	for (int i = 0; i < count; i++) {
		if (iov[i].iov_len > cap - len)
			return SIZE_MAX;
		memcpy(dst + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len;
}

static void save_init(const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_init_in *init = (const void *)(in + 1);

	if (len > SHM_INIT_MAX || len < sizeof(*in) + 16) {
		log_warn("restart: the FUSE_INIT request (%zu bytes) cannot be saved: a new "
			 "worker could not take over this connection", len);
		return;
	}
	/* flags2 exists from protocol 7.36 on */
	if (init->minor >= 36 && len >= sizeof(*in) + 20) {
		uint32_t flags2;

		memcpy(&flags2, (const char *)init + 16, sizeof(flags2));
		atomic_store(&state->kernel_resend, (flags2 & RESTART_INIT_HAS_RESEND) != 0);
	}
	atomic_store(&state->init_reply_len, 0);
	memcpy(state->init_req, buf, len);
	atomic_store_explicit(&state->init_req_len, (uint32_t)len, memory_order_release);
	atomic_store(&init_unique, in->unique);
}

/* Replay the saved INIT into our session; refuse if its reply differs. */
static void replay_init(void)
{
	uint32_t req_len = atomic_load_explicit(&state->init_req_len, memory_order_acquire);
	uint32_t reply_len = atomic_load_explicit(&state->init_reply_len, memory_order_acquire);
	unsigned char req[SHM_INIT_MAX];
	struct fuse_buf fb = { .mem = req };

	if (!req_len || !reply_len || req_len > SHM_INIT_MAX || reply_len > SHM_INIT_MAX) {
		log_err("restart: this connection's FUSE_INIT was not saved: this worker "
			"cannot serve it");
		_exit(RESTART_EXIT_REFUSED);
	}
	memcpy(req, state->init_req, req_len);
	fb.size = req_len;
	replaying = true;
	replay_len = 0;
	fuse_session_process_buf(session, &fb);
	replaying = false;
	if (replay_len != reply_len || memcmp(replay_reply, state->init_reply, reply_len)) {
		log_err("restart: this binary answers the connection's FUSE_INIT otherwise "
			"(%zu bytes) than the worker that mounted it (%u bytes): it would "
			"serve a connection negotiated for another; refusing", replay_len,
			reply_len);
		_exit(RESTART_EXIT_REFUSED);
	}
	log_info("restart: took over the connection (saved FUSE_INIT replayed)");
}

static void on_read(void *arg, const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;

	(void)arg;
	if (len < sizeof(*in))
		return;
	if (in->opcode == FUSE_INIT)
		save_init(buf, len);
	if (atomic_load_explicit(&decided, memory_order_acquire))
		return;
	/* Other threads wait here until the session is initialised. */
	pthread_mutex_lock(&decide_lock);
	if (!atomic_load(&decided)) {
		if (in->opcode != FUSE_INIT)
			replay_init();
		atomic_store_explicit(&decided, true, memory_order_release);
	}
	pthread_mutex_unlock(&decide_lock);
}

static bool on_reply(void *arg, const struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	uint64_t died;

	(void)arg;
	if (replaying) {
		size_t n = iov_copy(replay_reply, sizeof(replay_reply), iov, count);

		replay_len = n == SIZE_MAX ? 0 : n;
		return true;
	}
	if (iov[0].iov_len >= sizeof(*out) && atomic_load(&init_unique) &&
	    out->unique == atomic_load(&init_unique)) {
		/* Saved before it is written: a worker killed right after the
		 * write finds it; one killed before gets INIT again. */
		size_t n = iov_copy(state->init_reply, sizeof(state->init_reply), iov, count);

		if (n != SIZE_MAX && out->error == 0)
			atomic_store_explicit(&state->init_reply_len, (uint32_t)n,
					      memory_order_release);
		atomic_store(&init_unique, 0);
	}
	if (!atomic_exchange(&replied, true) && (died = atomic_load(&state->died_ns))) {
		uint64_t us = (now_ns() - died) / 1000u;

		atomic_store(&state->recovery_last_us, us);
		if (us > atomic_load(&state->recovery_max_us))
			atomic_store(&state->recovery_max_us, us);
	}
	return false;
}

const struct transport_dev_hooks *restart_hooks(struct shm_state *s, struct fuse_session *se)
{
	static const struct transport_dev_hooks hooks = { .on_read = on_read, .on_reply = on_reply };

	state = s;
	session = se;
	return &hooks;
}

int restart_resend(int fd)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh), .error = RESTART_NOTIFY_RESEND, .unique = 0,
	};
	ssize_t n = write(fd, &oh, sizeof(oh));

	if (n == (ssize_t)sizeof(oh))
		return 0;
	return n < 0 ? -errno : -EIO;
}
