/* SPDX-License-Identifier: MIT */
/*
 * The scheduler's autotuner: metrics in, config out.
 *
 * The scheduler reports one score per step window (steps/s of the
 * slowest worker); the tuner groups steps_per_sample reports into a
 * sample (their median), discards the first warmup_samples samples, and
 * after every later sample proposes the next {partition, credit} by
 * Bayesian optimization (bo.h) until it locks in the best config.  While
 * locked it keeps watching the score and reopens the search when the
 * score drifts or the set of workers changes.  See docs/tuner.md.
 *
 * Knows nothing of networking.  Not thread-safe: call from one thread
 * (the scheduler's control loop).
 */
#ifndef PSCHED_TUNER_TUNER_H
#define PSCHED_TUNER_TUNER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PSD_TUNER_PART_ALIGN 4096u /* partitions are multiples of this */

struct psd_tuner;

enum psd_tuner_phase {
	PSD_TUNER_WARMUP,  /* discarding the first samples */
	PSD_TUNER_EXPLORE, /* first search */
	PSD_TUNER_LOCKED,  /* best config applied, watching for drift */
	PSD_TUNER_RETUNE,  /* search reopened after drift/worker change */
};

/* A config as the scheduler broadcasts it. */
struct psd_tuner_config {
	uint64_t epoch;		  /* bumped on every change; initial is 0 */
	uint64_t partition_bytes; /* power of two, multiple of 4096 */
	uint64_t credit_bytes;	  /* partition_bytes * k, 1 <= k <= max */
	uint64_t apply_from_step; /* first step run with this config */
};

/*
 * Runtime conditions (AutoByte's metrics), as the workers measure them.
 * With psd_tuner_opts.conditions they are inputs of the GP next to the
 * knobs, so what was learned under one condition carries over to another.
 * Without, the tuner still keeps the link estimate and the round trip for
 * its credit floor.
 */
struct psd_tuner_cond {
	double link_bytes_per_s; /* link bandwidth per worker, > 0 */
	double compute_s;	 /* compute time per step, > 0 */
	unsigned int workers;	 /* live workers, >= 1 */
	/* link_bytes_per_s is only a floor: the config's credit, not the
	 * link, set the rate (the link idled while sends waited for
	 * credit), so the link may be faster.  A floor can raise the
	 * tuner's link estimate, never lower it, and a locked tuner that
	 * reads one runs a probe with more credit (docs/tuner.md). */
	bool link_floor;
	/* The paths' minimum round trip, seconds (0: unknown).  With the
	 * link it gives the bandwidth-delay product: proposals keep their
	 * credit at TUNER_BDP_FRAC of it or more (tuner_cond.c). */
	double rtt_s;
};

/* Defaults (psd_tuner_opts_default) in parentheses. */
struct psd_tuner_opts {
	/* search space: powers of two, multiples of PSD_TUNER_PART_ALIGN */
	uint64_t part_min;	      /* (4 KiB) */
	uint64_t part_max;	      /* (64 MiB) */
	unsigned int credit_mult_max; /* credit <= this * partition (32) */
	/*
	 * != 0: that knob is not tuned (not both).  fixed_partition is
	 * rounded like a proposal; fixed_credit limits partitions to
	 * [credit / credit_mult_max, credit].
	 */
	uint64_t fixed_partition;
	uint64_t fixed_credit;
	uint64_t init_partition; /* first config, rounded (0: 4 MiB) */
	uint64_t init_credit;	 /* rounded (0: 4 * partition) */

	unsigned int warmup_samples;	 /* discarded at the start (3) */
	unsigned int steps_per_sample;	 /* reports per sample (10) */
	unsigned int max_samples;	 /* samples per search (20) */
	unsigned int retune_max_samples; /* per retune search (0: max) */
	unsigned int apply_delay; /* config applies from step + this (2) */

	double noise; /* sd of a sample relative to the score; 0: learn (0) */
	double ei_threshold;	 /* lock when EI < this * best mean (0.001) */
	double xi;		 /* EI margin, standardized units (0.01) */
	double retune_threshold; /* relative score change (0.05) */
	unsigned int retune_windows; /* consecutive samples beyond it (3) */
	double age_factor; /* old samples' noise multiplier per retune (1000) */
	/*
	 * Trust region of a reopened search: its proposals (design points
	 * too) stay within this many octaves (partition bytes; credit
	 * multiple) of where the model expects the best config, so a
	 * retune in a running job never jumps to a far corner that may
	 * stall it (3, 1.5; 0: the whole box).
	 */
	double region_part_oct;
	double region_mult_oct;
	/*
	 * A search sample whose windows so far all ran below this fraction
	 * of the best score measured in the search ends early, and the
	 * scheduler may cut one short that has not finished a step by then
	 * (psd_tuner_overdue): a poor config costs a step, not a whole
	 * sample (0.5; 0: every sample runs steps_per_sample windows).
	 */
	double cut_ratio;
	uint64_t seed; /* (0) */
	/*
	 * Conditions are GP inputs (psd_tuner_set_conditions) (false).  A
	 * locked tuner then reopens the search as soon as a condition
	 * moves (bandwidth or compute by 1.4x, or the worker count), keeps
	 * every old sample at full weight (they are tagged with their
	 * conditions) and starts from the model's prediction for the new
	 * conditions instead of a new random design.  The GP then models
	 * ln(steps/s), and its kernel shifts the knobs with the bandwidth
	 * by a fitted shear (prior: credit bytes grow with the rate, half
	 * by the partition, half by the multiple),
	 * see docs/tuner.md.
	 */
	bool conditions;

	/* optional CSV log (docs/tuner.md); log_path wins if both are set */
	FILE *log;	      /* written and flushed, never closed */
	const char *log_path; /* opened ("w") at create, closed at destroy */
};

/* Fill @o with the defaults in the comments above. */
void psd_tuner_opts_default(struct psd_tuner_opts *o);

/*
 * Create a tuner in phase warmup at the initial config (epoch 0, apply
 * from step 0).  Returns 0, -EINVAL (bad option, or nothing left to
 * tune), -ENOMEM, or -errno from opening log_path.
 */
int psd_tuner_create(const struct psd_tuner_opts *o, struct psd_tuner **out);
/* NULL is a no-op.  Closes log_path's file, never o->log. */
void psd_tuner_destroy(struct psd_tuner *t);

/*
 * Report the score (steps/s of the slowest worker, > 0) of the step
 * window ending at @step.  Reports for steps before the current config's
 * apply_from_step are ignored.  @next always receives the config to run;
 * *@changed says whether it differs from the previous one (new epoch).
 * Either may be NULL.
 * Returns 0, -EINVAL (score not finite or <= 0) or an error from the
 * GP/BO (-EDOM, -ENOMEM); after an error the tuner keeps the current
 * config and stays usable.
 */
int psd_tuner_report(struct psd_tuner *t, uint64_t step, double score,
		     struct psd_tuner_config *next, bool *changed);

/*
 * No window of the current config was reported for @seconds (the
 * slowest worker has been in one step that long): if it is a search
 * sample and 1 / @seconds is below opts.cut_ratio of the best score of
 * the search, the sample ends now with that score (an upper bound of
 * what the config does) and the search moves on.  @next and *@changed
 * as for psd_tuner_report().  Returns 0, -EINVAL (@seconds not > 0) or
 * an error from the GP/BO.
 */
int psd_tuner_overdue(struct psd_tuner *t, double seconds,
		      struct psd_tuner_config *next, bool *changed);

/*
 * The conditions from now on (see struct psd_tuner_cond); a sample is
 * tagged with the conditions set when it completes.  Returns 0, or
 * -EINVAL for a value that is not finite and > 0 (the conditions are
 * then unchanged).  Without opts.conditions it keeps only the link
 * estimate and the round trip, for the credit floor.
 */
int psd_tuner_set_conditions(struct psd_tuner *t,
			     const struct psd_tuner_cond *c);

/*
 * The job ends: log the chosen config as the CSV's last row (phase
 * "chosen"): the last locked-in config, or, if the tuner never locked
 * in, it locks in now on the current search's best.  Returns 0, or
 * -EAGAIN when no sample was ever observed.
 */
int psd_tuner_finish(struct psd_tuner *t);

/*
 * The set of workers changed: the next sample is discarded and the search
 * reopens (phase retune) with the old samples down-weighted.  The config
 * is unchanged.  During warmup only the sample being collected is
 * dropped.  Returns 0 or -ENOMEM.
 */
int psd_tuner_workers_changed(struct psd_tuner *t);

enum psd_tuner_phase psd_tuner_phase(const struct psd_tuner *t);
/* Samples completed so far, discarded ones too (the CSV's last row). */
uint64_t psd_tuner_samples(const struct psd_tuner *t);
/* "warmup", "explore", "locked", "retune". */
const char *psd_tuner_phase_name(enum psd_tuner_phase phase);
void psd_tuner_current(const struct psd_tuner *t, struct psd_tuner_config *cfg);
/*
 * What opened the current or last retune, e.g. "a faster link (the
 * search starts over on it)"; "" before any.
 */
const char *psd_tuner_why(const struct psd_tuner *t);
/* The search number: 0 for the first, +1 per retune. */
unsigned int psd_tuner_search(const struct psd_tuner *t);

/*
 * The locked-in config and its reference score (mean of its samples).
 * Returns 0, or -EAGAIN before the first lock-in.
 */
int psd_tuner_best(const struct psd_tuner *t, struct psd_tuner_config *cfg,
		   double *score);

/*
 * One line of progress (no newline), e.g. "tuner locked: sample 31,
 * search 12/20, partition 1 MiB, credit 4 MiB (4x), last 119.6 steps/s,
 * best 120.4 at 1 MiB/4x".  Truncated to @len - 1 characters.
 * Returns 0 or -EINVAL (@buf NULL or @len 0).
 */
int psd_tuner_progress(const struct psd_tuner *t, char *buf, size_t len);

/*
 * Round a point of the unit search box to a usable config: @x holds one
 * value per tuned knob (partition first).  Non-finite or out-of-box
 * values are clamped.  For tests and tools.
 */
void psd_tuner_round(const struct psd_tuner *t, const double *x,
		     uint64_t *partition, uint64_t *credit);

#endif
