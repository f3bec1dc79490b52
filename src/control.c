/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <string.h>

#include "control.h"
#include "log.h"
#include "store.h"

#define CONTROL_MAX_LEN		256
#define CONTROL_MAX_ARGS	8

struct control_cmd {
	const char *name;
	int min_args, max_args;		/* words after the name */
	int (*run)(struct store *st, int argc, char **argv);
	const char *usage;
};

static int cmd_compact(struct store *st, int argc, char **argv)
{
	uint64_t pages = store_compact(st);

	log_info("compact: %llu pages given back", (unsigned long long)pages);
	return 0;
}

static const struct control_cmd commands[] = {
	{ "compact", 0, 0, cmd_compact, "compact" },
};

int control_run(struct store *st, const char *text, size_t len)
{
	char line[CONTROL_MAX_LEN + 1], *argv[CONTROL_MAX_ARGS + 1], *save, *word;
	int argc = 0;
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
		return c->run(st, argc - 1, argv + 1);
	}
	return -EINVAL;
}
