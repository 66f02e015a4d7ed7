// SPDX-License-Identifier: MIT
/*
 * psched_request() in a real 2-worker, 2-server job (test_request.sh; one
 * copy per worker): every op of every family through the one entry point
 * with exact sums, then malformed requests, each refused at once with
 * -EINVAL (or the family's own code) and a message naming what is wrong,
 * and the same connections still computing exact sums after them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

#define CHECK_WHO "request rank %d", rank
#include "check.h"

#define N	 64 /* floats of the dense keys, elements of the rows */
#define NKL	 6  /* keys of the key list */
#define ROWS	 100
#define WIDTH	 4
#define ROWKEY	 500
#define NWORKERS 2

static int rank = -1;

static int issue_wait(struct psched_node *n, const struct psched_request *rq)
{
	uint64_t req;
	int ret = psched_request(n, rq, &req);

	return ret ? ret : psched_wait(n, req, 0);
}

/* @rq is refused at once with @want and a message holding @word. */
static void refused(struct psched_node *n, const struct psched_request *rq,
		    int want, const char *word, const char *what)
{
	uint64_t req = 0;
	int ret = psched_request(n, rq, &req);

	if (!ret)
		ret = psched_wait(n, req, 0);
	CHECK(ret == want, "%s: got %d (%s), want %d", what, ret,
	      psched_errmsg(), want);
	CHECK(strstr(psched_errmsg(), word), "%s: message '%s' lacks '%s'",
	      what, psched_errmsg(), word);
	printf("request rank %d: %s refused: %s\n", rank, what,
	       psched_errmsg());
}

/* Sum over the workers of what worker r pushes: (r + 1) * @v. */
static float all_workers(float v)
{
	return v * NWORKERS * (NWORKERS + 1) / 2;
}

static void check_floats(const float *got, size_t n, float step, float base,
			 const char *what)
{
	size_t i;

	for (i = 0; i < n; i++)
		CHECK(got[i] == all_workers(step * (base + (float)i)),
		      "%s[%zu] = %g, want %g", what, i, got[i],
		      all_workers(step * (base + (float)i)));
}

static void fill(float *v, size_t n, float step, float base)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i] = (float)(rank + 1) * step * (base + (float)i);
}

static void dense_ops(struct psched_node *n)
{
	static float in[2][N], out[2][N];
	uint64_t keys[2] = { 1, 2 }, lens[2] = { sizeof(in[0]), 8 };
	const void *pv[2] = { in[0], in[1] };
	void *qv[2] = { out[0], out[1] };
	uint64_t req;
	struct psched_request rq = {
		.op = PSCHED_OP_PUSH,
		.family = PSCHED_FAMILY_DENSE,
		.nkeys = 2,
		.keys = keys,
		.lens = lens,
		.push_vals = pv,
		.dtype = PSCHED_F32,
	};

	CHECK(!psched_keys_init(n, keys, 2, NULL, lens, PSCHED_F32, 0), "%s",
	      psched_errmsg());
	fill(in[0], N, 1, 1);
	fill(in[1], 2, 1, 100);
	CHECK(!issue_wait(n, &rq), "dense push: %s", psched_errmsg());
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");
	rq.op = PSCHED_OP_PULL;
	rq.push_vals = NULL;
	rq.pull_vals = qv;
	CHECK(!issue_wait(n, &rq), "dense pull: %s", psched_errmsg());
	check_floats(out[0], N, 1, 1, "dense pull key 1");
	check_floats(out[1], 2, 1, 100, "dense pull key 2");
	fill(in[0], N, 2, 1);
	fill(in[1], 2, 2, 100);
	rq.op = PSCHED_OP_PUSHPULL;
	rq.push_vals = pv;
	CHECK(!issue_wait(n, &rq), "dense pushpull: %s", psched_errmsg());
	check_floats(out[0], N, 2, 1, "dense pushpull key 1");
	check_floats(out[1], 2, 2, 100, "dense pushpull key 2");
	/* The one-liners are the same requests. */
	fill(in[0], N, 3, 1);
	CHECK(!psched_push(n, keys, 1, pv, lens, PSCHED_F32, 0, NULL, NULL,
			   &req) &&
		      !psched_wait(n, req, 0),
	      "psched_push: %s", psched_errmsg());
	CHECK(!psched_pull(n, keys, 1, qv, lens, PSCHED_F32, 0, NULL, NULL,
			   &req) &&
		      !psched_wait(n, req, 0),
	      "psched_pull: %s", psched_errmsg());
	check_floats(out[0], N, 3, 1, "psched_pull key 1");
	printf("request rank %d: dense push, pull, pushpull verified\n", rank);
}

static void keylist_ops(struct psched_node *n)
{
	/* Keys on both servers' halves of the key space; key i holds
	 * elems[i] floats. */
	static const uint64_t keys[NKL] = { 3,
					    9,
					    1000,
					    UINT64_MAX / 2 + 5,
					    UINT64_MAX / 2 + 6,
					    UINT64_MAX - 1 };
	static const uint32_t elems[NKL] = { 1, 3, 2, 5, 1, 4 };
	float in[16], out[16];
	struct psched_request rq = {
		.op = PSCHED_OP_PUSH,
		.family = PSCHED_FAMILY_KEYLIST,
		.nkeys = NKL,
		.keys = keys,
		.elems = elems,
		.push_buf = in,
		.dtype = PSCHED_F32,
	};

	fill(in, 16, 1, 1);
	CHECK(!issue_wait(n, &rq), "key-list push: %s", psched_errmsg());
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");
	rq.op = PSCHED_OP_PULL;
	rq.push_buf = NULL;
	rq.pull_buf = out;
	CHECK(!issue_wait(n, &rq), "key-list pull: %s", psched_errmsg());
	check_floats(out, 16, 1, 1, "key-list pull");
	fill(in, 16, 5, 1);
	rq.op = PSCHED_OP_PUSHPULL;
	rq.push_buf = in;
	CHECK(!issue_wait(n, &rq), "key-list pushpull: %s", psched_errmsg());
	check_floats(out, 16, 5, 1, "key-list pushpull");
	printf("request rank %d: key-list push, pull, pushpull verified\n",
	       rank);
}

static void rows_ops(struct psched_node *n)
{
	/* Rows on both servers (row ranges [0, 50) and [50, 100)). */
	static const uint64_t ids[3] = { 2, 49, 97 };
	float in[3 * WIDTH], out[3 * WIDTH];
	struct psched_request rq = {
		.op = PSCHED_OP_PUSH,
		.family = PSCHED_FAMILY_ROWS,
		.key = ROWKEY,
		.nrows = 3,
		.row_ids = ids,
		.push_buf = in,
	};

	CHECK(!psched_row_sparse_init(n, ROWKEY, ROWS, WIDTH, PSCHED_F32, 0),
	      "%s", psched_errmsg());
	fill(in, 3 * WIDTH, 1, 1);
	CHECK(!issue_wait(n, &rq), "rows push: %s", psched_errmsg());
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");
	rq.op = PSCHED_OP_PULL;
	rq.push_buf = NULL;
	rq.pull_buf = out;
	CHECK(!issue_wait(n, &rq), "rows pull: %s", psched_errmsg());
	check_floats(out, 3 * WIDTH, 1, 1, "rows pull");
	fill(in, 3 * WIDTH, 7, 1);
	rq.op = PSCHED_OP_PUSHPULL;
	rq.push_buf = in;
	CHECK(!issue_wait(n, &rq), "rows pushpull: %s", psched_errmsg());
	check_floats(out, 3 * WIDTH, 7, 1, "rows pushpull");
	printf("request rank %d: row-sparse push, pull, pushpull verified\n",
	       rank);
}

/* Requests refused before anything is sent: the shape of the struct. */
static void bad_shapes(struct psched_node *n)
{
	static float buf[N];
	uint64_t key = 1, len = sizeof(buf), row = 1, req;
	const void *pv = buf;
	void *qv = buf;
	struct psched_request ok = {
		.op = PSCHED_OP_PUSH,
		.nkeys = 1,
		.keys = &key,
		.lens = &len,
		.push_vals = &pv,
		.dtype = PSCHED_F32,
	};
	struct psched_request rq;

	CHECK(psched_request(NULL, &ok, &req) == -EINVAL, "NULL node");
	CHECK(psched_request(n, NULL, &req) == -EINVAL, "NULL request");
	rq = ok;
	rq.op = 0;
	refused(n, &rq, -EINVAL, "unknown op 0", "op 0");
	rq.op = 4;
	refused(n, &rq, -EINVAL, "unknown op 4", "op 4");
	rq = ok;
	rq.family = 4;
	refused(n, &rq, -EINVAL, "unknown family 4", "family 4");
	rq = ok;
	rq.push_vals = NULL;
	refused(n, &rq, -EINVAL, "without push_vals", "dense push, no values");
	rq = ok;
	rq.op = PSCHED_OP_PULL;
	refused(n, &rq, -EINVAL, "push_vals", "dense pull with push_vals");
	rq.push_vals = NULL;
	refused(n, &rq, -EINVAL, "without pull_vals", "dense pull, no buffers");
	rq = ok;
	rq.pull_vals = &qv;
	refused(n, &rq, -EINVAL, "pull_vals", "dense push with pull_vals");
	rq = ok;
	rq.lens = NULL;
	refused(n, &rq, -EINVAL, "without lens", "dense push, no lens");
	rq = ok;
	rq.keys = NULL;
	refused(n, &rq, -EINVAL, "without keys", "dense push, no keys");
	rq = ok;
	rq.row_ids = &row;
	refused(n, &rq, -EINVAL, "row_ids", "dense push with row_ids");
	rq = ok;
	rq.elem = 1;
	refused(n, &rq, -EINVAL, "elems", "dense push with elem");
	rq = ok;
	rq.push_buf = buf;
	refused(n, &rq, -EINVAL, "push_buf", "dense push with push_buf");
	rq = ok;
	rq.on_device = true;
	rq.device = -1;
	refused(n, &rq, -EINVAL, "device -1", "device -1");
	rq = ok;
	rq.device = 1;
	refused(n, &rq, -EINVAL, "on_device", "device without on_device");
	rq = ok;
	rq.family = PSCHED_FAMILY_KEYLIST;
	refused(n, &rq, -EINVAL, "lens", "key list with dense lens");
	rq.lens = NULL;
	rq.push_vals = NULL;
	rq.push_buf = buf;
	rq.on_device = true;
	refused(n, &rq, -EINVAL, "on_device", "key list on a device");
	rq = ok;
	rq.family = PSCHED_FAMILY_ROWS;
	refused(n, &rq, -EINVAL, "keys", "rows with keys");
}

/* Requests refused by the family's own checks: lengths, order, ids. */
static void bad_contents(struct psched_node *n)
{
	static float buf[N];
	uint64_t key = 1, len = 12, unsorted[2] = { 9, 3 }, row = ROWS;
	const void *pv = buf;
	void *qv = buf;
	const struct psched_request dense = {
		.op = PSCHED_OP_PUSH,
		.nkeys = 1,
		.keys = &key,
		.lens = &len,
		.push_vals = &pv,
		.dtype = PSCHED_F32,
	};
	struct psched_request rq = dense;

	refused(n, &rq, PSCHED_ESIZE, "key 1", "dense push of a wrong length");
	rq.op = PSCHED_OP_PUSHPULL;
	rq.pull_vals = &qv;
	refused(n, &rq, PSCHED_ESIZE, "key 1", "dense pushpull, wrong length");
	rq = (struct psched_request){
		.op = PSCHED_OP_PUSH,
		.family = PSCHED_FAMILY_KEYLIST,
		.nkeys = 2,
		.keys = unsorted,
		.elem = 1,
		.push_buf = buf,
		.dtype = PSCHED_F32,
	};
	refused(n, &rq, -EINVAL, "1", "unsorted key list");
	rq.keys = &unsorted[1];
	rq.nkeys = 1;
	rq.elem = 0;
	refused(n, &rq, -EINVAL, "len", "key list with no lengths");
	rq = (struct psched_request){
		.op = PSCHED_OP_PUSH,
		.family = PSCHED_FAMILY_ROWS,
		.key = ROWKEY,
		.nrows = 1,
		.row_ids = &row,
		.push_buf = buf,
	};
	refused(n, &rq, -EINVAL, "out of range", "row id past the table");
	row = 0;
	rq.push_buf = NULL;
	refused(n, &rq, -EINVAL, "row buffer", "rows push without rows");
	rq.push_buf = buf;
	rq.key = ROWKEY + 1;
	refused(n, &rq, PSCHED_EUNKNOWNKEY, "501", "rows of an unknown key");
	/* Host memory named device memory: no CUDA here (-ENODEV), or CUDA
	 * that finds a host pointer (-EINVAL). */
	rq = dense;
	len = sizeof(buf);
	rq.on_device = true;
	rq.device = 0;
	{
		uint64_t req;
		int ret = psched_request(n, &rq, &req);

		if (!ret)
			ret = psched_wait(n, req, 0);
		CHECK(ret == -ENODEV || ret == -EINVAL,
		      "host buffer as device 0: %d %s", ret, psched_errmsg());
	}
}

int main(void)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *n;

	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	CHECK(!psched_node_create(cfg, &n), "create: %s", psched_errmsg());
	psched_cfg_destroy(cfg);
	rank = psched_node_rank(n);
	CHECK(psched_num_workers(n) == NWORKERS, "needs %d workers", NWORKERS);
	CHECK(psched_num_servers(n) == 2, "needs 2 servers");

	dense_ops(n);
	keylist_ops(n);
	rows_ops(n);
	bad_shapes(n);
	bad_contents(n);
	/* The same connections still sum exactly. */
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");
	keylist_ops(n);
	CHECK(!psched_barrier(n, PSCHED_GROUP_WORKERS, 0), "barrier");
	printf("request rank %d: verified\n", rank);
	CHECK(!psched_node_destroy(n), "leave: %s", psched_errmsg());
	return 0;
}
