// SPDX-License-Identifier: MIT
/*
 * The adaptive busy-poll budget (common/pollbudget.h, PS_POLL_US) that the
 * van loop and psched_wait() spend before sleeping: it grows when a sleep
 * ended within the maximum, halves to 0 when polls run out and the sleeps
 * after them are long, never exceeds the maximum, and 0 turns it off.
 */
#include <stddef.h>

#include "../harness.h"
#include "pollbudget.h"

static void test_pollbudget_starts_at_max(void)
{
	struct psd_poll_budget b;

	psd_poll_budget_init(&b, 50);
	CHECK_EQ(b.cur_us, 50);
	CHECK_EQ(b.max_us, 50);
}

/* Polls that run out and are followed by long sleeps (an idle or slow
 * peer) halve the budget down to 0: such a loop stops polling. */
static void test_pollbudget_long_sleeps_shrink_to_zero(void)
{
	struct psd_poll_budget b;
	unsigned prev, rounds = 0;

	psd_poll_budget_init(&b, 50);
	while (b.cur_us && rounds < 100) {
		prev = b.cur_us;
		psd_poll_budget_slept(&b, true, true, 5000);
		CHECK_INT(b.cur_us, <, prev);
		rounds++;
	}
	CHECK_EQ(b.cur_us, 0);
	CHECK_INT(rounds, <=, 5);
	/* A timeout (no event) after a poll counts as long as well. */
	psd_poll_budget_init(&b, 50);
	psd_poll_budget_slept(&b, true, false, 10);
	CHECK_EQ(b.cur_us, 25);
	/* Without a poll, a long sleep changes nothing (nothing was
	 * spent). */
	psd_poll_budget_slept(&b, false, true, 5000);
	CHECK_EQ(b.cur_us, 25);
}

/* A sleep that ended within the maximum: a longer poll would have caught
 * it, so the budget grows (from 0 too) up to the maximum, not beyond. */
static void test_pollbudget_short_sleeps_grow_to_max(void)
{
	struct psd_poll_budget b;
	unsigned prev, rounds = 0;

	psd_poll_budget_init(&b, 100);
	b.cur_us = 0;
	psd_poll_budget_slept(&b, false, true, 30);
	CHECK_EQ(b.cur_us, PSD_POLL_START_US);
	while (b.cur_us < 100 && rounds < 100) {
		prev = b.cur_us;
		psd_poll_budget_slept(&b, true, true, 60);
		CHECK_INT(b.cur_us, >, prev);
		rounds++;
	}
	CHECK_EQ(b.cur_us, 100);
	psd_poll_budget_slept(&b, true, true, 1);
	CHECK_EQ(b.cur_us, 100);
}

static void test_pollbudget_zero_max_never_polls(void)
{
	struct psd_poll_budget b;

	psd_poll_budget_init(&b, 0);
	CHECK_EQ(b.cur_us, 0);
	psd_poll_budget_slept(&b, false, true, 0);
	psd_poll_budget_slept(&b, false, true, 1);
	CHECK_EQ(b.cur_us, 0);
}

const struct test_case test_list[] = {
	{ "pollbudget_starts_at_max", test_pollbudget_starts_at_max },
	{ "pollbudget_long_sleeps_shrink_to_zero",
	  test_pollbudget_long_sleeps_shrink_to_zero },
	{ "pollbudget_short_sleeps_grow_to_max",
	  test_pollbudget_short_sleeps_grow_to_max },
	{ "pollbudget_zero_max_never_polls",
	  test_pollbudget_zero_max_never_polls },
	{ NULL, NULL },
};
