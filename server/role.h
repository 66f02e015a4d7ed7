/* SPDX-License-Identifier: MIT */
/* The server role: its entry for app/roles.c. */
#ifndef PSCHED_SERVER_ROLE_H
#define PSCHED_SERVER_ROLE_H

struct psched_node;

/* Set up @n as a server: the KV server (store, aggregation, updaters,
 * server commands). */
int psd_kvs_attach(struct psched_node *n);

#endif
