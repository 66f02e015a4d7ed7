// SPDX-License-Identifier: MIT
/*
 * The kernel's view of a TCP connection's path, for the autotuner's
 * conditions (worker/kv_worker.c).  Its own file: <linux/tcp.h>, which
 * has the fields, does not mix with <netinet/tcp.h>.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/tcp.h>
#include <sys/socket.h>

#include "tcp_info.h"

int psd_tcp_path_room(int fd, uint32_t *min_rtt_us)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (fd < 0)
		return -EBADF;
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -errno;
	/* A kernel older than tcpi_min_rtt (4.6) returns less. */
	if (len < offsetof(struct tcp_info, tcpi_min_rtt) + 4 ||
	    !ti.tcpi_min_rtt || !ti.tcpi_rtt)
		return -EOPNOTSUPP;
	if (min_rtt_us)
		*min_rtt_us = ti.tcpi_min_rtt;
	/*
	 * The smoothed round trip is under 1.5 times the path's minimum: no
	 * standing queue on the way, so the bytes the sender keeps in flight
	 * (its credit, when sends wait for it) do not fill the path.  With C
	 * in flight sent as bursts and a bandwidth-delay product P, bytes
	 * queue about C / 2P of a round trip on average while C < P; beyond
	 * P the excess stands in a queue (at the bottleneck, or in this
	 * host's qdisc, which the kernel's round trip counts too).
	 * TCP_INFO's application-limited mark cannot say it: the kernel
	 * keeps the highest-rate sample, so the mark of an older,
	 * unlimited sample stays while a credit-bound sender sends.
	 */
	return 2 * (uint64_t)ti.tcpi_rtt < 3 * (uint64_t)ti.tcpi_min_rtt;
}
