/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats_keys: the keys of the `stats` file, one table in the order they are
 * printed.  stats.c prints through it (it can print no other key), zswapctl
 * reads through it (and from it knows which values are words in --json), and
 * tests/docs.sh checks it against zswapfs(8)'s STATS section and a live
 * mount's output.  Keys are only ever added; zram's names where zram has the
 * figure.  Header only: zswapctl links none of the daemon's modules.
 *
 * X(ID, key, kind, each, unit, help)
 *   ID    STATS_K_<ID> names the key in code;
 *   key   what users see; for a key made for each codec, request kind or
 *         size class, `*` stands for the codec's name, the kind (read,
 *         write, discard) or the class size (see stats_key_name);
 *   kind  NUM (a whole number), WORD (text), NUM_OR_WORD (a number or a
 *         word: --json writes a string only for the word);
 *   each  ONE, CODEC, REQ, CLASS or PATH: one key, or one per codec
 *         (CODEC_LIST order), per request kind (STATS_REQ_LIST order), per
 *         size class in use, per request path (STATS_PATH_LIST order; a
 *         second `*` is the histogram bucket's lower bound in us, lat.h).
 *         Keys of one family that follow each other are printed together
 *         for each member: pages_lz4, bytes_lz4, pages_zstd, ...
 *   unit  bytes, pages, count, ns, us, bytes/s, 0/1, bits, s, ms, x1000
 *         (a ratio in thousandths) or text.
 */
#ifndef ZSWAPFS_STATS_KEYS_H
#define ZSWAPFS_STATS_KEYS_H

#include <stdio.h>
#include <string.h>

/* The request kinds the FUSE layer counts, X(ID, name). */
#define STATS_REQ_LIST(X)	\
	X(READ, read)		\
	X(WRITE, write)		\
	X(DISCARD, discard)

/*
 * The paths a request can take, for the latency histograms (lat.h),
 * X(ID, name): a read served from the arena only, one that read the
 * backing file (from disk or the open segment's buffer), one of only
 * empty or same-filled pages; a write that found room, one that waited for
 * writeback to make it; a discard; and each disk read of the backing file
 * itself (inside a backing read).
 */
#define STATS_PATH_LIST(X)		\
	X(READ_ARENA, read_arena)	\
	X(READ_BACKING, read_backing)	\
	X(READ_SAME, read_same)		\
	X(WRITE_ROOM, write_room)	\
	X(WRITE_WAIT, write_wait)	\
	X(DISCARD, discard)		\
	X(BACKING_PREAD, backing_pread)

#define STATS_KEYS(X) \
	X(ORIG_DATA_SIZE, "orig_data_size", NUM, ONE, "bytes", \
	  "uncompressed bytes of the stored pages") \
	X(COMPR_DATA_SIZE, "compr_data_size", NUM, ONE, "bytes", \
	  "bytes of compressed objects") \
	X(MEM_USED_TOTAL, "mem_used_total", NUM, ONE, "bytes", \
	  "memory the arena holds for them") \
	X(MEM_LIMIT, "mem_limit", NUM, ONE, "bytes", "the arena's limit (0: none)") \
	X(MEM_USED_MAX, "mem_used_max", NUM, ONE, "bytes", "the most mem_used_total reached") \
	X(SAME_PAGES, "same_pages", NUM, ONE, "pages", "pages whose words are all equal") \
	X(PAGES_COMPACTED, "pages_compacted", NUM, ONE, "pages", \
	  "arena pages given back by compaction") \
	X(HUGE_PAGES, "huge_pages", NUM, ONE, "pages", "pages stored raw") \
	X(FAILED_READS, "failed_reads", NUM, ONE, "count", "reads that could not be decompressed") \
	X(FAILED_WRITES, "failed_writes", NUM, ONE, "count", "writes refused for want of memory") \
	X(INVALID_IO, "invalid_io", NUM, ONE, "count", "requests past the end of the file") \
	X(NOTIFY_FREE, "notify_free", NUM, ONE, "pages", "pages freed by discard") \
	X(BD_COUNT, "bd_count", NUM, ONE, "pages", "pages on the backing file") \
	X(BD_READS, "bd_reads", NUM, ONE, "pages", "pages read from the backing file") \
	X(BD_WRITES, "bd_writes", NUM, ONE, "pages", "pages written to the backing file") \
	X(ALGORITHM, "algorithm", WORD, ONE, "text", "the compressor's name") \
	X(DISKSIZE, "disksize", NUM, ONE, "bytes", "the swap file's size") \
	X(PAGES_STORED, "pages_stored", NUM, ONE, "pages", "stored pages") \
	X(NUM_READS, "num_reads", NUM, ONE, "pages", "pages read") \
	X(NUM_WRITES, "num_writes", NUM, ONE, "pages", "pages written") \
	X(CODEC_PAGES, "pages_*", NUM, CODEC, "pages", "stored pages of this compressor") \
	X(CODEC_BYTES, "bytes_*", NUM, CODEC, "bytes", "their compressed bytes") \
	X(RECOMPRESSED, "recompressed", NUM, ONE, "pages", "pages that took the smaller result") \
	X(RECOMPRESS_SKIPPED, "recompress_skipped", NUM, ONE, "pages", \
	  "pages that saved less than the threshold") \
	X(RECOMPRESS_INCOMPRESSIBLE, "recompress_incompressible", NUM, ONE, "pages", \
	  "pages the recompression codec could not get below the huge size") \
	X(RECOMPRESS_PASSES, "recompress_passes", NUM, ONE, "count", \
	  "finished recompression passes") \
	X(RECOMPRESS_PENDING, "recompress_pending", NUM, ONE, "0/1", \
	  "a requested recompression waits or runs") \
	X(COMPACTIONS, "compactions", NUM, ONE, "count", "compaction runs") \
	X(BACKING_BYTES_MAX, "backing_bytes_max", NUM, ONE, "bytes", \
	  "the most the backing file may take") \
	X(BACKING_BYTES_USED, "backing_bytes_used", NUM, ONE, "bytes", \
	  "what the backing file takes") \
	X(BACKING_BYTES_LIVE, "backing_bytes_live", NUM, ONE, "bytes", \
	  "bytes of the live objects on it") \
	X(BACKING_SEGMENTS, "backing_segments", NUM, ONE, "count", "segments in use") \
	X(BACKING_BYTES_WRITTEN, "backing_bytes_written", NUM, ONE, "bytes", \
	  "bytes ever written to the backing file") \
	X(BACKING_COMPACTION_MOVES, "backing_compaction_moves", NUM, ONE, "count", \
	  "objects written again by segment compaction") \
	X(BACKING_HOLES_PUNCHED, "backing_holes_punched", NUM, ONE, "count", \
	  "segments given back to the filesystem") \
	X(BACKING_READ_ERRORS, "backing_read_errors", NUM, ONE, "count", \
	  "objects that could not be read back") \
	X(BACKING_AUTH_FAILURES, "backing_auth_failures", NUM, ONE, "count", \
	  "sealed objects whose tag did not match") \
	X(BACKING_CIPHER, "backing_cipher", WORD, ONE, "text", "how objects are sealed") \
	X(BACKING_WRITE_ERRORS, "backing_write_errors", NUM, ONE, "count", \
	  "segment writes that failed") \
	X(WRITEBACK_FAILED, "writeback_failed", NUM, ONE, "pages", \
	  "pages a writeback kept in RAM") \
	X(WRITEBACK_SPILLS, "writeback_spills", NUM, ONE, "count", \
	  "writes that waited for writeback to make room") \
	X(WRITEBACK_PENDING, "writeback_pending", NUM, ONE, "0/1", \
	  "a writeback command waits or runs") \
	X(WRITEBACK_BUDGET_LEFT, "writeback_budget_left", NUM_OR_WORD, ONE, "bytes", \
	  "bytes of the daily limit left, or unlimited") \
	X(WRITEBACK_STATUS, "writeback_status", WORD, ONE, "text", \
	  "none, ok, full, error or limit") \
	X(RSS_BYTES, "rss_bytes", NUM, ONE, "bytes", "the daemon's resident memory") \
	X(ARENA_MAPPED_BYTES, "arena_mapped_bytes", NUM, ONE, "bytes", \
	  "the arena's mapped chunks") \
	X(REQ_REQS, "*_reqs", NUM, REQ, "count", "FUSE requests served") \
	X(REQ_BYTES, "*_bytes", NUM, REQ, "bytes", "their bytes") \
	X(REQ_ERRORS, "*_errors", NUM, REQ, "count", "their failures") \
	X(REQ_LATENCY_AVG_NS, "*_latency_avg_ns", NUM, REQ, "ns", "average time serving one") \
	X(REQ_LATENCY_MAX_NS, "*_latency_max_ns", NUM, REQ, "ns", "longest time serving one") \
	X(FUSE_TRANSPORT, "fuse_transport", WORD, ONE, "text", "io_uring or dev_fuse") \
	X(URING_REQS, "uring_reqs", NUM, ONE, "count", "requests that came through the rings") \
	X(REQUEST_LOOP_ERRORS, "request_loop_errors", NUM, ONE, "count", \
	  "failed reads and polls of the FUSE transport") \
	X(ACCESS_DENIED, "access_denied", NUM, ONE, "count", \
	  "opens and attribute changes refused") \
	X(LOG_DROPPED, "log_dropped", NUM, ONE, "count", "log messages dropped") \
	X(MEMORY_LOCKED, "memory_locked", NUM, ONE, "0/1", "the daemon's memory is locked") \
	X(NO_NEW_PRIVS, "no_new_privs", NUM, ONE, "0/1", "PR_SET_NO_NEW_PRIVS is set") \
	X(CAPABILITIES, "capabilities", NUM, ONE, "bits", \
	  "the capabilities kept: bit N is capability N") \
	X(FRAG_BYTES, "frag_bytes", NUM, ONE, "bytes", "places in the arena holding no object") \
	X(ARENA_CLASS_BYTES, "arena_class_bytes", NUM, ONE, "bytes", \
	  "places holding an object, at their class size") \
	X(ARENA_TAIL_BYTES, "arena_tail_bytes", NUM, ONE, "bytes", \
	  "ends of spans no place covers") \
	X(RESERVE_BYTES, "reserve_bytes", NUM, ONE, "bytes", "free arena memory resident now") \
	X(RESERVE_TARGET_BYTES, "reserve_target_bytes", NUM, ONE, "bytes", \
	  "what the reserve is kept at") \
	X(RESERVE_DRY, "reserve_dry", NUM, ONE, "count", "writes that found the reserve empty") \
	X(RESERVE_REFILLS, "reserve_refills", NUM, ONE, "count", "refills of the reserve") \
	X(RESERVE_REFILL_BYTES, "reserve_refill_bytes", NUM, ONE, "bytes", \
	  "bytes the refills made resident") \
	X(RESERVE_TRIMMED_BYTES, "reserve_trimmed_bytes", NUM, ONE, "bytes", \
	  "free memory given back to the kernel") \
	X(RESERVE_PEAK_RATE, "reserve_peak_rate", NUM, ONE, "bytes/s", \
	  "the highest write rate seen lately") \
	X(RESERVE_REFILL_MAX_US, "reserve_refill_max_us", NUM, ONE, "us", "the longest refill") \
	X(RESERVE_REFILL_FAILURES, "reserve_refill_failures", NUM, ONE, "count", \
	  "refills the kernel refused") \
	X(RESERVE_WAKEUPS, "reserve_wakeups", NUM, ONE, "count", \
	  "times a request woke the reserve thread") \
	X(RESERVE_REFILL_WAIT_US, "reserve_refill_wait_us", NUM, ONE, "us", \
	  "the longest wait for one chunk of a refill lately, decaying") \
	X(RESERVE_PRESSURE, "reserve_pressure", NUM, ONE, "permille", \
	  "how near the machine is to running out of memory, as the reserve is sized") \
	X(RESERVE_PRESSURE_WAKEUPS, "reserve_pressure_wakeups", NUM, ONE, "count", \
	  "times the PSI trigger woke the reserve thread") \
	X(RESERVE_MEM_AVAILABLE, "reserve_mem_available", NUM, ONE, "bytes", \
	  "MemAvailable as the reserve thread last read it (0: not read)") \
	X(ARENA_DESC_BYTES, "arena_desc_bytes", NUM, ONE, "bytes", \
	  "locked memory holding span descriptors") \
	X(IO_FLUSHER, "io_flusher", NUM, ONE, "0/1", "PR_SET_IO_FLUSHER is in force") \
	X(MEMCG, "memcg", WORD, ONE, "text", "none, moved, ignored or unknown") \
	X(MEMCG_LIMIT_BYTES, "memcg_limit_bytes", NUM, ONE, "bytes", \
	  "the tightest memory limit found (0: none)") \
	X(DICT_GENERATION, "dict_generation", NUM, ONE, "count", \
	  "number of the current dictionary (1, 2, ... as they come; 0: none)") \
	X(DICT_BYTES, "dict_bytes", NUM, ONE, "bytes", "size of the current dictionary") \
	X(DICT_AGE, "dict_age", NUM, ONE, "s", "seconds since it became current") \
	X(DICT_GENERATIONS, "dict_generations", NUM, ONE, "count", \
	  "dictionaries in memory, the current one and older ones pages still need") \
	X(DICT_PAGES_CURRENT, "dict_pages_current", NUM, ONE, "pages", \
	  "pages (arena and backing file) compressed with the current dictionary") \
	X(DICT_PAGES_OLDER, "dict_pages_older", NUM, ONE, "pages", \
	  "pages compressed with older dictionaries") \
	X(DICT_PAGES, "dict_pages", NUM, ONE, "pages", \
	  "pages in the arena compressed with a dictionary (not huge)") \
	X(DICT_DATA_SIZE, "dict_data_size", NUM, ONE, "bytes", "their compressed bytes") \
	X(NODICT_PAGES, "nodict_pages", NUM, ONE, "pages", \
	  "pages in the arena compressed without one (not huge)") \
	X(NODICT_DATA_SIZE, "nodict_data_size", NUM, ONE, "bytes", "their compressed bytes") \
	X(DICT_TRAININGS, "dict_trainings", NUM, ONE, "count", \
	  "trainings whose dictionary became current") \
	X(DICT_TRAIN_ATTEMPTS, "dict_train_attempts", NUM, ONE, "count", \
	  "training passes, those that did not help included") \
	X(DICT_TRAIN_MS, "dict_train_ms", NUM, ONE, "ms", "time spent in them") \
	X(DICT_RING_FULL, "dict_ring_full", NUM, ONE, "count", \
	  "trainings that waited: every generation still needed") \
	X(DICT_RATIO_BEFORE, "dict_ratio_before", NUM, ONE, "x1000", \
	  "last training: ratio of held-out sample pages with the dictionary then current") \
	X(DICT_RATIO_AFTER, "dict_ratio_after", NUM, ONE, "x1000", \
	  "and with the newly trained one") \
	X(DICT_TRAIN_PENDING, "dict_train_pending", NUM, ONE, "0/1", \
	  "a requested training waits or runs") \
	X(RESTART_SAFE, "restart_safe", NUM, ONE, "0/1", \
	  "a dead worker is replaced without losing a page or a request") \
	X(WORKER_GENERATION, "worker_generation", NUM, ONE, "count", \
	  "the worker that serves: 1, 2, ... as they start") \
	X(WORKER_RESTARTS, "worker_restarts", NUM, ONE, "count", \
	  "workers started after one died") \
	X(KEEPER_UPGRADES, "keeper_upgrades", NUM, ONE, "count", \
	  "times the keeper executed the binary on disk in its place (restart keeper)") \
	X(WORKER_UPGRADES, "worker_upgrades", NUM, ONE, "count", \
	  "workers started by the restart command") \
	X(WORKER_RECOVERY_LAST_US, "worker_recovery_last_us", NUM, ONE, "us", \
	  "the last restart: from the death to the new worker serving") \
	X(WORKER_RECOVERY_MAX_US, "worker_recovery_max_us", NUM, ONE, "us", \
	  "the longest such time") \
	X(CLASS_OBJS, "class_*_objs", NUM, CLASS, "count", "objects in the size class") \
	X(CLASS_CAPACITY, "class_*_capacity", NUM, CLASS, "count", "places in the size class") \
	X(CLASS_PAGES, "class_*_pages", NUM, CLASS, "pages", "pages of the size class") \
	X(BACKING_BYTES_READ, "backing_bytes_read", NUM, ONE, "bytes", \
	  "bytes the reads of written-back pages took from the disk") \
	X(WRITEBACK_ROOM_WAIT_NS, "writeback_room_wait_ns", NUM, ONE, "ns", \
	  "time writes spent waiting for writeback to make room") \
	X(WRITEBACK_HEADROOM_BYTES, "writeback_headroom_bytes", NUM, ONE, "bytes", \
	  "room above the high watermark, for a burst of writes") \
	X(LAT_REQS, "lat_*_reqs", NUM, PATH, "count", "requests (disk reads) of the path") \
	X(LAT_NS_TOTAL, "lat_*_ns_total", NUM, PATH, "ns", "their time in all") \
	X(LAT_NS_MAX, "lat_*_ns_max", NUM, PATH, "ns", "the longest of them") \
	X(LAT_US, "lat_*_us_*", NUM, PATH, "count", \
	  "of them, those that took from the bucket's lower bound (us) to twice it")

enum stats_key_id {
#define STATS_KEY_ENUM(ID, key, kind, each, unit, help) STATS_K_##ID,
	STATS_KEYS(STATS_KEY_ENUM)
#undef STATS_KEY_ENUM
	STATS_K_COUNT
};

enum stats_kind { STATS_NUM, STATS_WORD, STATS_NUM_OR_WORD };
enum stats_each { STATS_ONE, STATS_CODEC, STATS_REQ, STATS_CLASS, STATS_PATH };

struct stats_key {
	const char *key;
	enum stats_kind kind;
	enum stats_each each;
	const char *unit;
	const char *help;
};

static inline const struct stats_key *stats_key(enum stats_key_id id)
{
	static const struct stats_key keys[STATS_K_COUNT] = {
#define STATS_KEY_ENTRY(ID, key, kind, each, unit, help) \
		[STATS_K_##ID] = { key, STATS_##kind, STATS_##each, unit, help },
		STATS_KEYS(STATS_KEY_ENTRY)
#undef STATS_KEY_ENTRY
	};

	return &keys[id];
}

/*
 * The key as printed into buf (len bytes): for a key made for each member,
 * `*` replaced by the member (a codec's name, a request kind, a class size
 * in digits); part is ignored for the others.  Returns buf.
 */
static inline const char *stats_key_name(char *buf, size_t len, enum stats_key_id id,
					 const char *part)
{
	const char *key = stats_key(id)->key;
	const char *star = strchr(key, '*');

	if (!star || !part)
		snprintf(buf, len, "%s", key);
	else
		snprintf(buf, len, "%.*s%s%s", (int)(star - key), key, part, star + 1);
	return buf;
}

/* A histogram bucket's key (lat_*_us_*): the path, then the bucket's
 * lower bound in microseconds. */
static inline const char *stats_key_bucket(char *buf, size_t len, enum stats_key_id id,
					   const char *part, unsigned long long bound)
{
	char *star;

	stats_key_name(buf, len, id, part);
	star = strchr(buf, '*');
	if (star)
		snprintf(star, len - (size_t)(star - buf), "%llu", bound);
	return buf;
}

/* Room for any key: the longest pattern with the longest member. */
#define STATS_KEY_MAX	64

#endif
