// SPDX-License-Identifier: MIT
/*
 * A worker that runs into a server's limits or disagrees with the other
 * worker about a key, inside a real 2-worker cluster, and checks that
 * each such request is refused on its own (a message naming the key, the
 * step or both lengths, and the server), quickly, and that the job then
 * goes on over the same connections.  One copy per worker; the scenario
 * is argv[1] (test_limits.sh sets the servers' limits):
 *
 *   flood N      rank 0 pushes key 5 (16 MiB) for steps 1..12 while rank 1
 *                holds step 1 back: steps 2.. are early and held by the
 *                server until PS_MAX_PARKED_BYTES (or PS_MAX_STEPS_AHEAD)
 *                is reached, the rest are refused.  N: pushes expected to
 *                be held.  Reason words expected in argv[3].
 *   oversize     each rank pushes a tensor over the servers'
 *                PS_MAX_TENSOR_BYTES (the workers' limit is higher).
 *   initconflict the ranks initialise key 30 with 4096 and 8192 bytes.
 *   ppconflict   the ranks pushpull key 40 first with 2 MiB and 3 MiB.
 *
 * After each (but initconflict, which fails both workers for good) both
 * ranks run exact pushpull steps on a fresh key.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "psched.h"

#define CHECK_WHO "limits rank %d", rank
#include "check.h"

#define MIB (1u << 20)

static int rank = -1;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int push_wait(struct psched_node *n, uint64_t key, const void *v,
		     uint64_t len)
{
	uint64_t req = 0;
	int ret = psched_push(n, &key, 1, &v, &len, PSCHED_F32, 0, NULL, NULL,
			      &req);

	return ret ? ret : psched_wait(n, req, 0);
}

static int pushpull_wait(struct psched_node *n, uint64_t key, const void *v,
			 void *out, uint64_t len)
{
	uint64_t req = 0;
	int ret = psched_pushpull(n, &key, 1, &v, &out, &len, PSCHED_F32, 0,
				  NULL, NULL, &req);

	return ret ? ret : psched_wait(n, req, 0);
}

/* Every word of the space-separated @words is in @msg. */
static void check_words(const char *what, const char *msg, const char *words)
{
	char buf[512], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", words);
	for (tok = strtok_r(buf, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save))
		CHECK(strstr(msg, tok), "%s: '%s' not in the message: %s", what,
		      tok, msg);
}

/* The job goes on: exact sums on a fresh key over the same connections. */
static void exact_steps(struct psched_node *n, uint64_t key)
{
	float in[1024], out[1024];
	int step, i;

	for (step = 1; step <= 5; step++) {
		for (i = 0; i < 1024; i++)
			in[i] = (float)(i * (rank + 1) + step);
		CHECK(!pushpull_wait(n, key, in, out, sizeof(in)),
		      "pushpull of key %llu after the refusals: %s",
		      (unsigned long long)key, psched_errmsg());
		for (i = 0; i < 1024; i++)
			CHECK(out[i] == (float)(i * 3 + 2 * step),
			      "step %d elem %d: %g", step, i, out[i]);
	}
	printf("limits rank %d: 5 exact steps after the refusals\n", rank);
}

/* Callback results of rank 0's flood, by step. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int err[13];
	char msg[13][512];
	bool done[13];
	int ndone;
} fl = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void flood_done(int err, uint64_t req, void *arg)
{
	int step = (int)(intptr_t)arg;

	(void)req;
	pthread_mutex_lock(&fl.lock);
	fl.err[step] = err;
	snprintf(fl.msg[step], sizeof(fl.msg[step]), "%s",
		 err ? psched_errmsg() : "");
	fl.done[step] = true;
	fl.ndone++;
	pthread_cond_broadcast(&fl.cond);
	pthread_mutex_unlock(&fl.lock);
}

/* Wait (bounded) until @count flood pushes are answered. */
static void flood_wait(int count)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	pthread_mutex_lock(&fl.lock);
	while (fl.ndone < count)
		if (pthread_cond_timedwait(&fl.cond, &fl.lock, &ts))
			break;
	CHECK(fl.ndone >= count, "only %d of %d flood pushes answered",
	      fl.ndone, count);
	pthread_mutex_unlock(&fl.lock);
}

/*
 * Rank 0 pushes key 5 for steps 1..12 at once while rank 1 holds step 1
 * back: step 1 applies, the next ones are held until a limit refuses the
 * rest; every one is answered at once.  Then rank 1 pushes the held steps
 * too.
 */
static void flood(struct psched_node *n, int want_held, const char *words)
{
	uint64_t len = 16 * MIB, key = 5, req;
	float *v = calloc(1, len);
	const void *pv = v;
	int step, held = 0, refused = 0, first = 0;

	CHECK(v, "no memory");
	if (rank == 0) {
		for (step = 1; step <= 12; step++)
			CHECK(!psched_push(n, &key, 1, &pv, &len, PSCHED_F32, 0,
					   flood_done, (void *)(intptr_t)step,
					   &req),
			      "push: %s", psched_errmsg());
		/* Step 1, the held pushes (on arrival) and the refusals are
		 * all answered at once. */
		flood_wait(12);
		for (step = 1; step <= 12; step++) {
			if (!fl.done[step])
				continue;
			CHECK(step > 1 || !fl.err[1], "step 1 refused: %s",
			      fl.msg[1]);
			if (step > 1 && fl.err[step] && !refused++)
				first = step;
		}
		printf("limits rank 0: flood: %d pushes refused at once; first "
		       "refusal (step %d): %s\n",
		       refused, first, first ? fl.msg[first] : "");
		CHECK(refused == 11 - want_held, "refused %d, expected %d",
		      refused, 11 - want_held);
		CHECK(first == 2 + want_held, "first refusal at step %d",
		      first);
		check_words("flood refusal", fl.msg[first], words);
	}
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier: %s",
	      psched_errmsg());
	/* Rank 1 catches up: each of its steps lets one held push apply. */
	if (rank == 1)
		for (step = 1; step <= 1 + want_held; step++)
			CHECK(!push_wait(n, 5, v, len), "rank 1 step %d: %s",
			      step, psched_errmsg());
	if (rank == 0) {
		for (step = 2; step <= 1 + want_held; step++) {
			CHECK(!fl.err[step], "held step %d failed: %s", step,
			      fl.msg[step]);
			held++;
		}
		printf("limits rank 0: flood: %d pushes held\n", held);
	}
	free(v);
	exact_steps(n, 6);
}

static void oversize(struct psched_node *n)
{
	uint64_t len = 4 * MIB;
	float *v = calloc(1, len);
	double t0 = now_s();
	int ret;

	CHECK(v, "no memory");
	ret = push_wait(n, 20 + (uint64_t)rank, v, len);
	CHECK(ret == PSCHED_ESIZE, "over-size push: %d %s", ret,
	      psched_errmsg());
	check_words("over-size refusal", psched_errmsg(),
		    "PS_MAX_TENSOR_BYTES 4194304 1048576 server");
	CHECK(strstr(psched_errmsg(), rank ? "key 21" : "key 20"), "%s",
	      psched_errmsg());
	printf("limits rank %d: over-size refused after %.2f s: %s\n", rank,
	       now_s() - t0, psched_errmsg());
	free(v);
	exact_steps(n, 22);
}

/* Both conflicts: rank 0 uses @len0 bytes, rank 1 @len1. */
static void conflict(struct psched_node *n, bool init, uint64_t len0,
		     uint64_t len1)
{
	uint64_t key = init ? 30 : 40, len = rank ? len1 : len0;
	float *v = calloc(1, len), *out = calloc(1, len);
	const void *pv = v;
	double t0, dt;
	char words[128];
	int ret;

	CHECK(v && out, "no memory");
	/* Both start together, so that each is in the middle of its call
	 * when the other's arrives. */
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier: %s",
	      psched_errmsg());
	t0 = now_s();
	if (init)
		ret = psched_keys_init(n, &key, 1, &pv, &len, PSCHED_F32, 0);
	else
		ret = pushpull_wait(n, key, v, out, len);
	dt = now_s() - t0;
	CHECK(ret == PSCHED_ESIZE, "%s with %llu bytes: %d %s",
	      init ? "init" : "pushpull", (unsigned long long)len, ret,
	      psched_errmsg());
	snprintf(words, sizeof(words), "key %llu %llu %llu worker",
		 (unsigned long long)key, (unsigned long long)len0,
		 (unsigned long long)len1);
	check_words("conflict", psched_errmsg(), words);
	CHECK(!strstr(psched_errmsg(), "timed out"), "%s", psched_errmsg());
	printf("limits rank %d: %s conflict failed after %.2f s: %s\n", rank,
	       init ? "init" : "pushpull", dt, psched_errmsg());
	free(v);
	free(out);
	if (!init)
		exact_steps(n, 41);
}

int main(int argc, char **argv)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *n;
	const char *mode = argc > 1 ? argv[1] : "";
	int ret;

	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	ret = psched_node_create(cfg, &n);
	psched_cfg_destroy(cfg);
	CHECK(!ret, "create: %s", psched_errmsg());
	rank = psched_node_rank(n);
	CHECK(psched_num_workers(n) == 2, "needs 2 workers");
	if (!strcmp(mode, "flood") && argc > 3)
		flood(n, atoi(argv[2]), argv[3]);
	else if (!strcmp(mode, "oversize"))
		oversize(n);
	else if (!strcmp(mode, "initconflict"))
		conflict(n, true, 4096, 8192);
	else if (!strcmp(mode, "ppconflict"))
		conflict(n, false, 2 * MIB, 3 * MIB);
	else
		CHECK(0, "usage: limits flood N WORDS | oversize | "
			 "initconflict | ppconflict");
	ret = psched_node_destroy(n);
	/* After an init conflict the node has failed for good. */
	CHECK(!ret || !strcmp(mode, "initconflict"), "destroy: %s",
	      psched_errmsg());
	return 0;
}
