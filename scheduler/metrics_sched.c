// SPDX-License-Identifier: MIT
/*
 * The scheduler's side of the metrics (metrics.h, docs/metrics.md): the
 * counters every node sends on its heartbeats, and the view of the job
 * that metrics.c renders.  Van thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "sched.h"

void psd_sched_on_heartbeat(struct sched_node *sn, const Psched__Heartbeat *hb)
{
	const Psched__NodeStats *ns = hb ? hb->stats : NULL;
	struct psched_stats *st = &sn->stats;
	size_t k;

	if (!ns)
		return; /* a node without counters */
	sn->has_stats = true;
	st->tx_bytes = ns->tx_bytes;
	st->rx_bytes = ns->rx_bytes;
	st->tx_msgs = ns->tx_msgs;
	st->rx_msgs = ns->rx_msgs;
	st->stored_bytes = ns->stored_bytes;
	st->alloc_bytes = ns->alloc_bytes;
	st->chunks_started = ns->chunks_started;
	st->max_in_flight_bytes = ns->max_in_flight_bytes;
	st->credit_bytes = ns->credit_bytes;
	st->config_epoch = ns->config_epoch;
	st->requests_in_flight = ns->requests_in_flight;
	st->in_flight_bytes = ns->in_flight_bytes;
	st->requests_ok = ns->requests_ok;
	st->errors_timeout = ns->errors_timeout;
	st->errors_node_dead = ns->errors_node_dead;
	st->errors_remote = ns->errors_remote;
	st->errors_shutdown = ns->errors_shutdown;
	st->errors_other = ns->errors_other;
	/* Another build may count other buckets: keep what both know. */
	memset(st->latency_count, 0, sizeof(st->latency_count));
	for (k = 0; k < ns->n_latency_count && k < PSCHED_LATENCY_BUCKETS; k++)
		st->latency_count[k] = ns->latency_count[k];
	st->latency_sum_us = ns->latency_sum_us;
	sn->dead_peers = ns->dead_peers;
}

static void sched_met_node(const struct sched_node *sn, uint64_t now,
			   struct psd_metrics_node *nd)
{
	memset(nd, 0, sizeof(*nd));
	nd->role = sn->role;
	nd->rank = sn->rank;
	nd->id = sn->id;
	nd->host = sn->host;
	nd->dead = sn->dead;
	nd->finalized = sn->finalized;
	nd->hb_age_s = now > sn->last_seen_ms
			       ? (double)(now - sn->last_seen_ms) / 1000.0
			       : 0.0;
	nd->has_stats = sn->has_stats;
	nd->st = sn->stats;
	nd->dead_peers = sn->dead_peers;
	nd->has_step = sn->has_step;
	nd->step = sn->step;
}

/* @job of @n with its nodes in @nodes (S + W + 1 slots). */
static void sched_met_job(struct psched_node *n, uint64_t now,
			  struct psd_metrics_node *nodes,
			  struct psd_metrics_job *job)
{
	struct psd_sched *s = psd_sched_of(n);
	unsigned i, cnt = 1;

	memset(job, 0, sizeof(*job));
	memset(&nodes[0], 0, sizeof(nodes[0]));
	nodes[0].role = PSCHED_ROLE_SCHEDULER;
	nodes[0].host = n->cfg.root_uri;
	nodes[0].has_stats = true;
	psched_node_stats(n, &nodes[0].st);
	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].used)
			sched_met_node(&s->nodes[i], now, &nodes[cnt++]);
	job->num_server = n->num_server;
	job->num_worker = n->num_worker;
	job->complete = s->table_sent;
	job->uptime_s = (double)(now - s->start_ms) / 1000.0;
	job->epoch = s->cur_epoch;
	job->part = s->cur_part;
	job->credit = s->cur_credit;
	job->switches_committed = s->switches_committed;
	job->switches_aborted = s->switches_aborted;
	job->declared_dead = s->declared_dead;
	if (s->at)
		job->tuner_phase =
			psd_autotune_phase(s->at, &job->tuner_samples);
	job->nodes = nodes;
	job->nnodes = cnt;
}

void psd_sched_metrics_tick(struct psched_node *n, uint64_t now)
{
	struct psd_sched *s = psd_sched_of(n);
	struct psd_metrics_node *nodes;
	struct psd_metrics_job job;

	if (!psd_metrics_due(s->met, now))
		return;
	nodes = calloc(s->cap + 1, sizeof(*nodes));
	if (!nodes)
		return; /* the last snapshot stays */
	sched_met_job(n, now, nodes, &job);
	psd_metrics_publish(s->met, &job, now);
	free(nodes);
}

int psd_sched_metrics_start(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);

	if (!n->cfg.metrics_port && !n->cfg.metrics_file[0])
		return 0;
	return psd_metrics_create(
		n->cfg.metrics_addr,
		n->cfg.metrics_port ? (int)n->cfg.metrics_port : -1,
		n->cfg.metrics_file, n->cfg.metrics_interval_ms, &s->met);
}
