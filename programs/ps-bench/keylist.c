// SPDX-License-Identifier: MIT
/*
 * ps-bench --keys-per-request N: dmlc ps-lite's test_kv_app_benchmark
 * workload on key lists (docs/c-api.md "Key lists").  Each worker pushes N keys
 * of one float32 each in one key-list push (psched_request()), waits, then
 * pulls them back in one key-list pull, timing each call; key i of worker r is
 * (2^64-1) / N * i + r and its value rand() % 1000 as there (so with W
 * workers the servers hold W*N keys).  Round 0 is cold (the servers create
 * the keys); rounds 1.. are warm.  Every pull is checked: each key is
 * pushed by one worker, so it must come back exactly.
 *
 * A worker prints "KL rank round push_ms pull_ms" per round; the launcher
 * takes the slowest worker of each round and prints the cold round and the
 * median of the warm ones.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int kl_call(struct psched_node *node, bool push, size_t n,
		   const uint64_t *keys, float *v, double *ms)
{
	const struct psched_request rq = {
		.op = push ? PSCHED_OP_PUSH : PSCHED_OP_PULL,
		.family = PSCHED_FAMILY_KEYLIST,
		.nkeys = n,
		.keys = keys,
		.elem = 1,
		.push_buf = push ? v : NULL,
		.pull_buf = push ? NULL : v,
		.dtype = PSCHED_F32,
	};
	double t0 = bench_now_s();
	uint64_t req;
	int ret;

	ret = psched_request(node, &rq, &req);
	if (!ret)
		ret = psched_wait(node, req, 0);
	*ms = (bench_now_s() - t0) * 1e3;
	return ret;
}

int bench_kl_worker(struct psched_node *node, const struct bopts *o)
{
	size_t n = o->kl_keys, i, bad = n;
	int rank = psched_node_rank(node), ret = 0;
	uint64_t *keys = malloc(n * sizeof(*keys));
	float *vals = malloc(n * sizeof(*vals));
	float *out = malloc(n * sizeof(*out));
	double push_ms, pull_ms;
	unsigned r;

	if (!keys || !vals || !out) {
		fprintf(stderr, "ps-bench worker %d: no memory for %zu keys\n",
			rank, n);
		ret = -ENOMEM;
		goto out;
	}
	srand((unsigned)rank + 7);
	for (i = 0; i < n; i++) {
		keys[i] = UINT64_MAX / n * i + (uint64_t)rank;
		vals[i] = (float)(rand() % 1000);
	}
	for (r = 0; r < o->runs && !ret; r++) {
		ret = psched_barrier(node, PSCHED_GROUP_WORKERS, 0);
		if (!ret)
			ret = kl_call(node, true, n, keys, vals, &push_ms);
		if (!ret) {
			memset(out, 0, n * sizeof(*out));
			ret = kl_call(node, false, n, keys, out, &pull_ms);
		}
		if (ret) {
			fprintf(stderr, "ps-bench worker %d: round %u: %s\n",
				rank, r, psched_errmsg());
			break;
		}
		for (i = 0; i < n && bad == n; i++)
			if (out[i] != vals[i])
				bad = i;
		if (bad != n) {
			fprintf(stderr,
				"ps-bench worker %d: round %u: key %zu pulled "
				"%g, pushed %g\n",
				rank, r, bad, (double)out[bad],
				(double)vals[bad]);
			ret = -EPROTO;
			break;
		}
		printf("KL %d %u %.3f %.3f\n", rank, r, push_ms, pull_ms);
		fflush(stdout);
	}
out:
	free(keys);
	free(vals);
	free(out);
	return ret ? 1 : 0;
}

int bench_kl_collect(const struct bopts *o, FILE **fps, unsigned nw,
		     struct bkl_result *res)
{
	char line[256];
	unsigned i, r, seen = 0;
	double pu, pl;
	int rank;

	memset(res, 0, sizeof(*res));
	for (i = 0; i < nw; i++)
		while (fgets(line, sizeof(line), fps[i])) {
			if (sscanf(line, "KL %d %u %lf %lf", &rank, &r, &pu,
				   &pl) != 4 ||
			    r >= MAX_RUNS)
				continue;
			if (pu > res->push[r])
				res->push[r] = pu;
			if (pl > res->pull[r])
				res->pull[r] = pl;
			seen++;
		}
	return seen == nw * o->runs ? 0 : -EPIPE;
}

void bench_kl_report(const struct bopts *o, const struct bkl_result *res,
		     double rss_mib)
{
	double pu[MAX_RUNS], pl[MAX_RUNS];
	unsigned r;

	printf("# key lists: %u keys x 1 float32 per request, %u servers, "
	       "%u workers (slowest worker per round)\n",
	       o->kl_keys, o->servers, o->workers);
	printf("%-8s %12s %12s\n", "round", "push_ms", "pull_ms");
	for (r = 0; r < o->runs; r++) {
		printf("%-8u %12.1f %12.1f%s\n", r, res->push[r], res->pull[r],
		       r ? "" : "  (cold: keys created)");
		pu[r] = res->push[r];
		pl[r] = res->pull[r];
	}
	if (o->runs > 1)
		printf("warm median: push %.1f ms, pull %.1f ms\n",
		       bench_median(pu + 1, o->runs - 1),
		       bench_median(pl + 1, o->runs - 1));
	printf("server max RSS: %.0f MiB\n", rss_mib);
}
