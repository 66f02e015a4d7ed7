// SPDX-License-Identifier: MIT
/*
 * Updaters (common/updater.h): the installed optimizer (rules in
 * optim_rules.c) with its states per key and byte range, per-key
 * multipliers, and the custom-updater hook.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "updater.h"

/* The states of one key's byte range: nstate arrays (float64 for
 * float64 keys, float32 else), the float32 master weights
 * (multi_precision on a 16-bit key) and the update count of every
 * element (Adam's t; 0 = the master copy is not made yet). */
struct psd_upd_state {
	struct psd_upd_state *next; /* other ranges or dtypes of the key */
	uint64_t range_off;
	uint64_t range_len;
	uint8_t dtype;
	uint64_t n;
	unsigned nstate;
	bool master;
	void *arr[PSD_OPT_MAX_STATE + 1]; /* states, then master */
	uint32_t *cnt;
};

void psd_upd_init(struct psd_updater *u)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
	atomic_init(&u->kind, PSD_UPD_NONE);
	psd_map_init(&u->states);
	psd_map_init(&u->mults);
}

static void upd_state_free(void *val, void *arg)
{
	struct psd_upd_state *st = val;
	struct psd_upd_state *next;
	unsigned i;

	(void)arg;
	for (; st; st = next) {
		next = st->next;
		for (i = 0; i <= PSD_OPT_MAX_STATE; i++)
			free(st->arr[i]);
		free(st->cnt);
		free(st);
	}
}

static void upd_mult_free(void *val, void *arg)
{
	(void)arg;
	free(val);
}

/* Lock held. */
static void upd_drop_states(struct psd_updater *u)
{
	psd_map_clear(&u->states, upd_state_free, NULL);
}

void psd_upd_fini(struct psd_updater *u)
{
	upd_drop_states(u);
	psd_map_clear(&u->mults, upd_mult_free, NULL);
	psd_map_fini(&u->states);
	psd_map_fini(&u->mults);
	pthread_mutex_destroy(&u->lock);
}

static bool upd_is_half(uint8_t dtype)
{
	return dtype == PSCHED_F16 || dtype == PSCHED_BF16;
}

static bool upd_float_dtype(uint8_t dtype)
{
	return dtype == PSCHED_F32 || dtype == PSCHED_F64 || upd_is_half(dtype);
}

/* The states of @a and @b have the same meaning and layout. */
static bool upd_same_states(const struct psched_optimizer *a,
			    const struct psched_optimizer *b)
{
	return !strcmp(a->name, b->name) &&
	       psd_opt_nstate(a) == psd_opt_nstate(b) &&
	       !a->multi_precision == !b->multi_precision;
}

/* The multipliers of @opt as a map key -> double[2]. */
static int upd_mults_build(const struct psched_optimizer *opt,
			   struct psd_map *m)
{
	double *v;
	size_t i;

	for (i = 0; i < opt->nmult; i++) {
		v = psd_map_get(m, opt->mult_keys[i]);
		if (!v) {
			v = malloc(2 * sizeof(*v));
			if (!v || psd_map_put(m, opt->mult_keys[i], v)) {
				free(v);
				return psd_set_errmsg(-ENOMEM,
						      "optimizer: no memory "
						      "for %zu multipliers",
						      opt->nmult);
			}
		}
		v[0] = opt->lr_mult ? opt->lr_mult[i] : 1.0;
		v[1] = opt->wd_mult ? opt->wd_mult[i] : 1.0;
	}
	return 0;
}

int psd_upd_set_optimizer(struct psd_updater *u,
			  const struct psched_optimizer *opt)
{
	struct psd_map mults;
	int ret;

	if (!opt || !opt->name || !*opt->name || !strcmp(opt->name, "none")) {
		pthread_mutex_lock(&u->lock);
		atomic_store(&u->kind, PSD_UPD_NONE);
		upd_drop_states(u);
		psd_map_clear(&u->mults, upd_mult_free, NULL);
		pthread_mutex_unlock(&u->lock);
		return 0;
	}
	ret = psched_optimizer_check(opt);
	if (ret)
		return ret;
	psd_map_init(&mults);
	ret = upd_mults_build(opt, &mults);
	if (ret) {
		psd_map_clear(&mults, upd_mult_free, NULL);
		psd_map_fini(&mults);
		return ret;
	}
	pthread_mutex_lock(&u->lock);
	if (atomic_load(&u->kind) != PSD_UPD_OPT ||
	    !upd_same_states(&u->opt, opt))
		upd_drop_states(u);
	u->opt = *opt;
	snprintf(u->name, sizeof(u->name), "%s", opt->name);
	u->opt.name = u->name;
	u->opt.nmult = 0;
	u->opt.mult_keys = NULL;
	u->opt.lr_mult = NULL;
	u->opt.wd_mult = NULL;
	u->nstate = psd_opt_nstate(opt);
	psd_map_clear(&u->mults, upd_mult_free, NULL);
	psd_map_fini(&u->mults);
	u->mults = mults;
	atomic_store(&u->kind, PSD_UPD_OPT);
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

bool psd_upd_covers(struct psd_updater *u, uint8_t dtype)
{
	switch (atomic_load(&u->kind)) {
	case PSD_UPD_CUSTOM:
		return true;
	case PSD_UPD_OPT:
		return upd_float_dtype(dtype);
	default:
		return false;
	}
}

static size_t upd_state_esize(uint8_t dtype)
{
	return dtype == PSCHED_F64 ? sizeof(double) : sizeof(float);
}

/* Lock held: does @dtype need a state record under the installed
 * optimizer? */
static bool upd_needs_state(const struct psd_updater *u, uint8_t dtype,
			    bool *master)
{
	int kind = psd_opt_kind_of(u->opt.name);

	*master = u->opt.multi_precision && upd_is_half(dtype);
	return u->nstate || *master || kind == PSD_OPT_ADAM ||
	       kind == PSD_OPT_ADAMW;
}

/* Lock held: a zeroed state for @key's range, linked in. */
static struct psd_upd_state *upd_state_new(struct psd_updater *u, uint64_t key,
					   uint8_t dtype, uint64_t range_off,
					   uint64_t range_len, bool master)
{
	unsigned es = psched_dtype_size((enum psched_dtype)dtype);
	struct psd_upd_state *head = psd_map_get(&u->states, key);
	struct psd_upd_state *st = calloc(1, sizeof(*st));
	size_t n = (size_t)(range_len / es);
	unsigned i;

	if (!st)
		return NULL;
	st->range_off = range_off;
	st->range_len = range_len;
	st->dtype = dtype;
	st->n = n;
	st->nstate = u->nstate;
	st->master = master;
	for (i = 0; i < st->nstate + master; i++) {
		st->arr[i] = calloc(n ? n : 1, i < st->nstate
						       ? upd_state_esize(dtype)
						       : sizeof(float));
		if (!st->arr[i])
			goto err_free;
	}
	st->cnt = calloc(n ? n : 1, sizeof(*st->cnt));
	if (!st->cnt)
		goto err_free;
	if (head) {
		/* The map keeps the head; the new state goes second. */
		st->next = head->next;
		head->next = st;
	} else if (psd_map_put(&u->states, key, st)) {
		goto err_free;
	}
	return st;

err_free:
	upd_state_free(st, NULL);
	return NULL;
}

/* Lock held: the state of @key's range, or NULL. */
static struct psd_upd_state *upd_state_find(struct psd_updater *u, uint64_t key,
					    uint8_t dtype, uint64_t range_off,
					    uint64_t range_len)
{
	struct psd_upd_state *st;

	for (st = psd_map_get(&u->states, key); st; st = st->next)
		if (st->range_off == range_off && st->range_len == range_len &&
		    st->dtype == dtype)
			return st;
	return NULL;
}

/* Lock held: apply the optimizer to @n elements; state element @i0 is
 * the first one's (@st NULL: no state kept). */
static void upd_run(struct psd_updater *u, const struct psd_opt_params *p,
		    uint8_t dtype, void *stored, const void *merged, size_t n,
		    struct psd_upd_state *st, size_t i0)
{
	uint8_t sd = dtype == PSCHED_F64 ? PSCHED_F64 : PSCHED_F32;
	double s[PSD_OPT_MAX_STATE] = { 0 };
	double w, g;
	uint32_t t;
	size_t i, j;
	unsigned k;

	for (i = 0; i < n; i++) {
		j = i0 + i;
		w = psd_upd_load(dtype, stored, i);
		g = psd_upd_load(dtype, merged, i);
		t = 1;
		if (st) {
			if (st->master && st->cnt[j] == 0)
				((float *)st->arr[st->nstate])[j] = (float)w;
			if (st->master)
				w = ((float *)st->arr[st->nstate])[j];
			for (k = 0; k < st->nstate; k++)
				s[k] = psd_upd_load(sd, st->arr[k], j);
			if (st->cnt[j] < UINT32_MAX)
				st->cnt[j]++;
			t = st->cnt[j];
		}
		psd_opt_step(p, &w, g, s, t);
		if (st) {
			for (k = 0; k < st->nstate; k++)
				psd_upd_store(sd, st->arr[k], j, s[k]);
			if (st->master)
				((float *)st->arr[st->nstate])[j] = (float)w;
		}
		psd_upd_store(dtype, stored, i, w);
	}
	(void)u;
}

/* Lock held: run the optimizer on one piece of a key. */
static void upd_apply_opt(struct psd_updater *u, uint64_t key, uint8_t dtype,
			  uint64_t range_off, uint64_t range_len, uint64_t off,
			  void *stored, const void *merged, uint64_t nbytes)
{
	unsigned es = psched_dtype_size((enum psched_dtype)dtype);
	const double *mult = psd_map_get(&u->mults, key);
	struct psd_upd_state *st = NULL;
	struct psd_opt_params p;
	bool master;

	psd_opt_params_of(&u->opt, mult ? mult[0] : 1.0, mult ? mult[1] : 1.0,
			  &p);
	if (upd_needs_state(u, dtype, &master)) {
		st = upd_state_find(u, key, dtype, range_off, range_len);
		if (!st)
			st = upd_state_new(u, key, dtype, range_off, range_len,
					   master);
		if (!st) {
			psd_err("%s: no memory for the state of key %llu "
				"(%llu bytes): step skipped",
				u->name, (unsigned long long)key,
				(unsigned long long)range_len);
			return;
		}
	}
	upd_run(u, &p, dtype, stored, merged, (size_t)(nbytes / es), st,
		(size_t)((off - range_off) / es));
}

bool psd_upd_apply(struct psd_updater *u, uint64_t key, uint8_t dtype,
		   uint64_t range_off, uint64_t range_len, uint64_t off,
		   void *stored, const void *merged, uint64_t nbytes)
{
	bool done = true;

	if (!psd_upd_active(u))
		return false;
	pthread_mutex_lock(&u->lock);
	switch (atomic_load(&u->kind)) {
	case PSD_UPD_CUSTOM:
		u->fn(key, (enum psched_dtype)dtype, off, stored, merged,
		      nbytes, u->arg);
		break;
	case PSD_UPD_OPT:
		if (!upd_float_dtype(dtype)) {
			done = false;
			break;
		}
		upd_apply_opt(u, key, dtype, range_off, range_len, off, stored,
			      merged, nbytes);
		break;
	default:
		done = false;
		break;
	}
	pthread_mutex_unlock(&u->lock);
	return done;
}

/* Lock held: bytes of the records of the states in @chain. */
static uint64_t upd_chain_size(const struct psd_upd_state *st)
{
	uint64_t sz = 0;

	for (; st; st = st->next)
		sz += psd_opt_rec_size(st->n, st->nstate, st->master,
				       (unsigned)upd_state_esize(st->dtype));
	return sz;
}

/* Lock held: write the records of key @key's states (@st, a chain) at
 * @w; returns the end. */
static uint8_t *upd_chain_put(const struct psd_upd_state *st, uint64_t key,
			      psd_upd_range_fn *range_of, void *arg, uint8_t *w)
{
	uint64_t off, rlen;
	uint8_t dtype;
	struct psd_opt_rec r;
	size_t es, k, b;

	for (; st; st = st->next) {
		es = upd_state_esize(st->dtype);
		memset(&r, 0, sizeof(r));
		r.key = key;
		r.off = st->range_off;
		r.len = st->range_len;
		if (!range_of(arg, key, &dtype, &r.total, &off, &rlen))
			r.total = 0; /* unknown: not checked on load */
		r.dtype = st->dtype;
		r.nstate = (uint8_t)st->nstate;
		r.master = st->master;
		r.esize = (uint8_t)es;
		psd_opt_rec_put_hdr(w, &r);
		w += PSD_OPT_REC_HDR;
		for (k = 0; k < st->nstate + st->master; k++) {
			b = (size_t)st->n *
			    (k < st->nstate ? es : sizeof(float));
			memcpy(w, st->arr[k], b);
			w += b;
		}
		memcpy(w, st->cnt, (size_t)st->n * sizeof(*st->cnt));
		w += (size_t)st->n * sizeof(*st->cnt);
	}
	return w;
}

/* Dump the states of every key (@one NULL) or of key *@one. */
static int upd_dump(struct psd_updater *u, const uint64_t *one,
		    psd_upd_range_fn *range_of, void *arg, uint8_t **buf,
		    size_t *len, char name[16])
{
	struct psd_upd_state *st;
	uint64_t key, sz = 0;
	size_t pos = 0;
	uint8_t *out, *w;

	pthread_mutex_lock(&u->lock);
	snprintf(name, 16, "%s",
		 atomic_load(&u->kind) == PSD_UPD_OPT ? u->name : "");
	if (one)
		sz = upd_chain_size(psd_map_get(&u->states, *one));
	else
		while ((st = psd_map_next(&u->states, &pos, NULL)))
			sz += upd_chain_size(st);
	out = malloc(sz ? (size_t)sz : 1);
	if (!out) {
		pthread_mutex_unlock(&u->lock);
		return psd_set_errmsg(-ENOMEM,
				      "no memory for %llu bytes of optimizer "
				      "states",
				      (unsigned long long)sz);
	}
	w = out;
	pos = 0;
	if (one)
		w = upd_chain_put(psd_map_get(&u->states, *one), *one, range_of,
				  arg, w);
	else
		while ((st = psd_map_next(&u->states, &pos, &key)))
			w = upd_chain_put(st, key, range_of, arg, w);
	pthread_mutex_unlock(&u->lock);
	*buf = out;
	*len = (size_t)sz;
	return 0;
}

int psd_upd_states_dump(struct psd_updater *u, psd_upd_range_fn *range_of,
			void *arg, uint8_t **buf, size_t *len, char name[16])
{
	return upd_dump(u, NULL, range_of, arg, buf, len, name);
}

int psd_upd_key_states_dump(struct psd_updater *u, uint64_t key,
			    psd_upd_range_fn *range_of, void *arg,
			    uint8_t **buf, size_t *len, char name[16])
{
	return upd_dump(u, &key, range_of, arg, buf, len, name);
}

/* Lock held: check one parsed record against this holder. */
static int upd_check_rec(struct psd_updater *u, const struct psd_opt_rec *r,
			 psd_upd_range_fn *range_of, void *arg, bool all_keys)
{
	uint64_t total, off, len;
	uint8_t dtype;
	bool master = u->opt.multi_precision && upd_is_half(r->dtype);

	if (!range_of(arg, r->key, &dtype, &total, &off, &len) && !all_keys)
		return 0; /* another holder's key */
	if (!range_of(arg, r->key, &dtype, &total, &off, &len))
		return psd_set_errmsg(-EINVAL,
				      "optimizer states: key %llu is not "
				      "initialised here",
				      (unsigned long long)r->key);
	if (dtype != r->dtype || (r->total && total != r->total))
		return psd_set_errmsg(-EINVAL,
				      "optimizer states: key %llu was saved as "
				      "%llu bytes of %s, but is %llu bytes of "
				      "%s",
				      (unsigned long long)r->key,
				      (unsigned long long)r->total,
				      psched_dtype_name(r->dtype),
				      (unsigned long long)total,
				      psched_dtype_name(dtype));
	if (r->nstate != u->nstate || r->master != master ||
	    r->esize != upd_state_esize(r->dtype))
		return psd_set_errmsg(-EINVAL,
				      "optimizer states: key %llu has %u state "
				      "arrays%s, but %s keeps %u%s (another "
				      "momentum, centered or multi_precision "
				      "setting?)",
				      (unsigned long long)r->key, r->nstate,
				      r->master ? " and master weights" : "",
				      u->name, u->nstate,
				      master ? " and master weights" : "");
	return 0;
}

/* Lock held: copy the overlap of @r with this holder's range. */
static int upd_load_rec(struct psd_updater *u, const struct psd_opt_rec *r,
			psd_upd_range_fn *range_of, void *arg)
{
	unsigned es = psched_dtype_size((enum psched_dtype)r->dtype);
	uint64_t total, off, len, lo, hi;
	struct psd_upd_state *st;
	size_t i0, j0, cnt, b;
	uint8_t dtype;
	unsigned k;

	if (!range_of(arg, r->key, &dtype, &total, &off, &len))
		return 0;
	lo = r->off > off ? r->off : off;
	hi = r->off + r->len < off + len ? r->off + r->len : off + len;
	if (lo >= hi)
		return 0;
	st = upd_state_find(u, r->key, r->dtype, off, len);
	if (!st)
		st = upd_state_new(u, r->key, r->dtype, off, len, r->master);
	if (!st)
		return psd_set_errmsg(-ENOMEM,
				      "optimizer states: no memory for key "
				      "%llu",
				      (unsigned long long)r->key);
	i0 = (size_t)((lo - off) / es);	   /* in the state */
	j0 = (size_t)((lo - r->off) / es); /* in the record */
	cnt = (size_t)((hi - lo) / es);
	for (k = 0; k < st->nstate + st->master; k++) {
		b = k < st->nstate ? r->esize : sizeof(float);
		memcpy((uint8_t *)st->arr[k] + i0 * b, r->arr[k] + j0 * b,
		       cnt * b);
	}
	memcpy(st->cnt + i0, r->cnt + j0 * sizeof(uint32_t),
	       cnt * sizeof(uint32_t));
	return 0;
}

/* Lock held: drop the states of every key @range_of knows. */
static void upd_drop_known(struct psd_updater *u, psd_upd_range_fn *range_of,
			   void *arg)
{
	uint64_t key, total, off, len;
	uint8_t dtype;
	size_t pos = 0;
	void *st;

	while ((st = psd_map_next(&u->states, &pos, &key))) {
		if (!range_of(arg, key, &dtype, &total, &off, &len))
			continue;
		psd_map_del(&u->states, key);
		upd_state_free(st, NULL);
		pos = 0; /* the map moved entries */
	}
}

static int upd_load(struct psd_updater *u, const char *name,
		    const uint8_t *recs, size_t len, psd_upd_range_fn *range_of,
		    void *arg, bool all_keys, bool merge)
{
	struct psd_opt_rec r;
	size_t pos, used;
	int ret = 0;
	int pass;

	pthread_mutex_lock(&u->lock);
	if (atomic_load(&u->kind) != PSD_UPD_OPT || strcmp(name, u->name)) {
		ret = psd_set_errmsg(
			-EINVAL,
			"optimizer states were saved under '%.16s' "
			"but the optimizer here is '%s': set "
			"that optimizer first",
			name,
			atomic_load(&u->kind) == PSD_UPD_OPT ? u->name
							     : "none");
		goto out_unlock;
	}
	/* Pass 0 checks every record; pass 1 replaces the states. */
	for (pass = 0; pass < 2 && !ret; pass++) {
		if (pass == 1 && merge)
			upd_drop_known(u, range_of, arg);
		else if (pass == 1)
			upd_drop_states(u);
		for (pos = 0; pos < len && !ret; pos += used) {
			ret = psd_opt_rec_parse(recs + pos, len - pos, &r,
						&used);
			if (ret)
				break;
			if (pass == 0)
				ret = upd_check_rec(u, &r, range_of, arg,
						    all_keys);
			else
				ret = upd_load_rec(u, &r, range_of, arg);
		}
	}
out_unlock:
	pthread_mutex_unlock(&u->lock);
	return ret;
}

int psd_upd_states_load(struct psd_updater *u, const char *name,
			const uint8_t *recs, size_t len,
			psd_upd_range_fn *range_of, void *arg, bool all_keys)
{
	return upd_load(u, name, recs, len, range_of, arg, all_keys, false);
}

int psd_upd_states_merge(struct psd_updater *u, const char *name,
			 const uint8_t *recs, size_t len,
			 psd_upd_range_fn *range_of, void *arg)
{
	return upd_load(u, name, recs, len, range_of, arg, false, true);
}
