// SPDX-License-Identifier: MIT
/*
 * Postoffice, node side: join the job at the scheduler (connect, pick our
 * address, register, authenticate), connecting again when the scheduler
 * drops the connection before the handshake ends.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node.h"

/* Our address as others should dial it. */
static void po_pick_host(struct psched_node *n)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	struct ifaddrs *ifa, *i;

	if (n->cfg.node_host[0]) {
		snprintf(n->host, sizeof(n->host), "%s", n->cfg.node_host);
		return;
	}
	if (n->cfg.interface[0] && !getifaddrs(&ifa)) {
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
			    strcmp(i->ifa_name, n->cfg.interface))
				continue;
			inet_ntop(AF_INET,
				  &((struct sockaddr_in *)(void *)i->ifa_addr)
					   ->sin_addr,
				  n->host, sizeof(n->host));
			break;
		}
		freeifaddrs(ifa);
		if (n->host[0])
			return;
		psd_warn("interface %s has no IPv4 address; using the route "
			 "to the scheduler",
			 n->cfg.interface);
	}
	if (n->sched->fd >= 0 &&
	    !getsockname(n->sched->fd, (struct sockaddr *)&sin, &len)) {
		inet_ntop(AF_INET, &sin.sin_addr, n->host, sizeof(n->host));
		return;
	}
	snprintf(n->host, sizeof(n->host), "127.0.0.1");
}

/* Connect to the scheduler (always TCP: the data transport is agreed
 * there), retrying while it is not up yet. */
static int po_connect_sched(struct psched_node *n, uint64_t deadline)
{
	struct psd_conn *c = NULL;
	struct psd_addr a;
	uint64_t now, start = psd_now_ms();
	bool said = false;
	int ret;

	snprintf(a.host, sizeof(a.host), "%s", n->cfg.root_uri);
	a.port = n->cfg.root_port;
	for (;;) {
		now = psd_now_ms();
		/* Say once, early, what this node waits for: a node started
		 * before its scheduler (or pointed at the wrong one) is
		 * otherwise silent until the timeout. */
		if (!said && now - start >= 1000) {
			psd_warn("%s: waiting for the scheduler at %s:%u "
				 "(DMLC_PS_ROOT_URI/PORT), up to %g s "
				 "(PS_CONNECT_TIMEOUT)",
				 psched_role_name(n->cfg.role), a.host, a.port,
				 n->cfg.connect_timeout_ms / 1000.0);
			said = true;
		}
		ret = psd_van_connect_via(
			n->van, &psd_tcp_ops, &a,
			deadline > now ? (unsigned)(deadline - now) : 1,
			"scheduler", &c);
		if (!ret) {
			/* The van thread compares closed connections with
			 * n->sched (po_closed) while a retry replaces it. */
			pthread_mutex_lock(&n->lock);
			n->sched = c;
			pthread_mutex_unlock(&n->lock);
			return 0;
		}
		if (psd_now_ms() + 100 >= deadline)
			return psd_set_errmsg(
				PSCHED_ERENDEZVOUS,
				"%s: cannot reach the scheduler at %s:%u "
				"within %u ms: %s (is ps-scheduler running "
				"there? check DMLC_PS_ROOT_URI/PORT)",
				psched_role_name(n->cfg.role), a.host, a.port,
				n->cfg.connect_timeout_ms,
				psched_strerror(ret));
		usleep(100 * 1000);
	}
}

static int po_register(struct psched_node *n)
{
	Psched__NodeInfo ni = PSCHED__NODE_INFO__INIT;
	Psched__Register reg = PSCHED__REGISTER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	int ret;

	ni.id = -1;
	ni.rank = -1;
	ni.role = (Psched__Role)n->cfg.role;
	ni.host = n->host;
	ni.port = n->listen_port;
	ni.shm_port = n->shm_port;
	ni.host_key = n->host_key;
	reg.node = &ni;
	reg.transport = (char *)(uintptr_t)n->ops->name;
	reg.num_server = n->cfg.num_server;
	reg.num_worker = n->cfg.num_worker;
	reg.pid = getpid();
	ret = psd_auth_start(n->sched, (int32_t)n->cfg.role);
	if (ret)
		return ret;
	reg.nonce.data = n->sched->nonce_mine;
	reg.nonce.len = PSD_AUTH_NONCE_LEN;
	m.body_case = PSCHED__CONTROL__BODY_REG;
	m.reg = &reg;
	return psd_node_send_sched(n, &m);
}

/*
 * Wait until the scheduler proved the secret (the van thread then sent
 * our proof): 0; 1 when it dropped the connection before; or an error.
 */
static int po_join_wait(struct psched_node *n, uint64_t deadline)
{
	struct timespec ts;
	int ret = 0;

	pthread_mutex_lock(&n->lock);
	while (!atomic_load(&n->sched->authed)) {
		if (n->fatal) {
			ret = psd_set_errmsg(n->fatal, "%s", n->fatal_msg);
			break;
		}
		if (n->sched_lost) {
			n->sched_lost = false;
			ret = 1;
			break;
		}
		if (psd_now_ms() >= deadline) {
			ret = psd_set_errmsg(
				PSCHED_ERENDEZVOUS,
				"%s: the scheduler at %s:%u did not answer the "
				"registration's authentication within %u ms",
				psched_role_name(n->cfg.role), n->cfg.root_uri,
				n->cfg.root_port, n->cfg.connect_timeout_ms);
			break;
		}
		psd_deadline(&ts, 50);
		pthread_cond_timedwait(&n->cond, &n->lock, &ts);
	}
	pthread_mutex_unlock(&n->lock);
	return ret;
}

int psd_po_join(struct psched_node *n, uint64_t deadline)
{
	struct psd_conn *c;
	unsigned attempt;
	int ret;

	for (attempt = 0;; attempt++) {
		ret = po_connect_sched(n, deadline);
		if (ret)
			return ret;
		if (!attempt)
			po_pick_host(n);
		ret = po_register(n);
		if (ret)
			return psd_set_errmsg(ret,
					      "register with the scheduler: %s",
					      psched_strerror(ret));
		ret = po_join_wait(n, deadline);
		if (ret <= 0)
			return ret;
		/* A scheduler out of descriptors, or with PS_MAX_PENDING_AUTH
		 * connections authenticating, closes new ones. */
		psd_warn("the scheduler at %s:%u closed the connection before "
			 "authenticating (out of descriptors or too many "
			 "connections waiting?); connecting again",
			 n->cfg.root_uri, n->cfg.root_port);
		pthread_mutex_lock(&n->lock);
		c = n->sched;
		n->sched = NULL;
		pthread_mutex_unlock(&n->lock);
		psd_conn_put(c);
		if (psd_now_ms() + 300 >= deadline)
			return psd_set_errmsg(
				PSCHED_ERENDEZVOUS,
				"%s: the scheduler at %s:%u kept closing the "
				"connection before authenticating for %u ms",
				psched_role_name(n->cfg.role), n->cfg.root_uri,
				n->cfg.root_port, n->cfg.connect_timeout_ms);
		usleep(200 * 1000);
	}
}
