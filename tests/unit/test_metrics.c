// SPDX-License-Identifier: MIT
/*
 * The scheduler's metrics (scheduler/metrics.h): the exposition of a job
 * (values, labels and their escaping, the histogram, the tuner), the JSON
 * line, the HTTP request parser with malformed requests, and the serving
 * thread over real sockets: 503 before the first snapshot, answers after,
 * a stalled client neither blocks the van thread's publishing nor the
 * next client for longer than its bound.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../harness.h"
#include "../../common/internal.h"
#include "../../scheduler/metrics.h"
#include "../../scheduler/sched.h"

static struct psd_metrics_node nodes[4];

static void met_job(struct psd_metrics_job *job)
{
	memset(job, 0, sizeof(*job));
	memset(nodes, 0, sizeof(nodes));
	nodes[0].role = PSCHED_ROLE_SCHEDULER;
	nodes[0].host = "sched";
	nodes[0].has_stats = true;
	nodes[0].st.tx_bytes = 11;
	nodes[1].role = PSCHED_ROLE_SERVER;
	nodes[1].host = "srv\"x\\y\nz";
	nodes[1].id = 1;
	nodes[1].has_stats = true;
	nodes[1].st.stored_bytes = 4096;
	nodes[1].hb_age_s = 1.5;
	nodes[2].role = PSCHED_ROLE_WORKER;
	nodes[2].rank = 0;
	nodes[2].id = 2;
	nodes[2].host = "w0";
	nodes[2].has_stats = true;
	nodes[2].st.latency_count[0] = 3;
	nodes[2].st.latency_count[2] = 2;
	nodes[2].st.latency_count[PSCHED_LATENCY_BUCKETS - 1] = 1;
	nodes[2].st.latency_sum_us = 2500000;
	nodes[2].st.errors_timeout = 7;
	nodes[2].st.requests_in_flight = 5;
	nodes[2].has_step = true;
	nodes[2].step.step = 42;
	nodes[2].step.step_time_s = 0.25;
	nodes[3].role = PSCHED_ROLE_WORKER;
	nodes[3].rank = 1;
	nodes[3].id = 3;
	nodes[3].host = "w1";
	nodes[3].dead = true; /* no heartbeat ever came */
	job->num_server = 1;
	job->num_worker = 2;
	job->complete = true;
	job->epoch = 3;
	job->part = 65536;
	job->credit = 262144;
	job->switches_committed = 3;
	job->declared_dead = 1;
	job->nodes = nodes;
	job->nnodes = 4;
}

static bool has_line(const struct psd_mbuf *b, const char *line)
{
	size_t n = strlen(line);
	const char *p = b->p;

	while ((p = strstr(p, line))) {
		if ((p == b->p || p[-1] == '\n') && (p[n] == '\n' || !p[n]))
			return true;
		p++;
	}
	return false;
}

#define CHECK_LINE(b, l)                                                       \
	do {                                                                   \
		if (!has_line((b), (l)))                                       \
			test_fail_at(__FILE__, __LINE__,                       \
				     "no line '%s' in:\n%s", (l), (b)->p);     \
	} while (0)

static void test_metrics_exposition_values(void)
{
	struct psd_metrics_job job;
	struct psd_mbuf b = { 0 };

	met_job(&job);
	psd_metrics_render(&job, &b);
	CHECK(!b.oom && b.len);
	CHECK_LINE(&b, "psched_job_config_epoch 3");
	CHECK_LINE(&b, "psched_job_partition_bytes 65536");
	CHECK_LINE(&b, "psched_job_credit_bytes 262144");
	CHECK_LINE(&b, "psched_job_nodes{role=\"worker\",state=\"live\"} 1");
	CHECK_LINE(&b, "psched_job_nodes{role=\"worker\",state=\"dead\"} 1");
	CHECK_LINE(&b, "psched_job_nodes_declared_dead_total 1");
	CHECK_LINE(&b,
		   "psched_node_up{role=\"worker\",rank=\"1\",host=\"w1\"} 0");
	CHECK_LINE(&b, "psched_node_sent_bytes_total{role=\"scheduler\",rank="
		       "\"0\",host=\"sched\"} 11");
	CHECK_LINE(&b, "psched_worker_step{role=\"worker\",rank=\"0\",host="
		       "\"w0\"} 42");
	CHECK_LINE(&b, "psched_worker_steps_per_second{role=\"worker\",rank="
		       "\"0\",host=\"w0\"} 4");
	CHECK_LINE(&b, "psched_worker_requests_in_flight{role=\"worker\",rank="
		       "\"0\",host=\"w0\"} 5");
	CHECK_LINE(&b, "psched_worker_request_errors_total{role=\"worker\","
		       "rank=\"0\",host=\"w0\",kind=\"timeout\"} 7");
	/* A node without counters or steps has no such samples. */
	CHECK(!strstr(b.p, "psched_worker_step{role=\"worker\",rank=\"1\""));
	CHECK(!strstr(b.p, "sent_bytes_total{role=\"worker\",rank=\"1\""));
	/* No tuner: no tuner families. */
	CHECK(!strstr(b.p, "psched_tuner_phase"));
	psd_mbuf_fini(&b);
}

static void test_metrics_exposition_escapes(void)
{
	struct psd_metrics_job job;
	struct psd_mbuf b = { 0 };

	met_job(&job);
	psd_metrics_render(&job, &b);
	CHECK_LINE(&b, "psched_server_stored_bytes{role=\"server\",rank=\"0\","
		       "host=\"srv\\\"x\\\\y\\nz\"} 4096");
	psd_mbuf_fini(&b);
	psd_metrics_render_json(&job, 1.0, &b);
	CHECK(strstr(b.p, "\"host\":\"srv\\\"x\\\\y\\nz\""));
	CHECK(b.p[0] == '{' && b.p[b.len - 1] == '}');
	CHECK(strstr(b.p, "\"config_epoch\":3,"));
	CHECK(strstr(b.p, "\"step\":42,"));
	CHECK(strstr(b.p, "\"nodes_dead\":1,"));
	CHECK(!strchr(b.p, '\n'));
	psd_mbuf_fini(&b);
}

static void test_metrics_histogram_cumulative(void)
{
	struct psd_metrics_job job;
	struct psd_mbuf b = { 0 };

	met_job(&job);
	psd_metrics_render(&job, &b);
	CHECK(strstr(b.p, "# TYPE psched_worker_request_latency_seconds "
			  "histogram\n"));
	CHECK_LINE(&b, "psched_worker_request_latency_seconds_bucket{role="
		       "\"worker\",rank=\"0\",host=\"w0\",le=\"1.6e-05\"} 3");
	CHECK_LINE(&b, "psched_worker_request_latency_seconds_bucket{role="
		       "\"worker\",rank=\"0\",host=\"w0\",le=\"3.2e-05\"} 3");
	CHECK_LINE(&b, "psched_worker_request_latency_seconds_bucket{role="
		       "\"worker\",rank=\"0\",host=\"w0\",le=\"6.4e-05\"} 5");
	CHECK_LINE(&b, "psched_worker_request_latency_seconds_bucket{role="
		       "\"worker\",rank=\"0\",host=\"w0\",le=\"+Inf\"} 6");
	CHECK_LINE(&b, "psched_worker_request_latency_seconds_count{role="
		       "\"worker\",rank=\"0\",host=\"w0\"} 6");
	CHECK_LINE(&b, "psched_worker_request_latency_seconds_sum{role="
		       "\"worker\",rank=\"0\",host=\"w0\"} 2.500000");
	psd_mbuf_fini(&b);
}

static void test_metrics_tuner_phase(void)
{
	struct psd_metrics_job job;
	struct psd_mbuf b = { 0 };

	met_job(&job);
	job.tuner_phase = "explore";
	job.tuner_samples = 9;
	psd_metrics_render(&job, &b);
	CHECK_LINE(&b, "psched_tuner_phase{phase=\"explore\"} 1");
	CHECK_LINE(&b, "psched_tuner_phase{phase=\"locked\"} 0");
	CHECK_LINE(&b, "psched_tuner_samples_total 9");
	psd_mbuf_fini(&b);
}

static int http_status(const char *req, bool *body)
{
	return psd_metrics_http_status(req, strlen(req), body);
}

static void test_metrics_http_requests(void)
{
	static const struct {
		const char *req;
		int status;
		bool body;
	} cases[] = {
		{ "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 200, true },
		{ "GET /metrics HTTP/1.0\n\n", 200, true },
		{ "HEAD /metrics HTTP/1.1\r\n\r\n", 200, false },
		{ "GET /metrics?name[]=x HTTP/1.1\r\n\r\n", 200, true },
		{ "POST /metrics HTTP/1.1\r\n\r\n", 405, false },
		{ "DELETE /metrics HTTP/1.1\r\n\r\n", 405, false },
		{ "GET / HTTP/1.1\r\n\r\n", 404, false },
		{ "GET /metricsx HTTP/1.1\r\n\r\n", 404, false },
		{ "GET /metric HTTP/1.1\r\n\r\n", 404, false },
		{ "get /metrics HTTP/1.1\r\n\r\n", 400, false },
		{ "GET /metrics HTTP/2.0\r\n\r\n", 400, false },
		{ "GET /metrics\r\n\r\n", 400, false },
		{ "GET  /metrics HTTP/1.1\r\n\r\n", 400, false },
		{ "GET metrics HTTP/1.1\r\n\r\n", 400, false },
		{ "GET /met\trics HTTP/1.1\r\n\r\n", 400, false },
		{ "GET /metrics HTTP/1.1 x\r\n\r\n", 400, false },
		{ "\x16\x03\x01\x02\x00\x01\n", 400, false },
		{ "GET /metrics HTTP/1.1", 400, false },
		{ "", 400, false },
	};
	size_t i;
	bool body;

	for (i = 0; i < PSD_ARRAY_SIZE(cases); i++) {
		body = !cases[i].body;
		CHECK_EQ(http_status(cases[i].req, &body), cases[i].status);
		CHECK_EQ(body, cases[i].body);
	}
	/* A NUL inside the request line. */
	CHECK_EQ(
		psd_metrics_http_status("GET /m\0etrics HTTP/1.1\n", 23, &body),
		400);
}

static int met_dial(unsigned port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Send @req and read the whole answer (until close) into @buf. */
static size_t met_get(unsigned port, const char *req, char *buf, size_t cap)
{
	int fd = met_dial(port);
	size_t len = 0;
	ssize_t got;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	CHECK_EQ(send(fd, req, strlen(req), MSG_NOSIGNAL),
		 (ssize_t)strlen(req));
	while (len + 1 < cap) {
		CHECK(poll(&p, 1, test_timeout_ms(5000)) == 1);
		got = recv(fd, buf + len, cap - 1 - len, 0);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	buf[len] = '\0';
	close(fd);
	return len;
}

static void test_metrics_http_server(void)
{
	struct psd_metrics *m = NULL;
	struct psd_metrics_job job;
	static char buf[1 << 16];
	static char big[PSD_METRICS_REQ_MAX + 64];
	unsigned port;
	char *body;

	CHECK_EQ(psd_metrics_create("127.0.0.1", 0, "", 0, &m), 0);
	port = psd_metrics_port(m);
	CHECK(port > 0);
	met_get(port, "GET /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 503 ", 13));
	met_job(&job);
	psd_metrics_publish(m, &job, 5000);
	met_get(port, "GET /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 200 OK\r\n", 17));
	CHECK(strstr(buf, "Content-Type: text/plain; version=0.0.4"));
	body = strstr(buf, "\r\n\r\n");
	CHECK(body);
	body += 4;
	CHECK(strstr(body, "\npsched_job_config_epoch 3\n"));
	CHECK(strstr(buf, "Content-Length: "));
	CHECK_EQ(strtoul(strstr(buf, "Content-Length: ") + 16, NULL, 10),
		 strlen(body));
	met_get(port, "HEAD /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 200 OK\r\n", 17));
	CHECK(!strcmp(strstr(buf, "\r\n\r\n"), "\r\n\r\n"));
	met_get(port, "PUT /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 405 ", 13));
	CHECK(strstr(buf, "\r\nAllow: GET, HEAD\r\n"));
	met_get(port, "GET /x HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 404 ", 13));
	met_get(port, "\x16\x03\x01 garbage\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 400 ", 13));
	/* A good request line whose head never ends within the limit. */
	strcpy(big, "GET /metrics HTTP/1.1\r\nX: ");
	memset(big + strlen(big), 'a', PSD_METRICS_REQ_MAX);
	big[sizeof(big) - 1] = '\0';
	met_get(port, big, buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 400 ", 13));
	psd_metrics_destroy(m);
}

/* A client that connects and never sends, one that never finishes its
 * line: each is dropped after its bound, without an answer; the van
 * thread publishes meanwhile and the client after them is answered. */
static void test_metrics_http_stalled_clients(void)
{
	struct psd_metrics *m = NULL;
	struct psd_metrics_job job;
	static char buf[1 << 16];
	struct pollfd p;
	int silent, partial;
	unsigned port;

	CHECK_EQ(psd_metrics_create("127.0.0.1", 0, "", 0, &m), 0);
	port = psd_metrics_port(m);
	met_job(&job);
	psd_metrics_publish(m, &job, 5000);
	silent = met_dial(port);
	partial = met_dial(port);
	CHECK_EQ(send(partial, "GET /metr", 9, MSG_NOSIGNAL), 9);
	job.epoch = 4;
	psd_metrics_publish(m, &job, 6000); /* does not wait for them */
	met_get(port, "GET /metrics HTTP/1.1\r\n\r\n", buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 200 OK", 15));
	CHECK(strstr(buf, "\npsched_job_config_epoch 4\n"));
	p.fd = silent;
	p.events = POLLIN;
	CHECK_EQ(poll(&p, 1, 0), 1); /* closed by now */
	CHECK_EQ(recv(silent, buf, sizeof(buf), 0), 0);
	p.fd = partial;
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(recv(partial, buf, sizeof(buf), 0), 0);
	close(silent);
	close(partial);
	/* Stopping while a client stalls does not wait for its bound. */
	silent = met_dial(port);
	psd_metrics_destroy(m);
	close(silent);
}

static void test_metrics_json_file(void)
{
	char path[] = "/tmp/psched-metrics-XXXXXX";
	struct psd_metrics *m = NULL;
	struct psd_metrics_job job;
	char line[8192];
	int fd = mkstemp(path), lines = 0;
	FILE *f;

	CHECK(fd >= 0);
	close(fd);
	met_job(&job);
	CHECK_EQ(psd_metrics_create("127.0.0.1", -1, path, 1000, &m), 0);
	CHECK_EQ(psd_metrics_port(m), 0);
	CHECK(psd_metrics_due(m, 5000));
	psd_metrics_publish(m, &job, 5000);
	CHECK(!psd_metrics_due(m, 5500));
	psd_metrics_publish(m, &job, 5500);
	job.epoch = 9;
	psd_metrics_publish(m, &job, 6000);
	psd_metrics_destroy(m);
	f = fopen(path, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		CHECK(line[0] == '{' &&
		      !strcmp(line + strlen(line) - 2, "}\n"));
		CHECK(strstr(line, lines ? "\"config_epoch\":9,"
					 : "\"config_epoch\":3,"));
		lines++;
	}
	fclose(f);
	CHECK_EQ(lines, 2);
	unlink(path);
	CHECK(psd_metrics_create("127.0.0.1", -1, "/nonexistent/dir/m.jsonl",
				 1000, &m) < 0);
	CHECK(strstr(psched_errmsg(), "/nonexistent/dir/m.jsonl"));
	CHECK(psd_metrics_create("no such host.invalid", 0, "", 0, &m) < 0);
	CHECK(strstr(psched_errmsg(), "metrics address"));
}

/* The counters a heartbeat carries land in the scheduler's node; an old
 * node's heartbeat without them and extra latency buckets are fine. */
static void test_metrics_heartbeat_stats(void)
{
	Psched__Heartbeat hb = PSCHED__HEARTBEAT__INIT;
	Psched__NodeStats ns = PSCHED__NODE_STATS__INIT;
	uint64_t lat[PSCHED_LATENCY_BUCKETS + 3];
	static struct sched_node sn;
	uint8_t wire[1024];
	Psched__Heartbeat *back;
	size_t len, k;

	psd_sched_on_heartbeat(&sn, &hb);
	CHECK(!sn.has_stats);
	for (k = 0; k < PSD_ARRAY_SIZE(lat); k++)
		lat[k] = k + 1;
	ns.tx_bytes = 100;
	ns.rx_msgs = 7;
	ns.requests_in_flight = 3;
	ns.in_flight_bytes = 65536;
	ns.errors_node_dead = 2;
	ns.dead_peers = 1;
	ns.n_latency_count = PSD_ARRAY_SIZE(lat);
	ns.latency_count = lat;
	ns.latency_sum_us = 999;
	hb.stats = &ns;
	len = psched__heartbeat__pack(&hb, wire);
	back = psched__heartbeat__unpack(NULL, len, wire);
	CHECK(back);
	psd_sched_on_heartbeat(&sn, back);
	psched__heartbeat__free_unpacked(back, NULL);
	CHECK(sn.has_stats);
	CHECK_U64(sn.stats.tx_bytes, ==, 100);
	CHECK_U64(sn.stats.rx_msgs, ==, 7);
	CHECK_U64(sn.stats.requests_in_flight, ==, 3);
	CHECK_U64(sn.stats.in_flight_bytes, ==, 65536);
	CHECK_U64(sn.stats.errors_node_dead, ==, 2);
	CHECK_U64(sn.stats.latency_sum_us, ==, 999);
	CHECK_EQ(sn.dead_peers, 1);
	for (k = 0; k < PSCHED_LATENCY_BUCKETS; k++)
		CHECK_U64(sn.stats.latency_count[k], ==, k + 1);
}

const struct test_case test_list[] = {
	{ "metrics_exposition_values", test_metrics_exposition_values },
	{ "metrics_exposition_escapes", test_metrics_exposition_escapes },
	{ "metrics_histogram_cumulative", test_metrics_histogram_cumulative },
	{ "metrics_tuner_phase", test_metrics_tuner_phase },
	{ "metrics_http_requests", test_metrics_http_requests },
	{ "metrics_http_server", test_metrics_http_server },
	{ "metrics_http_stalled_clients", test_metrics_http_stalled_clients },
	{ "metrics_json_file", test_metrics_json_file },
	{ "metrics_heartbeat_stats", test_metrics_heartbeat_stats },
	{ NULL, NULL },
};
