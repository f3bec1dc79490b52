/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sysinfo.h>

#include "backing.h"
#include "codec.h"
#include "config.h"
#include "harden.h"
#include "page.h"

enum setting_type {
	SETTING_SIZE,		/* bytes, K/M/G suffixes, maybe % of RAM */
	SETTING_INT,
	SETTING_CODEC,		/* a codec name */
	SETTING_BOOL,		/* true/false, yes/no, on/off, 1/0 */
	SETTING_PATH,		/* an absolute path, or "" for none */
	SETTING_CHOICE,		/* one word of a list; stored as its index (int) */
	SETTING_GROUP,		/* a group name or number, or "" for none */
};

/* Special cases, so that nothing compares field offsets. */
enum setting_flag {
	SETTING_PCT_OF_RAM = 1 << 0,	/* a size may be given as N% of RAM */
	SETTING_WHOLE_PAGES = 1 << 1,	/* a size must be a multiple of a page */
	SETTING_ORIGIN = 1 << 2,	/* keep where it was set, in .origin */
};

struct setting {
	const char *name;	/* "key" or "group.key" */
	enum setting_type type;
	int64_t min, max;	/* inclusive; for sizes in bytes */
	unsigned int flags;	/* enum setting_flag */
	const char *def;	/* text form, parsed like user input; NULL = computed */
	size_t offset, size;	/* the field in struct zs_config: FIELD() */
	size_t origin;		/* SETTING_ORIGIN: a char[] field, ORIGIN() */
	const char *const *words;	/* SETTING_CHOICE: NULL-terminated; the index
					 * of a word is the value stored (int) */
	const char *help;
};

#define FIELD(f)	.offset = offsetof(struct zs_config, f), \
			.size = sizeof(((struct zs_config *)0)->f)
#define ORIGIN(f)	.flags = SETTING_ORIGIN, .origin = offsetof(struct zs_config, f)

/* enum zs_lock_memory */
static const char *const lock_memory_words[] = { "required", "try", NULL };
/* enum zs_memcg */
static const char *const memcg_words[] = { "move", "refuse", "ignore", NULL };
/* enum zs_dict_train */
static const char *const dict_train_words[] = { "auto", "off", NULL };

/* A sanitizer build cannot lock memory at all (harden.h): it is for tests. */
#if HARDEN_CAN_MLOCK
#define LOCK_MEMORY_DEFAULT	"required"
#else
#define LOCK_MEMORY_DEFAULT	"try"
#endif

/*
 * Adding a setting is one entry here (name, type, field, range, default,
 * help) and a field in struct zs_config; config_params() hands it on to the
 * module that uses it, and man/zswapfs.conf.5 documents it (tests/docs.sh).
 */
static const struct setting settings[] = {
	{ .name = "size", .type = SETTING_SIZE, FIELD(size),
	  .min = ZS_PAGE_SIZE, .max = INT64_C(1) << 44,
	  .flags = SETTING_PCT_OF_RAM | SETTING_WHOLE_PAGES,
	  .help = "size of the swap file (default: half of RAM, at most 4G)" },
	{ .name = "algorithm", .type = SETTING_CODEC, FIELD(algorithm),
	  .def = "lz4",
	  .help = "compression algorithm for pages" },
	/* 0 .. lz4's largest acceleration; each codec's own range is checked
	 * once the algorithm is known (config_validate). */
	{ .name = "level", .type = SETTING_INT, FIELD(level), ORIGIN(level_origin),
	  .min = 0, .max = 65537, .def = "0",
	  .help = "compression level (0: the algorithm's default; lz4: acceleration)" },
	{ .name = "mem_limit", .type = SETTING_SIZE, FIELD(mem_limit),
	  .min = 0, .max = INT64_C(1) << 44, .flags = SETTING_PCT_OF_RAM, .def = "0",
	  .help = "most memory the compressed pages may use; 0 for no limit" },
	/* One thread measured fastest on 2 vCPUs: a second one costs a wake-up
	 * per request (contrib/bench/swapbench.sh -d zswapfs,zswapfs-t2). */
	{ .name = "threads", .type = SETTING_INT, FIELD(threads),
	  .min = 1, .max = 64, .def = "1",
	  .help = "request threads" },
	/* Off by default: it cuts 4 KiB QD1 reads through loop from 40 to 26 us,
	 * but on 2 vCPUs the spinning thread slows the real swap workload
	 * (medians of 4: 16.5 s at 0, 17.9 s at 20, 19.1 s at 100 us;
	 * swapbench.sh -d zswapfs-bp0,zswapfs-bp20,zswapfs-bp100). */
	/* Requests wait on the run queue too: on 2 busy vCPUs under one fio
	 * writer and one reader, the request thread waited 4.1-4.9 s for a
	 * CPU in 10 s (/proc/TID/schedstat), ~9 us per wake-up.  Default 0:
	 * -10 did not win in the same run (contrib/bench/README, rwbench).
	 * Set once at start, before privileges are dropped (a negative value
	 * needs CAP_SYS_NICE). */
	{ .name = "request_nice", .type = SETTING_INT, FIELD(request_nice),
	  .min = -20, .max = 19, .def = "0",
	  .help = "nice value of the request threads (negative: before other tasks)" },
	/* How soon a woken request thread runs (EEVDF, Linux 6.12+): see
	 * transport_set_slice and contrib/bench/README (rwbench) for what it
	 * gave.  100 us is the kernel's smallest. */
	{ .name = "request_slice_us", .type = SETTING_INT, FIELD(request_slice_us),
	  .min = 0, .max = 100000, .def = "0",
	  .help = "time slice of the request threads in microseconds, 100 to 100000 "
		  "(0: the kernel's); a short one runs a woken request sooner" },
	{ .name = "busy_poll_us", .type = SETTING_INT, FIELD(busy_poll_us),
	  .min = 0, .max = 100000, .def = "0",
	  .help = "after a request, look for the next one this many microseconds before sleeping" },
	{ .name = "fuse_uring", .type = SETTING_BOOL, FIELD(fuse_uring),
	  .def = "true",
	  .help = "take requests through FUSE over io_uring where the kernel allows it "
		  "(fuse module parameter enable_uring=Y)" },
	/* FUSE over io_uring loses a request that a dead worker's ring entry
	 * held (issue 11's findings, section 4): restart safety decides. */
	{ .name = "worker_restart", .type = SETTING_BOOL, FIELD(worker_restart),
	  .def = "true",
	  .help = "keep the mount and every stored page when the worker process dies, and start "
		  "a new one (takes requests through /dev/fuse; FUSE over io_uring only with false)" },
	{ .name = "lock_memory", .type = SETTING_CHOICE, FIELD(lock_memory), .words = lock_memory_words,
	  .def = LOCK_MEMORY_DEFAULT,
	  .help = "required: refuse to start unless all the daemon's memory is locked; "
		  "try: warn and go on" },
	{ .name = "stats_group", .type = SETTING_GROUP, FIELD(stats_group),
	  .def = "",
	  .help = "group (name or number) that may read the stats file of a mount with "
		  "allow_other (\"\": none, and allow_other is refused)" },
	/* Locked memory kept for new pages (reserve.h says how it is sized). */
	{ .name = "reserve", .type = SETTING_SIZE, FIELD(reserve),
	  .min = 0, .max = INT64_C(1) << 40, .def = "0",
	  .help = "memory kept resident for writes that need new pages; 0: sized from the write rate" },
	{ .name = "memcg", .type = SETTING_CHOICE, FIELD(memcg), .words = memcg_words,
	  .def = "move",
	  .help = "under a memory cgroup limit: move out of it, refuse to start, or ignore the risk" },

	/* Kernel zram's `algorithm_params dict=PATH`: a zstd --train file or raw
	 * content.  lz4 +6.2 %, zstd-3 +1.7 % on held-out real pages
	 * (contrib/bench/dictbench.c). */
	{ .name = "dict", .type = SETTING_PATH, FIELD(dict), .def = "",
	  .help = "dictionary file for the compression algorithm (\"\": none, or trained)" },
	/* Not dict.train: a config file cannot have `dict` both as a path and
	 * as a group. */
	{ .name = "dict_train", .type = SETTING_CHOICE, FIELD(dict_train), .words = dict_train_words,
	  .def = "auto",
	  .help = "auto: train dictionaries from the stored pages (when there is none, and again "
		  "when the ratio of new pages drifts); off: only on the train command" },

	{ .name = "recompress.enabled", .type = SETTING_BOOL, FIELD(recompress_enabled),
	  .def = "true",
	  .help = "recompress idle pages in the background" },
	{ .name = "recompress.algorithm", .type = SETTING_CODEC, FIELD(recompress_algorithm),
	  .def = "zstd",
	  .help = "algorithm idle pages are recompressed with" },
	{ .name = "recompress.level", .type = SETTING_INT, FIELD(recompress_level),
	  ORIGIN(recompress_level_origin), .min = 0, .max = 65537, .def = "0",
	  .help = "its level (0: the algorithm's default)" },
	{ .name = "recompress.dict", .type = SETTING_PATH, FIELD(recompress_dict), .def = "",
	  .help = "dictionary file for the recompression algorithm (\"\": none, or trained)" },
	{ .name = "recompress.idle_age", .type = SETTING_INT, FIELD(recompress_idle_age),
	  .min = 1, .max = INT64_C(1) << 31, .def = "300",
	  .help = "seconds without a read or write before a page is idle" },
	/* Less than a class step (16 bytes) frees nothing; zstd saves ~560 bytes
	 * a page over lz4 on real memory, so 128 only skips pages that barely
	 * change. */
	{ .name = "recompress.threshold", .type = SETTING_SIZE, FIELD(recompress_threshold),
	  .min = 16, .max = ZS_PAGE_SIZE, .def = "128",
	  .help = "least bytes a page must save to keep the new result" },
	/* zstd-3 costs ~20 us a page: 2000 pages a second is ~4% of one CPU. */
	{ .name = "recompress.rate", .type = SETTING_INT, FIELD(recompress_rate),
	  .min = 0, .max = 1000000, .def = "2000",
	  .help = "most pages recompressed a second; 0 for no limit" },

	{ .name = "compact.threshold", .type = SETTING_INT, FIELD(compact_threshold),
	  .min = 0, .max = 100, .def = "20",
	  .help = "compact when this % of the arena's memory holds no object; 0: only on command" },

	{ .name = "writeback.backing_file", .type = SETTING_PATH, FIELD(writeback_backing_file),
	  .def = "",
	  .help = "file that cold pages are written back to, compressed (\"\": no writeback)" },
	{ .name = "writeback.enabled", .type = SETTING_BOOL, FIELD(writeback_enabled),
	  .def = "true",
	  .help = "write back on its own (watermarks, idle timer, full arena), not only on command" },
	{ .name = "writeback.max_size", .type = SETTING_SIZE, FIELD(writeback_max_size),
	  .min = 0, .max = INT64_C(1) << 44, .def = "0",
	  .help = "most bytes of the backing file; 0: the size of the swap file" },
	/* Hours, as zram users run their writeback scripts: a page swapped out
	 * and back within minutes should never cost an SSD write. */
	{ .name = "writeback.idle_age", .type = SETTING_INT, FIELD(writeback_idle_age),
	  .min = 0, .max = INT64_C(1) << 31, .def = "3600",
	  .help = "seconds untouched before a page is written back; 0: never" },
	{ .name = "writeback.high_watermark", .type = SETTING_INT, FIELD(writeback_high_watermark),
	  .min = 1, .max = 100, .def = "90",
	  .help = "% of mem_limit above which cold pages are written back" },
	{ .name = "writeback.low_watermark", .type = SETTING_INT, FIELD(writeback_low_watermark),
	  .min = 0, .max = 99, .def = "70",
	  .help = "% of mem_limit that writeback brings the arena down to" },
	{ .name = "writeback.daily_limit", .type = SETTING_SIZE, FIELD(writeback_daily_limit),
	  .min = 0, .max = INT64_C(1) << 50, .def = "0",
	  .help = "most bytes written to the backing file a day; 0: no limit" },
	{ .name = "writeback.promote", .type = SETTING_BOOL, FIELD(writeback_promote),
	  .def = "false",
	  .help = "a read of a written-back page brings it back into memory" },
	/* AES-256-GCM costs ~1.8 us per 4 KiB here (ChaCha20-Poly1305 3.2 us;
	 * without AES-NI 19.7 vs 5.6 us: contrib/bench/sealbench), next to
	 * ~100 us for a backing read through loop. */
	{ .name = "writeback.encrypt", .type = SETTING_BOOL, FIELD(writeback_encrypt),
	  .def = "true",
	  .help = "seal what is written back (AES-256-GCM or ChaCha20-Poly1305) under a key that "
		  "only the running daemon has" },
	/* Rewriting a segment at half live costs a segment write to free one;
	 * lower shares free more per write but leave more space dead. */
	{ .name = "writeback.compact_threshold", .type = SETTING_INT, FIELD(writeback_compact_threshold),
	  .min = 0, .max = 99, .def = "50",
	  .help = "rewrite backing segments whose live share is below this %; 0: never" },
};

#define NR_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static const struct setting *setting_find(const char *name)
{
	size_t i;

	for (i = 0; i < NR_SETTINGS; i++)
		if (!strcmp(settings[i].name, name))
			return &settings[i];
	return NULL;
}

bool config_has_key(const char *name)
{
	return setting_find(name) != NULL;
}

static uint64_t ram_bytes(void)
{
	struct sysinfo si;

	if (sysinfo(&si))
		return 0;
	return (uint64_t)si.totalram * si.mem_unit;
}

int config_parse_size(const char *text, bool pct_ok, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	while (isspace((unsigned char)*text))
		text++;
	if (!isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == '%') {
		if (!pct_ok || end[1] || v == 0 || v > 100)
			return -EINVAL;
		*out = ram_bytes() / 100 * v;
		*out &= ~(uint64_t)(ZS_PAGE_SIZE - 1);
		return 0;
	}
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	}
	if (shift && (*end == 'B' || *end == 'b'))
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_int(const char *text, int64_t *out)
{
	long long v;
	char *end;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || end == text || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "required, try" */
static const char *choices_text(const char *const *words)
{
	static char text[128];
	size_t len = 0;
	int i;

	text[0] = '\0';
	for (i = 0; words[i] && len < sizeof(text); i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s", i ? ", " : "",
					words[i]);
	return text;
}

/*
 * A group by name (looked up now, through NSS) or by number (any number: a
 * group need not be in /etc/group to own a file).  Numbers are checked
 * before names, as chown(1) does not: a group named "100" is unusual, a
 * number given for a group is not.
 */
static int parse_group(const struct setting *s, struct zs_group_setting *g, const char *value,
		       const char *where, char *errbuf, size_t errlen)
{
	struct group grp, *found = NULL;
	char buf[16384];
	int64_t num;
	int err;

	if (strlen(value) >= sizeof(g->name)) {
		snprintf(errbuf, errlen, "%s: %s: the group name is too long", where, s->name);
		return -EINVAL;
	}
	if (!value[0]) {
		g->name[0] = '\0';
		g->gid = -1;
		return 0;
	}
	if (isdigit((unsigned char)value[0])) {
		/* (gid_t)-1 means "no change" to chown(2): not a group */
		if (parse_int(value, &num) || num < 0 || num >= (int64_t)UINT32_MAX) {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not a group number (0 to %u)",
				 where, s->name, value, UINT32_MAX - 1);
			return -EINVAL;
		}
	} else {
		err = getgrnam_r(value, &grp, buf, sizeof(buf), &found);
		if (err || !found) {
			snprintf(errbuf, errlen, "%s: %s: no group named '%s'%s%s", where, s->name,
				 value, err ? ": " : "", err ? strerror(err) : "");
			return -EINVAL;
		}
		num = found->gr_gid;
	}
	strcpy(g->name, value);
	g->gid = num;
	return 0;
}

static int setting_apply(const struct setting *s, struct zs_config *cfg, const char *value,
			 const char *where, char *errbuf, size_t errlen)
{
	char *field = (char *)cfg + s->offset;
	uint64_t size;
	int64_t num;

	switch (s->type) {
	case SETTING_SIZE:
		if (config_parse_size(value, s->flags & SETTING_PCT_OF_RAM, &size)) {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not a size (use e.g. 512M, 4G%s)",
				 where, s->name, value, s->flags & SETTING_PCT_OF_RAM ? ", 25%" : "");
			return -EINVAL;
		}
		if (size < (uint64_t)s->min || size > (uint64_t)s->max) {
			snprintf(errbuf, errlen, "%s: %s: %s is out of range (%" PRId64 " to %" PRId64 ")",
				 where, s->name, value, s->min, s->max);
			return -EINVAL;
		}
		if ((s->flags & SETTING_WHOLE_PAGES) && size % ZS_PAGE_SIZE) {
			snprintf(errbuf, errlen, "%s: %s: %s is not a multiple of %u (a page)",
				 where, s->name, value, ZS_PAGE_SIZE);
			return -EINVAL;
		}
		assert(s->size == sizeof(size));
		memcpy(field, &size, sizeof(size));
		return 0;
	case SETTING_INT:
		if (parse_int(value, &num) || num < s->min || num > s->max) {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not a whole number from %" PRId64
				 " to %" PRId64, where, s->name, value, s->min, s->max);
			return -EINVAL;
		}
		assert(s->size == sizeof(num));
		memcpy(field, &num, sizeof(num));
		return 0;
	case SETTING_BOOL:
		assert(s->size == sizeof(bool));
		if (!strcasecmp(value, "true") || !strcasecmp(value, "yes") ||
		    !strcasecmp(value, "on") || !strcmp(value, "1")) {
			*(bool *)field = true;
		} else if (!strcasecmp(value, "false") || !strcasecmp(value, "no") ||
			   !strcasecmp(value, "off") || !strcmp(value, "0")) {
			*(bool *)field = false;
		} else {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not true or false", where,
				 s->name, value);
			return -EINVAL;
		}
		return 0;
	case SETTING_CODEC:
		if (!codec_find(value)) {
			snprintf(errbuf, errlen, "%s: %s: unknown algorithm '%s' (known: %s)",
				 where, s->name, value, codec_names());
			return -EINVAL;
		}
		snprintf(field, s->size, "%s", value);
		return 0;
	case SETTING_PATH:
		/* The daemon changes to / when it goes to the background. */
		if (value[0] && value[0] != '/') {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not an absolute path", where,
				 s->name, value);
			return -EINVAL;
		}
		if (strlen(value) >= s->size) {
			snprintf(errbuf, errlen, "%s: %s: the path is too long", where, s->name);
			return -EINVAL;
		}
		strcpy(field, value);
		return 0;
	case SETTING_CHOICE: {
		const char *const *words = s->words;

		for (num = 0; words && words[num]; num++) {
			if (!strcmp(value, words[num])) {
				int choice = (int)num;

				assert(s->size == sizeof(choice));
				memcpy(field, &choice, sizeof(choice));
				return 0;
			}
		}
		snprintf(errbuf, errlen, "%s: %s: '%s' is not one of: %s", where, s->name, value,
			 words ? choices_text(words) : "");
		return -EINVAL;
	}
	case SETTING_GROUP:
		assert(s->size == sizeof(struct zs_group_setting));
		return parse_group(s, (struct zs_group_setting *)(void *)field, value, where,
				   errbuf, errlen);
	}
	return -EINVAL;
}

int config_set(struct zs_config *cfg, const char *name, const char *value, const char *where,
	       char *errbuf, size_t errlen)
{
	const struct setting *s = setting_find(name);

	if (!s) {
		snprintf(errbuf, errlen, "%s: unknown setting '%s'", where, name);
		return -EINVAL;
	}
	if (setting_apply(s, cfg, value, where, errbuf, errlen))
		return -EINVAL;
	if (s->flags & SETTING_ORIGIN)
		snprintf((char *)cfg + s->origin, sizeof(cfg->level_origin), "%s", where);
	_Static_assert(sizeof(cfg->level_origin) == sizeof(cfg->recompress_level_origin),
		       "origin fields share one size");
	return 0;
}

void config_defaults(struct zs_config *cfg)
{
	uint64_t half = ram_bytes() / 2;
	char err[128];
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < NR_SETTINGS; i++)
		if (settings[i].def)
			setting_apply(&settings[i], cfg, settings[i].def, "default", err,
				      sizeof(err));
	/* As zram-generator: half of RAM, capped at 4 GiB. */
	cfg->size = half < (UINT64_C(4) << 30) ? half : (UINT64_C(4) << 30);
	cfg->size &= ~(uint64_t)(ZS_PAGE_SIZE - 1);
	if (!cfg->size)
		cfg->size = UINT64_C(1) << 30;
}

/* The value of a libconfig setting as text, so that the file and mount
 * options go through the same parser.  -E2BIG when it does not fit: cut
 * short, a path would name another file. */
static int setting_text(const config_setting_t *cs, char *buf, size_t len)
{
	int n;

	switch (config_setting_type(cs)) {
	case CONFIG_TYPE_INT:
		n = snprintf(buf, len, "%d", config_setting_get_int(cs));
		break;
	case CONFIG_TYPE_INT64:
		n = snprintf(buf, len, "%lld", config_setting_get_int64(cs));
		break;
	case CONFIG_TYPE_STRING:
		n = snprintf(buf, len, "%s", config_setting_get_string(cs));
		break;
	case CONFIG_TYPE_BOOL:
		n = snprintf(buf, len, "%s", config_setting_get_bool(cs) ? "true" : "false");
		break;
	default:
		return -EINVAL;
	}
	return n >= 0 && (size_t)n < len ? 0 : -E2BIG;
}

static int load_group(struct zs_config *cfg, const config_setting_t *group, const char *prefix,
		      const char *path, char *errbuf, size_t errlen)
{
	int i, n = config_setting_length(group);

	for (i = 0; i < n; i++) {
		const config_setting_t *cs = config_setting_get_elem(group, (unsigned int)i);
		char name[128], where[512], value[1024];
		int err;

		snprintf(name, sizeof(name), "%s%s", prefix, config_setting_name(cs));
		snprintf(where, sizeof(where), "%s:%d", path, config_setting_source_line(cs));
		if (config_setting_type(cs) == CONFIG_TYPE_GROUP) {
			char sub[160];

			snprintf(sub, sizeof(sub), "%s.", name);
			err = load_group(cfg, cs, sub, path, errbuf, errlen);
		} else if ((err = setting_text(cs, value, sizeof(value)))) {
			snprintf(errbuf, errlen, "%s: %s: %s", where, name,
				 err == -E2BIG ? "the value is too long" :
						 "expected a number or a string");
			err = -EINVAL;
		} else {
			err = config_set(cfg, name, value, where, errbuf, errlen);
		}
		if (err)
			return err;
	}
	return 0;
}

int config_load_file(struct zs_config *cfg, const char *path, char *errbuf, size_t errlen)
{
	struct zs_config tmp = *cfg;
	config_t lc;
	int err;

	config_init(&lc);
	if (!config_read_file(&lc, path)) {
		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO) {
			snprintf(errbuf, errlen, "%s: cannot read the file", path);
			err = -ENOENT;
		} else {
			snprintf(errbuf, errlen, "%s:%d: %s", path, config_error_line(&lc),
				 config_error_text(&lc));
			err = -EINVAL;
		}
		goto out;
	}
	err = load_group(&tmp, config_root_setting(&lc), "", path, errbuf, errlen);
	if (!err)
		*cfg = tmp;
out:
	config_destroy(&lc);
	return err;
}

/* A level is checked once the algorithm is known, wherever either was set;
 * the message names where the level came from. */
static int validate_level(const char *key, const char *origin, const char *algorithm,
			  int64_t level, char *errbuf, size_t errlen)
{
	const struct codec_ops *ops = codec_find(algorithm);

	if (level && (level < ops->min_level || level > ops->max_level)) {
		snprintf(errbuf, errlen, "%s: %s: %" PRId64 " is out of range for %s (%d to %d)",
			 origin[0] ? origin : "default", key, level, ops->name, ops->min_level,
			 ops->max_level);
		return -EINVAL;
	}
	return 0;
}

int config_validate(const struct zs_config *cfg, char *errbuf, size_t errlen)
{
	if (validate_level("level", cfg->level_origin, cfg->algorithm, cfg->level, errbuf,
			   errlen) ||
	    validate_level("recompress.level", cfg->recompress_level_origin,
			   cfg->recompress_algorithm, cfg->recompress_level, errbuf, errlen))
		return -EINVAL;
	if (cfg->dict[0] && !codec_has_dict(codec_find(cfg->algorithm))) {
		snprintf(errbuf, errlen, "dict: %s takes no dictionary (lz4 and zstd do)",
			 cfg->algorithm);
		return -EINVAL;
	}
	if (cfg->recompress_dict[0] && !codec_has_dict(codec_find(cfg->recompress_algorithm))) {
		snprintf(errbuf, errlen, "recompress.dict: %s takes no dictionary (lz4 and zstd do)",
			 cfg->recompress_algorithm);
		return -EINVAL;
	}
	/* A slot records a generation and a codec, not which setting's file:
	 * one codec, one dictionary. */
	if (cfg->recompress_dict[0] && !strcmp(cfg->algorithm, cfg->recompress_algorithm)) {
		snprintf(errbuf, errlen, "recompress.dict: the recompression algorithm is %s, as "
			 "for new pages: it uses `dict`", cfg->algorithm);
		return -EINVAL;
	}
	if (cfg->writeback_low_watermark >= cfg->writeback_high_watermark) {
		snprintf(errbuf, errlen, "writeback.low_watermark (%" PRId64
			 "%%) must be below writeback.high_watermark (%" PRId64 "%%)",
			 cfg->writeback_low_watermark, cfg->writeback_high_watermark);
		return -EINVAL;
	}
	/* The kernel's smallest slice; 0 keeps its default. */
	if (cfg->request_slice_us && cfg->request_slice_us < 100) {
		snprintf(errbuf, errlen, "request_slice_us: %" PRId64 " is below the kernel's "
			 "smallest slice, 100 (0: the kernel's default)", cfg->request_slice_us);
		return -EINVAL;
	}
	if (cfg->writeback_max_size && cfg->writeback_max_size < (UINT64_C(1) << 20)) {
		snprintf(errbuf, errlen, "writeback.max_size: %" PRIu64
			 " bytes is less than one 1 MiB segment", cfg->writeback_max_size);
		return -EINVAL;
	}
	return 0;
}

void config_print_help(FILE *out)
{
	size_t i;

	fprintf(out, "Settings (config file keys; also -o key=value):\n");
	for (i = 0; i < NR_SETTINGS; i++)
		fprintf(out, "    %-28s %s (default: %s)\n", settings[i].name, settings[i].help,
			!settings[i].def ? "see text" : settings[i].def[0] ? settings[i].def : "none");
}

void config_params(const struct zs_config *cfg, struct zs_params *p)
{
	static const enum memcg_mode memcg_modes[] = {
		[ZS_MEMCG_MOVE] = MEMCG_MOVE,
		[ZS_MEMCG_REFUSE] = MEMCG_REFUSE,
		[ZS_MEMCG_IGNORE] = MEMCG_IGNORE,
	};
	uint64_t max = cfg->writeback_max_size ? cfg->writeback_max_size : cfg->size;

	memset(p, 0, sizeof(*p));
	p->store = (struct store_params){
		.size = cfg->size,
		.codec = codec_find(cfg->algorithm),
		.level = (int)cfg->level,
		.mem_limit = cfg->mem_limit,
		.recomp_codec = codec_find(cfg->recompress_algorithm),
		.recomp_level = (int)cfg->recompress_level,
		.promote = cfg->writeback_promote,
	};
	p->policy = (struct policy_config){
		.recompress = cfg->recompress_enabled,
		.idle_age = (uint32_t)cfg->recompress_idle_age,
		.threshold = (size_t)cfg->recompress_threshold,
		.rate = (uint32_t)cfg->recompress_rate,
		.compact_threshold = (unsigned int)cfg->compact_threshold,
		.wb_auto = cfg->writeback_enabled,
		.wb_idle_age = (uint32_t)cfg->writeback_idle_age,
		.wb = {
			.daily_limit = cfg->writeback_daily_limit,
			.compact_threshold = (unsigned int)cfg->writeback_compact_threshold,
			.high_watermark = (unsigned int)cfg->writeback_high_watermark,
			.low_watermark = (unsigned int)cfg->writeback_low_watermark,
		},
	};
	p->reserve.fixed_bytes = cfg->reserve;
	p->dicttrain.auto_train = cfg->dict_train == ZS_DICT_TRAIN_AUTO;
	p->memcg = memcg_modes[cfg->memcg];
	p->lock_memory_required = cfg->lock_memory == ZS_LOCK_REQUIRED;
	p->threads = (unsigned int)cfg->threads;
	p->busy_poll_us = (unsigned int)cfg->busy_poll_us;
	p->request_nice = (int)cfg->request_nice;
	p->request_slice_us = (unsigned int)cfg->request_slice_us;
	p->fuse_uring = cfg->fuse_uring;
	p->worker_restart = cfg->worker_restart;
	p->stats_gid = cfg->stats_group.gid;
	p->backing_path = cfg->writeback_backing_file[0] ? cfg->writeback_backing_file : NULL;
	p->backing_max_size = max < BACKING_SEG_SIZE ? BACKING_SEG_SIZE : max;
	p->backing_cipher = cfg->writeback_encrypt ? SEAL_AUTO : SEAL_NONE;
}
