// SPDX-License-Identifier: MIT
/*
 * Runtime conditions as GP inputs (AutoByte's metrics): link bandwidth
 * per worker, compute time per step, worker count, each mapped to [0,1]
 * on a log scale.  A locked tuner reopens its search when one moves
 * enough to matter (tuner.c, tuner_watch).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tuner_int.h"

/* log2 ranges mapped to [0,1] */
#define COND_BW_LO   20.0  /* 1 MiB/s */
#define COND_BW_HI   37.0  /* 128 GiB/s */
#define COND_COMP_LO -14.0 /* 61 us */
#define COND_COMP_HI 4.0   /* 16 s */
#define COND_W_HI    10.0  /* 1024 workers */
/* A move of more than this (log2: 1.4x) reopens a locked search. */
#define COND_MOVE log2(1.4)
/* A search takes a faster link from this many readings in a row. */
#define COND_RISE_READINGS 2

/*
 * With conditions, the shear prior of the tuned knobs per octave of link
 * bandwidth (see struct psd_gp_hyper): the credit should cover the same
 * time of the link, so its bytes grow one octave per octave of rate.  How
 * that splits between the partition (per-message costs amortized over
 * more bytes) and the multiple (finer partitions for priority) depends on
 * the job: ResNet-50's best partition stays at 64-256 KiB from 1 to 5
 * Gbit/s (bench/autotune-bench.sh), where the synthetic surfaces' moves
 * 1.2 octaves per octave.  So the prior halves it: partition +0.5,
 * multiple +0.5.  Against partition +1, multiple 0, over 90 seeds at 10 %
 * noise it took a never-seen rate from 0.939 to 0.952 of the optimum, a
 * return to a known one from 0.972 to 0.979 (test_tuner_synth.c).  Its sd
 * (unit-box units) lets the fit follow data from two or more rates that
 * say else.
 */
#define TUNER_SHEAR_PART 0.5
#define TUNER_SHEAR_MULT 0.5
#define TUNER_SHEAR_SD	 1.0

static double cond_unit(double l2, double lo, double hi)
{
	double u = (l2 - lo) / (hi - lo);

	return u < 0.0 ? 0.0 : (u > 1.0 ? 1.0 : u);
}

void psd_tuner_cond_init(struct psd_tuner *t)
{
	unsigned int j;

	for (j = 0; j < TUNER_NCOND; j++)
		t->cond[j] = t->lock_cond[j] = 0.5;
}

static const double cond_span[TUNER_NCOND] = { COND_BW_HI - COND_BW_LO,
					       COND_COMP_HI - COND_COMP_LO,
					       COND_W_HI };

bool psd_tuner_cond_is_novel(const struct psd_tuner *t, unsigned int n)
{
	unsigned int i;
	unsigned int j;

	for (i = 0; i < n; i++) {
		for (j = 0; j < TUNER_NCOND; j++)
			if (fabs(t->obs[i].cond[j] - t->cond[j]) *
				    cond_span[j] >
			    COND_MOVE)
				break;
		if (j == TUNER_NCOND)
			return false;
	}
	return true;
}

int psd_tuner_set_conditions(struct psd_tuner *t,
			     const struct psd_tuner_cond *c)
{
	double u[TUNER_NCOND];
	double link;
	unsigned int j;

	if (!c || !isfinite(c->link_bytes_per_s) ||
	    !(c->link_bytes_per_s > 0.0) || !isfinite(c->compute_s) ||
	    !(c->compute_s > 0.0) || !c->workers || !isfinite(c->rtt_s) ||
	    c->rtt_s < 0.0)
		return -EINVAL;
	/*
	 * Without conditions as model inputs the link estimate and the
	 * round trip are still kept: the credit floor needs them
	 * (psd_tuner_credit_floor()).  Live, a first search without them
	 * tried 4 KiB x 1 behind a 4 ms round trip; its one step took 107 s.
	 * The round trip is the path's, whatever the config: taken during a
	 * search too.
	 */
	if (c->rtt_s > 0.0)
		t->rtt_s = c->rtt_s;
	/*
	 * Held during a search: what a worker measures depends on the config
	 * it runs (a credit below the bandwidth-delay product leaves the
	 * link idle, and the busy-time rate falls with it), so the configs a
	 * search tries would move the "link rate" themselves.  Behind a 2 ms
	 * delay line a retune read 4 KiB x 1's starved rate as a slow link,
	 * the sheared region moved to small partitions, and the next
	 * proposals starved more (bench/autotune-bench.sh).  So the
	 * conditions are those measured under the lock-in (or the first
	 * config), which a search's samples are tagged with; a slower link
	 * during a search shows once the lock-in runs again.
	 *
	 * A faster one is taken at once, from the second reading in a row
	 * above the one held by more than COND_MOVE: no config reads a link
	 * faster than it is.  Held, it tagged the samples after the change
	 * with the old rate: live, ResNet-50's first search at 1 Gbit/s
	 * measured its last samples after the link went to 5, the model took
	 * their 3x rate for a config's at 1 Gbit/s, and the retune at 5 that
	 * followed locked a config 15 % slower than the one it left
	 * (bench/autotune-bench.sh).  Taken, it starts the search over on
	 * that link (t->rose; tuner.c, tuner_rise_search), the samples since
	 * the first faster reading tagged with it.
	 */
	if (t->raw.workers &&
	    (t->phase == PSD_TUNER_EXPLORE || t->phase == PSD_TUNER_RETUNE)) {
		if (!(log2(c->link_bytes_per_s / t->raw.link_bytes_per_s) >
		      COND_MOVE)) {
			t->rises = 0;
			return 0;
		}
		if (!t->rises++)
			t->rise_obs = t->nobs;
		if (t->rises < COND_RISE_READINGS)
			return 0;
		t->rose = t->o.conditions;
	}
	t->rises = 0;
	/*
	 * A floor (the credit, not the link, set the rate) says only that
	 * the link is at least this fast: it raises the estimate, never
	 * lowers it.  Without the rule a lock-in whose credit falls short
	 * of a faster link's bandwidth-delay product reads its own credit
	 * as the link, and a retune from there walks to smaller configs.
	 */
	link = c->link_bytes_per_s;
	t->raw_floor = c->link_floor ? link : 0.0;
	if (c->link_floor && t->raw.workers && t->raw.link_bytes_per_s > link)
		link = t->raw.link_bytes_per_s;
	t->raw = *c;
	t->raw.link_bytes_per_s = link;
	if (!t->o.conditions)
		return 0;
	u[0] = cond_unit(log2(link), COND_BW_LO, COND_BW_HI);
	u[1] = cond_unit(log2(c->compute_s), COND_COMP_LO, COND_COMP_HI);
	u[2] = cond_unit(log2((double)c->workers), 0.0, COND_W_HI);
	t->cond_moved = false;
	for (j = 0; j < TUNER_NCOND; j++)
		if (fabs(u[j] - t->lock_cond[j]) * cond_span[j] >
		    COND_MOVE - 1e-9)
			t->cond_moved = true;
	memcpy(t->cond, u, sizeof(u));
	return psd_bo_set_context(t->bo, t->cond, TUNER_NCOND);
}

/*
 * Credit below the bandwidth-delay product leaves the link idle for part
 * of every round trip: at a quarter of it a step's transfers take about
 * four times as long, whatever the partition.  Live, behind a 4 ms round
 * trip, retunes' design points at the trust region's edge tried 4 KiB x
 * 11 and 4 KiB x 14 (56 KiB of credit, 1/27 of the product at 3 Gbit/s),
 * and a first search 4 KiB x 1, whose one step took 107 s
 * (bench/autotune-bench.sh).  Half of it leaves room for a link estimate
 * that is high or a round trip that shrinks.
 */
#define TUNER_BDP_FRAC 0.5

double psd_tuner_credit_floor(const struct psd_tuner *t)
{
	if (!t->tune_credit || !t->raw.workers || !(t->rtt_s > 0.0))
		return 0.0;
	return TUNER_BDP_FRAC * t->raw.link_bytes_per_s * t->rtt_s;
}

int psd_tuner_set_floor(struct psd_tuner *t)
{
	double w[PSD_GP_MAX_DIM] = { 0 };
	double floor = psd_tuner_credit_floor(t);
	unsigned int k = 0;

	if (!(floor > (double)(UINT64_C(1) << t->lp_min)))
		return psd_bo_set_floor(t->bo, NULL, 0.0);
	/* log2 credit = lp_min + x_part (lp_max - lp_min) + x_mult log2 max */
	if (t->tune_part)
		w[k++] = t->lp_max - t->lp_min;
	w[k] = log2(t->o.credit_mult_max);
	return psd_bo_set_floor(t->bo, w, log2(floor) - t->lp_min);
}

uint64_t psd_tuner_credit_reach(const struct psd_tuner *t, double want, bool up,
				uint64_t *part)
{
	uint64_t p = *part;
	double mult;

	while (t->tune_part && want > (double)(p * t->o.credit_mult_max) &&
	       p < (UINT64_C(1) << t->lp_max))
		p <<= 1;
	mult = want / (double)p;
	mult = fmin(fmax(up ? ceil(mult) : round(mult), 1.0),
		    (double)t->o.credit_mult_max);
	*part = p;
	return p * (uint64_t)mult;
}

void psd_tuner_lift(const struct psd_tuner *t, uint64_t *part, uint64_t *credit)
{
	double floor = psd_tuner_credit_floor(t);

	/* rounding may leave a partition whose multiples cannot reach it */
	if ((double)*credit < floor)
		*credit = psd_tuner_credit_reach(t, floor, true, part);
}

double psd_tuner_model_y(const struct psd_tuner *t, double score)
{
	return psd_tuner_log_y(t) ? log(score) : score;
}

void psd_tuner_model_out(const struct psd_tuner *t, double *mean, double *sd)
{
	if (!psd_tuner_log_y(t))
		return;
	*mean = exp(*mean);
	*sd *= *mean;
}

void psd_tuner_shear_prior(const struct psd_tuner *t, struct psd_bo_opts *bo)
{
	unsigned int k = 0;

	if (t->tune_part)
		bo->shear_prior[k++] = TUNER_SHEAR_PART * cond_span[0] /
				       (t->lp_max - t->lp_min);
	if (t->tune_credit)
		bo->shear_prior[k++] = TUNER_SHEAR_MULT * cond_span[0] /
				       log2(t->o.credit_mult_max);
	bo->shear_prior_sd = TUNER_SHEAR_SD;
}
