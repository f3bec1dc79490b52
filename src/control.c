/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "control.h"
#include "policy.h"

#define CONTROL_MAX_LEN		256
#define CONTROL_MAX_ARGS	8

struct control_cmd {
	const char *name;
	int min_args, max_args;		/* words after the name */
	/* Fill *req from the words; touch nothing else.  0 or -EINVAL. */
	int (*parse)(int argc, char **argv, struct control_req *req);
	const char *usage;
};

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

/* `restart`: the worker's restart hook, when a keeper is there to act on it. */
static void (*restart_hook)(void *arg);
static void *restart_arg;

void control_set_restart_hook(void (*fn)(void *arg), void *arg)
{
	restart_arg = arg;
	restart_hook = fn;
}

static int parse_restart(int argc, char **argv, struct control_req *req)
{
	req->op = CONTROL_RESTART;
	return 0;
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

/* recompress [type=idle|huge|huge_idle] [threshold=BYTES] [max_pages=N] */
static int parse_recompress(int argc, char **argv, struct control_req *req)
{
	static const struct {
		const char *name;
		enum policy_recomp_type type;
	} types[] = {
		{ "idle", POLICY_RECOMP_IDLE },
		{ "huge", POLICY_RECOMP_HUGE },
		{ "huge_idle", POLICY_RECOMP_HUGE_IDLE },
	};
	bool seen_type = false, seen_threshold = false, seen_max = false;
	const char *v;
	int i;

	req->op = CONTROL_RECOMPRESS;
	req->recomp.type = POLICY_RECOMP_ALL;
	for (i = 0; i < argc; i++) {
		if ((v = arg_value(argv[i], "type")) && !seen_type) {
			size_t t;

			for (t = 0; t < sizeof(types) / sizeof(types[0]); t++)
				if (!strcmp(v, types[t].name))
					break;
			if (t == sizeof(types) / sizeof(types[0]))
				return -EINVAL;
			req->recomp.type = types[t].type;
			seen_type = true;
		} else if ((v = arg_value(argv[i], "threshold")) && !seen_threshold) {
			uint64_t bytes;

			if (config_parse_size(v, false, &bytes) || bytes == 0 || bytes >= 4096)
				return -EINVAL;
			req->recomp.threshold = (size_t)bytes;
			seen_threshold = true;
		} else if ((v = arg_value(argv[i], "max_pages")) && !seen_max) {
			if (parse_u64(v, UINT64_MAX, &req->recomp.max_pages) ||
			    req->recomp.max_pages == 0)
				return -EINVAL;
			seen_max = true;
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

/* writeback idle|huge|huge_idle|all [max_pages=N] */
static int parse_writeback(int argc, char **argv, struct control_req *req)
{
	static const struct {
		const char *name;
		enum policy_wb_type type;
	} types[] = {
		{ "idle", POLICY_WB_IDLE },
		{ "huge", POLICY_WB_HUGE },
		{ "huge_idle", POLICY_WB_HUGE_IDLE },
		{ "all", POLICY_WB_ALL },
	};
	const char *v;
	size_t t;

	req->op = CONTROL_WRITEBACK;
	for (t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		if (!strcmp(argv[0], types[t].name))
			break;
	if (t == sizeof(types) / sizeof(types[0]))
		return -EINVAL;
	req->wb.type = types[t].type;
	if (argc == 2) {
		v = arg_value(argv[1], "max_pages");
		if (!v || parse_u64(v, UINT64_MAX, &req->wb.max_pages) || req->wb.max_pages == 0)
			return -EINVAL;
	}
	return 0;
}

/* One line per command users can name; help and the man page follow it. */
static const struct control_cmd commands[] = {
	{ "compact", 0, 0, parse_compact, "compact" },
	{ "idle", 1, 1, parse_idle, "idle all|SECONDS" },
	{ "recompress", 0, 3, parse_recompress,
	  "recompress [type=idle|huge|huge_idle] [threshold=BYTES] [max_pages=N]" },
	{ "writeback", 1, 2, parse_writeback, "writeback idle|huge|huge_idle|all [max_pages=N]" },
	{ "restart", 0, 0, parse_restart, "restart" },
};

int control_parse(const char *text, size_t len, struct control_req *out)
{
	char line[CONTROL_MAX_LEN + 1], *argv[CONTROL_MAX_ARGS + 1], *save, *word;
	struct control_req req;
	int argc = 0, err;
	size_t i;

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
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct control_cmd *c = &commands[i];

		if (strcmp(argv[0], c->name))
			continue;
		if (argc - 1 < c->min_args || argc - 1 > c->max_args)
			return -EINVAL;
		/* Parsed into a copy: a command refused half-way leaves *out alone. */
		memset(&req, 0, sizeof(req));
		err = c->parse(argc - 1, argv + 1, &req);
		if (!err)
			*out = req;
		return err;
	}
	return -EINVAL;
}

int control_exec(struct policy *pol, const struct control_req *req)
{
	switch (req->op) {
	case CONTROL_COMPACT:
		policy_request_compact(pol);
		return 0;
	case CONTROL_IDLE:
		policy_mark_idle(pol, req->idle_all, req->idle_secs);
		return 0;
	case CONTROL_RECOMPRESS:
		return policy_request_recompress(pol, &req->recomp);
	case CONTROL_WRITEBACK:
		return policy_request_writeback(pol, &req->wb);
	case CONTROL_RESTART:
		if (!restart_hook)
			return -EOPNOTSUPP;
		restart_hook(restart_arg);
		return 0;
	}
	return -EINVAL;
}

int control_run(struct policy *pol, const char *text, size_t len)
{
	struct control_req req;
	int err;

	err = control_parse(text, len, &req);
	if (err)
		return err;
	return control_exec(pol, &req);
}
