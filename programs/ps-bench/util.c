// SPDX-License-Identifier: MIT
/* ps-bench helpers: clock, median, keys per size. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "psched.h"

#include "bench.h"

const char *const bench_mode_names[] = { "push", "pull", "pushpull", "sparse" };

double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

unsigned bench_tcp_streams(const struct bopts *o)
{
	unsigned n = o->servers * o->workers;

	if (n < 2)
		return 2;
	return n < BENCH_TCP_STREAMS_MAX ? n : BENCH_TCP_STREAMS_MAX;
}

unsigned bench_auto_keys(const struct bopts *o, uint64_t size)
{
	uint64_t per = o->keys ? o->keys : 40;

	/* Fewer keys above 1 MiB: at most ~64 MiB per server per iteration. */
	if (!o->keys && size > (1u << 20)) {
		per = (64ull << 20) / size;
		if (per < 1)
			per = 1;
	}
	return (unsigned)(per * o->servers);
}
