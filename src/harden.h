/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * harden: make the daemon safe to swap to, and small to attack.  The kernel
 * sends us pages because it is short of memory; serving them must not need
 * memory the kernel cannot give, and the daemon must be the last thing
 * killed.  Once started, it keeps no privilege it does not use.
 *
 * Start-up order (main.c): the start-up steps that need privilege
 * (privileged_startup(), early: before anything big is allocated);
 * harden_io_flusher() before any thread; harden_memory(); then
 * harden_drop_privileges(), still before any thread, since capabilities
 * belong to each thread and threads inherit them when they are made.
 */
#ifndef ZSWAPFS_HARDEN_H
#define ZSWAPFS_HARDEN_H

#include <stdbool.h>
#include <stdint.h>

/*
 * AddressSanitizer reserves terabytes of shadow memory: locking it all
 * cannot succeed, so a sanitizer build cannot lock memory at all.  Such a
 * build is for tests, never for real swap: its lock_memory default is
 * "try" (config.c), and "required" is refused there.
 */
#if defined(__SANITIZE_ADDRESS__)
#define HARDEN_CAN_MLOCK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARDEN_CAN_MLOCK 0
#endif
#endif
#ifndef HARDEN_CAN_MLOCK
#define HARDEN_CAN_MLOCK 1
#endif

/*
 * PR_SET_IO_FLUSHER: our allocations then never wait on I/O (which could be
 * I/O to us).  Must run before any thread starts, since threads inherit it.
 * Needs CAP_SYS_RESOURCE; without it we warn and go on.
 */
void harden_io_flusher(void);

/*
 * mlockall(MCL_CURRENT | MCL_FUTURE): none of our pages may be swapped out
 * (to ourselves).  Not MCL_ONFAULT, which would move page faults into the
 * I/O path.  RLIMIT_MEMLOCK is raised to unlimited first where we may (the
 * arena locks pages again after it gives them back, and without the raise
 * that would need CAP_IPC_LOCK for good).  oom_score_adj = -1000.
 *
 * With `required`, a failure to lock is returned as -errno after a message
 * that says what is at stake and what to set; otherwise it is a warning
 * and 0.
 */
int harden_memory(bool required);

/*
 * Drop every capability (effective, permitted, inheritable, ambient, and
 * the bounding set where CAP_SETPCAP allows), keeping CAP_IPC_LOCK only
 * when RLIMIT_MEMLOCK could not be raised and memory is locked (the arena
 * needs it to lock pages again); lock the securebits so that none can come
 * back; PR_SET_NO_NEW_PRIVS; PR_SET_DUMPABLE 0 (a core file would hold
 * every swapped-out page).  Call before any thread exists.  0 or -errno
 * after a message.
 */
int harden_drop_privileges(void);
/* Call before harden_drop_privileges() in a process that runs workers
 * (keeper.h): CAP_IPC_LOCK, when it is kept, is kept inheritable and
 * ambient too, so that a worker it execs can lock its memory. */
void harden_keep_for_exec(void);

/* What hardening achieved, for the stats file. */
struct harden_state {
	bool memory_locked;		/* mlockall succeeded */
	bool memlock_unlimited;		/* RLIMIT_MEMLOCK is unlimited */
	bool no_new_privs;
	bool dropped;			/* harden_drop_privileges() ran */
	uint64_t caps;			/* capabilities kept (bit = CAP_*) */
	char caps_text[64];		/* their names, comma separated; "none" */
};

const struct harden_state *harden_state(void);

/* Stack size for our own threads: MCL_FUTURE populates whole stacks. */
#define HARDEN_THREAD_STACK	(256u * 1024u)

#endif
