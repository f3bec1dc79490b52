/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "control.h"
#include "dicttrain.h"
#include "page.h"
#include "policy.h"

#define CONTROL_MAX_ARGS	8


/* "key=value" with key `key`: the value, else NULL. */
static const char *arg_value(const char *arg, const char *key)
{
	size_t n = strlen(key);

	return !strncmp(arg, key, n) && arg[n] == '=' ? arg + n + 1 : NULL;
}

static int parse_u64(const char *text, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * The words that select pages, for recompress's type= and writeback's
 * first word; "all" only where allow_all (recompress takes every page when
 * no type is given, and has no word for it).
 */
static int parse_select(const char *word, bool allow_all, enum policy_select *out)
{
	static const struct {
		const char *name;
		enum policy_select select;
	} words[] = {
		{ "idle", POLICY_SELECT_IDLE },
		{ "huge", POLICY_SELECT_HUGE },
		{ "huge_idle", POLICY_SELECT_HUGE_IDLE },
		{ "all", POLICY_SELECT_ALL },
	};
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcmp(word, words[i].name)) {
			if (words[i].select == POLICY_SELECT_ALL && !allow_all)
				break;
			*out = words[i].select;
			return 0;
		}
	return -EINVAL;
}

/* `restart`: the worker's restart hook, when a keeper is there to act on it. */
static int (*restart_hook)(void *arg, bool keeper);
static void *restart_arg;

void control_set_restart_hook(int (*fn)(void *arg, bool keeper), void *arg)
{
	restart_arg = arg;
	restart_hook = fn;
}

static int parse_compact(int argc, char **argv, struct control_req *req)
{
	req->op = CONTROL_COMPACT;
	return 0;
}

/* idle all | idle SECONDS */
static int parse_idle(int argc, char **argv, struct control_req *req)
{
	uint64_t secs;

	req->op = CONTROL_IDLE;
	if (!strcmp(argv[0], "all")) {
		req->idle_all = true;
		return 0;
	}
	if (parse_u64(argv[0], UINT32_MAX, &secs))
		return -EINVAL;
	req->idle_secs = (uint32_t)secs;
	return 0;
}

/* recompress [type=idle|huge|huge_idle] [threshold=BYTES] [max_pages=N] [rate=RATE] */
static int parse_recompress(int argc, char **argv, struct control_req *req)
{
	bool seen_type = false, seen_threshold = false, seen_max = false, seen_rate = false;
	const char *v;
	int i;

	req->op = CONTROL_RECOMPRESS;
	req->recomp.select = POLICY_SELECT_ALL;
	for (i = 0; i < argc; i++) {
		if ((v = arg_value(argv[i], "type")) && !seen_type) {
			if (parse_select(v, false, &req->recomp.select))
				return -EINVAL;
			seen_type = true;
		} else if ((v = arg_value(argv[i], "threshold")) && !seen_threshold) {
			uint64_t bytes;

			if (config_parse_size(v, false, &bytes) || bytes == 0 || bytes >= ZS_PAGE_SIZE)
				return -EINVAL;
			req->recomp.threshold = (size_t)bytes;
			seen_threshold = true;
		} else if ((v = arg_value(argv[i], "max_pages")) && !seen_max) {
			if (parse_u64(v, UINT64_MAX, &req->recomp.max_pages) ||
			    req->recomp.max_pages == 0)
				return -EINVAL;
			seen_max = true;
		} else if ((v = arg_value(argv[i], "rate")) && !seen_rate) {
			uint64_t rate;

			/* recompress.rate's range; 0 would mean no limit, the default */
			if (parse_u64(v, POLICY_RATE_MAX, &rate) || rate == 0)
				return -EINVAL;
			req->recomp.rate = (uint32_t)rate;
			seen_rate = true;
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

/* writeback idle|huge|huge_idle|all [max_pages=N] */
static int parse_writeback(int argc, char **argv, struct control_req *req)
{
	const char *v;

	req->op = CONTROL_WRITEBACK;
	if (parse_select(argv[0], true, &req->wb.select))
		return -EINVAL;
	if (argc == 2) {
		v = arg_value(argv[1], "max_pages");
		if (!v || parse_u64(v, UINT64_MAX, &req->wb.max_pages) || req->wb.max_pages == 0)
			return -EINVAL;
	}
	return 0;
}

/* train */
static int parse_train(int argc, char **argv, struct control_req *req)
{
	(void)argc;
	(void)argv;
	req->op = CONTROL_TRAIN;
	return 0;
}

/* dict save PATH: an absolute path (the daemon's directory is /). */
static int parse_dict(int argc, char **argv, struct control_req *req)
{
	(void)argc;
	if (strcmp(argv[0], "save") || argv[1][0] != '/' ||
	    strlen(argv[1]) >= sizeof(req->dict_path))
		return -EINVAL;
	req->op = CONTROL_DICT;
	strcpy(req->dict_path, argv[1]);
	return 0;
}

/* restart: a new worker from the binary on disk; restart keeper: the keeper
 * executes it in its own place (keeper.h) */
static int parse_restart(int argc, char **argv, struct control_req *req)
{
	if (argc == 1 && strcmp(argv[0], "keeper"))
		return -EINVAL;
	req->op = CONTROL_RESTART;
	req->restart_keeper = argc == 1;
	return 0;
}

/*
 * Each command's handler, parse_<name>, found through control_cmds.h's
 * table: fill *req from the words after the name (as many as the table
 * allows); touch nothing else.  0 or -EINVAL.
 */
static int (*const parsers[CONTROL_OP_COUNT])(int argc, char **argv, struct control_req *req) = {
#define CONTROL_PARSER(ID, name, min_args, max_args, args) [CONTROL_##ID] = parse_##name,
	CONTROL_CMDS(CONTROL_PARSER)
#undef CONTROL_PARSER
};

int control_parse(const char *text, size_t len, struct control_req *out)
{
	char line[CONTROL_MAX_LEN + 1], *argv[CONTROL_MAX_ARGS + 1], *save, *word;
	struct control_req req;
	enum control_op op;
	int argc = 0, err;

	if (len > CONTROL_MAX_LEN || memchr(text, '\0', len))
		return -EINVAL;
	memcpy(line, text, len);
	line[len] = '\0';
	/* One command per write; a trailing newline (echo) is fine, an
	 * embedded one is not. */
	if (len && line[len - 1] == '\n')
		line[len - 1] = '\0';
	if (strchr(line, '\n'))
		return -EINVAL;

	for (word = strtok_r(line, " \t", &save); word; word = strtok_r(NULL, " \t", &save)) {
		if (argc == CONTROL_MAX_ARGS + 1)
			return -EINVAL;
		argv[argc++] = word;
	}
	if (!argc)
		return -EINVAL;
	for (op = 0; op < CONTROL_OP_COUNT; op++) {
		const struct control_cmd_info *c = control_cmd_info(op);

		if (strcmp(argv[0], c->name))
			continue;
		if (argc - 1 < c->min_args || argc - 1 > c->max_args)
			return -EINVAL;
		/* Parsed into a copy: a command refused half-way leaves *out alone. */
		memset(&req, 0, sizeof(req));
		err = parsers[op](argc - 1, argv + 1, &req);
		if (!err)
			*out = req;
		return err;
	}
	return -EINVAL;
}

int control_exec(struct policy *pol, struct dicttrain *dt, const struct control_req *req)
{
	switch (req->op) {
	case CONTROL_COMPACT:
		policy_request_compact(pol);
		return 0;
	case CONTROL_IDLE:
		policy_mark_idle(pol, req->idle_all, req->idle_secs);
		return 0;
	case CONTROL_RECOMPRESS:
		return policy_request(pol, POLICY_RECOMPRESS, &req->recomp);
	case CONTROL_WRITEBACK:
		return policy_request(pol, POLICY_WRITEBACK, &req->wb);
	case CONTROL_TRAIN:
		return dt ? dicttrain_request(dt) : -EOPNOTSUPP;
	case CONTROL_DICT:
		return dt ? dicttrain_save(dt, req->dict_path) : -EOPNOTSUPP;
	case CONTROL_RESTART:
		if (!restart_hook)
			return -EOPNOTSUPP;
		return restart_hook(restart_arg, req->restart_keeper);
	case CONTROL_OP_COUNT:
		break;
	}
	return -EINVAL;
}

int control_run(struct policy *pol, struct dicttrain *dt, const char *text, size_t len)
{
	struct control_req req;
	int err;

	err = control_parse(text, len, &req);
	if (err)
		return err;
	return control_exec(pol, dt, &req);
}
