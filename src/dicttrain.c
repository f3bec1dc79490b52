/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The dictionary thread; see dicttrain.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* pthread_setname_np */
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "codec.h"
#include "dict.h"
#include "dictgen.h"
#include "dicttrain.h"
#include "harden.h"
#include "log.h"
#include "store.h"

struct dicttrain {
	struct store *st;
	struct dicttrain_config cfg;
	struct store_worker worker;	/* the thread's: decompression of samples */
	pthread_t tid;

	pthread_mutex_t lock;
	pthread_cond_t wake, saved;
	_Atomic bool stop;		/* set under lock, read anywhere */
	/* protected by lock */
	bool train_asked;
	char save_path[PATH_MAX];	/* "" = no save asked */
	uint64_t save_seq, save_done_seq;
	int save_err;
	struct dicttrain_stats stats;

	/* The thread's own: the drift watch. */
	uint64_t last_train;		/* CLOCK_MONOTONIC seconds; 0 = never */
	struct dicttrain_drift drift;
};

static uint64_t mono_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Priorities.  The thread keeps the one it was started with, the request
 * threads' (transport_set_nice), for everything that takes a slot lock
 * (sampling: a scan of the slot table and DICTTRAIN_SAMPLES decompressions,
 * milliseconds of CPU).  A lower one would make it a priority inversion:
 * preempted inside a slot stripe, a nice-19 holder waits behind every busy
 * nice-0 task (its share is 15/1024 of theirs), an idle-class one for as
 * long as any task runs, and a request on that stripe waits with it.  Nor
 * could it come back up: without CAP_SYS_NICE (dropped at start) a thread
 * can neither lower its nice value nor leave SCHED_IDLE.  So the one long
 * piece of CPU work, dict_train() (0.1 to 0.8 s, no lock), runs in a
 * thread of its own that starts, goes SCHED_IDLE and ends.
 */
struct train_job {
	void *dst;
	const void *samples;
	const size_t *sizes;
	unsigned int n;
	long len;
	char err[256];
};

static void *train_idle_thread(void *arg)
{
	struct train_job *j = arg;
	struct sched_param sp = { 0 };

	pthread_setname_np(pthread_self(), "zswapfs-train");
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	j->len = dict_train(j->dst, DICT_TRAIN_SIZE, j->samples, j->sizes, j->n, NULL, j->err,
			    sizeof(j->err));
	return NULL;
}

/* dict_train() of DICT_TRAIN_SIZE bytes, in an idle-class thread; waits for it. */
static long train_idle(void *dst, const void *samples, const size_t *sizes, unsigned int n,
		       char *err, size_t errlen)
{
	struct train_job j = { .dst = dst, .samples = samples, .sizes = sizes, .n = n };
	pthread_attr_t attr;
	pthread_t tid;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	ret = pthread_create(&tid, &attr, train_idle_thread, &j);
	pthread_attr_destroy(&attr);
	if (ret) {
		snprintf(err, errlen, "no training thread: %s", strerror(ret));
		return ret == EAGAIN ? -ENOMEM : -ret;
	}
	pthread_join(tid, NULL);
	snprintf(err, errlen, "%s", j.err);
	return j.len;
}

/* The store's codec's ratio (x1000) on n pages, with dict or none. */
static uint64_t ratio_milli(struct dicttrain *dt, const struct codec_dict *dict,
			    const unsigned char *pages, unsigned int n)
{
	struct codec_ctx *ctx = &dt->worker.ctx[store_codec(dt->st)->id];
	uint64_t in = 0, out = 0;
	unsigned int i;
	int len;

	for (i = 0; i < n; i++) {
		len = codec_compress_dict(ctx, dict, pages + (size_t)i * STORE_PAGE_SIZE,
					  STORE_PAGE_SIZE, dt->worker.cbuf, STORE_HUGE_SIZE);
		if (len <= 0)
			len = STORE_PAGE_SIZE;	/* stored raw */
		in += STORE_PAGE_SIZE;
		out += (uint64_t)len;
	}
	return out ? in * 1000 / out : 0;
}

/*
 * Gather up to DICTTRAIN_SAMPLES pages spread evenly over the compressed,
 * not huge pages of the arena: the even ones into train_pages, the odd ones
 * into held (DICTTRAIN_SAMPLES / 2 pages each).  Returns how many in all.
 */
static unsigned int gather(struct dicttrain *dt, unsigned char *train_pages,
			   unsigned char *held)
{
	struct store *st = dt->st;
	uint64_t nr = store_nr_pages(st), eligible, stride, seen = 0, idx;
	struct store_counters c;
	unsigned char *dst;
	unsigned int n = 0;

	store_get_counters(st, &c);
	eligible = c.dict_pages + c.nodict_pages;
	stride = eligible / DICTTRAIN_SAMPLES;
	if (!stride)
		stride = 1;
	for (idx = 0; idx < nr && n < DICTTRAIN_SAMPLES; idx++) {
		struct store_slot_info info;

		if (atomic_load(&dt->stop))
			break;
		store_slot_info(st, idx, &info);
		if (!info.in_arena || info.huge)
			continue;
		if (seen++ % stride)
			continue;
		dst = (n % 2 ? held : train_pages) + (size_t)(n / 2) * STORE_PAGE_SIZE;
		if (store_sample(st, &dt->worker, idx, dst) == 0)
			n++;
	}
	return n;
}

/*
 * One training pass.  Returns 0 (a new generation is current), 1 (nothing
 * better came of it, or too few pages), -EBUSY (the ring is full) or an
 * error.
 */
static int train(struct dicttrain *dt)
{
	struct dictgen *g = store_dicts(dt->st);
	unsigned char *samples = NULL, *train_pages, *held;
	const struct codec_dict *cur;
	struct codec_dict *cand = NULL;
	uint64_t t0 = mono_ms(), before, after;
	unsigned int n, i, ntrain, nheld;
	size_t *sizes = NULL;
	void *dictbuf = NULL;
	char err[256];
	long len;
	int ret = 1, gen;

	dictgen_reap(g);
	{
		struct dictgen_stats gs;

		dictgen_get_stats(g, &gs);
		if (gs.generations >= DICTGEN_MAX) {
			ret = -EBUSY;
			goto out;
		}
	}
	samples = malloc((size_t)DICTTRAIN_SAMPLES * STORE_PAGE_SIZE);
	sizes = malloc(DICTTRAIN_SAMPLES * sizeof(*sizes));
	dictbuf = malloc(DICT_TRAIN_SIZE);
	if (!samples || !sizes || !dictbuf) {
		ret = -ENOMEM;
		goto out;
	}
	/* Even samples train, odd ones measure: both spread over the store. */
	train_pages = samples;
	held = samples + (size_t)DICTTRAIN_SAMPLES / 2 * STORE_PAGE_SIZE;
	n = gather(dt, train_pages, held);
	if (n < 16)
		goto out;
	ntrain = (n + 1) / 2;
	nheld = n / 2;
	for (i = 0; i < ntrain; i++)
		sizes[i] = STORE_PAGE_SIZE;

	len = train_idle(dictbuf, train_pages, sizes, ntrain, err, sizeof(err));
	if (len < 0) {
		log_info("dictionary training: %s", err);
		ret = len == -EINVAL ? 1 : (int)len;
		goto out;
	}
	ret = codec_dict_create(&cand, store_codec(dt->st), 0, dictbuf, (size_t)len);
	if (ret == -EOPNOTSUPP) {
		/* lzo: only the recompression codec can use it. */
		ret = 0;
	} else if (ret) {
		goto out;
	}
	/* Measured against what new pages get now: the current dictionary. */
	gen = (int)dictgen_pin(g);
	cur = dictgen_dict(g, (unsigned int)gen, DICTGEN_MAIN);
	before = cand ? ratio_milli(dt, cur, held, nheld) : 0;
	after = cand ? ratio_milli(dt, cand, held, nheld) : 0;
	dictgen_unpin(g, (unsigned int)gen);
	pthread_mutex_lock(&dt->lock);
	dt->stats.attempts++;
	dt->stats.ratio_before = before;
	dt->stats.ratio_after = after;
	pthread_mutex_unlock(&dt->lock);
	if (cand && after <= before) {
		log_info("dictionary training: %u pages: ratio %.3f with the new dictionary, "
			 "%.3f now: kept the current one", n, after / 1000.0, before / 1000.0);
		ret = 1;
		goto out;
	}
	gen = dictgen_install(g, dictbuf, (size_t)len, dictbuf, (size_t)len);
	if (gen < 0) {
		ret = gen;
		goto out;
	}
	log_info("dictionary generation %d: %ld bytes from %u pages; held-out ratio "
		 "%.3f -> %.3f", gen, len, n, before / 1000.0, after / 1000.0);
	ret = 0;
out:
	codec_dict_put(cand);
	free(dictbuf);
	free(sizes);
	free(samples);
	pthread_mutex_lock(&dt->lock);
	dt->stats.train_ms += mono_ms() - t0;
	if (ret == 0)
		dt->stats.trainings++;
	if (ret == -EBUSY)
		dt->stats.ring_full++;
	pthread_mutex_unlock(&dt->lock);
	return ret;
}

/*
 * Whether the arena is near mem_limit: memory is short then (writeback
 * runs, requests may wait for room), and a training pass would take
 * DICTTRAIN_MEM_BYTES more for a second.  Automatic training waits.
 */
static bool memory_tight(struct dicttrain *dt)
{
	struct arena_stats as;

	arena_get_stats(store_arena(dt->st), &as);
	return as.limit_bytes &&
	       as.pages_used * ARENA_PAGE_SIZE * 100 > as.limit_bytes * DICTTRAIN_TIGHT_PCT;
}

void dicttrain_drift_reset(struct dicttrain_drift *d, uint64_t pages, uint64_t bytes)
{
	d->win_pages = pages;
	d->win_bytes = bytes;
	d->base_milli = 0;
}

bool dicttrain_drift_check(struct dicttrain_drift *d, uint64_t pages, uint64_t bytes)
{
	uint64_t dp = pages - d->win_pages, db = bytes - d->win_bytes, milli;

	if (dp < DICTTRAIN_WINDOW_PAGES || !db)
		return false;
	milli = dp * STORE_PAGE_SIZE * 1000 / db;
	d->win_pages = pages;
	d->win_bytes = bytes;
	if (!d->base_milli) {
		d->base_milli = milli;
		return false;
	}
	return milli * 100 < d->base_milli * (100 - DICTTRAIN_DRIFT_PCT);
}

/* Whether automatic training is due: no dictionary and enough pages, or
 * the ratio of new pages drifted. */
static bool train_due(struct dicttrain *dt)
{
	struct dictgen *g = store_dicts(dt->st);
	uint64_t pages, bytes;

	if (!dt->cfg.auto_train || memory_tight(dt))
		return false;
	if (dt->last_train && mono_secs() - dt->last_train < DICTTRAIN_MIN_INTERVAL_S)
		return false;
	if (!atomic_load(&g->current)) {
		struct store_counters c;

		store_get_counters(dt->st, &c);
		return c.nodict_pages >= DICTTRAIN_MIN_PAGES;
	}
	store_written(dt->st, true, &pages, &bytes);
	return dicttrain_drift_check(&dt->drift, pages, bytes);
}

/* A new dictionary: the drift watch starts again from its first window. */
static void drift_reset(struct dicttrain *dt)
{
	uint64_t pages, bytes;

	store_written(dt->st, true, &pages, &bytes);
	dicttrain_drift_reset(&dt->drift, pages, bytes);
	dt->last_train = mono_secs();
}

static void do_save(struct dicttrain *dt, const char *path, uint64_t seq)
{
	char err[PATH_MAX + 128];
	void *buf = NULL;
	size_t len = 0;
	int ret;

	err[0] = '\0';
	ret = dictgen_copy_current(store_dicts(dt->st), &buf, &len);
	if (!ret)
		ret = dict_save(path, buf, len, err, sizeof(err));
	free(buf);
	if (ret && err[0])
		log_warn("dict save: %s", err);
	else if (ret)
		log_warn("dict save %s: %s", path, strerror(-ret));
	else
		log_info("dict save: %zu bytes to %s", len, path);
	pthread_mutex_lock(&dt->lock);
	dt->save_err = ret;
	dt->save_done_seq = seq;
	dt->save_path[0] = '\0';
	pthread_cond_broadcast(&dt->saved);
	pthread_mutex_unlock(&dt->lock);
}

static void *dicttrain_thread(void *arg)
{
	struct dicttrain *dt = arg;

	drift_reset(dt);
	dt->last_train = 0;
	pthread_mutex_lock(&dt->lock);
	while (!atomic_load(&dt->stop)) {
		char path[PATH_MAX];
		bool asked;
		uint64_t seq;

		if (dt->save_path[0]) {
			memcpy(path, dt->save_path, sizeof(path));
			seq = dt->save_seq;
			pthread_mutex_unlock(&dt->lock);
			do_save(dt, path, seq);
			pthread_mutex_lock(&dt->lock);
			continue;
		}
		asked = dt->train_asked;
		pthread_mutex_unlock(&dt->lock);

		dictgen_reap(store_dicts(dt->st));
		if (asked || train_due(dt)) {
			int ret = train(dt);

			if (ret == 0 || ret == 1)
				drift_reset(dt);
			if (ret < 0 && ret != -EBUSY)
				log_warn("dictionary training failed: %s", strerror(-ret));
		}

		pthread_mutex_lock(&dt->lock);
		if (asked) {
			dt->train_asked = false;
			dt->stats.pending = false;
		}
		if (!atomic_load(&dt->stop) && !dt->train_asked && !dt->save_path[0]) {
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += DICTTRAIN_TICK_S;
			pthread_cond_timedwait(&dt->wake, &dt->lock, &until);
		}
	}
	pthread_mutex_unlock(&dt->lock);
	return NULL;
}

struct dicttrain *dicttrain_start(struct store *st, const struct dicttrain_config *cfg)
{
	struct dicttrain *dt = calloc(1, sizeof(*dt));
	pthread_attr_t attr;
	int err;

	if (!dt)
		return NULL;
	dt->st = st;
	dt->cfg = *cfg;
	err = store_worker_init(&dt->worker, st);
	if (err)
		goto out_free;
	pthread_mutex_init(&dt->lock, NULL);
	pthread_cond_init(&dt->wake, NULL);
	pthread_cond_init(&dt->saved, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HARDEN_THREAD_STACK);
	err = -pthread_create(&dt->tid, &attr, dicttrain_thread, dt);
	pthread_attr_destroy(&attr);
	if (err)
		goto out_worker;
	return dt;

out_worker:
	store_worker_fini(&dt->worker);
	pthread_cond_destroy(&dt->saved);
	pthread_cond_destroy(&dt->wake);
	pthread_mutex_destroy(&dt->lock);
out_free:
	free(dt);
	errno = -err;
	return NULL;
}

void dicttrain_stop(struct dicttrain *dt)
{
	if (!dt)
		return;
	pthread_mutex_lock(&dt->lock);
	atomic_store(&dt->stop, true);
	pthread_cond_broadcast(&dt->wake);
	pthread_mutex_unlock(&dt->lock);
	pthread_join(dt->tid, NULL);
	store_worker_fini(&dt->worker);
	pthread_cond_destroy(&dt->saved);
	pthread_cond_destroy(&dt->wake);
	pthread_mutex_destroy(&dt->lock);
	free(dt);
}

int dicttrain_request(struct dicttrain *dt)
{
	int ret = 0;

	pthread_mutex_lock(&dt->lock);
	if (dt->train_asked) {
		ret = -EBUSY;
	} else {
		dt->train_asked = true;
		dt->stats.pending = true;
		pthread_cond_signal(&dt->wake);
	}
	pthread_mutex_unlock(&dt->lock);
	return ret;
}

int dicttrain_save(struct dicttrain *dt, const char *path)
{
	struct timespec until;
	uint64_t seq;
	int ret = 0;

	if (strlen(path) >= sizeof(dt->save_path))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&dt->lock);
	if (dt->save_path[0]) {
		pthread_mutex_unlock(&dt->lock);
		return -EBUSY;
	}
	strcpy(dt->save_path, path);
	seq = ++dt->save_seq;
	pthread_cond_signal(&dt->wake);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += DICTTRAIN_SAVE_WAIT_S;
	while (dt->save_done_seq != seq && !ret)
		if (pthread_cond_timedwait(&dt->saved, &dt->lock, &until) == ETIMEDOUT)
			ret = -ETIMEDOUT;
	if (dt->save_done_seq == seq)
		ret = dt->save_err;
	pthread_mutex_unlock(&dt->lock);
	return ret;
}

void dicttrain_get_stats(struct dicttrain *dt, struct dicttrain_stats *s)
{
	pthread_mutex_lock(&dt->lock);
	*s = dt->stats;
	pthread_mutex_unlock(&dt->lock);
}
