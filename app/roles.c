// SPDX-License-Identifier: MIT
/*
 * The role switch: the one place that knows which module plays each role.
 * Everything below (common/) reaches a role only through the hooks its
 * attach function installs (struct psd_app).
 */
#include "node.h"
#include "../scheduler/role.h"
#include "../server/role.h"
#include "../worker/role.h"

static psd_role_attach_fn *const role_attach[] = {
	[PSCHED_ROLE_SCHEDULER] = psd_sched_attach,
	[PSCHED_ROLE_SERVER] = psd_kvs_attach,
	[PSCHED_ROLE_WORKER] = psd_kvw_attach,
};

int psched_node_create(const struct psched_cfg *cfg, struct psched_node **out)
{
	unsigned r = (unsigned)cfg->role;

	if (r >= PSD_ARRAY_SIZE(role_attach) || !role_attach[r])
		return psd_set_errmsg(-EINVAL, "unknown role %d", (int)r);
	return psd_node_create(cfg, role_attach[r], out);
}
