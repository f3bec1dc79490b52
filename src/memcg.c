/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "memcg.h"
#include "mountinfo.h"

#define PROC_CGROUP	"/proc/self/cgroup"
#define MOUNTINFO	"/proc/self/mountinfo"
/* The longest value a limit file holds: 20 digits, or "max". */
#define LIMIT_TEXT_MAX	32
/* How often memcg_remove() tries again while the cgroup is busy. */
#define MEMCG_BUSY_TICK_MS	10u

/* What memcg_apply() did, for memcg_restore() and the stats. */
static struct {
	const char *state;
	uint64_t limit;
	char created[PATH_MAX];		/* the cgroup we made, "" if none */
	char origin[PATH_MAX];		/* the one we came from */
	char root[PATH_MAX];
} memcg_state = { .state = "unknown" };

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* dst = a + b, or -ENAMETOOLONG. */
static int path_join(char *dst, size_t len, const char *a, const char *b)
{
	int n = snprintf(dst, len, "%s%s", a, b);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A cgroup path as /proc shows it: absolute, no "." or ".." parts. */
static bool path_sane(const char *p)
{
	const char *c = p;

	if (p[0] != '/')
		return false;
	while (*c) {
		const char *next = strchr(c + 1, '/');
		size_t n = next ? (size_t)(next - c - 1) : strlen(c + 1);

		if ((n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return false;
		if (!next)
			break;
		c = next;
	}
	return true;
}

/* True when word is one of the comma-separated items of list. */
static bool list_has(const char *list, const char *word)
{
	size_t n = strlen(word);

	while (*list) {
		const char *end = strchr(list, ',');
		size_t len = end ? (size_t)(end - list) : strlen(list);

		if (len == n && !strncmp(list, word, n))
			return true;
		if (!end)
			break;
		list = end + 1;
	}
	return false;
}

/*
 * /proc/self/cgroup: "ID:CONTROLLERS:PATH" per line.  Finds the v1 line
 * that names the memory controller and the v2 line ("0::PATH").
 */
static int read_proc_cgroup(const char *file, char *v1, char *v2, char *err, size_t errlen)
{
	FILE *f = fopen(file, "re");
	char *line = NULL;
	size_t cap = 0;
	unsigned int lineno = 0;
	ssize_t n;
	int ret = 0;

	v1[0] = v2[0] = '\0';
	if (!f) {
		ret = -errno;
		set_err(err, errlen, "%s: %s", file, strerror(errno));
		return ret;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		char *ctl, *path;

		lineno++;
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		ctl = strchr(line, ':');
		path = ctl ? strchr(ctl + 1, ':') : NULL;
		if (!path) {
			set_err(err, errlen, "%s:%u: not ID:CONTROLLERS:PATH", file, lineno);
			ret = -EINVAL;
			break;
		}
		*ctl++ = '\0';
		*path++ = '\0';
		if (strlen(path) >= PATH_MAX || !path_sane(path)) {
			set_err(err, errlen, "%s:%u: '%.64s' is not a cgroup path", file, lineno,
				path);
			ret = -EINVAL;
			break;
		}
		if (!strcmp(line, "0") && !ctl[0])
			strcpy(v2, path);
		else if (list_has(ctl, "memory"))
			strcpy(v1, path);
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * The first mount of the v1 memory hierarchy (fstype cgroup, "memory" in
 * its super options) or of cgroup2: its mount point and the cgroup it
 * shows at that point (field 4, "/" unless in a cgroup namespace or a bind
 * mount).  -ENOENT when there is none.
 */
static int find_mount(const char *file, bool v2, char *point, char *mroot)
{
	FILE *f = fopen(file, "re");
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (ret && getline(&line, &cap, f) > 0) {
		char *field[6], *save, *sep, *fstype, *opts;
		int i;

		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		fstype = strtok_r(sep + 3, " \n", &save);
		strtok_r(NULL, " \n", &save);		/* source */
		opts = strtok_r(NULL, " \n", &save);
		if (!fstype || !opts)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") :
			 strcmp(fstype, "cgroup") || !list_has(opts, "memory"))
			continue;
		field[0] = strtok_r(line, " ", &save);
		for (i = 1; i < 6 && field[i - 1]; i++)
			field[i] = strtok_r(NULL, " ", &save);
		if (i < 6 || !field[4] || strlen(field[3]) >= PATH_MAX ||
		    strlen(field[4]) >= PATH_MAX)
			continue;
		mountinfo_unescape(field[3]);
		mountinfo_unescape(field[4]);
		strcpy(mroot, field[3]);
		strcpy(point, field[4]);
		ret = 0;
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * Read a limit file: a number of bytes, or "max".  -ENOENT when it does not
 * exist (the v2 root has no limit files); -EINVAL with a message otherwise.
 */
static int read_limit(const char *file, uint64_t *out, char *err, size_t errlen)
{
	char buf[LIMIT_TEXT_MAX + 1], *end;
	FILE *f = fopen(file, "re");
	size_t n;

	if (!f) {
		if (errno == ENOENT)
			return -ENOENT;
		set_err(err, errlen, "%s: %s", file, strerror(errno));
		return -errno;
	}
	n = fread(buf, 1, LIMIT_TEXT_MAX, f);
	fclose(f);
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (!strcmp(buf, "max")) {
		*out = MEMCG_NO_LIMIT;
		return 0;
	}
	errno = 0;
	*out = strtoull(buf, &end, 10);
	if (!n || errno || *end || buf[0] < '0' || buf[0] > '9') {
		set_err(err, errlen, "%s: '%.32s' is not a number of bytes or \"max\"", file, buf);
		return -EINVAL;
	}
	return 0;
}

/* The limit files of a cgroup; v1: memory.limit_in_bytes, v2: max and high. */
static const char *const limit_files[2][2] = {
	{ "/memory.limit_in_bytes", NULL },
	{ "/memory.max", "/memory.high" },
};

/* The tightest limit set on dir itself (MEMCG_NO_LIMIT: none) and its file. */
static int dir_limit(enum memcg_version v, const char *dir, uint64_t *limit, char *file,
		     char *err, size_t errlen)
{
	*limit = MEMCG_NO_LIMIT;
	for (unsigned int i = 0; i < 2; i++) {
		const char *name = limit_files[v == MEMCG_V2][i];
		char path[PATH_MAX];
		uint64_t val;
		int ret;

		if (!name)
			continue;
		if (path_join(path, sizeof(path), dir, name)) {
			set_err(err, errlen, "%s: path too long", dir);
			return -ENAMETOOLONG;
		}
		ret = read_limit(path, &val, err, errlen);
		if (ret == -ENOENT)
			continue;
		if (ret)
			return ret;
		if (val < *limit) {
			*limit = val;
			strcpy(file, path);
		}
	}
	return 0;
}

/* Whether the v2 hierarchy at root has the memory controller. */
static bool v2_has_memory(const char *root)
{
	char path[PATH_MAX], buf[256];
	FILE *f;
	size_t n;
	bool yes = false;

	if (path_join(path, sizeof(path), root, "/cgroup.controllers"))
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (char *save, *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		yes |= !strcmp(w, "memory");
	return yes;
}

/* Our cgroup path as /proc shows it, made relative to a mount showing mroot. */
static int under_mount(const char *path, const char *mroot, char *out, char *err, size_t errlen)
{
	size_t n = strlen(mroot);

	if (!strcmp(mroot, "/")) {
		strcpy(out, path);
		return 0;
	}
	if (strncmp(path, mroot, n) || (path[n] && path[n] != '/')) {
		set_err(err, errlen, "our cgroup %s is outside the mounted part %s of the "
			"hierarchy", path, mroot);
		return -ENOENT;
	}
	strcpy(out, path[n] ? path + n : "/");
	return 0;
}

int memcg_read(const struct memcg_paths *p, uint64_t ram, struct memcg_info *info, char *err,
	       size_t errlen)
{
	static const struct memcg_paths sys = { 0 };
	char v1[PATH_MAX], v2[PATH_MAX], mroot[PATH_MAX], walk[PATH_MAX];
	const char *proc;
	int ret;

	if (!p)
		p = &sys;
	memset(info, 0, sizeof(*info));
	info->limit = info->memsw_limit = MEMCG_NO_LIMIT;
	proc = p->proc_cgroup ? p->proc_cgroup : PROC_CGROUP;
	ret = read_proc_cgroup(proc, v1, v2, err, errlen);
	if (ret)
		return ret;

	strcpy(mroot, "/");
	if (v1[0]) {
		info->version = MEMCG_V1;
		if (p->v1_root)
			ret = snprintf(info->root, sizeof(info->root), "%s", p->v1_root) < 0;
		else
			ret = find_mount(p->mountinfo ? p->mountinfo : MOUNTINFO, false, info->root,
					 mroot);
		if (ret) {
			set_err(err, errlen, "%s names a memory cgroup, but the v1 memory "
				"hierarchy is not mounted", proc);
			return -ENOENT;
		}
		ret = under_mount(v1, mroot, info->path, err, errlen);
	} else if (v2[0]) {
		if (p->v2_root)
			snprintf(info->root, sizeof(info->root), "%s", p->v2_root);
		else if (find_mount(p->mountinfo ? p->mountinfo : MOUNTINFO, true, info->root,
				    mroot))
			return 0;	/* no cgroup2 mounted: nothing limits us there */
		/* Without the controller (memory bound to v1), v2 limits nothing. */
		if (!v2_has_memory(info->root))
			return 0;
		info->version = MEMCG_V2;
		ret = under_mount(v2, mroot, info->path, err, errlen);
	}
	if (ret || info->version == MEMCG_NONE)
		return ret;

	/* Up from our cgroup to the hierarchy's root, which is included. */
	strcpy(walk, info->path);
	for (;;) {
		char dir[PATH_MAX], file[PATH_MAX];
		char *slash;
		uint64_t limit;

		if (path_join(dir, sizeof(dir), info->root, strcmp(walk, "/") ? walk : "")) {
			set_err(err, errlen, "%s%s: path too long", info->root, walk);
			return -ENAMETOOLONG;
		}
		ret = dir_limit(info->version, dir, &limit, file, err, errlen);
		if (ret)
			return ret;
		if (limit < info->limit) {
			info->limit = limit;
			strcpy(info->limit_file, file);
		}
		if (limit < ram)
			strcpy(info->top_limited, walk);
		if (info->version == MEMCG_V1) {
			char memsw[PATH_MAX];
			uint64_t v;

			if (path_join(memsw, sizeof(memsw), dir, "/memory.memsw.limit_in_bytes"))
				return -ENAMETOOLONG;
			ret = read_limit(memsw, &v, err, errlen);
			if (ret && ret != -ENOENT)
				return ret;
			if (!ret && v < info->memsw_limit)
				info->memsw_limit = v;
		}
		if (!strcmp(walk, "/"))
			break;
		slash = strrchr(walk, '/');
		if (slash == walk)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	return 0;
}

int memcg_mode_parse(const char *word, enum memcg_mode *mode)
{
	if (!strcmp(word, "move"))
		*mode = MEMCG_MOVE;
	else if (!strcmp(word, "refuse"))
		*mode = MEMCG_REFUSE;
	else if (!strcmp(word, "ignore"))
		*mode = MEMCG_IGNORE;
	else
		return -EINVAL;
	return 0;
}

/* Write our pid to dir/cgroup.procs: moves the whole process. */
static int join(const char *dir)
{
	char path[PATH_MAX];
	FILE *f;
	int ret = 0;

	if (path_join(path, sizeof(path), dir, "/cgroup.procs"))
		return -ENAMETOOLONG;
	f = fopen(path, "we");
	if (!f)
		return -errno;
	if (fprintf(f, "%d\n", (int)getpid()) < 0)
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

static void describe_limit(const struct memcg_info *info, char *buf, size_t len)
{
	snprintf(buf, len, "%s limits this process to %" PRIu64 " MiB", info->limit_file,
		 info->limit >> 20);
}

/* Make a cgroup without a limit beside the highest limited one; move in. */
static int move_out(const struct memcg_info *info, uint64_t ram, char *err, size_t errlen)
{
	char parent[PATH_MAX], dir[PATH_MAX], name[32], file[PATH_MAX], origin[PATH_MAX];
	char *slash;
	uint64_t limit;
	int ret;

	if (!strcmp(info->top_limited, "/")) {
		/* Set above the part of the tree we can see (a namespace): no
		 * cgroup we could make would be out from under it. */
		set_err(err, errlen, "the limit is on the root of the hierarchy as mounted at %s",
			info->root);
		return -EPERM;
	}
	strcpy(parent, info->top_limited);
	slash = strrchr(parent, '/');
	*slash = '\0';			/* "/a" -> "" (the root), "/a/b" -> "/a" */
	snprintf(name, sizeof(name), "/zswapfs-%d", (int)getpid());
	if (path_join(dir, sizeof(dir), info->root, parent) ||
	    path_join(dir + strlen(dir), sizeof(dir) - strlen(dir), "", name) ||
	    path_join(origin, sizeof(origin), info->root,
		      strcmp(info->path, "/") ? info->path : "")) {
		set_err(err, errlen, "%s%s: path too long", info->root, parent);
		return -ENAMETOOLONG;
	}
	/* Left over by an earlier daemon of the same pid: empty, so removable. */
	if (mkdir(dir, 0755) && (errno != EEXIST || rmdir(dir) || mkdir(dir, 0755))) {
		set_err(err, errlen, "cannot make the memory cgroup %s: %s", dir, strerror(errno));
		return -errno;
	}
	/* A new cgroup starts without a limit; check, the hierarchy is not ours. */
	ret = dir_limit(info->version, dir, &limit, file, err, errlen);
	if (!ret && limit < ram) {
		set_err(err, errlen, "the new memory cgroup %s has a limit too (%s)", dir, file);
		ret = -EPERM;
	}
	if (!ret) {
		ret = join(dir);
		if (ret)
			set_err(err, errlen, "cannot move into the memory cgroup %s: %s", dir,
				strerror(-ret));
	}
	if (ret) {
		rmdir(dir);
		return ret;
	}
	strcpy(memcg_state.created, dir);
	strcpy(memcg_state.origin, origin);
	strcpy(memcg_state.root, info->root);
	return 0;
}

int memcg_apply(const struct memcg_paths *p, enum memcg_mode mode, uint64_t ram, char *err,
		size_t errlen)
{
	struct memcg_info *info = calloc(1, sizeof(*info));
	char why[PATH_MAX + 64], msg[512];
	int ret = 0;

	if (!info) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	memcg_state.state = "unknown";
	memcg_state.limit = 0;
	if (memcg_read(p, ram, info, msg, sizeof(msg))) {
		if (mode == MEMCG_IGNORE) {
			log_warn("memcg: %s", msg);
		} else {
			set_err(err, errlen, "cannot tell whether a memory cgroup limits the "
				"daemon: %s (set memcg=ignore to start anyway)", msg);
			ret = -1;
		}
		goto out;
	}
	if (info->limit < ram)
		memcg_state.limit = info->limit;
	if (!info->top_limited[0]) {
		memcg_state.state = "none";
		goto out;
	}
	describe_limit(info, why, sizeof(why));
	switch (mode) {
	case MEMCG_IGNORE:
		memcg_state.state = "ignored";
		log_warn("memory cgroup: %s; its reclaim may swap to this daemon and wait for "
			 "it (memcg=ignore accepts that risk)", why);
		break;
	case MEMCG_REFUSE:
		set_err(err, errlen, "memory cgroup: %s: once it is full, the daemon's own page "
			"faults would swap to the daemon and could wait for it forever; start "
			"it outside any memory limit (contrib/systemd), or set memcg=move or "
			"memcg=ignore", why);
		ret = -1;
		break;
	case MEMCG_MOVE:
		if (move_out(info, ram, msg, sizeof(msg))) {
			set_err(err, errlen, "memory cgroup: %s, and the daemon cannot leave "
				"it: %s; start it outside any memory limit (contrib/systemd), "
				"or set memcg=ignore to accept the risk", why, msg);
			ret = -1;
			break;
		}
		memcg_state.state = "moved";
		log_info("memory cgroup: %s: moved to %s, a cgroup of its own without a limit "
			 "(memcg=move)", why, memcg_state.created);
		break;
	}
out:
	free(info);
	return ret;
}

const char *memcg_made(void)
{
	return memcg_state.created[0] ? memcg_state.created : NULL;
}

int memcg_return(void)
{
	int ret;

	if (!memcg_state.created[0])
		return 0;
	/* Back where we came from, or to the root if that is gone. */
	ret = join(memcg_state.origin);
	if (ret)
		ret = join(memcg_state.root);
	if (ret)
		log_warn("cannot leave the memory cgroup %s: %s", memcg_state.created,
			 strerror(-ret));
	return ret;
}

int memcg_remove(unsigned int wait_ms)
{
	const struct timespec tick = { .tv_nsec = MEMCG_BUSY_TICK_MS * 1000000L };
	unsigned int waited = 0;

	if (!memcg_state.created[0])
		return 0;
	while (rmdir(memcg_state.created)) {
		int err = errno;

		if (err == ENOENT)
			break;		/* removed already (by the helper) */
		if (err != EBUSY || waited >= wait_ms) {
			log_warn("cannot remove the memory cgroup %s: %s", memcg_state.created,
				 strerror(err));
			return -err;
		}
		nanosleep(&tick, NULL);
		waited += MEMCG_BUSY_TICK_MS;
	}
	memcg_state.created[0] = '\0';
	return 0;
}

void memcg_restore(void)
{
	if (!memcg_return())
		memcg_remove(0);
}

void memcg_get_return(char *origin, char *root)
{
	snprintf(origin, PATH_MAX, "%s", memcg_state.origin);
	snprintf(root, PATH_MAX, "%s", memcg_state.root);
}

void memcg_set_return(const char *created, const char *origin, const char *root)
{
	snprintf(memcg_state.created, sizeof(memcg_state.created), "%s", created);
	snprintf(memcg_state.origin, sizeof(memcg_state.origin), "%s", origin);
	snprintf(memcg_state.root, sizeof(memcg_state.root), "%s", root);
}

void memcg_set_report(const struct memcg_report *r)
{
	static const char *const states[] = { "none", "moved", "ignored", "unknown" };

	for (unsigned int i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		if (!strcmp(r->state, states[i]))
			memcg_state.state = states[i];
	memcg_state.limit = r->limit;
	snprintf(memcg_state.created, sizeof(memcg_state.created), "%s", r->cgroup);
}

void memcg_get_report(struct memcg_report *r)
{
	r->state = memcg_state.state;
	r->limit = memcg_state.limit;
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", memcg_state.created);
}
