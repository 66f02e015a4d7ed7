// SPDX-License-Identifier: MIT
/*
 * Which config the tuner trusts: the lock-in goes to the config with the
 * highest posterior mean among those measured at least twice (one lucky
 * sample cannot win), and samples repeated on one config give a floor
 * for the GP's learned noise, so the model cannot pass exactly through
 * noisy samples.
 */
#include <math.h>
#include <string.h>

#include "tuner_int.h"

#define TUNER_FLOOR_DF	 2   /* replicate degrees of freedom for a floor */
#define TUNER_FLOOR_FRAC 0.7 /* floor = this x the replicate sd */
/* a locked config within this of the model's best stays (conditions) */
#define TUNER_KEEP_GAIN 0.03
/* a retune's region moves to a config the model puts this much above
 * its anchor */
#define TUNER_FOLLOW_GAIN 0.10
/* a retune locks in a new config only if the model puts it this much
 * above the previous lock-in, measured in the same search */
#define TUNER_SWITCH_GAIN 0.05

double psd_tuner_search_top(const struct psd_tuner *t)
{
	double top = 0.0;
	unsigned int i;

	for (i = 0; i < t->nobs; i++)
		if (t->obs[i].search == t->search)
			top = fmax(top, t->obs[i].score);
	return top;
}

bool psd_tuner_cut_short(const struct psd_tuner *t, double score)
{
	double top;

	if (t->discard || t->o.cut_ratio <= 0.0 ||
	    (t->phase != PSD_TUNER_EXPLORE && t->phase != PSD_TUNER_RETUNE))
		return false;
	top = psd_tuner_search_top(t);
	return top > 0.0 && score < t->o.cut_ratio * top;
}

/* The mean of @part/@credit's samples in this search, without the drifted
 * ones that opened it when @no_drift. */
static double tuner_mean_of(const struct psd_tuner *t, uint64_t part,
			    uint64_t credit, bool no_drift, unsigned int *n)
{
	double sum = 0.0;
	unsigned int i;

	*n = 0;
	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].search != t->search || t->obs[i].part != part ||
		    t->obs[i].credit != credit || (no_drift && t->obs[i].drift))
			continue;
		sum += t->obs[i].score;
		(*n)++;
	}
	return *n ? sum / *n : NAN;
}

double psd_tuner_config_mean(const struct psd_tuner *t, uint64_t part,
			     uint64_t credit, unsigned int *n)
{
	return tuner_mean_of(t, part, credit, false, n);
}

double psd_tuner_lock_ref(const struct psd_tuner *t, uint64_t part,
			  uint64_t credit, unsigned int *n)
{
	double m = tuner_mean_of(t, part, credit, true, n);

	return *n ? m : tuner_mean_of(t, part, credit, false, n);
}

/* Whether observation @i is the first of its config in this search. */
static bool tuner_first_of_config(const struct psd_tuner *t, unsigned int i)
{
	unsigned int j;

	for (j = 0; j < i; j++)
		if (t->obs[j].search == t->search &&
		    t->obs[j].part == t->obs[i].part &&
		    t->obs[j].credit == t->obs[i].credit)
			return false;
	return true;
}

int psd_tuner_pick_best(struct psd_tuner *t, unsigned int min_n,
			unsigned int max_n, double *mean, double *sd,
			unsigned int *n)
{
	double x[PSD_GP_MAX_DIM];
	double m;
	double s;
	int best = -1;
	unsigned int i;
	unsigned int k;

	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].search != t->search ||
		    !tuner_first_of_config(t, i))
			continue;
		m = psd_tuner_config_mean(t, t->obs[i].part, t->obs[i].credit,
					  &k);
		if (k < min_n || (max_n && k > max_n))
			continue;
		psd_tuner_to_x(t, t->obs[i].part, t->obs[i].credit, x);
		if (psd_bo_predict(t->bo, x, &m, &s)) {
			m = psd_tuner_model_y(t, m); /* the raw mean */
			s = NAN;
		}
		if (best < 0 || m > *mean) {
			best = (int)i;
			*mean = m;
			*sd = s;
			*n = k;
		}
	}
	return best;
}

int psd_tuner_keep_incumbent(struct psd_tuner *t, int i, double *mean,
			     double *sd)
{
	double x[PSD_GP_MAX_DIM];
	double m;
	double s;
	double gain;
	unsigned int j;

	if (!t->locked_once || i < 0 ||
	    (t->obs[i].part == t->best.partition_bytes &&
	     t->obs[i].credit == t->best.credit_bytes))
		return i;
	for (j = 0; j < t->nobs; j++)
		if (t->obs[j].search == t->search &&
		    t->obs[j].part == t->best.partition_bytes &&
		    t->obs[j].credit == t->best.credit_bytes)
			break;
	if (j == t->nobs)
		return i; /* not measured under these conditions */
	psd_tuner_to_x(t, t->best.partition_bytes, t->best.credit_bytes, x);
	if (psd_bo_predict(t->bo, x, &m, &s) || !isfinite(*mean))
		return i;
	gain = psd_tuner_log_y(t) ? expm1(*mean - m) : (*mean - m) / fabs(m);
	if (gain >= TUNER_SWITCH_GAIN)
		return i;
	*mean = m;
	*sd = s;
	return (int)j;
}

int psd_tuner_endgame(struct psd_tuner *t, unsigned int left,
		      struct tuner_end *e)
{
	struct psd_bo_suggestion s;
	double m1 = NAN;
	double s1 = NAN;
	double m2 = NAN;
	double s2 = NAN;
	unsigned int n;
	int i1;
	int i2;
	int ret;

	e->what = TUNER_END_RUN;
	if (left >= 2) {
		ret = psd_bo_suggest_mean(t->bo, &s);
		if (ret)
			return ret;
		psd_tuner_round(t, s.x, &e->part, &e->credit);
		psd_tuner_lift(t, &e->part, &e->credit);
		psd_tuner_config_mean(t, e->part, e->credit, &n);
		e->mean = s.mean;
		e->sd = s.sd;
		if (!n)
			return 0;
	}
	i1 = psd_tuner_pick_best(t, 1, 1, &m1, &s1, &n);
	i2 = psd_tuner_pick_best(t, 2, 0, &m2, &s2, &n);
	if (i1 >= 0 && (i2 < 0 || m1 > m2)) {
		e->part = t->obs[i1].part;
		e->credit = t->obs[i1].credit;
		e->mean = m1;
		e->sd = s1;
		return 0;
	}
	if (left < 2 && i2 >= 0) { /* the leader's mean gets one more */
		e->part = t->obs[i2].part;
		e->credit = t->obs[i2].credit;
		e->mean = m2;
		e->sd = s2;
		return 0;
	}
	e->what = left < 2 ? TUNER_END_LOCK : TUNER_END_EXPLORE;
	return 0;
}

double psd_tuner_replicate_noise(const struct psd_tuner *t, unsigned int *df)
{
	double ss = 0.0;
	double mean;
	double d;
	unsigned int i;
	unsigned int j;
	unsigned int n;

	*df = 0;
	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].search != t->search ||
		    !tuner_first_of_config(t, i))
			continue;
		mean = psd_tuner_config_mean(t, t->obs[i].part,
					     t->obs[i].credit, &n);
		if (n < 2)
			continue;
		for (j = i; j < t->nobs; j++) {
			if (t->obs[j].search != t->search ||
			    t->obs[j].part != t->obs[i].part ||
			    t->obs[j].credit != t->obs[i].credit)
				continue;
			d = t->obs[j].score / mean - 1.0;
			ss += d * d;
		}
		*df += n - 1;
	}
	return *df >= TUNER_FLOOR_DF ? sqrt(ss / *df) : 0.0;
}

int psd_tuner_update_noise_floor(struct psd_tuner *t)
{
	double rel;
	double sum = 0.0;
	unsigned int df;
	unsigned int n = 0;
	unsigned int i;

	if (t->o.noise > 0.0)
		return 0; /* noise fixed by the caller */
	rel = psd_tuner_replicate_noise(t, &df);
	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].search == t->search) {
			sum += t->obs[i].score;
			n++;
		}
	}
	if (!n)
		return 0;
	if (psd_tuner_log_y(t)) /* a relative sd is the sd of a log */
		return psd_bo_set_noise_floor(t->bo, TUNER_FLOOR_FRAC * rel);
	return psd_bo_set_noise_floor(t->bo, TUNER_FLOOR_FRAC * rel * sum / n);
}

/*
 * Center of a retune's region: the last lock-in's config moved by the
 * fitted shear for the change of link bandwidth since then (the model's
 * structural guess; away from any sample the posterior mean falls back to
 * the average and its maximum lands anywhere).
 */
static void tuner_anchor(struct psd_tuner *t, double *x)
{
	struct psd_gp_hyper h;
	unsigned int j;

	psd_tuner_to_x(t, t->best.partition_bytes, t->best.credit_bytes, x);
	if (!t->o.conditions)
		return;
	psd_gp_hyper_get(psd_bo_gp(t->bo), &h);
	for (j = 0; j < t->dim; j++)
		x[j] = fmin(
			fmax(x[j] + h.shear[j] * (t->cond[0] - t->lock_cond[0]),
			     0.0),
			1.0);
}

/*
 * The region follows the search's best config (@inc) away from the
 * anchor @x (so a search can climb out of it over several samples), but
 * only when the model puts it clearly above the anchor: on a flat surface
 * (a link-bound job) noise alone would walk the region, 3 octaves a
 * sample, into configs that cost dearly once the link is fast again.
 */
static int tuner_follow(struct psd_tuner *t, int inc, double *x)
{
	double xi[PSD_GP_MAX_DIM];
	double mi;
	double ma;
	double sd;
	int ret;

	if (t->obs[inc].part == t->best.partition_bytes &&
	    t->obs[inc].credit == t->best.credit_bytes)
		return 0;
	psd_tuner_to_x(t, t->obs[inc].part, t->obs[inc].credit, xi);
	ret = psd_bo_predict(t->bo, xi, &mi, &sd);
	if (!ret)
		ret = psd_bo_predict(t->bo, x, &ma, &sd);
	if (ret)
		return ret;
	if (psd_tuner_log_y(t) ? mi - ma > log1p(TUNER_FOLLOW_GAIN)
			       : mi > (1.0 + TUNER_FOLLOW_GAIN) * ma)
		memcpy(x, xi, sizeof(xi));
	return 0;
}

int psd_tuner_set_region(struct psd_tuner *t, int inc)
{
	struct psd_bo_suggestion s;
	double half[PSD_GP_MAX_DIM] = { 0 };
	double x[PSD_GP_MAX_DIM];
	unsigned int k = 0;
	int ret;

	/* a retune runs in a live job: a slow config costs its time */
	psd_bo_set_cost_aware(t->bo, t->search && psd_tuner_log_y(t));
	ret = psd_tuner_set_floor(t);
	if (!ret)
		ret = psd_bo_set_region(t->bo, NULL, NULL);
	/* no lock-in yet (the first search, or one started over on a
	 * faster link, tuner_rise_search): nothing to center a region on */
	if (ret || !t->locked_once || t->wide)
		return ret;
	if (t->tune_part)
		half[k++] =
			t->o.region_part_oct > 0.0
				? t->o.region_part_oct / (t->lp_max - t->lp_min)
				: 1.0;
	if (t->tune_credit)
		half[k++] = t->o.region_mult_oct > 0.0
				    ? t->o.region_mult_oct /
					      log2(t->o.credit_mult_max)
				    : 1.0;
	if (t->explored) {
		/* conditions sampled before: the model knows where to go */
		ret = psd_bo_suggest_mean(t->bo, &s);
		if (ret)
			return ret;
		memcpy(x, s.x, sizeof(x));
	} else {
		tuner_anchor(t, x);
		ret = inc >= 0 ? tuner_follow(t, inc, x) : 0;
		if (ret)
			return ret;
	}
	return psd_bo_set_region(t->bo, x, half);
}

int psd_tuner_model_keeps(struct psd_tuner *t, bool *keep)
{
	struct psd_bo_suggestion s;
	double x[PSD_GP_MAX_DIM];
	double mean;
	double sd;
	int ret;

	*keep = false;
	ret = psd_tuner_set_floor(t);
	if (!ret)
		ret = psd_bo_set_region(t->bo, NULL, NULL);
	if (!ret)
		ret = psd_bo_suggest_mean(t->bo, &s);
	if (ret)
		return ret;
	psd_tuner_to_x(t, t->best.partition_bytes, t->best.credit_bytes, x);
	ret = psd_bo_predict(t->bo, x, &mean, &sd);
	if (ret)
		return ret;
	/* ln(steps/s) with conditions: a difference of means is a ratio */
	*keep = s.mean - mean < log1p(TUNER_KEEP_GAIN);
	return 0;
}
