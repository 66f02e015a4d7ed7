// SPDX-License-Identifier: MIT
/*
 * psched_kvstore_save/load_optimizer_states and
 * psched_kvstore_set_gradient_compression (include/psched/kvstore.h):
 * "local" stores move their own updater's records; dist stores fetch
 * them from, or send them to, every server (worker/states.c), rank 0
 * doing the transfer and every worker meeting at a barrier after (only
 * rank 0 sees the transfer's error, as with set_optimizer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kvstore_states.h"
#include "optim.h"
#include "../worker/command.h"

static int states_save_local(struct psched_kvstore *kv, struct psd_updater *u,
			     pthread_mutex_t *lock, const char *path)
{
	char name[16];
	uint8_t *buf;
	size_t len;
	int ret;

	pthread_mutex_lock(lock);
	ret = psd_upd_states_dump(u, psd_kvstore_local_range, kv, &buf, &len,
				  name);
	pthread_mutex_unlock(lock);
	if (ret)
		return ret;
	if (!name[0])
		ret = psd_set_errmsg(-EINVAL,
				     "save_optimizer_states: no optimizer is "
				     "set (set_optimizer first)");
	else
		ret = psd_opt_file_write(path, name, buf, len);
	free(buf);
	return ret;
}

static int states_load_local(struct psched_kvstore *kv, struct psd_updater *u,
			     pthread_mutex_t *lock, const char *path)
{
	const uint8_t *recs;
	char name[16];
	uint8_t *buf;
	size_t len;
	int ret;

	ret = psd_opt_file_read(path, &buf, &recs, &len, name);
	if (ret)
		return ret;
	pthread_mutex_lock(lock);
	ret = psd_upd_states_load(u, name, recs, len, psd_kvstore_local_range,
				  kv, true);
	pthread_mutex_unlock(lock);
	free(buf);
	return ret;
}

/* Every record names a key of @kv with its dtype and size (the servers
 * skip keys they do not hold, so the check is made here). */
static int states_check_keys(struct psched_kvstore *kv, const uint8_t *recs,
			     size_t len)
{
	uint64_t total, off, klen;
	struct psd_opt_rec r;
	size_t pos, used;
	uint8_t dtype;
	int ret;

	for (pos = 0; pos < len; pos += used) {
		ret = psd_opt_rec_parse(recs + pos, len - pos, &r, &used);
		if (ret)
			return ret;
		if (!psd_kvstore_local_range(kv, r.key, &dtype, &total, &off,
					     &klen))
			return psd_set_errmsg(-EINVAL,
					      "optimizer states: key %llu is "
					      "not initialised",
					      (unsigned long long)r.key);
		if (dtype != r.dtype || (r.total && r.total != total))
			return psd_set_errmsg(-EINVAL,
					      "optimizer states: key %llu was "
					      "saved as %llu bytes of %s, but "
					      "is %llu bytes of %s",
					      (unsigned long long)r.key,
					      (unsigned long long)r.total,
					      psched_dtype_name(r.dtype),
					      (unsigned long long)total,
					      psched_dtype_name(dtype));
	}
	return 0;
}

/* Rank 0: the transfer itself. */
static int states_dist(struct psched_kvstore *kv, bool load, const char *path)
{
	struct psched_node *n = psched_kvstore_node(kv);
	pthread_mutex_t *lock;
	const uint8_t *recs;
	char name[16];
	uint8_t *buf = NULL;
	size_t len;
	int ret;

	if (load) {
		ret = psd_opt_file_read(path, &buf, &recs, &len, name);
		if (!ret) {
			psd_kvstore_local_upd(kv, &lock);
			pthread_mutex_lock(lock);
			ret = states_check_keys(kv, recs, len);
			pthread_mutex_unlock(lock);
		}
		if (!ret)
			ret = psd_kvw_states_load(n, name, recs, len, 0);
	} else {
		ret = psd_kvw_states_dump(n, &buf, &len, name, 0);
		if (!ret && !name[0])
			ret = psd_set_errmsg(-EINVAL,
					     "save_optimizer_states: the "
					     "servers run no optimizer "
					     "(set_optimizer first)");
		if (!ret)
			ret = psd_opt_file_write(path, name, buf, len);
	}
	free(buf);
	return ret;
}

static int states_call(struct psched_kvstore *kv, const char *path, bool load)
{
	const char *what =
		load ? "load_optimizer_states" : "save_optimizer_states";
	pthread_mutex_t *lock;
	struct psd_updater *u;
	char msg[512] = "";
	int ret = 0, bret;

	if (!kv || !path || !*path)
		return psd_set_errmsg(-EINVAL, "%s: no store or no file name",
				      what);
	u = psd_kvstore_local_upd(kv, &lock);
	if (u)
		return load ? states_load_local(kv, u, lock, path)
			    : states_save_local(kv, u, lock, path);
	/* Pushes of this worker must be applied before states move. */
	ret = psched_kvstore_wait(kv, NULL, 0);
	if (!ret)
		ret = psched_kvstore_barrier(kv);
	if (ret)
		return ret;
	if (psched_kvstore_rank(kv) == 0) {
		ret = states_dist(kv, load, path);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", psched_errmsg());
	}
	bret = psched_kvstore_barrier(kv);
	if (ret)
		return psd_set_errmsg(ret, "%s: %s", what, msg);
	return bret;
}

int psched_kvstore_save_optimizer_states(struct psched_kvstore *kv,
					 const char *path)
{
	return states_call(kv, path, false);
}

int psched_kvstore_load_optimizer_states(struct psched_kvstore *kv,
					 const char *path)
{
	return states_call(kv, path, true);
}

int psched_kvstore_snapshot(struct psched_kvstore *kv, uint64_t step)
{
	pthread_mutex_t *lock;
	int ret;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	if (psd_kvstore_local_upd(kv, &lock))
		return psd_set_errmsg(-EOPNOTSUPP,
				      "snapshot: a local store has no "
				      "servers to take one (save its "
				      "arrays yourself)");
	ret = psched_kvstore_wait(kv, NULL, 0);
	if (!ret)
		ret = psched_snapshot(psched_kvstore_node(kv), step, 0);
	return ret;
}

int psched_kvstore_set_gradient_compression(struct psched_kvstore *kv,
					    const char *type, double threshold)
{
	pthread_mutex_t *lock;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	if (psd_kvstore_local_upd(kv, &lock))
		return psd_set_errmsg(-EOPNOTSUPP,
				      "gradient compression applies to the "
				      "pushes of dist stores; a local store "
				      "sends nothing");
	return psched_node_set_gradient_compression(psched_kvstore_node(kv),
						    type, threshold);
}
