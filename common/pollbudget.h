/* SPDX-License-Identifier: MIT */
/*
 * The adaptive budget of a bounded busy-poll before sleeping (PS_POLL_US):
 * the van loop polls epoll_wait(0) after a round that brought events
 * (van.c), psched_wait() polls the worker's completion counter
 * (worker/kvw_req.c).  Like the guest kernel's halt-polling, the budget
 * grows when a sleep ended within the maximum (a longer poll would have
 * caught the event, and saved this thread's and its vCPU's wake-up) and
 * halves when a poll ran out and the sleep after it was longer than the
 * maximum; so a serial caller's loop polls, and idle, streaming or
 * large-message loops poll next to never.  Not thread safe: each budget
 * belongs to one thread, or to a lock.
 */
#ifndef PSCHED_COMMON_POLLBUDGET_H
#define PSCHED_COMMON_POLLBUDGET_H

#include <stdbool.h>
#include <stdint.h>

/* First budget after it fell to 0, and the floor below which it is 0. */
#define PSD_POLL_START_US 8u
#define PSD_POLL_MIN_US	  4u

struct psd_poll_budget {
	unsigned max_us; /* PS_POLL_US; 0 = never poll */
	unsigned cur_us; /* what the next poll may take */
};

static inline void psd_poll_budget_init(struct psd_poll_budget *b,
					unsigned max_us)
{
	b->max_us = max_us;
	b->cur_us = max_us;
}

/*
 * After a poll that caught nothing (@polled) or no poll, a sleep of
 * @slept_us that ended with an event (@woke) or not: adapt.  A poll that
 * caught its event needs no call.
 */
static inline void psd_poll_budget_slept(struct psd_poll_budget *b, bool polled,
					 bool woke, uint64_t slept_us)
{
	if (!b->max_us)
		return;
	if (woke && slept_us < b->max_us) {
		b->cur_us = b->cur_us ? b->cur_us * 2 : PSD_POLL_START_US;
		if (b->cur_us > b->max_us)
			b->cur_us = b->max_us;
	} else if (polled) {
		b->cur_us /= 2;
		if (b->cur_us < PSD_POLL_MIN_US)
			b->cur_us = 0;
	}
}

#endif
