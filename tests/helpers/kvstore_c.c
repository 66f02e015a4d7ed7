// SPDX-License-Identifier: MIT
/*
 * The C KVStore (include/psched/kvstore.h) as a dist_sync worker in a real
 * job (tests/integration/test_kvstore_c.sh, 2 servers x 2 workers): init,
 * asynchronous push / pull / pushpull with MXNet priorities (extremes
 * included), multi-key calls, two threads waiting on the same requests at
 * once, refusals before anything is sent, set_optimizer, destroy.  Run
 * one copy per worker; sanitizer builds run it too.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched/kvstore.h"

#define CHECK_WHO "kvstore_c rank %d", rank
#include "check.h"

#define NKEYS 6
#define NELEM 20000

static int rank = -1;

struct waiter {
	struct psched_kvstore *kv;
	const uint64_t *keys;
	int ret;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->ret = psched_kvstore_wait(w->kv, w->keys, NKEYS);
	return NULL;
}

static void check_sum(const float *v, float want, const char *what)
{
	int i;

	for (i = 0; i < NELEM; i++)
		CHECK(v[i] == want, "%s: element %d is %g, want %g", what, i,
		      v[i], want);
}

int main(void)
{
	static float push[NKEYS][NELEM], out[NKEYS][NELEM];
	uint64_t keys[NKEYS], lens[NKEYS], small = 8;
	const void *pv[NKEYS];
	void *ov[NKEYS];
	struct psched_kvstore *kv;
	struct psched_optimizer opt;
	struct waiter w[2];
	pthread_t th[2];
	int i, j, step, nw;
	int prio[3] = { INT_MIN, INT_MAX, 0 };

	CHECK(!psched_kvstore_create("dist_sync", NULL, &kv), "%s",
	      psched_errmsg());
	rank = psched_kvstore_rank(kv);
	nw = psched_kvstore_num_workers(kv);
	CHECK(nw == 2, "num_workers %d", nw);
	CHECK(!strcmp(psched_kvstore_type(kv), "dist_sync"), "type");
	for (i = 0; i < NKEYS; i++) {
		keys[i] = 100 + (uint64_t)i;
		lens[i] = sizeof(push[i]);
		pv[i] = push[i];
		ov[i] = out[i];
	}
	CHECK(!psched_kvstore_init(kv, keys, NKEYS, pv, lens, PSCHED_F32), "%s",
	      psched_errmsg());
	CHECK(psched_kvstore_pull(kv, keys, 1, ov, &small, PSCHED_F32, 0) ==
		      PSCHED_ESIZE,
	      "small buffer");
	CHECK(psched_kvstore_push(kv, keys, 1, pv, lens, PSCHED_F64, 0) ==
		      -EINVAL,
	      "wrong dtype");
	for (step = 1; step <= 6; step++) {
		for (i = 0; i < NKEYS; i++)
			for (j = 0; j < NELEM; j++)
				push[i][j] = (float)((rank + 1) * step + i);
		/* One multi-key push, then per-key pulls by priority. */
		CHECK(!psched_kvstore_push(kv, keys, NKEYS, pv, lens,
					   PSCHED_F32, prio[step % 3]),
		      "%s", psched_errmsg());
		for (i = 0; i < NKEYS; i++)
			CHECK(!psched_kvstore_pull(kv, &keys[i], 1, &ov[i],
						   &lens[i], PSCHED_F32, -i),
			      "%s", psched_errmsg());
		/* Two threads wait on the same requests. */
		for (i = 0; i < 2; i++) {
			w[i].kv = kv;
			w[i].keys = keys;
			CHECK(!pthread_create(&th[i], NULL, wait_thread, &w[i]),
			      "thread");
		}
		for (i = 0; i < 2; i++) {
			pthread_join(th[i], NULL);
			CHECK(!w[i].ret, "wait: %s", psched_errmsg());
		}
		for (i = 0; i < NKEYS; i++)
			check_sum(out[i], (float)(3 * step + 2 * i), "pull");
	}
	psched_optimizer_init(&opt);
	opt.learning_rate = 0.5;
	opt.rescale_grad = 0.5;
	CHECK(!psched_kvstore_set_optimizer(kv, &opt), "%s", psched_errmsg());
	/* out[0] holds 3*6 = 18; sgd: 18 - 0.5 * 0.5 * (1 + 2) = 17.25 */
	for (j = 0; j < NELEM; j++)
		push[0][j] = (float)(rank + 1);
	CHECK(!psched_kvstore_pushpull(kv, keys, 1, pv, ov, lens, PSCHED_F32,
				       7),
	      "%s", psched_errmsg());
	CHECK(!psched_kvstore_wait(kv, keys, 1), "%s", psched_errmsg());
	check_sum(out[0], 17.25f, "sgd");
	CHECK(psched_kvstore_set_updater(kv, NULL, NULL) == -EOPNOTSUPP,
	      "updater on a dist store");
	CHECK(!psched_kvstore_barrier(kv), "%s", psched_errmsg());
	CHECK(!psched_kvstore_destroy(kv), "%s", psched_errmsg());
	printf("kvstore_c rank %d: ok\n", rank);
	return 0;
}
