// SPDX-License-Identifier: MIT
/*
 * Serving the metrics: the van thread publishes a rendered snapshot
 * (psd_metrics_publish()); the ps-metrics thread answers GET and HEAD
 * /metrics with the latest one, one client at a time, each given at most
 * PSD_METRICS_CLIENT_MS for its whole request and answer.  A client that
 * sends garbage, stalls or never reads costs only its own answer: the
 * thread never touches the scheduler's state.
 */
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "metrics.h"

struct psd_metrics {
	int lfd;     /* listener, -1 none */
	int wake[2]; /* destroy writes to wake[1] */
	unsigned port;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock; /* guards snap */
	struct psd_mbuf snap; /* served; len 0: nothing yet */
	struct psd_mbuf work; /* van thread: the next snapshot */
	struct psd_mbuf out;  /* ps-metrics thread: the answer */
	uint64_t render_ms;   /* last snapshot, 0 never */
	int file_fd;	      /* JSON lines, -1 none */
	char file[256];
	unsigned interval_ms;
	uint64_t file_ms; /* last line, 0 never */
};

/* The request line "METHOD SP TARGET SP HTTP/1.x" of @req. */
int psd_metrics_http_status(const char *req, size_t len, bool *body)
{
	const char *end = memchr(req, '\n', len), *sp1, *sp2;
	size_t mlen, plen, i;

	*body = false;
	if (!end)
		return 400;
	len = (size_t)(end - req);
	if (len && req[len - 1] == '\r')
		len--;
	for (i = 0; i < len; i++)
		if ((unsigned char)req[i] < 0x20 || req[i] == 0x7f)
			return 400;
	sp1 = memchr(req, ' ', len);
	if (!sp1 || sp1 == req)
		return 400;
	mlen = (size_t)(sp1 - req);
	sp2 = memchr(sp1 + 1, ' ', len - mlen - 1);
	if (!sp2 || sp2 == sp1 + 1 || sp1[1] != '/')
		return 400;
	plen = (size_t)(sp2 - sp1 - 1);
	if ((size_t)(req + len - sp2 - 1) != 8 ||
	    memcmp(sp2 + 1, "HTTP/1.", 7) || sp2[8] < '0' || sp2[8] > '9')
		return 400;
	for (i = 0; i < mlen; i++)
		if (req[i] < 'A' || req[i] > 'Z')
			return 400;
	if (!(mlen == 3 && !memcmp(req, "GET", 3)) &&
	    !(mlen == 4 && !memcmp(req, "HEAD", 4)))
		return 405;
	if (!(plen == 8 || (plen > 8 && sp1[9] == '?')) ||
	    memcmp(sp1 + 1, "/metrics", 8))
		return 404;
	*body = mlen == 3;
	return 200;
}

static int met_left(uint64_t deadline)
{
	uint64_t now = psd_now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

/* Wait for @ev on @fd until @deadline: 1 ready, 0 timed out or woken. */
static int met_wait(struct psd_metrics *m, int fd, short ev, uint64_t deadline)
{
	struct pollfd p[2] = { { .fd = fd, .events = ev },
			       { .fd = m->wake[0], .events = POLLIN } };
	int left, ret;

	for (;;) {
		left = met_left(deadline);
		if (!left)
			return 0;
		ret = poll(p, 2, left);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret <= 0 || p[1].revents)
			return 0;
		return 1;
	}
}

/* The request head into @buf: its length, or 0 when the client did not
 * send it in time or hung up; @whole: it ended within the limit. */
static size_t met_read_head(struct psd_metrics *m, int fd, char *buf,
			    uint64_t deadline, bool *whole)
{
	size_t len = 0;
	ssize_t got;

	*whole = false;
	while (len < PSD_METRICS_REQ_MAX) {
		if (!met_wait(m, fd, POLLIN, deadline))
			return 0;
		got = recv(fd, buf + len, PSD_METRICS_REQ_MAX - len, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return 0;
		len += (size_t)got;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n")) {
			*whole = true;
			return len;
		}
		if (memchr(buf, '\0', len))
			return len; /* a NUL: the request line is refused */
	}
	return len; /* a head this long is refused */
}

static void met_send_all(struct psd_metrics *m, int fd, const char *p,
			 size_t len, uint64_t deadline)
{
	ssize_t put;

	while (len) {
		if (!met_wait(m, fd, POLLOUT, deadline))
			return;
		put = send(fd, p, len, MSG_NOSIGNAL);
		if (put < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (put <= 0)
			return;
		p += put;
		len -= (size_t)put;
	}
}

static const char *met_reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	default:
		return "Service Unavailable";
	}
}

/* Fill m->out with the answer to @req (@whole: its head ended). */
static void met_answer(struct psd_metrics *m, const char *req, size_t len,
		       bool whole)
{
	struct psd_mbuf *o = &m->out;
	const char *text = "";
	bool body;
	int status = psd_metrics_http_status(req, len, &body);
	size_t blen = 0, head;

	if (!whole)
		status = 400; /* a head longer than PSD_METRICS_REQ_MAX */

	o->len = 0;
	o->oom = false;
	psd_mbuf_printf(o, "HTTP/1.1 ");
	head = o->len;
	pthread_mutex_lock(&m->lock);
	if (status == 200 && !m->snap.len)
		status = 503;
	if (status == 200) {
		blen = m->snap.len;
		psd_mbuf_printf(
			o,
			"200 OK\r\nContent-Type: text/plain; "
			"version=0.0.4; charset=utf-8\r\n"
			"Content-Length: %zu\r\nConnection: close\r\n\r\n",
			blen);
		if (body)
			psd_mbuf_printf(o, "%.*s", (int)blen, m->snap.p);
	}
	pthread_mutex_unlock(&m->lock);
	if (status == 200)
		return;
	if (status == 405)
		text = "only GET and HEAD\n";
	else if (status == 404)
		text = "the metrics are at /metrics\n";
	else if (status == 503)
		text = "no metrics yet\n";
	else
		text = "bad request\n";
	o->len = head;
	psd_mbuf_printf(o,
			"%d %s\r\nContent-Type: text/plain\r\n%s"
			"Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
			status, met_reason(status),
			status == 405 ? "Allow: GET, HEAD\r\n" : "",
			strlen(text), text);
}

/*
 * After the answer: read what the client still sends until it closes
 * (within the deadline), so that closing with unread bytes does not reset
 * the connection before the client read the answer.
 */
static void met_drain(struct psd_metrics *m, int fd, char *buf,
		      uint64_t deadline)
{
	size_t total = 0;
	ssize_t got;

	while (total < (64u << 10) && met_wait(m, fd, POLLIN, deadline)) {
		got = recv(fd, buf, PSD_METRICS_REQ_MAX, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return;
		total += (size_t)got;
	}
}

static void met_serve(struct psd_metrics *m, int fd)
{
	uint64_t deadline = psd_now_ms() + PSD_METRICS_CLIENT_MS;
	char req[PSD_METRICS_REQ_MAX + 1];
	bool whole;
	size_t len;

	len = met_read_head(m, fd, req, deadline, &whole);
	if (!len)
		return;
	met_answer(m, req, len, whole);
	if (m->out.oom)
		return;
	met_send_all(m, fd, m->out.p, m->out.len, deadline);
	shutdown(fd, SHUT_WR);
	met_drain(m, fd, req, deadline);
}

static void *met_main(void *arg)
{
	struct psd_metrics *m = arg;
	struct pollfd p[2] = { { .fd = m->lfd, .events = POLLIN },
			       { .fd = m->wake[0], .events = POLLIN } };
	int fd;

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		met_serve(m, fd);
		close(fd);
	}
	return NULL;
}

static int met_listen(struct psd_metrics *m, const char *addr, unsigned port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	char ps[16];
	int one = 1, ret;

	snprintf(ps, sizeof(ps), "%u", port);
	ret = getaddrinfo(addr, ps, &hints, &ai);
	if (ret)
		return psd_set_errmsg(-EINVAL, "metrics address '%s': %s", addr,
				      gai_strerror(ret));
	m->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->lfd < 0)
		goto err;
	setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(m->lfd, ai->ai_addr, ai->ai_addrlen) || listen(m->lfd, 64) ||
	    getsockname(m->lfd, (struct sockaddr *)&sa, &salen))
		goto err;
	m->port = ntohs(sa.ss_family == AF_INET6
				? ((struct sockaddr_in6 *)&sa)->sin6_port
				: ((struct sockaddr_in *)&sa)->sin_port);
	freeaddrinfo(ai);
	return 0;
err:
	ret = psd_neg_errno();
	freeaddrinfo(ai);
	return psd_set_errmsg(ret, "metrics port %s:%u: %s", addr, port,
			      psched_strerror(ret));
}

static int met_start(struct psd_metrics *m, const char *addr, unsigned port)
{
	int ret = met_listen(m, addr, port);

	if (ret)
		return ret;
	if (pipe2(m->wake, O_CLOEXEC))
		return psd_set_errmsg(psd_neg_errno(),
				      "metrics: cannot make a pipe");
	ret = -pthread_create(&m->thread, NULL, met_main, m);
	if (ret)
		return psd_set_errmsg(ret, "cannot start the metrics thread");
	pthread_setname_np(m->thread, "ps-metrics");
	m->started = true;
	psd_info("metrics: http://%s:%u/metrics", addr, m->port);
	return 0;
}

int psd_metrics_create(const char *addr, int port, const char *file,
		       unsigned interval_ms, struct psd_metrics **out)
{
	struct psd_metrics *m = calloc(1, sizeof(*m));
	int ret = 0;

	if (!m)
		return -ENOMEM;
	m->lfd = -1;
	m->wake[0] = m->wake[1] = -1;
	m->file_fd = -1;
	m->interval_ms = interval_ms ? interval_ms : 10000;
	pthread_mutex_init(&m->lock, NULL);
	if (file && *file) {
		snprintf(m->file, sizeof(m->file), "%s", file);
		m->file_fd = open(
			file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (m->file_fd < 0)
			ret = psd_set_errmsg(psd_neg_errno(),
					     "metrics file '%s': %s", file,
					     strerror(errno));
	}
	if (!ret && port >= 0)
		ret = met_start(m, addr, (unsigned)port);
	if (ret) {
		psd_metrics_destroy(m);
		return ret;
	}
	*out = m;
	return 0;
}

void psd_metrics_destroy(struct psd_metrics *m)
{
	if (!m)
		return;
	if (m->started) {
		(void)!write(m->wake[1], "x", 1);
		pthread_join(m->thread, NULL);
	}
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->wake[0] >= 0) {
		close(m->wake[0]);
		close(m->wake[1]);
	}
	if (m->file_fd >= 0)
		close(m->file_fd);
	psd_mbuf_fini(&m->snap);
	psd_mbuf_fini(&m->work);
	psd_mbuf_fini(&m->out);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

unsigned psd_metrics_port(const struct psd_metrics *m)
{
	return m ? m->port : 0;
}

bool psd_metrics_due(const struct psd_metrics *m, uint64_t now_ms)
{
	if (!m)
		return false;
	if (m->started && now_ms - m->render_ms >= PSD_METRICS_RENDER_MS)
		return true;
	return m->file_fd >= 0 && now_ms - m->file_ms >= m->interval_ms;
}

static void met_write_line(struct psd_metrics *m,
			   const struct psd_metrics_job *job)
{
	struct timespec ts;
	struct psd_mbuf b = { 0 };

	clock_gettime(CLOCK_REALTIME, &ts);
	psd_metrics_render_json(job, (double)ts.tv_sec + ts.tv_nsec / 1e9, &b);
	psd_mbuf_printf(&b, "\n");
	if (!b.oom && write(m->file_fd, b.p, b.len) != (ssize_t)b.len)
		psd_warn("metrics file '%s': short write: %s", m->file,
			 strerror(errno));
	psd_mbuf_fini(&b);
}

void psd_metrics_publish(struct psd_metrics *m,
			 const struct psd_metrics_job *job, uint64_t now_ms)
{
	struct psd_mbuf tmp;

	if (m->file_fd >= 0 && now_ms - m->file_ms >= m->interval_ms) {
		m->file_ms = now_ms;
		met_write_line(m, job);
	}
	if (!m->started || now_ms - m->render_ms < PSD_METRICS_RENDER_MS)
		return;
	m->render_ms = now_ms;
	m->work.len = 0;
	m->work.oom = false;
	psd_metrics_render(job, &m->work);
	if (m->work.oom)
		return; /* the last snapshot stays */
	pthread_mutex_lock(&m->lock);
	tmp = m->snap;
	m->snap = m->work;
	m->work = tmp;
	pthread_mutex_unlock(&m->lock);
}
