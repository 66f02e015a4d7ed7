/* SPDX-License-Identifier: MIT */
/*
 * Shared by the tuner unit tests (test_tuner.c, test_tuner_search.c): a
 * synthetic cluster whose steps/s is a smooth peak over (log2 partition,
 * log2 credit multiple) plus noise, driving the real tuner, and a reader
 * for the tuner's CSV log.
 */
#ifndef PSCHED_TESTS_UNIT_TUNER_SIM_H
#define PSCHED_TESTS_UNIT_TUNER_SIM_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../harness.h"
#include "../../scheduler/tuner/tuner.h"
#include "../../scheduler/tuner/tuner_int.h"

#define KIB	      (UINT64_C(1) << 10)
#define MIB	      (UINT64_C(1) << 20)
#define SIM_MAX_STEPS 100000
#define CSV_MAX_ROWS  512

/* A synthetic cluster running the tuner's configs. */
struct sim {
	struct psd_tuner *t;
	struct psd_tuner_config run;	 /* config the workers use now */
	struct psd_tuner_config pending; /* next one, from apply_from_step */
	bool has_pending;
	uint64_t step;
	double peak_lp;	     /* log2 of the best partition */
	double peak_lm;	     /* log2 of the best credit multiple */
	double noise;	     /* relative sd of one step's score */
	double warmup_score; /* > 0: reported while the tuner warms up */
	double scale;	     /* every score is multiplied by this */
	double base;	     /* the score far from the peak (20) */
	double height;	     /* the peak's rise above it (100) */
	double width_lp;     /* the peak's sd in octaves of partition (2.5) */
	double dip;	     /* chance of a slow step (0.67x the score) */
	unsigned int changes;
	uint64_t fixed_part; /* != 0: every config must use it */
	uint64_t fixed_credit;
	gsl_rng *rng;
};

/* The noiseless score: base (20) + height (100) at the peak, Gaussian in
 * log space. */
static inline double sim_truth(const struct sim *s, uint64_t part,
			       uint64_t credit)
{
	double dp = log2((double)part) - s->peak_lp;
	double dm = log2((double)credit / (double)part) - s->peak_lm;

	return s->base +
	       s->height * exp(-dp * dp / (2.0 * s->width_lp * s->width_lp) -
			       dm * dm / (2.0 * 1.2 * 1.2));
}

/* The best noiseless score over the usable grid (4 KiB..64 MiB, 1..32x). */
static inline double sim_grid_best(const struct sim *s)
{
	double best = 0.0;
	unsigned int lp;
	uint64_t k;

	for (lp = 12; lp <= 26; lp++)
		for (k = 1; k <= 32; k++)
			best = fmax(best,
				    sim_truth(s, UINT64_C(1) << lp, k << lp));
	return best;
}

static inline void sim_check_rounding(const struct sim *s,
				      const struct psd_tuner_config *c)
{
	uint64_t p = c->partition_bytes;

	CHECK(p && !(p & (p - 1)));
	CHECK_U64(p % 4096, ==, 0);
	CHECK_U64(p, >=, 4 * KIB);
	CHECK_U64(p, <=, 64 * MIB);
	CHECK_U64(c->credit_bytes % p, ==, 0);
	CHECK_U64(c->credit_bytes / p, >=, 1);
	CHECK_U64(c->credit_bytes / p, <=, 32);
	if (s->fixed_part)
		CHECK_U64(p, ==, s->fixed_part);
	if (s->fixed_credit)
		CHECK_U64(c->credit_bytes, ==, s->fixed_credit);
}

static inline void sim_init(struct sim *s, const struct psd_tuner_opts *o,
			    unsigned long seed)
{
	memset(s, 0, sizeof(*s));
	CHECK_EQ(psd_tuner_create(o, &s->t), 0);
	psd_tuner_current(s->t, &s->run);
	sim_check_rounding(s, &s->run);
	s->peak_lp = 20.0; /* 1 MiB */
	s->peak_lm = 2.0;  /* 4x */
	s->noise = 0.02;
	s->scale = 1.0;
	s->base = 20.0;
	s->height = 100.0;
	s->width_lp = 2.5;
	s->step = 1;
	s->rng = gsl_rng_alloc(gsl_rng_mt19937);
	CHECK(s->rng);
	gsl_rng_set(s->rng, seed);
}

static inline void sim_fini(struct sim *s)
{
	psd_tuner_destroy(s->t);
	gsl_rng_free(s->rng);
}

/* Run one step and report it. */
static inline void sim_step(struct sim *s)
{
	struct psd_tuner_config next;
	double score;
	bool changed;

	if (s->has_pending && s->step >= s->pending.apply_from_step) {
		s->run = s->pending;
		s->has_pending = false;
	}
	score = sim_truth(s, s->run.partition_bytes, s->run.credit_bytes);
	score *= s->scale * (1.0 + gsl_ran_gaussian(s->rng, s->noise));
	if (s->dip > 0.0 && gsl_rng_uniform(s->rng) < s->dip)
		score *= 0.67;
	if (s->warmup_score > 0 && psd_tuner_phase(s->t) == PSD_TUNER_WARMUP)
		score = s->warmup_score;
	CHECK_EQ(psd_tuner_report(s->t, s->step, score, &next, &changed), 0);
	sim_check_rounding(s, &next);
	if (changed) {
		CHECK_U64(next.epoch, >, s->run.epoch);
		CHECK_U64(next.apply_from_step, >, s->step);
		s->pending = next;
		s->has_pending = true;
		s->changes++;
	}
	s->step++;
}

/* Step until the tuner is in @phase; returns the steps taken. */
static inline uint64_t sim_run_until(struct sim *s, enum psd_tuner_phase phase)
{
	uint64_t start = s->step;

	while (psd_tuner_phase(s->t) != phase) {
		CHECK_U64(s->step - start, <, SIM_MAX_STEPS);
		sim_step(s);
	}
	return s->step - start;
}

static inline void sim_opts(struct psd_tuner_opts *o, uint64_t seed)
{
	psd_tuner_opts_default(o);
	o->seed = seed;
	o->init_partition = 16 * KIB; /* far from the 1 MiB peak */
	o->init_credit = 16 * KIB;
}

/* The locked config's true score, relative to the best on the grid. */
static inline double sim_locked_quality(struct sim *s)
{
	struct psd_tuner_config best;
	double ref;

	CHECK_EQ(psd_tuner_best(s->t, &best, &ref), 0);
	return sim_truth(s, best.partition_bytes, best.credit_bytes) /
	       sim_grid_best(s);
}

/* ---- CSV ---- */

struct csv {
	unsigned int nrows;
	char rows[CSV_MAX_ROWS][160];
};

static inline char *csv_tmp_path(char *buf, size_t len)
{
	int fd;

	snprintf(buf, len, "%s/test_tuner.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(buf);
	CHECK(fd >= 0);
	close(fd);
	return buf;
}

static inline void csv_load(const char *path, struct csv *c)
{
	char line[sizeof(c->rows[0])];
	FILE *f;

	memset(c, 0, sizeof(*c));
	f = fopen(path, "r");
	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		CHECK(c->nrows < CSV_MAX_ROWS);
		CHECK(strchr(line, '\n') != NULL); /* whole line */
		line[strcspn(line, "\n")] = '\0';
		memcpy(c->rows[c->nrows++], line, sizeof(line));
	}
	fclose(f);
}

/* Field @k (0-based) of @row into @out. */
static inline void csv_field(const char *row, unsigned int k, char *out,
			     size_t len)
{
	size_t n;

	while (k-- > 0) {
		row = strchr(row, ',');
		CHECK(row != NULL);
		row++;
	}
	n = strcspn(row, ",");
	CHECK(n < len);
	memcpy(out, row, n);
	out[n] = '\0';
}

static inline unsigned int csv_count_phase(const struct csv *c,
					   const char *phase)
{
	unsigned int n = 0;
	unsigned int i;
	char f[32];

	for (i = 1; i < c->nrows; i++) {
		csv_field(c->rows[i], 8, f, sizeof(f));
		n += !strcmp(f, phase);
	}
	return n;
}

/* ---- tests ---- */

#endif
