// SPDX-License-Identifier: MIT
/* ps-bench's options: strict parsing (the whole string, range-checked), and
 * a message naming the option and what it accepts for every bad value. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "psched.h"

#include "bench.h"

#define MAX_KEYS     65536
#define MAX_SECONDS  3600.0
#define MAX_NODES    64
#define MAX_SIZE_ARG 4096
#define MAX_KL_KEYS  200000000

static int bad_arg(const char *name, const char *val, const char *want)
{
	fprintf(stderr, "ps-bench: --%s '%s': want %s\n", name, val, want);
	return -EINVAL;
}

/* A whole decimal number in [min, max], nothing before or after it. */
static int parse_u64(const char *name, const char *val, uint64_t min,
		     uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char want[96], *end;

	snprintf(want, sizeof(want), "a whole number from %llu to %llu",
		 (unsigned long long)min, (unsigned long long)max);
	if (*val < '0' || *val > '9')
		return bad_arg(name, val, want);
	errno = 0;
	v = strtoull(val, &end, 10);
	if (errno || *end || v < min || v > max)
		return bad_arg(name, val, want);
	*out = v;
	return 0;
}

static int parse_uint(const char *name, const char *val, unsigned min,
		      unsigned max, unsigned *out)
{
	uint64_t v;
	int ret = parse_u64(name, val, min, max, &v);

	if (!ret)
		*out = (unsigned)v;
	return ret;
}

static int parse_seconds(const char *val, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(v) || !(v > 0) ||
	    v > MAX_SECONDS)
		return bad_arg("seconds", val,
			       "a number of seconds above 0 and up to 3600 "
			       "(e.g. 2 or 0.5)");
	*out = v;
	return 0;
}

/* --rate: Gbit/s, from 0.001 (1 Mbit/s) up to 10000. */
static int parse_rate(const char *val, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(v) || !(v >= 0.001) ||
	    v > 10000)
		return bad_arg("rate", val,
			       "Gbit/s from 0.001 up to 10000 (e.g. 9.4)");
	*out = v;
	return 0;
}

static int parse_mode(const char *val, enum bmode *out)
{
	unsigned m;

	for (m = 0; m <= MODE_SPARSE; m++)
		if (!strcmp(val, bench_mode_names[m])) {
			*out = (enum bmode)m;
			return 0;
		}
	return bad_arg("mode", val, "push, pull, pushpull or sparse");
}

static int parse_dtype(const char *val, enum psched_dtype *out)
{
	if (!strcmp(val, "raw"))
		*out = PSCHED_RAW;
	else if (!strcmp(val, "f32"))
		*out = PSCHED_F32;
	else
		return bad_arg("dtype", val, "f32 or raw");
	return 0;
}

/* "4K,1M,64M": 1 to MAX_SIZES byte counts, each a multiple of the element
 * size and at most PS_MAX_TENSOR_BYTES' default (4 GiB). */
static int parse_sizes(const char *arg, struct bopts *o)
{
	uint64_t elem = psched_dtype_size(o->dtype);
	const char *p = arg, *comma;
	char want[256], tok[64];
	size_t len;

	snprintf(want, sizeof(want),
		 "1 to %d byte counts, comma-separated (K/M/G = "
		 "2^10/2^20/2^30), each from %llu to 4G and a multiple of %llu "
		 "(--dtype %s)",
		 MAX_SIZES, (unsigned long long)elem, (unsigned long long)elem,
		 o->dtype == PSCHED_RAW ? "raw" : "f32");
	o->nsizes = 0;
	do {
		comma = strchr(p, ',');
		len = comma ? (size_t)(comma - p) : strlen(p);
		if (o->nsizes == MAX_SIZES || !len || len >= sizeof(tok))
			return bad_arg("size", arg, want);
		memcpy(tok, p, len);
		tok[len] = '\0';
		if (psched_parse_bytes(tok, &o->sizes[o->nsizes]) ||
		    !o->sizes[o->nsizes] ||
		    o->sizes[o->nsizes] > (4ull << 30) ||
		    o->sizes[o->nsizes] % elem)
			return bad_arg("size", arg, want);
		o->nsizes++;
		p = comma + 1;
	} while (comma);
	return 0;
}

/* Refuse a run whose buffers cannot fit in this machine's memory: each
 * worker holds an input and an output buffer per key. */
static int check_memory(const struct bopts *o)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	double ram = pages > 0 && psz > 0 ? (double)pages * psz : 0;
	unsigned i;

	for (i = 0; i < o->nsizes && ram > 0; i++) {
		double need = 2.0 * bench_auto_keys(o, o->sizes[i]) *
			      (double)o->sizes[i] * o->workers;

		if (need > ram) {
			fprintf(stderr,
				"ps-bench: --keys %u with --size %llu needs "
				"%.1f GiB of buffers (%u keys per worker, an "
				"input and an output buffer each); this "
				"machine has %.1f GiB\n",
				o->keys, (unsigned long long)o->sizes[i],
				need / (1 << 30),
				bench_auto_keys(o, o->sizes[i]),
				ram / (1 << 30));
			return -ENOMEM;
		}
	}
	return 0;
}

/* Key-list mode: keys, values and pulled values per worker, and the
 * servers' copy of every worker's keys and two value arrays. */
static int check_kl_memory(const struct bopts *o)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	double ram = pages > 0 && psz > 0 ? (double)pages * psz : 0;
	double need = (16.0 + 16.0) * o->kl_keys * o->workers;

	if (ram > 0 && need > ram) {
		fprintf(stderr,
			"ps-bench: --keys-per-request %u with %u workers needs "
			"about %.1f GiB; this machine has %.1f GiB\n",
			o->kl_keys, o->workers, need / (1 << 30),
			ram / (1 << 30));
		return -ENOMEM;
	}
	return 0;
}

static int parse_one(int c, const char *val, struct bopts *o,
		     const char **sizes)
{
	switch (c) {
	case 's':
		return parse_uint("servers", val, 1, MAX_NODES, &o->servers);
	case 'w':
		return parse_uint("workers", val, 1, MAX_NODES, &o->workers);
	case 'z':
		if (strlen(val) > MAX_SIZE_ARG)
			return bad_arg("size", "...", "a shorter list");
		*sizes = val;
		return 0;
	case 'm':
		return parse_mode(val, &o->mode);
	case 'S':
		return parse_seconds(val, &o->seconds);
	case 'r':
		return parse_uint("runs", val, 1, MAX_RUNS, &o->runs);
	case 'k':
		return parse_uint("keys", val, 0, MAX_KEYS, &o->keys);
	case 'd':
		return parse_dtype(val, &o->dtype);
	case 'B':
		o->baseline = false;
		return 0;
	case 'h':
		o->hot_baselines = true;
		return 0;
	case 'c':
		o->csv = true;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	case 'K':
		return parse_uint("keys-per-request", val, 1, MAX_KL_KEYS,
				  &o->kl_keys);
	case 'R':
	case 'W':
	case 'b':
	case 'Z':
		return bench_parse_sparse_opt(c, val, o);
	case 'X':
		o->scatter = true;
		return 0;
	case 'O':
		if (strcmp(val, "pushpull") && strcmp(val, "push-pull"))
			return bad_arg(
				"sparse-op", val,
				"pushpull (one request) or push-pull "
				"(a push and a pull in flight together)");
		o->sparse_split = !strcmp(val, "push-pull");
		return 0;
	case 'H':
		o->hugepages = true;
		return 0;
	case 'T':
		o->stream = true;
		return 0;
	case 'A':
		return parse_rate(val, &o->rate);
	default: /* getopt has said what is wrong */
		return -EINVAL;
	}
}

int bench_parse_opts(int argc, char **argv, struct bopts *o)
{
	static const struct option lo[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "workers", required_argument, NULL, 'w' },
		{ "size", required_argument, NULL, 'z' },
		{ "sizes", required_argument, NULL, 'z' },
		{ "mode", required_argument, NULL, 'm' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "runs", required_argument, NULL, 'r' },
		{ "keys", required_argument, NULL, 'k' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "no-baseline", no_argument, NULL, 'B' },
		{ "hot-baselines", no_argument, NULL, 'h' },
		{ "csv", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "keys-per-request", required_argument, NULL, 'K' },
		{ "rows", required_argument, NULL, 'R' },
		{ "width", required_argument, NULL, 'W' },
		{ "batch-rows", required_argument, NULL, 'b' },
		{ "zipf", required_argument, NULL, 'Z' },
		{ "scatter", no_argument, NULL, 'X' },
		{ "sparse-op", required_argument, NULL, 'O' },
		{ "hugepages", no_argument, NULL, 'H' },
		{ "stream", no_argument, NULL, 'T' },
		{ "rate", required_argument, NULL, 'A' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sizes = "4K,64K,1M,16M,64M";
	int c, ret;

	opterr = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		ret = parse_one(c, optarg, o, &sizes);
		if (ret)
			return ret;
	}
	if (optind < argc) {
		fprintf(stderr, "ps-bench: unexpected argument '%s'\n",
			argv[optind]);
		return -EINVAL;
	}
	if (o->csv && o->json) {
		fprintf(stderr, "ps-bench: --csv and --json: pick one\n");
		return -EINVAL;
	}
	if (o->kl_keys && (o->csv || o->json)) {
		fprintf(stderr, "ps-bench: --keys-per-request prints its own "
				"table: no --csv or --json\n");
		return -EINVAL;
	}
	if (o->stream &&
	    (o->workers != 1 || o->mode == MODE_SPARSE || o->kl_keys)) {
		fprintf(stderr,
			"ps-bench: --stream: one worker (--workers 1) and "
			"--mode push, pull or pushpull only (several workers "
			"must stop at the same step)\n");
		return -EINVAL;
	}
	if (o->rate > 0 &&
	    (o->stream || o->mode == MODE_SPARSE || o->kl_keys)) {
		fprintf(stderr, "ps-bench: --rate paces rounds of --mode push, "
				"pull or pushpull: not with --stream, --mode "
				"sparse or --keys-per-request\n");
		return -EINVAL;
	}
	if (o->mode == MODE_SPARSE)
		return bench_sparse_check(o);
	ret = parse_sizes(sizes, o);
	if (!ret && o->kl_keys)
		return check_kl_memory(o);
	return ret ? ret : check_memory(o);
}

void bench_usage(void)
{
	printf("usage: ps-bench [options] [cluster options] | --version\n"
	       "Starts a local cluster (1 scheduler, S servers, W workers) on "
	       "loopback, or joins\none when DMLC_ROLE is set, and measures "
	       "push/pull throughput and latency.\n"
	       "  --servers S     servers to start, 1..64 [1]\n"
	       "  --workers W     workers to start, 1..64 [1]\n"
	       "  --size LIST     tensor sizes, comma-separated, K/M/G, up to "
	       "16 [4K,64K,1M,16M,64M]\n"
	       "  --mode M        push | pull | pushpull [pushpull]\n"
	       "  --seconds N     length of one measured window, >0..3600 "
	       "[2]\n"
	       "  --runs R        measured windows per size, 1..15; medians "
	       "reported [3]\n"
	       "  --keys K        keys per server, 0..65536 (0 = 40, fewer "
	       "above 1 MiB) [0]\n"
	       "  --dtype T       f32 (servers sum) | raw (servers store) "
	       "[f32]\n"
	       "  --no-baseline   skip the plain-socket baselines (Best, "
	       "base, vsBest: '-')\n"
	       "  --hot-baselines the baselines reuse one buffer "
	       "(cache-hot)"
	       "\n                  instead of a place per byte moved, as "
	       "tensors have\n"
	       "  --hugepages     the workers' buffers in 2 MiB-aligned "
	       "transparent huge pages\n"
	       "  --stream        no barrier between rounds: each key is "
	       "issued again as soon\n                  as it completes, "
	       "all keys in flight (as ib_write_bw keeps its\n"
	       "                  writes outstanding); one worker; the "
	       "baselines keep their pattern\n"
	       "  --rate G        hold Goodput to at most G Gbit/s (each "
	       "worker "
	       "G / workers):\n                  a worker sleeps before a "
	       "round it would start early, so CPU\n                  use "
	       "can be compared at another tool's throughput [none]\n"
	       "  --csv           CSV instead of the table\n"
	       "  --json          one JSON object instead of the table\n"
	       "  --keys-per-request N  key-list mode, 1..200000000: each "
	       "worker pushes then\n"
	       "                  pulls N keys of one float32 in one request, "
	       "--runs rounds\n"
	       "                  (dmlc's test_kv_app_benchmark; --size, "
	       "--mode, --seconds unused)\n\n"
	       "  --mode sparse: row-sparse pushpull of zipf-chosen rows of "
	       "an embedding\n  table vs a dense pushpull of as many bytes "
	       "(docs/c-api.md \"Row-sparse tensors\"):\n"
	       "  --rows N        table rows, 1..2^32 [10000000]\n"
	       "  --width N       floats per row, 1..65536 [64]\n"
	       "  --batch-rows N  rows per push and pull, 1..1048576 [8192]\n"
	       "  --zipf A        zipf exponent of the row choice, 0..10 "
	       "[1.1]\n"
	       "  --scatter       spread the zipf ranks over the table by a "
	       "fixed permutation\n                  (hot rows on every "
	       "server; default: the hottest rows first,\n                  "
	       "on the first server)\n"
	       "  --sparse-op OP  pushpull: one row-sparse pushpull per batch "
	       "[default];\n                  push-pull: a push and a "
	       "row_sparse_pull in flight together\n\n"
	       "%s\n"
	       "Progress goes to stderr when it is a terminal.  Exit status: "
	       "0 done, 1 a run\nfailed, 2 bad arguments.\n\n",
	       bench_legend);
	psched_cfg_usage(stdout);
}

int bench_parse_sparse_opt(int c, const char *val, struct bopts *o)
{
	char *end;
	double v;

	switch (c) {
	case 'R':
		return parse_u64("rows", val, 1, 1ull << 32, &o->rows);
	case 'W':
		return parse_uint("width", val, 1, 65536, &o->width);
	case 'b':
		return parse_uint("batch-rows", val, 1, 1u << 20,
				  &o->batch_rows);
	default:
		errno = 0;
		v = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(v) || v < 0 ||
		    v > 10)
			return bad_arg("zipf", val,
				       "an exponent from 0 to 10 (e.g. 1.1)");
		o->zipf = v;
		return 0;
	}
}

int bench_sparse_check(struct bopts *o)
{
	uint64_t table = o->rows * o->width * 4;
	uint64_t batch = (uint64_t)o->batch_rows * o->width * 4;

	if (table > (4ull << 30)) {
		fprintf(stderr,
			"ps-bench: --rows %llu x --width %u float32 is %llu "
			"bytes, above PS_MAX_TENSOR_BYTES' default 4G\n",
			(unsigned long long)o->rows, o->width,
			(unsigned long long)table);
		return -EINVAL;
	}
	/* The launcher's one "size": the batch's bytes. */
	o->sizes[0] = batch;
	o->nsizes = 1;
	o->baseline = false; /* the dense pushpull is the baseline */
	return 0;
}
