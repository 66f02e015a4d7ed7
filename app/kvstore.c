// SPDX-License-Identifier: MIT
/*
 * KVStore (include/psched/kvstore.h): MXNet's kvstore over the public node
 * API.  It records each key's dtype and size at init and checks every call
 * against them before anything is sent, maps MXNet priorities onto the
 * node's order, and keeps the outstanding requests of each key so that a
 * wait covers exactly the requests issued on those keys.  The "local" type
 * keeps the values in this process.  Creating, configuring and destroying
 * a store are in kvstore_life.c.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "psched/kvstore.h"
#include "kvstore_gpu.h"
#include "map.h"
#include "updater.h"
#include "kvstore_states.h"
#include "kvstore_int.h"

static const char *kvstore_dtype_name(unsigned dtype)
{
	return psched_dtype_name((enum psched_dtype)dtype);
}

/* MXNet: larger = more urgent; the node API: smaller = sooner. */
static int kvstore_priority(int mx)
{
	return mx == INT_MIN ? INT_MAX : -mx;
}

static struct kvstore_key *kvstore_find(struct psched_kvstore *kv, uint64_t key)
{
	return psd_map_get(&kv->keys, key);
}

struct kvstore_key *psd_kvstore_key_find(struct psched_kvstore *kv,
					 uint64_t key)
{
	return kvstore_find(kv, key);
}

struct kvstore_key *psd_kvstore_key_add(struct psched_kvstore *kv, uint64_t key)
{
	struct kvstore_key *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->key = key;
	psd_map_init(&k->rowst);
	if (psd_map_put(&kv->keys, key, k)) {
		free(k);
		return NULL;
	}
	return k;
}

/*
 * Lock held: the next entry of @keys (those that exist), or of every key
 * when @keys is NULL; start with *@pos = 0.  NULL at the end.
 */
static struct kvstore_key *kvstore_iter(struct psched_kvstore *kv,
					const uint64_t *keys, size_t nkeys,
					size_t *pos)
{
	struct kvstore_key *k;

	if (!keys)
		return psd_map_next(&kv->keys, pos, NULL);
	while (*pos < nkeys) {
		k = kvstore_find(kv, keys[(*pos)++]);
		if (k)
			return k;
	}
	return NULL;
}

void psd_kvstore_op_put(struct kvstore_op *op)
{
	if (--op->refs)
		return;
	free(op->msg);
	free(op);
}

/* Lock held: @op now covers @k too. */
static int kvstore_key_add_op(struct kvstore_key *k, struct kvstore_op *op)
{
	struct kvstore_op **n;
	unsigned cap;

	if (k->nops == k->ops_cap) {
		cap = k->ops_cap ? k->ops_cap * 2 : 4;
		n = realloc(k->ops, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		k->ops = n;
		k->ops_cap = cap;
	}
	k->ops[k->nops++] = op;
	op->refs++;
	return 0;
}

/* Lock held: forget the finished requests of @k. */
static void kvstore_key_prune(struct kvstore_key *k)
{
	unsigned i, j = 0;

	for (i = 0; i < k->nops; i++) {
		if (k->ops[i]->state == OP_DONE)
			psd_kvstore_op_put(k->ops[i]);
		else
			k->ops[j++] = k->ops[i];
	}
	k->nops = j;
}

/* Lock held (dropped while waiting): @op is done when this returns. */
static void kvstore_op_wait(struct psched_kvstore *kv, struct kvstore_op *op)
{
	char *msg = NULL;
	int ret;

	while (op->state == OP_WAITING)
		pthread_cond_wait(&kv->cond, &kv->lock);
	if (op->state == OP_DONE)
		return;
	op->state = OP_WAITING;
	pthread_mutex_unlock(&kv->lock);
	ret = psched_wait(kv->node, op->req, 0);
	if (ret)
		msg = strdup(psched_errmsg());
	pthread_mutex_lock(&kv->lock);
	op->err = ret;
	op->msg = msg;
	op->state = OP_DONE;
	pthread_cond_broadcast(&kv->cond);
}

/* Lock held: a per-call scratch list of the keys' ops. */
static int kvstore_collect(struct kvstore_key *k, struct kvstore_op ***ops,
			   size_t *n, size_t *cap)
{
	struct kvstore_op **nv;
	unsigned i;

	for (i = 0; i < k->nops; i++) {
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 16;
			nv = realloc(*ops, *cap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			*ops = nv;
		}
		(*ops)[(*n)++] = k->ops[i];
		k->ops[i]->refs++;
	}
	return 0;
}

/* Lock held: gather the ops of @keys (all keys when NULL). */
static int kvstore_gather(struct psched_kvstore *kv, const uint64_t *keys,
			  size_t nkeys, struct kvstore_op ***ops, size_t *n)
{
	struct kvstore_key *k;
	size_t pos = 0, cap = 0;
	int ret = 0;

	*ops = NULL;
	*n = 0;
	while (!ret && (k = kvstore_iter(kv, keys, nkeys, &pos)))
		ret = kvstore_collect(k, ops, n, &cap);
	return ret;
}

int psched_kvstore_wait(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys)
{
	struct kvstore_op **ops;
	struct kvstore_key *k;
	size_t n, i, pos = 0;
	int ret, first = 0;

	if (!kv || (!keys && nkeys))
		return psd_set_errmsg(-EINVAL, "kvstore wait: bad arguments");
	pthread_mutex_lock(&kv->lock);
	ret = kvstore_gather(kv, keys, nkeys, &ops, &n);
	for (i = 0; i < n; i++) {
		kvstore_op_wait(kv, ops[i]);
		if (ops[i]->err && !ops[i]->reported && !first) {
			ops[i]->reported = true;
			first = psd_set_errmsg(ops[i]->err, "%s", ops[i]->msg);
		}
	}
	while ((k = kvstore_iter(kv, keys, nkeys, &pos)))
		kvstore_key_prune(k);
	for (i = 0; i < n; i++)
		psd_kvstore_op_put(ops[i]);
	pthread_mutex_unlock(&kv->lock);
	free(ops);
	if (ret)
		return psd_set_errmsg(ret, "kvstore wait: no memory");
	return first;
}

int psched_kvstore_test(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys)
{
	struct kvstore_key *k;
	size_t pos = 0;
	unsigned i;
	int ret = 1;

	if (!kv || (!keys && nkeys))
		return psd_set_errmsg(-EINVAL, "kvstore test: bad arguments");
	pthread_mutex_lock(&kv->lock);
	while (ret == 1 && (k = kvstore_iter(kv, keys, nkeys, &pos)))
		for (i = 0; ret == 1 && i < k->nops; i++)
			if (k->ops[i]->state == OP_WAITING)
				ret = 0;
			else if (k->ops[i]->state == OP_PENDING)
				ret = psched_test(kv->node, k->ops[i]->req);
	pthread_mutex_unlock(&kv->lock);
	return ret;
}

static const char *const kvstore_call_names[] = { "push", "pull", "pushpull" };

/* Lock held: check one key of a call against what init recorded. */
static int kvstore_check_key(struct psched_kvstore *kv, enum kvstore_call call,
			     uint64_t key, uint64_t len,
			     enum psched_dtype dtype, struct kvstore_key **out)
{
	const char *cn = kvstore_call_names[call];
	struct kvstore_key *k = kvstore_find(kv, key);
	unsigned es;

	if (!k)
		return psd_set_errmsg(PSCHED_EUNKNOWNKEY,
				      "%s of key %llu: the key was never "
				      "initialised (call init first)",
				      cn, (unsigned long long)key);
	if (k->rows)
		return psd_set_errmsg(-EINVAL,
				      "%s of key %llu: a row-sparse key (push "
				      "its rows, read them with "
				      "row_sparse_pull)",
				      cn, (unsigned long long)key);
	es = psched_dtype_size((enum psched_dtype)k->dtype);
	if (k->dtype != dtype)
		return psd_set_errmsg(-EINVAL,
				      "%s of key %llu: the values are %s but "
				      "the key was initialised as %s",
				      cn, (unsigned long long)key,
				      kvstore_dtype_name(dtype),
				      kvstore_dtype_name(k->dtype));
	if (call == CALL_PUSH && len != k->nbytes)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "push of key %llu: %llu bytes given, "
				      "the key holds %llu bytes (%llu x %s)",
				      (unsigned long long)key,
				      (unsigned long long)len,
				      (unsigned long long)k->nbytes,
				      (unsigned long long)(k->nbytes / es),
				      kvstore_dtype_name(k->dtype));
	if (call != CALL_PUSH && len < k->nbytes)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "%s of key %llu: the output buffer of "
				      "%llu bytes is too small for the key's "
				      "%llu bytes (%llu x %s)",
				      cn, (unsigned long long)key,
				      (unsigned long long)len,
				      (unsigned long long)k->nbytes,
				      (unsigned long long)(k->nbytes / es),
				      kvstore_dtype_name(k->dtype));
	*out = k;
	return 0;
}

/* Lock held: @key not yet named in this call. */
static int kvstore_check_dup(size_t i, const uint64_t *keys, const char *cn)
{
	size_t j;

	/* Calls name few keys; a quadratic scan beats a table. */
	for (j = 0; j < i; j++)
		if (keys[j] == keys[i])
			return psd_set_errmsg(-EINVAL,
					      "%s: key %llu appears twice in "
					      "one call",
					      cn, (unsigned long long)keys[i]);
	return 0;
}

/* Lock held: validate a call; @sizes gets each key's size. */
static int kvstore_check_call(struct psched_kvstore *kv, enum kvstore_call call,
			      const uint64_t *keys, size_t nkeys,
			      const void *const *vals, void *const *outs,
			      const uint64_t *lens, enum psched_dtype dtype,
			      uint64_t *sizes)
{
	const char *cn = kvstore_call_names[call];
	struct kvstore_key *k = NULL;
	size_t i;
	int ret;

	if (!nkeys || !keys || !lens || (call != CALL_PULL && !vals) ||
	    (call != CALL_PUSH && !outs))
		return psd_set_errmsg(-EINVAL,
				      "%s: no keys, lengths or buffers", cn);
	for (i = 0; i < nkeys; i++) {
		if ((vals && !vals[i]) || (outs && !outs[i]))
			return psd_set_errmsg(-EINVAL,
					      "%s of key %llu: NULL buffer", cn,
					      (unsigned long long)keys[i]);
		ret = kvstore_check_dup(i, keys, cn);
		if (!ret)
			ret = kvstore_check_key(kv, call, keys[i], lens[i],
						dtype, &k);
		if (ret)
			return ret;
		sizes[i] = k->nbytes;
	}
	return 0;
}

static void kvstore_local_run(struct psched_kvstore *kv, enum kvstore_call call,
			      const uint64_t *keys, size_t nkeys,
			      const void *const *vals, void *const *outs)
{
	struct kvstore_key *k;
	size_t i;

	for (i = 0; i < nkeys; i++) {
		k = kvstore_find(kv, keys[i]);
		if (call != CALL_PULL &&
		    !psd_upd_apply(&kv->upd, k->key, k->dtype, 0, k->nbytes, 0,
				   k->value, vals[i], k->nbytes))
			memcpy(k->value, vals[i], (size_t)k->nbytes);
		if (call != CALL_PUSH && outs[i] != k->value)
			memcpy(outs[i], k->value, (size_t)k->nbytes);
	}
}

/* Lock held: issue a validated call to the node; record the op. */
static int kvstore_dist_issue(struct psched_kvstore *kv, enum kvstore_call call,
			      const uint64_t *keys, size_t nkeys,
			      const void *const *vals, void *const *outs,
			      const uint64_t *sizes, enum psched_dtype dtype,
			      int device, int prio)
{
	struct kvstore_op *op = calloc(1, sizeof(*op));
	size_t i;
	int ret;

	if (!op)
		return psd_set_errmsg(-ENOMEM, "no memory for a request");
	if (device >= 0)
		ret = psd_kvstore_issue_device(kv->node, call, keys, nkeys,
					       vals, outs, sizes, dtype, device,
					       prio, &op->req);
	else if (call == CALL_PUSH)
		ret = psched_push(kv->node, keys, nkeys, vals, sizes, dtype,
				  prio, NULL, NULL, &op->req);
	else if (call == CALL_PULL)
		ret = psched_pull(kv->node, keys, nkeys, outs, sizes, dtype,
				  prio, NULL, NULL, &op->req);
	else
		ret = psched_pushpull(kv->node, keys, nkeys, vals, outs, sizes,
				      dtype, prio, NULL, NULL, &op->req);
	if (ret) {
		free(op);
		return ret;
	}
	op->refs = 1; /* ours, until the keys hold it */
	for (i = 0; i < nkeys && !ret; i++)
		ret = kvstore_key_add_op(kvstore_find(kv, keys[i]), op);
	if (ret) {
		/* Keep the buffers' promise: wait for it here. */
		kvstore_op_wait(kv, op);
		ret = psd_set_errmsg(-ENOMEM,
				     "%s: no memory to track the "
				     "request (it was waited for)",
				     kvstore_call_names[call]);
	}
	psd_kvstore_op_put(op);
	return ret;
}

int psd_kvstore_call(struct psched_kvstore *kv, enum kvstore_call call,
		     const uint64_t *keys, size_t nkeys,
		     const void *const *vals, void *const *outs,
		     const uint64_t *lens, enum psched_dtype dtype, int device,
		     int priority)
{
	uint64_t small[16], *sizes = small;
	int ret;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	if (nkeys > PSD_ARRAY_SIZE(small)) {
		sizes = calloc(nkeys, sizeof(*sizes));
		if (!sizes)
			return psd_set_errmsg(-ENOMEM, "no memory");
	}
	pthread_mutex_lock(&kv->lock);
	ret = kvstore_check_call(kv, call, keys, nkeys, vals, outs, lens, dtype,
				 sizes);
	if (!ret && kv->kind == KVSTORE_LOCAL && device >= 0)
		ret = psd_set_errmsg(-EINVAL,
				     "%s: the local store takes host "
				     "buffers only",
				     kvstore_call_names[call]);
	else if (!ret && kv->kind == KVSTORE_LOCAL)
		kvstore_local_run(kv, call, keys, nkeys, vals, outs);
	else if (!ret)
		ret = kvstore_dist_issue(kv, call, keys, nkeys, vals, outs,
					 sizes, dtype, device,
					 kvstore_priority(priority));
	pthread_mutex_unlock(&kv->lock);
	if (sizes != small)
		free(sizes);
	return ret;
}

int psched_kvstore_push(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys, const void *const *vals,
			const uint64_t *lens, enum psched_dtype dtype,
			int priority)
{
	return psd_kvstore_call(kv, CALL_PUSH, keys, nkeys, vals, NULL, lens,
				dtype, -1, priority);
}

int psched_kvstore_pull(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys, void *const *outs, const uint64_t *lens,
			enum psched_dtype dtype, int priority)
{
	return psd_kvstore_call(kv, CALL_PULL, keys, nkeys, NULL, outs, lens,
				dtype, -1, priority);
}

int psched_kvstore_pushpull(struct psched_kvstore *kv, const uint64_t *keys,
			    size_t nkeys, const void *const *vals,
			    void *const *outs, const uint64_t *lens,
			    enum psched_dtype dtype, int priority)
{
	return psd_kvstore_call(kv, CALL_PUSHPULL, keys, nkeys, vals, outs,
				lens, dtype, -1, priority);
}

/* Lock held: check @keys for init; nothing recorded yet. */
static int kvstore_check_init(struct psched_kvstore *kv, const uint64_t *keys,
			      size_t nkeys, const void *const *vals,
			      const uint64_t *lens, enum psched_dtype dtype)
{
	size_t i;
	int ret;

	if (!nkeys || !keys || !lens || (unsigned)dtype > PSCHED_DTYPE_MAX ||
	    (!vals && kv->kind == KVSTORE_LOCAL))
		return psd_set_errmsg(-EINVAL, "init: no keys, lengths or "
					       "values, or a bad dtype");
	for (i = 0; i < nkeys; i++) {
		ret = kvstore_check_dup(i, keys, "init");
		if (ret)
			return ret;
		if (kvstore_find(kv, keys[i]))
			return psd_set_errmsg(-EEXIST,
					      "init of key %llu: the key is "
					      "already initialised",
					      (unsigned long long)keys[i]);
		if (!lens[i] || lens[i] % psched_dtype_size(dtype))
			return psd_set_errmsg(PSCHED_ESIZE,
					      "init of key %llu: %llu bytes is "
					      "no whole, non-zero number of %s",
					      (unsigned long long)keys[i],
					      (unsigned long long)lens[i],
					      kvstore_dtype_name(dtype));
		if (vals && !vals[i] &&
		    (kv->kind == KVSTORE_LOCAL || kv->rank == 0))
			return psd_set_errmsg(-EINVAL,
					      "init of key %llu: NULL value",
					      (unsigned long long)keys[i]);
	}
	return 0;
}

/* Lock held: record the keys (and, for "local", their values). */
static int kvstore_record(struct psched_kvstore *kv, const uint64_t *keys,
			  size_t nkeys, const void *const *vals,
			  const uint64_t *lens, enum psched_dtype dtype)
{
	struct kvstore_key *k;
	uint8_t *v = NULL;
	size_t i;

	for (i = 0; i < nkeys; i++) {
		if (kv->kind == KVSTORE_LOCAL) {
			v = malloc((size_t)lens[i]);
			if (!v)
				return psd_set_errmsg(
					-ENOMEM,
					"init of key %llu: no "
					"memory",
					(unsigned long long)keys[i]);
			memcpy(v, vals[i], (size_t)lens[i]);
		}
		k = psd_kvstore_key_add(kv, keys[i]);
		if (!k) {
			free(v);
			return psd_set_errmsg(-ENOMEM, "init: no memory");
		}
		k->dtype = (uint8_t)dtype;
		k->nbytes = lens[i];
		k->value = v;
	}
	return 0;
}

int psched_kvstore_init(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys, const void *const *vals,
			const uint64_t *lens, enum psched_dtype dtype)
{
	int ret;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	pthread_mutex_lock(&kv->lock);
	ret = kvstore_check_init(kv, keys, nkeys, vals, lens, dtype);
	/* The node's init is collective and ends in a worker barrier. */
	if (!ret && kv->kind != KVSTORE_LOCAL)
		ret = psched_keys_init(kv->node, keys, nkeys, vals, lens, dtype,
				       0);
	if (!ret)
		ret = kvstore_record(kv, keys, nkeys, vals, lens, dtype);
	pthread_mutex_unlock(&kv->lock);
	return ret;
}

int psched_kvstore_barrier(struct psched_kvstore *kv)
{
	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	if (kv->kind == KVSTORE_LOCAL)
		return 0;
	return psched_barrier(kv->node, PSCHED_GROUP_WORKERS, 0);
}

struct psd_updater *psd_kvstore_local_upd(struct psched_kvstore *kv,
					  pthread_mutex_t **lock)
{
	*lock = &kv->lock;
	return kv->kind == KVSTORE_LOCAL ? &kv->upd : NULL;
}

bool psd_kvstore_local_range(void *arg, uint64_t key, uint8_t *dtype,
			     uint64_t *total, uint64_t *off, uint64_t *len)
{
	struct kvstore_key *k = kvstore_find(arg, key);

	if (!k)
		return false;
	*dtype = k->dtype;
	*total = *len = k->nbytes;
	*off = 0;
	return true;
}
