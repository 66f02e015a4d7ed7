/* SPDX-License-Identifier: MIT */
/*
 * Updaters: how an aggregate is folded into a stored value (on a server,
 * or in process for a "local" KVStore).  Default: none (the caller keeps
 * its own rule: sync replaces, async adds).  Else the SGD optimizer of
 * include/psched/kvstore.h (momentum kept per key and byte range) or a
 * user's psched_updater_fn.  Also float16 conversion and summation.
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
	PSD_UPD_SGD = 1,
	PSD_UPD_CUSTOM = 2,
};

struct psd_upd_state;

struct psd_updater {
	pthread_mutex_t lock;
	atomic_int kind; /* enum psd_upd_kind; read without the lock */
	struct psched_optimizer opt;
	char name[16]; /* opt.name points here */
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
 * Install @opt (NULL, or an empty/NULL name: back to none).  An optimizer
 * equal to the installed one changes nothing (momentum is kept); any other
 * change drops the momentum.  0, or -EINVAL with psched_errmsg() set.
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
 * installed, or SGD on a non-float key): the caller does its default.
 */
bool psd_upd_apply(struct psd_updater *u, uint64_t key, uint8_t dtype,
		   uint64_t range_off, uint64_t range_len, uint64_t off,
		   void *stored, const void *merged, uint64_t nbytes);

/* IEEE binary16 <-> binary32, round to nearest even. */
float psd_f16_to_f32(uint16_t h);
uint16_t psd_f32_to_f16(float f);
/* dst[i] = f16(f32(dst[i]) + f32(src[i])) for @n elements. */
void psd_f16_add(uint16_t *dst, const uint16_t *src, size_t n);

#endif
