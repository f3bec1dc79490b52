/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config: every setting of the daemon, described once in a table (name,
 * type, range, default, help) from which the config file parser, the mount
 * option parser, validation and --help all come.
 *
 * Precedence: built-in defaults < config file < mount options.
 * Errors name where the value came from (file:line, or "mount option") and
 * the key; nothing is half-applied: a failed parse leaves *cfg as it was.
 */
#ifndef ZSWAPFS_CONFIG_H
#define ZSWAPFS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dicttrain.h"
#include "memcg.h"
#include "policy.h"
#include "reserve.h"
#include "seal.h"
#include "store.h"

/* Whether start-up may go on when memory cannot be locked. */
enum zs_lock_memory {
	ZS_LOCK_REQUIRED,		/* refuse to start */
	ZS_LOCK_TRY,			/* warn and go on */
};

/* dict_train: whether the daemon trains dictionaries of its own. */
enum zs_dict_train {
	ZS_DICT_TRAIN_AUTO,		/* when there is none, and when the ratio drifts */
	ZS_DICT_TRAIN_OFF,		/* only on the `train` command */
};

/* What to do at start under a memory cgroup limit (memcg.h says why). */
enum zs_memcg {
	ZS_MEMCG_MOVE,			/* into a cgroup of our own without a limit */
	ZS_MEMCG_REFUSE,		/* refuse to start */
	ZS_MEMCG_IGNORE,		/* go on under the limit */
};

struct zs_group_setting {
	char name[64];			/* as given; "" = none */
	int64_t gid;			/* -1 = none */
};

struct zs_config {
	uint64_t size;			/* bytes of the swap file */
	char algorithm[16];		/* codec name */
	int64_t level;			/* 0 = the codec's default */
	uint64_t mem_limit;		/* bytes; 0 = no limit */
	int64_t threads;		/* request threads */
	int64_t busy_poll_us;		/* spin this long for the next request */
	int64_t request_nice;		/* nice value of the request threads */
	int64_t request_slice_us;	/* their time slice; 0: the kernel's */
	bool fuse_uring;		/* FUSE over io_uring when the kernel allows */
	bool worker_restart;		/* keeper restarts a dead worker (keeper.h) */
	int lock_memory;		/* enum zs_lock_memory */
	/* Who besides root may read `stats` (with allow_other); nobody
	 * else ever reaches `swap` or `control`. */
	struct zs_group_setting stats_group;
	uint64_t reserve;		/* bytes; 0 = sized from the write rate */
	int memcg;			/* enum zs_memcg */

	/* Compression dictionaries (dict.*) */
	char dict[1024];		/* file for `algorithm`; "" = none */
	char recompress_dict[1024];	/* file for `recompress.algorithm`; "" = none */
	int dict_train;			/* enum zs_dict_train */

	/* Idle recompression (recompress.*) */
	bool recompress_enabled;
	char recompress_algorithm[16];
	int64_t recompress_level;
	int64_t recompress_idle_age;	/* seconds */
	uint64_t recompress_threshold;	/* least bytes a page must save */
	int64_t recompress_rate;	/* pages a second; 0 = no limit */

	/* Self-compaction (compact.*) */
	int64_t compact_threshold;	/* % of arena memory unused; 0 = off */

	/* Writeback to a backing file (writeback.*) */
	char writeback_backing_file[1024];	/* "" = none */
	bool writeback_enabled;		/* automatic writeback */
	uint64_t writeback_max_size;	/* bytes; 0 = the swap file's size */
	int64_t writeback_idle_age;	/* seconds; 0 = no idle timer */
	int64_t writeback_high_watermark;	/* % of mem_limit */
	int64_t writeback_low_watermark;
	uint64_t writeback_daily_limit;	/* bytes a day; 0 = no limit */
	int64_t writeback_compact_threshold;	/* % live below which a segment is rewritten */
	bool writeback_promote;		/* reads bring pages back to the arena */
	bool writeback_encrypt;		/* seal objects (AEAD) with a key of this run */

	/* Where the levels were last set ("file:line", "mount option"), for
	 * the check that can only run once the algorithms are known. */
	char level_origin[128];
	char recompress_level_origin[128];
};

/*
 * The settings as the modules take them: everything main.c hands on, so
 * that it copies no setting itself.
 */
struct zs_params {
	struct store_params store;	/* .backing: NULL; the worker attaches it */
	struct policy_config policy;
	struct reserve_config reserve;
	struct dicttrain_config dicttrain;
	enum memcg_mode memcg;
	bool lock_memory_required;
	unsigned int threads;
	unsigned int busy_poll_us;
	int request_nice;
	unsigned int request_slice_us;
	bool fuse_uring;
	bool worker_restart;		/* keeper restarts a dead worker (keeper.h) */
	int64_t stats_gid;		/* -1: none */
	/* The backing file, when backing_path is not NULL */
	const char *backing_path;	/* points into the zs_config */
	uint64_t backing_max_size;	/* bytes, at least one segment */
	enum seal_cipher backing_cipher;	/* SEAL_AUTO or SEAL_NONE */
};

/* Convert validated settings (config_validate) into module parameters. */
void config_params(const struct zs_config *cfg, struct zs_params *p);

/* Fill in the built-in defaults (size depends on the machine's RAM). */
void config_defaults(struct zs_config *cfg);

/* True when name is a setting ("size", "writeback.idle_age", ...). */
bool config_has_key(const char *name);

/*
 * Set one setting from its text form.  `where` names the origin for the
 * message ("mount option", "/etc/zswapfs.conf:12").  Returns 0 or -EINVAL
 * after writing a message to errbuf.
 */
int config_set(struct zs_config *cfg, const char *name, const char *value,
	       const char *where, char *errbuf, size_t errlen);

/* Read a libconfig file.  Returns 0, or -EINVAL/-ENOENT with a message. */
int config_load_file(struct zs_config *cfg, const char *path, char *errbuf, size_t errlen);

/* Checks across settings (level valid for algorithm, ...). */
int config_validate(const struct zs_config *cfg, char *errbuf, size_t errlen);

/* The settings with their defaults and help, for --help. */
void config_print_help(FILE *out);

/* Parse "4G", "512M", "100K", "4096", "25%" (of RAM when pct_ok). */
int config_parse_size(const char *text, bool pct_ok, uint64_t *out);

#endif
