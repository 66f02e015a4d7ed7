// SPDX-License-Identifier: MIT
/*
 * Postoffice: the transport of each worker -> server data connection.
 *
 * An explicit PS_TRANSPORT (tcp, shm, rdma) is used for every peer.  With
 * auto, servers listen on shm as well as on their TCP (or RDMA) port and
 * every server and worker advertises its shm host key (boot id, network
 * namespace, uid: psd_shm_host_key()) in the node table; a worker whose
 * key equals a server's connects to that server's shm listener, any other
 * pair uses the job's transport.  A failed shm connect falls back to it.
 * The choice is logged per server (PS_VERBOSE=1).
 */
#include <stdio.h>
#include <string.h>

#include "node.h"

void psd_po_shm_setup(struct psched_node *n)
{
	struct psd_addr any = { .host = "0.0.0.0", .port = 0 };
	int ret;

	n->host_key[0] = 0;
	n->shm_port = 0;
	if (strcmp(n->cfg.transport, "auto") || n->ops == &psd_shm_ops ||
	    n->cfg.role == PSCHED_ROLE_SCHEDULER)
		return;
	ret = psd_shm_host_key(n->host_key, sizeof(n->host_key));
	if (ret) {
		psd_warn("transport auto: no shared memory for local peers: "
			 "%s",
			 psched_errmsg());
		n->host_key[0] = 0;
		return;
	}
	if (n->cfg.role != PSCHED_ROLE_SERVER)
		return;
	ret = psd_van_listen_also(n->van, &psd_shm_ops, &any, &n->shm_port);
	if (ret) {
		psd_warn("transport auto: cannot listen on shm (%s); local "
			 "workers use %s",
			 psched_errmsg(), n->ops->name);
		n->host_key[0] = 0;
		n->shm_port = 0;
		return;
	}
	psd_info("transport auto: shm port %u for workers on the same host "
		 "(%s), %s port %u for the others",
		 n->shm_port, n->host_key, n->ops->name, n->listen_port);
}

/* Why @p is or is not reached by shm; true when it is to be tried. */
static bool po_shm_wanted(const struct psched_node *n, const struct psd_peer *p,
			  const char **why)
{
	if (!n->host_key[0]) {
		*why = strcmp(n->cfg.transport, "auto")
			       ? "PS_TRANSPORT is explicit"
			       : "this node has no shm host key";
		return false;
	}
	if (!p->host_key[0] || !p->shm_port) {
		*why = "the server offers no shm";
		return false;
	}
	if (strcmp(p->host_key, n->host_key)) {
		*why = "other host, network namespace or user";
		return false;
	}
	*why = "same host: boot id, network namespace and uid match";
	return true;
}

int psd_po_connect_server(struct psched_node *n, struct psd_peer *p,
			  unsigned timeout_ms)
{
	struct psd_addr a;
	const char *why;
	uint64_t t0 = psd_now_ms(), spent;
	int ret;

	if (po_shm_wanted(n, p, &why)) {
		snprintf(a.host, sizeof(a.host), "127.0.0.1");
		a.port = p->shm_port;
		ret = psd_van_connect_via(n->van, &psd_shm_ops, &a, timeout_ms,
					  "server", &p->conn);
		if (!ret) {
			psd_info("transport to %s: shm port %u (auto: %s)",
				 p->desc, p->shm_port, why);
			return 0;
		}
		psd_warn("transport to %s: shm port %u failed (%s); using %s "
			 "instead",
			 p->desc, p->shm_port, psched_strerror(ret),
			 n->ops->name);
		spent = psd_now_ms() - t0;
		timeout_ms =
			spent < timeout_ms ? timeout_ms - (unsigned)spent : 1;
	}
	snprintf(a.host, sizeof(a.host), "%s", p->host);
	a.port = p->port;
	ret = psd_van_connect(n->van, &a, timeout_ms, "server", &p->conn);
	if (!ret)
		psd_info("transport to %s: %s (%s)", p->desc, n->ops->name,
			 why);
	return ret;
}
