/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "harden.h"
#include "log.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

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

/* AddressSanitizer reserves terabytes of shadow memory: locking it all
 * cannot succeed.  A sanitizer build is for tests, not for real swap. */
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

int harden_memory(void)
{
	int err = 0;

	if (!HARDEN_CAN_MLOCK)
		log_warn("sanitizer build: memory is not locked");
	else if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		err = -errno;
		log_warn("mlockall: %s: the daemon's own memory may be swapped out",
			 strerror(errno));
	}
	oom_protect();
	return err;
}
