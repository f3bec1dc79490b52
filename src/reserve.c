/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* pthread_setname_np */
#endif
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "harden.h"
#include "log.h"
#include "reserve.h"

/* The rate is measured over windows this long... */
#define RESERVE_TICK_MS		100u
/* ...but a higher one counts as soon as this much of a window has passed. */
#define RESERVE_BURST_MS	10u
/* With no write and a full reserve, the thread looks this seldom. */
#define RESERVE_IDLE_MS		1000u
/*
 * How long the reserve must last at the peak rate: how long a refill may
 * wait in reclaim.  Measured in 20 runs of tests/self_reclaim.sh part 1
 * (512 MiB through swap on the 2-CPU VM): peaks of 75-155 MiB/s of arena
 * pages (reserve_peak_rate), the longest refill 11-44 ms per run
 * (reserve_refill_max_us), no write ever found the reserve dry; 250 ms is
 * over 5 times the longest wait seen.  Inside a full memory cgroup a refill
 * waits as long as the cgroup stays full (seconds: part 3), which no size
 * covers: see memcg.h.
 */
#define RESERVE_LAST_MS		250u
/*
 * Four chunks.  fio's five jobs on the bare file (tests/fio_verify.sh) start
 * at 300-600 MiB/s, 1 MiB a request: 4 MiB went in a few ms, before the
 * thread (woken at three quarters) could map more, and some of their writes
 * failed in 1 run of 3; with 8 MiB none did in 30 runs, two CPU hogs along.
 */
#define RESERVE_MIN		(8ull << 20)
/* Locked memory that sits unused; a burst above it fails writes instead. */
#define RESERVE_MAX		(128ull << 20)
/* The peak rate halves in this long without a new peak; so does the
 * longest wait for a chunk. */
#define RESERVE_PEAK_HALF_S	60.0
/* A refill goes a chunk at a time (arena_pages.h's CHUNK_SIZE), each timed:
 * how long the reserve must bridge is how long the next chunk takes. */
#define RESERVE_STEP		(2ull << 20)
/*
 * Whole-machine pressure (reserve.h).  The band starts at 1 GiB of
 * MemAvailable, or 1/32 of RAM on a larger machine: on the 24 GiB VM, with
 * swap only on zswapfs, the kernel begins to swap at 200-300 MiB of
 * MemAvailable (squeeze.sh samples), and a program filling memory at 1-2
 * GiB/s crosses the band in under a second, so the thread looks at the
 * machine every RESERVE_TICK_MS once MemAvailable is below twice the
 * start.  Never more than a quarter of RAM: a small machine would
 * otherwise always look pressed.
 */
#define RESERVE_PRESSURE_START	(1ull << 30)
/* PSI some avg10, hundredths of a percent: no pressure below, full above. */
#define RESERVE_PSI_LOW		100u
#define RESERVE_PSI_HIGH	1000u
/*
 * The PSI trigger: 100 ms of stall in a 2 s window wakes the thread.
 * Without CAP_SYS_RESOURCE (we drop it) the kernel takes only windows
 * that are multiples of 2 s.
 */
#define RESERVE_PSI_TRIGGER	"some 100000 2000000"
/* The level seen halves in this long once the pressure ends. */
#define RESERVE_PRESSURE_HALF_S	10.0
/* /proc/meminfo is about 1.5 KiB. */
#define RESERVE_PROC_BUF	8192u
/*
 * Give pages back above one and a half times the target plus one chunk:
 * some hysteresis, so that frees and allocations going to and fro do not
 * make the thread unmap and map all the time; the rest of a burst's reserve
 * goes back as the peak rate decays.
 */
#define RESERVE_TRIM_SLACK	(2ull << 20)
/*
 * Per request thread: what the heap must hold without growing (libfuse's
 * per-request structs, stdio for /proc reads; the stats text has buffers
 * of its own, made at start), with room to spare; and the main thread's stack depth (pthreads get
 * theirs whole: HARDEN_THREAD_STACK, populated under MCL_FUTURE).
 */
#define RESERVE_HEAP_PAD	(256u << 10)
#define RESERVE_STACK_PREFAULT	(128u << 10)

struct reserve {
	struct arena *arena;
	uint64_t fixed_pages;
	int efd;			/* the arena's low hook writes here */
	pthread_t tid;
	_Atomic bool stop;
	int meminfo_fd;			/* -1: none */
	int psi_fd;			/* read for avg10; -1: none */
	int psi_trig_fd;		/* the trigger (POLLPRI); -1: none */

	/* the thread's own */
	uint64_t window_start_ms;
	uint64_t window_taken;		/* arena pages_taken at window_start_ms */
	double peak;			/* pages a second */
	double wait_us;			/* longest chunk wait, decayed */
	unsigned int pressure;		/* the level held, 0..RESERVE_PRESSURE_FULL */
	uint64_t pressure_ms;		/* when it was last updated */
	bool watch;			/* MemAvailable is near the band: look often */
	bool failing;			/* the last refill failed (logged once) */
	char *procbuf;			/* RESERVE_PROC_BUF bytes, made at start */

	_Atomic uint64_t peak_rate;	/* bytes a second, for the stats */
	_Atomic uint64_t refill_failures;
	_Atomic uint64_t refill_max_us;
	_Atomic uint64_t wakeups;
	_Atomic uint64_t refill_wait_us;
	_Atomic uint64_t pressure_level;
	_Atomic uint64_t pressure_wakeups;
	_Atomic uint64_t mem_available;
};

/* One per process: the stats find it here. */
static _Atomic(struct reserve *) running;

void reserve_setup_malloc(void)
{
	/*
	 * glibc gives the top of a heap back when more than M_TRIM_THRESHOLD
	 * is free there, and serves blocks above M_MMAP_THRESHOLD with
	 * mmap/munmap: either way the next request would fault memory in.
	 * Never trim; and blocks up to 32 MiB (glibc's largest threshold)
	 * come from the heap.  Background threads have heaps of their own
	 * (glibc gives each thread an arena while there are few threads), so
	 * their growth never holds a lock that a request thread's malloc
	 * needs.
	 */
	mallopt(M_TRIM_THRESHOLD, -1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TOP_PAD, 1 << 20);
}

/* Deep enough that nothing the request path calls goes further down. */
static void __attribute__((noinline)) stack_prefault(void)
{
	volatile char buf[RESERVE_STACK_PREFAULT];

	for (size_t i = 0; i < sizeof(buf); i += 4096)
		buf[i] = 0;
	buf[sizeof(buf) - 1] = 0;
}

void reserve_prepare_thread(void)
{
	char *p = malloc(RESERVE_HEAP_PAD);

	/* Written, so it is resident even without mlockall; freed into the
	 * heap, which keeps it (M_TRIM_THRESHOLD). */
	if (p) {
		memset(p, 0, RESERVE_HEAP_PAD);
		free(p);
	}
	stack_prefault();
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t now_ms(void)
{
	return now_us() / 1000u;
}

/* From a request thread, with an arena lock held: one eventfd write. */
static void on_low(void *arg)
{
	struct reserve *r = arg;
	uint64_t one = 1;
	ssize_t n = write(r->efd, &one, sizeof(one));

	(void)n;
	atomic_fetch_add_explicit(&r->wakeups, 1, memory_order_relaxed);
}

/* ---- the machine (pure: the unit tests feed them text) ---- */

/* The number after `key` at the start of a line, in kB. */
static int meminfo_field(const char *text, const char *key, uint64_t *bytes)
{
	size_t n = strlen(key);
	const char *line = text;

	for (; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		unsigned long long kb;
		char *end;

		if (strncmp(line, key, n) || line[n] != ':')
			continue;
		errno = 0;
		kb = strtoull(line + n + 1, &end, 10);
		if (errno || end == line + n + 1 || strncmp(end, " kB", 3) ||
		    kb > UINT64_MAX / 1024)
			return -EINVAL;
		*bytes = (uint64_t)kb * 1024;
		return 0;
	}
	return -EINVAL;
}

int reserve_parse_meminfo(const char *text, struct reserve_machine *m)
{
	uint64_t total, avail;

	if (meminfo_field(text, "MemTotal", &total) || meminfo_field(text, "MemAvailable", &avail))
		return -EINVAL;
	m->mem_total = total;
	m->mem_available = avail;
	return 0;
}

/* "some avg10=1.23 avg60=... total=..." on the first line. */
int reserve_parse_psi(const char *text, struct reserve_machine *m)
{
	unsigned long whole;
	unsigned int v;
	const char *p;
	char *end;

	if (strncmp(text, "some avg10=", 11))
		return -EINVAL;
	p = text + 11;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	whole = strtoul(p, &end, 10);
	if (errno || whole > 100 || end[0] != '.' || end[1] < '0' || end[1] > '9' ||
	    end[2] < '0' || end[2] > '9')
		return -EINVAL;
	v = (unsigned int)whole * 100u + (unsigned int)(end[1] - '0') * 10u +
	    (unsigned int)(end[2] - '0');
	if (v > 10000)
		return -EINVAL;
	m->psi_some10 = v;
	return 0;
}

/* x's place going from lo (0) to hi (RESERVE_PRESSURE_FULL), clamped. */
static unsigned int ramp(uint64_t x, uint64_t lo, uint64_t hi)
{
	if (x <= lo)
		return 0;
	if (x >= hi)
		return RESERVE_PRESSURE_FULL;
	return (unsigned int)((double)(x - lo) * RESERVE_PRESSURE_FULL / (double)(hi - lo));
}

static uint64_t pressure_start(const struct reserve_machine *m)
{
	uint64_t start = m->mem_total / 32 > RESERVE_PRESSURE_START ? m->mem_total / 32 :
			 RESERVE_PRESSURE_START;

	return start > m->mem_total / 4 ? m->mem_total / 4 : start;
}

unsigned int reserve_pressure_level(const struct reserve_machine *m)
{
	uint64_t start = pressure_start(m);
	unsigned int level, psi;

	if (!m->mem_total || !start)
		return 0;
	/* From start (0) down to start / 2 (full): the less available, the more. */
	level = RESERVE_PRESSURE_FULL - ramp(m->mem_available, start / 2, start);
	if (m->mem_available < 2 * start) {
		psi = ramp(m->psi_some10, RESERVE_PSI_LOW, RESERVE_PSI_HIGH);
		if (psi > level)
			level = psi;
	}
	return level;
}

unsigned int reserve_pressure_hold(unsigned int held, unsigned int level, uint64_t dt_ms)
{
	double f = (double)dt_ms / 1000.0 / RESERVE_PRESSURE_HALF_S, decayed = held;

	/* Halved per half-life; within one, 1 - f/2 (no libm: 2^-f to 6 %). */
	while (f >= 1.0 && decayed >= 1.0) {
		decayed /= 2;
		f -= 1.0;
	}
	decayed *= f < 1.0 ? 1.0 - f / 2 : 0;
	return level >= decayed ? level : (unsigned int)decayed;
}

uint64_t reserve_size_pages(const struct reserve_sizing *s)
{
	uint64_t min = RESERVE_MIN / ARENA_PAGE_SIZE, max = RESERVE_MAX / ARENA_PAGE_SIZE;
	double last_ms = s->wait_us / 1000.0 > RESERVE_LAST_MS ? s->wait_us / 1000.0 :
			 RESERVE_LAST_MS;
	double want = s->peak_rate * last_ms / 1000.0;
	uint64_t target, pressed;

	target = want >= (double)max ? max : want <= (double)min ? min : (uint64_t)want;
	pressed = min + (max - min) * (s->pressure > RESERVE_PRESSURE_FULL ?
				       RESERVE_PRESSURE_FULL : s->pressure) /
			RESERVE_PRESSURE_FULL;
	if (pressed > target)
		target = pressed;
	/* Beyond mem_limit the reserve could never be used. */
	if (s->limit_pages) {
		uint64_t room = s->limit_pages > s->used_pages ? s->limit_pages - s->used_pages : 0;

		if (target > room)
			target = room > min ? room : min;
	}
	return target;
}

/* ---- the thread ---- */

/* Read a /proc text file from its start into r->procbuf; 0 or -errno. */
static int proc_read(struct reserve *r, int fd)
{
	ssize_t n = pread(fd, r->procbuf, RESERVE_PROC_BUF - 1, 0);

	if (n < 0)
		return -errno;
	r->procbuf[n] = '\0';
	return 0;
}

/* Read the machine and update the level held. */
static void watch_machine(struct reserve *r, uint64_t now)
{
	struct reserve_machine m = { 0 };
	unsigned int level;

	if (r->meminfo_fd < 0 || proc_read(r, r->meminfo_fd) ||
	    reserve_parse_meminfo(r->procbuf, &m))
		return;
	if (r->psi_fd >= 0 && !proc_read(r, r->psi_fd))
		reserve_parse_psi(r->procbuf, &m);
	level = reserve_pressure_level(&m);
	r->pressure = reserve_pressure_hold(r->pressure, level, now - r->pressure_ms);
	r->pressure_ms = now;
	r->watch = m.mem_available < 2 * pressure_start(&m) || r->pressure;
	atomic_store_explicit(&r->mem_available, m.mem_available, memory_order_relaxed);
}

/* Pages the reserve should hold now; updates the rate. */
static uint64_t target_pages(struct reserve *r, const struct arena_stats *as, uint64_t now,
			     bool *busy)
{
	uint64_t dt = now - r->window_start_ms;
	double rate = dt ? (double)(as->pages_taken - r->window_taken) * 1000.0 / (double)dt : 0;
	struct reserve_sizing sz;

	*busy = as->pages_taken != r->window_taken;
	if (dt >= RESERVE_TICK_MS) {
		/* exp(-dt / tau) to first order, tau = half-life / ln 2 */
		double decay = 1.0 - (double)dt / 1000.0 / (RESERVE_PEAK_HALF_S / 0.693147);

		r->peak *= decay > 0 ? decay : 0;
		r->wait_us *= decay > 0 ? decay : 0;
		r->window_start_ms = now;
		r->window_taken = as->pages_taken;
	}
	/*
	 * A burst shows before the window ends (a request woke us): a sudden
	 * writer (fio on the file: 300-600 MiB/s) empties 8 MiB in 15-30 ms,
	 * long before a 100 ms window would have raised the target.
	 */
	if (dt >= RESERVE_BURST_MS && rate > r->peak) {
		r->peak = rate;
		atomic_store_explicit(&r->peak_rate, (uint64_t)(r->peak * ARENA_PAGE_SIZE),
				      memory_order_relaxed);
	} else if (dt >= RESERVE_TICK_MS) {
		atomic_store_explicit(&r->peak_rate, (uint64_t)(r->peak * ARENA_PAGE_SIZE),
				      memory_order_relaxed);
	}
	atomic_store_explicit(&r->refill_wait_us, (uint64_t)r->wait_us, memory_order_relaxed);
	atomic_store_explicit(&r->pressure_level, r->pressure, memory_order_relaxed);
	if (r->fixed_pages)
		return r->fixed_pages;
	sz = (struct reserve_sizing){
		.peak_rate = r->peak,
		.wait_us = (uint64_t)r->wait_us,
		.pressure = r->pressure,
		.limit_pages = as->limit_bytes / ARENA_PAGE_SIZE,
		.used_pages = as->pages_used,
	};
	return reserve_size_pages(&sz);
}

/*
 * Fill to target a chunk at a time, timing each: the longest is how long
 * the reserve must bridge.  At most as many steps as the target has chunks,
 * so that the target is looked at again while writers drain the reserve
 * as fast as it fills.
 */
static void refill(struct reserve *r, uint64_t target)
{
	const uint64_t step = RESERVE_STEP / ARENA_PAGE_SIZE;
	uint64_t t0, us, longest = 0, steps = target / step + 1;
	struct arena_stats as;
	int err = 0;

	arena_get_stats(r->arena, &as);
	do {
		uint64_t to = as.reserve_pages + step < target ? as.reserve_pages + step : target;

		t0 = now_us();
		/* Cheap when nothing is missing (pages, descriptors, a long run). */
		err = arena_refill(r->arena, to);
		us = now_us() - t0;
		if (us > longest)
			longest = us;
		if (err)
			break;
		arena_get_stats(r->arena, &as);
	} while (as.reserve_pages < target && --steps && !atomic_load(&r->stop));
	if (longest > atomic_load_explicit(&r->refill_max_us, memory_order_relaxed))
		atomic_store_explicit(&r->refill_max_us, longest, memory_order_relaxed);
	if ((double)longest > r->wait_us)
		r->wait_us = (double)longest;
	if (err) {
		atomic_fetch_add_explicit(&r->refill_failures, 1, memory_order_relaxed);
		if (!r->failing)
			log_warn("reserve: the kernel would not give %llu MiB of locked memory: "
				 "%s; writes fail with ENOSPC while the reserve is empty",
				 (unsigned long long)(target * ARENA_PAGE_SIZE >> 20),
				 strerror(-err));
	} else if (r->failing) {
		log_info("reserve: refilled to %llu MiB",
			 (unsigned long long)(target * ARENA_PAGE_SIZE >> 20));
	}
	r->failing = err != 0;
}

static void *reserve_thread(void *arg)
{
	struct reserve *r = arg;
	struct pollfd pfd[2] = {
		{ .fd = r->efd, .events = POLLIN },
		{ .fd = r->psi_trig_fd, .events = POLLPRI },	/* -1: ignored */
	};
	bool busy = true;

	pthread_setname_np(pthread_self(), "zswapfs-reserve");
	while (!atomic_load(&r->stop)) {
		struct arena_stats as;
		uint64_t target, v, now;
		ssize_t n;

		if (poll(pfd, 2, (int)(busy || r->watch ? RESERVE_TICK_MS : RESERVE_IDLE_MS)) > 0) {
			if (pfd[0].revents & POLLIN) {
				n = read(r->efd, &v, sizeof(v));
				(void)n;
			}
			if (pfd[1].revents & POLLPRI)
				atomic_fetch_add_explicit(&r->pressure_wakeups, 1,
							  memory_order_relaxed);
			/* A trigger that went away (POLLERR) is not polled again. */
			if (pfd[1].revents & (POLLERR | POLLNVAL))
				pfd[1].fd = -1;
		}
		if (atomic_load(&r->stop))
			break;
		now = now_ms();
		watch_machine(r, now);
		arena_get_stats(r->arena, &as);
		target = target_pages(r, &as, now, &busy);
		arena_set_reserve_target(r->arena, target);
		refill(r, target);
		arena_trim(r->arena, target + target / 2 + RESERVE_TRIM_SLACK / ARENA_PAGE_SIZE,
			   target);
		/* After a failure, try again at the next tick, not at once. */
		busy = busy || r->failing;
	}
	return NULL;
}

/* Open what the thread reads; none of it is required. */
static void open_machine(struct reserve *r, const struct reserve_config *cfg)
{
	const char *psi = cfg->psi_path ? cfg->psi_path : "/proc/pressure/memory";

	r->meminfo_fd = open(cfg->meminfo_path ? cfg->meminfo_path : "/proc/meminfo",
			     O_RDONLY | O_CLOEXEC);
	r->psi_fd = open(psi, O_RDONLY | O_CLOEXEC);
	r->psi_trig_fd = -1;
	if (r->meminfo_fd < 0)
		log_warn("reserve: cannot read %s (%s): the reserve does not grow ahead of "
			 "memory pressure", cfg->meminfo_path ? cfg->meminfo_path :
			 "/proc/meminfo", strerror(errno));
	if (cfg->psi_path || r->psi_fd < 0)
		return;
	/* Each trigger needs an open file of its own. */
	r->psi_trig_fd = open(psi, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (r->psi_trig_fd >= 0 && write(r->psi_trig_fd, RESERVE_PSI_TRIGGER,
					 strlen(RESERVE_PSI_TRIGGER) + 1) < 0) {
		log_info("reserve: no PSI trigger (%s): the machine is looked at every %u ms",
			 strerror(errno), RESERVE_IDLE_MS);
		close(r->psi_trig_fd);
		r->psi_trig_fd = -1;
	}
	/* The first reads allocate the seq_files' buffers: now, not later. */
	if (r->meminfo_fd >= 0)
		proc_read(r, r->meminfo_fd);
	if (r->psi_fd >= 0)
		proc_read(r, r->psi_fd);
}

static void close_machine(struct reserve *r)
{
	if (r->meminfo_fd >= 0)
		close(r->meminfo_fd);
	if (r->psi_fd >= 0)
		close(r->psi_fd);
	if (r->psi_trig_fd >= 0)
		close(r->psi_trig_fd);
}

struct reserve *reserve_start(struct arena *a, const struct reserve_config *cfg)
{
	struct reserve *r = calloc(1, sizeof(*r));
	pthread_attr_t attr;
	struct arena_stats as;
	uint64_t first;
	int err;

	if (!r)
		return NULL;
	r->arena = a;
	r->fixed_pages = (cfg->fixed_bytes + ARENA_PAGE_SIZE - 1) / ARENA_PAGE_SIZE;
	r->meminfo_fd = r->psi_fd = r->psi_trig_fd = -1;
	r->procbuf = malloc(RESERVE_PROC_BUF);
	if (!r->procbuf)
		goto out_free;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0)
		goto out_free;
	open_machine(r, cfg);
	arena_get_stats(a, &as);
	r->window_start_ms = r->pressure_ms = now_ms();
	r->window_taken = as.pages_taken;
	first = r->fixed_pages ? r->fixed_pages : RESERVE_MIN / ARENA_PAGE_SIZE;
	arena_set_reserve_target(a, first);
	arena_set_reserve_mode(a, on_low, r);
	err = arena_refill(a, first);
	if (err) {
		errno = -err;
		goto out_close;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	err = pthread_create(&r->tid, &attr, reserve_thread, r);
	pthread_attr_destroy(&attr);
	if (err) {
		errno = err;
		goto out_close;
	}
	atomic_store(&running, r);
	return r;

out_close:
	close_machine(r);
	close(r->efd);
out_free:
	free(r->procbuf);
	free(r);
	return NULL;
}

void reserve_stop(struct reserve *r)
{
	uint64_t one = 1;
	ssize_t n;

	if (!r)
		return;
	/* No request runs any more; the hook must not outlive r. */
	arena_set_reserve_mode(r->arena, NULL, NULL);
	atomic_store(&running, NULL);
	atomic_store(&r->stop, true);
	n = write(r->efd, &one, sizeof(one));
	(void)n;
	pthread_join(r->tid, NULL);
	close_machine(r);
	close(r->efd);
	free(r->procbuf);
	free(r);
}

void reserve_get_stats(struct reserve_stats *st)
{
	struct reserve *r = atomic_load(&running);

	memset(st, 0, sizeof(*st));
	if (!r)
		return;
	st->peak_rate = atomic_load_explicit(&r->peak_rate, memory_order_relaxed);
	st->refill_failures = atomic_load_explicit(&r->refill_failures, memory_order_relaxed);
	st->refill_max_us = atomic_load_explicit(&r->refill_max_us, memory_order_relaxed);
	st->wakeups = atomic_load_explicit(&r->wakeups, memory_order_relaxed);
	st->refill_wait_us = atomic_load_explicit(&r->refill_wait_us, memory_order_relaxed);
	st->pressure = atomic_load_explicit(&r->pressure_level, memory_order_relaxed);
	st->pressure_wakeups = atomic_load_explicit(&r->pressure_wakeups, memory_order_relaxed);
	st->mem_available = atomic_load_explicit(&r->mem_available, memory_order_relaxed);
}
