/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The input format of fuzz/fuzz_backing.c, shared with fuzz/mkseed.c, which
 * writes seeds in it.  What each part means and checks: fuzz_backing.c.
 *
 * Byte 0: bits 0-1 the mode, bits 2-3 the cipher of the input's backing
 * file, bit 4 a flag of the mode.
 */
#ifndef ZSWAPFS_FUZZ_BACKING_H
#define ZSWAPFS_FUZZ_BACKING_H

#include <stdint.h>

#include "seal.h"

enum fb_mode {
	FB_WALK,	/* u16 start, u32 segment, the segment's bytes; flag: start from the end */
	FB_READ,	/* u32 offset, u32 location, u32 slot, the file's bytes there;
			 * flag: read at the offset itself */
	FB_OPS,		/* operations (enum fb_op) until the input ends */
	FB_HEADER,	/* the file's bytes, opened as an existing backing file */
};

#define FB_HOW(mode, cipher_bits, flag) \
	((uint8_t)((mode) | (cipher_bits) << 2 | ((flag) ? 0x10 : 0)))

/* Bits 2-3 of byte 0: 0 and 3 plain (so that half of all inputs are),
 * 1 AES-256-GCM, 2 ChaCha20-Poly1305. */
static inline enum seal_cipher fb_cipher(uint8_t how)
{
	switch (how >> 2 & 3) {
	case 1:
		return SEAL_AES_256_GCM;
	case 2:
		return SEAL_CHACHA20_POLY1305;
	default:
		return SEAL_NONE;
	}
}

/*
 * FB_OPS: each operation is a byte (taken modulo FB_OP_COUNT) and its
 * arguments.  A "target" is three bytes: sel, then a little-endian u16 d.
 * With bit 7 of sel clear (and an object appended in this input), it is the
 * location of the (sel % n)th object appended plus d taken as signed;
 * otherwise ((sel & 0x7f) << 16 | d), both modulo the file's size.  A slot
 * byte s names slot FB_SLOT(s): few slots, so that objects share them.  A
 * u16 len is 1 + len % 4096 for an object, 1 + len % 8192 for file bytes.
 */
#define FB_SLOT(s)	(100u + (s) % 8u)

enum fb_op {
	FB_APPEND,	/* slot, codec, u16 len, fill, n: n bytes of data from the
			 * input, the rest of len bytes a pattern from fill */
	FB_FLUSH,
	FB_ABORT,
	FB_READ_OBJ,	/* k, slot: object k % n; slot 0: its own, else FB_SLOT */
	FB_READ_AT,	/* target, slot */
	FB_WALK_SEG,	/* sel, arg: by sel >> 6, 0: from object arg % n; 1, 3: from
			 * the start of segment arg % 5; 2: from 16 * (a u16 more)
			 * in segment arg % 5 */
	FB_FORGE,	/* target, n: n bytes of the input written there */
	FB_FLIP,	/* target, bit */
	FB_COPY,	/* target from, target to, u16 len */
	FB_SWAP,	/* target a, target b, u16 len */
	FB_SNAPSHOT,	/* i, target, u16 len: keep those bytes of the file as snapshot i */
	FB_REPLAY,	/* i, how: write snapshot i back where it was (how even) or at a
			 * target (how odd) */
	FB_TRUNCATE,	/* target: the file ends there */
	FB_ROUND,	/* free every object, flush: segments start again */
	FB_OP_COUNT
};

#endif
