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

static const char *const req_names[STATS_REQ_COUNT] = { "read", "write", "discard" };

/* Appends to the caller's buffer; a line that does not fit is left out
 * whole, and so is every line after it. */
struct text {
	char *buf;
	size_t len, cap;
	bool full;
};

static void put_text(struct text *t, const char *key, const char *value)
{
	int n;

	if (t->full)
		return;
	n = snprintf(t->buf + t->len, t->cap - t->len, "%s %s\n", key, value);
	if (n < 0 || (size_t)n >= t->cap - t->len) {
		t->full = true;
		t->buf[t->len] = '\0';
		return;
	}
	t->len += (size_t)n;
}

static void put(struct text *t, const char *key, uint64_t value)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, value);
	put_text(t, key, num);
}

/* The backing file and the writeback thread; zeros and `none` without one. */
static void put_backing(struct text *t, struct backing *b, const struct policy_stats *ps)
{
	struct backing_stats bs = { 0 };
	const struct writeback_stats *ws = &ps->wb;

	if (b)
		backing_get_stats(b, &bs);
	put(t, "backing_bytes_max", bs.bytes_max);
	put(t, "backing_bytes_used", bs.bytes_used);
	put(t, "backing_bytes_live", bs.bytes_live);
	put(t, "backing_segments", bs.segments);
	put(t, "backing_bytes_written", bs.bytes_written);
	put(t, "backing_compaction_moves", ws->compaction_moves);
	put(t, "backing_holes_punched", bs.holes_punched);
	put(t, "backing_read_errors", bs.read_errors);
	put(t, "backing_auth_failures", bs.auth_failures);
	put_text(t, "backing_cipher", b ? seal_cipher_name(backing_cipher(b)) : "none");
	put(t, "backing_write_errors", bs.write_errors);
	put(t, "writeback_failed", ws->failed);
	put(t, "writeback_spills", ps->wb_spills);
	put(t, "writeback_pending", ps->wb_pending);
	if (ps->has_writeback && ws->budget_left != UINT64_MAX)
		put(t, "writeback_budget_left", ws->budget_left);
	else
		put_text(t, "writeback_budget_left", "unlimited");
	put_text(t, "writeback_status",
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
	put(t, "reserve_bytes", as->reserve_pages * ARENA_PAGE_SIZE);
	put(t, "reserve_target_bytes", as->reserve_target * ARENA_PAGE_SIZE);
	put(t, "reserve_dry", as->reserve_dry);
	put(t, "reserve_refills", as->refills);
	put(t, "reserve_refill_bytes", as->refill_pages * ARENA_PAGE_SIZE);
	put(t, "reserve_trimmed_bytes", as->trimmed_pages * ARENA_PAGE_SIZE);
	put(t, "reserve_peak_rate", rs.peak_rate);
	put(t, "reserve_refill_max_us", rs.refill_max_us);
	put(t, "reserve_refill_failures", rs.refill_failures);
	put(t, "reserve_wakeups", rs.wakeups);
	put(t, "arena_desc_bytes", as->desc_bytes);
	put(t, "io_flusher", flusher > 0);
	put_text(t, "memcg", mr.state);
	put(t, "memcg_limit_bytes", mr.limit);
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

	put(t, "restart_safe", s && s->restart_safe && atomic_load(&s->kernel_resend));
	put(t, "worker_generation", s ? atomic_load(&s->generation) : 1);
	put(t, "worker_restarts", s ? atomic_load(&s->restarts) : 0);
	put(t, "worker_upgrades", s ? atomic_load(&s->upgrades) : 0);
	put(t, "worker_recovery_last_us", s ? atomic_load(&s->recovery_last_us) : 0);
	put(t, "worker_recovery_max_us", s ? atomic_load(&s->recovery_max_us) : 0);
}

size_t stats_snapshot(struct store *st, struct policy *pol, const struct stats_io *io,
		      char *buf, size_t cap)
{
	struct policy_stats ps = { 0 };
	struct arena_class_stats cls[ARENA_NR_CLASSES];
	const struct harden_state *hs = harden_state();
	struct store_counters c;
	struct arena_stats as;
	struct text t = { .buf = buf, .cap = cap };
	char key[64];
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

	put(&t, "orig_data_size", c.pages_stored * STORE_PAGE_SIZE);
	put(&t, "compr_data_size", c.compr_data_size);
	put(&t, "mem_used_total", as.pages_used * ARENA_PAGE_SIZE);
	put(&t, "mem_limit", as.limit_bytes);
	put(&t, "mem_used_max", as.pages_max * ARENA_PAGE_SIZE);
	put(&t, "same_pages", c.same_pages);
	put(&t, "pages_compacted", as.pages_compacted);
	put(&t, "huge_pages", c.huge_pages);
	put(&t, "failed_reads", c.failed_reads);
	put(&t, "failed_writes", c.failed_writes);
	put(&t, "invalid_io", c.invalid_io);
	put(&t, "notify_free", c.notify_free);
	put(&t, "bd_count", c.bd_count);
	put(&t, "bd_reads", c.bd_reads);
	put(&t, "bd_writes", c.bd_writes);
	put_text(&t, "algorithm", store_codec(st)->name);
	put(&t, "disksize", store_size(st));
	put(&t, "pages_stored", c.pages_stored);
	put(&t, "num_reads", c.pages_read);
	put(&t, "num_writes", c.pages_written);
	for (i = 0; i < CODEC_COUNT; i++) {
		snprintf(key, sizeof(key), "pages_%s", codec_by_id(i)->name);
		put(&t, key, c.codec_pages[i]);
		snprintf(key, sizeof(key), "bytes_%s", codec_by_id(i)->name);
		put(&t, key, c.codec_bytes[i]);
	}
	put(&t, "recompressed", c.recompressed);
	put(&t, "recompress_skipped", c.recompress_skipped);
	put(&t, "recompress_incompressible", c.recompress_incompressible);
	put(&t, "recompress_passes", ps.recompress_passes);
	put(&t, "recompress_pending", ps.recompress_pending);
	put(&t, "compactions", ps.compactions);
	put_backing(&t, store_backing(st), &ps);
	put(&t, "rss_bytes", stats_rss_bytes());
	put(&t, "arena_mapped_bytes", as.pages_mapped * ARENA_PAGE_SIZE);
	for (i = 0; i < STATS_REQ_COUNT; i++) {
		uint64_t n = atomic_load_explicit(&io->reqs[i], memory_order_relaxed);
		uint64_t ns = atomic_load_explicit(&io->ns_total[i], memory_order_relaxed);

		snprintf(key, sizeof(key), "%s_reqs", req_names[i]);
		put(&t, key, n);
		snprintf(key, sizeof(key), "%s_bytes", req_names[i]);
		put(&t, key, atomic_load_explicit(&io->bytes[i], memory_order_relaxed));
		snprintf(key, sizeof(key), "%s_errors", req_names[i]);
		put(&t, key, atomic_load_explicit(&io->errors[i], memory_order_relaxed));
		snprintf(key, sizeof(key), "%s_latency_avg_ns", req_names[i]);
		put(&t, key, n ? ns / n : 0);
		snprintf(key, sizeof(key), "%s_latency_max_ns", req_names[i]);
		put(&t, key, atomic_load_explicit(&io->ns_max[i], memory_order_relaxed));
	}
	/* The kernel uses the rings only once every CPU's queue has an entry. */
	put_text(&t, "fuse_transport", uring_session_requests() ? "io_uring" : "dev_fuse");
	put(&t, "uring_reqs", uring_session_requests());
	/* Failures lived through, refusals, and what hardening achieved
	 * (zswapfs(8), MEMORY PRESSURE, ACCESS and PRIVILEGES) */
	put(&t, "request_loop_errors",
	    atomic_load_explicit(&io->loop_errors, memory_order_relaxed) + uring_session_errors());
	put(&t, "access_denied", atomic_load_explicit(&io->access_denied, memory_order_relaxed));
	put(&t, "log_dropped", log_dropped());
	put(&t, "memory_locked", hs->memory_locked);
	put(&t, "no_new_privs", hs->no_new_privs);
	/* A number, as the contract wants: bit N is capability N. */
	put(&t, "capabilities", hs->caps);
	/* Fragmentation: places allocated in spans but holding no object. */
	put(&t, "frag_bytes", arena_unused_bytes(cls));
	put_reserve(&t, &as);
	put_worker(&t);
	for (i = 0; i < ARENA_NR_CLASSES; i++) {
		if (!cls[i].spans)
			continue;
		snprintf(key, sizeof(key), "class_%u_objs", cls[i].size);
		put(&t, key, cls[i].objs_used);
		snprintf(key, sizeof(key), "class_%u_capacity", cls[i].size);
		put(&t, key, cls[i].objs_capacity);
		snprintf(key, sizeof(key), "class_%u_pages", cls[i].size);
		put(&t, key, cls[i].spans * cls[i].pages_per_span);
	}
	return t.len;
}
