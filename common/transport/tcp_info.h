/* SPDX-License-Identifier: MIT */
#ifndef PSCHED_COMMON_TRANSPORT_TCP_INFO_H
#define PSCHED_COMMON_TRANSPORT_TCP_INFO_H

#include <stdint.h>

/*
 * Whether the path of TCP socket @fd has room: its smoothed round trip
 * is close to its minimum, so no standing queue holds what the sender
 * keeps in flight.  1 or 0, or -errno (-EOPNOTSUPP: the kernel lacks the
 * fields, or no round trip was measured yet).  With 1 or 0, *@min_rtt_us
 * (if not NULL) gets the path's minimum round trip in microseconds.
 */
int psd_tcp_path_room(int fd, uint32_t *min_rtt_us);

#endif
