/* SPDX-License-Identifier: MIT */
/*
 * Key-list, row-sparse and device requests spelled as calls, for the
 * tests that issue many of them: each fills a struct psched_request and
 * calls psched_request() (include/psched.h), the one entry point.
 */
#ifndef PSCHED_TESTS_HELPERS_REQUESTS_H
#define PSCHED_TESTS_HELPERS_REQUESTS_H

#include "psched.h"

/* Buffers of @op: the push side only for ops that push, the pull side
 * only for ops that pull. */
#define RQ_PUSH(op, p) ((op) != PSCHED_OP_PULL ? (p) : NULL)
#define RQ_PULL(op, p) ((op) != PSCHED_OP_PUSH ? (p) : NULL)

static inline int rq_keys(struct psched_node *n, enum psched_op op,
			  size_t nkeys, const uint64_t *keys,
			  const uint32_t *elems, uint32_t elem, const void *pv,
			  void *qv, enum psched_dtype dtype, int prio,
			  psched_done_fn *cb, void *arg, uint64_t *req)
{
	const struct psched_request rq = {
		.op = op,
		.family = PSCHED_FAMILY_KEYLIST,
		.nkeys = nkeys,
		.keys = keys,
		.elems = elems,
		.elem = elem,
		.push_buf = RQ_PUSH(op, pv),
		.pull_buf = RQ_PULL(op, qv),
		.dtype = dtype,
		.priority = prio,
		.cb = cb,
		.arg = arg,
	};

	return psched_request(n, &rq, req);
}

static inline int rq_rows(struct psched_node *n, enum psched_op op,
			  uint64_t key, size_t nrows, const uint64_t *ids,
			  const void *pv, void *qv, int prio,
			  psched_done_fn *cb, void *arg, uint64_t *req)
{
	const struct psched_request rq = {
		.op = op,
		.family = PSCHED_FAMILY_ROWS,
		.key = key,
		.nrows = nrows,
		.row_ids = ids,
		.push_buf = RQ_PUSH(op, pv),
		.pull_buf = RQ_PULL(op, qv),
		.priority = prio,
		.cb = cb,
		.arg = arg,
	};

	return psched_request(n, &rq, req);
}

static inline int rq_device(struct psched_node *n, enum psched_op op,
			    const uint64_t *keys, size_t nkeys,
			    const void *const *pv, void *const *qv,
			    const uint64_t *lens, enum psched_dtype dtype,
			    int device, int prio, psched_done_fn *cb, void *arg,
			    uint64_t *req)
{
	const struct psched_request rq = {
		.op = op,
		.keys = keys,
		.nkeys = nkeys,
		.lens = lens,
		.push_vals = RQ_PUSH(op, pv),
		.pull_vals = RQ_PULL(op, qv),
		.dtype = dtype,
		.on_device = true,
		.device = device,
		.priority = prio,
		.cb = cb,
		.arg = arg,
	};

	return psched_request(n, &rq, req);
}

/* The old spellings' argument orders, for the tests' many calls. */
#define push_keys(n, nk, k, l, len, v, dt, pr, cb, a, r)                       \
	rq_keys(n, PSCHED_OP_PUSH, nk, k, l, len, v, NULL, dt, pr, cb, a, r)
#define pull_keys(n, nk, k, l, len, v, dt, pr, cb, a, r)                       \
	rq_keys(n, PSCHED_OP_PULL, nk, k, l, len, NULL, v, dt, pr, cb, a, r)
#define pushpull_keys(n, nk, k, l, len, pv, qv, dt, pr, cb, a, r)              \
	rq_keys(n, PSCHED_OP_PUSHPULL, nk, k, l, len, pv, qv, dt, pr, cb, a, r)
#define rows_push(n, key, nr, ids, v, pr, cb, a, r)                            \
	rq_rows(n, PSCHED_OP_PUSH, key, nr, ids, v, NULL, pr, cb, a, r)
#define rows_pull(n, key, nr, ids, out, pr, cb, a, r)                          \
	rq_rows(n, PSCHED_OP_PULL, key, nr, ids, NULL, out, pr, cb, a, r)
#define rows_pushpull(n, key, nr, ids, v, out, pr, cb, a, r)                   \
	rq_rows(n, PSCHED_OP_PUSHPULL, key, nr, ids, v, out, pr, cb, a, r)
#define push_device(n, k, nk, v, l, dt, dev, pr, cb, a, r)                     \
	rq_device(n, PSCHED_OP_PUSH, k, nk, v, NULL, l, dt, dev, pr, cb, a, r)
#define pull_device(n, k, nk, v, l, dt, dev, pr, cb, a, r)                     \
	rq_device(n, PSCHED_OP_PULL, k, nk, NULL, v, l, dt, dev, pr, cb, a, r)
#define pushpull_device(n, k, nk, pv, qv, l, dt, dev, pr, cb, a, r)            \
	rq_device(n, PSCHED_OP_PUSHPULL, k, nk, pv, qv, l, dt, dev, pr, cb, a, \
		  r)

#endif
