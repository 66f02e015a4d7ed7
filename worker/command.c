// SPDX-License-Identifier: MIT
/*
 * Server commands, the worker's side: send a ServerCommand (mode,
 * optimizer) to every server and wait for each CommandAck
 * (server/command.c applies them).  One command is outstanding per worker
 * node at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "optim.h"
#include "psched/kvstore.h"
#include "command.h"
#include "kvw.h"

/* The worker's command state (kvw.h); under n->lock. */
static struct kvw_cmd *cmd_of(struct psched_node *n)
{
	return &kvw_of(n)->cmd;
}

/* Worker, van thread: a server answered. */
static void cmd_on_ack(struct psched_node *n, struct psd_conn *c,
		       const Psched__CommandAck *ack)
{
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	int status = ack->status;

	if (!p || p->role != PSCHED_ROLE_SERVER) {
		psd_err("dropping connection from %s: command ack from a "
			"node that is no server",
			c->peer);
		psd_conn_close(c);
		return;
	}
	if (status > 0)
		status = -EPROTO;
	pthread_mutex_lock(&n->lock);
	if (cmd_of(n)->busy && ack->seq == cmd_of(n)->seq && cmd_of(n)->acked &&
	    p->rank >= 0 && (unsigned)p->rank < n->num_server &&
	    !cmd_of(n)->acked[p->rank]) {
		cmd_of(n)->acked[p->rank] = true;
		cmd_of(n)->acks++;
		if (!status && cmd_of(n)->on_data)
			cmd_of(n)->on_data(
				cmd_of(n)->data_arg, (unsigned)p->rank,
				ack->message ? ack->message : "",
				ack->data.data, ack->data.len, ack->total);
		if (status && !cmd_of(n)->status) {
			cmd_of(n)->status = status;
			snprintf(cmd_of(n)->msg, sizeof(cmd_of(n)->msg),
				 "%s refused the command: %.200s", p->desc,
				 ack->message ? ack->message : "");
		}
		pthread_cond_broadcast(&n->cond);
	}
	pthread_mutex_unlock(&n->lock);
}

bool psd_kvw_cmd_rx(struct psched_node *n, struct psd_conn *c,
		    const Psched__Control *m)
{
	if (m->body_case != PSCHED__CONTROL__BODY_COMMAND_ACK)
		return false;
	cmd_on_ack(n, c, m->command_ack);
	return true;
}

/* Lock held: record the first error of the outstanding command. */
static void cmd_fail_locked(struct psched_node *n, int err, const char *fmt,
			    ...) __attribute__((format(printf, 3, 4)));
static void cmd_fail_locked(struct psched_node *n, int err, const char *fmt,
			    ...)
{
	va_list ap;

	if (cmd_of(n)->status)
		return;
	cmd_of(n)->status = err;
	va_start(ap, fmt);
	vsnprintf(cmd_of(n)->msg, sizeof(cmd_of(n)->msg), fmt, ap);
	va_end(ap);
}

/* Send @m to every server; a server we cannot reach counts as answered
 * with an error. */
static void cmd_send_all(struct psched_node *n, const Psched__Control *m)
{
	struct psd_peer *p;
	unsigned s;
	int ret;

	for (s = 0; s < n->num_server; s++) {
		p = psd_node_peer(n, psd_server_id(s));
		ret = !p || p->dead || !p->conn
			      ? PSCHED_ENODEDEAD
			      : psd_conn_send_control(p->conn, n->id, m);
		if (!ret)
			continue;
		pthread_mutex_lock(&n->lock);
		if (!cmd_of(n)->acked[s]) {
			cmd_of(n)->acked[s] = true;
			cmd_of(n)->acks++;
		}
		cmd_fail_locked(n, ret, "cannot send the command to %s: %s",
				p ? p->desc : "a server", psched_strerror(ret));
		pthread_mutex_unlock(&n->lock);
	}
}

/* Lock held: the servers that still owe an answer, for messages. */
static void cmd_describe_missing(struct psched_node *n, char *buf, size_t len,
				 bool *dead)
{
	size_t used = 0;
	unsigned s;
	struct psd_peer *p;

	buf[0] = '\0';
	*dead = false;
	for (s = 0; s < n->num_server && used + 2 < len; s++) {
		if (cmd_of(n)->acked[s])
			continue;
		p = psd_node_peer(n, psd_server_id(s));
		*dead |= p->dead;
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s",
					 used ? ", " : "", p->desc,
					 p->dead ? " (dead)" : "");
	}
}

/* Lock held: wait for every server's answer, the node failing, a server
 * dying or the deadline. */
static void cmd_wait_locked(struct psched_node *n, unsigned timeout_ms)
{
	uint64_t deadline = psd_now_ms() + timeout_ms;
	struct timespec ts;
	char who[256];
	bool dead;

	while (cmd_of(n)->acks < n->num_server) {
		if (n->fatal) {
			cmd_fail_locked(n, n->fatal, "%s", n->fatal_msg);
			return;
		}
		cmd_describe_missing(n, who, sizeof(who), &dead);
		if (dead) {
			cmd_fail_locked(n, PSCHED_ENODEDEAD,
					"server command: no answer from %s",
					who);
			return;
		}
		if (psd_now_ms() >= deadline) {
			cmd_fail_locked(n, -ETIMEDOUT,
					"server command timed out after %u ms "
					"waiting for %s",
					timeout_ms, who);
			return;
		}
		/* Deaths are not signalled on n->cond: look again soon. */
		psd_deadline(&ts, 100);
		pthread_cond_timedwait(&n->cond, &n->lock, &ts);
	}
}

static int cmd_parse_mode(const char *mode, Psched__ServerMode *out)
{
	if (!mode)
		*out = PSCHED__SERVER_MODE__MODE_UNCHANGED;
	else if (!strcmp(mode, "sync"))
		*out = PSCHED__SERVER_MODE__MODE_SYNC;
	else if (!strcmp(mode, "async"))
		*out = PSCHED__SERVER_MODE__MODE_ASYNC;
	else
		return psd_set_errmsg(-EINVAL,
				      "server mode '%.32s': want sync or async",
				      mode);
	return 0;
}

static int cmd_begin(struct psched_node *n, unsigned timeout_ms)
{
	struct timespec ts;
	bool *acked = calloc(n->num_server ? n->num_server : 1, sizeof(*acked));

	if (!acked)
		return psd_set_errmsg(-ENOMEM, "no memory for a command");
	psd_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&n->lock);
	while (cmd_of(n)->busy) {
		if (pthread_cond_timedwait(&n->cond, &n->lock, &ts) ==
		    ETIMEDOUT) {
			pthread_mutex_unlock(&n->lock);
			free(acked);
			return psd_set_errmsg(-ETIMEDOUT,
					      "server command: another "
					      "command of this node is still "
					      "waiting after %u ms",
					      timeout_ms);
		}
	}
	cmd_of(n)->busy = true;
	cmd_of(n)->seq++;
	cmd_of(n)->acks = 0;
	cmd_of(n)->acked = acked;
	cmd_of(n)->status = 0;
	cmd_of(n)->msg[0] = '\0';
	pthread_mutex_unlock(&n->lock);
	return 0;
}

int psd_cmd_send(struct psched_node *n, Psched__ServerCommand *sc,
		 unsigned timeout_ms)
{
	return psd_cmd_send_data(n, sc, timeout_ms, NULL, NULL);
}

int psd_cmd_send_data(struct psched_node *n, Psched__ServerCommand *sc,
		      unsigned timeout_ms, psd_cmd_data_fn *fn, void *arg)
{
	Psched__Control m = PSCHED__CONTROL__INIT;
	int ret;

	if (!n || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL,
				      "only workers configure servers");
	if (!timeout_ms)
		timeout_ms = n->cfg.request_timeout_ms;
	ret = cmd_begin(n, timeout_ms);
	if (ret)
		return ret;
	pthread_mutex_lock(&n->lock);
	sc->seq = cmd_of(n)->seq;
	cmd_of(n)->on_data = fn;
	cmd_of(n)->data_arg = arg;
	pthread_mutex_unlock(&n->lock);
	m.body_case = PSCHED__CONTROL__BODY_COMMAND;
	m.command = sc;
	cmd_send_all(n, &m);
	pthread_mutex_lock(&n->lock);
	cmd_wait_locked(n, timeout_ms);
	ret = cmd_of(n)->status;
	if (ret)
		psd_set_errmsg(ret, "%s", cmd_of(n)->msg);
	free(cmd_of(n)->acked);
	cmd_of(n)->acked = NULL;
	cmd_of(n)->on_data = NULL;
	cmd_of(n)->busy = false;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
	return ret;
}

int psched_servers_configure(struct psched_node *n, const char *mode,
			     const struct psched_optimizer *opt,
			     unsigned timeout_ms)
{
	Psched__ServerCommand sc = PSCHED__SERVER_COMMAND__INIT;
	Psched__Optimizer po = PSCHED__OPTIMIZER__INIT;
	int ret;

	if (!n || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL,
				      "only workers configure servers");
	ret = cmd_parse_mode(mode, &sc.mode);
	if (ret)
		return ret;
	if (opt) {
		ret = psched_optimizer_check(opt);
		if (ret)
			return ret;
		psd_opt_to_proto(opt, &po);
		sc.optimizer = &po;
	}
	return psd_cmd_send(n, &sc, timeout_ms);
}

int psched_snapshot(struct psched_node *n, uint64_t step, unsigned timeout_ms)
{
	Psched__ServerCommand sc = PSCHED__SERVER_COMMAND__INIT;
	char msg[512] = "";
	int ret = 0, bret;

	if (!n || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL,
				      "psched_snapshot: only workers ask for "
				      "snapshots");
	if (!step)
		return psd_set_errmsg(-EINVAL,
				      "psched_snapshot: step 0 names no "
				      "snapshot (give the step it is of)");
	/* Every worker's requests are in before rank 0 asks. */
	ret = psched_barrier(n, PSCHED_GROUP_WORKERS, timeout_ms);
	if (ret)
		return ret;
	if (n->rank == 0) {
		sc.snapshot_step = step;
		ret = psd_cmd_send(n, &sc, timeout_ms);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", psched_errmsg());
	}
	bret = psched_barrier(n, PSCHED_GROUP_WORKERS, timeout_ms);
	if (ret)
		return psd_set_errmsg(ret, "snapshot of step %llu: %s",
				      (unsigned long long)step, msg);
	return bret;
}

int psched_servers_command(struct psched_node *n, int head, const void *body,
			   size_t len, unsigned timeout_ms)
{
	Psched__ServerCommand sc = PSCHED__SERVER_COMMAND__INIT;
	Psched__UserCommand u = PSCHED__USER_COMMAND__INIT;

	if (len && !body)
		return psd_set_errmsg(-EINVAL, "server command: NULL body");
	if (len > PSD_MAX_CONTROL - 1024)
		return psd_set_errmsg(-EMSGSIZE,
				      "server command of %zu bytes: at most "
				      "%u bytes go in one control message",
				      len, PSD_MAX_CONTROL - 1024);
	u.head = head;
	u.body.data = (uint8_t *)(uintptr_t)body;
	u.body.len = len;
	sc.user = &u;
	return psd_cmd_send(n, &sc, timeout_ms);
}
