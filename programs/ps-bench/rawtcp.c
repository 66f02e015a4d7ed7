// SPDX-License-Identifier: MIT
/* ps-bench's "raw" baseline: a plain TCP socket pair with the same request
 * pattern (N bytes one way, N bytes or an ack back, as many outstanding). */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "psched.h"

#include "bench.h"

/* ---- raw TCP baseline ------------------------------------------------- */

struct raw_msg {
	uint64_t op; /* enum bmode */
	uint64_t len;
};

static int full_io(int fd, void *buf, size_t len, bool wr)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void raw_sockopts(int fd)
{
	int one = 1, buf = 4 << 20;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

/* The echo side: like a server that stores but does not sum, each of the
 * @nk keys in its own place (messages take the keys in turn; @nk 1: one
 * place reused, --hot-baselines). */
static void raw_server(int lfd, uint64_t size, unsigned nk)
{
	int fd = accept(lfd, NULL, NULL);
	char *store = calloc(nk, size);
	struct raw_msg m, ack = { 0, 0 };
	unsigned k = 0;
	char *buf;

	if (fd < 0 || !store)
		_exit(1);
	raw_sockopts(fd);
	while (!full_io(fd, &m, sizeof(m), false)) {
		buf = store + (uint64_t)k * size;
		k = (k + 1) % nk;
		if (m.op != MODE_PULL && full_io(fd, buf, size, false))
			break;
		if (m.op == MODE_PUSH) {
			if (full_io(fd, &ack, sizeof(ack), true))
				break;
			continue;
		}
		if (full_io(fd, &m, sizeof(m), true) ||
		    full_io(fd, buf, size, true))
			break;
	}
	_exit(0);
}

struct raw_writer {
	int fd;
	enum bmode mode;
	uint64_t size;
	unsigned nk;
	char *buf; /* places of size bytes, key i pushed from i % places */
	unsigned places;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned go; /* iterations requested */
	bool stop;
};

static void *raw_writer_main(void *arg)
{
	struct raw_writer *w = arg;
	struct raw_msg m = { w->mode, w->size };
	unsigned done = 0, i;

	for (;;) {
		pthread_mutex_lock(&w->lock);
		while (w->go == done && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		pthread_mutex_unlock(&w->lock);
		if (w->stop)
			return NULL;
		for (i = 0; i < w->nk; i++)
			if (full_io(w->fd, &m, sizeof(m), true) ||
			    (w->mode != MODE_PULL &&
			     full_io(w->fd,
				     w->buf + (uint64_t)(i % w->places) *
						      w->size,
				     w->size, true)))
				return NULL;
		done++;
	}
}

static int raw_connect(uint64_t size, unsigned nk, pid_t *child)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int lfd, fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &al))
		return -1;
	*child = fork();
	if (*child == 0)
		raw_server(lfd, size, nk);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	raw_sockopts(fd);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Gbit/s of a plain socket pair with the same request pattern (one window
 * of o->seconds, after 2 warm-up iterations). */
double bench_raw_tcp(const struct bopts *o, uint64_t size, unsigned nk)
{
	/* Each key its own place on both sides, unless --hot-baselines. */
	unsigned places = o->hot_baselines ? 1 : nk;
	struct raw_writer w = {
		.mode = o->mode, .size = size, .nk = nk, .places = places
	};
	struct raw_msg m;
	double gb[1] = { 0 }, t0;
	pthread_t th;
	pid_t child;
	char *rbuf = calloc(places, size); /* pull answers */
	unsigned r, i, it;
	int ok = 1;

	w.buf = malloc((size_t)places * size);
	if (!rbuf || !w.buf) {
		free(rbuf);
		free(w.buf);
		return 0;
	}
	memset(w.buf, 1, (size_t)places * size);
	w.fd = raw_connect(size, places, &child);
	if (w.fd < 0) {
		free(rbuf);
		free(w.buf);
		return 0;
	}
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	pthread_create(&th, NULL, raw_writer_main, &w);
	for (r = 0; r < 2 && ok; r++) {
		t0 = bench_now_s();
		for (it = 0; ok && (it < 3 || bench_now_s() - t0 < o->seconds);
		     it++) {
			pthread_mutex_lock(&w.lock);
			w.go++;
			pthread_cond_signal(&w.cond);
			pthread_mutex_unlock(&w.lock);
			for (i = 0; i < nk && ok; i++)
				ok = !full_io(w.fd, &m, sizeof(m), false) &&
				     (o->mode == MODE_PUSH ||
				      !full_io(w.fd,
					       rbuf + (uint64_t)(i % places) *
							       size,
					       size, false));
			if (r == 0 && it == 1)
				break; /* first round = warm-up */
		}
		if (r > 0)
			gb[r - 1] = (double)it * nk * size * 8 /
				    (bench_now_s() - t0) / 1e9;
	}
	pthread_mutex_lock(&w.lock);
	w.stop = true;
	pthread_cond_signal(&w.cond);
	pthread_mutex_unlock(&w.lock);
	shutdown(w.fd, SHUT_RDWR);
	pthread_join(th, NULL);
	close(w.fd);
	waitpid(child, NULL, 0);
	free(rbuf);
	free(w.buf);
	return ok ? gb[0] : 0;
}
