/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What every fuzz harness shares.  Each fuzz/fuzz_<what>.c defines
 * LLVMFuzzerTestOneInput (and LLVMFuzzerInitialize where it needs set-up)
 * and is linked two ways: with libFuzzer (`make fuzz`, clang), and with
 * fuzz/replay.c (every build's `make check`), which feeds it the inputs
 * kept under tests/fuzz-cases/ and fuzz/corpus/.
 *
 * A harness reports a broken invariant with fuzz_require(): it prints what
 * failed and aborts, which both drivers take as a crash.  Not assert():
 * it must also fire in builds with NDEBUG.
 */
#ifndef ZSWAPFS_FUZZ_H
#define ZSWAPFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define fuzz_require(expr)							\
	do {									\
		if (!(expr)) {							\
			fprintf(stderr, "%s:%d: invariant broken: %s\n",	\
				__FILE__, __LINE__, #expr);			\
			abort();						\
		}								\
	} while (0)

/* Read the input from the front: a byte, a little-endian word, or 0 once
 * it is used up (so that every input means something). */
struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static inline uint16_t fuzz_u16(struct fuzz_in *in)
{
	uint16_t lo = fuzz_u8(in);

	return (uint16_t)(lo | (uint16_t)fuzz_u8(in) << 8);
}

static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
	uint32_t lo = fuzz_u16(in);

	return lo | (uint32_t)fuzz_u16(in) << 16;
}

/*
 * Memory between two inaccessible pages, for buffers whose overrun must
 * fault at once, with or without AddressSanitizer (which does not watch
 * mmap'ed memory): fuzz_guarded_at() places len bytes so that they end
 * where the guard begins.  Mapped once, never unmapped.
 */
struct fuzz_guarded {
	unsigned char *end;
	size_t max;
};

static inline void fuzz_guarded_init(struct fuzz_guarded *g, size_t max)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), span = (max + pg - 1) / pg * pg;
	unsigned char *m;

	m = mmap(NULL, span + 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fuzz_require(m != MAP_FAILED);
	fuzz_require(mprotect(m + pg, span, PROT_READ | PROT_WRITE) == 0);
	g->end = m + pg + span;
	g->max = max;
}

static inline void *fuzz_guarded_at(const struct fuzz_guarded *g, size_t len)
{
	fuzz_require(len <= g->max);
	return g->end - len;
}

#endif
