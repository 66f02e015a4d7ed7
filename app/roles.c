// SPDX-License-Identifier: MIT
/*
 * The role switch: the one place that knows which module plays each role.
 * Everything below (common/) reaches a role only through its table of
 * hooks (struct psd_role_ops, common/node.h).
 */
#include "node.h"
#include "../scheduler/role.h"
#include "../server/role.h"
#include "../worker/role.h"

static const struct psd_role_ops *const roles[] = {
	[PSCHED_ROLE_SCHEDULER] = &psd_sched_role,
	[PSCHED_ROLE_SERVER] = &psd_kvs_role,
	[PSCHED_ROLE_WORKER] = &psd_kvw_role,
};

int psched_node_create(const struct psched_cfg *cfg, struct psched_node **out)
{
	unsigned r = (unsigned)cfg->role;

	if (r >= PSD_ARRAY_SIZE(roles) || !roles[r])
		return psd_set_errmsg(-EINVAL, "unknown role %d", (int)r);
	return psd_node_create(cfg, roles[r], out);
}
