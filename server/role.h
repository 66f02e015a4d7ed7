/* SPDX-License-Identifier: MIT */
/* The server role: its entry for app/roles.c. */
#ifndef PSCHED_SERVER_ROLE_H
#define PSCHED_SERVER_ROLE_H

struct psched_node;
struct psd_role_ops;

/* The server role's hooks (common/node.h), for app/roles.c. */
extern const struct psd_role_ops psd_kvs_role;

/* Set up @n as a server: the KV server (store, aggregation, updaters,
 * server commands). */
int psd_kvs_attach(struct psched_node *n);

#endif
