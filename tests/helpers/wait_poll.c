// SPDX-License-Identifier: MIT
/*
 * psched_wait() with its busy-poll (PS_POLL_US) under concurrency, as one
 * worker of a 1 server x 1 worker job (tests/integration/
 * test_wait_poll.sh): WP_WAITERS threads each run serial pushpulls of
 * their own key (one request in flight, wait, check, repeat) while one
 * more thread keeps requests with callbacks going; every pulled value
 * must be exactly the one pushed (one worker: the step's sum is its
 * push), every wait must return 0 within its timeout (a completion lost
 * between the poll and the sleep shows as a timeout), every callback
 * must run once.  Then one thread alone does the same (its request is
 * the only one in flight, so each wait polls, and with PS_CALLER_RX=1,
 * the default, reads its answer itself: over tcp with PS_POLL_US=0 some
 * of those waits must have, and none otherwise).  Prints "wait_poll: ok
 * <requests>".  Sanitizer
 * builds run it too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

#define CHECK_WHO "wait_poll"
#include "check.h"

#define WP_WAITERS    4
#define WP_ITERS      300
#define WP_CB_ITERS   300
#define WP_ELEMS      1024 /* 4 KiB of float32 */
#define WP_TIMEOUT_MS 20000

static struct psched_node *node;

struct waiter {
	unsigned idx;
	unsigned done;
};

static void *waiter_main(void *arg)
{
	struct waiter *me = arg;
	float *in = malloc(WP_ELEMS * sizeof(float));
	float *out = malloc(WP_ELEMS * sizeof(float));
	uint64_t key = 100 + me->idx, len = WP_ELEMS * sizeof(float), req;
	const void *pv = in;
	void *qv = out;
	unsigned i, j;
	int ret;

	CHECK(in && out, "no memory");
	for (i = 0; i < WP_ITERS; i++) {
		for (j = 0; j < WP_ELEMS; j++)
			in[j] = (float)(me->idx * 100000 + i * 10 + j % 7);
		memset(out, 0xff, len);
		ret = psched_pushpull(node, &key, 1, &pv, &qv, &len, PSCHED_F32,
				      0, NULL, NULL, &req);
		CHECK(!ret, "pushpull of key %llu, iteration %u: %s",
		      (unsigned long long)key, i, psched_errmsg());
		ret = psched_wait(node, req, WP_TIMEOUT_MS);
		CHECK(!ret, "wait for key %llu, iteration %u: %s",
		      (unsigned long long)key, i, psched_errmsg());
		for (j = 0; j < WP_ELEMS; j++)
			CHECK(out[j] == in[j],
			      "key %llu iteration %u element %u: pulled %g, "
			      "pushed %g",
			      (unsigned long long)key, i, j, (double)out[j],
			      (double)in[j]);
		me->done++;
	}
	free(in);
	free(out);
	return NULL;
}

/* The callback thread's state: one request at a time. */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cb_cond = PTHREAD_COND_INITIALIZER;
static unsigned cb_fired;
static int cb_err;

static void on_done(int err, uint64_t req, void *arg)
{
	(void)req;
	(void)arg;
	pthread_mutex_lock(&cb_lock);
	cb_fired++;
	if (err && !cb_err)
		cb_err = err;
	pthread_cond_signal(&cb_cond);
	pthread_mutex_unlock(&cb_lock);
}

static void *callback_main(void *arg)
{
	static float in[WP_ELEMS], out[WP_ELEMS];
	uint64_t key = 99, len = sizeof(in), req;
	const void *pv = in;
	void *qv = out;
	struct timespec ts;
	unsigned i, want;
	int ret;

	(void)arg;
	for (i = 0; i < WP_CB_ITERS; i++) {
		in[0] = (float)i;
		ret = psched_pushpull(node, &key, 1, &pv, &qv, &len, PSCHED_F32,
				      0, on_done, NULL, &req);
		CHECK(!ret, "pushpull with callback %u: %s", i,
		      psched_errmsg());
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WP_TIMEOUT_MS / 1000;
		want = i + 1;
		pthread_mutex_lock(&cb_lock);
		while (cb_fired < want &&
		       pthread_cond_timedwait(&cb_cond, &cb_lock, &ts) !=
			       ETIMEDOUT)
			;
		CHECK(cb_fired == want,
		      "callback of request %u: fired %u times in all, "
		      "expected %u within %d ms",
		      i, cb_fired, want, WP_TIMEOUT_MS);
		CHECK(!cb_err, "callback %u: %s", i, psched_strerror(cb_err));
		pthread_mutex_unlock(&cb_lock);
		CHECK(out[0] == (float)i, "callback request %u pulled %g", i,
		      (double)out[0]);
	}
	return NULL;
}

int main(void)
{
	struct psched_cfg *cfg = NULL;
	struct psched_stats s0, s1;
	struct waiter w[WP_WAITERS];
	pthread_t th[WP_WAITERS + 1];
	unsigned i, total = 0;
	char caller_rx[8], poll_us[16], transport[16];
	bool rx;

	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_get(cfg, "caller-rx", caller_rx,
				      sizeof(caller_rx)) &&
		      !psched_cfg_get(cfg, "poll-us", poll_us,
				      sizeof(poll_us)) &&
		      !psched_cfg_get(cfg, "transport", transport,
				      sizeof(transport)),
	      "%s", psched_errmsg());
	CHECK(!psched_node_create(cfg, &node), "%s", psched_errmsg());
	psched_cfg_destroy(cfg);
	for (i = 0; i < WP_WAITERS; i++) {
		w[i] = (struct waiter){ .idx = i };
		CHECK(!pthread_create(&th[i], NULL, waiter_main, &w[i]),
		      "thread");
	}
	CHECK(!pthread_create(&th[WP_WAITERS], NULL, callback_main, NULL),
	      "thread");
	for (i = 0; i <= WP_WAITERS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < WP_WAITERS; i++) {
		CHECK(w[i].done == WP_ITERS, "waiter %u finished %u of %u", i,
		      w[i].done, WP_ITERS);
		total += w[i].done;
	}
	CHECK(cb_fired == WP_CB_ITERS, "callbacks fired %u, expected %u",
	      cb_fired, WP_CB_ITERS);
	/* Then one waiter alone: its request is the only one in flight,
	 * so every wait takes the polling path. */
	w[0] = (struct waiter){ .idx = WP_WAITERS };
	psched_node_stats(node, &s0);
	waiter_main(&w[0]);
	psched_node_stats(node, &s1);
	CHECK(w[0].done == WP_ITERS, "lone waiter finished %u of %u", w[0].done,
	      WP_ITERS);
	total += w[0].done;
	s1.caller_rx_waits -= s0.caller_rx_waits;
	/* Only over tcp (shm does not let the caller read) and without
	 * PS_POLL_US (its waits poll instead). */
	rx = !strcmp(caller_rx, "1") && !strcmp(poll_us, "0") &&
	     !strcmp(transport, "tcp");
	CHECK(rx ? s1.caller_rx_waits > 0 : !s1.caller_rx_waits,
	      "PS_CALLER_RX=%s: %llu of the lone waiter's %u waits read their "
	      "answer on its thread",
	      caller_rx, (unsigned long long)s1.caller_rx_waits, WP_ITERS);
	psched_barrier(node, PSCHED_GROUP_WORKERS, WP_TIMEOUT_MS);
	psched_node_destroy(node);
	printf("wait_poll: ok %u (PS_POLL_US=%s); lone waits read by the "
	       "caller: %llu of %u\n",
	       total + cb_fired, poll_us,
	       (unsigned long long)s1.caller_rx_waits, WP_ITERS);
	return 0;
}
