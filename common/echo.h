/* SPDX-License-Identifier: MIT */
/*
 * Echoes: a worker's round trip to a server measured while nothing of
 * its own is in flight (a Control Echo the server sends straight back),
 * so no queue of the job's bytes is in it.  The kernel's minimum round
 * trip of a TCP connection (tcpi_min_rtt) is the least over the last 5
 * minutes (net.ipv4.tcp_min_rtt_wlen): after the path lengthens, say
 * from 0.05 to 4 ms, it reads the old path that long, the autotuner
 * sizes credit by a round trip 80 times too short and the floor test
 * (tcp_info.c) takes the new path's delay for a queue.  The least echo
 * of the last 2-4 s follows the path within seconds.
 */
#ifndef PSCHED_COMMON_ECHO_H
#define PSCHED_COMMON_ECHO_H

#include <stdbool.h>
#include <stdint.h>

#include "van.h"

/* At most one echo per connection per PSD_ECHO_GAP_US; one unanswered
 * for PSD_ECHO_LOST_US is given up; the least round trip is over a window
 * of two PSD_ECHO_WIN_US halves (2-4 s). */
#define PSD_ECHO_GAP_US	 250000u
#define PSD_ECHO_LOST_US 10000000u
#define PSD_ECHO_WIN_US	 2000000u

/* Whether @c (its transport can tell a path's round trip: ->tx_room) is
 * due an echo at @now_us: none outstanding, the last sent at least
 * PSD_ECHO_GAP_US ago.  Any thread. */
bool psd_echo_due(struct psd_conn *c, uint64_t now_us);
/* Send an echo on @c as node @sender, stamped @now_us.  Any thread that
 * may send on @c. */
int psd_echo_send(struct psd_conn *c, int sender, uint64_t now_us);
/* Van thread: an Echo @e came on @c.  A request is sent back at once; a
 * reply to our outstanding echo (on the answers connection of a split
 * pair: the request connection's) gives a round trip; any other (late,
 * forged, repeated) is ignored. */
void psd_echo_rx(struct psd_conn *c, int self, const Psched__Echo *e);
/* The reply to the echo stamped @nonce came at @now_us (psd_echo_rx()'s
 * bookkeeping, for tests): false if it is not the outstanding one. */
bool psd_echo_took(struct psd_conn *c, uint64_t nonce, uint64_t now_us);
/* The least echo round trip of @c over the last 2-4 s at @now_us, in
 * microseconds; 0 if none in that time.  Any thread. */
uint32_t psd_echo_base_us(struct psd_conn *c, uint64_t now_us);
#endif
