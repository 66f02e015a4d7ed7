// SPDX-License-Identifier: MIT
/*
 * Row-sparse keys of a KVStore (include/psched/kvstore.h,
 * psched_kvstore_row_sparse_*): MXNet's row_sparse values in every store
 * type.  Dist stores declare the key on the worker node and wait for
 * each of its row-sparse requests; "local" stores keep the table in this
 * process (calloc'd: pages never written cost nothing) and fold a push
 * row by row, as a server does (server/kvs_rows.c): each distinct row is
 * replaced by the push's sum of it, or updated by the installed
 * optimizer or updater with that row's own states (common/optim_rows.c,
 * the lazy update).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "psched/kvstore.h"
#include "map.h"
#include "rows.h"
#include "updater.h"
#include "kvstore_int.h"

enum rows_op { ROWS_PUSH = 0, ROWS_PULL = 1, ROWS_PUSHPULL = 2 };

static const char *const rows_op_names[] = { "row-sparse push",
					     "row_sparse_pull",
					     "row-sparse pushpull" };

/* A "local" row's optimizer state: its update count, then the
 * optimizer's state arrays of width doubles each. */
struct rows_state {
	uint32_t t;
	double s[];
};

static uint64_t rows_rowbytes(const struct kvstore_key *k)
{
	return k->width * psched_dtype_size((enum psched_dtype)k->dtype);
}

static void rows_state_free(void *val, void *arg)
{
	(void)arg;
	free(val);
}

void psd_kvstore_rows_fini(struct kvstore_key *k)
{
	psd_map_clear(&k->rowst, rows_state_free, NULL);
	psd_map_fini(&k->rowst);
}

/* Lock held: the row-sparse entry of @key, or NULL with *@ret set. */
static struct kvstore_key *rows_key(struct psched_kvstore *kv, uint64_t key,
				    const char *cn, int *ret)
{
	struct kvstore_key *k = psd_kvstore_key_find(kv, key);

	if (!k)
		*ret = psd_set_errmsg(PSCHED_EUNKNOWNKEY,
				      "%s of key %llu: the key was never "
				      "initialised (call init first)",
				      cn, (unsigned long long)key);
	else if (!k->rows)
		*ret = psd_set_errmsg(-EINVAL,
				      "%s of key %llu: not a row-sparse key "
				      "(it was initialised dense)",
				      cn, (unsigned long long)key);
	return k && k->rows ? k : NULL;
}

static int rows_check_ids(uint64_t key, uint64_t rows, const char *cn, size_t n,
			  const uint64_t *ids, const void *buf)
{
	size_t i;

	if (n && (!ids || !buf))
		return psd_set_errmsg(-EINVAL,
				      "%s of key %llu: no row ids or no row "
				      "buffer",
				      cn, (unsigned long long)key);
	for (i = 0; i < n; i++)
		if (ids[i] >= rows)
			return psd_set_errmsg(-EINVAL,
					      "%s of key %llu: row id %llu is "
					      "out of range (the table has "
					      "%llu rows)",
					      cn, (unsigned long long)key,
					      (unsigned long long)ids[i],
					      (unsigned long long)rows);
	return 0;
}

/* Lock held: row @id's optimizer state of @k with @ns state arrays
 * (zero when new; a change of @ns starts every row over), or NULL. */
static struct rows_state *rows_state_of(struct kvstore_key *k, uint64_t id,
					unsigned ns)
{
	struct rows_state *st;

	if (k->rowst_ns != ns) {
		psd_map_clear(&k->rowst, rows_state_free, NULL);
		k->rowst_ns = ns;
	}
	st = psd_map_get(&k->rowst, id);
	if (st)
		return st;
	st = calloc(1, sizeof(*st) + (size_t)ns * k->width * sizeof(double));
	if (st && psd_map_put(&k->rowst, id, st)) {
		free(st);
		st = NULL;
	}
	return st;
}

/* Lock held: fold summed row @g into row @id of the local table. */
static int rows_fold(struct psched_kvstore *kv, struct kvstore_key *k,
		     uint64_t id, const uint8_t *g)
{
	uint64_t rb = rows_rowbytes(k);
	uint8_t *w = k->value + id * rb;
	struct rows_state *st;
	unsigned ns;

	if (!psd_upd_rows_covers(&kv->upd, k->dtype, &ns)) {
		memcpy(w, g, (size_t)rb);
		return 0;
	}
	st = rows_state_of(k, id, ns);
	if (!st)
		return psd_set_errmsg(-ENOMEM,
				      "row-sparse push of key %llu: no memory "
				      "for the optimizer state of row %llu",
				      (unsigned long long)k->key,
				      (unsigned long long)id);
	psd_upd_rows_apply(&kv->upd, k->key, k->dtype, id, k->width, w, g,
			   st->s, &st->t);
	return 0;
}

struct rows_ref {
	uint64_t id;
	size_t i;
};

static int rows_ref_cmp(const void *a, const void *b)
{
	const struct rows_ref *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->i < y->i ? -1 : (x->i > y->i);
}

/* Lock held: a local push (one step): sum the rows of each distinct id,
 * then fold each sum into the table. */
static int rows_local_push(struct psched_kvstore *kv, struct kvstore_key *k,
			   size_t n, const uint64_t *ids, const uint8_t *rows)
{
	uint64_t rb = rows_rowbytes(k);
	struct rows_ref *refs;
	uint8_t *sum;
	size_t i, j;
	int ret = 0;

	if (!n)
		return 0;
	refs = calloc(n, sizeof(*refs));
	sum = malloc((size_t)rb);
	if (!refs || !sum) {
		free(refs);
		free(sum);
		return psd_set_errmsg(-ENOMEM, "row-sparse push: no memory");
	}
	for (i = 0; i < n; i++)
		refs[i] = (struct rows_ref){ .id = ids[i], .i = i };
	qsort(refs, n, sizeof(*refs), rows_ref_cmp);
	for (i = 0; i < n && !ret; i = j) {
		memcpy(sum, rows + refs[i].i * rb, (size_t)rb);
		for (j = i + 1; j < n && refs[j].id == refs[i].id; j++)
			psd_rows_add(k->dtype, sum, rows + refs[j].i * rb, rb);
		ret = rows_fold(kv, k, refs[i].id, sum);
	}
	free(refs);
	free(sum);
	return ret;
}

/* Lock held: a validated local call. */
static int rows_local_run(struct psched_kvstore *kv, struct kvstore_key *k,
			  enum rows_op op, size_t n, const uint64_t *ids,
			  const void *rows, void *out)
{
	uint64_t rb = rows_rowbytes(k);
	size_t i;
	int ret = 0;

	if (op != ROWS_PULL)
		ret = rows_local_push(kv, k, n, ids, rows);
	for (i = 0; !ret && op != ROWS_PUSH && i < n; i++)
		memcpy((uint8_t *)out + i * rb, k->value + ids[i] * rb,
		       (size_t)rb);
	return ret;
}

/* A dist store's row-sparse request, waited for. */
static int rows_dist_run(struct psched_kvstore *kv, enum rows_op op,
			 uint64_t key, size_t n, const uint64_t *ids,
			 const void *rows, void *out, int priority)
{
	static const enum psched_op ops[] = {
		[ROWS_PUSH] = PSCHED_OP_PUSH,
		[ROWS_PULL] = PSCHED_OP_PULL,
		[ROWS_PUSHPULL] = PSCHED_OP_PUSHPULL,
	};
	const struct psched_request rq = {
		.op = ops[op],
		.family = PSCHED_FAMILY_ROWS,
		.priority =
			priority == INT_MIN ? INT_MAX : -priority, /* MXNet's */
		.key = key,
		.nrows = n,
		.row_ids = ids,
		.push_buf = op != ROWS_PULL ? rows : NULL,
		.pull_buf = op != ROWS_PUSH ? out : NULL,
	};
	uint64_t req;
	int ret;

	ret = psched_request(kv->node, &rq, &req);
	return ret ? ret : psched_wait(kv->node, req, 0);
}

static int rows_call(struct psched_kvstore *kv, enum rows_op op, uint64_t key,
		     size_t n, const uint64_t *ids, const void *rows, void *out,
		     int priority)
{
	const char *cn = rows_op_names[op];
	struct kvstore_key *k;
	int ret = 0;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	pthread_mutex_lock(&kv->lock);
	k = rows_key(kv, key, cn, &ret);
	if (k && op != ROWS_PULL)
		ret = rows_check_ids(key, k->rows, cn, n, ids, rows);
	if (k && !ret && op != ROWS_PUSH)
		ret = rows_check_ids(key, k->rows, cn, n, ids, out);
	if (!ret && kv->kind == KVSTORE_LOCAL)
		ret = rows_local_run(kv, k, op, n, ids, rows, out);
	pthread_mutex_unlock(&kv->lock);
	if (!ret && kv->kind != KVSTORE_LOCAL)
		ret = rows_dist_run(kv, op, key, n, ids, rows, out, priority);
	return ret;
}

int psched_kvstore_row_sparse_push(struct psched_kvstore *kv, uint64_t key,
				   size_t nrows, const uint64_t *ids,
				   const void *rows, int priority)
{
	return rows_call(kv, ROWS_PUSH, key, nrows, ids, rows, NULL, priority);
}

int psched_kvstore_row_sparse_pull(struct psched_kvstore *kv, uint64_t key,
				   size_t nrows, const uint64_t *ids, void *out,
				   int priority)
{
	return rows_call(kv, ROWS_PULL, key, nrows, ids, NULL, out, priority);
}

int psched_kvstore_row_sparse_pushpull(struct psched_kvstore *kv, uint64_t key,
				       size_t nrows, const uint64_t *ids,
				       const void *rows, void *out,
				       int priority)
{
	return rows_call(kv, ROWS_PUSHPULL, key, nrows, ids, rows, out,
			 priority);
}

/* Lock held: check an init of @key; nothing is recorded yet. */
static int rows_check_init(struct psched_kvstore *kv, uint64_t key,
			   uint64_t rows, uint64_t width,
			   enum psched_dtype dtype, size_t nids,
			   const uint64_t *ids, const void *vals)
{
	uint64_t es;

	if ((unsigned)dtype > PSCHED_DTYPE_MAX || !rows || !width)
		return psd_set_errmsg(-EINVAL,
				      "init of row-sparse key %llu: %llu rows "
				      "of %llu elements: an empty shape or a "
				      "bad dtype",
				      (unsigned long long)key,
				      (unsigned long long)rows,
				      (unsigned long long)width);
	es = psched_dtype_size(dtype);
	if (width > UINT32_MAX || rows > SIZE_MAX / (width * es))
		return psd_set_errmsg(PSCHED_ESIZE,
				      "init of row-sparse key %llu: %llu rows "
				      "of %llu elements is too large",
				      (unsigned long long)key,
				      (unsigned long long)rows,
				      (unsigned long long)width);
	if (psd_kvstore_key_find(kv, key))
		return psd_set_errmsg(-EEXIST,
				      "init of key %llu: the key is already "
				      "initialised",
				      (unsigned long long)key);
	return rows_check_ids(key, rows, "init", nids, ids, vals);
}

/* Lock held: record @key; "local": its table, rows @ids set to @vals. */
static int rows_record(struct psched_kvstore *kv, uint64_t key, uint64_t rows,
		       uint64_t width, enum psched_dtype dtype, size_t nids,
		       const uint64_t *ids, const uint8_t *vals)
{
	uint64_t rb = width * psched_dtype_size(dtype);
	struct kvstore_key *k;
	uint8_t *t = NULL;
	size_t i;

	if (kv->kind == KVSTORE_LOCAL) {
		t = calloc((size_t)rows, (size_t)rb);
		if (!t)
			return psd_set_errmsg(-ENOMEM,
					      "init of row-sparse key %llu: no "
					      "memory for %llu rows",
					      (unsigned long long)key,
					      (unsigned long long)rows);
		for (i = 0; i < nids; i++) /* repeated ids are summed */
			psd_rows_add((uint8_t)dtype, t + ids[i] * rb,
				     vals + i * rb, rb);
	}
	k = psd_kvstore_key_add(kv, key);
	if (!k) {
		free(t);
		return psd_set_errmsg(-ENOMEM, "init: no memory");
	}
	k->dtype = (uint8_t)dtype;
	k->rows = rows;
	k->width = width;
	k->nbytes = rows * rb;
	k->value = t;
	return 0;
}

/* A dist store's init: declare the key, then one step every worker
 * takes, with rank 0's rows in it (the servers' default rule stores
 * them: replaced in sync mode, added to zero in async mode), then a
 * barrier, so that no worker reads before rank 0's rows are in. */
static int rows_init_dist(struct psched_kvstore *kv, uint64_t key,
			  uint64_t rows, uint64_t width,
			  enum psched_dtype dtype, size_t nids,
			  const uint64_t *ids, const void *vals)
{
	bool refuse = kv->rank == 0 && nids && kv->opt_set;
	int ret;

	ret = psched_row_sparse_init(kv->node, key, rows, width, dtype, 0);
	if (ret)
		return ret;
	pthread_mutex_lock(&kv->lock);
	ret = rows_record(kv, key, rows, width, dtype, 0, NULL, NULL);
	pthread_mutex_unlock(&kv->lock);
	if (!ret)
		ret = rows_dist_run(kv, ROWS_PUSH, key,
				    kv->rank == 0 && !refuse ? nids : 0, ids,
				    vals, NULL, 0);
	if (!ret)
		ret = psched_barrier(kv->node, PSCHED_GROUP_WORKERS, 0);
	if (!ret && refuse)
		ret = psd_set_errmsg(-EINVAL,
				     "init of row-sparse key %llu: its %zu "
				     "rows would go through the optimizer "
				     "set before; init the key before "
				     "set_optimizer (it is declared, all "
				     "zero)",
				     (unsigned long long)key, nids);
	return ret;
}

int psched_kvstore_row_sparse_init(struct psched_kvstore *kv, uint64_t key,
				   uint64_t rows, uint64_t width,
				   enum psched_dtype dtype, size_t nids,
				   const uint64_t *ids, const void *vals)
{
	int ret;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	pthread_mutex_lock(&kv->lock);
	ret = rows_check_init(kv, key, rows, width, dtype, nids, ids, vals);
	if (!ret && kv->kind == KVSTORE_LOCAL)
		ret = rows_record(kv, key, rows, width, dtype, nids, ids, vals);
	pthread_mutex_unlock(&kv->lock);
	if (!ret && kv->kind != KVSTORE_LOCAL)
		ret = rows_init_dist(kv, key, rows, width, dtype, nids, ids,
				     vals);
	return ret;
}
