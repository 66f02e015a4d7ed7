// SPDX-License-Identifier: MIT
/*
 * A worker that misuses the API inside a real 2-worker cluster and checks
 * each refusal, then proves the cluster still computes exact sums on the
 * same connections.  Run one copy per worker (see test_misuse.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

#define CHECK_WHO "misuse rank %d", rank
#include "check.h"

static int rank = -1;

static int push_wait(struct psched_node *n, uint64_t key, const void *v,
		     uint64_t len)
{
	uint64_t req;
	int ret = psched_push(n, &key, 1, &v, &len, PSCHED_F32, 0, NULL, NULL,
			      &req);

	return ret ? ret : psched_wait(n, req, 0);
}

int main(void)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *n;
	float small[4] = { 1, 2, 3, 4 }, big[1024], out[1024];
	uint64_t k1 = 1, len1 = sizeof(big), req, key;
	const void *pv = big;
	void *qv = out;
	int ret, step, i;

	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	ret = psched_node_create(cfg, &n);
	psched_cfg_destroy(cfg);
	CHECK(!ret, "create: %s", psched_errmsg());
	rank = psched_node_rank(n);
	CHECK(psched_num_workers(n) == 2, "needs 2 workers");

	/* Refused locally, before anything is sent. */
	key = 77;
	ret = psched_pull(n, &key, 1, &qv, &len1, PSCHED_F32, 0, NULL, NULL,
			  &req);
	CHECK(ret == PSCHED_EUNKNOWNKEY && strstr(psched_errmsg(), "77"),
	      "pull of unknown key: %d %s", ret, psched_errmsg());
	key = 78;
	len1 = 6;
	ret = psched_push(n, &key, 1, &pv, &len1, PSCHED_F32, 0, NULL, NULL,
			  &req);
	CHECK(ret == PSCHED_ESIZE, "6-byte f32 push: %d", ret);
	len1 = sizeof(big);
	ret = psched_wait(n, 123456789, 100);
	CHECK(ret == -ENOENT, "wait on a bogus id: %d", ret);

	/* Refused by the server: key 2 is 16 bytes (rank 0), rank 1 pushes
	 * 8 bytes of it. */
	if (rank == 0)
		CHECK(!push_wait(n, 2, small, 16), "%s", psched_errmsg());
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");
	if (rank == 1) {
		ret = push_wait(n, 2, small, 8);
		CHECK(ret == PSCHED_ESIZE, "wrong-size push: %d %s", ret,
		      psched_errmsg());
		CHECK(strstr(psched_errmsg(), "key 2") &&
			      strstr(psched_errmsg(), "server"),
		      "message names key and server: %s", psched_errmsg());
		printf("misuse rank 1: refused as expected: %s\n",
		       psched_errmsg());
	}
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");

	/* The same connections still aggregate exactly. */
	CHECK(!psched_keys_init(n, &k1, 1, NULL, &len1, PSCHED_F32, 0),
	      "init: %s", psched_errmsg());
	for (step = 1; step <= 20; step++) {
		for (i = 0; i < 1024; i++)
			big[i] = (float)(i * (rank + 1) + step);
		ret = psched_pushpull(n, &k1, 1, &pv, &qv, &len1, PSCHED_F32, 0,
				      NULL, NULL, &req);
		CHECK(!ret && !psched_wait(n, req, 0), "pushpull: %s",
		      psched_errmsg());
		for (i = 0; i < 1024; i++)
			CHECK(out[i] == (float)(i * 3 + 2 * step),
			      "step %d elem %d: %g", step, i, out[i]);
	}
	printf("misuse rank %d: 20 exact steps after the refusals\n", rank);
	CHECK(!psched_node_destroy(n), "destroy: %s", psched_errmsg());
	return 0;
}
