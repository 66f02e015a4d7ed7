// SPDX-License-Identifier: MIT
/*
 * The staging pipeline of device tensors (common/gpu/stage.h) with a fake
 * copier: "device memory" is host memory, and a copy is only queued when
 * started and carried out when its stream is synchronised, like an
 * asynchronous cudaMemcpyAsync, so a missing sync shows as missing bytes.
 * Every call is written to an event log; the tests read order, buffer
 * reuse and overlap (the copy of chunk i+1 started before chunk i is sent)
 * from it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "gpu/stage.h"
#include "internal.h"

#define FAKE_MAX_OPS 64
#define FAKE_MAX_LOG 256

enum ev_kind { EV_ALLOC, EV_COPY, EV_SYNC, EV_SEND };

struct ev {
	enum ev_kind kind;
	int dir;
	unsigned stream;
	const void *src;
	const void *dst;
	size_t len;
};

struct fake_op {
	void *dst;
	const void *src;
	size_t len;
	unsigned stream;
};

struct fake {
	pthread_mutex_t lock;
	struct fake_op ops[FAKE_MAX_OPS]; /* queued, not yet done */
	unsigned nops;
	struct ev log[FAKE_MAX_LOG];
	unsigned nlog;
	unsigned allocs;
	bool fail_copy;
	bool fail_alloc;
	char msg[64];
};

static void fake_log(struct fake *f, struct ev e)
{
	pthread_mutex_lock(&f->lock);
	if (f->nlog < FAKE_MAX_LOG)
		f->log[f->nlog++] = e;
	pthread_mutex_unlock(&f->lock);
}

static int fake_alloc(void *ctx, size_t len, void **out)
{
	struct fake *f = ctx;

	if (f->fail_alloc) {
		snprintf(f->msg, sizeof(f->msg), "fake: out of pinned memory");
		return -ENOMEM;
	}
	f->allocs++;
	*out = malloc(len);
	memset(*out, 0xee, len);
	fake_log(f, (struct ev){ .kind = EV_ALLOC, .len = len });
	return *out ? 0 : -ENOMEM;
}

static void fake_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static int fake_copy(void *ctx, enum psd_copy_dir dir, int device, void *dst,
		     const void *src, size_t len, unsigned stream)
{
	struct fake *f = ctx;

	(void)device;
	if (f->fail_copy) {
		snprintf(f->msg, sizeof(f->msg), "fake: copy refused");
		return -EIO;
	}
	pthread_mutex_lock(&f->lock);
	CHECK(f->nops < FAKE_MAX_OPS);
	f->ops[f->nops++] = (struct fake_op){ dst, src, len, stream };
	pthread_mutex_unlock(&f->lock);
	fake_log(f, (struct ev){ .kind = EV_COPY,
				 .dir = dir,
				 .stream = stream,
				 .src = src,
				 .dst = dst,
				 .len = len });
	return 0;
}

static int fake_sync(void *ctx, unsigned stream)
{
	struct fake *f = ctx;
	unsigned i, j = 0;

	pthread_mutex_lock(&f->lock);
	for (i = 0; i < f->nops; i++) {
		struct fake_op *o = &f->ops[i];

		if (o->stream == stream)
			memcpy(o->dst, o->src, o->len);
		else
			f->ops[j++] = *o;
	}
	f->nops = j;
	pthread_mutex_unlock(&f->lock);
	fake_log(f, (struct ev){ .kind = EV_SYNC, .stream = stream });
	return 0;
}

static const char *fake_msg(void *ctx)
{
	return ((struct fake *)ctx)->msg;
}

static const struct psd_copy_ops fake_ops = {
	.host_alloc = fake_alloc,
	.host_free = fake_free,
	.copy = fake_copy,
	.sync = fake_sync,
	.errmsg = fake_msg,
};

static void fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
}

/* Index in the log of the D2H copy from @src, or -1. */
static int log_copy_from(const struct fake *f, const void *src)
{
	unsigned i;

	for (i = 0; i < f->nlog; i++)
		if (f->log[i].kind == EV_COPY &&
		    f->log[i].dir == PSD_COPY_D2H && f->log[i].src == src)
			return (int)i;
	return -1;
}

#define NCHUNK 8
#define CHUNK  1000

/* What the worker's sender does per chunk: take i (staged, complete),
 * start i+1 ahead, send i from the pinned slots, give them back. */
static void run_pipeline(struct psd_stage *s, struct fake *f,
			 const uint8_t *dev, uint8_t *wire, int *send_at,
			 const uint8_t **sent_from)
{
	struct psd_stage_buf b;
	int i;

	for (i = 0; i < NCHUNK; i++) {
		CHECK_EQ(psd_stage_push_take(s, (uint64_t)i, 0, dev + i * CHUNK,
					     CHUNK, 1000, &b),
			 0);
		if (i + 1 < NCHUNK)
			psd_stage_push_ahead(s, (uint64_t)i + 1, 0,
					     dev + (i + 1) * CHUNK, CHUNK);
		/* "The network": the bytes must be there now. */
		memcpy(wire + i * CHUNK, b.host, CHUNK);
		sent_from[i] = b.host;
		send_at[i] = (int)f->nlog;
		fake_log(f, (struct ev){ .kind = EV_SEND, .src = b.host });
		psd_stage_put(s, &b);
	}
}

static void test_order_overlap_reuse(void)
{
	static uint8_t dev[NCHUNK * CHUNK], wire[NCHUNK * CHUNK];
	const uint8_t *sent_from[NCHUNK];
	int send_at[NCHUNK], i;
	struct psd_stage_stats st;
	struct psd_stage s;
	struct fake f;

	fake_init(&f);
	for (i = 0; i < NCHUNK * CHUNK; i++)
		dev[i] = (uint8_t)(i * 7 + i / CHUNK);
	/* Slots of 512 bytes: a chunk takes a run of two. */
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 512, 6, 2), 0);
	CHECK_U64(psd_stage_capacity(&s), ==, 3072);
	run_pipeline(&s, &f, dev, wire, send_at, sent_from);

	/* Every byte, in chunk order. */
	CHECK(memcmp(dev, wire, sizeof(dev)) == 0);
	/* Overlap: chunk i+1's copy started before chunk i went out. */
	for (i = 0; i + 1 < NCHUNK; i++) {
		int c = log_copy_from(&f, dev + (i + 1) * CHUNK);

		CHECK(c >= 0);
		CHECK_INT(c, <, send_at[i]);
	}
	psd_stage_stats(&s, &st);
	/* Each chunk copied once: all but the first from ahead. */
	CHECK_U64(st.d2h, ==, NCHUNK);
	CHECK_U64(st.ahead_hits, ==, NCHUNK - 1);
	CHECK_U64(st.ahead_dropped, ==, 0);
	/* Reuse: one allocation, two runs in turn (double buffering). */
	CHECK_EQ(f.allocs, 1);
	CHECK_EQ(st.allocs, 1);
	CHECK_INT(st.max_used, <=, 4);
	for (i = 2; i < NCHUNK; i++)
		CHECK(sent_from[i] == sent_from[i - 2]);
	CHECK(sent_from[0] != sent_from[1]);
	CHECK_U64(s.used, ==, 0);
	psd_stage_fini(&s);
}

/* A more urgent chunk overtakes the one copied ahead: that copy is waited
 * for and dropped, its slots reused, the bytes still right. */
static void test_reorder_drops_ahead(void)
{
	static uint8_t dev[4 * CHUNK];
	struct psd_stage_buf b;
	struct psd_stage_stats st;
	struct psd_stage s;
	struct fake f;
	int i;

	fake_init(&f);
	for (i = 0; i < 4 * CHUNK; i++)
		dev[i] = (uint8_t)(i ^ 0x5a);
	/* Room for exactly two chunks. */
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, CHUNK, 2, 1), 0);
	CHECK_EQ(psd_stage_push_take(&s, 0, 0, dev, CHUNK, 1000, &b), 0);
	CHECK(psd_stage_push_ahead(&s, 1, 0, dev + CHUNK, CHUNK));
	/* A second ahead is refused while one is pending. */
	CHECK(!psd_stage_push_ahead(&s, 2, 0, dev + 2 * CHUNK, CHUNK));
	CHECK(memcmp(b.host, dev, CHUNK) == 0);
	psd_stage_put(&s, &b);
	/* Chunk 3 comes first now. */
	CHECK_EQ(
		psd_stage_push_take(&s, 3, 0, dev + 3 * CHUNK, CHUNK, 1000, &b),
		0);
	CHECK(memcmp(b.host, dev + 3 * CHUNK, CHUNK) == 0);
	psd_stage_stats(&s, &st);
	CHECK_U64(st.ahead_dropped, ==, 1);
	CHECK_U64(st.ahead_hits, ==, 0);
	psd_stage_put(&s, &b);
	/* Then chunk 1 again: copied anew, same bytes. */
	CHECK_EQ(psd_stage_push_take(&s, 1, 0, dev + CHUNK, CHUNK, 1000, &b),
		 0);
	CHECK(memcmp(b.host, dev + CHUNK, CHUNK) == 0);
	psd_stage_put(&s, &b);
	psd_stage_stats(&s, &st);
	CHECK_U64(st.d2h, ==, 4);
	CHECK_U64(s.used, ==, 0);
	psd_stage_fini(&s);
}

/* The same tag with another source (a reused request slot) is no hit. */
static void test_ahead_matches_source(void)
{
	static uint8_t dev[2 * CHUNK];
	struct psd_stage_buf b;
	struct psd_stage_stats st;
	struct psd_stage s;
	struct fake f;

	fake_init(&f);
	memset(dev, 1, CHUNK);
	memset(dev + CHUNK, 2, CHUNK);
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, CHUNK, 4, 2), 0);
	CHECK(psd_stage_push_ahead(&s, 9, 0, dev, CHUNK));
	CHECK_EQ(psd_stage_push_take(&s, 9, 0, dev + CHUNK, CHUNK, 1000, &b),
		 0);
	CHECK_EQ(b.host[0], 2);
	psd_stage_stats(&s, &st);
	CHECK_U64(st.ahead_hits, ==, 0);
	CHECK_U64(st.ahead_dropped, ==, 1);
	psd_stage_put(&s, &b);
	psd_stage_fini(&s);
}

static void test_sizes_and_exhaustion(void)
{
	struct psd_stage_buf a, b, c;
	struct psd_stage s;
	struct fake f;

	fake_init(&f);
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 100, 4, 1), 0);
	CHECK_EQ(psd_stage_get(&s, 401, &a), -E2BIG);
	CHECK_EQ(psd_stage_get(&s, 250, &a), 0); /* 3 slots */
	CHECK_EQ(a.n, 3);
	CHECK_EQ(psd_stage_get(&s, 101, &b), -EAGAIN);
	CHECK_EQ(psd_stage_get(&s, 100, &b), 0);
	CHECK(b.host == a.host + 300);
	CHECK_EQ(psd_stage_get_wait(&s, 1, 50, &c), -ETIMEDOUT);
	psd_stage_put(&s, &a);
	/* Contiguous: the freed run is found again from the start. */
	CHECK_EQ(psd_stage_get(&s, 300, &c), 0);
	CHECK(c.host == s.arena);
	psd_stage_put(&s, &b);
	psd_stage_put(&s, &c);
	CHECK_U64(s.used, ==, 0);
	psd_stage_fini(&s);

	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 0, 4, 1), -EINVAL);
	CHECK(strstr(psched_errmsg(), "staging pool") != NULL);
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 64, 65, 1), -EINVAL);
	f.fail_alloc = true;
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 64, 4, 1), -ENOMEM);
	CHECK(strstr(psched_errmsg(), "out of pinned memory") != NULL);
}

struct putter {
	struct psd_stage *s;
	struct psd_stage_buf b;
};

static void *put_later(void *arg)
{
	struct putter *p = arg;

	usleep(50 * 1000);
	psd_stage_put(p->s, &p->b);
	return NULL;
}

/* A take waits for slots another thread gives back (a pull's H2D). */
static void test_take_waits_for_slot(void)
{
	static uint8_t dev[200];
	struct psd_stage_buf b;
	struct psd_stage_stats st;
	struct putter p;
	struct psd_stage s;
	struct fake f;
	pthread_t t;

	fake_init(&f);
	memset(dev, 3, sizeof(dev));
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 200, 1, 1), 0);
	p.s = &s;
	CHECK_EQ(psd_stage_get(&s, 10, &p.b), 0);
	CHECK_EQ(pthread_create(&t, NULL, put_later, &p), 0);
	CHECK_EQ(psd_stage_push_take(&s, 1, 0, dev, 200, test_timeout_ms(5000),
				     &b),
		 0);
	pthread_join(t, NULL);
	CHECK_EQ(b.host[199], 3);
	psd_stage_stats(&s, &st);
	CHECK_U64(st.waits, ==, 1);
	psd_stage_put(&s, &b);
	/* Nobody gives the slot back: the take fails, naming the wait. */
	CHECK_EQ(psd_stage_get(&s, 10, &p.b), 0);
	CHECK_EQ(psd_stage_push_take(&s, 2, 0, dev, 200, 30, &b), -ETIMEDOUT);
	CHECK(strstr(psched_errmsg(), "no pinned staging slot") != NULL);
	psd_stage_put(&s, &p.b);
	psd_stage_fini(&s);
}

static void test_pull_h2d_and_errors(void)
{
	static uint8_t dev[256], host[256];
	struct psd_stage_buf b;
	struct psd_stage s;
	struct fake f;
	int i;

	fake_init(&f);
	CHECK_EQ(psd_stage_init(&s, &fake_ops, &f, 256, 2, 2), 0);
	CHECK_EQ(psd_stage_get(&s, 256, &b), 0);
	for (i = 0; i < 256; i++)
		b.host[i] = (uint8_t)i; /* a pull answer landed here */
	CHECK_EQ(psd_stage_h2d(&s, 0, dev, b.host, 256), 0);
	psd_stage_put(&s, &b);
	for (i = 0; i < 256; i++)
		CHECK_EQ(dev[i], i);
	CHECK_EQ(f.log[f.nlog - 2].dir, PSD_COPY_H2D);

	/* A failing copier: clear error, nothing held. */
	f.fail_copy = true;
	memset(host, 0, sizeof(host));
	CHECK_EQ(psd_stage_h2d(&s, 0, dev, host, 16), -EIO);
	CHECK(strstr(psched_errmsg(), "copy refused") != NULL);
	CHECK(!psd_stage_push_ahead(&s, 1, 0, dev, 16));
	CHECK_EQ(psd_stage_push_take(&s, 1, 0, dev, 16, 1000, &b), -EIO);
	CHECK(strstr(psched_errmsg(), "device-to-host copy of 16 bytes") !=
	      NULL);
	CHECK_U64(s.used, ==, 0);
	psd_stage_fini(&s);
}

const struct test_case test_list[] = {
	{ "pipeline keeps order, overlaps, reuses", test_order_overlap_reuse },
	{ "reordered chunk drops the copy ahead", test_reorder_drops_ahead },
	{ "copy ahead matches the source too", test_ahead_matches_source },
	{ "runs, sizes, exhaustion", test_sizes_and_exhaustion },
	{ "take waits for a slot given back", test_take_waits_for_slot },
	{ "pull host-to-device, copier errors", test_pull_h2d_and_errors },
	{ NULL, NULL },
};
