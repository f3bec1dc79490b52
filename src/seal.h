/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * seal: authenticated encryption (AEAD) of what goes to the backing file,
 * under a key that exists only in this process's locked memory.
 *
 * Swapped memory holds every secret of the programs that run (keys,
 * passwords, documents); the backing file puts some of it on a disk that
 * may be stolen, imaged, or read by whoever gets root on a machine it is
 * moved to.  Sealing makes the file worthless without the key, and the key
 * never leaves RAM: a new one is drawn from getrandom() at each mount,
 * kept in a page that is mlock'ed and left out of core dumps
 * (MADV_DONTDUMP), and wiped when the backing file closes.  The tag also
 * makes forged, moved or replayed data fail instead of being returned.
 *
 * Two ciphers, both from OpenSSL's libcrypto: AES-256-GCM, the faster where
 * the CPU has AES instructions (AES-NI and PCLMULQDQ on x86), and
 * ChaCha20-Poly1305, the faster where it has not.  seal_fastest() measures
 * which one seals 4 KiB faster here (contrib/bench/sealbench has the
 * figures).
 *
 * A key's contexts (struct seal_ctx) are made once per thread that seals or
 * opens: seal_encrypt()/seal_decrypt() only set the nonce of a keyed
 * context and allocate nothing (checked by check_backing).  A context is
 * used by one thread at a time; a key may be shared by any number of
 * contexts and must outlive them.
 *
 * Nonces (SEAL_NONCE_SIZE bytes) are the caller's business, and must never
 * repeat under one key: GCM and Poly1305 both lose everything they protect
 * when one does.
 */
#ifndef ZSWAPFS_SEAL_H
#define ZSWAPFS_SEAL_H

#include <stddef.h>
#include <stdint.h>

enum seal_cipher {
	SEAL_NONE,			/* no sealing (CRC-32C only) */
	SEAL_AES_256_GCM,
	SEAL_CHACHA20_POLY1305,
	SEAL_AUTO,			/* the faster of the two here: seal_fastest() */
};

#define SEAL_KEY_SIZE		32u
#define SEAL_NONCE_SIZE		12u
#define SEAL_TAG_SIZE		16u

struct seal_key;
struct seal_ctx;

/* "none", "aes-256-gcm", "chacha20-poly1305", "auto". */
const char *seal_cipher_name(enum seal_cipher c);

/*
 * Measure both ciphers on 4 KiB (a few hundred objects each, about a
 * millisecond) and return the faster.  SEAL_AES_256_GCM if the measurement
 * cannot be made.
 */
enum seal_cipher seal_fastest(void);

/*
 * A new random key for cipher c (not SEAL_NONE; SEAL_AUTO picks with
 * seal_fastest()).  NULL with errno set: ENOMEM, EPERM/EAGAIN (the page
 * could not be locked), ENOSYS (libcrypto lacks the cipher), or getrandom's
 * error.
 */
struct seal_key *seal_key_create(enum seal_cipher c);
/*
 * The same with the key's bytes given (a key that outlives the process that
 * drew it: backing.h, Restart): copied into a page like seal_key_create's.
 * c is a cipher, not SEAL_NONE or SEAL_AUTO.
 */
struct seal_key *seal_key_import(enum seal_cipher c, const unsigned char bytes[SEAL_KEY_SIZE]);
/* Draw a new key's bytes into key (the caller's locked memory).  0 or -errno. */
int seal_key_draw(unsigned char key[SEAL_KEY_SIZE]);
/* Wipe len bytes at p, in a way the compiler cannot drop. */
void seal_wipe(void *p, size_t len);
/* Wipe the key and give its page back.  NULL is a no-op. */
void seal_key_destroy(struct seal_key *k);
enum seal_cipher seal_key_cipher(const struct seal_key *k);

/* A context keyed with k.  NULL with errno set. */
struct seal_ctx *seal_ctx_create(const struct seal_key *k);
/* Wipes the key schedules too.  NULL is a no-op. */
void seal_ctx_destroy(struct seal_ctx *c);

/*
 * Encrypt len bytes (len >= 1) from in to out (the same buffer, or not
 * overlapping at all) and authenticate them with adlen bytes of ad, which
 * are not encrypted; the tag goes to tag.  Returns 0, or -EIO if libcrypto
 * failed.
 */
int seal_encrypt(struct seal_ctx *c, const uint8_t nonce[SEAL_NONCE_SIZE], const void *ad,
		 size_t adlen, const void *in, void *out, size_t len, uint8_t tag[SEAL_TAG_SIZE]);
/*
 * The reverse.  Returns 0, or -EBADMSG when the tag does not match: out
 * then holds garbage that must not be used.
 */
int seal_decrypt(struct seal_ctx *c, const uint8_t nonce[SEAL_NONCE_SIZE], const void *ad,
		 size_t adlen, const void *in, void *out, size_t len,
		 const uint8_t tag[SEAL_TAG_SIZE]);

#endif
