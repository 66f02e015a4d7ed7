// SPDX-License-Identifier: MIT
/*
 * The request entry point of the C API: psched_request() checks a struct
 * psched_request and hands it to its family's issue function (dense:
 * kv_worker.c, key lists: kvw_keylist.c, row-sparse: kvw_rows.c, raw:
 * kvw_raw.c);
 * psched_push / pull / pushpull are one-liners over it.
 */
#include "kvw.h"

static const char *const req_family_names[] = {
	[PSCHED_FAMILY_DENSE] = "dense",
	[PSCHED_FAMILY_KEYLIST] = "key-list",
	[PSCHED_FAMILY_ROWS] = "row-sparse",
};

static const char *const req_op_names[] = {
	[PSCHED_OP_PUSH] = "push",
	[PSCHED_OP_PULL] = "pull",
	[PSCHED_OP_PUSHPULL] = "pushpull",
};

/* The fields of struct psched_request that only some families read: a
 * bit each, in the order of req_field_names[]. */
enum {
	REQ_F_KEYS = 1u << 0,
	REQ_F_LENS = 1u << 1,
	REQ_F_PUSH_VALS = 1u << 2,
	REQ_F_PULL_VALS = 1u << 3,
	REQ_F_DEVICE = 1u << 4,
	REQ_F_ELEMS = 1u << 5,
	REQ_F_KEY = 1u << 6,
	REQ_F_ROWS = 1u << 7,
	REQ_F_PUSH_BUF = 1u << 8,
	REQ_F_PULL_BUF = 1u << 9,
};

static const char *const req_field_names[] = {
	"keys/nkeys",
	"lens",
	"push_vals",
	"pull_vals",
	"on_device/device",
	"elems/elem",
	"key",
	"row_ids/nrows",
	"push_buf",
	"pull_buf",
	"push_bytes/raw_lens/cmd/tag/server/answer",
};

/* The fields each family reads. */
static const unsigned req_family_fields[] = {
	[PSCHED_FAMILY_DENSE] = REQ_F_KEYS | REQ_F_LENS | REQ_F_PUSH_VALS |
				REQ_F_PULL_VALS | REQ_F_DEVICE,
	[PSCHED_FAMILY_KEYLIST] =
		REQ_F_KEYS | REQ_F_ELEMS | REQ_F_PUSH_BUF | REQ_F_PULL_BUF,
	[PSCHED_FAMILY_ROWS] =
		REQ_F_KEY | REQ_F_ROWS | REQ_F_PUSH_BUF | REQ_F_PULL_BUF,
};

/* The first field @rq sets that its family does not read, or NULL.  A
 * mask, not a loop over the fields: it runs for every request. */
static const char *req_foreign_field(const struct psched_request *rq)
{
	unsigned set, bad;

	set = (rq->keys || rq->nkeys ? REQ_F_KEYS : 0) |
	      (rq->lens ? REQ_F_LENS : 0) |
	      (rq->push_vals ? REQ_F_PUSH_VALS : 0) |
	      (rq->pull_vals ? REQ_F_PULL_VALS : 0) |
	      (rq->on_device || rq->device ? REQ_F_DEVICE : 0) |
	      (rq->elems || rq->elem ? REQ_F_ELEMS : 0) |
	      (rq->key ? REQ_F_KEY : 0) |
	      (rq->row_ids || rq->nrows ? REQ_F_ROWS : 0) |
	      (rq->push_buf ? REQ_F_PUSH_BUF : 0) |
	      (rq->pull_buf ? REQ_F_PULL_BUF : 0);
	bad = set & ~req_family_fields[rq->family];
	return bad ? req_field_names[__builtin_ctz(bad)] : NULL;
}

/* The first buffer @rq names that its op does not use, or NULL. */
static const char *req_unused_buffer(const struct psched_request *rq)
{
	if (rq->op == PSCHED_OP_PULL && (rq->push_vals || rq->push_buf))
		return rq->push_vals ? "push_vals" : "push_buf";
	if (rq->op == PSCHED_OP_PUSH && (rq->pull_vals || rq->pull_buf))
		return rq->pull_vals ? "pull_vals" : "pull_buf";
	return NULL;
}

/* 0, or -EINVAL naming what is wrong with @rq's shape.  What needs the
 * node's state (keys, lengths, row ranges) is checked on issue. */
static int req_check(const struct psched_request *rq)
{
	const char *fam, *op, *bad;

	if (rq->family == PSCHED_FAMILY_RAW)
		return psd_set_errmsg(-EINVAL,
				      "request: the raw family is issued by "
				      "psched_raw_request()");
	if ((unsigned)rq->family >= PSD_ARRAY_SIZE(req_family_names))
		return psd_set_errmsg(-EINVAL, "request: unknown family %d",
				      (int)rq->family);
	fam = req_family_names[rq->family];
	if (rq->op < PSCHED_OP_PUSH || rq->op > PSCHED_OP_PUSHPULL)
		return psd_set_errmsg(-EINVAL, "%s request: unknown op %d", fam,
				      (int)rq->op);
	op = req_op_names[rq->op];
	bad = req_foreign_field(rq);
	if (bad)
		return psd_set_errmsg(-EINVAL,
				      "%s %s: field %s belongs to another "
				      "family (leave it 0 / NULL)",
				      fam, op, bad);
	bad = req_unused_buffer(rq);
	if (bad)
		return psd_set_errmsg(-EINVAL, "%s %s: a %s has no %s", fam, op,
				      op, bad);
	if (rq->family != PSCHED_FAMILY_DENSE)
		return 0;
	if (rq->op != PSCHED_OP_PULL && !rq->push_vals)
		return psd_set_errmsg(-EINVAL, "dense %s without push_vals",
				      op);
	if (rq->op != PSCHED_OP_PUSH && !rq->pull_vals)
		return psd_set_errmsg(-EINVAL, "dense %s without pull_vals",
				      op);
	if (rq->nkeys && (!rq->keys || !rq->lens))
		return psd_set_errmsg(-EINVAL,
				      "dense %s of %zu keys without %s", op,
				      rq->nkeys, rq->keys ? "lens" : "keys");
	if (!rq->on_device && rq->device)
		return psd_set_errmsg(-EINVAL,
				      "dense %s: device %d without on_device",
				      op, rq->device);
	if (rq->on_device && rq->device < 0)
		return psd_set_errmsg(-EINVAL,
				      "CUDA device %d: not a device index",
				      rq->device);
	return 0;
}

static uint8_t req_msg_type(enum psched_op op)
{
	switch (op) {
	case PSCHED_OP_PUSH:
		return PSD_MSG_PUSH;
	case PSCHED_OP_PULL:
		return PSD_MSG_PULL;
	case PSCHED_OP_PUSHPULL:
		break;
	}
	return PSD_MSG_PUSHPULL;
}

int psched_request(struct psched_node *n, const struct psched_request *rq,
		   uint64_t *req)
{
	uint8_t type;
	int ret;

	if (!n || !rq)
		return psd_set_errmsg(-EINVAL, "request: no %s",
				      n ? "request" : "node");
	ret = req_check(rq);
	if (ret)
		return ret;
	type = req_msg_type(rq->op);
	ret = psd_kvw_leave_check(n, type);
	if (ret)
		return ret;
	switch (rq->family) {
	case PSCHED_FAMILY_KEYLIST:
		return psd_kvw_kl_issue(n, type, rq->nkeys, rq->keys, rq->elems,
					rq->elem, rq->push_buf, rq->pull_buf,
					rq->dtype, rq->priority, rq->cb,
					rq->arg, req);
	case PSCHED_FAMILY_ROWS:
		return psd_kvw_rows_issue(
			n, type, rq->key, rq->nrows, rq->row_ids, rq->push_buf,
			rq->pull_buf, rq->priority, rq->cb, rq->arg, req);
	case PSCHED_FAMILY_DENSE:
	case PSCHED_FAMILY_RAW: /* refused by req_check() */
		break;
	}
	return psd_kvw_issue(n, type, rq->keys, rq->nkeys, rq->push_vals,
			     rq->pull_vals, rq->lens, rq->dtype,
			     rq->on_device ? rq->device : -1, rq->priority, 0,
			     rq->cb, rq->arg, req);
}

int psched_raw_request(struct psched_node *n,
		       const struct psched_raw_request *rq, uint64_t *req)
{
	uint8_t type;
	int ret;

	if (!n || !rq)
		return psd_set_errmsg(-EINVAL, "raw request: no %s",
				      n ? "request" : "node");
	if (rq->op < PSCHED_OP_PUSH || rq->op > PSCHED_OP_PUSHPULL)
		return psd_set_errmsg(-EINVAL, "raw request: unknown op %d",
				      (int)rq->op);
	if (rq->op == PSCHED_OP_PULL && (rq->vals || rq->nbytes))
		return psd_set_errmsg(-EINVAL, "raw pull: a pull has no vals");
	type = req_msg_type(rq->op);
	ret = psd_kvw_leave_check(n, type);
	if (ret)
		return ret;
	return psd_kvw_raw_issue(n, type, rq, req);
}

int psched_push(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		const void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req)
{
	const struct psched_request rq = {
		.op = PSCHED_OP_PUSH,
		.keys = keys,
		.nkeys = nkeys,
		.push_vals = vals,
		.lens = lens,
		.dtype = dtype,
		.priority = priority,
		.cb = cb,
		.arg = arg,
	};

	return psched_request(n, &rq, req);
}

int psched_pull(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req)
{
	const struct psched_request rq = {
		.op = PSCHED_OP_PULL,
		.keys = keys,
		.nkeys = nkeys,
		.pull_vals = vals,
		.lens = lens,
		.dtype = dtype,
		.priority = priority,
		.cb = cb,
		.arg = arg,
	};

	return psched_request(n, &rq, req);
}

int psched_pushpull(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		    const void *const *push_vals, void *const *pull_vals,
		    const uint64_t *lens, enum psched_dtype dtype, int priority,
		    psched_done_fn *cb, void *arg, uint64_t *req)
{
	const struct psched_request rq = {
		.op = PSCHED_OP_PUSHPULL,
		.keys = keys,
		.nkeys = nkeys,
		.push_vals = push_vals,
		.pull_vals = pull_vals,
		.lens = lens,
		.dtype = dtype,
		.priority = priority,
		.cb = cb,
		.arg = arg,
	};

	return psched_request(n, &rq, req);
}
