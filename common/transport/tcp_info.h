/* SPDX-License-Identifier: MIT */
#ifndef PSCHED_COMMON_TRANSPORT_TCP_INFO_H
#define PSCHED_COMMON_TRANSPORT_TCP_INFO_H

#include <stdint.h>

/*
 * Whether the path of TCP socket @fd has room: its smoothed round trip
 * is close to its base round trip (psd_path_base_us() of the kernel's
 * minimum and @echo_us, the least recent echo, 0 if none), so no
 * standing queue holds what the sender keeps in flight.  1 or 0, or
 * -errno (-EOPNOTSUPP: the kernel lacks the fields, or no round trip was
 * measured yet).  With 1 or 0, *@min_rtt_us (if not NULL) gets that base
 * round trip in microseconds.
 */
int psd_tcp_path_room(int fd, uint32_t echo_us, uint32_t *min_rtt_us);
/*
 * A path's base round trip: the kernel's minimum @kmin_us, or the echoes'
 * @echo_us when that is clearly longer: more than twice it and by more
 * than 1 ms.  The kernel's minimum is the least of the last 5 minutes
 * (net.ipv4.tcp_min_rtt_wlen), so it reads the old path that long after
 * the path lengthened; less than the margin is the thread wake-ups an
 * echo pays and the kernel's samples do not.
 */
uint32_t psd_path_base_us(uint32_t kmin_us, uint32_t echo_us);

#endif
