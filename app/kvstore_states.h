/* SPDX-License-Identifier: MIT */
/* Optimizer state files of a KVStore (app/kvstore_states.c), and what
 * app/kvstore.c lends it. */
#ifndef PSCHED_APP_KVSTORE_STATES_H
#define PSCHED_APP_KVSTORE_STATES_H

#include <pthread.h>

#include "psched/kvstore.h"
#include "updater.h"

/* app/kvstore.c: a "local" store's updater (NULL for dist stores) and
 * the store's lock, taken before the updater's as kvstore.c does. */
struct psd_updater *psd_kvstore_local_upd(struct psched_kvstore *kv,
					  pthread_mutex_t **lock);
/* psd_upd_range_fn of a "local" store (@arg: the store; lock held): the
 * whole key. */
bool psd_kvstore_local_range(void *arg, uint64_t key, uint8_t *dtype,
			     uint64_t *total, uint64_t *off, uint64_t *len);

#endif
