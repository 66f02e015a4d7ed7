// SPDX-License-Identifier: MIT
/* ps-bench's output: the table with its legend, CSV, JSON. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "psched.h"

#include "bench.h"

const char bench_legend[] =
	"The table, one row per size (a footer line says what each column "
	"means):\n"
	"  Goodput = payload bytes of every key once per iteration / time, "
	"summed over\n  workers (pushpull moves them twice, counts them "
	"once).\n"
	"  Best    = the fastest of three plain-socket programs moving the "
	"same bytes\n  in the same rounds, named in base:\n"
	"    tcp1  one stream with 4 MiB writes, 4 MiB socket buffers, "
	"readers woken per\n          512 KiB (SO_RCVLOWAT);\n"
	"    tcpN  the same bytes over N = max(2, S x W) streams in "
	"parallel (at most 64);\n"
	"    raw   one socket pair with one worker's requests (a key's "
	"bytes one way, as\n          many or an ack back, every key of an "
	"iteration outstanding).\n"
	"  They send from and receive into a place of their own for every "
	"byte of an\n  iteration, as psched's tensors have on both sides "
	"(--hot-baselines: one\n  buffer reused, cache-hot).  Best is the "
	"median over rounds of each round's\n  fastest; base names the "
	"fastest in the median round.\n"
	"  vsBest  = Goodput / Best: above 1, psched moved the bytes faster "
	"than any of\n  them.  Each round runs the baselines, then psched's "
	"window (the cluster idles\n  meanwhile).  '-': not measured "
	"(--no-baseline) or failed.\n"
	"--csv and --json keep their fields: tcpmax_gbps = Best, "
	"tcpmax_streams = 1 (tcp1\nor raw) or N (tcpN), raw_gbps = raw's "
	"median, ratio = median of per-round\nGoodput / Best, vs_raw = "
	"median of per-round Goodput / raw; empty or null:\nnot measured.";

/* The footer: one line per column of report_table(). */
static void report_footer(const struct bopts *o, bool dash)
{
	unsigned n = bench_tcp_streams(o);

	printf("# #bytes  = bytes of one key (a tensor)\n"
	       "# #keys   = keys per worker per iteration, all in flight at "
	       "once\n"
	       "# #iters  = iterations measured, summed over workers and "
	       "rounds\n"
	       "# Goodput = psched: every key's payload once per iteration / "
	       "time, all workers\n"
	       "# Best    = the fastest plain-socket program moving the same "
	       "bytes, same rounds\n"
	       "# base    = tcp1: one stream; tcp%u: %u streams; raw: one "
	       "pair, psched's pattern\n"
	       "# vsBest  = Goodput / Best: above 1, psched beat every "
	       "plain-socket program\n"
	       "# Req/s   = requests completed per second, all workers\n"
	       "# p50 p99 = latency of a request, issue to completion, "
	       "slowest worker\n",
	       n, n);
	if (dash)
		printf("# -       = not measured (--no-baseline) or the "
		       "baseline failed\n");
	if (o->hot_baselines)
		printf("# baselines: one buffer reused, cache-hot "
		       "(--hot-baselines)\n");
}

/* The table's name of @b (@n: tcpN's streams). */
static const char *base_name(enum bbase b, unsigned n, char *buf, size_t len)
{
	switch (b) {
	case BASE_TCP1:
		return "tcp1";
	case BASE_TCPN:
		snprintf(buf, len, "tcp%u", n);
		return buf;
	case BASE_RAW:
		return "raw";
	default:
		return "-";
	}
}

/* One row: psched's Goodput beside the best baseline of the same rounds.
 * True when a baseline column is '-'. */
static bool report_row(const struct bopts *o, const struct bresult *r)
{
	char nbuf[16];
	bool best = r->tcpmax_gbps > 0;

	printf("%10llu %6u %8llu %14.3f", (unsigned long long)r->size, r->keys,
	       (unsigned long long)r->iters, r->gbps);
	if (best)
		printf(" %11.3f %6s %7.3f", r->tcpmax_gbps,
		       base_name(r->base, bench_tcp_streams(o), nbuf,
				 sizeof(nbuf)),
		       r->gbps / r->tcpmax_gbps);
	else
		printf(" %11s %6s %7s", "-", "-", "-");
	printf(" %11.0f %10.1f %10.1f\n", r->reqs, r->p50, r->p99);
	return !best;
}

/* The table; true when a baseline column has a '-'. */
static bool report_table(const struct bopts *o, const struct bresult *res)
{
	bool dash = false;
	unsigned i;

	printf("%10s %6s %8s %14s %11s %6s %7s %11s %10s %10s\n", "#bytes",
	       "#keys", "#iters", "Goodput[Gb/s]", "Best[Gb/s]", "base",
	       "vsBest", "Req/s", "p50[usec]", "p99[usec]");
	for (i = 0; i < o->nsizes; i++)
		dash |= report_row(o, &res[i]);
	return dash;
}

/* "%*.3f" of @v, or blanks when @v is 0 (not measured). */
static void put_num(int width, double v, const char *sep)
{
	if (v > 0)
		printf("%s%*.3f", sep, width, v);
	else
		printf("%s%*s", sep, width, "");
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
	bool dash;

	if (o->json) {
		report_json(o, res, rss_mib);
		return;
	}
	if (o->csv) {
		report_csv(o, res);
		return;
	}
	dash = report_table(o, res);
	for (i = 0; i < o->nsizes; i++)
		stored += (uint64_t)res[i].keys * res[i].size;
	if (stored)
		printf("# server peak RSS %.1f MiB for %.1f MiB stored per "
		       "server (%.2fx)\n",
		       rss_mib, stored / o->servers / 1048576.0,
		       rss_mib * 1048576.0 / ((double)stored / o->servers));
	report_footer(o, dash);
}
