// SPDX-License-Identifier: MIT
/*
 * Autotuner wiring on the scheduler (van thread): worker Metrics become
 * one score per step window (steps/s of the slowest live worker, at the
 * lowest step any live worker completed), fed to the tuner only for
 * windows that ran entirely under the tuner's current config, i.e. from
 * the step the scheduler committed it at (the tuner's own guess of that
 * step is superseded) and never while a switch is open.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "autotune.h"
#include "tuner/tuner.h"

struct at_worker {
	bool live;
	bool seen;	  /* reported at least once */
	uint64_t from;	  /* first step of its latest window */
	uint64_t step;	  /* last step of its latest window */
	double step_time; /* mean step time of that window, seconds */
	double link_bps;  /* its measured link bandwidth, 0 = unknown */
	bool link_floor;  /* ...which is only a floor (credit-bound) */
	double rtt_s;	  /* its paths' minimum round trip, 0 = unknown */
	double compute_s; /* its compute time per step, 0 = unknown */
};

struct psd_autotune {
	struct psd_tuner *t;
	struct at_worker *w;
	unsigned slots;
	struct psd_tuner_config cur;  /* what the tuner wants run */
	bool want;		      /* cur not committed yet */
	struct psd_cfg_proposal prop; /* cur, as handed to the switch */
	bool gated;		      /* a config of ours is in force */
	uint64_t gate;		      /* ...from this step */
	uint64_t last_step;	      /* last step reported to the tuner */
	uint64_t samples;	      /* tuner samples already shown */
	uint64_t quiet_ms; /* config running, no window reported since */
	enum psd_tuner_phase phase;
	unsigned search; /* the tuner's search number last shown */
};

static void at_fill_opts(const struct psched_cfg *cfg, struct psd_tuner_opts *o)
{
	psd_tuner_opts_default(o);
	o->part_min = cfg->autotune_partition_min;
	o->part_max = cfg->autotune_partition_max;
	o->fixed_partition = cfg->partition_bytes;
	o->fixed_credit = cfg->credit_bytes;
	o->warmup_samples = cfg->autotune_warmup_samples;
	o->steps_per_sample = cfg->autotune_steps_per_sample;
	o->max_samples = cfg->autotune_max_samples;
	o->retune_max_samples = cfg->autotune_retune_max_samples;
	o->noise = cfg->autotune_gp_noise;
	o->retune_threshold = cfg->autotune_retune_threshold;
	o->seed = cfg->autotune_seed;
	o->conditions = cfg->autotune_conditions;
	/* The scheduler commits at 1 + the highest step any worker pushed,
	 * at least one past the report that asked for the switch. */
	o->apply_delay = 1;
	if (cfg->autotune_log_file[0])
		o->log_path = cfg->autotune_log_file;
}

int psd_autotune_create(const struct psched_cfg *cfg, unsigned slots,
			struct psd_autotune **out)
{
	struct psd_tuner_opts o;
	struct psd_autotune *at;
	int ret;

	at_fill_opts(cfg, &o);
	if (o.fixed_partition && o.fixed_credit)
		return psd_set_errmsg(-EINVAL,
				      "--autotune with both PS_PARTITION_BYTES "
				      "and PS_CREDIT_BYTES fixed: nothing left "
				      "to tune");
	at = calloc(1, sizeof(*at));
	if (!at)
		return -ENOMEM;
	at->w = calloc(slots, sizeof(*at->w));
	if (!at->w) {
		free(at);
		return -ENOMEM;
	}
	at->slots = slots;
	ret = psd_tuner_create(&o, &at->t);
	if (ret) {
		psd_autotune_destroy(at);
		if (ret == -EINVAL)
			return psd_set_errmsg(
				ret,
				"bad autotune options: partition "
				"range %" PRIu64 "..%" PRIu64
				" (powers of two >= 4096), "
				"steps per sample %u, max "
				"samples %u (>= 1), retune "
				"threshold %g (> 0), fixed "
				"partition %" PRIu64 ", fixed credit %" PRIu64,
				o.part_min, o.part_max, o.steps_per_sample,
				o.max_samples, o.retune_threshold,
				o.fixed_partition, o.fixed_credit);
		return psd_set_errmsg(ret, "autotune log '%s': %s",
				      cfg->autotune_log_file,
				      psched_strerror(ret));
	}
	psd_tuner_current(at->t, &at->cur);
	at->want = true; /* every node starts on the tuner's first config */
	at->phase = psd_tuner_phase(at->t);
	at->search = psd_tuner_search(at->t);
	*out = at;
	return 0;
}

void psd_autotune_destroy(struct psd_autotune *at)
{
	if (!at)
		return;
	psd_tuner_destroy(at->t);
	free(at->w);
	free(at);
}

/* Tuner progress goes to stderr whatever the log level: it was asked for. */
static void at_show(struct psd_autotune *at)
{
	enum psd_tuner_phase ph = psd_tuner_phase(at->t);
	struct psd_tuner_config best;
	char line[256];
	double score;

	if (psd_tuner_samples(at->t) != at->samples) {
		at->samples = psd_tuner_samples(at->t);
		psd_tuner_progress(at->t, line, sizeof(line));
		psd_log_emit(PSD_LOG_INFO, __FILE__, __LINE__, "%s", line);
	}
	/* a retune can open another (a faster link during a search) */
	if (ph == PSD_TUNER_RETUNE && psd_tuner_search(at->t) != at->search)
		psd_log_emit(PSD_LOG_INFO, __FILE__, __LINE__,
			     "autotune: search reopened at sample %" PRIu64
			     ": %s",
			     at->samples, psd_tuner_why(at->t));
	at->search = psd_tuner_search(at->t);
	if (ph == at->phase)
		return;
	if (ph == PSD_TUNER_LOCKED && !psd_tuner_best(at->t, &best, &score))
		psd_log_emit(PSD_LOG_INFO, __FILE__, __LINE__,
			     "autotune: locked in partition %" PRIu64
			     " bytes, credit %" PRIu64
			     " bytes (%.4g steps/s) after %" PRIu64 " samples",
			     best.partition_bytes, best.credit_bytes, score,
			     at->samples);
	at->phase = ph;
}

/* Report the window every live worker has completed, if it is new. */
static void at_try_report(struct psd_autotune *at)
{
	struct psd_tuner_cond cond = { .link_bytes_per_s = HUGE_VAL };
	uint64_t step = UINT64_MAX;
	double slowest = 0.0;
	bool changed = false;
	unsigned i, n = 0;
	int ret;

	if (at->want || !at->gated)
		return;
	for (i = 0; i < at->slots; i++) {
		const struct at_worker *w = &at->w[i];

		if (!w->live)
			continue;
		if (!w->seen || w->from < at->gate)
			return; /* some worker's window still mixes configs */
		if (w->step < step)
			step = w->step;
		if (w->step_time > slowest)
			slowest = w->step_time;
		/* conditions: the slowest link (a floor if that reading
		 * is one), the longest round trip and compute */
		if (w->link_bps < cond.link_bytes_per_s) {
			cond.link_bytes_per_s = w->link_bps;
			cond.link_floor = w->link_floor;
		}
		cond.compute_s = fmax(cond.compute_s, w->compute_s);
		cond.rtt_s = fmax(cond.rtt_s, w->rtt_s);
		n++;
	}
	if (!n || step <= at->last_step)
		return;
	at->last_step = step;
	cond.workers = n;
	/* unknown (0) on some worker: the tuner keeps the last ones */
	if (cond.link_bytes_per_s > 0.0 && cond.compute_s > 0.0)
		(void)psd_tuner_set_conditions(at->t, &cond);
	at->quiet_ms = psd_now_ms();
	ret = psd_tuner_report(at->t, step, 1.0 / slowest, &at->cur, &changed);
	if (ret)
		psd_warn("autotune: report of step %" PRIu64 " (%.4g steps/s) "
			 "failed: %s",
			 step, 1.0 / slowest, psched_strerror(ret));
	at_show(at);
	if (changed)
		at->want = true;
}

/* The slowest live worker finished the step before the gate: the
 * config runs everywhere and the overdue clock starts. */
static void at_note_running(struct psd_autotune *at)
{
	unsigned i;

	if (at->want || !at->gated || at->quiet_ms)
		return;
	for (i = 0; i < at->slots; i++) {
		const struct at_worker *w = &at->w[i];

		if (w->live && (!w->seen || w->step + 1 < at->gate))
			return;
	}
	at->quiet_ms = psd_now_ms();
}

void psd_autotune_tick(struct psd_autotune *at, uint64_t now_ms)
{
	uint64_t samples;
	bool changed = false;
	double secs;
	int ret;

	if (!at || at->want || !at->gated || !at->quiet_ms ||
	    now_ms <= at->quiet_ms)
		return;
	samples = psd_tuner_samples(at->t);
	secs = (double)(now_ms - at->quiet_ms) / 1000.0;
	ret = psd_tuner_overdue(at->t, secs, &at->cur, &changed);
	if (ret) {
		psd_warn("autotune: cutting short a sample after %.1f s "
			 "without a step failed: %s",
			 secs, psched_strerror(ret));
		return;
	}
	if (psd_tuner_samples(at->t) == samples)
		return;
	psd_log_emit(PSD_LOG_INFO, __FILE__, __LINE__,
		     "autotune: no step in %.1f s (from step %" PRIu64
		     "), under half the search's best: sample cut short",
		     secs, at->gate);
	at->quiet_ms = now_ms;
	at_show(at);
	if (changed)
		at->want = true;
}

void psd_autotune_metrics(struct psd_autotune *at, unsigned slot, uint64_t step,
			  double step_time_s, double link_bps, bool link_floor,
			  double min_rtt_s, double compute_s)
{
	struct at_worker *w;

	if (!at || slot >= at->slots)
		return;
	w = &at->w[slot];
	if (!w->live)
		return; /* not a worker, or left already */
	if (!isfinite(step_time_s) || step_time_s <= 0.0 ||
	    (w->seen && step <= w->step)) {
		psd_debug("autotune: ignoring metrics of step %" PRIu64
			  " (step time %g s) from worker slot %u",
			  step, step_time_s, slot);
		return;
	}
	/* The first window's start is unknown: it never counts. */
	w->from = w->seen ? w->step + 1 : 0;
	w->step = step;
	w->step_time = step_time_s;
	w->link_bps = isfinite(link_bps) && link_bps > 0.0 ? link_bps : 0.0;
	w->link_floor = link_floor;
	/* a round trip is a property of the path: the last one known */
	if (isfinite(min_rtt_s) && min_rtt_s > 0.0)
		w->rtt_s = min_rtt_s;
	w->compute_s = isfinite(compute_s) && compute_s > 0.0 ? compute_s : 0.0;
	w->seen = true;
	at_note_running(at);
	at_try_report(at);
}

void psd_autotune_worker_add(struct psd_autotune *at, unsigned slot)
{
	if (at && slot < at->slots)
		at->w[slot].live = true;
}

void psd_autotune_worker_gone(struct psd_autotune *at, unsigned slot)
{
	unsigned i, live = 0;
	int ret;

	if (!at || slot >= at->slots || !at->w[slot].live)
		return;
	at->w[slot].live = false;
	for (i = 0; i < at->slots; i++)
		live += at->w[i].live;
	if (!live)
		return; /* the job is ending */
	ret = psd_tuner_workers_changed(at->t);
	if (ret)
		psd_warn("autotune: cannot reopen the search after a worker "
			 "left: %s",
			 psched_strerror(ret));
	at_show(at);
}

void psd_autotune_finish(struct psd_autotune *at)
{
	struct psd_tuner_config best;
	double score;

	if (!at)
		return;
	if (psd_tuner_finish(at->t) || psd_tuner_best(at->t, &best, &score)) {
		psd_log_emit(PSD_LOG_INFO, __FILE__, __LINE__,
			     "autotune: the job ended before the first sample; "
			     "nothing chosen");
		return;
	}
	psd_log_emit(PSD_LOG_INFO, __FILE__, __LINE__,
		     "autotune: chosen config: partition %" PRIu64
		     " bytes, credit %" PRIu64 " bytes (%.4g steps/s)",
		     best.partition_bytes, best.credit_bytes, score);
}

static void at_settled(struct psd_cfg_proposal *p, bool committed,
		       uint32_t epoch, uint64_t from)
{
	struct psd_autotune *at =
		psd_container_of(p, struct psd_autotune, prop);

	if (!committed || !at->want)
		return; /* called off: still wanted, proposed again */
	at->want = false;
	at->gated = true;
	at->gate = from;
	at->quiet_ms = 0;
	at_note_running(at); /* the workers may be past the step before */
	psd_info("autotune: tuner config %" PRIu64 " is config epoch %u "
		 "from step %" PRIu64,
		 at->cur.epoch, epoch, from);
}

struct psd_cfg_proposal *psd_autotune_proposal(struct psd_autotune *at)
{
	if (!at || !at->want)
		return NULL;
	at->prop.part = at->cur.partition_bytes;
	at->prop.credit = at->cur.credit_bytes;
	at->prop.settled = at_settled;
	return &at->prop;
}

const char *psd_autotune_phase(const struct psd_autotune *at, uint64_t *samples)
{
	*samples = psd_tuner_samples(at->t);
	return psd_tuner_phase_name(psd_tuner_phase(at->t));
}
