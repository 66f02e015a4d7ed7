// SPDX-License-Identifier: MIT
/*
 * The scheduler node: rendezvous (registration, ids, ranks, node table),
 * barriers, heartbeats and failure detection, shutdown.  All state lives
 * on the van thread; the main thread only waits for the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched.h"
#include "role.h"

static void sched_finish(struct psched_node *n, int result, const char *msg)
{
	struct psd_sched *s = psd_sched_of(n);

	pthread_mutex_lock(&n->lock);
	if (!s->done) {
		s->done = true;
		s->result = result;
		snprintf(s->result_msg, sizeof(s->result_msg), "%s", msg);
	}
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

void psd_sched_send(struct sched_node *sn, const Psched__Control *m)
{
	if (sn->conn && !sn->closed)
		psd_conn_send_control(sn->conn, 0, m);
}

static void sched_abort_node(struct psd_conn *c, const char *reason)
{
	Psched__Abort a = PSCHED__ABORT__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	psd_err("rejecting %s: %s", c->peer, reason);
	a.reason = (char *)(uintptr_t)reason;
	m.body_case = PSCHED__CONTROL__BODY_ABORT;
	m.abort = &a;
	psd_conn_send_control(c, 0, &m);
	psd_conn_close(c);
}

static bool sched_in_group(const struct sched_node *sn, unsigned group)
{
	if (sn->role == PSCHED_ROLE_SERVER)
		return group & PSCHED_GROUP_SERVERS;
	return group & PSCHED_GROUP_WORKERS;
}

static unsigned sched_group_alive(struct psd_sched *s, unsigned group)
{
	unsigned i, cnt = 0;

	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].used && !s->nodes[i].dead &&
		    !s->nodes[i].left && sched_in_group(&s->nodes[i], group))
			cnt++;
	return cnt;
}

/* Release a barrier once every live member of its group arrived. */
static void sched_barrier_check(struct psched_node *n, unsigned group)
{
	struct psd_sched *s = psd_sched_of(n);
	struct sched_barrier *b = &s->barriers[group];
	Psched__Barrier rel = PSCHED__BARRIER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;

	if (!b->arrived || b->arrived < sched_group_alive(s, group))
		return;
	rel.group = group;
	m.body_case = PSCHED__CONTROL__BODY_BARRIER;
	m.barrier = &rel;
	for (i = 0; i < b->arrived; i++) {
		rel.seq = b->seqs[i];
		psd_sched_send(b->waiting[i], &m);
	}
	psd_debug("barrier of group %u released (%u nodes)", group, b->arrived);
	b->arrived = 0;
}

static void sched_barrier_arrive(struct psched_node *n, struct sched_node *sn,
				 const Psched__Barrier *req)
{
	struct psd_sched *s = psd_sched_of(n);
	unsigned g = req->group;
	struct sched_barrier *b;
	unsigned i;

	if (!g || g > PSCHED_GROUP_ALL || !sched_in_group(sn, g)) {
		psd_err("%s: barrier on group %u it is not part of", sn->desc,
			g);
		return;
	}
	b = &s->barriers[g];
	for (i = 0; i < b->arrived; i++)
		if (b->waiting[i] == sn)
			return; /* duplicate */
	b->waiting[b->arrived] = sn;
	b->seqs[b->arrived] = req->seq;
	b->arrived++;
	sched_barrier_check(n, g);
}

/* A worker that left finalized: it need not wait for the job's end. */
static void sched_release_left(struct sched_node *sn)
{
	Psched__Shutdown sd = PSCHED__SHUTDOWN__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	m.body_case = PSCHED__CONTROL__BODY_SHUTDOWN;
	m.shutdown = &sd;
	psd_sched_send(sn, &m);
}

static void sched_maybe_shutdown(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	Psched__Shutdown sd = PSCHED__SHUTDOWN__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;

	if (s->shutdown_sent)
		return;
	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		if (sn->used && !sn->dead && sn->role == PSCHED_ROLE_WORKER &&
		    !sn->finalized)
			return;
	}
	psd_info("every worker finished; shutting the cluster down");
	psd_autotune_finish(s->at);
	m.body_case = PSCHED__CONTROL__BODY_SHUTDOWN;
	m.shutdown = &sd;
	s->shutdown_sent = true;
	s->shutdown_ms = psd_now_ms();
	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].used && !s->nodes[i].dead)
			psd_sched_send(&s->nodes[i], &m);
}

static void sched_declare_dead(struct psched_node *n, struct sched_node *sn,
			       const char *why)
{
	struct psd_sched *s = psd_sched_of(n);
	Psched__NodeFailure f = PSCHED__NODE_FAILURE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	char reason[256];
	unsigned i, g;

	if (sn->dead)
		return;
	sn->dead = true;
	s->declared_dead++;
	snprintf(reason, sizeof(reason), "%s %s", sn->desc, why);
	psd_err("declaring %s", reason);
	if (sn->role == PSCHED_ROLE_WORKER)
		psd_autotune_worker_gone(s->at, (unsigned)(sn - s->nodes));
	f.id = sn->id;
	f.role = (Psched__Role)sn->role;
	f.rank = sn->rank;
	f.reason = reason;
	m.body_case = PSCHED__CONTROL__BODY_FAILURE;
	m.failure = &f;
	/* A worker that left owes no step: its end is nobody's failure. */
	for (i = 0; i < s->cap && !sn->left; i++)
		if (s->nodes[i].used && !s->nodes[i].dead)
			psd_sched_send(&s->nodes[i], &m);
	/* Barriers and config switches no longer wait for the dead node. */
	for (g = 1; g <= PSCHED_GROUP_ALL; g++)
		sched_barrier_check(n, g);
	psd_sched_cfg_check(n);
	sched_maybe_shutdown(n);
}

static void sched_send_table(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	Psched__NodeInfo *infos, **ptrs;
	Psched__NodeTable t = PSCHED__NODE_TABLE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;

	infos = calloc(s->cap, sizeof(*infos));
	ptrs = calloc(s->cap, sizeof(*ptrs));
	if (!infos || !ptrs) {
		free(infos);
		free(ptrs);
		sched_finish(n, -ENOMEM, "no memory for the node table");
		return;
	}
	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		psched__node_info__init(&infos[i]);
		infos[i].id = sn->id;
		infos[i].role = (Psched__Role)sn->role;
		infos[i].rank = sn->rank;
		infos[i].host = sn->host;
		infos[i].port = sn->port;
		infos[i].shm_port = sn->shm_port;
		infos[i].host_key = sn->host_key;
		ptrs[i] = &infos[i];
	}
	t.n_nodes = s->cap;
	t.nodes = ptrs;
	m.body_case = PSCHED__CONTROL__BODY_TABLE;
	m.table = &t;
	for (i = 0; i < s->cap; i++) {
		t.your_id = s->nodes[i].id;
		psd_sched_send(&s->nodes[i], &m);
	}
	s->table_sent = true;
	psd_info("all %u servers and %u workers registered; node table sent",
		 n->num_server, n->num_worker);
	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].role == PSCHED_ROLE_WORKER)
			psd_autotune_worker_add(s->at, i);
	psd_sched_autotune_kick(n);
	free(infos);
	free(ptrs);
}

/* Ranks in registration order; ids: servers 1..S, workers S+1..S+W. */
static void sched_assign(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	unsigned i, rs = 0, rw = 0;

	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		if (sn->role == PSCHED_ROLE_SERVER) {
			sn->rank = (int)rs++;
			sn->id = psd_server_id((unsigned)sn->rank);
		} else {
			sn->rank = (int)rw++;
			sn->id = psd_worker_id(n, (unsigned)sn->rank);
		}
		snprintf(sn->desc, sizeof(sn->desc), "%s %d (rank %d, %s:%u)",
			 psched_role_name(sn->role), sn->id, sn->rank, sn->host,
			 sn->port);
		sn->conn->peer_id = sn->id;
		snprintf(sn->conn->peer, sizeof(sn->conn->peer), "%s",
			 sn->desc);
		pthread_mutex_lock(&s->app_lock);
		psd_conn_get(sn->conn);
		s->app_conns[sn->id] = sn->conn;
		pthread_mutex_unlock(&s->app_lock);
	}
}

static const char *sched_check_reg(struct psched_node *n, struct psd_conn *c,
				   const Psched__Register *r, char *buf,
				   size_t len)
{
	struct psd_sched *s = psd_sched_of(n);

	if (!r->node || (r->node->role != PSCHED__ROLE__SERVER &&
			 r->node->role != PSCHED__ROLE__WORKER))
		return "registration without a server or worker role";
	if (r->num_server != n->num_server || r->num_worker != n->num_worker) {
		snprintf(buf, len,
			 "node was started for %u servers and %u workers, "
			 "the scheduler for %u and %u",
			 r->num_server, r->num_worker, n->num_server,
			 n->num_worker);
		return buf;
	}
	if (!r->transport || !strcmp(r->transport, "auto") ||
	    !psd_transport_find(r->transport)) {
		snprintf(buf, len, "%s at %s registered without a transport",
			 psched_role_name((enum psched_role)r->node->role),
			 c->peer);
		return buf;
	}
	if (!strcmp(s->transport, "auto")) {
		/* The first node's choice becomes the job's. */
		snprintf(s->transport, sizeof(s->transport), "%s",
			 r->transport);
		snprintf(s->transport_from, sizeof(s->transport_from),
			 "picked by the first node, %s at %s (pid %d)",
			 psched_role_name((enum psched_role)r->node->role),
			 c->peer, r->pid);
	}
	if (strcmp(r->transport, s->transport)) {
		snprintf(buf, len,
			 "%s at %s (pid %d) uses transport '%s' but the job "
			 "uses '%s' (%s); set PS_TRANSPORT the same on every "
			 "node",
			 psched_role_name((enum psched_role)r->node->role),
			 c->peer, r->pid, r->transport, s->transport,
			 s->transport_from);
		return buf;
	}
	if (s->table_sent)
		return "the cluster is already complete";
	if (r->node->role == PSCHED__ROLE__SERVER ? s->nserv >= n->num_server
						  : s->nwork >= n->num_worker) {
		snprintf(buf, len, "the job already has all its %ss",
			 r->node->role == PSCHED__ROLE__SERVER ? "server"
							       : "worker");
		return buf;
	}
	return NULL;
}

static void sched_on_register(struct psched_node *n, struct psd_conn *c,
			      const Psched__Register *r)
{
	struct psd_sched *s = psd_sched_of(n);
	struct sched_node *sn = NULL;
	const char *bad;
	char buf[256];
	unsigned i;

	if (c->ctx) {
		sched_abort_node(c, "registered twice");
		return;
	}
	bad = sched_check_reg(n, c, r, buf, sizeof(buf));
	if (bad) {
		sched_abort_node(c, bad);
		return;
	}
	for (i = 0; i < s->cap && !sn; i++)
		if (!s->nodes[i].used)
			sn = &s->nodes[i];
	memset(sn, 0, sizeof(*sn));
	sn->used = true;
	sn->conn = c;
	psd_conn_get(c);
	c->ctx = sn;
	sn->role = (enum psched_role)r->node->role;
	snprintf(sn->host, sizeof(sn->host), "%s", r->node->host);
	sn->port = r->node->port;
	sn->shm_port = r->node->shm_port <= 65535 ? r->node->shm_port : 0;
	snprintf(sn->host_key, sizeof(sn->host_key), "%s",
		 r->node->host_key ? r->node->host_key : "");
	sn->last_seen_ms = psd_now_ms();
	snprintf(sn->desc, sizeof(sn->desc), "%s from %s (pid %d)",
		 psched_role_name(sn->role), c->peer, r->pid);
	if (sn->role == PSCHED_ROLE_SERVER)
		s->nserv++;
	else
		s->nwork++;
	psd_info("registered %s; %u/%u servers, %u/%u workers", sn->desc,
		 s->nserv, n->num_server, s->nwork, n->num_worker);
	if (s->nserv == n->num_server && s->nwork == n->num_worker) {
		sched_assign(n);
		sched_send_table(n);
	}
}

/*
 * Van thread: the handshake before a registration counts (auth.h).  The
 * Register is kept packed on the connection until the node's proof
 * comes; only then is it looked at.
 */
static void sched_auth_rx(struct psched_node *n, struct psd_conn *c,
			  const Psched__Control *m)
{
	Psched__Register *r;
	size_t len;
	int ret;

	if (m->body_case == PSCHED__CONTROL__BODY_REG && !c->auth_step) {
		len = psched__register__get_packed_size(m->reg);
		c->auth_msg = malloc(len ? len : 1);
		if (!c->auth_msg) {
			psd_conn_close(c);
			return;
		}
		c->auth_msg_len = psched__register__pack(m->reg, c->auth_msg);
		ret = psd_auth_challenge(
			&n->secret, c, 0, PSD_AUTH_REGISTER,
			m->reg->node ? (int32_t)m->reg->node->role : -1,
			m->reg->nonce.data, m->reg->nonce.len);
	} else {
		ret = psd_auth_finish(&n->secret, c, PSD_AUTH_REGISTER, m);
	}
	if (ret) {
		psd_err("dropping connection from %s: registration failed "
			"authentication: %s",
			c->peer, psched_errmsg());
		psd_conn_close(c);
		return;
	}
	if (!atomic_load(&c->authed))
		return;
	r = psched__register__unpack(NULL, c->auth_msg_len, c->auth_msg);
	free(c->auth_msg);
	c->auth_msg = NULL;
	if (!r) {
		psd_conn_close(c);
		return;
	}
	sched_on_register(n, c, r);
	psched__register__free_unpacked(r, NULL);
}

/* @sn's connection no longer takes application messages. */
static void sched_app_forget(struct psd_sched *s, struct sched_node *sn)
{
	struct psd_conn *c = NULL;

	pthread_mutex_lock(&s->app_lock);
	if (sn->id > 0 && (unsigned)sn->id <= s->cap &&
	    s->app_conns[sn->id] == sn->conn) {
		c = s->app_conns[sn->id];
		s->app_conns[sn->id] = NULL;
	}
	pthread_mutex_unlock(&s->app_lock);
	psd_conn_put(c);
}

/* Any thread (role hook): send application message @m to node @to. */
static int sched_app_send(struct psched_node *n, int to,
			  const Psched__Control *m)
{
	struct psd_sched *s = psd_sched_of(n);
	struct psd_conn *c = NULL;
	int ret;

	pthread_mutex_lock(&s->app_lock);
	if (to > 0 && (unsigned)to <= s->cap && s->app_conns[to]) {
		c = s->app_conns[to];
		psd_conn_get(c);
	}
	pthread_mutex_unlock(&s->app_lock);
	if (!c)
		return -ENOTCONN;
	ret = psd_conn_send_control(c, 0, m);
	psd_conn_put(c);
	return ret;
}

/* Van thread: application message @a from @sn, for this node or to pass
 * on (the sender's id is the connection's, whatever it wrote). */
static void sched_on_app(struct psched_node *n, struct sched_node *sn,
			 Psched__AppMessage *a)
{
	Psched__Control m = PSCHED__CONTROL__INIT;
	int ret;

	a->from = sn->id;
	if (a->to == 0) {
		psd_app_deliver(n, sn->id, a);
		return;
	}
	m.body_case = PSCHED__CONTROL__BODY_APP;
	m.app = a;
	ret = sched_app_send(n, a->to, &m);
	if (ret)
		psd_warn("%s: application message to node %d dropped: %s",
			 sn->desc, a->to, psched_strerror(ret));
}

static void sched_rx_control(void *arg, struct psd_conn *c,
			     const Psched__Control *m)
{
	struct psched_node *n = arg;
	struct psd_sched *s = psd_sched_of(n);
	struct sched_node *sn = c->ctx;

	if (!atomic_load(&c->authed)) {
		sched_auth_rx(n, c, m);
		return;
	}
	if (m->body_case == PSCHED__CONTROL__BODY_REG) {
		sched_abort_node(c, "registered twice");
		return;
	}
	if (!sn) {
		psd_err("dropping connection from %s: message %d before "
			"registering",
			c->peer, (int)m->body_case);
		psd_conn_close(c);
		return;
	}
	sn->last_seen_ms = psd_now_ms();
	switch (m->body_case) {
	case PSCHED__CONTROL__BODY_HEARTBEAT:
		psd_sched_on_heartbeat(sn, m->heartbeat);
		break;
	case PSCHED__CONTROL__BODY_BARRIER:
		sched_barrier_arrive(n, sn, m->barrier);
		break;
	case PSCHED__CONTROL__BODY_FINALIZE:
		sn->finalized = true;
		if (sn->role == PSCHED_ROLE_WORKER)
			psd_autotune_worker_gone(s->at,
						 (unsigned)(sn - s->nodes));
		if (sn->left)
			sched_release_left(sn);
		psd_sched_cfg_check(n);
		sched_maybe_shutdown(n);
		break;
	case PSCHED__CONTROL__BODY_LEAVE:
		psd_sched_on_leave(n, sn);
		break;
	case PSCHED__CONTROL__BODY_CONFIG_ACK:
		psd_sched_on_config_ack(n, sn, m->config_ack);
		break;
	case PSCHED__CONTROL__BODY_METRICS:
		psd_sched_on_metrics(n, sn, m->metrics);
		break;
	case PSCHED__CONTROL__BODY_APP:
		sched_on_app(n, sn, m->app);
		break;
	default:
		psd_warn("%s sent unexpected control message %d", sn->desc,
			 (int)m->body_case);
		break;
	}
}

static int sched_rx_header(void *arg, struct psd_conn *c,
			   const struct psd_hdr *h, void **dst)
{
	(void)arg;
	(void)dst;
	psd_err("dropping connection from %s: %s message sent to the "
		"scheduler",
		c->peer, psd_msg_type_name(h->type));
	return -EPROTO;
}

static void sched_closed(void *arg, struct psd_conn *c, int err)
{
	struct psched_node *n = arg;
	struct psd_sched *s = psd_sched_of(n);
	struct sched_node *sn = c->ctx;
	char why[128];

	if (!sn)
		return;
	sn->closed = true;
	sched_app_forget(s, sn);
	if (!s->table_sent) {
		/* Left during rendezvous: free the slot for a retry. */
		psd_warn("%s left before the cluster was complete", sn->desc);
		if (sn->role == PSCHED_ROLE_SERVER)
			s->nserv--;
		else
			s->nwork--;
		sn->used = false;
		c->ctx = NULL;
		psd_conn_put(sn->conn);
		sn->conn = NULL;
		return;
	}
	if (s->shutdown_sent ||
	    (sn->role == PSCHED_ROLE_WORKER && sn->finalized))
		return;
	snprintf(why, sizeof(why), "dead: connection closed (%s)",
		 psched_strerror(err));
	sched_declare_dead(n, sn, why);
}

static void sched_rendezvous_timeout(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	Psched__Abort a = PSCHED__ABORT__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	char msg[512];
	unsigned i;

	snprintf(msg, sizeof(msg),
		 "rendezvous timed out after %u ms: %u of %u servers and %u "
		 "of %u workers registered; missing %u server(s) and %u "
		 "worker(s), expected to connect to the scheduler at %s:%u",
		 n->cfg.connect_timeout_ms, s->nserv, n->num_server, s->nwork,
		 n->num_worker, n->num_server - s->nserv,
		 n->num_worker - s->nwork, n->cfg.root_uri, n->listen_port);
	psd_err("%s", msg);
	a.reason = msg;
	m.body_case = PSCHED__CONTROL__BODY_ABORT;
	m.abort = &a;
	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].used)
			psd_sched_send(&s->nodes[i], &m);
	sched_finish(n, PSCHED_ERENDEZVOUS, msg);
}

static void sched_tick(void *arg)
{
	struct psched_node *n = arg;
	struct psd_sched *s = psd_sched_of(n);
	uint64_t now = psd_now_ms();
	unsigned i, open = 0;
	char why[96];

	psd_sched_metrics_tick(n, now);
	if (s->done)
		return;
	if (!s->table_sent) {
		if (now - s->start_ms > n->cfg.connect_timeout_ms)
			sched_rendezvous_timeout(n);
		return;
	}
	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		if (!sn->closed)
			open++;
		if (sn->dead || sn->closed || s->shutdown_sent ||
		    now - sn->last_seen_ms <= n->cfg.heartbeat_timeout_ms)
			continue;
		snprintf(why, sizeof(why), "dead: no heartbeat for %llu ms",
			 (unsigned long long)(now - sn->last_seen_ms));
		sched_declare_dead(n, sn, why);
	}
	if (s->sw.open && now > s->sw.deadline_ms)
		psd_sched_cfg_timeout(n);
	psd_sched_members_kick(n);
	psd_sched_cycle_tick(n, now);
	psd_autotune_tick(s->at, now);
	psd_sched_autotune_kick(n);
	if (s->shutdown_sent && (!open || now - s->shutdown_ms > 5000))
		sched_finish(n, 0, "");
}

static void sched_free(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	unsigned g, i;

	if (!s)
		return;
	for (i = 0; i < s->cap; i++)
		psd_conn_put(s->nodes[i].conn);
	if (s->app_conns) {
		for (i = 0; i <= s->cap; i++)
			psd_conn_put(s->app_conns[i]);
		pthread_mutex_destroy(&s->app_lock);
		free(s->app_conns);
	}
	free(s->sw.members);
	for (g = 0; g <= PSCHED_GROUP_ALL; g++) {
		free(s->barriers[g].waiting);
		free(s->barriers[g].seqs);
	}
	psd_autotune_destroy(s->at);
	psd_metrics_destroy(s->met);
	free(s->nodes);
	free(s);
	n->role_state = NULL;
}

static int sched_alloc(struct psched_node *n)
{
	struct psd_sched *s = calloc(1, sizeof(*s));
	unsigned g;
	int ret;

	if (!s)
		return -ENOMEM;
	n->role_state = s;
	s->cap = n->num_server + n->num_worker;
	s->nodes = calloc(s->cap, sizeof(*s->nodes));
	s->app_conns = calloc(s->cap + 1, sizeof(*s->app_conns));
	if (!s->app_conns)
		return -ENOMEM;
	pthread_mutex_init(&s->app_lock, NULL);
	s->members_len = (n->num_worker + 7) / 8;
	s->sw.members = calloc(s->members_len ? s->members_len : 1, 1);
	if (!s->nodes || !s->sw.members)
		return -ENOMEM;
	for (g = 0; g <= PSCHED_GROUP_ALL; g++) {
		s->barriers[g].waiting = calloc(s->cap, sizeof(void *));
		s->barriers[g].seqs = calloc(s->cap, sizeof(uint64_t));
		if (!s->barriers[g].waiting || !s->barriers[g].seqs)
			return -ENOMEM;
	}
	/* The scheduler itself always speaks TCP; it only checks that the
	 * nodes agree on the data transport (PS_TRANSPORT, auto: the first
	 * node's choice). */
	snprintf(s->transport, sizeof(s->transport), "%s", n->cfg.transport);
	snprintf(s->transport_from, sizeof(s->transport_from),
		 "PS_TRANSPORT=%s on the scheduler", n->cfg.transport);
	if (psd_sched_cycle_parse(n->cfg.config_cycle, &s->cycle))
		return psd_set_errmsg(-EINVAL, "bad --config-cycle '%s'",
				      n->cfg.config_cycle);
	if (n->cfg.autotune && s->cycle.n)
		return psd_set_errmsg(-EINVAL, "--autotune and --config-cycle "
					       "both switch configs: use one");
	if (n->cfg.autotune) {
		ret = psd_autotune_create(&n->cfg, s->cap, &s->at);
		if (ret)
			return ret;
	}
	s->cur_part = n->cfg.partition_bytes;
	s->cur_credit = n->cfg.credit_bytes;
	s->hist[0] = (struct sched_commit){ 0, s->cur_part, s->cur_credit };
	s->nhist = 1;
	s->start_ms = psd_now_ms();
	return 0;
}

int psd_sched_attach(struct psched_node *n)
{
	int ret = sched_alloc(n);

	if (ret == -ENOMEM)
		return psd_set_errmsg(ret, "scheduler: no memory");
	return ret; /* else the message names the bad option */
}

static int sched_start(struct psched_node *n)
{
	struct psd_van_opts vo = { .ops = n->ops,
				   .cfg = &n->cfg,
				   .max_tensor = n->cfg.max_tensor_bytes,
				   .send_timeout_ms =
					   n->cfg.heartbeat_timeout_ms };
	struct psd_van_cb cb = {
		.arg = n,
		.rx_header = sched_rx_header,
		.rx_control = sched_rx_control,
		.closed = sched_closed,
		.tick = sched_tick,
		.tick_ms = 100,
	};
	struct psd_addr la = { .port = n->cfg.root_port };
	int ret;

	snprintf(la.host, sizeof(la.host), "0.0.0.0");
	n->id = 0;
	n->rank = 0;
	ret = psd_sched_metrics_start(n);
	if (ret)
		return ret;
	ret = psd_van_create(&vo, &cb, &n->van);
	if (ret)
		return ret;
	ret = psd_van_listen(n->van, &la, &n->listen_port);
	if (ret)
		return ret;
	return psd_van_start(n->van);
}

static int sched_run(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	int ret;

	pthread_mutex_lock(&n->lock);
	while (!s->done)
		pthread_cond_wait(&n->cond, &n->lock);
	ret = s->result;
	if (ret)
		psd_set_errmsg(ret, "%s", s->result_msg);
	pthread_mutex_unlock(&n->lock);
	return ret;
}

static void sched_stop(struct psched_node *n)
{
	psd_van_destroy(n->van);
	n->van = NULL;
}

const struct psd_role_ops psd_sched_role = {
	.attach = psd_sched_attach,
	.start = sched_start,
	.run = sched_run,
	.stop = sched_stop,
	.detach = sched_free,
	.app_send = sched_app_send,
};
