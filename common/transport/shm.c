// SPDX-License-Identifier: MIT
/*
 * Shared-memory transport for peers on one host (PS_TRANSPORT=shm).
 *
 * Listening: an abstract-namespace Unix socket "\0psched-shm-<uid>-<port>"
 * stands in for the TCP port, so the node table's host:port works as is
 * (the host must be a local address; port 0 picks a free name).  Both
 * ends check with SO_PEERCRED that the other runs as our uid.
 *
 * Connecting: the connector creates a sealed memfd with two rings (one
 * per direction) and four eventfds (per ring: "data posted" and "space
 * freed or copy acknowledged") and passes them with SCM_RIGHTS.  The
 * Unix socket then carries no data; it stays open as the liveness
 * signal: a peer that exits or is killed closes it, and poll() reports
 * the hang-up to our van and to a blocked sender, so nothing waits for a
 * dead peer.  The van polls one fd per connection, so c->fd is a small
 * epoll set of the ring's data eventfd and the socket.
 *
 * Data: each message is a frame in the ring (wire header, mode, iovec
 * table).  Payloads below SHM_CMA_MIN follow the frame through the ring
 * (two copies, no syscall but the wake-up).  Larger ones stay where they
 * are: the frame carries the sender's iovec addresses and the receiver,
 * once psd_van_rx_header() chose the destination, copies straight from
 * the sender's memory with process_vm_readv() (one copy), then
 * acknowledges; the sender's send() returns on that acknowledgement.
 * Each receiver probes at connect time whether it may read its peer and
 * tells the peer's sender in the ring's control block; when a read fails
 * with EPERM later, the receiver asks the sender to stream the rest of
 * that payload through the ring, and the connection stays in ring mode
 * (logged once per process).
 *
 * Bounds: rings have a fixed size, every wait of a sender is a poll()
 * with the van's send timeout (renewed on progress), one progress() call
 * moves at most SHM_RX_BUDGET bytes, and nothing is allocated per
 * message.  Counters in shared memory are checked before use: a broken
 * peer costs its connection only.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport.h"

#define SHM_RING_SIZE (2u << 20) /* bytes per direction, a power of two */
#define SHM_CTL_SIZE  4096u	 /* one control block per ring */
#define SHM_MAP_SIZE  (2u * SHM_CTL_SIZE + 2u * SHM_RING_SIZE)
#define SHM_CMA_MIN   (32u << 10) /* payloads from here: process_vm_readv */
#define SHM_MAX_IOV   64
#define SHM_RX_BUDGET (8u << 20) /* bytes one progress() call moves */
#define SHM_CMA_CHUNK (1u << 20) /* bytes per process_vm_readv() */
#define SHM_MAGIC     0x31306d6873737070ull /* "ppsshm01" */
#define SHM_HELLO_MS  2000u /* accept: wait for the connector's hello */
#define SHM_PORT_BASE 20000u
#define SHM_PORT_SPAN 40000u
#define SHM_NFDS      5 /* memfd + 4 eventfds */
#define SHM_NO_STREAM UINT64_MAX

enum shm_mode {
	SHM_INLINE = 1, /* payload follows in the ring */
	SHM_CMA = 2,	/* receiver reads the sender's iovecs */
};

/*
 * Control block of one ring (one direction), in shared memory.  The
 * producer owns head, the consumer the rest; each side keeps its own
 * copy of the counter it owns and only publishes it here.
 */
struct shm_ctl {
	_Atomic uint64_t head; /* bytes ever written */
	char pad0[56];
	_Atomic uint64_t tail; /* bytes ever consumed */
	char pad1[56];
	_Atomic uint64_t acked;	      /* CMA messages completed */
	_Atomic uint64_t stream_from; /* last ack: SHM_NO_STREAM or offset */
	_Atomic uint32_t cma_ok;      /* the producer may send by address */
};

struct shm_frame {
	uint8_t hdr[PSD_HDR_SIZE];
	uint32_t mode;
	uint32_t niov; /* SHM_CMA: entries of the table that follows */
};

struct shm_riov {
	uint64_t base;
	uint64_t len;
};

/* Connection setup message, connector -> acceptor (with the fds) and
 * back (without). */
struct shm_hello {
	uint64_t magic;
	uint64_t probe; /* address of shm_probe_word in the sender */
	uint32_t ring_size;
	uint32_t map_size;
};

struct shm_ring {
	struct shm_ctl *ctl;
	uint8_t *data;
	int data_fd;  /* eventfd: bytes posted (the consumer's van polls it) */
	int space_fd; /* eventfd: bytes consumed or a copy acknowledged */
};

struct shm_conn {
	struct psd_conn base;
	bool inited; /* fds below valid (the van zero-allocates us) */
	int sock;    /* liveness only */
	int evfd[4];
	void *map;
	pid_t peer_pid;
	struct shm_ring tx; /* we produce */
	struct shm_ring rx; /* we consume */
	/* Send side, under c->send_lock. */
	uint64_t tx_head;
	uint64_t cma_sent;
	/* Receive side, van thread only. */
	uint64_t rx_tail;
	uint64_t cma_done;
	bool in_payload;
	bool hup;
	uint32_t mode;
	uint32_t niov;
	struct psd_hdr hdr;
	uint8_t *dst; /* payload destination, NULL = discard */
	uint64_t got;
	struct shm_riov riov[SHM_MAX_IOV];
};

static const uint64_t shm_probe_word = SHM_MAGIC;
static atomic_bool shm_cma_warned;
static atomic_uint shm_local_sync;
static atomic_uint shm_port_seq;

static struct shm_conn *to_shm(struct psd_conn *c)
{
	return psd_container_of(c, struct shm_conn, base);
}

/*
 * Both ends in one process (tests) map the memfd twice, so a release on
 * one mapping and the acquire on the other are different addresses to
 * ThreadSanitizer; a process-wide atomic states that order to it.
 * Separate processes never touch it.
 */
static void shm_local_release(const struct shm_conn *sc)
{
	if (sc->peer_pid == getpid())
		atomic_fetch_add_explicit(&shm_local_sync, 1,
					  memory_order_release);
}

static void shm_local_acquire(const struct shm_conn *sc)
{
	if (sc->peer_pid == getpid())
		(void)atomic_load_explicit(&shm_local_sync,
					   memory_order_acquire);
}

static void shm_evfd_signal(int fd)
{
	uint64_t one = 1;

	(void)!write(fd, &one, sizeof(one));
}

static void shm_evfd_clear(int fd)
{
	uint64_t v;

	(void)!read(fd, &v, sizeof(v));
}

static void shm_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void shm_conn_init(struct shm_conn *sc)
{
	int i;

	sc->sock = -1;
	for (i = 0; i < 4; i++)
		sc->evfd[i] = -1;
	sc->inited = true;
}

/* ---- names and credentials ------------------------------------------- */

static socklen_t shm_sockaddr(struct sockaddr_un *sun, unsigned port)
{
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	/* sun_path[0] stays 0: the abstract namespace, no file to clean up */
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
		     "psched-shm-%u-%u", (unsigned)getuid(), port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/* The peer of @fd runs as our uid; its pid into *@pid. */
static int shm_peer_check(int fd, pid_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return psd_neg_errno();
	if (cr.uid != getuid())
		return psd_set_errmsg(
			-EPERM, "shm peer pid %d runs as uid %u, not %u",
			(int)cr.pid, (unsigned)cr.uid, (unsigned)getuid());
	*pid = cr.pid;
	return 0;
}

/*
 * Shared memory only reaches this host: @addr must be empty, loopback or
 * an address of a local interface (bindable).  The port is not looked at.
 */
static int shm_addr_check(const struct psd_addr *addr)
{
	struct sockaddr_in sin;
	int ret = psd_addr_resolve(addr, &sin);
	int fd;

	if (ret)
		return ret;
	if (sin.sin_addr.s_addr == htonl(INADDR_ANY) ||
	    (ntohl(sin.sin_addr.s_addr) >> 24) == 127)
		return 0;
	sin.sin_port = 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return psd_neg_errno();
	ret = bind(fd, (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
	if (ret)
		return psd_set_errmsg(-EHOSTUNREACH,
				      "shm: %s is not an address of this host "
				      "(shared memory links local peers only)",
				      addr->host);
	return 0;
}

/* ---- listener --------------------------------------------------------- */

static int shm_bind(int fd, unsigned port)
{
	struct sockaddr_un sun;
	socklen_t len = shm_sockaddr(&sun, port);

	return bind(fd, (struct sockaddr *)&sun, len) ? psd_neg_errno() : 0;
}

/* Port 0: try names from a per-process start until one is free. */
static int shm_bind_any(int fd, unsigned *port)
{
	unsigned start = (unsigned)getpid() * 7919u +
			 atomic_fetch_add(&shm_port_seq, 101u);
	unsigned i, p;
	int ret = -EADDRINUSE;

	for (i = 0; i < 1000 && ret == -EADDRINUSE; i++) {
		p = SHM_PORT_BASE + (start + i) % SHM_PORT_SPAN;
		ret = shm_bind(fd, p);
		if (!ret)
			*port = p;
	}
	return ret;
}

static int shm_listen(struct psd_listener *l, const struct psd_addr *addr)
{
	unsigned port = addr->port;
	int fd, ret;

	if (port > 65535)
		return psd_set_errmsg(-EINVAL, "shm: bad port %u", port);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return psd_neg_errno();
	ret = port ? shm_bind(fd, port) : shm_bind_any(fd, &port);
	if (!ret && listen(fd, 1024))
		ret = psd_neg_errno();
	if (ret) {
		psd_set_errmsg(ret, "cannot listen on shm port %u: %s",
			       addr->port, strerror(-ret));
		close(fd);
		return ret;
	}
	l->fd = fd;
	l->port = port;
	return 0;
}

static void shm_listen_close(struct psd_listener *l)
{
	shm_close_fd(&l->fd);
}

/* ---- shared memory ---------------------------------------------------- */

/* Map @memfd and wire the rings; @side 0 = connector (produces ring 0). */
static int shm_conn_map(struct shm_conn *sc, int memfd, int side)
{
	uint8_t *m;
	int r;

	m = mmap(NULL, SHM_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		 0);
	if (m == MAP_FAILED)
		return psd_neg_errno();
	sc->map = m;
	r = side; /* the ring we produce */
	sc->tx.ctl = (struct shm_ctl *)(void *)(m + (size_t)r * SHM_CTL_SIZE);
	sc->tx.data = m + 2 * SHM_CTL_SIZE + (size_t)r * SHM_RING_SIZE;
	sc->tx.data_fd = sc->evfd[2 * r];
	sc->tx.space_fd = sc->evfd[2 * r + 1];
	r = !side;
	sc->rx.ctl = (struct shm_ctl *)(void *)(m + (size_t)r * SHM_CTL_SIZE);
	sc->rx.data = m + 2 * SHM_CTL_SIZE + (size_t)r * SHM_RING_SIZE;
	sc->rx.data_fd = sc->evfd[2 * r];
	sc->rx.space_fd = sc->evfd[2 * r + 1];
	return 0;
}

/* Connector: a sealed memfd (the acceptor cannot shrink it under us)
 * and the four eventfds; returns the memfd or -errno. */
static int shm_conn_create_mem(struct shm_conn *sc)
{
	int fd, i;

	for (i = 0; i < 4; i++) {
		sc->evfd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (sc->evfd[i] < 0)
			return psd_neg_errno();
	}
	fd = memfd_create("psched-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return psd_neg_errno();
	if (ftruncate(fd, SHM_MAP_SIZE) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		i = psd_neg_errno();
		close(fd);
		return i;
	}
	return fd;
}

/* Acceptor: the connector's memfd must be ours to map safely. */
static int shm_memfd_check(int fd)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (fstat(fd, &st))
		return psd_neg_errno();
	if (st.st_size != (off_t)SHM_MAP_SIZE || seals < 0 ||
	    !(seals & F_SEAL_SHRINK))
		return -EPROTO;
	return 0;
}

/* Can we read @pid's memory?  Reads its probe word at @addr. */
static bool shm_cma_probe(pid_t pid, uint64_t addr)
{
	uint64_t v = 0;
	struct iovec lv = { .iov_base = &v, .iov_len = sizeof(v) };
	struct iovec rv = { .iov_base = (void *)(uintptr_t)addr,
			    .iov_len = sizeof(v) };

	return process_vm_readv(pid, &lv, 1, &rv, 1, 0) == sizeof(v) &&
	       v == SHM_MAGIC;
}

static void shm_cma_warn(pid_t pid, int err)
{
	if (atomic_exchange(&shm_cma_warned, true))
		return;
	psd_warn("shm: cannot read the memory of pid %d (process_vm_readv: "
		 "%s); large messages go through the ring (two copies)",
		 (int)pid, strerror(-err));
}

/* Tell our peer's sender whether it may send large payloads by address. */
static void shm_cma_setup(struct shm_conn *sc, uint64_t probe)
{
	bool ok = shm_cma_probe(sc->peer_pid, probe);

	if (!ok)
		shm_cma_warn(sc->peer_pid, -EPERM);
	atomic_store(&sc->rx.ctl->cma_ok, ok);
}

/* The van's fd: readable when data is posted or the socket hangs up. */
static int shm_conn_poll_set(struct shm_conn *sc)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return psd_neg_errno();
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sc->rx.data_fd, &ev))
		goto err_close;
	ev.events = EPOLLIN | EPOLLRDHUP;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sc->sock, &ev))
		goto err_close;
	sc->base.fd = ep;
	return 0;

err_close:
	close(ep);
	return psd_neg_errno();
}

/* ---- handshake -------------------------------------------------------- */

static int shm_wait_fd(int fd, short events, uint64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now;
	int ret;

	do {
		now = psd_now_ms();
		ret = poll(&p, 1,
			   now < deadline_ms ? (int)(deadline_ms - now) : 0);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		return psd_neg_errno();
	return ret ? 0 : -ETIMEDOUT;
}

static int shm_hello_send(int fd, const int *fds, int nfds)
{
	struct shm_hello h = { .magic = SHM_MAGIC,
			       .probe = (uint64_t)(uintptr_t)&shm_probe_word,
			       .ring_size = SHM_RING_SIZE,
			       .map_size = SHM_MAP_SIZE };
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHM_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (nfds) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(h))
		return errno ? psd_neg_errno() : -EPROTO;
	return 0;
}

/* Receive a hello and up to SHM_NFDS fds (*@nfds in: wanted, out: got;
 * fds beyond the wanted count are closed). */
static int shm_hello_recv(int fd, struct shm_hello *h, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHM_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = h, .iov_len = sizeof(*h) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;
	int want = *nfds, n = 0, i;
	ssize_t r;

	r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (r < 0)
		return psd_neg_errno();
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (i = 0;
		     CMSG_LEN(sizeof(int) * (size_t)(i + 1)) <= cm->cmsg_len;
		     i++) {
			int got;

			memcpy(&got, CMSG_DATA(cm) + sizeof(int) * (size_t)i,
			       sizeof(int));
			if (n < want)
				fds[n++] = got;
			else
				close(got);
		}
	}
	*nfds = n;
	if (r != (ssize_t)sizeof(*h) || (mh.msg_flags & MSG_CTRUNC) ||
	    h->magic != SHM_MAGIC || h->ring_size != SHM_RING_SIZE ||
	    h->map_size != SHM_MAP_SIZE)
		return r == 0 ? -ECONNRESET : -EPROTO;
	return 0;
}

static int shm_connect_sock(unsigned port, uint64_t deadline_ms)
{
	struct sockaddr_un sun;
	socklen_t len = shm_sockaddr(&sun, port);
	int fd, ret;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return psd_neg_errno();
	/* A full backlog gives EAGAIN: retry until the deadline. */
	while (connect(fd, (struct sockaddr *)&sun, len)) {
		ret = psd_neg_errno();
		if (ret == -EINTR)
			continue;
		if (ret == -EAGAIN && psd_now_ms() < deadline_ms) {
			usleep(10 * 1000);
			continue;
		}
		close(fd);
		if (ret == -ECONNREFUSED)
			return psd_set_errmsg(
				ret, "nothing listens on shm port %u", port);
		return ret == -EAGAIN ? -ETIMEDOUT : ret;
	}
	return fd;
}

/* Connector after the socket is up: memory out, the acceptor's hello in. */
static int shm_connect_handshake(struct shm_conn *sc, uint64_t deadline_ms)
{
	struct shm_hello h;
	int fds[SHM_NFDS];
	int memfd, ret, n = 0;

	ret = shm_peer_check(sc->sock, &sc->peer_pid);
	if (ret)
		return ret;
	memfd = shm_conn_create_mem(sc);
	if (memfd < 0)
		return memfd;
	ret = shm_conn_map(sc, memfd, 0);
	fds[0] = memfd;
	memcpy(fds + 1, sc->evfd, sizeof(sc->evfd));
	if (!ret)
		ret = shm_hello_send(sc->sock, fds, SHM_NFDS);
	close(memfd);
	if (ret)
		return ret;
	ret = shm_wait_fd(sc->sock, POLLIN, deadline_ms);
	if (!ret)
		ret = shm_hello_recv(sc->sock, &h, NULL, &n);
	if (ret)
		return ret;
	shm_cma_setup(sc, h.probe);
	return 0;
}

static int shm_connect(struct psd_conn *c, const struct psd_addr *addr,
		       unsigned timeout_ms)
{
	struct shm_conn *sc = to_shm(c);
	uint64_t deadline_ms = psd_now_ms() + timeout_ms;
	int ret;

	shm_conn_init(sc);
	ret = shm_addr_check(addr);
	if (ret)
		return ret;
	ret = shm_connect_sock(addr->port, deadline_ms);
	if (ret < 0)
		return ret;
	sc->sock = ret;
	ret = shm_connect_handshake(sc, deadline_ms);
	if (!ret)
		ret = shm_conn_poll_set(sc);
	if (ret && ret != -ETIMEDOUT && ret != -ECONNREFUSED)
		psd_set_errmsg(ret, "shm handshake with port %u failed: %s",
			       addr->port, strerror(-ret));
	return ret; /* on error fini() releases what was set up */
}

/* Acceptor: take the connector's memory and eventfds, answer. */
static int shm_accept_handshake(struct shm_conn *sc)
{
	struct shm_hello h;
	int fds[SHM_NFDS] = { -1, -1, -1, -1, -1 };
	int ret, n = SHM_NFDS, i;

	ret = shm_peer_check(sc->sock, &sc->peer_pid);
	if (!ret)
		ret = shm_wait_fd(sc->sock, POLLIN,
				  psd_now_ms() + SHM_HELLO_MS);
	if (ret)
		return ret;
	ret = shm_hello_recv(sc->sock, &h, fds, &n);
	for (i = 1; i < n; i++)
		sc->evfd[i - 1] = fds[i];
	if (!ret && n != SHM_NFDS)
		ret = -EPROTO;
	if (!ret)
		ret = shm_memfd_check(fds[0]);
	if (!ret)
		ret = shm_conn_map(sc, fds[0], 1);
	if (n)
		close(fds[0]);
	if (ret)
		return ret;
	shm_cma_setup(sc, h.probe);
	return shm_hello_send(sc->sock, NULL, 0);
}

static int shm_accept(struct psd_listener *l, struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);
	int fd, ret;

	fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : psd_neg_errno();
	shm_conn_init(sc);
	sc->sock = fd;
	ret = shm_accept_handshake(sc);
	if (!ret)
		ret = shm_conn_poll_set(sc);
	if (ret) {
		psd_warn("shm: handshake with a connecting peer failed: %s",
			 psched_strerror(ret));
		c->ops->fini(c);
		/* -EAGAIN would stop the van's accept loop: report another
		 * error so it logs and goes on. */
		return ret == -EAGAIN ? -EPROTO : ret;
	}
	snprintf(c->peer, sizeof(c->peer), "shm pid %d", (int)sc->peer_pid);
	return 0;
}

/* ---- send ------------------------------------------------------------- */

/* The peer hung up or we were closed. */
static bool shm_is_down(struct shm_conn *sc)
{
	struct pollfd p = { .fd = sc->sock, .events = POLLRDHUP };

	return atomic_load(&sc->base.closed) || poll(&p, 1, 0) > 0;
}

/*
 * Sender: sleep until the consumer frees space or acknowledges, the
 * connection goes down, or @deadline_ms.  The caller re-checks its
 * condition after each return 0 (the eventfd is cleared here, before).
 */
static int shm_tx_wait(struct shm_conn *sc, uint64_t deadline_ms)
{
	struct pollfd p[2] = { { .fd = sc->tx.space_fd, .events = POLLIN },
			       { .fd = sc->sock, .events = POLLRDHUP } };
	uint64_t now = psd_now_ms();
	int ret;

	if (atomic_load(&sc->base.closed))
		return -ECONNRESET;
	if (now >= deadline_ms)
		return -ETIMEDOUT;
	ret = poll(p, 2, (int)(deadline_ms - now));
	if (ret < 0)
		return errno == EINTR ? 0 : psd_neg_errno();
	if (p[1].revents)
		return -ECONNRESET;
	if (p[0].revents)
		shm_evfd_clear(sc->tx.space_fd);
	return 0;
}

/* Free bytes in our tx ring, or -EPROTO for a corrupt consumer tail. */
static int64_t shm_tx_room(struct shm_conn *sc)
{
	uint64_t tail =
		atomic_load_explicit(&sc->tx.ctl->tail, memory_order_acquire);
	uint64_t used = sc->tx_head - tail;

	if (used > SHM_RING_SIZE)
		return -EPROTO;
	return (int64_t)(SHM_RING_SIZE - used);
}

static void shm_ring_put(uint8_t *ring, uint64_t pos, const void *src,
			 size_t len)
{
	size_t off = (size_t)(pos & (SHM_RING_SIZE - 1));
	size_t n = SHM_RING_SIZE - off < len ? SHM_RING_SIZE - off : len;

	memcpy(ring + off, src, n);
	memcpy(ring, (const uint8_t *)src + n, len - n);
}

static void shm_ring_get(const uint8_t *ring, uint64_t pos, void *dst,
			 size_t len)
{
	size_t off = (size_t)(pos & (SHM_RING_SIZE - 1));
	size_t n = SHM_RING_SIZE - off < len ? SHM_RING_SIZE - off : len;

	memcpy(dst, ring + off, n);
	memcpy((uint8_t *)dst + n, ring, len - n);
}

/*
 * Append @len bytes to the tx ring and wake the consumer.  @whole: all in
 * one go (frames), else as room appears.  Waits bounded by @timeout_ms
 * without progress.
 */
static int shm_tx_put(struct shm_conn *sc, const uint8_t *src, size_t len,
		      bool whole, unsigned timeout_ms)
{
	uint64_t deadline_ms = psd_now_ms() + timeout_ms;
	int64_t room;
	size_t n;
	int ret;

	while (len) {
		room = shm_tx_room(sc);
		if (room < 0)
			return (int)room;
		n = (size_t)room < len ? (size_t)room : len;
		if (!n || (whole && n < len)) {
			ret = shm_tx_wait(sc, deadline_ms);
			if (ret)
				return ret;
			continue;
		}
		shm_ring_put(sc->tx.data, sc->tx_head, src, n);
		sc->tx_head += n;
		shm_local_release(sc);
		atomic_store_explicit(&sc->tx.ctl->head, sc->tx_head,
				      memory_order_release);
		shm_evfd_signal(sc->tx.data_fd);
		src += n;
		len -= n;
		deadline_ms = psd_now_ms() + timeout_ms;
	}
	return 0;
}

/* Stream the payload from byte @from on through the ring. */
static int shm_tx_stream(struct shm_conn *sc, const struct iovec *iov, int niov,
			 uint64_t from, unsigned timeout_ms)
{
	size_t len;
	int i, ret;

	for (i = 0; i < niov; i++) {
		len = iov[i].iov_len;
		if (from >= len) {
			from -= len;
			continue;
		}
		ret = shm_tx_put(sc, (const uint8_t *)iov[i].iov_base + from,
				 len - (size_t)from, false, timeout_ms);
		if (ret)
			return ret;
		from = 0;
	}
	return 0;
}

/* Wait until the consumer acknowledged our last CMA message; *@from: where
 * to stream the payload from if it could not read it (SHM_NO_STREAM). */
static int shm_tx_wait_ack(struct shm_conn *sc, unsigned timeout_ms,
			   uint64_t *from)
{
	uint64_t deadline_ms = psd_now_ms() + timeout_ms;
	uint64_t acked;
	int ret;

	for (;;) {
		acked = atomic_load_explicit(&sc->tx.ctl->acked,
					     memory_order_acquire);
		shm_local_acquire(sc);
		if (acked == sc->cma_sent)
			break;
		if (acked > sc->cma_sent)
			return -EPROTO;
		ret = shm_tx_wait(sc, deadline_ms);
		if (ret)
			return ret;
	}
	*from = atomic_load_explicit(&sc->tx.ctl->stream_from,
				     memory_order_relaxed);
	return 0;
}

static int shm_send(struct psd_conn *c, const struct psd_hdr *h,
		    const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct shm_conn *sc = to_shm(c);
	uint8_t buf[sizeof(struct shm_frame) +
		    SHM_MAX_IOV * sizeof(struct shm_riov)];
	struct shm_frame fr = { .mode = SHM_INLINE };
	struct shm_riov rv;
	uint64_t from = SHM_NO_STREAM;
	int i, ret;

	if (niov > SHM_MAX_IOV)
		return -EINVAL;
	psd_hdr_encode(h, fr.hdr);
	if (h->length >= SHM_CMA_MIN && atomic_load(&sc->tx.ctl->cma_ok))
		fr.mode = SHM_CMA;
	for (i = 0; i < niov && fr.mode == SHM_CMA; i++) {
		if (!iov[i].iov_len)
			continue;
		rv.base = (uint64_t)(uintptr_t)iov[i].iov_base;
		rv.len = iov[i].iov_len;
		memcpy(buf + sizeof(fr) + fr.niov++ * sizeof(rv), &rv,
		       sizeof(rv));
	}
	memcpy(buf, &fr, sizeof(fr));
	ret = shm_tx_put(sc, buf, sizeof(fr) + fr.niov * sizeof(rv), true,
			 timeout_ms);
	if (ret)
		return ret;
	if (fr.mode == SHM_CMA) {
		sc->cma_sent++;
		ret = shm_tx_wait_ack(sc, timeout_ms, &from);
		if (ret || from == SHM_NO_STREAM)
			return ret;
	} else {
		from = 0;
	}
	return shm_tx_stream(sc, iov, niov, from, timeout_ms);
}

/* ---- receive ---------------------------------------------------------- */

/* Bytes posted in our rx ring, or -EPROTO for a corrupt producer head. */
static int64_t shm_rx_avail(struct shm_conn *sc)
{
	uint64_t head =
		atomic_load_explicit(&sc->rx.ctl->head, memory_order_acquire);
	uint64_t n = head - sc->rx_tail;

	if (n > SHM_RING_SIZE) {
		psd_err("dropping connection from %s: ring head corrupt",
			sc->base.peer);
		return -EPROTO;
	}
	return (int64_t)n;
}

static void shm_rx_consume(struct shm_conn *sc, size_t n)
{
	sc->rx_tail += n;
	shm_local_release(sc);
	atomic_store_explicit(&sc->rx.ctl->tail, sc->rx_tail,
			      memory_order_release);
}

/* Check a CMA frame's table against the header. */
static int shm_rx_check_table(struct shm_conn *sc)
{
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < sc->niov; i++) {
		if (sc->riov[i].len > UINT64_MAX - sum)
			return -EPROTO;
		sum += sc->riov[i].len;
	}
	return sum == sc->hdr.length && sum >= SHM_CMA_MIN ? 0 : -EPROTO;
}

/* Parse a frame at the ring's tail; 1 when one was taken, 0 when none is
 * complete yet. */
static int shm_rx_frame(struct shm_conn *sc, struct shm_frame *fr)
{
	int64_t avail = shm_rx_avail(sc);
	size_t tlen;

	if (avail < (int64_t)sizeof(*fr))
		return avail < 0 ? (int)avail : 0;
	shm_ring_get(sc->rx.data, sc->rx_tail, fr, sizeof(*fr));
	if ((fr->mode != SHM_INLINE && fr->mode != SHM_CMA) ||
	    (fr->mode == SHM_INLINE && fr->niov) || fr->niov > SHM_MAX_IOV) {
		psd_err("dropping connection from %s: bad frame (mode %u, "
			"%u iovecs)",
			sc->base.peer, fr->mode, fr->niov);
		return -EPROTO;
	}
	tlen = fr->niov * sizeof(struct shm_riov);
	if ((uint64_t)avail < sizeof(*fr) + tlen)
		return 0; /* frames are posted whole: a broken peer */
	shm_ring_get(sc->rx.data, sc->rx_tail + sizeof(*fr), sc->riov, tlen);
	shm_rx_consume(sc, sizeof(*fr) + tlen);
	sc->mode = fr->mode;
	sc->niov = fr->niov;
	return 1;
}

/* A frame: validate its header and ask the van where the payload goes. */
static int shm_rx_header(struct shm_conn *sc)
{
	struct shm_frame fr;
	const char *why;
	void *dst = NULL;
	int ret;

	ret = shm_rx_frame(sc, &fr);
	if (ret <= 0)
		return ret;
	ret = psd_hdr_decode(fr.hdr, psd_van_max_tensor(&sc->base), &sc->hdr,
			     &why);
	if (!ret && sc->mode == SHM_CMA && shm_rx_check_table(sc)) {
		why = "iovec table does not match the length";
		ret = -EPROTO;
	}
	if (ret) {
		psd_err("dropping connection from %s: malformed header: %s",
			sc->base.peer, why);
		return -EPROTO;
	}
	ret = psd_van_rx_header(&sc->base, &sc->hdr, &dst);
	if (ret < 0)
		return ret;
	sc->dst = dst;
	sc->got = 0;
	sc->in_payload = true;
	return 1;
}

static void shm_rx_deliver(struct shm_conn *sc)
{
	sc->in_payload = false;
	psd_van_rx_msg(&sc->base, &sc->hdr, sc->dst);
}

/* Inline payload bytes from the ring; 1 progress, 0 ring empty, -EAGAIN
 * budget spent. */
static int shm_rx_inline(struct shm_conn *sc, size_t *budget)
{
	int64_t avail;
	uint64_t n;

	if (sc->got == sc->hdr.length) {
		shm_rx_deliver(sc);
		return 1;
	}
	avail = shm_rx_avail(sc);
	if (avail <= 0)
		return (int)avail;
	if (!*budget)
		return -EAGAIN;
	n = sc->hdr.length - sc->got;
	n = n < (uint64_t)avail ? n : (uint64_t)avail;
	n = n < *budget ? n : *budget;
	if (sc->dst)
		shm_ring_get(sc->rx.data, sc->rx_tail, sc->dst + sc->got,
			     (size_t)n);
	shm_rx_consume(sc, (size_t)n);
	sc->got += n;
	*budget -= (size_t)n;
	return 1;
}

/* Read @len payload bytes from offset sc->got out of the sender's
 * memory; bytes read or -errno. */
static ssize_t shm_cma_read(struct shm_conn *sc, size_t len)
{
	struct iovec lv = { .iov_base = sc->dst + sc->got, .iov_len = len };
	struct iovec rv[SHM_MAX_IOV];
	uint64_t skip = sc->got;
	uint32_t i;
	int n = 0;
	ssize_t r;

	for (i = 0; i < sc->niov && len; i++) {
		if (skip >= sc->riov[i].len) {
			skip -= sc->riov[i].len;
			continue;
		}
		rv[n].iov_base = (void *)(uintptr_t)(sc->riov[i].base + skip);
		rv[n].iov_len = (size_t)(sc->riov[i].len - skip);
		if (rv[n].iov_len > len)
			rv[n].iov_len = len;
		len -= rv[n++].iov_len;
		skip = 0;
	}
	r = process_vm_readv(sc->peer_pid, &lv, 1, rv, (unsigned long)n, 0);
	if (r < 0)
		return psd_neg_errno();
	return r ? r : -EFAULT;
}

/* Tell the sender its CMA message is done (@from SHM_NO_STREAM) or that
 * it must stream the payload from byte @from on. */
static void shm_rx_ack(struct shm_conn *sc, uint64_t from)
{
	atomic_store_explicit(&sc->rx.ctl->stream_from, from,
			      memory_order_relaxed);
	shm_local_release(sc);
	atomic_store_explicit(&sc->rx.ctl->acked, ++sc->cma_done,
			      memory_order_release);
	shm_evfd_signal(sc->rx.space_fd);
}

/* CMA payload: copy a piece, or finish; 1 progress, -EAGAIN budget. */
static int shm_rx_cma(struct shm_conn *sc, size_t *budget)
{
	uint64_t n = sc->hdr.length - sc->got;
	ssize_t r;

	if (n && sc->dst) {
		if (!*budget)
			return -EAGAIN;
		n = n < SHM_CMA_CHUNK ? n : SHM_CMA_CHUNK;
		r = shm_cma_read(sc, (size_t)n);
		if (r == -EPERM) {
			/* Refused now (it worked at connect): ring mode. */
			shm_cma_warn(sc->peer_pid, (int)r);
			atomic_store(&sc->rx.ctl->cma_ok, 0);
			sc->mode = SHM_INLINE;
			shm_rx_ack(sc, sc->got);
			return 1;
		}
		if (r < 0) {
			psd_warn("shm: reading a %llu-byte message from %s "
				 "failed: %s; dropping the connection",
				 (unsigned long long)sc->hdr.length,
				 sc->base.peer, strerror((int)-r));
			return -ECONNRESET; /* the sender is gone */
		}
		sc->got += (uint64_t)r;
		*budget = (size_t)r < *budget ? *budget - (size_t)r : 0;
		return 1;
	}
	/* A sender that gave up (closed, killed) while we copied may have
	 * reused its buffer: what we read is not its message. */
	if (sc->dst && shm_is_down(sc))
		return -ECONNRESET;
	sc->got = sc->hdr.length;
	shm_rx_ack(sc, SHM_NO_STREAM);
	shm_rx_deliver(sc);
	return 1;
}

static int shm_rx_step(struct shm_conn *sc, size_t *budget)
{
	if (!sc->in_payload)
		return shm_rx_header(sc);
	if (sc->mode == SHM_CMA)
		return shm_rx_cma(sc, budget);
	return shm_rx_inline(sc, budget);
}

static int shm_progress(struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);
	size_t budget = SHM_RX_BUDGET;
	uint64_t tail0 = sc->rx_tail;
	int ret;

	shm_evfd_clear(sc->rx.data_fd);
	for (;;) {
		if (atomic_load(&c->closed)) {
			ret = -ECONNRESET;
			break;
		}
		ret = shm_rx_step(sc, &budget);
		if (ret > 0)
			continue;
		if (ret == -EAGAIN) {
			shm_evfd_signal(sc->rx.data_fd); /* more to do */
			ret = 0;
			break;
		}
		if (ret < 0)
			break;
		/* Nothing posted.  Gone peer: drain what it posted before. */
		if (sc->hup) {
			ret = -ECONNRESET;
			break;
		}
		if (!shm_is_down(sc))
			break;
		sc->hup = true;
	}
	if (sc->rx_tail != tail0)
		shm_evfd_signal(sc->rx.space_fd); /* room for the sender */
	return ret;
}

static void shm_close(struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);

	/* Both vans and a blocked sender see the hang-up. */
	if (sc->sock >= 0)
		shutdown(sc->sock, SHUT_RDWR);
}

static void shm_fini(struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);
	int i;

	if (!sc->inited)
		return;
	if (sc->map)
		munmap(sc->map, SHM_MAP_SIZE);
	sc->map = NULL;
	shm_close_fd(&c->fd);
	shm_close_fd(&sc->sock);
	for (i = 0; i < 4; i++)
		shm_close_fd(&sc->evfd[i]);
}

const struct psd_transport_ops psd_shm_ops = {
	.name = "shm",
	.conn_size = sizeof(struct shm_conn),
	.listen = shm_listen,
	.accept = shm_accept,
	.listen_close = shm_listen_close,
	.connect = shm_connect,
	.send = shm_send,
	.progress = shm_progress,
	.close = shm_close,
	.fini = shm_fini,
};
