// SPDX-License-Identifier: MIT
/*
 * A worker that issues a fixed sequence of requests back to back, waits
 * for all of them, checks what it pulled, and writes the library's
 * per-chunk timeline: test_sched.sh checks the order and the credit from
 * it.  Usage (inside a cluster, DMLC_* set):
 *   sched_probe [--pushpull] [--steps N] --out FILE KEY:BYTES:PRIO...
 * Requests go out in argument order within a step.  Values pushed by
 * worker r for key k at step s are (k + s) * (r + 1) at every element, so
 * the aggregate is (k + s) * W(W+1)/2, exact in float32.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "psched.h"

#define MAXREQ 64

struct probe_req {
	uint64_t key;
	uint64_t bytes;
	int prio;
	float *push;
	float *pull;
};

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int die(const char *what)
{
	fprintf(stderr, "sched_probe: %s: %s\n", what, psched_errmsg());
	return 1;
}

static int parse_reqs(int argc, char **argv, int first, struct probe_req *r)
{
	int i, n = 0;

	for (i = first; i < argc && n < MAXREQ; i++, n++) {
		char *c1 = strchr(argv[i], ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			return -1;
		*c1 = *c2 = '\0';
		r[n].key = strtoull(argv[i], NULL, 10);
		if (psched_parse_bytes(c1 + 1, &r[n].bytes) || r[n].bytes % 4 ||
		    !r[n].bytes)
			return -1;
		r[n].prio = atoi(c2 + 1);
		r[n].push = malloc(r[n].bytes);
		r[n].pull = malloc(r[n].bytes);
		if (!r[n].push || !r[n].pull)
			return -1;
	}
	return n;
}

static int check_pull(const struct probe_req *r, unsigned nw, uint64_t step)
{
	float want = (float)(r->key + step) * (float)(nw * (nw + 1) / 2);
	uint64_t j;

	for (j = 0; j < r->bytes / 4; j++) {
		if (r->pull[j] != want) {
			fprintf(stderr,
				"sched_probe: key %llu step %llu element %llu "
				"is %g, want %g\n",
				(unsigned long long)r->key,
				(unsigned long long)step, (unsigned long long)j,
				r->pull[j], want);
			return -1;
		}
	}
	return 0;
}

static int run_step(struct psched_node *node, struct probe_req *r, int n,
		    bool pushpull, uint64_t step)
{
	uint64_t ids[MAXREQ];
	unsigned nw = psched_num_workers(node);
	float v;
	int i, ret;

	for (i = 0; i < n; i++) {
		uint64_t j;

		v = (float)(r[i].key + step) *
		    (float)(psched_node_rank(node) + 1);
		for (j = 0; j < r[i].bytes / 4; j++)
			r[i].push[j] = v;
	}
	/* Back to back, so later requests find the earlier ones queued. */
	for (i = 0; i < n; i++) {
		const void *pv = r[i].push;
		void *qv = r[i].pull;

		ret = pushpull ? psched_pushpull(node, &r[i].key, 1, &pv, &qv,
						 &r[i].bytes, PSCHED_F32,
						 r[i].prio, NULL, NULL, &ids[i])
			       : psched_push(node, &r[i].key, 1, &pv,
					     &r[i].bytes, PSCHED_F32, r[i].prio,
					     NULL, NULL, &ids[i]);
		if (ret)
			return die("issue");
		if (step == 1)
			printf("issued key=%llu us=%llu\n",
			       (unsigned long long)r[i].key,
			       (unsigned long long)mono_us());
	}
	for (i = 0; i < n; i++)
		if (psched_wait(node, ids[i], 0))
			return die("wait");
	for (i = 0; i < n && !pushpull; i++) {
		void *qv = r[i].pull;

		if (psched_pull(node, &r[i].key, 1, &qv, &r[i].bytes,
				PSCHED_F32, 0, NULL, NULL, &ids[0]) ||
		    psched_wait(node, ids[0], 0))
			return die("pull");
	}
	for (i = 0; i < n; i++)
		if (check_pull(&r[i], nw, step))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct probe_req r[MAXREQ];
	struct psched_stats st;
	struct psched_cfg *cfg = NULL;
	struct psched_node *node;
	const char *out = NULL;
	bool pushpull = false;
	unsigned steps = 1, s;
	int i = 1, n, ret;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--pushpull"))
			pushpull = true;
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else
			break;
	}
	n = parse_reqs(argc, argv, i, r);
	if (n <= 0 || !out) {
		fprintf(stderr, "usage: sched_probe [--pushpull] [--steps N] "
				"--out FILE KEY:BYTES:PRIO...\n");
		return 2;
	}
	if (psched_cfg_create(&cfg) || psched_cfg_from_env(cfg) ||
	    psched_cfg_set(cfg, "role", "worker"))
		return die("env");
	ret = psched_node_create(cfg, &node);
	psched_cfg_destroy(cfg);
	if (ret)
		return die("create");
	if (psched_timeline_start(node, 0))
		return die("timeline");
	for (s = 1; s <= steps; s++)
		if (run_step(node, r, n, pushpull, s))
			return 1;
	if (psched_timeline_write(node, out))
		return die("timeline write");
	psched_node_stats(node, &st);
	printf("stats chunks=%llu max_in_flight=%llu credit=%llu epoch=%u\n",
	       (unsigned long long)st.chunks_started,
	       (unsigned long long)st.max_in_flight_bytes,
	       (unsigned long long)st.credit_bytes, st.config_epoch);
	for (i = 0; i < n; i++) {
		free(r[i].push);
		free(r[i].pull);
	}
	return psched_node_destroy(node) ? die("destroy") : 0;
}
