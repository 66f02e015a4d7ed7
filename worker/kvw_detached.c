// SPDX-License-Identifier: MIT
/*
 * KV worker: a worker node without a scheduler, postoffice or van, for the
 * unit test (tests/unit/test_kv_worker.c), which plays the network and the
 * servers itself.  Not used by the library.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kvw.h"
#include "role.h"

/* Unlocked.  The node table: scheduler 0, servers 1..S, this worker. */
static int kvw_detached_peers(struct psched_node *n)
{
	unsigned i;

	n->npeers = 2 + n->num_server;
	n->peers = calloc(n->npeers, sizeof(*n->peers));
	if (!n->peers)
		return -ENOMEM;
	for (i = 0; i < n->npeers; i++) {
		struct psd_peer *p = &n->peers[i];

		p->id = (int)i;
		if (!i)
			p->role = PSCHED_ROLE_SCHEDULER;
		else if (i <= n->num_server)
			p->role = PSCHED_ROLE_SERVER;
		else
			p->role = PSCHED_ROLE_WORKER;
		p->rank = i && i <= n->num_server ? (int)i - 1 : 0;
		snprintf(p->host, sizeof(p->host), "detached");
		snprintf(p->desc, sizeof(p->desc), "%s %d (rank %d, detached)",
			 psched_role_name(p->role), p->id, p->rank);
	}
	return 0;
}

int psd_kvw_node_create_detached(const struct psched_cfg *cfg,
				 unsigned num_server, struct psched_node **out)
{
	struct psched_node *n;
	int ret;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->cfg = *cfg;
	n->cfg.role = PSCHED_ROLE_WORKER;
	n->num_server = num_server;
	n->num_worker = 1;
	n->id = psd_worker_id(n, 0);
	n->rank = 0;
	n->have_table = true;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->cond, NULL);
	ret = kvw_detached_peers(n);
	if (ret)
		goto err_free;
	n->role = &psd_kvw_role;
	ret = psd_kvw_attach(n);
	if (ret)
		goto err_free_peers;
	*out = n;
	return 0;

err_free_peers:
	free(n->peers);
err_free:
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
	return ret;
}

void psd_kvw_node_destroy_detached(struct psched_node *n)
{
	if (!n)
		return;
	if (n->role && n->role->detach)
		n->role->detach(n);
	free(n->peers);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
}
