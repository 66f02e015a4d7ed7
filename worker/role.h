/* SPDX-License-Identifier: MIT */
/* The worker role: its entry for app/roles.c. */
#ifndef PSCHED_WORKER_ROLE_H
#define PSCHED_WORKER_ROLE_H

struct psched_node;
struct psd_role_ops;

/* The worker role's hooks (common/node.h), for app/roles.c. */
extern const struct psd_role_ops psd_kvw_role;

/* Set up @n as a worker: the KV worker (requests, chunk scheduling,
 * credit, config epochs) behind psched_push/pull/pushpull. */
int psd_kvw_attach(struct psched_node *n);

#endif
