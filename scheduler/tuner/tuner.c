// SPDX-License-Identifier: MIT
/*
 * The tuner state machine: samples from step scores, Bayesian
 * optimization over (log2 partition, log2 credit multiple), lock-in,
 * drift watch and retune.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner_int.h"

#define TUNER_REF_MAX	16 /* samples averaged into the locked reference */
#define TUNER_OBS_LIMIT 64 /* at a new search, keep only the newest... */
#define TUNER_OBS_KEEP	40 /* ...this many observations */
/* locked samples in a row under moved conditions that reopen the search
 * (one could be a measuring blip); one is enough when the score moved
 * beyond retune_threshold too */
#define TUNER_COND_SAMPLES 2
/* A probe (a locked sample with more credit, docs/tuner.md) has this
 * times the lock-in's credit multiple, and the next one waits this many
 * locked samples (a quarter of it when the score drifts).  Backing off
 * after probes that found nothing measured worse on the synthetic
 * surfaces: the probe then came too late after a change. */
#define TUNER_PROBE_MULT 4
#define TUNER_PROBE_GAP	 8
/* A retune that has had the samples a lock-in needs in its trust region
 * and more than this many left gets the whole box, with this many design
 * points over it first (tuner_widen) */
#define TUNER_WIDEN_LEFT   3
#define TUNER_WIDEN_DESIGN 1

/* Switch to @part/@credit (new epoch) unless that is the current config. */
static void tuner_apply(struct psd_tuner *t, uint64_t step, uint64_t part,
			uint64_t credit, double mean, double sd)
{
	struct psd_tuner_config *c = &t->cur;

	psd_tuner_model_out(t, &mean, &sd);
	t->pred_mean = mean;
	t->pred_sd = sd;
	if (c->partition_bytes == part && c->credit_bytes == credit)
		return;
	c->epoch++;
	c->partition_bytes = part;
	c->credit_bytes = credit;
	c->apply_from_step = step + t->o.apply_delay;
	t->nwin = 0;
}

/* Record a sample of the current config in the GP and in t->obs. */
static int tuner_observe(struct psd_tuner *t, double score)
{
	struct tuner_obs *obs;
	double x[PSD_GP_MAX_DIM];
	int ret;

	if (t->nobs == t->obs_cap) {
		obs = realloc(t->obs, sizeof(*obs) * (t->obs_cap * 2 + 16));
		if (!obs)
			return -ENOMEM;
		t->obs = obs;
		t->obs_cap = t->obs_cap * 2 + 16;
	}
	psd_tuner_to_x(t, t->cur.partition_bytes, t->cur.credit_bytes, x);
	ret = psd_bo_observe(t->bo, x, psd_tuner_model_y(t, score), 1.0);
	if (ret)
		return ret;
	t->obs[t->nobs++] = (struct tuner_obs){
		.part = t->cur.partition_bytes,
		.credit = t->cur.credit_bytes,
		.score = score,
		.weight = 1.0,
		.search = t->search,
		.pm = t->pred_mean,
		.ps = t->pred_sd,
	};
	memcpy(t->obs[t->nobs - 1].cond, t->cond, sizeof(t->cond));
	t->search_samples++;
	return 0;
}

/*
 * The drift watch starts over under the current conditions (a lock-in,
 * or a lock kept under new conditions): no deviating samples, the next
 * samples rebuild the reference, the conditions are the lock-in's.
 */
static void tuner_watch_anew(struct psd_tuner *t)
{
	t->ndev = 0;
	t->explored = false;
	t->locked_obs = 0;
	t->fresh_n = 0;
	t->fresh_sum = 0.0;
	memcpy(t->lock_cond, t->cond, sizeof(t->cond));
	t->cond_moved = false;
	t->cond_moves = 0;
	t->probing = false;
	t->since_probe = TUNER_PROBE_GAP; /* no probe yet: one may run */
	t->rose = false;
}

/*
 * Lock in the best config of the current search and log it: the highest
 * posterior mean among configs measured at least twice, or, if none was,
 * among all.
 */
static int tuner_rebuild(struct psd_tuner *t, unsigned int drop);

/*
 * With conditions, the samples a missed model check aged
 * (tuner_check()) are true under their own conditions: once the search
 * locks in they get their weight back.  Kept aged, a return to a known
 * rate lost its lock-in (test_tuner_synth.c, worst seed 0.95 -> 0.72).
 */
static int tuner_unage(struct psd_tuner *t)
{
	bool any = false;
	unsigned int i;

	for (i = 0; i < t->nobs; i++) {
		if (!t->obs[i].check_aged)
			continue;
		t->obs[i].weight =
			fmax(t->obs[i].weight / t->o.age_factor, 1.0);
		t->obs[i].check_aged = false;
		any = true;
	}
	return any ? tuner_rebuild(t, 0) : 0;
}

/*
 * A retune under conditions never sampled, or after a drift or a change
 * of workers, has no end game (psd_tuner_endgame) and locks in on the
 * highest posterior mean among all the configs it measured, once or more:
 * its budget is short, and a model fitted on its samples and the old
 * ones (aged or tagged with their conditions) tells a lucky sample from
 * a good config better than one more sample of it does.  On
 * test_tuner_moving.c's re-tunes: 6 samples 0.886 -> 0.899 of the new
 * optimum (any move 0.801 -> 0.850, against the prior 0.809 -> 0.816),
 * 12 samples 0.949 -> 0.954.  The first search keeps its end game and the
 * rule of two samples: with no model of earlier searches, a lock-in on
 * one sample there is a lock-in on noise.
 */
static bool tuner_trusts_mean(const struct psd_tuner *t)
{
	return t->locked_once && t->search && !t->explored;
}

static int tuner_lock(struct psd_tuner *t, uint64_t step)
{
	const struct tuner_obs *b;
	double mean = NAN;
	double sd = NAN;
	unsigned int n;
	int ret;
	int i;

	i = psd_tuner_pick_best(t, tuner_trusts_mean(t) ? 1 : 2, 0, &mean, &sd,
				&n);
	if (i < 0)
		i = psd_tuner_pick_best(t, 1, 0, &mean, &sd, &n);
	if (i < 0)
		return -EAGAIN;
	i = psd_tuner_keep_incumbent(t, i, &mean, &sd);
	ret = tuner_unage(t);
	if (ret)
		return ret;
	b = &t->obs[i];
	tuner_apply(t, step, b->part, b->credit, mean, sd);
	t->ref = psd_tuner_lock_ref(t, b->part, b->credit, &t->ref_n);
	t->best = t->cur;
	t->locked_once = true;
	t->phase = PSD_TUNER_LOCKED;
	tuner_watch_anew(t);
	psd_tuner_log_row(t, step, &t->best, t->ref, t->pred_mean, t->pred_sd,
			  "chosen");
	return 0;
}

/* Fixed noise for the GP, from the relative noise option. */
static void tuner_update_noise(struct psd_tuner *t)
{
	double sum = 0.0;
	unsigned int n = 0;
	unsigned int i;

	if (t->o.noise <= 0.0)
		return;
	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].search == t->search) {
			sum += t->obs[i].score;
			n++;
		}
	}
	if (psd_tuner_log_y(t))
		psd_bo_set_noise_sd(t->bo, t->o.noise); /* relative: log sd */
	else if (n)
		psd_bo_set_noise_sd(t->bo, t->o.noise * sum / n);
}

/* Run the incumbent (observation @i) again. */
static int tuner_remeasure(struct psd_tuner *t, uint64_t step, int i,
			   double mean, double sd)
{
	tuner_apply(t, step, t->obs[i].part, t->obs[i].credit, mean, sd);
	return 0;
}

/* Last samples of a search that exploit (psd_tuner_endgame): the lock-in
 * is on what the search ends with. */
static unsigned int tuner_exploit_samples(const struct psd_tuner *t)
{
	unsigned int m = psd_tuner_max_samples(t);

	return m >= 10 ? m / 5 : (m >= 4 ? 2 : 1);
}

/*
 * Samples a search needs before low expected improvement may lock it in:
 * those it did not choose (design points, the samples that opened it) and
 * dim + 1 more.  A GP fitted on a few noisy design points alone can see
 * the surface as flat (EI below the threshold everywhere) and lock on the
 * best of them: on a shallow surface (the replayed ResNet-50 at 2 Gbit/s)
 * that was 0.74-0.82 of the optimum in 3-4 of 100 seeds at 2-5 % noise,
 * and one CI run locked there at 0.88 (test_tuner_no_lock_on_design,
 * docs/tuner.md, "Lock-in").
 */
static unsigned int tuner_ei_lock_min(const struct psd_tuner *t)
{
	unsigned int n = t->search_given + t->dim + 1;

	return n > 2 * t->dim + 1 ? n : 2 * t->dim + 1;
}

static int tuner_check(struct psd_tuner *t);

/*
 * A retune that has had the samples a lock-in needs (tuner_ei_lock_min)
 * inside its trust region, with more than TUNER_WIDEN_LEFT of its budget
 * still to go: the rest of the search gets the whole box, one design
 * point over it first.  The region holds the old optimum's
 * neighbourhood; where the change moved the peak beyond it (two peaks
 * whose order swapped, a move of more than 3 octaves), only a look
 * outside finds it.  On test_tuner_moving.c's 12-sample re-tune: all
 * families 0.944 -> 0.949 of the new optimum, two peaks 0.892 -> 0.906,
 * any move 0.923 -> 0.937; a 6-sample re-tune never widens.  True if it
 * widened.
 */
static bool tuner_widen(struct psd_tuner *t, unsigned int left)
{
	if (!t->locked_once || t->wide || left <= TUNER_WIDEN_LEFT)
		return false;
	t->wide = true;
	psd_bo_redesign(t->bo, TUNER_WIDEN_DESIGN);
	t->search_given += TUNER_WIDEN_DESIGN;
	return true;
}

/*
 * After a sample in a search: lock in, re-measure the incumbent, or
 * propose the next config.  A lock-in needs its config measured twice:
 * when the search would lock (low expected improvement) or is down to
 * its last sample while the incumbent has one sample, the incumbent runs
 * again instead.
 */
static int tuner_next(struct psd_tuner *t, uint64_t step)
{
	struct psd_bo_suggestion s;
	uint64_t part;
	uint64_t credit;
	double mean = NAN;
	double sd = NAN;
	double x[PSD_GP_MAX_DIM];
	struct tuner_end end;
	unsigned int left;
	unsigned int n = 0;
	int inc;
	int ret;

	if (t->search_samples >= psd_tuner_max_samples(t))
		return tuner_lock(t, step);
	ret = tuner_check(t);
	if (ret)
		return ret;
	ret = psd_tuner_update_noise_floor(t);
	if (ret)
		return ret;
	tuner_update_noise(t);
	inc = psd_tuner_pick_best(t, 1, 0, &mean, &sd, &n);
	ret = psd_tuner_set_region(t, inc);
	if (ret)
		return ret;
	left = psd_tuner_max_samples(t) - t->search_samples;
	if (inc >= 0 && !psd_bo_in_design(t->bo) && !tuner_trusts_mean(t) &&
	    left <= (t->explored ? 1 : tuner_exploit_samples(t))) {
		ret = psd_tuner_endgame(t, left, &end);
		if (ret)
			return ret;
		if (end.what == TUNER_END_LOCK)
			return tuner_lock(t, step);
		if (end.what == TUNER_END_RUN) {
			tuner_apply(t, step, end.part, end.credit, end.mean,
				    end.sd);
			return 0;
		}
	}
	if (!tuner_trusts_mean(t) && inc >= 0 && n < 2 && left <= 1)
		return tuner_remeasure(t, step, inc, mean, sd);
	if (t->search_samples >= tuner_ei_lock_min(t) && tuner_widen(t, left)) {
		ret = psd_tuner_set_region(t, inc);
		if (ret)
			return ret;
	}
	ret = psd_bo_suggest(t->bo, &s);
	if (ret)
		return ret;
	/* log scores: EI is already relative to the best */
	if (!s.from_design && t->search_samples >= tuner_ei_lock_min(t) &&
	    inc >= 0 &&
	    s.acq < t->o.ei_threshold * (psd_tuner_log_y(t) ? 1.0 : fabs(mean)))
		return n >= 2 ? tuner_lock(t, step)
			      : tuner_remeasure(t, step, inc, mean, sd);
	psd_tuner_round(t, s.x, &part, &credit);
	psd_tuner_lift(t, &part, &credit);
	mean = sd = NAN;
	/* a retune's design points too: the model check compares them */
	if (!s.from_design || t->check_pending) {
		psd_tuner_to_x(t, part, credit, x);
		ret = psd_bo_predict(t->bo, x, &mean, &sd);
		if (ret)
			return ret;
	}
	tuner_apply(t, step, part, credit, mean, sd);
	return 0;
}

/* Rebuild the BO from the observations after the first @drop. */
static int tuner_rebuild(struct psd_tuner *t, unsigned int drop)
{
	const struct tuner_obs *ob;
	struct psd_bo *bo;
	double x[PSD_GP_MAX_DIM];
	unsigned int i;
	int ret;

	ret = psd_tuner_bo_create(t, t->o.seed + t->search + 1, &bo);
	if (ret)
		return ret;
	for (i = drop; i < t->nobs; i++) {
		ob = &t->obs[i];
		psd_tuner_to_x(t, ob->part, ob->credit, x);
		if (t->o.conditions)
			memcpy(x + t->dim, ob->cond, sizeof(ob->cond));
		ret = psd_bo_observe(bo, x, psd_tuner_model_y(t, ob->score),
				     ob->weight);
		if (ret) {
			psd_bo_destroy(bo);
			return ret;
		}
	}
	memmove(t->obs, t->obs + drop, sizeof(*t->obs) * (t->nobs - drop));
	t->nobs -= drop;
	psd_bo_destroy(t->bo);
	t->bo = bo;
	return 0;
}

/*
 * The model check missed (psd_tuner_model_check()): what the model
 * learned before the change does not hold.  The samples of earlier
 * searches lose their weight (opts.age_factor), the search gets the
 * whole box and opts' dim design points over it, and the model no
 * longer leads (t->explored).
 */
static int tuner_check(struct psd_tuner *t)
{
	unsigned int design = t->dim;
	unsigned int i;
	bool missed;
	int ret;

	ret = psd_tuner_model_check(t, &missed);
	if (ret || !missed)
		return ret;
	for (i = 0; i < t->nobs; i++) {
		if (t->obs[i].search == t->search)
			continue;
		t->obs[i].weight = fmin(t->obs[i].weight * t->o.age_factor,
					PSD_GP_WEIGHT_MAX);
		t->obs[i].check_aged = t->o.conditions;
	}
	ret = tuner_rebuild(t, 0);
	if (ret)
		return ret;
	psd_bo_redesign(t->bo, design);
	t->search_given += design;
	t->wide = true;
	t->explored = false;
	t->why = "the model's predictions missed after a change (the "
		 "search explores the whole box again)";
	return 0;
}

/*
 * Open a new search (phase retune).  @aged: the world changed in a way
 * the model cannot see, so what came before is down-weighted and a few
 * design points come first; otherwise (a condition the model takes as
 * input moved) the old samples keep their weight and the model leads.
 */
static int tuner_begin_search(struct psd_tuner *t, bool aged,
			      unsigned int design, const char *why)
{
	unsigned int i;
	int ret;

	for (i = 0; aged && i < t->nobs; i++)
		t->obs[i].weight = fmin(t->obs[i].weight * t->o.age_factor,
					PSD_GP_WEIGHT_MAX);
	ret = aged ? psd_bo_age(t->bo, t->o.age_factor) : 0;
	if (ret)
		return ret;
	if (t->nobs > TUNER_OBS_LIMIT) {
		/* the newest TUNER_OBS_KEEP only */
		ret = tuner_rebuild(t, t->nobs - TUNER_OBS_KEEP);
		if (ret)
			return ret;
	}
	/* fresh, spread-out samples before the GP is trusted again */
	psd_bo_redesign(t->bo, design);
	t->search++;
	t->search_samples = 0;
	t->search_given = design;
	t->check_pending = t->locked_once;
	t->wide = false;
	t->phase = PSD_TUNER_RETUNE;
	t->why = why;
	t->ndev = 0;
	t->probing = false; /* a probe cut short by a worker change */
	return 0;
}

/*
 * A search took a faster link (psd_tuner_set_conditions(), t->rose), and
 * its last sample is observed: the search starts over there, with the
 * samples since the first faster reading as its own (tagged with the new
 * conditions: they ran on that link) and, if no sample was taken near
 * the new conditions before, design points: before the first lock-in a
 * first search's (2 dim + 1 over the whole box) with its budget
 * (psd_tuner_max_samples()), after one a retune's (dim, in the region
 * around the last lock-in moved by the fitted shear).  The budget is most
 * of the gain (test_tuner_synth.c, synth_rise_in_first_search).  Carried
 * on, a search spent what was left of its budget where the model
 * pointed: live (bench/autotune-bench.sh), VGG-16's first search saw the
 * link rise from 1 to 5 Gbit/s at its 9th sample of 12, ran its last
 * four at 8-64 MiB partitions (the shear prior's way; the 1 Gbit/s phase
 * was flat and said nothing) and locked 16 MiB x 32, 0.85 of the one-shot
 * arm's 256 KiB x 32.
 */
static int tuner_rise_search(struct psd_tuner *t, uint64_t step)
{
	unsigned int from = t->rise_obs < t->nobs ? t->rise_obs : t->nobs - 1;
	/* before a lock-in, a first search's own design (bo.n_init) */
	unsigned int design = t->locked_once ? t->dim : 2 * t->dim + 1;
	unsigned int given = 0;
	bool novel;
	unsigned int i;
	int ret;

	t->rose = false;
	novel = psd_tuner_cond_is_novel(t, from);
	for (i = from; i < t->nobs; i++) {
		if (t->obs[i].search != t->search)
			continue;
		memcpy(t->obs[i].cond, t->cond, sizeof(t->cond));
		given++;
	}
	ret = given > 1 ? tuner_rebuild(t, 0) : 0;
	if (!ret)
		ret = tuner_begin_search(
			t, false, novel ? design : 0,
			"a faster link (the search starts over on it)");
	if (ret)
		return ret;
	/* the newest @given observations (a trim keeps them) open it */
	for (i = t->nobs - given; i < t->nobs; i++)
		t->obs[i].search = t->search;
	t->search_samples = given;
	t->search_given += given;
	t->explored = !novel;
	return tuner_next(t, step);
}

/*
 * The conditions moved to ones the model knows, and it predicts the
 * locked config is still (about) the best there: stay locked, with the
 * new conditions as the lock-in's and a reference rebuilt at their level.
 */
static int tuner_keep(struct psd_tuner *t, uint64_t step, double score)
{
	bool probe = t->cur.partition_bytes != t->best.partition_bytes ||
		     t->cur.credit_bytes != t->best.credit_bytes;
	int ret;

	/* a probe's sample is of its own config; the lock-in runs again */
	ret = tuner_observe(t, score);
	if (probe)
		tuner_apply(t, step, t->best.partition_bytes,
			    t->best.credit_bytes, NAN, NAN);
	tuner_watch_anew(t);
	/* until the next samples rebuild the reference */
	if (!probe) {
		t->ref = score;
		t->ref_n = 1;
	}
	psd_tuner_log_row(t, step, &t->best, t->ref, NAN, NAN, "kept");
	return ret;
}

/* The model's prediction for the config running now, under the current
 * conditions, as t->pred_mean / t->pred_sd (the samples that open a
 * retune are checked against it). */
static int tuner_predict_cur(struct psd_tuner *t)
{
	double x[PSD_GP_MAX_DIM];
	double mean;
	double sd;
	int ret;

	psd_tuner_to_x(t, t->cur.partition_bytes, t->cur.credit_bytes, x);
	ret = psd_bo_predict(t->bo, x, &mean, &sd);
	if (ret)
		return ret;
	psd_tuner_model_out(t, &mean, &sd);
	t->pred_mean = mean;
	t->pred_sd = sd;
	return 0;
}

/*
 * The conditions moved (a condition the model takes as input): keep the
 * lock if the model says it is still about the best there, else search
 * from the model's view of them, @score (of the config running now) the
 * search's first sample.
 */
static int tuner_cond_search(struct psd_tuner *t, uint64_t step, double score)
{
	bool keep = false;
	int ret;

	t->cond_moves = 0;
	t->explored = !psd_tuner_cond_is_novel(t, t->nobs);
	ret = t->explored ? psd_tuner_model_keeps(t, &keep) : 0;
	if (ret)
		return ret;
	if (keep)
		return tuner_keep(t, step, score);
	ret = tuner_predict_cur(t);
	if (ret)
		return ret;
	/* conditions never seen get dim design points in the trust region
	 * first.  Without them a never-seen rate gained a point on the
	 * synthetic surfaces, but in the live VGG-16 benchmark the model-led
	 * search at 5 Gbit/s walked to 16 KiB partitions with starved credit
	 * and ran at half the one-shot arm's rate (bench/autotune-bench.sh) */
	ret = tuner_begin_search(t, false, t->explored ? 0 : t->dim,
				 t->explored ? "the conditions moved to ones "
					       "sampled before"
					     : "the conditions moved to ones "
					       "never sampled");
	/* conditions sampled before: the model has data there, no check
	 * (on test_tuner_synth.c's returns to a known rate it only cost) */
	t->check_pending = t->check_pending && !t->explored;
	if (!ret)
		ret = tuner_observe(t, score);
	t->search_given++;
	return ret ? ret : tuner_next(t, step);
}

/*
 * The probe's config: @want bytes of credit, as a multiple of the lock-in's
 * partition where credit_mult_max allows, else on the smallest larger
 * partition (when partitions are tuned) whose multiple reaches it.
 * Without the larger partition a lock-in on small partitions stays
 * starved for good: live, VGG-16 locked 16 KiB x 21 behind a 4 ms round
 * trip (336 KiB of credit) and its probes reached only 32 x 16 KiB, too
 * little to read the faster link (bench/autotune-bench.sh).
 * False if the credit cannot grow.
 */
static bool tuner_probe_config(const struct psd_tuner *t, double want,
			       uint64_t *part, uint64_t *credit)
{
	*part = t->best.partition_bytes;
	*credit = psd_tuner_credit_reach(t, want, false, part);
	return *credit > t->best.credit_bytes;
}

/*
 * Locked, the link reads as a floor (the lock-in's credit set the rate):
 * start a probe, one sample with TUNER_PROBE_MULT times the lock-in's
 * credit (tuner_probe_config()), whose reading says how fast the link
 * is, unless the credit cannot grow or the last probe is less than
 * TUNER_PROBE_GAP samples back.  A lock-in that stays credit-bound is
 * probed again and again: its readings and its score stay the same when
 * the link gets faster, so nothing else would show it.  True if it
 * started.
 */
static bool tuner_probe(struct psd_tuner *t, uint64_t step, bool drift)
{
	uint64_t part;
	uint64_t credit;
	double behind;

	t->since_probe++;
	if (!t->o.conditions || !t->tune_credit || !t->raw.link_floor ||
	    t->since_probe < (drift ? TUNER_PROBE_GAP / 4 : TUNER_PROBE_GAP))
		return false;
	/* The floor is about credit / round trip; the estimate may be
	 * higher (an earlier reading): the probe's credit covers
	 * TUNER_PROBE_MULT times the estimate. */
	behind = t->raw_floor > 0.0 ? t->raw.link_bytes_per_s / t->raw_floor
				    : 1.0;
	if (!tuner_probe_config(t,
				(double)t->best.credit_bytes *
					TUNER_PROBE_MULT * fmax(behind, 1.0),
				&part, &credit))
		return false;
	t->probing = true;
	t->since_probe = 0;
	tuner_apply(t, step, part, credit, NAN, NAN);
	return true;
}

/*
 * The probe's sample: its reading is in the conditions now.  If they
 * moved off the lock-in's, that is the change (search or keep, as for
 * any move); else the lock-in runs again.
 */
static int tuner_probed(struct psd_tuner *t, uint64_t step, double score)
{
	t->probing = false;
	if (t->cond_moved)
		return tuner_cond_search(t, step, score);
	tuner_apply(t, step, t->best.partition_bytes, t->best.credit_bytes, NAN,
		    NAN);
	/* a sample of another config under the lock-in's conditions */
	return tuner_observe(t, score);
}

/* A sample while locked: reopen the search after a lasting change. */
static int tuner_watch(struct psd_tuner *t, uint64_t step, double score)
{
	/* the search's samples of the chosen config are biased high (they
	 * won): the first retune_windows locked samples rebuild the
	 * reference, meanwhile only twice the threshold is drift */
	bool fresh = t->fresh_n < t->o.retune_windows;
	double band = t->o.retune_threshold * (fresh ? 2.0 : 1.0);
	bool drift = fabs(score - t->ref) > band * t->ref;
	unsigned int i;
	int ret;

	if (t->probing)
		return tuner_probed(t, step, score);
	/* a floor that moved the estimate says the link got faster, not
	 * how much: a probe first, so that one search does */
	if (t->cond_moved && t->raw.link_floor && tuner_probe(t, step, true))
		return 0;
	t->cond_moves = t->cond_moved ? t->cond_moves + 1 : 0;
	if (t->cond_moves >= TUNER_COND_SAMPLES || (t->cond_moves && drift))
		/* the model knows the new conditions: search from there */
		return tuner_cond_search(t, step, score);
	if (!t->cond_moved && tuner_probe(t, step, drift))
		return 0;
	if (!drift && !t->cond_moved && t->locked_obs < TUNER_REF_MAX) {
		/* the model learns the chosen config's level too (not yet
		 * under moved conditions: they would count as sampled) */
		ret = tuner_observe(t, score);
		if (ret)
			return ret;
		t->locked_obs++;
	}
	if (fresh) {
		t->fresh_sum += score;
		if (++t->fresh_n == t->o.retune_windows) {
			t->ref = t->fresh_sum / t->fresh_n;
			t->ref_n = t->fresh_n;
		}
	}
	if (!drift) {
		t->ndev = 0;
		if (!fresh && t->ref_n < TUNER_REF_MAX) {
			t->ref = (t->ref * t->ref_n + score) / (t->ref_n + 1);
			t->ref_n++;
		}
		return 0;
	}
	t->dev[t->ndev++] = score;
	if (t->ndev < t->o.retune_windows)
		return 0;
	/* what the model expected of them, before it ages */
	ret = tuner_predict_cur(t);
	if (!ret)
		ret = tuner_begin_search(
			t, true, 2 * t->dim,
			"the locked config's step rate drifted");
	if (ret) {
		t->ndev = 0;
		return ret;
	}
	/* the drifted samples are fresh data about the current config */
	for (i = 0; i < t->o.retune_windows; i++) {
		ret = tuner_observe(t, t->dev[i]);
		if (ret)
			return ret;
		t->obs[t->nobs - 1].drift = true;
		t->search_given++;
	}
	return tuner_next(t, step);
}

static int tuner_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return (x > y) - (x < y);
}

static double tuner_median(struct psd_tuner *t)
{
	unsigned int n = t->nwin;

	memcpy(t->sorted, t->win, sizeof(*t->win) * n);
	qsort(t->sorted, n, sizeof(*t->sorted), tuner_cmp_double);
	if (n % 2)
		return t->sorted[n / 2];
	return 0.5 * (t->sorted[n / 2 - 1] + t->sorted[n / 2]);
}

static int tuner_sample(struct psd_tuner *t, uint64_t step, double score)
{
	const char *phase =
		t->probing ? "probe" : psd_tuner_phase_name(t->phase);
	int ret;

	t->samples++;
	t->last_score = score;
	if (t->discard) {
		t->discard--;
		psd_tuner_log_row(t, step, &t->cur, score, t->pred_mean,
				  t->pred_sd, "warmup");
		if (!t->discard && t->phase == PSD_TUNER_WARMUP)
			t->phase = PSD_TUNER_EXPLORE;
		return 0;
	}
	psd_tuner_log_row(t, step, &t->cur, score, t->pred_mean, t->pred_sd,
			  phase);
	if (t->phase == PSD_TUNER_LOCKED)
		return tuner_watch(t, step, score);
	ret = tuner_observe(t, score);
	if (ret)
		return ret;
	if (t->rose)
		return tuner_rise_search(t, step);
	return tuner_next(t, step);
}

/* What psd_tuner_report() and psd_tuner_overdue() hand back: the config
 * to run and whether it changed since @epoch. */
static void tuner_answer(const struct psd_tuner *t, uint64_t epoch,
			 struct psd_tuner_config *next, bool *changed)
{
	if (next)
		*next = t->cur;
	if (changed)
		*changed = t->cur.epoch != epoch;
}

static double tuner_win_max(const struct psd_tuner *t)
{
	double m = 0.0;
	unsigned int i;

	for (i = 0; i < t->nwin; i++)
		m = fmax(m, t->win[i]);
	return m;
}

int psd_tuner_report(struct psd_tuner *t, uint64_t step, double score,
		     struct psd_tuner_config *next, bool *changed)
{
	uint64_t epoch = t->cur.epoch;
	double median;
	int ret = 0;

	if (!isfinite(score) || score <= 0.0)
		ret = -EINVAL;
	else if (step >= t->cur.apply_from_step)
		t->win[t->nwin++] = score;
	if (!ret)
		t->last_step = step;
	if (!ret && t->nwin &&
	    (t->nwin == t->o.steps_per_sample ||
	     psd_tuner_cut_short(t, tuner_win_max(t)))) {
		median = tuner_median(t);
		t->nwin = 0;
		ret = tuner_sample(t, step, median);
	}
	tuner_answer(t, epoch, next, changed);
	return ret;
}

int psd_tuner_overdue(struct psd_tuner *t, double seconds,
		      struct psd_tuner_config *next, bool *changed)
{
	uint64_t epoch = t->cur.epoch;
	int ret = 0;

	if (!isfinite(seconds) || seconds <= 0.0)
		ret = -EINVAL;
	else if (!t->nwin && psd_tuner_cut_short(t, 1.0 / seconds))
		ret = tuner_sample(t, t->last_step, 1.0 / seconds);
	tuner_answer(t, epoch, next, changed);
	return ret;
}

int psd_tuner_finish(struct psd_tuner *t)
{
	double mean = NAN;
	double sd = NAN;
	double x[PSD_GP_MAX_DIM];

	if (!t->locked_once)
		return tuner_lock(t, t->last_step);
	psd_tuner_to_x(t, t->best.partition_bytes, t->best.credit_bytes, x);
	if (psd_bo_predict(t->bo, x, &mean, &sd)) {
		mean = NAN;
		sd = NAN;
	}
	psd_tuner_model_out(t, &mean, &sd);
	psd_tuner_log_row(t, t->last_step, &t->best, t->ref, mean, sd,
			  "chosen");
	return 0;
}

int psd_tuner_workers_changed(struct psd_tuner *t)
{
	t->nwin = 0;
	if (t->phase == PSD_TUNER_WARMUP)
		return 0; /* still discarding anyway */
	if (!t->discard)
		t->discard = 1;
	return tuner_begin_search(t, true, 2 * t->dim,
				  "the set of workers changed");
}

enum psd_tuner_phase psd_tuner_phase(const struct psd_tuner *t)
{
	return t->phase;
}

uint64_t psd_tuner_samples(const struct psd_tuner *t)
{
	return t->samples;
}

const char *psd_tuner_why(const struct psd_tuner *t)
{
	return t->why ? t->why : "";
}

unsigned int psd_tuner_search(const struct psd_tuner *t)
{
	return t->search;
}

void psd_tuner_current(const struct psd_tuner *t, struct psd_tuner_config *cfg)
{
	*cfg = t->cur;
}

int psd_tuner_best(const struct psd_tuner *t, struct psd_tuner_config *cfg,
		   double *score)
{
	if (!t->locked_once)
		return -EAGAIN;
	if (cfg)
		*cfg = t->best;
	if (score)
		*score = t->ref;
	return 0;
}
