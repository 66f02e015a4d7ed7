// SPDX-License-Identifier: MIT
/*
 * The tuner's search on the synthetic cluster of tuner_sim.h: peaks
 * across the space, re-tuning after a lasting change (consecutive
 * windows, level shifts, budget, moved conditions), the lock-in on a
 * replicated config and the replicate noise estimate.
 */
#include <inttypes.h>

#include "tuner_sim.h"

static void test_tuner_finds_peaks_across_space(void)
{
	static const double peaks[][2] = {
		{ 14.0, 0.5 }, { 16.0, 3.5 }, { 18.0, 1.0 }, { 22.0, 4.5 },
		{ 24.0, 2.0 }, { 25.0, 0.3 }, { 13.0, 4.0 }, { 21.0, 1.5 },
		{ 17.0, 2.5 }, { 19.0, 4.0 },
	};
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int good = 0;
	unsigned int i;
	double q;

	for (i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++) {
		sim_opts(&o, 40 + i);
		sim_init(&s, &o, 40 + i);
		s.peak_lp = peaks[i][0];
		s.peak_lm = peaks[i][1];
		sim_run_until(&s, PSD_TUNER_LOCKED);
		q = sim_locked_quality(&s);
		printf("# peak 2^%.1f B, %.1fx: quality %.3f\n", peaks[i][0],
		       exp2(peaks[i][1]), q);
		CHECK(q > 0.8);
		good += q > 0.95;
		sim_fini(&s);
	}
	CHECK_INT(good, >=, 8);
}

/* Feed @n samples (steps_per_sample is 1) at score scale @scale. */
static void sim_samples(struct sim *s, unsigned int n, double scale)
{
	double old = s->scale;

	s->scale = scale;
	while (n--)
		sim_step(s);
	s->scale = old;
}

/* A sim whose tuner takes conditions and samples one step each (and
 * applies a config @apply_delay steps on, when not 0). */
static void sim_cond_init(struct sim *s, uint64_t seed,
			  unsigned int apply_delay)
{
	struct psd_tuner_opts o;

	sim_opts(&o, seed);
	o.conditions = true;
	o.steps_per_sample = 1;
	if (apply_delay)
		o.apply_delay = apply_delay;
	sim_init(s, &o, seed);
}

/* Only retune_windows consecutive deviating samples reopen the search. */
static void test_tuner_retune_needs_consecutive_windows(void)
{
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 31);
	o.steps_per_sample = 1;
	o.warmup_samples = 1;
	sim_init(&s, &o, 31);
	s.noise = 0.005;
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 20, 1.0); /* the locked config is applied by now */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 2, 0.5);
	sim_samples(&s, 1, 1.0);
	sim_samples(&s, 2, 0.5);
	sim_samples(&s, 1, 1.0);
	sim_samples(&s, 2, 1.5);
	sim_samples(&s, 1, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 1.5); /* upward moves count too */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 20, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 0.97); /* within the 5% threshold */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 0.5);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	sim_fini(&s);
}

/* Everything 30% slower (another job on the links): retune, same peak. */
static void test_tuner_level_shift_relocks_good_config(void)
{
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 12);
	o.noise = 0.01; /* fixed GP noise instead of learned */
	sim_init(&s, &o, 12);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.95);
	s.scale = 0.7;
	sim_run_until(&s, PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.95);
	sim_fini(&s);
}

/* The job's end logs the chosen config last: locking in if never done. */
static void test_tuner_finish_logs_chosen_last(void)
{
	static struct csv c;
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;
	char path[256];
	char f[32];
	unsigned int i;

	sim_opts(&o, 5);
	o.log_path = csv_tmp_path(path, sizeof(path));
	sim_init(&s, &o, 5);
	CHECK_EQ(psd_tuner_finish(s.t), -EAGAIN); /* nothing observed yet */
	sim_run_until(&s, PSD_TUNER_EXPLORE);
	for (i = 0; i < 4 * o.steps_per_sample; i++)
		sim_step(&s); /* a few samples, no lock-in yet */
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	CHECK_EQ(psd_tuner_best(s.t, NULL, NULL), -EAGAIN);
	CHECK_EQ(psd_tuner_finish(s.t), 0);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_finish(s.t), 0); /* again: the same config */
	sim_fini(&s);
	csv_load(path, &c);
	unlink(path);
	CHECK_EQ(csv_count_phase(&c, "chosen"), 2);
	for (i = c.nrows - 2; i < c.nrows; i++) {
		csv_field(c.rows[i], 8, f, sizeof(f));
		CHECK_STR(f, "chosen");
		csv_field(c.rows[i], 3, f, sizeof(f));
		CHECK_U64(strtoull(f, NULL, 10), ==, best.partition_bytes);
		csv_field(c.rows[i], 4, f, sizeof(f));
		CHECK_U64(strtoull(f, NULL, 10), ==, best.credit_bytes);
		csv_field(c.rows[i], 1, f, sizeof(f));
		CHECK_U64(strtoull(f, NULL, 10), ==, s.step - 1);
	}
}

/* A retune search has its own sample budget, drift samples included. */
static void test_tuner_retune_budget(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	uint64_t before;

	sim_opts(&o, 9);
	o.max_samples = 12;
	o.retune_max_samples = 6;
	o.ei_threshold = 0.0; /* only the budget locks in */
	sim_init(&s, &o, 9);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_U64(psd_tuner_samples(s.t), ==, o.warmup_samples + 12);
	s.scale = 0.5; /* every later sample drifts */
	sim_run_until(&s, PSD_TUNER_RETUNE);
	CHECK_STR(psd_tuner_why(s.t), "the locked config's step rate drifted");
	before = psd_tuner_samples(s.t);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	/* the retune_windows drift samples count: 6 - 3 more */
	CHECK_U64(psd_tuner_samples(s.t) - before, ==,
		  o.retune_max_samples - o.retune_windows);
	sim_fini(&s);
}

/*
 * Issue 16: the lock-in goes to a config measured at least twice in its
 * search (a single lucky sample cannot win), and the replicates give the
 * GP a noise floor: the learned noise stays off its 1e-6 bound.
 */
static void test_tuner_locks_on_replicated_config(void)
{
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct psd_gp_hyper h;
	struct sim s;
	unsigned int n;
	unsigned int df;
	uint64_t seed;

	for (seed = 1; seed <= 6; seed++) {
		sim_opts(&o, seed);
		o.max_samples = 12;
		sim_init(&s, &o, seed);
		s.noise = 0.10;
		sim_run_until(&s, PSD_TUNER_LOCKED);
		CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
		psd_tuner_config_mean(s.t, best.partition_bytes,
				      best.credit_bytes, &n);
		CHECK_U64(n, >=, 2);
		psd_gp_hyper_get(psd_bo_gp(s.t->bo), &h);
		printf("# seed %llu: locked config measured %u times, "
		       "replicate noise %.3f, GP noise var %.3g, quality "
		       "%.3f\n",
		       (unsigned long long)seed, n,
		       psd_tuner_replicate_noise(s.t, &df), h.noise_var,
		       sim_locked_quality(&s));
		CHECK(h.noise_var > 1e-4);
		sim_fini(&s);
	}
}

/* Replicates: the pooled relative sd of configs sampled more than once. */
static void test_tuner_replicate_noise_estimate(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int df;
	double rel;
	unsigned int i;

	sim_opts(&o, 3);
	o.steps_per_sample = 1;
	o.warmup_samples = 0;
	o.max_samples = 40;
	o.ei_threshold = 0; /* never locks early */
	sim_init(&s, &o, 3);
	s.noise = 0.10;
	/* the initial config runs until the design moves on: 1 sample */
	CHECK_EQ(psd_tuner_replicate_noise(s.t, &df), 0.0);
	CHECK_EQ(df, 0);
	for (i = 0; i < 40; i++)
		sim_step(&s);
	rel = psd_tuner_replicate_noise(s.t, &df);
	printf("# %u replicate degrees of freedom, relative sd %.3f (true "
	       "0.10)\n",
	       df, rel);
	if (df >= 2) {
		CHECK(rel > 0.02);
		CHECK(rel < 0.30);
	}
	sim_fini(&s);
}

/*
 * Conditions (issue 16): bad values are refused; a locked tuner reopens
 * its search when a condition moves, keeps the old samples at full
 * weight (no ageing), and stays locked when it does not move.
 */
static void test_tuner_condition_move_reopens_without_ageing(void)
{
	struct psd_tuner_cond c = { 5 * 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond bad = c;
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int i;

	sim_opts(&o, 9);
	o.conditions = true;
	sim_init(&s, &o, 9);
	bad.link_bytes_per_s = NAN;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &bad), -EINVAL);
	bad = c;
	bad.workers = 0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &bad), -EINVAL);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	/* a 1.2x wobble is no move */
	c.link_bytes_per_s *= 1.2;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	for (i = 0; i < 5 * o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	/* the link drops 5x (the surface does not know: no drift, so the
	 * move must hold 2 samples) */
	c.link_bytes_per_s /= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	for (i = 0; i < o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	for (i = 0; i < o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	CHECK_STR(psd_tuner_why(s.t),
		  "the conditions moved to ones never sampled");
	for (i = 0; i < s.t->nobs; i++)
		CHECK_NEAR(s.t->obs[i].weight, 1.0, 0.0);
	sim_fini(&s);
}

/*
 * Back at a link rate sampled before: run at 5 Gbit/s, drop to 1 (never
 * seen: a search), back to 5.  If the peak stays put, the model predicts
 * the config locked at 1 is still the best at 5 and the tuner stays
 * locked; if the peak moved with the rate, it reopens.  Returns how many
 * samples back at 5 ran in a search.
 */
static unsigned int sim_back_to_known(double lp1, double lm1)
{
	struct psd_tuner_cond c = { 5 * 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int searching = 0;
	unsigned int i;

	sim_opts(&o, 14);
	o.conditions = true;
	o.steps_per_sample = 1;
	o.retune_max_samples = 6;
	sim_init(&s, &o, 14);
	s.noise = 0.02;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 5, 1.0);
	c.link_bytes_per_s /= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	s.peak_lp = lp1;
	s.peak_lm = lm1;
	s.scale = 0.3;
	sim_run_until(&s, PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 5, 0.3);
	c.link_bytes_per_s *= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	s.peak_lp = 20.0;
	s.peak_lm = 2.0;
	for (i = 0; i < 12; i++) {
		sim_samples(&s, 1, 1.0);
		searching += psd_tuner_phase(s.t) == PSD_TUNER_RETUNE;
	}
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	printf("# peak at 1 Gbit/s 2^%.0f B x %.0fx: %u samples back at 5 "
	       "in a search, quality %.3f\n",
	       lp1, exp2(lm1), searching, sim_locked_quality(&s));
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
	return searching;
}

static void test_tuner_known_conditions_keep_good_lock(void)
{
	CHECK_INT(sim_back_to_known(20.0, 2.0), ==, 0);
	CHECK_INT(sim_back_to_known(16.0, 0.0), >, 0);
}

/*
 * Search the default peak with 4 windows a sample and opts.cut_ratio @cut;
 * *@cut_n gets the samples that ended early.  Checks that only samples
 * far below the search's best end early, and after one window.  Returns
 * the steps to the first lock-in.
 */
static uint64_t sim_cut_search(double cut, unsigned int *cut_n, double *q)
{
	struct psd_tuner_opts o;
	struct psd_tuner_config c;
	struct sim s;
	uint64_t samples, start;
	unsigned int wins = 0;
	double top;

	sim_opts(&o, 77);
	o.steps_per_sample = 4;
	o.warmup_samples = 1;
	o.cut_ratio = cut;
	sim_init(&s, &o, 77);
	*cut_n = 0;
	start = s.step;
	while (psd_tuner_phase(s.t) != PSD_TUNER_LOCKED) {
		CHECK_U64(s.step - start, <, SIM_MAX_STEPS);
		psd_tuner_current(s.t, &c);
		wins += s.step >= c.apply_from_step;
		top = psd_tuner_search_top(s.t);
		samples = psd_tuner_samples(s.t);
		sim_step(&s);
		if (psd_tuner_samples(s.t) == samples)
			continue;
		if (wins < o.steps_per_sample) {
			CHECK_INT(wins, ==, 1);
			CHECK(cut > 0.0 && s.t->last_score < cut * top);
			(*cut_n)++;
		}
		wins = 0;
	}
	*q = sim_locked_quality(&s);
	sim_fini(&s);
	return s.step - start;
}

/* A poor config costs one window, not a sample; so does a stuck one. */
static void test_tuner_cuts_poor_samples_short(void)
{
	struct psd_tuner_opts o;
	struct psd_tuner_config c, next;
	struct sim s;
	unsigned int cut_n, full_n;
	uint64_t cut_steps, full_steps, samples;
	bool changed;
	double q, top;

	cut_steps = sim_cut_search(0.5, &cut_n, &q);
	CHECK(q > 0.9);
	full_steps = sim_cut_search(0.0, &full_n, &q);
	printf("# to lock-in: %llu steps (%u samples cut), %llu uncut\n",
	       (unsigned long long)cut_steps, cut_n,
	       (unsigned long long)full_steps);
	CHECK_INT(full_n, ==, 0);
	CHECK_INT(cut_n, >, 0);
	CHECK_U64(cut_steps, <, full_steps);

	/* overdue: no window for a while */
	sim_opts(&o, 78);
	o.steps_per_sample = 4;
	o.warmup_samples = 1;
	sim_init(&s, &o, 78);
	while (psd_tuner_search_top(s.t) <= 0.0)
		sim_step(&s);
	while (s.t->nwin) /* at a sample's start */
		sim_step(&s);
	top = psd_tuner_search_top(s.t);
	samples = psd_tuner_samples(s.t);
	CHECK_EQ(psd_tuner_overdue(s.t, 0.0, NULL, NULL), -EINVAL);
	CHECK_EQ(psd_tuner_overdue(s.t, NAN, NULL, NULL), -EINVAL);
	/* 1 / seconds still above half the best: keep waiting */
	CHECK_EQ(psd_tuner_overdue(s.t, 1.5 / top, &next, &changed), 0);
	CHECK(!changed);
	CHECK_U64(psd_tuner_samples(s.t), ==, samples);
	psd_tuner_current(s.t, &c);
	CHECK_EQ(psd_tuner_overdue(s.t, 4.0 / top, &next, &changed), 0);
	CHECK_U64(psd_tuner_samples(s.t), ==, samples + 1);
	CHECK(fabs(s.t->last_score - top / 4.0) < 1e-9 * top);
	CHECK(changed);
	CHECK_U64(next.epoch, >, c.epoch);
	/* a locked tuner is never cut */
	sim_run_until(&s, PSD_TUNER_LOCKED);
	samples = psd_tuner_samples(s.t);
	CHECK_EQ(psd_tuner_overdue(s.t, 1e6, &next, &changed), 0);
	CHECK(!changed);
	CHECK_U64(psd_tuner_samples(s.t), ==, samples);
	sim_fini(&s);
}

/*
 * On a flat surface (every config within the noise) a retune after a
 * level shift locks in the previous config again rather than whichever
 * config had the luckiest samples.  Returns how many of 10 seeds did.
 */
static unsigned int sim_flat_relocks(void)
{
	struct psd_tuner_opts o;
	struct psd_tuner_config first, c;
	struct sim s;
	unsigned int seed, same = 0;

	for (seed = 1; seed <= 10; seed++) {
		sim_opts(&o, 300 + seed);
		o.steps_per_sample = 1;
		o.warmup_samples = 1;
		sim_init(&s, &o, 300 + seed);
		s.peak_lp = 60.0; /* far off the grid: 20 steps/s everywhere */
		s.noise = 0.03;
		sim_run_until(&s, PSD_TUNER_LOCKED);
		psd_tuner_current(s.t, &first);
		s.scale = 0.7;
		sim_run_until(&s, PSD_TUNER_RETUNE);
		sim_run_until(&s, PSD_TUNER_LOCKED);
		psd_tuner_current(s.t, &c);
		same += c.partition_bytes == first.partition_bytes &&
			c.credit_bytes == first.credit_bytes;
		sim_fini(&s);
	}
	return same;
}

static void test_tuner_retune_keeps_equal_incumbent(void)
{
	unsigned int same = sim_flat_relocks();

	printf("# flat surface: %u of 10 retunes kept the previous lock-in\n",
	       same);
	CHECK_INT(same, >=, 9);
}

/*
 * What a worker measures during a search depends on the config it runs (a
 * credit below the bandwidth-delay product starves the link, and the
 * busy-time rate falls with it), so the conditions are held at the
 * lock-in's during a search: a starved config's rate neither tags the
 * search's samples nor moves the model's context.  Behind a delay line a
 * retune that took it for a slow link went on to 4 KiB x 1.
 */
static void test_tuner_conditions_held_during_search(void)
{
	struct psd_tuner_cond c = { 5 * 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond starved;
	struct sim s;
	unsigned int i, n = 0;
	double at_open;

	sim_cond_init(&s, 9, 0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	c.link_bytes_per_s /= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_RETUNE);
	at_open = s.t->cond[0];
	starved = c;
	starved.link_bytes_per_s /= 100.0;
	while (n < 4 && psd_tuner_phase(s.t) == PSD_TUNER_RETUNE) {
		CHECK_EQ(psd_tuner_set_conditions(s.t, &starved), 0);
		sim_samples(&s, 1, 1.0);
		CHECK_NEAR(s.t->cond[0], at_open, 0.0);
		n++;
	}
	CHECK_INT(n, >=, 2);
	for (i = 0; i < s.t->nobs; i++)
		CHECK(s.t->obs[i].cond[0] >= at_open - 1e-12);
	/* locked again, the lock-in's measurements count */
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &starved), 0);
	CHECK(s.t->cond[0] < at_open);
	sim_fini(&s);
}

/*
 * A faster link during a search is taken from the second reading in a
 * row above the held one by more than 1.4x (no config reads a link faster
 * than it is), so the samples after it are tagged with it; one such
 * reading alone, or a slower link, is held.  Held, the last samples of
 * ResNet-50's first search, taken after the link went from 1 to 5
 * Gbit/s, counted as 1 Gbit/s samples 3x faster than the rest.
 */
static void test_tuner_search_takes_faster_link(void)
{
	struct psd_tuner_cond c = { 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond fast = c;
	struct sim s;
	double slow_u;
	unsigned int n0;

	fast.link_bytes_per_s *= 5.0;
	sim_cond_init(&s, 8, 0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_EXPLORE);
	sim_samples(&s, 2, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	slow_u = s.t->cond[0];
	/* one fast reading, then a slow one: held */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	CHECK_NEAR(s.t->cond[0], slow_u, 0.0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	CHECK_NEAR(s.t->cond[0], slow_u, 0.0);
	/* the second in a row is taken */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	CHECK(s.t->cond[0] > slow_u + 1e-3);
	/* the next sample is tagged with it (and opens a search there:
	 * test_tuner_rise_starts_search_over) */
	n0 = s.t->nobs;
	sim_samples(&s, 1, 1.0);
	CHECK_U64(s.t->nobs, >, n0);
	CHECK_NEAR(s.t->obs[s.t->nobs - 1].cond[0], s.t->cond[0], 0.0);
	/* a slower link in the search is held (a starved config reads so) */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	CHECK(s.t->cond[0] > slow_u + 1e-3);
	sim_fini(&s);
}

/* Step @s until the tuner took one more sample. */
static void sim_one_sample(struct sim *s)
{
	uint64_t n = psd_tuner_samples(s->t);
	unsigned int i;

	for (i = 0; i < 100 && psd_tuner_samples(s->t) == n; i++)
		sim_step(s);
	CHECK_U64(psd_tuner_samples(s->t), ==, n + 1);
}

/*
 * A search that takes a faster link starts over there: the samples since
 * the first faster reading are tagged with the new link and open a new
 * search, which, before any lock-in, has a first search's budget and
 * design (2 dim + 1 points over the whole box) and locks in only on a
 * config measured on the new link.  Carried on, VGG-16's first search
 * spent its last four samples where the shear prior pointed and locked
 * 0.85 of the one-shot arm's config (bench/autotune-bench.sh;
 * docs/tuner.md, "A faster link during a search").
 */
static void test_tuner_rise_starts_search_over(void)
{
	struct psd_tuner_cond c = { 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond fast = c;
	struct psd_tuner_config lock;
	struct sim s;
	double slow_u;
	unsigned int i;
	unsigned int n0;
	unsigned int after = 0;
	unsigned int lo = 0;
	unsigned int hi = 0;
	unsigned int lp;

	fast.link_bytes_per_s *= 5.0;
	sim_cond_init(&s, 8, 0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_EXPLORE);
	for (i = 0; i < 4; i++)
		sim_one_sample(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	slow_u = s.t->cond[0];
	/* the first faster reading, then a sample: held, tagged slow */
	n0 = s.t->nobs;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	sim_one_sample(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	CHECK_NEAR(s.t->obs[n0].cond[0], slow_u, 0.0);
	/* the second: taken; the next sample starts the search over */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	sim_one_sample(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	CHECK_INT(s.t->search, ==, 1);
	CHECK_INT(psd_tuner_search(s.t), ==, 1);
	CHECK(strstr(psd_tuner_why(s.t), "faster link") != NULL);
	CHECK_INT(s.t->search_samples, ==, 2);
	for (i = 0; i < s.t->nobs; i++) {
		bool after_rise = i >= n0;

		CHECK_INT(s.t->obs[i].search, ==, after_rise ? 1 : 0);
		CHECK_NEAR(s.t->obs[i].cond[0],
			   after_rise ? s.t->cond[0] : slow_u, 0.0);
	}
	/* the design spreads over the whole box, a first search's budget */
	while (psd_tuner_phase(s.t) != PSD_TUNER_LOCKED && after < 100) {
		lp = (unsigned int)log2((double)s.t->cur.partition_bytes);
		lo += lp <= 16;
		hi += lp >= 22;
		if (after < 5)
			printf("# design point %u after the rise: 2^%u B x "
			       "%" PRIu64 "\n",
			       after + 1, lp,
			       s.t->cur.credit_bytes /
				       s.t->cur.partition_bytes);
		CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
		sim_one_sample(&s);
		after++;
	}
	CHECK_INT(lo, >=, 1);
	CHECK_INT(hi, >=, 1);
	CHECK_INT(after + 2, >=, s.t->o.max_samples - 1);
	CHECK_INT(after + 2, <=, s.t->o.max_samples);
	/* the lock-in was measured on the new link */
	CHECK_EQ(psd_tuner_best(s.t, &lock, NULL), 0);
	n0 = 0;
	for (i = 0; i < s.t->nobs; i++)
		n0 += s.t->obs[i].search == 1 &&
		      s.t->obs[i].part == lock.partition_bytes &&
		      s.t->obs[i].credit == lock.credit_bytes;
	CHECK_INT(n0, >=, 2);
	sim_fini(&s);
}

/*
 * The probe pending in @s: @times the lock-in's credit, on the lock-in's
 * partition when at most credit_mult_max of them hold it, else on the
 * smallest larger partition whose multiple does (the sims' 64 MiB and 32x
 * ranges hold every credit asked for here).
 */
static void check_probe(const struct sim *s,
			const struct psd_tuner_config *lock, uint64_t times)
{
	uint64_t want = lock->credit_bytes * times;
	uint64_t part = lock->partition_bytes;

	while (want > 32 * part)
		part <<= 1;
	CHECK_U64(s->pending.partition_bytes, ==, part);
	CHECK_U64(s->pending.credit_bytes, ==, want);
	CHECK_U64(s->pending.credit_bytes / part, <=, 32);
}

/*
 * Floors (credit-bound readings): they never lower the link estimate; a
 * locked tuner reading one runs a probe (the lock-in's partition, more
 * credit: 4x, times how far the floor is below the estimate), goes back
 * to the lock-in when the probe reads nothing new, and reopens when it
 * reads a faster link.
 */
static void test_tuner_floor_probes_faster_link(void)
{
	struct psd_tuner_cond c = { 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond f;
	struct psd_tuner_config lock;
	struct sim s;
	double est;
	unsigned int i;

	sim_cond_init(&s, 5, 1);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 1.0);
	CHECK_EQ(psd_tuner_best(s.t, &lock, NULL), 0);
	est = s.t->cond[0];
	/* a floor below the estimate leaves it */
	f = c;
	f.link_bytes_per_s = c.link_bytes_per_s / 4.0;
	f.link_floor = true;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &f), 0);
	CHECK_NEAR(s.t->cond[0], est, 0.0);
	CHECK_NEAR(s.t->raw.link_bytes_per_s, c.link_bytes_per_s, 0.0);
	/* the next sample starts a probe: 4 x 4 times the credit */
	sim_samples(&s, 1, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	CHECK(s.t->probing);
	check_probe(&s, &lock, 16);
	/* the probe reads the same link (not a floor): back to the lock */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_samples(&s, 2, 1.0);
	CHECK(!s.t->probing);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	CHECK_U64(s.pending.credit_bytes, ==, lock.credit_bytes);
	/* floors again: the next probe 8 locked samples after the last
	 * (TUNER_PROBE_GAP; one went by above) */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &f), 0);
	for (i = 0; i < 6; i++) {
		sim_samples(&s, 1, 1.0);
		CHECK(!s.t->probing);
	}
	sim_samples(&s, 1, 1.0);
	CHECK(s.t->probing);
	/* this probe reads a link 5x faster: a search opens */
	c.link_bytes_per_s *= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_samples(&s, 2, 1.0);
	CHECK(!s.t->probing);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	CHECK(s.t->cond[0] > est);
	sim_fini(&s);
}

/*
 * A lock-in on small partitions with a large credit multiple: its probe
 * needs more than credit_mult_max partitions of its size, so it runs on a
 * larger partition with the credit asked for.  Capped at 32 x 16 KiB, a
 * probe of VGG-16's 16 KiB x 21 lock-in behind a 4 ms round trip read no
 * faster link and the lock-in stayed starved (bench/autotune-bench.sh).
 */
static void test_tuner_floor_probe_grows_partition(void)
{
	struct psd_tuner_cond c = { 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond f;
	struct psd_tuner_config lock;
	struct sim s;

	sim_cond_init(&s, 7, 1);
	s.peak_lp = 14.0; /* 16 KiB */
	s.peak_lm = log2(24.0);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 1.0);
	CHECK_EQ(psd_tuner_best(s.t, &lock, NULL), 0);
	printf("# lock-in %llu KiB x %llu\n",
	       (unsigned long long)(lock.partition_bytes >> 10),
	       (unsigned long long)(lock.credit_bytes / lock.partition_bytes));
	/* 16x its credit must not fit in 32 of its partitions */
	CHECK_U64(lock.credit_bytes / lock.partition_bytes, >, 2);
	CHECK_U64(lock.partition_bytes, <, 64 * MIB / 16);
	f = c;
	f.link_bytes_per_s = c.link_bytes_per_s / 4.0;
	f.link_floor = true;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &f), 0);
	sim_samples(&s, 1, 1.0);
	CHECK(s.t->probing);
	check_probe(&s, &lock, 16);
	CHECK_U64(s.pending.partition_bytes, >, lock.partition_bytes);
	/* the probe reads nothing new: the lock-in runs again */
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_samples(&s, 2, 1.0);
	CHECK(!s.t->probing);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	CHECK_U64(s.pending.partition_bytes, ==, lock.partition_bytes);
	CHECK_U64(s.pending.credit_bytes, ==, lock.credit_bytes);
	sim_fini(&s);
}

/*
 * A floor above the estimate (a link-bound lock-in whose link got faster
 * than its credit covers) moves the conditions, but only to what the
 * credit lets through: the tuner probes before it searches, and the
 * search opens under what the probe read.
 */
static void test_tuner_floor_move_probes_first(void)
{
	struct psd_tuner_cond c = { 1.25e8, 0.1, 2, false, 0.0 };
	struct psd_tuner_cond f;
	struct psd_tuner_cond fast;
	struct sim s;
	double at_fast;

	sim_cond_init(&s, 6, 1);
	/* where 5x the rate maps, for the check below */
	fast = c;
	fast.link_bytes_per_s *= 5.0;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	at_fast = s.t->cond[0];
	CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	sim_samples(&s, 3, 1.0);
	f = c;
	f.link_bytes_per_s *= 2.0;
	f.link_floor = true;
	CHECK_EQ(psd_tuner_set_conditions(s.t, &f), 0);
	CHECK(s.t->cond_moved);
	sim_samples(&s, 1, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	CHECK(s.t->probing);
	CHECK_EQ(psd_tuner_set_conditions(s.t, &fast), 0);
	sim_samples(&s, 2, 1.0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	CHECK_NEAR(s.t->cond[0], at_fast, 1e-12);
	sim_fini(&s);
}

/* Step until @phase; count the configs run below @floor bytes of credit
 * (the first config, run before any conditions, aside). */
static unsigned int
sim_run_count_below(struct sim *s, enum psd_tuner_phase phase, double floor)
{
	uint64_t start = s->step;
	unsigned int below = 0;

	while (psd_tuner_phase(s->t) != phase) {
		CHECK_U64(s->step - start, <, SIM_MAX_STEPS);
		sim_step(s);
		below += s->run.epoch && (double)s->run.credit_bytes < floor;
	}
	return below;
}

/*
 * The bandwidth-delay product bounds the credit from below: behind a
 * 4 ms round trip at 5 Gbit/s (2.5 MB), no config the first search or a
 * retune runs has less than half of it, while the same job with the
 * round trip unknown runs several; the lock-in (the peak at 4 MiB of
 * credit is above the bound) is as good.  A round trip that is not
 * finite or negative is refused.
 */
static void test_tuner_credit_floor_from_rtt(void)
{
	struct psd_tuner_cond c = { 5 * 1.25e8, 0.1, 2, false, 0.004 };
	struct psd_tuner_cond bad = c;
	unsigned int below[2] = { 0, 0 };
	unsigned int pass;
	double floor;
	struct sim s;

	for (pass = 0; pass < 2; pass++) {
		sim_cond_init(&s, 12, 1);
		c.link_bytes_per_s = 5 * 1.25e8;
		c.rtt_s = pass ? 0.004 : 0.0;
		bad.rtt_s = -1.0;
		CHECK_EQ(psd_tuner_set_conditions(s.t, &bad), -EINVAL);
		bad.rtt_s = NAN;
		CHECK_EQ(psd_tuner_set_conditions(s.t, &bad), -EINVAL);
		CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
		floor = 0.5 * c.link_bytes_per_s * 0.004;
		CHECK_NEAR(psd_tuner_credit_floor(s.t), pass ? floor : 0.0,
			   1e-6);
		below[pass] += sim_run_count_below(&s, PSD_TUNER_LOCKED, floor);
		CHECK(sim_locked_quality(&s) >= 0.9);
		/* a retune at 2.5 Gbit/s: the bound halves */
		c.link_bytes_per_s /= 2.0;
		CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
		sim_run_until(&s, PSD_TUNER_RETUNE);
		below[pass] +=
			sim_run_count_below(&s, PSD_TUNER_LOCKED, floor / 2.0);
		CHECK(sim_locked_quality(&s) >= 0.9);
		sim_fini(&s);
	}
	printf("# configs below half the bandwidth-delay product: %u with the "
	       "round trip unknown, %u with it\n",
	       below[0], below[1]);
	CHECK_INT(below[0], >=, 2);
	CHECK_INT(below[1], ==, 0);
}

/*
 * The floor does not need conditions as model inputs: a tuner without
 * them (--autotune alone, one-shot) keeps the link estimate and the round
 * trip for it.  Its first search behind 4 ms at 5 Gbit/s runs no config
 * below half the product; with the round trip unknown the same job runs
 * several, and the lock-in is as good either way.  The conditions stay
 * out of the model: every sample's GP input is the knobs alone.
 */
static void test_tuner_credit_floor_without_conditions(void)
{
	struct psd_tuner_cond c = { 5 * 1.25e8, 0.1, 2, false, 0.004 };
	double floor = 0.5 * c.link_bytes_per_s * 0.004;
	unsigned int below[2] = { 0, 0 };
	struct psd_tuner_opts o;
	unsigned int pass;
	struct sim s;

	for (pass = 0; pass < 2; pass++) {
		sim_opts(&o, 12);
		o.steps_per_sample = 1;
		sim_init(&s, &o, 12);
		c.rtt_s = pass ? 0.004 : 0.0;
		CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
		CHECK_NEAR(psd_tuner_credit_floor(s.t), pass ? floor : 0.0,
			   1e-6);
		CHECK_U64(s.t->xdim, ==, s.t->dim);
		/* a credit-bound reading below the estimate does not lower
		 * it (nor the floor) */
		c.link_floor = true;
		c.link_bytes_per_s /= 4.0;
		CHECK_EQ(psd_tuner_set_conditions(s.t, &c), 0);
		CHECK_NEAR(psd_tuner_credit_floor(s.t), pass ? floor : 0.0,
			   1e-6);
		c.link_floor = false;
		c.link_bytes_per_s *= 4.0;
		below[pass] += sim_run_count_below(&s, PSD_TUNER_LOCKED, floor);
		CHECK(sim_locked_quality(&s) >= 0.9);
		sim_fini(&s);
	}
	printf("# configs below half the bandwidth-delay product without "
	       "conditions: %u with the round trip unknown, %u with it\n",
	       below[0], below[1]);
	CHECK_INT(below[0], >=, 2);
	CHECK_INT(below[1], ==, 0);
}

/* 100 seeds, 10 s of CPU; a sanitizer build runs 10 for its checks. */
#define SHALLOW_SEEDS (TEST_SANITIZED ? 10u : 100u)

/* What sim_shallow() saw over its seeds. */
struct shallow {
	double mean, worst;	 /* the first lock-in's quality */
	unsigned int poor;	 /* first lock-ins below 0.9 of the optimum */
	unsigned int first_min;	 /* earliest first lock-in (sample) */
	unsigned int retune_min; /* shortest retune, after its 3 drifted */
};

/*
 * A shallow surface like the replayed ResNet-50 at 2 Gbit/s (test
 * test_autotune_replay: 16 KiB partitions best, 8 MiB x 1 at 0.7 of it,
 * ~3 % noise per step, a slow step at 0.67x with chance @dip) under the
 * replay test's options, @sps steps a sample, with EI threshold @ei (0:
 * the default), SHALLOW_SEEDS seeds: the first search, then a level
 * shift to 0.7 and the retune it opens.
 */
static void sim_shallow(double ei, unsigned int sps, double dip,
			struct shallow *r)
{
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int seed, n;
	double q;

	memset(r, 0, sizeof(*r));
	r->worst = 1.0;
	r->first_min = r->retune_min = ~0u;
	for (seed = 1; seed <= SHALLOW_SEEDS; seed++) {
		sim_opts(&o, seed);
		o.part_min = 16 * KIB;
		o.part_max = 8 * MIB;
		o.init_partition = 4 * MIB;
		o.init_credit = 16 * MIB;
		o.warmup_samples = 2;
		o.steps_per_sample = sps;
		o.max_samples = 13;
		o.retune_max_samples = 9;
		if (ei > 0.0)
			o.ei_threshold = ei;
		sim_init(&s, &o, 1000 + seed);
		s.base = 84.0;
		s.height = 36.0;
		s.width_lp = 4.0;
		s.peak_lp = 14.0;
		s.peak_lm = 2.0;
		s.noise = 0.03;
		s.dip = dip;
		sim_run_until(&s, PSD_TUNER_LOCKED);
		n = (unsigned int)psd_tuner_samples(s.t);
		r->first_min = n < r->first_min ? n : r->first_min;
		q = sim_locked_quality(&s);
		r->mean += q / SHALLOW_SEEDS;
		r->worst = fmin(r->worst, q);
		r->poor += q < 0.9;
		s.scale = 0.7;
		sim_run_until(&s, PSD_TUNER_RETUNE);
		n = (unsigned int)psd_tuner_samples(s.t);
		sim_run_until(&s, PSD_TUNER_LOCKED);
		n = (unsigned int)psd_tuner_samples(s.t) - n;
		r->retune_min = n < r->retune_min ? n : r->retune_min;
		sim_fini(&s);
	}
	printf("# shallow surface, EI threshold %s, %u steps a sample, "
	       "slow steps %.0f %%: lock-in %.3f of the optimum (worst "
	       "%.3f), %u of %u below 0.9, earliest at sample %u (2 "
	       "warmup); shortest retune %u samples after the 3 that opened "
	       "it\n",
	       ei > 0.0 ? "0.005" : "default", sps, 100.0 * dip, r->mean,
	       r->worst, r->poor, SHALLOW_SEEDS, r->first_min, r->retune_min);
}

/*
 * Low expected improvement locks a search only after the samples it did
 * not choose (design points, the drifted samples that opened a retune)
 * and dim + 1 more: 10 in the first search here (2 warmup, 5 design, 3),
 * more than a retune's budget of 9 (3 drifted, 4 design, 3).  Asserted
 * also with a looser threshold (0.005), where a rule that counted only
 * the design points let the first search lock after 6 samples in 3 of
 * 100 seeds (0.77 of the optimum) and retunes right after their design
 * points.  With the default threshold, at most 1 seed of 100 locks below
 * 0.9 (the plain build's bar).
 */
static void check_no_early_lock(const struct shallow *r)
{
	CHECK_INT(r->first_min, >=, 2 + 5 + 3);
	CHECK_INT(r->retune_min, >=, 9 - 3);
}

static void test_tuner_no_lock_on_design(void)
{
	struct shallow r;

	sim_shallow(0.0, 3, 0.0, &r);
	check_no_early_lock(&r);
	if (!TEST_SANITIZED)
		CHECK_INT(r.poor, <=, 1);
	sim_shallow(0.005, 3, 0.0, &r);
	check_no_early_lock(&r);
}

/*
 * Slow steps (a tenth of them at 0.67x): a sample is the median of its
 * steps, which 3 steps a sample give up to two slow ones and 5 to three.
 * A CI run of test_autotune_replay with 3 steps a sample locked 128 KiB
 * x 16 at 0.898 of the grid best; that test takes 5.  Here
 * 3 steps lock more seeds below 0.9 of the optimum (11 of 100 in the
 * plain build) than 5 (1), and 5 at most 1.
 */
static void test_tuner_slow_steps_need_longer_samples(void)
{
	struct shallow r3, r5;

	sim_shallow(0.0, 3, 0.1, &r3);
	sim_shallow(0.0, 5, 0.1, &r5);
	if (TEST_SANITIZED)
		return;
	CHECK_INT(r5.poor, <=, 1);
	CHECK_INT(r3.poor, >, r5.poor + 2);
}

const struct test_case test_list[] = {
	{ "tuner_no_lock_on_design", test_tuner_no_lock_on_design },
	{ "tuner_slow_steps_need_longer_samples",
	  test_tuner_slow_steps_need_longer_samples },
	{ "tuner_credit_floor_from_rtt", test_tuner_credit_floor_from_rtt },
	{ "tuner_credit_floor_without_conditions",
	  test_tuner_credit_floor_without_conditions },
	{ "tuner_floor_probes_faster_link",
	  test_tuner_floor_probes_faster_link },
	{ "tuner_search_takes_faster_link",
	  test_tuner_search_takes_faster_link },
	{ "tuner_rise_starts_search_over", test_tuner_rise_starts_search_over },
	{ "tuner_floor_probe_grows_partition",
	  test_tuner_floor_probe_grows_partition },
	{ "tuner_floor_move_probes_first", test_tuner_floor_move_probes_first },
	{ "tuner_conditions_held_during_search",
	  test_tuner_conditions_held_during_search },
	{ "tuner_retune_keeps_equal_incumbent",
	  test_tuner_retune_keeps_equal_incumbent },
	{ "tuner_cuts_poor_samples_short", test_tuner_cuts_poor_samples_short },
	{ "tuner_known_conditions_keep_good_lock",
	  test_tuner_known_conditions_keep_good_lock },
	{ "tuner_finds_peaks_across_space",
	  test_tuner_finds_peaks_across_space },
	{ "tuner_retune_needs_consecutive_windows",
	  test_tuner_retune_needs_consecutive_windows },
	{ "tuner_level_shift_relocks_good_config",
	  test_tuner_level_shift_relocks_good_config },
	{ "tuner_finish_logs_chosen_last", test_tuner_finish_logs_chosen_last },
	{ "tuner_retune_budget", test_tuner_retune_budget },
	{ "tuner_locks_on_replicated_config",
	  test_tuner_locks_on_replicated_config },
	{ "tuner_replicate_noise_estimate",
	  test_tuner_replicate_noise_estimate },
	{ "tuner_condition_move_reopens_without_ageing",
	  test_tuner_condition_move_reopens_without_ageing },
	{ NULL, NULL },
};
