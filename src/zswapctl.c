/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl: the admin tool for zswapfs mounts, as zramctl is for zram.
 *
 * It stands alone on purpose: it talks to a mount only through the files the
 * daemon serves (MOUNT/stats, MOUNT/control) and to the system through
 * /proc, /sys and the usual tools (losetup, mkswap, swapon, swapoff), so it
 * works against any daemon version that keeps the user-facing contract.
 *
 * Exit codes: 0 success, 1 error, 2 usage.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

#define CTL_FSTYPE	"fuse.zswapfs"
#define CTL_EXIT_ERR	1
#define CTL_EXIT_USAGE	2
/* the stats file has about 50 keys today; new keys are only ever added */
#define CTL_STATS_MAX	1024
#define CTL_STATS_FILE_MAX (1U << 20)
#define CTL_LOOPS_MAX	16
#define CTL_DEV_LEN	64

extern char **environ;

static const char *progname = "zswapctl";

static void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctl_err(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ctl_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", progname);
	return CTL_EXIT_USAGE;
}

static void ctl_help(void)
{
	printf("Usage:\n"
	       " %s [status] [-b] [-n] [MOUNT...]\n"
	       " %s swapon MOUNT [-p PRIORITY]\n"
	       " %s swapoff MOUNT\n"
	       " %s stats MOUNT [--json]\n"
	       " %s top MOUNT [-n COUNT] [-d SECONDS]\n"
	       " %s compact MOUNT\n"
	       " %s idle MOUNT all|SECONDS\n"
	       " %s recompress MOUNT [type=idle|huge|huge_idle] [threshold=BYTES] [max_pages=N]\n"
	       " %s writeback MOUNT idle|huge|huge_idle|all [max_pages=N]\n"
	       " %s restart MOUNT\n"
	       "\n"
	       "Show and manage zswapfs mounts (compressed swap in RAM over FUSE).\n"
	       "\n"
	       "Commands:\n"
	       " status          a table of every zswapfs mount (the default)\n"
	       " swapon          attach MOUNT/swap to a loop device (direct I/O),\n"
	       "                 mkswap it and turn it on as swap with --discard\n"
	       " swapoff         turn that swap off and detach the loop device\n"
	       " stats           print MOUNT/stats, or one JSON object\n"
	       " top             the key figures, refreshed every second\n"
	       " compact, idle, recompress, writeback\n"
	       "                 write the command to MOUNT/control\n"
	       " restart         start a new worker from the binary on disk (an\n"
	       "                 upgrade without swapoff), and wait until it serves\n"
	       "\n"
	       "Options:\n"
	       " -b, --bytes         status: sizes in bytes\n"
	       " -n, --noheadings    status: no header line\n"
	       " -p, --priority N    swapon: swap priority (-1..32767)\n"
	       " -j, --json          stats: one JSON object\n"
	       " -n, --count N       top: stop after N refreshes\n"
	       " -d, --delay SECONDS top: time between refreshes (default 1)\n"
	       " -h, --help          this help\n"
	       " -V, --version       the version\n"
	       "\n"
	       "See zswapctl(8) and zswapfs(8).\n",
	       progname, progname, progname, progname, progname, progname, progname,
	       progname, progname, progname);
}

/* ---- stats ------------------------------------------------------------- */

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

/*
 * Whether the mount writes back to a backing file.  A daemon from before
 * writeback has no writeback_status: it has none either.
 */
static bool stats_has_backing(const struct ctl_stats *st)
{
	const char *v = stats_str(st, "writeback_status");

	return v && strcmp(v, "none");
}

/* A missing or odd value reads as 0: the table then still shows the rest. */
static uint64_t stats_u64(const struct ctl_stats *st, const char *key)
{
	const char *v = stats_str(st, key);
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

/* ---- mounts ------------------------------------------------------------ */

/* mountinfo writes space, tab, newline and backslash as \ooo */
static void unescape_octal(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

struct ctl_mounts {
	char **path;
	bool *zswapfs;
	size_t n;
};

static void mounts_free(struct ctl_mounts *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		free(m->path[i]);
	free(m->path);
	free(m->zswapfs);
	memset(m, 0, sizeof(*m));
}

/* Every mount in /proc/self/mountinfo, in order, with whether it is ours. */
static int mounts_read(struct ctl_mounts *m)
{
	char *line = NULL;
	size_t cap = 0, alloc = 0;
	int err = 0;
	FILE *f;

	memset(m, 0, sizeof(*m));
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *field[5], *sep, *fstype, *save = NULL, *tok;
		int i;

		/* fields: id parent maj:min root mountpoint opts [optional...] - fstype ... */
		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		fstype = strtok_r(sep + 3, " \n", &save);
		if (!fstype)
			continue;
		save = NULL;
		tok = strtok_r(line, " ", &save);
		for (i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, " ", &save))
			field[i] = tok;
		if (i < 5)
			continue;
		if (m->n == alloc) {
			size_t na = alloc ? alloc * 2 : 16;
			char **np = realloc(m->path, na * sizeof(*np));
			bool *nz;

			if (!np) {
				err = -ENOMEM;
				break;
			}
			m->path = np;
			nz = realloc(m->zswapfs, na * sizeof(*nz));
			if (!nz) {
				err = -ENOMEM;
				break;
			}
			m->zswapfs = nz;
			alloc = na;
		}
		unescape_octal(field[4]);
		m->path[m->n] = strdup(field[4]);
		if (!m->path[m->n]) {
			err = -ENOMEM;
			break;
		}
		m->zswapfs[m->n] = !strcmp(fstype, CTL_FSTYPE);
		m->n++;
	}
	free(line);
	fclose(f);
	if (err)
		mounts_free(m);
	return err;
}

/*
 * Resolve ARG to the mount point it names and check that a zswapfs mount is
 * what sits there (the last mount on a path is the one visible).  On error
 * the message is printed.  Returns 0 or -errno.
 */
static int mount_resolve(const char *arg, char *mnt, size_t len)
{
	char buf[PATH_MAX];
	struct ctl_mounts m;
	bool found = false, ours = false;
	size_t i;
	int err;

	if (!realpath(arg, buf)) {
		/* a mount whose daemon died answers ENOTCONN: still name it */
		if (arg[0] != '/' || strlen(arg) >= sizeof(buf) || errno == ENOENT) {
			ctl_err("%s: %s", arg, strerror(errno));
			return -ENOENT;
		}
		strcpy(buf, arg);
		for (i = strlen(buf); i > 1 && buf[i - 1] == '/'; i--)
			buf[i - 1] = '\0';
	}
	err = mounts_read(&m);
	if (err) {
		ctl_err("/proc/self/mountinfo: %s", strerror(-err));
		return err;
	}
	for (i = 0; i < m.n; i++) {
		if (!strcmp(m.path[i], buf)) {
			found = true;
			ours = m.zswapfs[i];
		}
	}
	mounts_free(&m);
	if (!found || !ours) {
		ctl_err("%s: not a zswapfs mount", arg);
		return -EINVAL;
	}
	if (strlen(buf) >= len) {
		ctl_err("%s: %s", arg, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	strcpy(mnt, buf);
	return 0;
}

/* ---- loop devices and swap ------------------------------------------------ */

/*
 * The loop devices whose backing file is FILE, as /dev/loopN, from sysfs
 * (the attribute exists only while a device is bound).  Returns how many.
 */
static int loops_for(const char *file, char devs[][CTL_DEV_LEN], int max)
{
	struct dirent *de;
	int n = 0;
	DIR *d;

	d = opendir("/sys/block");
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		char path[PATH_MAX + 64], back[PATH_MAX + 16];
		size_t l;
		FILE *f;

		if (strncmp(de->d_name, "loop", 4) || !isdigit((unsigned char)de->d_name[4]) ||
		    strlen(de->d_name) + 6 > CTL_DEV_LEN)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(back, sizeof(back), f)) {
			fclose(f);
			continue;
		}
		fclose(f);
		l = strlen(back);
		if (l && back[l - 1] == '\n')
			back[--l] = '\0';
		if (strcmp(back, file))
			continue;
		memcpy(devs[n], "/dev/", 5);
		memcpy(devs[n] + 5, de->d_name, strlen(de->d_name) + 1);
		n++;
	}
	closedir(d);
	return n;
}

static bool swap_active(const char *dev)
{
	char line[PATH_MAX + 128];
	bool found = false;
	FILE *f;

	f = fopen("/proc/swaps", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		size_t l = strcspn(line, " \t\n");

		if (l == strlen(dev) && !strncmp(line, dev, l)) {
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/* ---- running tools --------------------------------------------------------- */

static int spawn_one(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		     char *const argv[])
{
	static const char *const dirs[] = { "/usr/sbin/", "/sbin/", NULL };
	char path[PATH_MAX];
	int i, r;

	r = posix_spawnp(pid, file, fa, NULL, argv, environ);
	/* root from su or cron may lack the sbin directories in PATH */
	for (i = 0; r == ENOENT && !strchr(file, '/') && dirs[i]; i++) {
		snprintf(path, sizeof(path), "%s%s", dirs[i], file);
		r = posix_spawn(pid, path, fa, NULL, argv, environ);
	}
	return r;
}

/*
 * Run ARGV and wait for it.  Its stdout goes to OUT (at most OUTLEN - 1
 * bytes, NUL-terminated) when OUT is set, to /dev/null when QUIET, else to
 * ours; stderr is always ours, so the tool explains its own failures.
 * Returns the exit status (128 + signal), or -1 if it could not be run.
 */
static int run(char *const argv[], char *out, size_t outlen, bool quiet)
{
	posix_spawn_file_actions_t fa;
	int pfd[2] = { -1, -1 };
	size_t got = 0;
	int r, status;
	pid_t pid;

	fflush(stdout);
	if (posix_spawn_file_actions_init(&fa)) {
		ctl_err("%s: %s", argv[0], strerror(ENOMEM));
		return -1;
	}
	if (out) {
		if (pipe2(pfd, O_CLOEXEC)) {
			ctl_err("pipe: %s", strerror(errno));
			posix_spawn_file_actions_destroy(&fa);
			return -1;
		}
		posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	} else if (quiet) {
		posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	}
	r = spawn_one(&pid, argv[0], &fa, argv);
	posix_spawn_file_actions_destroy(&fa);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (r) {
		ctl_err("cannot run %s: %s", argv[0], strerror(r));
		if (pfd[0] >= 0)
			close(pfd[0]);
		return -1;
	}
	if (out) {
		for (;;) {
			char sink[256];
			ssize_t n;

			if (got + 1 < outlen)
				n = read(pfd[0], out + got, outlen - 1 - got);
			else
				n = read(pfd[0], sink, sizeof(sink));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			if (got + 1 < outlen)
				got += (size_t)n;
		}
		out[got] = '\0';
		close(pfd[0]);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ctl_err("waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* run() and say which command failed; 0 or -1 */
static int run_checked(char *const argv[], char *out, size_t outlen, bool quiet)
{
	int r = run(argv, out, outlen, quiet);

	if (r < 0)
		return -1;
	if (r) {
		ctl_err("%s %s failed (exit status %d)", argv[0], argv[1] ? argv[1] : "", r);
		return -1;
	}
	return 0;
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
	n = loops_for(file, devs, CTL_LOOPS_MAX);
	buf[0] = '\0';
	for (i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s", i ? "," : "", devs[i],
					 swap_active(devs[i]) ? " [SWAP]" : "");
	if (!n)
		snprintf(buf, len, "-");
}

static int status_row_fill(struct status_row *row, const char *mnt, const struct ctl_stats *st,
			   bool bytes)
{
	uint64_t orig = stats_u64(st, "orig_data_size");
	uint64_t total = stats_u64(st, "mem_used_total");
	const char *algo = stats_str(st, "algorithm");
	char buf[COL_N][PATH_MAX + 64];
	int c;

	snprintf(buf[COL_MOUNT], sizeof(buf[0]), "%s", mnt);
	fmt_size(buf[COL_DISKSIZE], sizeof(buf[0]), stats_u64(st, "disksize"), bytes);
	snprintf(buf[COL_ALGO], sizeof(buf[0]), "%s", algo ? algo : "-");
	fmt_size(buf[COL_DATA], sizeof(buf[0]), orig, bytes);
	fmt_size(buf[COL_COMPR], sizeof(buf[0]), stats_u64(st, "compr_data_size"), bytes);
	fmt_size(buf[COL_TOTAL], sizeof(buf[0]), total, bytes);
	if (total)
		snprintf(buf[COL_RATIO], sizeof(buf[0]), "%.2f", (double)orig / (double)total);
	else
		snprintf(buf[COL_RATIO], sizeof(buf[0]), "-");
	/* what the file takes on the disk (whole segments), not pages times 4096 */
	if (stats_has_backing(st))
		fmt_size(buf[COL_BACKING], sizeof(buf[0]), stats_u64(st, "backing_bytes_used"),
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

static int cmd_status(int argc, char **argv)
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
			ctl_help();
			return 0;
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

			if (mount_resolve(argv[optind + i], mnt, sizeof(mnt))) {
				rc = CTL_EXIT_ERR;
				continue;
			}
			want[i] = strdup(mnt);
			if (!want[i])
				goto out_nomem;
		}
	} else {
		err = mounts_read(&m);
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
	mounts_free(&m);
	return rc;
}

/* ---- swapon / swapoff -------------------------------------------------------- */

static int cmd_swapon(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "priority", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char mnt[PATH_MAX], file[PATH_MAX + 8], dev[CTL_DEV_LEN + 64];
	char devs[CTL_LOOPS_MAX][CTL_DEV_LEN];
	const char *prio = NULL;
	int c, i, n;

	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < -1 || v > 32767)
				return ctl_usage_error("swapon: bad priority '%s' (-1..32767)",
						       optarg);
			prio = optarg;
			break;
		}
		case 'h':
			ctl_help();
			return 0;
		default:
			return ctl_usage_error("swapon: bad option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error("swapon: one MOUNT expected");
	if (geteuid() != 0) {
		ctl_err("swapon needs root");
		return CTL_EXIT_ERR;
	}
	if (mount_resolve(argv[optind], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	snprintf(file, sizeof(file), "%s/swap", mnt);
	n = loops_for(file, devs, CTL_LOOPS_MAX);
	for (i = 0; i < n; i++) {
		if (swap_active(devs[i])) {
			ctl_err("%s: already swapped on (%s)", argv[optind], devs[i]);
			return CTL_EXIT_ERR;
		}
	}

	/*
	 * Direct I/O: the loop driver then keeps no page cache copy of the pages
	 * swapped out (that would double the memory we exist to save), and it
	 * measured fastest.  512-byte sectors, the default.
	 */
	{
		char *const losetup[] = { "losetup", "--find", "--show", "--direct-io=on", file,
					  NULL };

		if (run_checked(losetup, dev, sizeof(dev), false))
			return CTL_EXIT_ERR;
	}
	dev[strcspn(dev, "\n")] = '\0';
	if (strncmp(dev, "/dev/", 5)) {
		ctl_err("losetup printed no device ('%s')", dev);
		return CTL_EXIT_ERR;
	}
	{
		char *const mkswap[] = { "mkswap", dev, NULL };

		if (run_checked(mkswap, NULL, 0, true))
			goto out_detach;
	}
	{
		/* --discard: freed swap slots then free the daemon's memory */
		char *const swapon[] = { "swapon", "--discard", dev, NULL };
		char *const swapon_p[] = { "swapon", "--discard", "--priority", (char *)prio, dev,
					   NULL };

		if (run_checked(prio ? swapon_p : swapon, NULL, 0, false))
			goto out_detach;
	}
	printf("%s\n", dev);
	return 0;

out_detach:
	{
		char *const detach[] = { "losetup", "-d", dev, NULL };

		run_checked(detach, NULL, 0, false);
	}
	return CTL_EXIT_ERR;
}

static int cmd_swapoff(int argc, char **argv)
{
	char mnt[PATH_MAX], file[PATH_MAX + 8];
	char devs[CTL_LOOPS_MAX][CTL_DEV_LEN];
	int i, n, rc = 0;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		ctl_help();
		return 0;
	}
	if (argc != 2)
		return ctl_usage_error("swapoff: one MOUNT expected");
	if (geteuid() != 0) {
		ctl_err("swapoff needs root");
		return CTL_EXIT_ERR;
	}
	if (mount_resolve(argv[1], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	snprintf(file, sizeof(file), "%s/swap", mnt);
	n = loops_for(file, devs, CTL_LOOPS_MAX);
	if (!n) {
		ctl_err("%s: no loop device on %s", argv[1], file);
		return CTL_EXIT_ERR;
	}
	for (i = 0; i < n; i++) {
		char *const swapoff[] = { "swapoff", devs[i], NULL };
		char *const detach[] = { "losetup", "-d", devs[i], NULL };

		/* never detach a device the kernel still swaps to */
		if (swap_active(devs[i]) && run_checked(swapoff, NULL, 0, false)) {
			rc = CTL_EXIT_ERR;
			continue;
		}
		if (run_checked(detach, NULL, 0, false))
			rc = CTL_EXIT_ERR;
	}
	return rc;
}

/* ---- stats ---------------------------------------------------------------- */

/*
 * A value is a JSON number when it is a whole number as the stats file
 * writes them; the others are strings: algorithm, writeback_status,
 * fuse_transport, backing_cipher, memcg, and writeback_budget_left when it
 * is "unlimited".
 */
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

static int cmd_stats(int argc, char **argv)
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
			ctl_help();
			return 0;
		default:
			return ctl_usage_error("stats: bad option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error("stats: one MOUNT expected");
	if (mount_resolve(argv[optind], mnt, sizeof(mnt)))
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
			if (json_number(st->e[i].val))
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
		     const struct ctl_stats *prev, const char *key, double dt)
{
	uint64_t a, b;

	if (!prev || dt <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	a = stats_u64(prev, key);
	b = stats_u64(cur, key);
	/* a restarted daemon starts again from 0 */
	snprintf(buf, len, "%.1f", b >= a ? (double)(b - a) / dt : 0.0);
}

static void top_print(const char *mnt, const struct ctl_stats *cur, const struct ctl_stats *prev,
		      double dt, bool tty)
{
	char s[16][32];
	uint64_t orig = stats_u64(cur, "orig_data_size");
	uint64_t total = stats_u64(cur, "mem_used_total");
	const char *algo = stats_str(cur, "algorithm");
	char when[32];
	time_t now = time(NULL);
	struct tm tm;

	if (tty)
		fputs("\033[H\033[2J", stdout);
	strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&now, &tm));
	fmt_size(s[0], sizeof(s[0]), stats_u64(cur, "disksize"), false);
	printf("zswapfs %s  %s  disksize %s  %s\n\n", mnt, algo ? algo : "-", s[0], when);

	fmt_size(s[0], sizeof(s[0]), orig, false);
	fmt_size(s[1], sizeof(s[1]), stats_u64(cur, "compr_data_size"), false);
	fmt_size(s[2], sizeof(s[2]), total, false);
	if (total)
		snprintf(s[3], sizeof(s[3]), "%.2f", (double)orig / (double)total);
	else
		snprintf(s[3], sizeof(s[3]), "-");
	fmt_size(s[4], sizeof(s[4]), stats_u64(cur, "mem_used_max"), false);
	if (stats_u64(cur, "mem_limit"))
		fmt_size(s[5], sizeof(s[5]), stats_u64(cur, "mem_limit"), false);
	else
		snprintf(s[5], sizeof(s[5]), "none");
	printf("memory    orig %s  compr %s  total %s  ratio %s  max %s  limit %s\n",
	       s[0], s[1], s[2], s[3], s[4], s[5]);

	printf("pages     stored %" PRIu64 "  same %" PRIu64 "  huge %" PRIu64 "\n",
	       stats_u64(cur, "pages_stored"), stats_u64(cur, "same_pages"),
	       stats_u64(cur, "huge_pages"));

	fmt_rate(s[0], sizeof(s[0]), cur, prev, "num_reads", dt);
	fmt_rate(s[1], sizeof(s[1]), cur, prev, "num_writes", dt);
	fmt_rate(s[2], sizeof(s[2]), cur, prev, "notify_free", dt);
	fmt_rate(s[3], sizeof(s[3]), cur, prev, "bd_writes", dt);
	printf("pages/s   reads %s  writes %s  freed %s  written back %s\n", s[0], s[1], s[2],
	       s[3]);

	fmt_ns(s[0], sizeof(s[0]), stats_u64(cur, "read_latency_avg_ns"));
	fmt_ns(s[1], sizeof(s[1]), stats_u64(cur, "write_latency_avg_ns"));
	fmt_ns(s[2], sizeof(s[2]), stats_u64(cur, "discard_latency_avg_ns"));
	printf("latency   read %s  write %s  discard %s  (average)\n", s[0], s[1], s[2]);

	printf("failed    reads %" PRIu64 "  writes %" PRIu64 "  invalid_io %" PRIu64 "\n",
	       stats_u64(cur, "failed_reads"), stats_u64(cur, "failed_writes"),
	       stats_u64(cur, "invalid_io"));

	fmt_size(s[0], sizeof(s[0]), stats_u64(cur, "bytes_lz4"), false);
	fmt_size(s[1], sizeof(s[1]), stats_u64(cur, "bytes_zstd"), false);
	fmt_size(s[2], sizeof(s[2]), stats_u64(cur, "bytes_lzo"), false);
	printf("codecs    lz4 %" PRIu64 " (%s)  zstd %" PRIu64 " (%s)  lzo %" PRIu64 " (%s)\n",
	       stats_u64(cur, "pages_lz4"), s[0], stats_u64(cur, "pages_zstd"), s[1],
	       stats_u64(cur, "pages_lzo"), s[2]);

	printf("recompr   recompressed %" PRIu64 "  skipped %" PRIu64 "  incompressible %" PRIu64
	       "  passes %" PRIu64 "%s\n",
	       stats_u64(cur, "recompressed"), stats_u64(cur, "recompress_skipped"),
	       stats_u64(cur, "recompress_incompressible"), stats_u64(cur, "recompress_passes"),
	       stats_u64(cur, "recompress_pending") ? "  (pending)" : "");

	fmt_size(s[0], sizeof(s[0]), stats_u64(cur, "frag_bytes"), false);
	printf("compact   compactions %" PRIu64 "  pages_compacted %" PRIu64 "  frag %s\n",
	       stats_u64(cur, "compactions"), stats_u64(cur, "pages_compacted"), s[0]);

	if (stats_has_backing(cur)) {
		const char *left = stats_str(cur, "writeback_budget_left");

		fmt_size(s[0], sizeof(s[0]), stats_u64(cur, "backing_bytes_used"), false);
		fmt_size(s[1], sizeof(s[1]), stats_u64(cur, "backing_bytes_max"), false);
		fmt_size(s[2], sizeof(s[2]), stats_u64(cur, "backing_bytes_live"), false);
		/* a number of bytes, or the word "unlimited" */
		if (left && json_number(left))
			fmt_size(s[3], sizeof(s[3]), stats_u64(cur, "writeback_budget_left"), false);
		else
			snprintf(s[3], sizeof(s[3]), "%s", left ? left : "-");
		printf("backing   %s  used %s of %s  live %s  budget %s  errors %" PRIu64
		       " read, %" PRIu64 " write\n",
		       stats_str(cur, "writeback_status"), s[0], s[1], s[2], s[3],
		       stats_u64(cur, "backing_read_errors"), stats_u64(cur, "backing_write_errors"));
	} else {
		printf("backing   none\n");
	}
	printf("writeback pages %" PRIu64 "  reads %" PRIu64 "  writes %" PRIu64
	       "  failed %" PRIu64 "  spills %" PRIu64 "\n",
	       stats_u64(cur, "bd_count"), stats_u64(cur, "bd_reads"),
	       stats_u64(cur, "bd_writes"), stats_u64(cur, "writeback_failed"),
	       stats_u64(cur, "writeback_spills"));

	fmt_size(s[0], sizeof(s[0]), stats_u64(cur, "rss_bytes"), false);
	fmt_size(s[1], sizeof(s[1]), stats_u64(cur, "arena_mapped_bytes"), false);
	printf("daemon    rss %s  arena %s\n", s[0], s[1]);
	fflush(stdout);
}

static int cmd_top(int argc, char **argv)
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
			ctl_help();
			return 0;
		default:
			return ctl_usage_error("top: bad option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error("top: one MOUNT expected");
	if (mount_resolve(argv[optind], mnt, sizeof(mnt)))
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

/* ---- control ------------------------------------------------------------- */

/* CMD ARG... written as one write, the daemon's unit of a command */
static int cmd_control(const char *cmd, int argc, char **argv, int min_args, int max_args)
{
	char mnt[PATH_MAX], path[PATH_MAX + 16], text[4096];
	size_t len;
	ssize_t n;
	int i, fd;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		ctl_help();
		return 0;
	}
	if (argc < 2)
		return ctl_usage_error("%s: MOUNT expected", cmd);
	if (argc - 2 < min_args || (max_args >= 0 && argc - 2 > max_args))
		return ctl_usage_error("%s: wrong number of arguments", cmd);
	len = (size_t)snprintf(text, sizeof(text), "%s", cmd);
	for (i = 2; i < argc && len < sizeof(text); i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, " %s", argv[i]);
	if (len >= sizeof(text))
		return ctl_usage_error("%s: command too long", cmd);
	if (mount_resolve(argv[1], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	snprintf(path, sizeof(path), "%s/control", mnt);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		ctl_err("%s: %s", path, strerror(errno));
		return CTL_EXIT_ERR;
	}
	do {
		n = write(fd, text, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		ctl_err("%s: '%s': %s", argv[1], text, strerror(errno));
		close(fd);
		return CTL_EXIT_ERR;
	}
	if ((size_t)n != len) {
		ctl_err("%s: '%s': short write", argv[1], text);
		close(fd);
		return CTL_EXIT_ERR;
	}
	if (close(fd)) {
		ctl_err("%s: '%s': %s", argv[1], text, strerror(errno));
		return CTL_EXIT_ERR;
	}
	return 0;
}

/* worker_generation, worker_upgrades and worker_restarts of MOUNT's stats. */
static int worker_counts(const char *mnt, uint64_t *gen, uint64_t *upgrades, uint64_t *restarts)
{
	struct ctl_stats *st = malloc(sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	err = stats_read(mnt, st);
	if (!err) {
		if (!stats_str(st, "worker_generation"))
			err = -EOPNOTSUPP;
		*gen = stats_u64(st, "worker_generation");
		*upgrades = stats_u64(st, "worker_upgrades");
		*restarts = stats_u64(st, "worker_restarts");
		stats_free(st);
	}
	free(st);
	return err;
}

/*
 * restart MOUNT: the daemon's worker answers what it has read and exits, and
 * its keeper starts a new one from the binary on disk; wait (30 s at most)
 * until a new worker serves, and say whether it was that one.
 */
static int cmd_restart(int argc, char **argv)
{
	uint64_t gen, up, re, gen2, up2, re2;
	char mnt[PATH_MAX];
	int err, i, rc;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		ctl_help();
		return 0;
	}
	if (argc != 2)
		return ctl_usage_error("restart: one MOUNT expected");
	if (mount_resolve(argv[1], mnt, sizeof(mnt)))
		return CTL_EXIT_ERR;
	err = worker_counts(mnt, &gen, &up, &re);
	if (err) {
		ctl_err("%s: %s", argv[1], err == -EOPNOTSUPP ? "this daemon cannot restart its "
			"worker (a version before zswapfs had a keeper)" : strerror(-err));
		return CTL_EXIT_ERR;
	}
	rc = cmd_control("restart", argc, argv, 0, 0);
	if (rc)
		return rc;
	/* The stats are served by whichever worker serves: the next one. */
	for (i = 0; i < 300; i++) {
		if (!worker_counts(mnt, &gen2, &up2, &re2) && gen2 > gen) {
			if (up2 > up && re2 == re) {
				printf("%s: worker %llu serves (from the binary on disk)\n", argv[1],
				       (unsigned long long)gen2);
				return 0;
			}
			ctl_err("%s: the new worker did not take over (worker %llu serves; the "
				"daemon's log says why)", argv[1], (unsigned long long)gen2);
			return CTL_EXIT_ERR;
		}
		usleep(100000);
	}
	ctl_err("%s: no new worker serves after 30 s", argv[1]);
	return CTL_EXIT_ERR;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		ctl_help();
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("zswapctl %s\n", PACKAGE_VERSION);
		return 0;
	}
	/* no command, or options first: status, as zramctl */
	if (argc < 2 || argv[1][0] == '-')
		return cmd_status(argc, argv);
	cmd = argv[1];
	argc--;
	argv++;
	if (!strcmp(cmd, "status"))
		return cmd_status(argc, argv);
	if (!strcmp(cmd, "swapon"))
		return cmd_swapon(argc, argv);
	if (!strcmp(cmd, "swapoff"))
		return cmd_swapoff(argc, argv);
	if (!strcmp(cmd, "stats"))
		return cmd_stats(argc, argv);
	if (!strcmp(cmd, "top"))
		return cmd_top(argc, argv);
	if (!strcmp(cmd, "compact"))
		return cmd_control(cmd, argc, argv, 0, 0);
	if (!strcmp(cmd, "idle"))
		return cmd_control(cmd, argc, argv, 1, 1);
	if (!strcmp(cmd, "recompress"))
		return cmd_control(cmd, argc, argv, 0, -1);
	if (!strcmp(cmd, "writeback"))
		return cmd_control(cmd, argc, argv, 1, -1);
	if (!strcmp(cmd, "restart"))
		return cmd_restart(argc, argv);
	return ctl_usage_error("unknown command '%s'", cmd);
}
