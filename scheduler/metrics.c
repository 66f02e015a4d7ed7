// SPDX-License-Identifier: MIT
/*
 * The job's metrics as Prometheus' text exposition format and JSON lines
 * (docs/metrics.md lists every metric).  Pure functions of a
 * struct psd_metrics_job; the serving thread is in metrics_http.c.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "metrics.h"

void psd_mbuf_printf(struct psd_mbuf *b, const char *fmt, ...)
{
	va_list ap;
	size_t cap;
	char *p;
	int len;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		len = vsnprintf(b->p ? b->p + b->len : NULL,
				b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (len < 0) {
			b->oom = true;
			return;
		}
		if (b->p && (size_t)len < b->cap - b->len) {
			b->len += (size_t)len;
			return;
		}
		cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + (size_t)len + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

void psd_mbuf_fini(struct psd_mbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Where a per-node metric's value comes from. */
enum met_src {
	MS_ST64,    /* a uint64_t of struct psched_stats, at off */
	MS_STEP64,  /* a uint64_t of struct psd_metrics_step */
	MS_STEPDBL, /* a double of struct psd_metrics_step */
	MS_UP,	    /* 1 live, 0 dead */
	MS_AGE,	    /* heartbeat age, seconds */
	MS_DEADP,   /* peers it saw die */
	MS_EPOCH,   /* its config epoch */
	MS_RATE,    /* steps per second, from the step time */
};

#define R_SCHED	 (1u << PSCHED_ROLE_SCHEDULER)
#define R_SERVER (1u << PSCHED_ROLE_SERVER)
#define R_WORKER (1u << PSCHED_ROLE_WORKER)
#define R_ALL	 (R_SCHED | R_SERVER | R_WORKER)

struct met_family {
	const char *name;
	const char *type;
	const char *help;
	unsigned roles;
	enum met_src src;
	size_t off;
};

#define ST(f)	offsetof(struct psched_stats, f)
#define STEP(f) offsetof(struct psd_metrics_step, f)

static const struct met_family met_nodes[] = {
	{ "psched_node_up", "gauge", "1 while the node is live, 0 once dead",
	  R_SERVER | R_WORKER, MS_UP, 0 },
	{ "psched_node_heartbeat_age_seconds", "gauge",
	  "seconds since the scheduler last heard from the node",
	  R_SERVER | R_WORKER, MS_AGE, 0 },
	{ "psched_node_sent_bytes_total", "counter",
	  "payload bytes the node sent", R_ALL, MS_ST64, ST(tx_bytes) },
	{ "psched_node_received_bytes_total", "counter",
	  "payload bytes the node received", R_ALL, MS_ST64, ST(rx_bytes) },
	{ "psched_node_sent_messages_total", "counter",
	  "messages the node sent", R_ALL, MS_ST64, ST(tx_msgs) },
	{ "psched_node_received_messages_total", "counter",
	  "messages the node received", R_ALL, MS_ST64, ST(rx_msgs) },
	{ "psched_node_dead_peers", "gauge", "peers the node has seen die",
	  R_SERVER | R_WORKER, MS_DEADP, 0 },
	{ "psched_server_stored_bytes", "gauge",
	  "bytes of tensor values the server holds", R_SERVER, MS_ST64,
	  ST(stored_bytes) },
	{ "psched_server_allocated_bytes", "gauge",
	  "bytes the server allocated for tensor values", R_SERVER, MS_ST64,
	  ST(alloc_bytes) },
	{ "psched_worker_requests_in_flight", "gauge",
	  "requests started and not done", R_WORKER, MS_ST64,
	  ST(requests_in_flight) },
	{ "psched_worker_credit_in_use_bytes", "gauge",
	  "push bytes in flight, holding credit", R_WORKER, MS_ST64,
	  ST(in_flight_bytes) },
	{ "psched_worker_credit_bytes", "gauge",
	  "credit in force, 0 = unlimited", R_WORKER, MS_ST64,
	  ST(credit_bytes) },
	{ "psched_worker_max_in_flight_bytes", "gauge",
	  "most push bytes ever in flight at once", R_WORKER, MS_ST64,
	  ST(max_in_flight_bytes) },
	{ "psched_worker_chunks_started_total", "counter",
	  "chunks the worker sent", R_WORKER, MS_ST64, ST(chunks_started) },
	{ "psched_worker_config_epoch", "gauge",
	  "newest config epoch the worker committed", R_WORKER, MS_EPOCH, 0 },
	{ "psched_worker_requests_ok_total", "counter",
	  "requests that completed without an error", R_WORKER, MS_ST64,
	  ST(requests_ok) },
	{ "psched_worker_step", "gauge", "last step the worker completed",
	  R_WORKER, MS_STEP64, STEP(step) },
	{ "psched_worker_steps_per_second", "gauge",
	  "steps per second over the worker's last report", R_WORKER, MS_RATE,
	  0 },
	{ "psched_worker_step_time_seconds", "gauge",
	  "mean step time over the worker's last report", R_WORKER, MS_STEPDBL,
	  STEP(step_time_s) },
	{ "psched_worker_compute_seconds", "gauge",
	  "step time the application spent outside psched_wait()", R_WORKER,
	  MS_STEPDBL, STEP(compute_s) },
	{ "psched_worker_link_bytes_per_second", "gauge",
	  "bytes pushed and pulled per second while requests were in flight",
	  R_WORKER, MS_STEPDBL, STEP(link_bps) },
	{ "psched_worker_min_rtt_seconds", "gauge",
	  "largest minimum round trip of the worker's paths (tcp), 0 unknown",
	  R_WORKER, MS_STEPDBL, STEP(min_rtt_s) },
	{ "psched_worker_pushed_bytes_total", "counter",
	  "bytes the worker asked to push", R_WORKER, MS_STEP64, STEP(pushed) },
	{ "psched_worker_pulled_bytes_total", "counter",
	  "bytes the worker asked to pull", R_WORKER, MS_STEP64, STEP(pulled) },
};

static const char *const met_roles[] = { "scheduler", "server", "worker" };

/* @s as a label value or JSON string body: \, " and newlines escaped. */
static void met_escape(struct psd_mbuf *b, const char *s, bool json)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\' || c == '"')
			psd_mbuf_printf(b, "\\%c", c);
		else if (c == '\n')
			psd_mbuf_printf(b, "\\n");
		else if (c < 0x20 && json)
			psd_mbuf_printf(b, "\\u%04x", c);
		else if (c >= 0x20)
			psd_mbuf_printf(b, "%c", c);
	}
}

static void met_labels(struct psd_mbuf *b, const struct psd_metrics_node *nd)
{
	psd_mbuf_printf(b, "role=\"%s\",rank=\"%d\",host=\"",
			met_roles[nd->role], nd->rank);
	met_escape(b, nd->host, false);
	psd_mbuf_printf(b, "\"");
}

static bool met_has(const struct met_family *f,
		    const struct psd_metrics_node *nd)
{
	if (!(f->roles & (1u << nd->role)))
		return false;
	switch (f->src) {
	case MS_ST64:
	case MS_DEADP:
	case MS_EPOCH:
		return nd->has_stats;
	case MS_STEP64:
	case MS_STEPDBL:
		return nd->has_step;
	case MS_RATE:
		return nd->has_step && nd->step.step_time_s > 0;
	default:
		return true;
	}
}

static void met_value(struct psd_mbuf *b, const struct met_family *f,
		      const struct psd_metrics_node *nd)
{
	const char *st = (const char *)&nd->st;
	const char *sp = (const char *)&nd->step;
	uint64_t u;
	double d;

	switch (f->src) {
	case MS_ST64:
		memcpy(&u, st + f->off, sizeof(u));
		psd_mbuf_printf(b, "%" PRIu64, u);
		return;
	case MS_STEP64:
		memcpy(&u, sp + f->off, sizeof(u));
		psd_mbuf_printf(b, "%" PRIu64, u);
		return;
	case MS_STEPDBL:
		memcpy(&d, sp + f->off, sizeof(d));
		psd_mbuf_printf(b, "%.9g", d);
		return;
	case MS_UP:
		psd_mbuf_printf(b, "%d", nd->dead ? 0 : 1);
		return;
	case MS_AGE:
		psd_mbuf_printf(b, "%.3f", nd->hb_age_s);
		return;
	case MS_DEADP:
		psd_mbuf_printf(b, "%u", nd->dead_peers);
		return;
	case MS_EPOCH:
		psd_mbuf_printf(b, "%u", nd->st.config_epoch);
		return;
	case MS_RATE:
		psd_mbuf_printf(b, "%.9g", 1.0 / nd->step.step_time_s);
		return;
	}
}

static void met_head(struct psd_mbuf *b, const char *name, const char *type,
		     const char *help)
{
	psd_mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
			type);
}

static void met_render_nodes(const struct psd_metrics_job *job,
			     struct psd_mbuf *b)
{
	const struct met_family *f;
	unsigned i;

	for (f = met_nodes; f < met_nodes + PSD_ARRAY_SIZE(met_nodes); f++) {
		met_head(b, f->name, f->type, f->help);
		for (i = 0; i < job->nnodes; i++) {
			if (!met_has(f, &job->nodes[i]))
				continue;
			psd_mbuf_printf(b, "%s{", f->name);
			met_labels(b, &job->nodes[i]);
			psd_mbuf_printf(b, "} ");
			met_value(b, f, &job->nodes[i]);
			psd_mbuf_printf(b, "\n");
		}
	}
}

static const char *const met_err_kinds[] = { "timeout", "node_dead", "remote",
					     "shutdown", "other" };

static void met_render_errors(const struct psd_metrics_job *job,
			      struct psd_mbuf *b)
{
	const struct psd_metrics_node *nd;
	uint64_t v[5];
	unsigned i, k;

	met_head(b, "psched_worker_request_errors_total", "counter",
		 "requests that failed, by kind of error");
	for (i = 0; i < job->nnodes; i++) {
		nd = &job->nodes[i];
		if (nd->role != PSCHED_ROLE_WORKER || !nd->has_stats)
			continue;
		v[0] = nd->st.errors_timeout;
		v[1] = nd->st.errors_node_dead;
		v[2] = nd->st.errors_remote;
		v[3] = nd->st.errors_shutdown;
		v[4] = nd->st.errors_other;
		for (k = 0; k < 5; k++) {
			psd_mbuf_printf(b,
					"psched_worker_request_errors_total{");
			met_labels(b, nd);
			psd_mbuf_printf(b, ",kind=\"%s\"} %" PRIu64 "\n",
					met_err_kinds[k], v[k]);
		}
	}
}

static void met_render_hist(const struct psd_metrics_job *job,
			    struct psd_mbuf *b)
{
	const char *name = "psched_worker_request_latency_seconds";
	const struct psd_metrics_node *nd;
	uint64_t cum;
	unsigned i, k;

	met_head(b, name, "histogram",
		 "time from a request's start to its completion");
	for (i = 0; i < job->nnodes; i++) {
		nd = &job->nodes[i];
		if (nd->role != PSCHED_ROLE_WORKER || !nd->has_stats)
			continue;
		cum = 0;
		for (k = 0; k < PSCHED_LATENCY_BUCKETS; k++) {
			cum += nd->st.latency_count[k];
			psd_mbuf_printf(b, "%s_bucket{", name);
			met_labels(b, nd);
			if (k + 1 < PSCHED_LATENCY_BUCKETS)
				psd_mbuf_printf(
					b, ",le=\"%g\"} %" PRIu64 "\n",
					(double)((uint64_t)
							 PSCHED_LATENCY_BUCKET_US
						 << k) /
						1e6,
					cum);
			else
				psd_mbuf_printf(
					b, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
		}
		psd_mbuf_printf(b, "%s_sum{", name);
		met_labels(b, nd);
		psd_mbuf_printf(b, "} %.6f\n%s_count{",
				nd->st.latency_sum_us / 1e6, name);
		met_labels(b, nd);
		psd_mbuf_printf(b, "} %" PRIu64 "\n", cum);
	}
}

/* Nodes of @role in @state: 0 live, 1 dead, 2 finalized. */
static unsigned met_count(const struct psd_metrics_job *job,
			  enum psched_role role, int state)
{
	const struct psd_metrics_node *nd;
	unsigned i, cnt = 0;

	for (i = 0; i < job->nnodes; i++) {
		nd = &job->nodes[i];
		if (nd->role != role)
			continue;
		if (state == 1	 ? nd->dead
		    : state == 2 ? !nd->dead && nd->finalized
				 : !nd->dead && !nd->finalized)
			cnt++;
	}
	return cnt;
}

static void met_render_members(const struct psd_metrics_job *job,
			       struct psd_mbuf *b)
{
	static const char *const states[] = { "live", "dead", "finalized" };
	enum psched_role r;
	int st;

	met_head(b, "psched_job_nodes", "gauge",
		 "registered servers and workers by state");
	for (r = PSCHED_ROLE_SERVER; r <= PSCHED_ROLE_WORKER; r++)
		for (st = 0; st < 3; st++)
			psd_mbuf_printf(
				b,
				"psched_job_nodes{role=\"%s\",state=\"%s\"} "
				"%u\n",
				met_roles[r], states[st],
				met_count(job, r, st));
	met_head(b, "psched_job_expected_nodes", "gauge",
		 "servers and workers the job was started for");
	psd_mbuf_printf(b,
			"psched_job_expected_nodes{role=\"server\"} %u\n"
			"psched_job_expected_nodes{role=\"worker\"} %u\n",
			job->num_server, job->num_worker);
	met_head(b, "psched_job_nodes_declared_dead_total", "counter",
		 "nodes the scheduler declared dead");
	psd_mbuf_printf(b, "psched_job_nodes_declared_dead_total %" PRIu64 "\n",
			job->declared_dead);
}

static void met_render_tuner(const struct psd_metrics_job *job,
			     struct psd_mbuf *b)
{
	static const char *const phases[] = { "warmup", "explore", "locked",
					      "retune" };
	bool known = false;
	unsigned i;

	if (!job->tuner_phase)
		return;
	met_head(b, "psched_tuner_phase", "gauge",
		 "1 for the autotuner's current phase");
	for (i = 0; i < PSD_ARRAY_SIZE(phases); i++) {
		bool on = !strcmp(job->tuner_phase, phases[i]);

		known |= on;
		psd_mbuf_printf(b, "psched_tuner_phase{phase=\"%s\"} %d\n",
				phases[i], on);
	}
	if (!known) {
		psd_mbuf_printf(b, "psched_tuner_phase{phase=\"");
		met_escape(b, job->tuner_phase, false);
		psd_mbuf_printf(b, "\"} 1\n");
	}
	met_head(b, "psched_tuner_samples_total", "counter",
		 "samples the autotuner completed");
	psd_mbuf_printf(b, "psched_tuner_samples_total %" PRIu64 "\n",
			job->tuner_samples);
}

static void met_render_job(const struct psd_metrics_job *job,
			   struct psd_mbuf *b)
{
	met_head(b, "psched_job_up", "gauge",
		 "1 once every node registered and the node table went out");
	psd_mbuf_printf(b, "psched_job_up %d\n", job->complete);
	met_head(b, "psched_job_uptime_seconds", "gauge",
		 "seconds since the scheduler started");
	psd_mbuf_printf(b, "psched_job_uptime_seconds %.3f\n", job->uptime_s);
	met_head(b, "psched_job_config_epoch", "gauge",
		 "epoch of the config in force (0: the start-up one)");
	psd_mbuf_printf(b, "psched_job_config_epoch %u\n", job->epoch);
	met_head(b, "psched_job_partition_bytes", "gauge",
		 "partition size of the config in force, 0 = whole ranges");
	psd_mbuf_printf(b, "psched_job_partition_bytes %" PRIu64 "\n",
			job->part);
	met_head(b, "psched_job_credit_bytes", "gauge",
		 "credit of the config in force, 0 = unlimited");
	psd_mbuf_printf(b, "psched_job_credit_bytes %" PRIu64 "\n",
			job->credit);
	met_head(b, "psched_job_config_switches_total", "counter",
		 "config switches, by result");
	psd_mbuf_printf(
		b,
		"psched_job_config_switches_total{result=\"committed\"} "
		"%" PRIu64 "\n"
		"psched_job_config_switches_total{result=\"aborted\"} "
		"%" PRIu64 "\n",
		job->switches_committed, job->switches_aborted);
	met_render_members(job, b);
	met_render_tuner(job, b);
}

void psd_metrics_render(const struct psd_metrics_job *job, struct psd_mbuf *b)
{
	met_head(b, "psched_build_info", "gauge",
		 "the library release of the scheduler, always 1");
	psd_mbuf_printf(b, "psched_build_info{version=\"%s\"} 1\n",
			psched_version());
	met_render_job(job, b);
	met_render_nodes(job, b);
	met_render_errors(job, b);
	met_render_hist(job, b);
}

static void met_json_node(const struct psd_metrics_node *nd, struct psd_mbuf *b)
{
	const struct psched_stats *st = &nd->st;

	psd_mbuf_printf(b, "{\"role\":\"%s\",\"rank\":%d,\"id\":%d,\"host\":\"",
			met_roles[nd->role], nd->rank, nd->id);
	met_escape(b, nd->host, true);
	psd_mbuf_printf(b,
			"\",\"up\":%s,\"finalized\":%s,"
			"\"heartbeat_age_s\":%.3f",
			nd->dead ? "false" : "true",
			nd->finalized ? "true" : "false", nd->hb_age_s);
	if (nd->has_stats)
		psd_mbuf_printf(
			b,
			",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%" PRIu64
			",\"tx_msgs\":%" PRIu64 ",\"rx_msgs\":%" PRIu64
			",\"stored_bytes\":%" PRIu64
			",\"requests_in_flight\":%" PRIu64
			",\"credit_in_use_bytes\":%" PRIu64
			",\"credit_bytes\":%" PRIu64 ",\"config_epoch\":%u"
			",\"requests_ok\":%" PRIu64 ",\"errors\":%" PRIu64
			",\"latency_sum_s\":%.6f,\"dead_peers\":%u",
			st->tx_bytes, st->rx_bytes, st->tx_msgs, st->rx_msgs,
			st->stored_bytes, st->requests_in_flight,
			st->in_flight_bytes, st->credit_bytes, st->config_epoch,
			st->requests_ok,
			st->errors_timeout + st->errors_node_dead +
				st->errors_remote + st->errors_shutdown +
				st->errors_other,
			st->latency_sum_us / 1e6, nd->dead_peers);
	if (nd->has_step)
		psd_mbuf_printf(b,
				",\"step\":%" PRIu64 ",\"step_time_s\":%.9g"
				",\"steps_per_second\":%.9g,\"compute_s\":%.9g"
				",\"link_bytes_per_s\":%.9g",
				nd->step.step, nd->step.step_time_s,
				nd->step.step_time_s > 0
					? 1.0 / nd->step.step_time_s
					: 0.0,
				nd->step.compute_s, nd->step.link_bps);
	psd_mbuf_printf(b, "}");
}

void psd_metrics_render_json(const struct psd_metrics_job *job, double unix_s,
			     struct psd_mbuf *b)
{
	unsigned i;

	psd_mbuf_printf(b,
			"{\"time\":%.3f,\"uptime_s\":%.3f,\"complete\":%s,"
			"\"config_epoch\":%u,\"partition_bytes\":%" PRIu64
			",\"credit_bytes\":%" PRIu64 ",\"tuner_phase\":",
			unix_s, job->uptime_s, job->complete ? "true" : "false",
			job->epoch, job->part, job->credit);
	if (job->tuner_phase)
		psd_mbuf_printf(b, "\"%s\"", job->tuner_phase);
	else
		psd_mbuf_printf(b, "null");
	psd_mbuf_printf(b,
			",\"tuner_samples\":%" PRIu64
			",\"nodes_live\":%u,\"nodes_dead\":%u,\"nodes\":[",
			job->tuner_samples,
			met_count(job, PSCHED_ROLE_SERVER, 0) +
				met_count(job, PSCHED_ROLE_WORKER, 0),
			met_count(job, PSCHED_ROLE_SERVER, 1) +
				met_count(job, PSCHED_ROLE_WORKER, 1));
	for (i = 0; i < job->nnodes; i++) {
		if (i)
			psd_mbuf_printf(b, ",");
		met_json_node(&job->nodes[i], b);
	}
	psd_mbuf_printf(b, "]}");
}
