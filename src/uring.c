/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* CPU_SET, pthread_setname_np; also built into the bench's noop_fuse */
#endif
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "log.h"
#include "page.h"
#include "uring.h"

/* The command ABI (Linux 6.14+, protocol 7.42; Debian 12's headers predate
 * it).  The buffer structs are in uring.h. */
#define URING_FUSE_OVER_IO_URING	(1ULL << 41)	/* FUSE_INIT flag */
#define URING_CMD_REGISTER		1u	/* register an entry, fetch a request */
#define URING_CMD_COMMIT_AND_FETCH	2u	/* answer a request, fetch the next */

/* Sits in the 80-byte command area of a 128-byte SQE. */
struct uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

/* user_data of the stop poll; entries use their address. */
#define STOP_TAG	1u

/*
 * An entry's memory: the header the kernel reads and writes, then our own
 * room for a copy of fuse_in_header and the opcode's struct, then the
 * payload.  The copies go right before the payload, so a request is laid
 * out as read() from /dev/fuse would give it without copying the payload.
 */
#define PREFIX_ROOM	256u

struct uring_entry {
	struct uring_req_header *hdr;
	unsigned char *payload;		/* PREFIX_ROOM bytes of ours before it */
	struct iovec iov[2];		/* what REGISTER hands the kernel */
	bool live;			/* registered, the kernel may answer it */
};

struct uring_queue {
	struct io_uring ring;
	int fuse_fd;
	unsigned int qid, depth;
	size_t payload_size;
	void *buffers;			/* one mapping for all headers and payloads */
	size_t buffers_len;
	uint64_t served;
	struct uring_entry ent[];
};

bool uring_kernel_enabled(void)
{
	char c = 'N';
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "re");

	if (!f)
		return false;
	if (fread(&c, 1, 1, f) != 1)
		c = 'N';
	fclose(f);
	return c == 'Y' || c == 'y' || c == '1';
}

bool uring_init_reply_flags(void *init_out, size_t len)
{
	struct fuse_init_out *o = init_out;

	if (len < offsetof(struct fuse_init_out, flags2) + sizeof(o->flags2))
		return false;
	/* flags2 carries bits 32..63 only when FUSE_INIT_EXT is set. */
	o->flags |= FUSE_INIT_EXT;
	o->flags2 |= (uint32_t)(URING_FUSE_OVER_IO_URING >> 32);
	return true;
}

unsigned int uring_nr_queues(void)
{
	/* The kernel makes num_possible_cpus() queues; get_nprocs_conf()
	 * counts the same CPUs (those in /sys/devices/system/cpu). */
	int n = get_nprocs_conf();

	return n > 0 ? (unsigned int)n : 1;
}

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

struct uring_queue *uring_queue_create(int fuse_fd, unsigned int qid, unsigned int depth,
				       size_t payload_size)
{
	size_t hdr_size = round_up(sizeof(struct uring_req_header), 64);
	struct uring_queue *q;
	unsigned char *p;
	unsigned int i;
	int err;

	q = calloc(1, sizeof(*q) + depth * sizeof(q->ent[0]));
	if (!q)
		return NULL;
	q->fuse_fd = fuse_fd;
	q->qid = qid;
	q->depth = depth;
	q->payload_size = payload_size = round_up(payload_size, ZS_PAGE_SIZE);
	_Static_assert(PREFIX_ROOM >= sizeof(struct fuse_in_header) + URING_HEADER_AREA,
		       "room for the request's headers before the payload");
	/* One answer and one stop poll per entry at most in flight; the
	 * 128-byte SQEs carry the command structs. */
	/* Measured on 2 vCPUs (fio 4 KiB QD1 through loop): plain flags as
	 * fast as IORING_SETUP_COOP_TASKRUN; IORING_SETUP_DEFER_TASKRUN hung
	 * the first request, so it is not used. */
	err = io_uring_queue_init(2 * depth + 2, &q->ring, IORING_SETUP_SQE128);
	if (err) {
		free(q);
		errno = -err;
		return NULL;
	}
	q->buffers_len = depth * (hdr_size + PREFIX_ROOM + payload_size);
	q->buffers = mmap(NULL, q->buffers_len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (q->buffers == MAP_FAILED) {
		err = errno;
		io_uring_queue_exit(&q->ring);
		free(q);
		errno = err;
		return NULL;
	}
	p = q->buffers;
	for (i = 0; i < depth; i++, p += hdr_size + PREFIX_ROOM + payload_size) {
		struct uring_entry *e = &q->ent[i];

		e->hdr = (struct uring_req_header *)(void *)p;
		e->payload = p + hdr_size + PREFIX_ROOM;
		e->iov[0].iov_base = e->hdr;
		e->iov[0].iov_len = sizeof(*e->hdr);
		e->iov[1].iov_base = e->payload;
		e->iov[1].iov_len = payload_size;
	}
	return q;
}

void uring_queue_destroy(struct uring_queue *q)
{
	if (!q)
		return;
	/* Closing the ring cancels what the kernel still holds of ours; only
	 * then may the buffers go. */
	io_uring_queue_exit(&q->ring);
	munmap(q->buffers, q->buffers_len);
	free(q);
}

uint64_t uring_queue_served(const struct uring_queue *q)
{
	return q->served;
}

static struct io_uring_sqe *next_sqe(struct uring_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {	/* cannot happen with 2 * depth + 2 entries, but be safe */
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	return sqe;
}

/* Queue a REGISTER or a COMMIT_AND_FETCH for entry e. */
static int queue_cmd(struct uring_queue *q, struct uring_entry *e, unsigned int op,
		     uint64_t commit_id)
{
	struct io_uring_sqe *sqe = next_sqe(q);
	struct uring_cmd_req *cmd;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe));	/* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->fuse_fd;
	sqe->cmd_op = op;
	sqe->addr = (uint64_t)(uintptr_t)e->iov;
	sqe->len = 2;
	sqe->user_data = (uint64_t)(uintptr_t)e;
	cmd = (struct uring_cmd_req *)(void *)sqe->cmd;
	cmd->qid = (uint16_t)q->qid;
	cmd->commit_id = commit_id;
	return 0;
}

long uring_reply(struct uring_req *r, const struct iovec *iov, int count)
{
	size_t data = 0, off = 0;
	int i;

	if (count < 1 || iov[0].iov_len != sizeof(struct fuse_out_header))
		return -EINVAL;
	for (i = 1; i < count; i++)
		data += iov[i].iov_len;
	if (data > r->payload_cap)
		return -EINVAL;
	memcpy(r->hdr->in_out, iov[0].iov_base, sizeof(struct fuse_out_header));
	for (i = 1; i < count; i++) {
		/* fs.c reads straight into the payload: no copy then */
		if (iov[i].iov_base != (char *)r->payload + off)
			memmove((char *)r->payload + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	r->hdr->ent.payload_sz = (uint32_t)data;
	r->replied = true;
	return (long)(sizeof(struct fuse_out_header) + data);
}

/* Answer a request nobody answered, so the kernel's caller is not left
 * waiting. */
static void reply_enosys(struct uring_req *r)
{
	struct fuse_out_header out = {
		.len = sizeof(out), .error = -ENOSYS, .unique = r->in->unique,
	};
	struct iovec iov = { .iov_base = &out, .iov_len = sizeof(out) };

	uring_reply(r, &iov, 1);
}

/* A request has arrived in entry e: hand it over, then queue the commit. */
static int serve_entry(struct uring_queue *q, struct uring_entry *e,
		       void (*handle)(void *arg, struct uring_req *r), void *arg)
{
	struct uring_req r = { .hdr = e->hdr, .payload = e->payload,
			       .payload_cap = q->payload_size };
	/* Copies: the reply overwrites the header area. */
	struct fuse_in_header in;
	uint64_t commit_id = e->hdr->ent.commit_id;
	size_t payload_len = e->hdr->ent.payload_sz;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	r.in = &in;
	r.op_in = e->hdr->op_in;
	r.payload_len = payload_len;
	/* in.len counts the header, the opcode's struct and the payload. */
	if (in.len < sizeof(in) + payload_len ||
	    in.len - sizeof(in) - payload_len > URING_HEADER_AREA ||
	    payload_len > q->payload_size) {
		reply_enosys(&r);	/* not a layout we understand */
	} else {
		r.op_in_len = in.len - sizeof(in) - payload_len;
		r.request = e->payload - r.op_in_len - sizeof(in);
		r.request_len = in.len;
		memcpy(r.request, &in, sizeof(in));
		memcpy(r.request + sizeof(in), e->hdr->op_in, r.op_in_len);
		handle(arg, &r);
		if (!r.replied)
			reply_enosys(&r);
	}
	q->served++;
	return queue_cmd(q, e, URING_CMD_COMMIT_AND_FETCH, commit_id);
}

/* Failed io_uring_enter() calls of all queues. */
static _Atomic uint64_t ring_errors;

/* The pause after a failed wait doubles up to this, so that a lasting
 * error costs a few wake-ups a second, not a CPU. */
#define RING_BACKOFF_MAX_MS	100

/* A wait on the ring failed (-ENOMEM, -EBUSY with the completions
 * overflowing, ...): log it now and then, pause, and let the caller retry.
 * stop_fd ends the pause early. */
static void ring_error(struct uring_queue *q, int err, int stop_fd, int *backoff_ms)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5);
	struct pollfd pfd = { .fd = stop_fd, .events = POLLIN };
	uint64_t held;

	atomic_fetch_add_explicit(&ring_errors, 1, memory_order_relaxed);
	if (log_ratelimit(&rl, &held))
		log_err("FUSE over io_uring: queue %u: waiting for requests: %s; serving goes "
			"on (%llu more since the last message)", q->qid, strerror(-err),
			(unsigned long long)held);
	*backoff_ms = *backoff_ms ? *backoff_ms * 2 : 1;
	if (*backoff_ms > RING_BACKOFF_MAX_MS)
		*backoff_ms = RING_BACKOFF_MAX_MS;
	poll(&pfd, 1, *backoff_ms);
}

uint64_t uring_session_errors(void)
{
	return atomic_load_explicit(&ring_errors, memory_order_relaxed);
}

int uring_queue_serve(struct uring_queue *q, int stop_fd,
		      void (*handle)(void *arg, struct uring_req *r), void *arg)
{
	struct io_uring_sqe *sqe;
	unsigned int i, live = 0;
	bool stop = false;
	int err = 0, refused = 0, backoff_ms = 0;

	sqe = next_sqe(q);
	io_uring_prep_poll_add(sqe, stop_fd, POLLIN);
	sqe->user_data = STOP_TAG;
	for (i = 0; i < q->depth; i++) {
		err = queue_cmd(q, &q->ent[i], URING_CMD_REGISTER, 0);
		if (err)
			return err;
		q->ent[i].live = true;
		live++;
	}
	while (live && !stop) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		err = io_uring_submit_and_wait(&q->ring, 1);
		if (err == -EINTR)
			continue;
		if (err == -EAGAIN || err == -EBUSY || err == -ENOMEM || err == -ETIME) {
			/* Short of memory, or completions overflowing: it
			 * passes.  Entries still registered hold requests the
			 * kernel waits on, so leaving would strand them. */
			ring_error(q, err, stop_fd, &backoff_ms);
			continue;
		}
		if (err < 0) {
			/* The ring itself is unusable (EBADF, EFAULT, ...) */
			log_err("FUSE over io_uring: queue %u: %s: the queue ends", q->qid,
				strerror(-err));
			break;
		}
		err = 0;
		backoff_ms = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			struct uring_entry *e = (struct uring_entry *)(uintptr_t)cqe->user_data;

			seen++;
			if (cqe->user_data == STOP_TAG) {
				stop = true;
				continue;
			}
			if (cqe->res < 0) {
				/* The kernel ended this entry: unmounted or
				 * aborted (-ENOTCONN), or it refuses io_uring
				 * (-EOPNOTSUPP, -EINVAL) before serving any. */
				e->live = false;
				live--;
				if (!q->served && cqe->res != -ENOTCONN)
					refused = cqe->res;
				continue;
			}
			if (!stop)
				serve_entry(q, e, handle, arg);
		}
		io_uring_cq_advance(&q->ring, seen);
	}
	/* Send the last answers; entries still registered are cancelled
	 * when the ring is closed (uring_queue_destroy). */
	io_uring_submit(&q->ring);
	return refused ? refused : err;
}

/* ---- a libfuse session over the rings ----------------------------------- */

/* Buffers per queue: one entry being answered while the next is filled. */
#define SESSION_DEPTH	2
/* All queues' payload buffers together, locked like the rest of us. */
#define SESSION_BUFFER_BUDGET	(16u << 20)

size_t uring_max_request(void)
{
	size_t share = SESSION_BUFFER_BUDGET / ((size_t)uring_nr_queues() * SESSION_DEPTH);
	size_t size = 1u << 20;

	while (size > share && size > 128u * 1024u)	/* 8 CPUs: 1 MiB; 64: 128 KiB */
		size >>= 1;
	return size;
}

struct session_thread {
	unsigned int qid;
	pthread_t tid;
	struct uring_queue *queue;
};

/* One FUSE session per process: libfuse's custom I/O has no other way to
 * reach us than its userdata, which belongs to the file system. */
static struct {
	struct fuse_session *se;
	struct uring_session_hooks hooks;
	size_t payload_size;		/* the kernel's largest request */
	bool wanted;			/* asked for in the FUSE_INIT reply */
	_Atomic uint64_t init_unique;	/* the FUSE_INIT request's id */
	_Atomic bool init_replied;	/* that reply has reached the kernel */
	_Atomic bool pending;		/* rings to be set up */
	int stop_fd;			/* eventfd: ends the queue threads */
	struct session_thread *threads;
	unsigned int nr_threads;
	_Atomic uint64_t requests;
} session = { .stop_fd = -1 };

static __thread struct uring_req *current_req;

struct uring_req *uring_current(void)
{
	return current_req;
}

uint64_t uring_session_requests(void)
{
	return atomic_load_explicit(&session.requests, memory_order_relaxed);
}

static ssize_t session_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	(void)userdata;
	if (n < 0 && session.hooks.read_error && errno != EAGAIN && errno != EINTR &&
	    errno != ENOENT && errno != ENODEV) {
		session.hooks.read_error(session.hooks.arg, -errno);
		errno = EAGAIN;
		return -1;
	}
	if (n >= (ssize_t)sizeof(*in) && in->opcode == FUSE_INIT)
		atomic_store(&session.init_unique, in->unique);
	return n;
}

static ssize_t session_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct uring_req *r = current_req;
	bool init;
	ssize_t n;

	(void)userdata;
	/* The reply to the ring request this thread serves goes to the ring. */
	if (r && iov[0].iov_len == sizeof(*out) && out->unique == r->in->unique) {
		long taken = uring_reply(r, iov, count);

		if (taken < 0) {
			errno = -(int)taken;
			return -1;
		}
		return taken;
	}
	init = iov[0].iov_len == sizeof(*out) && count == 2 && out->error == 0 &&
	       out->unique == atomic_load(&session.init_unique) &&
	       !atomic_load(&session.init_replied);
	if (init) {
		const struct fuse_init_out *o = iov[1].iov_base;

		if (session.wanted && !uring_init_reply_flags(iov[1].iov_base, iov[1].iov_len))
			session.wanted = false;
		if (iov[1].iov_len >= offsetof(struct fuse_init_out, max_pages) + sizeof(o->max_pages))
			session.payload_size = (size_t)o->max_pages * ZS_PAGE_SIZE;
		if (session.payload_size < o->max_write)
			session.payload_size = o->max_write;
	}
	n = writev(fd, iov, count);
	/* Once the kernel has taken the reply, queues may register. */
	if (init && n > 0)
		atomic_store(&session.init_replied, true);
	return n;
}

bool uring_session_want(struct fuse_session *se, const struct uring_session_hooks *hooks)
{
	static const struct fuse_custom_io io = { .read = session_read,
						  .writev = session_writev };

	if (!uring_kernel_enabled())
		return false;
	session.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (session.stop_fd < 0)
		return false;
	if (fuse_session_custom_io(se, &io, fuse_session_fd(se))) {
		close(session.stop_fd);
		session.stop_fd = -1;
		return false;
	}
	session.se = se;
	if (hooks)
		session.hooks = *hooks;
	session.wanted = true;
	atomic_store(&session.pending, true);
	return true;
}

/* A request from a ring: libfuse dispatches it as if read from /dev/fuse. */
static void session_request(void *arg, struct uring_req *r)
{
	struct fuse_buf buf = { .mem = r->request, .size = r->request_len };

	(void)arg;
	atomic_fetch_add_explicit(&session.requests, 1, memory_order_relaxed);
	current_req = r;
	fuse_session_process_buf(session.se, &buf);
	current_req = NULL;
}

static void *session_thread(void *arg)
{
	struct session_thread *t = arg;
	cpu_set_t cpus;
	char name[16];
	int err;

	snprintf(name, sizeof(name), "zswapfs-ring%u", t->qid);
	pthread_setname_np(pthread_self(), name);
	/* On the queue's own CPU: the kernel queues each request on the CPU
	 * that sent it, and the wake-up then stays on that CPU. */
	CPU_ZERO(&cpus);
	CPU_SET(t->qid, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);	/* offline CPU: run anywhere */
	if (session.hooks.thread_start) {
		err = session.hooks.thread_start(session.hooks.arg, t->qid);
		if (err) {
			log_warn("FUSE over io_uring: queue %u: %s", t->qid, strerror(-err));
			return NULL;
		}
	}
	err = uring_queue_serve(t->queue, session.stop_fd, session_request, NULL);
	if (err && t->qid == 0)
		log_warn("FUSE over io_uring refused (%s): requests go through /dev/fuse",
			 strerror(-err));
	if (session.hooks.thread_stop)
		session.hooks.thread_stop(session.hooks.arg, t->qid);
	return NULL;
}

/* One thread and queue per CPU.  A failure leaves the requests on
 * /dev/fuse, which keeps working: the kernel uses the rings only once every
 * queue has an entry. */
static void session_start(void)
{
	unsigned int i, n = uring_nr_queues();
	pthread_attr_t attr;

	session.threads = calloc(n, sizeof(*session.threads));
	if (!session.threads)
		return;
	if (session.payload_size < 8192)
		session.payload_size = 8192;	/* the kernel's FUSE_MIN_READ_BUFFER */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u * 1024u);
	for (i = 0; i < n; i++) {
		struct session_thread *t = &session.threads[i];

		t->qid = i;
		t->queue = uring_queue_create(fuse_session_fd(session.se), i, SESSION_DEPTH,
					      session.payload_size);
		if (!t->queue || pthread_create(&t->tid, &attr, session_thread, t)) {
			log_warn("FUSE over io_uring: no queue %u: %s", i, strerror(errno));
			uring_queue_destroy(t->queue);
			break;
		}
		session.nr_threads++;
	}
	pthread_attr_destroy(&attr);
}

void uring_session_poll(void)
{
	if (atomic_load_explicit(&session.pending, memory_order_relaxed) &&
	    atomic_load(&session.init_replied) && atomic_exchange(&session.pending, false) &&
	    session.wanted)
		session_start();
}

void uring_session_stop(void)
{
	uint64_t one = 1;
	unsigned int i;
	ssize_t r;

	if (session.stop_fd < 0)
		return;
	r = write(session.stop_fd, &one, sizeof(one));
	(void)r;
	for (i = 0; i < session.nr_threads; i++) {
		pthread_join(session.threads[i].tid, NULL);
		uring_queue_destroy(session.threads[i].queue);
	}
	free(session.threads);
	session.threads = NULL;
	session.nr_threads = 0;
	close(session.stop_fd);
	session.stop_fd = -1;
}
