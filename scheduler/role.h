/* SPDX-License-Identifier: MIT */
/* The scheduler role: its entry for app/roles.c and its own modules. */
#ifndef PSCHED_SCHEDULER_ROLE_H
#define PSCHED_SCHEDULER_ROLE_H

#include <stdint.h>

struct psched_node;
struct psd_role_ops;

/* The scheduler role's hooks (common/node.h), for app/roles.c. */
extern const struct psd_role_ops psd_sched_role;

/* Set up @n as the scheduler (rendezvous, barriers, heartbeats, config
 * switches, the autotuner); its start hook listens. */
int psd_sched_attach(struct psched_node *n);

/*
 * Switch every worker and server to {partition, credit} at a step boundary
 * (van thread only).  -EBUSY while an earlier switch is open, -EAGAIN before
 * the cluster is up or after shutdown.
 */
int psd_sched_propose_config(struct psched_node *n, uint64_t part,
			     uint64_t credit);

#endif
