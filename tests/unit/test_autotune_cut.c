// SPDX-License-Identifier: MIT
/*
 * The scheduler's autotune wiring (scheduler/autotune.c) cuts a search
 * sample short when its config has run for a while without the slowest
 * worker finishing a step: the clock starts only once every live worker
 * is past the step before the switch, and a short wait cuts nothing.
 */
#include <stdio.h>

#include "../harness.h"
#include "../../common/internal.h"
#include "../../scheduler/autotune.h"
#include "psched.h"

struct drive {
	struct psd_autotune *at;
	uint64_t step;	/* next step the workers complete */
	uint32_t epoch; /* last switch epoch */
	uint64_t gate;	/* first step of the last committed config */
};

/* Commit the wanted config, if any, from the step after the one the
 * workers are in (d->step). */
static bool drive_commit(struct drive *d)
{
	struct psd_cfg_proposal *p = psd_autotune_proposal(d->at);

	if (!p)
		return false;
	d->gate = d->step + 1;
	p->settled(p, true, ++d->epoch, d->gate);
	return true;
}

/* Both workers complete a step at 10 steps/s. */
static void drive_step(struct drive *d)
{
	psd_autotune_metrics(d->at, 0, d->step, 0.1, 1e9, false, 0.0, 0.05);
	psd_autotune_metrics(d->at, 1, d->step, 0.1, 1e9, false, 0.0, 0.05);
	d->step++;
}

static void test_autotune_cuts_a_stuck_sample(void)
{
	struct psched_cfg cfg;
	struct drive d = { .step = 1 };
	uint64_t now;
	unsigned int i;

	psd_cfg_defaults(&cfg);
	cfg.autotune = 1;
	cfg.autotune_steps_per_sample = 2;
	cfg.autotune_warmup_samples = 1;
	cfg.autotune_seed = 5;
	CHECK_EQ(psd_autotune_create(&cfg, 2, &d.at), 0);
	psd_autotune_worker_add(d.at, 0);
	psd_autotune_worker_add(d.at, 1);
	/* the warmup sample and two search samples at 10 steps/s */
	for (i = 0; i < 12; i++) {
		drive_commit(&d);
		drive_step(&d);
	}
	for (i = 0; i < 20 && !drive_commit(&d); i++)
		drive_step(&d);
	CHECK(i < 20);
	/* the step before the gate: worker 0 is done, worker 1 is not */
	CHECK_U64(d.gate, ==, d.step + 1);
	psd_autotune_metrics(d.at, 0, d.step, 0.1, 1e9, false, 0.0, 0.05);
	now = psd_now_ms();
	psd_autotune_tick(d.at, now + 60000);
	CHECK(!psd_autotune_proposal(d.at));
	psd_autotune_metrics(d.at, 1, d.step, 0.1, 1e9, false, 0.0, 0.05);
	now = psd_now_ms();
	/* 0.1 s without a step: still 10 steps/s possible */
	psd_autotune_tick(d.at, now + 100);
	CHECK(!psd_autotune_proposal(d.at));
	/* 60 s without a step: far below half the best, next config */
	psd_autotune_tick(d.at, now + 60000);
	CHECK(psd_autotune_proposal(d.at));
	/* the workers finish their step while the switch is open: its
	 * commit starts the clock at once */
	d.step++;
	psd_autotune_metrics(d.at, 0, d.step, 0.1, 1e9, false, 0.0, 0.05);
	psd_autotune_metrics(d.at, 1, d.step, 0.1, 1e9, false, 0.0, 0.05);
	CHECK(drive_commit(&d));
	CHECK(!psd_autotune_proposal(d.at));
	now = psd_now_ms();
	psd_autotune_tick(d.at, now + 60000);
	CHECK(psd_autotune_proposal(d.at));
	psd_autotune_destroy(d.at);
}

/* A switch called off leaves the config wanted, the same one; a commit
 * settles it, once. */
static void test_autotune_proposal_settles_once(void)
{
	struct psched_cfg cfg;
	struct psd_cfg_proposal *p, *q;
	struct psd_autotune *at;
	uint64_t part, credit;

	psd_cfg_defaults(&cfg);
	cfg.autotune = 1;
	cfg.autotune_seed = 5;
	CHECK_EQ(psd_autotune_create(&cfg, 1, &at), 0);
	p = psd_autotune_proposal(at);
	CHECK(p != NULL);
	if (!p)
		return;
	part = p->part;
	credit = p->credit;
	CHECK(part >= 4096 && credit >= part);
	p->settled(p, false, 1, 0);
	q = psd_autotune_proposal(at);
	CHECK(q == p);
	CHECK_U64(q->part, ==, part);
	CHECK_U64(q->credit, ==, credit);
	q->settled(q, true, 2, 7);
	CHECK(!psd_autotune_proposal(at));
	/* a late duplicate settle changes nothing */
	q->settled(q, true, 2, 9);
	CHECK(!psd_autotune_proposal(at));
	psd_autotune_destroy(at);
}

const struct test_case test_list[] = {
	{ "autotune_cuts_a_stuck_sample", test_autotune_cuts_a_stuck_sample },
	{ "autotune_proposal_settles_once",
	  test_autotune_proposal_settles_once },
	{ NULL, NULL },
};
