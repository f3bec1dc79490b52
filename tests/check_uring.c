/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for the FUSE over io_uring transport's own parts: the FUSE_INIT
 * flag, replies copied into an entry's buffers (and not copied when a read
 * already decompressed into the payload), replies that do not fit, the
 * queue count, and a queue the kernel refuses (a file that is not
 * /dev/fuse), which must end at once with an error so that the daemon
 * stays on /dev/fuse.  Requests served through a real ring are tested
 * against a mount in tests/uring.sh.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "uring.h"

START_TEST(test_init_flags)
{
	struct fuse_init_out o;

	memset(&o, 0, sizeof(o));
	o.flags = FUSE_ASYNC_READ;
	ck_assert(uring_init_reply_flags(&o, sizeof(o)));
	ck_assert(o.flags & FUSE_INIT_EXT);
	ck_assert(o.flags & FUSE_ASYNC_READ);		/* kept */
	ck_assert_uint_eq(o.flags2, 1u << (41 - 32));	/* FUSE_OVER_IO_URING */

	/* a reply of an old protocol has no flags2: left alone */
	memset(&o, 0, sizeof(o));
	ck_assert(!uring_init_reply_flags(&o, offsetof(struct fuse_init_out, flags2)));
	ck_assert_uint_eq(o.flags, 0);
}
END_TEST

struct fake_entry {
	struct uring_req_header hdr;
	unsigned char payload[8192];
};

static void fake_req(struct fake_entry *e, struct uring_req *r, size_t cap)
{
	memset(e, 0xee, sizeof(*e));
	memset(r, 0, sizeof(*r));
	r->hdr = &e->hdr;
	r->payload = e->payload;
	r->payload_cap = cap;
}

START_TEST(test_reply_copies)
{
	static struct fake_entry e;
	struct uring_req r;
	struct fuse_out_header out = { .len = 0, .error = 0, .unique = 42 };
	char a[100], b[300];
	struct iovec iov[3] = {
		{ &out, sizeof(out) }, { a, sizeof(a) }, { b, sizeof(b) },
	};
	struct fuse_out_header got;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	fake_req(&e, &r, sizeof(e.payload));
	ck_assert_int_eq(uring_reply(&r, iov, 3), (long)(sizeof(out) + 400));
	ck_assert(r.replied);
	memcpy(&got, e.hdr.in_out, sizeof(got));
	ck_assert_uint_eq(got.unique, 42);
	ck_assert_uint_eq(e.hdr.ent.payload_sz, 400);
	ck_assert(memcmp(e.payload, a, 100) == 0);
	ck_assert(memcmp(e.payload + 100, b, 300) == 0);
	ck_assert_uint_eq(e.payload[400], 0xee);	/* nothing past the reply */

	/* an error reply: header only, no payload */
	fake_req(&e, &r, sizeof(e.payload));
	out.error = -EIO;
	ck_assert_int_eq(uring_reply(&r, iov, 1), (long)sizeof(out));
	ck_assert_uint_eq(e.hdr.ent.payload_sz, 0);
	memcpy(&got, e.hdr.in_out, sizeof(got));
	ck_assert_int_eq(got.error, -EIO);
}
END_TEST

START_TEST(test_reply_in_place)
{
	static struct fake_entry e;
	struct uring_req r;
	struct fuse_out_header out = { .unique = 7 };
	struct iovec iov[2];
	size_t i;

	/* A read decompressed straight into the payload: the data is already
	 * where it must be, and stays intact. */
	fake_req(&e, &r, sizeof(e.payload));
	for (i = 0; i < 4096; i++)
		e.payload[i] = (unsigned char)(i * 7);
	iov[0] = (struct iovec){ &out, sizeof(out) };
	iov[1] = (struct iovec){ e.payload, 4096 };
	ck_assert_int_eq(uring_reply(&r, iov, 2), (long)(sizeof(out) + 4096));
	for (i = 0; i < 4096; i++)
		ck_assert_uint_eq(e.payload[i], (unsigned char)(i * 7));
	ck_assert_uint_eq(e.hdr.ent.payload_sz, 4096);
}
END_TEST

START_TEST(test_reply_refused)
{
	static struct fake_entry e;
	static char big[8192];
	struct uring_req r;
	struct fuse_out_header out = { .unique = 9 };
	struct iovec iov[2] = { { &out, sizeof(out) }, { big, sizeof(big) } };
	struct iovec bad = { &out, sizeof(out) - 1 };

	/* more data than the payload holds */
	fake_req(&e, &r, 4096);
	ck_assert_int_eq(uring_reply(&r, iov, 2), -EINVAL);
	ck_assert(!r.replied);
	ck_assert_uint_eq(e.payload[0], 0xee);		/* untouched */
	/* no header, or not a fuse_out_header */
	ck_assert_int_eq(uring_reply(&r, iov, 0), -EINVAL);
	ck_assert_int_eq(uring_reply(&r, &bad, 1), -EINVAL);
	ck_assert(!r.replied);
}
END_TEST

/*
 * The kernel makes one queue per possible CPU (num_possible_cpus()) and
 * uses the rings only once every one of them is registered: count them the
 * kernel's way, from /sys/devices/system/cpu/possible ("0-3,8-11"), not
 * with the call uring_nr_queues() makes.
 */
static unsigned int possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	unsigned int n = 0, a, b;
	int c;

	ck_assert_ptr_nonnull(f);
	for (;;) {
		ck_assert_int_eq(fscanf(f, "%u", &a), 1);
		b = a;
		c = fgetc(f);
		if (c == '-') {
			ck_assert_int_eq(fscanf(f, "%u", &b), 1);
			c = fgetc(f);
		}
		ck_assert_uint_ge(b, a);
		n += b - a + 1;
		if (c != ',')
			break;
	}
	fclose(f);
	return n;
}

START_TEST(test_nr_queues)
{
	size_t max = uring_max_request();

	ck_assert_uint_ge(uring_nr_queues(), 1);
	ck_assert_uint_eq(uring_nr_queues(), possible_cpus());
	/* a power of two from 128 KiB to 1 MiB, within the budget where it can be */
	ck_assert_uint_ge(max, 128 * 1024);
	ck_assert_uint_le(max, 1024 * 1024);
	ck_assert_uint_eq(max & (max - 1), 0);
	if (max > 128 * 1024)
		ck_assert_uint_le(max * 2 * uring_nr_queues(), 16u << 20);
}
END_TEST

static void never_called(void *arg, struct uring_req *r)
{
	(void)arg;
	(void)r;
	ck_abort_msg("a request on a queue the kernel refused");
}

/* A file that is not /dev/fuse (a pipe; not /dev/null, which accepts any
 * command for benchmarking): io_uring refuses the command.  The queue must
 * give up at once with the error, not wait for requests. */
START_TEST(test_refused_queue)
{
	int pipefd[2];
	int fd = pipe2(pipefd, O_CLOEXEC) ? -1 : pipefd[0];
	int stop = eventfd(0, EFD_CLOEXEC);
	struct uring_queue *q;
	struct timespec t0, t1;
	int err;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(stop, 0);
	q = uring_queue_create(fd, 0, 2, 64 * 1024);
	ck_assert_msg(q, "uring_queue_create: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = uring_queue_serve(q, stop, never_called, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(err, 0);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 5);
	ck_assert_uint_eq(uring_queue_served(q), 0);
	uring_queue_destroy(q);
	close(stop);
	close(pipefd[0]);
	close(pipefd[1]);
}
END_TEST

static Suite *uring_suite(void)
{
	Suite *s = suite_create("uring");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_init_flags);
	tcase_add_test(tc, test_reply_copies);
	tcase_add_test(tc, test_reply_in_place);
	tcase_add_test(tc, test_reply_refused);
	tcase_add_test(tc, test_nr_queues);
	tcase_add_test(tc, test_refused_queue);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(uring_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
