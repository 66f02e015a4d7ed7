/* SPDX-License-Identifier: MIT */
/*
 * The scheduler's side of the autotuner: turns worker Metrics into
 * tuner reports and tuner configs into config switches.  It knows the
 * workers only by their slot in the scheduler's node table and the
 * switches only by epoch and first step; the scheduler proposes and
 * commits (scheduler.c).  Van thread only.  See docs/tuner.md.
 */
#ifndef PSCHED_SCHEDULER_AUTOTUNE_H
#define PSCHED_SCHEDULER_AUTOTUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "psched.h"

struct psd_autotune;

/*
 * Create the tuner from @cfg's autotune_* knobs for @slots worker slots.
 * A non-zero cfg->partition_bytes or credit_bytes fixes that knob.
 * Returns 0, -EINVAL (psched_errmsg() says which knob), -ENOMEM, or
 * -errno from opening the log file.
 */
int psd_autotune_create(const struct psched_cfg *cfg, unsigned slots,
			struct psd_autotune **out);
/* NULL is a no-op. */
void psd_autotune_destroy(struct psd_autotune *at);

/*
 * Worker in @slot reported steps (@from_step .. @step were not all
 * reported before: @step is its last completed step) with a mean step
 * time of @step_time_s, and its conditions (0: unknown): link rate
 * @link_bps (@link_floor: only a floor), its paths' minimum round trip
 * @min_rtt_s, compute time per step @compute_s.  May complete a sample
 * and make the tuner want a new config (psd_autotune_proposal()).
 */
void psd_autotune_metrics(struct psd_autotune *at, unsigned slot, uint64_t step,
			  double step_time_s, double link_bps, bool link_floor,
			  double min_rtt_s, double compute_s);

/*
 * Scheduler tick: a search sample whose config has run @now_ms -
 * (its start or the last window) without the slowest worker finishing a
 * step may be cut short (psd_tuner_overdue()); it may then want a new
 * config.
 */
void psd_autotune_tick(struct psd_autotune *at, uint64_t now_ms);

/* @slot holds a worker (once the cluster is complete). */
void psd_autotune_worker_add(struct psd_autotune *at, unsigned slot);
/* The worker in @slot left (death or finalize): reopen the search. */
void psd_autotune_worker_gone(struct psd_autotune *at, unsigned slot);

/* The job ends: log the chosen config (the CSV's last row). */
void psd_autotune_finish(struct psd_autotune *at);

/*
 * A config someone wants run, handed to the scheduler's config switch
 * (cfgswitch.c), which settles it exactly once: committed from step
 * @from as config @epoch, or called off (@committed false; it may be
 * handed over again).
 */
struct psd_cfg_proposal {
	uint64_t part, credit;
	void (*settled)(struct psd_cfg_proposal *p, bool committed,
			uint32_t epoch, uint64_t from);
};

/* The config the tuner wants committed, or NULL when it wants none. */
struct psd_cfg_proposal *psd_autotune_proposal(struct psd_autotune *at);

/* The tuner's phase ("warmup", "explore", "locked", "retune") and in
 * @samples the samples it completed. */
const char *psd_autotune_phase(const struct psd_autotune *at,
			       uint64_t *samples);

#endif
