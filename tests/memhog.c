/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memhog - fill memory with page data that looks like a real process heap,
 * then verify every byte of it, so that a swap device behind a tight memory
 * cgroup sees realistic traffic and any corruption is caught.
 *
 * Every page is a pure function of (seed, page index, generation): the
 * expected content is never kept in memory (that memory would be swapped
 * too), it is regenerated into one scratch page and compared.  With
 * --corpus the pages come from a file instead and are re-read from it.
 *
 * The mix of page kinds is what makes the test worth running: a swap
 * compressor must see text, pointer arrays, sparse structs, random bytes,
 * half-empty pages and same-filled pages, each of which takes a different
 * path (compress, store raw, same-fill).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MH_PAGE		4096u
#define MH_MAGIC	0x474f484du	/* "MHOG" little-endian */
#define MH_MAX_REPORT	10

enum mh_kind {
	MH_TEXT,
	MH_INTS,
	MH_PTRS,
	MH_STRUCTS,
	MH_RANDOM,
	MH_PARTZERO,
	MH_SAME,
	MH_ZERO,
	MH_MIXED,
	MH_NR_KINDS,
};

static const char *const mh_kind_names[MH_NR_KINDS] = {
	"text", "ints", "ptrs", "structs", "random", "partzero", "same", "zero", "mixed",
};

struct mh_opts {
	uint64_t size_mib;
	uint64_t seed;
	unsigned int passes;
	const char *corpus;
	const char *dump;
	const char *until;	/* go on past --passes until this file exists */
	bool verbose;
};

struct mh_state {
	const struct mh_opts *opts;
	uint8_t *mem;
	size_t npages;
	uint16_t *gen;		/* generation of each page, bumped on rewrite */
	int corpus_fd;
	size_t corpus_pages;
	uint8_t *scratch;
	uint8_t *bad;		/* pages found bad, each counted once */
	uint64_t bad_pages;
	uint64_t reported;
	uint64_t kind_count[MH_NR_KINDS];
};

static uint64_t mh_mix(uint64_t x)
{
	/* splitmix64 finaliser: turns a counter into well spread bits */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t mh_page_hash(uint64_t seed, uint64_t index, unsigned int gen)
{
	return mh_mix(mh_mix(seed) ^ mh_mix(index * 0x100000001b3ull + gen));
}

static inline uint64_t mh_next(uint64_t *s)
{
	/* xorshift64*: fast enough that generation is never the bottleneck */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * Text is built from a token table: 64 common words and 64 numbers, each
 * padded to 16 bytes so that a token is copied with one fixed-size memcpy.
 * Text generation is otherwise the slowest kind by far.
 */
static const char *const mh_words[64] = {
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with",
	"be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which",
	"but", "have", "an", "had", "they", "you", "were", "their", "one", "all", "we",
	"can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who",
	"so", "no", "return", "struct", "static", "const", "int", "error", "value", "list",
	"memory", "page", "swap", "node", "object", "string", "buffer", "function",
};

#define MH_NTOKENS 128
static char mh_tokens[MH_NTOKENS][16];
static uint8_t mh_token_len[MH_NTOKENS];

static void mh_init_tokens(void)
{
	uint64_t s = 0x5eed;
	unsigned int i;

	for (i = 0; i < MH_NTOKENS; i++) {
		if (i < 64) {
			strcpy(mh_tokens[i], mh_words[i]);
		} else {
			uint64_t r = mh_next(&s);

			/* small counts, years, sizes and the odd large id */
			snprintf(mh_tokens[i], sizeof(mh_tokens[i]), "%" PRIu64,
				 (r >> 8) % (i & 1 ? 100 : i & 2 ? 10000 : 100000000));
		}
		mh_token_len[i] = (uint8_t)strlen(mh_tokens[i]);
	}
}

static void mh_fill_text(uint8_t *buf, size_t len, uint64_t *s)
{
	static const char seps[4] = { ' ', ' ', ',', '\n' };
	char tmp[MH_PAGE + 128];	/* the last round of 4 tokens may run over */
	size_t pos = 0;

	while (pos < len) {
		uint64_t r = mh_next(s);
		unsigned int k;

		for (k = 0; k < 4; k++, r >>= 16) {
			/* words four times as likely as numbers */
			unsigned int t = (r & 0x180) ? (r & 63) : 64 + (r & 63);

			memcpy(tmp + pos, mh_tokens[t], 16);
			pos += mh_token_len[t];
			tmp[pos++] = seps[(r >> 9) & 3];
		}
	}
	memcpy(buf, tmp, len);
}

static void mh_fill_ints(uint8_t *buf, size_t len, uint64_t *s)
{
	uint32_t *v = (uint32_t *)buf;
	uint32_t base = (uint32_t)mh_next(s) & 0xffff;
	size_t i;

	for (i = 0; i < len / 4; i += 2) {
		uint64_t r = mh_next(s);

		/* counters, lengths, small enums: mostly tiny numbers */
		v[i] = base + (uint32_t)(r & 0xff);
		v[i + 1] = (r >> 32) % 7 == 0 ? (uint32_t)(r >> 40) : (uint32_t)((r >> 8) & 0xf);
	}
}

static void mh_fill_ptrs(uint8_t *buf, size_t len, uint64_t *s)
{
	uint64_t *v = (uint64_t *)buf;
	uint64_t heap = 0x00005500000000ull | ((mh_next(s) & 0xffff) << 20);
	uint64_t mmap_base = 0x00007f0000000000ull | ((mh_next(s) & 0xffffff) << 16);
	size_t i;

	for (i = 0; i < len / 8; i++) {
		uint64_t r = mh_next(s);

		switch (r & 7) {
		case 0:
		case 1:
		case 2:
			v[i] = heap + ((r >> 8) & 0xffff0);
			break;
		case 3:
		case 4:
			v[i] = mmap_base + ((r >> 8) & 0x3ff8);
			break;
		case 5:
			v[i] = 0;
			break;
		case 6:
			v[i] = (r >> 32) & 0xff;
			break;
		default:
			v[i] = r;
			break;
		}
	}
}

static void mh_fill_structs(uint8_t *buf, size_t len, uint64_t *s)
{
	uint64_t heap = 0x00005600000000ull | ((mh_next(s) & 0xffff) << 20);
	uint32_t id = (uint32_t)mh_next(s) & 0xfffff;
	size_t off;

	memset(buf, 0, len);
	for (off = 0; off + 64 <= len; off += 64) {
		uint64_t r = mh_next(s);
		uint8_t *e = buf + off;
		uint64_t next = heap + off + 64;
		uint32_t flags = 1u << (r & 3);
		uint16_t elen = (uint16_t)((r >> 8) & 0x3ff);
		double weight = (double)((r >> 20) & 0xff) / 8.0;

		/* a linked record with padding: 40 of 64 bytes stay zero */
		memcpy(e, &next, 8);
		memcpy(e + 8, &id, 4);
		memcpy(e + 12, &flags, 4);
		memcpy(e + 24, &elen, 2);
		if (r & (1ull << 40))
			memcpy(e + 32, &weight, 8);
		id++;
	}
}

static void mh_fill_random(uint8_t *buf, size_t len, uint64_t *s)
{
	uint64_t *v = (uint64_t *)buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		v[i] = mh_next(s);
}

static void mh_fill_partzero(uint8_t *buf, size_t len, uint64_t *s)
{
	uint64_t r = mh_next(s);
	size_t used = (64 + (r % (len - 128))) & ~(size_t)7;

	memset(buf, 0, len);
	/* data at the start or at the end, the rest zero (half-used page) */
	if (r & (1ull << 62))
		mh_fill_random(buf + len - used, used, s);
	else
		mh_fill_text(buf, used, s);
}

static void mh_fill_same(uint8_t *buf, size_t len, uint64_t word)
{
	uint64_t *v = (uint64_t *)buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		v[i] = word;
}

static enum mh_kind mh_pick_kind(uint64_t h)
{
	unsigned int pct = (unsigned int)(h % 100);

	if (pct < 30)
		return MH_TEXT;
	if (pct < 40)
		return MH_INTS;
	if (pct < 50)
		return MH_PTRS;
	if (pct < 60)
		return MH_STRUCTS;
	if (pct < 75)
		return MH_RANDOM;
	if (pct < 85)
		return MH_PARTZERO;
	if (pct < 94)
		return MH_SAME;
	if (pct < 95)
		return MH_ZERO;
	return MH_MIXED;
}

static void mh_fill_kind(uint8_t *buf, size_t len, enum mh_kind kind, uint64_t *s)
{
	switch (kind) {
	case MH_TEXT:
		mh_fill_text(buf, len, s);
		break;
	case MH_INTS:
		mh_fill_ints(buf, len, s);
		break;
	case MH_PTRS:
		mh_fill_ptrs(buf, len, s);
		break;
	case MH_STRUCTS:
		mh_fill_structs(buf, len, s);
		break;
	case MH_RANDOM:
		mh_fill_random(buf, len, s);
		break;
	case MH_PARTZERO:
		mh_fill_partzero(buf, len, s);
		break;
	case MH_ZERO:
		memset(buf, 0, len);
		break;
	default:
		/* MH_SAME and MH_MIXED are whole-page kinds, handled by the caller */
		mh_fill_random(buf, len, s);
		break;
	}
}

/*
 * Write the content of page @index at generation @gen into @buf.  Pages that
 * are not same-filled start with a 16-byte stamp, so that a misplaced page can
 * be named in the report.
 */
static enum mh_kind mh_gen_page(uint8_t *buf, uint64_t seed, uint64_t index, unsigned int gen)
{
	uint64_t h = mh_page_hash(seed, index, gen);
	uint64_t s = h | 1;
	enum mh_kind kind = mh_pick_kind(h >> 8);
	uint32_t stamp[4];

	if (kind == MH_SAME) {
		/* a per-page fill word, never zero (MH_ZERO covers that) */
		mh_fill_same(buf, MH_PAGE, mh_next(&s) | 1);
		return kind;
	}
	if (kind == MH_ZERO) {
		memset(buf, 0, MH_PAGE);
		return kind;
	}
	if (kind == MH_MIXED) {
		static const enum mh_kind parts[] = { MH_TEXT, MH_PTRS, MH_RANDOM, MH_ZERO,
						      MH_STRUCTS, MH_INTS };
		unsigned int q;

		for (q = 0; q < 4; q++) {
			enum mh_kind k = parts[(mh_next(&s) >> 33) % 6];

			mh_fill_kind(buf + q * (MH_PAGE / 4), MH_PAGE / 4, k, &s);
		}
	} else {
		mh_fill_kind(buf, MH_PAGE, kind, &s);
	}
	stamp[0] = MH_MAGIC;
	stamp[1] = (uint32_t)index;
	stamp[2] = gen;
	stamp[3] = (uint32_t)seed;
	memcpy(buf, stamp, sizeof(stamp));
	return kind;
}

static double mh_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mh_corpus_page(struct mh_state *st, uint8_t *buf, size_t index, unsigned int gen)
{
	size_t cp = (index + (size_t)gen * 7919) % st->corpus_pages;
	ssize_t n = pread(st->corpus_fd, buf, MH_PAGE, (off_t)(cp * MH_PAGE));

	if (n != (ssize_t)MH_PAGE) {
		fprintf(stderr, "memhog: reading corpus page %zu: %s\n", cp,
			n < 0 ? strerror(errno) : "short read");
		return -EIO;
	}
	return 0;
}

/* Produce the expected content of page @index into @buf. */
static int mh_expected(struct mh_state *st, uint8_t *buf, size_t index)
{
	if (st->opts->corpus)
		return mh_corpus_page(st, buf, index, st->gen[index]);
	mh_gen_page(buf, st->opts->seed, index, st->gen[index]);
	return 0;
}

static void mh_report(struct mh_state *st, size_t index, const uint8_t *got,
		      const uint8_t *want, const char *phase)
{
	size_t off = 0, nbad = 0, i;
	uint32_t stamp[4];

	if (!st->bad[index]) {
		st->bad[index] = 1;
		st->bad_pages++;
	}
	if (st->reported >= MH_MAX_REPORT)
		return;
	st->reported++;
	while (off < MH_PAGE && got[off] == want[off])
		off++;
	for (i = off; i < MH_PAGE; i++)
		nbad += got[i] != want[i];
	fprintf(stderr,
		"memhog: %s: page %zu (addr offset 0x%zx) gen %u: first bad byte at +%zu "
		"(got 0x%02x want 0x%02x), %zu bytes differ\n",
		phase, index, index * MH_PAGE, st->gen[index], off, got[off], want[off], nbad);
	memcpy(stamp, got, sizeof(stamp));
	if (!st->opts->corpus && stamp[0] == MH_MAGIC) {
		if (stamp[1] != (uint32_t)index || stamp[2] != st->gen[index])
			fprintf(stderr, "memhog:   page holds page %u gen %u (seed %u)\n",
				stamp[1], stamp[2], stamp[3]);
	} else {
		size_t z = 0;

		while (z < MH_PAGE && got[z] == 0)
			z++;
		if (z == MH_PAGE)
			fprintf(stderr, "memhog:   page reads as all zeros\n");
	}
}

static int mh_verify_page(struct mh_state *st, size_t index, const char *phase)
{
	const uint8_t *page = st->mem + index * MH_PAGE;
	int ret = mh_expected(st, st->scratch, index);

	if (ret)
		return ret;
	if (memcmp(page, st->scratch, MH_PAGE))
		mh_report(st, index, page, st->scratch, phase);
	return 0;
}

static int mh_write_page(struct mh_state *st, size_t index)
{
	return mh_expected(st, st->mem + index * MH_PAGE, index);
}

static int mh_fill(struct mh_state *st)
{
	size_t i;
	int ret;

	for (i = 0; i < st->npages; i++) {
		ret = mh_write_page(st, i);
		if (ret)
			return ret;
		if (!st->opts->corpus)
			st->kind_count[mh_pick_kind(mh_page_hash(st->opts->seed, i, 0) >> 8)]++;
	}
	return 0;
}

static int mh_verify_seq(struct mh_state *st, const char *phase, const uint8_t *only)
{
	size_t i;
	int ret;

	for (i = 0; i < st->npages; i++) {
		if (only && !only[i])
			continue;
		ret = mh_verify_page(st, i, phase);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Visit every page in random order, verify it, and rewrite about a quarter
 * of them with the next generation: a swapped-out copy of those pages is then
 * stale and must be replaced, never read back.
 */
static int mh_verify_random(struct mh_state *st, unsigned int pass, uint8_t *rewritten,
			    uint64_t *nrewrites)
{
	uint64_t s = mh_mix(st->opts->seed ^ (0xabcdull << 32) ^ pass) | 1;
	uint32_t *order;
	char phase[32];
	size_t i;
	int ret = 0;

	order = malloc(st->npages * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (i = 0; i < st->npages; i++)
		order[i] = (uint32_t)i;
	for (i = st->npages - 1; i > 0; i--) {
		size_t j = mh_next(&s) % (i + 1);
		uint32_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	snprintf(phase, sizeof(phase), "pass %u", pass);
	for (i = 0; i < st->npages; i++) {
		size_t idx = order[i];

		ret = mh_verify_page(st, idx, phase);
		if (ret)
			break;
		if ((mh_page_hash(st->opts->seed, idx, 1000 + pass) & 3) == 0) {
			st->gen[idx]++;
			ret = mh_write_page(st, idx);
			if (ret)
				break;
			rewritten[idx] = 1;
			(*nrewrites)++;
		}
	}
	free(order);
	return ret;
}

static int mh_dump(const struct mh_opts *o)
{
	uint64_t npages = o->size_mib * 256, i;
	uint8_t *buf;
	FILE *f;
	int ret = 0;

	f = strcmp(o->dump, "-") ? fopen(o->dump, "w") : stdout;
	if (!f) {
		fprintf(stderr, "memhog: %s: %s\n", o->dump, strerror(errno));
		return 2;
	}
	buf = aligned_alloc(MH_PAGE, 256 * MH_PAGE);
	if (!buf) {
		fprintf(stderr, "memhog: out of memory\n");
		return 2;
	}
	for (i = 0; i < npages; i += 256) {
		unsigned int k;

		for (k = 0; k < 256; k++)
			mh_gen_page(buf + k * MH_PAGE, o->seed, i + k, 0);
		if (fwrite(buf, MH_PAGE, 256, f) != 256) {
			fprintf(stderr, "memhog: writing %s: %s\n", o->dump, strerror(errno));
			ret = 2;
			break;
		}
	}
	free(buf);
	if (fclose(f) && !ret) {
		fprintf(stderr, "memhog: closing %s: %s\n", o->dump, strerror(errno));
		ret = 2;
	}
	return ret;
}

static void mh_usage(FILE *f)
{
	fprintf(f,
		"usage: memhog --size MIB [--seed N] [--passes N] [--until FILE] [--corpus FILE]\n"
		"              [--verbose]\n"
		"       memhog --size MIB [--seed N] --dump FILE|-\n"
		"Fills MIB MiB of anonymous memory with realistic page data, then verifies it:\n"
		"pass 1 in order, each further pass in random order while rewriting about a\n"
		"quarter of the pages; rewritten pages are checked once more at the end.\n"
		"--until goes on with further passes after the --passes passes until FILE\n"
		"exists (looked for between passes; 1000 passes at most), so that a test\n"
		"can keep swap traffic going for as long as it acts, on any machine.\n"
		"--corpus takes the pages from FILE (cycled) instead of generating them.\n"
		"--dump writes the generated pages (generation 0) to FILE and exits.\n"
		"Exit status: 0 all data intact, 1 mismatch found, 2 usage or system error.\n");
}

static int mh_parse_u64(const char *arg, const char *name, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(arg, &end, 0);
	if (errno || end == arg || *end || arg[0] == '-') {
		fprintf(stderr, "memhog: bad value for --%s: '%s'\n", name, arg);
		return -EINVAL;
	}
	return 0;
}

static int mh_parse_args(int argc, char **argv, struct mh_opts *o)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'S' },
		{ "passes", required_argument, NULL, 'p' },
		{ "corpus", required_argument, NULL, 'c' },
		{ "dump", required_argument, NULL, 'd' },
		{ "until", required_argument, NULL, 'u' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	o->seed = 1;
	o->passes = 1;
	while ((c = getopt_long(argc, argv, "s:S:p:c:d:u:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (mh_parse_u64(optarg, "size", &o->size_mib))
				return -EINVAL;
			break;
		case 'S':
			if (mh_parse_u64(optarg, "seed", &o->seed))
				return -EINVAL;
			break;
		case 'p':
			if (mh_parse_u64(optarg, "passes", &v))
				return -EINVAL;
			/* generations are 16-bit and each pass bumps at most once */
			if (v < 1 || v > 1000) {
				fprintf(stderr, "memhog: --passes must be 1..1000\n");
				return -EINVAL;
			}
			o->passes = (unsigned int)v;
			break;
		case 'c':
			o->corpus = optarg;
			break;
		case 'd':
			o->dump = optarg;
			break;
		case 'u':
			o->until = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			mh_usage(stdout);
			exit(0);
		default:
			mh_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc || !o->size_mib || o->size_mib > (1ull << 24)) {
		mh_usage(stderr);
		return -EINVAL;
	}
	if (o->dump && o->corpus) {
		fprintf(stderr, "memhog: --dump and --corpus exclude each other\n");
		return -EINVAL;
	}
	return 0;
}

static int mh_open_corpus(struct mh_state *st)
{
	struct stat sb;

	st->corpus_fd = open(st->opts->corpus, O_RDONLY | O_CLOEXEC);
	if (st->corpus_fd < 0 || fstat(st->corpus_fd, &sb)) {
		fprintf(stderr, "memhog: %s: %s\n", st->opts->corpus, strerror(errno));
		return -errno;
	}
	st->corpus_pages = (size_t)sb.st_size / MH_PAGE;
	if (!st->corpus_pages) {
		fprintf(stderr, "memhog: %s: smaller than one page\n", st->opts->corpus);
		return -EINVAL;
	}
	return 0;
}

/* Is pass number PASS (2 and up) to run?  The generations are 16-bit and
 * each pass bumps a page's at most once: 1000 passes in all at most. */
static bool mh_more_passes(const struct mh_opts *o, unsigned int pass)
{
	if (pass <= o->passes)
		return true;
	return o->until && pass <= 1000 && access(o->until, F_OK) != 0;
}

int main(int argc, char **argv)
{
	struct mh_opts opts = { 0 };
	struct mh_state st = { .opts = &opts, .corpus_fd = -1 };
	uint8_t *rewritten = NULL;
	uint64_t nrewrites = 0;
	double t0, t_fill, t_verify;
	size_t bytes;
	unsigned int pass;
	int ret;

	if (mh_parse_args(argc, argv, &opts))
		return 2;
	mh_init_tokens();
	if (opts.dump)
		return mh_dump(&opts);
	if (opts.corpus && mh_open_corpus(&st))
		return 2;

	st.npages = opts.size_mib * 256;
	bytes = st.npages * MH_PAGE;
	st.mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (st.mem == MAP_FAILED) {
		fprintf(stderr, "memhog: mmap %zu bytes: %s\n", bytes, strerror(errno));
		return 2;
	}
	/* 4 KiB pages, like most of what gets swapped; THP would be split anyway */
	madvise(st.mem, bytes, MADV_NOHUGEPAGE);
	st.gen = calloc(st.npages, sizeof(*st.gen));
	rewritten = calloc(st.npages, 1);
	st.bad = calloc(st.npages, 1);
	st.scratch = aligned_alloc(MH_PAGE, MH_PAGE);
	if (!st.gen || !rewritten || !st.bad || !st.scratch) {
		fprintf(stderr, "memhog: out of memory\n");
		return 2;
	}

	t0 = mh_now();
	ret = mh_fill(&st);
	t_fill = mh_now() - t0;
	if (opts.verbose)
		fprintf(stderr, "memhog: filled %" PRIu64 " MiB in %.2f s\n", opts.size_mib,
			t_fill);

	if (!ret)
		ret = mh_verify_seq(&st, "pass 1", NULL);
	for (pass = 2; !ret && mh_more_passes(&opts, pass); pass++) {
		ret = mh_verify_random(&st, pass, rewritten, &nrewrites);
		if (opts.verbose)
			fprintf(stderr, "memhog: pass %u done at %.2f s, %" PRIu64 " bad pages\n",
				pass, mh_now() - t0, st.bad_pages);
	}
	if (!ret && nrewrites)
		ret = mh_verify_seq(&st, "final", rewritten);
	t_verify = mh_now() - t0 - t_fill;

	if (opts.verbose && !opts.corpus) {
		unsigned int k;

		fprintf(stderr, "memhog: page kinds filled:");
		for (k = 0; k < MH_NR_KINDS; k++)
			fprintf(stderr, " %s=%" PRIu64, mh_kind_names[k], st.kind_count[k]);
		fprintf(stderr, "\n");
	}
	printf("memhog: %s size=%" PRIu64 "MiB pages=%zu seed=%" PRIu64 " passes=%u "
	       "rewrites=%" PRIu64 " bad_pages=%" PRIu64 " fill=%.2fs verify=%.2fs "
	       "elapsed=%.2fs\n",
	       ret ? "ERROR" : st.bad_pages ? "FAIL" : "OK", opts.size_mib, st.npages,
	       opts.seed, pass - 1, nrewrites, st.bad_pages, t_fill, t_verify,
	       mh_now() - t0);
	fflush(stdout);
	free(st.scratch);
	free(st.bad);
	free(rewritten);
	free(st.gen);
	munmap(st.mem, bytes);
	if (st.corpus_fd >= 0)
		close(st.corpus_fd);
	if (ret)
		return 2;
	return st.bad_pages ? 1 : 0;
}
