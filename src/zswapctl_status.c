/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl status, stats and top: the commands that read a mount's stats
 * file.  Every key is named through the daemon's table (stats_keys.h), the
 * codecs through codec.h's CODEC_LIST.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "stats_keys.h"
#include "zswapctl_mounts.h"
#include "zswapctl_status.h"

/* the stats file has about 120 keys today; new keys are only ever added */
#define CTL_STATS_MAX	1024
#define CTL_STATS_FILE_MAX (1U << 20)

static const char *const ctl_codec_names[] = {
#define CTL_CODEC_NAME(ID, name) #name,
	CODEC_LIST(CTL_CODEC_NAME)
#undef CTL_CODEC_NAME
};

static const char *const ctl_req_names[] = {
#define CTL_REQ_NAME(ID, name) #name,
	STATS_REQ_LIST(CTL_REQ_NAME)
#undef CTL_REQ_NAME
};

struct ctl_stat {
	char *key;
	char *val;
};

struct ctl_stats {
	char *raw;		/* the file as read */
	size_t len;
	char *text;		/* a copy, cut into keys and values */
	int n;
	struct ctl_stat e[CTL_STATS_MAX];
};

static void stats_free(struct ctl_stats *st)
{
	free(st->raw);
	free(st->text);
	st->raw = st->text = NULL;
	st->len = 0;
	st->n = 0;
}

/*
 * The file reports st_size 0 (its text is made when it is opened), so read to
 * end of file; one open is one snapshot.
 */
static int stats_read(const char *mnt, struct ctl_stats *st)
{
	char path[PATH_MAX];
	size_t cap = 8192;
	char *line, *save;
	int fd, err = 0;

	memset(st, 0, sizeof(*st));
	if (snprintf(path, sizeof(path), "%s/stats", mnt) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	st->raw = malloc(cap + 1);
	if (!st->raw) {
		err = -ENOMEM;
		goto out_close;
	}
	for (;;) {
		ssize_t r;

		if (st->len == cap) {
			char *p;

			if (cap >= CTL_STATS_FILE_MAX) {
				err = -EFBIG;
				goto out_close;
			}
			cap *= 2;
			p = realloc(st->raw, cap + 1);
			if (!p) {
				err = -ENOMEM;
				goto out_close;
			}
			st->raw = p;
		}
		r = read(fd, st->raw + st->len, cap - st->len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out_close;
		}
		if (r == 0)
			break;
		st->len += (size_t)r;
	}
	st->raw[st->len] = '\0';
	st->text = strdup(st->raw);
	if (!st->text) {
		err = -ENOMEM;
		goto out_close;
	}
	for (line = strtok_r(st->text, "\n", &save); line && st->n < CTL_STATS_MAX;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');

		if (!sp || sp == line)
			continue;
		*sp = '\0';
		st->e[st->n].key = line;
		st->e[st->n].val = sp + 1;
		st->n++;
	}
out_close:
	close(fd);
	if (err)
		stats_free(st);
	return err;
}

static const char *stats_str(const struct ctl_stats *st, const char *key)
{
	int i;

	for (i = 0; i < st->n; i++)
		if (!strcmp(st->e[i].key, key))
			return st->e[i].val;
	return NULL;
}

/* The value of key `id` (stats_keys.h), of its member `part` for a key
 * made for each codec or request kind; NULL when the file has none. */
static const char *stat_str_each(const struct ctl_stats *st, enum stats_key_id id,
				 const char *part)
{
	char key[STATS_KEY_MAX];

	return stats_str(st, stats_key_name(key, sizeof(key), id, part));
}

static const char *stat_str(const struct ctl_stats *st, enum stats_key_id id)
{
	return stat_str_each(st, id, NULL);
}

/*
 * Whether the mount writes back to a backing file.  A daemon from before
 * writeback has no writeback_status: it has none either.
 */
static bool stats_has_backing(const struct ctl_stats *st)
{
	const char *v = stat_str(st, STATS_K_WRITEBACK_STATUS);

	return v && strcmp(v, "none");
}

/* A missing or odd value reads as 0: the table then still shows the rest. */
static uint64_t stat_u64_each(const struct ctl_stats *st, enum stats_key_id id, const char *part)
{
	const char *v = stat_str_each(st, id, part);
	unsigned long long x;
	char *end;

	if (!v)
		return 0;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || end == v || *end)
		return 0;
	return x;
}

static uint64_t stat_u64(const struct ctl_stats *st, enum stats_key_id id)
{
	return stat_u64_each(st, id, NULL);
}

/* ---- restart ------------------------------------------------------------- */

/* The figures ids[0..n) of mnt's stats into out; -EOPNOTSUPP when the
 * first is not there (a daemon from before it existed). */
static int stat_counts(const char *mnt, const enum stats_key_id *ids, uint64_t *out, size_t n)
{
	struct ctl_stats *st = malloc(sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	err = stats_read(mnt, st);
	if (!err) {
		if (!stat_str(st, ids[0]))
			err = -EOPNOTSUPP;
		for (size_t i = 0; i < n; i++)
			out[i] = stat_u64(st, ids[i]);
		stats_free(st);
	}
	free(st);
	return err;
}

int ctl_worker_counts(const char *mnt, uint64_t *gen, uint64_t *upgrades, uint64_t *restarts)
{
	static const enum stats_key_id ids[] = {
		STATS_K_WORKER_GENERATION, STATS_K_WORKER_UPGRADES, STATS_K_WORKER_RESTARTS,
	};
	uint64_t v[3] = { 0 };
	int err = stat_counts(mnt, ids, v, 3);

	*gen = v[0];
	*upgrades = v[1];
	*restarts = v[2];
	return err;
}

int ctl_keeper_upgrades(const char *mnt, uint64_t *upgrades)
{
	static const enum stats_key_id ids[] = { STATS_K_KEEPER_UPGRADES };

	return stat_counts(mnt, ids, upgrades, 1);
}

/* ---- status -------------------------------------------------------------- */

static void fmt_size(char *buf, size_t len, uint64_t bytes, bool raw)
{
	static const char units[] = "BKMGTPE";
	double v = (double)bytes;
	int u = 0;

	if (raw) {
		snprintf(buf, len, "%" PRIu64, bytes);
		return;
	}
	while (v >= 1024 && units[u + 1]) {
		v /= 1024;
		u++;
	}
	if (!u) {
		snprintf(buf, len, "%" PRIu64 "B", bytes);
		return;
	}
	/* 1023.97K would print as 1024.0K */
	if (v >= 1023.95 && units[u + 1]) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f", v);
	/* as zramctl: 64M, not 64.0M */
	if (strlen(buf) > 2 && !strcmp(buf + strlen(buf) - 2, ".0"))
		buf[strlen(buf) - 2] = '\0';
	snprintf(buf + strlen(buf), len - strlen(buf), "%c", units[u]);
}

enum { COL_MOUNT, COL_DISKSIZE, COL_ALGO, COL_DATA, COL_COMPR, COL_TOTAL, COL_RATIO,
	COL_BACKING, COL_SWAP, COL_N };

static const struct {
	const char *name;
	bool right;
} status_cols[COL_N] = {
	[COL_MOUNT]	= { "MOUNTPOINT", false },
	[COL_DISKSIZE]	= { "DISKSIZE", true },
	[COL_ALGO]	= { "ALGORITHM", false },
	[COL_DATA]	= { "DATA", true },
	[COL_COMPR]	= { "COMPR", true },
	[COL_TOTAL]	= { "TOTAL", true },
	[COL_RATIO]	= { "RATIO", true },
	[COL_BACKING]	= { "BACKING", true },
	[COL_SWAP]	= { "SWAP", false },
};

struct status_row {
	char *cell[COL_N];
};

/* "/dev/loop3 [SWAP]", "/dev/loop3" (attached, not swap) or "-" */
static void swap_cell(const char *mnt, char *buf, size_t len)
{
	char devs[CTL_LOOPS_MAX][CTL_DEV_LEN], file[PATH_MAX + 8];
	size_t used = 0;
	int i, n;

	snprintf(file, sizeof(file), "%s/swap", mnt);
	n = ctl_loops_for(file, devs, CTL_LOOPS_MAX);
	buf[0] = '\0';
	for (i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s", i ? "," : "", devs[i],
					 ctl_swap_active(devs[i]) ? " [SWAP]" : "");
	if (!n)
		snprintf(buf, len, "-");
}

static int status_row_fill(struct status_row *row, const char *mnt, const struct ctl_stats *st,
			   bool bytes)
{
	uint64_t orig = stat_u64(st, STATS_K_ORIG_DATA_SIZE);
	uint64_t total = stat_u64(st, STATS_K_MEM_USED_TOTAL);
	const char *algo = stat_str(st, STATS_K_ALGORITHM);
	char buf[COL_N][PATH_MAX + 64];
	int c;

	snprintf(buf[COL_MOUNT], sizeof(buf[0]), "%s", mnt);
	fmt_size(buf[COL_DISKSIZE], sizeof(buf[0]), stat_u64(st, STATS_K_DISKSIZE), bytes);
	snprintf(buf[COL_ALGO], sizeof(buf[0]), "%s", algo ? algo : "-");
	fmt_size(buf[COL_DATA], sizeof(buf[0]), orig, bytes);
	fmt_size(buf[COL_COMPR], sizeof(buf[0]), stat_u64(st, STATS_K_COMPR_DATA_SIZE), bytes);
	fmt_size(buf[COL_TOTAL], sizeof(buf[0]), total, bytes);
	if (total)
		snprintf(buf[COL_RATIO], sizeof(buf[0]), "%.2f", (double)orig / (double)total);
	else
		snprintf(buf[COL_RATIO], sizeof(buf[0]), "-");
	/* what the file takes on the disk (whole segments), not pages times 4096 */
	if (stats_has_backing(st))
		fmt_size(buf[COL_BACKING], sizeof(buf[0]), stat_u64(st, STATS_K_BACKING_BYTES_USED),
			 bytes);
	else
		snprintf(buf[COL_BACKING], sizeof(buf[0]), "-");
	swap_cell(mnt, buf[COL_SWAP], sizeof(buf[0]));
	for (c = 0; c < COL_N; c++) {
		row->cell[c] = strdup(buf[c]);
		if (!row->cell[c])
			return -ENOMEM;
	}
	return 0;
}

static void status_print(struct status_row *rows, size_t n, bool headings)
{
	size_t w[COL_N], r;
	int c;

	for (c = 0; c < COL_N; c++) {
		w[c] = headings ? strlen(status_cols[c].name) : 0;
		for (r = 0; r < n; r++)
			if (strlen(rows[r].cell[c]) > w[c])
				w[c] = strlen(rows[r].cell[c]);
	}
	for (r = headings ? 0 : 1; r <= n; r++) {
		for (c = 0; c < COL_N; c++) {
			const char *s = r ? rows[r - 1].cell[c] : status_cols[c].name;
			bool last = c == COL_N - 1;

			if (status_cols[c].right)
				printf("%*s", (int)w[c], s);
			else if (last)
				fputs(s, stdout);
			else
				printf("%-*s", (int)w[c], s);
			if (!last)
				putchar(' ');
		}
		putchar('\n');
	}
}

int ctl_cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bytes", no_argument, NULL, 'b' },
		{ "noheadings", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool bytes = false, headings = true;
	struct status_row *rows = NULL;
	struct ctl_mounts m = { 0 };
	char **want = NULL;
	size_t nwant = 0, nrows = 0, i;
	int c, err, rc = 0;

	while ((c = getopt_long(argc, argv, "bnh", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			bytes = true;
			break;
		case 'n':
			headings = false;
			break;
		case 'h':
			return CTL_SHOW_HELP;
		default:
			return ctl_usage_error("status: bad option");
		}
	}
	if (optind < argc) {
		/* only the mounts named, in the order named */
		nwant = (size_t)(argc - optind);
		want = calloc(nwant, sizeof(*want));
		if (!want)
			goto out_nomem;
		for (i = 0; i < nwant; i++) {
			char mnt[PATH_MAX];

			if (ctl_mount_resolve(argv[optind + i], mnt, sizeof(mnt))) {
				rc = CTL_EXIT_ERR;
				continue;
			}
			want[i] = strdup(mnt);
			if (!want[i])
				goto out_nomem;
		}
	} else {
		err = ctl_mounts_read(&m);
		if (err) {
			ctl_err("/proc/self/mountinfo: %s", strerror(-err));
			return CTL_EXIT_ERR;
		}
	}
	rows = calloc(nwant + m.n + 1, sizeof(*rows));
	if (!rows)
		goto out_nomem;
	for (i = 0; i < nwant + m.n; i++) {
		const char *mnt = nwant ? want[i] : m.path[i];
		struct ctl_stats *st;

		if (!mnt || (!nwant && !m.zswapfs[i]))
			continue;
		st = malloc(sizeof(*st));
		if (!st)
			goto out_nomem;
		err = stats_read(mnt, st);
		if (err) {
			/* a mount whose daemon died: say so, show the others */
			ctl_err("%s: cannot read stats: %s%s", mnt, strerror(-err),
				err == -EACCES ? " (only root may read it, unless the mount has "
						 "allow_other and stats_group names a group of yours)" :
				"");
			free(st);
			rc = CTL_EXIT_ERR;
			continue;
		}
		err = status_row_fill(&rows[nrows++], mnt, st, bytes);
		stats_free(st);
		free(st);
		if (err)
			goto out_nomem;
	}
	if (nrows)
		status_print(rows, nrows, headings);
	goto out;
out_nomem:
	ctl_err("%s", strerror(ENOMEM));
	rc = CTL_EXIT_ERR;
out:
	for (i = 0; rows && i < nrows; i++)
		for (c = 0; c < COL_N; c++)
			free(rows[i].cell[c]);
	free(rows);
	for (i = 0; i < nwant; i++)
		free(want[i]);
	free(want);
	ctl_mounts_free(&m);
	return rc;
}

/* ---- stats ---------------------------------------------------------------- */

/* Whether `v` is a whole number as the stats file writes them. */
static bool json_number(const char *v)
{
	const char *p = v;

	if (*p == '-')
		p++;
	if (*p == '0')
		return p[1] == '\0';
	if (*p < '1' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	return *p == '\0';
}

/* Whether key (as printed) matches the table's `pattern` (each `*`: one
 * member, or a histogram bucket's bound: lat_*_us_*). */
static bool key_matches(const char *pattern, const char *key)
{
	const char *star = strchr(pattern, '*');

	if (!star)
		return !strcmp(pattern, key);
	if (strncmp(key, pattern, (size_t)(star - pattern)))
		return false;
	key += star - pattern;
	/* The member: at least one character, then the rest must match. */
	for (key++; *key; key++)
		if (key_matches(star + 1, key))
			return true;
	return false;
}

/*
 * A value is a JSON number when the table (stats_keys.h) says the key may be
 * one and it is a whole number; words (algorithm, writeback_status, ...) are
 * strings, and so is writeback_budget_left when it is "unlimited".  A key
 * the table does not know (a newer daemon) is a number when it looks like
 * one.
 */
static bool json_is_number(const char *key, const char *v)
{
	int id;

	for (id = 0; id < STATS_K_COUNT; id++)
		if (key_matches(stats_key(id)->key, key))
			return stats_key(id)->kind != STATS_WORD && json_number(v);
	return json_number(v);
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

int ctl_cmd_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_stats *st;
	char mnt[PATH_MAX];
	bool json = false;
	int c, i, err;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			return CTL_SHOW_HELP;
		default:
			return ctl_usage_error("stats: bad option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error("stats: one MOUNT expected");
	if (ctl_mount_resolve(argv[optind], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	st = malloc(sizeof(*st));
	if (!st) {
		ctl_err("%s", strerror(ENOMEM));
		return CTL_EXIT_ERR;
	}
	err = stats_read(mnt, st);
	if (err) {
		ctl_err("%s: cannot read stats: %s", argv[optind], strerror(-err));
		free(st);
		return CTL_EXIT_ERR;
	}
	if (!json) {
		fwrite(st->raw, 1, st->len, stdout);
	} else {
		printf("{");
		for (i = 0; i < st->n; i++) {
			printf("%s\n  ", i ? "," : "");
			json_string(st->e[i].key);
			printf(": ");
			if (json_is_number(st->e[i].key, st->e[i].val))
				fputs(st->e[i].val, stdout);
			else
				json_string(st->e[i].val);
		}
		printf("\n}\n");
	}
	stats_free(st);
	free(st);
	if (fflush(stdout) || ferror(stdout)) {
		ctl_err("write error: %s", strerror(errno));
		return CTL_EXIT_ERR;
	}
	return 0;
}

/* ---- top ------------------------------------------------------------------- */

static void fmt_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 "ns", ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
}

/* counts per second since the last sample; "-" on the first */
static void fmt_rate(char *buf, size_t len, const struct ctl_stats *cur,
		     const struct ctl_stats *prev, enum stats_key_id key, double dt)
{
	uint64_t a, b;

	if (!prev || dt <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	a = stat_u64(prev, key);
	b = stat_u64(cur, key);
	/* a restarted daemon starts again from 0 */
	snprintf(buf, len, "%.1f", b >= a ? (double)(b - a) / dt : 0.0);
}

static void top_print(const char *mnt, const struct ctl_stats *cur, const struct ctl_stats *prev,
		      double dt, bool tty)
{
	char s[16][32];
	uint64_t orig = stat_u64(cur, STATS_K_ORIG_DATA_SIZE);
	uint64_t total = stat_u64(cur, STATS_K_MEM_USED_TOTAL);
	const char *algo = stat_str(cur, STATS_K_ALGORITHM);
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	size_t i;

	if (tty)
		fputs("\033[H\033[2J", stdout);
	strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&now, &tm));
	fmt_size(s[0], sizeof(s[0]), stat_u64(cur, STATS_K_DISKSIZE), false);
	printf("zswapfs %s  %s  disksize %s  %s\n\n", mnt, algo ? algo : "-", s[0], when);

	fmt_size(s[0], sizeof(s[0]), orig, false);
	fmt_size(s[1], sizeof(s[1]), stat_u64(cur, STATS_K_COMPR_DATA_SIZE), false);
	fmt_size(s[2], sizeof(s[2]), total, false);
	if (total)
		snprintf(s[3], sizeof(s[3]), "%.2f", (double)orig / (double)total);
	else
		snprintf(s[3], sizeof(s[3]), "-");
	fmt_size(s[4], sizeof(s[4]), stat_u64(cur, STATS_K_MEM_USED_MAX), false);
	if (stat_u64(cur, STATS_K_MEM_LIMIT))
		fmt_size(s[5], sizeof(s[5]), stat_u64(cur, STATS_K_MEM_LIMIT), false);
	else
		snprintf(s[5], sizeof(s[5]), "none");
	printf("memory    orig %s  compr %s  total %s  ratio %s  max %s  limit %s\n",
	       s[0], s[1], s[2], s[3], s[4], s[5]);

	printf("pages     stored %" PRIu64 "  same %" PRIu64 "  huge %" PRIu64 "\n",
	       stat_u64(cur, STATS_K_PAGES_STORED), stat_u64(cur, STATS_K_SAME_PAGES),
	       stat_u64(cur, STATS_K_HUGE_PAGES));

	fmt_rate(s[0], sizeof(s[0]), cur, prev, STATS_K_NUM_READS, dt);
	fmt_rate(s[1], sizeof(s[1]), cur, prev, STATS_K_NUM_WRITES, dt);
	fmt_rate(s[2], sizeof(s[2]), cur, prev, STATS_K_NOTIFY_FREE, dt);
	fmt_rate(s[3], sizeof(s[3]), cur, prev, STATS_K_BD_WRITES, dt);
	printf("pages/s   reads %s  writes %s  freed %s  written back %s\n", s[0], s[1], s[2],
	       s[3]);

	printf("latency ");
	for (i = 0; i < sizeof(ctl_req_names) / sizeof(ctl_req_names[0]); i++) {
		fmt_ns(s[0], sizeof(s[0]),
		       stat_u64_each(cur, STATS_K_REQ_LATENCY_AVG_NS, ctl_req_names[i]));
		printf("  %s %s", ctl_req_names[i], s[0]);
	}
	printf("  (average)\n");

	printf("failed    reads %" PRIu64 "  writes %" PRIu64 "  invalid_io %" PRIu64 "\n",
	       stat_u64(cur, STATS_K_FAILED_READS), stat_u64(cur, STATS_K_FAILED_WRITES),
	       stat_u64(cur, STATS_K_INVALID_IO));

	printf("codecs  ");
	for (i = 0; i < sizeof(ctl_codec_names) / sizeof(ctl_codec_names[0]); i++) {
		fmt_size(s[0], sizeof(s[0]),
			 stat_u64_each(cur, STATS_K_CODEC_BYTES, ctl_codec_names[i]), false);
		printf("  %s %" PRIu64 " (%s)", ctl_codec_names[i],
		       stat_u64_each(cur, STATS_K_CODEC_PAGES, ctl_codec_names[i]), s[0]);
	}
	putchar('\n');

	printf("recompr   recompressed %" PRIu64 "  skipped %" PRIu64 "  incompressible %" PRIu64
	       "  passes %" PRIu64 "%s\n",
	       stat_u64(cur, STATS_K_RECOMPRESSED), stat_u64(cur, STATS_K_RECOMPRESS_SKIPPED),
	       stat_u64(cur, STATS_K_RECOMPRESS_INCOMPRESSIBLE), stat_u64(cur, STATS_K_RECOMPRESS_PASSES),
	       stat_u64(cur, STATS_K_RECOMPRESS_PENDING) ? "  (pending)" : "");

	fmt_size(s[0], sizeof(s[0]), stat_u64(cur, STATS_K_FRAG_BYTES), false);
	printf("compact   compactions %" PRIu64 "  pages_compacted %" PRIu64 "  frag %s\n",
	       stat_u64(cur, STATS_K_COMPACTIONS), stat_u64(cur, STATS_K_PAGES_COMPACTED), s[0]);

	if (stats_has_backing(cur)) {
		const char *left = stat_str(cur, STATS_K_WRITEBACK_BUDGET_LEFT);

		fmt_size(s[0], sizeof(s[0]), stat_u64(cur, STATS_K_BACKING_BYTES_USED), false);
		fmt_size(s[1], sizeof(s[1]), stat_u64(cur, STATS_K_BACKING_BYTES_MAX), false);
		fmt_size(s[2], sizeof(s[2]), stat_u64(cur, STATS_K_BACKING_BYTES_LIVE), false);
		/* a number of bytes, or the word "unlimited" */
		if (left && json_number(left))
			fmt_size(s[3], sizeof(s[3]), stat_u64(cur, STATS_K_WRITEBACK_BUDGET_LEFT), false);
		else
			snprintf(s[3], sizeof(s[3]), "%s", left ? left : "-");
		printf("backing   %s  used %s of %s  live %s  budget %s  errors %" PRIu64
		       " read, %" PRIu64 " write\n",
		       stat_str(cur, STATS_K_WRITEBACK_STATUS), s[0], s[1], s[2], s[3],
		       stat_u64(cur, STATS_K_BACKING_READ_ERRORS), stat_u64(cur, STATS_K_BACKING_WRITE_ERRORS));
	} else {
		printf("backing   none\n");
	}
	printf("writeback pages %" PRIu64 "  reads %" PRIu64 "  writes %" PRIu64
	       "  failed %" PRIu64 "  spills %" PRIu64 "\n",
	       stat_u64(cur, STATS_K_BD_COUNT), stat_u64(cur, STATS_K_BD_READS),
	       stat_u64(cur, STATS_K_BD_WRITES), stat_u64(cur, STATS_K_WRITEBACK_FAILED),
	       stat_u64(cur, STATS_K_WRITEBACK_SPILLS));

	fmt_size(s[0], sizeof(s[0]), stat_u64(cur, STATS_K_RSS_BYTES), false);
	fmt_size(s[1], sizeof(s[1]), stat_u64(cur, STATS_K_ARENA_MAPPED_BYTES), false);
	printf("daemon    rss %s  arena %s\n", s[0], s[1]);
	fflush(stdout);
}

int ctl_cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "delay", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_stats *st[2] = { NULL, NULL };
	struct timespec t[2], pause;
	bool tty = isatty(STDOUT_FILENO);
	double delay = 1.0;
	unsigned long count = 0, i;
	char mnt[PATH_MAX];
	char *end;
	int c, err, rc = 0, last = -1;

	while ((c = getopt_long(argc, argv, "n:d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			errno = 0;
			count = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || !count || optarg[0] == '-')
				return ctl_usage_error("top: bad count '%s'", optarg);
			break;
		case 'd':
			errno = 0;
			delay = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(delay > 0) || delay > 86400)
				return ctl_usage_error("top: bad delay '%s'", optarg);
			break;
		case 'h':
			return CTL_SHOW_HELP;
		default:
			return ctl_usage_error("top: bad option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error("top: one MOUNT expected");
	if (ctl_mount_resolve(argv[optind], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	st[0] = malloc(sizeof(*st[0]));
	st[1] = malloc(sizeof(*st[1]));
	if (!st[0] || !st[1]) {
		ctl_err("%s", strerror(ENOMEM));
		rc = CTL_EXIT_ERR;
		goto out;
	}
	pause.tv_sec = (time_t)delay;
	pause.tv_nsec = (long)((delay - (double)pause.tv_sec) * 1e9);
	for (i = 0; !count || i < count; i++) {
		int cur = last == 0 ? 1 : 0;
		double dt = 0;

		if (i)
			while (nanosleep(&pause, &pause) && errno == EINTR)
				;
		pause.tv_sec = (time_t)delay;
		pause.tv_nsec = (long)((delay - (double)pause.tv_sec) * 1e9);
		clock_gettime(CLOCK_MONOTONIC, &t[cur]);
		err = stats_read(mnt, st[cur]);
		if (err) {
			ctl_err("%s: cannot read stats: %s", argv[optind], strerror(-err));
			rc = CTL_EXIT_ERR;
			break;
		}
		if (last >= 0)
			dt = (double)(t[cur].tv_sec - t[last].tv_sec) +
			     (double)(t[cur].tv_nsec - t[last].tv_nsec) / 1e9;
		if (i && !tty)
			putchar('\n');
		top_print(argv[optind], st[cur], last >= 0 ? st[last] : NULL, dt, tty);
		if (last >= 0)
			stats_free(st[last]);
		last = cur;
		if (ferror(stdout)) {
			rc = CTL_EXIT_ERR;
			break;
		}
	}
	if (last >= 0)
		stats_free(st[last]);
out:
	free(st[0]);
	free(st[1]);
	return rc;
}
