/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * /proc/PID/mountinfo's fields: what the daemon's memory cgroup lookup
 * (memcg.c), its unmount helper (unmounter.c) and zswapctl (which links no
 * other module of the daemon) all need to read a path from it.  Depends on
 * nothing.
 */
#ifndef ZSWAPFS_MOUNTINFO_H
#define ZSWAPFS_MOUNTINFO_H

/* Undo the kernel's octal escapes in place: mountinfo writes space, tab,
 * newline and backslash as \ooo (\040 for a space). */
void mountinfo_unescape(char *s);

#endif
