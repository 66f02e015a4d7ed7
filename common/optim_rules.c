// SPDX-License-Identifier: MIT
/*
 * Optimizer rules (common/optim.h): names, defaults and checks of struct
 * psched_optimizer, and the per-element update of every optimizer, in
 * double precision (float keys round the result once per step).
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "optim.h"

static const char *const opt_names[PSD_OPT_COUNT] = {
	[PSD_OPT_SGD] = "sgd",	       [PSD_OPT_NAG] = "nag",
	[PSD_OPT_ADAM] = "adam",       [PSD_OPT_ADAMW] = "adamw",
	[PSD_OPT_RMSPROP] = "rmsprop", [PSD_OPT_ADAGRAD] = "adagrad",
	[PSD_OPT_SIGNUM] = "signum",   [PSD_OPT_TEST] = "test",
};

#define OPT_NAME_LIST "sgd, nag, adam, adamw, rmsprop, adagrad, signum, test"

int psd_opt_kind_of(const char *name)
{
	int i;

	if (!name)
		return -1;
	for (i = 0; i < PSD_OPT_COUNT; i++)
		if (!strcmp(name, opt_names[i]))
			return i;
	return -1;
}

const char *psd_opt_name(enum psd_opt_kind kind)
{
	return (unsigned)kind < PSD_OPT_COUNT ? opt_names[kind] : "?";
}

void psched_optimizer_init(struct psched_optimizer *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->name = "sgd";
	opt->learning_rate = 0.01;
	opt->rescale_grad = 1.0;
	opt->beta1 = 0.9;
	opt->beta2 = 0.999;
	opt->epsilon = 1e-8;
	opt->gamma1 = 0.9;
	opt->gamma2 = 0.9;
	opt->correct_bias = 1;
}

int psched_optimizer_defaults(struct psched_optimizer *opt, const char *name)
{
	int kind = psd_opt_kind_of(name);

	if (kind < 0)
		return psd_set_errmsg(-EINVAL,
				      "optimizer '%.32s' is not supported "
				      "(supported: " OPT_NAME_LIST ")",
				      name ? name : "(null)");
	psched_optimizer_init(opt);
	opt->name = opt_names[kind];
	switch (kind) {
	case PSD_OPT_ADAM:
	case PSD_OPT_ADAMW:
	case PSD_OPT_RMSPROP:
		opt->learning_rate = 0.001;
		break;
	case PSD_OPT_ADAGRAD:
		opt->epsilon = 1e-6;
		break;
	case PSD_OPT_SIGNUM:
		opt->momentum = 0.9;
		break;
	default:
		break;
	}
	return 0;
}

static int opt_bad(const char *opt, const char *field, double v,
		   const char *want)
{
	return psd_set_errmsg(-EINVAL, "optimizer %s: %s %g is not %s", opt,
			      field, v, want);
}

static bool opt_unit(double v)
{
	return isfinite(v) && v >= 0 && v < 1;
}

static int opt_check_mults(const struct psched_optimizer *o, const char *nm)
{
	size_t i;

	if (o->nmult && !o->mult_keys)
		return psd_set_errmsg(-EINVAL,
				      "optimizer %s: %zu multipliers but no "
				      "mult_keys",
				      nm, o->nmult);
	for (i = 0; i < o->nmult; i++) {
		if (o->lr_mult &&
		    (!isfinite(o->lr_mult[i]) || o->lr_mult[i] < 0))
			return psd_set_errmsg(
				-EINVAL,
				"optimizer %s: lr_mult %g of "
				"key %llu is not a finite "
				"number >= 0",
				nm, o->lr_mult[i],
				(unsigned long long)o->mult_keys[i]);
		if (o->wd_mult &&
		    (!isfinite(o->wd_mult[i]) || o->wd_mult[i] < 0))
			return psd_set_errmsg(
				-EINVAL,
				"optimizer %s: wd_mult %g of "
				"key %llu is not a finite "
				"number >= 0",
				nm, o->wd_mult[i],
				(unsigned long long)o->mult_keys[i]);
	}
	return 0;
}

/* The fields only some optimizers read. */
static int opt_check_own(const struct psched_optimizer *o, int kind,
			 const char *nm)
{
	switch (kind) {
	case PSD_OPT_SGD:
	case PSD_OPT_NAG:
	case PSD_OPT_SIGNUM:
		if (!opt_unit(o->momentum))
			return opt_bad(nm, "momentum", o->momentum,
				       "in [0, 1)");
		if (kind == PSD_OPT_SIGNUM &&
		    (!isfinite(o->wd_lh) || o->wd_lh < 0))
			return opt_bad(nm, "wd_lh", o->wd_lh,
				       "a finite number >= 0");
		return 0;
	case PSD_OPT_ADAM:
	case PSD_OPT_ADAMW:
		if (!opt_unit(o->beta1))
			return opt_bad(nm, "beta1", o->beta1, "in [0, 1)");
		if (!opt_unit(o->beta2))
			return opt_bad(nm, "beta2", o->beta2, "in [0, 1)");
		break;
	case PSD_OPT_RMSPROP:
		if (!opt_unit(o->gamma1))
			return opt_bad(nm, "gamma1", o->gamma1, "in [0, 1)");
		if (!opt_unit(o->gamma2))
			return opt_bad(nm, "gamma2", o->gamma2, "in [0, 1)");
		if (isnan(o->clip_weights))
			return psd_set_errmsg(-EINVAL,
					      "optimizer %s: clip_weights is "
					      "NaN",
					      nm);
		break;
	case PSD_OPT_TEST:
		return 0;
	default:
		break;
	}
	if (!isfinite(o->epsilon) || o->epsilon <= 0)
		return opt_bad(nm, "epsilon", o->epsilon,
			       "a finite number > 0");
	return 0;
}

int psched_optimizer_check(const struct psched_optimizer *o)
{
	const char *nm;
	int kind, ret;

	if (!o)
		return psd_set_errmsg(-EINVAL, "optimizer: NULL");
	if (!o->name || !*o->name || !strcmp(o->name, "none"))
		return 0;
	kind = psd_opt_kind_of(o->name);
	if (kind < 0)
		return psd_set_errmsg(-EINVAL,
				      "optimizer '%.32s' is not supported "
				      "(supported: " OPT_NAME_LIST ")",
				      o->name);
	nm = opt_names[kind];
	/* MXNet takes any learning rate (a negative one ascends). */
	if (!isfinite(o->learning_rate))
		return opt_bad(nm, "learning_rate", o->learning_rate,
			       "a finite number");
	if (!isfinite(o->wd) || o->wd < 0)
		return opt_bad(nm, "wd", o->wd, "a finite number >= 0");
	if (!isfinite(o->rescale_grad) || o->rescale_grad <= 0)
		return opt_bad(nm, "rescale_grad", o->rescale_grad,
			       "a finite number > 0");
	if (isnan(o->clip_gradient))
		return psd_set_errmsg(-EINVAL,
				      "optimizer %s: clip_gradient is NaN", nm);
	ret = opt_check_own(o, kind, nm);
	if (ret)
		return ret;
	return opt_check_mults(o, nm);
}

unsigned psd_opt_nstate(const struct psched_optimizer *o)
{
	switch (psd_opt_kind_of(o->name)) {
	case PSD_OPT_SGD:
	case PSD_OPT_NAG:
	case PSD_OPT_SIGNUM:
		return o->momentum > 0 ? 1 : 0;
	case PSD_OPT_ADAM:
	case PSD_OPT_ADAMW:
		return 2;
	case PSD_OPT_RMSPROP:
		return o->centered ? 3 : 1;
	case PSD_OPT_ADAGRAD:
		return 1;
	default:
		return 0;
	}
}

void psd_opt_params_of(const struct psched_optimizer *o, double lr_mult,
		       double wd_mult, struct psd_opt_params *p)
{
	p->kind = (enum psd_opt_kind)psd_opt_kind_of(o->name);
	p->lr = o->learning_rate * lr_mult;
	p->wd = o->wd * wd_mult;
	p->rescale = o->rescale_grad;
	p->clip = o->clip_gradient;
	p->momentum = o->momentum;
	p->beta1 = o->beta1;
	p->beta2 = o->beta2;
	p->eps = o->epsilon;
	p->gamma1 = o->gamma1;
	p->gamma2 = o->gamma2;
	p->wd_lh = o->wd_lh;
	p->clip_weights = o->clip_weights;
	p->centered = o->centered != 0;
	p->correct_bias = p->kind == PSD_OPT_ADAM || o->correct_bias != 0;
}

static double opt_sign(double v)
{
	return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0);
}

static void opt_adam(const struct psd_opt_params *p, double *w, double g,
		     double *s, uint32_t t)
{
	double c = 1.0;

	if (p->kind == PSD_OPT_ADAM)
		g += p->wd * *w;
	s[0] = p->beta1 * s[0] + (1 - p->beta1) * g;
	s[1] = p->beta2 * s[1] + (1 - p->beta2) * g * g;
	if (p->correct_bias)
		c = sqrt(1 - pow(p->beta2, t)) / (1 - pow(p->beta1, t));
	if (p->kind == PSD_OPT_ADAM)
		*w -= c * p->lr * s[0] / (sqrt(s[1]) + p->eps);
	else
		*w -= p->lr * (c * s[0] / (sqrt(s[1]) + p->eps) + p->wd * *w);
}

static void opt_rmsprop(const struct psd_opt_params *p, double *w, double g,
			double *s)
{
	g += p->wd * *w;
	s[0] = p->gamma1 * s[0] + (1 - p->gamma1) * g * g;
	if (!p->centered) {
		*w -= p->lr * g / sqrt(s[0] + p->eps);
	} else {
		s[1] = p->gamma1 * s[1] + (1 - p->gamma1) * g;
		s[2] = p->gamma2 * s[2] -
		       p->lr * g / sqrt(s[0] - s[1] * s[1] + p->eps);
		*w += s[2];
	}
	if (p->clip_weights > 0)
		*w = fmin(fmax(*w, -p->clip_weights), p->clip_weights);
}

void psd_opt_step(const struct psd_opt_params *p, double *w, double g,
		  double *s, uint32_t t)
{
	g *= p->rescale;
	if (p->kind == PSD_OPT_TEST) { /* MXNet 1.x: no lr, wd or clipping */
		*w += g;
		return;
	}
	if (p->clip > 0)
		g = fmin(fmax(g, -p->clip), p->clip);
	switch (p->kind) {
	case PSD_OPT_SGD:
		if (p->momentum > 0) {
			s[0] = p->momentum * s[0] - p->lr * (g + p->wd * *w);
			*w += s[0];
		} else {
			*w -= p->lr * (g + p->wd * *w);
		}
		break;
	case PSD_OPT_NAG:
		g += p->wd * *w;
		if (p->momentum > 0) {
			s[0] = p->momentum * s[0] + p->lr * g;
			*w -= p->momentum * s[0] + p->lr * g;
		} else {
			*w -= p->lr * g;
		}
		break;
	case PSD_OPT_ADAM:
	case PSD_OPT_ADAMW:
		opt_adam(p, w, g, s, t);
		break;
	case PSD_OPT_RMSPROP:
		opt_rmsprop(p, w, g, s);
		break;
	case PSD_OPT_ADAGRAD:
		g += p->wd * *w;
		s[0] += g * g;
		*w -= p->lr * g / (sqrt(s[0]) + p->eps);
		break;
	case PSD_OPT_SIGNUM:
		g += p->wd * *w;
		if (p->momentum > 0) {
			s[0] = p->momentum * s[0] + (1 - p->momentum) * g;
			g = s[0];
		}
		*w = (1 - p->lr * p->wd_lh) * *w - p->lr * opt_sign(g);
		break;
	default:
		break;
	}
}
