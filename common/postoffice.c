// SPDX-License-Identifier: MIT
/*
 * Postoffice, node side (servers and workers): register with the
 * scheduler, receive the node table, open data connections, barriers,
 * heartbeats, failure notices and shutdown.
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

uint64_t psd_cfg_job_token(const struct psched_cfg *cfg)
{
	const char *s = cfg->job_token;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	if (!*s)
		return 0;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

struct psd_peer *psd_node_peer(struct psched_node *n, int id)
{
	if (id < 0 || (unsigned)id >= n->npeers || !n->peers)
		return NULL;
	return &n->peers[id];
}

void psd_node_set_fatal(struct psched_node *n, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&n->lock);
	if (!n->fatal) {
		n->fatal = err;
		va_start(ap, fmt);
		vsnprintf(n->fatal_msg, sizeof(n->fatal_msg), fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

int psd_node_send_sched(struct psched_node *n, const Psched__Control *msg)
{
	if (!n->sched)
		return -ENOTCONN;
	return psd_conn_send_control(n->sched, n->id, msg);
}

static void po_peer_desc(struct psd_peer *p)
{
	snprintf(p->desc, sizeof(p->desc), "%s %d (rank %d, %s:%u)",
		 psched_role_name(p->role), p->id, p->rank, p->host, p->port);
}

static void po_early_hellos(struct psched_node *n);

/* Van thread: the scheduler sent the node table. */
static void po_on_table(struct psched_node *n, const Psched__NodeTable *t)
{
	struct psd_peer *peers;
	size_t i, max_id = 0;

	for (i = 0; i < t->n_nodes; i++)
		if ((size_t)t->nodes[i]->id > max_id)
			max_id = (size_t)t->nodes[i]->id;
	if (max_id > 100000 || t->your_id < 0 || (size_t)t->your_id > max_id) {
		psd_node_set_fatal(n, -EPROTO,
				   "scheduler sent a bad node table");
		return;
	}
	peers = calloc(max_id + 1, sizeof(*peers));
	if (!peers) {
		psd_node_set_fatal(n, -ENOMEM, "no memory for the node table");
		return;
	}
	for (i = 0; i <= max_id; i++)
		peers[i].id = -1;
	for (i = 0; i < t->n_nodes; i++) {
		Psched__NodeInfo *ni = t->nodes[i];
		struct psd_peer *p = &peers[ni->id];

		p->id = ni->id;
		p->role = (enum psched_role)ni->role;
		p->rank = ni->rank;
		snprintf(p->host, sizeof(p->host), "%s", ni->host);
		p->port = ni->port;
		po_peer_desc(p);
	}
	pthread_mutex_lock(&n->lock);
	if (!n->have_table) {
		n->peers = peers;
		n->npeers = (unsigned)max_id + 1;
		n->id = t->your_id;
		n->rank = peers[t->your_id].rank;
		n->token = t->token;
		n->have_table = true;
		psd_rdma_set_local_id(n->id);
		peers = NULL;
	}
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
	free(peers);
	po_early_hellos(n);
}

static void po_on_failure(struct psched_node *n, const Psched__NodeFailure *f)
{
	struct psd_peer *p;

	pthread_mutex_lock(&n->lock);
	p = psd_node_peer(n, f->id);
	if (!p || p->dead) {
		pthread_mutex_unlock(&n->lock);
		return;
	}
	p->dead = true;
	pthread_mutex_unlock(&n->lock);
	psd_err("scheduler reports %s dead: %s", p->desc, f->reason);
	if (n->role && n->role->peer_failed)
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD, f->reason);
}

/* Van thread: check a worker's hello and bind its connection. */
static void po_accept_hello(struct psched_node *n, struct psd_conn *c, int id,
			    uint64_t token)
{
	const char *why = NULL;
	struct psd_peer *p = NULL;

	if (token != n->token)
		why = "hello with a wrong job token (PS_JOB_TOKEN)";
	else if (!(p = psd_node_peer(n, id)) || p->id < 0 ||
		 p->role != PSCHED_ROLE_WORKER)
		why = "hello from an id that is no worker of this job";
	else if (p->conn || p->dead)
		why = "hello for a worker that is already connected";
	if (why) {
		psd_err("dropping connection from %s: %s", c->peer, why);
		psd_conn_close(c);
		return;
	}
	pthread_mutex_lock(&n->lock);
	p->conn = c;
	psd_conn_get(c);
	pthread_mutex_unlock(&n->lock);
	c->peer_id = p->id;
	snprintf(c->peer, sizeof(c->peer), "%s", p->desc);
}

/*
 * Van thread: a worker finished and says so on its data connection before
 * it goes.  Its connection closing is then no failure; but in sync mode no
 * step it has not pushed can complete, so waits for those fail now, naming
 * it, rather than at their timeout.
 */
static void po_on_goodbye(struct psched_node *n, struct psd_conn *c)
{
	struct psd_peer *p;

	pthread_mutex_lock(&n->lock);
	p = psd_node_peer(n, c->peer_id);
	if (!p || p->conn != c || p->departed || p->dead) {
		pthread_mutex_unlock(&n->lock);
		return;
	}
	p->departed = true;
	pthread_mutex_unlock(&n->lock);
	psd_info("%s finished", p->desc);
	if (n->role && n->role->peer_failed)
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD,
				     "finished (finalized) and left");
}

/*
 * Van thread: the first message on a data connection must be a hello
 * from a worker of this job (its id and the job token), and each worker
 * has one data connection.  Anything else costs the connection.  A worker
 * may get the node table, and say hello, before this server has its own
 * copy: such hellos wait here until the table comes.
 */
static void po_on_hello(struct psched_node *n, struct psd_conn *c,
			const Psched__Control *m)
{
	struct psd_early_hello *e;

	if (m->body_case == PSCHED__CONTROL__BODY_FINALIZE && c->peer_id >= 0) {
		po_on_goodbye(n, c);
		return;
	}
	if (m->body_case != PSCHED__CONTROL__BODY_HELLO || c->peer_id >= 0) {
		psd_err("dropping connection from %s: unexpected control "
			"message on a data connection",
			c->peer);
		psd_conn_close(c);
		return;
	}
	if (n->have_table) {
		po_accept_hello(n, c, m->hello->id, m->hello->token);
		return;
	}
	if (n->nearly == PSD_EARLY_HELLO_MAX) {
		psd_err("dropping connection from %s: too many hellos before "
			"the cluster is complete",
			c->peer);
		psd_conn_close(c);
		return;
	}
	e = &n->early[n->nearly++];
	e->conn = c;
	e->id = m->hello->id;
	e->token = m->hello->token;
	psd_conn_get(c);
}

/* Van thread: the table is here; take the hellos that came before it. */
static void po_early_hellos(struct psched_node *n)
{
	unsigned i;

	for (i = 0; i < n->nearly; i++) {
		struct psd_early_hello *e = &n->early[i];

		if (!atomic_load(&e->conn->closed))
			po_accept_hello(n, e->conn, e->id, e->token);
		psd_conn_put(e->conn);
	}
	n->nearly = 0;
}

static void po_rx_control(void *arg, struct psd_conn *c,
			  const Psched__Control *m)
{
	struct psched_node *n = arg;

	if (c != n->sched) {
		if (!n->role || !n->role->rx_control ||
		    !n->role->rx_control(n, c, m))
			po_on_hello(n, c, m);
		return;
	}
	switch (m->body_case) {
	case PSCHED__CONTROL__BODY_TABLE:
		po_on_table(n, m->table);
		break;
	case PSCHED__CONTROL__BODY_BARRIER:
		pthread_mutex_lock(&n->lock);
		if (m->barrier->seq > n->barrier_done)
			n->barrier_done = m->barrier->seq;
		pthread_cond_broadcast(&n->cond);
		pthread_mutex_unlock(&n->lock);
		break;
	case PSCHED__CONTROL__BODY_FAILURE:
		po_on_failure(n, m->failure);
		break;
	case PSCHED__CONTROL__BODY_ABORT:
		psd_node_set_fatal(n, PSCHED_ERENDEZVOUS, "scheduler: %s",
				   m->abort->reason);
		break;
	case PSCHED__CONTROL__BODY_SHUTDOWN:
		pthread_mutex_lock(&n->lock);
		n->shutdown = true;
		pthread_cond_broadcast(&n->cond);
		pthread_mutex_unlock(&n->lock);
		break;
	case PSCHED__CONTROL__BODY_CONFIG:
		if (n->role && n->role->on_config)
			n->role->on_config(n, m->config);
		break;
	default:
		psd_warn("ignoring control message %d from the scheduler",
			 (int)m->body_case);
		break;
	}
}

static int po_rx_header(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			void **dst)
{
	struct psched_node *n = arg;

	if (!n->role || !n->role->rx_header) {
		psd_err("dropping connection from %s: data message on a node "
			"that takes none",
			c->peer);
		return -EPROTO;
	}
	return n->role->rx_header(n, c, h, dst);
}

static void po_rx_data(void *arg, struct psd_conn *c, const struct psd_hdr *h,
		       void *payload)
{
	struct psched_node *n = arg;

	n->role->rx_data(n, c, h, payload);
}

static void po_closed(void *arg, struct psd_conn *c, int err)
{
	struct psched_node *n = arg;
	struct psd_peer *p;
	bool down;

	if (c == n->sched) {
		pthread_mutex_lock(&n->lock);
		down = n->shutdown;
		pthread_mutex_unlock(&n->lock);
		if (!down)
			psd_node_set_fatal(n, PSCHED_ENODEDEAD,
					   "lost the scheduler (%s): %s",
					   c->peer, psched_strerror(err));
		return;
	}
	if (n->role && n->role->conn_closed)
		n->role->conn_closed(n, c);
	if (c->peer_id < 0 || !n->have_table)
		return;
	pthread_mutex_lock(&n->lock);
	p = psd_node_peer(n, c->peer_id);
	/* Only the peer's own data connection speaks for it.  A server that
	 * got the shutdown before this finalized worker did is no failure. */
	down = n->shutdown || n->finalizing || !p || p->dead || p->departed ||
	       p->conn != c;
	if (p && !down)
		p->dead = true;
	pthread_mutex_unlock(&n->lock);
	if (!down && n->role && n->role->peer_failed) {
		char why[160];

		snprintf(why, sizeof(why), "connection closed (%s)",
			 psched_strerror(err));
		psd_err("lost %s: %s", p->desc, why);
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD, why);
	}
}

/* Heartbeat thread: one beat per interval until psd_po_stop(). */
static void *po_heartbeat_main(void *arg)
{
	struct psched_node *n = arg;
	Psched__Heartbeat hb = PSCHED__HEARTBEAT__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	struct timespec ts;

	m.body_case = PSCHED__CONTROL__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	pthread_mutex_lock(&n->lock);
	while (!n->hb_stop) {
		psd_deadline(&ts, n->cfg.heartbeat_interval_ms);
		pthread_cond_timedwait(&n->hb_cond, &n->lock, &ts);
		if (n->hb_stop || !n->sched || atomic_load(&n->sched->closed))
			continue;
		pthread_mutex_unlock(&n->lock);
		hb.time_us = psd_now_us();
		psd_node_send_sched(n, &m);
		pthread_mutex_lock(&n->lock);
	}
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

static int po_heartbeat_start(struct psched_node *n)
{
	pthread_condattr_t ca;
	int ret;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->hb_cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&n->hb_thread, NULL, po_heartbeat_main, n);
	if (ret) {
		pthread_cond_destroy(&n->hb_cond);
		return psd_set_errmsg(ret, "cannot start the heartbeat thread");
	}
	n->hb_started = true;
	return 0;
}

static void po_heartbeat_stop(struct psched_node *n)
{
	if (!n->hb_started)
		return;
	pthread_mutex_lock(&n->lock);
	n->hb_stop = true;
	pthread_cond_broadcast(&n->hb_cond);
	pthread_mutex_unlock(&n->lock);
	pthread_join(n->hb_thread, NULL);
	pthread_cond_destroy(&n->hb_cond);
	n->hb_started = false;
}

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
			"scheduler", &n->sched);
		if (!ret)
			return 0;
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

	ni.id = -1;
	ni.rank = -1;
	ni.role = (Psched__Role)n->cfg.role;
	ni.host = n->host;
	ni.port = n->listen_port;
	reg.node = &ni;
	reg.transport = (char *)(uintptr_t)n->ops->name;
	reg.num_server = n->cfg.num_server;
	reg.num_worker = n->cfg.num_worker;
	reg.pid = getpid();
	reg.token = psd_cfg_job_token(&n->cfg);
	m.body_case = PSCHED__CONTROL__BODY_REG;
	m.reg = &reg;
	return psd_node_send_sched(n, &m);
}

/* Wait (n->lock held) until @cond_fn is true, the node fails, or the
 * deadline passes. */
static int po_wait_locked(struct psched_node *n, bool (*cond_fn)(void *),
			  void *arg, unsigned timeout_ms)
{
	struct timespec ts;

	psd_deadline(&ts, timeout_ms);
	while (!cond_fn(arg)) {
		if (n->fatal)
			return psd_set_errmsg(n->fatal, "%s", n->fatal_msg);
		if (pthread_cond_timedwait(&n->cond, &n->lock, &ts) ==
		    ETIMEDOUT)
			return cond_fn(arg) ? 0 : -ETIMEDOUT;
	}
	return 0;
}

static bool po_have_table(void *arg)
{
	return ((struct psched_node *)arg)->have_table;
}

static int po_connect_servers(struct psched_node *n, uint64_t deadline)
{
	Psched__Hello hello = PSCHED__HELLO__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	struct psd_addr a;
	struct psd_peer *p;
	unsigned i;
	int ret;

	hello.id = n->id;
	hello.token = n->token;
	m.body_case = PSCHED__CONTROL__BODY_HELLO;
	m.hello = &hello;
	for (i = 0; i < n->npeers; i++) {
		p = &n->peers[i];
		if (p->id < 0 || p->role != PSCHED_ROLE_SERVER)
			continue;
		snprintf(a.host, sizeof(a.host), "%s", p->host);
		a.port = p->port;
		ret = psd_van_connect(n->van, &a,
				      (unsigned)(deadline - psd_now_ms() + 1),
				      "server", &p->conn);
		if (ret)
			return psd_set_errmsg(ret, "cannot connect to %s: %s",
					      p->desc, psched_strerror(ret));
		p->conn->peer_id = p->id;
		snprintf(p->conn->peer, sizeof(p->conn->peer), "%s", p->desc);
		ret = psd_conn_send_control(p->conn, n->id, &m);
		if (ret)
			return psd_set_errmsg(ret, "hello to %s failed: %s",
					      p->desc, psched_strerror(ret));
	}
	return 0;
}

static const struct psd_van_cb po_van_cb = {
	.rx_header = po_rx_header,
	.rx_data = po_rx_data,
	.rx_control = po_rx_control,
	.closed = po_closed,
};

int psd_po_start(struct psched_node *n)
{
	struct psd_van_opts vo = { .ops = n->ops,
				   .max_tensor = n->cfg.max_tensor_bytes,
				   .send_timeout_ms =
					   n->cfg.heartbeat_timeout_ms,
				   .cfg = &n->cfg };
	struct psd_van_cb cb = po_van_cb;
	uint64_t deadline = psd_now_ms() + n->cfg.connect_timeout_ms;
	struct psd_addr la = { .host = "0.0.0.0", .port = n->cfg.port };
	int ret;

	cb.arg = n;
	ret = psd_van_create(&vo, &cb, &n->van);
	if (ret)
		return ret;
	if (n->cfg.role == PSCHED_ROLE_SERVER) {
		ret = psd_van_listen(n->van, &la, &n->listen_port);
		if (ret)
			return ret;
	}
	ret = psd_van_start(n->van);
	if (ret)
		return ret;
	ret = po_connect_sched(n, deadline);
	if (ret)
		return ret;
	po_pick_host(n);
	ret = po_register(n);
	if (ret)
		return psd_set_errmsg(ret, "register with the scheduler: %s",
				      psched_strerror(ret));
	ret = po_heartbeat_start(n);
	if (ret)
		return ret;
	pthread_mutex_lock(&n->lock);
	ret = po_wait_locked(n, po_have_table, n, n->cfg.connect_timeout_ms);
	pthread_mutex_unlock(&n->lock);
	if (ret == -ETIMEDOUT)
		return psd_set_errmsg(
			PSCHED_ERENDEZVOUS,
			"%s: the scheduler at %s:%u sent no node table within "
			"%u ms (the job expects %u servers and %u workers; "
			"some never registered)",
			psched_role_name(n->cfg.role), n->cfg.root_uri,
			n->cfg.root_port, n->cfg.connect_timeout_ms,
			n->cfg.num_server, n->cfg.num_worker);
	if (ret)
		return ret;
	psd_log_set_who(n->peers[n->id].desc);
	if (n->cfg.role == PSCHED_ROLE_WORKER) {
		ret = po_connect_servers(n, deadline);
		if (ret)
			return ret;
	}
	return psched_barrier(n, PSCHED_GROUP_ALL, n->cfg.connect_timeout_ms);
}

struct po_barrier_wait {
	struct psched_node *n;
	uint64_t seq;
};

static bool po_barrier_done(void *arg)
{
	struct po_barrier_wait *w = arg;

	return w->n->barrier_done >= w->seq;
}

int psched_barrier(struct psched_node *n, unsigned group, unsigned timeout_ms)
{
	Psched__Barrier b = PSCHED__BARRIER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	struct po_barrier_wait w = { .n = n };
	int ret;

	if (n->cfg.role == PSCHED_ROLE_SCHEDULER || !group ||
	    group > PSCHED_GROUP_ALL)
		return psd_set_errmsg(-EINVAL, "barrier: bad group or role");
	if (!timeout_ms)
		timeout_ms = n->cfg.request_timeout_ms;
	pthread_mutex_lock(&n->lock);
	w.seq = ++n->barrier_seq;
	pthread_mutex_unlock(&n->lock);
	b.group = group;
	b.seq = w.seq;
	m.body_case = PSCHED__CONTROL__BODY_BARRIER;
	m.barrier = &b;
	ret = psd_node_send_sched(n, &m);
	if (ret)
		return psd_set_errmsg(ret,
				      "barrier %llu: cannot reach the "
				      "scheduler: %s",
				      (unsigned long long)w.seq,
				      psched_strerror(ret));
	pthread_mutex_lock(&n->lock);
	ret = po_wait_locked(n, po_barrier_done, &w, timeout_ms);
	pthread_mutex_unlock(&n->lock);
	if (ret == -ETIMEDOUT)
		psd_set_errmsg(ret,
			       "barrier %llu (group %u) not released by the "
			       "scheduler at %s:%u within %u ms",
			       (unsigned long long)w.seq, group,
			       n->cfg.root_uri, n->cfg.root_port, timeout_ms);
	return ret;
}

static bool po_is_shutdown(void *arg)
{
	return ((struct psched_node *)arg)->shutdown;
}

/* Worker: tell the scheduler we are done and wait for the shutdown. */
int psd_po_finalize(struct psched_node *n)
{
	Psched__Finalize f = PSCHED__FINALIZE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;
	int ret;

	m.body_case = PSCHED__CONTROL__BODY_FINALIZE;
	m.finalize = &f;
	pthread_mutex_lock(&n->lock);
	n->finalizing = true;
	pthread_mutex_unlock(&n->lock);
	/* Goodbye to each server first, so none mistakes our leaving for a
	 * failure. */
	for (i = 0; i < n->num_server; i++) {
		struct psd_peer *p = psd_node_peer(n, psd_server_id(i));

		if (p && p->conn && !p->dead)
			psd_conn_send_control(p->conn, n->id, &m);
	}
	ret = psd_node_send_sched(n, &m);
	if (ret)
		return ret;
	pthread_mutex_lock(&n->lock);
	ret = po_wait_locked(n, po_is_shutdown, n, n->cfg.request_timeout_ms);
	pthread_mutex_unlock(&n->lock);
	return ret;
}

/* Server: serve until the scheduler says stop or the cluster fails. */
int psched_node_run(struct psched_node *n)
{
	int ret = 0;

	if (n->role && n->role->run)
		return n->role->run(n);
	pthread_mutex_lock(&n->lock);
	while (!n->shutdown && !n->fatal)
		pthread_cond_wait(&n->cond, &n->lock);
	if (!n->shutdown) {
		ret = n->fatal;
		psd_set_errmsg(ret, "%s", n->fatal_msg);
	}
	pthread_mutex_unlock(&n->lock);
	return ret;
}

void psd_po_stop(struct psched_node *n)
{
	unsigned i;

	po_heartbeat_stop(n);
	psd_van_destroy(n->van);
	n->van = NULL;
	for (i = 0; i < n->nearly; i++)
		psd_conn_put(n->early[i].conn);
	n->nearly = 0;
	for (i = 0; i < n->npeers; i++)
		psd_conn_put(n->peers[i].conn);
	psd_conn_put(n->sched);
	n->sched = NULL;
	free(n->peers);
	n->peers = NULL;
	n->npeers = 0;
}
