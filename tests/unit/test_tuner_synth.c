// SPDX-License-Identifier: MIT
/*
 * The real tuner (scheduler/tuner/) against random search on synthetic
 * surfaces whose optimum moves when the link changes, over 30 seeds at
 * 5, 10 and 20 % noise per sample.
 *
 * The surface (steps/s over log2 partition lp and log2 credit multiple
 * lm) is a smooth peak on a floor, like the surfaces of the replayed
 * models (bench/autotune-bench.sh): the peak sits at a partition and a
 * credit that grow with the link rate G (Gbit/s), and the level grows
 * with G.  The job starts at G0 = 5, the link drops to G1 = 1 after the
 * first search locked in (the old best then scores 0.56 of the new
 * best), goes back to G0, down to G1 again, then to G2 = 3 (never seen,
 * between the two).
 *
 * Not tailored to the tuner: the surface was fixed before the tuner's
 * condition model was written and has not been changed to suit it.  Its
 * peak moves by 1.2 octaves of partition and 0.8 octaves of credit
 * multiple per octave of rate, not by the tuner's prior (0.5 and 0.5,
 * scheduler/tuner/tuner_cond.c); its widths (3 and 1.6 octaves) and
 * floor (0.35 of the peak) are not the tuner's length-scale prior; its
 * level follows G / (G + 1), not a power of G; the noise is Gaussian,
 * relative, per sample.
 *
 * Figures, per seed and phase: the true score of the config the tuner
 * runs after the phase's budget (15 samples for the first search, 6 after
 * each change; locked, or whatever it is trying) over the grid best at
 * that rate.  Random search gets the same budgets (the best noisy sample
 * wins), 2000 runs.  Asserted: mean and worst seed against random, and
 * the targets where they hold (see the test cases).
 *
 * By default 10 % and 20 % noise run (about 20 s of CPU); SYNTH_SLOW=1
 * adds 5 % and the comparison with conditions off.  SYNTH_SEEDS=1
 * prints every seed; SYNTH_QUICK=1 skips the 10 % bars.  For a look:
 * SYNTH_SEED_BASE=n runs seeds n+1..n+30 (held-out seeds), SYNTH_NO20=1
 * skips 20 %, SYNTH_FIRST_ONLY=1 runs the first search only, SYNTH_CFG=1
 * prints the config each phase ends on, SYNTH_LOG=path with
 * SYNTH_LOG_SEED=seed and SYNTH_LOG_NOISE=0.1 writes that run's CSV,
 * SYNTH_TNOISE=x fixes the tuner's noise option (learned by default),
 * SYNTH_TR_PART=oct and SYNTH_TR_MULT=oct set the retune's trust region
 * (0: the whole box), SYNTH_RISE_SURF=0 or 1 runs one surface of
 * synth_rise_in_first_search (usual, adverse).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../harness.h"
#include "../../scheduler/tuner/tuner.h"

#define SEEDS	     30
#define RANDOM_RUNS  2000 /* random search is cheap: a tight baseline */
#define FIRST_BUDGET 15
#define AFTER_BUDGET 6

/*
 * A sanitizer build (make asan, make tsan) runs 3 seeds and skips the
 * bars: it looks for memory errors and races in the tuner, which 3 seeds
 * reach as well as 30, and 30 seeds under TSan took 7.6 of CI's 90
 * minutes.  The bars are the plain build's.
 */
static unsigned int nseeds(void)
{
	return TEST_SANITIZED ? 3 : SEEDS;
}
#define SETTLE	 5 /* locked samples before the change */
#define LP_MIN	 12
#define LP_MAX	 26
#define MULT_MAX 32
#define G0	 5.0
#define G1	 1.0
#define G2	 3.0 /* between the two: never seen, but bracketed */

/*
 * The adverse surface (synth_rise_in_first_search): flat at G1 (a
 * link-bound job, every config runs about the link's rate) and its peak
 * moving to smaller partitions as the rate grows, against the tuner's
 * shear prior.  Off by default.
 */
static bool surf_adverse;

static double surf_peak_lp(double g)
{
	return 18.0 + (surf_adverse ? -1.2 : 1.2) * log2(g);
}

/* How much the config matters at @g: 0.65 of the peak, or (adverse) that
 * times log2(g) / log2(G0), at least 5 % of it. */
static double surf_amp(double g)
{
	return surf_adverse ? 0.65 * fmax(0.05, log2(g) / log2(5.0)) : 0.65;
}

static double surf_peak_lm(double g)
{
	return 1.0 + 0.8 * log2(g);
}

/* Noiseless steps/s of @part/@credit at link rate @g. */
static double surf_truth(double g, uint64_t part, uint64_t credit)
{
	double dp = log2((double)part) - surf_peak_lp(g);
	double dm = log2((double)credit / (double)part) - surf_peak_lm(g);
	double level = 10.0 * g / (g + 1.0);

	double amp = surf_amp(g);

	return level * (1.0 - amp +
			amp * exp(-dp * dp / (2.0 * 3.0 * 3.0) -
				  dm * dm / (2.0 * 1.6 * 1.6)));
}

static double surf_best(double g)
{
	double best = 0.0;
	unsigned int lp;
	uint64_t k;

	for (lp = LP_MIN; lp <= LP_MAX; lp++)
		for (k = 1; k <= MULT_MAX; k++)
			best = fmax(best,
				    surf_truth(g, UINT64_C(1) << lp, k << lp));
	return best;
}

static double surf_sample(gsl_rng *r, double g, double noise, uint64_t part,
			  uint64_t credit)
{
	double v = surf_truth(g, part, credit) *
		   (1.0 + gsl_ran_gaussian(r, noise));

	return fmax(v, 1e-3);
}

/* ---- the tuner ---- */

struct run {
	struct psd_tuner *t;
	struct psd_tuner_config cfg;
	gsl_rng *r;
	uint64_t step;
	double g;
	double noise;
	bool conditions; /* tell the tuner the link rate */
	/* SYNTH_STARVE_RTT=S (0: off): the rate is measured as a worker does
	 * behind a round trip of S seconds, credit-bound below the
	 * bandwidth-delay product (an experiment: the surface itself does
	 * not change) */
	double starve_rtt;
	bool no_floor; /* ...and says so only without this */
};

/* SYNTH_STARVE_RTT and SYNTH_NO_FLOOR=1 unless a test case set them */
static double synth_starve_rtt = -1.0;
static int synth_no_floor = -1;

static void run_sample(struct run *u)
{
	bool changed;

	if (u->conditions) {
		struct psd_tuner_cond c = {
			.link_bytes_per_s = u->g * 1.25e8,
			.compute_s = 0.1,
			.workers = 2,
		};
		double starved =
			u->starve_rtt > 0.0
				? (double)u->cfg.credit_bytes / u->starve_rtt
				: HUGE_VAL;

		/* the workers' round trip (SYNTH_NO_RTT=1: unknown) */
		if (u->starve_rtt > 0.0 && !getenv("SYNTH_NO_RTT"))
			c.rtt_s = u->starve_rtt;
		/* credit-bound: the worker reads its own credit, and says
		 * it is only a floor (unless u->no_floor) */
		if (starved < c.link_bytes_per_s) {
			c.link_bytes_per_s = starved;
			c.link_floor = !u->no_floor;
		}
		CHECK_EQ(psd_tuner_set_conditions(u->t, &c), 0);
	}
	u->step++;
	CHECK_EQ(psd_tuner_report(u->t, u->step,
				  surf_sample(u->r, u->g, u->noise,
					      u->cfg.partition_bytes,
					      u->cfg.credit_bytes),
				  &u->cfg, &changed),
		 0);
	/* apply_delay 1: the next step runs the new config */
}

static void tuner_opts(struct psd_tuner_opts *o, uint64_t seed, bool cond)
{
	psd_tuner_opts_default(o);
	o->part_min = UINT64_C(1) << LP_MIN;
	o->part_max = UINT64_C(1) << LP_MAX;
	o->credit_mult_max = MULT_MAX;
	o->warmup_samples = 0;
	o->steps_per_sample = 1;
	o->apply_delay = 1;
	o->max_samples = FIRST_BUDGET;
	o->retune_max_samples = AFTER_BUDGET;
	o->retune_threshold = 0.15;
	o->conditions = cond;
	o->seed = seed;
	if (getenv("SYNTH_XI"))
		o->xi = atof(getenv("SYNTH_XI"));
	if (getenv("SYNTH_TNOISE"))
		o->noise = atof(getenv("SYNTH_TNOISE"));
	if (getenv("SYNTH_TR_PART"))
		o->region_part_oct = atof(getenv("SYNTH_TR_PART"));
	if (getenv("SYNTH_TR_MULT"))
		o->region_mult_oct = atof(getenv("SYNTH_TR_MULT"));
	if (getenv("SYNTH_EI"))
		o->ei_threshold = atof(getenv("SYNTH_EI"));
	/* one seed's CSV, for a look (SYNTH_LOG_SEED picks the seed) */
	if (!getenv("SYNTH_LOG_SEED") ||
	    strtoull(getenv("SYNTH_LOG_SEED"), NULL, 10) == seed)
		o->log_path = getenv("SYNTH_LOG");
}

/* Quality of the config the tuner runs now, at the current rate. */
static double run_quality(const struct run *u)
{
	return surf_truth(u->g, u->cfg.partition_bytes, u->cfg.credit_bytes) /
	       surf_best(u->g);
}

/* Run @budget samples at rate @g, note the quality, then let the tuner
 * settle (lock in, SETTLE samples). */
static double run_phase(struct run *u, double g, unsigned int budget)
{
	double q;
	unsigned int i;

	u->g = g;
	for (i = 0; i < budget; i++)
		run_sample(u);
	q = run_quality(u);
	if (getenv("SYNTH_CFG"))
		printf("#       g %.0f: %" PRIu64 " KiB x %" PRIu64 " q %.3f\n",
		       g, u->cfg.partition_bytes >> 10,
		       u->cfg.credit_bytes / u->cfg.partition_bytes, q);
	for (i = 0; i < SETTLE || (psd_tuner_phase(u->t) != PSD_TUNER_LOCKED &&
				   i < 4 * FIRST_BUDGET);
	     i++)
		run_sample(u);
	return q;
}

/*
 * Start @u's tuner (tuner_opts(); its CSV only at SYNTH_LOG_NOISE when
 * that is set) and its noise stream, both from @seed.
 */
static void run_open(struct run *u, uint64_t seed)
{
	struct psd_tuner_opts o;

	tuner_opts(&o, seed, u->conditions);
	if (getenv("SYNTH_LOG_NOISE") &&
	    fabs(atof(getenv("SYNTH_LOG_NOISE")) - u->noise) > 1e-9)
		o.log_path = NULL;
	CHECK_EQ(psd_tuner_create(&o, &u->t), 0);
	u->r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(u->r, seed * 7919 + 17);
	psd_tuner_current(u->t, &u->cfg);
}

static void run_close(struct run *u)
{
	gsl_rng_free(u->r);
	psd_tuner_destroy(u->t);
}

/*
 * One job on one seed: first search at G0, the link drops to G1 (a
 * condition never seen), back to G0, down to G1 again.  @q gets the
 * quality after each phase's budget.
 */
static void run_tuner(uint64_t seed, double noise, bool cond, double *q)
{
	struct run u = { .g = G0, .noise = noise, .conditions = cond };

	if (synth_starve_rtt >= 0.0)
		u.starve_rtt = synth_starve_rtt;
	else if (getenv("SYNTH_STARVE_RTT"))
		u.starve_rtt = atof(getenv("SYNTH_STARVE_RTT"));
	u.no_floor = synth_no_floor >= 0 ? synth_no_floor
					 : getenv("SYNTH_NO_FLOOR") != NULL;

	run_open(&u, seed);
	q[0] = run_phase(&u, G0, FIRST_BUDGET);
	q[1] = q[2] = q[3] = q[4] = 0.0;
	if (getenv("SYNTH_FIRST_ONLY"))
		goto out;
	q[1] = run_phase(&u, G1, AFTER_BUDGET);
	q[2] = run_phase(&u, G0, AFTER_BUDGET);
	q[3] = run_phase(&u, G1, AFTER_BUDGET);
	q[4] = run_phase(&u, G2, AFTER_BUDGET);
out:
	run_close(&u);
}

#define RISE_AT	     8	/* first-search samples at G1 before the rise */
#define RISE_HORIZON 30 /* samples at G0 after it */

/*
 * One job on one seed whose link rises from G1 to G0 during the first
 * search (live, VGG-16's rose during its 9th sample of 12:
 * bench/autotune-bench.sh).  *@q_end gets the quality of the config run
 * RISE_HORIZON samples after the rise, *@q_mean the mean quality of the
 * configs run over those samples (what the search cost, as a live job
 * pays it).
 */
static void run_rise(uint64_t seed, double noise, double *q_end, double *q_mean)
{
	struct run u = { .g = G1, .noise = noise, .conditions = true };
	unsigned int i;

	run_open(&u, seed);
	for (i = 0; i < RISE_AT; i++)
		run_sample(&u);
	u.g = G0;
	*q_mean = 0.0;
	for (i = 0; i < RISE_HORIZON; i++) {
		*q_mean += run_quality(&u) / RISE_HORIZON;
		run_sample(&u);
	}
	*q_end = run_quality(&u);
	if (getenv("SYNTH_CFG"))
		printf("#       rise, seed %" PRIu64 ": %" PRIu64
		       " KiB x %" PRIu64 " q %.3f, mean %.3f\n",
		       seed, u.cfg.partition_bytes >> 10,
		       u.cfg.credit_bytes / u.cfg.partition_bytes, *q_end,
		       *q_mean);
	run_close(&u);
}

/* Random search: @n random configs, the best noisy sample wins. */
static double run_random(gsl_rng *r, double g, double noise, unsigned int n)
{
	double best = -1.0;
	double truth = 0.0;
	double v;
	unsigned int i;

	for (i = 0; i < n; i++) {
		unsigned int lp = LP_MIN + (unsigned int)gsl_rng_uniform_int(
						   r, LP_MAX - LP_MIN + 1);
		uint64_t k = 1 + gsl_rng_uniform_int(r, MULT_MAX);
		uint64_t part = UINT64_C(1) << lp;

		v = surf_sample(r, g, noise, part, k * part);
		if (v > best) {
			best = v;
			truth = surf_truth(g, part, k * part);
		}
	}
	return truth / surf_best(g);
}

struct stats {
	double mean;
	double worst;
};

static void stats_of(const double *v, unsigned int n, struct stats *s)
{
	unsigned int i;

	s->mean = 0.0;
	s->worst = HUGE_VAL;
	for (i = 0; i < n; i++) {
		s->mean += v[i] / n;
		s->worst = fmin(s->worst, v[i]);
	}
}

#define PHASES 5

/* Per phase: the tuner, random search with the same budget. */
struct figures {
	struct stats tuner[PHASES], random[PHASES], random30[PHASES];
};

static const char *const phase_name[PHASES] = {
	"first search (15)", "new rate (6)", "back to a known rate (6)",
	"known rate again (6)", "rate between the two (6)"
};

/* SYNTH_SEED_BASE=n: seeds n+1..n+30 instead (held-out seeds, to check
 * that a change is not fitted to the test's seeds) */
static uint64_t seed_base(void)
{
	return getenv("SYNTH_SEED_BASE")
		       ? strtoull(getenv("SYNTH_SEED_BASE"), NULL, 10)
		       : 0;
}

static void measure(double noise, bool cond, struct figures *f)
{
	static const double g[PHASES] = { G0, G1, G0, G1, G2 };
	static const unsigned int budget[PHASES] = { FIRST_BUDGET, AFTER_BUDGET,
						     AFTER_BUDGET, AFTER_BUDGET,
						     AFTER_BUDGET };
	double q[PHASES][SEEDS], qs[PHASES];
	static double rq[RANDOM_RUNS];
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	unsigned int s;
	unsigned int p;

	for (s = 0; s < nseeds(); s++) {
		run_tuner(s + 1 + seed_base(), noise, cond, qs);
		for (p = 0; p < PHASES; p++)
			q[p][s] = qs[p];
		if (getenv("SYNTH_SEEDS"))
			printf("#     seed %u: %.3f %.3f %.3f %.3f %.3f\n",
			       s + 1, qs[0], qs[1], qs[2], qs[3], qs[4]);
	}
	printf("# noise %2.0f%%, conditions %s:\n", noise * 100,
	       cond ? "on" : "off");
	for (p = 0; p < PHASES; p++) {
		gsl_rng_set(r, 1000 + p);
		for (s = 0; s < RANDOM_RUNS; s++)
			rq[s] = run_random(r, g[p], noise, budget[p]);
		stats_of(q[p], nseeds(), &f->tuner[p]);
		stats_of(rq, RANDOM_RUNS, &f->random[p]);
		/* the worst of 30 random runs, like the tuner's */
		stats_of(rq, SEEDS, &f->random30[p]);
		printf("#   %-26s tuner %.3f (worst %.3f), random %.3f "
		       "(worst of 30 %.3f)\n",
		       phase_name[p], f->tuner[p].mean, f->tuner[p].worst,
		       f->random[p].mean, f->random30[p].worst);
	}
	gsl_rng_free(r);
}

static void test_synth_surface_moves(void)
{
	/* the test is only worth something if the change matters */
	double g1_best = surf_best(G1);
	uint64_t part = UINT64_C(1) << (unsigned int)round(surf_peak_lp(G0));
	uint64_t k = (uint64_t)round(exp2(surf_peak_lm(G0)));

	printf("# old best at the new rate: %.3f of the new best\n",
	       surf_truth(G1, part, k * part) / g1_best);
	CHECK(surf_truth(G1, part, k * part) < 0.85 * g1_best);
}

/*
 * Every phase against random search with the same budget: the mean at
 * least @margin above random's mean and, with @worst, the worst of the 30
 * seeds no worse than the worst of 30 random runs.
 */
static void check_vs_random(const struct figures *f, double margin, bool worst)
{
	unsigned int p;

	for (p = 0; p < PHASES; p++) {
		CHECK(f->tuner[p].mean >= f->random[p].mean + margin);
		if (worst)
			CHECK(f->tuner[p].worst >= f->random30[p].worst);
	}
}

/*
 * 10 % noise, conditions on.  Issue 16's targets: first search >= 0.97
 * within 15 samples, >= 0.95 within 6 samples after a change, both 5
 * points above random search, worst seed >= 0.85.  Reached (with the
 * tuner's own GP priors, and the shear prior split between partition and
 * multiple): first search 0.989 (worst 0.946; 0.976 over 300 seeds); a
 * rate never seen, with nothing seen on that side of it, 0.957 (0.812;
 * random 0.626; 0.941 (0.719) with a shear prior of partition +1,
 * multiple 0), where the model knows only its
 * prior of how the peak moves with the rate; back to a rate seen before
 * 0.986 (0.946); that rate's partner again 0.981 (0.856); a rate between
 * two seen ones 0.989 (0.944).  The bars
 * below are what holds with a margin; the test is deterministic (fixed
 * seeds), the margins allow for other compilers' rounding.
 */
static struct figures fig10; /* 10 %, conditions on: shared with the last
			      * test, which compares */

static void test_synth_10pct(void)
{
	struct figures f;

	measure(0.10, true, &f);
	fig10 = f;
	if (getenv("SYNTH_QUICK") || TEST_SANITIZED)
		return;
	check_vs_random(&f, 0.05, true);
	/* the first-search target */
	CHECK(f.tuner[0].mean >= 0.97);
	CHECK(f.tuner[0].worst >= 0.85);
	/* a rate never seen: a region around the old lock-in moved by the
	 * fitted shear, then around the search's best */
	/* 0.957 (worst 0.812) before the retune's model check
	 * (test_tuner_moving.c), 0.947 (0.778) with it: a never-seen rate
	 * the peak follows the prior's way pays for its rare false alarm */
	CHECK(f.tuner[1].mean >= 0.94);
	CHECK(f.tuner[1].worst >= 0.76);
	/* a rate seen before: the model carries what it learned */
	CHECK(f.tuner[2].mean >= 0.97);
	CHECK(f.tuner[2].worst >= 0.90);
	CHECK(f.tuner[3].mean >= 0.96);
	CHECK(f.tuner[3].worst >= 0.80);
	/* a rate between two seen ones: the fitted shear places its peak */
	CHECK(f.tuner[4].mean >= 0.97);
	CHECK(f.tuner[4].worst >= 0.85);
}

static bool synth_slow(void)
{
	return getenv("SYNTH_SLOW") && strcmp(getenv("SYNTH_SLOW"), "0");
}

static void test_synth_5pct(void)
{
	struct figures f;

	if (!synth_slow())
		test_skip("slow: set SYNTH_SLOW=1");
	measure(0.05, true, &f);
	check_vs_random(&f, 0.05, true);
	CHECK(f.tuner[0].mean >= 0.97);
	CHECK(f.tuner[2].mean >= 0.97);
	CHECK(f.tuner[3].mean >= 0.97);
	CHECK(f.tuner[4].mean >= 0.97);
}

/* 20 %: the means only (a 6-sample worst case is a coin toss) */
static void test_synth_20pct(void)
{
	struct figures f;

	if (getenv("SYNTH_NO20"))
		test_skip("SYNTH_NO20 set");
	measure(0.20, true, &f);
	if (!TEST_SANITIZED)
		check_vs_random(&f, 0.05, false);
}

/*
 * Conditions off (the tuner before issue 16: drift seen after 3 samples,
 * old samples aged away): returning to a known rate is a new search.
 * Conditions on must beat it there.
 */
static void test_synth_conditions_carry_knowledge(void)
{
	struct figures on = fig10;
	struct figures off;

	if (!synth_slow())
		test_skip("slow: set SYNTH_SLOW=1");
	measure(0.10, false, &off);
	if (!on.tuner[0].mean) /* run alone */
		measure(0.10, true, &on);
	CHECK(on.tuner[2].mean >= off.tuner[2].mean + 0.05);
	CHECK(on.tuner[3].mean >= off.tuner[3].mean + 0.05);
	CHECK(on.tuner[4].mean >= off.tuner[4].mean + 0.05);
}

/*
 * Workers behind 4 ms round trips (a delay line): a config whose credit
 * is below the bandwidth-delay product reads credit / round trip, not the
 * link, and says it is a floor (struct psd_tuner_cond.link_floor).  A
 * lock-in at 1 Gbit/s then reads the same when the link goes back to 5,
 * and its score gives no sign either; the tuner's probes (a sample with
 * more credit now and then while the readings are floors) find the
 * faster link.  Without floors the two rises in the job are re-tuned no
 * better than random search (back to a known rate 0.627, a rate between
 * the two 0.724); with them 0.960 and 0.968 (held-out
 * seeds 31-60: 0.943, 0.976).  The workers' round trip goes to the tuner
 * too (its credit floor, docs/tuner.md, "A credit floor from the round
 * trip"; SYNTH_NO_RTT=1 leaves it out):
 * 0.961 and 0.989.  SYNTH_SLOW=1 also runs it without floors and asserts
 * the gain.
 */
static void test_synth_credit_bound(void)
{
	struct figures f;
	struct figures off;

	synth_starve_rtt = 0.004;
	synth_no_floor = 0;
	measure(0.10, true, &f);
	if (!TEST_SANITIZED) {
		check_vs_random(&f, 0.05, false);
		CHECK(f.tuner[2].mean >= 0.92);
		CHECK(f.tuner[3].mean >= 0.90);
		CHECK(f.tuner[4].mean >= 0.92);
	}
	if (synth_slow() && !TEST_SANITIZED) {
		synth_no_floor = 1;
		measure(0.10, true, &off);
		CHECK(f.tuner[2].mean >= off.tuner[2].mean + 0.15);
		CHECK(f.tuner[4].mean >= off.tuner[4].mean + 0.15);
	}
	synth_starve_rtt = -1.0;
	synth_no_floor = -1;
}

/*
 * The link rises during the first search (G1 -> G0 after RISE_AT of its
 * 15 samples), on the usual surface and on the adverse one (flat at G1,
 * its peak at G0 on the side the shear prior does not favour).  Live,
 * VGG-16's first search behind a delay line was in that spot: the
 * 1 Gbit/s phase flat, the link rose at its 9th sample, and the search
 * spent its last samples where the prior pointed (8-64 MiB partitions)
 * and locked 16 MiB x 32, 0.85 of the 256 KiB x 32 the one-shot arm ran
 * (bench/autotune-bench.sh).
 *
 * Figures (10 % noise, the test's 30 seeds; end: the config run 30
 * samples after the rise; mean: over those 30 samples, the search's cost
 * included).  A search that carries on to its budget instead:
 * usual end 0.813 (worst 0.483), mean 0.785; adverse end 0.753 (worst
 * 0.500), mean 0.725.  Started over on the faster link with a first
 * search's design and budget (tuner_rise_search): usual 0.969 (0.886),
 * mean 0.876; adverse 0.951 (0.717), mean 0.842.  Over 120 seeds
 * (SYNTH_SEED_BASE=0, 30, 60, 90): usual end 0.809 -> 0.964, mean
 * 0.780 -> 0.868; adverse 0.738 -> 0.950, mean 0.708 -> 0.844.
 */
static void test_synth_rise_in_first_search(void)
{
	double end[2][SEEDS];
	double avg[2][SEEDS];
	struct stats se;
	struct stats sa;
	unsigned int s;
	unsigned int k;

	for (k = 0; k < 2; k++) {
		/* SYNTH_RISE_SURF=0 or 1: that surface only */
		if (getenv("SYNTH_RISE_SURF") &&
		    (unsigned int)atoi(getenv("SYNTH_RISE_SURF")) != k)
			continue;
		surf_adverse = k;
		for (s = 0; s < nseeds(); s++) {
			run_rise(s + 1 + seed_base(), 0.10, &end[k][s],
				 &avg[k][s]);
			if (getenv("SYNTH_SEEDS"))
				printf("#     %s seed %u: end %.3f mean %.3f\n",
				       k ? "adverse" : "usual", s + 1,
				       end[k][s], avg[k][s]);
		}
		stats_of(end[k], nseeds(), &se);
		stats_of(avg[k], nseeds(), &sa);
		printf("# rise in the first search, %s surface: end %.3f "
		       "(worst %.3f), mean over %u samples %.3f (worst %.3f)\n",
		       k ? "adverse" : "usual", se.mean, se.worst, RISE_HORIZON,
		       sa.mean, sa.worst);
		if (TEST_SANITIZED || getenv("SYNTH_QUICK"))
			continue;
		/* what holds with a margin; carried on: 0.81 / 0.75 */
		CHECK(se.mean >= (k ? 0.92 : 0.94));
		CHECK(sa.mean >= (k ? 0.82 : 0.85));
		CHECK(se.worst >= (k ? 0.65 : 0.80));
	}
	surf_adverse = false;
}

const struct test_case test_list[] = {
	{ "synth_surface_moves", test_synth_surface_moves },
	{ "synth_10pct", test_synth_10pct },
	{ "synth_5pct", test_synth_5pct },
	{ "synth_20pct", test_synth_20pct },
	{ "synth_conditions_carry_knowledge",
	  test_synth_conditions_carry_knowledge },
	{ "synth_credit_bound", test_synth_credit_bound },
	{ "synth_rise_in_first_search", test_synth_rise_in_first_search },
	{ NULL, NULL },
};
