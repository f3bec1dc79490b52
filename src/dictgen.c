/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The ring of dictionary generations; see dictgen.h for the rules. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dictgen.h"

static uint64_t now_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec;
}

void dictgen_init(struct dictgen *g, const struct codec_ops *main_ops, int main_level,
		  const struct codec_ops *recomp_ops, int recomp_level)
{
	unsigned int i;

	memset(g, 0, sizeof(*g));
	g->ops[DICTGEN_MAIN] = main_ops;
	g->level[DICTGEN_MAIN] = main_level;
	g->ops[DICTGEN_RECOMP] = recomp_ops;
	g->level[DICTGEN_RECOMP] = recomp_level;
	atomic_init(&g->current, 0);
	for (i = 0; i <= DICTGEN_MAX; i++) {
		atomic_init(&g->e[i].refs, 0);
		atomic_init(&g->e[i].live, false);
	}
	pthread_mutex_init(&g->lock, NULL);
}

static void entry_free(struct dictgen_entry *e);

static unsigned char *shared_bytes(struct dictgen *g, unsigned int i, unsigned int r)
{
	return (unsigned char *)g->shared + DICTGEN_SHARED_HDR +
	       ((size_t)(i - 1) * DICTGEN_ROLES + r) * DICT_MAX_SIZE;
}

/* Generation i's bytes into the shared region (g->lock held). */
static void shared_write(struct dictgen *g, unsigned int i, struct codec_dict *const *cd)
{
	struct dictgen_shared *sh = g->shared;
	unsigned int r;

	if (!sh)
		return;
	for (r = 0; r < DICTGEN_ROLES; r++)
		atomic_store(&sh->e[i].len[r], 0);
	for (r = 0; r < DICTGEN_ROLES; r++)
		if (cd[r] && cd[r]->len <= DICT_MAX_SIZE)
			memcpy(shared_bytes(g, i, r), cd[r]->bytes, cd[r]->len);
	sh->e[i].number = g->e[i].number;
	sh->installed = g->installed;
	for (r = 0; r < DICTGEN_ROLES; r++)
		if (cd[r] && cd[r]->len <= DICT_MAX_SIZE)
			atomic_store_explicit(&sh->e[i].len[r], (uint32_t)cd[r]->len,
					      memory_order_release);
}

int dictgen_restore(struct dictgen *g)
{
	struct dictgen_shared *sh = g->shared;
	unsigned int i, r, cur;
	int err = 0;

	if (!sh)
		return 0;
	pthread_mutex_lock(&g->lock);
	for (i = 1; i <= DICTGEN_MAX && !err; i++) {
		struct dictgen_entry *e = &g->e[i];
		bool any = false;

		for (r = 0; r < DICTGEN_ROLES && !err; r++) {
			uint32_t len = atomic_load_explicit(&sh->e[i].len[r], memory_order_acquire);

			if (!len)
				continue;
			if (len > DICT_MAX_SIZE || !codec_has_dict(g->ops[r])) {
				err = -EINVAL;
				break;
			}
			err = codec_dict_create(&e->cd[r], g->ops[r], g->level[r],
						shared_bytes(g, i, r), len);
			any = !err;
		}
		if (err)
			break;
		if (any) {
			e->number = sh->e[i].number;
			e->created = now_secs();
			atomic_store(&e->live, true);
		}
	}
	if (err) {
		for (i = 1; i <= DICTGEN_MAX; i++)
			entry_free(&g->e[i]);
	} else {
		g->installed = sh->installed;
		cur = atomic_load(&sh->current);
		if (cur <= DICTGEN_MAX && cur && atomic_load(&g->e[cur].live))
			atomic_store(&g->current, cur);
	}
	pthread_mutex_unlock(&g->lock);
	return err;
}

static void entry_free(struct dictgen_entry *e)
{
	unsigned int r;

	for (r = 0; r < DICTGEN_ROLES; r++) {
		codec_dict_put(e->cd[r]);
		e->cd[r] = NULL;
	}
	atomic_store(&e->live, false);
}

void dictgen_fini(struct dictgen *g)
{
	unsigned int i;

	for (i = 1; i <= DICTGEN_MAX; i++)
		if (atomic_load(&g->e[i].live))
			entry_free(&g->e[i]);
	pthread_mutex_destroy(&g->lock);
}

int dictgen_install(struct dictgen *g, const void *main_bytes, size_t main_len,
		    const void *recomp_bytes, size_t recomp_len)
{
	struct codec_dict *cd[DICTGEN_ROLES] = { NULL, NULL };
	const void *bytes[DICTGEN_ROLES] = { main_bytes, recomp_bytes };
	size_t len[DICTGEN_ROLES] = { main_len, recomp_len };
	struct dictgen_entry *e;
	unsigned int i, r;
	int err = 0;

	/* Prepared before the lock: it takes time and memory, and a failure
	 * leaves the ring as it was. */
	for (r = 0; r < DICTGEN_ROLES; r++) {
		if (!bytes[r] || !len[r] || !codec_has_dict(g->ops[r]))
			continue;
		err = codec_dict_create(&cd[r], g->ops[r], g->level[r], bytes[r], len[r]);
		if (err)
			goto out_put;
	}
	if (!cd[DICTGEN_MAIN] && !cd[DICTGEN_RECOMP]) {
		err = -EINVAL;
		goto out_put;
	}

	pthread_mutex_lock(&g->lock);
	for (i = 1; i <= DICTGEN_MAX; i++)
		if (!atomic_load(&g->e[i].live) && atomic_load(&g->e[i].refs) == 0)
			break;
	if (i > DICTGEN_MAX) {
		pthread_mutex_unlock(&g->lock);
		err = -EBUSY;
		goto out_put;
	}
	e = &g->e[i];
	for (r = 0; r < DICTGEN_ROLES; r++)
		e->cd[r] = cd[r];
	e->number = ++g->installed;
	e->created = now_secs();
	shared_write(g, i, cd);
	atomic_store(&e->live, true);
	/* Published last: a pinner that sees i current sees its dictionaries. */
	atomic_store(&g->current, i);
	if (g->shared)
		atomic_store(&g->shared->current, i);
	pthread_mutex_unlock(&g->lock);
	return (int)i;

out_put:
	for (r = 0; r < DICTGEN_ROLES; r++)
		codec_dict_put(cd[r]);
	return err;
}

unsigned int dictgen_reap(struct dictgen *g)
{
	unsigned int i, freed = 0;

	pthread_mutex_lock(&g->lock);
	for (i = 1; i <= DICTGEN_MAX; i++) {
		struct dictgen_entry *e = &g->e[i];

		/* In this order: see dictgen.h on why pinning needs no lock. */
		if (!atomic_load(&e->live) || atomic_load(&g->current) == i ||
		    atomic_load(&e->refs) != 0)
			continue;
		entry_free(e);
		if (g->shared) {	/* no slot names it: nothing to rebuild */
			unsigned int r;

			for (r = 0; r < DICTGEN_ROLES; r++)
				atomic_store(&g->shared->e[i].len[r], 0);
		}
		freed++;
	}
	pthread_mutex_unlock(&g->lock);
	return freed;
}

unsigned int dictgen_pin(struct dictgen *g)
{
	unsigned int i;

	for (;;) {
		i = atomic_load(&g->current);
		if (!i)
			return 0;
		atomic_fetch_add(&g->e[i].refs, 1);
		if (atomic_load(&g->current) == i)
			return i;
		/* Replaced meanwhile: its dictionaries may be going. */
		atomic_fetch_sub(&g->e[i].refs, 1);
	}
}

void dictgen_get_stats(struct dictgen *g, struct dictgen_stats *s)
{
	unsigned int i, cur;

	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&g->lock);
	cur = atomic_load(&g->current);
	for (i = 1; i <= DICTGEN_MAX; i++) {
		const struct dictgen_entry *e = &g->e[i];
		uint64_t refs = atomic_load(&e->refs);

		if (!atomic_load(&e->live))
			continue;
		s->generations++;
		if (i != cur) {
			s->refs_older += refs;
			continue;
		}
		s->number = e->number;
		s->bytes = e->cd[DICTGEN_MAIN] ? e->cd[DICTGEN_MAIN]->len :
						 e->cd[DICTGEN_RECOMP]->len;
		s->age = now_secs() - e->created;
		s->refs_current = refs;
	}
	pthread_mutex_unlock(&g->lock);
}

int dictgen_copy_current(struct dictgen *g, void **bufp, size_t *lenp)
{
	const struct codec_dict *cd;
	unsigned int cur;
	void *buf;
	int err = 0;

	pthread_mutex_lock(&g->lock);
	cur = atomic_load(&g->current);
	if (!cur) {
		err = -ENOENT;
		goto out_unlock;
	}
	cd = g->e[cur].cd[DICTGEN_MAIN] ? g->e[cur].cd[DICTGEN_MAIN] : g->e[cur].cd[DICTGEN_RECOMP];
	buf = malloc(cd->len);
	if (!buf) {
		err = -ENOMEM;
		goto out_unlock;
	}
	memcpy(buf, cd->bytes, cd->len);
	*bufp = buf;
	*lenp = cd->len;
out_unlock:
	pthread_mutex_unlock(&g->lock);
	return err;
}
