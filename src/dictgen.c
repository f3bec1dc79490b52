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
	atomic_store(&e->live, true);
	/* Published last: a pinner that sees i current sees its dictionaries. */
	atomic_store(&g->current, i);
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
