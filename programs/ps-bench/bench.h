/* SPDX-License-Identifier: MIT */
/* ps-bench's shared types and helpers (main.c: the worker side; opts.c:
 * options;
 * launch.c: the local cluster and the table; rawtcp.c: the baseline). */
#ifndef PSCHED_BENCH_BENCH_H
#define PSCHED_BENCH_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "psched.h"

#define MAX_SIZES 16
#define MAX_RUNS  15
/* Most streams the parallel plain-TCP baseline opens (tcpmax.c). */
#define BENCH_TCP_STREAMS_MAX 64

enum bmode {
	MODE_PUSH,
	MODE_PULL,
	MODE_PUSHPULL,
	MODE_SPARSE, /* row-sparse push + pull vs dense pushpull (sparse.c) */
};

/* The plain-socket baseline that was fastest in a round (the table's
 * "base" column). */
enum bbase {
	BASE_NONE, /* not measured, or every baseline failed */
	BASE_TCP1, /* one TCP stream, large writes (tcpmax.c) */
	BASE_TCPN, /* the same bytes over bench_tcp_streams() streams */
	BASE_RAW,  /* one socket pair, ps-bench's request pattern (rawtcp.c) */
};

struct bopts {
	/* Cluster flags given to ps-bench (--partition-bytes 64K, ...),
	 * passed on to every node it starts; NULL-terminated. */
	char **cluster_argv;
	unsigned servers;
	unsigned workers;
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes;
	enum bmode mode;
	double seconds;
	unsigned keys; /* per server; 0 = auto */
	unsigned runs;
	bool csv;
	bool json;
	bool baseline;
	bool hot_baselines; /* the baselines: one buffer reused (cache-hot) */
	bool sync;	    /* worker under a local launcher: wait for its go */
	enum psched_dtype dtype;
	char transport[16];
	char root_uri[256]; /* local cluster: address the nodes dial */
	unsigned kl_keys;   /* --keys-per-request: key-list mode (keylist.c) */
	/* --mode sparse */
	uint64_t rows;
	unsigned width;
	unsigned batch_rows;
	double zipf;
	bool hugepages;	   /* workers' buffers: THP, 2 MiB aligned */
	bool stream;	   /* --stream: a key is reissued once it completes,
			    * no barrier between rounds */
	bool scatter;	   /* zipf rank k is row (k * odd) % rows, not row k */
	bool sparse_split; /* --sparse-op push-pull: a push and a pull, not
			    * one row-sparse pushpull */
	double rate;	   /* --rate: Goodput cap in Gbit/s, shared evenly by
			    * the workers; 0 = none */
};

struct bresult {
	uint64_t size;
	unsigned keys;
	double gbps;	 /* median over runs */
	double reqs;	 /* requests per second, median */
	double p50, p99; /* microseconds */
	uint64_t iters;
	double raw_gbps;    /* median; 0 = not measured */
	double tcpmax_gbps; /* median of the per-round best baseline */
	double ratio;	    /* median of per-round goodput / best baseline */
	double vs_raw;	    /* median of per-round goodput / raw */
	unsigned streams;   /* streams of the best baseline in most rounds */
	enum bbase base;    /* the best baseline of the median round */
	/* Per round, filled by the launcher: psched, each baseline, the
	 * fastest baseline (max_r), which one that was and its streams. */
	double good_r[MAX_RUNS], raw_r[MAX_RUNS], max_r[MAX_RUNS];
	double tcp1_r[MAX_RUNS], tcpn_r[MAX_RUNS];
	enum bbase base_r[MAX_RUNS];
	unsigned streams_r[MAX_RUNS];
	/* --mode sparse, per round: dense baseline and distinct-row goodput
	 * (Gbit/s, summed over workers); most distinct rows one pushed. */
	double dense_r[MAX_RUNS], wire_r[MAX_RUNS];
	uint64_t stored;
};

extern const char *const bench_mode_names[];
/* What the table's columns and the CSV / JSON baseline fields mean
 * (--help). */
extern const char bench_legend[];

/* CLOCK_MONOTONIC in seconds. */
double bench_now_s(void);
/* qsort() order of doubles. */
int bench_cmp_double(const void *a, const void *b);
/* Median of @v[0..n) (sorts @v). */
double bench_median(double *v, unsigned n);
/* Streams of the parallel plain-TCP baseline: max(2, S x W), at most
 * BENCH_TCP_STREAMS_MAX. */
unsigned bench_tcp_streams(const struct bopts *o);
/* Keys per iteration for @size: --keys per server, or 40 (fewer above 1 MiB).
 */
unsigned bench_auto_keys(const struct bopts *o, uint64_t size);
/* Goodput of a plain socket pair with ps-bench's request pattern, Gbit/s:
 * one window of o->seconds after 2 warm-up iterations; 0 on failure. */
double bench_raw_tcp(const struct bopts *o, uint64_t size, unsigned nk);
/* Parse ps-bench's own options (after psched_cfg_parse_args() took the
 * cluster's); on a bad one print what it accepts to stderr, -EINVAL. */
int bench_parse_opts(int argc, char **argv, struct bopts *o);
/* opts.c: one of --rows, --width, --batch-rows, --zipf (@c its getopt
 * value), and the whole sparse set (the table within 4 GiB, the batch
 * buffers within memory; --size does not apply). */
int bench_parse_sparse_opt(int c, const char *val, struct bopts *o);
int bench_sparse_check(struct bopts *o);
/* --help text. */
void bench_usage(void);
/*
 * Gbit/s of plain TCP moving @bytes per iteration (payload counted once, as
 * Goodput) over @streams parallel loopback connections with large writes,
 * one window of o->seconds after 2 warm-up iterations; 0 on failure.
 */
double bench_tcp_max(const struct bopts *o, uint64_t bytes, unsigned streams);
/* Print @res as the table (with a footer line per column), CSV or JSON. */
void bench_report(const struct bopts *o, const struct bresult *res,
		  double rss_mib);
/* keylist.c: --keys-per-request (times per round, slowest worker). */
struct bkl_result {
	double push[MAX_RUNS], pull[MAX_RUNS]; /* ms */
};
int bench_kl_worker(struct psched_node *node, const struct bopts *o);
int bench_kl_collect(const struct bopts *o, FILE **fps, unsigned nw,
		     struct bkl_result *res);
void bench_kl_report(const struct bopts *o, const struct bkl_result *res,
		     double rss_mib);
/* Worker under a launcher: "WAIT si r" and wait for the go. */
int bench_sync_wait(const struct bopts *o, unsigned si, unsigned r);
/* sparse.c: the --mode sparse worker (0 or 1), a worker's SPARSE line
 * folded into @res, and the report (@rss_mib: servers' peak RSS summed;
 * @rss_mib_before: their RSS before the first row, 0 unknown;
 * @noshm_growth_mib: their growth without RssShmem, from before the first
 * row to the most at a round's start). */
int bench_sparse_worker(struct psched_node *node, const struct bopts *o);
void bench_sparse_fold(const char *line, struct bresult *res);
void bench_sparse_report(const struct bopts *o, const struct bresult *res,
			 double rss_mib, double rss_mib_before,
			 double noshm_growth_mib);

/* Start the local cluster, run the workers, print the table. */
int bench_launch(const struct bopts *o, int argc, char **argv);

#endif
