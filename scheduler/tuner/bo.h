/* SPDX-License-Identifier: MIT */
/*
 * Bayesian optimization (maximization) over the unit box [0,1]^dim on top
 * of the GP in gp.h.  The first n_init suggestions are a Sobol design
 * (randomly shifted by the seed); after that the GP is refitted whenever
 * new data arrived and the acquisition (expected improvement or UCB) is
 * maximized by a Sobol screen followed by a coordinate pattern search
 * from the best few screen points.  Deterministic given the seed and the
 * sequence of calls.  Not thread-safe.
 */
#ifndef PSCHED_TUNER_BO_H
#define PSCHED_TUNER_BO_H

#include <stdbool.h>
#include <stdint.h>

#include "gp.h"

struct psd_bo;

enum psd_bo_acq {
	PSD_BO_ACQ_EI,	/* expected improvement over the incumbent + xi */
	PSD_BO_ACQ_UCB, /* posterior mean + kappa * sd */
};

struct psd_bo_opts {
	unsigned int dim;    /* 1..PSD_GP_MAX_DIM */
	enum psd_bo_acq acq; /* PSD_BO_ACQ_EI */
	double xi;	     /* EI margin, standardized output units (0.01) */
	double kappa;	     /* UCB width in posterior sds (2.0) */
	unsigned int n_init; /* observations before the GP is used (2d+1) */
	unsigned int
		n_screen; /* Sobol points screening the acquisition (512) */
	unsigned int n_refine;	 /* best screen points refined locally (3) */
	unsigned int fit_starts; /* random GP restarts per refit (2) */
	double noise_sd;  /* > 0: GP noise fixed (output units); 0: learned */
	double len_prior; /* length-scale prior median, 0: none (0.3) */
	double len_prior_sd; /* its sd in ln units (1.0) */
	/* learned noise: log-normal prior on its standardized variance,
	 * median (0.05; 0: none) and sd in ln units (1.5) */
	double noise_prior;
	double noise_prior_sd;
	double noise_floor_sd; /* learned noise sd >= this (output units) */
	/* context (psd_bo_set_context): shears of the tuned inputs per unit
	 * of the first context input (see struct psd_gp_hyper), fitted
	 * under a normal prior (mean shear_prior[j], sd shear_prior_sd; 0:
	 * no shear) */
	double shear_prior[PSD_GP_MAX_DIM];
	double shear_prior_sd;
	uint64_t seed;
};

/* A suggestion and what the GP predicted there. */
struct psd_bo_suggestion {
	double x[PSD_GP_MAX_DIM];
	bool from_design; /* initial design point: the fields below are NaN */
	double acq;	  /* EI in output units, or the UCB value */
	double mean;	  /* posterior mean at x, output units */
	double sd;	  /* posterior sd at x, output units */
};

/* Fill @o with the defaults above for @dim dimensions. */
void psd_bo_opts_default(struct psd_bo_opts *o, unsigned int dim);

/* Returns 0, -EINVAL (bad option) or -ENOMEM. */
int psd_bo_create(const struct psd_bo_opts *o, struct psd_bo **out);
/* NULL is a no-op. */
void psd_bo_destroy(struct psd_bo *bo);

/*
 * Record f(@x) = @y; @x must lie in the unit box.  @weight >= 1 scales
 * the point's noise variance (1 = fresh).  Returns 0, -EINVAL, -ENOMEM.
 */
int psd_bo_observe(struct psd_bo *bo, const double *x, double y, double weight);
/* Multiply the weight of every observation so far by @factor >= 1. */
int psd_bo_age(struct psd_bo *bo, double factor);
/* Change the fixed GP noise sd (output units; 0 = learn). */
int psd_bo_set_noise_sd(struct psd_bo *bo, double noise_sd);
/* Floor of the learned noise sd (output units; 0 = none), e.g. measured
 * from repeated samples of one config.  Returns 0 or -EINVAL. */
int psd_bo_set_noise_floor(struct psd_bo *bo, double floor_sd);

/*
 * Contextual optimization: the last @n inputs (n < dim) are conditions
 * the caller does not choose (e.g. the link rate).  Suggestions keep them
 * at @ctx and search only the other inputs; the EI incumbent is the best
 * posterior mean of the observed inputs moved to @ctx.  @n = 0 ends it.
 * Returns 0 or -EINVAL (n >= dim, a value outside [0,1]).
 */
int psd_bo_set_context(struct psd_bo *bo, const double *ctx, unsigned int n);

/*
 * Trust region: suggestions (design points, acquisition and mean maxima)
 * stay within @half[j] of @center[j] in every input, clipped to the box
 * (context inputs are fixed anyway).  @center NULL: the whole box again.
 * Returns 0 or -EINVAL (a center outside the box, a negative width).
 */
int psd_bo_set_region(struct psd_bo *bo, const double *center,
		      const double *half);

/*
 * Floor: suggestions (design points, acquisition and mean maxima) keep
 * sum_j @w[j] x[j] >= @c over the chosen inputs (context inputs are not
 * counted), @w[j] >= 0.  Design and screen points below it are skipped
 * (so the design still spreads over what is above it); a pattern-search
 * step below it, or a point where nothing in the region is above it, is
 * raised onto it, its last chosen input first, within the trust region
 * where that suffices, else up to the box's edge.  @w NULL: no floor.
 * Returns 0 or -EINVAL.
 */
int psd_bo_set_floor(struct psd_bo *bo, const double *w, double c);

/*
 * EI per unit of time: with @on, the outputs are ln(rate) and a sample
 * takes time 1 / rate, so EI is scaled by exp(mean - incumbent) where the
 * mean is below the incumbent (a config predicted 4x slower must promise
 * 4x the improvement).
 */
void psd_bo_set_cost_aware(struct psd_bo *bo, bool on);

/*
 * Make the next @n suggestions design points again (new points of the
 * same Sobol sequence), e.g. to re-explore after the function changed.
 */
void psd_bo_redesign(struct psd_bo *bo, unsigned int n);

unsigned int psd_bo_count(const struct psd_bo *bo);
/* The next suggestion is a design point. */
bool psd_bo_in_design(const struct psd_bo *bo);

/*
 * Next point to evaluate.  Refits the GP when data changed.  Returns 0,
 * -ENOMEM or -EDOM (the GP could not be fitted).
 */
int psd_bo_suggest(struct psd_bo *bo, struct psd_bo_suggestion *s);

/*
 * The point of the box (context held fixed) with the highest posterior
 * mean, found like a suggestion (Sobol screen, pattern search): for a
 * search's last samples, which exploit instead of explore.  s->acq is the
 * mean.  Returns like psd_bo_suggest(), without design points.
 */
int psd_bo_suggest_mean(struct psd_bo *bo, struct psd_bo_suggestion *s);

/*
 * Posterior mean and sd at @x (output units), refitting if data changed.
 * Returns 0 or the psd_gp_fit()/psd_gp_predict() error.
 */
int psd_bo_predict(struct psd_bo *bo, const double *x, double *mean,
		   double *sd);

/* Expected improvement of a N(@mean, @sd^2) value over @best + @xi. */
double psd_bo_ei(double mean, double sd, double best, double xi);

/* The GP, for inspection (hyperparameters, counts); owned by @bo. */
struct psd_gp *psd_bo_gp(struct psd_bo *bo);

#endif
