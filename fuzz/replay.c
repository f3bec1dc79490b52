/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Replay kept inputs through a fuzz harness, without libFuzzer: the
 * regression half of fuzzing, built with every compiler and run by
 * `make check`.
 *
 *	replay_<what> [FILE|DIR]...
 *
 * Every file named, and every file in every directory named (not
 * recursively), goes to LLVMFuzzerTestOneInput once.  With no arguments it
 * replays the harness's regression cases and seed corpus in the source
 * tree (tests/fuzz-cases/<what>/, fuzz/corpus/<what>/).  A broken invariant
 * aborts, as under libFuzzer; so does an input that cannot be read.  Exits
 * 0 when every input passed, 77 (skipped) when there was none.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Harnesses without set-up leave this undefined. */
#pragma weak LLVMFuzzerInitialize

static unsigned long replayed;

static void replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	/* One byte more, so that an empty input is still a valid pointer. */
	buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		exit(1);
	}
	fclose(f);
	fprintf(stderr, "replay: %s (%ld bytes)\n", path, len);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	replayed++;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* A directory that does not exist has nothing to replay. */
static void replay_path(const char *path)
{
	struct dirent **names;
	struct stat st;
	int i, n;

	if (stat(path, &st) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		replay_file(path);
		return;
	}
	/* In name order, so that a run repeats exactly. */
	n = scandir(path, &names, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (i = 0; i < n; i++) {
		char file[PATH_MAX];

		snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
		    strcmp(names[i]->d_name, "README"))
			replay_file(file);
		free(names[i]);
	}
	free(names);
}

int main(int argc, char **argv)
{
	int i;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc > 1) {
		for (i = 1; i < argc; i++)
			replay_path(argv[i]);
	} else {
		replay_path(FUZZ_SRCDIR "/tests/fuzz-cases/" FUZZ_NAME);
		replay_path(FUZZ_SRCDIR "/fuzz/corpus/" FUZZ_NAME);
	}
	printf("replay %s: %lu inputs passed\n", FUZZ_NAME, replayed);
	return replayed ? 0 : 77;
}
