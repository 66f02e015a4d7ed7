// SPDX-License-Identifier: MIT
/*
 * ps-bench's plain-TCP baselines (the table's tcp1 and tcpN): plain
 * sockets moving the same bytes per iteration as psched, with none of
 * ps-bench's request pattern: large writes (up to 4 MiB), big socket
 * buffers, and the bytes split over one or several streams.  Per iteration each
 * stream sends its share and gets a 1-byte ack (push), or sends a 1-byte
 * request and gets its share (pull), or gets its share echoed while it sends
 * (pushpull); the iteration ends when every stream is done, as psched's ends
 * when every key is.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "psched.h"

#include "bench.h"

#define TM_WRITE   (4u << 20) /* bytes per send()/recv() at most */
#define TM_SOCKBUF (4 << 20)
#define TM_STREAMS BENCH_TCP_STREAMS_MAX
/* Receivers wake when this much (or all that is still due) has come, as
 * psched's TCP transport does (SO_RCVLOWAT, common/transport/tcp.c). */
#define TM_LOWAT (512 << 10)

struct tm_hdr {
	uint64_t mode;	/* enum bmode */
	uint64_t bytes; /* this stream's share of an iteration */
	uint64_t cap;	/* bytes of the server's buffer (tm_buf_len()) */
};

/* The client's iterations: the main thread starts one (gen++), every
 * stream thread runs it, the last one done wakes the main thread. */
struct tm_sync {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t gen;
	unsigned pending;
	bool stop;
};

struct tm_stream {
	int fd;
	enum bmode mode;
	uint64_t bytes;
	char *src;    /* the stream's share: sent from */
	char *dst;    /* the stream's share: received into */
	uint64_t cap; /* bytes of each (tm_buf_len()) */
	struct tm_sync *sync;
	int err;
};

static void tm_sockopts(int fd)
{
	int one = 1, buf = TM_SOCKBUF;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

/* The receive low-water mark of @fd for @due more bytes; *@cur is the
 * mark set now (0: not known), so an unchanged one costs no call. */
static void tm_lowat(int fd, uint64_t due, int *cur)
{
	int v = due < TM_LOWAT ? (int)due : TM_LOWAT;

	if (v != *cur &&
	    !setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)))
		*cur = v;
}

/*
 * Send or receive exactly @len bytes from/into @buf, in pieces of at most
 * TM_WRITE.  Reads wait in poll() under the low-water mark, then take
 * what is there without blocking: a blocking recv() that has copied part
 * of its bytes waits for a whole mark more, which may never come.
 */
static int tm_io(int fd, char *buf, uint64_t len, bool wr)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int mark = 0;
	ssize_t n;

	while (len) {
		size_t want = len < TM_WRITE ? (size_t)len : TM_WRITE;

		if (!wr) {
			tm_lowat(fd, len, &mark);
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -EIO;
		}
		n = wr ? send(fd, buf, want, MSG_NOSIGNAL)
		       : recv(fd, buf, want, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -EIO;
		len -= (uint64_t)n;
		buf += n;
	}
	return 0;
}

/* tm_io() of @len bytes through a buffer of @cap bytes, from its start,
 * wrapping round when @len is larger. */
static int tm_xfer_buf(int fd, char *buf, uint64_t cap, uint64_t len, bool wr)
{
	uint64_t at = 0, k;
	int ret = 0;

	while (len && !ret) {
		k = len < cap - at ? len : cap - at;
		ret = tm_io(fd, buf + at, k, wr);
		len -= k;
		at = (at + k) % cap;
	}
	return ret;
}

/* Bytes a stream's buffers hold for a share of @bytes: the share itself
 * (every byte of the workload has its own place on both sides, as every
 * tensor byte has in psched), or with @hot one TM_WRITE buffer reused
 * (--hot-baselines: the bytes stay in cache, which no program that keeps
 * them does). */
static uint64_t tm_buf_len(uint64_t bytes, bool hot)
{
	if (hot && bytes > TM_WRITE)
		return TM_WRITE;
	return bytes ? bytes : 1;
}

/* Server side of one stream, in a child process: receives into its
 * share and answers from it. */
static void tm_serve(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	struct tm_hdr h;
	uint64_t cap, at = 0;
	char *buf;
	ssize_t n;
	char c = 0;

	if (fd < 0)
		_exit(1);
	tm_sockopts(fd);
	if (recv(fd, &h, sizeof(h), MSG_WAITALL) != sizeof(h))
		_exit(1);
	cap = h.cap;
	buf = cap ? malloc(cap) : NULL;
	if (!buf)
		_exit(1);
	memset(buf, 0, cap);
	for (;;) {
		if (h.mode == MODE_PUSH) {
			if (tm_xfer_buf(fd, buf, cap, h.bytes, false) ||
			    tm_io(fd, &c, 1, true))
				break;
		} else if (h.mode == MODE_PULL) {
			if (tm_io(fd, &c, 1, false) ||
			    tm_xfer_buf(fd, buf, cap, h.bytes, true))
				break;
		} else {
			/* Echo as it arrives: the client reads while it
			 * writes. */
			size_t want = cap - at < TM_WRITE ? cap - at : TM_WRITE;

			n = recv(fd, buf + at, want, 0);
			if (n <= 0 || tm_io(fd, buf + at, (uint64_t)n, true))
				break;
			at = (at + (uint64_t)n) % cap;
		}
	}
	_exit(0);
}

/* One iteration of one stream: send @out bytes from @src while receiving
 * @in into @dst, both buffers of @cap bytes walked from their start. */
static int tm_xfer(int fd, char *src, char *dst, uint64_t cap, uint64_t out,
		   uint64_t in)
{
	struct pollfd p = { .fd = fd };
	uint64_t so = 0, ro = 0, k;
	int mark = 0;
	ssize_t n;

	if (in)
		tm_lowat(fd, in, &mark);
	while (out || in) {
		p.events = (short)((out ? POLLOUT : 0) | (in ? POLLIN : 0));
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
			return -EIO;
		if (out && (p.revents & POLLOUT)) {
			k = out < cap - so ? out : cap - so;
			n = send(fd, src + so, k < TM_WRITE ? k : TM_WRITE,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -errno;
			k = n > 0 ? (uint64_t)n : 0;
			out -= k;
			so = (so + k) % cap;
		}
		if (in && (p.revents & POLLIN)) {
			k = in < cap - ro ? in : cap - ro;
			n = recv(fd, dst + ro, k < TM_WRITE ? k : TM_WRITE,
				 MSG_DONTWAIT);
			if (n == 0 ||
			    (n < 0 && errno != EAGAIN && errno != EINTR))
				return -EIO;
			k = n > 0 ? (uint64_t)n : 0;
			in -= k;
			ro = (ro + k) % cap;
			if (k && in)
				tm_lowat(fd, in, &mark);
		}
	}
	return 0;
}

static void *tm_stream_main(void *arg)
{
	struct tm_stream *s = arg;
	struct tm_sync *y = s->sync;
	uint64_t out = s->mode == MODE_PULL ? 1 : s->bytes;
	uint64_t in = s->mode == MODE_PUSH ? 1 : s->bytes;
	uint64_t seen = 0;

	for (;;) {
		pthread_mutex_lock(&y->lock);
		while (y->gen == seen && !y->stop)
			pthread_cond_wait(&y->cond, &y->lock);
		seen = y->gen;
		pthread_mutex_unlock(&y->lock);
		if (y->stop)
			return NULL;
		/* One direction at a time where one suffices (blocking
		 * writes, reads woken under the mark): fewer system
		 * calls than polling both. */
		if (!s->err && s->mode != MODE_PUSHPULL)
			s->err = tm_xfer_buf(s->fd, s->src, s->cap, out, true)
					 ?: tm_xfer_buf(s->fd, s->dst, s->cap,
							in, false);
		else if (!s->err)
			s->err =
				tm_xfer(s->fd, s->src, s->dst, s->cap, out, in);
		pthread_mutex_lock(&y->lock);
		if (--y->pending == 0)
			pthread_cond_broadcast(&y->cond);
		pthread_mutex_unlock(&y->lock);
	}
}

/* Connect @n streams to @n server children; 0 or -errno. */
static int tm_connect(struct tm_stream *s, unsigned n, enum bmode mode,
		      pid_t *kids)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct tm_hdr h = { .mode = mode };
	unsigned i;
	int lfd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		return -errno;
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(lfd, (int)n) || getsockname(lfd, (struct sockaddr *)&a, &al))
		goto err_close;
	for (i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			goto err_close;
		if (kids[i] == 0)
			tm_serve(lfd);
	}
	for (i = 0; i < n; i++) {
		s[i].fd = socket(AF_INET, SOCK_STREAM, 0);
		if (s[i].fd < 0)
			goto err_close;
		tm_sockopts(s[i].fd);
		h.bytes = s[i].bytes;
		h.cap = s[i].cap;
		if (connect(s[i].fd, (struct sockaddr *)&a, sizeof(a)) ||
		    send(s[i].fd, &h, sizeof(h), MSG_NOSIGNAL) != sizeof(h))
			goto err_close;
	}
	close(lfd);
	return 0;

err_close:
	close(lfd);
	return -EIO;
}

/* One iteration over all @n streams; the first error of any. */
static int tm_iter(struct tm_sync *y, struct tm_stream *s, unsigned n)
{
	unsigned i;
	int err = 0;

	pthread_mutex_lock(&y->lock);
	y->gen++;
	y->pending = n;
	pthread_cond_broadcast(&y->cond);
	while (y->pending)
		pthread_cond_wait(&y->cond, &y->lock);
	pthread_mutex_unlock(&y->lock);
	for (i = 0; i < n && !err; i++)
		err = s[i].err;
	return err;
}

/* Iterations until @seconds are up (at least 3, after 2 warm-up ones);
 * the iterations of the window, 0 on error. */
static uint64_t tm_run(struct tm_sync *y, struct tm_stream *s, unsigned n,
		       double seconds, double *el)
{
	uint64_t it;
	double t0 = 0;
	int err = 0;

	for (it = 0; !err; it++) {
		if (it == 2)
			t0 = bench_now_s();
		if (it >= 5 && bench_now_s() - t0 >= seconds)
			break;
		err = tm_iter(y, s, n);
	}
	*el = bench_now_s() - t0;
	return err ? 0 : it - 2;
}

static void tm_stop(struct tm_sync *y)
{
	pthread_mutex_lock(&y->lock);
	y->stop = true;
	pthread_cond_broadcast(&y->cond);
	pthread_mutex_unlock(&y->lock);
}

double bench_tcp_max(const struct bopts *o, uint64_t bytes, unsigned n)
{
	struct tm_sync y = { .gen = 0 };
	struct tm_stream s[TM_STREAMS];
	pid_t kids[TM_STREAMS];
	pthread_t th[TM_STREAMS];
	uint64_t iters = 0;
	double el = 0;
	unsigned i, nth = 0;

	n = n < 1 ? 1 : n > TM_STREAMS ? TM_STREAMS : n;
	memset(s, 0, sizeof(s));
	pthread_mutex_init(&y.lock, NULL);
	pthread_cond_init(&y.cond, NULL);
	for (i = 0; i < n; i++) {
		s[i].fd = -1;
		s[i].mode = o->mode;
		s[i].sync = &y;
		s[i].bytes = bytes / n + (i == 0 ? bytes % n : 0);
		s[i].cap = tm_buf_len(s[i].bytes, o->hot_baselines);
		s[i].src = malloc(s[i].cap);
		s[i].dst = malloc(s[i].cap);
		kids[i] = -1;
	}
	for (i = 0; i < n; i++) {
		if (!s[i].src || !s[i].dst)
			goto out;
		/* Pages in, as a tensor's are before it is pushed. */
		memset(s[i].src, 1, s[i].cap);
		memset(s[i].dst, 0, s[i].cap);
	}
	if (tm_connect(s, n, o->mode, kids))
		goto out;
	for (nth = 0; nth < n; nth++)
		if (pthread_create(&th[nth], NULL, tm_stream_main, &s[nth]))
			break;
	if (nth == n)
		iters = tm_run(&y, s, n, o->seconds, &el);
out:
	tm_stop(&y);
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	/* Every stream closed first: a child serves whichever it accepted. */
	for (i = 0; i < n; i++) {
		if (s[i].fd >= 0)
			close(s[i].fd);
		free(s[i].src);
		free(s[i].dst);
	}
	for (i = 0; i < n; i++) {
		if (kids[i] > 0 && !iters) /* may still wait in accept() */
			kill(kids[i], SIGKILL);
		if (kids[i] > 0)
			waitpid(kids[i], NULL, 0);
	}
	pthread_mutex_destroy(&y.lock);
	pthread_cond_destroy(&y.cond);
	return iters && el > 0 ? (double)iters * bytes * 8 / el / 1e9 : 0;
}
