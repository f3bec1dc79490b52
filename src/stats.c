/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "arena.h"
#include "backing.h"
#include "codec.h"
#include "dictgen.h"
#include "dicttrain.h"
#include "harden.h"
#include "log.h"
#include "memcg.h"
#include "policy.h"
#include "reserve.h"
#include "seal.h"
#include "stats.h"
#include "store.h"
#include "shm.h"
#include "uring.h"

#ifndef PR_GET_IO_FLUSHER
#define PR_GET_IO_FLUSHER 58
#endif

void stats_io_account(struct stats_io *io, enum stats_req kind, uint64_t bytes, uint64_t ns,
		      int err)
{
	uint64_t max = atomic_load_explicit(&io->ns_max[kind], memory_order_relaxed);

	atomic_fetch_add_explicit(&io->reqs[kind], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&io->bytes[kind], bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&io->ns_total[kind], ns, memory_order_relaxed);
	while (ns > max && !atomic_compare_exchange_weak_explicit(&io->ns_max[kind], &max, ns,
								  memory_order_relaxed,
								  memory_order_relaxed))
		;
	if (err)
		atomic_fetch_add_explicit(&io->errors[kind], 1, memory_order_relaxed);
}

void stats_io_path(struct stats_io *io, enum stats_req kind, const struct store_worker *w,
		   uint64_t ns)
{
	enum stats_path path;

	switch (kind) {
	case STATS_REQ_READ:
		path = w->pages_backing ? STATS_PATH_READ_BACKING :
		       w->pages_arena ? STATS_PATH_READ_ARENA : STATS_PATH_READ_SAME;
		break;
	case STATS_REQ_WRITE:
		path = w->room_wait_ns ? STATS_PATH_WRITE_WAIT : STATS_PATH_WRITE_ROOM;
		if (w->room_wait_ns)
			atomic_fetch_add_explicit(&io->room_wait_ns, w->room_wait_ns,
						  memory_order_relaxed);
		break;
	default:
		path = STATS_PATH_DISCARD;
		break;
	}
	lat_add(&io->lat[path], ns);
}

static int statm_fd = -1;

void stats_init(void)
{
	char buf[128];

	if (statm_fd >= 0)
		return;
	statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	/* The first read allocates the seq_file's buffer: now, not while serving. */
	if (statm_fd >= 0 && pread(statm_fd, buf, sizeof(buf), 0) < 0) {
		close(statm_fd);
		statm_fd = -1;
	}
}

uint64_t stats_rss_bytes(void)
{
	unsigned long size, resident = 0;
	char buf[128];
	ssize_t n;
	int fd = statm_fd >= 0 ? statm_fd : open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	/* From offset 0 each time: the kernel keeps the seq_file's buffer. */
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (fd != statm_fd)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static const char *const req_names[STATS_REQ_COUNT] = {
#define STATS_REQ_NAME(ID, name) [STATS_REQ_##ID] = #name,
	STATS_REQ_LIST(STATS_REQ_NAME)
#undef STATS_REQ_NAME
};

static const char *const path_names[STATS_PATH_COUNT] = {
#define STATS_PATH_NAME(ID, name) [STATS_PATH_##ID] = #name,
	STATS_PATH_LIST(STATS_PATH_NAME)
#undef STATS_PATH_NAME
};

/* Appends to the caller's buffer; a line that does not fit is left out
 * whole, and so is every line after it. */
struct text {
	char *buf;
	size_t len, cap;
	bool full;
};

/* The line of key `id` (its member `part` for a key made for each). */
static void put_line(struct text *t, enum stats_key_id id, const char *part, const char *value)
{
	char key[STATS_KEY_MAX];
	int n;

	if (t->full)
		return;
	stats_key_name(key, sizeof(key), id, part);
	n = snprintf(t->buf + t->len, t->cap - t->len, "%s %s\n", key, value);
	if (n < 0 || (size_t)n >= t->cap - t->len) {
		t->full = true;
		t->buf[t->len] = '\0';
		return;
	}
	t->len += (size_t)n;
}

static void put_each(struct text *t, enum stats_key_id id, const char *part, uint64_t value)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, value);
	put_line(t, id, part, num);
}

static void put(struct text *t, enum stats_key_id id, uint64_t value)
{
	put_each(t, id, NULL, value);
}

static void put_text(struct text *t, enum stats_key_id id, const char *value)
{
	put_line(t, id, NULL, value);
}

/* The backing file and the writeback thread; zeros and `none` without one. */
static void put_backing(struct text *t, struct backing *b, const struct policy_stats *ps)
{
	struct backing_stats bs = { 0 };
	const struct writeback_stats *ws = &ps->wb;

	if (b)
		backing_get_stats(b, &bs);
	put(t, STATS_K_BACKING_BYTES_MAX, bs.bytes_max);
	put(t, STATS_K_BACKING_BYTES_USED, bs.bytes_used);
	put(t, STATS_K_BACKING_BYTES_LIVE, bs.bytes_live);
	put(t, STATS_K_BACKING_SEGMENTS, bs.segments);
	put(t, STATS_K_BACKING_BYTES_WRITTEN, bs.bytes_written);
	put(t, STATS_K_BACKING_COMPACTION_MOVES, ws->compaction_moves);
	put(t, STATS_K_BACKING_HOLES_PUNCHED, bs.holes_punched);
	put(t, STATS_K_BACKING_READ_ERRORS, bs.read_errors);
	put(t, STATS_K_BACKING_AUTH_FAILURES, bs.auth_failures);
	put_text(t, STATS_K_BACKING_CIPHER, b ? seal_cipher_name(backing_cipher(b)) : "none");
	put(t, STATS_K_BACKING_WRITE_ERRORS, bs.write_errors);
	put(t, STATS_K_WRITEBACK_FAILED, ws->failed);
	put(t, STATS_K_WRITEBACK_SPILLS, ps->wb_spills);
	put(t, STATS_K_WRITEBACK_PENDING, ps->wb_pending);
	if (ps->has_writeback && ws->budget_left != UINT64_MAX)
		put(t, STATS_K_WRITEBACK_BUDGET_LEFT, ws->budget_left);
	else
		put_text(t, STATS_K_WRITEBACK_BUDGET_LEFT, "unlimited");
	put_text(t, STATS_K_WRITEBACK_STATUS,
		 ps->has_writeback ? writeback_status_name(ws->status) : "none");
}

/* The reserve (reserve.h), the memory cgroup (memcg.h), PR_SET_IO_FLUSHER. */
static void put_reserve(struct text *t, const struct arena_stats *as)
{
	struct reserve_stats rs;
	struct memcg_report mr;
	int flusher = prctl(PR_GET_IO_FLUSHER, 0, 0, 0, 0);

	reserve_get_stats(&rs);
	memcg_get_report(&mr);
	put(t, STATS_K_RESERVE_BYTES, as->reserve_pages * ARENA_PAGE_SIZE);
	put(t, STATS_K_RESERVE_TARGET_BYTES, as->reserve_target * ARENA_PAGE_SIZE);
	put(t, STATS_K_RESERVE_DRY, as->reserve_dry);
	put(t, STATS_K_RESERVE_REFILLS, as->refills);
	put(t, STATS_K_RESERVE_REFILL_BYTES, as->refill_pages * ARENA_PAGE_SIZE);
	put(t, STATS_K_RESERVE_TRIMMED_BYTES, as->trimmed_pages * ARENA_PAGE_SIZE);
	put(t, STATS_K_RESERVE_PEAK_RATE, rs.peak_rate);
	put(t, STATS_K_RESERVE_REFILL_MAX_US, rs.refill_max_us);
	put(t, STATS_K_RESERVE_REFILL_FAILURES, rs.refill_failures);
	put(t, STATS_K_RESERVE_WAKEUPS, rs.wakeups);
	put(t, STATS_K_RESERVE_REFILL_WAIT_US, rs.refill_wait_us);
	put(t, STATS_K_RESERVE_PRESSURE, rs.pressure);
	put(t, STATS_K_RESERVE_PRESSURE_WAKEUPS, rs.pressure_wakeups);
	put(t, STATS_K_RESERVE_MEM_AVAILABLE, rs.mem_available);
	put(t, STATS_K_ARENA_DESC_BYTES, as->desc_bytes);
	put(t, STATS_K_IO_FLUSHER, flusher > 0);
	put_text(t, STATS_K_MEMCG, mr.state);
	put(t, STATS_K_MEMCG_LIMIT_BYTES, mr.limit);
}

/* The FUSE requests, per kind (stats_io_account). */
static void put_requests(struct text *t, const struct stats_io *io)
{
	unsigned int i;

	for (i = 0; i < STATS_REQ_COUNT; i++) {
		uint64_t n = atomic_load_explicit(&io->reqs[i], memory_order_relaxed);
		uint64_t ns = atomic_load_explicit(&io->ns_total[i], memory_order_relaxed);

		put_each(t, STATS_K_REQ_REQS, req_names[i], n);
		put_each(t, STATS_K_REQ_BYTES, req_names[i],
			 atomic_load_explicit(&io->bytes[i], memory_order_relaxed));
		put_each(t, STATS_K_REQ_ERRORS, req_names[i],
			 atomic_load_explicit(&io->errors[i], memory_order_relaxed));
		put_each(t, STATS_K_REQ_LATENCY_AVG_NS, req_names[i], n ? ns / n : 0);
		put_each(t, STATS_K_REQ_LATENCY_MAX_NS, req_names[i],
			 atomic_load_explicit(&io->ns_max[i], memory_order_relaxed));
	}
}

/* The latency histograms by path (lat.h): every bucket, zeros included,
 * so that the keys do not change with the load. */
static void put_paths(struct text *t, const struct stats_io *io)
{
	char key[STATS_KEY_MAX], num[24];
	unsigned int i, k;

	for (i = 0; i < STATS_PATH_COUNT; i++) {
		const struct lat_hist *h = &io->lat[i];

		put_each(t, STATS_K_LAT_REQS, path_names[i],
			 atomic_load_explicit(&h->count, memory_order_relaxed));
		put_each(t, STATS_K_LAT_NS_TOTAL, path_names[i],
			 atomic_load_explicit(&h->ns_total, memory_order_relaxed));
		put_each(t, STATS_K_LAT_NS_MAX, path_names[i],
			 atomic_load_explicit(&h->ns_max, memory_order_relaxed));
		for (k = 0; k < LAT_BUCKETS && !t->full; k++) {
			int n;

			stats_key_bucket(key, sizeof(key), STATS_K_LAT_US, path_names[i],
					 lat_bucket_us(k));
			snprintf(num, sizeof(num), "%" PRIu64,
				 atomic_load_explicit(&h->bucket[k], memory_order_relaxed));
			n = snprintf(t->buf + t->len, t->cap - t->len, "%s %s\n", key, num);
			if (n < 0 || (size_t)n >= t->cap - t->len) {
				t->full = true;
				t->buf[t->len] = '\0';
				return;
			}
			t->len += (size_t)n;
		}
	}
}

/* The size classes in use: objects, places, pages. */
static void put_classes(struct text *t, const struct arena_class_stats *cls)
{
	char size[16];
	unsigned int i;

	for (i = 0; i < ARENA_NR_CLASSES; i++) {
		if (!cls[i].spans)
			continue;
		snprintf(size, sizeof(size), "%u", cls[i].size);
		put_each(t, STATS_K_CLASS_OBJS, size, cls[i].objs_used);
		put_each(t, STATS_K_CLASS_CAPACITY, size, cls[i].objs_capacity);
		put_each(t, STATS_K_CLASS_PAGES, size, cls[i].spans * cls[i].pages_per_span);
	}
}

/* Dictionaries: the current generation, pages with and without, training. */
static void put_dict(struct text *t, struct store *st, struct dicttrain *dt,
		     const struct store_counters *c)
{
	struct dicttrain_stats ts = { 0 };
	struct dictgen_stats gs;

	dictgen_get_stats(store_dicts(st), &gs);
	if (dt)
		dicttrain_get_stats(dt, &ts);
	put(t, STATS_K_DICT_GENERATION, gs.number);
	put(t, STATS_K_DICT_BYTES, gs.bytes);
	put(t, STATS_K_DICT_AGE, gs.age);
	put(t, STATS_K_DICT_GENERATIONS, gs.generations);
	put(t, STATS_K_DICT_PAGES_CURRENT, gs.refs_current);
	put(t, STATS_K_DICT_PAGES_OLDER, gs.refs_older);
	put(t, STATS_K_DICT_PAGES, c->dict_pages);
	put(t, STATS_K_DICT_DATA_SIZE, c->dict_data_size);
	put(t, STATS_K_NODICT_PAGES, c->nodict_pages);
	put(t, STATS_K_NODICT_DATA_SIZE, c->nodict_data_size);
	put(t, STATS_K_DICT_TRAININGS, ts.trainings);
	put(t, STATS_K_DICT_TRAIN_ATTEMPTS, ts.attempts);
	put(t, STATS_K_DICT_TRAIN_MS, ts.train_ms);
	put(t, STATS_K_DICT_RING_FULL, ts.ring_full);
	put(t, STATS_K_DICT_RATIO_BEFORE, ts.ratio_before);
	put(t, STATS_K_DICT_RATIO_AFTER, ts.ratio_after);
	put(t, STATS_K_DICT_TRAIN_PENDING, ts.pending);
}

/* The keeper's bookkeeping of workers (keeper.h); NULL: none. */
static const struct shm_state *worker_state;

void stats_set_worker(const struct shm_state *s)
{
	worker_state = s;
}

/* Restart safety (zswapfs(8), RESTART). */
static void put_worker(struct text *t)
{
	const struct shm_state *s = worker_state;

	put(t, STATS_K_RESTART_SAFE, s && s->restart_safe && atomic_load(&s->kernel_resend));
	put(t, STATS_K_WORKER_GENERATION, s ? atomic_load(&s->generation) : 1);
	put(t, STATS_K_WORKER_RESTARTS, s ? atomic_load(&s->restarts) : 0);
	put(t, STATS_K_KEEPER_UPGRADES, s ? atomic_load(&s->keeper_upgrades) : 0);
	put(t, STATS_K_WORKER_UPGRADES, s ? atomic_load(&s->upgrades) : 0);
	put(t, STATS_K_WORKER_RECOVERY_LAST_US, s ? atomic_load(&s->recovery_last_us) : 0);
	put(t, STATS_K_WORKER_RECOVERY_MAX_US, s ? atomic_load(&s->recovery_max_us) : 0);
}

size_t stats_snapshot(struct store *st, struct policy *pol, struct dicttrain *dt,
		      const struct stats_io *io, char *buf, size_t cap)
{
	struct policy_stats ps = { 0 };
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	const struct harden_state *hs = harden_state();
	struct store_counters c;
	struct arena_stats as;
	struct text t = { .buf = buf, .cap = cap };
	unsigned int i;

	if (!cap)
		return 0;
	buf[0] = '\0';
	/* Store counters first, then the arena: the arena can only have more
	 * pages than the objects counted need, never fewer. */
	store_get_counters(st, &c);
	if (pol)
		policy_get_stats(pol, &ps);
	arena_get_stats(store_arena(st), &as);
	arena_get_class_stats(store_arena(st), cls);

	put(&t, STATS_K_ORIG_DATA_SIZE, c.pages_stored * STORE_PAGE_SIZE);
	put(&t, STATS_K_COMPR_DATA_SIZE, c.compr_data_size);
	put(&t, STATS_K_MEM_USED_TOTAL, as.pages_used * ARENA_PAGE_SIZE);
	put(&t, STATS_K_MEM_LIMIT, as.limit_bytes);
	put(&t, STATS_K_MEM_USED_MAX, as.pages_max * ARENA_PAGE_SIZE);
	put(&t, STATS_K_SAME_PAGES, c.same_pages);
	put(&t, STATS_K_PAGES_COMPACTED, as.pages_compacted);
	put(&t, STATS_K_HUGE_PAGES, c.huge_pages);
	put(&t, STATS_K_FAILED_READS, c.failed_reads);
	put(&t, STATS_K_FAILED_WRITES, c.failed_writes);
	put(&t, STATS_K_INVALID_IO, c.invalid_io);
	put(&t, STATS_K_NOTIFY_FREE, c.notify_free);
	put(&t, STATS_K_BD_COUNT, c.bd_count);
	put(&t, STATS_K_BD_READS, c.bd_reads);
	put(&t, STATS_K_BD_WRITES, c.bd_writes);
	put_text(&t, STATS_K_ALGORITHM, store_codec(st)->name);
	put(&t, STATS_K_DISKSIZE, store_size(st));
	put(&t, STATS_K_PAGES_STORED, c.pages_stored);
	put(&t, STATS_K_NUM_READS, c.pages_read);
	put(&t, STATS_K_NUM_WRITES, c.pages_written);
	for (i = 0; i < CODEC_COUNT; i++) {
		put_each(&t, STATS_K_CODEC_PAGES, codec_by_id(i)->name, c.codec_pages[i]);
		put_each(&t, STATS_K_CODEC_BYTES, codec_by_id(i)->name, c.codec_bytes[i]);
	}
	put(&t, STATS_K_RECOMPRESSED, c.recompressed);
	put(&t, STATS_K_RECOMPRESS_SKIPPED, c.recompress_skipped);
	put(&t, STATS_K_RECOMPRESS_INCOMPRESSIBLE, c.recompress_incompressible);
	put(&t, STATS_K_RECOMPRESS_PASSES, ps.recompress_passes);
	put(&t, STATS_K_RECOMPRESS_PENDING, ps.recompress_pending);
	put(&t, STATS_K_COMPACTIONS, ps.compactions);
	put_backing(&t, store_backing(st), &ps);
	put(&t, STATS_K_RSS_BYTES, stats_rss_bytes());
	put(&t, STATS_K_ARENA_MAPPED_BYTES, as.pages_mapped * ARENA_PAGE_SIZE);
	put_requests(&t, io);
	/* The kernel uses the rings only once every CPU's queue has an entry. */
	put_text(&t, STATS_K_FUSE_TRANSPORT, uring_session_requests() ? "io_uring" : "dev_fuse");
	put(&t, STATS_K_URING_REQS, uring_session_requests());
	/* Failures lived through, refusals, and what hardening achieved
	 * (zswapfs(8), MEMORY PRESSURE, ACCESS and PRIVILEGES) */
	put(&t, STATS_K_REQUEST_LOOP_ERRORS,
	    atomic_load_explicit(&io->loop_errors, memory_order_relaxed) + uring_session_errors());
	put(&t, STATS_K_ACCESS_DENIED, atomic_load_explicit(&io->access_denied, memory_order_relaxed));
	put(&t, STATS_K_LOG_DROPPED, log_dropped());
	put(&t, STATS_K_MEMORY_LOCKED, hs->memory_locked);
	put(&t, STATS_K_NO_NEW_PRIVS, hs->no_new_privs);
	/* A number, as the contract wants: bit N is capability N. */
	put(&t, STATS_K_CAPABILITIES, hs->caps);
	/* Fragmentation: places allocated in spans but holding no object. */
	put(&t, STATS_K_FRAG_BYTES, arena_unused_bytes(cls));
	/* The rest of mem_used_total: places holding objects (at their class
	 * size: less compr_data_size, the class rounding) and span tails. */
	{
		uint64_t placed = 0, spans = 0, held = 0;

		for (i = 0; i < ARENA_NR_CLASSES; i++) {
			held += cls[i].objs_used * cls[i].size;
			placed += cls[i].objs_capacity * cls[i].size;
			spans += cls[i].spans * cls[i].pages_per_span * ARENA_PAGE_SIZE;
		}
		put(&t, STATS_K_ARENA_CLASS_BYTES, held);
		put(&t, STATS_K_ARENA_TAIL_BYTES, spans - placed);
	}
	put_reserve(&t, &as);
	put_dict(&t, st, dt, &c);
	put_worker(&t);
	put_classes(&t, cls);
	{
		struct backing_stats bs = { 0 };

		if (store_backing(st))
			backing_get_stats(store_backing(st), &bs);
		put(&t, STATS_K_BACKING_BYTES_READ, bs.bytes_read);
	}
	put(&t, STATS_K_WRITEBACK_ROOM_WAIT_NS,
	    atomic_load_explicit(&io->room_wait_ns, memory_order_relaxed));
	put(&t, STATS_K_WRITEBACK_HEADROOM_BYTES, ps.has_writeback ? ps.wb.headroom : 0);
	put_paths(&t, io);
	return t.len;
}
