// SPDX-License-Identifier: MIT
/*
 * KVStore life cycle (include/psched/kvstore.h): create by type name,
 * join the cluster and configure the servers (dist types), set the
 * optimizer or updater, destroy, accessors, and the server/scheduler
 * side of a KVStore program.  Calls and waits are in kvstore.c.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "psched/kvstore.h"
#include "map.h"
#include "updater.h"
#include "kvstore_int.h"

/* Rank 0 configures the servers; everybody meets after, so nobody pushes
 * before the servers have it.  Rank 0 returns the servers' answer. */
int psd_kvstore_configure(struct psched_kvstore *kv, const char *mode,
			  const struct psched_optimizer *opt)
{
	char msg[512] = "";
	int ret = 0, bret;

	if (kv->rank == 0) {
		ret = psched_servers_configure(kv->node, mode, opt, 0);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", psched_errmsg());
	}
	bret = psched_kvstore_barrier(kv);
	if (ret)
		return psd_set_errmsg(ret, "%s", msg);
	return bret;
}

int psched_kvstore_set_optimizer(struct psched_kvstore *kv,
				 const struct psched_optimizer *opt)
{
	int ret;

	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	ret = psched_optimizer_check(opt);
	if (ret)
		return ret;
	if (kv->kind == KVSTORE_LOCAL)
		ret = psd_upd_set_optimizer(&kv->upd, opt);
	else
		ret = psd_kvstore_configure(kv, NULL, opt);
	if (!ret)
		kv->opt_set = opt->name && *opt->name &&
			      strcmp(opt->name, "none") != 0;
	return ret;
}

int psched_kvstore_set_updater(struct psched_kvstore *kv, psched_updater_fn *fn,
			       void *arg)
{
	if (!kv)
		return psd_set_errmsg(-EINVAL, "kvstore: NULL store");
	if (kv->kind != KVSTORE_LOCAL)
		return psd_set_errmsg(-EOPNOTSUPP,
				      "a %s store updates on the servers: "
				      "install the updater there with "
				      "psched_server_set_updater()",
				      psched_kvstore_type(kv));
	psd_upd_set_custom(&kv->upd, fn, arg);
	return 0;
}

static int kvstore_parse_type(const char *type, enum kvstore_kind *kind)
{
	static const struct {
		const char *name;
		enum kvstore_kind kind;
	} types[] = {
		{ "local", KVSTORE_LOCAL },
		{ "device", KVSTORE_LOCAL },
		{ "local_update_cpu", KVSTORE_LOCAL },
		{ "local_allreduce_cpu", KVSTORE_LOCAL },
		{ "local_allreduce_device", KVSTORE_LOCAL },
		{ "dist_sync", KVSTORE_SYNC },
		{ "dist", KVSTORE_SYNC },
		{ "dist_device_sync", KVSTORE_SYNC },
		{ "dist_sync_device", KVSTORE_SYNC },
		{ "dist_async", KVSTORE_ASYNC },
	};
	size_t i;

	/* MXNet lower-cases the name first ("Local", "DIST_SYNC"). */
	for (i = 0; type && i < PSD_ARRAY_SIZE(types); i++) {
		if (!strcasecmp(type, types[i].name)) {
			*kind = types[i].kind;
			return 0;
		}
	}
	return psd_set_errmsg(-EINVAL,
			      "unknown KVStore type '%.40s' (local, "
			      "dist_sync, dist_async)",
			      type ? type : "(null)");
}

static int kvstore_join(struct psched_kvstore *kv, const struct psched_cfg *c)
{
	struct psched_cfg cfg;
	int ret;

	if (c) {
		cfg = *c;
	} else {
		psd_cfg_defaults(&cfg);
		ret = psched_cfg_from_env(&cfg);
		if (ret)
			return ret;
	}
	if (cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL,
				      "a %s KVStore is a worker, but the role "
				      "is %s (DMLC_ROLE): run servers with "
				      "ps-server or "
				      "psched_kvstore_run_node_from_env()",
				      psched_kvstore_type(kv),
				      psched_role_name(cfg.role));
	ret = psched_node_create(&cfg, &kv->node);
	if (ret)
		return ret;
	kv->rank = psched_node_rank(kv->node);
	kv->nworkers = (int)psched_num_workers(kv->node);
	return psd_kvstore_configure(
		kv, kv->kind == KVSTORE_ASYNC ? "async" : "sync", NULL);
}

int psched_kvstore_create(const char *type, const struct psched_cfg *cfg,
			  struct psched_kvstore **out)
{
	struct psched_kvstore *kv;
	pthread_condattr_t ca;
	enum kvstore_kind kind = KVSTORE_LOCAL;
	size_t i;
	int ret;

	ret = kvstore_parse_type(type, &kind);
	if (ret)
		return ret;
	kv = calloc(1, sizeof(*kv));
	if (!kv)
		return psd_set_errmsg(-ENOMEM, "no memory for a KVStore");
	kv->kind = kind;
	snprintf(kv->type, sizeof(kv->type), "%s", type);
	for (i = 0; kv->type[i]; i++) /* MXNet's type is the lower-cased name */
		kv->type[i] = (char)tolower((unsigned char)kv->type[i]);
	kv->nworkers = 1;
	pthread_mutex_init(&kv->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&kv->cond, &ca);
	pthread_condattr_destroy(&ca);
	psd_upd_init(&kv->upd);
	psd_map_init(&kv->keys);
	if (kind != KVSTORE_LOCAL) {
		ret = kvstore_join(kv, cfg);
		if (ret) {
			char msg[512];

			snprintf(msg, sizeof(msg), "%s", psched_errmsg());
			psched_kvstore_destroy(kv);
			return psd_set_errmsg(ret, "%s", msg);
		}
	}
	*out = kv;
	return 0;
}

static void kvstore_key_free(void *val, void *arg)
{
	struct kvstore_key *k = val;
	unsigned j;

	(void)arg;
	for (j = 0; j < k->nops; j++)
		psd_kvstore_op_put(k->ops[j]);
	free(k->ops);
	psd_kvstore_rows_fini(k);
	free(k->value);
	free(k);
}

int psched_kvstore_destroy(struct psched_kvstore *kv)
{
	int ret, dret;

	if (!kv)
		return 0;
	ret = psched_kvstore_wait(kv, NULL, 0);
	psd_map_clear(&kv->keys, kvstore_key_free, NULL);
	psd_map_fini(&kv->keys);
	dret = psched_node_destroy(kv->node);
	psd_upd_fini(&kv->upd);
	pthread_cond_destroy(&kv->cond);
	pthread_mutex_destroy(&kv->lock);
	free(kv);
	return ret ? ret : dret;
}

const char *psched_kvstore_type(const struct psched_kvstore *kv)
{
	return kv->type;
}

int psched_kvstore_rank(const struct psched_kvstore *kv)
{
	return kv->rank;
}

int psched_kvstore_num_workers(const struct psched_kvstore *kv)
{
	return kv->nworkers;
}

struct psched_node *psched_kvstore_node(struct psched_kvstore *kv)
{
	return kv->node;
}

int psched_kvstore_run_node_from_env(void)
{
	struct psched_node *node;
	struct psched_cfg cfg;
	int ret;

	psd_cfg_defaults(&cfg);
	ret = psched_cfg_from_env(&cfg);
	if (ret)
		return ret;
	if (cfg.role == PSCHED_ROLE_WORKER)
		return 1;
	ret = psched_node_create(&cfg, &node);
	if (ret)
		return ret;
	ret = psched_node_run(node);
	if (ret) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", psched_errmsg());
		psched_node_destroy(node);
		return psd_set_errmsg(ret, "%s", msg);
	}
	return psched_node_destroy(node);
}
