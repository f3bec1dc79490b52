/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * workload - the swap benchmark's program: hold a working set of real process memory and
 * touch all of it, so that inside a small memory cgroup every pass goes through swap.
 *
 *	workload [-w MIB] [-p PASSES] [-g CGROUP_DIR] [-R] [-V] CORPUS
 *
 * Fill: map WS anonymous memory and copy corpus pages into it (page i = corpus page
 * i mod N), remembering a 64-bit hash of each page.  Each pass then visits every page (in
 * order, or in a fixed random order with -R): hash and compare (a wrong byte is a failure,
 * exit 1), then change 8 bytes, as a program would, and remember the new hash.  -V adds a
 * read-only pass at the end (timed apart), so that the last pass's writes are checked too.
 *
 * The corpus is read into memory first, then the process joins the memory cgroup given with
 * -g: the corpus copy (and its page cache) stays charged to the cgroup we started in, so only
 * the working set competes for the limit, and the timed part reads no disk.  Times cover the
 * fill (copy = first swap-out) and the passes.  One line of results on stdout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PG	4096UL

/*
 * Each step is a bijection of h for a given word, so two pages that differ in a single
 * 8-byte word always hash differently; more scattered damage collides with odds 2^-64.
 */
static uint64_t page_hash(const void *p)
{
	const uint64_t *w = p;
	uint64_t h = 0x243f6a8885a308d3ULL;

	for (size_t i = 0; i < PG / 8; i++) {
		h = (h ^ w[i]) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	return h;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Join a memory cgroup: memory charged so far (the corpus copy) stays with the old one. */
static int join_cgroup(const char *dir)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) ? -errno : 0;
}

int main(int argc, char *argv[])
{
	unsigned long ws_mib = 512, passes = 1;
	int opt, fd, shuffle = 0, final = 0;
	const char *cgroup = NULL;
	uint64_t *expect, npages, ncorpus;
	uint32_t *order = NULL;
	double t0, t_fill, t_end, t_check;
	struct rusage ru;
	struct stat st;
	char *ws, *corpus;
	int ret;

	while ((opt = getopt(argc, argv, "w:p:g:RV")) != -1) {
		switch (opt) {
		case 'w': ws_mib = strtoul(optarg, NULL, 0); break;
		case 'p': passes = strtoul(optarg, NULL, 0); break;
		case 'g': cgroup = optarg; break;
		case 'R': shuffle = 1; break;
		case 'V': final = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || !ws_mib)
		goto usage;
	fd = open(argv[optind], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) || st.st_size < (off_t)PG) {
		fprintf(stderr, "workload: %s: unusable corpus\n", argv[optind]);
		return 2;
	}
	ncorpus = st.st_size / PG;
	corpus = mmap(NULL, ncorpus * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (corpus == MAP_FAILED) {
		perror("workload: mmap");
		return 2;
	}
	for (uint64_t done = 0; done < ncorpus * PG;) {
		ssize_t got = pread(fd, corpus + done, ncorpus * PG - done, done);

		if (got <= 0) {
			fprintf(stderr, "workload: reading corpus: %s\n",
				got ? strerror(errno) : "short file");
			return 2;
		}
		done += got;
	}
	close(fd);
	if (cgroup) {
		ret = join_cgroup(cgroup);
		if (ret) {
			fprintf(stderr, "workload: joining %s: %s\n", cgroup, strerror(-ret));
			return 2;
		}
	}

	npages = (uint64_t)ws_mib * (1 << 20) / PG;
	ws = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	expect = calloc(npages, sizeof(*expect));
	if (ws == MAP_FAILED || !expect) {
		fprintf(stderr, "workload: out of memory\n");
		return 2;
	}
	if (shuffle) {
		uint64_t s = 88172645463325252ULL;

		order = malloc(npages * sizeof(*order));
		if (!order)
			return 2;
		for (uint64_t i = 0; i < npages; i++)
			order[i] = i;
		for (uint64_t i = npages - 1; i > 0; i--) {
			uint64_t j, t;

			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			j = s % (i + 1);
			t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
	}

	t0 = now();
	for (uint64_t i = 0; i < npages; i++) {
		const char *src = corpus + (i % ncorpus) * PG;

		memcpy(ws + i * PG, src, PG);
		expect[i] = page_hash(src);
	}
	t_fill = now();

	for (unsigned long p = 0; p < passes; p++) {
		for (uint64_t k = 0; k < npages; k++) {
			uint64_t i = order ? order[k] : k;
			char *pg = ws + i * PG;
			uint64_t h = page_hash(pg), v;
			size_t at = ((i * 2654435761ULL + p * 97) % (PG / 8)) * 8;

			if (h != expect[i]) {
				fprintf(stderr, "workload: DATA MISMATCH: pass %lu page %" PRIu64
					" (hash %016" PRIx64 ", want %016" PRIx64 ")\n",
					p + 1, i, h, expect[i]);
				printf("result=FAIL pass=%lu page=%" PRIu64 "\n", p + 1, i);
				return 1;
			}
			memcpy(&v, pg + at, 8);
			v ^= (p + 1) * 0x9e3779b97f4a7c15ULL + i;
			memcpy(pg + at, &v, 8);
			expect[i] = page_hash(pg);
		}
	}
	t_end = now();
	for (uint64_t i = 0; final && i < npages; i++) {
		if (page_hash(ws + i * PG) != expect[i]) {
			fprintf(stderr, "workload: DATA MISMATCH: final check page %" PRIu64 "\n", i);
			printf("result=FAIL pass=final page=%" PRIu64 "\n", i);
			return 1;
		}
	}
	t_check = now();
	getrusage(RUSAGE_SELF, &ru);
	printf("result=OK ws_mib=%lu passes=%lu order=%s fill_s=%.3f passes_s=%.3f total_s=%.3f "
	       "check_s=%.3f majflt=%ld\n", ws_mib, passes, shuffle ? "random" : "seq",
	       t_fill - t0, t_end - t_fill, t_end - t0, final ? t_check - t_end : 0.0,
	       ru.ru_majflt);
	free(order);
	free(expect);
	munmap(ws, npages * PG);
	munmap(corpus, ncorpus * PG);
	return 0;
usage:
	fprintf(stderr, "usage: workload [-w MIB] [-p PASSES] [-g CGROUP_DIR] [-R] [-V] CORPUS\n");
	return 2;
}
