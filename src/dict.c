/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dict: train, check, load and save dictionary bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* fastCover with fixed parameters: exported by every libzstd since 1.3.6. */
#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "dict.h"

/* Frames of compressed files: a dictionary that starts so is a user's mistake. */
#define DICT_ZSTD_FRAME_MAGIC	0xFD2FB528u
#define DICT_LZ4_FRAME_MAGIC	0x184D2204u

static uint32_t dict_le32(const void *p)
{
	const unsigned char *b = p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

bool dict_is_zstd_format(const void *buf, size_t len)
{
	return len >= 8 && dict_le32(buf) == DICT_ZSTD_MAGIC;
}

/*
 * zstd checks a dictionary's tables twice, once for each direction, and
 * either may refuse it.  The compressor's check is what ZDICT_getDictHeaderSize
 * does too, but that needs libzstd 1.4.5; compressing one byte with the
 * dictionary works with any version and tells corrupt from out of memory.
 */
static int dict_check_zstd(const void *buf, size_t len, char *errbuf, size_t errlen)
{
	unsigned char out[64];
	ZSTD_CCtx *cctx;
	ZSTD_DDict *ddict;
	size_t r;

	cctx = ZSTD_createCCtx();
	if (!cctx)
		return -ENOMEM;
	r = ZSTD_compress_usingDict(cctx, out, sizeof(out), "", 1, buf, len, 1);
	ZSTD_freeCCtx(cctx);
	if (ZSTD_isError(r)) {
		if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		snprintf(errbuf, errlen, "a zstd-format dictionary whose tables zstd refuses (%s)",
			 ZSTD_getErrorName(r));
		return -EINVAL;
	}
	/* NULL for corrupt tables or no memory; the compressor just had memory. */
	ddict = ZSTD_createDDict(buf, len);
	if (!ddict) {
		snprintf(errbuf, errlen, "a zstd-format dictionary whose tables the zstd "
			 "decoder refuses");
		return -EINVAL;
	}
	ZSTD_freeDDict(ddict);
	return 0;
}

int dict_check(const void *buf, size_t len, char *errbuf, size_t errlen)
{
	uint32_t magic;

	if (len == 0) {
		snprintf(errbuf, errlen, "the dictionary is empty");
		return -EINVAL;
	}
	if (len < DICT_MIN_SIZE) {
		snprintf(errbuf, errlen, "the dictionary has %zu bytes, fewer than the %u a "
			 "dictionary needs", len, DICT_MIN_SIZE);
		return -EINVAL;
	}
	if (len > DICT_MAX_SIZE) {
		snprintf(errbuf, errlen, "the dictionary has %zu bytes, more than the %u (1 MiB) "
			 "allowed", len, DICT_MAX_SIZE);
		return -EFBIG;
	}
	magic = dict_le32(buf);
	if (magic == DICT_ZSTD_FRAME_MAGIC || magic == DICT_LZ4_FRAME_MAGIC) {
		snprintf(errbuf, errlen, "this is a %s-compressed file, not a dictionary "
			 "(decompress it first)", magic == DICT_LZ4_FRAME_MAGIC ? "lz4" : "zstd");
		return -EINVAL;
	}
	if (magic == DICT_ZSTD_MAGIC)
		return dict_check_zstd(buf, len, errbuf, errlen);
	/* Raw content: any bytes are a valid dictionary, if not a useful one. */
	return 0;
}

int dict_load(const char *path, void **bufp, size_t *lenp, char *errbuf, size_t errlen)
{
	char why[160];
	unsigned char *buf = NULL;
	struct stat sb;
	size_t len = 0;
	ssize_t n;
	int fd, ret;

	/* O_NONBLOCK: a FIFO given by mistake must not hang the daemon's start. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		snprintf(errbuf, errlen, "%s: cannot open the dictionary: %s", path,
			 strerror(-ret));
		return ret;
	}
	if (fstat(fd, &sb)) {
		ret = -errno;
		snprintf(errbuf, errlen, "%s: %s", path, strerror(-ret));
		goto out_close;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(errbuf, errlen, "%s: the dictionary is not a regular file", path);
		ret = -EINVAL;
		goto out_close;
	}
	if (sb.st_size == 0) {
		snprintf(errbuf, errlen, "%s: the dictionary file is empty", path);
		ret = -EINVAL;
		goto out_close;
	}
	if (sb.st_size > DICT_MAX_SIZE) {
		snprintf(errbuf, errlen, "%s: the dictionary file has %lld bytes, more than the "
			 "%u (1 MiB) allowed", path, (long long)sb.st_size, DICT_MAX_SIZE);
		ret = -EFBIG;
		goto out_close;
	}
	/* One byte more than allowed: a file that grew meanwhile is caught too. */
	buf = malloc(DICT_MAX_SIZE + 1);
	if (!buf) {
		snprintf(errbuf, errlen, "%s: out of memory", path);
		ret = -ENOMEM;
		goto out_close;
	}
	while (len < DICT_MAX_SIZE + 1) {
		n = read(fd, buf + len, DICT_MAX_SIZE + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			snprintf(errbuf, errlen, "%s: reading the dictionary: %s", path,
				 strerror(-ret));
			goto out_free;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	ret = dict_check(buf, len, why, sizeof(why));
	if (ret) {
		snprintf(errbuf, errlen, "%s: %s", path, why);
		goto out_free;
	}
	/* Give back what the 1 MiB buffer does not need; failing to is harmless. */
	{
		void *shrunk = realloc(buf, len);

		if (shrunk)
			buf = shrunk;
	}
	*bufp = buf;
	*lenp = len;
	close(fd);
	return 0;

out_free:
	free(buf);
out_close:
	close(fd);
	return ret;
}

static int dict_write_all(int fd, const unsigned char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int dict_save(const char *path, const void *buf, size_t len, char *errbuf, size_t errlen)
{
	char tmp[PATH_MAX], dir[PATH_MAX], why[160];
	int fd, dfd, ret;

	ret = dict_check(buf, len, why, sizeof(why));
	if (ret) {
		snprintf(errbuf, errlen, "%s: not saved: %s", path, why);
		return ret;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp) ||
	    snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		snprintf(errbuf, errlen, "%s: the path is too long", path);
		return -ENAMETOOLONG;
	}
	/* mkstemp creates the file 0600, which the contents need. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(errbuf, errlen, "%s: cannot create a file beside it: %s", path,
			 strerror(-ret));
		return ret;
	}
	ret = dict_write_all(fd, buf, len);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		snprintf(errbuf, errlen, "%s: writing the dictionary: %s", path, strerror(-ret));
		unlink(tmp);
		return ret;
	}
	/* The rename is durable once the directory is: a failure here is only logged. */
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd))
			ret = -errno;
		close(dfd);
	}
	if (ret)
		snprintf(errbuf, errlen, "%s: saved, but syncing its directory failed: %s",
			 path, strerror(-ret));
	return ret;
}

long dict_train(void *dst, size_t cap, const void *samples, const size_t *sizes,
		unsigned int n, const struct dict_train_params *params, char *errbuf,
		size_t errlen)
{
	static const struct dict_train_params defaults = { DICT_TRAIN_K, DICT_TRAIN_D };
	ZDICT_fastCover_params_t fc;
	size_t r;

	if (!params)
		params = &defaults;
	if (!n || cap < DICT_MIN_SIZE || cap > DICT_MAX_SIZE) {
		snprintf(errbuf, errlen, "nothing to train on (%u samples, %zu bytes wanted)",
			 n, cap);
		return -EINVAL;
	}
	if (!params->k || !params->d) {
		r = ZDICT_trainFromBuffer(dst, cap, samples, sizes, n);
	} else {
		/*
		 * One pass, single threaded.  f (the frequency table: 6 << f
		 * bytes) and accel stay zstd's defaults, 20 and 1; the level
		 * only shapes the entropy tables, 3 is what the store uses.
		 */
		memset(&fc, 0, sizeof(fc));
		fc.k = params->k;
		fc.d = params->d;
		fc.zParams.compressionLevel = 3;
		r = ZDICT_trainFromBuffer_fastCover(dst, cap, samples, sizes, n, fc);
	}
	if (ZDICT_isError(r)) {
		if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		snprintf(errbuf, errlen, "training failed: %s", ZDICT_getErrorName(r));
		return -EINVAL;
	}
	return (long)r;
}
