/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zswapctl: the mounts (/proc/self/mountinfo) and the loop devices and swap
 * areas on a mount's swap file (/sys/block, /proc/swaps).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"
#include "zswapctl_mounts.h"

void ctl_mounts_free(struct ctl_mounts *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		free(m->path[i]);
	free(m->path);
	free(m->zswapfs);
	memset(m, 0, sizeof(*m));
}

int ctl_mounts_read(struct ctl_mounts *m)
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
		mountinfo_unescape(field[4]);
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
		ctl_mounts_free(m);
	return err;
}

/*
 * Resolve ARG to the mount point it names and check that a zswapfs mount is
 * what sits there (the last mount on a path is the one visible).  On error
 * the message is printed.  Returns 0 or -errno.
 */
int ctl_mount_resolve(const char *arg, char *mnt, size_t len)
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
	err = ctl_mounts_read(&m);
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
	ctl_mounts_free(&m);
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
int ctl_loops_for(const char *file, char devs[][CTL_DEV_LEN], int max)
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

bool ctl_swap_active(const char *dev)
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
