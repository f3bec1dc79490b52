/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harden.h"
#include "log.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

static struct harden_state state = { .caps_text = "unknown" };
static bool for_exec;		/* harden_drop_privileges: keep for programs we run */

void harden_keep_for_exec(void)
{
	for_exec = true;
}

const struct harden_state *harden_state(void)
{
	return &state;
}

void harden_io_flusher(void)
{
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0))
		log_warn("PR_SET_IO_FLUSHER: %s (needs CAP_SYS_RESOURCE); allocations "
			 "under memory pressure may wait on I/O", strerror(errno));
}

static void oom_protect(void)
{
	static const char value[] = "-1000\n";
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, value, sizeof(value) - 1) != (ssize_t)sizeof(value) - 1)
		log_warn("oom_score_adj: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * Unlimited RLIMIT_MEMLOCK lets the arena lock pages again (after it gave
 * them back with munlock + MADV_DONTNEED) and io_uring lock its rings
 * without CAP_IPC_LOCK, which can then be dropped.  Raising the hard limit
 * needs CAP_SYS_RESOURCE; without it the soft limit goes up to the hard one.
 */
static void raise_memlock(void)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	if (setrlimit(RLIMIT_MEMLOCK, &rl) && !getrlimit(RLIMIT_MEMLOCK, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	state.memlock_unlimited = !getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur == RLIM_INFINITY;
}

int harden_memory(bool required)
{
	int err = 0;

	raise_memlock();
	if (!HARDEN_CAN_MLOCK) {
		if (required) {
			log_err("lock_memory=required, but this build (AddressSanitizer) cannot "
				"lock memory: it is a build for tests, never for real swap; "
				"set lock_memory=try to run it anyway");
			err = -EOPNOTSUPP;
		} else {
			log_warn("sanitizer build: memory is not locked (a build for tests, "
				 "not for real swap)");
		}
	} else if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		err = -errno;
		if (required)
			log_err("cannot lock the daemon's memory (mlockall: %s; it needs "
				"CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK). Unlocked, the "
				"daemon's own pages can be swapped out to the swap file it "
				"serves, and under memory pressure the kernel then waits on "
				"itself: a deadlock. Refusing to start; set lock_memory=try "
				"to accept that risk", strerror(-err));
		else
			log_warn("mlockall: %s: the daemon's own memory may be swapped out "
				 "(lock_memory=try)", strerror(-err));
	} else {
		state.memory_locked = true;
	}
	oom_protect();
	return required ? err : 0;
}

/* The kept set, as a mask and as text, read back from the kernel. */
static void note_caps(void)
{
	unsigned int cap, last = CAP_LAST_CAP;
	size_t len = 0;
	FILE *f;

	f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%u", &last) != 1 || last > 63)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	state.caps = 0;
	state.caps_text[0] = '\0';
	capng_get_caps_process();
	for (cap = 0; cap <= last; cap++) {
		const char *name;

		if (!capng_have_capability(CAPNG_EFFECTIVE, cap) &&
		    !capng_have_capability(CAPNG_PERMITTED, cap))
			continue;
		state.caps |= UINT64_C(1) << cap;
		name = capng_capability_to_name(cap);
		len += (size_t)snprintf(state.caps_text + len,
					len < sizeof(state.caps_text) ? sizeof(state.caps_text) - len : 0,
					"%s%s", len ? "," : "", name ? name : "?");
	}
	if (!state.caps)
		snprintf(state.caps_text, sizeof(state.caps_text), "none");
}

/* Whether the bounding set holds nothing but what the drop keeps. */
static bool bounding_is_kept(bool ipc_lock)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long bnd = ~0ull;
	char line[128];

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapBnd: %llx", &bnd) == 1)
			break;
	fclose(f);
	return bnd == (ipc_lock ? 1ull << CAP_IPC_LOCK : 0);
}

int harden_drop_privileges(void)
{
	/* Locked memory must stay lockable: the arena locks pages again. */
	bool keep_ipc_lock = state.memory_locked && !state.memlock_unlimited;
	bool setpcap;
	int rc;

	if (capng_get_caps_process()) {
		log_err("cannot read our capabilities: %s", strerror(errno));
		return -EPERM;
	}
	setpcap = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);
	capng_clear(CAPNG_SELECT_ALL);
	/* A keeper's workers lock their memory too: CAP_IPC_LOCK passes an
	 * exec only as an ambient capability (securebits: no root magic). */
	if (keep_ipc_lock)
		capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET |
			     (for_exec ? CAPNG_INHERITABLE | CAPNG_AMBIENT : 0), CAP_IPC_LOCK);
	/* Securebits: root never regains capabilities by uid 0 (needs
	 * CAP_SETPCAP, hence before the drop). */
	if (setpcap && capng_lock())
		log_warn("cannot lock the securebits: %s", strerror(errno));
	/* Without CAP_SETPCAP the bounding set cannot change: leave it out, so
	 * that libcap-ng does not try (and syslog the failure: a socket, which
	 * the unit forbids).  A worker started by a keeper is there: its
	 * bounding set is the keeper's, already dropped. */
	rc = capng_apply(setpcap ? CAPNG_SELECT_ALL : CAPNG_SELECT_CAPS | CAPNG_SELECT_AMBIENT);
	if (!rc && !setpcap && !bounding_is_kept(keep_ipc_lock))
		rc = -4;
	if (rc && rc != -4) {		/* -4: no CAP_SETPCAP for the bounding set */
		log_err("cannot drop capabilities (libcap-ng: %d): %s", rc, strerror(errno));
		return -EPERM;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		log_err("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -errno;
	}
	state.no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
	/* A core file or a ptrace of the daemon would read every page that
	 * was swapped out to it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		log_warn("PR_SET_DUMPABLE: %s", strerror(errno));
	state.dropped = true;
	note_caps();
	if (state.caps & ~(UINT64_C(1) << CAP_IPC_LOCK)) {
		log_err("capabilities left after the drop: %s", state.caps_text);
		return -EPERM;
	}
	if (rc == -4)
		log_warn("no CAP_SETPCAP: the capability bounding set is left as it was "
			 "(PR_SET_NO_NEW_PRIVS still keeps a program we ran from gaining any)");
	if (keep_ipc_lock)
		log_info("kept CAP_IPC_LOCK: RLIMIT_MEMLOCK could not be raised (no "
			 "CAP_SYS_RESOURCE), and the arena locks pages again as it reuses them");
	return 0;
}
