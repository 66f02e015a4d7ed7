/* SPDX-License-Identifier: MIT */
/*
 * Gaussian process regression for the tuner (GSL).
 *
 * Kernel: Matérn 5/2 with one length scale per input dimension,
 *   k(a, b) = s2 * (1 + sqrt(5) r + 5/3 r^2) * exp(-sqrt(5) r),
 *   r^2 = sum_j ((a_j - b_j) / len_j)^2.
 * Inputs live in [0,1]^dim.  Observation i has noise variance
 * noise_var * weight_i with weight_i >= 1, which lets the caller
 * down-weight old observations.  Outputs are standardized inside the GP
 * (subtract the mean, divide by the population standard deviation, both
 * weighted by 1/weight_i; an sd of 0 is taken as 1), so signal_var and
 * noise_var are in standardized units.
 *
 * Predictions are of the latent function (no noise term), in the
 * original output units.  Not thread-safe: one thread per GP.
 */
#ifndef PSCHED_TUNER_GP_H
#define PSCHED_TUNER_GP_H

#include <stdbool.h>
#include <stdint.h>

#define PSD_GP_MAX_DIM 8
/* Weights are capped here so repeated ageing cannot overflow. */
#define PSD_GP_WEIGHT_MAX 1e6

struct psd_gp;

struct psd_gp_hyper {
	double len[PSD_GP_MAX_DIM]; /* length scale per input dim, > 0 */
	double signal_var;	    /* kernel variance (standardized) */
	double noise_var;	    /* noise variance (standardized) */
	/*
	 * Context (psd_bo_set_context): the last nctx inputs are conditions
	 * (0: none).  shear[j] moves input j (j < dim - nctx) per unit of
	 * the first context input: the kernel compares a_j - b_j -
	 * shear[j] * (a_c - b_c), so a peak that moves with the condition
	 * (a partition that grows with the link rate) is one smooth ridge.
	 */
	unsigned int nctx;
	double shear[PSD_GP_MAX_DIM];
};

/* Box for the hyperparameter search; every bound > 0, lo <= hi. */
struct psd_gp_bounds {
	double len_lo;
	double len_hi;
	double signal_lo;
	double signal_hi;
	double noise_lo;
	double noise_hi;
};

struct psd_gp_fit_opts {
	struct psd_gp_bounds bounds;
	unsigned int starts;   /* random starts besides the current hyper */
	unsigned int max_iter; /* simplex iterations per start */
	double noise_sd;       /* > 0: noise fixed at this sd in output units */
	/*
	 * > 0: log-normal prior on every length scale, median len_prior,
	 * sd len_prior_sd in ln units (maximum a posteriori instead of
	 * maximum likelihood); keeps fits on few points from going flat.
	 */
	double len_prior;
	double len_prior_sd;
	/*
	 * > 0: log-normal prior on the (standardized) noise variance, median
	 * noise_prior, sd noise_prior_sd in ln units: keeps a learned noise
	 * off its lower bound, where the GP would pass exactly through
	 * noisy points.  Ignored when noise_sd fixes the noise.
	 */
	double noise_prior;
	double noise_prior_sd;
	/*
	 * > 0: the learned noise sd (output units) is at least this: a
	 * floor measured from repeated samples of the same input.
	 */
	double noise_floor_sd;
	/*
	 * Context (see struct psd_gp_hyper): nctx trailing inputs; with
	 * shear_prior_sd > 0 the shears are fitted under a normal prior
	 * (mean shear_prior[j], sd shear_prior_sd, unit-box units), else
	 * held at 0.
	 */
	unsigned int nctx;
	double shear_prior[PSD_GP_MAX_DIM];
	double shear_prior_sd;
	uint64_t seed; /* random starts are drawn from this */
};

/* Default bounds, 3 random starts, 200 iterations, learned noise, no
 * priors, no noise floor. */
void psd_gp_fit_opts_default(struct psd_gp_fit_opts *o);

/*
 * Create an empty GP over [0,1]^@dim (1 <= dim <= PSD_GP_MAX_DIM) with
 * default hyperparameters (len 0.3, signal 1, noise 0.01).  Turns the
 * GSL error handler off (process-wide, idempotent).
 * Returns 0, -EINVAL or -ENOMEM.
 */
int psd_gp_create(unsigned int dim, struct psd_gp **out);
/* NULL is a no-op. */
void psd_gp_destroy(struct psd_gp *gp);

unsigned int psd_gp_dim(const struct psd_gp *gp);
unsigned int psd_gp_count(const struct psd_gp *gp);
/* Input @i (dim values), output and weight @i; @i < psd_gp_count(). */
const double *psd_gp_x(const struct psd_gp *gp, unsigned int i);
double psd_gp_y(const struct psd_gp *gp, unsigned int i);
double psd_gp_weight(const struct psd_gp *gp, unsigned int i);

/*
 * Add one observation; @x (dim values) is copied.  @weight >= 1 scales
 * this point's noise variance.  Returns 0, -EINVAL (non-finite value,
 * weight < 1) or -ENOMEM.
 */
int psd_gp_add(struct psd_gp *gp, const double *x, double y, double weight);
/* Multiply every current weight by @factor >= 1 (capped at
 * PSD_GP_WEIGHT_MAX).  Returns 0 or -EINVAL. */
int psd_gp_scale_weights(struct psd_gp *gp, double factor);
/* Drop all observations, keep the hyperparameters. */
void psd_gp_clear(struct psd_gp *gp);

void psd_gp_hyper_get(const struct psd_gp *gp, struct psd_gp_hyper *h);
/* Fix the hyperparameters (all > 0, finite).  Returns 0 or -EINVAL. */
int psd_gp_hyper_set(struct psd_gp *gp, const struct psd_gp_hyper *h);

/*
 * Fit the hyperparameters by maximizing the log marginal likelihood
 * (Nelder-Mead from the current hyper, clamped into the bounds, plus
 * o->starts random starts); each stays inside its bounds by a
 * log-sigmoid mapping.  On 0 the GP holds the best hyper found; on error
 * the previous hyper is kept.  Returns 0, -EINVAL, -ENOMEM or -EDOM (no
 * start gave a positive-definite kernel matrix).
 */
int psd_gp_fit(struct psd_gp *gp, const struct psd_gp_fit_opts *o);

/*
 * Factor the kernel matrix for the current data and hyper (done lazily by
 * psd_gp_predict and psd_gp_log_marginal too).  A matrix that is not
 * positive definite gets a diagonal jitter and one retry.
 * Returns 0, -EDOM or -ENOMEM.
 */
int psd_gp_update(struct psd_gp *gp);

/*
 * Posterior mean and variance of the latent function at @x, in output
 * units.  With no data: mean 0, variance signal_var.  Returns 0 or the
 * psd_gp_update() error.
 */
int psd_gp_predict(struct psd_gp *gp, const double *x, double *mean,
		   double *var);

/* Log marginal likelihood of the standardized outputs. */
int psd_gp_log_marginal(struct psd_gp *gp, double *lml);

/* Output standardization in use (mean 0, sd 1 with no data). */
void psd_gp_output_scale(const struct psd_gp *gp, double *mean, double *sd);

/* The kernel k(a, b) for @h over @dim dimensions. */
double psd_gp_kernel(const struct psd_gp_hyper *h, unsigned int dim,
		     const double *a, const double *b);

/* Map a GSL status to 0 or a negative errno. */
int psd_gp_gsl_status(int status);

#endif
