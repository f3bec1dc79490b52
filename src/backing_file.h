/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing_file: the backing file as a file (backing_file.c): its geometry
 * and header, which backing.h hands on to its users, and opening it
 * safely, for backing.c only.
 */
#ifndef ZSWAPFS_BACKING_FILE_H
#define ZSWAPFS_BACKING_FILE_H

#include <stddef.h>

#define BACKING_SEG_SIZE	(1u << 20)
#define BACKING_ALIGN		4096u		/* O_DIRECT: buffers, offsets, sizes */
#define BACKING_FILE_HDR_SIZE	BACKING_ALIGN	/* the file's header: segment 0's first block */
#define BACKING_FILE_VERSION	1u

/*
 * Open path as a backing file: every check of backing_open (backing.h)
 * before the first change to an existing file, then O_DIRECT and a fresh
 * header.  The descriptor, or -errno with a message in err.
 */
int backing_file_open(const char *path, char *err, size_t errlen);

/*
 * The end of the file's use (the daemon's end, not a worker's: backing.h,
 * Restart): truncate it to its header, so that the next start knows it for
 * ours and no swapped memory stays on the disk, and close fd.
 */
void backing_file_close(int fd);

/* A message into err (which may be NULL). */
void backing_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
