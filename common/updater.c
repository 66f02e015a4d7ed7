// SPDX-License-Identifier: MIT
/*
 * Updaters (common/updater.h): SGD with momentum and weight decay, the
 * custom-updater hook, and float16 arithmetic (computed in float32).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "updater.h"

/* Momentum of one key's byte range, in float32 (float16, float32 keys)
 * or float64 (float64 keys), one element per stored element. */
struct psd_upd_state {
	struct psd_upd_state *next; /* other ranges or dtypes of the key */
	uint64_t range_off;
	uint64_t range_len;
	uint8_t dtype;
	void *mom;
};

void psched_optimizer_init(struct psched_optimizer *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->name = "sgd";
	opt->learning_rate = 0.01;
	opt->rescale_grad = 1.0;
}

static bool upd_name_is_none(const char *name)
{
	return !name || !*name || !strcmp(name, "none");
}

int psched_optimizer_check(const struct psched_optimizer *o)
{
	if (!o)
		return psd_set_errmsg(-EINVAL, "optimizer: NULL");
	if (upd_name_is_none(o->name))
		return 0;
	if (strcmp(o->name, "sgd"))
		return psd_set_errmsg(-EINVAL,
				      "optimizer '%.32s' is not supported "
				      "(supported: sgd)",
				      o->name);
	if (!isfinite(o->learning_rate) || o->learning_rate < 0)
		return psd_set_errmsg(-EINVAL,
				      "optimizer sgd: learning_rate %g is not "
				      "a finite number >= 0",
				      o->learning_rate);
	if (!isfinite(o->momentum) || o->momentum < 0 || o->momentum >= 1)
		return psd_set_errmsg(-EINVAL,
				      "optimizer sgd: momentum %g is not in "
				      "[0, 1)",
				      o->momentum);
	if (!isfinite(o->wd) || o->wd < 0)
		return psd_set_errmsg(-EINVAL,
				      "optimizer sgd: wd %g is not a finite "
				      "number >= 0",
				      o->wd);
	if (!isfinite(o->rescale_grad) || o->rescale_grad <= 0)
		return psd_set_errmsg(-EINVAL,
				      "optimizer sgd: rescale_grad %g is not "
				      "a finite number > 0",
				      o->rescale_grad);
	if (isnan(o->clip_gradient))
		return psd_set_errmsg(-EINVAL,
				      "optimizer sgd: clip_gradient is NaN");
	return 0;
}

void psd_upd_init(struct psd_updater *u)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
	atomic_init(&u->kind, PSD_UPD_NONE);
	psd_map_init(&u->states);
}

static void upd_state_free(void *val, void *arg)
{
	struct psd_upd_state *st = val;
	struct psd_upd_state *next;

	(void)arg;
	for (; st; st = next) {
		next = st->next;
		free(st->mom);
		free(st);
	}
}

/* Lock held. */
static void upd_drop_states(struct psd_updater *u)
{
	psd_map_clear(&u->states, upd_state_free, NULL);
}

void psd_upd_fini(struct psd_updater *u)
{
	upd_drop_states(u);
	psd_map_fini(&u->states);
	pthread_mutex_destroy(&u->lock);
}

static bool upd_same_opt(const struct psched_optimizer *a,
			 const struct psched_optimizer *b)
{
	return !strcmp(a->name, b->name) &&
	       a->learning_rate == b->learning_rate &&
	       a->momentum == b->momentum && a->wd == b->wd &&
	       a->rescale_grad == b->rescale_grad &&
	       a->clip_gradient == b->clip_gradient;
}

int psd_upd_set_optimizer(struct psd_updater *u,
			  const struct psched_optimizer *opt)
{
	int ret;

	if (!opt || upd_name_is_none(opt->name)) {
		pthread_mutex_lock(&u->lock);
		atomic_store(&u->kind, PSD_UPD_NONE);
		upd_drop_states(u);
		pthread_mutex_unlock(&u->lock);
		return 0;
	}
	ret = psched_optimizer_check(opt);
	if (ret)
		return ret;
	pthread_mutex_lock(&u->lock);
	if (atomic_load(&u->kind) == PSD_UPD_SGD &&
	    upd_same_opt(&u->opt, opt)) {
		pthread_mutex_unlock(&u->lock);
		return 0;
	}
	upd_drop_states(u);
	u->opt = *opt;
	snprintf(u->name, sizeof(u->name), "%s", opt->name);
	u->opt.name = u->name;
	atomic_store(&u->kind, PSD_UPD_SGD);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

void psd_upd_set_custom(struct psd_updater *u, psched_updater_fn *fn, void *arg)
{
	pthread_mutex_lock(&u->lock);
	upd_drop_states(u);
	u->fn = fn;
	u->arg = arg;
	atomic_store(&u->kind, fn ? PSD_UPD_CUSTOM : PSD_UPD_NONE);
	pthread_mutex_unlock(&u->lock);
}

static size_t upd_mom_esize(uint8_t dtype)
{
	return dtype == PSCHED_F64 ? sizeof(double) : sizeof(float);
}

/* Lock held: the momentum of @key's range, made (zero) on first use. */
static struct psd_upd_state *upd_state(struct psd_updater *u, uint64_t key,
				       uint8_t dtype, uint64_t range_off,
				       uint64_t range_len)
{
	unsigned es = psched_dtype_size((enum psched_dtype)dtype);
	struct psd_upd_state *head = psd_map_get(&u->states, key);
	struct psd_upd_state *st;

	for (st = head; st; st = st->next)
		if (st->range_off == range_off && st->range_len == range_len &&
		    st->dtype == dtype)
			return st;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->mom = calloc((size_t)(range_len / es), upd_mom_esize(dtype));
	if (!st->mom && range_len)
		goto err_free_st;
	st->range_off = range_off;
	st->range_len = range_len;
	st->dtype = dtype;
	if (head) {
		/* The map keeps the head; the new state goes second. */
		st->next = head->next;
		head->next = st;
	} else if (psd_map_put(&u->states, key, st)) {
		goto err_free_mom;
	}
	return st;

err_free_mom:
	free(st->mom);
err_free_st:
	free(st);
	return NULL;
}

/* The scalar rule of include/psched/kvstore.h, in float32. */
static inline float sgd_step_f(const struct psched_optimizer *o, float w,
			       float g, float *m)
{
	float lr = (float)o->learning_rate, wd = (float)o->wd;
	float clip = (float)o->clip_gradient;

	g *= (float)o->rescale_grad;
	if (clip > 0)
		g = g > clip ? clip : (g < -clip ? -clip : g);
	if (!m)
		return w - lr * (g + wd * w);
	*m = (float)o->momentum * *m - lr * (g + wd * w);
	return w + *m;
}

static inline double sgd_step_d(const struct psched_optimizer *o, double w,
				double g, double *m)
{
	g *= o->rescale_grad;
	if (o->clip_gradient > 0)
		g = g > o->clip_gradient
			    ? o->clip_gradient
			    : (g < -o->clip_gradient ? -o->clip_gradient : g);
	if (!m)
		return w - o->learning_rate * (g + o->wd * w);
	*m = o->momentum * *m - o->learning_rate * (g + o->wd * w);
	return w + *m;
}

/* Lock held.  @mom: momentum of the first element, or NULL. */
static void upd_sgd(const struct psched_optimizer *o, uint8_t dtype,
		    void *stored, const void *merged, size_t n, void *mom)
{
	size_t i;

	if (dtype == PSCHED_F32) {
		float *w = stored, *m = mom;
		const float *g = merged;

		for (i = 0; i < n; i++)
			w[i] = sgd_step_f(o, w[i], g[i], m ? &m[i] : NULL);
	} else if (dtype == PSCHED_F64) {
		double *w = stored, *m = mom;
		const double *g = merged;

		for (i = 0; i < n; i++)
			w[i] = sgd_step_d(o, w[i], g[i], m ? &m[i] : NULL);
	} else {
		uint16_t *w = stored;
		const uint16_t *g = merged;
		float *m = mom;

		for (i = 0; i < n; i++)
			w[i] = psd_f32_to_f16(sgd_step_f(
				o, psd_f16_to_f32(w[i]), psd_f16_to_f32(g[i]),
				m ? &m[i] : NULL));
	}
}

static bool upd_sgd_dtype(uint8_t dtype)
{
	return dtype == PSCHED_F32 || dtype == PSCHED_F64 ||
	       dtype == PSCHED_F16;
}

bool psd_upd_covers(struct psd_updater *u, uint8_t dtype)
{
	switch (atomic_load(&u->kind)) {
	case PSD_UPD_CUSTOM:
		return true;
	case PSD_UPD_SGD:
		return upd_sgd_dtype(dtype);
	default:
		return false;
	}
}

bool psd_upd_apply(struct psd_updater *u, uint64_t key, uint8_t dtype,
		   uint64_t range_off, uint64_t range_len, uint64_t off,
		   void *stored, const void *merged, uint64_t nbytes)
{
	unsigned es = psched_dtype_size((enum psched_dtype)dtype);
	struct psd_upd_state *st = NULL;
	bool done = true;
	char *mom = NULL;

	if (!psd_upd_active(u))
		return false;
	pthread_mutex_lock(&u->lock);
	switch (atomic_load(&u->kind)) {
	case PSD_UPD_CUSTOM:
		u->fn(key, (enum psched_dtype)dtype, off, stored, merged,
		      nbytes, u->arg);
		break;
	case PSD_UPD_SGD:
		if (!upd_sgd_dtype(dtype)) {
			done = false;
			break;
		}
		if (u->opt.momentum > 0) {
			st = upd_state(u, key, dtype, range_off, range_len);
			if (!st) {
				psd_err("sgd: no memory for the momentum of "
					"key %llu (%llu bytes): step skipped",
					(unsigned long long)key,
					(unsigned long long)range_len);
				break;
			}
			mom = (char *)st->mom +
			      (off - range_off) / es * upd_mom_esize(dtype);
		}
		upd_sgd(&u->opt, dtype, stored, merged, (size_t)(nbytes / es),
			mom);
		break;
	default:
		done = false;
		break;
	}
	pthread_mutex_unlock(&u->lock);
	return done;
}

float psd_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t x;
	float f;

	if (exp == 0x1f) {
		x = sign | 0x7f800000u | man << 13;
	} else if (exp) {
		x = sign | (exp + 112) << 23 | man << 13;
	} else if (!man) {
		x = sign;
	} else {
		/* Subnormal: shift the leading one into the implicit bit. */
		exp = 113;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		x = sign | exp << 23 | (man & 0x3ffu) << 13;
	}
	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Drop @shift low bits of @v, rounding to nearest, ties to even. */
static uint32_t f16_round_shift(uint32_t v, unsigned shift)
{
	uint32_t q = v >> shift;
	uint32_t rem = v & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);

	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

uint16_t psd_f32_to_f16(float f)
{
	uint32_t x, sign, exp, man;
	int e;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000u;
	exp = (x >> 23) & 0xffu;
	man = x & 0x7fffffu;
	if (exp == 0xff) /* inf, or NaN kept quiet and non-zero */
		return (uint16_t)(sign | 0x7c00u |
				  (man ? 0x200u | man >> 13 : 0));
	e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		/* Subnormal half: value = man' * 2^-24. */
		return (uint16_t)(sign | f16_round_shift(man | 0x800000u,
							 (unsigned)(14 - e)));
	}
	/* A carry out of the mantissa bumps the exponent, up to inf. */
	return (uint16_t)(sign | f16_round_shift((uint32_t)e << 23 | man, 13));
}

void psd_f16_add(uint16_t *dst, const uint16_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = psd_f32_to_f16(psd_f16_to_f32(dst[i]) +
					psd_f16_to_f32(src[i]));
}
