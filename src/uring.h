/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * uring: FUSE over io_uring (Linux 6.14+, ABI 7.42), the transport that
 * skips read()/write() on /dev/fuse.
 *
 * The kernel keeps one queue of requests per CPU and puts a request on the
 * queue of the CPU that sent it.  We register a few entries (a header
 * buffer and a payload buffer each) on every queue, from a thread bound to
 * that CPU: the loop worker that sends a swap request then wakes a thread
 * on its own CPU (~3 us on this VM) instead of one on the other (~27 us),
 * and one io_uring_enter() both answers a request and waits for the next.
 * DESIGN.md, "Speed", has the measurements behind this.
 *
 * The kernel uses the ring only when the fuse module allows it
 * (/sys/module/fuse/parameters/enable_uring = Y) and the daemon said so in
 * its FUSE_INIT reply (uring_init_reply_flags); until every CPU's queue has
 * an entry, and for FORGET and INTERRUPT always, requests still come
 * through /dev/fuse.  libfuse 3.14 knows nothing of this: this module only
 * moves bytes, and fs.c hands each request to libfuse as if it had been
 * read from /dev/fuse.
 */
#ifndef ZSWAPFS_URING_H
#define ZSWAPFS_URING_H

#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The buffers of one ring entry, as the kernel lays them out (Linux 6.14+,
 * protocol 7.42).  The kernel writes a request into them and reads the
 * reply from them. */
#define URING_HEADER_AREA	128u

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;		/* the request's id, echoed in the commit */
	uint32_t payload_sz;		/* bytes used in the payload, both ways */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[URING_HEADER_AREA];	/* fuse_in_header / fuse_out_header */
	char op_in[URING_HEADER_AREA];	/* the opcode's own struct */
	struct uring_ent_in_out ent;
};

/* Whether the fuse module lets this daemon use io_uring. */
bool uring_kernel_enabled(void);

/* Turn a FUSE_INIT reply (struct fuse_init_out, `len` bytes) into one that
 * asks for io_uring.  False if the reply is too short to carry flags2. */
bool uring_init_reply_flags(void *init_out, size_t len);

/* How many queues the kernel expects: one per possible CPU. */
unsigned int uring_nr_queues(void);

/* One request taken from a ring entry, and the reply that goes back. */
struct uring_req {
	const struct fuse_in_header *in;
	const void *op_in;		/* the opcode's own struct (in_args[0]) */
	size_t op_in_len;
	void *payload;			/* the other arguments (write data, names) */
	size_t payload_len;
	size_t payload_cap;		/* room for the reply's data */
	/* The whole request as /dev/fuse would give it: fuse_in_header, the
	 * opcode's struct and the payload, contiguous (no payload copy). */
	unsigned char *request;
	size_t request_len;
	bool replied;
	struct uring_req_header *hdr;	/* where the reply's header goes */
};

/* Copy a reply (iov[0] = struct fuse_out_header, then its data) into r's
 * header and payload.  Data already in place in r->payload is not copied
 * again.  Returns the bytes taken, or -EINVAL if they do not fit. */
long uring_reply(struct uring_req *r, const struct iovec *iov, int count);

struct uring_queue;

/* Make queue `qid`'s ring with `depth` entries of `payload_size` bytes on
 * /dev/fuse fd `fuse_fd`.  NULL with errno set on failure. */
struct uring_queue *uring_queue_create(int fuse_fd, unsigned int qid, unsigned int depth,
				       size_t payload_size);

/*
 * Register the entries and serve requests until the kernel ends the queue
 * (unmount, abort) or `stop_fd` (an eventfd) becomes readable.  `handle`
 * gets each request and must reply through uring_reply(); a request left
 * without a reply is answered ENOSYS.  Call from one thread only, the one
 * bound to the queue's CPU.  A failed wait on the ring is logged (at most
 * every few seconds), counted and retried after a short pause: only the
 * kernel ending the entries, or stop_fd, ends the queue.  Returns 0, or
 * -errno if the kernel refused the ring (e.g. -EOPNOTSUPP: not enabled),
 * before any request was served.
 */
int uring_queue_serve(struct uring_queue *q, int stop_fd,
		      void (*handle)(void *arg, struct uring_req *r), void *arg);

/* Requests served so far by this queue. */
uint64_t uring_queue_served(const struct uring_queue *q);

void uring_queue_destroy(struct uring_queue *q);

/*
 * ---- A libfuse session over the rings ----
 * One FUSE session per process.  libfuse 3.14 reads and writes /dev/fuse
 * through our functions (fuse_session_custom_io): the read notes which
 * request is FUSE_INIT, the write asks for io_uring in its reply, and once
 * the kernel has that reply one thread per CPU registers its queue.  A ring
 * request is handed to fuse_session_process_buf() laid out as /dev/fuse
 * would give it, and the reply libfuse writes goes back into the ring.
 */
struct uring_session_hooks {
	/* In each queue thread, before it serves and after it stops: per
	 * thread state of the file system (codec contexts, buffers). */
	int (*thread_start)(void *arg, unsigned int qid);
	void (*thread_stop)(void *arg, unsigned int qid);
	/* A read of /dev/fuse failed with `err` (-errno), other than the
	 * errors of normal operation (EAGAIN, EINTR, ENOENT, ENODEV).  With
	 * this hook the error is the caller's to log and count, and libfuse
	 * sees EAGAIN (it would print every one to stderr); NULL: libfuse
	 * sees the error. */
	void (*read_error)(void *arg, int err);
	void *arg;
};

/* The largest request the rings' buffers should be made for: 1 MiB, less
 * on machines with many CPUs, so that all queues together lock at most
 * 16 MiB.  The file system sets max_write to it (the kernel sizes ring
 * entries by max_write). */
size_t uring_max_request(void);

/* Ask for the rings on mounted session `se`, if the kernel allows them.
 * `hooks` may be NULL.  Returns whether they will be tried. */
bool uring_session_want(struct fuse_session *se, const struct uring_session_hooks *hooks);

/* Call after each request served from /dev/fuse: sets the rings up right
 * after FUSE_INIT has been answered.  Cheap otherwise. */
void uring_session_poll(void);

/* Stop and join the queue threads (before the session is unmounted). */
void uring_session_stop(void);

/* The ring request the calling thread is serving, or NULL. */
struct uring_req *uring_current(void);

/* Requests served through the rings so far. */
uint64_t uring_session_requests(void);

/* Failed waits on the rings (io_uring_enter), each retried. */
uint64_t uring_session_errors(void);

#endif
