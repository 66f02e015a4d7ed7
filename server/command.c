// SPDX-License-Identifier: MIT
/*
 * Server commands, the server's side: a worker configures every server's
 * store (mode, optimizer) with a ServerCommand on its data connection;
 * each server checks and applies it and answers with a CommandAck
 * carrying 0 or its error and reason (worker/command.c sends them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "optim.h"
#include "psched/kvstore.h"
#include "command.h"
#include "kvs.h"

/* Longest optimizer name a server takes from the wire. */
#define CMD_MAX_NAME 15

static void cmd_send_ack(struct psched_node *n, struct psd_conn *c,
			 Psched__CommandAck *ack, int status, const char *why)
{
	Psched__Control m = PSCHED__CONTROL__INIT;

	ack->status = status;
	ack->message = (char *)(uintptr_t)why;
	if (status) {
		ack->data.len = 0;
		ack->data.data = NULL;
		ack->total = 0;
	}
	m.body_case = PSCHED__CONTROL__BODY_COMMAND_ACK;
	m.command_ack = ack;
	psd_conn_send_control(c, n->id, &m);
}

/* The process's controller, for server nodes without their own: set
 * before psched_node_create(), it is there before the first command. */
static pthread_mutex_t cmd_default_lock = PTHREAD_MUTEX_INITIALIZER;
static psched_server_controller_fn *cmd_default_ctl;
static void *cmd_default_arg;

int psched_server_set_controller(struct psched_node *n,
				 psched_server_controller_fn *fn, void *arg)
{
	struct psd_kvs *s;

	if (!n) {
		pthread_mutex_lock(&cmd_default_lock);
		cmd_default_ctl = fn;
		cmd_default_arg = arg;
		pthread_mutex_unlock(&cmd_default_lock);
		return 0;
	}
	if (n->cfg.role != PSCHED_ROLE_SERVER || !(s = psd_kvs_of(n)))
		return psd_set_errmsg(-EINVAL, "psched_server_set_controller: "
					       "not a server node");
	pthread_mutex_lock(&n->lock);
	s->ctl = fn;
	s->ctl_arg = arg;
	pthread_mutex_unlock(&n->lock);
	return 0;
}

/* Server, van thread: hand an application command to the controller. */
static int cmd_user(struct psched_node *n, const Psched__UserCommand *u)
{
	struct psd_kvs *s = psd_kvs_of(n);
	psched_server_controller_fn *fn;
	char why[256] = "";
	void *arg;
	int ret;

	pthread_mutex_lock(&n->lock);
	fn = s->ctl;
	arg = s->ctl_arg;
	pthread_mutex_unlock(&n->lock);
	if (!fn) {
		pthread_mutex_lock(&cmd_default_lock);
		fn = cmd_default_ctl;
		arg = cmd_default_arg;
		pthread_mutex_unlock(&cmd_default_lock);
	}
	if (!fn)
		return psd_set_errmsg(-EOPNOTSUPP,
				      "command %d: this server has no "
				      "controller (start the servers from "
				      "the workers' script, DMLC_ROLE=server)",
				      u->head);
	ret = fn(n, u->head, u->body.data, u->body.len, why, sizeof(why), arg);
	if (ret > 0)
		ret = -EPROTO;
	if (ret)
		psd_set_errmsg(ret, "command %d: %.200s", u->head,
			       why[0] ? why : psched_strerror(ret));
	return ret;
}

/* Server, van thread: check and apply a worker's command; a state dump
 * goes into @ack. */
static int cmd_apply(struct psched_node *n, const Psched__ServerCommand *sc,
		     Psched__CommandAck *ack)
{
	int ret;

	const Psched__Optimizer *po = sc->optimizer;
	struct psched_optimizer opt;
	int mode = (int)sc->mode;

	if (sc->user)
		return cmd_user(n, sc->user);

	if (mode < PSCHED__SERVER_MODE__MODE_UNCHANGED ||
	    mode > PSCHED__SERVER_MODE__MODE_ASYNC)
		return psd_set_errmsg(-EINVAL, "unknown server mode %d", mode);
	if (po && po->name && strlen(po->name) > CMD_MAX_NAME)
		return psd_set_errmsg(-EINVAL,
				      "optimizer name of %zu bytes is too "
				      "long",
				      strlen(po->name));
	if (po &&
	    (psd_opt_from_proto(po, &opt) || psched_optimizer_check(&opt)))
		return -EINVAL;
	ret = psd_kvs_command(n, mode, po ? &opt : NULL);
	if (!ret && sc->states)
		ret = psd_kvs_states_command(n, sc->states, ack);
	if (!ret && sc->snapshot_step)
		ret = psd_kvs_snap_now(n, sc->snapshot_step);
	return ret;
}

static void cmd_on_command(struct psched_node *n, struct psd_conn *c,
			   const Psched__ServerCommand *sc)
{
	Psched__CommandAck ack = PSCHED__COMMAND_ACK__INIT;
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	int ret;

	if (!p || p->role != PSCHED_ROLE_WORKER || p->conn != c) {
		psd_err("dropping connection from %s: server command before "
			"hello, or not from a worker",
			c->peer);
		psd_conn_close(c);
		return;
	}
	ack.seq = sc->seq;
	ret = cmd_apply(n, sc, &ack);
	if (ret)
		psd_err("refusing the command %llu of %s: %s",
			(unsigned long long)sc->seq, p->desc, psched_errmsg());
	else
		psd_info("applied command %llu of %s",
			 (unsigned long long)sc->seq, p->desc);
	cmd_send_ack(n, c, &ack, ret, ret ? psched_errmsg() : ack.message);
}

bool psd_kvs_cmd_rx(struct psched_node *n, struct psd_conn *c,
		    const Psched__Control *m)
{
	if (m->body_case != PSCHED__CONTROL__BODY_COMMAND)
		return false;
	cmd_on_command(n, c, m->command);
	return true;
}
