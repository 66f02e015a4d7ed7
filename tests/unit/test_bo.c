// SPDX-License-Identifier: MIT
/*
 * Bayesian optimization (scheduler/tuner/bo.c) on Branin and on a noisy
 * ridge, both scaled to the unit box, against random search.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../harness.h"
#include "../../scheduler/tuner/bo.h"

#define BO_SEEDS  20
#define BO_BUDGET 25
#define BO_NEED	  14 /* seeds that must get within 2% of the optimum */

/* A maximization problem on [0,1]^2; @noise_sd is added per evaluation. */
struct bo_problem {
	const char *name;
	double (*f)(const double *x);
	double fmax; /* the optimum */
	double fmin; /* minimum over the box, for the range */
	double noise_sd;
};

/* Branin-Hoo, negated; x0 in [-5, 10], x1 in [0, 15]. */
static double bo_branin(const double *x)
{
	const double a = 1.0;
	const double b = 5.1 / (4.0 * M_PI * M_PI);
	const double c = 5.0 / M_PI;
	const double t = 1.0 / (8.0 * M_PI);
	double u = 15.0 * x[0] - 5.0;
	double v = 15.0 * x[1];
	double q = v - b * u * u + c * u - 6.0;

	return -(a * q * q + 10.0 * (1.0 - t) * cos(u) + 10.0);
}

/* A diagonal ridge along x1 = 0.2 + 0.6 x0 rising towards x0 = 1. */
static double bo_ridge(const double *x)
{
	double d = x[1] - 0.2 - 0.6 * x[0];

	return (0.5 + 0.5 * x[0]) * exp(-d * d / (2.0 * 0.15 * 0.15));
}

static const struct bo_problem bo_branin_problem = {
	.name = "branin",
	.f = bo_branin,
	.fmax = -0.397887357729738,
	.fmin = -308.129096012754,
	.noise_sd = 0.0,
};

static const struct bo_problem bo_ridge_problem = {
	.name = "ridge",
	.f = bo_ridge,
	.fmax = 1.0,
	.fmin = 0.0,
	.noise_sd = 0.02,
};

/* Best true value BO finds within the budget. */
static double bo_run(const struct bo_problem *p, uint64_t seed, gsl_rng *r)
{
	struct psd_bo_suggestion s;
	struct psd_bo_opts o;
	struct psd_bo *bo = NULL;
	double best = -HUGE_VAL;
	double y;
	unsigned int i;

	psd_bo_opts_default(&o, 2);
	o.seed = seed;
	o.fit_starts = 1;
	CHECK_EQ(psd_bo_create(&o, &bo), 0);
	for (i = 0; i < BO_BUDGET; i++) {
		CHECK_EQ(psd_bo_suggest(bo, &s), 0);
		CHECK(s.x[0] >= 0.0 && s.x[0] <= 1.0);
		CHECK(s.x[1] >= 0.0 && s.x[1] <= 1.0);
		CHECK_EQ(s.from_design, i < o.n_init);
		y = p->f(s.x);
		best = fmax(best, y);
		if (p->noise_sd > 0.0)
			y += gsl_ran_gaussian(r, p->noise_sd);
		CHECK_EQ(psd_bo_observe(bo, s.x, y, 1.0), 0);
	}
	psd_bo_destroy(bo);
	return best;
}

static double bo_random_run(const struct bo_problem *p, gsl_rng *r)
{
	double best = -HUGE_VAL;
	double x[2];
	unsigned int i;

	for (i = 0; i < BO_BUDGET; i++) {
		x[0] = gsl_rng_uniform(r);
		x[1] = gsl_rng_uniform(r);
		best = fmax(best, p->f(x));
	}
	return best;
}

static void bo_check_problem(const struct bo_problem *p)
{
	double range = p->fmax - p->fmin;
	double bo_sum = 0.0;
	double rs_sum = 0.0;
	double best;
	unsigned int hits = 0;
	unsigned int seed;
	gsl_rng *r;

	r = gsl_rng_alloc(gsl_rng_mt19937);
	CHECK(r);
	for (seed = 1; seed <= BO_SEEDS; seed++) {
		gsl_rng_set(r, 1000 + seed);
		best = bo_run(p, seed, r);
		bo_sum += best;
		if (p->fmax - best <= 0.02 * range)
			hits++;
		rs_sum += bo_random_run(p, r);
	}
	gsl_rng_free(r);
	printf("# %s: %u/%u seeds within 2%%, mean best bo %.4g random %.4g "
	       "(optimum %.4g)\n",
	       p->name, hits, BO_SEEDS, bo_sum / BO_SEEDS, rs_sum / BO_SEEDS,
	       p->fmax);
	CHECK_INT(hits, >=, BO_NEED);
	CHECK(bo_sum > rs_sum);
}

static void test_bo_branin_beats_random_search(void)
{
	bo_check_problem(&bo_branin_problem);
}

static void test_bo_noisy_ridge_beats_random_search(void)
{
	bo_check_problem(&bo_ridge_problem);
}

/* Same seed, same calls: same suggestions. */
static void test_bo_deterministic_given_seed(void)
{
	struct psd_bo_suggestion s[2];
	struct psd_bo_opts o;
	struct psd_bo *bo[2] = { NULL, NULL };
	unsigned int i;
	unsigned int k;

	psd_bo_opts_default(&o, 2);
	o.seed = 42;
	for (k = 0; k < 2; k++)
		CHECK_EQ(psd_bo_create(&o, &bo[k]), 0);
	for (i = 0; i < 8; i++) {
		for (k = 0; k < 2; k++) {
			CHECK_EQ(psd_bo_suggest(bo[k], &s[k]), 0);
			CHECK_EQ(psd_bo_observe(bo[k], s[k].x,
						bo_branin(s[k].x), 1.0),
				 0);
		}
		CHECK(s[0].x[0] == s[1].x[0] && s[0].x[1] == s[1].x[1]);
	}
	for (k = 0; k < 2; k++)
		psd_bo_destroy(bo[k]);
}

static void test_bo_expected_improvement_formula(void)
{
	/* z = 0: EI = sd * phi(0) */
	CHECK_NEAR(psd_bo_ei(1.0, 2.0, 1.0, 0.0), 2.0 / sqrt(2.0 * M_PI),
		   1e-12);
	/* exact prediction: plain improvement, never negative */
	CHECK_NEAR(psd_bo_ei(3.0, 0.0, 1.0, 0.5), 1.5, 1e-15);
	CHECK_NEAR(psd_bo_ei(0.0, 0.0, 1.0, 0.0), 0.0, 0.0);
	/* larger sd, larger EI; larger xi, smaller EI */
	CHECK(psd_bo_ei(0.0, 2.0, 1.0, 0.0) > psd_bo_ei(0.0, 1.0, 1.0, 0.0));
	CHECK(psd_bo_ei(0.0, 1.0, 1.0, 0.5) < psd_bo_ei(0.0, 1.0, 1.0, 0.0));
	/* z = 1, from tables: 1 * 0.841344746 + 1 * 0.241970725 */
	CHECK_NEAR(psd_bo_ei(2.0, 1.0, 1.0, 0.0), 1.083315471, 1e-8);
}

/* UCB with a large kappa goes where the GP knows least. */
static void bo_check_ucb_far(unsigned int n_screen, uint64_t seed)
{
	struct psd_bo_suggestion s;
	struct psd_bo_opts o;
	struct psd_bo *bo = NULL;
	double x;
	unsigned int i;

	psd_bo_opts_default(&o, 1);
	o.acq = PSD_BO_ACQ_UCB;
	o.kappa = 50.0;
	o.noise_sd = 0.01;
	o.n_screen = n_screen;
	o.n_refine = 1;
	o.seed = seed;
	CHECK_EQ(psd_bo_create(&o, &bo), 0);
	for (i = 0; i < 5; i++) {
		x = 0.06 * i; /* falling on [0, 0.24]: the mean prefers 0 */
		CHECK_EQ(psd_bo_observe(bo, &x, 1.0 - 0.5 * x, 1.0), 0);
	}
	CHECK_EQ(psd_bo_suggest(bo, &s), 0);
	CHECK(!s.from_design);
	CHECK(s.x[0] > 0.9);
	CHECK(s.sd > 0.0);
	psd_bo_destroy(bo);
}

static void test_bo_ucb_explores_far_from_data(void)
{
	bo_check_ucb_far(512, 0);
}

/* One screen point only: the local refine has to climb to the optimum. */
static void test_bo_refine_climbs_from_one_screen_point(void)
{
	uint64_t seed;

	for (seed = 1; seed <= 5; seed++)
		bo_check_ucb_far(1, seed);
}

static void test_bo_rejects_bad_input(void)
{
	struct psd_bo_opts o;
	struct psd_bo *bo = NULL;
	double x[2] = { 0.5, 1.5 };

	psd_bo_opts_default(&o, 0);
	CHECK_EQ(psd_bo_create(&o, &bo), -EINVAL);
	psd_bo_opts_default(&o, 2);
	o.n_refine = 0;
	CHECK_EQ(psd_bo_create(&o, &bo), -EINVAL);
	psd_bo_opts_default(&o, 2);
	CHECK_EQ(psd_bo_create(&o, &bo), 0);
	CHECK_EQ(psd_bo_observe(bo, x, 1.0, 1.0), -EINVAL);
	x[1] = 0.5;
	CHECK_EQ(psd_bo_observe(bo, x, 1.0, 0.0), -EINVAL);
	CHECK_EQ(psd_bo_age(bo, 0.5), -EINVAL);
	CHECK_EQ(psd_bo_set_noise_sd(bo, -1.0), -EINVAL);
	CHECK_EQ(psd_bo_count(bo), 0);
	psd_bo_destroy(bo);
	psd_bo_destroy(NULL);
}

/*
 * Context (issue 16): the last input is a condition the BO does not
 * choose.  Suggestions keep it at the context, design points too, and the
 * search over the free input finds the peak of the slice at that context.
 */
static void test_bo_context_is_held(void)
{
	struct psd_bo_suggestion sg;
	struct psd_bo_opts o;
	struct psd_bo *bo;
	double ctx = 0.8;
	double bad = 1.5;
	double x[2];
	unsigned int i;

	psd_bo_opts_default(&o, 2);
	o.n_init = 3;
	o.seed = 3;
	CHECK_EQ(psd_bo_create(&o, &bo), 0);
	CHECK_EQ(psd_bo_set_context(bo, &bad, 1), -EINVAL);
	CHECK_EQ(psd_bo_set_context(bo, &ctx, 2), -EINVAL); /* nothing free */
	CHECK_EQ(psd_bo_set_context(bo, &ctx, 1), 0);
	for (i = 0; i < 14; i++) {
		CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
		CHECK_NEAR(sg.x[1], ctx, 0.0);
		x[0] = sg.x[0];
		x[1] = sg.x[1];
		/* peak at x0 = context */
		CHECK_EQ(psd_bo_observe(bo, x,
					10.0 - 20.0 * (x[0] - x[1]) *
							(x[0] - x[1]),
					1.0),
			 0);
	}
	CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
	printf("# context 0.8: suggestion x0 %.3f\n", sg.x[0]);
	CHECK_NEAR(sg.x[0], ctx, 0.1);
	psd_bo_destroy(bo);
}

/*
 * Trust region: design points, acquisition and mean maxima stay inside it
 * even when the function's peak is outside (a corner), and the whole box
 * comes back with a NULL center.
 */
static void test_bo_region_is_kept(void)
{
	struct psd_bo_suggestion sg;
	struct psd_bo_opts o;
	struct psd_bo *bo;
	double center[2] = { 0.3, 0.6 };
	double half[2] = { 0.1, 0.05 };
	double bad[2] = { 1.2, 0.5 };
	double neg[2] = { 0.1, -0.1 };
	bool outside = false;
	unsigned int i;

	psd_bo_opts_default(&o, 2);
	o.seed = 5;
	CHECK_EQ(psd_bo_create(&o, &bo), 0);
	CHECK_EQ(psd_bo_set_region(bo, bad, half), -EINVAL);
	CHECK_EQ(psd_bo_set_region(bo, center, neg), -EINVAL);
	CHECK_EQ(psd_bo_set_region(bo, center, half), 0);
	for (i = 0; i < 14; i++) {
		CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
		CHECK(fabs(sg.x[0] - center[0]) <= half[0] + 1e-12);
		CHECK(fabs(sg.x[1] - center[1]) <= half[1] + 1e-12);
		/* the peak is the corner (1, 1), far outside */
		CHECK_EQ(psd_bo_observe(bo, sg.x, sg.x[0] + sg.x[1], 1.0), 0);
	}
	CHECK_EQ(psd_bo_suggest_mean(bo, &sg), 0);
	printf("# region: mean maximum at %.3f %.3f\n", sg.x[0], sg.x[1]);
	CHECK_NEAR(sg.x[0], center[0] + half[0], 0.02);
	CHECK_NEAR(sg.x[1], center[1] + half[1], 0.02);
	CHECK_EQ(psd_bo_set_region(bo, NULL, NULL), 0);
	for (i = 0; i < 6 && !outside; i++) {
		CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
		outside = sg.x[0] > center[0] + half[0] + 0.05 ||
			  sg.x[1] > center[1] + half[1] + 0.05;
		CHECK_EQ(psd_bo_observe(bo, sg.x, sg.x[0] + sg.x[1], 1.0), 0);
	}
	CHECK(outside); /* the whole box again: it heads for the corner */
	psd_bo_destroy(bo);
}

/*
 * Floor (the tuner's credit from the bandwidth-delay product): with the
 * function's peak below it (the corner (0, 0)), design points,
 * acquisition and mean maxima all keep 2 x0 + x1 >= 1.2, those that land
 * on it are raised onto it, and a region whose top cannot reach it is
 * left for the box.  Without the floor the same search goes below it.
 */
static void test_bo_floor_is_kept(void)
{
	struct psd_bo_suggestion sg;
	struct psd_bo_opts o;
	struct psd_bo *bo;
	double w[2] = { 2.0, 1.0 };
	double neg[2] = { 1.0, -1.0 };
	double center[2] = { 0.2, 0.2 };
	double half[2] = { 0.1, 0.1 };
	unsigned int below = 0;
	unsigned int on = 0;
	unsigned int pass;
	unsigned int i;

	for (pass = 0; pass < 2; pass++) {
		psd_bo_opts_default(&o, 2);
		o.seed = 3;
		CHECK_EQ(psd_bo_create(&o, &bo), 0);
		CHECK_EQ(psd_bo_set_floor(bo, neg, 1.0), -EINVAL);
		CHECK_EQ(psd_bo_set_floor(bo, w, NAN), -EINVAL);
		if (pass)
			CHECK_EQ(psd_bo_set_floor(bo, w, 1.2), 0);
		for (i = 0; i < 14; i++) {
			CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
			if (2.0 * sg.x[0] + sg.x[1] < 1.2 - 1e-9)
				below++;
			if (pass) {
				CHECK(2.0 * sg.x[0] + sg.x[1] >= 1.2 - 1e-9);
				on += fabs(2.0 * sg.x[0] + sg.x[1] - 1.2) <
				      1e-6;
			}
			CHECK_EQ(psd_bo_observe(bo, sg.x, -sg.x[0] - sg.x[1],
						1.0),
				 0);
		}
		if (!pass) {
			printf("# no floor: %u of 14 suggestions below it\n",
			       below);
			CHECK_INT(below, >=, 3);
			psd_bo_destroy(bo);
			continue;
		}
		printf("# floor: %u of 14 suggestions on it\n", on);
		CHECK_INT(on, >=, 3); /* the peak side pushes them onto it */
		CHECK_EQ(psd_bo_suggest_mean(bo, &sg), 0);
		CHECK(2.0 * sg.x[0] + sg.x[1] >= 1.2 - 1e-9);
		/* a region below the floor: its points leave it upwards */
		CHECK_EQ(psd_bo_set_region(bo, center, half), 0);
		for (i = 0; i < 4; i++) {
			CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
			CHECK(2.0 * sg.x[0] + sg.x[1] >= 1.2 - 1e-9);
			CHECK_EQ(psd_bo_observe(bo, sg.x, -sg.x[0] - sg.x[1],
						1.0),
				 0);
		}
		/* no floor again: the region's own points */
		CHECK_EQ(psd_bo_set_floor(bo, NULL, 0.0), 0);
		CHECK_EQ(psd_bo_suggest(bo, &sg), 0);
		CHECK(sg.x[0] <= 0.3 + 1e-12 && sg.x[1] <= 0.3 + 1e-12);
		psd_bo_destroy(bo);
	}
}

/*
 * EI per unit of time (outputs are ln(rate)): the same data and seed give
 * the same screen, each point's EI scaled by at most 1, so the cost-aware
 * maximum is never above the plain one, and below it where the plain
 * choice is predicted slower than the incumbent.
 */
static void test_bo_cost_aware_scales_ei(void)
{
	struct psd_bo_suggestion plain;
	struct psd_bo_suggestion cost;
	struct psd_bo_opts o;
	struct psd_bo *a;
	struct psd_bo *b;
	unsigned int lower = 0;
	uint64_t seed;
	double x;
	unsigned int i;

	for (seed = 1; seed <= 6; seed++) {
		psd_bo_opts_default(&o, 1);
		o.seed = seed;
		CHECK_EQ(psd_bo_create(&o, &a), 0);
		CHECK_EQ(psd_bo_create(&o, &b), 0);
		for (i = 0; i < 7; i++) {
			/* samples near the peak, one at the far end: the gap
			 * between is uncertain and predicted slower */
			x = i < 6 ? 0.2 + 0.05 * i : 0.98;
			/* ln steps/s: a peak at 0.3, 8x slower at the far end
			 */
			CHECK_EQ(psd_bo_observe(a, &x, -2.0 * fabs(x - 0.3),
						1.0),
				 0);
			CHECK_EQ(psd_bo_observe(b, &x, -2.0 * fabs(x - 0.3),
						1.0),
				 0);
		}
		psd_bo_set_cost_aware(b, true);
		CHECK_EQ(psd_bo_suggest(a, &plain), 0);
		CHECK_EQ(psd_bo_suggest(b, &cost), 0);
		CHECK(cost.acq <= plain.acq + 1e-12);
		lower += cost.acq < plain.acq * 0.999;
		psd_bo_destroy(a);
		psd_bo_destroy(b);
	}
	printf("# cost-aware EI below the plain EI in %u of 6 seeds\n", lower);
	CHECK_INT(lower, >=, 1);
}

const struct test_case test_list[] = {
	{ "bo_cost_aware_scales_ei", test_bo_cost_aware_scales_ei },
	{ "bo_context_is_held", test_bo_context_is_held },
	{ "bo_region_is_kept", test_bo_region_is_kept },
	{ "bo_floor_is_kept", test_bo_floor_is_kept },
	{ "bo_expected_improvement_formula",
	  test_bo_expected_improvement_formula },
	{ "bo_deterministic_given_seed", test_bo_deterministic_given_seed },
	{ "bo_ucb_explores_far_from_data", test_bo_ucb_explores_far_from_data },
	{ "bo_refine_climbs_from_one_screen_point",
	  test_bo_refine_climbs_from_one_screen_point },
	{ "bo_rejects_bad_input", test_bo_rejects_bad_input },
	{ "bo_branin_beats_random_search", test_bo_branin_beats_random_search },
	{ "bo_noisy_ridge_beats_random_search",
	  test_bo_noisy_ridge_beats_random_search },
	{ NULL, NULL },
};
