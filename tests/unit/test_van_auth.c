// SPDX-License-Identifier: MIT
/*
 * The van's limits before authentication (common/auth.h), on a real TCP
 * listener with raw client sockets: no data message, no control message
 * over PS_PREAUTH_MAX_FRAME, PS_AUTH_TIMEOUT for accepted connections,
 * PS_MAX_PENDING_AUTH accepted at a time (the rest wait in the backlog
 * and are taken as slots free), and none of it once the owner marked a
 * connection authenticated.  The handshake itself: test_auth.sh.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../harness.h"
#include "cfg.h"
#include "van.h"

static struct {
	pthread_mutex_t lock;
	unsigned accepted;
	unsigned closed;
	bool trust; /* mark accepted connections authenticated */
} vt = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void vt_accepted(void *arg, struct psd_conn *c)
{
	(void)arg;
	pthread_mutex_lock(&vt.lock);
	vt.accepted++;
	if (vt.trust)
		psd_conn_set_authed(c);
	pthread_mutex_unlock(&vt.lock);
}

static void vt_closed(void *arg, struct psd_conn *c, int err)
{
	(void)arg;
	(void)c;
	(void)err;
	pthread_mutex_lock(&vt.lock);
	vt.closed++;
	pthread_mutex_unlock(&vt.lock);
}

static unsigned vt_count(unsigned *what)
{
	unsigned v;

	pthread_mutex_lock(&vt.lock);
	v = *what;
	pthread_mutex_unlock(&vt.lock);
	return v;
}

/* A van listening on loopback with small limits: 300 ms to authenticate,
 * 1 KiB frames, 2 pending. */
static struct psd_van *vt_start(unsigned *port)
{
	struct psched_cfg cfg;
	struct psd_van_opts vo = { .ops = &psd_tcp_ops,
				   .max_tensor = 1 << 20,
				   .send_timeout_ms = 1000,
				   .cfg = &cfg };
	struct psd_van_cb cb = { .accepted = vt_accepted, .closed = vt_closed };
	struct psd_addr a = { .host = "127.0.0.1", .port = 0 };
	struct psd_van *van;

	psd_cfg_defaults(&cfg);
	cfg.auth_timeout_ms = 300;
	cfg.preauth_max_frame = 1024;
	cfg.max_pending_auth = 2;
	pthread_mutex_lock(&vt.lock);
	vt.accepted = vt.closed = 0;
	vt.trust = false;
	pthread_mutex_unlock(&vt.lock);
	CHECK_EQ(psd_van_create(&vo, &cb, &van), 0);
	CHECK_EQ(psd_van_listen(van, &a, port), 0);
	CHECK_EQ(psd_van_start(van), 0);
	return van;
}

static int vt_dial(unsigned port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_EQ(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void vt_send_hdr(int fd, unsigned type, uint64_t length)
{
	struct psd_hdr h;
	uint8_t buf[PSD_HDR_SIZE];

	memset(&h, 0, sizeof(h));
	h.type = (uint8_t)type;
	h.dtype = PSCHED_F32;
	h.length = length;
	if (type == PSD_MSG_PUSH) {
		h.total = h.span = length;
		h.step = 1;
	}
	psd_hdr_encode(&h, buf);
	CHECK_EQ(write(fd, buf, sizeof(buf)), (long long)sizeof(buf));
}

/* Milliseconds until the peer closes @fd (EOF), or -1 after @limit_ms. */
static long vt_ms_to_eof(int fd, int limit_ms)
{
	uint64_t t0 = psd_now_ms();
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b[256];

	for (;;) {
		long left = limit_ms - (long)(psd_now_ms() - t0);

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		if (read(fd, b, sizeof(b)) <= 0)
			return (long)(psd_now_ms() - t0);
	}
}

static void test_van_preauth_no_data(void)
{
	unsigned port;
	struct psd_van *van = vt_start(&port);
	int fd = vt_dial(port);

	vt_send_hdr(fd, PSD_MSG_PUSH, 4);
	CHECK_EQ(write(fd, "abcd", 4), 4);
	CHECK(vt_ms_to_eof(fd, test_timeout_ms(250)) >= 0); /* < deadline */
	close(fd);
	psd_van_destroy(van);
}

static void test_van_preauth_frame_cap(void)
{
	unsigned port;
	struct psd_van *van = vt_start(&port);
	int big = vt_dial(port), small = vt_dial(port);

	vt_send_hdr(big, PSD_MSG_CONTROL, 1025);
	vt_send_hdr(small, PSD_MSG_CONTROL, 1024);
	CHECK(vt_ms_to_eof(big, test_timeout_ms(250)) >= 0);
	/* At the cap: taken, so only the deadline ends it. */
	CHECK(vt_ms_to_eof(small, 100) < 0);
	close(big);
	close(small);
	psd_van_destroy(van);
}

static void test_van_preauth_deadline(void)
{
	unsigned port;
	struct psd_van *van = vt_start(&port);
	int fd = vt_dial(port);
	long ms;

	vt_send_hdr(fd, PSD_MSG_CONTROL, 100);
	CHECK_EQ(write(fd, "x", 1), 1); /* a frame never finished */
	ms = vt_ms_to_eof(fd, test_timeout_ms(3000));
	CHECK_INT(ms, >=, 200);
	CHECK(ms >= 0);
	close(fd);
	psd_van_destroy(van);
}

static void test_van_preauth_pending_cap(void)
{
	unsigned port, i;
	struct psd_van *van = vt_start(&port);
	int fd[5];
	uint64_t t0;

	for (i = 0; i < 5; i++)
		fd[i] = vt_dial(port);
	usleep(150 * 1000);
	/* Two taken; three wait in the kernel's backlog. */
	CHECK_EQ(vt_count(&vt.accepted), 2);
	/* Each batch times out after 300 ms and frees its slots. */
	t0 = psd_now_ms();
	while (vt_count(&vt.accepted) < 5 &&
	       psd_now_ms() - t0 < (uint64_t)test_timeout_ms(5000))
		usleep(10 * 1000);
	CHECK_EQ(vt_count(&vt.accepted), 5);
	CHECK_INT(psd_now_ms() - t0, >=, 100);
	for (i = 0; i < 5; i++)
		close(fd[i]);
	psd_van_destroy(van);
}

static void test_van_authed_is_free(void)
{
	unsigned port;
	struct psd_van *van = vt_start(&port);
	int fd;

	pthread_mutex_lock(&vt.lock);
	vt.trust = true;
	pthread_mutex_unlock(&vt.lock);
	fd = vt_dial(port);
	/* No deadline, no frame cap (a 4 KiB frame, not finished). */
	vt_send_hdr(fd, PSD_MSG_CONTROL, 4096);
	CHECK(vt_ms_to_eof(fd, 700) < 0);
	CHECK_EQ(vt_count(&vt.closed), 0);
	close(fd);
	psd_van_destroy(van);
}

const struct test_case test_list[] = {
	{ "van_preauth_no_data", test_van_preauth_no_data },
	{ "van_preauth_frame_cap", test_van_preauth_frame_cap },
	{ "van_preauth_deadline", test_van_preauth_deadline },
	{ "van_preauth_pending_cap", test_van_preauth_pending_cap },
	{ "van_authed_is_free", test_van_authed_is_free },
	{ NULL, NULL },
};
