// SPDX-License-Identifier: MIT
/* ps-bench's output: the table with its legend, CSV, JSON. */
#include <stdio.h>
#include <string.h>

#include "psched.h"

#include "bench.h"

const char bench_legend[] =
	"Goodput = payload bytes of every key once per iteration / time, "
	"summed over\n  workers (pushpull moves them twice, counts them "
	"once).\n"
	"TCPmax  = the best plain sockets do here with the same bytes per "
	"iteration:\n  one stream with 4 MiB writes, max(2, S x W) streams "
	"in parallel, 4 MiB\n  socket buffers, readers woken per 512 KiB "
	"(SO_RCVLOWAT), or RawTCP;\n  the fastest per round.\n"
	"RawTCP  = one plain socket pair with ps-bench's pattern (N bytes "
	"one way, N\n  bytes or an ack back, K requests outstanding).\n"
	"  Both send from and receive into a place of their own for every "
	"byte of an\n  iteration, as psched's tensors have on both sides "
	"(--hot-baselines: one\n  buffer reused, cache-hot).\n"
	"ratio   = Goodput / TCPmax, vsRaw = Goodput / RawTCP: medians of "
	"per-round\n  ratios; each round runs the baselines, then psched's "
	"window (the cluster\n  idles meanwhile).  Blank: not measured "
	"(--no-baseline) or failed.";

/* "%*.3f" of @v, or blanks when @v is 0 (not measured). */
static void put_num(int width, double v, const char *sep)
{
	if (v > 0)
		printf("%s%*.3f", sep, width, v);
	else
		printf("%s%*s", sep, width, "");
}

static void report_table(const struct bopts *o, const struct bresult *res)
{
	unsigned i;

	printf("%10s %6s %8s %14s %11s %10s %10s %13s %13s %6s %6s\n", "#bytes",
	       "#keys", "#iters", "Goodput[Gb/s]", "Req/s", "p50[usec]",
	       "p99[usec]", "TCPmax[Gb/s]", "RawTCP[Gb/s]", "ratio", "vsRaw");
	for (i = 0; i < o->nsizes; i++) {
		const struct bresult *r = &res[i];

		printf("%10llu %6u %8llu %14.3f %11.0f %10.1f %10.1f",
		       (unsigned long long)r->size, r->keys,
		       (unsigned long long)r->iters, r->gbps, r->reqs, r->p50,
		       r->p99);
		put_num(13, r->tcpmax_gbps, " ");
		put_num(13, r->raw_gbps, " ");
		put_num(6, r->ratio, " ");
		put_num(6, r->vs_raw, " ");
		printf("\n");
	}
}

/* CSV: the first columns as before (scripts read goodput as column 4). */
static void report_csv(const struct bopts *o, const struct bresult *res)
{
	unsigned i;

	printf("bytes,keys,iterations,goodput_gbps,req_per_s,p50_us,p99_us,"
	       "raw_tcp_gbps,ratio,tcpmax_gbps,tcpmax_streams,vs_raw\n");
	for (i = 0; i < o->nsizes; i++) {
		const struct bresult *r = &res[i];

		printf("%llu,%u,%llu,%.3f,%.0f,%.1f,%.1f",
		       (unsigned long long)r->size, r->keys,
		       (unsigned long long)r->iters, r->gbps, r->reqs, r->p50,
		       r->p99);
		put_num(0, r->raw_gbps, ",");
		put_num(0, r->ratio, ",");
		put_num(0, r->tcpmax_gbps, ",");
		if (r->streams)
			printf(",%u", r->streams);
		else
			printf(",");
		put_num(0, r->vs_raw, ",");
		printf("\n");
	}
}

/* A JSON number, or null when @v is 0 (not measured). */
static void json_num(const char *name, double v, const char *sep)
{
	if (v > 0)
		printf("\"%s\": %.3f%s", name, v, sep);
	else
		printf("\"%s\": null%s", name, sep);
}

static void report_json(const struct bopts *o, const struct bresult *res,
			double rss_mib)
{
	unsigned i;

	printf("{\"config\": {\"mode\": \"%s\", \"servers\": %u, "
	       "\"workers\": %u, \"transport\": \"%s\", \"dtype\": \"%s\", "
	       "\"seconds\": %g, \"runs\": %u, \"keys_per_server\": %u, "
	       "\"baseline\": %s, ",
	       bench_mode_names[o->mode], o->servers, o->workers,
	       o->transport[0] ? o->transport : "auto",
	       o->dtype == PSCHED_RAW ? "raw" : "f32", o->seconds, o->runs,
	       o->keys, o->baseline ? "true" : "false");
	json_num("rate_gbps", o->rate, "},\n \"results\": [");
	for (i = 0; i < o->nsizes; i++) {
		const struct bresult *r = &res[i];

		printf("%s\n  {\"bytes\": %llu, \"keys\": %u, \"iters\": %llu, "
		       "\"goodput_gbps\": %.3f, \"req_per_s\": %.0f, "
		       "\"p50_us\": %.1f, \"p99_us\": %.1f, ",
		       i ? "," : "", (unsigned long long)r->size, r->keys,
		       (unsigned long long)r->iters, r->gbps, r->reqs, r->p50,
		       r->p99);
		json_num("tcpmax_gbps", r->tcpmax_gbps, ", ");
		if (r->streams)
			printf("\"tcpmax_streams\": %u, ", r->streams);
		else
			printf("\"tcpmax_streams\": null, ");
		json_num("raw_gbps", r->raw_gbps, ", ");
		json_num("ratio", r->ratio, ", ");
		json_num("vs_raw", r->vs_raw, "}");
	}
	printf("],\n \"server_peak_rss_mib\": %.1f}\n", rss_mib);
}

void bench_report(const struct bopts *o, const struct bresult *res,
		  double rss_mib)
{
	uint64_t stored = 0;
	unsigned i;

	if (o->json) {
		report_json(o, res, rss_mib);
		return;
	}
	if (o->csv) {
		report_csv(o, res);
		return;
	}
	report_table(o, res);
	for (i = 0; i < o->nsizes; i++)
		stored += (uint64_t)res[i].keys * res[i].size;
	if (stored)
		printf("# server peak RSS %.1f MiB for %.1f MiB stored per "
		       "server (%.2fx)\n",
		       rss_mib, stored / o->servers / 1048576.0,
		       rss_mib * 1048576.0 / ((double)stored / o->servers));
	bench_print_prefixed("# ", bench_legend);
}

void bench_print_prefixed(const char *prefix, const char *text)
{
	const char *p = text, *nl;

	while (*p) {
		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p);
		printf("%s%.*s\n", prefix, (int)(nl - p), p);
		p = *nl ? nl + 1 : nl;
	}
}
