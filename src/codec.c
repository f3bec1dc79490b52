/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * codec: the registry of page compressors and the context life cycle.
 *
 * The table is indexed by enum codec_id because the id is what a slot stores;
 * adding a codec is one line in codec.h's CODEC_LIST plus its codec_<name>.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

static const struct codec_ops *const codec_table[CODEC_COUNT] = {
#define CODEC_ENTRY(ID, name) [CODEC_##ID] = &codec_##name,
	CODEC_LIST(CODEC_ENTRY)
#undef CODEC_ENTRY
};

const struct codec_ops *codec_by_id(unsigned int id)
{
	if (id >= CODEC_COUNT)
		return NULL;
	return codec_table[id];
}

const struct codec_ops *codec_find(const char *name)
{
	unsigned int i;

	if (!name)
		return NULL;
	for (i = 0; i < CODEC_COUNT; i++) {
		if (codec_table[i] && strcmp(codec_table[i]->name, name) == 0)
			return codec_table[i];
	}
	return NULL;
}

/* Long enough for every name plus ", " separators; checked when built. */
static char codec_names_buf[128];
static pthread_once_t codec_names_once = PTHREAD_ONCE_INIT;

static void codec_names_build(void)
{
	size_t used = 0;
	unsigned int i;

	for (i = 0; i < CODEC_COUNT; i++) {
		const char *sep = used ? ", " : "";
		size_t need = strlen(sep) + strlen(codec_table[i]->name);

		if (used + need >= sizeof(codec_names_buf))
			break;
		memcpy(codec_names_buf + used, sep, strlen(sep));
		used += strlen(sep);
		memcpy(codec_names_buf + used, codec_table[i]->name,
		       strlen(codec_table[i]->name));
		used += strlen(codec_table[i]->name);
	}
	codec_names_buf[used] = '\0';
}

const char *codec_names(void)
{
	/* Built from the table so that --help never forgets a codec. */
	pthread_once(&codec_names_once, codec_names_build);
	return codec_names_buf;
}

int codec_ctx_init(struct codec_ctx *ctx, const struct codec_ops *ops, int level)
{
	int ret;

	memset(ctx, 0, sizeof(*ctx));
	if (!ops)
		return -EINVAL;
	if (level == 0)
		level = ops->default_level;
	if (level < ops->min_level || level > ops->max_level)
		return -EINVAL;

	ctx->ops = ops;
	ctx->level = level;
	ret = ops->create_ctx(ctx);
	if (ret) {
		/* Leave ctx as codec_ctx_fini expects it: nothing to free. */
		memset(ctx, 0, sizeof(*ctx));
		return ret;
	}
	return 0;
}

void codec_ctx_fini(struct codec_ctx *ctx)
{
	if (ctx->ops)
		ctx->ops->destroy_ctx(ctx);
	memset(ctx, 0, sizeof(*ctx));
}

/*
 * The copy of the bytes gets CODEC_DICT_SLACK bytes more than it needs, never
 * read: LZ4 takes a page that starts exactly where its dictionary ends for
 * the continuation of it (prefix mode), and no page can start inside memory
 * that we own.
 */
#define CODEC_DICT_SLACK	16u

static void codec_dict_free(struct codec_dict *dict)
{
	if (dict->ops && dict->ops->dict_release)
		dict->ops->dict_release(dict);
	free((void *)dict->bytes);
	free(dict);
}

int codec_dict_create(struct codec_dict **dictp, const struct codec_ops *ops, int level,
		      const void *bytes, size_t len)
{
	struct codec_dict *dict;
	void *copy;
	int ret;

	if (!ops || !bytes || !len)
		return -EINVAL;
	if (!codec_has_dict(ops))
		return -EOPNOTSUPP;
	if (level == 0)
		level = ops->default_level;
	if (level < ops->min_level || level > ops->max_level)
		return -EINVAL;

	dict = calloc(1, sizeof(*dict));
	copy = malloc(len + CODEC_DICT_SLACK);
	if (!dict || !copy) {
		free(dict);
		free(copy);
		return -ENOMEM;
	}
	memcpy(copy, bytes, len);
	memset((unsigned char *)copy + len, 0, CODEC_DICT_SLACK);
	dict->ops = ops;
	dict->bytes = copy;
	dict->len = len;
	/* A codec whose dictionary serves every level sets 0 (any). */
	dict->level = level;
	atomic_init(&dict->refs, 1);
	ret = ops->dict_prepare(dict);
	if (ret) {
		codec_dict_free(dict);
		return ret;
	}
	*dictp = dict;
	return 0;
}

struct codec_dict *codec_dict_get(struct codec_dict *dict)
{
	/* Relaxed: the caller's reference already orders everything before. */
	atomic_fetch_add_explicit(&dict->refs, 1, memory_order_relaxed);
	return dict;
}

void codec_dict_put(struct codec_dict *dict)
{
	if (!dict)
		return;
	/*
	 * Release on every put, acquire on the last: whatever any holder did
	 * with the dictionary happens before it is freed.
	 */
	if (atomic_fetch_sub_explicit(&dict->refs, 1, memory_order_release) == 1) {
		atomic_thread_fence(memory_order_acquire);
		codec_dict_free(dict);
	}
}
