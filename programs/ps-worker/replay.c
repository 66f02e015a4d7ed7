// SPDX-License-Identifier: MIT
/*
 * Model replay (see replay.h).
 *
 * Compute is simulated by sleeping, by default: a worker process on this
 * kind of machine shares few cores with the servers and the kernel's
 * network stack, and a spinning "GPU" would steal the CPU that
 * communication needs.  A real GPU leaves the host CPU free, so sleeping
 * is the closer model.  --spin is there to compare.
 *
 * Sleeps follow a virtual clock: each layer's compute moves the clock by
 * its time and the worker sleeps until the clock (absolute deadline), so
 * timer overshoot of one layer is made up by the next and thousands of
 * short layers still add up to the profile's total.  Time blocked on a
 * pull moves the clock to "now": waiting is not compute.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"

struct rp_layer {
	uint64_t key;
	uint64_t len; /* bytes */
	float *grad;  /* pushed: zeros except the samples */
	float *buf;   /* pulled parameters */
	uint64_t req;
	uint64_t step; /* step of the request in flight */
	bool inflight;
	unsigned nsamples;
	uint64_t samples[PSD_REPLAY_SAMPLES];
	uint64_t zero_idx; /* a non-sample element, or UINT64_MAX */
	double fwd_us;
	double bwd_us;
};

struct rp {
	struct psched_node *node;
	const struct psd_replay_opts *o;
	struct psd_replay_result *res;
	struct rp_layer *l; /* one per profile layer, forward order */
	size_t n;
	unsigned rank;
	unsigned nw;
	uint64_t vclock_ns;
	double wait_s;
	uint64_t pull_waits;	/* layer pulls waited for in forwards */
	uint64_t vote_absorbed; /* see psd_replay_result.vote_absorbed */
	/* --seconds: the stop vote (key n), summed over the workers */
	uint64_t vote_key;
	uint64_t vote_len;
	float vote_out;
	float vote_in;
	uint64_t vote_req;
	uint64_t vote_step; /* step the vote in flight was cast after */
	bool vote_inflight;
};

static uint64_t rp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rp_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Integer in [-1000, 1000]: sums over any number of workers are exact. */
static float rp_value(uint64_t seed, unsigned rank, uint64_t step, uint64_t key,
		      uint64_t j)
{
	uint64_t h = rp_mix(seed ^ rp_mix(step ^ rp_mix(key ^ rp_mix(j))));

	h = rp_mix(h + rank);
	return (float)((int)(h % 2001) - 1000);
}

/* Simulated compute of @us microseconds on the virtual clock. */
static void rp_compute(struct rp *st, double us)
{
	struct timespec ts;

	st->vclock_ns += (uint64_t)(us * 1e3);
	if (st->o->spin) {
		while (rp_now_ns() < st->vclock_ns)
			;
		return;
	}
	ts.tv_sec = (time_t)(st->vclock_ns / 1000000000u);
	ts.tv_nsec = (long)(st->vclock_ns % 1000000000u);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void rp_layer_samples(struct rp_layer *l)
{
	uint64_t n = l->len / 4, cand[PSD_REPLAY_SAMPLES + 1];
	unsigned i, k;

	cand[0] = 0;
	cand[1] = n - 1;
	cand[2] = n / 3;
	cand[3] = 2 * n / 3;
	cand[4] = n / 2; /* the zero check */
	l->nsamples = 0;
	l->zero_idx = UINT64_MAX;
	for (i = 0; i <= PSD_REPLAY_SAMPLES; i++) {
		for (k = 0; k < l->nsamples; k++)
			if (l->samples[k] == cand[i])
				break;
		if (k < l->nsamples || cand[i] == l->zero_idx)
			continue;
		if (i < PSD_REPLAY_SAMPLES)
			l->samples[l->nsamples++] = cand[i];
		else
			l->zero_idx = cand[i];
	}
}

static int rp_setup(struct rp *st)
{
	const struct psd_profile *p = st->o->prof;
	size_t i;

	st->l = calloc(p->nlayers, sizeof(*st->l));
	if (!st->l)
		return -ENOMEM;
	st->n = p->nlayers;
	for (i = 0; i < p->nlayers; i++) {
		struct rp_layer *l = &st->l[i];

		psd_profile_layer_time_us(p, i, st->o->tflops, st->o->batch,
					  &l->fwd_us, &l->bwd_us);
		st->res->compute_s += (l->fwd_us + l->bwd_us) * 1e-6;
		l->key = i;
		l->len = p->layers[i].params * 4;
		if (!l->len)
			continue;
		/* calloc: the zeros rank 0 inits with.  Only the samples of
		 * @grad are ever written, so its other pages stay the shared
		 * zero page: a separate push buffer costs almost no memory,
		 * and no thread reads a buffer while another writes it. */
		l->buf = calloc(p->layers[i].params, sizeof(float));
		l->grad = calloc(p->layers[i].params, sizeof(float));
		if (!l->buf || !l->grad)
			return -ENOMEM;
		rp_layer_samples(l);
		st->res->keys++;
		st->res->bytes_per_step += l->len;
	}
	return 0;
}

static int rp_init_keys(struct rp *st)
{
	uint64_t *keys = calloc(st->n + 1, sizeof(*keys));
	uint64_t *lens = calloc(st->n + 1, sizeof(*lens));
	const void **vals = calloc(st->n + 1, sizeof(*vals));
	size_t i, k = 0;
	int ret = -ENOMEM;

	if (!keys || !lens || !vals)
		goto out;
	for (i = 0; i < st->n; i++) {
		if (!st->l[i].len)
			continue;
		keys[k] = st->l[i].key;
		lens[k] = st->l[i].len;
		vals[k++] = st->l[i].buf;
	}
	if (!st->o->steps) {
		keys[k] = st->vote_key;
		lens[k] = st->vote_len;
		vals[k++] = &st->vote_in;
	}
	ret = psched_keys_init(st->node, keys, k, vals, lens, PSCHED_F32,
			       st->o->timeout_ms);
	if (ret)
		snprintf(st->res->msg, sizeof(st->res->msg),
			 "init of %zu keys failed: %s", k, psched_errmsg());
out:
	free(keys);
	free(lens);
	free(vals);
	return ret;
}

/* Record the first failure only: later ones are its consequences. */
__attribute__((format(printf, 2, 3))) static void rp_fail(struct rp *st,
							  const char *fmt, ...)
{
	va_list ap;

	if (st->res->msg[0])
		return;
	va_start(ap, fmt);
	vsnprintf(st->res->msg, sizeof(st->res->msg), fmt, ap);
	va_end(ap);
}

static int rp_mismatch(struct rp *st, const struct rp_layer *l, uint64_t j,
		       double want)
{
	rp_fail(st,
		"MISMATCH layer %llu (%s) step %llu element %llu: got %.9g, "
		"want %.9g (the sum over %u workers; same --seed on every "
		"worker?)",
		(unsigned long long)l->key, st->o->prof->layers[l->key].name,
		(unsigned long long)l->step, (unsigned long long)j,
		(double)l->buf[j], want, st->nw);
	return PSD_REPLAY_EMISMATCH;
}

static int rp_verify(struct rp *st, struct rp_layer *l)
{
	unsigned i, r;

	for (i = 0; i < l->nsamples; i++) {
		uint64_t j = l->samples[i];
		double want = 0;

		for (r = 0; r < st->nw; r++)
			want += rp_value(st->o->seed, r, l->step, l->key, j);
		if (l->buf[j] != (float)want)
			return rp_mismatch(st, l, j, want);
	}
	if (l->zero_idx != UINT64_MAX && l->buf[l->zero_idx] != 0.0f)
		return rp_mismatch(st, l, l->zero_idx, 0);
	st->res->checked++;
	return 0;
}

/* Wait for layer @l's pull, then check it. */
static int rp_wait(struct rp *st, struct rp_layer *l)
{
	uint64_t t0;
	int ret;

	if (!l->inflight)
		return 0;
	t0 = rp_now_ns();
	ret = psched_wait(st->node, l->req, st->o->timeout_ms);
	l->inflight = false;
	if (ret) {
		rp_fail(st, "pushpull of layer %llu (%s) step %llu: %s",
			(unsigned long long)l->key,
			st->o->prof->layers[l->key].name,
			(unsigned long long)l->step, psched_errmsg());
		return ret;
	}
	st->wait_s += (double)(rp_now_ns() - t0) * 1e-9;
	if (st->vclock_ns < rp_now_ns())
		st->vclock_ns = rp_now_ns();
	return rp_verify(st, l);
}

static int rp_push(struct rp *st, struct rp_layer *l, uint64_t step)
{
	const void *pv = l->grad;
	void *qv = l->buf;
	unsigned i;
	int ret;

	for (i = 0; i < l->nsamples; i++)
		l->grad[l->samples[i]] = rp_value(st->o->seed, st->rank, step,
						  l->key, l->samples[i]);
	l->step = step;
	ret = psched_pushpull(st->node, &l->key, 1, &pv, &qv, &l->len,
			      PSCHED_F32, (int)l->key, NULL, NULL, &l->req);
	if (ret) {
		rp_fail(st, "pushpull of layer %llu (%s) step %llu: %s",
			(unsigned long long)l->key,
			st->o->prof->layers[l->key].name,
			(unsigned long long)step, psched_errmsg());
		return ret;
	}
	l->inflight = true;
	return 0;
}

/* Forward (each layer after its pull), then backward (each gradient
 * pushed as its layer finishes). */
static int rp_step(struct rp *st, uint64_t step)
{
	size_t i;
	int ret;

	for (i = 0; i < st->n; i++) {
		st->pull_waits += st->l[i].inflight;
		ret = rp_wait(st, &st->l[i]);
		if (ret)
			return ret;
		rp_compute(st, st->l[i].fwd_us);
	}
	for (i = st->n; i-- > 0;) {
		rp_compute(st, st->l[i].bwd_us);
		if (!st->l[i].len)
			continue;
		ret = rp_push(st, &st->l[i], step);
		if (ret)
			return ret;
	}
	return 0;
}

/* Wait out every request in flight (buffers are freed after); the first
 * error wins. */
static int rp_drain(struct rp *st, int ret)
{
	size_t i;
	int r;

	for (i = 0; i < st->n; i++) {
		r = rp_wait(st, &st->l[i]);
		if (r && !ret)
			ret = r;
	}
	if (st->vote_inflight) {
		r = psched_wait(st->node, st->vote_req, st->o->timeout_ms);
		st->vote_inflight = false;
		if (r && !ret)
			ret = r;
	}
	return ret;
}

static int rp_check_opts(const struct psd_replay_opts *o,
			 struct psd_replay_result *res)
{
	const char *bad = NULL;

	if (!o->prof || !o->prof->nlayers)
		bad = "no profile";
	else if (o->prof->cost == PSD_PROFILE_COST_FLOPS && !(o->tflops > 0))
		bad = "the device speed (TFLOP/s) must be > 0";
	else if (o->prof->cost == PSD_PROFILE_COST_FLOPS && !o->batch)
		bad = "the batch must be > 0";
	else if (!o->steps && !(o->seconds > 0))
		bad = "give a number of steps or seconds > 0";
	if (!bad)
		return 0;
	snprintf(res->msg, sizeof(res->msg), "%s", bad);
	return -EINVAL;
}

/*
 * --seconds: every worker must run the same number of steps (a push no
 * other worker matches never completes), so the workers vote: after step
 * s each pushes 1 if its own clock says stop (priority -1, the most
 * urgent request), and all stop after step s + 1 once the sum is > 0.
 * The vote of step s is waited for only after the backward of step s + 1,
 * when the forward of s + 1 has already waited for every pull of step s:
 * so the vote wait can never hold (absorb) a step's gradient
 * communication, which would leave that communication out of the forward
 * waits that the timed window counts (under FIFO the vote queues behind
 * the step's gradients).
 */
static int rp_vote_wait(struct rp *st, bool *all_stop)
{
	uint64_t t0 = rp_now_ns();
	size_t i;
	int ret;

	*all_stop = false;
	if (!st->vote_inflight)
		return 0;
	for (i = 0; i < st->n; i++)
		if (st->l[i].inflight && st->l[i].step <= st->vote_step) {
			st->vote_absorbed++;
			break;
		}
	ret = psched_wait(st->node, st->vote_req, st->o->timeout_ms);
	st->vote_inflight = false;
	if (ret) {
		rp_fail(st, "stop vote (key %llu) after step %llu: %s",
			(unsigned long long)st->vote_key,
			(unsigned long long)st->vote_step, psched_errmsg());
		return ret;
	}
	st->wait_s += (double)(rp_now_ns() - t0) * 1e-9;
	*all_stop = st->vote_in > 0.0f;
	return 0;
}

static int rp_vote_cast(struct rp *st, uint64_t step, bool stop)
{
	const void *pv = &st->vote_out;
	void *qv = &st->vote_in;
	int ret;

	st->vote_out = stop ? 1.0f : 0.0f;
	ret = psched_pushpull(st->node, &st->vote_key, 1, &pv, &qv,
			      &st->vote_len, PSCHED_F32, -1, NULL, NULL,
			      &st->vote_req);
	if (ret) {
		rp_fail(st, "stop vote (key %llu) after step %llu: %s",
			(unsigned long long)st->vote_key,
			(unsigned long long)step, psched_errmsg());
		return ret;
	}
	st->vote_step = step;
	st->vote_inflight = true;
	return 0;
}

/*
 * The timed window runs from the end of the backward of the last warmup
 * step (at least step 1) to the end of the backward of the last step.
 * Each step in it holds one forward, blocked on the previous step's
 * pulls, and one backward: N timed steps contain exactly N steps'
 * communication waits (the last step's pulls are drained after the
 * window, the first timed step waits for the last warmup step's).
 */
static int rp_loop(struct rp *st)
{
	const struct psd_replay_opts *o = st->o;
	unsigned first = o->warmup ? o->warmup : 1;
	uint64_t step, t0 = 0, t_end = 0, last, pulls0 = 0, absorbed0 = 0,
		       start;
	double wait0 = 0, wait_end = 0;
	bool stop = false, all_stop;
	int ret = 0;

	last = o->steps ? (uint64_t)first + o->steps : UINT64_MAX;
	st->vclock_ns = rp_now_ns();
	start = st->vclock_ns;
	for (step = 1; step <= last && !ret && !stop; step++) {
		ret = rp_step(st, step);
		if (ret)
			break;
		if (o->progress) {
			fprintf(o->progress, "%.3f,%llu\n",
				(double)(rp_now_ns() - start) * 1e-9,
				(unsigned long long)step);
			fflush(o->progress);
		}
		if (step <= first) {
			t0 = t_end = rp_now_ns();
			wait0 = wait_end = st->wait_s;
			pulls0 = st->pull_waits;
			absorbed0 = st->vote_absorbed;
		} else {
			t_end = rp_now_ns();
			wait_end = st->wait_s;
		}
		if (o->steps)
			continue;
		/* vote step - 1's verdict, then cast this step's vote: at
		 * least two timed steps, so that one slow step is not the
		 * whole measurement */
		ret = rp_vote_wait(st, &all_stop);
		if (!ret && all_stop)
			stop = true;
		else if (!ret)
			ret = rp_vote_cast(st, step,
					   step >= (uint64_t)first + 1 &&
						   (double)(t_end - t0) *
								   1e-9 >=
							   o->seconds);
	}
	if (!ret) {
		st->res->steps = step - 1 - first;
		st->res->seconds = (double)(t_end - t0) * 1e-9;
		st->res->comm_steps =
			st->res->keys
				? (st->pull_waits - pulls0) / st->res->keys
				: 0;
		st->res->vote_absorbed = st->vote_absorbed - absorbed0;
	}
	if (st->res->steps)
		st->res->wait_s = (wait_end - wait0) / (double)st->res->steps;
	return rp_drain(st, ret);
}

int psd_replay_run(struct psched_node *node, const struct psd_replay_opts *o,
		   struct psd_replay_result *res)
{
	struct rp st = { .node = node, .o = o, .res = res };
	size_t i;
	int ret;

	memset(res, 0, sizeof(*res));
	ret = rp_check_opts(o, res);
	if (ret)
		return ret;
	st.rank = (unsigned)psched_node_rank(node);
	st.nw = psched_num_workers(node);
	st.vote_key = o->prof->nlayers;
	st.vote_len = sizeof(float);
	ret = rp_setup(&st);
	if (ret)
		snprintf(res->msg, sizeof(res->msg),
			 "out of memory for %llu gradient bytes",
			 (unsigned long long)res->bytes_per_step);
	if (!ret)
		ret = rp_init_keys(&st);
	if (!ret)
		ret = rp_loop(&st);
	for (i = 0; st.l && i < st.n; i++) {
		free(st.l[i].buf);
		free(st.l[i].grad);
	}
	free(st.l);
	return ret;
}
