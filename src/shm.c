/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "arena.h"
#include "backing.h"
#include "dictgen.h"
#include "shm.h"

#ifndef SHM_NORESERVE
#define SHM_NORESERVE	010000
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

/*
 * The arena never holds more than the pages it stores (at most the file's
 * size, or mem_limit), plus partly used spans (at most 8 pages for each of
 * ~250 classes), the reserve and what compaction has not yet given back: a
 * quarter more and 64 MiB cover them with room.  Only what is used is ever
 * allocated (SHM_NORESERVE); the size only bounds the address range.
 */
static int create(struct shm_region *r, const struct zs_config *cfg, bool lock_required,
		  char *err, size_t errlen);

uint64_t shm_arena_bytes(const struct zs_config *cfg)
{
	uint64_t chunk = arena_shared_chunk_size();
	uint64_t base = cfg->mem_limit && cfg->mem_limit < cfg->size ? cfg->mem_limit : cfg->size;
	uint64_t bytes = base + base / 4 + (UINT64_C(64) << 20);

	return (bytes + chunk - 1) / chunk * chunk;
}

static uint64_t slots_bytes(const struct zs_config *cfg)
{
	uint64_t bytes = cfg->size / STORE_PAGE_SIZE * 16;
	long page = sysconf(_SC_PAGESIZE);

	return (bytes + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
}

/* A locked segment of `bytes`, attached here and marked for removal. */
static int segment_make(uint64_t bytes, bool lock_required, const char *what, int *id,
			void **addr, char *err, size_t errlen)
{
	int saved;

	*id = shmget(IPC_PRIVATE, bytes, IPC_CREAT | IPC_EXCL | SHM_NORESERVE | 0600);
	if (*id < 0) {
		saved = errno;
		snprintf(err, errlen, "cannot make the %s segment (%llu bytes): %s", what,
			 (unsigned long long)bytes, strerror(saved));
		return -saved;
	}
	*addr = shmat(*id, NULL, 0);
	saved = errno;
	/* Removed once the last process detaches: the keeper's exit. */
	shmctl(*id, IPC_RMID, NULL);
	if (*addr == (void *)-1) {
		snprintf(err, errlen, "cannot attach the %s segment: %s", what, strerror(saved));
		return -saved;
	}
	if (shmctl(*id, SHM_LOCK, NULL)) {
		saved = errno;
		if (lock_required) {
			snprintf(err, errlen, "cannot lock the %s segment (SHM_LOCK: %s; it needs "
				 "CAP_IPC_LOCK): its pages could be swapped out to the swap "
				 "file they belong to; set lock_memory=try to accept that",
				 what, strerror(saved));
			shmdt(*addr);
			return -saved;
		}
		fprintf(stderr, "zswapfs: warning: SHM_LOCK of the %s segment: %s: its pages "
			"may be swapped out (lock_memory=try)\n", what, strerror(saved));
	}
	return 0;
}

int shm_create(struct shm_region *r, const struct zs_config *cfg, bool lock_required,
	       bool locked, char *err, size_t errlen)
{
	int ret;

	/* MCL_FUTURE off while the segments are attached (shm.h). */
	if (locked && mlockall(MCL_CURRENT)) {
		ret = -errno;
		snprintf(err, errlen, "mlockall(MCL_CURRENT): %s", strerror(-ret));
		return ret;
	}
	ret = create(r, cfg, lock_required, err, errlen);
	if (locked && mlockall(MCL_FUTURE) && !ret) {
		ret = -errno;
		snprintf(err, errlen, "mlockall(MCL_FUTURE): %s", strerror(-ret));
		shm_destroy(r);
	}
	return ret;
}

/*
 * Map the state memfd r->state_fd into r->state, resident and locked, in
 * the keeper and in every worker alike.  Locked for as long as the process
 * lives: a memfd's page is unevictable only while a locked mapping maps it
 * (the keeper's keeps it so between workers), and every request touches
 * the counters in it.  Unlocked, a full memory cgroup swapped the state out
 * to our own swap file and the request thread that touched it next waited
 * on itself (tests/self_reclaim.sh part 3).  A failure to lock is an error
 * only when `required`.  0 or -errno after a message in err.
 */
static int state_map(struct shm_region *r, bool required, char *err, size_t errlen)
{
	struct shm_state *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_POPULATE, r->state_fd, 0);
	int ret;

	if (s == MAP_FAILED) {
		ret = -errno;
		snprintf(err, errlen, "cannot map the state memfd: %s", strerror(-ret));
		return ret;
	}
	r->state = s;
	if (mlock(s, sizeof(*s)) && required) {
		ret = -errno;
		snprintf(err, errlen, "cannot lock the state memfd: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

static int create(struct shm_region *r, const struct zs_config *cfg, bool lock_required,
		  char *err, size_t errlen)
{
	struct shm_state *s;
	int ret;

	memset(r, 0, sizeof(*r));
	r->slots = r->arena = r->dicts = NULL;
	r->state_fd = memfd_create("zswapfs-state", MFD_CLOEXEC);
	if (r->state_fd < 0 || ftruncate(r->state_fd, sizeof(*s))) {
		ret = -errno;
		snprintf(err, errlen, "cannot make the state memfd: %s", strerror(-ret));
		goto out;
	}
	ret = state_map(r, lock_required, err, errlen);
	if (ret)
		goto out;
	s = r->state;
	s->magic = SHM_MAGIC;
	s->version = SHM_VERSION;
	s->state_bytes = sizeof(*s);
	s->cfg = *cfg;
	s->slots_bytes = slots_bytes(cfg);
	s->arena_bytes = shm_arena_bytes(cfg);
	s->fuse_fd = s->unmount_fd = s->ready_fd = s->keeper_ready_fd = s->backing_fd = -1;
	s->backing_id = -1;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &s->epoch);
	ret = segment_make(s->slots_bytes, lock_required, "slot table", &s->slots_id, &r->slots,
			   err, errlen);
	if (ret)
		goto out;
	ret = segment_make(s->arena_bytes, lock_required, "arena", &s->arena_id, &r->arena,
			   err, errlen);
	if (ret)
		goto out;
	/* Every generation's bytes, so that a new worker can read every page
	 * (dictgen.h): 14 MiB of address space, pages only where written. */
	s->dicts_bytes = DICTGEN_SHARED_BYTES;
	ret = segment_make(s->dicts_bytes, lock_required, "dictionaries", &s->dicts_id,
			   &r->dicts, err, errlen);
	if (ret)
		goto out;
	if (cfg->writeback_backing_file[0]) {
		struct zs_params par;
		long page = sysconf(_SC_PAGESIZE);

		config_params(cfg, &par);
		s->backing_bytes = (backing_shared_bytes(par.backing_max_size) + (uint64_t)page - 1) /
				   (uint64_t)page * (uint64_t)page;
		/* Locked whatever lock_memory says when it holds a key. */
		ret = segment_make(s->backing_bytes, lock_required ||
				   par.backing_cipher != SEAL_NONE, "backing file state",
				   &s->backing_id, &r->backing, err, errlen);
		if (ret)
			goto out;
		if (madvise(r->backing, s->backing_bytes, MADV_DONTDUMP)) {
			ret = -errno;
			snprintf(err, errlen, "MADV_DONTDUMP on the backing file's state: %s",
				 strerror(-ret));
			goto out;
		}
		ret = backing_shared_init(r->backing, s->backing_bytes, par.backing_max_size,
					  par.backing_cipher, err, errlen);
		if (ret)
			goto out;
	}
	return 0;
out:
	shm_destroy(r);
	return ret;
}

void shm_destroy(struct shm_region *r)
{
	if (r->backing && r->backing != (void *)-1) {
		backing_shared_wipe(r->backing);
		shmdt(r->backing);
	}
	if (r->dicts && r->dicts != (void *)-1)
		shmdt(r->dicts);
	if (r->arena && r->arena != (void *)-1)
		shmdt(r->arena);
	if (r->slots && r->slots != (void *)-1)
		shmdt(r->slots);
	if (r->state)
		munmap(r->state, sizeof(*r->state));
	if (r->state_fd >= 0)
		close(r->state_fd);
	memset(r, 0, sizeof(*r));
	r->state_fd = -1;
}

int shm_peek_config(int fd, struct zs_config *cfg, bool *background)
{
	struct shm_state head;

	if (pread(fd, &head, offsetof(struct shm_state, init_req_len), 0) !=
	    (ssize_t)offsetof(struct shm_state, init_req_len))
		return -EIO;
	if (head.magic != SHM_MAGIC || head.version != SHM_VERSION ||
	    head.state_bytes != sizeof(struct shm_state))
		return -EPROTO;
	*cfg = head.cfg;
	*background = !head.foreground && !head.journal;
	return 0;
}

int shm_attach(struct shm_region *r, int fd, bool locked, char *err, size_t errlen)
{
	struct shm_state *s;
	struct shmid_ds ds;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	r->state_fd = fd;
	/* MCL_FUTURE would populate the segments whole: off while attaching
	 * (mlockall(MCL_CURRENT) keeps what is locked locked). */
	if (locked && mlockall(MCL_CURRENT)) {
		ret = -errno;
		snprintf(err, errlen, "mlockall(MCL_CURRENT): %s", strerror(-ret));
		return ret;
	}
	ret = state_map(r, locked, err, errlen);
	if (ret)
		goto out;
	s = r->state;
	if (s->magic != SHM_MAGIC || s->version != SHM_VERSION || s->state_bytes != sizeof(*s)) {
		snprintf(err, errlen, "the keeper's state has layout %u (%u bytes); this binary "
			 "knows layout %u (%zu bytes): a restart needs the same layout",
			 s->version, s->state_bytes, SHM_VERSION, sizeof(*s));
		ret = -EPROTO;
		goto out;
	}
	if (shmctl(s->slots_id, IPC_STAT, &ds) || ds.shm_segsz != s->slots_bytes ||
	    shmctl(s->arena_id, IPC_STAT, &ds) || ds.shm_segsz != s->arena_bytes ||
	    shmctl(s->dicts_id, IPC_STAT, &ds) || ds.shm_segsz != s->dicts_bytes ||
	    s->dicts_bytes != DICTGEN_SHARED_BYTES ||
	    (s->backing_bytes && (shmctl(s->backing_id, IPC_STAT, &ds) ||
				  ds.shm_segsz != s->backing_bytes))) {
		snprintf(err, errlen, "the keeper's segments are not what its state says");
		ret = -EPROTO;
		goto out;
	}
	r->slots = shmat(s->slots_id, NULL, 0);
	r->arena = r->slots == (void *)-1 ? (void *)-1 : shmat(s->arena_id, NULL, 0);
	r->dicts = r->arena == (void *)-1 ? (void *)-1 : shmat(s->dicts_id, NULL, 0);
	if (r->dicts != (void *)-1 && s->backing_bytes)
		r->backing = shmat(s->backing_id, NULL, 0);
	if (r->dicts == (void *)-1 || r->backing == (void *)-1) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the keeper's segments: %s", strerror(-ret));
		goto out;
	}
	/* The key is in it: out of core dumps; and no faults when a segment opens. */
	if (r->backing && (madvise(r->backing, s->backing_bytes, MADV_DONTDUMP) ||
			   (madvise(r->backing, s->backing_bytes, MADV_POPULATE_WRITE) &&
			    errno != EINVAL))) {
		ret = -errno;
		snprintf(err, errlen, "the backing file's state: madvise: %s", strerror(-ret));
		goto out;
	}
	/* The slot table is touched by every request: no faults there.  It
	 * was allocated whole before too (16 bytes a page). */
	if (madvise(r->slots, s->slots_bytes, MADV_POPULATE_WRITE) && errno != EINVAL) {
		ret = -errno;
		snprintf(err, errlen, "cannot populate the slot table: %s", strerror(-ret));
	}
out:
	if (locked && mlockall(MCL_FUTURE) && !ret) {
		ret = -errno;
		snprintf(err, errlen, "mlockall(MCL_FUTURE): %s", strerror(-ret));
	}
	return ret;
}
