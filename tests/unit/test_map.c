// SPDX-License-Identifier: MIT
/* The u64 -> pointer map (common/map.h) against a plain array model. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "map.h"

#define MODEL_KEYS 512
#define RANDOM_OPS 200000

/* Values are addresses inside this array, so each is distinct and
 * non-NULL, and a wrong value is caught. */
static char vals[MODEL_KEYS];

static uint64_t model_key(size_t i, int shape)
{
	switch (shape) {
	case 0:
		return i; /* small consecutive ints */
	case 1:
		return (uint64_t)i << 32; /* only high bits differ */
	case 2:
		return UINT64_MAX - i; /* near the top */
	default:
		return (uint64_t)i * 1024; /* one common stride */
	}
}

/* Check the whole map against @present[]. */
static void check_model(const struct psd_map *m, const bool *present, int shape)
{
	size_t i, n = 0, pos = 0;
	uint64_t key;
	void *v;

	for (i = 0; i < MODEL_KEYS; i++) {
		v = psd_map_get(m, model_key(i, shape));
		if (present[i]) {
			CHECK(v == &vals[i]);
			n++;
		} else {
			CHECK(v == NULL);
		}
	}
	CHECK_U64(psd_map_count(m), ==, n);
	i = 0;
	while ((v = psd_map_next(m, &pos, &key))) {
		size_t idx = (size_t)((char *)v - vals);

		CHECK(idx < MODEL_KEYS && present[idx]);
		CHECK_U64(key, ==, model_key(idx, shape));
		i++;
	}
	CHECK_U64(i, ==, n);
}

static void run_random(int shape, uint64_t seed)
{
	bool present[MODEL_KEYS] = { false };
	struct psd_map m;
	int op;

	test_rng_seed(seed);
	psd_map_init(&m);
	for (op = 0; op < RANDOM_OPS; op++) {
		size_t i = test_rng_below(MODEL_KEYS);
		uint64_t k = model_key(i, shape);

		if (test_rng_below(3)) {
			int ret = psd_map_put(&m, k, &vals[i]);

			CHECK_EQ(ret, present[i] ? -EEXIST : 0);
			present[i] = true;
		} else {
			void *v = psd_map_del(&m, k);

			CHECK(v == (present[i] ? &vals[i] : NULL));
			present[i] = false;
		}
		if (op % 10007 == 0)
			check_model(&m, present, shape);
	}
	check_model(&m, present, shape);
	psd_map_fini(&m);
}

static void test_map_random_small_ints(void)
{
	run_random(0, 1);
}

static void test_map_random_high_bits(void)
{
	run_random(1, 2);
}

static void test_map_random_top_keys(void)
{
	run_random(2, 3);
}

static void test_map_random_stride(void)
{
	run_random(3, 4);
}

static void test_map_empty(void)
{
	struct psd_map m;
	size_t pos = 0;

	psd_map_init(&m);
	CHECK(psd_map_get(&m, 0) == NULL);
	CHECK(psd_map_get(&m, UINT64_MAX) == NULL);
	CHECK(psd_map_del(&m, 7) == NULL);
	CHECK(psd_map_next(&m, &pos, NULL) == NULL);
	CHECK_U64(psd_map_count(&m), ==, 0);
	psd_map_fini(&m);
	psd_map_fini(&m); /* twice is fine */
}

static void test_map_put_existing_keeps_old(void)
{
	struct psd_map m;

	psd_map_init(&m);
	CHECK_EQ(psd_map_put(&m, 0, &vals[0]), 0); /* key 0 is a key */
	CHECK_EQ(psd_map_put(&m, 0, &vals[1]), -EEXIST);
	CHECK(psd_map_get(&m, 0) == &vals[0]);
	CHECK_U64(psd_map_count(&m), ==, 1);
	CHECK(psd_map_del(&m, 0) == &vals[0]);
	CHECK(psd_map_get(&m, 0) == NULL);
	psd_map_fini(&m);
}

/* Grow across several doublings, then delete everything in an order
 * that exercises backward shifts across wrapped probe runs. */
static void test_map_grow_and_drain(void)
{
	struct psd_map m;
	size_t i;

	psd_map_init(&m);
	for (i = 0; i < MODEL_KEYS; i++)
		CHECK_EQ(psd_map_put(&m, model_key(i, 3), &vals[i]), 0);
	CHECK(m.cap >= 2 * MODEL_KEYS);
	for (i = 0; i < MODEL_KEYS; i += 2)
		CHECK(psd_map_del(&m, model_key(i, 3)) == &vals[i]);
	for (i = 1; i < MODEL_KEYS; i += 2)
		CHECK(psd_map_get(&m, model_key(i, 3)) == &vals[i]);
	for (i = MODEL_KEYS - 1; i < MODEL_KEYS; i -= 2)
		CHECK(psd_map_del(&m, model_key(i, 3)) == &vals[i]);
	CHECK_U64(psd_map_count(&m), ==, 0);
	for (i = 0; i < m.cap; i++)
		CHECK(m.slots[i].val == NULL);
	psd_map_fini(&m);
}

static int clear_calls;

static void count_clear(void *val, void *arg)
{
	CHECK(arg == vals);
	CHECK((char *)val >= vals && (char *)val < vals + MODEL_KEYS);
	clear_calls++;
}

static void test_map_clear_visits_every_value(void)
{
	struct psd_map m;
	size_t i;

	psd_map_init(&m);
	for (i = 0; i < 100; i++)
		CHECK_EQ(psd_map_put(&m, model_key(i, 1), &vals[i]), 0);
	clear_calls = 0;
	psd_map_clear(&m, count_clear, vals);
	CHECK_EQ(clear_calls, 100);
	CHECK_U64(psd_map_count(&m), ==, 0);
	CHECK(psd_map_get(&m, model_key(5, 1)) == NULL);
	CHECK_EQ(psd_map_put(&m, 5, &vals[5]), 0); /* usable after clear */
	CHECK(psd_map_get(&m, 5) == &vals[5]);
	psd_map_fini(&m);
}

const struct test_case test_list[] = {
	{ "map_empty", test_map_empty },
	{ "map_put_existing_keeps_old", test_map_put_existing_keeps_old },
	{ "map_grow_and_drain", test_map_grow_and_drain },
	{ "map_clear_visits_every_value", test_map_clear_visits_every_value },
	{ "map_random_small_ints", test_map_random_small_ints },
	{ "map_random_high_bits", test_map_random_high_bits },
	{ "map_random_top_keys", test_map_random_top_keys },
	{ "map_random_stride", test_map_random_stride },
	{ NULL, NULL },
};
