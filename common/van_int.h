/* SPDX-License-Identifier: MIT */
/* The van's state, shared by van.c (connections, receive, the thread) and
 * van_send.c (sends, the van thread's held answers). */
#ifndef PSCHED_COMMON_VAN_INT_H
#define PSCHED_COMMON_VAN_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "pollbudget.h"
#include "van.h"

struct psd_van {
	const struct psd_transport_ops *ops;
	struct psd_van_cb cb;
	uint64_t max_tensor;
	unsigned send_timeout_ms;
	struct psd_transport_knobs knobs;
	int epfd;
	int evfd;
	struct psd_listener lis;
	bool listening;
	/* A second listener on another transport (auto: shm beside tcp or
	 * rdma, psd_van_listen_also()); accepts like the first. */
	struct psd_listener lis2;
	bool listening2;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t lock; /* guards conns */
	struct psd_list conns;
	atomic_uint_fast64_t tx_bytes, rx_bytes, tx_msgs, rx_msgs;
	/* Pre-authentication limits (auth.h); the rest is van thread only. */
	unsigned auth_timeout_ms;
	unsigned preauth_max_frame;
	unsigned max_pending;
	bool trusted;	      /* psd_van_opts.trusted */
	atomic_uint npending; /* accepted, not yet authenticated */
	bool lis_paused;      /* listener out of epoll */
	uint64_t lis_resume_ms;
	int spare_fd; /* given up on EMFILE to shed one connection */
	/* Connections the van thread sent to with ->send_more() this
	 * round, each with a reference; flushed before it waits again. */
	struct psd_conn *held[64];
	unsigned nheld;
	/* Busy-poll after activity (van_wait(), pollbudget.h); van thread
	 * only. */
	struct psd_poll_budget poll;
	bool active; /* the last round received one small message */
	struct van_ratelimit {
		uint64_t next_ms;
		unsigned suppressed;
	} rl_accept, rl_pending, rl_deadline;
};

/* Van thread: send everything kept aside this round (van_send.c). */
void psd_van_flush_held(struct psd_van *van);

#endif
