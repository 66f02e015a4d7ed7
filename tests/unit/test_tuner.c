// SPDX-License-Identifier: MIT
/*
 * The tuner state machine (scheduler/tuner/tuner.c) driven by a synthetic
 * cluster whose steps/s is a smooth peak over (log2 partition, log2
 * credit multiple) plus noise.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../harness.h"
#include "../../scheduler/tuner/tuner.h"
#include "../../scheduler/tuner/tuner_int.h"

#define KIB	      (UINT64_C(1) << 10)
#define MIB	      (UINT64_C(1) << 20)
#define SIM_MAX_STEPS 100000
#define CSV_MAX_ROWS  512

/* A synthetic cluster running the tuner's configs. */
struct sim {
	struct psd_tuner *t;
	struct psd_tuner_config run;	 /* config the workers use now */
	struct psd_tuner_config pending; /* next one, from apply_from_step */
	bool has_pending;
	uint64_t step;
	double peak_lp;	     /* log2 of the best partition */
	double peak_lm;	     /* log2 of the best credit multiple */
	double noise;	     /* relative sd of one step's score */
	double warmup_score; /* > 0: reported while the tuner warms up */
	double scale;	     /* every score is multiplied by this */
	unsigned int changes;
	uint64_t fixed_part; /* != 0: every config must use it */
	uint64_t fixed_credit;
	gsl_rng *rng;
};

/* The noiseless score: 20 + 100 at the peak, Gaussian in log space. */
static double sim_truth(const struct sim *s, uint64_t part, uint64_t credit)
{
	double dp = log2((double)part) - s->peak_lp;
	double dm = log2((double)credit / (double)part) - s->peak_lm;

	return 20.0 + 100.0 * exp(-dp * dp / (2.0 * 2.5 * 2.5) -
				  dm * dm / (2.0 * 1.2 * 1.2));
}

/* The best noiseless score over the usable grid (4 KiB..64 MiB, 1..32x). */
static double sim_grid_best(const struct sim *s)
{
	double best = 0.0;
	unsigned int lp;
	uint64_t k;

	for (lp = 12; lp <= 26; lp++)
		for (k = 1; k <= 32; k++)
			best = fmax(best,
				    sim_truth(s, UINT64_C(1) << lp, k << lp));
	return best;
}

static void sim_check_rounding(const struct sim *s,
			       const struct psd_tuner_config *c)
{
	uint64_t p = c->partition_bytes;

	CHECK(p && !(p & (p - 1)));
	CHECK_U64(p % 4096, ==, 0);
	CHECK_U64(p, >=, 4 * KIB);
	CHECK_U64(p, <=, 64 * MIB);
	CHECK_U64(c->credit_bytes % p, ==, 0);
	CHECK_U64(c->credit_bytes / p, >=, 1);
	CHECK_U64(c->credit_bytes / p, <=, 32);
	if (s->fixed_part)
		CHECK_U64(p, ==, s->fixed_part);
	if (s->fixed_credit)
		CHECK_U64(c->credit_bytes, ==, s->fixed_credit);
}

static void sim_init(struct sim *s, const struct psd_tuner_opts *o,
		     unsigned long seed)
{
	memset(s, 0, sizeof(*s));
	CHECK_EQ(psd_tuner_create(o, &s->t), 0);
	psd_tuner_current(s->t, &s->run);
	sim_check_rounding(s, &s->run);
	s->peak_lp = 20.0; /* 1 MiB */
	s->peak_lm = 2.0;  /* 4x */
	s->noise = 0.02;
	s->scale = 1.0;
	s->step = 1;
	s->rng = gsl_rng_alloc(gsl_rng_mt19937);
	CHECK(s->rng);
	gsl_rng_set(s->rng, seed);
}

static void sim_fini(struct sim *s)
{
	psd_tuner_destroy(s->t);
	gsl_rng_free(s->rng);
}

/* Run one step and report it. */
static void sim_step(struct sim *s)
{
	struct psd_tuner_config next;
	double score;
	bool changed;

	if (s->has_pending && s->step >= s->pending.apply_from_step) {
		s->run = s->pending;
		s->has_pending = false;
	}
	score = sim_truth(s, s->run.partition_bytes, s->run.credit_bytes);
	score *= s->scale * (1.0 + gsl_ran_gaussian(s->rng, s->noise));
	if (s->warmup_score > 0 && psd_tuner_phase(s->t) == PSD_TUNER_WARMUP)
		score = s->warmup_score;
	CHECK_EQ(psd_tuner_report(s->t, s->step, score, &next, &changed), 0);
	sim_check_rounding(s, &next);
	if (changed) {
		CHECK_U64(next.epoch, >, s->run.epoch);
		CHECK_U64(next.apply_from_step, >, s->step);
		s->pending = next;
		s->has_pending = true;
		s->changes++;
	}
	s->step++;
}

/* Step until the tuner is in @phase; returns the steps taken. */
static uint64_t sim_run_until(struct sim *s, enum psd_tuner_phase phase)
{
	uint64_t start = s->step;

	while (psd_tuner_phase(s->t) != phase) {
		CHECK_U64(s->step - start, <, SIM_MAX_STEPS);
		sim_step(s);
	}
	return s->step - start;
}

static void sim_opts(struct psd_tuner_opts *o, uint64_t seed)
{
	psd_tuner_opts_default(o);
	o->seed = seed;
	o->init_partition = 16 * KIB; /* far from the 1 MiB peak */
	o->init_credit = 16 * KIB;
}

/* The locked config's true score, relative to the best on the grid. */
static double sim_locked_quality(struct sim *s)
{
	struct psd_tuner_config best;
	double ref;

	CHECK_EQ(psd_tuner_best(s->t, &best, &ref), 0);
	return sim_truth(s, best.partition_bytes, best.credit_bytes) /
	       sim_grid_best(s);
}

/* ---- CSV ---- */

struct csv {
	unsigned int nrows;
	char rows[CSV_MAX_ROWS][160];
};

static char *csv_tmp_path(char *buf, size_t len)
{
	int fd;

	snprintf(buf, len, "%s/test_tuner.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(buf);
	CHECK(fd >= 0);
	close(fd);
	return buf;
}

static void csv_load(const char *path, struct csv *c)
{
	char line[sizeof(c->rows[0])];
	FILE *f;

	memset(c, 0, sizeof(*c));
	f = fopen(path, "r");
	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		CHECK(c->nrows < CSV_MAX_ROWS);
		CHECK(strchr(line, '\n') != NULL); /* whole line */
		line[strcspn(line, "\n")] = '\0';
		memcpy(c->rows[c->nrows++], line, sizeof(line));
	}
	fclose(f);
}

/* Field @k (0-based) of @row into @out. */
static void csv_field(const char *row, unsigned int k, char *out, size_t len)
{
	size_t n;

	while (k-- > 0) {
		row = strchr(row, ',');
		CHECK(row != NULL);
		row++;
	}
	n = strcspn(row, ",");
	CHECK(n < len);
	memcpy(out, row, n);
	out[n] = '\0';
}

static unsigned int csv_count_phase(const struct csv *c, const char *phase)
{
	unsigned int n = 0;
	unsigned int i;
	char f[32];

	for (i = 1; i < c->nrows; i++) {
		csv_field(c->rows[i], 8, f, sizeof(f));
		n += !strcmp(f, phase);
	}
	return n;
}

/* ---- tests ---- */

static void test_tuner_rounding_rules(void)
{
	struct psd_tuner_opts o;
	struct psd_tuner *t = NULL;
	double x[2];
	uint64_t p;
	uint64_t c;

	psd_tuner_opts_default(&o);
	CHECK_EQ(psd_tuner_create(&o, &t), 0);
	x[0] = -1.0;
	x[1] = 2.0;
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 4 * KIB);
	CHECK_U64(c, ==, 32 * 4 * KIB);
	x[0] = NAN;
	x[1] = NAN;
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 4 * KIB);
	CHECK_U64(c, ==, 4 * KIB);
	x[0] = 0.5; /* 2^(12 + 7) */
	x[1] = 0.4; /* 2^(0.4 * 5) = 4x */
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 512 * KIB);
	CHECK_U64(c, ==, 4 * 512 * KIB);
	x[0] = 1.0;
	x[1] = log2(3.2) / 5.0; /* 3.2x rounds to 3x */
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 64 * MIB);
	CHECK_U64(c, ==, 3 * 64 * MIB);
	psd_tuner_destroy(t);
}

static void test_tuner_rejects_bad_options(void)
{
	struct psd_tuner_opts o;
	struct psd_tuner *t = NULL;
	struct psd_tuner_config next;
	bool changed;

	psd_tuner_opts_default(&o);
	o.part_min = 6000;
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.part_min = 2048; /* below the 4 KiB alignment */
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.steps_per_sample = 0;
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.fixed_partition = MIB;
	o.fixed_credit = 4 * MIB; /* nothing left to tune */
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.fixed_credit = 2 * KIB; /* below every partition */
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.log_path = "/nonexistent-dir/tuner.csv";
	CHECK_EQ(psd_tuner_create(&o, &t), -ENOENT);
	psd_tuner_opts_default(&o);
	CHECK_EQ(psd_tuner_create(&o, &t), 0);
	CHECK_EQ(psd_tuner_report(t, 1, 0.0, &next, &changed), -EINVAL);
	CHECK_EQ(psd_tuner_report(t, 1, NAN, &next, &changed), -EINVAL);
	CHECK(!changed);
	CHECK_EQ(psd_tuner_best(t, &next, NULL), -EAGAIN);
	psd_tuner_destroy(t);
	psd_tuner_destroy(NULL);
}

/* A sample is the median of its window: one outlier step changes nothing. */
static void test_tuner_sample_is_median(void)
{
	/* windows of 4: medians (100 + 102) / 2 and (48 + 50) / 2 */
	static const double scores[] = { 100.0, 98.0, 1e6, 102.0,
					 50.0,	52.0, 0.5, 48.0 };
	static struct csv c;
	struct psd_tuner_config next;
	struct psd_tuner_opts o;
	struct psd_tuner *t = NULL;
	char path[256];
	char f[32];
	bool changed;
	unsigned int i;

	psd_tuner_opts_default(&o);
	o.warmup_samples = 1;
	o.steps_per_sample = 4;
	o.log_path = csv_tmp_path(path, sizeof(path));
	CHECK_EQ(psd_tuner_create(&o, &t), 0);
	for (i = 0; i < 8; i++)
		CHECK_EQ(psd_tuner_report(t, i, scores[i], &next, &changed), 0);
	psd_tuner_destroy(t);
	csv_load(path, &c);
	unlink(path);
	CHECK_EQ(c.nrows, 3);
	csv_field(c.rows[1], 5, f, sizeof(f));
	CHECK_STR(f, "101");
	csv_field(c.rows[2], 5, f, sizeof(f));
	CHECK_STR(f, "49");
	csv_field(c.rows[2], 1, f, sizeof(f));
	CHECK_STR(f, "7");
}

/* Warmup samples never reach the GP: a huge warmup score is ignored. */
static void test_tuner_warmup_discarded(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int i;

	sim_opts(&o, 3);
	sim_init(&s, &o, 3);
	s.warmup_score = 1e6;
	for (i = 0; i < o.warmup_samples * o.steps_per_sample - 1; i++) {
		sim_step(&s);
		CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_WARMUP);
	}
	sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	CHECK_EQ(s.changes, 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(s.changes > 0);
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
}

/* Over several seeds, locks in near the optimum within max_samples. */
static void test_tuner_locks_near_optimum(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	uint64_t steps;
	double q;
	unsigned int seed;

	for (seed = 1; seed <= 5; seed++) {
		sim_opts(&o, seed);
		sim_init(&s, &o, 100 + seed);
		steps = sim_run_until(&s, PSD_TUNER_LOCKED);
		q = sim_locked_quality(&s);
		printf("# seed %u: locked after %llu steps, %u changes, "
		       "quality %.3f\n",
		       seed, (unsigned long long)steps, s.changes, q);
		/* warmup + max_samples, plus the steps lost to apply_delay */
		CHECK_U64(steps, <=,
			  (o.warmup_samples + o.max_samples) *
				  (o.steps_per_sample + o.apply_delay));
		CHECK(q > 0.95);
		sim_fini(&s);
	}
}

static void test_tuner_csv_log(void)
{
	static struct csv c;
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;
	char path[256];
	char f[32];
	unsigned int i;
	unsigned int nsample;

	sim_opts(&o, 11);
	o.log_path = csv_tmp_path(path, sizeof(path));
	sim_init(&s, &o, 11);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	sim_fini(&s); /* closes the file */
	csv_load(path, &c);
	unlink(path);
	CHECK_STR(c.rows[0], "sample,step,epoch,partition_bytes,credit_bytes,"
			     "score_steps_per_s,predicted_mean,predicted_sd,"
			     "phase");
	CHECK_EQ(csv_count_phase(&c, "warmup"), o.warmup_samples);
	CHECK_EQ(csv_count_phase(&c, "chosen"), 1);
	nsample = csv_count_phase(&c, "explore");
	CHECK(nsample >= 5 && nsample <= o.max_samples);
	CHECK_EQ(c.nrows, 1 + o.warmup_samples + nsample + 1);
	for (i = 1; i < c.nrows; i++) {
		csv_field(c.rows[i], 0, f, sizeof(f));
		/* one row per sample, numbered; chosen repeats the last */
		CHECK_EQ(strtoul(f, NULL, 10), i < c.nrows - 1 ? i : i - 1);
	}
	csv_field(c.rows[c.nrows - 1], 8, f, sizeof(f));
	CHECK_STR(f, "chosen");
	csv_field(c.rows[c.nrows - 1], 3, f, sizeof(f));
	CHECK_U64(strtoull(f, NULL, 10), ==, best.partition_bytes);
	csv_field(c.rows[c.nrows - 1], 4, f, sizeof(f));
	CHECK_U64(strtoull(f, NULL, 10), ==, best.credit_bytes);
	/* GP-proposed configs carry a prediction; the first sample none */
	csv_field(c.rows[o.warmup_samples + 1], 6, f, sizeof(f));
	CHECK_STR(f, "nan");
	csv_field(c.rows[c.nrows - 2], 6, f, sizeof(f));
	CHECK(isfinite(strtod(f, NULL)));
}

/* Locked stays locked under noise, retunes when the peak moves. */
static void test_tuner_retunes_when_peak_moves(void)
{
	struct psd_tuner_config first;
	struct psd_tuner_config second;
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int i;

	sim_opts(&o, 5);
	sim_init(&s, &o, 5);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_best(s.t, &first, NULL), 0);
	for (i = 0; i < 40 * o.steps_per_sample; i++) {
		sim_step(&s);
		CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	}
	s.peak_lp = 15.0; /* 32 KiB */
	s.peak_lm = 4.0;  /* 16x */
	sim_run_until(&s, PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_best(s.t, &second, NULL), 0);
	printf("# first %llu/%llu, second %llu/%llu, quality %.3f\n",
	       (unsigned long long)first.partition_bytes,
	       (unsigned long long)first.credit_bytes,
	       (unsigned long long)second.partition_bytes,
	       (unsigned long long)second.credit_bytes, sim_locked_quality(&s));
	CHECK(second.partition_bytes != first.partition_bytes ||
	      second.credit_bytes != first.credit_bytes);
	CHECK(sim_locked_quality(&s) > 0.9);
	/* and it settles again */
	for (i = 0; i < 20 * o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_fini(&s);
}

static void test_tuner_workers_changed_retunes(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	char path[256];
	static struct csv c;
	char f[32];

	sim_opts(&o, 9);
	o.log_path = csv_tmp_path(path, sizeof(path));
	sim_init(&s, &o, 9);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_workers_changed(s.t), 0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
	csv_load(path, &c);
	unlink(path);
	CHECK_EQ(csv_count_phase(&c, "chosen"), 2);
	CHECK_EQ(csv_count_phase(&c, "warmup"), o.warmup_samples + 1);
	CHECK(csv_count_phase(&c, "retune") >= 1);
	csv_field(c.rows[c.nrows - 1], 8, f, sizeof(f));
	CHECK_STR(f, "chosen");
}

static void test_tuner_fixed_partition_tunes_credit_only(void)
{
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 21);
	o.fixed_partition = 256 * KIB;
	sim_init(&s, &o, 21);
	s.fixed_part = 256 * KIB;
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(s.changes >= 2);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	CHECK_U64(best.partition_bytes, ==, 256 * KIB);
	CHECK_U64(best.credit_bytes / best.partition_bytes, >=, 3);
	CHECK_U64(best.credit_bytes / best.partition_bytes, <=, 6);
	sim_fini(&s);
}

static void test_tuner_fixed_credit_tunes_partition_only(void)
{
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 22);
	o.fixed_credit = 4 * MIB;
	sim_init(&s, &o, 22);
	s.fixed_credit = 4 * MIB;
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(s.changes >= 2);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	CHECK_U64(best.credit_bytes, ==, 4 * MIB);
	/* the peak along credit = 4 MiB is at 1 MiB (4x) */
	CHECK_U64(best.partition_bytes, >=, 512 * KIB);
	CHECK_U64(best.partition_bytes, <=, 2 * MIB);
	sim_fini(&s);
}

/* Steps before apply_from_step still ran the old config: not counted. */
static void test_tuner_ignores_steps_before_apply(void)
{
	struct psd_tuner_config cur;
	struct psd_tuner_config next;
	struct psd_tuner_opts o;
	struct sim s;
	bool changed;
	unsigned int i;

	sim_opts(&o, 4);
	sim_init(&s, &o, 4);
	while (!s.has_pending)
		sim_step(&s);
	psd_tuner_current(s.t, &cur);
	for (i = 0; i < 5 * o.steps_per_sample; i++) {
		CHECK_EQ(psd_tuner_report(s.t, cur.apply_from_step - 1, 1e9,
					  &next, &changed),
			 0);
		CHECK(!changed);
		CHECK_U64(next.epoch, ==, cur.epoch);
	}
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
}

static void test_tuner_progress_line(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	char line[256];

	sim_opts(&o, 8);
	sim_init(&s, &o, 8);
	CHECK_EQ(psd_tuner_progress(s.t, line, 0), -EINVAL);
	CHECK_EQ(psd_tuner_progress(s.t, line, sizeof(line)), 0);
	CHECK(strstr(line, "tuner warmup") == line);
	CHECK(strstr(line, "partition 16 KiB, credit 16 KiB (1x)"));
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_progress(s.t, line, sizeof(line)), 0);
	CHECK(strstr(line, "tuner locked") == line);
	CHECK(strstr(line, "best "));
	CHECK(!strchr(line, '\n'));
	CHECK_EQ(psd_tuner_progress(s.t, line, 8), 0);
	CHECK_EQ(strlen(line), 7);
	sim_fini(&s);
}

/* Peaks all over the space, from a cold start at 16 KiB, 1x. */
static void test_tuner_finds_peaks_across_space(void)
{
	static const double peaks[][2] = {
		{ 14.0, 0.5 }, { 16.0, 3.5 }, { 18.0, 1.0 }, { 22.0, 4.5 },
		{ 24.0, 2.0 }, { 25.0, 0.3 }, { 13.0, 4.0 }, { 21.0, 1.5 },
		{ 17.0, 2.5 }, { 19.0, 4.0 },
	};
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int good = 0;
	unsigned int i;
	double q;

	for (i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++) {
		sim_opts(&o, 40 + i);
		sim_init(&s, &o, 40 + i);
		s.peak_lp = peaks[i][0];
		s.peak_lm = peaks[i][1];
		sim_run_until(&s, PSD_TUNER_LOCKED);
		q = sim_locked_quality(&s);
		printf("# peak 2^%.1f B, %.1fx: quality %.3f\n", peaks[i][0],
		       exp2(peaks[i][1]), q);
		CHECK(q > 0.8);
		good += q > 0.95;
		sim_fini(&s);
	}
	CHECK_INT(good, >=, 8);
}

/* Feed @n samples (steps_per_sample is 1) at score scale @scale. */
static void sim_samples(struct sim *s, unsigned int n, double scale)
{
	double old = s->scale;

	s->scale = scale;
	while (n--)
		sim_step(s);
	s->scale = old;
}

/* Only retune_windows consecutive deviating samples reopen the search. */
static void test_tuner_retune_needs_consecutive_windows(void)
{
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 31);
	o.steps_per_sample = 1;
	o.warmup_samples = 1;
	sim_init(&s, &o, 31);
	s.noise = 0.005;
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 20, 1.0); /* the locked config is applied by now */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 2, 0.5);
	sim_samples(&s, 1, 1.0);
	sim_samples(&s, 2, 0.5);
	sim_samples(&s, 1, 1.0);
	sim_samples(&s, 2, 1.5);
	sim_samples(&s, 1, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 1.5); /* upward moves count too */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 20, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 0.97); /* within the 5% threshold */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 0.5);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	sim_fini(&s);
}

/* Everything 30% slower (another job on the links): retune, same peak. */
static void test_tuner_level_shift_relocks_good_config(void)
{
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 12);
	o.noise = 0.01; /* fixed GP noise instead of learned */
	sim_init(&s, &o, 12);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.95);
	s.scale = 0.7;
	sim_run_until(&s, PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.95);
	sim_fini(&s);
}

/* The job's end logs the chosen config last: locking in if never done. */
static void test_tuner_finish_logs_chosen_last(void)
{
	static struct csv c;
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;
	char path[256];
	char f[32];
	unsigned int i;

	sim_opts(&o, 5);
	o.log_path = csv_tmp_path(path, sizeof(path));
	sim_init(&s, &o, 5);
	CHECK_EQ(psd_tuner_finish(s.t), -EAGAIN); /* nothing observed yet */
	sim_run_until(&s, PSD_TUNER_EXPLORE);
	for (i = 0; i < 4 * o.steps_per_sample; i++)
		sim_step(&s); /* a few samples, no lock-in yet */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	CHECK_EQ(psd_tuner_best(s.t, NULL, NULL), -EAGAIN);
	CHECK_EQ(psd_tuner_finish(s.t), 0);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_finish(s.t), 0); /* again: the same config */
	sim_fini(&s);
	csv_load(path, &c);
	unlink(path);
	CHECK_EQ(csv_count_phase(&c, "chosen"), 2);
	for (i = c.nrows - 2; i < c.nrows; i++) {
		csv_field(c.rows[i], 8, f, sizeof(f));
		CHECK_STR(f, "chosen");
		csv_field(c.rows[i], 3, f, sizeof(f));
		CHECK_U64(strtoull(f, NULL, 10), ==, best.partition_bytes);
		csv_field(c.rows[i], 4, f, sizeof(f));
		CHECK_U64(strtoull(f, NULL, 10), ==, best.credit_bytes);
		csv_field(c.rows[i], 1, f, sizeof(f));
		CHECK_U64(strtoull(f, NULL, 10), ==, s.step - 1);
	}
}

/* A retune search has its own sample budget, drift samples included. */
static void test_tuner_retune_budget(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	uint64_t before;

	sim_opts(&o, 9);
	o.max_samples = 12;
	o.retune_max_samples = 6;
	o.ei_threshold = 0.0; /* only the budget locks in */
	sim_init(&s, &o, 9);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_U64(psd_tuner_samples(s.t), ==, o.warmup_samples + 12);
	s.scale = 0.5; /* every later sample drifts */
	sim_run_until(&s, PSD_TUNER_RETUNE);
	before = psd_tuner_samples(s.t);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	/* the retune_windows drift samples count: 6 - 3 more */
	CHECK_U64(psd_tuner_samples(s.t) - before, ==,
		  o.retune_max_samples - o.retune_windows);
	sim_fini(&s);
}

/*
 * Issue 16: the lock-in goes to a config measured at least twice in its
 * search (a single lucky sample cannot win), and the replicates give the
 * GP a noise floor: the learned noise stays off its 1e-6 bound.
 */
static void test_tuner_locks_on_replicated_config(void)
{
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct psd_gp_hyper h;
	struct sim s;
	unsigned int n;
	unsigned int df;
	uint64_t seed;

	for (seed = 1; seed <= 6; seed++) {
		sim_opts(&o, seed);
		o.max_samples = 12;
		sim_init(&s, &o, seed);
		s.noise = 0.10;
		sim_run_until(&s, PSD_TUNER_LOCKED);
		CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
		psd_tuner_config_mean(s.t, best.partition_bytes,
				      best.credit_bytes, &n);
		CHECK_U64(n, >=, 2);
		psd_gp_hyper_get(psd_bo_gp(s.t->bo), &h);
		printf("# seed %llu: locked config measured %u times, "
		       "replicate noise %.3f, GP noise var %.3g, quality "
		       "%.3f\n",
		       (unsigned long long)seed, n,
		       psd_tuner_replicate_noise(s.t, &df), h.noise_var,
		       sim_locked_quality(&s));
		CHECK(h.noise_var > 1e-4);
		sim_fini(&s);
	}
}

/* Replicates: the pooled relative sd of configs sampled more than once. */
static void test_tuner_replicate_noise_estimate(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int df;
	double rel;
	unsigned int i;

	sim_opts(&o, 3);
	o.steps_per_sample = 1;
	o.warmup_samples = 0;
	o.max_samples = 40;
	o.ei_threshold = 0; /* never locks early */
	sim_init(&s, &o, 3);
	s.noise = 0.10;
	/* the initial config runs until the design moves on: 1 sample */
	CHECK_EQ(psd_tuner_replicate_noise(s.t, &df), 0.0);
	CHECK_EQ(df, 0);
	for (i = 0; i < 40; i++)
		sim_step(&s);
	rel = psd_tuner_replicate_noise(s.t, &df);
	printf("# %u replicate degrees of freedom, relative sd %.3f (true "
	       "0.10)\n",
	       df, rel);
	if (df >= 2) {
		CHECK(rel > 0.02);
		CHECK(rel < 0.30);
	}
	sim_fini(&s);
}

/*
 * Conditions (issue 16): bad values are refused; a locked tuner reopens
 * its search when a condition moves, keeps the old samples at full
 * weight (no ageing), and stays locked when it does not move.
 */
static void test_tuner_condition_move_reopens_without_ageing(void)
{
	struct psd_tuner_cond c = { 5 * 1.25e8, 0.1, 2 };
	struct psd_tuner_cond bad = c;
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int i;

	sim_opts(&o, 9);
	o.conditions = true;
	sim_init(&s, &o, 9);
	bad.link_bytes_per_s = NAN;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &bad), -EINVAL);
	bad = c;
	bad.workers = 0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &bad), -EINVAL);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	/* a 1.2x wobble is no move */
	c.link_bytes_per_s *= 1.2;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	for (i = 0; i < 5 * o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	/* the link drops 5x (the surface does not know: no drift, so the
	 * move must hold 2 samples) */
	c.link_bytes_per_s /= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	for (i = 0; i < o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	for (i = 0; i < o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	for (i = 0; i < s.t->nobs; i++)
		CHECK_NEAR(s.t->obs[i].weight, 1.0, 0.0);
	sim_fini(&s);
}

const struct test_case test_list[] = {
	{ "tuner_rounding_rules", test_tuner_rounding_rules },
	{ "tuner_rejects_bad_options", test_tuner_rejects_bad_options },
	{ "tuner_sample_is_median", test_tuner_sample_is_median },
	{ "tuner_warmup_discarded", test_tuner_warmup_discarded },
	{ "tuner_locks_near_optimum", test_tuner_locks_near_optimum },
	{ "tuner_csv_log", test_tuner_csv_log },
	{ "tuner_retunes_when_peak_moves", test_tuner_retunes_when_peak_moves },
	{ "tuner_workers_changed_retunes", test_tuner_workers_changed_retunes },
	{ "tuner_fixed_partition_tunes_credit_only",
	  test_tuner_fixed_partition_tunes_credit_only },
	{ "tuner_fixed_credit_tunes_partition_only",
	  test_tuner_fixed_credit_tunes_partition_only },
	{ "tuner_ignores_steps_before_apply",
	  test_tuner_ignores_steps_before_apply },
	{ "tuner_progress_line", test_tuner_progress_line },
	{ "tuner_finds_peaks_across_space",
	  test_tuner_finds_peaks_across_space },
	{ "tuner_retune_needs_consecutive_windows",
	  test_tuner_retune_needs_consecutive_windows },
	{ "tuner_level_shift_relocks_good_config",
	  test_tuner_level_shift_relocks_good_config },
	{ "tuner_finish_logs_chosen_last", test_tuner_finish_logs_chosen_last },
	{ "tuner_retune_budget", test_tuner_retune_budget },
	{ "tuner_locks_on_replicated_config",
	  test_tuner_locks_on_replicated_config },
	{ "tuner_replicate_noise_estimate",
	  test_tuner_replicate_noise_estimate },
	{ "tuner_condition_move_reopens_without_ageing",
	  test_tuner_condition_move_reopens_without_ageing },
	{ NULL, NULL },
};
