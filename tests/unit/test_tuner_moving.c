// SPDX-License-Identifier: MIT
/*
 * The real tuner (scheduler/tuner/) against random search with the same
 * budget on generated surfaces that move: a first search, then a change
 * of the job's conditions, then a re-tune.  Unlike test_tuner_synth.c,
 * whose one surface moves the way the tuner's prior expects, the surfaces
 * here are drawn from a seed, and so is the change: a peak anywhere in
 * the box, of any width and floor; moves in every direction, against the
 * prior too; flat-topped peaks (plateaus); two peaks whose order swaps.
 *
 * A surface is steps/s over log2 partition lp (12..26) and log2 credit
 * multiple lm (0..5): level * (floor + (1 - floor) * shape), shape the
 * larger of one or two bumps (Gaussian, or flat-topped for plateaus),
 * each at most 1.  Noise is Gaussian, relative, per sample.
 *
 * Families of changes (what the job sees: the link rate or the compute
 * time moves, reported to the tuner as conditions):
 *  level     the level moves (0.4-2.5x), the peak stays
 *  prior     link rate x or / 2-5; the peak moves the prior's way
 *            (partition and multiple grow with the rate), by other amounts
 *  any       link rate or compute time moves; the peak moves 1.5-5
 *            octaves of partition and 0.5-2.5 of multiple, signs random
 *  against   issue 55's: the link halves, the level halves, the best
 *            partition grows 8x and its multiple 4x
 *  plateau   flat-topped wide peaks, moved like "any"
 *  twopeak   two peaks; the change swaps which one is higher
 *
 * Figures per surface: the true score of the config the tuner runs after
 * the budget (15 samples for the first search, 6 or 12 after the change)
 * over the grid's best.  Random search: the best noisy sample of the same
 * budget wins, MOVE_RANDOM runs per surface.  MOVE_SEEDS=1 prints every
 * surface, MOVE_N=n runs n surfaces per family, MOVE_NOISE=x sets the
 * noise, MOVE_COND=0 runs with opts.conditions off (on by default here,
 * as --autotune-conditions), MOVE_FAMILY=name runs one family,
 * MOVE_WHY=1 prints what opened each retune, MOVE_LOG=path with
 * MOVE_LOG_SEED=seed writes that surface's CSV, MOVE_SEED_BASE=n draws
 * another seed range (the bars then do not apply), MOVE_TR_PART /
 * MOVE_TR_MULT set the retune's trust region.
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

#define LP_MIN	       12
#define LP_MAX	       26
#define LM_MAX	       5.0 /* log2 of the largest multiple */
#define MULT_MAX       32
#define FIRST_BUDGET   15
#define SETTLE	       5 /* locked samples before the change */
#define MOVE_RANDOM    200
#define MOVE_PER_FAM   34 /* 6 families: 204 surfaces */
#define MOVE_MAX_SURFS 64 /* per family */

enum move_family {
	FAM_LEVEL,
	FAM_PRIOR,
	FAM_ANY,
	FAM_AGAINST,
	FAM_PLATEAU,
	FAM_TWOPEAK,
	FAM_N,
};

static const char *const fam_name[FAM_N] = { "level",	"prior",   "any",
					     "against", "plateau", "twopeak" };

struct bump {
	double lp; /* center: log2 partition */
	double lm; /* center: log2 multiple */
	double wp; /* sd, octaves of partition */
	double wm; /* sd, octaves of multiple */
	double h;  /* height, <= 1 */
};

struct surf {
	struct bump b[2];
	unsigned int nb;
	bool flat; /* flat-topped bumps */
	double floor;
	double level;
	double best; /* grid best, cached */
};

/* A job's conditions as the workers report them. */
struct cond {
	double link; /* bytes/s */
	double comp; /* s per step */
};

struct scenario {
	enum move_family fam;
	struct surf before;
	struct surf after;
	struct cond c0;
	struct cond c1;
	double noise;
};

static double bump_at(const struct bump *b, bool flat, double lp, double lm)
{
	double dp = (lp - b->lp) / b->wp;
	double dm = (lm - b->lm) / b->wm;
	double d2 = 0.5 * (dp * dp + dm * dm);

	return b->h * exp(flat ? -d2 * d2 : -d2);
}

static double surf_truth(const struct surf *s, uint64_t part, uint64_t credit)
{
	double lp = log2((double)part);
	double lm = log2((double)credit / (double)part);
	double shape = 0.0;
	unsigned int i;

	for (i = 0; i < s->nb; i++)
		shape = fmax(shape, bump_at(&s->b[i], s->flat, lp, lm));
	return s->level * (s->floor + (1.0 - s->floor) * shape);
}

static void surf_finish(struct surf *s)
{
	unsigned int lp;
	uint64_t k;

	s->best = 0.0;
	for (lp = LP_MIN; lp <= LP_MAX; lp++)
		for (k = 1; k <= MULT_MAX; k++)
			s->best = fmax(s->best, surf_truth(s, UINT64_C(1) << lp,
							   k << lp));
}

static double unif(gsl_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * gsl_rng_uniform(r);
}

static double sign(gsl_rng *r)
{
	return gsl_rng_uniform(r) < 0.5 ? -1.0 : 1.0;
}

static double clamp(double v, double lo, double hi)
{
	return fmin(fmax(v, lo), hi);
}

/* A bump somewhere inside the box, of a random width. */
static void bump_draw(gsl_rng *r, struct bump *b, bool wide)
{
	b->lp = unif(r, 13.5, 24.5);
	b->lm = unif(r, 0.3, 4.7);
	b->wp = wide ? unif(r, 3.0, 5.0) : unif(r, 2.0, 4.5);
	b->wm = wide ? unif(r, 1.5, 2.5) : unif(r, 1.0, 2.2);
	b->h = 1.0;
}

/* Move @b by @dp / @dm octaves, kept inside the box. */
static void bump_move(struct bump *b, double dp, double dm)
{
	b->lp = clamp(b->lp + dp, LP_MIN + 0.5, LP_MAX - 0.5);
	b->lm = clamp(b->lm + dm, 0.0, LM_MAX);
}

/* A move of 1.5-5 octaves of partition and 0.5-2.5 of multiple, signs
 * random, the link rate or the compute time moving with it. */
static void move_any(gsl_rng *r, struct scenario *c)
{
	bump_move(&c->after.b[0], sign(r) * unif(r, 1.5, 5.0),
		  sign(r) * unif(r, 0.5, 2.5));
	if (gsl_rng_uniform(r) < 0.5)
		c->c1.link *= exp2(sign(r) * unif(r, 1.0, 2.3));
	else
		c->c1.comp *= exp2(sign(r) * unif(r, 1.0, 2.3));
	c->after.level *= exp2(unif(r, -1.2, 1.2));
}

static void scenario_draw(gsl_rng *r, enum move_family fam, double noise,
			  struct scenario *c)
{
	struct surf *s = &c->before;
	double oct;

	memset(c, 0, sizeof(*c));
	c->fam = fam;
	c->noise = noise;
	s->nb = 1;
	s->flat = fam == FAM_PLATEAU;
	bump_draw(r, &s->b[0], s->flat);
	s->floor = unif(r, 0.2, 0.6);
	s->level = 10.0 * exp2(unif(r, -1.0, 1.0));
	c->c0.link = 1.25e8 * exp2(unif(r, -1.0, 3.0)); /* 0.5-8 Gbit/s */
	c->c0.comp = 0.1 * exp2(unif(r, -2.0, 2.0));
	if (fam == FAM_TWOPEAK) {
		s->nb = 2;
		do
			bump_draw(r, &s->b[1], false);
		while (fabs(s->b[1].lp - s->b[0].lp) < 5.0);
		s->b[1].h = unif(r, 0.6, 0.85);
	}
	if (fam == FAM_AGAINST) {
		s->b[0].lp = unif(r, 13.0, 22.0);
		s->b[0].lm = unif(r, 0.0, 3.0);
	}
	c->after = *s;
	c->c1 = c->c0;
	switch (fam) {
	case FAM_LEVEL:
		c->after.level *= exp2(sign(r) * unif(r, 0.5, 1.3));
		c->c1.link *= c->after.level / s->level;
		break;
	case FAM_PRIOR:
		oct = sign(r) * unif(r, 1.0, 2.3);
		c->c1.link *= exp2(oct);
		bump_move(&c->after.b[0], oct * unif(r, 0.3, 1.5),
			  oct * unif(r, 0.2, 1.0));
		c->after.level *= exp2(0.5 * oct);
		break;
	case FAM_AGAINST:
		c->c1.link *= 0.5;
		c->after.level *= 0.5;
		bump_move(&c->after.b[0], 3.0, 2.0);
		break;
	case FAM_TWOPEAK:
		c->after.b[0].h = s->b[1].h;
		c->after.b[1].h = 1.0;
		move_any(r, c);
		c->after.b[0] = s->b[0]; /* move_any moved it: only swap */
		c->after.b[0].h = s->b[1].h;
		break;
	default: /* any, plateau */
		move_any(r, c);
		break;
	}
	surf_finish(&c->before);
	surf_finish(&c->after);
}

static double surf_sample(gsl_rng *r, const struct surf *s, double noise,
			  uint64_t part, uint64_t credit)
{
	double v = surf_truth(s, part, credit) *
		   (1.0 + gsl_ran_gaussian(r, noise));

	return fmax(v, 1e-3 * s->level);
}

/* ---- the tuner ---- */

struct run {
	struct psd_tuner *t;
	struct psd_tuner_config cfg;
	gsl_rng *r;
	uint64_t step;
	const struct surf *s;
	const struct cond *c;
	double noise;
	bool conditions;
};

static void run_sample(struct run *u)
{
	struct psd_tuner_cond c = {
		.link_bytes_per_s = u->c->link,
		.compute_s = u->c->comp,
		.workers = 2,
	};
	bool changed;

	CHECK_EQ(psd_tuner_set_conditions(u->t, &c), 0);
	u->step++;
	CHECK_EQ(psd_tuner_report(u->t, u->step,
				  surf_sample(u->r, u->s, u->noise,
					      u->cfg.partition_bytes,
					      u->cfg.credit_bytes),
				  &u->cfg, &changed),
		 0);
}

static double run_quality(const struct run *u)
{
	return surf_truth(u->s, u->cfg.partition_bytes, u->cfg.credit_bytes) /
	       u->s->best;
}

/* conditions on (--autotune-conditions), unless MOVE_COND says */
static int move_cond_opt(void)
{
	return getenv("MOVE_COND") ? atoi(getenv("MOVE_COND")) : 1;
}

static void run_open(struct run *u, uint64_t seed, unsigned int after, int cond)
{
	struct psd_tuner_opts o;

	psd_tuner_opts_default(&o);
	o.part_min = UINT64_C(1) << LP_MIN;
	o.part_max = UINT64_C(1) << LP_MAX;
	o.credit_mult_max = MULT_MAX;
	o.warmup_samples = 0;
	o.steps_per_sample = 1;
	o.apply_delay = 1;
	o.max_samples = FIRST_BUDGET;
	o.retune_max_samples = after;
	o.retune_threshold = 0.15; /* one sample is a window here */
	if (cond >= 0)
		o.conditions = cond;
	o.seed = seed;
	if (getenv("MOVE_TR_PART"))
		o.region_part_oct = atof(getenv("MOVE_TR_PART"));
	if (getenv("MOVE_TR_MULT"))
		o.region_mult_oct = atof(getenv("MOVE_TR_MULT"));
	/* one surface's CSV, for a look */
	if (getenv("MOVE_LOG_SEED") &&
	    strtoull(getenv("MOVE_LOG_SEED"), NULL, 10) == seed)
		o.log_path = getenv("MOVE_LOG");
	CHECK_EQ(psd_tuner_create(&o, &u->t), 0);
	u->conditions = o.conditions;
	u->r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(u->r, seed * 7919 + 17);
	psd_tuner_current(u->t, &u->cfg);
}

/* One job: first search on @c->before, the change, @after samples of
 * re-tune.  q[0]: the first search's quality, q[1]: the re-tune's. */
static void run_scenario(const struct scenario *c, uint64_t seed,
			 unsigned int after, int cond, double *q)
{
	struct run u = { .s = &c->before, .c = &c->c0, .noise = c->noise };
	unsigned int i;

	run_open(&u, seed, after, cond);
	for (i = 0; i < FIRST_BUDGET; i++)
		run_sample(&u);
	q[0] = run_quality(&u);
	for (i = 0; i < SETTLE || (psd_tuner_phase(u.t) != PSD_TUNER_LOCKED &&
				   i < 4 * FIRST_BUDGET);
	     i++)
		run_sample(&u);
	u.s = &c->after;
	u.c = &c->c1;
	for (i = 0; i < after; i++)
		run_sample(&u);
	q[1] = run_quality(&u);
	if (getenv("MOVE_WHY"))
		printf("#       why: %s (search %u)\n", psd_tuner_why(u.t),
		       psd_tuner_search(u.t));
	gsl_rng_free(u.r);
	psd_tuner_destroy(u.t);
}

/* Random search, @n samples, the best noisy one wins: mean quality over
 * MOVE_RANDOM runs, *@one the first run's. */
static double run_random(gsl_rng *r, const struct surf *s, double noise,
			 unsigned int n, double *one)
{
	double sum = 0.0;
	double best;
	double truth = 0.0;
	double v;
	unsigned int k;
	unsigned int i;

	for (k = 0; k < MOVE_RANDOM; k++) {
		best = -1.0;
		for (i = 0; i < n; i++) {
			unsigned int lp =
				LP_MIN + (unsigned int)gsl_rng_uniform_int(
						 r, LP_MAX - LP_MIN + 1);
			uint64_t m = 1 + gsl_rng_uniform_int(r, MULT_MAX);
			uint64_t part = UINT64_C(1) << lp;

			v = surf_sample(r, s, noise, part, m * part);
			if (v > best) {
				best = v;
				truth = surf_truth(s, part, m * part);
			}
		}
		if (!k)
			*one = truth / s->best;
		sum += truth / s->best;
	}
	return sum / MOVE_RANDOM;
}

/* Per family and phase (0: first search, 1: re-tune). */
struct fam_fig {
	double tuner[2], tuner_worst[2];
	double random[2], random_worst[2];
	unsigned int n;
};

struct move_fig {
	struct fam_fig fam[FAM_N];
	struct fam_fig all;
};

static void fig_add(struct fam_fig *f, const double *q, const double *rq,
		    const double *r1)
{
	unsigned int p;

	for (p = 0; p < 2; p++) {
		if (!f->n) {
			f->tuner_worst[p] = HUGE_VAL;
			f->random_worst[p] = HUGE_VAL;
		}
		f->tuner[p] += q[p];
		f->random[p] += rq[p];
		f->tuner_worst[p] = fmin(f->tuner_worst[p], q[p]);
		f->random_worst[p] = fmin(f->random_worst[p], r1[p]);
	}
	f->n++;
}

static void fig_print(const char *name, const struct fam_fig *f)
{
	printf("#   %-8s %3u: first %.3f (worst %.3f), random %.3f "
	       "(worst %.3f); retune %.3f (worst %.3f), random %.3f "
	       "(worst %.3f)\n",
	       name, f->n, f->tuner[0] / f->n, f->tuner_worst[0],
	       f->random[0] / f->n, f->random_worst[0], f->tuner[1] / f->n,
	       f->tuner_worst[1], f->random[1] / f->n, f->random_worst[1]);
}

/* MOVE_SEED_BASE=n draws another set of surfaces (n = 100000: a second
 * range that shares no seed with the default 0) */
static uint64_t move_seed_base(void)
{
	return getenv("MOVE_SEED_BASE")
		       ? strtoull(getenv("MOVE_SEED_BASE"), NULL, 10)
		       : 0;
}

static unsigned int per_family(void)
{
	unsigned int n = MOVE_PER_FAM;

	if (TEST_SANITIZED)
		return 1;
	if (getenv("MOVE_N"))
		n = (unsigned int)atoi(getenv("MOVE_N"));
	return n > MOVE_MAX_SURFS ? MOVE_MAX_SURFS : n;
}

static void surf_print(const struct surf *s)
{
	unsigned int i;

	printf("floor %.2f level %.1f%s", s->floor, s->level,
	       s->flat ? " flat" : "");
	for (i = 0; i < s->nb; i++)
		printf(" [lp %.1f lm %.1f wp %.1f wm %.1f h %.2f]", s->b[i].lp,
		       s->b[i].lm, s->b[i].wp, s->b[i].wm, s->b[i].h);
}

static void scenario_print(const struct scenario *c, uint64_t seed,
			   const double *q, const double *rq)
{
	printf("#     %s %" PRIu64 ": first %.3f (random %.3f), retune %.3f "
	       "(random %.3f)\n#       ",
	       fam_name[c->fam], seed, q[0], rq[0], q[1], rq[1]);
	surf_print(&c->before);
	printf(" link %.2g comp %.2g\n#       ", c->c0.link, c->c0.comp);
	surf_print(&c->after);
	printf(" link %.2g comp %.2g\n", c->c1.link, c->c1.comp);
}

/* Every family's surfaces at @noise, re-tune budget @after. */
static void measure(double noise, unsigned int after, int cond,
		    struct move_fig *f)
{
	const char *only = getenv("MOVE_FAMILY");
	gsl_rng *gen = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng *rr = gsl_rng_alloc(gsl_rng_mt19937);
	struct scenario c;
	double q[2], rq[2], r1[2];
	unsigned int fam;
	unsigned int i;
	uint64_t seed;

	if (getenv("MOVE_NOISE"))
		noise = atof(getenv("MOVE_NOISE"));
	memset(f, 0, sizeof(*f));
	for (fam = 0; fam < FAM_N; fam++) {
		if (only && strcmp(only, fam_name[fam]))
			continue;
		for (i = 0; i < per_family(); i++) {
			seed = move_seed_base() + 1000 * (fam + 1) + i + 1;
			gsl_rng_set(gen, seed);
			scenario_draw(gen, fam, noise, &c);
			run_scenario(&c, seed, after, cond, q);
			gsl_rng_set(rr, seed + 77);
			rq[0] = run_random(rr, &c.before, noise, FIRST_BUDGET,
					   &r1[0]);
			rq[1] = run_random(rr, &c.after, noise, after, &r1[1]);
			fig_add(&f->fam[fam], q, rq, r1);
			fig_add(&f->all, q, rq, r1);
			if (getenv("MOVE_SEEDS"))
				scenario_print(&c, seed, q, rq);
		}
	}
	printf("# noise %.0f%%, re-tune budget %u, conditions %s:\n",
	       noise * 100, after,
	       cond < 0 ? "default" : (cond ? "on" : "off"));
	for (fam = 0; fam < FAM_N; fam++)
		if (f->fam[fam].n)
			fig_print(fam_name[fam], &f->fam[fam]);
	fig_print("all", &f->all);
	gsl_rng_free(gen);
	gsl_rng_free(rr);
}

static void test_move_generator(void)
{
	gsl_rng *gen = gsl_rng_alloc(gsl_rng_mt19937);
	struct scenario c;
	unsigned int moved = 0;
	unsigned int n = 0;
	unsigned int fam;
	unsigned int i;
	double lp;

	/* the change matters: the old best is off the new one in most
	 * surfaces of every moving family (level: it stays) */
	for (fam = 0; fam < FAM_N; fam++) {
		for (i = 0; i < 20; i++, n++) {
			gsl_rng_set(gen, 1000 * (fam + 1) + i + 1);
			scenario_draw(gen, fam, 0.1, &c);
			CHECK(c.before.best > 0.0 && c.after.best > 0.0);
			lp = round(c.before.b[0].lp); /* the old best */
			moved += surf_truth(
					 &c.after, UINT64_C(1) << (int)lp,
					 (uint64_t)round(exp2(c.before.b[0].lm))
						 << (int)lp) <
				 0.9 * c.after.best;
			if (fam == FAM_LEVEL)
				CHECK(fabs(c.after.b[0].lp - c.before.b[0].lp) <
				      1e-12);
		}
	}
	printf("# the old best is below 0.9 of the new in %u of %u\n", moved,
	       n);
	CHECK(moved >= n / 2);
	gsl_rng_free(gen);
}

static double fam_mean(const struct fam_fig *f, unsigned int p, bool rnd)
{
	return (rnd ? f->random[p] : f->tuner[p]) / f->n;
}

static bool move_bars_apply(void)
{
	return !TEST_SANITIZED && !getenv("MOVE_N") && !getenv("MOVE_FAMILY") &&
	       !getenv("MOVE_NOISE") && !getenv("MOVE_COND") &&
	       !getenv("MOVE_SEED_BASE");
}

/*
 * Never worse than starting over: on every family the first search and
 * the re-tune at least random search's mean less 0.02.  Issue 55's other
 * targets are not all reached; the bars below hold what is, with a
 * margin, so that a change that loses it fails (figures of this build,
 * 204 surfaces, 10 % noise, conditions on; MOVE_SEED_BASE=100000 in
 * parentheses):
 *   first search (15): mean 0.958 (0.953), target 0.97; worst 0.593
 *     (0.585), target 0.85; random 0.857.  The misses are peaks 2
 *     octaves wide or two peaks, where 15 samples find the lower one.
 *   re-tune (6): mean 0.899 (0.898), target 0.90, random 0.797; against
 *     0.816 vs random 0.813 (0.764 without the model check), any 0.850
 *     vs 0.730.
 *   re-tune (12): mean 0.954 (0.947), target 0.95, random 0.855.
 */
static void check_families(const struct move_fig *f)
{
	unsigned int fam;

	for (fam = 0; fam < FAM_N; fam++) {
		CHECK(fam_mean(&f->fam[fam], 0, false) >=
		      fam_mean(&f->fam[fam], 0, true) - 0.02);
		CHECK(fam_mean(&f->fam[fam], 1, false) >=
		      fam_mean(&f->fam[fam], 1, true) - 0.02);
	}
	CHECK(fam_mean(&f->all, 0, false) >= 0.95);
	CHECK(f->all.tuner_worst[0] >= 0.55);
}

static void test_move_retune_6(void)
{
	struct move_fig f;

	measure(0.10, 6, move_cond_opt(), &f);
	if (!move_bars_apply())
		return;
	check_families(&f);
	CHECK(fam_mean(&f.all, 1, false) >= 0.88);
	CHECK(fam_mean(&f.all, 1, false) >= fam_mean(&f.all, 1, true) + 0.06);
}

static void test_move_retune_12(void)
{
	struct move_fig f;

	measure(0.10, 12, move_cond_opt(), &f);
	if (!move_bars_apply())
		return;
	check_families(&f);
	CHECK(fam_mean(&f.all, 1, false) >= 0.94);
	CHECK(fam_mean(&f.all, 1, false) >= fam_mean(&f.all, 1, true) + 0.06);
}

const struct test_case test_list[] = {
	{ "move_generator", test_move_generator },
	{ "move_retune_6", test_move_retune_6 },
	{ "move_retune_12", test_move_retune_12 },
	{ NULL, NULL },
};
