// SPDX-License-Identifier: MIT
/*
 * struct psched_optimizer <-> its ServerCommand form (proto/psched.proto
 * message Optimizer), for worker/command.c and server/command.c.
 */
#include <stdint.h>

#include "internal.h"
#include "optim.h"
#include "psched.pb-c.h"

void psd_opt_to_proto(const struct psched_optimizer *o, Psched__Optimizer *po)
{
	psched__optimizer__init(po);
	po->name = (char *)(uintptr_t)(o->name ? o->name : "");
	po->learning_rate = o->learning_rate;
	po->momentum = o->momentum;
	po->wd = o->wd;
	po->rescale_grad = o->rescale_grad;
	po->clip_gradient = o->clip_gradient;
	po->beta1 = o->beta1;
	po->beta2 = o->beta2;
	po->epsilon = o->epsilon;
	po->gamma1 = o->gamma1;
	po->gamma2 = o->gamma2;
	po->wd_lh = o->wd_lh;
	po->clip_weights = o->clip_weights;
	po->centered = o->centered != 0;
	po->correct_bias = o->correct_bias != 0;
	po->multi_precision = o->multi_precision != 0;
	po->n_mult_keys = o->nmult;
	po->mult_keys = (uint64_t *)(uintptr_t)o->mult_keys;
	po->n_lr_mult = o->lr_mult ? o->nmult : 0;
	po->lr_mult = (double *)(uintptr_t)o->lr_mult;
	po->n_wd_mult = o->wd_mult ? o->nmult : 0;
	po->wd_mult = (double *)(uintptr_t)o->wd_mult;
}

int psd_opt_from_proto(const Psched__Optimizer *po, struct psched_optimizer *o)
{
	if ((po->n_lr_mult && po->n_lr_mult != po->n_mult_keys) ||
	    (po->n_wd_mult && po->n_wd_mult != po->n_mult_keys))
		return psd_set_errmsg(-EINVAL,
				      "optimizer: %zu keys but %zu lr_mult "
				      "and %zu wd_mult values",
				      po->n_mult_keys, po->n_lr_mult,
				      po->n_wd_mult);
	o->name = po->name;
	o->learning_rate = po->learning_rate;
	o->momentum = po->momentum;
	o->wd = po->wd;
	o->rescale_grad = po->rescale_grad;
	o->clip_gradient = po->clip_gradient;
	o->beta1 = po->beta1;
	o->beta2 = po->beta2;
	o->epsilon = po->epsilon;
	o->gamma1 = po->gamma1;
	o->gamma2 = po->gamma2;
	o->wd_lh = po->wd_lh;
	o->clip_weights = po->clip_weights;
	o->centered = po->centered;
	o->correct_bias = po->correct_bias;
	o->multi_precision = po->multi_precision;
	o->nmult = po->n_mult_keys;
	o->mult_keys = po->mult_keys;
	o->lr_mult = po->n_lr_mult ? po->lr_mult : NULL;
	o->wd_mult = po->n_wd_mult ? po->wd_mult : NULL;
	return 0;
}
