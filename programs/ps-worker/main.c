// SPDX-License-Identifier: MIT
/*
 * ps-worker: a ready-made worker.  Mode "check" (the default) runs a
 * synthetic training loop over many keys and verifies every pulled
 * aggregate exactly against the sum of what all workers pushed.  Mode
 * "replay" (--model) replays a model profile's training steps
 * (programs/ps-worker/replay.h) and prints steps/s.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <time.h>

#include "psched.h"
#include "profile.h"
#include "replay.h"

struct wopts {
	char sizes[512];
	unsigned keys_per_size;
	unsigned steps;
	unsigned leave_after; /* check mode: leave the job after N steps */
	double seconds;
	uint64_t seed;
	unsigned timeout_ms;
	/* replay mode */
	const char *model;
	double tflops;
	unsigned batch;
	bool batch_given;
	unsigned warmup;
	const char *timeline;
	const char *progress; /* replay: one line per step */
	bool spin;
};

struct wkey {
	uint64_t key;
	uint64_t len;
	enum psched_dtype dtype;
	void *push;
	void *pull;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Bits of the random values: 20 up to 8 workers, fewer above so that
 * the sum of every worker's value still fits float32's 24 bits. */
static unsigned val_bits = 20;

static void set_val_bits(unsigned nw)
{
	unsigned lg = 0;

	while ((1u << lg) < nw)
		lg++;
	val_bits = lg <= 3 ? 20 : (lg < 19 ? 23 - lg : 4);
}

/* Random value of worker @r: a multiple of 2^-8 below 2^(val_bits-9) in
 * size, so the sum over the job's workers is exact in float32 in any
 * order. */
static float gen_f32(uint64_t base, unsigned r, uint64_t j)
{
	uint64_t h = mix(base ^ mix(r * 0x1000193ull + j));

	return (float)((int64_t)(h % (1u << val_bits)) -
		       (1 << (val_bits - 1))) /
	       256.0f;
}

static uint64_t key_base(const struct wopts *o, uint64_t key, uint64_t step)
{
	return mix(o->seed ^ mix(key * 31 + step));
}

static void fill(const struct wopts *o, struct wkey *k, unsigned rank,
		 uint64_t step)
{
	uint64_t base = key_base(o, k->key, step), j;

	if (k->dtype == PSCHED_F32) {
		float *v = k->push;

		for (j = 0; j < k->len / 4; j++)
			v[j] = gen_f32(base, rank, j);
	} else {
		uint8_t *v = k->push;

		for (j = 0; j < k->len; j++)
			v[j] = (uint8_t)mix(base ^ (rank * 7919u + j));
	}
}

/* 0 if the pulled value is the exact aggregate of step @step: the sum
 * over the @nw workers of @ranks, the step's members. */
static int verify(const struct wopts *o, struct wkey *k, const unsigned *ranks,
		  unsigned nw, uint64_t step)
{
	uint64_t base = key_base(o, k->key, step), j;
	unsigned i;

	if (k->dtype == PSCHED_F32) {
		const float *got = k->pull;

		for (j = 0; j < k->len / 4; j++) {
			double want = 0;

			for (i = 0; i < nw; i++)
				want += gen_f32(base, ranks[i], j);
			if (got[j] != (float)want) {
				fprintf(stderr,
					"ps-worker: MISMATCH key %llu step "
					"%llu element %llu: got %.9g want "
					"%.9g\n",
					(unsigned long long)k->key,
					(unsigned long long)step,
					(unsigned long long)j, got[j], want);
				return 1;
			}
		}
		return 0;
	}
	/* Raw bytes are not summed: the value is one worker's push. */
	for (i = 0; i < nw; i++) {
		const uint8_t *got = k->pull;

		for (j = 0; j < k->len; j++)
			if (got[j] !=
			    (uint8_t)mix(base ^ (ranks[i] * 7919u + j)))
				break;
		if (j == k->len)
			return 0;
	}
	fprintf(stderr,
		"ps-worker: MISMATCH raw key %llu step %llu: value is no "
		"worker's push\n",
		(unsigned long long)k->key, (unsigned long long)step);
	return 1;
}

/* --sizes: comma-separated byte counts (K/M/G), none zero. */
static bool sizes_valid(const char *list)
{
	char buf[512], *tok, *save = NULL;
	uint64_t len;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (psched_parse_bytes(tok, &len) || !len)
			return false;
	return true;
}

static int setup_keys(const struct wopts *o, struct wkey **out, size_t *nout)
{
	char buf[512], *tok, *save = NULL;
	struct wkey *ks = NULL;
	size_t n = 0, si = 0;
	unsigned i;

	snprintf(buf, sizeof(buf), "%s", o->sizes);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save), si++) {
		uint64_t len;

		if (psched_parse_bytes(tok, &len) || !len)
			return -1;
		ks = realloc(ks, (n + o->keys_per_size) * sizeof(*ks));
		if (!ks)
			return -1;
		for (i = 0; i < o->keys_per_size; i++, n++) {
			ks[n].key = si * 1000 + i;
			ks[n].len = len;
			ks[n].dtype = len % 4 ? PSCHED_RAW : PSCHED_F32;
			ks[n].push = malloc(len);
			ks[n].pull = malloc(len);
			if (!ks[n].push || !ks[n].pull)
				return -1;
		}
	}
	*out = ks;
	*nout = n;
	return 0;
}

static int fail(const char *what)
{
	fprintf(stderr, "ps-worker: %s failed: %s\n", what, psched_errmsg());
	return 2;
}

/* Wait for every issued request (errors after the first are only
 * waited out): buffers are not freed under a request in flight. */
static int wait_all(struct psched_node *node, const uint64_t *reqs, size_t n,
		    unsigned timeout_ms, const char *what)
{
	char msg[512] = "";
	size_t i;
	int ret = 0;

	for (i = 0; i < n; i++) {
		if (!psched_wait(node, reqs[i], timeout_ms) || ret)
			continue;
		ret = 2;
		snprintf(msg, sizeof(msg), "%s", psched_errmsg());
	}
	if (ret)
		fprintf(stderr, "ps-worker: %s failed: %s\n", what, msg);
	return ret;
}

/* Issue one request per key (all in flight at once). */
static int issue(struct psched_node *node, struct wkey *ks, size_t nk, int kind,
		 uint64_t *reqs, size_t *issued)
{
	size_t i;
	int ret = 0;

	for (i = 0; i < nk && !ret; i++) {
		const void *pv = ks[i].push;
		void *qv = ks[i].pull;

		if (kind == 0)
			ret = psched_push(node, &ks[i].key, 1, &pv, &ks[i].len,
					  ks[i].dtype, (int)i, NULL, NULL,
					  &reqs[i]);
		else if (kind == 1)
			ret = psched_pull(node, &ks[i].key, 1, &qv, &ks[i].len,
					  ks[i].dtype, (int)i, NULL, NULL,
					  &reqs[i]);
		else
			ret = psched_pushpull(node, &ks[i].key, 1, &pv, &qv,
					      &ks[i].len, ks[i].dtype, (int)i,
					      NULL, NULL, &reqs[i]);
	}
	*issued = ret ? i - 1 : i;
	return ret ? fail("issuing a request") : 0;
}

/* One step: every key in flight at once; pushpull on even steps, push
 * then pull on odd ones (both API paths). */
static int run_step(struct psched_node *node, struct wkey *ks, size_t nk,
		    uint64_t step, unsigned timeout_ms, uint64_t *reqs)
{
	size_t issued;
	int ret, ret2;

	ret = issue(node, ks, nk, step % 2 ? 0 : 2, reqs, &issued);
	ret2 = wait_all(node, reqs, issued, timeout_ms,
			step % 2 ? "push" : "pushpull");
	if (ret || ret2 || !(step % 2))
		return ret ? ret : ret2;
	ret = issue(node, ks, nk, 1, reqs, &issued);
	ret2 = wait_all(node, reqs, issued, timeout_ms, "pull");
	return ret ? ret : ret2;
}

/*
 * With --seconds, all workers must stop after the same step: one that goes
 * on alone waits for the others' pushes of a step they never make.  So the
 * workers sum a "my time is up" flag each step and stop when any is up.
 */
static bool time_is_up(struct psched_node *node, bool mine, unsigned timeout_ms,
		       int *err)
{
	static const uint64_t key = UINT64_MAX - 1;
	static bool declared;
	uint64_t len = sizeof(float), req;
	float up = mine ? 1.0f : 0.0f, sum = 0;
	const void *pv = &up;
	void *qv = &sum;

	if (psched_num_workers(node) == 1)
		return mine;
	if (!declared && psched_keys_init(node, &key, 1, NULL, &len, PSCHED_F32,
					  timeout_ms)) {
		*err = fail("init of the stop flag");
		return true;
	}
	declared = true;
	if (psched_pushpull(node, &key, 1, &pv, &qv, &len, PSCHED_F32, 0, NULL,
			    NULL, &req) ||
	    psched_wait(node, req, timeout_ms)) {
		*err = fail("stop flag");
		return true;
	}
	return sum > 0.5f;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The members of @step (psched_step_members()) into @ranks[nw]. */
static unsigned step_members(struct psched_node *node, uint64_t step,
			     unsigned *ranks, unsigned nw)
{
	int cnt = psched_step_members(node, step, ranks, nw);

	return cnt < 0 ? 0 : (unsigned)cnt > nw ? nw : (unsigned)cnt;
}

/* --leave-after: the steps are done; leave the job, the others go on. */
static int leave_job(struct psched_node *node, const struct wopts *o,
		     uint64_t steps)
{
	if (psched_leave(node, o->timeout_ms))
		return fail("leaving the job");
	printf("ps-worker rank %d: left the job after %llu steps\n",
	       psched_node_rank(node), (unsigned long long)steps);
	return 0;
}

static int check_loop(struct psched_node *node, const struct wopts *o)
{
	unsigned rank = (unsigned)psched_node_rank(node);
	unsigned nw = psched_num_workers(node), nm, *ranks;
	struct wkey *ks;
	size_t nk, i;
	uint64_t step, bytes = 0, *reqs;
	double t0;
	int ret = 0;

	if (setup_keys(o, &ks, &nk)) {
		fprintf(stderr, "ps-worker: bad --sizes '%s'\n", o->sizes);
		return 2;
	}
	reqs = calloc(nk, sizeof(*reqs));
	ranks = calloc(nw, sizeof(*ranks));
	for (i = 0; i < nk; i++) {
		const void *v = ks[i].push;

		memset(ks[i].push, 0, ks[i].len);
		if (psched_keys_init(node, &ks[i].key, 1, &v, &ks[i].len,
				     ks[i].dtype, o->timeout_ms))
			return fail("init");
		bytes += ks[i].len;
	}
	t0 = now_s();
	for (step = 1; !ret; step++) {
		if (o->steps && step > o->steps)
			break;
		if (o->leave_after && step > o->leave_after) {
			ret = leave_job(node, o, step - 1);
			break;
		}
		if (!o->steps && time_is_up(node, now_s() - t0 > o->seconds,
					    o->timeout_ms, &ret))
			break;
		for (i = 0; i < nk; i++)
			fill(o, &ks[i], rank, step);
		ret = run_step(node, ks, nk, step, o->timeout_ms, reqs);
		nm = step_members(node, step, ranks, nw);
		for (i = 0; i < nk && !ret; i++)
			ret = verify(o, &ks[i], ranks, nm, step);
	}
	if (!ret)
		printf("ps-worker rank %u: %llu steps x %zu keys verified "
		       "(%llu bytes per step), %.1f steps/s\n",
		       rank, (unsigned long long)(step - 1), nk,
		       (unsigned long long)bytes,
		       (double)(step - 1) / (now_s() - t0));
	for (i = 0; i < nk; i++) {
		free(ks[i].push);
		free(ks[i].pull);
	}
	free(ks);
	free(reqs);
	free(ranks);
	return ret;
}

static int load_model(const char *name, struct psd_profile **out)
{
	char err[512] = "";
	size_t n = strlen(name);
	int ret;

	if (strchr(name, '/') || (n > 4 && !strcasecmp(name + n - 4, ".csv"))) {
		ret = psd_profile_load_csv(name, out, err, sizeof(err));
		if (ret)
			fprintf(stderr, "ps-worker: --model %s: %s\n", name,
				err[0] ? err : psched_strerror(ret));
		return ret;
	}
	ret = psd_profile_builtin(name, out);
	if (ret == -ENOENT)
		fprintf(stderr,
			"ps-worker: --model '%s': unknown model; built-in: %s, "
			"or a CSV file (name ending in .csv or containing "
			"'/', see docs/profiles.md)\n",
			name, psd_profile_names());
	else if (ret)
		fprintf(stderr, "ps-worker: --model %s: %s\n", name,
			psched_strerror(ret));
	return ret;
}

static int timeline_start(struct psched_node *node, const char *path)
{
	int ret = psched_timeline_start(node, 0);

	if (ret)
		fprintf(stderr, "ps-worker: --timeline %s: %s\n", path,
			ret == -ENOSYS ? "timeline recording not supported "
					 "by this libpsched (ENOSYS)"
				       : psched_errmsg());
	return ret;
}

/* The timeline path with "%r" replaced by the worker's rank, so that
 * workers started with the same arguments write different files. */
static int timeline_write(struct psched_node *node, const char *tmpl)
{
	char path[4096];
	const char *r = strstr(tmpl, "%r");
	int ret;

	if (r)
		snprintf(path, sizeof(path), "%.*s%d%s", (int)(r - tmpl), tmpl,
			 psched_node_rank(node), r + 2);
	else
		snprintf(path, sizeof(path), "%s", tmpl);
	ret = psched_timeline_write(node, path);

	if (ret)
		fprintf(stderr, "ps-worker: writing timeline %s: %s\n", path,
			psched_errmsg()[0] ? psched_errmsg()
					   : psched_strerror(ret));
	return ret;
}

static void replay_print(struct psched_node *node, const struct wopts *o,
			 const struct psd_profile *prof,
			 const struct psd_replay_result *r)
{
	unsigned nw = psched_num_workers(node);
	double sps = r->seconds > 0 ? (double)r->steps / r->seconds : 0;

	printf("ps-worker rank %d: replay model=%s workers=%u servers=%u "
	       "steps=%llu seconds=%.3f steps_per_s=%.4f",
	       psched_node_rank(node), prof->name, nw, psched_num_servers(node),
	       (unsigned long long)r->steps, r->seconds, sps);
	/* Images of the whole job: @batch per worker per step. */
	if (o->batch_given)
		printf(" batch=%u images_per_s=%.1f", o->batch,
		       sps * o->batch * nw);
	printf(" comm_steps=%llu vote_absorbed=%llu",
	       (unsigned long long)r->comm_steps,
	       (unsigned long long)r->vote_absorbed);
	printf(" compute_ms=%.1f wait_ms=%.1f bytes_per_step=%llu keys=%u "
	       "verified=%llu\n",
	       r->compute_s * 1e3, r->wait_s * 1e3,
	       (unsigned long long)r->bytes_per_step, r->keys,
	       (unsigned long long)r->checked);
	fflush(stdout);
}

static int replay_main(struct psched_node *node, const struct wopts *o,
		       const struct psd_profile *prof)
{
	struct psd_replay_opts ro = { .prof = prof,
				      .tflops = o->tflops,
				      .batch = o->batch,
				      .steps = o->steps,
				      .seconds = o->seconds,
				      .warmup = o->warmup,
				      .seed = o->seed,
				      .timeout_ms = o->timeout_ms,
				      .spin = o->spin };
	struct psd_replay_result res;
	int ret;

	if (o->timeline && timeline_start(node, o->timeline))
		return 2;
	if (o->progress) {
		ro.progress = fopen(o->progress, "w");
		if (!ro.progress) {
			fprintf(stderr, "ps-worker: --progress %s: %s\n",
				o->progress, strerror(errno));
			return 2;
		}
	}
	ret = psd_replay_run(node, &ro, &res);
	if (ro.progress)
		fclose(ro.progress);
	if (ret)
		fprintf(stderr, "ps-worker rank %d: replay %s: %s\n",
			psched_node_rank(node), prof->name, res.msg);
	else
		replay_print(node, o, prof, &res);
	if (o->timeline && timeline_write(node, o->timeline) && !ret)
		ret = 2;
	if (ret)
		return ret == PSD_REPLAY_EMISMATCH ? 1 : 2;
	return 0;
}

static void usage(void)
{
	printf("usage: ps-worker [--sizes LIST] [--keys N] [--steps N | "
	       "--seconds S] [--seed N] [--timeout MS] [cluster options]\n"
	       "       ps-worker --model M [--gpu-tflops X] [--batch N] "
	       "[--steps N | --seconds S]\n"
	       "                 [--warmup N] [--timeline FILE] [--spin] "
	       "[--seed N] [cluster options]\n       ps-worker --version\n\n"
	       "Check mode (no --model): every step pushes random values for "
	       "every key and\nchecks the pulled aggregate exactly (sizes not "
	       "a multiple of 4 are raw bytes:\nnot summed).\n"
	       "  --sizes LIST   comma-separated key sizes, K/M/G suffixes "
	       "[4,1K,64K,1M]\n"
	       "  --keys N       keys per size [4]\n"
	       "  --steps N      steps to run, 0 = use --seconds [10]\n"
	       "  --leave-after N  leave the job (psched_leave()) after N "
	       "steps; the others\n"
	       "                 go on without it [0: never]\n"
	       "  --seconds S    run this long when --steps is 0 [10]\n"
	       "  --seed N       data seed, same on every worker [1]\n"
	       "  --timeout MS   per-request timeout, 0 = PS_REQUEST_TIMEOUT "
	       "[0]\n\n"
	       "Replay mode (--model): replays a model's training steps. "
	       "Forward layer by\nlayer, each layer waiting for its parameters "
	       "pulled in the previous step;\nbackward in reverse, each "
	       "layer's gradient pushed (pushpull, key = layer\nindex, "
	       "priority = layer index: front layers first) as soon as it is "
	       "computed.\nCompute is simulated by sleeping (the host CPU "
	       "stays "
	       "free for communication,\nas with a GPU). Sampled elements of "
	       "every pulled value are checked against\nthe exact sum over "
	       "the workers. Prints one line per worker:\n"
	       "  ps-worker rank R: replay model=M ... steps_per_s=X "
	       "[batch=N images_per_s=Y] ...\n"
	       "  --model M      %s, or a CSV profile (FILE.csv, see "
	       "docs/profiles.md)\n"
	       "  --gpu-tflops X device speed for FLOPs profiles, TFLOP/s "
	       "[10]\n"
	       "  --batch N      samples per worker per step; images_per_s = "
	       "steps/s x N x workers [32]\n"
	       "  --steps N      timed steps, 0 = use --seconds [10]\n"
	       "  --seconds S    time this long (at least 2 steps) when "
	       "--steps is 0\n"
	       "  --warmup N     untimed steps first (0 runs as 1) [1]\n"
	       "  --timeline F   write the per-chunk timeline as Chrome trace "
	       "JSON to F\n"
	       "                 (%%r in F is replaced by the worker's rank)\n"
	       "  --spin         busy-wait the compute instead of sleeping\n"
	       "  --progress F   append \"seconds,step\" to F after every "
	       "step (time since the\n"
	       "                 replay began; for plots of steps/s over "
	       "time)\n\n",
	       psd_profile_names());
	psched_cfg_usage_role(stdout, PSCHED_ROLE_WORKER);
}

static int parse_num(const char *flag, const char *s, double min, double max,
		     double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max)) {
		fprintf(stderr,
			"ps-worker: --%s '%s': expected a number in "
			"[%g, %g]\n",
			flag, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_opt(int c, const char *name, struct wopts *o)
{
	double v = 0;

	switch (c) {
	case 'z':
		snprintf(o->sizes, sizeof(o->sizes), "%s", optarg);
		if (sizes_valid(o->sizes))
			return 0;
		fprintf(stderr,
			"ps-worker: bad --sizes '%s': want comma-separated "
			"byte counts above 0 (K/M/G suffixes)\n",
			optarg);
		return -1;
	case 'm':
		o->model = optarg;
		return 0;
	case 'l':
		o->timeline = optarg;
		return 0;
	case 'p':
		o->spin = true;
		return 0;
	case 'P':
		o->progress = optarg;
		return 0;
	case 'g':
		if (parse_num(name, optarg, 1e-6, 1e6, &v))
			return -1;
		o->tflops = v;
		return 0;
	case 'S':
		if (parse_num(name, optarg, 0, 1e7, &v))
			return -1;
		o->seconds = v;
		return 0;
	case 'e':
		if (parse_num(name, optarg, 0, 1.8e19, &v))
			return -1;
		o->seed = strtoull(optarg, NULL, 0);
		return 0;
	}
	if (parse_num(name, optarg, c == 'k' || c == 'b' ? 1 : 0, 4e9, &v))
		return -1;
	if (c == 'k')
		o->keys_per_size = (unsigned)v;
	else if (c == 's')
		o->steps = (unsigned)v;
	else if (c == 'L')
		o->leave_after = (unsigned)v;
	else if (c == 't')
		o->timeout_ms = (unsigned)v;
	else if (c == 'w')
		o->warmup = (unsigned)v;
	else if (c == 'b')
		o->batch = (unsigned)v;
	else
		return -1;
	o->batch_given |= c == 'b';
	return 0;
}

static int parse_own(int argc, char **argv, struct wopts *o)
{
	static const struct option lo[] = {
		{ "sizes", required_argument, NULL, 'z' },
		{ "keys", required_argument, NULL, 'k' },
		{ "steps", required_argument, NULL, 's' },
		{ "leave-after", required_argument, NULL, 'L' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "seed", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' },
		{ "model", required_argument, NULL, 'm' },
		{ "gpu-tflops", required_argument, NULL, 'g' },
		{ "batch", required_argument, NULL, 'b' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "timeline", required_argument, NULL, 'l' },
		{ "spin", no_argument, NULL, 'p' },
		{ "progress", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	int c, idx = 0;

	while ((c = getopt_long(argc, argv, "", lo, &idx)) != -1) {
		if (c == '?' || parse_opt(c, lo[idx].name, o))
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr,
			"ps-worker: unexpected argument '%s' (see "
			"--help)\n",
			argv[optind]);
		return -1;
	}
	if (o->leave_after && !o->steps) {
		fprintf(stderr, "ps-worker: --leave-after needs --steps\n");
		return -1;
	}
	if (!o->steps && !(o->seconds > 0)) {
		fprintf(stderr, "ps-worker: --steps 0 needs --seconds > 0\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct wopts o = { .sizes = "4,1K,64K,1M",
			   .keys_per_size = 4,
			   .steps = 10,
			   .seconds = 10,
			   .seed = 1,
			   .tflops = 10,
			   .batch = 32,
			   .warmup = 1 };
	struct psd_profile *prof = NULL;
	struct psched_cfg *cfg = NULL;
	struct psched_node *node;
	int ret;

	for (ret = 1; ret < argc && strcmp(argv[ret], "--"); ret++)
		if (!strcmp(argv[ret], "--version")) {
			printf("ps-worker %s\n", psched_version());
			return 0;
		}
	ret = psched_cfg_create(&cfg);
	if (!ret)
		ret = psched_cfg_from_env(cfg);
	if (!ret)
		ret = psched_cfg_parse_args(cfg, &argc, argv, false);
	if (!ret)
		ret = psched_cfg_set(cfg, "role", "worker");
	if (ret == 1)
		usage();
	if (ret && ret != 1)
		fprintf(stderr, "ps-worker: %s\n", psched_errmsg());
	if (ret || parse_own(argc, argv, &o) ||
	    /* A bad model fails before the cluster is joined. */
	    (o.model && load_model(o.model, &prof))) {
		psched_cfg_destroy(cfg);
		return ret == 1 ? 0 : 2;
	}
	/* Short simulated layers: ask for exact wake-ups. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	ret = psched_node_create(cfg, &node);
	psched_cfg_destroy(cfg);
	if (ret) {
		fprintf(stderr, "ps-worker: %s\n", psched_errmsg());
		psd_profile_destroy(prof);
		return 1;
	}
	set_val_bits(psched_num_workers(node));
	ret = prof ? replay_main(node, &o, prof) : check_loop(node, &o);
	if (psched_node_destroy(node) && !ret) {
		fprintf(stderr, "ps-worker: shutdown: %s\n", psched_errmsg());
		ret = 1;
	}
	psd_profile_destroy(prof);
	return ret;
}
