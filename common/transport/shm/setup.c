// SPDX-License-Identifier: MIT
/* Shared-memory transport: names and credentials, the listener, the
 * shared rings, connect and accept handshakes (see shm_internal.h). */
#include "shm_internal.h"

const uint64_t psd_shm_probe_word = SHM_MAGIC;
atomic_uint psd_shm_local_sync;
static atomic_bool shm_cma_warned;
static atomic_uint shm_port_seq;

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
 * Shared memory only reaches the local host: @addr must be empty, loopback or
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
				      "shm: %s is not a local address "
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

int psd_shm_listen(struct psd_listener *l, const struct psd_addr *addr)
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

void psd_shm_listen_close(struct psd_listener *l)
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

void psd_shm_cma_warn(pid_t pid, int err)
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
		psd_shm_cma_warn(sc->peer_pid, -EPERM);
	atomic_store(&sc->rx.ctl->cma_ok, ok);
}

/* The van's fd, an epoll set: readable when the socket has input or
 * hangs up and (once the rings are mapped, shm_poll_add_data()) when
 * data is posted. */
static int shm_poll_create(struct shm_conn *sc)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return psd_neg_errno();
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sc->sock, &ev)) {
		close(ep);
		return psd_neg_errno();
	}
	sc->base.fd = ep;
	return 0;
}

static int shm_poll_add_data(struct shm_conn *sc)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (epoll_ctl(sc->base.fd, EPOLL_CTL_ADD, sc->rx.data_fd, &ev))
		return psd_neg_errno();
	return 0;
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
			       .probe =
				       (uint64_t)(uintptr_t)&psd_shm_probe_word,
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

int psd_shm_connect(struct psd_conn *c, const struct psd_addr *addr,
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
		ret = shm_poll_create(sc);
	if (!ret)
		ret = shm_poll_add_data(sc);
	if (ret && ret != -ETIMEDOUT && ret != -ECONNREFUSED)
		psd_set_errmsg(ret, "shm handshake with port %u failed: %s",
			       addr->port, strerror(-ret));
	return ret; /* on error fini() releases what was set up */
}

/*
 * Acceptor, once the socket is readable: take the connector's memory and
 * eventfds, answer.  Until then the van polls the socket like any other
 * connection and serves the others: a peer that connects and stays
 * silent costs a slot of PS_MAX_PENDING_AUTH until PS_AUTH_TIMEOUT, as
 * on TCP, and never the I/O thread.
 */
int psd_shm_accept_finish(struct shm_conn *sc)
{
	struct shm_hello h;
	int fds[SHM_NFDS] = { -1, -1, -1, -1, -1 };
	int ret, n = SHM_NFDS, i;

	ret = shm_hello_recv(sc->sock, &h, fds, &n);
	if (ret == -EAGAIN && !n)
		return 0; /* not yet: the socket stays polled */
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
	if (!ret)
		ret = shm_poll_add_data(sc);
	if (ret)
		return ret == -EAGAIN ? -EPROTO : ret;
	shm_cma_setup(sc, h.probe);
	ret = shm_hello_send(sc->sock, NULL, 0);
	if (ret)
		return ret == -EAGAIN ? -EPROTO : ret;
	atomic_store(&sc->hello_wait, false);
	return 0;
}

/* Accept the socket and check the peer's uid; the hello is taken later,
 * from the van's loop (psd_shm_accept_finish()). */
int psd_shm_accept(struct psd_listener *l, struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);
	int fd, ret;

	fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : psd_neg_errno();
	shm_conn_init(sc);
	sc->sock = fd;
	sc->acceptor = pthread_self();
	atomic_store(&sc->hello_wait, true);
	ret = shm_peer_check(sc->sock, &sc->peer_pid);
	if (!ret)
		ret = shm_poll_create(sc);
	if (ret) {
		c->ops->fini(c);
		/* -EAGAIN would stop the van's accept loop: report another
		 * error; the van logs it, rate-limited. */
		return ret == -EAGAIN ? -EPROTO : ret;
	}
	snprintf(c->peer, sizeof(c->peer), "shm pid %d", (int)sc->peer_pid);
	return 0;
}

/* ---- host key ---------------------------------------------------------- */

int psd_shm_host_key(char *buf, size_t len)
{
	char boot[64] = "";
	struct stat st;
	size_t n;
	FILE *f;
	int ret;

	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return psd_set_errmsg(psd_neg_errno(),
				      "shm: cannot read "
				      "/proc/sys/kernel/random/boot_id");
	n = fread(boot, 1, sizeof(boot) - 1, f);
	fclose(f);
	boot[n] = 0;
	boot[strcspn(boot, "\n")] = 0;
	if (strlen(boot) < 16)
		return psd_set_errmsg(-EIO, "shm: bad boot id '%s'", boot);
	if (stat("/proc/self/ns/net", &st))
		return psd_set_errmsg(psd_neg_errno(),
				      "shm: cannot stat /proc/self/ns/net");
	ret = snprintf(buf, len, "%s/%llx:%llu/%u", boot,
		       (unsigned long long)st.st_dev,
		       (unsigned long long)st.st_ino, (unsigned)getuid());
	return ret > 0 && (size_t)ret < len ? 0 : -ENAMETOOLONG;
}
