/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * harden: make the daemon safe to swap to.  The kernel sends us pages
 * because it is short of memory; serving them must not need memory the
 * kernel cannot give, and the daemon must be the last thing killed.
 */
#ifndef ZSWAPFS_HARDEN_H
#define ZSWAPFS_HARDEN_H

/*
 * PR_SET_IO_FLUSHER: our allocations then never wait on I/O (which could be
 * I/O to us).  Must run before any thread starts, since threads inherit it.
 * Needs CAP_SYS_RESOURCE; without it we warn and go on.
 */
void harden_io_flusher(void);

/*
 * mlockall(MCL_CURRENT | MCL_FUTURE): none of our pages may be swapped out
 * (to ourselves).  Not MCL_ONFAULT, which would move page faults into the
 * I/O path.  oom_score_adj = -1000.  Returns 0, or -errno when locking
 * failed (the caller decides whether that is fatal).
 */
int harden_memory(void);

/* Stack size for our own threads: MCL_FUTURE populates whole stacks. */
#define HARDEN_THREAD_STACK	(256u * 1024u)

#endif
