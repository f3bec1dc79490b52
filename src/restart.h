/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * restart: a worker's side of taking over a live FUSE connection (issue 11;
 * the keeper's side is keeper.h).
 *
 * The kernel keeps every request the dead worker had read in the processing
 * list of the open file the keeper holds; FUSE_NOTIFY_RESEND (Linux 6.9+)
 * puts them back in the queue, with bit 63 of their unique set, ahead of
 * the requests nobody read.  Page reads, writes and discards are idempotent,
 * so serving them again is right.  The new worker sends it once, before any
 * of its threads reads a request: sent while a worker holds requests it
 * would queue duplicates, and an old WRITE served after a newer one to the
 * same page would bring stale data back.
 *
 * A libfuse session answers every request with EIO until it has seen
 * FUSE_INIT, which the kernel sends once per connection.  The first worker
 * saves the INIT request when it reads it and its reply before writing it
 * (shm.h).  Every worker then decides on its first request:
 *   - FUSE_INIT (the first worker, or one that died holding INIT: the kernel
 *     queues nothing else before INIT is answered): answered for real;
 *   - anything else: the saved INIT is replayed into this session with its
 *     reply discarded, which must be byte for byte the saved reply: a binary
 *     whose reply differs (another max_write, other flags) would serve a
 *     connection negotiated by another; it refuses, and says why
 *     (RESTART_EXIT_REFUSED).
 */
#ifndef ZSWAPFS_RESTART_H
#define ZSWAPFS_RESTART_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

#include "transport.h"
#include "shm.h"

/* Worker exit statuses the keeper acts on (other than 0: the connection
 * ended, and a crash). */
#define RESTART_EXIT_AGAIN	75	/* `restart`: start a new worker now */
#define RESTART_EXIT_REFUSED	78	/* cannot serve this connection: say why */

/* FUSE_NOTIFY_RESEND: <linux/fuse.h> of Debian 12 is 7.38, this is 7.40. */
#define RESTART_NOTIFY_RESEND	7
/* FUSE_HAS_RESEND, INIT flags bit 39 (flags2 bit 7): the kernel has it. */
#define RESTART_INIT_HAS_RESEND	(1u << 7)

/*
 * The hooks for transport.dev_hooks: save INIT (state), decide on the first request
 * as above, and time the recovery (state->recovery_*_us, from the keeper's
 * died_ns to the first reply written).  se is the worker's session.
 */
const struct transport_dev_hooks *restart_hooks(struct shm_state *state, struct fuse_session *se);

/* Send FUSE_NOTIFY_RESEND on fd.  0 or -errno. */
int restart_resend(int fd);

#endif
