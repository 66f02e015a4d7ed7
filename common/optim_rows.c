// SPDX-License-Identifier: MIT
/*
 * Row-wise (lazy) entry points of the updater (common/updater.h) for
 * row-sparse keys: the installed optimizer updates one row with that
 * row's own states and update count, so rows not pushed in a step keep
 * their weights and states (MXNet's lazy_update for row_sparse
 * gradients).  The rules themselves are optim_rules.c's psd_opt_step().
 */
#include "optim.h"
#include "updater.h"

static bool rows_float(uint8_t dtype)
{
	return dtype == PSCHED_F32 || dtype == PSCHED_F64 ||
	       dtype == PSCHED_F16 || dtype == PSCHED_BF16;
}

bool psd_upd_rows_covers(struct psd_updater *u, uint8_t dtype, unsigned *nstate)
{
	*nstate = 0;
	switch (atomic_load(&u->kind)) {
	case PSD_UPD_CUSTOM:
		return true;
	case PSD_UPD_OPT:
		pthread_mutex_lock(&u->lock);
		*nstate = u->nstate;
		pthread_mutex_unlock(&u->lock);
		return rows_float(dtype);
	default:
		return false;
	}
}

void psd_upd_rows_apply(struct psd_updater *u, uint64_t key, uint8_t dtype,
			uint64_t row, uint64_t width, void *w, const void *g,
			double *state, uint32_t *t)
{
	unsigned es = psched_dtype_size((enum psched_dtype)dtype);
	double s[PSD_OPT_MAX_STATE] = { 0 };
	const double *mult;
	struct psd_opt_params p;
	uint64_t i;
	unsigned k, ns;
	double wv;

	pthread_mutex_lock(&u->lock);
	if (atomic_load(&u->kind) == PSD_UPD_CUSTOM) {
		u->fn(key, (enum psched_dtype)dtype, row * width * es, w, g,
		      width * es, u->arg);
		pthread_mutex_unlock(&u->lock);
		return;
	}
	mult = psd_map_get(&u->mults, key);
	psd_opt_params_of(&u->opt, mult ? mult[0] : 1.0, mult ? mult[1] : 1.0,
			  &p);
	ns = u->nstate;
	if (*t < UINT32_MAX)
		(*t)++;
	for (i = 0; i < width; i++) {
		for (k = 0; k < ns; k++)
			s[k] = state[k * width + i];
		wv = psd_upd_load(dtype, w, i);
		psd_opt_step(&p, &wv, psd_upd_load(dtype, g, i), s, *t);
		for (k = 0; k < ns; k++)
			state[k * width + i] = s[k];
		psd_upd_store(dtype, w, i, wv);
	}
	pthread_mutex_unlock(&u->lock);
}
