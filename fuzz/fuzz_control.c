/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz the control file's command parser (control_parse) and what
 * control_run hands on.
 *
 * Invariants:
 *   - a command is either parsed (0) or refused with -EINVAL, and a refused
 *     one leaves the output untouched;
 *   - a parsed command is well formed (the fields the policy trusts are in
 *     range), its numbers are the ones written (none cut to fit a field),
 *     and it reads back the same from its canonical text;
 *   - control_run on a refused command asks the policy for nothing, and on a
 *     parsed one asks exactly once, for exactly what was parsed.
 *
 * For the last one this file stands in for the policy thread: it defines
 * the three entry points control.c calls, and counts the calls.  The link
 * takes these before libzswapfs.a, whose policy.o is then never pulled in
 * (nothing else here needs it); should control.c ever call more of the
 * policy, the link fails loudly on the duplicates.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "dicttrain.h"
#include "fuzz.h"
#include "policy.h"

static struct {
	unsigned int calls;
	struct control_req last;	/* what the calls asked for */
} seen;

int policy_request(struct policy *pol, enum policy_job job, const struct policy_request *req)
{
	seen.calls++;
	if (job == POLICY_RECOMPRESS) {
		seen.last.op = CONTROL_RECOMPRESS;
		seen.last.recomp = *req;
	} else {
		seen.last.op = CONTROL_WRITEBACK;
		seen.last.wb = *req;
	}
	return 0;
}

void policy_request_compact(struct policy *pol)
{
	seen.calls++;
	seen.last.op = CONTROL_COMPACT;
}

void policy_mark_idle(struct policy *pol, bool all, uint32_t seconds)
{
	seen.calls++;
	seen.last.op = CONTROL_IDLE;
	seen.last.idle_all = all;
	seen.last.idle_secs = seconds;
}

/* The worker's restart hook (control_set_restart_hook). */
static int restart_standin(void *arg, bool keeper)
{
	(void)arg;
	seen.calls++;
	seen.last.op = CONTROL_RESTART;
	seen.last.restart_keeper = keeper;
	return 0;
}

int dicttrain_request(struct dicttrain *dt)
{
	seen.calls++;
	seen.last.op = CONTROL_TRAIN;
	return 0;
}

int dicttrain_save(struct dicttrain *dt, const char *path)
{
	seen.calls++;
	seen.last.op = CONTROL_DICT;
	fuzz_require(strlen(path) < sizeof(seen.last.dict_path));
	strcpy(seen.last.dict_path, path);
	return 0;
}

static bool req_equal(const struct control_req *a, const struct control_req *b)
{
	return a->op == b->op && a->idle_all == b->idle_all && a->idle_secs == b->idle_secs &&
	       a->recomp.select == b->recomp.select && a->recomp.threshold == b->recomp.threshold &&
	       a->recomp.max_pages == b->recomp.max_pages && a->wb.select == b->wb.select &&
	       a->wb.max_pages == b->wb.max_pages && !strcmp(a->dict_path, b->dict_path);
}

/* The canonical text of a parsed command; its length. */
static size_t req_format(const struct control_req *r, char *buf, size_t len)
{
	static const char *const types[] = {
		[POLICY_SELECT_ALL] = "all", [POLICY_SELECT_IDLE] = "idle",
		[POLICY_SELECT_HUGE] = "huge", [POLICY_SELECT_HUGE_IDLE] = "huge_idle",
	};
	int n = 0;

	switch (r->op) {
	case CONTROL_COMPACT:
		n = snprintf(buf, len, "compact");
		break;
	case CONTROL_IDLE:
		if (r->idle_all)
			n = snprintf(buf, len, "idle all");
		else
			n = snprintf(buf, len, "idle %" PRIu32, r->idle_secs);
		break;
	case CONTROL_RECOMPRESS:
		n = snprintf(buf, len, "recompress");
		if (r->recomp.select != POLICY_SELECT_ALL)
			n += snprintf(buf + n, len - (size_t)n, " type=%s", types[r->recomp.select]);
		if (r->recomp.threshold)
			n += snprintf(buf + n, len - (size_t)n, " threshold=%zu",
				      r->recomp.threshold);
		if (r->recomp.max_pages)
			n += snprintf(buf + n, len - (size_t)n, " max_pages=%" PRIu64,
				      r->recomp.max_pages);
		break;
	case CONTROL_WRITEBACK:
		n = snprintf(buf, len, "writeback %s", types[r->wb.select]);
		if (r->wb.max_pages)
			n += snprintf(buf + n, len - (size_t)n, " max_pages=%" PRIu64,
				      r->wb.max_pages);
		break;
	case CONTROL_TRAIN:
		n = snprintf(buf, len, "train");
		break;
	case CONTROL_DICT:
		n = snprintf(buf, len, "dict save %s", r->dict_path);
		break;
	case CONTROL_RESTART:
		n = snprintf(buf, len, r->restart_keeper ? "restart keeper" : "restart");
		break;
	case CONTROL_OP_COUNT:	/* no command: n stays 0 and fails below */
		break;
	}
	fuzz_require(n > 0 && (size_t)n < len);
	return (size_t)n;
}

/* What the policy relies on, whatever the text was. */
static void check_well_formed(const struct control_req *r)
{
	struct control_req zero;

	memset(&zero, 0, sizeof(zero));
	switch (r->op) {
	case CONTROL_COMPACT:
		zero.op = r->op;
		fuzz_require(req_equal(r, &zero));
		break;
	case CONTROL_IDLE:
		fuzz_require(!(r->idle_all && r->idle_secs));
		zero.op = r->op;
		zero.idle_all = r->idle_all;
		zero.idle_secs = r->idle_secs;
		fuzz_require(req_equal(r, &zero));
		break;
	case CONTROL_RECOMPRESS:
		fuzz_require(r->recomp.select <= POLICY_SELECT_HUGE_IDLE);
		/* 0 (the configured threshold) or a saving smaller than a page */
		fuzz_require(r->recomp.threshold < 4096);
		zero.op = r->op;
		zero.recomp = r->recomp;
		fuzz_require(req_equal(r, &zero));
		break;
	case CONTROL_WRITEBACK:
		fuzz_require(r->wb.select <= POLICY_SELECT_HUGE_IDLE);
		zero.op = r->op;
		zero.wb = r->wb;
		fuzz_require(req_equal(r, &zero));
		break;
	case CONTROL_TRAIN:
	case CONTROL_RESTART:
		zero.op = r->op;
		fuzz_require(req_equal(r, &zero));
		break;
	case CONTROL_DICT:
		/* An absolute path of one word, NUL-terminated in its field. */
		fuzz_require(r->dict_path[0] == '/' &&
			     strlen(r->dict_path) < sizeof(r->dict_path) &&
			     !strpbrk(r->dict_path, " \t\n"));
		zero.op = r->op;
		strcpy(zero.dict_path, r->dict_path);
		fuzz_require(req_equal(r, &zero));
		break;
	default:
		fuzz_require(!"unknown op");
	}
}

/* The numbers of the text, read again with strtoull: the parsed ones. */
static void check_numbers(const char *text, size_t size, const struct control_req *r)
{
	char *copy = strndup(text, size), *save, *word;
	bool first = true;

	fuzz_require(copy);
	for (word = strtok_r(copy, " \t\n", &save); word; word = strtok_r(NULL, " \t\n", &save)) {
		const char *num = NULL;
		uint64_t want = 0;

		if (!strncmp(word, "max_pages=", 10)) {
			num = word + 10;
			want = r->op == CONTROL_RECOMPRESS ? r->recomp.max_pages : r->wb.max_pages;
		} else if (r->op == CONTROL_IDLE && !first && strcmp(word, "all")) {
			num = word;
			want = r->idle_secs;
		}
		if (num)
			fuzz_require(strtoull(num, NULL, 10) == want);
		first = false;
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct control_req req, again, untouched;
	char canon[512];
	size_t n;
	int err, ret;

	memset(&untouched, 0xa5, sizeof(untouched));
	req = untouched;
	err = control_parse(text, size, &req);
	fuzz_require(err == 0 || err == -EINVAL);

	memset(&seen, 0, sizeof(seen));
	control_set_restart_hook(restart_standin, NULL);
	/* Not dereferenced: the stand-ins above take its place. */
	ret = control_run(NULL, (struct dicttrain *)&seen, text, size);
	if (err) {
		fuzz_require(!memcmp(&req, &untouched, sizeof(req)));
		fuzz_require(ret == err);
		fuzz_require(seen.calls == 0);
		return 0;
	}
	check_well_formed(&req);
	check_numbers(text, size, &req);
	fuzz_require(ret == 0);
	fuzz_require(seen.calls == 1);
	/* The stand-in keeps the fields of its call and zeros: as parsed. */
	fuzz_require(req_equal(&seen.last, &req));

	/* The canonical text means the same, with or without echo's newline. */
	n = req_format(&req, canon, sizeof(canon) - 1);
	memset(&again, 0, sizeof(again));
	fuzz_require(control_parse(canon, n, &again) == 0);
	fuzz_require(req_equal(&req, &again));
	/* A text of the longest length takes no newline more. */
	if (n >= CONTROL_MAX_LEN)
		return 0;
	canon[n++] = '\n';
	memset(&again, 0, sizeof(again));
	fuzz_require(control_parse(canon, n, &again) == 0);
	fuzz_require(req_equal(&req, &again));
	return 0;
}
