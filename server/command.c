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

/* Server, van thread: check and apply a worker's command; a state dump
 * goes into @ack. */
static int cmd_apply(struct psched_node *n, const Psched__ServerCommand *sc,
		     Psched__CommandAck *ack)
{
	int ret;

	const Psched__Optimizer *po = sc->optimizer;
	struct psched_optimizer opt;
	int mode = (int)sc->mode;

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
