/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * page: the one page size.  The swap file is cut into pages of this size
 * (store.h), the arena hands out memory in them (arena.h), the codecs are
 * tuned for them (codec.h), a raw page is the largest backing-file object
 * (backing.h), and settings and control words are checked against it.  It is
 * also the kernel's page on every machine zswapfs runs on (x86-64, and
 * arm64 built for 4 KiB pages): what FUSE counts max_pages in (uring.c) and
 * what the arena locks and gives back with madvise.
 *
 * Each module names the page for its own contract (STORE_PAGE_SIZE, ...);
 * all of them are this one, and nowhere is 4096 written for a page.
 */
#ifndef ZSWAPFS_PAGE_H
#define ZSWAPFS_PAGE_H

#define ZS_PAGE_SHIFT		12
#define ZS_PAGE_SIZE		(1u << ZS_PAGE_SHIFT)

_Static_assert(ZS_PAGE_SIZE == 4096u, "zswapfs is built for 4 KiB pages");

#endif
