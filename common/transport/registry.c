// SPDX-License-Identifier: MIT
/*
 * Transport registry: the transports of this build by name, and the
 * knobs every transport takes from the node's configuration.
 */
#include <stdio.h>
#include <string.h>

#include "psched.h"
#include "transport.h"

/* Every transport psched has; ops NULL where this build lacks it. */
static const struct {
	const char *name;
	const struct psd_transport_ops *ops;
} registry_table[] = {
	{ "tcp", &psd_tcp_ops },
	{ "loop", &psd_loop_ops },
	{ "shm", &psd_shm_ops },
	{ "rdma", PSD_RDMA_OPS },
};

bool psd_transport_is_known(const char *name)
{
	size_t i;

	for (i = 0; i < PSD_ARRAY_SIZE(registry_table); i++)
		if (!strcmp(registry_table[i].name, name))
			return true;
	return false;
}

const struct psd_transport_ops *psd_transport_find(const char *name)
{
	size_t i;

	for (i = 0; i < PSD_ARRAY_SIZE(registry_table); i++)
		if (!strcmp(registry_table[i].name, name))
			return registry_table[i].ops;
	return NULL;
}

void psd_transport_knobs_init(struct psd_transport_knobs *k,
			      const struct psched_cfg *cfg)
{
	struct psched_cfg def;

	if (!cfg) {
		psd_cfg_defaults(&def);
		cfg = &def;
	}
	memset(k, 0, sizeof(*k));
	k->socket_buf_bytes = cfg->socket_buf_bytes;
	snprintf(k->rdma_device, sizeof(k->rdma_device), "%s",
		 cfg->rdma_device);
	k->rdma_port = cfg->rdma_port;
	k->rdma_gid_index = cfg->rdma_gid_index;
	k->rdma_recv_depth = cfg->rdma_recv_depth;
	k->rdma_send_depth = cfg->rdma_send_depth;
	k->rdma_buf_bytes = cfg->rdma_buf_bytes;
	k->rdma_inline = cfg->rdma_inline;
	k->rdma_cq_depth = cfg->rdma_cq_depth;
	k->rdma_spin_us = cfg->rdma_spin_us;
	k->rdma_mr_budget = cfg->rdma_mr_budget;
	k->rdma_lane_min = cfg->rdma_lane_min;
	k->rdma_test_fail_reg = cfg->rdma_test_fail_reg != 0;
}
