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
	/* Membership (docs/elastic.md): the worker ranks whose pushes make
	 * up a step of this config, a bitmap of @members_len bytes (bit r of
	 * byte r / 8); @nmembers 0 and @members NULL: every worker. */
	uint32_t nmembers;
	const uint8_t *members;
	size_t members_len;
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
 * Add a committed config (its member bitmap is copied).  Epochs only
 * grow: -EALREADY for an epoch already known (a duplicate), -EINVAL for
 * one below the newest, -ENOMEM.
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

/* Is worker @rank a member of @e's steps? */
bool psd_cfg_is_member(const struct psd_cfg_entry *e, unsigned rank);
/* How many workers push each step of @e, in a job of @nworker slots. */
unsigned psd_cfg_nmembers(const struct psd_cfg_entry *e, unsigned nworker);
/*
 * Check a membership from the wire for a job of @nworker worker slots
 * (a bitmap without a bit set: nobody is left): 0, or -EPROTO when the
 * bitmap is longer than the slots need, names a rank beyond them, or
 * disagrees with @nmembers.
 */
int psd_cfg_members_check(const struct psd_cfg_entry *e, unsigned nworker);

#endif
