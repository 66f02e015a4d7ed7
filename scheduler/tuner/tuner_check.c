// SPDX-License-Identifier: MIT
/*
 * The model check of a retune: are the first samples after a change what
 * the model predicted for them?  A model fitted before the change holds
 * what it learned, its shear prior (tuner_cond.c) and its trust region
 * near the old optimum; when the optimum moved some other way (a change
 * of compute, or of the traffic sharing the link, not of the link rate
 * alone), its search exploits the wrong place and does worse than
 * starting over (test_tuner_moving.c, family "against").  The check
 * compares each sample with the prediction made before it was measured,
 * in log units (a ratio), less their common offset: a level that moved
 * with the change is no sign the model is wrong, a shape that moved is.
 * The sum of squared, standardized residuals is a chi-square with one
 * degree of freedom per sample less one where the model is right.
 */
#include <math.h>

#include <gsl/gsl_cdf.h>

#include "tuner_int.h"

/* samples with a prediction before the check: the sample that opened the
 * search and the first one it chose.  Three (the first two design points)
 * measured worse on the generated surfaces: a retune of 6 samples then
 * had too few left to explore (family against 0.73 of the optimum, two:
 * 0.80; random search 0.81) */
#define TUNER_CHECK_N 2
/* the model missed when the statistic is above this quantile of its
 * chi-square (0.95 raised false alarms where the model was right:
 * test_tuner_synth.c's rise during a first search, worst seed 0.89 ->
 * 0.45) */
#define TUNER_CHECK_P 0.99

double psd_tuner_rel_noise(struct psd_tuner *t)
{
	struct psd_gp_hyper h;
	double mean;
	double sd;
	double rel;
	double top;
	unsigned int df;

	if (t->o.noise > 0.0)
		return t->o.noise;
	psd_gp_hyper_get(psd_bo_gp(t->bo), &h);
	psd_gp_output_scale(psd_bo_gp(t->bo), &mean, &sd);
	rel = sqrt(h.noise_var) * sd;
	if (!psd_tuner_log_y(t)) {
		top = psd_tuner_search_top(t);
		rel = fabs(mean) > 0.0 ? rel / fabs(mean)
				       : (top > 0.0 ? rel / top : 0.0);
	}
	return fmax(rel, psd_tuner_replicate_noise(t, &df));
}

/* Whether observation @i of the current search has a prediction. */
static bool check_has_pred(const struct tuner_obs *o, unsigned int search)
{
	return o->search == search && isfinite(o->pm) && o->pm > 0.0 &&
	       isfinite(o->ps) && o->ps >= 0.0;
}

int psd_tuner_model_check(struct psd_tuner *t, bool *missed)
{
	double r[64];
	double v[64];
	double n2;
	double sw = 0.0;
	double swr = 0.0;
	double stat = 0.0;
	double rbar;
	unsigned int k = 0;
	bool two = false;
	int first = -1;
	unsigned int i;

	*missed = false;
	if (!t->check_pending)
		return 0;
	for (i = 0; i < t->nobs && k < 64; i++) {
		const struct tuner_obs *o = &t->obs[i];

		if (!check_has_pred(o, t->search))
			continue;
		if (first < 0)
			first = (int)i;
		else if (o->part != t->obs[first].part ||
			 o->credit != t->obs[first].credit)
			two = true;
		r[k] = log(o->score / o->pm);
		v[k] = (o->ps / o->pm) * (o->ps / o->pm);
		k++;
	}
	if (k < TUNER_CHECK_N || !two)
		return 0;
	t->check_pending = false;
	n2 = psd_tuner_rel_noise(t);
	n2 *= n2;
	for (i = 0; i < k; i++) {
		v[i] += n2;
		sw += 1.0 / v[i];
		swr += r[i] / v[i];
	}
	rbar = swr / sw;
	for (i = 0; i < k; i++)
		stat += (r[i] - rbar) * (r[i] - rbar) / v[i];
	*missed = stat > gsl_cdf_chisq_Pinv(TUNER_CHECK_P, k - 1);
	return 0;
}
