// SPDX-License-Identifier: MIT
/*
 * The scheduler node: rendezvous (registration, ids, ranks, node table),
 * barriers, heartbeats and failure detection, shutdown.  All state lives
 * on the van thread; the main thread only waits for the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "node.h"
#include "autotune.h"
#include "role.h"

struct sched_node {
	struct psd_conn *conn;
	int id;
	enum psched_role role;
	int rank;
	char host[256];
	unsigned port;
	uint64_t last_seen_ms;
	bool used;
	bool dead;
	bool finalized;
	bool closed;
	uint32_t acked_epoch; /* last config PREPARE it answered */
	char desc[96];
};

/* One config switch in progress (two phases, see proto/psched.proto). */
struct sched_cfg_switch {
	bool open;
	uint32_t epoch;
	uint64_t part;
	uint64_t credit;
	uint64_t max_step; /* highest step any worker acked */
	uint64_t deadline_ms;
};

#define SCHED_CYCLE_MAX 32

/* --config-cycle: configs proposed in turn every --config-interval. */
struct sched_cycle {
	uint64_t part[SCHED_CYCLE_MAX];
	uint64_t credit[SCHED_CYCLE_MAX];
	unsigned n;
	unsigned next;
	uint64_t last_ms;
};

struct sched_barrier {
	unsigned arrived;
	struct sched_node **waiting; /* S+W slots */
	uint64_t *seqs;
};

struct psd_sched {
	struct sched_node *nodes; /* S+W slots, registration order */
	unsigned cap;
	unsigned nserv;
	unsigned nwork;
	bool table_sent;
	bool shutdown_sent;
	bool done;
	int result;
	char result_msg[512];
	uint64_t start_ms;
	uint64_t shutdown_ms;
	char transport[16];	  /* data transport of the job */
	char transport_from[160]; /* who chose it, for mismatch errors */
	uint64_t token;		  /* PS_JOB_TOKEN hash, else random */
	struct sched_barrier barriers[PSCHED_GROUP_ALL + 1];
	uint32_t last_epoch;
	uint64_t last_apply_step;
	struct sched_cfg_switch sw;
	struct sched_cycle cycle;
	struct psd_autotune *at; /* --autotune, else NULL */
};

static struct psd_sched *sched_of(struct psched_node *n)
{
	return n->app_state;
}

static void sched_finish(struct psched_node *n, int result, const char *msg)
{
	struct psd_sched *s = sched_of(n);

	pthread_mutex_lock(&n->lock);
	if (!s->done) {
		s->done = true;
		s->result = result;
		snprintf(s->result_msg, sizeof(s->result_msg), "%s", msg);
	}
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

static void sched_send(struct sched_node *sn, const Psched__Control *m)
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
		    sched_in_group(&s->nodes[i], group))
			cnt++;
	return cnt;
}

/* Release a barrier once every live member of its group arrived. */
static void sched_barrier_check(struct psched_node *n, unsigned group)
{
	struct psd_sched *s = sched_of(n);
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
		sched_send(b->waiting[i], &m);
	}
	psd_debug("barrier of group %u released (%u nodes)", group, b->arrived);
	b->arrived = 0;
}

static void sched_barrier_arrive(struct psched_node *n, struct sched_node *sn,
				 const Psched__Barrier *req)
{
	struct psd_sched *s = sched_of(n);
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

static void sched_maybe_shutdown(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
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
			sched_send(&s->nodes[i], &m);
}

static bool sched_is_live_worker(const struct sched_node *sn)
{
	return sn->used && !sn->dead && !sn->closed && !sn->finalized &&
	       sn->role == PSCHED_ROLE_WORKER;
}

static void sched_cfg_send(struct psched_node *n, Psched__Config__Phase phase,
			   uint64_t from_step, bool servers_too)
{
	struct psd_sched *s = sched_of(n);
	Psched__Config c = PSCHED__CONFIG__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;

	c.epoch = s->sw.epoch;
	c.partition_bytes = s->sw.part;
	c.credit_bytes = s->sw.credit;
	c.apply_from_step = from_step;
	c.phase = phase;
	m.body_case = PSCHED__CONTROL__BODY_CONFIG;
	m.config = &c;
	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		if (!sn->used || sn->dead ||
		    (sn->role != PSCHED_ROLE_WORKER && !servers_too))
			continue;
		sched_send(sn, &m);
	}
}

/* Commit the open switch once every live worker acknowledged it. */
static void sched_cfg_check(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
	uint64_t from;
	unsigned i;

	if (!s->sw.open)
		return;
	for (i = 0; i < s->cap; i++)
		if (sched_is_live_worker(&s->nodes[i]) &&
		    s->nodes[i].acked_epoch != s->sw.epoch)
			return;
	from = s->sw.max_step + 1;
	if (from <= s->last_apply_step)
		from = s->last_apply_step + 1;
	s->last_apply_step = from;
	s->sw.open = false;
	sched_cfg_send(n, PSCHED__CONFIG__PHASE__COMMIT, from, true);
	psd_autotune_switched(s->at, s->sw.epoch, true, from);
	psd_info("config epoch %u: partition %llu bytes, credit %llu bytes, "
		 "from step %llu",
		 s->sw.epoch, (unsigned long long)s->sw.part,
		 (unsigned long long)s->sw.credit, (unsigned long long)from);
}

int psd_sched_propose_config(struct psched_node *n, uint64_t part,
			     uint64_t credit)
{
	struct psd_sched *s = sched_of(n);

	if (!s->table_sent || s->shutdown_sent || s->done)
		return -EAGAIN;
	if (s->sw.open)
		return -EBUSY;
	s->sw.open = true;
	s->sw.epoch = ++s->last_epoch;
	s->sw.part = part;
	s->sw.credit = credit;
	s->sw.max_step = 0;
	s->sw.deadline_ms = psd_now_ms() + n->cfg.heartbeat_timeout_ms;
	sched_cfg_send(n, PSCHED__CONFIG__PHASE__PREPARE, 0, false);
	sched_cfg_check(n); /* no live worker: commit at once */
	return 0;
}

static void sched_on_config_ack(struct psched_node *n, struct sched_node *sn,
				const Psched__ConfigAck *a)
{
	struct psd_sched *s = sched_of(n);

	if (sn->role != PSCHED_ROLE_WORKER || !s->sw.open ||
	    a->epoch != s->sw.epoch) {
		psd_debug("%s: stale config ack for epoch %u", sn->desc,
			  a->epoch);
		return;
	}
	sn->acked_epoch = a->epoch;
	if (a->max_step > s->sw.max_step)
		s->sw.max_step = a->max_step;
	sched_cfg_check(n);
}

/* A PREPARE nobody finished answering: call it off, naming who. */
static void sched_cfg_timeout(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
	char who[256] = "";
	size_t used = 0;
	unsigned i;

	for (i = 0; i < s->cap && used + 2 < sizeof(who); i++) {
		struct sched_node *sn = &s->nodes[i];

		if (sched_is_live_worker(sn) && sn->acked_epoch != s->sw.epoch)
			used += (size_t)snprintf(who + used, sizeof(who) - used,
						 "%s%s", used ? ", " : "",
						 sn->desc);
	}
	psd_warn("config epoch %u called off: no answer within %u ms from %s",
		 s->sw.epoch, n->cfg.heartbeat_timeout_ms, who);
	s->sw.open = false;
	sched_cfg_send(n, PSCHED__CONFIG__PHASE__ABORT, 0, false);
	psd_autotune_switched(s->at, s->sw.epoch, false, 0);
}

/* --autotune: propose the config the tuner wants once nothing is open. */
static void sched_autotune_kick(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
	uint64_t part, credit;

	unsigned i;

	if (!s->at || s->sw.open || s->shutdown_sent || !s->table_sent ||
	    !psd_autotune_wanted(s->at, &part, &credit))
		return;
	/* Without a live worker a switch commits blind (no acked step): at
	 * the job's end that would start below steps already pushed. */
	for (i = 0; i < s->cap && !sched_is_live_worker(&s->nodes[i]); i++)
		;
	if (i == s->cap)
		return;
	/* The switch may commit inside the call (no live worker): name its
	 * epoch first. */
	psd_autotune_proposed(s->at, s->last_epoch + 1);
	if (psd_sched_propose_config(n, part, credit))
		psd_autotune_proposed(s->at, 0);
}

static void sched_on_metrics(struct psched_node *n, struct sched_node *sn,
			     const Psched__Metrics *m)
{
	struct psd_sched *s = sched_of(n);

	if (sn->role != PSCHED_ROLE_WORKER || !s->at)
		return;
	psd_debug("%s: metrics step %llu, %.6f s per step, epoch %u", sn->desc,
		  (unsigned long long)m->step, m->step_time_s, m->epoch);
	psd_autotune_metrics(s->at, (unsigned)(sn - s->nodes), m->step,
			     m->step_time_s);
	sched_autotune_kick(n);
}

/* --config-cycle: propose the next config when its time has come. */
static void sched_cycle_tick(struct psched_node *n, uint64_t now)
{
	struct psd_sched *s = sched_of(n);
	struct sched_cycle *cy = &s->cycle;

	if (!cy->n || s->sw.open || s->shutdown_sent)
		return;
	if (!cy->last_ms) {
		cy->last_ms = now;
		return;
	}
	if (now - cy->last_ms < n->cfg.config_interval_ms)
		return;
	if (!psd_sched_propose_config(n, cy->part[cy->next],
				      cy->credit[cy->next])) {
		cy->next = (cy->next + 1) % cy->n;
		cy->last_ms = now;
	}
}

static void sched_declare_dead(struct psched_node *n, struct sched_node *sn,
			       const char *why)
{
	struct psd_sched *s = sched_of(n);
	Psched__NodeFailure f = PSCHED__NODE_FAILURE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	char reason[256];
	unsigned i, g;

	if (sn->dead)
		return;
	sn->dead = true;
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
	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].used && !s->nodes[i].dead)
			sched_send(&s->nodes[i], &m);
	/* Barriers and config switches no longer wait for the dead node. */
	for (g = 1; g <= PSCHED_GROUP_ALL; g++)
		sched_barrier_check(n, g);
	sched_cfg_check(n);
	sched_maybe_shutdown(n);
}

static void sched_send_table(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
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
		ptrs[i] = &infos[i];
	}
	t.token = s->token;
	t.n_nodes = s->cap;
	t.nodes = ptrs;
	m.body_case = PSCHED__CONTROL__BODY_TABLE;
	m.table = &t;
	for (i = 0; i < s->cap; i++) {
		t.your_id = s->nodes[i].id;
		sched_send(&s->nodes[i], &m);
	}
	s->table_sent = true;
	psd_info("all %u servers and %u workers registered; node table sent",
		 n->num_server, n->num_worker);
	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].role == PSCHED_ROLE_WORKER)
			psd_autotune_worker_add(s->at, i);
	sched_autotune_kick(n);
	free(infos);
	free(ptrs);
}

/* Ranks in registration order; ids: servers 1..S, workers S+1..S+W. */
static void sched_assign(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
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
	}
}

static const char *sched_check_reg(struct psched_node *n, struct psd_conn *c,
				   const Psched__Register *r, char *buf,
				   size_t len)
{
	struct psd_sched *s = sched_of(n);

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
	if (psd_job_token() && r->token != psd_job_token())
		return "wrong or missing PS_JOB_TOKEN";
	if (!r->transport ||
	    (strcmp(r->transport, "tcp") && strcmp(r->transport, "rdma"))) {
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
	struct psd_sched *s = sched_of(n);
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

static void sched_rx_control(void *arg, struct psd_conn *c,
			     const Psched__Control *m)
{
	struct psched_node *n = arg;
	struct psd_sched *s = sched_of(n);
	struct sched_node *sn = c->ctx;

	if (m->body_case == PSCHED__CONTROL__BODY_REG) {
		sched_on_register(n, c, m->reg);
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
		break;
	case PSCHED__CONTROL__BODY_BARRIER:
		sched_barrier_arrive(n, sn, m->barrier);
		break;
	case PSCHED__CONTROL__BODY_FINALIZE:
		sn->finalized = true;
		if (sn->role == PSCHED_ROLE_WORKER)
			psd_autotune_worker_gone(s->at,
						 (unsigned)(sn - s->nodes));
		sched_cfg_check(n);
		sched_maybe_shutdown(n);
		break;
	case PSCHED__CONTROL__BODY_CONFIG_ACK:
		sched_on_config_ack(n, sn, m->config_ack);
		break;
	case PSCHED__CONTROL__BODY_METRICS:
		sched_on_metrics(n, sn, m->metrics);
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
	struct psd_sched *s = sched_of(n);
	struct sched_node *sn = c->ctx;
	char why[128];

	if (!sn)
		return;
	sn->closed = true;
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
	struct psd_sched *s = sched_of(n);
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
			sched_send(&s->nodes[i], &m);
	sched_finish(n, PSCHED_ERENDEZVOUS, msg);
}

static void sched_tick(void *arg)
{
	struct psched_node *n = arg;
	struct psd_sched *s = sched_of(n);
	uint64_t now = psd_now_ms();
	unsigned i, open = 0;
	char why[96];

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
		sched_cfg_timeout(n);
	sched_cycle_tick(n, now);
	sched_autotune_kick(n);
	if (s->shutdown_sent && (!open || now - s->shutdown_ms > 5000))
		sched_finish(n, 0, "");
}

static void sched_free(struct psched_node *n)
{
	struct psd_sched *s = sched_of(n);
	unsigned g, i;

	if (!s)
		return;
	for (i = 0; i < s->cap; i++)
		psd_conn_put(s->nodes[i].conn);
	for (g = 0; g <= PSCHED_GROUP_ALL; g++) {
		free(s->barriers[g].waiting);
		free(s->barriers[g].seqs);
	}
	psd_autotune_destroy(s->at);
	free(s->nodes);
	free(s);
	n->app_state = NULL;
}

static int sched_start(struct psched_node *n);
static int sched_run(struct psched_node *n);
static void sched_stop(struct psched_node *n);

static const struct psd_app sched_app = {
	.start = sched_start,
	.run = sched_run,
	.stop = sched_stop,
	.destroy = sched_free,
};

/* "PART:CREDIT,PART:CREDIT,..." with K/M/G suffixes. */
static int sched_cycle_parse(const char *spec, struct sched_cycle *cy)
{
	char buf[sizeof(((struct psched_cfg *)0)->config_cycle)];
	char *save = NULL, *tok, *colon;

	cy->n = 0;
	if (!*spec)
		return 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		colon = strchr(tok, ':');
		if (!colon || cy->n == SCHED_CYCLE_MAX)
			return -EINVAL;
		*colon = '\0';
		if (psched_parse_bytes(tok, &cy->part[cy->n]) ||
		    psched_parse_bytes(colon + 1, &cy->credit[cy->n]))
			return -EINVAL;
		cy->n++;
	}
	return cy->n ? 0 : -EINVAL;
}

static int sched_alloc(struct psched_node *n)
{
	struct psd_sched *s = calloc(1, sizeof(*s));
	unsigned g;
	int ret;

	if (!s)
		return -ENOMEM;
	n->app_state = s;
	n->app = &sched_app;
	s->cap = n->num_server + n->num_worker;
	s->nodes = calloc(s->cap, sizeof(*s->nodes));
	if (!s->nodes)
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
	if (sched_cycle_parse(n->cfg.config_cycle, &s->cycle))
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
	s->start_ms = psd_now_ms();
	s->token = psd_job_token();
	if (!s->token &&
	    getrandom(&s->token, sizeof(s->token), 0) != sizeof(s->token))
		s->token = psd_now_us() ^ ((uint64_t)getpid() << 32);
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
	struct psd_sched *s = sched_of(n);
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
