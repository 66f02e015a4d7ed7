// SPDX-License-Identifier: MIT
/*
 * Updaters (common/updater.c) and the "local" KVStore (app/kvstore.c):
 * float16 conversion (every half value, rounding against the compiler's
 * _Float16), the SGD rule against a scalar re-derivation, momentum kept
 * per key and byte range, the custom hook, optimizer checks, and the
 * KVStore's checks and messages.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "updater.h"
#include "psched/kvstore.h"

static void test_updater_f16_roundtrip_every_half(void)
{
	uint32_t h;
	uint16_t back;
	float f;

	for (h = 0; h < 0x10000u; h++) {
		f = psd_f16_to_f32((uint16_t)h);
		back = psd_f32_to_f16(f);
		if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) {
			CHECK(isnan(f));
			CHECK_INT(back & 0x7c00u, ==, 0x7c00u);
			CHECK(back & 0x3ffu);
			continue;
		}
		if (back != h)
			test_fail_at(__FILE__, __LINE__,
				     "half 0x%04x -> %g -> 0x%04x", h, f, back);
	}
	CHECK_EQ(psd_f16_to_f32(0x3c00), 1);
	CHECK_EQ(psd_f16_to_f32(0x0001), ldexp(1, -24));
	CHECK_EQ(psd_f16_to_f32(0xfbff), -65504);
}

static void test_updater_f16_rounding(void)
{
	/* Ties to even, overflow to inf, underflow to zero. */
	CHECK_EQ(psd_f32_to_f16(2049.0f), 0x6800);  /* 2048: tie, even */
	CHECK_EQ(psd_f32_to_f16(2051.0f), 0x6802);  /* 2052: tie, even */
	CHECK_EQ(psd_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
	CHECK_EQ(psd_f32_to_f16(65519.0f), 0x7bff); /* 65504 */
	CHECK_EQ(psd_f32_to_f16(1e-8f), 0);	    /* below half of 2^-24 */
	CHECK_EQ(psd_f32_to_f16(-3e-8f), 0x8001);   /* nearest subnormal */
	CHECK_EQ(psd_f32_to_f16(INFINITY), 0x7c00);
#ifdef __FLT16_MAX__
	{
		unsigned i;
		uint32_t bits;
		float f;
		_Float16 ref;
		uint16_t rb;

		test_rng_seed(16);
		for (i = 0; i < 2000000; i++) {
			bits = (uint32_t)test_rng_next();
			memcpy(&f, &bits, sizeof(f));
			if (isnan(f))
				continue;
			ref = (_Float16)f;
			memcpy(&rb, &ref, sizeof(rb));
			if (psd_f32_to_f16(f) != rb)
				test_fail_at(__FILE__, __LINE__,
					     "%a: 0x%04x, compiler 0x%04x",
					     (double)f, psd_f32_to_f16(f), rb);
		}
	}
#endif
}

static void test_updater_f16_add_in_f32(void)
{
	uint16_t d[3] = { psd_f32_to_f16(2048), psd_f32_to_f16(0.1f),
			  psd_f32_to_f16(60000) };
	uint16_t s[3] = { psd_f32_to_f16(1), psd_f32_to_f16(0.2f),
			  psd_f32_to_f16(10000) };

	psd_f16_add(d, s, 3);
	CHECK_EQ(psd_f16_to_f32(d[0]), 2048); /* 2049 ties to even */
	CHECK_EQ(d[1], psd_f32_to_f16(psd_f16_to_f32(psd_f32_to_f16(0.1f)) +
				      psd_f16_to_f32(psd_f32_to_f16(0.2f))));
	CHECK(isinf(psd_f16_to_f32(d[2])));
}

static void test_updater_optimizer_check(void)
{
	struct psched_optimizer o;

	psched_optimizer_init(&o);
	CHECK_STR(o.name, "sgd");
	CHECK_EQ(psched_optimizer_check(&o), 0);
	o.momentum = 1;
	CHECK_EQ(psched_optimizer_check(&o), -EINVAL);
	CHECK(strstr(psched_errmsg(), "momentum 1 is not in [0, 1)"));
	psched_optimizer_init(&o);
	o.rescale_grad = -1;
	CHECK_EQ(psched_optimizer_check(&o), -EINVAL);
	CHECK(strstr(psched_errmsg(), "rescale_grad"));
	psched_optimizer_init(&o);
	o.clip_gradient = NAN;
	CHECK_EQ(psched_optimizer_check(&o), -EINVAL);
	o.clip_gradient = 0;
	o.name = "ftrl";
	CHECK_EQ(psched_optimizer_check(&o), -EINVAL);
	CHECK(strstr(psched_errmsg(), "'ftrl' is not supported"));
	o.name = NULL; /* none */
	CHECK_EQ(psched_optimizer_check(&o), 0);
	CHECK_EQ(psched_optimizer_check(NULL), -EINVAL);
	/* MXNet takes any finite learning rate, and its "test" optimizer. */
	psched_optimizer_init(&o);
	o.learning_rate = -0.5;
	CHECK_EQ(psched_optimizer_check(&o), 0);
	o.learning_rate = INFINITY;
	CHECK_EQ(psched_optimizer_check(&o), -EINVAL);
	CHECK(strstr(psched_errmsg(), "learning_rate inf is not a finite"));
	CHECK_EQ(psched_optimizer_defaults(&o, "test"), 0);
	CHECK_STR(o.name, "test");
	CHECK_EQ(psched_optimizer_check(&o), 0);
}

/* MXNet 1.x's test optimizer: w += rescale_grad * g, nothing else read;
 * sgd with a negative learning rate ascends. */
static void test_updater_test_rule_negative_lr(void)
{
	struct psched_optimizer o;
	struct psd_updater u;
	float w[2] = { 1, -1 }, g[2] = { 2, 4 };

	psd_upd_init(&u);
	CHECK_EQ(psched_optimizer_defaults(&o, "test"), 0);
	o.rescale_grad = 0.5;
	o.learning_rate = 7; /* not read */
	o.wd = 0.25;
	o.clip_gradient = 0.1;
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	CHECK(psd_upd_apply(&u, 1, PSCHED_F32, 0, 8, 0, w, g, 8));
	CHECK_EQ(w[0], 2);
	CHECK_EQ(w[1], 1);
	psched_optimizer_init(&o);
	o.learning_rate = -0.25;
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	CHECK(psd_upd_apply(&u, 1, PSCHED_F32, 0, 8, 0, w, g, 8));
	CHECK_EQ(w[0], 2.5);
	CHECK_EQ(w[1], 2);
	psd_upd_fini(&u);
}

/* The rule of include/psched/kvstore.h, one element, in double. */
static double sgd_ref(double w, double g, double *m, double lr, double mom,
		      double wd, double rescale, double clip)
{
	g *= rescale;
	if (clip > 0)
		g = fmin(fmax(g, -clip), clip);
	*m = mom * *m - lr * (g + wd * w);
	return w + *m;
}

static void test_updater_sgd_f64_momentum_per_range(void)
{
	struct psd_updater u;
	struct psched_optimizer o;
	double w[8], g[8], rw[8], rm[8] = { 0 };
	int step, i;

	psd_upd_init(&u);
	psched_optimizer_init(&o);
	o.learning_rate = 0.1;
	o.momentum = 0.9;
	o.wd = 0.01;
	o.rescale_grad = 0.5;
	o.clip_gradient = 0.7;
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	for (i = 0; i < 8; i++)
		w[i] = rw[i] = i * 0.25 - 1;
	for (step = 0; step < 6; step++) {
		for (i = 0; i < 8; i++)
			g[i] = sin(i + step * 1.7) * 2;
		/* Two chunks of one key's range [64, 128): state by offset. */
		CHECK(psd_upd_apply(&u, 5, PSCHED_F64, 64, 64, 64, w, g, 24));
		CHECK(psd_upd_apply(&u, 5, PSCHED_F64, 64, 64, 88, w + 3, g + 3,
				    40));
		for (i = 0; i < 8; i++)
			rw[i] = sgd_ref(rw[i], g[i], &rm[i], 0.1, 0.9, 0.01,
					0.5, 0.7);
	}
	for (i = 0; i < 8; i++)
		CHECK_NEAR(w[i], rw[i], 1e-14);
	/* The same optimizer again, or a new learning rate (a schedule),
	 * keeps the momentum; another optimizer drops it. */
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	CHECK_U64(psd_map_count(&u.states), ==, 1);
	o.learning_rate = 0.2;
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	CHECK_U64(psd_map_count(&u.states), ==, 1);
	o.name = "nag";
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	CHECK_U64(psd_map_count(&u.states), ==, 0);
	psd_upd_fini(&u);
}

/* Two byte ranges of one key (a local store and a server's slice, say)
 * keep separate momentum under the one map entry of the key. */
static void test_updater_momentum_two_ranges_one_key(void)
{
	struct psd_updater u;
	struct psched_optimizer o;
	double a[4], b[4], ra[4], rb[4], ma[4] = { 0 }, mb[4] = { 0 };
	double g[4] = { 1, -2, 0.5, 3 };
	int step, i;

	psd_upd_init(&u);
	psched_optimizer_init(&o);
	o.learning_rate = 0.1;
	o.momentum = 0.5;
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	for (i = 0; i < 4; i++)
		a[i] = ra[i] = b[i] = rb[i] = i;
	for (step = 0; step < 3; step++) {
		CHECK(psd_upd_apply(&u, 9, PSCHED_F64, 0, 32, 0, a, g, 32));
		/* Range b takes steps twice as often: its momentum differs. */
		CHECK(psd_upd_apply(&u, 9, PSCHED_F64, 32, 32, 32, b, g, 32));
		CHECK(psd_upd_apply(&u, 9, PSCHED_F64, 32, 32, 32, b, g, 32));
		for (i = 0; i < 4; i++) {
			ra[i] = sgd_ref(ra[i], g[i], &ma[i], 0.1, 0.5, 0, 1, 0);
			rb[i] = sgd_ref(rb[i], g[i], &mb[i], 0.1, 0.5, 0, 1, 0);
			rb[i] = sgd_ref(rb[i], g[i], &mb[i], 0.1, 0.5, 0, 1, 0);
		}
	}
	for (i = 0; i < 4; i++) {
		CHECK_NEAR(a[i], ra[i], 1e-14);
		CHECK_NEAR(b[i], rb[i], 1e-14);
	}
	CHECK_U64(psd_map_count(&u.states), ==, 1);
	psd_upd_fini(&u);
}

static void test_updater_sgd_f32_f16_int(void)
{
	struct psd_updater u;
	struct psched_optimizer o;
	float w[2] = { 1, -2 }, g[2] = { 0.5f, 4 };
	uint16_t hw[2], hg[2];
	int32_t iw[2] = { 1, 2 }, ig[2] = { 5, 6 };

	psd_upd_init(&u);
	CHECK(!psd_upd_active(&u));
	CHECK(!psd_upd_apply(&u, 1, PSCHED_F32, 0, 8, 0, w, g, 8));
	psched_optimizer_init(&o);
	o.learning_rate = 0.5;
	CHECK_EQ(psd_upd_set_optimizer(&u, &o), 0);
	CHECK(psd_upd_apply(&u, 1, PSCHED_F32, 0, 8, 0, w, g, 8));
	CHECK_EQ(w[0], 0.75f);
	CHECK_EQ(w[1], -4.0f);
	hw[0] = psd_f32_to_f16(1);
	hw[1] = psd_f32_to_f16(-2);
	hg[0] = psd_f32_to_f16(0.5f);
	hg[1] = psd_f32_to_f16(4);
	CHECK(psd_upd_apply(&u, 2, PSCHED_F16, 0, 4, 0, hw, hg, 4));
	CHECK_EQ(psd_f16_to_f32(hw[0]), 0.75f);
	CHECK_EQ(psd_f16_to_f32(hw[1]), -4.0f);
	/* Integer keys: not an sgd key, the caller's default applies. */
	CHECK(!psd_upd_apply(&u, 3, PSCHED_I32, 0, 8, 0, iw, ig, 8));
	CHECK_EQ(iw[0], 1);
	CHECK_EQ(psd_upd_set_optimizer(&u, NULL), 0);
	CHECK(!psd_upd_active(&u));
	psd_upd_fini(&u);
}

struct seen {
	uint64_t key;
	uint64_t off;
	uint64_t nbytes;
	int dtype;
	int calls;
};

static void record(uint64_t key, enum psched_dtype dtype, uint64_t off,
		   void *stored, const void *merged, uint64_t nbytes, void *arg)
{
	struct seen *s = arg;
	int64_t *st = stored;
	const int64_t *m = merged;

	s->key = key;
	s->off = off;
	s->nbytes = nbytes;
	s->dtype = dtype;
	s->calls++;
	st[0] = st[0] * 10 + m[0];
}

static void test_updater_custom(void)
{
	struct psd_updater u;
	struct seen s = { 0 };
	int64_t st = 4, mg = 3;

	psd_upd_init(&u);
	psd_upd_set_custom(&u, record, &s);
	CHECK(psd_upd_apply(&u, 77, PSCHED_I64, 800, 16, 808, &st, &mg, 8));
	CHECK_EQ(st, 43);
	CHECK_U64(s.key, ==, 77);
	CHECK_U64(s.off, ==, 808);
	CHECK_U64(s.nbytes, ==, 8);
	CHECK_EQ(s.dtype, PSCHED_I64);
	psd_upd_set_custom(&u, NULL, NULL);
	CHECK(!psd_upd_apply(&u, 77, PSCHED_I64, 800, 16, 808, &st, &mg, 8));
	CHECK_EQ(s.calls, 1);
	psd_upd_fini(&u);
}

static void test_updater_kvstore_local(void)
{
	struct psched_kvstore *kv;
	struct psched_optimizer o;
	float a[3] = { 1, 2, 3 }, b[3] = { 4, 5, 6 }, out[3], small[2];
	double d[3] = { 0 };
	uint64_t keys[2] = { 1, 2 }, lens[2] = { 12, 12 }, l8 = 8, l24 = 24;
	const void *vals[2] = { a, b };
	void *outs[2] = { out, out };
	const void *dv = d;
	void *sv = small;

	CHECK_EQ(psched_kvstore_create("dist_banana", NULL, &kv), -EINVAL);
	CHECK(strstr(psched_errmsg(), "unknown KVStore type 'dist_banana'"));
	CHECK_EQ(psched_kvstore_create("local", NULL, &kv), 0);
	CHECK_STR(psched_kvstore_type(kv), "local");
	CHECK_EQ(psched_kvstore_num_workers(kv), 1);
	CHECK(!psched_kvstore_node(kv));
	CHECK_EQ(psched_kvstore_push(kv, keys, 1, vals, lens, PSCHED_F32, 0),
		 PSCHED_EUNKNOWNKEY);
	CHECK(strstr(psched_errmsg(), "push of key 1: the key was never "
				      "initialised"));
	CHECK_EQ(psched_kvstore_init(kv, keys, 2, vals, lens, PSCHED_F32), 0);
	CHECK_EQ(psched_kvstore_init(kv, keys, 1, vals, lens, PSCHED_F32),
		 -EEXIST);
	CHECK_EQ(psched_kvstore_pull(kv, keys, 1, &sv, &l8, PSCHED_F32, 0),
		 PSCHED_ESIZE);
	CHECK(strstr(psched_errmsg(), "8 bytes is too small for the key's 12 "
				      "bytes (3 x float32)"));
	CHECK_EQ(psched_kvstore_push(kv, keys, 1, &dv, &l24, PSCHED_F64, 0),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "float64 but the key was initialised "
				      "as float32"));
	CHECK_EQ(psched_kvstore_pull(kv, keys, 2, outs, lens, PSCHED_F32, 0),
		 0);
	keys[1] = 1;
	CHECK_EQ(psched_kvstore_push(kv, keys, 2, vals, lens, PSCHED_F32, 0),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "appears twice"));
	keys[1] = 2;
	/* Push replaces; pull into the out buffer. */
	CHECK_EQ(psched_kvstore_push(kv, keys + 1, 1, vals, lens, PSCHED_F32,
				     INT_MIN),
		 0);
	CHECK_EQ(psched_kvstore_pull(kv, keys + 1, 1, outs, lens, PSCHED_F32,
				     INT_MAX),
		 0);
	CHECK_EQ(out[2], 3);
	psched_optimizer_init(&o);
	o.learning_rate = 1;
	CHECK_EQ(psched_kvstore_set_optimizer(kv, &o), 0);
	CHECK_EQ(psched_kvstore_pushpull(kv, keys + 1, 1, vals, outs, lens,
					 PSCHED_F32, 0),
		 0);
	CHECK_EQ(out[0], 0); /* 1 - 1 * 1 */
	CHECK_EQ(out[2], 0);
	CHECK_EQ(psched_kvstore_wait(kv, NULL, 0), 0);
	CHECK_EQ(psched_kvstore_barrier(kv), 0);
	CHECK_EQ(psched_kvstore_destroy(kv), 0);
}

/* Row-sparse keys of a local store (app/kvstore_rows.c): init with rows,
 * summed repeated ids, the replace rule, the lazy optimizer update, the
 * refusals, and dense calls on a row key. */
static void test_updater_kvstore_local_rows(void)
{
	struct psched_kvstore *kv;
	struct psched_optimizer o;
	float init[2 * 2] = { 1, 1, 3, 3 }, push[3 * 2] = { 1, 1, 2, 2, 5, 5 };
	float out[4 * 2];
	uint64_t iid[2] = { 0, 2 }, pid[3] = { 2, 2, 3 },
		 all[4] = { 3, 2, 1, 0 };
	uint64_t bad = 4, key = 9, len = 32;
	void *ov = out;

	CHECK_EQ(psched_kvstore_create("LOCAL", NULL, &kv), 0);
	CHECK_STR(psched_kvstore_type(kv), "local");
	CHECK_EQ(psched_kvstore_row_sparse_push(kv, 9, 1, pid, push, 0),
		 PSCHED_EUNKNOWNKEY);
	CHECK_EQ(psched_kvstore_row_sparse_init(kv, 9, 4, 2, PSCHED_F32, 1,
						&bad, init),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "row id 4 is out of range"));
	CHECK_EQ(psched_kvstore_row_sparse_init(kv, 9, 4, 2, PSCHED_F32, 2, iid,
						init),
		 0);
	CHECK_EQ(psched_kvstore_row_sparse_init(kv, 9, 4, 2, PSCHED_F32, 0,
						NULL, NULL),
		 -EEXIST);
	CHECK_EQ(psched_kvstore_pull(kv, &key, 1, &ov, &len, PSCHED_F32, 0),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "a row-sparse key"));
	/* Row 2 <- 1 + 2 (repeated id summed), row 3 <- 5; 0, 1 keep. */
	CHECK_EQ(psched_kvstore_row_sparse_push(kv, 9, 3, pid, push, 0), 0);
	CHECK_EQ(psched_kvstore_row_sparse_pull(kv, 9, 4, all, out, 0), 0);
	CHECK_EQ(out[0], 5);
	CHECK_EQ(out[2], 3);
	CHECK_EQ(out[4], 0);
	CHECK_EQ(out[6], 1);
	CHECK_EQ(psched_kvstore_row_sparse_pull(kv, 9, 1, &bad, out, 0),
		 -EINVAL);
	/* sgd, lr 0.5, wd 0.5: only row 3 moves: 5 - 0.5 * (2 + 2.5). */
	psched_optimizer_init(&o);
	o.learning_rate = 0.5;
	o.wd = 0.5;
	CHECK_EQ(psched_kvstore_set_optimizer(kv, &o), 0);
	CHECK_EQ(psched_kvstore_row_sparse_pushpull(kv, 9, 1, pid + 2, push + 2,
						    out, 0),
		 0);
	CHECK_EQ(out[0], 2.75);
	CHECK_EQ(psched_kvstore_row_sparse_pull(kv, 9, 4, all, out, 0), 0);
	CHECK_EQ(out[0], 2.75);
	CHECK_EQ(out[2], 3);
	CHECK_EQ(out[6], 1);
	/* A dense key is no row-sparse key. */
	CHECK_EQ(psched_kvstore_init(kv, &all[0], 1, (const void *const *)&ov,
				     &len, PSCHED_F32),
		 0);
	CHECK_EQ(psched_kvstore_row_sparse_pull(kv, 3, 1, all, out, 0),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "not a row-sparse key"));
	CHECK_EQ(psched_kvstore_destroy(kv), 0);
}

const struct test_case test_list[] = {
	{ "f16_roundtrip_every_half", test_updater_f16_roundtrip_every_half },
	{ "f16_rounding", test_updater_f16_rounding },
	{ "f16_add_in_f32", test_updater_f16_add_in_f32 },
	{ "optimizer_check", test_updater_optimizer_check },
	{ "sgd_f64_momentum_per_range",
	  test_updater_sgd_f64_momentum_per_range },
	{ "momentum_two_ranges_one_key",
	  test_updater_momentum_two_ranges_one_key },
	{ "sgd_f32_f16_int", test_updater_sgd_f32_f16_int },
	{ "custom", test_updater_custom },
	{ "kvstore_local", test_updater_kvstore_local },
	{ "test_rule_negative_lr", test_updater_test_rule_negative_lr },
	{ "kvstore_local_rows", test_updater_kvstore_local_rows },
	{ NULL, NULL },
};
