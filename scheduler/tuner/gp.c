// SPDX-License-Identifier: MIT
/*
 * Gaussian process regression: Matérn 5/2 kernel, Cholesky on GSL,
 * hyperparameters by maximizing the log marginal likelihood.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_multimin.h>
#include <gsl/gsl_rng.h>

#include "gp.h"

#define GP_INIT_CAP    16
#define GP_JITTER      1e-6 /* times signal_var, added on a failed Cholesky */
#define GP_BAD_OBJ     1e300
#define GP_SIMPLEX_TOL 1e-4
#define GP_THETA_SPAN  2.5 /* random starts: theta uniform in +-span */

struct psd_gp {
	unsigned int dim;
	unsigned int n;
	unsigned int cap;
	double *x; /* n * dim inputs */
	double *y; /* raw outputs */
	double *w; /* noise multipliers, >= 1 */
	struct psd_gp_hyper hyper;
	double ymean;
	double ysd;
	gsl_matrix *chol;  /* cap x cap; leading n x n holds the factor */
	gsl_vector *ystd;  /* standardized outputs */
	gsl_vector *alpha; /* K^-1 ystd */
	gsl_vector *kstar; /* scratch for predictions */
	double lml;
	bool stale; /* data or hyper changed since the last factorization */
};

/* What the simplex objective needs to rebuild a hyper from theta. */
struct gp_fit_ctx {
	struct psd_gp *gp;
	const struct psd_gp_bounds *b;
	double fixed_noise; /* > 0: standardized noise variance held fixed */
	double len_prior;   /* > 0: median of the length-scale prior */
	double len_prior_sd;
	double noise_prior; /* > 0: median of the noise-variance prior */
	double noise_prior_sd;
	unsigned int nctx;	   /* context inputs (trailing) */
	const double *shear_prior; /* fitted shears' prior means */
	double shear_prior_sd;	   /* > 0: shears fitted */
};

/* Theta slots after the length scales, the signal and a learned noise:
 * the shears (one per non-context input). */
static unsigned int gp_nshear(const struct gp_fit_ctx *c)
{
	return c->nctx && c->shear_prior_sd > 0.0 ? c->gp->dim - c->nctx : 0;
}

static unsigned int gp_theta_ctx(const struct gp_fit_ctx *c)
{
	return c->gp->dim + 1 + (c->fixed_noise > 0.0 ? 0 : 1);
}

int psd_gp_gsl_status(int status)
{
	switch (status) {
	case GSL_SUCCESS:
		return 0;
	case GSL_EDOM:
		return -EDOM;
	case GSL_ENOMEM:
		return -ENOMEM;
	case GSL_EINVAL:
	case GSL_EBADLEN:
	case GSL_ENOTSQR:
		return -EINVAL;
	case GSL_ERANGE:
	case GSL_EOVRFLW:
	case GSL_EUNDRFLW:
		return -ERANGE;
	case GSL_EMAXITER:
	case GSL_ENOPROG:
	case GSL_CONTINUE:
		return -EAGAIN;
	default:
		return -EIO;
	}
}

void psd_gp_fit_opts_default(struct psd_gp_fit_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->bounds.len_lo = 0.04;
	o->bounds.len_hi = 4.0;
	o->bounds.signal_lo = 0.05;
	o->bounds.signal_hi = 20.0;
	o->bounds.noise_lo = 1e-6;
	o->bounds.noise_hi = 1.0;
	o->starts = 3;
	o->max_iter = 200;
}

double psd_gp_kernel(const struct psd_gp_hyper *h, unsigned int dim,
		     const double *a, const double *b)
{
	unsigned int nk = h->nctx < dim ? dim - h->nctx : dim;
	double dc = nk < dim ? a[nk] - b[nk] : 0.0;
	double r2 = 0.0;
	double r;
	unsigned int j;

	for (j = 0; j < dim; j++) {
		double d = (a[j] - b[j] - (j < nk ? h->shear[j] * dc : 0.0)) /
			   h->len[j];

		r2 += d * d;
	}
	r = sqrt(5.0 * r2);
	return h->signal_var * (1.0 + r + r * r / 3.0) * exp(-r);
}

static void gp_free_mats(struct psd_gp *gp)
{
	gsl_matrix_free(gp->chol);
	gsl_vector_free(gp->ystd);
	gsl_vector_free(gp->alpha);
	gsl_vector_free(gp->kstar);
}

/* Swap in matrices for @cap points; on error the old ones stay. */
static int gp_realloc_mats(struct psd_gp *gp, unsigned int cap)
{
	struct psd_gp tmp = { 0 };

	tmp.chol = gsl_matrix_alloc(cap, cap);
	tmp.ystd = gsl_vector_alloc(cap);
	tmp.alpha = gsl_vector_alloc(cap);
	tmp.kstar = gsl_vector_alloc(cap);
	if (!tmp.chol || !tmp.ystd || !tmp.alpha || !tmp.kstar) {
		gp_free_mats(&tmp);
		return -ENOMEM;
	}
	gp_free_mats(gp);
	gp->chol = tmp.chol;
	gp->ystd = tmp.ystd;
	gp->alpha = tmp.alpha;
	gp->kstar = tmp.kstar;
	return 0;
}

/* Grow the arrays to @cap points; on error the data are unchanged. */
static int gp_grow(struct psd_gp *gp, unsigned int cap)
{
	double *x;
	double *y;
	double *w;

	x = realloc(gp->x, sizeof(*x) * cap * gp->dim);
	if (!x)
		return -ENOMEM;
	gp->x = x;
	y = realloc(gp->y, sizeof(*y) * cap);
	if (!y)
		return -ENOMEM;
	gp->y = y;
	w = realloc(gp->w, sizeof(*w) * cap);
	if (!w)
		return -ENOMEM;
	gp->w = w;
	if (gp_realloc_mats(gp, cap))
		return -ENOMEM;
	gp->cap = cap;
	gp->stale = true;
	return 0;
}

int psd_gp_create(unsigned int dim, struct psd_gp **out)
{
	struct psd_gp *gp;
	unsigned int j;
	int ret;

	if (dim < 1 || dim > PSD_GP_MAX_DIM || !out)
		return -EINVAL;
	gsl_set_error_handler_off();
	gp = calloc(1, sizeof(*gp));
	if (!gp)
		return -ENOMEM;
	gp->dim = dim;
	for (j = 0; j < dim; j++)
		gp->hyper.len[j] = 0.3;
	gp->hyper.signal_var = 1.0;
	gp->hyper.noise_var = 0.01;
	gp->ysd = 1.0;
	gp->stale = true;
	ret = gp_grow(gp, GP_INIT_CAP);
	if (ret)
		goto err_free;
	*out = gp;
	return 0;

err_free:
	psd_gp_destroy(gp);
	return ret;
}

void psd_gp_destroy(struct psd_gp *gp)
{
	if (!gp)
		return;
	gp_free_mats(gp);
	free(gp->x);
	free(gp->y);
	free(gp->w);
	free(gp);
}

unsigned int psd_gp_dim(const struct psd_gp *gp)
{
	return gp->dim;
}

unsigned int psd_gp_count(const struct psd_gp *gp)
{
	return gp->n;
}

const double *psd_gp_x(const struct psd_gp *gp, unsigned int i)
{
	return gp->x + (size_t)i * gp->dim;
}

double psd_gp_y(const struct psd_gp *gp, unsigned int i)
{
	return gp->y[i];
}

double psd_gp_weight(const struct psd_gp *gp, unsigned int i)
{
	return gp->w[i];
}

int psd_gp_add(struct psd_gp *gp, const double *x, double y, double weight)
{
	unsigned int j;
	int ret;

	if (!isfinite(y) || !isfinite(weight) || weight < 1.0)
		return -EINVAL;
	for (j = 0; j < gp->dim; j++)
		if (!isfinite(x[j]))
			return -EINVAL;
	if (gp->n == gp->cap) {
		ret = gp_grow(gp, gp->cap * 2);
		if (ret)
			return ret;
	}
	memcpy(gp->x + (size_t)gp->n * gp->dim, x, sizeof(*x) * gp->dim);
	gp->y[gp->n] = y;
	gp->w[gp->n] = fmin(weight, PSD_GP_WEIGHT_MAX);
	gp->n++;
	gp->stale = true;
	return 0;
}

int psd_gp_scale_weights(struct psd_gp *gp, double factor)
{
	unsigned int i;

	if (!isfinite(factor) || factor < 1.0)
		return -EINVAL;
	for (i = 0; i < gp->n; i++)
		gp->w[i] = fmin(gp->w[i] * factor, PSD_GP_WEIGHT_MAX);
	gp->stale = true;
	return 0;
}

void psd_gp_clear(struct psd_gp *gp)
{
	gp->n = 0;
	gp->ymean = 0.0;
	gp->ysd = 1.0;
	gp->stale = true;
}

void psd_gp_hyper_get(const struct psd_gp *gp, struct psd_gp_hyper *h)
{
	*h = gp->hyper;
}

static bool gp_hyper_is_valid(const struct psd_gp_hyper *h, unsigned int dim)
{
	unsigned int j;

	for (j = 0; j < dim; j++)
		if (!isfinite(h->len[j]) || h->len[j] <= 0.0)
			return false;
	for (j = 0; j < dim; j++)
		if (!isfinite(h->shear[j]))
			return false;
	return isfinite(h->signal_var) && h->signal_var > 0.0 &&
	       isfinite(h->noise_var) && h->noise_var > 0.0 &&
	       (h->nctx == 0 || h->nctx < dim);
}

int psd_gp_hyper_set(struct psd_gp *gp, const struct psd_gp_hyper *h)
{
	if (!gp_hyper_is_valid(h, gp->dim))
		return -EINVAL;
	gp->hyper = *h;
	gp->stale = true;
	return 0;
}

void psd_gp_output_scale(const struct psd_gp *gp, double *mean, double *sd)
{
	*mean = gp->ymean;
	*sd = gp->ysd;
}

/*
 * Mean and population sd of y, each point weighted by 1/w (down-weighted
 * points count less); the standardized copy goes to gp->ystd.
 */
static void gp_standardize(struct psd_gp *gp)
{
	double sw = 0.0;
	double sum = 0.0;
	double ss = 0.0;
	unsigned int i;

	for (i = 0; i < gp->n; i++) {
		sw += 1.0 / gp->w[i];
		sum += gp->y[i] / gp->w[i];
	}
	gp->ymean = gp->n ? sum / sw : 0.0;
	for (i = 0; i < gp->n; i++)
		ss += (gp->y[i] - gp->ymean) * (gp->y[i] - gp->ymean) /
		      gp->w[i];
	gp->ysd = gp->n ? sqrt(ss / sw) : 1.0;
	if (!(gp->ysd > 1e-12 * fmax(1.0, fabs(gp->ymean))))
		gp->ysd = 1.0;
	for (i = 0; i < gp->n; i++)
		gsl_vector_set(gp->ystd, i, (gp->y[i] - gp->ymean) / gp->ysd);
}

/* Fill the leading n x n block of gp->chol with K + diag(noise*w + jit). */
static void gp_fill_kernel(struct psd_gp *gp, const struct psd_gp_hyper *h,
			   double jitter)
{
	unsigned int i;
	unsigned int j;
	double k;

	for (i = 0; i < gp->n; i++) {
		for (j = 0; j <= i; j++) {
			k = psd_gp_kernel(h, gp->dim,
					  gp->x + (size_t)i * gp->dim,
					  gp->x + (size_t)j * gp->dim);
			gsl_matrix_set(gp->chol, i, j, k);
			gsl_matrix_set(gp->chol, j, i, k);
		}
		k = gsl_matrix_get(gp->chol, i, i);
		gsl_matrix_set(gp->chol, i, i,
			       k + h->noise_var * gp->w[i] + jitter);
	}
}

/*
 * Factor K for @h into gp->chol, solve alpha and return the log marginal
 * likelihood in @lml.  Needs gp_standardize() first.  Does not touch
 * gp->hyper or gp->stale.
 */
static int gp_factor(struct psd_gp *gp, const struct psd_gp_hyper *h,
		     double *lml)
{
	gsl_matrix_view l;
	gsl_vector_view yv;
	gsl_vector_view av;
	double fit;
	double logdet = 0.0;
	unsigned int i;
	int status;

	if (gp->n == 0) {
		*lml = 0.0;
		return 0;
	}
	l = gsl_matrix_submatrix(gp->chol, 0, 0, gp->n, gp->n);
	gp_fill_kernel(gp, h, 0.0);
	status = gsl_linalg_cholesky_decomp1(&l.matrix);
	if (status == GSL_EDOM) {
		gp_fill_kernel(gp, h, GP_JITTER * h->signal_var);
		status = gsl_linalg_cholesky_decomp1(&l.matrix);
	}
	if (status)
		return psd_gp_gsl_status(status);
	yv = gsl_vector_subvector(gp->ystd, 0, gp->n);
	av = gsl_vector_subvector(gp->alpha, 0, gp->n);
	status = gsl_linalg_cholesky_solve(&l.matrix, &yv.vector, &av.vector);
	if (status)
		return psd_gp_gsl_status(status);
	gsl_blas_ddot(&yv.vector, &av.vector, &fit);
	for (i = 0; i < gp->n; i++)
		logdet += log(gsl_matrix_get(&l.matrix, i, i));
	*lml = -0.5 * fit - logdet - 0.5 * gp->n * log(2.0 * M_PI);
	return isfinite(*lml) ? 0 : -EDOM;
}

int psd_gp_update(struct psd_gp *gp)
{
	int ret;

	if (!gp->stale)
		return 0;
	gp_standardize(gp);
	ret = gp_factor(gp, &gp->hyper, &gp->lml);
	if (ret)
		return ret;
	gp->stale = false;
	return 0;
}

int psd_gp_log_marginal(struct psd_gp *gp, double *lml)
{
	int ret;

	ret = psd_gp_update(gp);
	if (ret)
		return ret;
	*lml = gp->lml;
	return 0;
}

int psd_gp_predict(struct psd_gp *gp, const double *x, double *mean,
		   double *var)
{
	const struct psd_gp_hyper *h = &gp->hyper;
	gsl_matrix_view l;
	gsl_vector_view kv;
	gsl_vector_view av;
	double mu;
	double v2;
	unsigned int i;
	int ret;

	ret = psd_gp_update(gp);
	if (ret)
		return ret;
	if (gp->n == 0) {
		*mean = 0.0;
		*var = h->signal_var;
		return 0;
	}
	for (i = 0; i < gp->n; i++)
		gsl_vector_set(gp->kstar, i,
			       psd_gp_kernel(h, gp->dim, x,
					     gp->x + (size_t)i * gp->dim));
	kv = gsl_vector_subvector(gp->kstar, 0, gp->n);
	av = gsl_vector_subvector(gp->alpha, 0, gp->n);
	gsl_blas_ddot(&kv.vector, &av.vector, &mu);
	/* v = L^-1 k*, var = k(x,x) - v.v */
	l = gsl_matrix_submatrix(gp->chol, 0, 0, gp->n, gp->n);
	ret = psd_gp_gsl_status(gsl_blas_dtrsv(
		CblasLower, CblasNoTrans, CblasNonUnit, &l.matrix, &kv.vector));
	if (ret)
		return ret;
	v2 = gsl_blas_dnrm2(&kv.vector);
	*mean = gp->ymean + gp->ysd * mu;
	*var = fmax(h->signal_var - v2 * v2, 0.0) * gp->ysd * gp->ysd;
	return 0;
}

/* theta (unbounded) -> value in [lo, hi] via a log-sigmoid map. */
static double gp_from_theta(double theta, double lo, double hi)
{
	double s = 1.0 / (1.0 + exp(-theta));

	return lo * pow(hi / lo, s);
}

static double gp_to_theta(double v, double lo, double hi)
{
	double s;

	if (hi <= lo)
		return 0.0;
	s = log(v / lo) / log(hi / lo);
	s = fmin(fmax(s, 1e-6), 1.0 - 1e-6);
	return log(s / (1.0 - s));
}

static void gp_theta_to_hyper(const struct gp_fit_ctx *c, const gsl_vector *t,
			      struct psd_gp_hyper *h)
{
	const struct psd_gp_bounds *b = c->b;
	unsigned int dim = c->gp->dim;
	unsigned int j;
	unsigned int k;

	memset(h, 0, sizeof(*h));
	for (j = 0; j < dim; j++)
		h->len[j] = gp_from_theta(gsl_vector_get(t, j), b->len_lo,
					  b->len_hi);
	h->signal_var = gp_from_theta(gsl_vector_get(t, dim), b->signal_lo,
				      b->signal_hi);
	if (c->fixed_noise > 0.0)
		h->noise_var = c->fixed_noise;
	else
		h->noise_var = gp_from_theta(gsl_vector_get(t, dim + 1),
					     b->noise_lo, b->noise_hi);
	h->nctx = c->nctx;
	k = gp_theta_ctx(c);
	for (j = 0; j < gp_nshear(c); j++)
		h->shear[j] = gsl_vector_get(t, k++);
}

static void gp_hyper_to_theta(const struct gp_fit_ctx *c,
			      const struct psd_gp_hyper *h, gsl_vector *t)
{
	const struct psd_gp_bounds *b = c->b;
	unsigned int dim = c->gp->dim;
	unsigned int j;
	unsigned int k;

	for (j = 0; j < dim; j++)
		gsl_vector_set(t, j,
			       gp_to_theta(h->len[j], b->len_lo, b->len_hi));
	gsl_vector_set(t, dim,
		       gp_to_theta(h->signal_var, b->signal_lo, b->signal_hi));
	if (!(c->fixed_noise > 0.0))
		gsl_vector_set(
			t, dim + 1,
			gp_to_theta(h->noise_var, b->noise_lo, b->noise_hi));
	k = gp_theta_ctx(c);
	for (j = 0; j < gp_nshear(c); j++)
		gsl_vector_set(t, k++,
			       h->nctx == c->nctx ? h->shear[j]
						  : c->shear_prior[j]);
}

/* Negative log priors of the length scales and of a learned noise (0
 * without priors). */
static double gp_neg_log_prior(const struct gp_fit_ctx *c,
			       const struct psd_gp_hyper *h)
{
	double sum = 0.0;
	double z;
	unsigned int j;

	if (c->noise_prior > 0.0 && !(c->fixed_noise > 0.0)) {
		z = log(h->noise_var / c->noise_prior) / c->noise_prior_sd;
		sum += 0.5 * z * z;
	}
	for (j = 0; j < gp_nshear(c); j++) {
		z = (h->shear[j] - c->shear_prior[j]) / c->shear_prior_sd;
		sum += 0.5 * z * z;
	}
	if (c->len_prior <= 0.0)
		return sum;
	for (j = 0; j < c->gp->dim; j++) {
		z = log(h->len[j] / c->len_prior) / c->len_prior_sd;
		sum += 0.5 * z * z;
	}
	return sum;
}

/* Negative log marginal likelihood (+ prior), the simplex objective. */
static double gp_neg_lml(const gsl_vector *t, void *arg)
{
	struct gp_fit_ctx *c = arg;
	struct psd_gp_hyper h;
	double lml;

	gp_theta_to_hyper(c, t, &h);
	if (gp_factor(c->gp, &h, &lml))
		return GP_BAD_OBJ;
	return -lml + gp_neg_log_prior(c, &h);
}

/* One simplex run from @start; returns the best objective reached. */
static double gp_simplex(gsl_multimin_fminimizer *s, gsl_multimin_function *f,
			 const gsl_vector *start, gsl_vector *step,
			 unsigned int max_iter, gsl_vector *best)
{
	unsigned int it;
	int status;

	gsl_vector_set_all(step, 1.0);
	if (gsl_multimin_fminimizer_set(s, f, start, step))
		return GP_BAD_OBJ;
	for (it = 0; it < max_iter; it++) {
		if (gsl_multimin_fminimizer_iterate(s))
			break;
		status = gsl_multimin_test_size(gsl_multimin_fminimizer_size(s),
						GP_SIMPLEX_TOL);
		if (status != GSL_CONTINUE)
			break;
	}
	gsl_vector_memcpy(best, gsl_multimin_fminimizer_x(s));
	return gsl_multimin_fminimizer_minimum(s);
}

static bool gp_bounds_are_valid(const struct psd_gp_bounds *b)
{
	return b->len_lo > 0.0 && b->len_lo <= b->len_hi &&
	       isfinite(b->len_hi) && b->signal_lo > 0.0 &&
	       b->signal_lo <= b->signal_hi && isfinite(b->signal_hi) &&
	       b->noise_lo > 0.0 && b->noise_lo <= b->noise_hi &&
	       isfinite(b->noise_hi);
}

struct gp_fit_work {
	gsl_multimin_fminimizer *s;
	gsl_vector *start;
	gsl_vector *step;
	gsl_vector *cand;
	gsl_vector *best;
	gsl_rng *rng;
};

static void gp_fit_work_free(struct gp_fit_work *w)
{
	gsl_multimin_fminimizer_free(w->s);
	gsl_vector_free(w->start);
	gsl_vector_free(w->step);
	gsl_vector_free(w->cand);
	gsl_vector_free(w->best);
	gsl_rng_free(w->rng);
}

static int gp_fit_work_alloc(struct gp_fit_work *w, size_t np, uint64_t seed)
{
	memset(w, 0, sizeof(*w));
	w->s = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2,
					     np);
	w->start = gsl_vector_alloc(np);
	w->step = gsl_vector_alloc(np);
	w->cand = gsl_vector_alloc(np);
	w->best = gsl_vector_alloc(np);
	w->rng = gsl_rng_alloc(gsl_rng_mt19937);
	if (!w->s || !w->start || !w->step || !w->cand || !w->best || !w->rng) {
		gp_fit_work_free(w);
		return -ENOMEM;
	}
	gsl_rng_set(w->rng, (unsigned long)(seed ^ (seed >> 32)));
	return 0;
}

/* Run every start; leaves the best theta in w->best, returns its value. */
static double gp_fit_starts(struct gp_fit_ctx *c, struct gp_fit_work *w,
			    const struct psd_gp_fit_opts *o)
{
	gsl_multimin_function f = { .f = gp_neg_lml,
				    .n = w->start->size,
				    .params = c };
	double best = GP_BAD_OBJ;
	double v;
	unsigned int k;
	size_t j;

	for (k = 0; k <= o->starts; k++) {
		if (k == 0) {
			gp_hyper_to_theta(c, &c->gp->hyper, w->start);
		} else {
			for (j = 0; j < w->start->size; j++)
				gsl_vector_set(
					w->start, j,
					GP_THETA_SPAN *
						(2.0 * gsl_rng_uniform(w->rng) -
						 1.0));
			/* shears start near their prior */
			for (j = 0; j < gp_nshear(c); j++)
				gsl_vector_set(
					w->start, gp_theta_ctx(c) + j,
					c->shear_prior[j] +
						c->shear_prior_sd *
							(2.0 * gsl_rng_uniform(
								       w->rng) -
							 1.0));
		}
		v = gp_simplex(w->s, &f, w->start, w->step, o->max_iter,
			       w->cand);
		if (v < best) {
			best = v;
			gsl_vector_memcpy(w->best, w->cand);
		}
	}
	return best;
}

int psd_gp_fit(struct psd_gp *gp, const struct psd_gp_fit_opts *o)
{
	struct psd_gp_bounds b = o->bounds;
	struct gp_fit_ctx c = { .gp = gp, .b = &b };
	struct gp_fit_work w;
	struct psd_gp_hyper h;
	size_t np;
	int ret;

	if (!gp_bounds_are_valid(&o->bounds) || !isfinite(o->noise_sd) ||
	    o->noise_sd < 0.0 || !isfinite(o->len_prior) ||
	    (o->len_prior > 0.0 && !(o->len_prior_sd > 0.0)) ||
	    !isfinite(o->noise_prior) || o->noise_prior < 0.0 ||
	    (o->noise_prior > 0.0 && !(o->noise_prior_sd > 0.0)) ||
	    !isfinite(o->noise_floor_sd) || o->noise_floor_sd < 0.0 ||
	    !isfinite(o->shear_prior_sd) || o->shear_prior_sd < 0.0)
		return -EINVAL;
	c.len_prior = o->len_prior;
	c.len_prior_sd = o->len_prior_sd;
	c.noise_prior = o->noise_prior;
	c.noise_prior_sd = o->noise_prior_sd;
	c.nctx = o->nctx < gp->dim ? o->nctx : 0;
	c.shear_prior = o->shear_prior;
	c.shear_prior_sd = o->shear_prior_sd;
	if (gp->n == 0)
		return 0;
	/* Every trial overwrites the factorization. */
	gp->stale = true;
	gp_standardize(gp);
	if (o->noise_sd > 0.0)
		c.fixed_noise = fmin(
			fmax(pow(o->noise_sd / gp->ysd, 2.0), 1e-12), 1e12);
	if (o->noise_floor_sd > 0.0)
		b.noise_lo = fmin(
			fmax(b.noise_lo, pow(o->noise_floor_sd / gp->ysd, 2.0)),
			b.noise_hi);
	np = gp_theta_ctx(&c) + gp_nshear(&c);
	ret = gp_fit_work_alloc(&w, np, o->seed);
	if (ret)
		return ret;
	if (gp_fit_starts(&c, &w, o) >= GP_BAD_OBJ) {
		ret = -EDOM;
		goto out;
	}
	gp_theta_to_hyper(&c, w.best, &h);
	gp->hyper = h;
	gp->stale = true;
	ret = psd_gp_update(gp);
out:
	gp_fit_work_free(&w);
	return ret;
}
