// SPDX-License-Identifier: MIT
/*
 * pingpong: an experiment, not part of the build.  The floor under
 * ps-bench's serial 4 KiB push (one request at a time, 1 server + 1
 * worker over loopback TCP): a client process writes a 96-byte header and
 * a 4 KiB payload in one sendmsg(), a server process reads it and answers
 * with 96 bytes.  Prints microseconds per round trip.
 *
 *   mode 0  two threads in all: the client's thread reads the answer
 *           itself (2 wake-ups per request);
 *   mode 1  psched's layout: the client's receive thread reads the answer
 *           and wakes the sending thread through a mutex and condition
 *           variable, as ps-bench's callback does (3 wake-ups);
 *   SPIN_US > 0: the server's and the client's readers poll the socket
 *           (epoll_wait with no timeout) that long before they sleep.
 *
 *   cc -O2 -o /tmp/pingpong bench/exp/pingpong.c -lpthread
 *   /tmp/pingpong MODE [SPIN_US] [ITERS]
 *   taskset -c 0 /tmp/pingpong 1       # every thread on one vCPU
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HDR 96
#define REQ (HDR + 4096)

static int spin_us;
static char sbuf[REQ], cbuf[REQ];

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Read exactly @n bytes from nonblocking-read @fd, sleeping in epoll
 * (@ep watches @fd), after polling up to spin_us if set. */
static int rd(int ep, int fd, char *b, size_t n)
{
	struct epoll_event ev;
	size_t got = 0;
	ssize_t r;
	double t0;
	int k;

	while (got < n) {
		r = recv(fd, b + got, n - got, MSG_DONTWAIT);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0)
			return -1;
		k = 0;
		if (spin_us) {
			t0 = now_s();
			do
				k = epoll_wait(ep, &ev, 1, 0);
			while (k == 0 && (now_s() - t0) * 1e6 < spin_us);
		}
		if (k <= 0)
			epoll_wait(ep, &ev, 1, -1);
	}
	return 0;
}

static int watch(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0);

	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	return ep;
}

static void server(int lfd)
{
	int one = 1, s = accept(lfd, NULL, NULL), ep;

	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ep = watch(s);
	while (!rd(ep, s, sbuf, REQ))
		send(s, sbuf, HDR, MSG_NOSIGNAL);
	exit(0);
}

/* mode 1: the receive thread and the waiting sender. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned long answered;

static void *rx_main(void *arg)
{
	int fd = *(int *)arg, ep = watch(fd);

	while (!rd(ep, fd, cbuf, HDR)) {
		pthread_mutex_lock(&lock);
		answered++;
		pthread_mutex_unlock(&lock);
		pthread_cond_signal(&cond);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int mode = argc > 1 ? atoi(argv[1]) : 0;
	long iters = argc > 3 ? atol(argv[3]) : 20000, i;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, l, c, ep = -1;
	pthread_t rx;
	double t0 = 0;

	spin_us = argc > 2 ? atoi(argv[2]) : 0;
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		return 1;
	getsockname(l, (struct sockaddr *)&a, &al);
	if (fork() == 0)
		server(l);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)))
		return 1;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (mode == 1)
		pthread_create(&rx, NULL, rx_main, &c);
	else
		ep = watch(c);
	for (i = -1000; i < iters; i++) { /* 1000 to warm up */
		if (!i)
			t0 = now_s();
		send(c, cbuf, REQ, MSG_NOSIGNAL);
		if (mode == 1) {
			pthread_mutex_lock(&lock);
			while (answered < (unsigned long)(i + 1001))
				pthread_cond_wait(&cond, &lock);
			pthread_mutex_unlock(&lock);
		} else if (rd(ep, c, cbuf, HDR)) {
			return 1;
		}
	}
	printf("mode %d spin %d: %.2f us per request\n", mode, spin_us,
	       (now_s() - t0) / (double)iters * 1e6);
	shutdown(c, SHUT_RDWR);
	wait(NULL);
	return 0;
}
