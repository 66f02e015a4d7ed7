/* SPDX-License-Identifier: MIT */
/* Server commands, the worker's side (worker/command.c). */
#ifndef PSCHED_WORKER_COMMAND_H
#define PSCHED_WORKER_COMMAND_H

#include <stdbool.h>

#include "node.h"

/* Van thread (the worker's rx_control hook): a server's CommandAck; false
 * if @m is no CommandAck. */
bool psd_kvw_cmd_rx(struct psched_node *n, struct psd_conn *c,
		    const Psched__Control *m);
/* Send @sc (seq is set here) to every server and wait for every answer;
 * the fields are not checked here (tests send garbage with it). */
int psd_cmd_send(struct psched_node *n, Psched__ServerCommand *sc,
		 unsigned timeout_ms);

#endif
