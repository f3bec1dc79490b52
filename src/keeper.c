/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "restart.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int keeper_signals(struct keeper *k)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);	/* `restart keeper`, from the worker */
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	k->sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	return k->sigfd < 0 ? -errno : 0;
}

/* fork + exec a worker with the keeper's descriptors.  0 or -errno. */
static int spawn(struct keeper *k)
{
	struct shm_state *s = k->shm->state;
	const char *path = k->from_self ? "/proc/self/exe" : s->exe;
	char fdarg[16];
	char *argv[] = { "zswapfs", "--worker", fdarg, NULL };
	sigset_t none;
	int rp[2], err;
	pid_t pid;

	snprintf(fdarg, sizeof(fdarg), "%d", k->shm->state_fd);
	if (pipe2(rp, O_CLOEXEC))
		return -errno;
	s->keeper_ready_fd = rp[1];
	atomic_fetch_add(&s->generation, 1);
	sigemptyset(&none);
	pid = fork();
	if (pid == 0) {
		/* Only async-signal-safe calls from here: exec resets the rest. */
		const int fds[] = { s->fuse_fd, k->shm->state_fd, s->unmount_fd, s->ready_fd,
				    s->keeper_ready_fd, s->backing_fd };

		sigprocmask(SIG_SETMASK, &none, NULL);
		for (unsigned int i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				fcntl(fds[i], F_SETFD, 0);
		execv(path, argv);
		_exit(127);
	}
	err = pid < 0 ? -errno : 0;
	/* The number stays in the state: the worker's own copy has it. */
	close(rp[1]);
	if (err) {
		close(rp[0]);
		return err;
	}
	k->worker = pid;
	k->worker_ready = false;
	k->ready_rd = rp[0];
	k->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (k->pidfd < 0)
		log_warn("pidfd_open: %s: a worker's death is seen by polling", strerror(errno));
	return 0;
}

/* The worker serves: the start-up is over; a stop signal may go to it. */
static void worker_serves(struct keeper *k)
{
	struct shm_state *s = k->shm->state;
	unsigned char b;

	if (read(k->ready_rd, &b, 1) != 1) {
		close(k->ready_rd);	/* it died first: its exit tells */
		k->ready_rd = -1;
		return;
	}
	close(k->ready_rd);
	k->ready_rd = -1;
	k->worker_ready = true;
	k->ready_ns = now_ns();
	if (!k->served && *k->ready_fd >= 0) {
		/* The worker told the parent; the keeper detaches too. */
		close(*k->ready_fd);
		*k->ready_fd = -1;
		s->ready_fd = -1;
		if (!s->journal) {
			log_quiet_stderr();
			if (log_to_syslog())
				log_warn("no syslog (/dev/log): messages are lost from now on");
		}
		log_detach_stdio(s->journal);
	}
	k->served = true;
	if (k->pending_sig) {
		kill(k->worker, k->pending_sig);
		k->pending_sig = 0;
	}
}

static void describe(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

/* May a dead worker be replaced without losing a request? */
static bool restart_ok(const struct shm_state *s)
{
	return s->restart_safe && (atomic_load(&s->kernel_resend) || !atomic_load(&s->init_req_len));
}

/* Record a death; the wait before the next start, in ms (0: none). */
static unsigned int note_death(struct keeper *k, uint64_t now, bool served_long)
{
	uint64_t oldest = k->deaths[k->nr_deaths % KEEPER_BURST];

	if (served_long) {
		/* Not a crash loop: the count starts again. */
		k->nr_deaths = 0;
		k->backoff_ms = 0;
		return 0;
	}
	k->deaths[k->nr_deaths++ % KEEPER_BURST] = now;
	if (k->nr_deaths < KEEPER_BURST || now - oldest > KEEPER_BURST_NS) {
		k->backoff_ms = 0;
		return 0;
	}
	k->backoff_ms = k->backoff_ms ? k->backoff_ms * 2 : KEEPER_BACKOFF_MIN_MS;
	if (k->backoff_ms > KEEPER_BACKOFF_MAX_MS)
		k->backoff_ms = KEEPER_BACKOFF_MAX_MS;
	return k->backoff_ms;
}

/*
 * The worker has exited (status).  Returns -1 when a new worker is to be
 * started (after *wait_ms), or the keeper's exit status.
 */
static int worker_exited(struct keeper *k, int status, unsigned int *wait_ms, bool *unmount)
{
	struct shm_state *s = k->shm->state;
	uint64_t now = now_ns();
	char what[96];

	*wait_ms = 0;
	describe(status, what, sizeof(what));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;	/* the kernel ended the connection */
	if (!k->served) {
		/* The first worker never served: a failed start-up. */
		*unmount = true;
		return 1;
	}
	atomic_store(&s->died_ns, now);
	if (WIFEXITED(status) && WEXITSTATUS(status) == RESTART_EXIT_AGAIN) {
		log_info("worker %u finished for a restart: starting one from %s",
			 atomic_load(&s->generation), s->exe);
		atomic_fetch_add(&s->upgrades, 1);
		k->from_self = false;
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == RESTART_EXIT_REFUSED) {
		if (k->from_self) {
			log_err("the keeper's own binary refused the connection too: ending "
				"it (processes with pages on this swap lose them)");
			return 1;
		}
		log_err("the worker from %s refused the connection (its log says why): "
			"starting the keeper's own binary instead", s->exe);
		k->from_self = true;
		atomic_fetch_add(&s->restarts, 1);
		return -1;
	}
	if (!restart_ok(s)) {
		log_err("worker %u %s; %s: ending the connection", atomic_load(&s->generation),
			what, !s->restart_safe ? "not restart-safe (worker_restart = false)" :
			"the kernel cannot send its requests again (no FUSE_NOTIFY_RESEND)");
		return 1;
	}
	atomic_fetch_add(&s->restarts, 1);
	*wait_ms = note_death(k, now, k->worker_ready_before &&
			      now - k->ready_ns >= KEEPER_SHORT_LIFE_NS);
	if (*wait_ms)
		log_err("worker %u %s: %u workers in a row died within %llu s, each after "
			"serving less than a second: waiting %u ms before the next (requests "
			"wait meanwhile)", atomic_load(&s->generation), what, KEEPER_BURST,
			KEEPER_BURST_NS / 1000000000ull, *wait_ms);
	else
		log_err("worker %u %s: starting a new one", atomic_load(&s->generation), what);
	return -1;
}

static void forward(struct keeper *k)
{
	struct signalfd_siginfo si;

	while (read(k->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGUSR1) {
			k->reexec_wanted = true;
			continue;
		}
		if (k->worker > 0 && k->worker_ready)
			kill(k->worker, (int)si.ssi_signo);
		else
			k->pending_sig = (int)si.ssi_signo;
	}
}

/*
 * Whether the binary at path knows the state's layout (`--layout`, keeper.h):
 * an image that could not take the state over would leave the worker
 * without a keeper.  5 s at most.
 */
static bool layout_matches(const char *path)
{
	char *argv[] = { "zswapfs", "--layout", NULL };
	char want[48], got[48] = "";
	struct pollfd p;
	ssize_t n = 0;
	int fds[2], status;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return false;
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(fds[1], STDOUT_FILENO);
		execv(path, argv);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return false;
	}
	p = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	if (poll(&p, 1, 5000) == 1)
		n = read(fds[0], got, sizeof(got) - 1);
	close(fds[0]);
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	got[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "%u %zu\n", SHM_VERSION, sizeof(struct shm_state));
	if (!strcmp(got, want))
		return true;
	log_err("restart keeper: %s does not know this mount's state (it says \"%.*s\", "
		"this keeper has layout %u): the keeper stays as it is; unmount to upgrade",
		path, (int)strcspn(got, "\n"), got, SHM_VERSION);
	return false;
}

/*
 * Execute the binary on disk in the keeper's place (keeper.h).  Returns
 * only when that failed; the keeper goes on as it was.
 */
static void keeper_reexec(struct keeper *k)
{
	struct shm_state *s = k->shm->state;
	char a_state[16], a_worker[16], a_holder[16], a_hfd[16], a_old[16];
	char *argv[] = { "zswapfs", "--keeper", a_state, a_worker, a_holder, a_hfd, a_old, NULL };
	const int fds[] = { s->fuse_fd, k->shm->state_fd, s->unmount_fd };
	int hp[2], old_exe, status;
	pid_t holder;

	k->reexec_wanted = false;
	if (!layout_matches(s->exe))
		return;
	/* The old binary, to go back to if the new one cannot take over. */
	old_exe = open("/proc/self/exe", O_RDONLY);
	if (old_exe < 0 || pipe(hp)) {
		log_err("restart keeper: %s", strerror(errno));
		if (old_exe >= 0)
			close(old_exe);
		return;
	}
	holder = fork();
	if (holder == 0) {
		/* Attached to every segment (a fork's child is), until the new
		 * image closes the pipe or dies. */
		char c;

		close(hp[1]);
		while (read(hp[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(hp[0]);
	if (holder < 0) {
		log_err("restart keeper: fork: %s", strerror(errno));
		close(hp[1]);
		close(old_exe);
		return;
	}
	snprintf(a_state, sizeof(a_state), "%d", k->shm->state_fd);
	snprintf(a_worker, sizeof(a_worker), "%d", (int)k->worker);
	snprintf(a_holder, sizeof(a_holder), "%d", (int)holder);
	snprintf(a_hfd, sizeof(a_hfd), "%d", hp[1]);
	snprintf(a_old, sizeof(a_old), "%d", old_exe);
	for (unsigned int i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			fcntl(fds[i], F_SETFD, 0);
	log_info("restart keeper: executing %s (worker %u serves meanwhile)", s->exe,
		 atomic_load(&s->generation));
	log_stop();
	execv(s->exe, argv);
	log_err("restart keeper: cannot execute %s: %s", s->exe, strerror(errno));
	for (unsigned int i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			fcntl(fds[i], F_SETFD, FD_CLOEXEC);
	close(hp[1]);
	close(old_exe);
	while (waitpid(holder, &status, 0) < 0 && errno == EINTR)
		;
}

/* Supervise until the keeper must exit; a worker may be running (k->worker). */
static int keeper_loop(struct keeper *k, bool *unmount)
{
	uint64_t start_at = 0;
	int err, status, ret;
	unsigned int wait_ms;

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = k->sigfd, .events = POLLIN },
			{ .fd = k->pidfd, .events = POLLIN },
			{ .fd = k->ready_rd, .events = POLLIN },
		};
		int timeout = -1;

		if (k->worker < 0) {
			uint64_t now = now_ns();

			if (now >= start_at) {
				err = spawn(k);
				if (err) {
					log_err("cannot start a worker: %s; trying again",
						strerror(-err));
					start_at = now + (uint64_t)KEEPER_BACKOFF_MIN_MS * 1000000u;
				}
				continue;
			}
			timeout = (int)((start_at - now) / 1000000u) + 1;
		} else if (k->pidfd < 0) {
			timeout = 100;	/* no pidfd: look now and then */
		}
		if (poll(p, 3, timeout) < 0 && errno != EINTR)
			log_err("keeper: poll: %s", strerror(errno));
		if (p[0].revents)
			forward(k);
		if (k->ready_rd >= 0 && p[2].revents)
			worker_serves(k);
		/* Only while a worker serves: it holds the segments too, and
		 * the kernel's requests are answered all through the exec. */
		if (k->reexec_wanted && k->worker > 0 && k->worker_ready)
			keeper_reexec(k);
		if (k->worker < 0 || (k->pidfd >= 0 && !p[1].revents))
			continue;
		if (waitpid(k->worker, &status, k->pidfd >= 0 ? 0 : WNOHANG) != k->worker)
			continue;
		if (k->pidfd >= 0)
			close(k->pidfd);
		if (k->ready_rd >= 0)
			close(k->ready_rd);
		k->pidfd = k->ready_rd = -1;
		k->worker = -1;
		k->worker_ready_before = k->worker_ready;
		k->worker_ready = false;
		ret = worker_exited(k, status, &wait_ms, unmount);
		if (ret >= 0)
			return ret;
		start_at = now_ns() + (uint64_t)wait_ms * 1000000u;
	}
}

int keeper_run(struct keeper *k, bool *unmount)
{
	int err;

	*unmount = false;
	k->worker = -1;
	k->pidfd = k->ready_rd = -1;
	fcntl(k->sigfd, F_SETFL, fcntl(k->sigfd, F_GETFL) | O_NONBLOCK);
	err = spawn(k);
	if (err) {
		log_err("cannot start the worker: %s", strerror(-err));
		*unmount = true;
		return 1;
	}
	return keeper_loop(k, unmount);
}

int keeper_supervise(struct keeper *k, pid_t worker, bool *unmount)
{
	*unmount = false;
	k->worker = worker;
	k->ready_rd = -1;
	k->worker_ready = k->served = true;
	k->ready_ns = now_ns();
	k->pidfd = (int)syscall(SYS_pidfd_open, worker, 0);
	if (k->pidfd < 0)
		log_warn("pidfd_open: %s: a worker's death is seen by polling", strerror(errno));
	fcntl(k->sigfd, F_SETFL, fcntl(k->sigfd, F_GETFL) | O_NONBLOCK);
	return keeper_loop(k, unmount);
}

bool keeper_connection_ended(int fuse_fd)
{
	struct pollfd pfd = { .fd = fuse_fd, .events = 0 };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR);
}
