/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lat: a latency histogram of one request path, updated lock-free.
 *
 * Buckets are log2 of microseconds: bucket 0 holds times under 2 us,
 * bucket k (1..LAT_BUCKETS-2) times in [2^k, 2^(k+1)) us, the last one
 * everything from 2^20 us (about 1 s) on.  One relaxed atomic add per
 * field and a CAS loop for the maximum: no lock and no allocation, so a
 * request thread can account itself while serving swap.  Header only: the
 * store (the disk reads) and stats (the requests) both use it.
 */
#ifndef ZSWAPFS_LAT_H
#define ZSWAPFS_LAT_H

#include <stdatomic.h>
#include <stdint.h>

#define LAT_BUCKETS	21u

struct lat_hist {
	_Atomic uint64_t count;
	_Atomic uint64_t ns_total;
	_Atomic uint64_t ns_max;
	_Atomic uint64_t bucket[LAT_BUCKETS];
};

static inline unsigned int lat_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned int k;

	if (us < 2)
		return 0;
	k = 63u - (unsigned int)__builtin_clzll(us);
	return k < LAT_BUCKETS - 1 ? k : LAT_BUCKETS - 1;
}

/* The lower bound of bucket k in microseconds (0 for the first). */
static inline uint64_t lat_bucket_us(unsigned int k)
{
	return k ? UINT64_C(1) << k : 0;
}

static inline void lat_add(struct lat_hist *h, uint64_t ns)
{
	uint64_t max = atomic_load_explicit(&h->ns_max, memory_order_relaxed);

	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->ns_total, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->bucket[lat_bucket(ns)], 1, memory_order_relaxed);
	while (ns > max && !atomic_compare_exchange_weak_explicit(&h->ns_max, &max, ns,
								  memory_order_relaxed,
								  memory_order_relaxed))
		;
}

#endif
