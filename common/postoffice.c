// SPDX-License-Identifier: MIT
/*
 * Postoffice, node side (servers and workers): the node table, data
 * connections and their authentication (auth.h), barriers, heartbeats,
 * failure notices and shutdown.  Joining the scheduler: po_join.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"

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

/*
 * The table must have the layout its ids promise (scheduler/scheduler.c):
 * S + W entries, servers 1..S with rank id - 1, workers S+1..S+W with rank
 * id - S - 1, and your_id one of them with our role.  Ranks index
 * per-worker and per-server arrays (a server's push sums by worker rank),
 * so a table that breaks the layout is refused rather than trusted.
 */
static const char *po_table_bad(const struct psched_node *n,
				const Psched__NodeTable *t)
{
	unsigned ns = n->num_server, nn = n->num_server + n->num_worker;
	size_t i;

	if (t->n_nodes != nn)
		return "wrong number of nodes";
	for (i = 0; i < t->n_nodes; i++) {
		const Psched__NodeInfo *ni = t->nodes[i];
		bool srv = ni->id >= 1 && (unsigned)ni->id <= ns;

		if (ni->id < 1 || (unsigned)ni->id > nn)
			return "node id out of range";
		if ((int)ni->role !=
			    (srv ? PSCHED_ROLE_SERVER : PSCHED_ROLE_WORKER) ||
		    ni->rank != (srv ? ni->id - 1 : ni->id - 1 - (int)ns))
			return "role or rank does not match the node id";
	}
	if (t->your_id < 1 || (unsigned)t->your_id > nn ||
	    ((unsigned)t->your_id <= ns) != (n->cfg.role == PSCHED_ROLE_SERVER))
		return "our id is not one of our role";
	return NULL;
}

/* Van thread: the scheduler sent the node table. */
static void po_on_table(struct psched_node *n, const Psched__NodeTable *t)
{
	size_t i, max_id = n->num_server + n->num_worker;
	const char *why = po_table_bad(n, t);
	struct psd_peer *peers;

	if (why) {
		psd_node_set_fatal(n, -EPROTO,
				   "scheduler sent a bad node table (%s; this "
				   "node expects %u servers and %u workers)",
				   why, n->num_server, n->num_worker);
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

		if (p->id >= 0) {
			free(peers);
			psd_node_set_fatal(n, -EPROTO,
					   "scheduler sent a bad node table "
					   "(node %d twice)",
					   ni->id);
			return;
		}
		p->id = ni->id;
		p->role = (enum psched_role)ni->role;
		p->rank = ni->rank;
		snprintf(p->host, sizeof(p->host), "%s", ni->host);
		p->port = ni->port;
		p->shm_port = ni->shm_port <= 65535 ? ni->shm_port : 0;
		snprintf(p->host_key, sizeof(p->host_key), "%s",
			 ni->host_key ? ni->host_key : "");
		po_peer_desc(p);
	}
	pthread_mutex_lock(&n->lock);
	if (!n->have_table) {
		n->peers = peers;
		n->npeers = (unsigned)max_id + 1;
		n->id = t->your_id;
		n->rank = peers[t->your_id].rank;
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
	/* id 0 (the scheduler) and ids missing from the table name no peer */
	if (!p || p->id < 0 || p->dead) {
		pthread_mutex_unlock(&n->lock);
		return;
	}
	p->dead = true;
	pthread_mutex_unlock(&n->lock);
	psd_err("scheduler reports %s dead: %s", p->desc, f->reason);
	if (n->role && n->role->peer_failed)
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD, f->reason);
}

/* Server, van thread: tell the worker @c of a split pair is bound. */
static void po_send_ready(struct psched_node *n, struct psd_conn *c)
{
	Psched__PairReady pr = PSCHED__PAIR_READY__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	pr.channel = c->channel;
	m.body_case = PSCHED__CONTROL__BODY_PAIR_READY;
	m.pair_ready = &pr;
	psd_conn_send_control(c, n->id, &m);
}

/*
 * Server, van thread: the answers connection of worker @p's split pair
 * (PS_TCP_SPLIT) authenticated.  It binds to the worker's request
 * connection, which the worker opened, and we bound, first (the worker
 * waits for our PairReady on it before dialling this one); from now on
 * every server -> worker message of @p goes out on @c.
 */
static void po_accept_answers(struct psched_node *n, struct psd_conn *c,
			      struct psd_peer *p)
{
	struct psd_conn *req = p->conn;
	const char *why = NULL;

	if (p->dead || p->departed)
		why = "answers connection for a worker that is gone";
	else if (!req || req->channel != PSD_CHAN_REQ ||
		 atomic_load(&req->closed))
		why = "answers connection (PS_TCP_SPLIT) for a worker with no "
		      "authenticated request connection to this server";
	else if (atomic_load(&req->pair))
		why = "a second answers connection for one worker";
	if (why) {
		psd_err("dropping connection from %s (hello as worker %d): %s",
			c->peer, p->id, why);
		psd_conn_close(c);
		return;
	}
	c->peer_id = p->id;
	snprintf(c->peer, sizeof(c->peer), "%s, answers", p->desc);
	psd_conn_pair(req, c, true);
	po_send_ready(n, c);
}

/* Van thread: bind an authenticated worker's connection to its id. */
static void po_accept_hello(struct psched_node *n, struct psd_conn *c, int id)
{
	const char *why = NULL;
	struct psd_peer *p = NULL;

	if (!(p = psd_node_peer(n, id)) || p->id < 0 ||
	    p->role != PSCHED_ROLE_WORKER)
		why = "hello from an id that is no worker of this job";
	else if (c->channel == PSD_CHAN_ANS) {
		po_accept_answers(n, c, p);
		return;
	} else if (p->conn || p->dead)
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
	if (c->channel == PSD_CHAN_REQ)
		po_send_ready(n, c);
}

/*
 * Van thread: a worker finished and says so on its data connection before
 * it goes.  Its connection closing is then no failure; but in sync mode no
 * step it has not pushed can complete, so waits for those fail now, naming
 * it, rather than at their timeout.
 */
static void po_on_goodbye(struct psched_node *n, struct psd_conn *c,
			  const Psched__Finalize *f)
{
	struct psd_peer *p;

	pthread_mutex_lock(&n->lock);
	p = psd_node_peer(n, c->peer_id);
	if (!p || p->conn != c || p->departed || p->dead) {
		pthread_mutex_unlock(&n->lock);
		return;
	}
	p->departed = true;
	p->left = f && f->left;
	pthread_mutex_unlock(&n->lock);
	psd_info("%s finished", p->desc);
	if (n->role && n->role->peer_failed)
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD,
				     "finished (finalized) and left");
}

/*
 * Van thread: a data connection starts with the worker's hello and the
 * authentication handshake (po_auth_rx()); then the worker's id is
 * bound to it, and each worker has one data connection.  Anything else
 * costs the connection.  A worker may get the node table, and say hello,
 * before this server has its own copy: such hellos wait here until the
 * table comes.
 */
static void po_on_hello(struct psched_node *n, struct psd_conn *c, int id)
{
	struct psd_early_hello *e;

	if (n->have_table) {
		po_accept_hello(n, c, id);
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
	e->id = id;
	psd_conn_get(c);
}

/* Van thread: a control message on a data connection once the handshake
 * is over. */
static void po_on_data_control(struct psched_node *n, struct psd_conn *c,
			       const Psched__Control *m)
{
	/* Only a worker says goodbye, and only to a server it dialled. */
	if (m->body_case == PSCHED__CONTROL__BODY_FINALIZE && c->peer_id >= 0 &&
	    n->cfg.role == PSCHED_ROLE_SERVER) {
		po_on_goodbye(n, c, m->finalize);
		return;
	}
	psd_err("dropping connection from %s: unexpected control message %d "
		"on a data connection",
		c->peer, (int)m->body_case);
	psd_conn_close(c);
}

/*
 * Van thread: a message on a connection not authenticated yet (auth.h).
 * The scheduler and the servers a worker dialled answer our nonce with a
 * Challenge; a worker that dialled this server sends Hello, then Proof.
 */
static void po_auth_rx(struct psched_node *n, struct psd_conn *c,
		       const Psched__Control *m)
{
	bool sched = c == n->sched;
	unsigned chan;
	int ret;

	if (sched || n->cfg.role == PSCHED_ROLE_WORKER) {
		/* Set with our hello, on the thread that sent it. */
		pthread_mutex_lock(&c->send_lock);
		chan = c->channel;
		pthread_mutex_unlock(&c->send_lock);
		ret = psd_auth_answer(&n->secret, c, n->id,
				      sched ? PSD_AUTH_REGISTER
					    : psd_auth_hello_kind(chan),
				      m, c->peer);
		if (ret) {
			psd_node_set_fatal(n, ret, "%s", psched_errmsg());
			psd_err("%s", psched_errmsg());
			psd_conn_close(c);
			return;
		}
		pthread_mutex_lock(&n->lock);
		pthread_cond_broadcast(&n->cond);
		pthread_mutex_unlock(&n->lock);
		return;
	}
	if (m->body_case == PSCHED__CONTROL__BODY_HELLO &&
	    m->hello->channel > PSD_CHAN_ANS) {
		psd_err("dropping connection from %s: its hello opens channel "
			"%u (0 both directions, 1 requests, 2 answers)",
			c->peer, m->hello->channel);
		psd_conn_close(c);
		return;
	}
	/* The channel is part of what the proofs cover (auth.h). */
	if (m->body_case == PSCHED__CONTROL__BODY_HELLO && !c->auth_step)
		c->channel = (uint8_t)m->hello->channel;
	if (m->body_case == PSCHED__CONTROL__BODY_HELLO)
		ret = psd_auth_challenge(&n->secret, c, n->id,
					 psd_auth_hello_kind(c->channel),
					 m->hello->id, m->hello->nonce.data,
					 m->hello->nonce.len);
	else
		ret = psd_auth_finish(&n->secret, c,
				      psd_auth_hello_kind(c->channel), m);
	if (ret) {
		psd_err("dropping connection from %s: hello failed "
			"authentication: %s",
			c->peer, psched_errmsg());
		psd_conn_close(c);
		return;
	}
	if (atomic_load(&c->authed))
		po_on_hello(n, c, c->auth_id);
}

/* Van thread: the table is here; take the hellos that came before it. */
static void po_early_hellos(struct psched_node *n)
{
	unsigned i;

	for (i = 0; i < n->nearly; i++) {
		struct psd_early_hello *e = &n->early[i];

		if (!atomic_load(&e->conn->closed))
			po_accept_hello(n, e->conn, e->id);
		psd_conn_put(e->conn);
	}
	n->nearly = 0;
}

static void po_rx_control(void *arg, struct psd_conn *c,
			  const Psched__Control *m)
{
	struct psched_node *n = arg;

	if (!atomic_load(&c->authed)) {
		po_auth_rx(n, c, m);
		return;
	}
	if (c != n->sched) {
		if (m->body_case == PSCHED__CONTROL__BODY_PAIR_READY) {
			psd_po_on_pair_ready(n, c, m->pair_ready);
			return;
		}
		if (!n->role || !n->role->rx_control ||
		    !n->role->rx_control(n, c, m))
			po_on_data_control(n, c, m);
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
	case PSCHED__CONTROL__BODY_APP:
		psd_app_deliver(n, m->app->from, m->app);
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

	if (c->channel == PSD_CHAN_ANS && n->cfg.role == PSCHED_ROLE_SERVER) {
		psd_err("dropping connection from %s: %s message on the "
			"answers connection of a split pair (requests come on "
			"the other one)",
			c->peer, psd_msg_type_name(h->type));
		return -EPROTO;
	}
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
	bool down, is_sched, ans;

	pthread_mutex_lock(&n->lock); /* po_join may replace n->sched */
	is_sched = c == n->sched;
	pthread_mutex_unlock(&n->lock);
	if (is_sched) {
		pthread_mutex_lock(&n->lock);
		down = n->shutdown;
		if (!atomic_load(&c->authed)) {
			/* Before the handshake ended: psd_po_join() says why
			 * or connects again. */
			n->sched_lost = true;
			pthread_cond_broadcast(&n->cond);
			down = true;
		}
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
	/* Only the peer's own data connection speaks for it, or the answers
	 * connection of its split pair (the van closed both before either
	 * came here: whichever comes first reports).  A server that got the
	 * shutdown before this finalized worker did is no failure. */
	ans = c->channel == PSD_CHAN_ANS && p &&
	      atomic_load(&c->pair) == p->conn;
	down = n->shutdown || n->finalizing || !p || p->dead || p->departed ||
	       (p->conn != c && !ans);
	if (p && !down)
		p->dead = true;
	pthread_mutex_unlock(&n->lock);
	if (!down && n->role && n->role->peer_failed) {
		char why[160];

		snprintf(why, sizeof(why), "connection closed (%s%s)",
			 psched_strerror(err),
			 ans ? ", on the answers connection of the split pair"
			     : "");
		psd_err("lost %s: %s", p->desc, why);
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD, why);
	}
}

/*
 * Heartbeat thread, n->lock not held: this node's counters for the
 * scheduler's metrics (docs/metrics.md); @lat holds @ns's latency array.
 */
static void po_heartbeat_stats(struct psched_node *n, Psched__NodeStats *ns,
			       uint64_t *lat)
{
	struct psched_stats st;
	int dead;

	psched_node_stats(n, &st);
	ns->tx_bytes = st.tx_bytes;
	ns->rx_bytes = st.rx_bytes;
	ns->tx_msgs = st.tx_msgs;
	ns->rx_msgs = st.rx_msgs;
	ns->stored_bytes = st.stored_bytes;
	ns->alloc_bytes = st.alloc_bytes;
	ns->chunks_started = st.chunks_started;
	ns->max_in_flight_bytes = st.max_in_flight_bytes;
	ns->credit_bytes = st.credit_bytes;
	ns->config_epoch = st.config_epoch;
	ns->requests_in_flight = st.requests_in_flight;
	ns->in_flight_bytes = st.in_flight_bytes;
	ns->requests_ok = st.requests_ok;
	ns->errors_timeout = st.errors_timeout;
	ns->errors_node_dead = st.errors_node_dead;
	ns->errors_remote = st.errors_remote;
	ns->errors_shutdown = st.errors_shutdown;
	ns->errors_other = st.errors_other;
	memcpy(lat, st.latency_count, sizeof(st.latency_count));
	ns->n_latency_count = PSCHED_LATENCY_BUCKETS;
	ns->latency_count = lat;
	ns->latency_sum_us = st.latency_sum_us;
	dead = psched_num_dead_nodes(n, PSCHED_GROUP_ALL);
	ns->dead_peers = dead > 0 ? (uint32_t)dead : 0;
}

/* Heartbeat thread: one beat per interval until psd_po_stop(). */
static void *po_heartbeat_main(void *arg)
{
	struct psched_node *n = arg;
	Psched__Heartbeat hb = PSCHED__HEARTBEAT__INIT;
	Psched__NodeStats ns = PSCHED__NODE_STATS__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint64_t lat[PSCHED_LATENCY_BUCKETS];
	struct timespec ts;

	m.body_case = PSCHED__CONTROL__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	hb.stats = &ns;
	pthread_mutex_lock(&n->lock);
	while (!n->hb_stop) {
		psd_deadline(&ts, n->cfg.heartbeat_interval_ms);
		pthread_cond_timedwait(&n->hb_cond, &n->lock, &ts);
		if (n->hb_stop || !n->sched || atomic_load(&n->sched->closed))
			continue;
		pthread_mutex_unlock(&n->lock);
		po_heartbeat_stats(n, &ns, lat);
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
	pthread_setname_np(n->hb_thread, "ps-heartbeat");
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

static bool po_may_poll(void *arg)
{
	struct psched_node *n = arg;

	return !n->role->may_poll || n->role->may_poll(n);
}

static const struct psd_van_cb po_van_cb = {
	.may_poll = po_may_poll,
	.rx_header = po_rx_header,
	.rx_data = po_rx_data,
	.rx_control = po_rx_control,
	.closed = po_closed,
};

static void po_tick(void *arg)
{
	struct psched_node *n = arg;

	n->role->tick(n);
}

void psd_po_van_cb(struct psched_node *n, struct psd_van_cb *cb)
{
	*cb = po_van_cb;
	cb->arg = n;
	if (n->role->tick) {
		cb->tick = po_tick;
		cb->tick_ms = 1000;
	}
}

int psd_po_start(struct psched_node *n)
{
	struct psd_van_opts vo = { .ops = n->ops,
				   .max_tensor = n->cfg.max_tensor_bytes,
				   .send_timeout_ms =
					   n->cfg.heartbeat_timeout_ms,
				   .cfg = &n->cfg };
	struct psd_van_cb cb;
	uint64_t deadline = psd_now_ms() + n->cfg.connect_timeout_ms;
	struct psd_addr la = { .host = "0.0.0.0", .port = n->cfg.port };
	int ret;

	psd_po_van_cb(n, &cb);
	ret = psd_van_create(&vo, &cb, &n->van);
	if (ret)
		return ret;
	if (n->cfg.role == PSCHED_ROLE_SERVER) {
		ret = psd_van_listen(n->van, &la, &n->listen_port);
		if (ret)
			return ret;
	}
	psd_po_shm_setup(n);
	ret = psd_van_start(n->van);
	if (ret)
		return ret;
	ret = psd_po_join(n, deadline);
	if (ret)
		return ret;
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
		ret = psd_po_connect_servers(n, deadline);
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
	f.left = n->left_from != 0;
	f.left_from_step = n->left_from;
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
	for (i = 0; i < n->npeers; i++) {
		psd_conn_unpair(n->peers[i].conn);
		psd_conn_put(n->peers[i].conn);
		psd_conn_put(n->peers[i].ans);
	}
	psd_conn_put(n->sched);
	n->sched = NULL;
	free(n->peers);
	n->peers = NULL;
	n->npeers = 0;
}
