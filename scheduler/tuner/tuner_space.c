// SPDX-License-Identifier: MIT
/*
 * The tuner's options and search space: defaults and validation, the
 * rounding between the unit box and (partition, credit), the GP priors
 * of its BO, and psd_tuner_create()/psd_tuner_destroy().  The state
 * machine that drives a created tuner is in tuner.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner_int.h"

#define TUNER_MULT_MAX 1024

/*
 * The GP's priors for the tuner's surfaces (struct psd_bo_opts): a step
 * rate over log2 partition and log2 credit multiple changes over octaves
 * (a peak spans several; bench/autotune-bench.sh), and each sample is
 * one noisy step timing.  The generic BO defaults (length 0.3, sd 1.0;
 * noise 0.05 of the scores' variance, sd 1.5) let a fit on 15 samples at
 * 10 % noise bend through single samples: with them the first search
 * reached 0.964 of the optimum over 120 synthetic seeds, with these 0.978
 * (test_tuner_synth.c; docs/tuner.md, "The model").
 */
#define TUNER_LEN_PRIOR	     0.4 /* unit box: 5.6 octaves of partition */
#define TUNER_LEN_PRIOR_SD   0.5
#define TUNER_NOISE_PRIOR    0.2 /* of the standardized variance */
#define TUNER_NOISE_PRIOR_SD 0.7

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)

void psd_tuner_opts_default(struct psd_tuner_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->part_min = 4 * KIB;
	o->part_max = 64 * MIB;
	o->credit_mult_max = 32;
	o->warmup_samples = 3;
	o->steps_per_sample = 10;
	o->max_samples = 20;
	o->apply_delay = 2;
	o->ei_threshold = 0.001;
	o->xi = 0.01;
	o->retune_threshold = 0.05;
	o->retune_windows = 3;
	o->age_factor = 1000.0;
	o->region_part_oct = 3.0;
	o->region_mult_oct = 1.5;
	o->cut_ratio = 0.5;
}

static bool tuner_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static unsigned int tuner_log2(uint64_t v)
{
	return 63u - (unsigned int)__builtin_clzll(v);
}

static double tuner_clamp01(double v)
{
	if (!(v >= 0.0)) /* NaN too */
		return 0.0;
	return v > 1.0 ? 1.0 : v;
}

/* Nearest power of two (in log scale) clamped to the searched range. */
static uint64_t tuner_round_part(const struct psd_tuner *t, double bytes)
{
	double lp = bytes > 0.0 ? round(log2(bytes)) : 0.0;

	lp = fmin(fmax(lp, t->lp_min), t->lp_max);
	return UINT64_C(1) << (unsigned int)lp;
}

static uint64_t tuner_clamp_mult(const struct psd_tuner *t, double mult)
{
	mult = round(mult);
	if (!(mult >= 1.0))
		return 1;
	if (mult > t->o.credit_mult_max)
		return t->o.credit_mult_max;
	return (uint64_t)mult;
}

/* Credit for @part when credit is not tuned. */
static uint64_t tuner_untuned_credit(const struct psd_tuner *t, uint64_t part)
{
	if (t->o.fixed_credit)
		return part * tuner_clamp_mult(t, (double)t->o.fixed_credit /
							  (double)part);
	return part *
	       tuner_clamp_mult(t, (double)t->o.init_credit / (double)part);
}

void psd_tuner_round(const struct psd_tuner *t, const double *x,
		     uint64_t *partition, uint64_t *credit)
{
	unsigned int k = 0;
	double lp;
	double lm;

	if (t->tune_part) {
		lp = t->lp_min +
		     tuner_clamp01(x[k++]) * (t->lp_max - t->lp_min);
		*partition = tuner_round_part(t, exp2(lp));
	} else {
		*partition = UINT64_C(1) << t->lp_min;
	}
	if (t->tune_credit) {
		lm = tuner_clamp01(x[k]) * log2(t->o.credit_mult_max);
		*credit = *partition * tuner_clamp_mult(t, exp2(lm));
	} else {
		*credit = tuner_untuned_credit(t, *partition);
	}
}

/* Unit-box coordinates of a config (the inverse of psd_tuner_round). */
void psd_tuner_to_x(const struct psd_tuner *t, uint64_t part, uint64_t credit,
		    double *x)
{
	unsigned int k = 0;

	if (t->tune_part)
		x[k++] = tuner_clamp01(((double)tuner_log2(part) - t->lp_min) /
				       (t->lp_max - t->lp_min));
	if (t->tune_credit)
		x[k++] = tuner_clamp01(log2((double)credit / (double)part) /
				       log2(t->o.credit_mult_max));
	if (t->o.conditions)
		memcpy(x + k, t->cond, sizeof(t->cond));
}

/* Sample budget of the current search: the first one's until a lock-in
 * (one started over on a faster link, tuner_rise_search, or after a
 * worker change), then a retune's. */
unsigned int psd_tuner_max_samples(const struct psd_tuner *t)
{
	if (t->search && !t->locked_once)
		return t->o.max_samples;
	if (t->search && t->o.retune_max_samples)
		return t->o.retune_max_samples;
	return t->o.max_samples;
}

static bool tuner_opts_are_valid(const struct psd_tuner_opts *o)
{
	return tuner_is_pow2(o->part_min) && tuner_is_pow2(o->part_max) &&
	       o->part_min >= PSD_TUNER_PART_ALIGN &&
	       o->part_min <= o->part_max && o->credit_mult_max >= 1 &&
	       o->credit_mult_max <= TUNER_MULT_MAX &&
	       o->steps_per_sample >= 1 && o->max_samples >= 1 &&
	       o->apply_delay >= 1 && o->retune_windows >= 1 &&
	       isfinite(o->noise) && o->noise >= 0.0 &&
	       isfinite(o->ei_threshold) && o->ei_threshold >= 0.0 &&
	       isfinite(o->xi) && o->xi >= 0.0 &&
	       isfinite(o->retune_threshold) && o->retune_threshold > 0.0 &&
	       isfinite(o->age_factor) && o->age_factor >= 1.0 &&
	       o->cut_ratio >= 0.0 && o->cut_ratio < 1.0;
}

/*
 * Work out which knobs are tuned and the partition range searched.
 * Returns -EINVAL when nothing is left to tune.
 */
static int tuner_setup_space(struct psd_tuner *t)
{
	const struct psd_tuner_opts *o = &t->o;
	unsigned int lo = tuner_log2(o->part_min);
	unsigned int hi = tuner_log2(o->part_max);
	unsigned int lc;

	if (o->fixed_credit) {
		/* keep credit / mult_max <= partition <= credit */
		if (o->fixed_credit < o->part_min)
			return -EINVAL;
		lc = tuner_log2(o->fixed_credit);
		hi = lc < hi ? lc : hi;
		lc = (unsigned int)ceil(
			log2((double)o->fixed_credit / o->credit_mult_max));
		lo = lc > lo ? lc : lo;
		if (lo > hi)
			return -EINVAL;
	}
	t->lp_min = lo;
	t->lp_max = hi;
	if (o->fixed_partition) {
		t->lp_min = t->lp_max = tuner_log2(
			tuner_round_part(t, (double)o->fixed_partition));
	}
	t->tune_part = t->lp_min < t->lp_max;
	t->tune_credit = !o->fixed_credit && o->credit_mult_max > 1;
	t->dim = t->tune_part + t->tune_credit;
	t->search_given = 2 * t->dim + 1; /* bo.n_init: the first search's */
	return t->dim ? 0 : -EINVAL;
}

/* The first config: init_* (or 4 MiB, 4x) rounded like a proposal. */
static void tuner_setup_initial(struct psd_tuner *t)
{
	struct psd_tuner_config *c = &t->cur;

	if (!t->o.init_partition)
		t->o.init_partition = 4 * MIB;
	if (!t->o.init_credit)
		t->o.init_credit = 4 * t->o.init_partition;
	c->partition_bytes = tuner_round_part(t, (double)t->o.init_partition);
	c->credit_bytes = tuner_untuned_credit(t, c->partition_bytes);
	c->epoch = 0;
	c->apply_from_step = 0;
	t->pred_mean = NAN;
	t->pred_sd = NAN;
}

int psd_tuner_bo_create(struct psd_tuner *t, uint64_t seed, struct psd_bo **out)
{
	struct psd_bo_opts bo;

	int ret;

	psd_bo_opts_default(&bo, t->xdim);
	bo.n_init = 2 * t->dim + 1; /* the conditions are not designed */
	bo.xi = t->o.xi;
	bo.seed = seed;
	bo.len_prior = TUNER_LEN_PRIOR;
	bo.len_prior_sd = TUNER_LEN_PRIOR_SD;
	bo.noise_prior = TUNER_NOISE_PRIOR;
	bo.noise_prior_sd = TUNER_NOISE_PRIOR_SD;
	if (t->o.conditions)
		psd_tuner_shear_prior(t, &bo);
	ret = psd_bo_create(&bo, out);
	if (!ret && t->o.conditions)
		ret = psd_bo_set_context(*out, t->cond, TUNER_NCOND);
	if (ret) {
		psd_bo_destroy(*out);
		*out = NULL;
	}
	return ret;
}

int psd_tuner_create(const struct psd_tuner_opts *o, struct psd_tuner **out)
{
	struct psd_tuner *t;
	int ret;

	if (!o || !out || !tuner_opts_are_valid(o))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->o = *o;
	t->o.log_path = NULL; /* not kept: the caller's string */
	ret = tuner_setup_space(t);
	if (ret)
		goto err_free;
	tuner_setup_initial(t);
	t->xdim = t->dim + (o->conditions ? TUNER_NCOND : 0);
	psd_tuner_cond_init(t);
	t->win = calloc(o->steps_per_sample, sizeof(*t->win));
	t->sorted = calloc(o->steps_per_sample, sizeof(*t->sorted));
	t->dev = calloc(o->retune_windows, sizeof(*t->dev));
	if (!t->win || !t->sorted || !t->dev) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = psd_tuner_bo_create(t, o->seed, &t->bo);
	if (ret)
		goto err_free;
	ret = psd_tuner_open_log(t, o->log_path);
	if (ret)
		goto err_free;
	t->discard = o->warmup_samples;
	t->phase = t->discard ? PSD_TUNER_WARMUP : PSD_TUNER_EXPLORE;
	t->last_score = NAN;
	*out = t;
	return 0;

err_free:
	psd_tuner_destroy(t);
	return ret;
}

void psd_tuner_destroy(struct psd_tuner *t)
{
	if (!t)
		return;
	if (t->own_log)
		fclose(t->log);
	psd_bo_destroy(t->bo);
	free(t->obs);
	free(t->dev);
	free(t->sorted);
	free(t->win);
	free(t);
}
