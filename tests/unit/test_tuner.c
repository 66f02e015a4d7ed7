// SPDX-License-Identifier: MIT
/*
 * The tuner state machine (scheduler/tuner/tuner.c) driven by a synthetic
 * cluster whose steps/s is a smooth peak over (log2 partition, log2
 * credit multiple) plus noise: options, sampling, lock-in, logging.
 * The search across the space, re-tuning and the noise model are in
 * test_tuner_search.c.
 */
#include "tuner_sim.h"

static void test_tuner_rounding_rules(void)
{
	struct psd_tuner_opts o;
	struct psd_tuner *t = NULL;
	double x[2];
	uint64_t p;
	uint64_t c;

	psd_tuner_opts_default(&o);
	CHECK_EQ(psd_tuner_create(&o, &t), 0);
	x[0] = -1.0;
	x[1] = 2.0;
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 4 * KIB);
	CHECK_U64(c, ==, 32 * 4 * KIB);
	x[0] = NAN;
	x[1] = NAN;
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 4 * KIB);
	CHECK_U64(c, ==, 4 * KIB);
	x[0] = 0.5; /* 2^(12 + 7) */
	x[1] = 0.4; /* 2^(0.4 * 5) = 4x */
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 512 * KIB);
	CHECK_U64(c, ==, 4 * 512 * KIB);
	x[0] = 1.0;
	x[1] = log2(3.2) / 5.0; /* 3.2x rounds to 3x */
	psd_tuner_round(t, x, &p, &c);
	CHECK_U64(p, ==, 64 * MIB);
	CHECK_U64(c, ==, 3 * 64 * MIB);
	psd_tuner_destroy(t);
}

static void test_tuner_rejects_bad_options(void)
{
	struct psd_tuner_opts o;
	struct psd_tuner *t = NULL;
	struct psd_tuner_config next;
	bool changed;

	psd_tuner_opts_default(&o);
	o.part_min = 6000;
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.part_min = 2048; /* below the 4 KiB alignment */
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.steps_per_sample = 0;
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.fixed_partition = MIB;
	o.fixed_credit = 4 * MIB; /* nothing left to tune */
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.fixed_credit = 2 * KIB; /* below every partition */
	CHECK_EQ(psd_tuner_create(&o, &t), -EINVAL);
	psd_tuner_opts_default(&o);
	o.log_path = "/nonexistent-dir/tuner.csv";
	CHECK_EQ(psd_tuner_create(&o, &t), -ENOENT);
	psd_tuner_opts_default(&o);
	CHECK_EQ(psd_tuner_create(&o, &t), 0);
	CHECK_EQ(psd_tuner_report(t, 1, 0.0, &next, &changed), -EINVAL);
	CHECK_EQ(psd_tuner_report(t, 1, NAN, &next, &changed), -EINVAL);
	CHECK(!changed);
	CHECK_EQ(psd_tuner_best(t, &next, NULL), -EAGAIN);
	psd_tuner_destroy(t);
	psd_tuner_destroy(NULL);
}

/* A sample is the median of its window: one outlier step changes nothing. */
static void test_tuner_sample_is_median(void)
{
	/* windows of 4: medians (100 + 102) / 2 and (48 + 50) / 2 */
	static const double scores[] = { 100.0, 98.0, 1e6, 102.0,
					 50.0,	52.0, 0.5, 48.0 };
	static struct csv c;
	struct psd_tuner_config next;
	struct psd_tuner_opts o;
	struct psd_tuner *t = NULL;
	char path[256];
	char f[32];
	bool changed;
	unsigned int i;

	psd_tuner_opts_default(&o);
	o.warmup_samples = 1;
	o.steps_per_sample = 4;
	o.log_path = csv_tmp_path(path, sizeof(path));
	CHECK_EQ(psd_tuner_create(&o, &t), 0);
	for (i = 0; i < 8; i++)
		CHECK_EQ(psd_tuner_report(t, i, scores[i], &next, &changed), 0);
	psd_tuner_destroy(t);
	csv_load(path, &c);
	unlink(path);
	CHECK_EQ(c.nrows, 3);
	csv_field(c.rows[1], 5, f, sizeof(f));
	CHECK_STR(f, "101");
	csv_field(c.rows[2], 5, f, sizeof(f));
	CHECK_STR(f, "49");
	csv_field(c.rows[2], 1, f, sizeof(f));
	CHECK_STR(f, "7");
}

/* Warmup samples never reach the GP: a huge warmup score is ignored. */
static void test_tuner_warmup_discarded(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int i;

	sim_opts(&o, 3);
	sim_init(&s, &o, 3);
	s.warmup_score = 1e6;
	for (i = 0; i < o.warmup_samples * o.steps_per_sample - 1; i++) {
		sim_step(&s);
		CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_WARMUP);
	}
	sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_EXPLORE);
	CHECK_EQ(s.changes, 0);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(s.changes > 0);
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
}

/* Over several seeds, locks in near the optimum within max_samples. */
static void test_tuner_locks_near_optimum(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	uint64_t steps;
	double q;
	unsigned int seed;

	for (seed = 1; seed <= 5; seed++) {
		sim_opts(&o, seed);
		sim_init(&s, &o, 100 + seed);
		steps = sim_run_until(&s, PSD_TUNER_LOCKED);
		q = sim_locked_quality(&s);
		printf("# seed %u: locked after %llu steps, %u changes, "
		       "quality %.3f\n",
		       seed, (unsigned long long)steps, s.changes, q);
		/* warmup + max_samples, plus the steps lost to apply_delay */
		CHECK_U64(steps, <=,
			  (o.warmup_samples + o.max_samples) *
				  (o.steps_per_sample + o.apply_delay));
		CHECK(q > 0.95);
		sim_fini(&s);
	}
}

static void test_tuner_csv_log(void)
{
	static struct csv c;
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;
	char path[256];
	char f[32];
	unsigned int i;
	unsigned int nsample;

	sim_opts(&o, 11);
	o.log_path = csv_tmp_path(path, sizeof(path));
	sim_init(&s, &o, 11);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	sim_fini(&s); /* closes the file */
	csv_load(path, &c);
	unlink(path);
	CHECK_STR(c.rows[0], "sample,step,epoch,partition_bytes,credit_bytes,"
			     "score_steps_per_s,predicted_mean,predicted_sd,"
			     "phase");
	CHECK_EQ(csv_count_phase(&c, "warmup"), o.warmup_samples);
	CHECK_EQ(csv_count_phase(&c, "chosen"), 1);
	nsample = csv_count_phase(&c, "explore");
	CHECK(nsample >= 5 && nsample <= o.max_samples);
	CHECK_EQ(c.nrows, 1 + o.warmup_samples + nsample + 1);
	for (i = 1; i < c.nrows; i++) {
		csv_field(c.rows[i], 0, f, sizeof(f));
		/* one row per sample, numbered; chosen repeats the last */
		CHECK_EQ(strtoul(f, NULL, 10), i < c.nrows - 1 ? i : i - 1);
	}
	csv_field(c.rows[c.nrows - 1], 8, f, sizeof(f));
	CHECK_STR(f, "chosen");
	csv_field(c.rows[c.nrows - 1], 3, f, sizeof(f));
	CHECK_U64(strtoull(f, NULL, 10), ==, best.partition_bytes);
	csv_field(c.rows[c.nrows - 1], 4, f, sizeof(f));
	CHECK_U64(strtoull(f, NULL, 10), ==, best.credit_bytes);
	/* GP-proposed configs carry a prediction; the first sample none */
	csv_field(c.rows[o.warmup_samples + 1], 6, f, sizeof(f));
	CHECK_STR(f, "nan");
	csv_field(c.rows[c.nrows - 2], 6, f, sizeof(f));
	CHECK(isfinite(strtod(f, NULL)));
}

/* Locked stays locked under noise, retunes when the peak moves. */
static void test_tuner_retunes_when_peak_moves(void)
{
	struct psd_tuner_config first;
	struct psd_tuner_config second;
	struct psd_tuner_opts o;
	struct sim s;
	unsigned int i;

	sim_opts(&o, 5);
	sim_init(&s, &o, 5);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_best(s.t, &first, NULL), 0);
	for (i = 0; i < 40 * o.steps_per_sample; i++) {
		sim_step(&s);
		CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	}
	s.peak_lp = 15.0; /* 32 KiB */
	s.peak_lm = 4.0;  /* 16x */
	sim_run_until(&s, PSD_TUNER_RETUNE);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_best(s.t, &second, NULL), 0);
	printf("# first %llu/%llu, second %llu/%llu, quality %.3f\n",
	       (unsigned long long)first.partition_bytes,
	       (unsigned long long)first.credit_bytes,
	       (unsigned long long)second.partition_bytes,
	       (unsigned long long)second.credit_bytes, sim_locked_quality(&s));
	CHECK(second.partition_bytes != first.partition_bytes ||
	      second.credit_bytes != first.credit_bytes);
	CHECK(sim_locked_quality(&s) > 0.9);
	/* and it settles again */
	for (i = 0; i < 20 * o.steps_per_sample; i++)
		sim_step(&s);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_LOCKED);
	sim_fini(&s);
}

static void test_tuner_workers_changed_retunes(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	char path[256];
	static struct csv c;
	char f[32];

	sim_opts(&o, 9);
	o.log_path = csv_tmp_path(path, sizeof(path));
	sim_init(&s, &o, 9);
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_STR(psd_tuner_why(s.t), "");
	CHECK_EQ(psd_tuner_workers_changed(s.t), 0);
	CHECK_EQ(psd_tuner_phase(s.t), PSD_TUNER_RETUNE);
	CHECK_STR(psd_tuner_why(s.t), "the set of workers changed");
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
	csv_load(path, &c);
	unlink(path);
	CHECK_EQ(csv_count_phase(&c, "chosen"), 2);
	CHECK_EQ(csv_count_phase(&c, "warmup"), o.warmup_samples + 1);
	CHECK(csv_count_phase(&c, "retune") >= 1);
	csv_field(c.rows[c.nrows - 1], 8, f, sizeof(f));
	CHECK_STR(f, "chosen");
}

static void test_tuner_fixed_partition_tunes_credit_only(void)
{
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 21);
	o.fixed_partition = 256 * KIB;
	sim_init(&s, &o, 21);
	s.fixed_part = 256 * KIB;
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(s.changes >= 2);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	CHECK_U64(best.partition_bytes, ==, 256 * KIB);
	CHECK_U64(best.credit_bytes / best.partition_bytes, >=, 3);
	CHECK_U64(best.credit_bytes / best.partition_bytes, <=, 6);
	sim_fini(&s);
}

static void test_tuner_fixed_credit_tunes_partition_only(void)
{
	struct psd_tuner_config best;
	struct psd_tuner_opts o;
	struct sim s;

	sim_opts(&o, 22);
	o.fixed_credit = 4 * MIB;
	sim_init(&s, &o, 22);
	s.fixed_credit = 4 * MIB;
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(s.changes >= 2);
	CHECK_EQ(psd_tuner_best(s.t, &best, NULL), 0);
	CHECK_U64(best.credit_bytes, ==, 4 * MIB);
	/* the peak along credit = 4 MiB is at 1 MiB (4x) */
	CHECK_U64(best.partition_bytes, >=, 512 * KIB);
	CHECK_U64(best.partition_bytes, <=, 2 * MIB);
	sim_fini(&s);
}

/* Steps before apply_from_step still ran the old config: not counted. */
static void test_tuner_ignores_steps_before_apply(void)
{
	struct psd_tuner_config cur;
	struct psd_tuner_config next;
	struct psd_tuner_opts o;
	struct sim s;
	bool changed;
	unsigned int i;

	sim_opts(&o, 4);
	sim_init(&s, &o, 4);
	while (!s.has_pending)
		sim_step(&s);
	psd_tuner_current(s.t, &cur);
	for (i = 0; i < 5 * o.steps_per_sample; i++) {
		CHECK_EQ(psd_tuner_report(s.t, cur.apply_from_step - 1, 1e9,
					  &next, &changed),
			 0);
		CHECK(!changed);
		CHECK_U64(next.epoch, ==, cur.epoch);
	}
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK(sim_locked_quality(&s) > 0.9);
	sim_fini(&s);
}

static void test_tuner_progress_line(void)
{
	struct psd_tuner_opts o;
	struct sim s;
	char line[256];

	sim_opts(&o, 8);
	sim_init(&s, &o, 8);
	CHECK_EQ(psd_tuner_progress(s.t, line, 0), -EINVAL);
	CHECK_EQ(psd_tuner_progress(s.t, line, sizeof(line)), 0);
	CHECK(strstr(line, "tuner warmup") == line);
	CHECK(strstr(line, "partition 16 KiB, credit 16 KiB (1x)"));
	sim_run_until(&s, PSD_TUNER_LOCKED);
	CHECK_EQ(psd_tuner_progress(s.t, line, sizeof(line)), 0);
	CHECK(strstr(line, "tuner locked") == line);
	CHECK(strstr(line, "best "));
	CHECK(!strchr(line, '\n'));
	CHECK_EQ(psd_tuner_progress(s.t, line, 8), 0);
	CHECK_EQ(strlen(line), 7);
	sim_fini(&s);
}

/* Peaks all over the space, from a cold start at 16 KiB, 1x. */

const struct test_case test_list[] = {
	{ "tuner_rounding_rules", test_tuner_rounding_rules },
	{ "tuner_rejects_bad_options", test_tuner_rejects_bad_options },
	{ "tuner_sample_is_median", test_tuner_sample_is_median },
	{ "tuner_warmup_discarded", test_tuner_warmup_discarded },
	{ "tuner_locks_near_optimum", test_tuner_locks_near_optimum },
	{ "tuner_csv_log", test_tuner_csv_log },
	{ "tuner_retunes_when_peak_moves", test_tuner_retunes_when_peak_moves },
	{ "tuner_workers_changed_retunes", test_tuner_workers_changed_retunes },
	{ "tuner_fixed_partition_tunes_credit_only",
	  test_tuner_fixed_partition_tunes_credit_only },
	{ "tuner_fixed_credit_tunes_partition_only",
	  test_tuner_fixed_credit_tunes_partition_only },
	{ "tuner_ignores_steps_before_apply",
	  test_tuner_ignores_steps_before_apply },
	{ "tuner_progress_line", test_tuner_progress_line },
	{ NULL, NULL },
};
