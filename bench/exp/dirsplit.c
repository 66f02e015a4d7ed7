// SPDX-License-Identifier: MIT
/*
 * dirsplit: an experiment, not part of the build.  ps-bench's push+pull
 * pattern (40 requests of 1 MiB written back to back by a sender thread,
 * each answered with 1 MiB, read by another thread) between two plain
 * processes over loopback, with the server's answers either on the
 * request's socket (mode 0, psched today) or on a second socket, one per
 * direction (mode 1, ps-lite's layout); mode 2 adds a server thread that
 * sends the answers while another receives.  Prints Gbit/s of one window.
 *
 *   cc -O2 -o /tmp/dirsplit bench/exp/dirsplit.c -lpthread
 *   for r in 1 2 3 4 5 6; do for m in 0 1 2; do /tmp/dirsplit $m 1; done; done
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SZ   (1u << 20)
#define NK   40
#define RING 4

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int io(int fd, void *b, size_t n, int wr)
{
	char *p = b;
	ssize_t r;

	while (n) {
		r = wr ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Server, mode 2: the receiving thread hands buffers to this one. */
static sem_t s_full, s_empty;
static char *s_ring[RING];
static int s_out;

static void *srv_sender(void *arg)
{
	uint64_t h[2] = { 1, SZ };
	unsigned k;

	(void)arg;
	for (k = 0;; k++) {
		sem_wait(&s_full);
		if (io(s_out, h, sizeof(h), 1) ||
		    io(s_out, s_ring[k % RING], SZ, 1))
			_exit(0);
		sem_post(&s_empty);
	}
	return NULL;
}

static void server(int l, int mode)
{
	int in = accept(l, NULL, NULL);
	int out = mode ? accept(l, NULL, NULL) : in;
	char *b = malloc(SZ);
	uint64_t h[2];
	pthread_t t;
	unsigned k, i;

	nodelay(in);
	nodelay(out);
	if (mode == 2) {
		s_out = out;
		for (i = 0; i < RING; i++)
			s_ring[i] = malloc(SZ);
		sem_init(&s_full, 0, 0);
		sem_init(&s_empty, 0, RING);
		pthread_create(&t, NULL, srv_sender, NULL);
		for (k = 0;; k++) {
			sem_wait(&s_empty);
			if (io(in, h, sizeof(h), 0) ||
			    io(in, s_ring[k % RING], SZ, 0))
				_exit(0);
			sem_post(&s_full);
		}
	}
	for (;;)
		if (io(in, h, sizeof(h), 0) || io(in, b, SZ, 0) ||
		    io(out, h, sizeof(h), 1) || io(out, b, SZ, 1))
			_exit(0);
}

/* Client: the sender thread writes an iteration's requests when told. */
static pthread_mutex_t c_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c_cv = PTHREAD_COND_INITIALIZER;
static unsigned c_go;
static int c_stop, c_wfd;
static char *c_wbuf;

static void *cli_sender(void *arg)
{
	uint64_t h[2] = { 1, SZ };
	unsigned done = 0, i;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&c_mu);
		while (c_go == done && !c_stop)
			pthread_cond_wait(&c_cv, &c_mu);
		pthread_mutex_unlock(&c_mu);
		if (c_stop)
			return NULL;
		for (i = 0; i < NK; i++)
			if (io(c_wfd, h, sizeof(h), 1) ||
			    io(c_wfd, c_wbuf, SZ, 1))
				return NULL;
		done++;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int mode = argc > 1 ? atoi(argv[1]) : 0;
	double secs = argc > 2 ? atof(argv[2]) : 1, t0 = 0;
	char *rb = malloc(SZ);
	uint64_t h[2];
	unsigned it, i;
	pthread_t th;
	int l, rfd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		return 1;
	if (!fork())
		server(l, mode);
	c_wfd = socket(AF_INET, SOCK_STREAM, 0);
	nodelay(c_wfd);
	if (connect(c_wfd, (struct sockaddr *)&a, sizeof(a)))
		return 1;
	rfd = c_wfd;
	if (mode) {
		rfd = socket(AF_INET, SOCK_STREAM, 0);
		nodelay(rfd);
		if (connect(rfd, (struct sockaddr *)&a, sizeof(a)))
			return 1;
	}
	c_wbuf = malloc(SZ);
	memset(c_wbuf, 1, SZ);
	pthread_create(&th, NULL, cli_sender, NULL);
	for (it = 0;; it++) {
		if (it == 2) /* two warm-up iterations */
			t0 = now_s();
		if (it > 2 && now_s() - t0 > secs)
			break;
		pthread_mutex_lock(&c_mu);
		c_go++;
		pthread_cond_signal(&c_cv);
		pthread_mutex_unlock(&c_mu);
		for (i = 0; i < NK; i++)
			if (io(rfd, h, sizeof(h), 0) || io(rfd, rb, SZ, 0))
				return 1;
	}
	printf("%s %.3f\n",
	       mode == 2   ? "two+srvthread"
	       : mode == 1 ? "two"
			   : "one",
	       (double)(it - 2) * NK * SZ * 8 / (now_s() - t0) / 1e9);
	pthread_mutex_lock(&c_mu);
	c_stop = 1;
	pthread_cond_signal(&c_cv);
	pthread_mutex_unlock(&c_mu);
	shutdown(c_wfd, SHUT_RDWR);
	shutdown(rfd, SHUT_RDWR);
	pthread_join(th, NULL);
	wait(NULL);
	return 0;
}
