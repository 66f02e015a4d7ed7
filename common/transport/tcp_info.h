/* SPDX-License-Identifier: MIT */
#ifndef PSCHED_COMMON_TRANSPORT_TCP_INFO_H
#define PSCHED_COMMON_TRANSPORT_TCP_INFO_H

/*
 * Whether the path of TCP socket @fd has room: its smoothed round trip
 * is close to its minimum, so no standing queue holds what the sender
 * keeps in flight.  1 or 0, or -errno (-EOPNOTSUPP: the kernel lacks the
 * fields, or no round trip was measured yet).
 */
int psd_tcp_path_room(int fd);

#endif
