/* SPDX-License-Identifier: MIT */
/*
 * The job's metrics (docs/metrics.md): the scheduler's view of every node
 * (the counters that come on heartbeats, the workers' step reports) and of
 * the job, rendered as Prometheus' text exposition format and as JSON
 * lines.  The van thread renders a snapshot once a second
 * (psd_metrics_tick()); a thread of its own serves the latest snapshot on
 * GET /metrics, one client at a time, each bounded to
 * PSD_METRICS_CLIENT_MS, so a scraper can never hold up the job.
 */
#ifndef PSCHED_SCHEDULER_METRICS_H
#define PSCHED_SCHEDULER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "psched.h"

#define PSD_METRICS_CLIENT_MS 2000 /* a scrape's whole time, at most */
#define PSD_METRICS_REQ_MAX   8192 /* bytes of a request's head */
#define PSD_METRICS_RENDER_MS 1000 /* between snapshots */

/* A worker's last step report (proto/psched.proto Metrics). */
struct psd_metrics_step {
	uint64_t step;
	double step_time_s;
	double compute_s;
	double link_bps;
	double min_rtt_s;
	uint64_t pushed;
	uint64_t pulled;
};

/* One node as the scheduler sees it. */
struct psd_metrics_node {
	enum psched_role role;
	int rank;
	int id;
	const char *host;
	bool dead;
	bool finalized;
	double hb_age_s; /* since its last message */
	bool has_stats;	 /* a heartbeat with counters came */
	struct psched_stats st;
	uint32_t dead_peers;
	bool has_step; /* worker: a step report came */
	struct psd_metrics_step step;
};

/* The job: its config, tuner and nodes. */
struct psd_metrics_job {
	unsigned num_server; /* expected */
	unsigned num_worker;
	bool complete; /* every node registered */
	double uptime_s;
	uint32_t epoch; /* config in force: last committed */
	uint64_t part;
	uint64_t credit;
	uint64_t switches_committed;
	uint64_t switches_aborted;
	uint64_t declared_dead;
	const char *tuner_phase; /* NULL: no tuner */
	uint64_t tuner_samples;
	const struct psd_metrics_node *nodes;
	unsigned nnodes;
};

/* A growing text buffer; on a failed allocation @oom is set and
 * nothing more is added. */
struct psd_mbuf {
	char *p;
	size_t len;
	size_t cap;
	bool oom;
};

void psd_mbuf_printf(struct psd_mbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void psd_mbuf_fini(struct psd_mbuf *b);

/* The exposition (text format 0.0.4) of @job into @b. */
void psd_metrics_render(const struct psd_metrics_job *job, struct psd_mbuf *b);
/* One JSON object (no newline) of @job at @unix_s into @b. */
void psd_metrics_render_json(const struct psd_metrics_job *job, double unix_s,
			     struct psd_mbuf *b);

/*
 * The answer to the request head @req (@len bytes): the status code
 * (200, 400, 404, 405) and whether a body follows (GET, not HEAD).
 */
int psd_metrics_http_status(const char *req, size_t len, bool *body);

struct psd_metrics;

/*
 * Start serving: listen on @addr:@port (0: any free port, -1: no HTTP)
 * and append JSON lines to @file ("" none) every @interval_ms.  0, or
 * -errno with psched_errmsg() naming the address or file.
 */
int psd_metrics_create(const char *addr, int port, const char *file,
		       unsigned interval_ms, struct psd_metrics **out);
/* Stop the thread, close the port and file; NULL is a no-op. */
void psd_metrics_destroy(struct psd_metrics *m);
/* The port it listens on, 0 none. */
unsigned psd_metrics_port(const struct psd_metrics *m);
/* Van thread: a snapshot or a JSON line is due at @now_ms. */
bool psd_metrics_due(const struct psd_metrics *m, uint64_t now_ms);
/*
 * Van thread: @job's snapshot now (@now_ms) becomes the one served;
 * a JSON line is written when its interval has passed.
 */
void psd_metrics_publish(struct psd_metrics *m,
			 const struct psd_metrics_job *job, uint64_t now_ms);

#endif
