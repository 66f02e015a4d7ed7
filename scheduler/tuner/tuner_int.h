/* SPDX-License-Identifier: MIT */
/*
 * Internals of the tuner (tuner.c: state machine; tuner_space.c: options,
 * search space, create/destroy; tuner_pick.c: which config to lock in or
 * re-measure, and the noise floor from repeated samples; tuner_cond.c:
 * conditions; tuner_log.c: the CSV log).  Only scheduler/tuner/ includes
 * this.
 */
#ifndef PSCHED_TUNER_TUNER_INT_H
#define PSCHED_TUNER_TUNER_INT_H

#include "bo.h"
#include "tuner.h"

#define TUNER_NCOND 3 /* link bandwidth, compute time, workers */

/* One sample the GP has seen. */
struct tuner_obs {
	uint64_t part;
	uint64_t credit;
	double score;
	double weight;	     /* GP noise multiplier; grows on every retune */
	unsigned int search; /* which search it belongs to */
	bool drift; /* a locked sample that moved off: it opened the search */
	double cond[TUNER_NCOND]; /* conditions (unit box) when measured */
	/* the model's prediction for it before it was measured (steps/s;
	 * NaN: none), for the model check of a retune (tuner_check.c) */
	double pm;
	double ps;
	bool check_aged; /* aged by a missed check, until the lock-in */
};

struct psd_tuner {
	struct psd_tuner_opts o;
	enum psd_tuner_phase phase;
	struct psd_bo *bo;
	unsigned int dim;  /* tuned knobs: 1 or 2 */
	unsigned int xdim; /* GP inputs: dim, + TUNER_NCOND with conditions */
	double cond[TUNER_NCOND];      /* current conditions, unit box */
	double lock_cond[TUNER_NCOND]; /* conditions at the last lock-in */
	bool cond_moved; /* the last conditions set are off the lock-in's */
	unsigned int
		cond_moves; /* consecutive locked samples with cond_moved */
	struct psd_tuner_cond raw; /* last conditions set; workers 0: none */
	/* The link estimate (raw.link_bytes_per_s) and its floors: a floor
	 * reading raises it only.  A locked tuner reading a floor runs one
	 * sample of the lock-in with more credit (probing) to learn how fast
	 * the link is; the next one waits TUNER_PROBE_GAP locked samples
	 * (tuner.c). */
	bool probing;
	unsigned int since_probe; /* locked samples since the last probe
				   * (TUNER_PROBE_GAP from the lock-in) */
	double raw_floor;	  /* the last reading, if a floor (else 0) */
	unsigned int rises;	  /* readings in a row, during a search, of a
				   * link faster than the one held */
	unsigned int rise_obs;	  /* t->nobs at the first of them */
	bool rose;    /* a search took a faster link: it starts over there
		       * at its next sample (tuner.c, tuner_rise_search) */
	double rtt_s; /* the last round trip known (0: none) */
	bool tune_part;
	bool tune_credit;
	unsigned int lp_min; /* log2 of the partition range searched */
	unsigned int lp_max;

	struct psd_tuner_config cur;
	double pred_mean; /* GP prediction for cur when proposed, or NaN */
	double pred_sd;
	/* A retune's first samples still to be checked against the model's
	 * predictions (psd_tuner_model_check()); once they missed, the
	 * search has the whole box (wide) */
	bool check_pending;
	bool wide;

	double *win; /* scores of the sample being collected */
	double *sorted;
	unsigned int nwin;
	unsigned int discard; /* samples still to discard */
	uint64_t samples;     /* samples completed, discarded ones too */
	double last_score;
	uint64_t last_step; /* of the last report */

	unsigned int search; /* current search number */
	unsigned int search_samples;
	/* samples of this search it did not choose: design points, the
	 * drifted samples or the one under moved conditions that opened it */
	unsigned int search_given;
	/* this search started under conditions sampled before: the model
	 * leads, the end game is the last sample only (tuner_next) */
	bool explored;
	const char *why; /* what opened the last retune (psd_tuner_why()) */
	struct tuner_obs *obs;
	unsigned int nobs;
	unsigned int obs_cap;

	bool locked_once;
	struct psd_tuner_config best;
	double ref; /* reference score of the locked config */
	unsigned int ref_n;
	double fresh_sum;	 /* of the first locked samples... */
	unsigned int fresh_n;	 /* ...which rebuild ref (tuner_watch) */
	unsigned int locked_obs; /* locked samples given to the GP */
	double *dev; /* consecutive locked samples beyond the threshold */
	unsigned int ndev;

	FILE *log;
	bool own_log;
};

/* Sample budget of the current search: the first one, or a retune. */
unsigned int psd_tuner_max_samples(const struct psd_tuner *t);
/* tuner_log.c: open @path ("w"; NULL: o.log) and write the CSV header.
 * Returns 0 or -errno. */
int psd_tuner_open_log(struct psd_tuner *t, const char *path);
/* One CSV row (flushed); nothing without a log. */
void psd_tuner_log_row(struct psd_tuner *t, uint64_t step,
		       const struct psd_tuner_config *c, double score,
		       double mean, double sd, const char *phase);

/* GP input of a config under the current conditions: unit-box knobs
 * (the inverse of psd_tuner_round), then the conditions if they are
 * inputs. */
void psd_tuner_to_x(const struct psd_tuner *t, uint64_t part, uint64_t credit,
		    double *x);

/*
 * The config of the current search with the highest posterior mean among
 * those measured at least @min_n and (@max_n != 0) at most @max_n times
 * (the raw mean if the GP fails).  Returns the index of one of its
 * observations, or -1 if none qualifies; *@n gets how often it was
 * measured.
 */
int psd_tuner_pick_best(struct psd_tuner *t, unsigned int min_n,
			unsigned int max_n, double *mean, double *sd,
			unsigned int *n);
/*
 * A retune about to lock in observation @i's config: if the previous
 * lock-in was measured in this search too and the model does not put
 * @i's config TUNER_SWITCH_GAIN (5 %) above it, lock on the previous one
 * (a switch between two about equal configs buys nothing and may land on
 * the more fragile one).  Returns the observation to lock on; @mean and
 * @sd (the model's, for @i) follow it.
 */
int psd_tuner_keep_incumbent(struct psd_tuner *t, int i, double *mean,
			     double *sd);
/* What the end game of a search (its last samples) does next. */
struct tuner_end {
	enum { TUNER_END_EXPLORE, TUNER_END_RUN, TUNER_END_LOCK } what;
	uint64_t part; /* TUNER_END_RUN: the config to run... */
	uint64_t credit;
	double mean; /* ...and the GP's prediction there (model units) */
	double sd;
};

/*
 * One of the last samples of a search (@left of them, this one too):
 * 1. run the maximum of the posterior mean, if no sample of this search
 *    was taken there and there is room to measure it twice;
 * 2. else run again the config measured once with the highest posterior
 *    mean, if it beats every config measured twice, so the lock-in can
 *    go to it;
 * 3. else, on the last sample, run the leader (measured twice) once
 *    more; before the last sample, explore as usual.
 * Returns 0 or a GP/BO error.
 */
int psd_tuner_endgame(struct psd_tuner *t, unsigned int left,
		      struct tuner_end *e);
/* The highest score measured in the current search (0: none yet). */
double psd_tuner_search_top(const struct psd_tuner *t);
/*
 * A search sample (not a discarded one) scoring at most @score so far is
 * far enough below the search's best to end now (opts.cut_ratio).
 */
bool psd_tuner_cut_short(const struct psd_tuner *t, double score);
/* Mean score of the current search's samples of @part/@credit. */
double psd_tuner_config_mean(const struct psd_tuner *t, uint64_t part,
			     uint64_t credit, unsigned int *n);
/*
 * The lock-in's reference: psd_tuner_config_mean() without the drifted
 * samples that opened the search when the config has others.  Those
 * samples showed that the level moved; if it moves back during the
 * search (a transient load), a reference that mixes them with the later
 * ones sits between the two levels, and the next locked samples read as
 * drift again (test_tuner_retune_needs_consecutive_windows: 3 samples at
 * 1.5x, then the old level, reopened a second search).
 */
double psd_tuner_lock_ref(const struct psd_tuner *t, uint64_t part,
			  uint64_t credit, unsigned int *n);
/*
 * Relative sd of one sample, pooled over the configs of the current search
 * measured more than once; 0 with fewer than TUNER_FLOOR_DF degrees of
 * freedom.  *@df gets the degrees of freedom.
 */
double psd_tuner_replicate_noise(const struct psd_tuner *t, unsigned int *df);
/*
 * Before a proposal: the trust region (psd_tuner_opts.region_*) of a
 * reopened search, around the config with the highest posterior mean if
 * the conditions were sampled before, else around the last lock-in moved
 * by the fitted shear, or the search's best (@inc, from
 * psd_tuner_pick_best(); -1: none) if the model puts it 10 % above that.
 * The first search has the whole box (a region there measured worse on
 * the synthetic surfaces).  Returns 0 or a GP/BO error.
 */
int psd_tuner_set_region(struct psd_tuner *t, int inc);
/*
 * With conditions, after they moved to ones sampled before: *@keep says
 * whether the model predicts the locked config within TUNER_KEEP_GAIN
 * (3 %) of the best config there, so the search need not reopen.
 * Returns 0 or a GP/BO error.
 */
int psd_tuner_model_keeps(struct psd_tuner *t, bool *keep);
/*
 * The credit no proposal goes below (bytes; 0: none): TUNER_BDP_FRAC of
 * the link estimate times the round trip, credit tuned and both known
 * (conditions as GP inputs or not).  psd_tuner_set_floor() hands it to the BO;
 * psd_tuner_lift() raises a rounded proposal onto it (a larger multiple,
 * or a larger partition where the largest multiple falls short).
 */
double psd_tuner_credit_floor(const struct psd_tuner *t);
/*
 * @want bytes of credit on *@part or a larger partition: a tuned
 * partition doubles (up to the largest) until credit_mult_max multiples
 * reach @want, and *@part is set to it.  Returns its multiple nearest
 * @want (@up: the smallest reaching it) within [1, credit_mult_max],
 * in bytes.
 */
uint64_t psd_tuner_credit_reach(const struct psd_tuner *t, double want, bool up,
				uint64_t *part);
int psd_tuner_set_floor(struct psd_tuner *t);
void psd_tuner_lift(const struct psd_tuner *t, uint64_t *part,
		    uint64_t *credit);
/* Conditions (tuner_cond.c): mid-box until the first report. */
void psd_tuner_cond_init(struct psd_tuner *t);
/* The GP's shear priors under conditions (see TUNER_SHEAR_*). */
void psd_tuner_shear_prior(const struct psd_tuner *t, struct psd_bo_opts *bo);
/* A BO over the tuner's space with its GP priors (tuner_space.c). */
int psd_tuner_bo_create(struct psd_tuner *t, uint64_t seed,
			struct psd_bo **out);
/* None of the first @n samples was measured near the current
 * conditions. */
bool psd_tuner_cond_is_novel(const struct psd_tuner *t, unsigned int n);

/*
 * With conditions the GP models ln(steps/s): a level that scales with the
 * link rate or the compute time becomes an offset, and noise relative to
 * the score becomes constant.  Otherwise it models steps/s.
 */
static inline bool psd_tuner_log_y(const struct psd_tuner *t)
{
	return t->o.conditions;
}

/* A score in the GP's output units. */
double psd_tuner_model_y(const struct psd_tuner *t, double score);
/* A GP mean and sd back in steps/s (log-normal median, delta-method sd). */
void psd_tuner_model_out(const struct psd_tuner *t, double *mean, double *sd);

/*
 * The model check of a retune: once TUNER_CHECK_N samples of the search,
 * at two configs or more, carry the prediction made for them before they
 * were measured, *@missed says whether they disagree with it beyond the
 * noise (the predictions' sd and the learned noise), a common offset
 * (the level moved) allowed.  Checks once per search; *@missed false
 * until then.  Returns 0 or a GP/BO error.
 */
int psd_tuner_model_check(struct psd_tuner *t, bool *missed);
/* The relative sd of one sample as the model sees it (learned, the
 * replicate floor, or opts.noise). */
double psd_tuner_rel_noise(struct psd_tuner *t);

/* Hand the replicate noise to the GP as a floor of its learned noise. */
int psd_tuner_update_noise_floor(struct psd_tuner *t);

#endif
