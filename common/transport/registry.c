// SPDX-License-Identifier: MIT
/*
 * Transport registry: the transports of this build by name, and the
 * knobs every transport takes from the node's configuration.
 */
#include <stdio.h>
#include <string.h>

#include "psched.h"
#include "transport.h"

/* NULL entries are transports this build lacks. */
static const struct psd_transport_ops *const registry_table[] = {
	&psd_tcp_ops,
	&psd_loop_ops,
	&psd_shm_ops,
	PSD_RDMA_OPS,
};

const struct psd_transport_ops *psd_transport_at(size_t i)
{
	size_t n = 0, j;

	for (j = 0; j < PSD_ARRAY_SIZE(registry_table); j++) {
		if (!registry_table[j])
			continue;
		if (n++ == i)
			return registry_table[j];
	}
	return NULL;
}

const struct psd_transport_ops *psd_transport_find(const char *name)
{
	const struct psd_transport_ops *ops;
	size_t i;

	for (i = 0; (ops = psd_transport_at(i)); i++)
		if (!strcmp(ops->name, name))
			return ops;
	return NULL;
}

void psd_transport_knobs_init(struct psd_transport_knobs *k,
			      const struct psched_cfg *cfg)
{
	struct psched_cfg def;

	if (!cfg) {
		psched_cfg_init(&def);
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
	k->rdma_test_fail_reg = cfg->rdma_test_fail_reg != 0;
}
