// SPDX-License-Identifier: MIT
/*
 * GP regression (scheduler/tuner/gp.c): hand-checkable posteriors, the
 * kernel, hyperparameter fitting, and a comparison with an independent
 * numpy implementation (tests/ref/test_gp_ref.sh sets PSCHED_GP_REF).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../harness.h"
#include "../../scheduler/tuner/gp.h"

#define REF_MAX_CASES 16
#define REF_MAX_OBS   32
#define REF_MAX_TESTS 16
#define REF_REL_TOL   1e-9

static struct psd_gp *gp_new(unsigned int dim, double len, double signal,
			     double noise)
{
	struct psd_gp_hyper h = { .signal_var = signal, .noise_var = noise };
	struct psd_gp *gp = NULL;
	unsigned int j;

	CHECK_EQ(psd_gp_create(dim, &gp), 0);
	for (j = 0; j < dim; j++)
		h.len[j] = len;
	CHECK_EQ(psd_gp_hyper_set(gp, &h), 0);
	return gp;
}

static void gp_add1(struct psd_gp *gp, double x, double y, double w)
{
	CHECK_EQ(psd_gp_add(gp, &x, y, w), 0);
}

static void test_gp_kernel_values(void)
{
	struct psd_gp_hyper h = { .len = { 0.5, 2.0 },
				  .signal_var = 1.5,
				  .noise_var = 0.1 };
	double a[2] = { 0.2, 0.7 };
	double b[2] = { 0.7, 0.7 };	  /* one length scale away in dim 0 */
	double c[2] = { 0.2, 0.7 + 4.0 }; /* two length scales in dim 1 */

	CHECK_NEAR(psd_gp_kernel(&h, 2, a, a), 1.5, 1e-15);
	CHECK_NEAR(psd_gp_kernel(&h, 2, a, b), 1.5 * 0.52399410883182029,
		   1e-14);
	CHECK_NEAR(psd_gp_kernel(&h, 2, a, c), 1.5 * 0.13866021913850426,
		   1e-14);
	CHECK(psd_gp_kernel(&h, 2, a, b) > psd_gp_kernel(&h, 2, a, c));
}

static void test_gp_kernel_symmetric_positive_definite(void)
{
	struct psd_gp_hyper h = { .len = { 0.3, 0.8, 0.5 }, .signal_var = 2.0 };
	gsl_eigen_symm_workspace *ws;
	double x[12][3];
	gsl_matrix *k;
	gsl_matrix *kc;
	gsl_vector *ev;
	unsigned int i;
	unsigned int j;

	for (i = 0; i < 12; i++)
		for (j = 0; j < 3; j++)
			x[i][j] =
				fmod(0.37 * (i + 1) * (j + 2) + 0.11 * j, 1.0);
	k = gsl_matrix_alloc(12, 12);
	kc = gsl_matrix_alloc(12, 12);
	ev = gsl_vector_alloc(12);
	ws = gsl_eigen_symm_alloc(12);
	CHECK(k && kc && ev && ws);
	for (i = 0; i < 12; i++)
		for (j = 0; j < 12; j++)
			gsl_matrix_set(k, i, j,
				       psd_gp_kernel(&h, 3, x[i], x[j]));
	for (i = 0; i < 12; i++)
		for (j = 0; j < 12; j++)
			CHECK(gsl_matrix_get(k, i, j) ==
			      gsl_matrix_get(k, j, i));
	gsl_matrix_memcpy(kc, k);
	CHECK_EQ(gsl_eigen_symm(kc, ev, ws), 0);
	for (i = 0; i < 12; i++)
		CHECK(gsl_vector_get(ev, i) > 0.0);
	gsl_eigen_symm_free(ws);
	gsl_vector_free(ev);
	gsl_matrix_free(kc);
	gsl_matrix_free(k);
}

static void test_gp_one_point_posterior(void)
{
	struct psd_gp *gp = gp_new(1, 0.2, 1.0, 1e-6);
	double x;
	double m;
	double v;

	gp_add1(gp, 0.3, 7.0, 1.0);
	x = 0.3;
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(m, 7.0, 1e-9);
	/* 1 - 1/(1 + 1e-6): the noise, in output units (sd taken as 1) */
	CHECK_NEAR(v, 1e-6 / (1.0 + 1e-6), 1e-12);
	x = 1.0; /* 3.5 length scales away */
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(v, 1.0, 1e-3);
	psd_gp_destroy(gp);
}

/* Two far-apart points: the mean interpolates, variance returns to s2. */
static void test_gp_two_points_hand_checked(void)
{
	struct psd_gp *gp = gp_new(1, 0.05, 1.7, 1e-6);
	double x;
	double m;
	double v;

	gp_add1(gp, 0.0, 10.0, 1.0);
	gp_add1(gp, 1.0, 14.0, 1.0); /* mean 12, population sd 2 */
	x = 0.0;
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(m, 10.0, 1e-5);
	CHECK(v < 1e-4);
	x = 1.0;
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(m, 14.0, 1e-5);
	x = 0.5; /* 10 length scales from both: prior mean, prior variance */
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(m, 12.0, 1e-9);
	CHECK_NEAR(v, 1.7 * 4.0, 1e-6);
	psd_gp_destroy(gp);
}

static void test_gp_weight_downweights_point(void)
{
	struct psd_gp *gp = gp_new(1, 0.3, 1.0, 0.01);
	double x = 0.5;
	double m;
	double v;

	gp_add1(gp, 0.5, 10.0, 1.0);
	gp_add1(gp, 0.5, 20.0, 1.0);
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(m, 15.0, 1e-6);
	psd_gp_clear(gp);
	gp_add1(gp, 0.5, 10.0, 1.0);
	gp_add1(gp, 0.5, 20.0, 1000.0);
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK(m < 10.5);
	/* ageing the old point lets a fresh one dominate */
	psd_gp_clear(gp);
	gp_add1(gp, 0.5, 10.0, 1.0);
	CHECK_EQ(psd_gp_scale_weights(gp, 1000.0), 0);
	gp_add1(gp, 0.5, 20.0, 1.0);
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK(m > 19.5);
	psd_gp_destroy(gp);
}

static void test_gp_rejects_bad_input(void)
{
	struct psd_gp_hyper h = { .len = { 0.3 }, .signal_var = 1.0 };
	struct psd_gp_fit_opts fo;
	struct psd_gp *gp = NULL;
	double x = 0.5;
	double bad = NAN;

	CHECK_EQ(psd_gp_create(0, &gp), -EINVAL);
	CHECK_EQ(psd_gp_create(PSD_GP_MAX_DIM + 1, &gp), -EINVAL);
	gp = gp_new(1, 0.3, 1.0, 0.01);
	CHECK_EQ(psd_gp_add(gp, &x, 1.0, 0.5), -EINVAL);
	CHECK_EQ(psd_gp_add(gp, &x, NAN, 1.0), -EINVAL);
	CHECK_EQ(psd_gp_add(gp, &bad, 1.0, 1.0), -EINVAL);
	CHECK_EQ(psd_gp_count(gp), 0);
	CHECK_EQ(psd_gp_hyper_set(gp, &h), -EINVAL); /* noise 0 */
	CHECK_EQ(psd_gp_scale_weights(gp, 0.5), -EINVAL);
	psd_gp_fit_opts_default(&fo);
	fo.bounds.len_lo = 2.0 * fo.bounds.len_hi;
	CHECK_EQ(psd_gp_fit(gp, &fo), -EINVAL);
	CHECK_EQ(psd_gp_gsl_status(GSL_EDOM), -EDOM);
	CHECK_EQ(psd_gp_gsl_status(GSL_ENOMEM), -ENOMEM);
	CHECK_EQ(psd_gp_gsl_status(GSL_SUCCESS), 0);
	psd_gp_destroy(gp);
	psd_gp_destroy(NULL);
}

/* Duplicates with almost no noise are singular: the jitter retry works. */
static void test_gp_jitter_rescues_singular_matrix(void)
{
	struct psd_gp *gp = gp_new(1, 0.3, 1.0, 1e-300);
	double x = 0.25;
	double m;
	double v;

	gp_add1(gp, 0.25, 3.0, 1.0);
	gp_add1(gp, 0.25, 3.0, 1.0);
	gp_add1(gp, 0.75, 5.0, 1.0);
	CHECK_EQ(psd_gp_predict(gp, &x, &m, &v), 0);
	CHECK_NEAR(m, 3.0, 1e-3);
	psd_gp_destroy(gp);
}

static void test_gp_grows_past_initial_capacity(void)
{
	struct psd_gp *gp = gp_new(2, 0.2, 1.0, 1e-4);
	double x[2];
	double m;
	double v;
	unsigned int i;

	for (i = 0; i < 100; i++) {
		x[0] = (i % 10) / 9.0;
		x[1] = (i / 10) / 9.0;
		CHECK_EQ(psd_gp_add(gp, x, sin(3 * x[0]) + x[1], 1.0), 0);
	}
	CHECK_EQ(psd_gp_count(gp), 100);
	x[0] = 4.0 / 9.0;
	x[1] = 7.0 / 9.0;
	CHECK_EQ(psd_gp_predict(gp, x, &m, &v), 0);
	CHECK_NEAR(m, sin(3 * x[0]) + x[1], 1e-2);
	psd_gp_destroy(gp);
}

/* Noisy samples of a smooth 2-D function, deterministic. */
static void gp_fill_smooth(struct psd_gp *gp, unsigned int n)
{
	double x[2];
	double y;
	unsigned int i;

	for (i = 0; i < n; i++) {
		x[0] = fmod(0.618034 * i, 1.0);
		x[1] = fmod(0.414214 * i + 0.3, 1.0);
		y = 50.0 + 10.0 * sin(4.0 * x[0]) * cos(2.0 * x[1]) +
		    0.2 * sin(97.0 * i);
		CHECK_EQ(psd_gp_add(gp, x, y, 1.0), 0);
	}
}

static void test_gp_fit_increases_log_marginal(void)
{
	struct psd_gp *gp = gp_new(2, 3.9, 0.06, 0.9);
	struct psd_gp_fit_opts fo;
	double before;
	double after;

	gp_fill_smooth(gp, 20);
	CHECK_EQ(psd_gp_log_marginal(gp, &before), 0);
	psd_gp_fit_opts_default(&fo);
	fo.seed = 7;
	CHECK_EQ(psd_gp_fit(gp, &fo), 0);
	CHECK_EQ(psd_gp_log_marginal(gp, &after), 0);
	CHECK(after > before + 5.0);
	psd_gp_destroy(gp);
}

static void test_gp_fit_respects_bounds(void)
{
	struct psd_gp *gp = gp_new(2, 0.22, 0.55, 0.015);
	struct psd_gp_fit_opts fo;
	struct psd_gp_hyper h;
	double ymean;
	double ysd;

	gp_fill_smooth(gp, 15);
	psd_gp_fit_opts_default(&fo);
	fo.bounds = (struct psd_gp_bounds){ 0.2, 0.25, 0.5, 0.6, 0.01, 0.02 };
	CHECK_EQ(psd_gp_fit(gp, &fo), 0);
	psd_gp_hyper_get(gp, &h);
	CHECK(h.len[0] >= 0.2 && h.len[0] <= 0.25);
	CHECK(h.len[1] >= 0.2 && h.len[1] <= 0.25);
	CHECK(h.signal_var >= 0.5 && h.signal_var <= 0.6);
	CHECK(h.noise_var >= 0.01 && h.noise_var <= 0.02);
	/* fixed noise: given as an sd in output units */
	psd_gp_fit_opts_default(&fo);
	fo.noise_sd = 0.5;
	CHECK_EQ(psd_gp_fit(gp, &fo), 0);
	psd_gp_hyper_get(gp, &h);
	psd_gp_output_scale(gp, &ymean, &ysd);
	CHECK_NEAR(h.noise_var, 0.25 / (ysd * ysd), 1e-12);
	CHECK(h.len[0] >= fo.bounds.len_lo && h.len[0] <= fo.bounds.len_hi);
	psd_gp_destroy(gp);
}

/* ---- the noise term on noisy data (issue 16) ---- */

#define NOISY_FITS 40
#define AT_BOUND   1e-5 /* noise_var below this: at the 1e-6 bound */

/*
 * A tuner-like data set: 10 samples of a smooth peak over [0,1]^2 with
 * 10 % multiplicative noise.  Returns the fitted standardized noise
 * variance.
 */
static double gp_noisy_fit(unsigned long seed, double noise_prior,
			   double floor_sd)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	struct psd_gp *gp = gp_new(2, 0.3, 1.0, 0.01);
	struct psd_gp_fit_opts fo;
	struct psd_gp_hyper h;
	double x[2];
	double y;
	unsigned int i;

	gsl_rng_set(r, seed);
	for (i = 0; i < 10; i++) {
		x[0] = gsl_rng_uniform(r);
		x[1] = gsl_rng_uniform(r);
		y = 20.0 + 100.0 * exp(-(x[0] - 0.6) * (x[0] - 0.6) / 0.08 -
				       (x[1] - 0.4) * (x[1] - 0.4) / 0.18);
		y *= 1.0 + gsl_ran_gaussian(r, 0.10);
		CHECK_EQ(psd_gp_add(gp, x, y, 1.0), 0);
	}
	psd_gp_fit_opts_default(&fo);
	fo.len_prior = 0.3; /* as the tuner's BO */
	fo.len_prior_sd = 1.0;
	fo.starts = 2;
	fo.noise_prior = noise_prior;
	fo.noise_prior_sd = 1.5;
	fo.noise_floor_sd = floor_sd;
	fo.seed = seed;
	CHECK_EQ(psd_gp_fit(gp, &fo), 0);
	psd_gp_hyper_get(gp, &h);
	if (floor_sd > 0.0) {
		double ymean;
		double ysd;

		psd_gp_output_scale(gp, &ymean, &ysd);
		/* the learned noise sd, in output units, is above the floor */
		CHECK(sqrt(h.noise_var) * ysd >= floor_sd * (1.0 - 1e-9));
	}
	psd_gp_destroy(gp);
	gsl_rng_free(r);
	return h.noise_var;
}

/* Without a prior the noise term falls to its bound on part of the fits
 * (the GP then interpolates the noise); the prior keeps every fit off. */
static void test_gp_noise_prior_keeps_noise_off_bound(void)
{
	unsigned int bare = 0;
	unsigned int prior = 0;
	unsigned long s;

	for (s = 1; s <= NOISY_FITS; s++) {
		bare += gp_noisy_fit(s, 0.0, 0.0) < AT_BOUND;
		prior += gp_noisy_fit(s, 0.05, 0.0) < AT_BOUND;
	}
	printf("# noise at its bound: %u of %d fits without a prior, %u "
	       "with\n",
	       bare, NOISY_FITS, prior);
	CHECK(bare > 0); /* the problem the prior is for */
	CHECK_EQ(prior, 0);
}

/* A measured floor holds whatever the likelihood prefers. */
static void test_gp_noise_floor_holds(void)
{
	unsigned long s;

	for (s = 1; s <= 10; s++)
		CHECK(gp_noisy_fit(s, 0.0, 6.0) > AT_BOUND);
}

/* ---- comparison with tests/ref/gp_ref.py ---- */

struct ref_case {
	char name[64];
	unsigned int dim;
	struct psd_gp_hyper h;
	unsigned int n;
	double x[REF_MAX_OBS][PSD_GP_MAX_DIM];
	double y[REF_MAX_OBS];
	double w[REF_MAX_OBS];
	unsigned int m;
	double t[REF_MAX_TESTS][PSD_GP_MAX_DIM];
};

/* Parse @want numbers from @s into @v; returns the count parsed. */
static unsigned int ref_numbers(const char *s, double *v, unsigned int want)
{
	unsigned int k = 0;
	char *end;

	while (k < want) {
		v[k] = strtod(s, &end);
		if (end == s)
			break;
		s = end;
		k++;
	}
	return k;
}

static void ref_parse_line(struct ref_case *c, const char *line)
{
	double v[PSD_GP_MAX_DIM + 2];
	unsigned int d = c->dim;

	if (!strncmp(line, "hyper ", 6)) {
		CHECK_EQ(ref_numbers(line + 6, v, d + 2), d + 2);
		memcpy(c->h.len, v, sizeof(*v) * d);
		c->h.signal_var = v[d];
		c->h.noise_var = v[d + 1];
	} else if (!strncmp(line, "obs ", 4)) {
		CHECK(c->n < REF_MAX_OBS);
		CHECK_EQ(ref_numbers(line + 4, v, d + 2), d + 2);
		memcpy(c->x[c->n], v, sizeof(*v) * d);
		c->y[c->n] = v[d];
		c->w[c->n++] = v[d + 1];
	} else if (!strncmp(line, "test ", 5)) {
		CHECK(c->m < REF_MAX_TESTS);
		CHECK_EQ(ref_numbers(line + 5, v, d), d);
		memcpy(c->t[c->m++], v, sizeof(*v) * d);
	} else {
		test_fail_at(__FILE__, __LINE__, "bad case line: %s", line);
	}
}

static unsigned int ref_load_cases(const char *path, struct ref_case *cs)
{
	struct ref_case *c = NULL;
	unsigned int nc = 0;
	char line[512];
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		test_fail_at(__FILE__, __LINE__, "cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (!strncmp(line, "case ", 5)) {
			CHECK(nc < REF_MAX_CASES);
			c = &cs[nc++];
			memset(c, 0, sizeof(*c));
			CHECK_EQ(sscanf(line, "case %63s %u", c->name, &c->dim),
				 2);
			CHECK(c->dim >= 1 && c->dim <= PSD_GP_MAX_DIM);
		} else if (!strcmp(line, "end")) {
			c = NULL;
		} else {
			CHECK(c != NULL);
			ref_parse_line(c, line);
		}
	}
	fclose(f);
	return nc;
}

static struct psd_gp *ref_build(const struct ref_case *c)
{
	struct psd_gp *gp = NULL;
	unsigned int i;

	CHECK_EQ(psd_gp_create(c->dim, &gp), 0);
	CHECK_EQ(psd_gp_hyper_set(gp, &c->h), 0);
	for (i = 0; i < c->n; i++)
		CHECK_EQ(psd_gp_add(gp, c->x[i], c->y[i], c->w[i]), 0);
	return gp;
}

static void ref_check_rel(const char *what, const char *name, double got,
			  double want)
{
	if (!(fabs(got - want) <= REF_REL_TOL * fabs(want)))
		test_fail_at(__FILE__, __LINE__,
			     "%s of %s: C %.17g, numpy %.17g", what, name, got,
			     want);
}

/* Check one line of the reference output against the C GP. */
static void ref_check_line(const struct ref_case *cs, unsigned int nc,
			   const char *line)
{
	char name[64];
	unsigned int idx = 0;
	unsigned int i;
	double a = 0.0;
	double b = 0.0;
	double m;
	double v;
	int lml = !strncmp(line, "lml ", 4);
	struct psd_gp *gp;

	if (lml)
		CHECK_EQ(sscanf(line, "lml %63s %lf", name, &a), 2);
	else
		CHECK_EQ(sscanf(line, "pred %63s %u %lf %lf", name, &idx, &a,
				&b),
			 4);
	for (i = 0; i < nc && strcmp(cs[i].name, name); i++)
		;
	CHECK(i < nc);
	CHECK(idx < cs[i].m);
	gp = ref_build(&cs[i]);
	if (lml) {
		CHECK_EQ(psd_gp_log_marginal(gp, &m), 0);
		ref_check_rel("lml", name, m, a);
	} else {
		CHECK_EQ(psd_gp_predict(gp, cs[i].t[idx], &m, &v), 0);
		ref_check_rel("mean", name, m, a);
		ref_check_rel("variance", name, v, b);
	}
	psd_gp_destroy(gp);
}

static void test_gp_matches_numpy_reference(void)
{
	static struct ref_case cs[REF_MAX_CASES];
	const char *ref = getenv("PSCHED_GP_REF");
	const char *cases = getenv("PSCHED_GP_CASES");
	unsigned int nc;
	unsigned int i;
	unsigned int want = 0;
	unsigned int seen = 0;
	char line[512];
	FILE *f;

	if (!ref)
		test_skip("PSCHED_GP_REF unset (run tests/ref/test_gp_ref.sh)");
	nc = ref_load_cases(cases ? cases : "tests/ref/gp_cases.txt", cs);
	CHECK(nc > 0);
	for (i = 0; i < nc; i++)
		want += cs[i].m + 1;
	f = fopen(ref, "r");
	if (!f)
		test_fail_at(__FILE__, __LINE__, "cannot open %s", ref);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '\0')
			continue;
		ref_check_line(cs, nc, line);
		seen++;
	}
	fclose(f);
	CHECK_EQ(seen, want);
}

/* ---- context: a peak that moves with a condition (issue 16) ---- */

/* A ridge: the peak in x sits at 0.3 + 0.5 c. */
static double ridge(double x, double c)
{
	double d = (x - 0.3 - 0.5 * c) / 0.12;

	return exp(-0.5 * d * d);
}

/* Argmax over x in [0,1] of the posterior mean at context @c. */
static double ridge_argmax(struct psd_gp *gp, double c)
{
	double best = -HUGE_VAL;
	double at = 0.0;
	double m;
	double v;
	unsigned int i;

	for (i = 0; i <= 200; i++) {
		double x[2] = { i / 200.0, c };

		CHECK_EQ(psd_gp_predict(gp, x, &m, &v), 0);
		if (m > best) {
			best = m;
			at = x[0];
		}
	}
	return at;
}

static struct psd_gp *ridge_fit(double shear_sd)
{
	static const double ctx[2] = { 0.2, 0.6 };
	struct psd_gp_fit_opts fo;
	struct psd_gp *gp = NULL;
	unsigned int i;
	unsigned int k;

	CHECK_EQ(psd_gp_create(2, &gp), 0);
	for (k = 0; k < 2; k++)
		for (i = 0; i < 11; i++) {
			double x[2] = { i / 10.0, ctx[k] };

			CHECK_EQ(psd_gp_add(gp, x, ridge(x[0], x[1]), 1.0), 0);
		}
	psd_gp_fit_opts_default(&fo);
	fo.seed = 3;
	fo.len_prior = 0.3;
	fo.len_prior_sd = 1.0;
	fo.nctx = 1;
	fo.shear_prior_sd = shear_sd; /* prior mean 0: the data must say */
	CHECK_EQ(psd_gp_fit(gp, &fo), 0);
	return gp;
}

/*
 * The kernel with a shear is the plain kernel of shifted inputs; the fit
 * finds the ridge's slope from two contexts and puts the peak of a third,
 * unseen one where it is, which the fit without a shear does not.
 */
static void test_gp_context_shear_follows_ridge(void)
{
	struct psd_gp_hyper h = { .len = { 0.3, 0.5 },
				  .signal_var = 1.2,
				  .nctx = 1,
				  .shear = { 0.5 } };
	struct psd_gp_hyper plain = h;
	double a[2] = { 0.7, 0.9 };
	double b[2] = { 0.2, 0.3 };
	double as[2] = { 0.7 - 0.5 * 0.9, 0.9 };
	double bs[2] = { 0.2 - 0.5 * 0.3, 0.3 };
	struct psd_gp *gp;
	double with;
	double without;

	plain.shear[0] = 0.0;
	CHECK_NEAR(psd_gp_kernel(&h, 2, a, b), psd_gp_kernel(&plain, 2, as, bs),
		   1e-12);
	CHECK(fabs(psd_gp_kernel(&h, 2, a, b) -
		   psd_gp_kernel(&plain, 2, a, b)) > 1e-3);

	gp = ridge_fit(2.0);
	psd_gp_hyper_get(gp, &h);
	printf("# fitted shear %.3f (true 0.5)\n", h.shear[0]);
	CHECK(fabs(h.shear[0] - 0.5) < 0.1);
	with = ridge_argmax(gp, 0.9);
	psd_gp_destroy(gp);
	gp = ridge_fit(0.0);
	psd_gp_hyper_get(gp, &h);
	CHECK(h.shear[0] == 0.0);
	without = ridge_argmax(gp, 0.9);
	psd_gp_destroy(gp);
	printf("# peak at the unseen context: %.3f with the shear, %.3f "
	       "without (true 0.75)\n",
	       with, without);
	CHECK(fabs(with - 0.75) < 0.05);
	CHECK(fabs(without - 0.75) > 2.0 * fabs(with - 0.75));
}

const struct test_case test_list[] = {
	{ "gp_kernel_values", test_gp_kernel_values },
	{ "gp_kernel_symmetric_positive_definite",
	  test_gp_kernel_symmetric_positive_definite },
	{ "gp_one_point_posterior", test_gp_one_point_posterior },
	{ "gp_two_points_hand_checked", test_gp_two_points_hand_checked },
	{ "gp_weight_downweights_point", test_gp_weight_downweights_point },
	{ "gp_rejects_bad_input", test_gp_rejects_bad_input },
	{ "gp_jitter_rescues_singular_matrix",
	  test_gp_jitter_rescues_singular_matrix },
	{ "gp_grows_past_initial_capacity",
	  test_gp_grows_past_initial_capacity },
	{ "gp_fit_increases_log_marginal", test_gp_fit_increases_log_marginal },
	{ "gp_fit_respects_bounds", test_gp_fit_respects_bounds },
	{ "gp_matches_numpy_reference", test_gp_matches_numpy_reference },
	{ "gp_noise_prior_keeps_noise_off_bound",
	  test_gp_noise_prior_keeps_noise_off_bound },
	{ "gp_noise_floor_holds", test_gp_noise_floor_holds },
	{ "gp_context_shear_follows_ridge",
	  test_gp_context_shear_follows_ridge },
	{ NULL, NULL },
};
