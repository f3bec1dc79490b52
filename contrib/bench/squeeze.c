/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * squeeze - the program of squeeze.sh: take the machine's memory until
 * MemAvailable is down to a margin, then some more, so that the kernel must
 * swap (to zswapfs, the only swap), and check every byte afterwards.
 *
 *	squeeze -L LEAVE_MIB [-B BEYOND_MIB] [-s STEP_MIB] [-m MAX_MIB] [-p PROGRESS_FILE]
 *
 * It maps STEP_MIB at a time and fills each page with content that is a
 * function of its index (text, small numbers, pointers, random bytes,
 * zeros: roughly how process memory compresses), reading MemAvailable after
 * each step.  Once MemAvailable <= LEAVE_MIB it maps BEYOND_MIB more (that
 * part can only live in swap), then reads every page back and compares,
 * unmapping each step once checked.
 * After every step it rewrites PROGRESS_FILE (so that a watchdog can tell a
 * stall from slow progress).  Exit status: 0 every byte right, 1 a wrong
 * byte, 2 usage or system error.  One line of results on stdout:
 *
 *	squeeze: OK allocated_mib=... reached_s=... fill_s=... verify_s=... bad_pages=0
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PG		4096UL
#define MAX_STEPS	65536

static uint64_t mix(uint64_t x)
{
	/* splitmix64 finaliser */
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Template k: text, small numbers, pointers, random bytes or mostly zeros. */
static void make_template(uint64_t k, uint64_t *w)
{
	static const char words[] = "the page of swap memory struct return value list node "
				    "buffer error count index object string static const ";
	uint64_t h = mix(k), s = h | 1;
	unsigned int kind = (unsigned int)(h % 16), i;

	for (i = 0; i < PG / 8; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		switch (kind) {
		case 0 ... 4:		/* text */
			memcpy(&w[i], words + (s % (sizeof(words) - 9)), 8);
			break;
		case 5 ... 8:		/* small numbers */
			w[i] = s % 97 == 0 ? s : (s & 0xff) | ((s >> 32) & 0x3) << 32;
			break;
		case 9 ... 11:		/* pointers into a heap */
			w[i] = 0x00005555a0000000ULL + ((s & 0xffff) << 4);
			break;
		case 12 ... 13:		/* random */
			w[i] = s;
			break;
		default:		/* mostly zero */
			w[i] = i < 16 ? s : 0;
			break;
		}
	}
}

/*
 * Page n's content: a function of n alone.  Made from one of TEMPLATES
 * pages chosen by n, with n and a hash of it stamped in (neither zram nor
 * zswapfs shares equal pages, so each compresses like its template):
 * copying is 10-20 times faster than making a page word by word, and the
 * fill of a large machine is then bound by the kernel's page faults.
 */
#define TEMPLATES	1024u
static uint64_t *templates;

static void make_page(uint64_t n, uint64_t *w)
{
	uint64_t h = mix(n);

	memcpy(w, templates + (h % TEMPLATES) * (PG / 8), PG);
	w[0] = n;		/* a misplaced page is told by its first word */
	w[PG / 16] ^= h;
}

static long mem_available_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void progress(const char *file, const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;
	FILE *f;

	if (!file)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "we");
	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	rename(tmp, file);
}

static void usage(void)
{
	fprintf(stderr, "usage: squeeze -L LEAVE_MIB [-B BEYOND_MIB] [-s STEP_MIB] [-m MAX_MIB] "
		"[-p PROGRESS_FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long leave = -1, beyond = 0, step = 64, max = 1L << 22, avail;
	const char *pfile = NULL;
	static uint64_t *steps[MAX_STEPS];
	uint64_t *page = aligned_alloc(PG, PG), bad = 0, pages;
	unsigned int nsteps = 0, extra = 0;
	double t0, t_reached = 0, t_filled, t_end;
	int opt;

	while ((opt = getopt(argc, argv, "L:B:s:m:p:")) != -1) {
		switch (opt) {
		case 'L': leave = atol(optarg); break;
		case 'B': beyond = atol(optarg); break;
		case 's': step = atol(optarg); break;
		case 'm': max = atol(optarg); break;
		case 'p': pfile = optarg; break;
		default: usage();
		}
	}
	if (leave < 0 || beyond < 0 || step <= 0 || max <= 0 || !page)
		usage();
	templates = aligned_alloc(PG, TEMPLATES * PG);
	if (!templates) {
		fprintf(stderr, "squeeze: no memory for the templates\n");
		return 2;
	}
	for (uint64_t k = 0; k < TEMPLATES; k++)
		make_template(k, templates + k * (PG / 8));

	t0 = now();
	for (;;) {
		uint64_t *p;
		size_t n = (size_t)step << 20;

		avail = mem_available_mib();
		if (!t_reached && (avail <= leave || (long)nsteps * step >= max)) {
			t_reached = now() - t0;
			extra = (unsigned int)((beyond + step - 1) / step);
		}
		if (t_reached && !extra)
			break;
		if (nsteps == MAX_STEPS)
			break;
		p = mmap(NULL, n, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "squeeze: mmap: %s\n", strerror(errno));
			return 2;
		}
		madvise(p, n, MADV_NOHUGEPAGE);
		/* One call faults the step in: a fault per page costs more than
		 * the fill on a VM (170 MiB/s). */
		madvise(p, n, MADV_POPULATE_WRITE);
		for (size_t k = 0; k < n / PG; k++)
			make_page((uint64_t)nsteps * (n / PG) + k, p + k * (PG / 8));
		steps[nsteps++] = p;
		if (t_reached)
			extra--;
		progress(pfile, "fill %u %ld %.1f\n", nsteps, avail, now() - t0);
	}
	t_filled = now() - t0;
	pages = (uint64_t)nsteps * ((uint64_t)step << 20) / PG;
	for (uint64_t n = 0; n < pages; n++) {
		uint64_t per = ((uint64_t)step << 20) / PG;
		const uint64_t *got = steps[n / per] + (n % per) * (PG / 8);

		make_page(n, page);
		if (memcmp(got, page, PG)) {
			if (bad < 5)
				fprintf(stderr, "squeeze: page %" PRIu64 " differs "
					"(holds %" PRIu64 ")\n", n, got[0]);
			bad++;
		}
		if (n % (per * 4) == 0)
			progress(pfile, "verify %" PRIu64 " %.1f\n", n, now() - t0);
		/*
		 * A step checked is given back: reading more than memory holds
		 * in one pass would otherwise evict the pages still to be
		 * checked (LRU), and each would go through swap twice more.
		 */
		if (n % per == per - 1)
			munmap(steps[n / per], (size_t)step << 20);
	}
	t_end = now() - t0;
	printf("squeeze: %s allocated_mib=%ld reached_s=%.1f fill_s=%.1f verify_s=%.1f "
	       "bad_pages=%" PRIu64 " mem_available_mib=%ld\n", bad ? "FAIL" : "OK",
	       (long)nsteps * step, t_reached, t_filled, t_end - t_filled, bad,
	       mem_available_mib());
	fflush(stdout);
	return bad ? 1 : 0;
}
