/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing_file: opening the backing file safely and writing its header
 * (backing_file.c); for backing.c only.
 */
#ifndef ZSWAPFS_BACKING_FILE_H
#define ZSWAPFS_BACKING_FILE_H

#include <stddef.h>

/*
 * Open path as a backing file: every check of backing_open (backing.h)
 * before the first change to an existing file, then O_DIRECT and a fresh
 * header.  The descriptor, or -errno with a message in err.
 */
int backing_file_open(const char *path, char *err, size_t errlen);

/* A message into err (which may be NULL). */
void backing_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
