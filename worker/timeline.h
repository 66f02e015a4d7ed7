/* SPDX-License-Identifier: MIT */
/*
 * Per-chunk timeline of a worker: one record per chunk (start, push done,
 * pull done), written as Chrome trace JSON.  The caller's lock guards a
 * timeline; writing copies the records out under that lock first.
 */
#ifndef PSCHED_WORKER_TIMELINE_H
#define PSCHED_WORKER_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct psd_tl_rec {
	uint64_t key;
	uint64_t offset;
	uint64_t len;
	uint64_t step;
	uint64_t t_start; /* us, CLOCK_MONOTONIC */
	uint64_t t_push;  /* push done (0: no push) */
	uint64_t t_pull;  /* pull done (0: no pull) */
	int32_t priority;
	uint32_t epoch;
	uint16_t server; /* rank */
	uint8_t type;	 /* PSD_MSG_* */
	uint8_t failed;
};

struct psd_timeline {
	struct psd_tl_rec *v;
	size_t n;
	size_t cap;
	uint64_t dropped;
	uint64_t t0;
};

/* Start recording up to @cap records (0: 1M); replaces earlier ones. */
int psd_tl_start(struct psd_timeline *t, size_t cap);
void psd_tl_fini(struct psd_timeline *t);
static inline bool psd_tl_on(const struct psd_timeline *t)
{
	return t->cap != 0;
}
void psd_tl_add(struct psd_timeline *t, const struct psd_tl_rec *r);
/* Chrome trace JSON of @n records to @f; 0 or -EIO. */
int psd_tl_write_json(FILE *f, const struct psd_tl_rec *v, size_t n,
		      uint64_t t0, uint64_t dropped, int node_id);

#endif
