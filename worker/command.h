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

/* psd_cmd_send() whose accepting acks are also given to @fn (under the
 * node's lock; see psd_cmd_data_fn in kvw.h). */
typedef void psd_cmd_data_fn(void *arg, unsigned srank, const char *msg,
			     const uint8_t *data, size_t len, uint64_t total);
int psd_cmd_send_data(struct psched_node *n, Psched__ServerCommand *sc,
		      unsigned timeout_ms, psd_cmd_data_fn *fn, void *arg);

/* worker/states.c: optimizer states of every server (server/
 * kvs_states.c).  Dump: the records of all servers into *@buf (caller
 * frees), the optimizer's name into @name.  Load: send records @recs
 * saved under @name to every server; each applies its byte ranges.
 * 0, or the first server's refusal (psched_errmsg() names it). */
int psd_kvw_states_dump(struct psched_node *n, uint8_t **buf, size_t *len,
			char name[16], unsigned timeout_ms);
int psd_kvw_states_load(struct psched_node *n, const char *name,
			const uint8_t *recs, size_t len, unsigned timeout_ms);

#endif
