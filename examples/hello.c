/* SPDX-License-Identifier: MIT */
/*
 * hello: one worker of a psched job pushes a gradient and pulls the sum.
 * Worker r pushes r + 1 into every element of key 7, so with W workers
 * each pulls W * (W + 1) / 2.  Run it as the workers of a local job:
 *
 *	bin/psched-launch -s 1 -w 2 -- ./hello
 */
#include <stdio.h>

#include <psched.h>

#define N 4 /* floats in the key */

static int fail(const char *what, int err)
{
	fprintf(stderr, "hello: %s: %s\n", what,
		*psched_errmsg() ? psched_errmsg() : psched_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *node;
	float grad[N], weight[N] = { 0 };
	const void *in = grad, *init = weight;
	void *out = weight;
	uint64_t key = 7, len = sizeof(grad), req;
	float want;
	int ret, i;

	ret = psched_cfg_create(&cfg); /* every option's default */
	if (!ret)
		ret = psched_cfg_from_env(cfg); /* DMLC_* and PS_* variables */
	if (!ret)
		ret = psched_cfg_parse_args(cfg, &argc, argv, false);
	if (!ret)
		ret = psched_cfg_set(cfg, "role", "worker");
	if (ret == 1) /* --help */
		psched_cfg_usage_role(stdout, PSCHED_ROLE_WORKER);
	if (!ret) /* returns once the job is up; cfg was copied */
		ret = psched_node_create(cfg, &node);
	psched_cfg_destroy(cfg);
	if (ret == 1)
		return 0;
	if (ret)
		return fail("options or join", ret);

	/* Collective: every worker declares the key, rank 0's zeros win. */
	ret = psched_keys_init(node, &key, 1, &init, &len, PSCHED_F32, 0);
	for (i = 0; i < N; i++)
		grad[i] = psched_node_rank(node) + 1;
	if (!ret)
		ret = psched_push(node, &key, 1, &in, &len, PSCHED_F32, 0, NULL,
				  NULL, &req);
	if (!ret)
		ret = psched_wait(node, req, 0);
	if (!ret) /* sees this worker's push, summed with the others' */
		ret = psched_pull(node, &key, 1, &out, &len, PSCHED_F32, 0,
				  NULL, NULL, &req);
	if (!ret)
		ret = psched_wait(node, req, 0);
	if (ret) {
		fail("push/pull", ret);
		psched_node_destroy(node);
		return 1;
	}

	want = psched_num_workers(node) * (psched_num_workers(node) + 1) / 2.0f;
	printf("worker %d of %u: pulled %g, want %g\n", psched_node_rank(node),
	       psched_num_workers(node), weight[0], want);
	for (i = 0; i < N; i++)
		if (weight[i] != want)
			ret = 1;
	/* A worker leaves: it tells the scheduler and waits for shutdown. */
	if (psched_node_destroy(node))
		return fail("leave", 0);
	return ret;
}
