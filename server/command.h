/* SPDX-License-Identifier: MIT */
/* Server commands, the server's side (server/command.c). */
#ifndef PSCHED_SERVER_COMMAND_H
#define PSCHED_SERVER_COMMAND_H

#include <stdbool.h>

#include "node.h"

/* Van thread (the server's rx_control hook): apply a worker's
 * ServerCommand and answer it; false if @m is no ServerCommand. */
bool psd_kvs_cmd_rx(struct psched_node *n, struct psd_conn *c,
		    const Psched__Control *m);

#endif
