/* SPDX-License-Identifier: GPL-2.0-or-later */
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

#include "codec.h"
#include "config.h"
#include "harden.h"

enum setting_type {
	SETTING_SIZE,		/* bytes, K/M/G suffixes, maybe % of RAM */
	SETTING_INT,
	SETTING_CODEC,		/* a codec name */
	SETTING_BOOL,		/* true/false, yes/no, on/off, 1/0 */
	SETTING_PATH,		/* an absolute path, or "" for none */
	SETTING_CHOICE,		/* one word of a list; stored as its index (int) */
	SETTING_GROUP,		/* a group name or number, or "" for none */
};

struct setting {
	const char *name;	/* "key" or "group.key" */
	enum setting_type type;
	int64_t min, max;	/* inclusive; for sizes in bytes */
	bool pct_of_ram;	/* a size may be given as N% of RAM */
	const char *def;	/* text form, parsed like user input; NULL = computed */
	size_t offset;		/* into struct zs_config */
	const char *help;
};

#define OFF(field) offsetof(struct zs_config, field)

/* The words of each SETTING_CHOICE, NULL-terminated; the index of a word is
 * the value stored. */
static const char *const lock_memory_words[] = { "required", "try", NULL };	/* enum zs_lock_memory */
static const char *const memcg_words[] = { "move", "refuse", "ignore", NULL };	/* enum zs_memcg */

static const struct {
	size_t offset;
	const char *const *words;
} setting_choices[] = {
	{ OFF(lock_memory), lock_memory_words },
	{ OFF(memcg), memcg_words },
};

/* A sanitizer build cannot lock memory at all (harden.h): it is for tests. */
#if HARDEN_CAN_MLOCK
#define LOCK_MEMORY_DEFAULT	"required"
#else
#define LOCK_MEMORY_DEFAULT	"try"
#endif

/* Adding a setting is one line here and a field in struct zs_config. */
static const struct setting settings[] = {
	{ "size", SETTING_SIZE, 4096, INT64_C(1) << 44, true, NULL, OFF(size),
	  "size of the swap file (default: half of RAM, at most 4G)" },
	{ "algorithm", SETTING_CODEC, 0, 0, false, "lz4", OFF(algorithm),
	  "compression algorithm for pages" },
	/* 0 .. lz4's largest acceleration; each codec's own range is checked
	 * once the algorithm is known (config_validate). */
	{ "level", SETTING_INT, 0, 65537, false, "0", OFF(level),
	  "compression level (0: the algorithm's default; lz4: acceleration)" },
	{ "mem_limit", SETTING_SIZE, 0, INT64_C(1) << 44, true, "0", OFF(mem_limit),
	  "most memory the compressed pages may use; 0 for no limit" },
	/* One thread measured fastest on 2 vCPUs: a second one costs a wake-up
	 * per request (contrib/bench/swapbench.sh -d zswapfs,zswapfs-t2). */
	{ "threads", SETTING_INT, 1, 64, false, "1", OFF(threads),
	  "request threads" },
	/* Off by default: it cuts 4 KiB QD1 reads through loop from 40 to 26 us,
	 * but on 2 vCPUs the spinning thread slows the real swap workload
	 * (medians of 4: 16.5 s at 0, 17.9 s at 20, 19.1 s at 100 us;
	 * swapbench.sh -d zswapfs-bp0,zswapfs-bp20,zswapfs-bp100). */
	{ "busy_poll_us", SETTING_INT, 0, 100000, false, "0", OFF(busy_poll_us),
	  "after a request, look for the next one this many microseconds before sleeping" },
	{ "fuse_uring", SETTING_BOOL, 0, 1, false, "true", OFF(fuse_uring),
	  "take requests through FUSE over io_uring where the kernel allows it "
	  "(fuse module parameter enable_uring=Y)" },
	/* FUSE over io_uring loses a request that a dead worker's ring entry
	 * held (issue 11's findings, section 4): restart safety decides. */
	{ "worker_restart", SETTING_BOOL, 0, 1, false, "true", OFF(worker_restart),
	  "keep the mount and every stored page when the worker process dies, and start "
	  "a new one (takes requests through /dev/fuse; FUSE over io_uring only with false)" },
	{ "lock_memory", SETTING_CHOICE, 0, 0, false, LOCK_MEMORY_DEFAULT, OFF(lock_memory),
	  "required: refuse to start unless all the daemon's memory is locked; "
	  "try: warn and go on" },
	{ "stats_group", SETTING_GROUP, 0, 0, false, "", OFF(stats_group),
	  "group (name or number) that may read the stats file of a mount with "
	  "allow_other (\"\": none, and allow_other is refused)" },
	/* Locked memory kept for new pages (reserve.h says how it is sized). */
	{ "reserve", SETTING_SIZE, 0, INT64_C(1) << 40, false, "0", OFF(reserve),
	  "memory kept resident for writes that need new pages; 0: sized from the write rate" },
	{ "memcg", SETTING_CHOICE, 0, 0, false, "move", OFF(memcg),
	  "under a memory cgroup limit: move out of it, refuse to start, or ignore the risk" },

	{ "recompress.enabled", SETTING_BOOL, 0, 1, false, "true", OFF(recompress_enabled),
	  "recompress idle pages in the background" },
	{ "recompress.algorithm", SETTING_CODEC, 0, 0, false, "zstd", OFF(recompress_algorithm),
	  "algorithm idle pages are recompressed with" },
	{ "recompress.level", SETTING_INT, 0, 65537, false, "0", OFF(recompress_level),
	  "its level (0: the algorithm's default)" },
	{ "recompress.idle_age", SETTING_INT, 1, INT64_C(1) << 31, false, "300",
	  OFF(recompress_idle_age), "seconds without a read or write before a page is idle" },
	/* Less than a class step (16 bytes) frees nothing; zstd saves ~560 bytes
	 * a page over lz4 on real memory, so 128 only skips pages that barely
	 * change. */
	{ "recompress.threshold", SETTING_SIZE, 16, 4096, false, "128",
	  OFF(recompress_threshold), "least bytes a page must save to keep the new result" },
	/* zstd-3 costs ~20 us a page: 2000 pages a second is ~4% of one CPU. */
	{ "recompress.rate", SETTING_INT, 0, 1000000, false, "2000", OFF(recompress_rate),
	  "most pages recompressed a second; 0 for no limit" },

	{ "compact.threshold", SETTING_INT, 0, 100, false, "20", OFF(compact_threshold),
	  "compact when this % of the arena's memory holds no object; 0: only on command" },

	{ "writeback.backing_file", SETTING_PATH, 0, 0, false, "", OFF(writeback_backing_file),
	  "file that cold pages are written back to, compressed (\"\": no writeback)" },
	{ "writeback.enabled", SETTING_BOOL, 0, 1, false, "true", OFF(writeback_enabled),
	  "write back on its own (watermarks, idle timer, full arena), not only on command" },
	{ "writeback.max_size", SETTING_SIZE, 0, INT64_C(1) << 44, false, "0",
	  OFF(writeback_max_size), "most bytes of the backing file; 0: the size of the swap file" },
	/* Hours, as zram users run their writeback scripts: a page swapped out
	 * and back within minutes should never cost an SSD write. */
	{ "writeback.idle_age", SETTING_INT, 0, INT64_C(1) << 31, false, "3600",
	  OFF(writeback_idle_age), "seconds untouched before a page is written back; 0: never" },
	{ "writeback.high_watermark", SETTING_INT, 1, 100, false, "90",
	  OFF(writeback_high_watermark), "% of mem_limit above which cold pages are written back" },
	{ "writeback.low_watermark", SETTING_INT, 0, 99, false, "70",
	  OFF(writeback_low_watermark), "% of mem_limit that writeback brings the arena down to" },
	{ "writeback.daily_limit", SETTING_SIZE, 0, INT64_C(1) << 50, false, "0",
	  OFF(writeback_daily_limit), "most bytes written to the backing file a day; 0: no limit" },
	{ "writeback.promote", SETTING_BOOL, 0, 1, false, "false", OFF(writeback_promote),
	  "a read of a written-back page brings it back into memory" },
	/* AES-256-GCM costs ~1.8 us per 4 KiB here (ChaCha20-Poly1305 3.2 us;
	 * without AES-NI 19.7 vs 5.6 us: contrib/bench/sealbench), next to
	 * ~100 us for a backing read through loop. */
	{ "writeback.encrypt", SETTING_BOOL, 0, 1, false, "true", OFF(writeback_encrypt),
	  "seal what is written back (AES-256-GCM or ChaCha20-Poly1305) under a key that "
	  "only the running daemon has" },
	/* Rewriting a segment at half live costs a segment write to free one;
	 * lower shares free more per write but leave more space dead. */
	{ "writeback.compact_threshold", SETTING_INT, 0, 99, false, "50",
	  OFF(writeback_compact_threshold),
	  "rewrite backing segments whose live share is below this %; 0: never" },
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
		*out &= ~(uint64_t)4095;
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

static const char *const *choices_of(const struct setting *s)
{
	size_t i;

	for (i = 0; i < sizeof(setting_choices) / sizeof(setting_choices[0]); i++)
		if (setting_choices[i].offset == s->offset)
			return setting_choices[i].words;
	return NULL;
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
		if (config_parse_size(value, s->pct_of_ram, &size)) {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not a size (use e.g. 512M, 4G%s)",
				 where, s->name, value, s->pct_of_ram ? ", 25%" : "");
			return -EINVAL;
		}
		if (size < (uint64_t)s->min || size > (uint64_t)s->max) {
			snprintf(errbuf, errlen, "%s: %s: %s is out of range (%" PRId64 " to %" PRId64 ")",
				 where, s->name, value, s->min, s->max);
			return -EINVAL;
		}
		if (s->offset == OFF(size) && size % 4096) {
			snprintf(errbuf, errlen, "%s: %s: %s is not a multiple of 4096 (a page)",
				 where, s->name, value);
			return -EINVAL;
		}
		memcpy(field, &size, sizeof(size));
		return 0;
	case SETTING_INT:
		if (parse_int(value, &num) || num < s->min || num > s->max) {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not a whole number from %" PRId64
				 " to %" PRId64, where, s->name, value, s->min, s->max);
			return -EINVAL;
		}
		memcpy(field, &num, sizeof(num));
		return 0;
	case SETTING_BOOL:
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
		snprintf(field, sizeof(cfg->algorithm), "%s", value);
		_Static_assert(sizeof(cfg->algorithm) == sizeof(cfg->recompress_algorithm),
			       "codec fields share one size");
		return 0;
	case SETTING_PATH:
		/* The daemon changes to / when it goes to the background. */
		if (value[0] && value[0] != '/') {
			snprintf(errbuf, errlen, "%s: %s: '%s' is not an absolute path", where,
				 s->name, value);
			return -EINVAL;
		}
		if (strlen(value) >= sizeof(cfg->writeback_backing_file)) {
			snprintf(errbuf, errlen, "%s: %s: the path is too long", where, s->name);
			return -EINVAL;
		}
		strcpy(field, value);
		return 0;
	case SETTING_CHOICE: {
		const char *const *words = choices_of(s);

		for (num = 0; words && words[num]; num++) {
			if (!strcmp(value, words[num])) {
				int choice = (int)num;

				memcpy(field, &choice, sizeof(choice));
				return 0;
			}
		}
		snprintf(errbuf, errlen, "%s: %s: '%s' is not one of: %s", where, s->name, value,
			 words ? choices_text(words) : "");
		return -EINVAL;
	}
	case SETTING_GROUP:
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
	if (s->offset == OFF(level))
		snprintf(cfg->level_origin, sizeof(cfg->level_origin), "%s", where);
	else if (s->offset == OFF(recompress_level))
		snprintf(cfg->recompress_level_origin, sizeof(cfg->recompress_level_origin), "%s",
			 where);
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
	cfg->size &= ~(uint64_t)4095;
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
	if (cfg->writeback_low_watermark >= cfg->writeback_high_watermark) {
		snprintf(errbuf, errlen, "writeback.low_watermark (%" PRId64
			 "%%) must be below writeback.high_watermark (%" PRId64 "%%)",
			 cfg->writeback_low_watermark, cfg->writeback_high_watermark);
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
