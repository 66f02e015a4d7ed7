// SPDX-License-Identifier: MIT
/*
 * Issue 13's worker paths from C, for the sanitizer builds
 * (tests/integration/test_optim_c.sh, 2 servers x 2 workers, dist_sync):
 * 2bit-compressed pushes of several keys in flight at once while the
 * sender thread packs chunks, checked against a scalar re-derivation of
 * the quantisation; then Adam on the servers with a state save, a few
 * steps, a load and the same steps again, which must give the same
 * weights bit for bit.  Run one copy per worker.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched/kvstore.h"

#define CHECK_WHO "optim_c rank %d", rank
#include "check.h"

#define NKEYS 3
#define NELEM 3001
/* compressed pushes big enough that their codes and packed payloads
 * come from the worker's scratch cache (common/scratch.h) */
#define CMP_NELEM 200003

static int rank = -1;

static float grad(int key, int step, int r, int i)
{
	return 0.4f * sinf((float)i * 0.37f + (float)step * 1.3f + (float)r +
			   (float)key);
}

/* 2bit with threshold 0.5: what worker @r sends for element @i at @step,
 * with its residual @res. */
static float quant(float *res, float g)
{
	float r = *res + g, q = r >= 0.5f ? 0.5f : (r <= -0.5f ? -0.5f : 0);

	*res = r - q;
	return q;
}

static void run_compression(struct psched_kvstore *kv, int nw)
{
	static float push[NKEYS][CMP_NELEM], out[NKEYS][CMP_NELEM],
		res[2][NKEYS][CMP_NELEM];
	const void *vals[NKEYS];
	void *outs[NKEYS];
	uint64_t keys[NKEYS], lens[NKEYS];
	int k, s, i, r, ret;
	float want;

	for (k = 0; k < NKEYS; k++) {
		keys[k] = 100 + (uint64_t)k;
		lens[k] = sizeof(push[k]);
		vals[k] = push[k];
		outs[k] = out[k];
	}
	ret = psched_kvstore_init(kv, keys, NKEYS, vals, lens, PSCHED_F32);
	CHECK(!ret, "init: %s", psched_errmsg());
	CHECK(psched_kvstore_set_gradient_compression(kv, "2bit", -1) ==
		      -EINVAL,
	      "a negative threshold was accepted");
	ret = psched_kvstore_set_gradient_compression(kv, "2bit", 0.5);
	CHECK(!ret, "set compression: %s", psched_errmsg());
	for (s = 0; s < 4; s++) {
		for (k = 0; k < NKEYS; k++)
			for (i = 0; i < CMP_NELEM; i++)
				push[k][i] = grad(k, s, rank, i);
		ret = psched_kvstore_pushpull(kv, keys, NKEYS, vals, outs, lens,
					      PSCHED_F32, k);
		CHECK(!ret, "pushpull: %s", psched_errmsg());
		ret = psched_kvstore_wait(kv, NULL, 0);
		CHECK(!ret, "wait: %s", psched_errmsg());
		for (k = 0; k < NKEYS; k++) {
			for (i = 0; i < CMP_NELEM; i++) {
				want = 0;
				for (r = 0; r < nw; r++)
					want += quant(&res[r][k][i],
						      grad(k, s, r, i));
				CHECK(out[k][i] == want,
				      "step %d key %d element %d: %g, want %g",
				      s, k, i, out[k][i], want);
			}
		}
	}
	ret = psched_kvstore_set_gradient_compression(kv, "none", 0);
	CHECK(!ret, "compression off: %s", psched_errmsg());
}

static void adam_steps(struct psched_kvstore *kv, uint64_t key, float *w,
		       int from, int to, float scale)
{
	static float g[NELEM];
	const void *v = g;
	void *o = w;
	uint64_t len = sizeof(g);
	int s, i, ret;

	for (s = from; s < to; s++) {
		for (i = 0; i < NELEM; i++)
			g[i] = scale * grad(7, s, rank, i);
		ret = psched_kvstore_pushpull(kv, &key, 1, &v, &o, &len,
					      PSCHED_F32, 0);
		CHECK(!ret, "adam pushpull: %s", psched_errmsg());
		ret = psched_kvstore_wait(kv, &key, 1);
		CHECK(!ret, "adam wait: %s", psched_errmsg());
	}
}

/*
 * Keys 200 and 201 start equal and take the same 3 Adam steps; the
 * states are saved; 200 takes steps 3..5.  201's states are then
 * disturbed (3 steps of other gradients with lr_mult 0, so its weights
 * stay), the file is loaded, and 201 takes steps 3..5: it must end where
 * 200 did, bit for bit.
 */
static void run_states(struct psched_kvstore *kv, const char *path)
{
	static float w0[NELEM], a[NELEM], b[NELEM];
	const void *vals[2] = { w0, w0 };
	uint64_t keys[2] = { 200, 201 }, lens[2] = { sizeof(w0), sizeof(w0) };
	double zero = 0;
	struct psched_optimizer o;
	int i, ret;

	CHECK(psched_optimizer_defaults(&o, "adam") == 0, "defaults");
	o.learning_rate = 0.01;
	ret = psched_kvstore_set_optimizer(kv, &o);
	CHECK(!ret, "set adam: %s", psched_errmsg());
	for (i = 0; i < NELEM; i++)
		w0[i] = cosf((float)i * 0.1f);
	ret = psched_kvstore_init(kv, keys, 2, vals, lens, PSCHED_F32);
	CHECK(!ret, "init: %s", psched_errmsg());
	adam_steps(kv, 200, a, 0, 3, 1);
	adam_steps(kv, 201, b, 0, 3, 1);
	ret = psched_kvstore_save_optimizer_states(kv, path);
	CHECK(!ret, "save: %s", psched_errmsg());
	adam_steps(kv, 200, a, 3, 6, 1);
	o.nmult = 1;
	o.mult_keys = &keys[1];
	o.lr_mult = &zero;
	ret = psched_kvstore_set_optimizer(kv, &o);
	CHECK(!ret, "set lr_mult: %s", psched_errmsg());
	adam_steps(kv, 201, b, 10, 13, -3);
	o.nmult = 0;
	ret = psched_kvstore_set_optimizer(kv, &o);
	CHECK(!ret, "unset lr_mult: %s", psched_errmsg());
	ret = psched_kvstore_load_optimizer_states(kv, path);
	CHECK(!ret, "load: %s", psched_errmsg());
	adam_steps(kv, 201, b, 3, 6, 1);
	for (i = 0; i < NELEM; i++)
		CHECK(a[i] == b[i],
		      "element %d: %.9g after the load, %.9g "
		      "without the interruption",
		      i, b[i], a[i]);
	/* A file that is not a state file is refused (rank 0 does the
	 * transfer and reports; the others return the barrier's result). */
	ret = psched_kvstore_load_optimizer_states(kv, "/dev/null");
	CHECK(ret == (rank == 0 ? -EPROTO : 0), "loading /dev/null gave %d",
	      ret);
}

int main(int argc, char **argv)
{
	struct psched_kvstore *kv;
	int ret, nw;

	if (argc != 2) {
		fprintf(stderr, "usage: optim_c STATE_FILE\n");
		return 2;
	}
	ret = psched_kvstore_create("dist_sync", NULL, &kv);
	if (ret) {
		fprintf(stderr, "optim_c: create: %s\n", psched_errmsg());
		return 1;
	}
	rank = psched_kvstore_rank(kv);
	nw = psched_kvstore_num_workers(kv);
	CHECK(nw <= 2, "at most 2 workers, got %d", nw);
	run_compression(kv, nw);
	run_states(kv, argv[1]);
	ret = psched_kvstore_destroy(kv);
	CHECK(!ret, "destroy: %s", psched_errmsg());
	printf("optim_c rank %d: ok\n", rank);
	return 0;
}
