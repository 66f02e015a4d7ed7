// SPDX-License-Identifier: MIT
/* The scratch buffer cache (common/scratch.c). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../harness.h"
#include "scratch.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)

/* Small buffers are plain malloc: never kept, never reused. */
static void test_scratch_small_not_kept(void)
{
	struct psd_scratch s;
	uint8_t *p;

	CHECK_EQ(psd_scratch_init(&s), 0);
	p = psd_scratch_get(&s, 100);
	CHECK(p != NULL);
	memset(p, 0xab, 100);
	CHECK_EQ((uintptr_t)p % 16, 0);
	psd_scratch_put(&s, p);
	CHECK_U64(s.kept, ==, 0);
	p = psd_scratch_get(&s, 100);
	psd_scratch_put(&s, p);
	CHECK_U64(s.reused, ==, 0);
	psd_scratch_put(&s, NULL); /* a no-op */
	psd_scratch_fini(&s);
}

/* A big buffer put back is handed out again to a request that fits. */
static void test_scratch_reuse(void)
{
	struct psd_scratch s;
	uint8_t *a, *b;

	CHECK_EQ(psd_scratch_init(&s), 0);
	a = psd_scratch_get(&s, 1 * MIB);
	CHECK(a != NULL);
	memset(a, 1, 1 * MIB);
	psd_scratch_put(&s, a);
	CHECK_U64(s.kept, >=, 1 * MIB);
	/* a little bigger still fits (an eighth is added) */
	b = psd_scratch_get(&s, 1 * MIB + 100 * KIB);
	CHECK(b == a);
	CHECK_U64(s.reused, ==, 1);
	CHECK_U64(s.kept, ==, 0);
	memset(b, 2, 1 * MIB + 100 * KIB);
	/* nothing kept now: a second get is a new buffer */
	a = psd_scratch_get(&s, 512 * KIB);
	CHECK(a != NULL && a != b);
	psd_scratch_put(&s, a);
	psd_scratch_put(&s, b);
	/* much bigger than anything kept: new */
	a = psd_scratch_get(&s, 8 * MIB);
	CHECK(a != NULL && a != b);
	psd_scratch_put(&s, a);
	psd_scratch_fini(&s);
}

/* The smallest kept buffer that fits is taken. */
static void test_scratch_best_fit(void)
{
	struct psd_scratch s;
	uint8_t *small, *mid, *big, *p;

	CHECK_EQ(psd_scratch_init(&s), 0);
	big = psd_scratch_get(&s, 8 * MIB);
	small = psd_scratch_get(&s, 256 * KIB);
	mid = psd_scratch_get(&s, 2 * MIB);
	psd_scratch_put(&s, big);
	psd_scratch_put(&s, small);
	psd_scratch_put(&s, mid);
	p = psd_scratch_get(&s, 1 * MIB);
	CHECK(p == mid);
	psd_scratch_put(&s, p);
	p = psd_scratch_get(&s, 200 * KIB);
	CHECK(p == small);
	psd_scratch_put(&s, p);
	p = psd_scratch_get(&s, 3 * MIB);
	CHECK(p == big);
	psd_scratch_put(&s, p);
	psd_scratch_fini(&s);
}

/* Whether @p is kept in @s. */
static bool scratch_has(const struct psd_scratch *s, const void *p)
{
	unsigned i;

	for (i = 0; i < PSD_SCRATCH_SLOTS; i++)
		if (s->buf[i] == p)
			return true;
	return false;
}

/* Full: a bigger buffer evicts the smallest kept one; a smaller one is
 * freed; one above the byte limit is never kept. */
static void test_scratch_bounds(void)
{
	struct psd_scratch s;
	uint8_t *p[PSD_SCRATCH_SLOTS], *small, *q;
	size_t kept;
	unsigned i;

	CHECK_EQ(psd_scratch_init(&s), 0);
	small = psd_scratch_get(&s, 70 * KIB);
	for (i = 0; i < PSD_SCRATCH_SLOTS; i++)
		p[i] = psd_scratch_get(&s, 128 * KIB * (i + 1));
	for (i = 0; i < PSD_SCRATCH_SLOTS; i++)
		psd_scratch_put(&s, p[i]);
	for (i = 0; i < PSD_SCRATCH_SLOTS; i++)
		CHECK(scratch_has(&s, p[i]));
	kept = s.kept;
	/* smaller than every kept one: freed, nothing else moves */
	psd_scratch_put(&s, small);
	CHECK(!scratch_has(&s, small));
	CHECK_U64(s.kept, ==, kept);
	/* bigger than the smallest kept: evicts it */
	q = psd_scratch_get(&s, 64 * MIB);
	CHECK(!scratch_has(&s, q));
	psd_scratch_put(&s, q);
	CHECK(scratch_has(&s, q));
	CHECK(!scratch_has(&s, p[0]));
	for (i = 1; i < PSD_SCRATCH_SLOTS; i++)
		CHECK(scratch_has(&s, p[i]));
	CHECK_U64(s.kept, <=, PSD_SCRATCH_MAX_BYTES);
	/* above the limit: never kept (malloc does not touch its pages) */
	q = psd_scratch_get(&s, PSD_SCRATCH_MAX_BYTES + 1);
	CHECK(q != NULL);
	kept = s.kept;
	psd_scratch_put(&s, q);
	CHECK(!scratch_has(&s, q));
	CHECK_U64(s.kept, ==, kept);
	psd_scratch_fini(&s);
}

struct scratch_thr {
	struct psd_scratch *s;
	uint8_t tag;
	int bad;
};

static void *scratch_thread(void *arg)
{
	struct scratch_thr *t = arg;
	uint8_t *p;
	size_t len, j;
	unsigned i;

	for (i = 0; i < 400; i++) {
		len = 64 * KIB + (size_t)(i % 7) * 96 * KIB;
		p = psd_scratch_get(t->s, len);
		if (!p) {
			t->bad++;
			continue;
		}
		memset(p, t->tag, len);
		for (j = 0; j < len; j += 4096)
			if (p[j] != t->tag)
				t->bad++;
		psd_scratch_put(t->s, p);
	}
	return NULL;
}

/* Gets and puts from several threads: no buffer is handed out twice. */
static void test_scratch_threads(void)
{
	struct psd_scratch s;
	struct scratch_thr t[4];
	pthread_t th[4];
	unsigned i;

	CHECK_EQ(psd_scratch_init(&s), 0);
	for (i = 0; i < 4; i++) {
		t[i] = (struct scratch_thr){ .s = &s, .tag = (uint8_t)(i + 1) };
		CHECK_EQ(pthread_create(&th[i], NULL, scratch_thread, &t[i]),
			 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(t[i].bad, 0);
	}
	CHECK_U64(s.reused, >, 0);
	psd_scratch_fini(&s);
}

const struct test_case test_list[] = {
	{ "scratch_small_not_kept", test_scratch_small_not_kept },
	{ "scratch_reuse", test_scratch_reuse },
	{ "scratch_best_fit", test_scratch_best_fit },
	{ "scratch_bounds", test_scratch_bounds },
	{ "scratch_threads", test_scratch_threads },
	{ NULL, NULL },
};
