// SPDX-License-Identifier: MIT
/*
 * TCP transport: nonblocking sockets polled by the van's epoll loop.
 * Sends go out with sendmsg() straight from the caller's buffers (header
 * and payload in one iovec list, no payload copy); the calling thread
 * finishes its own partial writes, waiting in poll() with a timeout.
 * Receives go through a small staging buffer for headers and small
 * payloads, and straight into the consumer's buffer for large payloads.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_info.h"
#include "transport.h"

#define TCP_STAGE_SIZE (64u * 1024u)
#define TCP_DIRECT_MIN (16u * 1024u) /* payloads above: recv in place */
#define TCP_MAX_IOV    64
/*
 * Bytes one progress() call reads before it yields to the van loop (the
 * socket stays readable, so epoll reports it again).  Without it a peer
 * that keeps sending holds the van thread: other connections starve and
 * ticks, heartbeats among them, stop (seen under TSan: a server declared
 * dead while it read 2 x 64 MiB).
 */
#define TCP_RX_BUDGET (8u << 20)
/*
 * Bytes offered to one sendmsg(): the socket buffer (at most 4 MiB with
 * the kernel's default tcp_wmem) takes no more anyway, and instrumented
 * builds check every byte offered on every call, which made a 64 MiB
 * send quadratic under TSan.
 */
#define TCP_TX_CHUNK (4u << 20)
/*
 * ->send_more() copies messages of at most TCP_HOLD_MAX bytes (header
 * included) into a TCP_HOLD_CAP buffer and sends them together later:
 * 40 acks or 40 small pushes then cost one sendmsg() and one wake-up of
 * the peer instead of 40.
 */
#define TCP_HOLD_MAX (16u * 1024u)
#define TCP_HOLD_CAP (64u * 1024u)
/*
 * While a large payload is read in place and the socket runs dry, the
 * socket's receive low-water mark (SO_RCVLOWAT) is raised to what is
 * still missing, at most TCP_LOWAT_MAX, so that epoll reports it once
 * that much has come rather than at every segment.  On loopback the
 * reader drains faster than the writer fills, and each wake-up of a
 * reader that slept is paid by the writer (an IPI to a halted vCPU on
 * a VM): push 64 MiB spent ~15 % of the writer's time there.  The mark
 * never exceeds the bytes the message still needs (nothing the peer
 * must first wait for can be held back by it), and it is back at 1
 * before the next header is read.  The kernel also reports a socket
 * whose receive window is nearly closed or whose buffer is nearly
 * full, whatever the mark (tcp_epollin_ready()).
 */
#define TCP_LOWAT_MIN (128u * 1024u) /* below: not worth a syscall */
#ifndef TCP_LOWAT_MAX
#define TCP_LOWAT_MAX (512u * 1024u)
#endif

struct tcp_conn {
	struct psd_conn base;
	uint8_t *stage; /* staging buffer, TCP_STAGE_SIZE bytes */
	size_t stage_pos;
	size_t stage_end;
	bool in_payload;
	struct psd_hdr hdr;
	uint8_t *dst;  /* payload destination, NULL = discard */
	uint64_t got;  /* payload bytes received */
	size_t budget; /* left in this progress() call */
	/* The last message was read in place: read only the next header
	 * into the stage, not the start of a large payload that would then
	 * be copied out of it. */
	bool hdr_only;
	/* The last recv() into the stage came back short: the socket was
	 * drained then.  progress() returns instead of asking again (a
	 * recv() that would only say EAGAIN, on the path of every answer);
	 * epoll is level-triggered, so bytes that came meanwhile wake the
	 * van again. */
	bool drained;
	/* SO_RCVLOWAT now set on the socket (1: the kernel's default). */
	int lowat;
	/* Small messages kept aside by ->send_more() (under send_lock). */
	uint8_t *held;
	size_t held_len;
};

static struct tcp_conn *to_tcp(struct psd_conn *c)
{
	return psd_container_of(c, struct tcp_conn, base);
}

static int tcp_sock_opts(int fd, const struct psd_transport_knobs *k)
{
	int one = 1;
	int buf = (int)k->socket_buf_bytes;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return psd_neg_errno();
	if (buf > 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return psd_neg_errno();
	return 0;
}

/* A non-blocking TCP socket for @addr, resolved into @sin; fd or -errno. */
static int tcp_socket(const struct psd_addr *addr, struct sockaddr_in *sin)
{
	int ret = psd_addr_resolve(addr, sin);
	int fd;

	if (ret)
		return ret;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	return fd < 0 ? psd_neg_errno() : fd;
}

static int tcp_listen(struct psd_listener *l, const struct psd_addr *addr)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int one = 1;
	int ret, fd;

	fd = tcp_socket(addr, &sin);
	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(fd, 1024)) {
		ret = psd_neg_errno();
		psd_set_errmsg(ret, "cannot listen on %s:%u: %s",
			       addr->host[0] ? addr->host : "0.0.0.0",
			       addr->port, strerror(-ret));
		close(fd);
		return ret;
	}
	getsockname(fd, (struct sockaddr *)&sin, &len);
	l->fd = fd;
	l->port = ntohs(sin.sin_port);
	return 0;
}

static int tcp_conn_setup(struct tcp_conn *tc, int fd)
{
	int ret = tcp_sock_opts(fd, psd_van_knobs(tc->base.van));

	if (ret)
		return ret;
	tc->lowat = 1;
	tc->stage = malloc(TCP_STAGE_SIZE);
	if (!tc->stage)
		return -ENOMEM;
	tc->base.fd = fd;
	return 0;
}

static int tcp_accept(struct psd_listener *l, struct psd_conn *c)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char ip[INET_ADDRSTRLEN];
	int fd, ret;

	fd = accept4(l->fd, (struct sockaddr *)&sin, &len, SOCK_CLOEXEC);
	if (fd < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : psd_neg_errno();
	ret = tcp_conn_setup(to_tcp(c), fd);
	if (ret) {
		close(fd);
		return ret;
	}
	inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
	snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, ntohs(sin.sin_port));
	return 0;
}

static void tcp_listen_close(struct psd_listener *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static int tcp_wait_fd(int fd, short events, unsigned timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int ret;

	do {
		ret = poll(&p, 1, (int)timeout_ms);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		return psd_neg_errno();
	if (ret == 0)
		return -ETIMEDOUT;
	return 0;
}

static int tcp_connect(struct psd_conn *c, const struct psd_addr *addr,
		       unsigned timeout_ms)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(int);
	int fd, ret, soerr = 0;

	fd = tcp_socket(addr, &sin);
	if (fd < 0)
		return fd;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
	    errno != EINPROGRESS) {
		ret = psd_neg_errno();
		goto err_close;
	}
	ret = tcp_wait_fd(fd, POLLOUT, timeout_ms);
	if (ret)
		goto err_close;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
	if (soerr) {
		ret = -soerr;
		goto err_close;
	}
	ret = tcp_conn_setup(to_tcp(c), fd);
	if (ret)
		goto err_close;
	return 0;

err_close:
	close(fd);
	return ret;
}

/* Drop the first @n bytes of the iovec list. */
static void tcp_iov_advance(struct iovec **iov, int *niov, size_t n)
{
	while (n && *niov) {
		if (n >= (*iov)->iov_len) {
			n -= (*iov)->iov_len;
			(*iov)++;
			(*niov)--;
		} else {
			(*iov)->iov_base = (char *)(*iov)->iov_base + n;
			(*iov)->iov_len -= n;
			n = 0;
		}
	}
}

/* The first bytes of @v[0..@n), at most TCP_TX_CHUNK, as @out; returns
 * the number of entries. */
static int tcp_iov_window(const struct iovec *v, int n, struct iovec *out)
{
	size_t left = TCP_TX_CHUNK;
	int i;

	for (i = 0; i < n && left; i++) {
		out[i] = v[i];
		if (out[i].iov_len > left)
			out[i].iov_len = left;
		left -= out[i].iov_len;
	}
	return i;
}

/* Write all of @v[0..@n) (entries may be empty), waiting for room in
 * poll() up to @timeout_ms at a time. */
static int tcp_send_all(struct psd_conn *c, struct iovec *v, int n,
			unsigned timeout_ms)
{
	struct iovec win[TCP_MAX_IOV + 2];
	struct msghdr mh = { 0 };
	ssize_t w;
	int ret;

	while (n && !v->iov_len) {
		v++;
		n--;
	}
	while (n) {
		mh.msg_iov = win;
		mh.msg_iovlen = (size_t)tcp_iov_window(v, n, win);
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (w >= 0) {
			tcp_iov_advance(&v, &n, (size_t)w);
			while (n && !v->iov_len) {
				v++;
				n--;
			}
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return psd_neg_errno();
		ret = tcp_wait_fd(c->fd, POLLOUT, timeout_ms);
		if (ret)
			return ret;
	}
	return 0;
}

/* Whatever ->send_more() kept aside goes first, in the same sendmsg(). */
static int tcp_send(struct psd_conn *c, const struct psd_hdr *h,
		    const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct tcp_conn *tc = to_tcp(c);
	uint8_t hbuf[PSD_HDR_SIZE];
	struct iovec vec[TCP_MAX_IOV + 2];
	int n = 0, i, ret;

	if (niov > TCP_MAX_IOV)
		return -EINVAL;
	if (tc->held_len) {
		vec[n].iov_base = tc->held;
		vec[n++].iov_len = tc->held_len;
	}
	psd_hdr_encode(h, hbuf);
	vec[n].iov_base = hbuf;
	vec[n++].iov_len = PSD_HDR_SIZE;
	for (i = 0; i < niov; i++)
		if (iov[i].iov_len)
			vec[n++] = iov[i];
	ret = tcp_send_all(c, vec, n, timeout_ms);
	tc->held_len = 0;
	return ret;
}

static int tcp_flush(struct psd_conn *c, unsigned timeout_ms)
{
	struct tcp_conn *tc = to_tcp(c);
	struct iovec v = { .iov_base = tc->held, .iov_len = tc->held_len };
	int ret;

	if (!tc->held_len)
		return 0;
	ret = tcp_send_all(c, &v, 1, timeout_ms);
	tc->held_len = 0;
	return ret;
}

static int tcp_send_more(struct psd_conn *c, const struct psd_hdr *h,
			 const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct tcp_conn *tc = to_tcp(c);
	size_t len = PSD_HDR_SIZE;
	uint8_t *p;
	int i, ret;

	for (i = 0; i < niov && len <= TCP_HOLD_MAX; i++)
		len += iov[i].iov_len;
	if (len > TCP_HOLD_MAX || niov > TCP_MAX_IOV)
		return tcp_send(c, h, iov, niov, timeout_ms);
	if (!tc->held) {
		tc->held = malloc(TCP_HOLD_CAP);
		if (!tc->held)
			return tcp_send(c, h, iov, niov, timeout_ms);
	}
	if (tc->held_len + len > TCP_HOLD_CAP) {
		ret = tcp_flush(c, timeout_ms);
		if (ret)
			return ret;
	}
	p = tc->held + tc->held_len;
	psd_hdr_encode(h, p);
	p += PSD_HDR_SIZE;
	for (i = 0; i < niov; i++) {
		if (iov[i].iov_len)
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	tc->held_len += len;
	return 0;
}

/* Header complete in the stage: validate and ask the van where to put
 * the payload. */
static int tcp_rx_header(struct tcp_conn *tc)
{
	const char *why;
	void *dst = NULL;
	int ret;

	ret = psd_hdr_decode(tc->stage + tc->stage_pos,
			     psd_van_max_tensor(&tc->base), &tc->hdr, &why);
	tc->stage_pos += PSD_HDR_SIZE;
	if (ret) {
		psd_err("dropping connection from %s: malformed header: %s",
			tc->base.peer, why);
		return ret;
	}
	ret = psd_van_rx_header(&tc->base, &tc->hdr, &dst);
	if (ret < 0)
		return ret;
	tc->hdr_only = false;
	tc->dst = dst;
	tc->got = 0;
	tc->in_payload = true;
	return 0;
}

/* Set the socket's receive low-water mark to @want bytes, when it is not
 * that already.  A refusal leaves it as it was: only wake-ups are at
 * stake. */
static void tcp_set_lowat(struct tcp_conn *tc, int want)
{
	if (tc->lowat == want)
		return;
	if (!setsockopt(tc->base.fd, SOL_SOCKET, SO_RCVLOWAT, &want,
			sizeof(want)))
		tc->lowat = want;
}

/* The socket ran dry with @need bytes of an in-place payload missing:
 * wake the reader when (up to TCP_LOWAT_MAX of) them are there. */
static void tcp_lowat_for(struct tcp_conn *tc, uint64_t need)
{
	if (need >= TCP_LOWAT_MIN)
		tcp_set_lowat(tc, need < TCP_LOWAT_MAX ? (int)need
						       : (int)TCP_LOWAT_MAX);
	else
		tcp_set_lowat(tc, 1);
}

/* Move payload bytes from the stage, then from the socket, into place. */
static int tcp_rx_payload(struct tcp_conn *tc)
{
	uint64_t need = tc->hdr.length - tc->got;
	size_t avail = tc->stage_end - tc->stage_pos;
	size_t n = need < avail ? (size_t)need : avail;
	ssize_t r;

	if (n) {
		if (tc->dst)
			memcpy(tc->dst + tc->got, tc->stage + tc->stage_pos, n);
		tc->stage_pos += n;
		tc->got += n;
		need -= n;
	}
	/* Large message, empty stage: read straight into place, to its
	 * last byte (no read past it into the stage). */
	while (need && tc->dst && tc->hdr.length >= TCP_DIRECT_MIN) {
		if (!tc->budget) {
			/* Bytes are still there: the mark must not
			 * exceed what this message can still bring. */
			if ((uint64_t)tc->lowat > need)
				tcp_lowat_for(tc, need);
			return -EAGAIN;
		}
		r = recv(tc->base.fd, tc->dst + tc->got,
			 (size_t)(need < tc->budget ? need : tc->budget), 0);
		if (r > 0) {
			tc->got += (uint64_t)r;
			need -= (uint64_t)r;
			tc->budget -= (size_t)r;
			continue;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return psd_neg_errno();
		tcp_lowat_for(tc, need);
		return -EAGAIN;
	}
	if (need)
		return -EAGAIN;
	tcp_set_lowat(tc, 1);
	tc->in_payload = false;
	tc->hdr_only = tc->dst && tc->hdr.length >= TCP_DIRECT_MIN;
	psd_van_rx_msg(&tc->base, &tc->hdr, tc->dst);
	return 0;
}

static int tcp_fill_stage(struct tcp_conn *tc)
{
	size_t want;
	ssize_t r;

	if (tc->stage_pos == tc->stage_end) {
		tc->stage_pos = 0;
		tc->stage_end = 0;
	} else if (tc->stage_pos > 0) {
		memmove(tc->stage, tc->stage + tc->stage_pos,
			tc->stage_end - tc->stage_pos);
		tc->stage_end -= tc->stage_pos;
		tc->stage_pos = 0;
	}
	if (!tc->budget || tc->drained)
		return -EAGAIN;
	want = TCP_STAGE_SIZE - tc->stage_end;
	if (tc->hdr_only && !tc->in_payload && tc->stage_end < PSD_HDR_SIZE)
		want = PSD_HDR_SIZE - tc->stage_end;
	do {
		r = recv(tc->base.fd, tc->stage + tc->stage_end, want, 0);
	} while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ECONNRESET;
	if (r < 0)
		return errno == EAGAIN ? -EAGAIN : psd_neg_errno();
	tc->stage_end += (size_t)r;
	tc->drained = (size_t)r < want;
	tc->budget = (size_t)r < tc->budget ? tc->budget - (size_t)r : 0;
	return 0;
}

static int tcp_progress(struct psd_conn *c)
{
	struct tcp_conn *tc = to_tcp(c);
	int ret;

	tc->budget = TCP_RX_BUDGET;
	tc->drained = false;
	for (;;) {
		if (tc->in_payload) {
			ret = tcp_rx_payload(tc);
			if (ret == -EAGAIN)
				ret = tcp_fill_stage(tc);
		} else if (tc->stage_end - tc->stage_pos >= PSD_HDR_SIZE) {
			ret = tcp_rx_header(tc);
		} else {
			ret = tcp_fill_stage(tc);
		}
		if (ret == -EAGAIN)
			return 0;
		if (ret)
			return ret;
		if (atomic_load(&c->closed))
			return -ECONNRESET;
	}
}

static void tcp_close(struct psd_conn *c)
{
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
}

static void tcp_fini(struct psd_conn *c)
{
	struct tcp_conn *tc = to_tcp(c);

	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(tc->stage);
	tc->stage = NULL;
	free(tc->held);
	tc->held = NULL;
	tc->held_len = 0;
}

static int tcp_tx_room(struct psd_conn *c, uint32_t *min_rtt_us)
{
	return psd_tcp_path_room(c->fd, min_rtt_us);
}

const struct psd_transport_ops psd_tcp_ops = {
	.name = "tcp",
	.conn_size = sizeof(struct tcp_conn),
	.caller_rx = true,
	.listen = tcp_listen,
	.accept = tcp_accept,
	.listen_close = tcp_listen_close,
	.connect = tcp_connect,
	.send = tcp_send,
	.send_more = tcp_send_more,
	.flush = tcp_flush,
	.progress = tcp_progress,
	.close = tcp_close,
	.fini = tcp_fini,
	.tx_room = tcp_tx_room,
};
