// SPDX-License-Identifier: MIT
/*
 * Bayesian optimization over the unit box: Sobol initial design, GP
 * surrogate, EI/UCB maximized by a Sobol screen plus pattern search.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_qrng.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "bo.h"

#define BO_MAX_REFINE	16
#define BO_STEP0	0.05  /* first pattern-search step */
#define BO_STEP_MIN	1e-3  /* pattern search stops below this step */
#define BO_REFINE_ITERS 200   /* pattern-search moves per start */
#define BO_SD_MIN	1e-12 /* below this a prediction counts as exact */
/* design points drawn to find one above the floor */
#define BO_DESIGN_TRIES 64

struct psd_bo {
	struct psd_bo_opts o;
	struct psd_gp *gp;
	gsl_qrng *design; /* initial design sequence */
	gsl_qrng *screen; /* acquisition screen, reset every suggestion */
	gsl_rng *rng;
	double shift[PSD_GP_MAX_DIM]; /* random shift of the design */
	unsigned int designed;	      /* design points handed out */
	unsigned int redesign;	      /* design points still owed */
	unsigned int fits;	      /* GP refits so far (seeds each) */
	bool dirty;		      /* data changed since the last fit */
	double incumbent;  /* max posterior mean, freshest observations */
	unsigned int nctx; /* trailing inputs fixed (context) */
	double ctx[PSD_GP_MAX_DIM]; /* their values */
	bool cost_log;		    /* psd_bo_set_cost_aware */
	/* trust region (psd_bo_set_region): suggestions stay in [lo, hi] */
	double lo[PSD_GP_MAX_DIM];
	double hi[PSD_GP_MAX_DIM];
	/* floor (psd_bo_set_floor): suggestions keep fw . x >= fc */
	bool has_floor;
	double fw[PSD_GP_MAX_DIM];
	double fc;
};

/* Screen candidate: a point and its acquisition value. */
struct bo_cand {
	double x[PSD_GP_MAX_DIM];
	double v;
};

void psd_bo_opts_default(struct psd_bo_opts *o, unsigned int dim)
{
	memset(o, 0, sizeof(*o));
	o->dim = dim;
	o->acq = PSD_BO_ACQ_EI;
	o->xi = 0.01;
	o->kappa = 2.0;
	o->n_init = 2 * dim + 1;
	o->n_screen = 512;
	o->n_refine = 3;
	o->fit_starts = 2;
	o->len_prior = 0.3;
	o->len_prior_sd = 1.0;
	o->noise_prior = 0.05;
	o->noise_prior_sd = 1.5;
}

static bool bo_opts_are_valid(const struct psd_bo_opts *o)
{
	return o->dim >= 1 && o->dim <= PSD_GP_MAX_DIM &&
	       (o->acq == PSD_BO_ACQ_EI || o->acq == PSD_BO_ACQ_UCB) &&
	       isfinite(o->xi) && o->xi >= 0.0 && isfinite(o->kappa) &&
	       o->kappa >= 0.0 && o->n_screen >= 1 && o->n_refine >= 1 &&
	       o->n_refine <= BO_MAX_REFINE && o->n_refine <= o->n_screen &&
	       isfinite(o->noise_sd) && o->noise_sd >= 0.0 &&
	       isfinite(o->len_prior) && o->len_prior >= 0.0 &&
	       (o->len_prior == 0.0 || o->len_prior_sd > 0.0) &&
	       isfinite(o->noise_prior) && o->noise_prior >= 0.0 &&
	       (o->noise_prior == 0.0 || o->noise_prior_sd > 0.0) &&
	       isfinite(o->noise_floor_sd) && o->noise_floor_sd >= 0.0 &&
	       isfinite(o->shear_prior_sd) && o->shear_prior_sd >= 0.0;
}

int psd_bo_create(const struct psd_bo_opts *o, struct psd_bo **out)
{
	struct psd_bo *bo;
	unsigned int j;
	int ret;

	if (!o || !out || !bo_opts_are_valid(o))
		return -EINVAL;
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -ENOMEM;
	bo->o = *o;
	ret = psd_gp_create(o->dim, &bo->gp);
	if (ret)
		goto err_free;
	bo->design = gsl_qrng_alloc(gsl_qrng_sobol, o->dim);
	bo->screen = gsl_qrng_alloc(gsl_qrng_sobol, o->dim);
	bo->rng = gsl_rng_alloc(gsl_rng_mt19937);
	if (!bo->design || !bo->screen || !bo->rng) {
		ret = -ENOMEM;
		goto err_free;
	}
	gsl_rng_set(bo->rng, (unsigned long)(o->seed ^ (o->seed >> 32)));
	for (j = 0; j < o->dim; j++) {
		bo->shift[j] = gsl_rng_uniform(bo->rng);
		bo->hi[j] = 1.0;
	}
	*out = bo;
	return 0;

err_free:
	psd_bo_destroy(bo);
	return ret;
}

void psd_bo_destroy(struct psd_bo *bo)
{
	if (!bo)
		return;
	gsl_rng_free(bo->rng);
	gsl_qrng_free(bo->screen);
	gsl_qrng_free(bo->design);
	psd_gp_destroy(bo->gp);
	free(bo);
}

int psd_bo_observe(struct psd_bo *bo, const double *x, double y, double weight)
{
	unsigned int j;
	int ret;

	for (j = 0; j < bo->o.dim; j++)
		if (!(x[j] >= 0.0 && x[j] <= 1.0))
			return -EINVAL;
	ret = psd_gp_add(bo->gp, x, y, weight);
	if (ret)
		return ret;
	bo->dirty = true;
	return 0;
}

int psd_bo_age(struct psd_bo *bo, double factor)
{
	int ret;

	ret = psd_gp_scale_weights(bo->gp, factor);
	if (ret)
		return ret;
	bo->dirty = true;
	return 0;
}

int psd_bo_set_noise_sd(struct psd_bo *bo, double noise_sd)
{
	if (!isfinite(noise_sd) || noise_sd < 0.0)
		return -EINVAL;
	if (noise_sd != bo->o.noise_sd)
		bo->dirty = true;
	bo->o.noise_sd = noise_sd;
	return 0;
}

int psd_bo_set_context(struct psd_bo *bo, const double *ctx, unsigned int n)
{
	unsigned int j;

	if (n >= bo->o.dim)
		return -EINVAL;
	for (j = 0; j < n; j++)
		if (!(ctx[j] >= 0.0 && ctx[j] <= 1.0))
			return -EINVAL;
	for (j = 0; j < n; j++)
		if (n != bo->nctx || ctx[j] != bo->ctx[j])
			bo->dirty = true; /* the incumbent moves */
	bo->nctx = n;
	memcpy(bo->ctx, ctx, sizeof(*ctx) * n);
	return 0;
}

/* Put the context into the trailing inputs of @x. */
static void bo_fix_context(const struct psd_bo *bo, double *x)
{
	memcpy(x + bo->o.dim - bo->nctx, bo->ctx, sizeof(*x) * bo->nctx);
}

int psd_bo_set_region(struct psd_bo *bo, const double *center,
		      const double *half)
{
	unsigned int j;

	for (j = 0; center && j < bo->o.dim; j++)
		if (!(center[j] >= 0.0 && center[j] <= 1.0) ||
		    !(half[j] >= 0.0))
			return -EINVAL;
	for (j = 0; j < bo->o.dim; j++) {
		bo->lo[j] = center ? fmax(center[j] - half[j], 0.0) : 0.0;
		bo->hi[j] = center ? fmin(center[j] + half[j], 1.0) : 1.0;
	}
	return 0;
}

int psd_bo_set_floor(struct psd_bo *bo, const double *w, double c)
{
	unsigned int j;

	if (!w) {
		bo->has_floor = false;
		return 0;
	}
	if (!isfinite(c))
		return -EINVAL;
	for (j = 0; j < bo->o.dim; j++)
		if (!isfinite(w[j]) || w[j] < 0.0)
			return -EINVAL;
	memcpy(bo->fw, w, sizeof(*w) * bo->o.dim);
	bo->fc = c;
	bo->has_floor = true;
	return 0;
}

/* Whether @x keeps the floor (or there is none). */
static bool bo_above_floor(const struct psd_bo *bo, const double *x)
{
	unsigned int nfree = bo->o.dim - bo->nctx;
	double v = 0.0;
	unsigned int k;

	if (!bo->has_floor)
		return true;
	for (k = 0; k < nfree; k++)
		v += bo->fw[k] * x[k];
	return v >= bo->fc;
}

/* Raise @x onto the floor if it is below: the last chosen input first,
 * up to the region's top, then the others; then the same up to the
 * box's top.  A floor above the box leaves @x at the top. */
static void bo_lift(const struct psd_bo *bo, double *x)
{
	unsigned int nfree = bo->o.dim - bo->nctx;
	unsigned int pass;
	unsigned int j;
	unsigned int k;
	double need;
	double top;

	if (!bo->has_floor)
		return;
	for (pass = 0; pass < 2; pass++) {
		for (j = nfree; j-- > 0;) {
			need = bo->fc;
			for (k = 0; k < nfree; k++)
				need -= bo->fw[k] * x[k];
			if (need <= 0.0)
				return;
			if (bo->fw[j] <= 0.0)
				continue;
			top = fmax(pass ? 1.0 : bo->hi[j], x[j]);
			x[j] = fmin(x[j] + need / bo->fw[j], top);
		}
	}
}

void psd_bo_set_cost_aware(struct psd_bo *bo, bool on)
{
	bo->cost_log = on;
}

/* Map @u (a point of the unit box) into the region. */
static void bo_to_region(const struct psd_bo *bo, const double *u, double *x)
{
	unsigned int j;

	for (j = 0; j < bo->o.dim; j++)
		x[j] = bo->lo[j] + u[j] * (bo->hi[j] - bo->lo[j]);
}

int psd_bo_set_noise_floor(struct psd_bo *bo, double floor_sd)
{
	if (!isfinite(floor_sd) || floor_sd < 0.0)
		return -EINVAL;
	if (floor_sd != bo->o.noise_floor_sd)
		bo->dirty = true;
	bo->o.noise_floor_sd = floor_sd;
	return 0;
}

void psd_bo_redesign(struct psd_bo *bo, unsigned int n)
{
	bo->redesign = n;
}

unsigned int psd_bo_count(const struct psd_bo *bo)
{
	return psd_gp_count(bo->gp);
}

bool psd_bo_in_design(const struct psd_bo *bo)
{
	return psd_bo_count(bo) < bo->o.n_init || bo->redesign;
}

struct psd_gp *psd_bo_gp(struct psd_bo *bo)
{
	return bo->gp;
}

double psd_bo_ei(double mean, double sd, double best, double xi)
{
	double d = mean - best - xi;
	double z;

	if (sd < BO_SD_MIN)
		return fmax(d, 0.0);
	z = d / sd;
	return fmax(d * gsl_cdf_ugaussian_P(z) + sd * gsl_ran_ugaussian_pdf(z),
		    0.0);
}

/* Refit the GP hyper and the incumbent if data changed. */
static int bo_refit(struct psd_bo *bo)
{
	struct psd_gp_fit_opts fo;
	unsigned int n = psd_gp_count(bo->gp);
	unsigned int i;
	double wmin;
	double mean;
	double var;
	int ret;

	if (!bo->dirty)
		return 0;
	psd_gp_fit_opts_default(&fo);
	fo.starts = bo->o.fit_starts;
	fo.noise_sd = bo->o.noise_sd;
	fo.len_prior = bo->o.len_prior;
	fo.len_prior_sd = bo->o.len_prior_sd;
	fo.noise_prior = bo->o.noise_prior;
	fo.noise_prior_sd = bo->o.noise_prior_sd;
	fo.noise_floor_sd = bo->o.noise_floor_sd;
	fo.nctx = bo->nctx;
	memcpy(fo.shear_prior, bo->o.shear_prior, sizeof(fo.shear_prior));
	fo.shear_prior_sd = bo->o.shear_prior_sd;
	fo.seed = bo->o.seed * 1000003u + bo->fits++;
	ret = psd_gp_fit(bo->gp, &fo);
	if (ret)
		return ret;
	wmin = HUGE_VAL;
	for (i = 0; i < n; i++)
		wmin = fmin(wmin, psd_gp_weight(bo->gp, i));
	/* the incumbent comes from the freshest observations only */
	bo->incumbent = -HUGE_VAL;
	for (i = 0; i < n; i++) {
		double x[PSD_GP_MAX_DIM];

		if (psd_gp_weight(bo->gp, i) > wmin)
			continue;
		memcpy(x, psd_gp_x(bo->gp, i), sizeof(*x) * bo->o.dim);
		bo_fix_context(bo, x);
		ret = psd_gp_predict(bo->gp, x, &mean, &var);
		if (ret)
			return ret;
		bo->incumbent = fmax(bo->incumbent, mean);
	}
	bo->dirty = false;
	return 0;
}

/* Acquisition value at @x (higher is better). */
static int bo_acq(struct psd_bo *bo, const double *x, double *v)
{
	double ymean;
	double ysd;
	double mean;
	double var;
	int ret;

	ret = psd_gp_predict(bo->gp, x, &mean, &var);
	if (ret)
		return ret;
	if (bo->o.acq == PSD_BO_ACQ_UCB) {
		*v = mean + bo->o.kappa * sqrt(var);
		return 0;
	}
	psd_gp_output_scale(bo->gp, &ymean, &ysd);
	*v = psd_bo_ei(mean, sqrt(var), bo->incumbent, bo->o.xi * ysd);
	/* per unit of time: a sample of a config lasts 1 / its rate */
	if (bo->cost_log)
		*v *= exp(fmin(mean - bo->incumbent, 0.0));
	return 0;
}

/* Keep @top (sorted, best first, @k entries) the k best candidates. */
static void bo_top_insert(struct bo_cand *top, unsigned int k,
			  const struct bo_cand *c)
{
	unsigned int i = k;

	if (!(c->v > top[k - 1].v))
		return;
	while (i > 0 && c->v > top[i - 1].v) {
		if (i < k)
			top[i] = top[i - 1];
		i--;
	}
	top[i] = *c;
}

/* Sobol screen, randomly shifted per call; fills the n_refine best. */
static int bo_screen(struct psd_bo *bo, struct bo_cand *top)
{
	double shift[PSD_GP_MAX_DIM];
	struct bo_cand c = { { 0 }, 0 };
	unsigned int dim = bo->o.dim;
	unsigned int i;
	unsigned int j;
	int ret;

	for (i = 0; i < bo->o.n_refine; i++)
		top[i].v = -HUGE_VAL;
	for (j = 0; j < dim; j++)
		shift[j] = gsl_rng_uniform(bo->rng);
	gsl_qrng_init(bo->screen);
	for (i = 0; i < bo->o.n_screen; i++) {
		gsl_qrng_get(bo->screen, c.x);
		for (j = 0; j < dim; j++)
			c.x[j] = fmod(c.x[j] + shift[j], 1.0);
		bo_to_region(bo, c.x, c.x);
		bo_fix_context(bo, c.x);
		/* below the floor: screened only if nothing is above it */
		if (!bo_above_floor(bo, c.x)) {
			if (top[0].v > -HUGE_VAL || i + 1 < bo->o.n_screen)
				continue;
			bo_lift(bo, c.x);
		}
		ret = bo_acq(bo, c.x, &c.v);
		if (ret)
			return ret;
		bo_top_insert(top, bo->o.n_refine, &c);
	}
	return 0;
}

/* Coordinate pattern search from @c, clamped to the region (and lifted
 * onto the floor). */
static int bo_refine(struct psd_bo *bo, struct bo_cand *c)
{
	struct bo_cand t;
	double step = BO_STEP0;
	unsigned int it;
	unsigned int j;
	bool moved;
	int ret;

	for (it = 0; it < BO_REFINE_ITERS && step >= BO_STEP_MIN; it++) {
		moved = false;
		for (j = 0; j < 2 * (bo->o.dim - bo->nctx); j++) {
			t = *c;
			t.x[j / 2] += (j & 1) ? -step : step;
			t.x[j / 2] = fmin(fmax(t.x[j / 2], bo->lo[j / 2]),
					  bo->hi[j / 2]);
			bo_lift(bo, t.x);
			ret = bo_acq(bo, t.x, &t.v);
			if (ret)
				return ret;
			if (t.v > c->v) {
				*c = t;
				moved = true;
			}
		}
		if (!moved)
			step /= 2.0;
	}
	return 0;
}

/* The next design point above the floor (the design's points below it
 * are skipped, so the points keep spreading over what is left; after
 * BO_DESIGN_TRIES below it, the last one is lifted onto it). */
static void bo_design_point(struct psd_bo *bo, double *x)
{
	unsigned int tries;
	unsigned int j;

	for (tries = 0; tries < BO_DESIGN_TRIES; tries++) {
		gsl_qrng_get(bo->design, x);
		for (j = 0; j < bo->o.dim; j++)
			x[j] = fmod(x[j] + bo->shift[j], 1.0);
		bo_to_region(bo, x, x);
		bo_fix_context(bo, x);
		if (bo_above_floor(bo, x))
			break;
	}
	bo_lift(bo, x);
	bo->designed++;
}

/* Maximize the acquisition in use into @s. */
static int bo_maximize(struct psd_bo *bo, struct psd_bo_suggestion *s)
{
	struct bo_cand top[BO_MAX_REFINE];
	unsigned int best = 0;
	unsigned int i;
	double var;
	int ret;

	ret = bo_refit(bo);
	if (ret)
		return ret;
	ret = bo_screen(bo, top);
	for (i = 0; !ret && i < bo->o.n_refine; i++) {
		ret = bo_refine(bo, &top[i]);
		if (top[i].v > top[best].v)
			best = i;
	}
	if (ret)
		return ret;
	memcpy(s->x, top[best].x, sizeof(s->x));
	s->acq = top[best].v;
	ret = psd_gp_predict(bo->gp, s->x, &s->mean, &var);
	s->sd = sqrt(var);
	return ret;
}

int psd_bo_suggest(struct psd_bo *bo, struct psd_bo_suggestion *s)
{
	memset(s, 0, sizeof(*s));
	if (psd_bo_in_design(bo)) {
		if (bo->redesign)
			bo->redesign--;
		bo_design_point(bo, s->x);
		s->from_design = true;
		s->acq = s->mean = s->sd = NAN;
		return 0;
	}
	return bo_maximize(bo, s);
}

int psd_bo_suggest_mean(struct psd_bo *bo, struct psd_bo_suggestion *s)
{
	enum psd_bo_acq acq = bo->o.acq;
	double kappa = bo->o.kappa;
	int ret;

	memset(s, 0, sizeof(*s));
	bo->o.acq = PSD_BO_ACQ_UCB; /* with kappa 0: the posterior mean */
	bo->o.kappa = 0.0;
	ret = bo_maximize(bo, s);
	bo->o.acq = acq;
	bo->o.kappa = kappa;
	return ret;
}

int psd_bo_predict(struct psd_bo *bo, const double *x, double *mean, double *sd)
{
	double var;
	int ret;

	ret = bo_refit(bo);
	if (ret)
		return ret;
	ret = psd_gp_predict(bo->gp, x, mean, &var);
	if (ret)
		return ret;
	*sd = sqrt(var);
	return 0;
}
