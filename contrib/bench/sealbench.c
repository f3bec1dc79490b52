/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sealbench: what sealing a backing-file object costs, per cipher, with the
 * daemon's own code (src/seal.c).
 *
 *	sealbench [-n OBJECTS] [-r ROUNDS] [-s SIZE]
 *
 * For AES-256-GCM and ChaCha20-Poly1305: ROUNDS rounds of OBJECTS seals
 * (then opens) of SIZE bytes (default 4096, a raw page; compressed pages
 * are ~1.5 KiB) with 24 bytes of authenticated data, each with its own
 * nonce, as the backing file does; prints the median and best ns per
 * object and the MB/s of the median, the heap allocations libcrypto made
 * per object (must be 0), and which cipher seal_fastest() picks.
 *
 * Without AES-NI: OpenSSL honours OPENSSL_ia32cap, so
 *	OPENSSL_ia32cap="~0x200000200000000" ./sealbench
 * runs as on a CPU without AES-NI and PCLMULQDQ (bits 57 and 33).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "seal.h"

static unsigned long allocs;

static void *count_malloc(size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	allocs++;
	return malloc(n);
}

static void *count_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	allocs++;
	return realloc(p, n);
}

static void count_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	free(p);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void bench(enum seal_cipher c, unsigned int n, unsigned int rounds, size_t size)
{
	uint64_t *enc = calloc(rounds, sizeof(*enc)), *dec = calloc(rounds, sizeof(*dec));
	unsigned char *buf = malloc(size), *tags = malloc((size_t)n * SEAL_TAG_SIZE);
	unsigned char *objs = malloc((size_t)n * size);
	uint8_t nonce[SEAL_NONCE_SIZE] = { 0 }, ad[24] = { 0 };
	struct seal_key *k = seal_key_create(c);
	struct seal_ctx *ctx = k ? seal_ctx_create(k) : NULL;
	unsigned long a0, enc_allocs = 0, dec_allocs = 0;
	unsigned int r, i;
	uint64_t t;

	if (!enc || !dec || !buf || !tags || !objs || !ctx) {
		fprintf(stderr, "%s: cannot set up\n", seal_cipher_name(c));
		exit(1);
	}
	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)(i * 131 + (i >> 7));
	for (r = 0; r < rounds; r++) {
		a0 = allocs;
		t = now_ns();
		for (i = 0; i < n; i++) {
			memcpy(nonce, &i, sizeof(i));
			memcpy(nonce + 4, &r, sizeof(r));
			if (seal_encrypt(ctx, nonce, ad, sizeof(ad), buf, objs + (size_t)i * size,
					 size, tags + (size_t)i * SEAL_TAG_SIZE))
				exit(1);
		}
		enc[r] = now_ns() - t;
		enc_allocs += allocs - a0;
		a0 = allocs;
		t = now_ns();
		for (i = 0; i < n; i++) {
			memcpy(nonce, &i, sizeof(i));
			memcpy(nonce + 4, &r, sizeof(r));
			if (seal_decrypt(ctx, nonce, ad, sizeof(ad), objs + (size_t)i * size,
					 objs + (size_t)i * size, size,
					 tags + (size_t)i * SEAL_TAG_SIZE)) {
				fprintf(stderr, "%s: tag mismatch\n", seal_cipher_name(c));
				exit(1);
			}
		}
		dec[r] = now_ns() - t;
		dec_allocs += allocs - a0;
	}
	qsort(enc, rounds, sizeof(*enc), cmp_u64);
	qsort(dec, rounds, sizeof(*dec), cmp_u64);
	printf("%-18s %5zu B  seal %7.0f ns (best %7.0f) %6.0f MB/s   open %7.0f ns (best %7.0f) "
	       "%6.0f MB/s   allocs/object %.3f\n",
	       seal_cipher_name(c), size, (double)enc[rounds / 2] / n, (double)enc[0] / n,
	       (double)size * n / ((double)enc[rounds / 2] / 1e3),
	       (double)dec[rounds / 2] / n, (double)dec[0] / n,
	       (double)size * n / ((double)dec[rounds / 2] / 1e3),
	       (double)(enc_allocs + dec_allocs) / (2.0 * n * rounds));
	seal_ctx_destroy(ctx);
	seal_key_destroy(k);
	free(objs);
	free(tags);
	free(buf);
	free(dec);
	free(enc);
}

int main(int argc, char **argv)
{
	unsigned int n = 2000, rounds = 15;
	size_t size = 4096;
	int opt;

	/* Before libcrypto allocates anything. */
	if (!CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free)) {
		fprintf(stderr, "CRYPTO_set_mem_functions failed\n");
		return 1;
	}
	while ((opt = getopt(argc, argv, "n:r:s:")) != -1) {
		switch (opt) {
		case 'n':
			n = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			rounds = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-n OBJECTS] [-r ROUNDS] [-s SIZE]\n", argv[0]);
			return 2;
		}
	}
	if (!n || !rounds || !size) {
		fprintf(stderr, "OBJECTS, ROUNDS and SIZE must be positive\n");
		return 2;
	}
	printf("OPENSSL_ia32cap=%s\n", getenv("OPENSSL_ia32cap") ? getenv("OPENSSL_ia32cap") : "");
	bench(SEAL_AES_256_GCM, n, rounds, size);
	bench(SEAL_CHACHA20_POLY1305, n, rounds, size);
	printf("seal_fastest: %s\n", seal_cipher_name(seal_fastest()));
	return 0;
}
