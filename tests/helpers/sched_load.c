// SPDX-License-Identifier: MIT
/*
 * sched_load: drive a real ps-scheduler with many simulated nodes that
 * speak its protocol (wire header + protobuf-c control messages on one TCP
 * connection each), without the nodes' data plane.  Measures
 *   - forming the job: first connect to the last node table received,
 *     and to the end of the first all-node barrier (what psched_node_create
 *     waits for);
 *   - barrier latency: all nodes arrive (last request sent) to the last
 *     release received, per barrier; median and max;
 *   - scheduler CPU per heartbeat: the scheduler's on-CPU time (every
 *     thread, /proc/PID/task/TID/schedstat, ns) in a heartbeat window minus
 *     an idle window of the same length, over the heartbeats sent;
 * then finalizes every worker and checks the scheduler shuts the job down
 * and exits 0.  Every expected answer is checked (table ids and roles,
 * every barrier released to every node, shutdown to every node); a
 * missing one within the timeout is an error naming the node.
 *
 *   sched_load --scheduler PATH [--nodes N] [--servers S] [--barriers B]
 *              [--hb-interval-ms MS] [--window-s SEC] [--timeout-s SEC]
 * Prints one "RESULT key=value ..." line, and a readable summary.
 * Exit 0 when every check passed, 1 otherwise, 2 bad arguments.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "auth.h"
#include "psched.h"
#include "psched.pb-c.h"
#include "wire.h"

struct node {
	int fd;
	int idx;
	bool server;
	int id; /* from the table */
	bool have_table;
	uint64_t barrier_seen; /* seq of the last release received */
	bool shutdown;
	uint8_t *buf; /* receive buffer */
	size_t len, cap;
	uint8_t nonce[PSD_AUTH_NONCE_LEN]; /* ours, sent in Register */
	bool authed;			   /* the scheduler took our Proof */
};

struct load {
	const char *sched_path;
	unsigned nodes, servers, barriers, hb_interval_ms;
	double window_s, timeout_s;
	pid_t sched_pid;
	unsigned port;
	struct node *n;
	int ep;
	unsigned tables, shutdowns;
	uint64_t released; /* releases received for the current barrier */
	uint64_t cur_seq;
	uint64_t last_rx_us;
	int failed;
	struct psd_auth_secret sec; /* the job's, shared with the scheduler */
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int fail(struct load *L, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(struct load *L, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sched_load: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	L->failed = 1;
	return -1;
}

static int send_ctl(struct node *s, const Psched__Control *m)
{
	uint8_t buf[PSD_HDR_SIZE + 512];
	size_t len = psched__control__get_packed_size(m), off = 0;
	struct psd_hdr h = { .type = PSD_MSG_CONTROL, .sender = s->id };
	ssize_t w;

	if (len > sizeof(buf) - PSD_HDR_SIZE)
		return -EMSGSIZE;
	h.length = len;
	psd_hdr_encode(&h, buf);
	psched__control__pack(m, buf + PSD_HDR_SIZE);
	len += PSD_HDR_SIZE;
	while (off < len) {
		w = send(s->fd, buf + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		off += (size_t)w;
	}
	return 0;
}

/*
 * Registration of one simulated node: connect to the scheduler and send
 * Register as ps-server/ps-worker do (common/postoffice.c po_register).
 * The one place to adapt when registration changes (an authentication
 * challenge to answer first, say): everything after it only needs the
 * connection registered.
 */
static int sim_register(struct load *L, struct node *s)
{
	Psched__NodeInfo ni = PSCHED__NODE_INFO__INIT;
	Psched__Register reg = PSCHED__REGISTER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	static char host[] = "127.0.0.1", tcp[] = "tcp";
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1, ret;

	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return fail(L, "socket: %s (raise ulimit -n?)",
			    strerror(errno));
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	sa.sin_port = htons((uint16_t)L->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)))
		return fail(L, "node %d: connect to the scheduler: %s", s->idx,
			    strerror(errno));
	ni.id = -1;
	ni.rank = -1;
	ni.role = s->server ? PSCHED__ROLE__SERVER : PSCHED__ROLE__WORKER;
	ni.host = host;
	/* Nobody dials the simulated servers; the port only has to be
	 * plausible. */
	ni.port = s->server ? 20000u + (unsigned)s->idx : 0;
	reg.node = &ni;
	reg.transport = tcp;
	reg.num_server = L->servers;
	reg.num_worker = L->nodes - L->servers;
	reg.pid = getpid();
	/* The registration handshake (common/auth.h): our nonce here, the
	 * scheduler's Challenge answered in on_control(). */
	if (psd_auth_nonce(s->nonce))
		return fail(L, "node %d: no random nonce", s->idx);
	reg.nonce.data = s->nonce;
	reg.nonce.len = sizeof(s->nonce);
	m.body_case = PSCHED__CONTROL__BODY_REG;
	m.reg = &reg;
	s->id = -1;
	ret = send_ctl(s, &m);
	if (ret)
		return fail(L, "node %d: register: %s", s->idx, strerror(-ret));
	return 0;
}

/* The scheduler's Challenge: check its proof, answer with ours. */
static void on_challenge(struct load *L, struct node *s,
			 const Psched__Challenge *ch)
{
	Psched__Proof pr = PSCHED__PROOF__INIT;
	Psched__Control out = PSCHED__CONTROL__INIT;
	uint8_t proof[PSD_AUTH_PROOF_LEN];
	int32_t id = s->server ? PSCHED_ROLE_SERVER : PSCHED_ROLE_WORKER;

	if (s->authed || ch->nonce.len != PSD_AUTH_NONCE_LEN ||
	    !psd_auth_check(&L->sec, true, PSD_AUTH_REGISTER, id, s->nonce,
			    ch->nonce.data, ch->proof.data, ch->proof.len)) {
		fail(L,
		     "node %d: the scheduler's challenge does not prove "
		     "the job's secret",
		     s->idx);
		return;
	}
	psd_auth_proof(&L->sec, false, PSD_AUTH_REGISTER, id, s->nonce,
		       ch->nonce.data, proof);
	pr.proof.data = proof;
	pr.proof.len = sizeof(proof);
	out.body_case = PSCHED__CONTROL__BODY_PROOF;
	out.proof = &pr;
	if (send_ctl(s, &out))
		fail(L, "node %d: cannot send our proof", s->idx);
	s->authed = true;
}

static void on_control(struct load *L, struct node *s, const Psched__Control *m)
{
	switch (m->body_case) {
	case PSCHED__CONTROL__BODY_CHALLENGE:
		on_challenge(L, s, m->challenge);
		break;
	case PSCHED__CONTROL__BODY_TABLE:
		if (s->have_table) {
			fail(L, "node %d: second node table", s->idx);
			break;
		}
		s->have_table = true;
		s->id = m->table->your_id;
		L->tables++;
		if (m->table->n_nodes != L->nodes)
			fail(L, "node %d: table of %zu nodes, want %u", s->idx,
			     m->table->n_nodes, L->nodes);
		/* Ids: servers 1..S, workers S+1..S+W. */
		if (s->server ? (s->id < 1 || s->id > (int)L->servers)
			      : (s->id <= (int)L->servers ||
				 s->id > (int)L->nodes))
			fail(L, "node %d (%s): id %d out of its role's range",
			     s->idx, s->server ? "server" : "worker", s->id);
		break;
	case PSCHED__CONTROL__BODY_BARRIER:
		if (m->barrier->seq != L->cur_seq ||
		    s->barrier_seen == m->barrier->seq) {
			fail(L,
			     "node %d: release of barrier %llu, waiting "
			     "for %llu",
			     s->idx, (unsigned long long)m->barrier->seq,
			     (unsigned long long)L->cur_seq);
			break;
		}
		s->barrier_seen = m->barrier->seq;
		L->released++;
		break;
	case PSCHED__CONTROL__BODY_SHUTDOWN:
		if (!s->shutdown)
			L->shutdowns++;
		s->shutdown = true;
		break;
	case PSCHED__CONTROL__BODY_ABORT:
		fail(L, "node %d: scheduler aborted: %s", s->idx,
		     m->abort->reason);
		break;
	case PSCHED__CONTROL__BODY_FAILURE:
		fail(L, "node %d: scheduler declared node %d dead: %s", s->idx,
		     m->failure->id, m->failure->reason);
		break;
	default:
		break; /* config switches etc.: not asked for here */
	}
}

/* Read what @s has and handle every complete message. */
static int on_readable(struct load *L, struct node *s)
{
	struct psd_hdr h;
	const char *why;
	Psched__Control *m;
	ssize_t r;
	size_t need;

	for (;;) {
		if (s->cap - s->len < 4096) {
			s->cap = s->cap ? s->cap * 2 : 16384;
			s->buf = realloc(s->buf, s->cap);
			if (!s->buf)
				return fail(L, "out of memory");
		}
		r = recv(s->fd, s->buf + s->len, s->cap - s->len, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (r <= 0) {
			if (s->shutdown)
				return 1;
			return fail(L,
				    "node %d: scheduler closed the "
				    "connection (%s)",
				    s->idx, r ? strerror(errno) : "EOF");
		}
		s->len += (size_t)r;
	}
	L->last_rx_us = now_us();
	while (s->len >= PSD_HDR_SIZE) {
		if (psd_hdr_decode(s->buf, 1u << 20, &h, &why))
			return fail(L, "node %d: bad header: %s", s->idx, why);
		need = PSD_HDR_SIZE + (size_t)h.length;
		if (s->len < need)
			break;
		if (h.type != PSD_MSG_CONTROL)
			return fail(L,
				    "node %d: message type %u from the "
				    "scheduler",
				    s->idx, h.type);
		m = psched__control__unpack(NULL, (size_t)h.length,
					    s->buf + PSD_HDR_SIZE);
		if (!m)
			return fail(L, "node %d: undecodable control message",
				    s->idx);
		on_control(L, s, m);
		psched__control__free_unpacked(m, NULL);
		memmove(s->buf, s->buf + need, s->len - need);
		s->len -= need;
	}
	return 0;
}

/* Handle input until @done(L) or @timeout_us passes; 0 or -ETIMEDOUT. */
static int pump(struct load *L, bool (*done)(struct load *),
		uint64_t timeout_us)
{
	struct epoll_event ev[256];
	uint64_t end = now_us() + timeout_us;
	int i, k;

	while (!done(L)) {
		uint64_t t = now_us();

		if (t >= end || L->failed)
			return -ETIMEDOUT;
		k = epoll_wait(L->ep, ev, 256, (int)((end - t) / 1000 + 1));
		for (i = 0; i < k; i++)
			if (on_readable(L, &L->n[ev[i].data.u32]) == 1)
				epoll_ctl(L->ep, EPOLL_CTL_DEL,
					  L->n[ev[i].data.u32].fd, NULL);
	}
	return 0;
}

static bool all_tables(struct load *L)
{
	return L->tables == L->nodes;
}

static bool all_released(struct load *L)
{
	return L->released == L->nodes;
}

static bool all_shutdown(struct load *L)
{
	return L->shutdowns == L->nodes;
}

static bool never(struct load *L)
{
	(void)L;
	return false;
}

/* One barrier of every node; returns microseconds from the last request
 * sent to the last release received, or 0 on failure. */
static uint64_t barrier_all(struct load *L, uint64_t seq)
{
	Psched__Barrier b = PSCHED__BARRIER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint64_t sent;
	unsigned i;

	b.group = PSCHED_GROUP_ALL;
	b.seq = seq;
	m.body_case = PSCHED__CONTROL__BODY_BARRIER;
	m.barrier = &b;
	L->cur_seq = seq;
	L->released = 0;
	for (i = 0; i < L->nodes; i++)
		if (send_ctl(&L->n[i], &m)) {
			fail(L, "node %d: barrier send failed", i);
			return 0;
		}
	sent = now_us();
	if (pump(L, all_released, (uint64_t)(L->timeout_s * 1e6))) {
		for (i = 0; i < L->nodes; i++)
			if (L->n[i].barrier_seen != seq) {
				fail(L,
				     "barrier %llu: node %u (id %d) not "
				     "released within %.0f s (%llu of %u)",
				     (unsigned long long)seq, i, L->n[i].id,
				     L->timeout_s,
				     (unsigned long long)L->released, L->nodes);
				break;
			}
		return 0;
	}
	return L->last_rx_us - sent + 1;
}

/* The scheduler's on-CPU time so far, every thread, in ns. */
static uint64_t sched_cpu_ns(pid_t pid)
{
	char path[64], line[128];
	struct dirent *e;
	uint64_t sum = 0, v;
	DIR *d;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat",
			 (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) &&
		    sscanf(line, "%lu", &v) == 1)
			sum += v;
		fclose(f);
	}
	closedir(d);
	return sum;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Start ps-scheduler on port 0 and read its port. */
static int start_scheduler(struct load *L)
{
	char ns[16], nw[16], hb[32], to[32];
	int p[2];
	FILE *f;
	char line[128];

	snprintf(ns, sizeof(ns), "%u", L->servers);
	snprintf(nw, sizeof(nw), "%u", L->nodes - L->servers);
	/* Silence between windows must not count as death. */
	snprintf(hb, sizeof(hb), "%.0f", L->window_s * 4 + 30);
	snprintf(to, sizeof(to), "%.0f", L->timeout_s);
	if (pipe(p))
		return fail(L, "pipe: %s", strerror(errno));
	L->sched_pid = fork();
	if (L->sched_pid < 0)
		return fail(L, "fork: %s", strerror(errno));
	if (!L->sched_pid) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		setenv("PS_JOB_TOKEN", (const char *)L->sec.key, 1);
		execl(L->sched_path, L->sched_path, "--root-port", "0",
		      "--num-server", ns, "--num-worker", nw,
		      "--heartbeat-timeout", hb, "--connect-timeout", to,
		      "--request-timeout", to, "--transport", "tcp",
		      (char *)NULL);
		fprintf(stderr, "sched_load: exec %s: %s\n", L->sched_path,
			strerror(errno));
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "PS_ROOT_PORT=%u", &L->port) == 1)
			break;
	if (f)
		fclose(f);
	if (!L->port)
		return fail(L, "%s printed no PS_ROOT_PORT", L->sched_path);
	return 0;
}

static int parse_args(struct load *L, int argc, char **argv)
{
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];

		if (!strcmp(a, "--scheduler"))
			L->sched_path = v;
		else if (!strcmp(a, "--nodes"))
			L->nodes = (unsigned)atoi(v);
		else if (!strcmp(a, "--servers"))
			L->servers = (unsigned)atoi(v);
		else if (!strcmp(a, "--barriers"))
			L->barriers = (unsigned)atoi(v);
		else if (!strcmp(a, "--hb-interval-ms"))
			L->hb_interval_ms = (unsigned)atoi(v);
		else if (!strcmp(a, "--window-s"))
			L->window_s = atof(v);
		else if (!strcmp(a, "--timeout-s"))
			L->timeout_s = atof(v);
		else
			break;
	}
	if (i != argc || !L->sched_path || L->servers < 1 ||
	    L->nodes <= L->servers || L->nodes > 100000 || !L->barriers ||
	    !L->hb_interval_ms || L->window_s <= 0 || L->timeout_s <= 0) {
		fprintf(stderr,
			"usage: sched_load --scheduler PATH [--nodes N (>S)] "
			"[--servers S (>=1)] [--barriers B (>=1)]\n"
			"       [--hb-interval-ms MS] [--window-s SEC] "
			"[--timeout-s SEC]\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct load L = { .nodes = 1000,
			  .servers = 8,
			  .barriers = 20,
			  .hb_interval_ms = 100,
			  .window_s = 5,
			  .timeout_s = 60 };
	Psched__Heartbeat hbm = PSCHED__HEARTBEAT__INIT;
	Psched__Finalize fin = PSCHED__FINALIZE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	struct rlimit rl;
	uint64_t t0, t_table, t_form, *lat, cpu0, cpu1, cpu2, hbs = 0, next,
							      end;
	unsigned i, b;
	int st = -1, ret = 0;
	double idle_us, busy_us, per_hb;

	if (parse_args(&L, argc, argv))
		return 2;
	/* The job's secret: the caller's PS_JOB_TOKEN, else a fresh one
	 * (the scheduler gets it in its environment). */
	{
		const char *tok = getenv("PS_JOB_TOKEN");
		uint8_t r[PSD_AUTH_NONCE_LEN];
		unsigned k;

		memset(&L.sec, 0, sizeof(L.sec));
		if (tok && *tok && strlen(tok) < PSD_AUTH_SECRET_MAX) {
			L.sec.len = strlen(tok);
			memcpy(L.sec.key, tok, L.sec.len);
		} else {
			if (psd_auth_nonce(r)) {
				fprintf(stderr,
					"sched_load: no random secret\n");
				return 1;
			}
			for (k = 0; k < sizeof(r); k++)
				snprintf((char *)L.sec.key + 2 * k, 3, "%02x",
					 r[k]);
			L.sec.len = 2 * sizeof(r);
		}
	}
	/* One socket per simulated node. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < L.nodes + 64) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	L.n = calloc(L.nodes, sizeof(*L.n));
	lat = calloc(L.barriers, sizeof(*lat));
	L.ep = epoll_create1(EPOLL_CLOEXEC);
	if (!L.n || !lat || L.ep < 0 || start_scheduler(&L))
		goto out;

	/* Form the job: servers first, as a launcher would start them. */
	t0 = now_us();
	for (i = 0; i < L.nodes; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };

		L.n[i].idx = (int)i;
		L.n[i].server = i < L.servers;
		if (sim_register(&L, &L.n[i]))
			goto out;
		epoll_ctl(L.ep, EPOLL_CTL_ADD, L.n[i].fd, &ev);
	}
	if (pump(&L, all_tables, (uint64_t)(L.timeout_s * 1e6))) {
		fail(&L, "%u of %u nodes got the node table within %.0f s",
		     L.tables, L.nodes, L.timeout_s);
		goto out;
	}
	t_table = L.last_rx_us - t0;
	/* psched_node_create() ends with a barrier of every node. */
	if (!barrier_all(&L, 1))
		goto out;
	t_form = L.last_rx_us - t0;

	for (b = 0; b < L.barriers; b++) {
		lat[b] = barrier_all(&L, 2 + b);
		if (!lat[b])
			goto out;
	}
	qsort(lat, L.barriers, sizeof(*lat), cmp_u64);

	/* Idle window, then a heartbeat window of the same length: every
	 * node sends one heartbeat per interval, spread evenly. */
	cpu0 = sched_cpu_ns(L.sched_pid);
	pump(&L, never, (uint64_t)(L.window_s * 1e6));
	cpu1 = sched_cpu_ns(L.sched_pid);
	m.body_case = PSCHED__CONTROL__BODY_HEARTBEAT;
	m.heartbeat = &hbm;
	next = now_us();
	end = next + (uint64_t)(L.window_s * 1e6);
	i = 0;
	while (now_us() < end && !L.failed) {
		uint64_t step = (uint64_t)L.hb_interval_ms * 1000u / L.nodes;

		hbm.time_us = now_us();
		if (send_ctl(&L.n[i], &m)) {
			fail(&L, "node %u: heartbeat send failed", i);
			goto out;
		}
		hbs++;
		i = (i + 1) % L.nodes;
		next += step ? step : 1;
		if (next > now_us() + 1000)
			pump(&L, never, next - now_us());
	}
	/* Let the scheduler drain what was sent before reading its CPU. */
	pump(&L, never, 200000);
	cpu2 = sched_cpu_ns(L.sched_pid);
	idle_us = (double)(cpu1 - cpu0) / 1e3;
	busy_us = (double)(cpu2 - cpu1) / 1e3;
	per_hb = (busy_us - idle_us) / (double)hbs;

	/* Workers finalize; the scheduler shuts every node down. */
	m.body_case = PSCHED__CONTROL__BODY_FINALIZE;
	m.finalize = &fin;
	for (i = L.servers; i < L.nodes; i++)
		if (send_ctl(&L.n[i], &m)) {
			fail(&L, "node %u: finalize send failed", i);
			goto out;
		}
	if (pump(&L, all_shutdown, (uint64_t)(L.timeout_s * 1e6))) {
		fail(&L, "%u of %u nodes got the shutdown within %.0f s",
		     L.shutdowns, L.nodes, L.timeout_s);
		goto out;
	}
	for (i = 0; i < L.nodes; i++)
		close(L.n[i].fd);
	for (i = 0; i < (unsigned)(L.timeout_s * 10); i++) {
		ret = waitpid(L.sched_pid, &st, WNOHANG);
		if (ret == L.sched_pid)
			break;
		usleep(100000);
	}
	if (ret != L.sched_pid)
		fail(&L, "the scheduler did not exit after the shutdown");
	else if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail(&L, "the scheduler ended with status 0x%x", st);
	L.sched_pid = 0;

	printf("RESULT nodes=%u servers=%u workers=%u table_ms=%.1f "
	       "form_ms=%.1f barriers=%u barrier_median_ms=%.2f "
	       "barrier_max_ms=%.2f heartbeats=%llu hb_per_s=%.0f "
	       "sched_cpu_idle_ms=%.1f sched_cpu_hb_ms=%.1f "
	       "cpu_us_per_heartbeat=%.2f\n",
	       L.nodes, L.servers, L.nodes - L.servers, t_table / 1e3,
	       t_form / 1e3, L.barriers, lat[L.barriers / 2] / 1e3,
	       lat[L.barriers - 1] / 1e3, (unsigned long long)hbs,
	       (double)hbs / L.window_s, idle_us / 1e3, busy_us / 1e3, per_hb);
	printf("%u nodes (%u servers, %u workers): node table to all after "
	       "%.1f ms, job formed (first barrier released) after %.1f ms;\n"
	       "barrier of all nodes: median %.2f ms, max %.2f ms over %u;\n"
	       "scheduler CPU: %.1f ms idle vs %.1f ms with %llu heartbeats "
	       "in %.1f s = %.2f us per heartbeat\n",
	       L.nodes, L.servers, L.nodes - L.servers, t_table / 1e3,
	       t_form / 1e3, lat[L.barriers / 2] / 1e3,
	       lat[L.barriers - 1] / 1e3, L.barriers, idle_us / 1e3,
	       busy_us / 1e3, (unsigned long long)hbs, L.window_s, per_hb);
out:
	if (L.sched_pid > 0) {
		kill(L.sched_pid, SIGKILL);
		waitpid(L.sched_pid, NULL, 0);
	}
	for (i = 0; L.n && i < L.nodes; i++)
		free(L.n[i].buf);
	free(L.n);
	free(lat);
	if (L.ep >= 0)
		close(L.ep);
	return L.failed ? 1 : 0;
}
