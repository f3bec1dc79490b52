/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dict: compression dictionaries as bytes: train one from sample pages, load
 * one from a file, save one to a file.
 *
 * A dictionary file is what `zstd --train` writes and what kernel zram's
 * `algorithm_params dict=PATH` reads: either a zstd-format dictionary (magic
 * 0xEC30A437, entropy tables, then content) or raw content (any bytes).
 * Both codecs take either kind: zstd uses the tables of a zstd-format one,
 * lz4 uses the last 64 KiB of the file as content (a zstd header there is a
 * few hundred bytes that no page matches: measured 0.04 % of ratio).
 *
 * Making a dictionary usable by a codec is codec_dict_create()'s business
 * (codec.h); this module knows nothing of codecs.
 *
 * A dictionary holds verbatim stretches of the pages it was trained on, that
 * is of swapped memory: files are created mode 0600, like the swap itself.
 */
#ifndef ZSWAPFS_DICT_H
#define ZSWAPFS_DICT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Largest dictionary file accepted.  lz4 uses at most 64 KiB; zstd could use
 * more, but its gain on 4 KiB pages stops growing long before (and a CDict
 * costs about 6 times the dictionary in memory): 1 MiB leaves room for
 * experiments and refuses, say, a swap image given by mistake.
 */
#define DICT_MAX_SIZE		(1u << 20)
/* Shorter dictionaries are silently ignored by zstd and cannot be hashed by lz4. */
#define DICT_MIN_SIZE		8u
/* What training aims for: lz4's whole window, 64 KiB. */
#define DICT_TRAIN_SIZE		(64u << 10)

/* The magic number of a zstd-format dictionary (little endian at offset 0). */
#define DICT_ZSTD_MAGIC		0xEC30A437u

/* True when buf starts like a zstd-format dictionary. */
bool dict_is_zstd_format(const void *buf, size_t len);

/*
 * Check len bytes at buf as a dictionary: DICT_MIN_SIZE..DICT_MAX_SIZE bytes;
 * a zstd-format one must have valid entropy tables (zstd accepts its
 * header); something that is clearly not a dictionary (a zstd or lz4 frame,
 * that is a compressed file) is refused.  Raw content cannot be checked
 * further: any bytes are a valid raw dictionary.  Returns 0, -EINVAL (or
 * -EFBIG when too large) with a message in errbuf (without a file name: the
 * caller prefixes what it was reading), or -ENOMEM.
 */
int dict_check(const void *buf, size_t len, char *errbuf, size_t errlen);

/*
 * Read the dictionary file at path into a new buffer (*bufp, free()) of *lenp
 * bytes and dict_check() it.  Refused with a message naming the file: a
 * missing or unreadable file, one that is not a regular file, empty, larger
 * than DICT_MAX_SIZE, or failing dict_check.  Returns 0 or -errno (-ENOENT,
 * -EACCES, -EINVAL, -EFBIG, -ENOMEM, -EIO, ...); *bufp is untouched on
 * failure.
 */
int dict_load(const char *path, void **bufp, size_t *lenp, char *errbuf, size_t errlen);

/*
 * Write len bytes as the dictionary file at path, atomically: a temporary
 * file (mode 0600) in the same directory, fsync, rename over path, fsync of
 * the directory.  Either path has the whole new dictionary afterwards, or it
 * is unchanged.  Returns 0 or -errno with a message naming the file.
 */
int dict_save(const char *path, const void *buf, size_t len, char *errbuf, size_t errlen);

/*
 * How to train: zstd's fastCover with segments of k bytes scored by d-byte
 * substrings.  k = 0 (or d = 0) asks for zstd's own search instead
 * (ZDICT_trainFromBuffer: it tries several k on the first 3/4 of the
 * samples, scores them on the last 1/4, and returns the winner trained on
 * 3/4 only).  Defaults below: see dict_train.
 */
struct dict_train_params {
	unsigned int k;
	unsigned int d;
};

/*
 * Measured on real process memory (contrib/bench/dictbench.c: 256 MiB of
 * python3, node, cc1plus and java pages, 10 % sampled four ways, 64 KiB
 * dictionary, the other 90 % held out), fixed k = 4096, d = 8 against
 * zstd's own search: lz4 +5.6 to +6.2 % (mean 6.0) instead of +5.0 to
 * +5.4 %, zstd-3 +1.5 to +1.8 % instead of +0.8 to +1.2 %, in about 1 s of
 * CPU instead of 3.5 s.  k from 1024 to 8192, and d = 6, gave lz4 gains
 * within 0.3 % of that mean.  zstd's search loses because samples come in slot order, that is
 * grouped by process: it trains on the first processes' pages and never
 * sees the last one's.
 */
#define DICT_TRAIN_K		4096u
#define DICT_TRAIN_D		8u

/*
 * Train a zstd-format dictionary of at most cap bytes (DICT_TRAIN_SIZE is
 * the one to use) into dst from n samples, the sizes[i] bytes each that lie
 * back to back at samples; params NULL for the defaults.  Returns the
 * dictionary's size (> 0, <= cap) or -EINVAL (too few or too uniform
 * samples, bad params: the reason is in errbuf) or -ENOMEM.  Samples should
 * not be same-filled pages (from all-zero pages zstd makes a 135-byte
 * dictionary of tables alone).
 *
 * Cost (measured with dictbench, 2 vCPU VM under load): 0.8 s of one CPU
 * for 6,488 pages of 4 KiB, 0.1 to 0.2 s for 500 to 2,000 (which gave
 * nearly the same gains), and 7.2 MiB of memory besides the samples
 * (fastCover's tables are 6 << 20 bytes).  It takes no lock and touches no
 * global state, so it runs in any thread; a background thread should lower
 * its own priority first (SCHED_IDLE) so that the I/O path never waits for
 * it, and must not train in the I/O path: it allocates.
 */
long dict_train(void *dst, size_t cap, const void *samples, const size_t *sizes,
		unsigned int n, const struct dict_train_params *params, char *errbuf,
		size_t errlen);

#endif
