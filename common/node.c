// SPDX-License-Identifier: MIT
/*
 * Node lifecycle: create (transport, the role's attach and start hooks),
 * destroy, and the accessors.  Which role is behind n->role is decided
 * above this layer, in app/roles.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"

static bool node_is_loopback(const char *host)
{
	return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) ||
	       !strcmp(host, "::1");
}

/*
 * The scheduler moves no data and always speaks TCP (so a node with the
 * wrong transport still reaches it and gets a clear rejection); servers
 * and workers use PS_TRANSPORT for their data connections.  auto picks
 * RDMA when a device has an active port and the cluster does not use
 * loopback addresses, else TCP.
 */
static int node_pick_transport(struct psched_node *n)
{
	const char *want = n->cfg.transport;
	struct psd_transport_knobs k;
	char why[160];

	psd_transport_knobs_init(&k, &n->cfg);
	if (n->cfg.role == PSCHED_ROLE_SCHEDULER) {
		n->ops = psd_transport_find("tcp");
		return 0;
	}
	if (!strcmp(want, "auto")) {
		if (node_is_loopback(n->cfg.node_host[0] ? n->cfg.node_host
							 : n->cfg.root_uri)) {
			/* rdma_cm cannot route over loopback. */
			n->ops = psd_transport_find("tcp");
			psd_info("transport: tcp (auto: the cluster uses "
				 "loopback addresses)");
			return 0;
		}
		if (psd_transport_find("rdma") &&
		    psd_rdma_probe(&k, why, sizeof(why))) {
			n->ops = psd_transport_find("rdma");
			psd_info("transport: rdma (auto: %s)", why);
		} else {
			n->ops = psd_transport_find("tcp");
			psd_info("transport: tcp (auto: %s)", why);
		}
		return 0;
	}
	n->ops = psd_transport_find(want);
	if (!n->ops)
		return psd_set_errmsg(-ENOTSUP,
				      "transport '%s' is not available in "
				      "this build (PS_TRANSPORT)",
				      want);
	if (!strcmp(want, "rdma") && !psd_rdma_probe(&k, why, sizeof(why)))
		return psd_set_errmsg(-ENODEV,
				      "PS_TRANSPORT=rdma but %s (use "
				      "PS_TRANSPORT=tcp or auto)",
				      why);
	return 0;
}

/* Leave the cluster: the role's stop hook, or the postoffice's. */
static void node_stop(struct psched_node *n)
{
	if (n->role && n->role->stop)
		n->role->stop(n);
	else
		psd_po_stop(n);
}

static void node_free(struct psched_node *n)
{
	if (n->role && n->role->detach)
		n->role->detach(n);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	explicit_bzero(&n->secret, sizeof(n->secret));
	explicit_bzero(n->cfg.job_token, sizeof(n->cfg.job_token));
	free(n);
}

static struct psched_node *node_alloc(const struct psched_cfg *cfg)
{
	struct psched_node *n;
	pthread_condattr_t ca;

	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->cfg = *cfg;
	n->id = -1;
	n->rank = -1;
	n->num_server = cfg->num_server;
	n->num_worker = cfg->num_worker;
	pthread_mutex_init(&n->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cond, &ca);
	pthread_condattr_destroy(&ca);
	return n;
}

int psd_node_create(const struct psched_cfg *cfg,
		    const struct psd_role_ops *role, struct psched_node **out)
{
	struct psched_node *n;
	char msg[512];
	int ret;

	n = node_alloc(cfg);
	if (!n)
		return psd_set_errmsg(-ENOMEM, "no memory for a node");
	if (cfg->verbose >= 2)
		psd_log_level = PSD_LOG_DEBUG;
	else if (cfg->verbose == 1)
		psd_log_level = PSD_LOG_INFO;
	psd_log_set_who(psched_role_name(cfg->role));
	ret = psd_auth_secret_load(cfg, &n->secret);
	if (ret)
		goto err_free;
	ret = node_pick_transport(n);
	if (ret)
		goto err_free;
	n->role = role;
	ret = role->attach(n);
	if (!ret)
		ret = role->start ? role->start(n) : psd_po_start(n);
	if (ret)
		goto err_stop;
	*out = n;
	return 0;

err_stop:
	/* Keep the message: teardown may log but not overwrite. */
	snprintf(msg, sizeof(msg), "%s", psched_errmsg());
	node_stop(n);
	psd_set_errmsg(ret, "%s", msg);
err_free:
	node_free(n);
	return ret;
}

int psched_node_destroy(struct psched_node *n)
{
	int ret = 0;

	if (!n)
		return 0;
	if (n->cfg.role == PSCHED_ROLE_WORKER && !n->fatal)
		ret = psd_po_finalize(n);
	node_stop(n);
	node_free(n);
	return ret;
}

int psched_node_rank(const struct psched_node *n)
{
	return n->rank;
}

unsigned psched_node_port(const struct psched_node *n)
{
	return n->listen_port;
}

int psched_node_id(const struct psched_node *n)
{
	return n->id;
}

unsigned psched_num_workers(const struct psched_node *n)
{
	return n->num_worker;
}

unsigned psched_num_servers(const struct psched_node *n)
{
	return n->num_server;
}

enum psched_role psched_node_role(const struct psched_node *n)
{
	return n->cfg.role;
}

int psched_num_dead_nodes(struct psched_node *n, unsigned group)
{
	unsigned i;
	int count = 0;

	if (!n || !group || (group & ~PSCHED_GROUP_ALL))
		return psd_set_errmsg(-EINVAL,
				      "num_dead_nodes: bad group mask %#x "
				      "(1 scheduler, 2 servers, 4 workers)",
				      group);
	pthread_mutex_lock(&n->lock);
	for (i = 0; i < n->npeers; i++) {
		const struct psd_peer *p = &n->peers[i];

		if (p->dead && (group & (1u << p->role)))
			count++;
	}
	pthread_mutex_unlock(&n->lock);
	return count;
}

void psched_node_stats(const struct psched_node *n, struct psched_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (n->van)
		psd_van_stats(n->van, &out->tx_bytes, &out->rx_bytes,
			      &out->tx_msgs, &out->rx_msgs);
	if (n->role && n->role->stats)
		n->role->stats(n, out);
}
