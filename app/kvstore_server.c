// SPDX-License-Identifier: MIT
/*
 * A server (or scheduler) started from a KVStore program's own script,
 * with an application controller: the Python package's DMLC_ROLE=server
 * path, where the controller calls back into Python.
 */
#include <stdio.h>

#include "internal.h"
#include "psched/kvstore.h"

int psched_kvstore_run_server_from_env(psched_server_controller_fn *ctl,
				       void *arg)
{
	struct psched_node *node;
	struct psched_cfg cfg;
	char msg[512];
	int ret;

	psd_cfg_defaults(&cfg);
	ret = psched_cfg_from_env(&cfg);
	if (ret)
		return ret;
	if (cfg.role == PSCHED_ROLE_WORKER)
		return 1;
	/* Before the node exists: a worker may send a command as soon as
	 * the start-up barrier is passed. */
	if (cfg.role == PSCHED_ROLE_SERVER)
		psched_server_set_controller(NULL, ctl, arg);
	ret = psched_node_create(&cfg, &node);
	if (ret)
		return ret;
	ret = psched_node_run(node);
	if (ret) {
		snprintf(msg, sizeof(msg), "%s", psched_errmsg());
		psched_node_destroy(node);
		return psd_set_errmsg(ret, "%s", msg);
	}
	return psched_node_destroy(node);
}
