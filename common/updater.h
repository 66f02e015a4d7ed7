/* SPDX-License-Identifier: MIT */
/*
 * Updaters: how an aggregate is folded into a stored value (on a server,
 * or in process for a "local" KVStore).  Default: none (the caller keeps
 * its own rule: sync replaces, async adds).  Else an optimizer of
 * include/psched/kvstore.h (its states kept per key and byte range, see
 * common/optim.h; saved and loaded as records) or a user's
 * psched_updater_fn.  Also float16/bfloat16 conversion and summation
 * (common/halves.c).
 *
 * Thread use: set from any thread, applied on one (the server's van
 * thread, or the KVStore caller); a mutex orders the two.
 */
#ifndef PSCHED_COMMON_UPDATER_H
#define PSCHED_COMMON_UPDATER_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "map.h"
#include "psched/kvstore.h"

enum psd_upd_kind {
	PSD_UPD_NONE = 0,
	PSD_UPD_OPT = 1, /* an optimizer of common/optim.h */
	PSD_UPD_CUSTOM = 2,
};

struct psd_upd_state;

struct psd_updater {
	pthread_mutex_t lock;
	atomic_int kind; /* enum psd_upd_kind; read without the lock */
	struct psched_optimizer opt; /* mult arrays: NULL (see mults) */
	char name[16];		     /* opt.name points here */
	unsigned nstate;	     /* state arrays per element */
	struct psd_map mults;	     /* key -> double[2] (lr, wd mult) */
	psched_updater_fn *fn;
	void *arg;
	struct psd_map states; /* key -> struct psd_upd_state chain */
};

void psd_upd_init(struct psd_updater *u);
void psd_upd_fini(struct psd_updater *u);

static inline bool psd_upd_active(struct psd_updater *u)
{
	return atomic_load(&u->kind) != PSD_UPD_NONE;
}

/*
 * Install @opt (NULL, or an empty/NULL name: back to none).  The states
 * are kept when the optimizer keeps the same ones (same name, state
 * count, multi_precision): a new learning rate or multiplier does not
 * reset Adam's moments; any other change drops them.  0, or -EINVAL /
 * -ENOMEM with psched_errmsg() set.
 */
int psd_upd_set_optimizer(struct psd_updater *u,
			  const struct psched_optimizer *opt);
/* Install a custom updater (@fn NULL: back to none). */
void psd_upd_set_custom(struct psd_updater *u, psched_updater_fn *fn,
			void *arg);

/* The installed updater folds values of @dtype (else the caller's
 * default rule applies). */
bool psd_upd_covers(struct psd_updater *u, uint8_t dtype);

/*
 * Fold @merged into @stored: @nbytes bytes of @dtype at byte @off of key
 * @key, inside the byte range [@range_off, @range_off + @range_len) this
 * holder keeps of the key.  Returns false when no updater applies (none
 * installed, or an optimizer on a non-float key): the caller does its
 * default.
 */
bool psd_upd_apply(struct psd_updater *u, uint64_t key, uint8_t dtype,
		   uint64_t range_off, uint64_t range_len, uint64_t off,
		   void *stored, const void *merged, uint64_t nbytes);

/*
 * Row-sparse keys (common/optim_rows.c): lazy updates row by row.
 * psd_upd_rows_covers(): an updater applies to rows of @dtype (else the
 * caller's default rule), with *@nstate state arrays per element.
 * psd_upd_rows_apply(): fold gradient row @g into weight row @w (row @row
 * of key @key, @width elements of @dtype); @state holds that row's
 * *@nstate arrays of @width doubles (zero at first) and @t its update
 * count, both updated.  Rows never pushed are never touched.
 */
bool psd_upd_rows_covers(struct psd_updater *u, uint8_t dtype,
			 unsigned *nstate);
void psd_upd_rows_apply(struct psd_updater *u, uint64_t key, uint8_t dtype,
			uint64_t row, uint64_t width, void *w, const void *g,
			double *state, uint32_t *t);

/* Where this holder keeps key @key: true with its dtype, total bytes and
 * byte range, or false when it does not hold the key. */
typedef bool psd_upd_range_fn(void *arg, uint64_t key, uint8_t *dtype,
			      uint64_t *total, uint64_t *off, uint64_t *len);
/*
 * States as records (common/optim.h): every state of the installed
 * optimizer into *@buf (malloc'd, caller frees; *@len bytes), each with
 * its key's total size from @range_of, and the optimizer's name into
 * @name ("" when none).  0 or -ENOMEM.
 */
int psd_upd_states_dump(struct psd_updater *u, psd_upd_range_fn *range_of,
			void *arg, uint8_t **buf, size_t *len, char name[16]);
/* psd_upd_states_dump() of key @key's states only. */
int psd_upd_key_states_dump(struct psd_updater *u, uint64_t key,
			    psd_upd_range_fn *range_of, void *arg,
			    uint8_t **buf, size_t *len, char name[16]);
/*
 * Load records @recs (@len bytes) saved under optimizer @name: every
 * record's overlap with the range @range_of reports for its key replaces
 * those elements' states (the states of the other elements start over).
 * Records of keys @range_of does not know are skipped, or refused when
 * @all_keys (a holder of every key).  All records are checked before
 * anything changes: -EINVAL (another optimizer or state layout, an
 * unknown key, another dtype/size) or -EPROTO (malformed),
 * psched_errmsg() naming the key.
 */
int psd_upd_states_load(struct psd_updater *u, const char *name,
			const uint8_t *recs, size_t len,
			psd_upd_range_fn *range_of, void *arg, bool all_keys);
/* psd_upd_states_load() for the keys @range_of knows only: their states
 * start over and take the records' overlap; every other key's states
 * are kept (a server restoring a snapshot key by key). */
int psd_upd_states_merge(struct psd_updater *u, const char *name,
			 const uint8_t *recs, size_t len,
			 psd_upd_range_fn *range_of, void *arg);

/* IEEE binary16 <-> binary32, round to nearest even. */
float psd_f16_to_f32(uint16_t h);
uint16_t psd_f32_to_f16(float f);
/* dst[i] = f16(f32(dst[i]) + f32(src[i])) for @n elements. */
void psd_f16_add(uint16_t *dst, const uint16_t *src, size_t n);
/* bfloat16 (the top half of a binary32) <-> binary32, round to nearest
 * even; NaN stays NaN. */
float psd_bf16_to_f32(uint16_t h);
uint16_t psd_f32_to_bf16(float f);
/* dst[i] = bf16(f32(dst[i]) + f32(src[i])) for @n elements. */
void psd_bf16_add(uint16_t *dst, const uint16_t *src, size_t n);

/* Element @i of @p (dtype @dtype: f64, f16, bf16, else f32) as a double,
 * and back (rounded to the dtype): the optimizer rules' view of a value,
 * dense (updater.c) and per row (optim_rows.c). */
static inline double psd_upd_load(uint8_t dtype, const void *p, size_t i)
{
	switch (dtype) {
	case PSCHED_F64:
		return ((const double *)p)[i];
	case PSCHED_F16:
		return psd_f16_to_f32(((const uint16_t *)p)[i]);
	case PSCHED_BF16:
		return psd_bf16_to_f32(((const uint16_t *)p)[i]);
	default:
		return ((const float *)p)[i];
	}
}

static inline void psd_upd_store(uint8_t dtype, void *p, size_t i, double v)
{
	switch (dtype) {
	case PSCHED_F64:
		((double *)p)[i] = v;
		break;
	case PSCHED_F16:
		((uint16_t *)p)[i] = psd_f32_to_f16((float)v);
		break;
	case PSCHED_BF16:
		((uint16_t *)p)[i] = psd_f32_to_bf16((float)v);
		break;
	default:
		((float *)p)[i] = (float)v;
		break;
	}
}

#endif
