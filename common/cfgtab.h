/* SPDX-License-Identifier: MIT */
/*
 * Config epochs (docs/architecture.md, "Configs change at step
 * boundaries, by epoch").  A config is {epoch, partition_bytes,
 * credit_bytes, apply_from_step}; a key's push of step s uses the config
 * of the highest epoch whose apply_from_step <= s.  Every
 * worker and server keeps the same table, so all of them cut a step the
 * same way and a server can tell a chunk cut with the wrong config.
 *
 * No locking: the owner's lock guards the table.
 */
#ifndef PSCHED_COMMON_CFGTAB_H
#define PSCHED_COMMON_CFGTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct psd_cfg_entry {
	uint32_t epoch;
	uint64_t partition_bytes;
	uint64_t credit_bytes;
	uint64_t apply_from_step;
};

struct psd_cfgtab {
	struct psd_cfg_entry *v; /* ascending epoch */
	size_t n;
	size_t cap;
};

/* Start with epoch 0 = the node's starting sizes, from step 0. */
int psd_cfgtab_init(struct psd_cfgtab *t, uint64_t partition_bytes,
		    uint64_t credit_bytes);
void psd_cfgtab_fini(struct psd_cfgtab *t);
/*
 * Add a committed config.  Epochs only grow: -EALREADY for an epoch already
 * known (a duplicate), -EINVAL for one below the newest, -ENOMEM.
 */
int psd_cfgtab_add(struct psd_cfgtab *t, const struct psd_cfg_entry *e);
/* The config a push of step @step uses. */
const struct psd_cfg_entry *psd_cfgtab_for_step(const struct psd_cfgtab *t,
						uint64_t step);
/* The config of @epoch, NULL if unknown. */
const struct psd_cfg_entry *psd_cfgtab_find(const struct psd_cfgtab *t,
					    uint32_t epoch);
/* The newest config. */
const struct psd_cfg_entry *psd_cfgtab_last(const struct psd_cfgtab *t);

#endif
