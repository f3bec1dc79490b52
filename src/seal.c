/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * seal: AEAD through libcrypto's EVP interface (OpenSSL 3).
 *
 * A context is keyed once (EVP_EncryptInit_ex2 with the cipher and key);
 * each object then only sets its nonce (cipher and key NULL), which in
 * OpenSSL 3's default provider resets the GCM/Poly1305 state in place and
 * allocates nothing.  The ciphers are fetched explicitly once per key, so
 * no implicit fetch (a lock and a lookup) happens per object either.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "seal.h"

/*
 * The key lives alone in an anonymous page of its own: mlock'ed (never
 * written to swap: that would be the very leak we exist to prevent, and to
 * a device that may be our own), MADV_DONTDUMP (not in core dumps), and
 * wiped before the page is unmapped.  A fork (fuse_daemonize) keeps
 * MADV_DONTDUMP but not the lock (mlock(2)): the daemon's mlockall, right
 * after it, locks the page again, with the contexts' key schedules, which
 * live in libcrypto's heap.
 */
struct seal_key {
	unsigned char key[SEAL_KEY_SIZE];
	enum seal_cipher cipher;
	EVP_CIPHER *evp;
	size_t page_size;
};

struct seal_ctx {
	EVP_CIPHER_CTX *enc;
	EVP_CIPHER_CTX *dec;
};

const char *seal_cipher_name(enum seal_cipher c)
{
	switch (c) {
	case SEAL_NONE:
		return "none";
	case SEAL_AES_256_GCM:
		return "aes-256-gcm";
	case SEAL_CHACHA20_POLY1305:
		return "chacha20-poly1305";
	case SEAL_AUTO:
		return "auto";
	}
	return "?";
}

static const char *evp_name(enum seal_cipher c)
{
	return c == SEAL_AES_256_GCM ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

/* ---- keys ------------------------------------------------------------------- */

static int random_bytes(void *buf, size_t len)
{
	unsigned char *p = buf;
	ssize_t n;

	while (len) {
		/* Blocks only until the kernel's pool is first seeded, at boot. */
		n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int seal_key_draw(unsigned char key[SEAL_KEY_SIZE])
{
	return random_bytes(key, SEAL_KEY_SIZE);
}

void seal_wipe(void *p, size_t len)
{
	/* Not memset: a store to memory about to be freed may be elided. */
	OPENSSL_cleanse(p, len);
}

/* A key page for cipher c (resolved), its bytes from `bytes`, or drawn when NULL. */
static struct seal_key *key_make(enum seal_cipher c, const unsigned char *bytes)
{
	long psz = sysconf(_SC_PAGESIZE);
	struct seal_key *k;
	int e;

	if (c != SEAL_AES_256_GCM && c != SEAL_CHACHA20_POLY1305) {
		errno = EINVAL;
		return NULL;
	}
	if (psz < (long)sizeof(*k))
		psz = 4096;
	k = mmap(NULL, (size_t)psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (k == MAP_FAILED)
		return NULL;
	if (mlock(k, (size_t)psz))
		goto out_unmap;
	if (madvise(k, (size_t)psz, MADV_DONTDUMP))
		goto out_unlock;
	k->page_size = (size_t)psz;
	k->cipher = c;
	k->evp = EVP_CIPHER_fetch(NULL, evp_name(c), NULL);
	if (!k->evp) {
		errno = ENOSYS;
		goto out_unlock;
	}
	if (bytes) {
		memcpy(k->key, bytes, sizeof(k->key));
	} else {
		e = random_bytes(k->key, sizeof(k->key));
		if (e) {
			EVP_CIPHER_free(k->evp);
			errno = -e;
			goto out_unlock;
		}
	}
	return k;

out_unlock:
	e = errno;
	munlock(k, (size_t)psz);
	errno = e;
out_unmap:
	e = errno;
	munmap(k, (size_t)psz);
	errno = e;
	return NULL;
}

struct seal_key *seal_key_create(enum seal_cipher c)
{
	return key_make(c == SEAL_AUTO ? seal_fastest() : c, NULL);
}

struct seal_key *seal_key_import(enum seal_cipher c, const unsigned char bytes[SEAL_KEY_SIZE])
{
	return key_make(c, bytes);
}

void seal_key_destroy(struct seal_key *k)
{
	size_t psz;

	if (!k)
		return;
	psz = k->page_size;
	EVP_CIPHER_free(k->evp);
	/* Not memset: a store to memory about to be unmapped may be elided. */
	OPENSSL_cleanse(k, psz);
	munlock(k, psz);
	munmap(k, psz);
}

enum seal_cipher seal_key_cipher(const struct seal_key *k)
{
	return k->cipher;
}

/* ---- contexts ------------------------------------------------------------------ */

struct seal_ctx *seal_ctx_create(const struct seal_key *k)
{
	struct seal_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->enc = EVP_CIPHER_CTX_new();
	c->dec = EVP_CIPHER_CTX_new();
	if (!c->enc || !c->dec)
		goto out_free;
	/* Both ciphers take a 12-byte nonce by default: nothing else to set. */
	if (EVP_EncryptInit_ex2(c->enc, k->evp, k->key, NULL, NULL) != 1 ||
	    EVP_DecryptInit_ex2(c->dec, k->evp, k->key, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_get_iv_length(c->enc) != (int)SEAL_NONCE_SIZE)
		goto out_free;
	return c;

out_free:
	seal_ctx_destroy(c);
	errno = ENOMEM;
	return NULL;
}

void seal_ctx_destroy(struct seal_ctx *c)
{
	if (!c)
		return;
	/* EVP_CIPHER_CTX_free cleanses the provider's state (the key schedule). */
	EVP_CIPHER_CTX_free(c->enc);
	EVP_CIPHER_CTX_free(c->dec);
	free(c);
}

int seal_encrypt(struct seal_ctx *c, const uint8_t nonce[SEAL_NONCE_SIZE], const void *ad,
		 size_t adlen, const void *in, void *out, size_t len, uint8_t tag[SEAL_TAG_SIZE])
{
	int n, fin;

	if (len == 0 || len > INT32_MAX || adlen > INT32_MAX)
		return -EIO;
	if (EVP_EncryptInit_ex2(c->enc, NULL, NULL, nonce, NULL) != 1 ||
	    EVP_EncryptUpdate(c->enc, NULL, &n, ad, (int)adlen) != 1 ||
	    EVP_EncryptUpdate(c->enc, out, &n, in, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(c->enc, (unsigned char *)out + n, &fin) != 1 ||
	    (size_t)(n + fin) != len ||
	    EVP_CIPHER_CTX_ctrl(c->enc, EVP_CTRL_AEAD_GET_TAG, SEAL_TAG_SIZE, tag) != 1)
		return -EIO;
	return 0;
}

int seal_decrypt(struct seal_ctx *c, const uint8_t nonce[SEAL_NONCE_SIZE], const void *ad,
		 size_t adlen, const void *in, void *out, size_t len,
		 const uint8_t tag[SEAL_TAG_SIZE])
{
	int n, fin;

	if (len == 0 || len > INT32_MAX || adlen > INT32_MAX)
		return -EBADMSG;
	if (EVP_DecryptInit_ex2(c->dec, NULL, NULL, nonce, NULL) != 1 ||
	    EVP_DecryptUpdate(c->dec, NULL, &n, ad, (int)adlen) != 1 ||
	    EVP_DecryptUpdate(c->dec, out, &n, in, (int)len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c->dec, EVP_CTRL_AEAD_SET_TAG, SEAL_TAG_SIZE,
				(void *)tag) != 1 ||
	    EVP_DecryptFinal_ex(c->dec, (unsigned char *)out + n, &fin) != 1)
		return -EBADMSG;
	return 0;
}

/* ---- which cipher ----------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Nanoseconds of the best of a few rounds of sealing 4 KiB objects (the
 * best, not the mean: a round that was preempted says nothing about the
 * cipher); UINT64_MAX when the cipher cannot be used.
 */
static uint64_t time_cipher(enum seal_cipher c, unsigned char *buf)
{
	enum { ROUNDS = 5, PER_ROUND = 48, OBJ = 4096 };
	uint8_t nonce[SEAL_NONCE_SIZE] = { 0 }, tag[SEAL_TAG_SIZE], ad[24] = { 0 };
	uint64_t best = UINT64_MAX, t;
	struct seal_key *k = seal_key_create(c);
	struct seal_ctx *ctx = k ? seal_ctx_create(k) : NULL;
	unsigned int r, i;

	if (!ctx)
		goto out;
	for (r = 0; r <= ROUNDS; r++) {
		t = now_ns();
		for (i = 0; i < PER_ROUND; i++) {
			nonce[0] = (uint8_t)i;
			nonce[1] = (uint8_t)r;
			if (seal_encrypt(ctx, nonce, ad, sizeof(ad), buf, buf, OBJ, tag)) {
				best = UINT64_MAX;
				goto out;
			}
		}
		t = now_ns() - t;
		/* Round 0 warms the caches and the CPU's clock: not counted. */
		if (r && t < best)
			best = t;
	}
out:
	seal_ctx_destroy(ctx);
	seal_key_destroy(k);
	return best;
}

enum seal_cipher seal_fastest(void)
{
	unsigned char *buf = calloc(1, 4096);
	uint64_t gcm, chacha;

	if (!buf)
		return SEAL_AES_256_GCM;
	gcm = time_cipher(SEAL_AES_256_GCM, buf);
	chacha = time_cipher(SEAL_CHACHA20_POLY1305, buf);
	free(buf);
	return chacha < gcm ? SEAL_CHACHA20_POLY1305 : SEAL_AES_256_GCM;
}
