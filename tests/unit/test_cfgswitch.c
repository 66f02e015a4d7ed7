// SPDX-License-Identifier: MIT
/*
 * The scheduler's config switches (scheduler/cfgswitch.c) with a worker
 * leaving, in process: a scheduler state built by hand (three workers,
 * no connections, so nothing is sent), driven through the calls the van
 * makes (a proposal, the workers' PREPARE answers, a leave), and the
 * commits read back from what the scheduler keeps.  The point: a
 * membership-only switch must start right after the leaver's last step,
 * whatever size switch was committed before the leave; one that started
 * later would leave a step waiting for a push that never comes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "node.h"
#include "../../scheduler/role.h"
#include "../../scheduler/sched.h"

#define CS_W 3

struct cs_job {
	struct psched_node n;
	struct psd_sched s;
	struct sched_node nodes[CS_W];
	uint8_t members[1];
};

static void cs_start(struct cs_job *j, uint64_t part, uint64_t credit)
{
	unsigned i;

	memset(j, 0, sizeof(*j));
	j->n.role_state = &j->s;
	j->n.cfg.heartbeat_timeout_ms = 60000;
	j->s.nodes = j->nodes;
	j->s.cap = CS_W;
	j->s.nwork = CS_W;
	j->s.table_sent = true;
	j->s.members_len = 1;
	j->s.sw.members = j->members;
	j->s.cur_part = part;
	j->s.cur_credit = credit;
	j->s.hist[0] = (struct sched_commit){ 0, part, credit };
	j->s.nhist = 1;
	for (i = 0; i < CS_W; i++) {
		j->nodes[i].used = true;
		j->nodes[i].role = PSCHED_ROLE_WORKER;
		j->nodes[i].rank = (int)i;
		snprintf(j->nodes[i].desc, sizeof(j->nodes[i].desc),
			 "worker rank %u", i);
	}
}

/* Worker @w answers the open PREPARE: it pushed up to @step. */
static void cs_ack(struct cs_job *j, unsigned w, uint64_t step)
{
	Psched__ConfigAck a = PSCHED__CONFIG_ACK__INIT;

	a.epoch = j->s.sw.epoch;
	a.max_step = step;
	psd_sched_on_config_ack(&j->n, &j->nodes[w], &a);
}

/* The last commit the scheduler kept. */
static const struct sched_commit *cs_last(const struct cs_job *j)
{
	return &j->s.hist[j->s.nhist - 1];
}

/* The size switch committed from the step after the leaver's last: the
 * membership-only switch starts at that same step, with those sizes. */
static void test_cfgswitch_leave_at_switch_start(void)
{
	struct cs_job j;

	cs_start(&j, 65536, 65536);
	CHECK_EQ(psd_sched_propose_config(&j.n, 4096, 16384), 0);
	cs_ack(&j, 0, 6);
	cs_ack(&j, 1, 6);
	cs_ack(&j, 2, 6);
	CHECK(!j.s.sw.open);
	CHECK_U64(cs_last(&j)->from, ==, 7);
	/* Worker 2 stops after step 6 and leaves. */
	psd_sched_on_leave(&j.n, &j.nodes[2]);
	CHECK(j.s.sw.open && j.s.sw.members_only);
	/* No size switch while it waits. */
	CHECK_EQ(psd_sched_propose_config(&j.n, 1 << 20, 0), -EBUSY);
	cs_ack(&j, 0, 7);
	cs_ack(&j, 1, 7);
	cs_ack(&j, 2, 6);
	CHECK(!j.s.sw.open);
	CHECK(j.nodes[2].left);
	CHECK_U64(cs_last(&j)->from, ==, 7);
	CHECK_U64(cs_last(&j)->part, ==, 4096);
	CHECK_U64(j.s.cur_credit, ==, 16384);
	CHECK(!j.s.reapply);
	CHECK_EQ(j.s.sw.nmembers, 2);
	CHECK_EQ(j.members[0], 0x03);
	/* Size switches run again. */
	CHECK_EQ(psd_sched_propose_config(&j.n, 1 << 20, 0), 0);
}

/* The others pushed one step more than the leaver before a size switch
 * committed (from the step after theirs): the membership switch starts
 * after the leaver's step with the layout in force there, and the size
 * switch it overrode is proposed again. */
static void test_cfgswitch_leave_before_switch_start(void)
{
	struct cs_job j;

	cs_start(&j, 65536, 65536);
	CHECK_EQ(psd_sched_propose_config(&j.n, 4096, 16384), 0);
	cs_ack(&j, 0, 7);
	cs_ack(&j, 1, 7);
	cs_ack(&j, 2, 6);
	CHECK_U64(cs_last(&j)->from, ==, 8);
	psd_sched_on_leave(&j.n, &j.nodes[2]);
	cs_ack(&j, 0, 7);
	cs_ack(&j, 1, 7);
	cs_ack(&j, 2, 6);
	CHECK(!j.s.sw.open);
	CHECK(j.nodes[2].left);
	CHECK_U64(cs_last(&j)->from, ==, 7);
	CHECK_U64(cs_last(&j)->part, ==, 65536);
	CHECK_U64(cs_last(&j)->credit, ==, 65536);
	CHECK(j.s.reapply);
	/* The next tick proposes 4096/16384 again, to the two members. */
	psd_sched_members_kick(&j.n);
	CHECK(j.s.sw.open && !j.s.sw.members_only);
	CHECK(!j.s.reapply);
	CHECK_U64(j.s.sw.part, ==, 4096);
	CHECK_EQ(j.s.sw.nmembers, 2);
	cs_ack(&j, 0, 8);
	cs_ack(&j, 1, 8);
	CHECK(!j.s.sw.open);
	CHECK_U64(cs_last(&j)->from, ==, 9);
	CHECK_U64(j.s.cur_part, ==, 4096);
	CHECK_U64(j.s.cur_credit, ==, 16384);
}

/* A size switch open when the leave comes is called off: it would start
 * after the others' last step. */
static void test_cfgswitch_leave_calls_off_open_switch(void)
{
	struct cs_job j;

	cs_start(&j, 65536, 65536);
	CHECK_EQ(psd_sched_propose_config(&j.n, 4096, 16384), 0);
	cs_ack(&j, 0, 5);
	psd_sched_on_leave(&j.n, &j.nodes[1]);
	CHECK_U64(j.s.switches_aborted, ==, 1);
	CHECK(j.s.sw.open && j.s.sw.members_only);
	cs_ack(&j, 0, 5);
	cs_ack(&j, 1, 4);
	cs_ack(&j, 2, 5);
	CHECK(!j.s.sw.open);
	CHECK_U64(cs_last(&j)->from, ==, 5);
	CHECK_U64(j.s.cur_part, ==, 65536);
	CHECK_EQ(j.members[0], 0x05);
}

/* Switches committed faster than the steps run (--config-cycle every
 * 10 ms): each starts after the one before, so twenty of them run far
 * ahead of the workers, who are still at step 4.  A leave after step 4
 * must keep the layout committed from step 5, long out of the last
 * eight commits (before: the oldest one kept, another layout). */
static void test_cfgswitch_leave_behind_many_commits(void)
{
	struct cs_job j;
	uint64_t part;
	unsigned k;

	cs_start(&j, 65536, 65536);
	for (k = 0; k < 20; k++) {
		/* step 5's layout, 4096, is the only one of its size */
		part = !k ? 4096 : k % 2 ? 1 << 20 : 65536;
		CHECK_EQ(psd_sched_propose_config(&j.n, part, part), 0);
		cs_ack(&j, 0, 4);
		cs_ack(&j, 1, 4);
		cs_ack(&j, 2, 4);
		CHECK(!j.s.sw.open);
		CHECK_U64(cs_last(&j)->from, ==, 5 + k);
	}
	psd_sched_on_leave(&j.n, &j.nodes[2]);
	cs_ack(&j, 0, 4);
	cs_ack(&j, 1, 4);
	cs_ack(&j, 2, 4);
	CHECK(!j.s.sw.open);
	CHECK_U64(cs_last(&j)->from, ==, 5);
	CHECK_U64(cs_last(&j)->part, ==, 4096);
}

const struct test_case test_list[] = {
	{ "cfgswitch_leave_behind_many_commits",
	  test_cfgswitch_leave_behind_many_commits },
	{ "cfgswitch_leave_at_switch_start",
	  test_cfgswitch_leave_at_switch_start },
	{ "cfgswitch_leave_before_switch_start",
	  test_cfgswitch_leave_before_switch_start },
	{ "cfgswitch_leave_calls_off_open_switch",
	  test_cfgswitch_leave_calls_off_open_switch },
	{ NULL, NULL },
};
