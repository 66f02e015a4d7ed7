// SPDX-License-Identifier: MIT
/*
 * A request with a callback is bounded by the request timeout too: worker
 * rank 0 pushpulls a key that rank 1 never pushes, with a callback and no
 * psched_wait(); the callback must come with -ETIMEDOUT (not never).
 * Rank 1 only waits for rank 0 to finish (barrier).  See test_failure.sh.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "psched.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int result = 1; /* 1: no callback yet */

static void on_done(int err, uint64_t req, void *arg)
{
	(void)req;
	(void)arg;
	pthread_mutex_lock(&lock);
	result = err;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

int main(void)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *n;
	float v[256] = { 0 }, out[256];
	uint64_t key = 5, len = sizeof(v), req;
	const void *pv = v;
	void *qv = out;
	struct timespec ts;
	int rc = -ETIMEDOUT; /* rank 1 has nothing to check */
	char timeout_s[32];

	if (psched_cfg_create(&cfg) || psched_cfg_from_env(cfg) ||
	    psched_cfg_get(cfg, "request-timeout", timeout_s,
			   sizeof(timeout_s)) ||
	    psched_node_create(cfg, &n)) {
		fprintf(stderr, "cb_timeout: %s\n", psched_errmsg());
		return 1;
	}
	psched_cfg_destroy(cfg);
	if (psched_node_rank(n) == 0) {
		if (psched_pushpull(n, &key, 1, &pv, &qv, &len, PSCHED_F32, 0,
				    on_done, NULL, &req)) {
			fprintf(stderr, "cb_timeout: %s\n", psched_errmsg());
			return 1;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 3 * (time_t)(strtod(timeout_s, NULL) + 1);
		pthread_mutex_lock(&lock);
		while (result == 1 &&
		       pthread_cond_timedwait(&cond, &lock, &ts) != ETIMEDOUT)
			;
		rc = result;
		pthread_mutex_unlock(&lock);
		printf("callback result %d (%s)\n", rc,
		       rc == 1 ? "never called" : psched_strerror(rc));
	}
	psched_barrier(n, PSCHED_GROUP_WORKERS, 60000);
	psched_node_destroy(n);
	return rc == -ETIMEDOUT ? 0 : 1;
}
